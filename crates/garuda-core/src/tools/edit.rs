//! `edit_file` and `write_file`: planned as a full new text, then committed through fsroot
//! (or routed by the caller through the editor's `workspace/applyEdit`).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::util::{self, lenient_bool};
use super::{ReadState, ToolContext, ToolMeta, ToolOutput};
use crate::fsroot::{EntryKind, FileStamp};

/// Largest file `edit_file` works on, in characters.
const EDIT_MAX_CHARS: usize = 8 * 1024 * 1024;

/// A computed write: the whole new text of one file, not yet written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedWrite {
    /// Root-relative path of the file.
    pub rel_path: PathBuf,
    /// The file's text before the write; `None` when the file is new.
    pub old_text: Option<String>,
    /// The file's text after the write.
    pub new_text: String,
    /// The file's stamp when the plan was made; the write is refused if it changed since.
    pub base: Option<FileStamp>,
    /// One line for the model describing what the write does.
    pub summary: String,
}

#[derive(Deserialize)]
struct EditInput {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default, deserialize_with = "lenient_bool")]
    replace_all: bool,
}

#[derive(Deserialize)]
struct WriteInput {
    path: String,
    content: String,
}

/// What an `edit_file` or `write_file` call would change, for an editor to draw before it
/// runs (ACP diff content and locations). Best effort: no freshness check, and `None` when
/// the call would fail or the tool is not an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditPreview {
    /// Root-relative path of the file.
    pub rel_path: PathBuf,
    /// The whole text before; `None` for a new file.
    pub old_text: Option<String>,
    /// The whole text after.
    pub new_text: String,
    /// 1-based line where the change starts.
    pub line: u32,
}

/// The [`EditPreview`] of a call, reading the file through `root` (so confined to it).
pub fn preview_edit(name: &str, input: &Value, root: &crate::fsroot::Root) -> Option<EditPreview> {
    let current = |rel: &Path| -> Option<Option<String>> {
        match root.kind(rel) {
            Ok(None) => Some(None),
            Ok(Some(EntryKind::File)) => {
                let r = root.read_text(rel, EDIT_MAX_CHARS).ok()?;
                (!r.truncated).then_some(Some(r.text))
            }
            _ => None,
        }
    };
    match name {
        "edit_file" => {
            let i: EditInput = serde_json::from_value(input.clone()).ok()?;
            if i.old_string.is_empty() {
                return None;
            }
            let rel = root.relative(Path::new(i.path.trim())).ok()?;
            let text = current(&rel)??;
            let at = text.find(i.old_string.as_str())?;
            let new_text = if i.replace_all {
                text.replace(&i.old_string, &i.new_string)
            } else {
                text.replacen(&i.old_string, &i.new_string, 1)
            };
            let line = text[..at].matches('\n').count() as u32 + 1;
            Some(EditPreview {
                rel_path: rel,
                old_text: Some(text),
                new_text,
                line,
            })
        }
        "write_file" => {
            let i: WriteInput = serde_json::from_value(input.clone()).ok()?;
            let rel = root.relative(Path::new(i.path.trim())).ok()?;
            let old_text = current(&rel)?;
            Some(EditPreview {
                rel_path: rel,
                old_text,
                new_text: i.content,
                line: 1,
            })
        }
        _ => None,
    }
}

/// The 1-based line a read-class call starts at, when its input names one.
pub fn call_line(name: &str, input: &Value) -> Option<u32> {
    match name {
        "read_file" => input
            .get("offset")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
        _ => None,
    }
}

/// Computes the new text of an `edit_file` or `write_file` call without writing anything.
pub fn plan_edit(name: &str, input: &Value, ctx: &ToolContext) -> Result<PlannedWrite, ToolOutput> {
    match name {
        "edit_file" => plan_replace(util::parse("edit_file", input.clone())?, ctx),
        "write_file" => plan_write(util::parse("write_file", input.clone())?, ctx),
        _ => Err(ToolOutput::error(format!(
            "{name} is not a file-writing tool"
        ))),
    }
}

/// Refuses unless the model read the file in this session and it has not changed since.
/// Returns the current stamp.
fn check_fresh(
    ctx: &ToolContext,
    rel: &Path,
    shown: &str,
    verb: &str,
) -> Result<FileStamp, ToolOutput> {
    let current = ctx.root.stamp(rel).map_err(|e| util::fs_error(shown, e))?;
    match ctx.tracker().state(rel, current) {
        ReadState::Fresh => Ok(current),
        ReadState::NotRead => Err(ToolOutput::error(format!(
            "{shown} has not been read in this session; call read_file on it before you {verb} it"
        ))),
        ReadState::Stale => Err(ToolOutput::error(format!(
            "{shown}: file changed on disk since you read it; read it again before you {verb} it"
        ))),
    }
}

/// The whole text of a file for editing; refuses files too large or not valid UTF-8.
fn whole_text(ctx: &ToolContext, rel: &Path, shown: &str) -> Result<String, ToolOutput> {
    let r = ctx
        .root
        .read_text(rel, EDIT_MAX_CHARS)
        .map_err(|e| util::fs_error(shown, e))?;
    if r.truncated {
        return Err(ToolOutput::error(format!(
            "{shown} is too large to edit with this tool ({} bytes); use bash",
            r.total_bytes
        )));
    }
    if r.lossy || r.text.contains('\0') {
        return Err(ToolOutput::error(format!(
            "{shown} is not UTF-8 text; editing it here would corrupt it"
        )));
    }
    Ok(r.text)
}

