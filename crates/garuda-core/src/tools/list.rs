//! `list_files` and `glob`: ignore-aware walks beneath the root that never follow links.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkBuilder;
use serde::Deserialize;
use serde_json::Value;

use super::util::{self, lenient_u64};
use super::{ToolContext, ToolMeta, ToolOutput};
use crate::fsroot::EntryKind;

/// Deepest `list_files` walk the model may ask for.
const MAX_DEPTH: u64 = 20;

/// A walker over `base` that honours .gitignore, .ignore and git excludes (even outside a git
/// repository), shows hidden files but never descends into `.git`, and never follows links.
pub(super) fn walker(base: &Path, max_depth: Option<usize>) -> WalkBuilder {
    let mut b = WalkBuilder::new(base);
    b.follow_links(false)
        .hidden(false)
        .require_git(false)
        .max_depth(max_depth)
        .filter_entry(|e| e.file_name() != ".git");
    b
}

#[derive(Deserialize)]
struct ListInput {
    #[serde(default)]
    path: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    depth: Option<u64>,
}

pub(super) fn run_list(input: Value, ctx: &ToolContext) -> ToolOutput {
    let input: ListInput = match util::parse("list_files", input) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let given = input.path.unwrap_or_default();
    let util::WalkStart {
        shown, base, kind, ..
    } = match util::walk_start(ctx, &given) {
        Ok(w) => w,
        Err(e) => return e,
    };
    if kind != EntryKind::Dir {
        return ToolOutput::error(format!(
            "{shown} is not a folder; use read_file to read a file"
        ));
    }
    let depth = input.depth.unwrap_or(2).clamp(1, MAX_DEPTH) as usize;
    let mut entries: Vec<String> = Vec::new();
    let mut within = ctx.root.within();
    for item in walker(&base, Some(depth)).build() {
        if ctx.cancel.is_cancelled() {
            return cancelled();
        }
        let Ok(entry) = item else { continue };
        if entry.depth() == 0 {
            continue;
        }
        let Some(r) = util::rel_of(ctx, entry.path()) else {
            continue;
        };
        if !within.contains(&r) {
            continue;
        }
        let mut s = util::show(&r);
        match entry.file_type() {
            Some(t) if t.is_dir() => s.push('/'),
            Some(t) if t.is_symlink() => s.push('@'),
            _ => {}
        }
        entries.push(s);
    }
    entries.sort();
    finish(
        entries,
        ctx,
        &format!("{shown} is empty (or every entry in it is ignored)"),
        "list_files with a deeper path or smaller depth",
    )
}

#[derive(Deserialize)]
struct GlobInput {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

/// A glob over paths relative to the search folder; a pattern without `/` matches file names
/// at any depth, as in .gitignore.
pub(super) fn compile_glob(pattern: &str) -> Result<GlobMatcher, String> {
    let p = pattern.trim().trim_start_matches("./");
    let p = if p.contains('/') {
        p.to_string()
    } else {
        format!("**/{p}")
    };
    GlobBuilder::new(&p)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("invalid glob pattern {pattern:?}: {e}"))
}

pub(super) fn run_glob(input: Value, ctx: &ToolContext) -> ToolOutput {
    let input: GlobInput = match util::parse("glob", input) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let matcher = match compile_glob(&input.pattern) {
        Ok(m) => m,
        Err(e) => return ToolOutput::error(e),
    };
    let given = input.path.unwrap_or_default();
    let util::WalkStart {
        shown, base, kind, ..
    } = match util::walk_start(ctx, &given) {
        Ok(w) => w,
        Err(e) => return e,
    };
    if kind != EntryKind::Dir {
        return ToolOutput::error(format!("{shown} is not a folder"));
    }
    let mut entries: Vec<String> = Vec::new();
    let mut within = ctx.root.within();
    for item in walker(&base, None).build() {
        if ctx.cancel.is_cancelled() {
            return cancelled();
        }
        let Ok(entry) = item else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(under) = entry.path().strip_prefix(&base) else {
            continue;
        };
        if !matcher.is_match(under) {
            continue;
        }
        let Some(r) = util::rel_of(ctx, entry.path()) else {
            continue;
        };
        if !within.contains(&r) {
            continue;
        }
        entries.push(util::show(&r));
    }
    entries.sort();
    finish(
        entries,
        ctx,
        &format!("no files match {:?} in {shown}", input.pattern),
        "a narrower pattern or path",
    )
}

fn cancelled() -> ToolOutput {
    let mut out = ToolOutput::error("cancelled");
    out.meta.cancelled = true;
    out
}

/// Joins sorted entries, capped by count and characters, with a note when cut.
fn finish(entries: Vec<String>, ctx: &ToolContext, empty: &str, narrower: &str) -> ToolOutput {
    if entries.is_empty() {
        return ToolOutput::ok(empty.to_string());
    }
    let total = entries.len();
    let mut out = String::new();
    let mut shown = 0;
    for e in &entries {
        if shown >= ctx.limits.max_results || out.len() + e.len() + 1 > ctx.limits.output_max_chars
        {
            break;
        }
        out.push_str(e);
        out.push('\n');
        shown += 1;
    }
    let mut meta = ToolMeta::default();
    if shown < total {
        meta.truncated = true;
        out.push_str(&format!(
            "[{shown} of {total} entries shown; use {narrower} to see the rest]"
        ));
    }
    ToolOutput::ok(out).with_meta(meta)
}

/// Root-relative paths of the files beneath `base` (already checked to lie in the root).
pub(super) fn files_under(ctx: &ToolContext, base: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    let mut within = ctx.root.within();
    for item in walker(base, None).build() {
        if ctx.cancel.is_cancelled() {
            break;
        }
        let Ok(entry) = item else { continue };
        if entry.file_type().is_some_and(|t| t.is_file())
            && let Some(r) = util::rel_of(ctx, entry.path())
            && within.contains(&r)
        {
            v.push(r);
        }
    }
    v.sort();
    v
}
