//! What the machine offers: bubblewrap and whether it can create the namespaces commands
//! need, plus the Landlock ABI for the report. Probed once per process, and a working
//! sandbox is remembered in the user's cache folder (`sandbox-probe`), keyed by the bwrap
//! binary, the kernel and the user-namespace settings, so a short-lived process
//! (`garuda exec`) does not spend two bubblewrap runs before its first request.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::bwrap::{BwrapInfo, namespace_args};

/// How commands are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxMode {
    /// bubblewrap with user, mount, PID, network, IPC and UTS namespaces.
    Bubblewrap,
    /// No sandbox: every command needs the user's approval.
    None,
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxState {
    /// The mode commands run in.
    pub mode: SandboxMode,
    /// bubblewrap, when found (also when it could not create namespaces).
    pub bwrap: Option<BwrapInfo>,
    /// The kernel's Landlock ABI version, when it has Landlock (reported, not used).
    pub landlock_abi: Option<u32>,
    /// Why there is no sandbox, when `mode` is `none`.
    pub reason: Option<String>,
}

impl SandboxMode {
    /// The name reports use: `bubblewrap` or `none`.
    pub fn name(self) -> &'static str {
        match self {
            SandboxMode::Bubblewrap => "bubblewrap",
            SandboxMode::None => "none",
        }
    }
}

impl SandboxState {
    /// A state with no sandbox, for `reason`.
    pub fn none(reason: impl Into<String>) -> Self {
        SandboxState {
            mode: SandboxMode::None,
            bwrap: None,
            landlock_abi: None,
            reason: Some(reason.into()),
        }
    }

    /// Whether commands can be sandboxed.
    pub fn available(&self) -> bool {
        self.mode != SandboxMode::None
    }
}

/// The machine's sandbox, probed on first use (about one sandboxed `true`, a few
/// milliseconds, unless the cache file answers) and kept for the process's life.
pub fn probe() -> &'static SandboxState {
    static STATE: OnceLock<SandboxState> = OnceLock::new();
    STATE.get_or_init(|| probe_cached(crate::dirs::cache_dir().map(|d| d.join(CACHE_FILE))))
}

/// The cache file's name in [`crate::dirs::cache_dir`].
pub(crate) const CACHE_FILE: &str = "sandbox-probe";
const CACHE_HEAD: &str = "garuda sandbox probe 1";

/// The probe through the cache file `file`: an entry whose key matches this machine's is the
/// answer; otherwise the probe runs and a working sandbox is written down. Only success is
/// kept: a failure may be passing (a full process table), and it costs no more than a probe.
pub(crate) fn probe_cached(file: Option<PathBuf>) -> SandboxState {
    let found = find_bwrap();
    let key = found.as_deref().and_then(cache_key);
    if let (Some(file), Some(key), Some(path)) = (&file, &key, &found)
        && let Some(info) = read_cache(file, key, path)
    {
        return SandboxState {
            mode: SandboxMode::Bubblewrap,
            bwrap: Some(info),
            landlock_abi: landlock_abi(),
            reason: None,
        };
    }
    let state = probe_uncached();
    if let (Some(file), Some(key), Some(info)) = (&file, &key, &state.bwrap)
        && state.mode == SandboxMode::Bubblewrap
        && found.as_deref() == Some(info.path.as_path())
    {
        // A cache that cannot be written costs the next process a probe, nothing more.
        let _ = write_cache(file, key, info);
    }
    state
}

/// What the probe's answer depends on: the bwrap binary (path, size, change time, inode),
/// the kernel release, the user (root probes without a user namespace), and the sysctls
/// that allow or block unprivileged user namespaces.
fn cache_key(bwrap: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(bwrap).ok()?;
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "-".into())
    };
    Some(format!(
        "bwrap={:?} size={} mtime={}.{} ctime={}.{} ino={} dev={} kernel={} uid={} userns={},{},{}",
        bwrap,
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
        m.ino(),
        m.dev(),
        read("/proc/sys/kernel/osrelease"),
        rustix::process::getuid().as_raw(),
        read("/proc/sys/kernel/unprivileged_userns_clone"),
        read("/proc/sys/user/max_user_namespaces"),
        read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
    ))
}

/// The cached bwrap facts when the file's key is `key`.
fn read_cache(file: &Path, key: &str, path: &Path) -> Option<BwrapInfo> {
    let text = std::fs::read_to_string(file).ok()?;
    let mut lines = text.lines();
    if lines.next()? != CACHE_HEAD || lines.next()? != key {
        return None;
    }
    let version = lines.next()?.to_string();
    let flag = |l: Option<&str>| match l? {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    };
    Some(BwrapInfo {
        path: path.to_path_buf(),
        version,
        user_namespace: flag(lines.next())?,
        disable_userns: flag(lines.next())?,
    })
}

/// Writes the entry beside the file and renames it over, so a reader never sees half of it.
fn write_cache(file: &Path, key: &str, info: &BwrapInfo) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = file.parent().ok_or(std::io::ErrorKind::InvalidInput)?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{CACHE_FILE}.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    writeln!(
        f,
        "{CACHE_HEAD}\n{key}\n{}\n{}\n{}",
        info.version.replace('\n', " "),
        info.user_namespace,
        info.disable_userns
    )?;
    drop(f);
    std::fs::rename(&tmp, file)
}