fn plan_replace(input: EditInput, ctx: &ToolContext) -> Result<PlannedWrite, ToolOutput> {
    let rel = util::resolve(ctx, &input.path)?;
    let shown = util::show(&rel);
    if input.old_string.is_empty() {
        return Err(ToolOutput::error(
            "old_string is empty; to create or replace a whole file use write_file",
        ));
    }
    if input.old_string == input.new_string {
        return Err(ToolOutput::error(
            "old_string and new_string are identical; nothing to change",
        ));
    }
    let stamp = check_fresh(ctx, &rel, &shown, "edit")?;
    let text = whole_text(ctx, &rel, &shown)?;
    let (mut old, mut new) = (input.old_string, input.new_string);
    let mut count = text.matches(old.as_str()).count();
    // A file with CRLF line ends still matches text the model wrote with LF.
    if count == 0 && text.contains("\r\n") && old.contains('\n') && !old.contains('\r') {
        let crlf_old = old.replace('\n', "\r\n");
        let c = text.matches(crlf_old.as_str()).count();
        if c > 0 {
            old = crlf_old;
            new = new.replace("\r\n", "\n").replace('\n', "\r\n");
            count = c;
        }
    }
    if count == 0 {
        return Err(ToolOutput::error(format!(
            "old_string was not found in {shown}; it must match the file exactly, including \
             whitespace and indentation (read the file again if unsure)"
        )));
    }
    if count > 1 && !input.replace_all {
        return Err(ToolOutput::error(format!(
            "old_string occurs {count} times in {shown}; add surrounding lines to make it unique, \
             or set replace_all to true to replace every occurrence"
        )));
    }
    let new_text = if input.replace_all {
        text.replace(&old, &new)
    } else {
        text.replacen(&old, &new, 1)
    };
    // Where the first replacement landed, for a snippet the model can check.
    let at = text.find(old.as_str()).unwrap_or(0);
    let n = if input.replace_all { count } else { 1 };
    let s = if n == 1 { "" } else { "s" };
    let summary = format!(
        "edited {shown}: {n} replacement{s}\n{}",
        snippet(&new_text, at, &new)
    );
    Ok(PlannedWrite {
        rel_path: rel,
        old_text: Some(text),
        new_text,
        base: Some(stamp),
        summary,
    })
}

fn plan_write(input: WriteInput, ctx: &ToolContext) -> Result<PlannedWrite, ToolOutput> {
    let rel = util::resolve(ctx, &input.path)?;
    let shown = util::show(&rel);
    if rel == Path::new(".") {
        return Err(ToolOutput::error(
            "write_file needs a file path, not the workspace root",
        ));
    }
    match ctx.root.kind(&rel).map_err(|e| util::fs_error(&shown, e))? {
        None => Ok(PlannedWrite {
            rel_path: rel,
            old_text: None,
            summary: format!("created {shown} ({} bytes)", input.content.len()),
            new_text: input.content,
            base: None,
        }),
        Some(EntryKind::File) => {
            let stamp = check_fresh(ctx, &rel, &shown, "overwrite")?;
            let old = ctx
                .root
                .read_text(&rel, EDIT_MAX_CHARS)
                .map(|r| r.text)
                .map_err(|e| util::fs_error(&shown, e))?;
            Ok(PlannedWrite {
                rel_path: rel,
                old_text: Some(old),
                summary: format!("wrote {shown} ({} bytes)", input.content.len()),
                new_text: input.content,
                base: Some(stamp),
            })
        }
        Some(EntryKind::Dir) => Err(ToolOutput::error(format!("{shown} is a folder"))),
        Some(EntryKind::Other) => Err(ToolOutput::error(format!("{shown} is not a regular file"))),
    }
}

/// The lines around a replacement at byte `at` of `text`, numbered like `read_file`.
fn snippet(text: &str, at: usize, inserted: &str) -> String {
    const AROUND: usize = 2;
    const MAX_LINES: usize = 30;
    let first = text[..at].matches('\n').count();
    let last = first + inserted.trim_end_matches('\n').matches('\n').count();
    let from = first.saturating_sub(AROUND);
    let to = (last + AROUND).min(from + MAX_LINES - 1);
    let mut out = String::new();
    for (i, line) in text.lines().enumerate().skip(from).take(to + 1 - from) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        out.push_str(&format!("{:>6}\t{}\n", i + 1, util::cut_chars(line, 400)));
    }
    out
}

/// Writes a planned change through fsroot, refusing if the file changed since the plan, and
/// records the new stamp so the model may edit the file again without re-reading it.
pub fn commit_write(plan: &PlannedWrite, ctx: &ToolContext) -> ToolOutput {
    let shown = util::show(&plan.rel_path);
    let current = match ctx.root.kind(&plan.rel_path) {
        Ok(Some(_)) => ctx.root.stamp(&plan.rel_path).ok(),
        Ok(None) => None,
        Err(e) => return util::fs_error(&shown, e),
    };
    if current != plan.base {
        return ToolOutput::error(format!(
            "{shown}: file changed on disk since you read it; read it again"
        ));
    }
    if let Err(e) = ctx.root.write(&plan.rel_path, plan.new_text.as_bytes()) {
        return util::fs_error(&shown, e);
    }
    finish_write(plan, ctx)
}

/// After the new text landed (through fsroot or the editor's applyEdit): records the file's
/// new stamp as read and builds the tool result.
pub fn finish_write(plan: &PlannedWrite, ctx: &ToolContext) -> ToolOutput {
    let shown = util::show(&plan.rel_path);
    if let Ok(stamp) = ctx.root.stamp(&plan.rel_path) {
        let anchor = ctx.call_id.clone().map(super::Anchor::Call);
        ctx.tracker().record_at(&plan.rel_path, stamp, anchor);
    }
    let meta = ToolMeta {
        path: Some(shown),
        wrote: true,
        ..ToolMeta::default()
    };
    ToolOutput::ok(plan.summary.clone()).with_meta(meta)
}
