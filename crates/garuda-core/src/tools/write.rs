//! How `edit_file` and `write_file` change a file: planned as its whole new text, then written
//! through fsroot or handed to the editor (its `workspace/applyEdit`, its ACP `fs/write_text_file`).

use std::path::Path;

use futures_util::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::handler::{Tool, Workbench};
use super::policy::target_risk;
use super::util;
use super::vocab::{
    Anchor, EditPreview, PlannedWrite, ReadState, Risk, ToolClass, ToolContext, ToolMeta,
    ToolOutput, Touch,
};
use crate::fsroot::{EntryKind, FileStamp, Root};
use crate::message::ToolSpec;

/// Largest file `edit_file` works on, in characters.
pub(crate) const EDIT_MAX_CHARS: usize = 8 * 1024 * 1024;

/// What one whole-file writing tool (`edit_file`, `write_file`) has of its own: its names,
/// spec, input and how it plans the new text. [`WholeFile`] makes it a [`Tool`], so both
/// are edits of the file in `path` that need a prior read, and plan, preview and run alike.
pub(crate) trait FileChange: Send + Sync + 'static {
    /// The tool's input.
    type Input: DeserializeOwned;
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// Claude Code's names for it.
    fn claude_names(&self) -> &'static [&'static str];
    /// What the model sees (bytes fixed).
    fn spec(&self) -> ToolSpec;
    /// A short account of a call's input.
    fn describe(&self, input: &Value) -> String;
    /// What a call would change, for an editor to draw before it runs.
    fn preview(&self, input: &Value, root: &Root) -> Option<EditPreview>;
    /// The write a call makes, or why it is refused.
    fn plan(&self, input: Self::Input, ctx: &ToolContext) -> Result<PlannedWrite, ToolOutput>;
}

/// A [`FileChange`] as a tool.
pub(crate) struct WholeFile<C>(pub(crate) C);

impl<C: FileChange> WholeFile<C> {
    fn planned(&self, input: Value, ctx: &ToolContext) -> Result<PlannedWrite, ToolOutput> {
        util::parse(self.0.name(), input).and_then(|i| self.0.plan(i, ctx))
    }
}

impl<C: FileChange> Tool for WholeFile<C> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn claude_names(&self) -> &'static [&'static str] {
        self.0.claude_names()
    }
    fn claude_file_path(&self) -> bool {
        true
    }
    fn spec(&self) -> ToolSpec {
        self.0.spec()
    }
    fn class(&self) -> ToolClass {
        ToolClass::Edit
    }
    fn path_arg(&self) -> Option<&'static str> {
        Some("path")
    }
    fn needs_read(&self) -> bool {
        true
    }
    fn touch(&self) -> Option<Touch> {
        Some(Touch::File("path"))
    }
    fn risk(&self, input: &Value, root: &Root) -> Option<Risk> {
        risk(input, root)
    }
    fn plan(&self, input: &Value, ctx: &ToolContext) -> Option<Result<PlannedWrite, ToolOutput>> {
        Some(self.planned(input.clone(), ctx))
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move { apply(self.planned(input, ctx), ctx, bench).await })
    }
    fn describe(&self, input: &Value) -> String {
        self.0.describe(input)
    }
    fn preview(&self, input: &Value, root: &Root) -> Option<EditPreview> {
        self.0.preview(input, root)
    }
}

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

/// The risk of a write to the file named in `input.path` (links resolved).
pub(crate) fn risk(input: &Value, root: &Root) -> Option<Risk> {
    let p = input.get("path")?.as_str()?;
    let rel = root.relative(Path::new(p)).ok()?;
    target_risk(root.path(), &rel).map(|(risk, why)| (rel, risk, why))
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