/// Probes again, without the cache (tests, or after the user installed bubblewrap).
pub fn probe_uncached() -> SandboxState {
    let landlock_abi = landlock_abi();
    let mut state = probe_bwrap();
    state.landlock_abi = landlock_abi;
    state
}

fn probe_bwrap() -> SandboxState {
    if !cfg!(target_os = "linux") {
        return SandboxState::none("the sandbox is implemented on Linux only");
    }
    let Some(path) = find_bwrap() else {
        if let Some(named) = std::env::var_os(BWRAP_ENV).filter(|p| !p.is_empty()) {
            return SandboxState::none(format!(
                "{BWRAP_ENV}={} is not an executable bubblewrap (bwrap)",
                PathBuf::from(named).display()
            ));
        }
        return SandboxState::none(
            "bubblewrap (bwrap) is not installed; install it (Debian and Ubuntu: \
             apt-get install bubblewrap; Fedora: dnf install bubblewrap; Arch: pacman -S \
             bubblewrap) to run commands sandboxed",
        );
    };
    let version = match Command::new(&path).arg("--version").output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .trim()
            .trim_start_matches("bubblewrap")
            .trim()
            .to_string(),
        Ok(o) => {
            return SandboxState::none(format!(
                "{} --version failed: {}",
                path.display(),
                first_line(&o.stderr)
            ));
        }
        Err(e) => return SandboxState::none(format!("cannot run {}: {e}", path.display())),
    };
    let disable_userns = version_at_least(&version, (0, 8));
    let mut info = BwrapInfo {
        path,
        version,
        user_namespace: true,
        disable_userns,
    };
    // Prefer a user namespace (the command is not the host's root even when Garuda is); fall
    // back to none where bwrap manages without (root, or a setuid bwrap).
    let first = match trial(&info) {
        Ok(()) => {
            return SandboxState {
                mode: SandboxMode::Bubblewrap,
                bwrap: Some(info),
                landlock_abi: None,
                reason: None,
            };
        }
        Err(e) => e,
    };
    info.user_namespace = false;
    info.disable_userns = false;
    match trial(&info) {
        Ok(()) => SandboxState {
            mode: SandboxMode::Bubblewrap,
            bwrap: Some(info),
            landlock_abi: None,
            reason: None,
        },
        Err(_) => SandboxState {
            mode: SandboxMode::None,
            bwrap: Some(info),
            landlock_abi: None,
            reason: Some(format!(
                "bubblewrap cannot create the sandbox's namespaces here (user namespaces \
                 blocked, e.g. by a container or an AppArmor rule): {first}"
            )),
        },
    }
}

/// Runs `/bin/sh -c :` with the namespaces and base mounts every command gets.
fn trial(info: &BwrapInfo) -> Result<(), String> {
    let mut cmd = Command::new(&info.path);
    cmd.args(namespace_args(info, false))
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args(["--tmpfs", "/tmp", "--", "/bin/sh", "-c", ":"])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    match cmd.output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(first_line(&o.stderr)),
        Err(e) => Err(e.to_string()),
    }
}

/// The variable that names the bubblewrap executable, instead of the search below.
pub const BWRAP_ENV: &str = "GARUDA_BWRAP";

/// bwrap in the usual system folders first (a folder early in `PATH` could be writable by
/// something less trusted), then along `PATH`.
fn find_bwrap() -> Option<PathBuf> {
    // The user may name it (a bwrap outside the usual places); a name that is not an
    // executable means no sandbox, and so approvals for every command.
    if let Some(p) = std::env::var_os(BWRAP_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return is_executable(&p).then_some(p);
    }
    let fixed = ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"]
        .into_iter()
        .map(PathBuf::from);
    let from_path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("bwrap")).collect())
        .unwrap_or_default();
    fixed.chain(from_path).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn version_at_least(version: &str, want: (u32, u32)) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    (major, minor) >= want
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .next()
        .unwrap_or("no message")
        .trim()
        .to_string()
}

/// The Landlock ABI version (`landlock_create_ruleset` with the version flag), if any.
#[cfg(target_os = "linux")]
fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the version flag the syscall only
    // returns a number; it reads and writes no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).ok().filter(|v| *v > 0)
}

#[cfg(not(target_os = "linux"))]
fn landlock_abi() -> Option<u32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_answers_for_the_same_machine_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c").join(CACHE_FILE);
        let bwrap = dir.path().join("bwrap");
        std::fs::write(&bwrap, "#!/bin/sh\n").unwrap();
        let key = cache_key(&bwrap).unwrap();
        let info = BwrapInfo {
            path: bwrap.clone(),
            version: "0.9.0".into(),
            user_namespace: true,
            disable_userns: true,
        };
        write_cache(&file, &key, &info).unwrap();
        assert_eq!(read_cache(&file, &key, &bwrap), Some(info));
        // Another binary (here: the same path, rewritten) is another key.
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(&bwrap, "#!/bin/sh\n# changed\n").unwrap();
        let changed = cache_key(&bwrap).unwrap();
        assert_ne!(changed, key);
        assert_eq!(read_cache(&file, &changed, &bwrap), None);
        std::fs::write(&file, "garbage").unwrap();
        assert_eq!(read_cache(&file, &key, &bwrap), None);
    }

    #[test]
    fn versions_compare() {
        assert!(version_at_least("0.8.0", (0, 8)));
        assert!(version_at_least("0.11.1", (0, 8)));
        assert!(!version_at_least("0.7.9", (0, 8)));
        assert!(!version_at_least("garbage", (0, 8)));
    }
}
