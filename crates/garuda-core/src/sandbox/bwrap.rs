//! The bubblewrap command line for a policy: which namespaces, and the mounts in the order
//! that makes later rules win (secrets over the writable root, protected paths over both).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::policy::SandboxPolicy;

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

/// What a path is on the host, as far as the mount plan cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    Dir,
    /// Anything else that exists (regular file, socket, …).
    Other,
}

/// The host's view of paths: canonical form and kind, `None` when missing. Tests pass a fake.
pub(crate) trait HostFs {
    /// The canonical path and its kind, or `None` when it does not exist.
    fn resolve(&self, p: &Path) -> Option<(PathBuf, Kind)>;
}

/// The real filesystem.
pub(crate) struct RealFs;

impl HostFs for RealFs {
    fn resolve(&self, p: &Path) -> Option<(PathBuf, Kind)> {
        let canon = p.canonicalize().ok()?;
        let kind = if canon.is_dir() {
            Kind::Dir
        } else {
            Kind::Other
        };
        Some((canon, kind))
    }
}

/// The descriptor a sandboxed command's watchdog reads: the read end of a pipe whose only
/// write end the server holds (see [`LIFELINE_SCRIPT`]).
pub(crate) const LIFELINE_FD: i32 = 3;

/// Runs first in the sandbox: a watchdog that waits on the lifeline and, when the server's end
/// closes (the server died, or dropped the command), kills every process in the PID
/// namespace, again and again until none is left (the command may be starting meanwhile); then
/// the command itself, without the lifeline, in the shell's place. bubblewrap
/// binds its namespace's init to its own life only once setup is done; a server killed during
/// setup would otherwise leave the sandbox running on its own.
pub(crate) const LIFELINE_SCRIPT: &str = "(read _ <&3; while kill -s KILL -- -1; do :; done) </dev/null >/dev/null 2>&1 & exec 3<&- \"$@\"";

// Mount points the sandbox replaces with its own file systems: host paths under them are
// invisible unless a bind brings them back.
use super::policy::REPLACED;

/// A bubblewrap invocation: its arguments (after the program path) and the protected paths
/// that did not exist when it was planned, which bubblewrap creates on the host as empty
/// folders to mount on (the caller removes them when the command is done).
#[derive(Debug)]
pub(crate) struct Plan {
    pub args: Vec<OsString>,
    pub mountpoints: Vec<PathBuf>,
}

/// Namespace and lifetime flags, shared with the probe so that it tests what commands use.
pub(crate) fn namespace_args(info: &BwrapInfo, network: bool) -> Vec<OsString> {
    let mut a: Vec<&str> = vec![
        // The server's death (any signal) kills bwrap, whose death kills the namespace's init,
        // whose death makes the kernel kill every process left in the PID namespace.
        "--die-with-parent",
        // No controlling terminal: TIOCSTI cannot push input into the user's terminal.
        "--new-session",
    ];
    if info.user_namespace {
        a.push("--unshare-user");
        if info.disable_userns {
            // No nested user namespace: the command cannot gain capabilities anywhere.
            a.push("--disable-userns");
        }
    }
    a.extend([
        // Own PID namespace and /proc: the server's process is not visible at all.
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]);
    if !network {
        // A network namespace with only its own loopback: no route out, and the host's
        // loopback services and abstract Unix sockets are out of reach.
        a.push("--unshare-net");
    }
    // Running as root, bwrap would otherwise keep every capability (mount, ptrace, …).
    a.extend(["--cap-drop", "ALL"]);
    a.into_iter().map(OsString::from).collect()
}

