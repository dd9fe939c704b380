//! The one primitive that opens a path beneath the root, and the mapping of OS errors.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::{FsError, Root};

/// How the kernel is asked to keep a path beneath the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Beneath {
    /// `openat2` with `RESOLVE_BENEATH` (Linux 5.6+).
    Openat2,
    /// cap-std's portable resolver, for kernels or sandboxes without `openat2`.
    CapStd,
}

impl Beneath {
    /// Picks `openat2` when the kernel (and any seccomp filter) allows it.
    pub(crate) fn probe(root: &OwnedFd) -> Beneath {
        match rustix::fs::openat2(
            root,
            ".",
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH,
        ) {
            Err(Errno::NOSYS) | Err(Errno::PERM) => Beneath::CapStd,
            _ => Beneath::Openat2,
        }
    }
}

/// Flags for opening only to `fstat`: `O_PATH` needs no read permission and never blocks.
pub(crate) const STAT_FLAGS: OFlags = OFlags::PATH;

/// Opens `rel` (root-relative, already lexically checked) beneath the root.
pub(crate) fn open_beneath(
    root: &Root,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, FsError> {
    // openat2 is strict: O_PATH admits no other flags but O_CLOEXEC and O_DIRECTORY.
    let flags = if flags.contains(OFlags::PATH) {
        flags | OFlags::CLOEXEC
    } else {
        flags | OFlags::CLOEXEC | OFlags::NOCTTY
    };
    match root.beneath() {
        Beneath::Openat2 => {
            let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
            match rustix::fs::openat2(root.root_fd(), rel, flags, mode, resolve) {
                Ok(fd) => Ok(fd),
                // RESOLVE_BENEATH refuses every absolute link, also one whose target is in
                // the root: look where it really leads before calling it outside.
                Err(Errno::XDEV) if !flags.contains(OFlags::CREATE) => {
                    reopen_if_inside(root, rel, flags)
                        .ok_or_else(|| FsError::OutsideRoot(rel.to_path_buf()))
                }
                Err(e) => Err(map_err(rel, e.into())),
            }
        }
        Beneath::CapStd => cap_open(root, rel, flags, mode),
    }
}

/// Opens `rel` with `O_PATH` (no IO, never blocks), reads the real path of what was
/// opened from /proc and, when it lies in the root, reopens that very object. The object
/// is pinned by the descriptor, so nothing can swap it between the check and the reopen.
fn reopen_if_inside(root: &Root, rel: &Path, flags: OFlags) -> Option<OwnedFd> {
    let pinned = rustix::fs::openat(
        root.root_fd(),
        rel,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let real = real_path(&pinned)?;
    if !real.starts_with(root.path()) {
        return None;
    }
    if flags.contains(OFlags::PATH) {
        return Some(pinned);
    }
    let proc = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&pinned));
    rustix::fs::open(proc.as_str(), flags, Mode::empty()).ok()
}

/// The real path of an open descriptor, from /proc; `None` without /proc.
pub(crate) fn real_path(fd: &OwnedFd) -> Option<PathBuf> {
    let proc = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(fd));
    let target = rustix::fs::readlink(proc.as_str(), Vec::new()).ok()?;
    let target: std::ffi::OsString = std::os::unix::ffi::OsStringExt::from_vec(target.into_bytes());
    let target = PathBuf::from(target);
    target.is_absolute().then_some(target)
}

fn cap_open(root: &Root, rel: &Path, flags: OFlags, mode: Mode) -> Result<OwnedFd, FsError> {
    use cap_std::fs::OpenOptionsExt;
    let dup =
        rustix::io::fcntl_dupfd_cloexec(root.root_fd(), 0).map_err(|e| map_err(rel, e.into()))?;
    let dir = cap_std::fs::Dir::from_std_file(std::fs::File::from(dup));
    // cap-std cannot open with O_PATH; read-only non-blocking serves the same purpose.
    let mut flags = flags;
    if flags.contains(OFlags::PATH) {
        flags.remove(OFlags::PATH);
        flags |= OFlags::RDONLY | OFlags::NONBLOCK;
    }
    let mut opts = cap_std::fs::OpenOptions::new();
    let access = flags & OFlags::ACCMODE;
    opts.read(access == OFlags::RDONLY || access == OFlags::RDWR)
        .write(access == OFlags::WRONLY || access == OFlags::RDWR)
        .append(flags.contains(OFlags::APPEND))
        .create(flags.contains(OFlags::CREATE))
        .truncate(flags.contains(OFlags::TRUNC))
        .mode(mode.as_raw_mode())
        .custom_flags((flags & (OFlags::NONBLOCK | OFlags::DIRECTORY)).bits() as i32);
    if flags.contains(OFlags::APPEND) {
        opts.write(true);
    }
    dir.open_with(rel, &opts)
        .map(OwnedFd::from)
        .map_err(|e| map_err(rel, e))
}

/// Maps an OS error on `rel` to the variant that names what went wrong.
pub(crate) fn map_err(rel: &Path, e: io::Error) -> FsError {
    let path = rel.to_path_buf();
    match e.raw_os_error().map(Errno::from_raw_os_error) {
        Some(Errno::NOENT) | Some(Errno::NOTDIR) => FsError::NotFound(path),
        Some(Errno::XDEV) => FsError::OutsideRoot(path),
        Some(Errno::ACCESS) | Some(Errno::PERM) => FsError::PermissionDenied(path),
        Some(Errno::NXIO) => FsError::NotRegular {
            path,
            kind: "FIFO or socket",
        },
        Some(Errno::ISDIR) => FsError::NotRegular {
            path,
            kind: "folder",
        },
        Some(Errno::NOSYS) => FsError::Io { path, source: e },
        _ if is_cap_escape(&e) => FsError::OutsideRoot(path),
        _ if e.kind() == io::ErrorKind::PermissionDenied => FsError::PermissionDenied(path),
        _ if e.kind() == io::ErrorKind::NotFound => FsError::NotFound(path),
        _ => FsError::Io { path, source: e },
    }
}

/// cap-std reports an escape as a synthesized PermissionDenied error without an OS code;
/// its message is the only way to tell it from a real permission problem.
fn is_cap_escape(e: &io::Error) -> bool {
    e.raw_os_error().is_none() && e.to_string().contains("outside of the filesystem")
}
