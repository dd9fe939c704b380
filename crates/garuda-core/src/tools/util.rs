//! Helpers shared by the tools: input parsing, path resolution, error wording, output caps.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::vocab::{ToolContext, ToolOutput};
use crate::fsroot::{EntryKind, FsError};

/// Parses a tool's input object, turning serde's complaint into a message the model can act on.
pub(crate) fn parse<T: DeserializeOwned>(tool: &str, input: Value) -> Result<T, ToolOutput> {
    let input = if input.is_null() {
        Value::Object(Default::default())
    } else {
        input
    };
    serde_json::from_value(input)
        .map_err(|e| ToolOutput::error(format!("invalid input for {tool}: {e}")))
}

/// Accepts a number or a numeric string (models sometimes quote numbers).
pub(crate) fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum N {
        Num(u64),
        Float(f64),
        Str(String),
    }
    match Option::<N>::deserialize(d)? {
        None => Ok(None),
        Some(N::Num(n)) => Ok(Some(n)),
        Some(N::Float(f)) if f >= 0.0 && f.fract() == 0.0 => Ok(Some(f as u64)),
        Some(N::Float(f)) => Err(serde::de::Error::custom(format!(
            "expected a non-negative integer, got {f}"
        ))),
        Some(N::Str(s)) => s.trim().parse::<u64>().map(Some).map_err(|_| {
            serde::de::Error::custom(format!("expected a non-negative integer, got {s:?}"))
        }),
    }
}

/// Accepts a boolean or "true"/"false".
pub(crate) fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum B {
        Bool(bool),
        Str(String),
    }
    match Option::<B>::deserialize(d)? {
        None => Ok(false),
        Some(B::Bool(b)) => Ok(b),
        Some(B::Str(s)) => match s.trim() {
            "true" => Ok(true),
            "false" | "" => Ok(false),
            other => Err(serde::de::Error::custom(format!(
                "expected true or false, got {other:?}"
            ))),
        },
    }
}

/// Turns a model-given path into a root-relative one, or a tool error.
pub(crate) fn resolve(ctx: &ToolContext, path: &str) -> Result<PathBuf, ToolOutput> {
    let p = path.trim();
    let p = if p.is_empty() { "." } else { p };
    ctx.root.relative(Path::new(p)).map_err(|e| fs_error(p, e))
}

/// Wording of a file-system error for the model, naming the path as the model gave it.
pub(crate) fn fs_error(shown: &str, e: FsError) -> ToolOutput {
    let msg = match e {
        FsError::OutsideRoot(_) => format!(
            "path is outside the workspace root: {shown} (only files beneath the root can be \
             used; links leading out of it are not followed)"
        ),
        FsError::NotFound(_) => format!("no such file or folder: {shown}"),
        FsError::NotRegular { kind: "folder", .. } => {
            format!("{shown} is a folder, not a file; use list_files to see what it holds")
        }
        FsError::NotRegular { kind, .. } => format!("{shown}: not a regular file ({kind})"),
        FsError::PermissionDenied(_) => format!("{shown}: permission denied"),
        FsError::BadRoot { reason, .. } => format!("workspace root unusable: {reason}"),
        FsError::Io { source, .. } => format!("{shown}: {source}"),
    };
    ToolOutput::error(msg)
}

/// Display form of a root-relative path ("." for the root itself, `/` separators).
pub(crate) fn show(rel: &Path) -> String {
    let s = rel.to_string_lossy().replace('\\', "/");
    if s.is_empty() { ".".to_string() } else { s }
}

/// Where a walk (list_files, glob, grep) starts.
pub(crate) struct WalkStart {
    /// Root-relative path the model gave, resolved.
    pub rel: PathBuf,
    /// Its display form for messages.
    pub shown: String,
    /// The canonical absolute path, checked to lie beneath the root.
    pub base: PathBuf,
    /// File or folder.
    pub kind: EntryKind,
}

/// Resolves the path the model gave and canonicalizes it as the start of a walk, checked to
/// lie beneath the root, so that a link on the way cannot lead the walker out of the root.
pub(crate) fn walk_start(ctx: &ToolContext, given: &str) -> Result<WalkStart, ToolOutput> {
    let rel = resolve(ctx, given)?;
    let shown = show(&rel);
    let kind = match ctx.root.kind(&rel) {
        Ok(Some(k)) => k,
        Ok(None) => {
            return Err(ToolOutput::error(format!(
                "no such file or folder: {shown}"
            )));
        }
        Err(e) => return Err(fs_error(&shown, e)),
    };
    let root = ctx.root.path();
    let base = std::fs::canonicalize(root.join(&rel))
        .map_err(|e| ToolOutput::error(format!("{shown}: {e}")))?;
    if !base.starts_with(root) {
        return Err(fs_error(&shown, FsError::OutsideRoot(rel)));
    }
    Ok(WalkStart {
        rel,
        shown,
        base,
        kind,
    })
}

/// Root-relative display form of an absolute path found by a walk beneath the root.
pub(crate) fn rel_of(ctx: &ToolContext, abs: &Path) -> Option<PathBuf> {
    abs.strip_prefix(ctx.root.path())
        .ok()
        .map(Path::to_path_buf)
}

/// At most `max` characters of `s`, with an ellipsis when cut.
pub(crate) fn cut_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

/// Keeps the head and tail of text longer than `max` characters, noting what was left out.
/// Returns the text and whether it was cut.
pub(crate) fn cap_middle(s: &str, max: usize) -> (String, bool) {
    let total = s.chars().count();
    if total <= max {
        return (s.to_string(), false);
    }
    let head_n = max / 2;
    let tail_n = max - head_n;
    let head_end = s.char_indices().nth(head_n).map_or(s.len(), |(i, _)| i);
    let tail_start = s
        .char_indices()
        .nth(total - tail_n)
        .map_or(s.len(), |(i, _)| i);
    let omitted = s.len() - head_end - (s.len() - tail_start);
    let out = format!(
        "{}\n[… {omitted} bytes omitted …]\n{}",
        &s[..head_end],
        &s[tail_start..]
    );
    (out, true)
}

/// True when the first 8 KiB hold a NUL byte.
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8192)].contains(&0)
}