/// The full argument list for running `program args` under `policy`.
pub(crate) fn plan(
    info: &BwrapInfo,
    policy: &SandboxPolicy,
    program: &OsStr,
    args: &[OsString],
    fs: &dyn HostFs,
) -> Plan {
    let mut out = namespace_args(info, policy.network);
    let mut push = |parts: &[&OsStr]| out.extend(parts.iter().map(|p| p.to_os_string()));
    let s = |x: &'static str| OsStr::new(x);

    let root = policy.root.clone();
    let writable: Vec<PathBuf> = policy
        .writable
        .iter()
        .filter_map(|w| fs.resolve(w))
        .filter(|(_, k)| *k == Kind::Dir)
        .map(|(p, _)| p)
        .collect();
    let visible: Vec<PathBuf> = policy
        .visible
        .iter()
        .filter_map(|v| fs.resolve(v))
        .filter(|(_, k)| *k == Kind::Dir)
        .map(|(p, _)| p)
        .collect();
    let exposed = |p: &Path| {
        p.starts_with(&root)
            || writable.iter().any(|w| p.starts_with(w))
            || visible.iter().any(|v| p.starts_with(v))
    };

    // Denied paths, existing, canonical, without duplicates.
    let mut denied: Vec<(PathBuf, Kind)> = policy
        .deny_read
        .iter()
        .filter_map(|d| fs.resolve(d))
        .collect();
    denied.sort();
    denied.dedup();
    // A denied folder that holds the root (the root is in another user's home) is masked
    // before the root is bound, so the root shows through and the rest stays hidden.
    let (before, after): (Vec<_>, Vec<_>) = denied.into_iter().partition(|(d, k)| {
        *k == Kind::Dir
            && (root.starts_with(d)
                || writable.iter().any(|w| w.starts_with(d))
                || visible.iter().any(|v| v.starts_with(d)))
    });
    let hidden_by_before = |p: &Path| before.iter().any(|(b, _)| p.starts_with(b)) && !exposed(p);
    let under_replaced = |p: &Path| REPLACED.iter().any(|r| p.starts_with(r)) && !exposed(p);
    // Masks after the binds, dropping those already hidden (mounting on them would need a
    // folder created inside a read-only mask or the private /tmp).
    let after: Vec<(PathBuf, Kind)> = after
        .iter()
        .filter(|(p, _)| {
            !hidden_by_before(p)
                && !under_replaced(p)
                && !after
                    .iter()
                    .any(|(a, ak)| *ak == Kind::Dir && a != p && p.starts_with(a))
        })
        .cloned()
        .collect();

    // The system read-only, with its own /dev and /proc (the PID namespace's).
    push(&[s("--ro-bind"), s("/"), s("/")]);
    push(&[s("--dev"), s("/dev")]);
    push(&[s("--proc"), s("/proc")]);
    // /run holds service sockets (docker, systemd, the user's session bus) that lead out of
    // any sandbox; with network allowed, DNS configuration comes back.
    push(&[s("--tmpfs"), s("/run")]);
    if policy.network {
        push(&[
            s("--ro-bind-try"),
            s("/run/systemd/resolve"),
            s("/run/systemd/resolve"),
        ]);
    }
    for (b, _) in before.iter().filter(|(b, _)| !under_replaced(b)) {
        push(&[s("--tmpfs"), b.as_os_str()]);
    }
    match &policy.temp_dir {
        Some(t) => push(&[s("--bind"), t.as_os_str(), s("/tmp")]),
        None => push(&[s("--tmpfs"), s("/tmp")]),
    }
    // Read-only first, so the root or a writable folder inside one is writable again.
    for v in &visible {
        push(&[s("--ro-bind"), v.as_os_str(), v.as_os_str()]);
    }
    push(&[s("--bind"), root.as_os_str(), root.as_os_str()]);
    for w in &writable {
        push(&[s("--bind"), w.as_os_str(), w.as_os_str()]);
    }
    for (p, kind) in &after {
        match kind {
            Kind::Dir => push(&[s("--tmpfs"), p.as_os_str()]),
            Kind::Other => push(&[s("--ro-bind"), s("/dev/null"), p.as_os_str()]),
        }
    }
    let mut mountpoints = Vec::new();
    for p in policy.read_only_paths() {
        match fs.resolve(&p) {
            Some((canon, _)) => push(&[s("--ro-bind"), canon.as_os_str(), canon.as_os_str()]),
            // Missing in a folder of the root: an empty read-only folder stands in, so the
            // command cannot create it (a `.git` with a filter, a `.claude` with hooks).
            None if p
                .parent()
                .and_then(|d| fs.resolve(d))
                .is_some_and(|(d, k)| k == Kind::Dir && d.starts_with(&root)) =>
            {
                push(&[
                    s("--tmpfs"),
                    p.as_os_str(),
                    s("--remount-ro"),
                    p.as_os_str(),
                ]);
                mountpoints.push(p);
            }
            None => {}
        }
    }
    // Read-only last: a mask that holds the root needed folders made in it first.
    for (d, _) in before
        .iter()
        .filter(|(b, _)| !under_replaced(b))
        .chain(after.iter().filter(|(_, k)| *k == Kind::Dir))
    {
        push(&[s("--remount-ro"), d.as_os_str()]);
    }
    push(&[s("--chdir"), root.as_os_str()]);
    push(&[
        s("--"),
        s("/bin/sh"),
        s("-c"),
        s(LIFELINE_SCRIPT),
        s("garuda-sandbox"),
        program,
    ]);
    out.extend(args.iter().cloned());
    Plan {
        args: out,
        mountpoints,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct FakeFs(BTreeMap<PathBuf, Kind>);

    impl HostFs for FakeFs {
        fn resolve(&self, p: &Path) -> Option<(PathBuf, Kind)> {
            self.0.get(p).map(|k| (p.to_path_buf(), *k))
        }
    }

    fn info() -> BwrapInfo {
        BwrapInfo {
            path: "/usr/bin/bwrap".into(),
            version: "0.8.0".into(),
            user_namespace: true,
            disable_userns: true,
        }
    }

    fn fake(entries: &[(&str, Kind)]) -> FakeFs {
        FakeFs(
            entries
                .iter()
                .map(|(p, k)| (PathBuf::from(p), *k))
                .collect(),
        )
    }

    fn policy(root: &str, deny: &[&str]) -> SandboxPolicy {
        SandboxPolicy {
            root: root.into(),
            temp_dir: None,
            writable: Vec::new(),
            visible: Vec::new(),
            read_only: vec![".git".into(), ".garuda".into(), ".claude".into()],
            deny_read: deny.iter().map(PathBuf::from).collect(),
            network: false,
            env: Default::default(),
        }
    }

    fn text(plan: &Plan) -> String {
        plan.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn order_makes_secrets_and_protected_paths_win() {
        use Kind::*;
        let fs = fake(&[
            ("/home/me/p", Dir),
            ("/home/me/p/.git", Dir),
            ("/home/me/p/.claude", Other),
            ("/home/me/.ssh", Dir),
            ("/home/me/.ssh/id_ed25519", Other),
            ("/home/me/.netrc", Other),
            ("/home/bob", Dir),
            ("/tmp/elsewhere", Dir),
        ]);
        let p = policy(
            "/home/me/p",
            &[
                "/home/me/.ssh",
                "/home/me/.ssh/id_ed25519",
                "/home/me/.netrc",
                "/home/me/.aws",
                "/home/bob",
                "/tmp/elsewhere",
            ],
        );
        let plan = plan(
            &info(),
            &p,
            OsStr::new("bash"),
            &["-c".into(), "true".into()],
            &fs,
        );
        assert_eq!(
            text(&plan),
            "--die-with-parent --new-session --unshare-user --disable-userns --unshare-pid \
             --unshare-ipc --unshare-uts --unshare-cgroup-try --unshare-net --cap-drop ALL \
             --ro-bind / / --dev /dev --proc /proc --tmpfs /run --tmpfs /tmp \
             --bind /home/me/p /home/me/p \
             --tmpfs /home/bob --ro-bind /dev/null /home/me/.netrc --tmpfs /home/me/.ssh \
             --ro-bind /home/me/p/.git /home/me/p/.git \
             --tmpfs /home/me/p/.garuda --remount-ro /home/me/p/.garuda \
             --ro-bind /home/me/p/.claude /home/me/p/.claude \
             --remount-ro /home/bob --remount-ro /home/me/.ssh \
             --chdir /home/me/p -- /bin/sh -c (read _ <&3; while kill -s KILL -- -1; do :; done) </dev/null >/dev/null 2>&1 & exec 3<&- \"$@\" \
             garuda-sandbox bash -c true"
        );
        assert_eq!(plan.mountpoints, vec![PathBuf::from("/home/me/p/.garuda")]);
    }

    #[test]
    fn root_inside_a_denied_home_shows_through() {
        use Kind::*;
        let fs = fake(&[
            ("/home/bob", Dir),
            ("/home/bob/p", Dir),
            ("/home/bob/.ssh", Dir),
        ]);
        let mut p = policy("/home/bob/p", &["/home/bob", "/home/bob/.ssh"]);
        p.read_only.clear();
        p.network = true;
        p.temp_dir = Some("/var/tmp/g".into());
        let t = text(&plan(&info(), &p, OsStr::new("sh"), &[], &fs));
        assert!(!t.contains("--unshare-net"), "{t}");
        assert!(t.contains("--ro-bind-try /run/systemd/resolve"), "{t}");
        assert!(
            t.contains(
                "--tmpfs /home/bob --bind /var/tmp/g /tmp --bind /home/bob/p /home/bob/p \
                 --remount-ro /home/bob --chdir"
            ),
            "{t}"
        );
        // .ssh is hidden by the /home/bob mask already; mounting on it would fail.
        assert!(!t.contains("/home/bob/.ssh"), "{t}");
    }

    #[test]
    fn a_secret_inside_the_root_is_masked_after_the_root() {
        use Kind::*;
        let fs = fake(&[("/home/me", Dir), ("/home/me/.aws", Dir)]);
        let p = policy("/home/me", &["/home/me/.aws"]);
        let t = text(&plan(&info(), &p, OsStr::new("sh"), &[], &fs));
        assert!(
            t.contains("--bind /home/me /home/me --tmpfs /home/me/.aws"),
            "{t}"
        );
    }

    #[test]
    fn a_home_under_tmp_and_the_toolchain_show_read_only_with_their_secrets_hidden() {
        use Kind::*;
        let fs = fake(&[
            ("/tmp/h", Dir),
            ("/tmp/h/.ssh", Dir),
            ("/tmp/x", Dir),
            ("/root", Dir),
            ("/root/.cargo", Dir),
            ("/root/.cargo/credentials.toml", Other),
            ("/root/.rustup", Dir),
        ]);
        let mut p = policy(
            "/tmp/x",
            &["/tmp/h/.ssh", "/root", "/root/.cargo/credentials.toml"],
        );
        p.visible = vec![
            "/tmp/h".into(),
            "/root/.cargo".into(),
            "/root/.rustup".into(),
        ];
        let t = text(&plan(&info(), &p, OsStr::new("sh"), &[], &fs));
        assert!(
            t.contains(
                "--tmpfs /root --tmpfs /tmp --ro-bind /tmp/h /tmp/h \
                 --ro-bind /root/.cargo /root/.cargo --ro-bind /root/.rustup /root/.rustup \
                 --bind /tmp/x /tmp/x \
                 --ro-bind /dev/null /root/.cargo/credentials.toml --tmpfs /tmp/h/.ssh"
            ),
            "{t}"
        );
        assert!(
            t.contains("--remount-ro /root --remount-ro /tmp/h/.ssh"),
            "{t}"
        );
    }
}
