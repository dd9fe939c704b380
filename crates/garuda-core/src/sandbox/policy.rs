//! What a sandboxed command may touch: the policy, its defaults, and the protected paths.

use std::path::{Path, PathBuf};

use super::SandboxError;
use super::env::EnvPolicy;

/// Paths inside the root that stay read-only, whole, whether they exist or not: they change
/// what runs later, outside the sandbox. `.git` holds the config (filters, `gpg.program`,
/// `core.fsmonitor`, aliases), hooks, `info/attributes`, and the files that move where git
/// reads its config from (`commondir`, `config.worktree`, a `.git` file holding `gitdir:`);
/// `.garuda` holds Garuda's workspace config and memory; `.claude` the settings whose hooks a
/// trusted workspace runs, and agent and skill files; `.agents` skill files. A missing one is
/// covered by an empty read-only folder for the command's life, so a command cannot create it
/// either (`git init` too: git writes in the sandbox need `outside_sandbox`, as in codex).
pub const PROTECTED_IN_ROOT: &[&str] = &[".git", ".garuda", ".claude", ".agents"];

/// Secrets under the user's home that commands cannot read: keys, cloud and registry
/// credentials, password stores, browser profiles (cookies), and Garuda's own config and
/// session transcripts.
pub const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".config/containers/auth.json",
    ".config/gh",
    ".config/hub",
    ".config/op",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".npmrc",
    ".yarnrc",
    ".pypirc",
    ".gem/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/composer/auth.json",
    ".composer/auth.json",
    ".terraform.d",
    ".vault-token",
    ".password-store",
    ".local/share/keyrings",
    ".pgpass",
    ".my.cnf",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/garuda",
    ".local/state/garuda",
];

/// Package caches under the user's home that commands may write, where they exist: installs
/// and builds fill them. None holds a credential (cargo's tokens, maven's `settings.xml` and
/// gradle's `gradle.properties` sit beside these folders, not in them).
pub const HOME_CACHES: &[&str] = &[
    ".npm",
    ".yarn/berry/cache",
    ".local/share/pnpm/store",
    ".bun/install/cache",
    "go/pkg/mod",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper/dists",
];

/// Package and build caches in the user's cache folder (`$XDG_CACHE_HOME`, else `~/.cache`)
/// that commands may write, where they exist.
pub const XDG_CACHES: &[&str] = &[
    "pip", "uv", "pypoetry", "yarn", "pnpm", "go-build", "composer", "sccache",
];

/// cargo's download caches in its home (`$CARGO_HOME`, else `~/.cargo`) that commands may
/// write, where they exist; its `credentials*` stay hidden.
pub const CARGO_CACHES: &[&str] = &["registry", "git"];

/// System files with other users' secrets (password hashes). Host SSH keys
/// (`/etc/ssh/ssh_host_*_key`) are added by listing `/etc/ssh`.
pub const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
];

/// What one sandboxed command may do. Paths are absolute; [`SandboxPolicy::for_root`] fills
/// in the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// The workspace root (canonical): readable and writable, except `read_only`.
    pub root: PathBuf,
    /// A host folder mounted at `/tmp` (and `TMPDIR`), kept between commands; `None` gives
    /// each command a fresh, empty `/tmp` that vanishes with it.
    pub temp_dir: Option<PathBuf>,
    /// More writable folders (package caches, say); missing ones are skipped.
    pub writable: Vec<PathBuf>,
    /// Paths that stay read-only even inside the root or a writable folder; relative ones are
    /// relative to the root. A missing one inside the root gets an empty read-only folder for
    /// the command's life (see [`super::spawn`]); a missing one elsewhere is skipped.
    pub read_only: Vec<PathBuf>,
    /// Paths the command cannot read (they appear empty); missing ones are skipped.
    pub deny_read: Vec<PathBuf>,
    /// Folders shown read-only although a mask would hide them: a home under `/tmp` (the
    /// sandbox's own `/tmp` hides it) and the toolchain folders (`$CARGO_HOME`,
    /// `$RUSTUP_HOME`, which may sit in a home the sandbox denies). Secrets in them stay
    /// hidden; missing ones are skipped.
    pub visible: Vec<PathBuf>,
    /// Whether the command reaches the network (host loopback included).
    pub network: bool,
    /// The command's environment.
    pub env: EnvPolicy,
}

