//! Root-confined file access: the only module that touches a workspace's files.
//!
//! Every path is resolved by the kernel beneath the root's directory descriptor
//! (`openat2` with `RESOLVE_BENEATH`, or cap-std where `openat2` is missing), so there is
//! no window between checking a path and opening it. Files are opened non-blocking and
//! checked with `fstat` on the opened descriptor, so a FIFO or device never hangs a reader.

mod open;
#[cfg(test)]
mod tests;

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use open::{Beneath, map_err};

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

/// One entry of a folder listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name.
    pub name: String,
    /// Its kind; a link is reported as what it points to, `Other` when that is outside the
    /// root or dangling.
    pub kind: EntryKind,
}

/// A workspace root opened as a capability: every access is resolved beneath it.
#[derive(Debug)]
pub struct Root {
    path: PathBuf,
    fd: OwnedFd,
    beneath: Beneath,
}

/// How a file is opened to be read: non-blocking, so opening a FIFO (or a device that would
/// wait) returns at once and `fstat` can refuse it.
const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// Reads at most `max_bytes` bytes of a file the user named (a path of the user's config or
/// the command line, not confined to a workspace): opened the way a workspace file is
/// (non-blocking, regular files only, so `/dev/stdin`, a FIFO, `/dev/zero` or a folder is an
/// error, never a hang); returns the bytes and the file's total size.
pub fn read_regular(path: &Path, max_bytes: u64) -> Result<(Vec<u8>, u64), FsError> {
    let fd =
        rustix::fs::open(path, READ_FLAGS, Mode::empty()).map_err(|e| map_err(path, e.into()))?;
    read_regular_fd(fd, path, max_bytes)
}

/// Reads at most `max_bytes` of the regular file open on `fd` (`shown` names it in errors);
/// the bytes and the file's total size.
fn read_regular_fd(fd: OwnedFd, shown: &Path, max_bytes: u64) -> Result<(Vec<u8>, u64), FsError> {
    let st = rustix::fs::fstat(&fd).map_err(|e| map_err(shown, e.into()))?;
    require_regular(shown, st.st_mode)?;
    let total = st.st_size.max(0) as u64;
    let cap = max_bytes.min(total.saturating_add(1));
    let mut buf = Vec::with_capacity(usize::try_from(cap).unwrap_or(0).min(1 << 24));
    // `take`: a file that grows while it is read still stops at the budget.
    std::fs::File::from(fd)
        .take(max_bytes)
        .read_to_end(&mut buf)
        .map_err(|e| map_err(shown, e))?;
    Ok((buf, total))
}

