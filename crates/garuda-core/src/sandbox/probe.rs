//! What the machine offers: bubblewrap and whether it can create the namespaces commands
//! need, plus the Landlock ABI for the report. Probed once per process.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::bwrap::namespace_args;

/// How commands are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxMode {
    /// bubblewrap with user, mount, PID, network, IPC and UTS namespaces.
    Bubblewrap,
    /// No sandbox: every command needs the user's approval.
    None,
}

/// The bubblewrap found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BwrapInfo {
    /// The executable.
    pub path: PathBuf,
    /// Its version, e.g. `0.8.0`.
    pub version: String,
    /// Whether commands get their own user namespace (off only where bwrap works without one,
    /// i.e. as root or installed setuid).
    pub user_namespace: bool,
    /// Whether bwrap can forbid nested user namespaces (`--disable-userns`, 0.8.0 and later).
    pub disable_userns: bool,
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
/// milliseconds) and cached for the process's life.
pub fn probe() -> &'static SandboxState {
    static STATE: OnceLock<SandboxState> = OnceLock::new();
    STATE.get_or_init(probe_uncached)
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
    fn versions_compare() {
        assert!(version_at_least("0.8.0", (0, 8)));
        assert!(version_at_least("0.11.1", (0, 8)));
        assert!(!version_at_least("0.7.9", (0, 8)));
        assert!(!version_at_least("garbage", (0, 8)));
    }
}
