//! `read_file`: line-numbered text of a workspace file, by line range, within a size cap.

use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::message::ToolSpec;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::util::{self, lenient_u64};
use crate::tools::vocab::{Anchor, ReadMark, ToolClass, ToolContext, ToolMeta, ToolOutput, Touch};
use futures_util::future::BoxFuture;

/// Most bytes read from disk to find a line range; lines beyond are reachable with `bash`.
const SCAN_CAP: u64 = 32 * 1024 * 1024;
/// Longest line shown in full.
const MAX_LINE_CHARS: usize = 2000;

#[derive(Deserialize)]
struct Input {
    path: String,
    #[serde(default, deserialize_with = "lenient_u64")]
    offset: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    limit: Option<u64>,
}

pub(super) fn run(input: Value, ctx: &ToolContext) -> ToolOutput {
    let input: Input = match util::parse("read_file", input) {
        Ok(i) => i,
        Err(e) => return e,
    };
    if let Some(out) = read_state_file(&input, ctx) {
        return out;
    }
    let rel = match util::resolve(ctx, &input.path) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let shown = util::show(&rel);
    // Stamp first: if the file changes while we read, the recorded stamp is already stale
    // and a later edit is refused rather than applied to text the model never saw.
    let stamp = match ctx.root.stamp(&rel) {
        Ok(s) => s,
        Err(e) => return util::fs_error(&shown, e),
    };
    // An unchanged file whose earlier read is still in the view is not sent again (the
    // turn layer drops marks whose content left the view before the tools run).
    let earlier = ctx
        .tracker()
        .unchanged_read(&rel, input.offset, input.limit, stamp)
        .map(|m| m.anchor.clone());
    if let Some(anchor) = earlier {
        let out = ToolOutput::ok(unchanged_stub(&shown, &anchor));
        return out.with_meta(ToolMeta {
            path: Some(shown),
            ..ToolMeta::default()
        });
    }
    let (bytes, total) = match ctx.root.read_bytes(&rel, SCAN_CAP) {
        Ok(r) => r,
        Err(e) => return util::fs_error(&shown, e),
    };
    if util::looks_binary(&bytes) {
        return ToolOutput::error(format!("{shown}: binary file, {total} bytes; not shown"));
    }
    let (mut out, whole) = render(&bytes, total, &input, ctx, &shown);
    {
        let mut tracker = ctx.tracker();
        match &ctx.call_id {
            Some(id) if !out.is_error => tracker.record_read(
                &rel,
                ReadMark {
                    offset: input.offset,
                    limit: input.limit,
                    whole,
                    stamp,
                    anchor: Anchor::Result(id.clone()),
                },
            ),
            _ => tracker.record(&rel, stamp),
        }
    }
    out.meta.path = Some(shown);
    out
}

/// What a read answers when its content is already in the view, unchanged on disk.
fn unchanged_stub(shown: &str, anchor: &Anchor) -> String {
    let place = match anchor {
        Anchor::Result(id) => format!("the result of your earlier read_file call {id}"),
        Anchor::Message(_) => "the copy restored after the compaction".to_string(),
        Anchor::Call(id) => format!("your earlier call {id}"),
    };
    format!(
        "{shown} is unchanged since you read it; its content is still in this conversation, in \
         {place}. Use that; read again only for a different range, or if that content is no \
         longer in the conversation."
    )
}

/// Reads an absolute path outside the root that the session may read: inside the state
/// folder (tool-result side files) or a loaded skill's folder, if that is what the model asked
/// for.
fn read_state_file(input: &Input, ctx: &ToolContext) -> Option<ToolOutput> {
    let p = Path::new(input.path.trim());
    if !p.is_absolute() || p.starts_with(ctx.root.path()) {
        return None;
    }
    if let Some(out) = read_skill_file(p, input, ctx) {
        return Some(out);
    }
    let dir = ctx.state_dir.as_ref()?;
    let dir = std::fs::canonicalize(dir).ok()?;
    let abs = std::fs::canonicalize(p).ok()?;
    if !abs.starts_with(&dir) || !abs.is_file() {
        return None;
    }
    // Read the way a workspace file is: non-blocking, regular files only, at most the scan
    // cap (the path was checked above, but what it is may change before the open).
    let (bytes, total) = match crate::fsroot::read_regular(&abs, SCAN_CAP) {
        Ok(r) => r,
        Err(e) => return Some(util::fs_error(&input.path, e)),
    };
    Some(render(&bytes, total, input, ctx, &input.path).0)
}

/// A file beneath a loaded skill's folder, read through a root at that folder (so a link
/// cannot lead out of it).
fn read_skill_file(p: &Path, input: &Input, ctx: &ToolContext) -> Option<ToolOutput> {
    let folders = ctx
        .readable
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let folder = folders.iter().find(|f| p.starts_with(f))?;
    let rel = p.strip_prefix(folder).ok()?;
    let root = match crate::fsroot::Root::open(folder) {
        Ok(r) => r,
        Err(e) => return Some(util::fs_error(&input.path, e)),
    };
    match root.read_bytes(rel, SCAN_CAP) {
        Ok((bytes, total)) => Some(render(&bytes, total, input, ctx, &input.path).0),
        Err(e) => Some(util::fs_error(&input.path, e)),
    }
}