impl SandboxPolicy {
    /// The defaults for `root`: no network, a fresh `/tmp`, the protected paths read-only, and
    /// the secrets of the user whose home and XDG folders the server's environment names.
    pub fn for_root(root: &Path) -> Result<Self, SandboxError> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut garuda_dirs = Vec::new();
        for (var, sub) in [("XDG_CONFIG_HOME", "garuda"), ("XDG_STATE_HOME", "garuda")] {
            if let Some(base) = std::env::var_os(var).filter(|v| !v.is_empty()) {
                garuda_dirs.push(PathBuf::from(base).join(sub));
            }
        }
        Self::for_root_with(root, home.as_deref(), &garuda_dirs)
    }

    /// Like [`SandboxPolicy::for_root`] with the home folder and extra secret folders given
    /// (Garuda's config and state folders when `XDG_*` moves them out of the home).
    pub fn for_root_with(
        root: &Path,
        home: Option<&Path>,
        extra_secrets: &[PathBuf],
    ) -> Result<Self, SandboxError> {
        let root = canonical_root(root)?;
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let toolchain = [
            var("CARGO_HOME").map(PathBuf::from),
            var("RUSTUP_HOME").map(PathBuf::from),
        ];
        let visible = visible_folders(home, &toolchain);
        let cache_home = var("XDG_CACHE_HOME").map(PathBuf::from);
        let writable = package_caches(home, toolchain[0].as_deref(), cache_home.as_deref());
        let mut deny_read = default_denied_reads(home, extra_secrets);
        // cargo's registry tokens live in its home, wherever `CARGO_HOME` puts it.
        if let Some(cargo) = &toolchain[0] {
            deny_read.extend(CARGO_SECRETS.iter().map(|f| cargo.join(f)));
        }
        Ok(SandboxPolicy {
            root,
            temp_dir: None,
            writable,
            read_only: PROTECTED_IN_ROOT.iter().map(PathBuf::from).collect(),
            deny_read,
            visible,
            network: false,
            env: EnvPolicy::default(),
        })
    }

    /// Checks what the mount plan relies on: a usable root and absolute paths.
    pub(crate) fn validate(&self) -> Result<(), SandboxError> {
        canonical_root(&self.root)?;
        let absolute = self
            .writable
            .iter()
            .chain(&self.deny_read)
            .chain(self.temp_dir.iter());
        for p in absolute {
            if !p.is_absolute() {
                return Err(SandboxError::RelativePath(p.clone()));
            }
        }
        Ok(())
    }

    /// `read_only` with relative entries joined to the root.
    pub(crate) fn read_only_paths(&self) -> Vec<PathBuf> {
        self.read_only
            .iter()
            .map(|p| {
                if p.is_absolute() {
                    p.clone()
                } else {
                    self.root.join(p)
                }
            })
            .collect()
    }
}

/// The root as a canonical folder; `/` is refused because it would make the whole system
/// writable.
fn canonical_root(root: &Path) -> Result<PathBuf, SandboxError> {
    let bad = |message: String| SandboxError::BadRoot {
        path: root.to_path_buf(),
        message,
    };
    let canon = root.canonicalize().map_err(|e| bad(e.to_string()))?;
    if !canon.is_dir() {
        return Err(bad("not a folder".into()));
    }
    if canon.parent().is_none() {
        return Err(bad("the filesystem root cannot be a workspace root".into()));
    }
    Ok(canon)
}

/// The files of a cargo home that hold registry tokens.
const CARGO_SECRETS: &[&str] = &["credentials", "credentials.toml"];

/// Where the sandbox puts file systems of its own: a host folder under one is hidden.
pub(crate) const REPLACED: &[&str] = &["/tmp", "/run", "/dev", "/proc"];

/// The folders to show read-only ([`SandboxPolicy::visible`]): `home` when the sandbox's own
/// `/tmp` (or `/run`) would hide it, and the toolchain folders (`toolchain`, else `.cargo`
/// and `.rustup` in `home`), so commands find `cargo` and `rustc` from a checkout with its
/// home under `/tmp`.
pub(crate) fn visible_folders(home: Option<&Path>, toolchain: &[Option<PathBuf>]) -> Vec<PathBuf> {
    let hidden = |p: &Path| REPLACED.iter().any(|r| p.starts_with(r));
    let mut out = Vec::new();
    if let Some(h) = home.and_then(|h| h.canonicalize().ok())
        && hidden(&h)
    {
        out.push(h);
    }
    let defaults = [".cargo", ".rustup"].map(|d| home.map(|h| h.join(d)));
    for (given, default) in toolchain.iter().zip(defaults) {
        if let Some(dir) = given.clone().or(default)
            && let Ok(dir) = dir.canonicalize()
            && dir.is_dir()
            && !out.iter().any(|o| dir.starts_with(o))
        {
            out.push(dir);
        }
    }
    out
}

