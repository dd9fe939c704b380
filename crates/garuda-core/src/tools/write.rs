//! How `edit_file` and `write_file` change a file: planned as its whole new text, then written
//! through fsroot or handed to the editor (its `workspace/applyEdit`, its ACP `fs/write_text_file`).

use std::path::Path;

use serde_json::Value;

use super::handler::Workbench;
use super::policy::risky_target;
use super::util;
use super::vocab::{Anchor, PlannedWrite, ReadState, Risk, ToolContext, ToolMeta, ToolOutput};
use crate::fsroot::{EntryKind, FileStamp, Root};

/// Largest file `edit_file` works on, in characters.
pub(crate) const EDIT_MAX_CHARS: usize = 8 * 1024 * 1024;

/// Refuses unless the model read the file in this session and it has not changed since.
/// Returns the current stamp.
pub(crate) fn check_fresh(
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
pub(crate) fn whole_text(ctx: &ToolContext, rel: &Path, shown: &str) -> Result<String, ToolOutput> {
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

/// The lines around a replacement at byte `at` of `text`, numbered like `read_file`.
pub(crate) fn snippet(text: &str, at: usize, inserted: &str) -> String {
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
        let anchor = ctx.call_id.clone().map(Anchor::Call);
        ctx.tracker().record_at(&plan.rel_path, stamp, anchor);
    }
    let meta = ToolMeta {
        path: Some(shown),
        wrote: true,
        ..ToolMeta::default()
    };
    ToolOutput::ok(plan.summary.clone()).with_meta(meta)
}

/// The text of `rel` for a preview: `Some(None)` when the file does not exist yet, `None` when
/// it cannot be previewed (not a file, too large, outside the root).
pub(crate) fn current_text(root: &Root, rel: &Path) -> Option<Option<String>> {
    match root.kind(rel) {
        Ok(None) => Some(None),
        Ok(Some(EntryKind::File)) => {
            let r = root.read_text(rel, EDIT_MAX_CHARS).ok()?;
            (!r.truncated).then_some(Some(r.text))
        }
        _ => None,
    }
}

/// The risky target of a write to the file named in `input.path` (links resolved).
pub(crate) fn risk(input: &Value, root: &Root) -> Option<Risk> {
    let p = input.get("path")?.as_str()?;
    let rel = root.relative(Path::new(p)).ok()?;
    risky_target(root.path(), &rel).map(|why| (rel, why))
}

/// Writes a planned change: through the editor where it edits buffers, otherwise through
/// fsroot. An editor buffer with unsaved changes would be overwritten with text planned from
/// the file on disk, so the write is refused instead of losing the user's changes.
pub(crate) async fn apply(
    plan: Result<PlannedWrite, ToolOutput>,
    ctx: &ToolContext,
    bench: &dyn Workbench,
) -> ToolOutput {
    let plan = match plan {
        Ok(p) => p,
        Err(refusal) => return refusal,
    };
    let abs = ctx.root.path().join(&plan.rel_path);
    if let (Some(old), Some(read)) = (&plan.old_text, bench.read_text(abs.clone()))
        && let Ok(buffer) = read.await
        && buffer != *old
    {
        return ToolOutput::error(format!(
            "{} has unsaved changes in the editor, so the edit was not made (it would \
             overwrite them). Ask the user to save or discard them, then read the file again.",
            plan.rel_path.display()
        ));
    }
    if let Some(applied) = bench.apply_edit(abs, plan.old_text.clone(), plan.new_text.clone()) {
        return match applied.await {
            Ok(()) => finish_write(&plan, ctx),
            Err(e) => ToolOutput::error(format!("the editor did not apply the edit: {e}")),
        };
    }
    commit_write(&plan, ctx)
}