/// Distinguishes temporary files of concurrent writes in one process.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Root {
    /// Canonicalizes `path` and opens it; errors when it is missing, not a folder, or unreadable.
    pub fn open(path: &Path) -> Result<Root, FsError> {
        let bad = |reason: &str| FsError::BadRoot {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        };
        let canon = std::fs::canonicalize(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => bad("does not exist"),
            std::io::ErrorKind::PermissionDenied => bad("not readable"),
            _ => bad(&e.to_string()),
        })?;
        let fd = rustix::fs::open(
            &canon,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::NOTDIR => bad("not a folder"),
            rustix::io::Errno::ACCESS | rustix::io::Errno::PERM => bad("not readable"),
            e => bad(&std::io::Error::from(e).to_string()),
        })?;
        // Listing proves the folder is readable (root bypasses this, which is fine).
        if rustix::fs::Dir::read_from(&fd).is_err() {
            return Err(bad("not readable"));
        }
        let beneath = Beneath::probe(&fd);
        Ok(Root {
            path: canon,
            fd,
            beneath,
        })
    }

    /// The canonical root path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The device and inode of the folder this root holds open: what it is, whatever path
    /// leads to it now (trust compares it, so a folder swapped in at a trusted path differs).
    pub fn identity(&self) -> Result<(u64, u64), FsError> {
        let st = rustix::fs::fstat(&self.fd).map_err(|e| map_err(Path::new("."), e.into()))?;
        Ok((st.st_dev, st.st_ino))
    }

    /// Turns a model- or client-given path (absolute inside the root, or relative) into a
    /// root-relative path; `..` that escapes and absolute paths elsewhere are `OutsideRoot`.
    /// The root itself is `"."`. The check is lexical; links are checked when opening.
    pub fn relative(&self, p: &Path) -> Result<PathBuf, FsError> {
        let outside = || FsError::OutsideRoot(p.to_path_buf());
        let rest: &Path = if p.is_absolute() {
            let normal = normalize(p).ok_or_else(outside)?;
            return match normal.strip_prefix(&self.path) {
                Ok(r) if r.as_os_str().is_empty() => Ok(PathBuf::from(".")),
                Ok(r) => Ok(r.to_path_buf()),
                Err(_) => Err(outside()),
            };
        } else {
            p
        };
        let normal = normalize(rest).ok_or_else(outside)?;
        if normal.as_os_str().is_empty() {
            Ok(PathBuf::from("."))
        } else {
            Ok(normal)
        }
    }

    /// Reads at most `max_chars` characters of a regular file beneath the root (never more
    /// than 4 × max_chars + 4 bytes from disk). Links inside the root are followed.
    pub fn read_text(&self, rel: &Path, max_chars: usize) -> Result<TextRead, FsError> {
        self.read_text_counted(rel, max_chars).map(|(r, _)| r)
    }

    /// Like [`Root::read_text`], and also the file's exact length in characters when the
    /// whole file fit in the bytes read (`None` when only its start was read).
    pub fn read_text_counted(
        &self,
        rel: &Path,
        max_chars: usize,
    ) -> Result<(TextRead, Option<u64>), FsError> {
        let max_bytes = (max_chars as u64).saturating_mul(4).saturating_add(4);
        let (mut bytes, total_bytes) = self.read_bytes(rel, max_bytes)?;
        let short = (bytes.len() as u64) < total_bytes;
        if short {
            // A character cut by the byte budget is not invalid UTF-8: drop its start.
            trim_partial_char(&mut bytes);
        }
        let (text, lossy) = match String::from_utf8(bytes) {
            Ok(s) => (s, false),
            Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), true),
        };
        let total_chars = (!short).then(|| text.chars().count() as u64);
        let (text, cut) = cut_chars(text, max_chars);
        let read = TextRead {
            text,
            truncated: cut || short,
            total_bytes,
            lossy,
        };
        Ok((read, total_chars))
    }

    /// Reads at most `max_bytes` bytes of a regular file beneath the root; returns the bytes
    /// and the file's total size.
    pub fn read_bytes(&self, rel: &Path, max_bytes: u64) -> Result<(Vec<u8>, u64), FsError> {
        let rel = self.relative(rel)?;
        let fd = self.open_rel(&rel, READ_FLAGS, Mode::empty())?;
        read_regular_fd(fd, &rel, max_bytes)
    }

    /// The kind of entry at `rel`, resolved beneath the root; `Ok(None)` when absent.
    pub fn kind(&self, rel: &Path) -> Result<Option<EntryKind>, FsError> {
        let rel = self.relative(rel)?;
        match self.stat_rel(&rel) {
            Ok(st) => Ok(Some(entry_kind(st.st_mode))),
            Err(FsError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Lists a folder beneath the root, sorted by name; `.` and `..` are left out.
    pub fn list(&self, rel: &Path) -> Result<Vec<DirEntry>, FsError> {
        let rel = self.relative(rel)?;
        let fd = self.open_rel(
            &rel,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK,
            Mode::empty(),
        )?;
        let dir = rustix::fs::Dir::read_from(&fd).map_err(|e| map_err(&rel, e.into()))?;
        let mut out = Vec::new();
        for entry in dir {
            let entry = entry.map_err(|e| map_err(&rel, e.into()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "." || name == ".." {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::RegularFile => EntryKind::File,
                FileType::Directory => EntryKind::Dir,
                FileType::Symlink | FileType::Unknown => match self.stat_rel(&rel.join(&name)) {
                    Ok(st) => entry_kind(st.st_mode),
                    Err(_) => EntryKind::Other,
                },
                _ => EntryKind::Other,
            };
            out.push(DirEntry { name, kind });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Writes a whole file beneath the root (parents created), replacing it atomically.
    /// Writing through a link that stays in the root replaces the link's target; a link
    /// leading out of the root is `OutsideRoot`.
    pub fn write(&self, rel: &Path, data: &[u8]) -> Result<(), FsError> {
        let rel = self.relative(rel)?;
        self.write_inner(&rel, data, 0)
    }

    /// Appends to a file beneath the root, creating it and its parents when absent.
    pub fn append(&self, rel: &Path, data: &[u8]) -> Result<(), FsError> {
        let rel = self.relative(rel)?;
        let (parent, _) = split_name(&rel)?;
        self.ensure_dirs(&parent)?;
        let flags = OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NONBLOCK;
        let fd = self.open_rel(&rel, flags, Mode::from_raw_mode(0o644))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| map_err(&rel, e.into()))?;
        require_regular(&rel, st.st_mode)?;
        std::fs::File::from(fd)
            .write_all(data)
            .map_err(|e| map_err(&rel, e))
    }

    /// The text of the link at `rel` when it is a link (the link itself is beneath the root;
    /// its target may not be); `Ok(None)` when it is not a link or is absent.
    pub fn read_link(&self, rel: &Path) -> Result<Option<PathBuf>, FsError> {
        let rel = self.relative(rel)?;
        let (parent, name) = split_name(&rel)?;
        let dir = match self.open_rel(&parent, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()) {
            Ok(dir) => dir,
            Err(FsError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        match rustix::fs::readlinkat(&dir, name.as_path(), Vec::new()) {
            Ok(target) => {
                let target: std::ffi::OsString =
                    std::os::unix::ffi::OsStringExt::from_vec(target.into_bytes());
                Ok(Some(PathBuf::from(target)))
            }
            Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(map_err(&rel, e.into())),
        }
    }

    /// Removes a file (or a link, not its target) beneath the root.
    pub fn remove(&self, rel: &Path) -> Result<(), FsError> {
        let rel = self.relative(rel)?;
        let (parent, name) = split_name(&rel)?;
        let dir = self.open_rel(&parent, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        rustix::fs::unlinkat(&dir, name.as_path(), AtFlags::empty())
            .map_err(|e| map_err(&rel, e.into()))
    }

    /// Modification time and size of a regular file, for "changed on disk since read" checks.
    pub fn stamp(&self, rel: &Path) -> Result<FileStamp, FsError> {
        let rel = self.relative(rel)?;
        let st = self.stat_rel(&rel)?;
        require_regular(&rel, st.st_mode)?;
        Ok(FileStamp {
            len: st.st_size.max(0) as u64,
            mtime_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
        })
    }

    /// Opens `rel` (already root-relative) beneath the root.
    fn open_rel(&self, rel: &Path, flags: OFlags, mode: Mode) -> Result<OwnedFd, FsError> {
        open::open_beneath(self, rel, flags, mode)
    }

    /// `fstat` of `rel` beneath the root, following links that stay inside.
    fn stat_rel(&self, rel: &Path) -> Result<rustix::fs::Stat, FsError> {
        let fd = self.open_rel(rel, open::STAT_FLAGS, Mode::empty())?;
        rustix::fs::fstat(&fd).map_err(|e| map_err(rel, e.into()))
    }

    /// Creates every folder of `rel` that is missing and returns the last one opened.
    fn ensure_dirs(&self, rel: &Path) -> Result<OwnedFd, FsError> {
        let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY;
        let mut prefix = PathBuf::from(".");
        let mut fd = self.open_rel(&prefix, dir_flags, Mode::empty())?;
        for comp in rel.components() {
            let Component::Normal(name) = comp else {
                continue;
            };
            prefix.push(name);
            match self.open_rel(&prefix, dir_flags, Mode::empty()) {
                Ok(next) => fd = next,
                Err(FsError::NotFound(_)) => {
                    match rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(map_err(&prefix, e.into())),
                    }
                    fd = self.open_rel(&prefix, dir_flags, Mode::empty())?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(fd)
    }

    fn write_inner(&self, rel: &Path, data: &[u8], depth: u8) -> Result<(), FsError> {
        let (parent, name) = split_name(rel)?;
        let dir = self.ensure_dirs(&parent)?;
        let mut mode = Mode::from_raw_mode(0o644);
        match rustix::fs::statat(&dir, name.as_path(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => mode = Mode::from_raw_mode(st.st_mode & 0o7777),
                FileType::Symlink => return self.write_through_link(rel, data, depth),
                _ => require_regular(rel, st.st_mode)?,
            },
            Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(map_err(rel, e.into())),
        }
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = PathBuf::from(format!(
            ".{}.garuda-{}-{n}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        let tmp_fd = rustix::fs::openat(
            &dir,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
            mode,
        )
        .map_err(|e| map_err(rel, e.into()))?;
        let result = (|| {
            // The umask may have narrowed the mode given at creation.
            rustix::fs::fchmod(&tmp_fd, mode)?;
            let mut file = std::fs::File::from(tmp_fd);
            file.write_all(data)?;
            file.sync_all()?;
            drop(file);
            rustix::fs::renameat(&dir, &tmp, &dir, name.as_path())?;
            Ok::<(), std::io::Error>(())
        })();
        if let Err(e) = result {
            let _ = rustix::fs::unlinkat(&dir, &tmp, AtFlags::empty());
            return Err(map_err(rel, e));
        }
        Ok(())
    }

    /// `rel` is a link: write its target when the target stays in the root.
    fn write_through_link(&self, rel: &Path, data: &[u8], depth: u8) -> Result<(), FsError> {
        match self.open_rel(rel, open::STAT_FLAGS, Mode::empty()) {
            Ok(fd) => {
                let target = open::real_path(&fd)
                    .and_then(|real| real.strip_prefix(&self.path).ok().map(Path::to_path_buf));
                match target {
                    Some(t) if depth < 4 && !t.as_os_str().is_empty() => {
                        self.write_inner(&t, data, depth + 1)
                    }
                    // Without /proc the target's name is unknown: write in place instead.
                    _ => self.write_in_place(rel, data),
                }
            }
            // A dangling link: creating through it stays beneath the root or fails.
            Err(FsError::NotFound(_)) => self.write_in_place(rel, data),
            Err(e) => Err(e),
        }
    }

    fn write_in_place(&self, rel: &Path, data: &[u8]) -> Result<(), FsError> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NONBLOCK;
        let fd = self.open_rel(rel, flags, Mode::from_raw_mode(0o644))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| map_err(rel, e.into()))?;
        require_regular(rel, st.st_mode)?;
        std::fs::File::from(fd)
            .write_all(data)
            .map_err(|e| map_err(rel, e))
    }

    pub(crate) fn root_fd(&self) -> impl AsFd + '_ {
        &self.fd
    }

    /// Forces the cap-std resolver, to test the path taken on kernels without `openat2`.
    #[cfg(test)]
    pub(crate) fn force_cap_std(mut self) -> Root {
        self.beneath = Beneath::CapStd;
        self
    }

    pub(crate) fn beneath(&self) -> Beneath {
        self.beneath
    }
}

/// Checks that entries found by a walk by path really lie in the root. A walk reads folders
/// by path, so a folder swapped for a link mid-walk could make it list names elsewhere; each
/// entry is kept only when it exists in a folder reached from the root's handle through real
/// folders, one `openat(O_NOFOLLOW)` per component (no link followed, no `..`). The last
/// folder opened is kept, so a folder's entries cost one `fstatat` each.
pub struct WithinRoot<'a> {
    root: &'a Root,
    dir: Option<(PathBuf, Option<OwnedFd>)>,
}

impl Root {
    /// A checker for the entries of walks beneath this root.
    pub fn within(&self) -> WithinRoot<'_> {
        WithinRoot {
            root: self,
            dir: None,
        }
    }
}

impl WithinRoot<'_> {
    /// True when `rel` (root-relative) names an entry of any kind (a link is not followed)
    /// in a folder reached from the root through real folders only.
    pub fn contains(&mut self, rel: &Path) -> bool {
        let Ok(rel) = self.root.relative(rel) else {
            return false;
        };
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return false;
        };
        if self.dir.as_ref().map(|(p, _)| p.as_path()) != Some(parent) {
            let fd = self.open_dir(parent);
            self.dir = Some((parent.to_path_buf(), fd));
        }
        match &self.dir {
            Some((_, Some(fd))) => rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok(),
            _ => false,
        }
    }

    fn open_dir(&self, rel: &Path) -> Option<OwnedFd> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut fd = rustix::fs::openat(self.root.root_fd(), ".", flags, Mode::empty()).ok()?;
        for comp in rel.components() {
            match comp {
                Component::Normal(name) => {
                    fd = rustix::fs::openat(&fd, name, flags, Mode::empty()).ok()?;
                }
                Component::CurDir => {}
                _ => return None,
            }
        }
        Some(fd)
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

/// Lexically removes `.` and resolves `..`; `None` when `..` climbs above the start.
fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    let mut depth = 0usize;
    for comp in p.components() {
        match comp {
            Component::RootDir => out.push("/"),
            Component::Prefix(_) => return None,
            Component::CurDir => {}
            Component::ParentDir => {
                if depth == 0 {
                    return None;
                }
                out.pop();
                depth -= 1;
            }
            Component::Normal(n) => {
                out.push(n);
                depth += 1;
            }
        }
    }
    Some(out)
}

/// Splits a root-relative path into its folder and its last name.
fn split_name(rel: &Path) -> Result<(PathBuf, PathBuf), FsError> {
    match (rel.parent(), rel.file_name()) {
        (Some(parent), Some(name)) if parent.as_os_str().is_empty() => {
            Ok((PathBuf::from("."), PathBuf::from(name)))
        }
        (Some(parent), Some(name)) => Ok((parent.to_path_buf(), PathBuf::from(name))),
        _ => Err(FsError::NotRegular {
            path: rel.to_path_buf(),
            kind: "folder",
        }),
    }
}

fn entry_kind(mode: u32) -> EntryKind {
    match FileType::from_raw_mode(mode) {
        FileType::RegularFile => EntryKind::File,
        FileType::Directory => EntryKind::Dir,
        _ => EntryKind::Other,
    }
}

fn require_regular(rel: &Path, mode: u32) -> Result<(), FsError> {
    let kind = match FileType::from_raw_mode(mode) {
        FileType::RegularFile => return Ok(()),
        FileType::Directory => "folder",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Symlink => "link",
        FileType::Unknown => "unknown",
    };
    Err(FsError::NotRegular {
        path: rel.to_path_buf(),
        kind,
    })
}

/// Drops an incomplete UTF-8 sequence at the very end (at most 3 bytes).
fn trim_partial_char(bytes: &mut Vec<u8>) {
    let len = bytes.len();
    for back in 1..=3.min(len) {
        let b = bytes[len - back];
        if b & 0xC0 == 0x80 {
            continue; // continuation byte: keep looking for the lead byte
        }
        let need = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return,
        };
        if need > back {
            bytes.truncate(len - back);
        }
        return;
    }
}

/// Keeps the first `max_chars` characters; true when something was cut.
pub(crate) fn cut_chars(mut text: String, max_chars: usize) -> (String, bool) {
    match text.char_indices().nth(max_chars) {
        Some((idx, _)) => {
            text.truncate(idx);
            (text, true)
        }
        None => (text, false),
    }
}

/// A walker over `base` that honours .gitignore, .ignore and git excludes (even outside a git
/// repository), shows hidden files but never descends into `.git`, and never follows links;
/// every walk of a workspace (the search tools, the code index) starts here.
pub fn walker(base: &Path, max_depth: Option<usize>) -> ignore::WalkBuilder {
    let mut b = ignore::WalkBuilder::new(base);
    b.follow_links(false)
        .hidden(false)
        .require_git(false)
        .max_depth(max_depth)
        .filter_entry(|e| e.file_name() != ".git");
    b
}