/// The package caches that exist ([`HOME_CACHES`] under `home`, [`XDG_CACHES`] under
/// `cache_home` or `~/.cache`, [`CARGO_CACHES`] under `cargo_home` or `~/.cargo`), canonical.
/// A cache that is a link leading out of its folder (to `/`, say) is skipped: it would make
/// that place writable.
pub fn package_caches(
    home: Option<&Path>,
    cargo_home: Option<&Path>,
    cache_home: Option<&Path>,
) -> Vec<PathBuf> {
    let cache_home = cache_home
        .map(Path::to_path_buf)
        .or_else(|| home.map(|h| h.join(".cache")));
    let cargo_home = cargo_home
        .map(Path::to_path_buf)
        .or_else(|| home.map(|h| h.join(".cargo")));
    let groups: [(Option<PathBuf>, &[&str]); 3] = [
        (home.map(Path::to_path_buf), HOME_CACHES),
        (cache_home, XDG_CACHES),
        (cargo_home, CARGO_CACHES),
    ];
    let mut out = Vec::new();
    for (base, names) in groups {
        let Some(base) = base.and_then(|b| b.canonicalize().ok()) else {
            continue;
        };
        for name in names {
            if let Ok(dir) = base.join(name).canonicalize()
                && dir.is_dir()
                && dir.starts_with(&base)
                && dir != base
                && !out.contains(&dir)
            {
                out.push(dir);
            }
        }
    }
    out
}

/// The default unreadable paths: [`HOME_SECRETS`] under `home`, `extra`, every other user's
/// home (the folders in `/home` and `/root`, except `home` itself), [`SYSTEM_SECRETS`] and the
/// host's SSH keys.
pub fn default_denied_reads(home: Option<&Path>, extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let own = home.and_then(|h| h.canonicalize().ok());
    if let Some(h) = home {
        out.extend(HOME_SECRETS.iter().map(|s| h.join(s)));
    }
    out.extend(extra.iter().cloned());
    let mut homes: Vec<PathBuf> = std::fs::read_dir("/home")
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    homes.push(PathBuf::from("/root"));
    for h in homes {
        let canon = h.canonicalize().unwrap_or_else(|_| h.clone());
        if Some(&canon) != own.as_ref() && canon.is_dir() {
            out.push(h);
        }
    }
    out.extend(SYSTEM_SECRETS.iter().map(PathBuf::from));
    if let Ok(rd) = std::fs::read_dir("/etc/ssh") {
        for e in rd.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("ssh_host_") && name.ends_with("_key") {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_deny_secrets_and_other_homes_but_not_the_own_home() {
        let home = tempfile::tempdir().unwrap();
        let denied = default_denied_reads(Some(home.path()), &[PathBuf::from("/x/garuda")]);
        assert!(denied.contains(&home.path().join(".ssh")));
        assert!(denied.contains(&home.path().join(".config/garuda")));
        assert!(denied.contains(&PathBuf::from("/x/garuda")));
        assert!(denied.contains(&PathBuf::from("/etc/shadow")));
        assert!(!denied.contains(&home.path().to_path_buf()));
        // /root is someone else's home unless it is ours.
        if Path::new("/root").is_dir() {
            assert!(denied.contains(&PathBuf::from("/root")));
        }
    }

    #[test]
    fn existing_package_caches_are_writable_and_links_out_are_not() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path().canonicalize().unwrap();
        for d in [".npm", ".cache/pip", ".cargo/registry", "go/pkg/mod"] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        std::fs::create_dir_all(h.join(".gradle")).unwrap();
        std::os::unix::fs::symlink("/", h.join(".gradle/caches")).unwrap();
        let caches = package_caches(Some(&h), None, None);
        assert_eq!(
            caches,
            vec![
                h.join(".npm"),
                h.join("go/pkg/mod"),
                h.join(".cache/pip"),
                h.join(".cargo/registry")
            ]
        );
        // Given homes win over the defaults.
        let cargo = tempfile::tempdir().unwrap();
        std::fs::create_dir(cargo.path().join("git")).unwrap();
        let caches = package_caches(Some(&h), Some(cargo.path()), Some(&h.join("nope")));
        assert!(caches.contains(&cargo.path().canonicalize().unwrap().join("git")));
        assert!(!caches.contains(&h.join(".cache/pip")));
        assert!(!caches.contains(&h.join(".cargo/registry")));
        // The policy writes them, and hides cargo's tokens still.
        let root = tempfile::tempdir().unwrap();
        let p = SandboxPolicy::for_root_with(root.path(), Some(&h), &[]).unwrap();
        assert!(p.writable.contains(&h.join(".npm")), "{:?}", p.writable);
        assert!(p.deny_read.contains(&h.join(".cargo/credentials.toml")));
    }

    #[test]
    fn root_must_be_a_real_folder_other_than_slash() {
        assert!(matches!(
            SandboxPolicy::for_root_with(Path::new("/"), None, &[]),
            Err(SandboxError::BadRoot { .. })
        ));
        assert!(matches!(
            SandboxPolicy::for_root_with(Path::new("/nonexistent/garuda"), None, &[]),
            Err(SandboxError::BadRoot { .. })
        ));
        let d = tempfile::tempdir().unwrap();
        let p = SandboxPolicy::for_root_with(d.path(), None, &[]).unwrap();
        assert_eq!(p.root, d.path().canonicalize().unwrap());
        assert!(!p.network);
        assert_eq!(
            p.read_only_paths(),
            vec![
                p.root.join(".git"),
                p.root.join(".garuda"),
                p.root.join(".claude"),
                p.root.join(".agents"),
            ]
        );
    }
}
