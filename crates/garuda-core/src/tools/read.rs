//! `read_file`: line-numbered text of a workspace file, by line range, within a size cap.

use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::util::{self, lenient_u64};
use super::{Anchor, ReadMark, ToolContext, ToolMeta, ToolOutput};

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

/// Reads an absolute path inside the state folder (tool-result side files), if that is what
/// the model asked for.
fn read_state_file(input: &Input, ctx: &ToolContext) -> Option<ToolOutput> {
    let dir = ctx.state_dir.as_ref()?;
    let p = Path::new(input.path.trim());
    if !p.is_absolute() || p.starts_with(ctx.root.path()) {
        return None;
    }
    let dir = std::fs::canonicalize(dir).ok()?;
    let abs = std::fs::canonicalize(p).ok()?;
    if !abs.starts_with(&dir) || !abs.is_file() {
        return None;
    }
    let bytes = match std::fs::read(&abs) {
        Ok(b) => b,
        Err(e) => return Some(ToolOutput::error(format!("{}: {e}", input.path))),
    };
    let total = bytes.len() as u64;
    Some(render(&bytes, total, input, ctx, &input.path).0)
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
