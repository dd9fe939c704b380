//! Ignore-aware walks beneath the root that never follow links, shared by `list_files`,
//! `glob` and `grep`.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use ignore::DirEntry;

use crate::fsroot::walker;

use super::util;
use super::vocab::{ToolContext, ToolMeta, ToolOutput};

/// A glob over paths relative to the search folder; a pattern without `/` matches file names
/// at any depth, as in .gitignore.
pub(crate) fn compile_glob(pattern: &str) -> Result<GlobMatcher, String> {
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

/// The answer of a call the turn's cancellation stopped.
pub(crate) fn cancelled() -> ToolOutput {
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

/// The entries beneath `base` (to `max_depth`) that `mark` keeps, shown root-relative with
/// the mark it gives each (`""`, or a suffix like `/`), sorted and capped by [`finish`]; the
/// turn's cancellation stops the walk.
pub(crate) fn list_walk(
    ctx: &ToolContext,
    base: &Path,
    max_depth: Option<usize>,
    mut mark: impl FnMut(&DirEntry) -> Option<&'static str>,
    empty: &str,
    narrower: &str,
) -> ToolOutput {
    let mut entries: Vec<String> = Vec::new();
    let mut within = ctx.root.within();
    for item in walker(base, max_depth).build() {
        if ctx.cancel.is_cancelled() {
            return cancelled();
        }
        let Ok(entry) = item else { continue };
        let Some(suffix) = mark(&entry) else {
            continue;
        };
        let Some(r) = util::rel_of(ctx, entry.path()) else {
            continue;
        };
        if !within.contains(&r) {
            continue;
        }
        entries.push(util::show(&r) + suffix);
    }
    entries.sort();
    finish(entries, ctx, empty, narrower)
}

/// Root-relative paths of the files beneath `base` (already checked to lie in the root).
pub(crate) fn files_under(ctx: &ToolContext, base: &Path) -> Vec<PathBuf> {
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