/// Formats the requested lines like `cat -n`, within the line and byte caps; also says
/// whether the answer holds the whole file.
fn render(
    bytes: &[u8],
    total: u64,
    input: &Input,
    ctx: &ToolContext,
    shown: &str,
) -> (ToolOutput, bool) {
    let text = String::from_utf8_lossy(bytes);
    let scanned_all = (bytes.len() as u64) >= total;
    if text.is_empty() {
        return (ToolOutput::ok(format!("{shown}: empty file")), true);
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let n_lines = lines.len();
    let first = input.offset.unwrap_or(1).max(1) as usize;
    let max_lines = ctx.limits.read_max_lines.max(1);
    let want = input
        .limit
        .map_or(max_lines, |l| (l as usize).clamp(1, max_lines));
    if first > n_lines {
        let more = if scanned_all {
            ""
        } else {
            " read so far (the file is larger; use bash to reach further)"
        };
        return (
            ToolOutput::error(format!(
                "{shown}: offset {first} is past the end of the file ({n_lines} lines{more})"
            )),
            false,
        );
    }
    let mut out = String::new();
    let mut last = first - 1;
    let mut cut_by_bytes = false;
    for (i, line) in lines.iter().enumerate().skip(first - 1).take(want) {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = if line.chars().count() > MAX_LINE_CHARS {
            format!(
                "{} [line cut at {MAX_LINE_CHARS} characters]",
                util::cut_chars(line, MAX_LINE_CHARS)
            )
        } else {
            line.to_string()
        };
        if out.len() + line.len() + 8 > ctx.limits.read_max_bytes && i + 1 > first {
            cut_by_bytes = true;
            break;
        }
        let _ = writeln!(out, "{:>6}\t{line}", i + 1);
        last = i + 1;
    }
    let mut meta = ToolMeta::default();
    let more_after = last < n_lines || !scanned_all;
    if more_after {
        meta.truncated = cut_by_bytes || input.limit.is_none();
        let of = if scanned_all {
            format!("{n_lines}")
        } else {
            format!("more than {n_lines}")
        };
        let why = if cut_by_bytes {
            " (size cap reached)"
        } else {
            ""
        };
        let _ = write!(
            out,
            "[showing lines {first}-{last} of {of}{why}; call read_file with offset={} to read more]",
            last + 1
        );
    }
    if text.contains('\u{FFFD}') && !bytes.is_empty() && std::str::from_utf8(bytes).is_err() {
        out.push_str("\n[note: invalid UTF-8 was replaced with U+FFFD]");
    }
    let whole = first == 1 && !more_after;
    (ToolOutput::ok(out).with_meta(meta), whole)
}

/// `read_file`: one file's text, with the editor's unsaved changes beside it.
pub(super) struct ReadFile;

impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["Read"]
    }
    fn claude_file_path(&self) -> bool {
        true
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            "read_file",
            "Read a text file in the workspace. Output is line-numbered like `cat -n` \
             (number, tab, line). Reads up to 2000 lines from `offset` (1-based, default 1); \
             a note at the end says how to read further. Binary files are refused. You must \
             read a file in this session before editing or overwriting it. Paths are relative \
             to the workspace root (absolute paths inside it work too).",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace root."},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to read, 1-based. Default 1."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Most lines to return. Default and maximum 2000."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        ToolClass::Read
    }
    fn path_arg(&self) -> Option<&'static str> {
        Some("path")
    }
    fn touch(&self) -> Option<Touch> {
        Some(Touch::File("path"))
    }
    fn describe(&self, input: &Value) -> String {
        handler::path_or_root(input)
    }
    fn line(&self, input: &Value) -> Option<u32> {
        input
            .get("offset")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let path = input
                .get("path")
                .and_then(Value::as_str)
                .map(str::to_string);
            let out = handler::blocking("read_file", input, ctx, run).await;
            match path {
                Some(path) if !out.is_error => with_unsaved_changes(bench, ctx, &path, out).await,
                _ => out,
            }
        })
    }
}

/// A read of a file the editor holds with unsaved changes: the model also gets the buffer's
/// text (the read went through Garuda's checks first; only its text differs).
async fn with_unsaved_changes(
    bench: &dyn Workbench,
    ctx: &ToolContext,
    path: &str,
    out: ToolOutput,
) -> ToolOutput {
    let Ok(rel) = ctx.root.relative(Path::new(path)) else {
        return out;
    };
    let Some(read) = bench.read_text(ctx.root.path().join(&rel)) else {
        return out;
    };
    let buffer = match read.await {
        Ok(b) => b,
        Err(e) => {
            tracing::debug!("fs/read_text_file {path}: {e}; the file on disk stands");
            return out;
        }
    };
    let max = ctx.limits.read_max_bytes;
    let Ok(disk) = ctx.root.read_text(&rel, max) else {
        return out;
    };
    if disk.text == buffer {
        return out;
    }
    let shown: String = buffer.chars().take(max).collect();
    let numbered: String = shown
        .lines()
        .enumerate()
        .map(|(i, l)| format!("{:>6}\t{l}\n", i + 1))
        .collect();
    let mut out = out;
    out.content = format!(
        "{}\n\n<garuda_note>The editor has unsaved changes in {path}; its buffer reads (edits of \
         this file are refused until the buffer is saved):\n{numbered}</garuda_note>",
        out.content
    );
    out
}
