//! Root-confined file access: the only module that touches a workspace's files.
//!
//! SKELETON: signatures agreed between helpers; bodies are filled in by the fsroot work.

use std::path::{Path, PathBuf};

/// Errors of confined file access; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The root folder itself cannot be used.
    #[error("workspace root {path}: {reason}")]
    BadRoot {
        /// The path given.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
    /// No such file.
    #[error("{0}: no such file")]
    NotFound(PathBuf),
    /// The path, or a link on it, leads outside the workspace root.
    #[error("{0}: outside the workspace root")]
    OutsideRoot(PathBuf),
    /// A FIFO, socket, device or folder where a regular file was needed.
    #[error("{path}: not a regular file ({kind})")]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// The OS refused access.
    #[error("{0}: permission denied")]
    PermissionDenied(PathBuf),
    /// Any other IO failure.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Text read from a file, possibly cut to a budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextRead {
    /// The text, lossily decoded (invalid UTF-8 replaced), at most the requested characters.
    pub text: String,
    /// True when the file holds more than was returned.
    pub truncated: bool,
    /// Size of the file on disk in bytes.
    pub total_bytes: u64,
    /// True when invalid UTF-8 was replaced.
    pub lossy: bool,
}

/// What a path is, without following a link out of the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// Something else (FIFO, socket, device).
    Other,
}

/// A workspace root opened as a capability: every access is resolved beneath it.
#[derive(Debug)]
pub struct Root {
    path: PathBuf,
}

impl Root {
    /// Canonicalizes `path` and opens it; errors when it is missing, not a folder, or unreadable.
    pub fn open(path: &Path) -> Result<Root, FsError> {
        let _ = path;
        todo!("fsroot")
    }

    /// The canonical root path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Turns a model- or client-given path (absolute inside the root, or relative) into a
    /// root-relative path; `..` that escapes and absolute paths elsewhere are `OutsideRoot`.
    pub fn relative(&self, p: &Path) -> Result<PathBuf, FsError> {
        let _ = p;
        todo!("fsroot")
    }

    /// Reads at most `max_chars` characters of a regular file beneath the root (never more
    /// than 4 × max_chars + 4 bytes from disk). Links inside the root are followed.
    pub fn read_text(&self, rel: &Path, max_chars: usize) -> Result<TextRead, FsError> {
        let _ = (rel, max_chars);
        todo!("fsroot")
    }

    /// Reads at most `max_bytes` bytes of a regular file beneath the root; returns the bytes
    /// and the file's total size.
    pub fn read_bytes(&self, rel: &Path, max_bytes: u64) -> Result<(Vec<u8>, u64), FsError> {
        let _ = (rel, max_bytes);
        todo!("fsroot")
    }

    /// The kind of entry at `rel`, resolved beneath the root; `Ok(None)` when absent.
    pub fn kind(&self, rel: &Path) -> Result<Option<EntryKind>, FsError> {
        let _ = rel;
        todo!("fsroot")
    }

    /// Writes a whole file beneath the root (parents created), replacing it atomically.
    pub fn write(&self, rel: &Path, data: &[u8]) -> Result<(), FsError> {
        let _ = (rel, data);
        todo!("fsroot")
    }

    /// Appends to a file beneath the root, creating it and its parents when absent.
    pub fn append(&self, rel: &Path, data: &[u8]) -> Result<(), FsError> {
        let _ = (rel, data);
        todo!("fsroot")
    }

    /// Modification time and size of a regular file, for "changed on disk since read" checks.
    pub fn stamp(&self, rel: &Path) -> Result<FileStamp, FsError> {
        let _ = rel;
        todo!("fsroot")
    }
}

/// A file's identity at one moment: size and modification time in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileStamp {
    /// Size in bytes.
    pub len: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
}
