//! The repository's git state at session start: branch, short status and recent commits,
//! read with the `git` binary under a deadline. A repository's configuration can name programs
//! git runs (a clean filter during `status`, `gpg.program` for `log.showSignature`,
//! `core.fsmonitor`, a pager, …) and `.git/commondir` moves where that configuration is read
//! from, so git runs as the user would only when the repository's own configuration is inert
//! (`git_config`: an allow-list of keys, no `commondir`, no `config.worktree`, no submodules);
//! otherwise it runs in the command sandbox (root read-only, no network, the environment
//! allow-list), or not at all. Outside a repository, without `git`, or past the deadline there
//! is no state, and the session starts without it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::git_config::config_is_inert;
use crate::fsroot::{EntryKind, Root};
use crate::sandbox::{EnvPolicy, SandboxCommand, SandboxPolicy, SandboxSettings, SandboxState};

/// Characters of `git status` kept in the note (the rest is counted, not shown).
pub(crate) const STATUS_MAX_CHARS: usize = 2_000;
/// Recent commits shown.
pub(crate) const RECENT_COMMITS: usize = 5;
/// Bytes read of one command's output.
const OUTPUT_CAP: usize = 64 * 1024;
/// Bytes of `.git/config` read to judge it; a larger one is not inert.
const CONFIG_CAP: u64 = 64 * 1024;

/// What `git` said about the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitState {
    /// The branch line of `git status --branch` (`main...origin/main [ahead 1]`).
    pub branch: String,
    /// `git status --porcelain` lines (may be empty: a clean tree).
    pub status: Vec<String>,
    /// `git log --oneline` lines, newest first (empty before the first commit).
    pub commits: Vec<String>,
}

/// How git runs for one root: as the user would (the repository's configuration is inert) or
/// in the machine's sandbox; either way with a policy that writes nothing.
#[derive(Debug, Clone)]
pub struct GitSandbox {
    /// The canonical root git runs in.
    root: PathBuf,
    /// The environment git gets (an allow-list), confined or not.
    env: EnvPolicy,
    /// The sandbox and its policy, when the repository's configuration is not inert.
    confined: Option<(SandboxState, SandboxPolicy)>,
}

impl GitSandbox {
    /// How git runs for `root`, or why it cannot: a configuration that is not inert needs the
    /// sandbox, and the machine has none or the user's config turned it off (then git does
    /// not run: the rule is confined or not at all).
    ///
    /// `state` is asked for only when the sandbox is needed: probing it is not on the path
    /// to the first request of an ordinary repository.
    pub fn new<'a>(
        state: impl FnOnce() -> &'a SandboxState,
        settings: &SandboxSettings,
        root: &Path,
    ) -> Result<GitSandbox, String> {
        // git only reads: the root read-only (protected paths stay as they are), no caches,
        // no network, nothing the user added for commands; its own config folder besides.
        let env = EnvPolicy::with_extra(&["XDG_CONFIG_HOME".into()]);
        let root = std::fs::canonicalize(root).map_err(|e| e.to_string())?;
        // Outside any repository there is nothing to read: git would only say so.
        let Some(top) = repository_top(&root) else {
            return Err("not in a git repository".into());
        };
        if repository_is_inert(top) {
            // Unconfined, only the root and the environment count: the mount plan's secret
            // list (many canonicalized paths) is not made on the path to the first request.
            return Ok(GitSandbox {
                root,
                env,
                confined: None,
            });
        }
        if !settings.enabled {
            return Err(
                "the repository's git config names more than the usual keys, and the \
                        command sandbox is turned off ([sandbox] enabled = false)"
                    .into(),
            );
        }
        let state = state();
        if !state.available() {
            let why = state.reason.as_deref().unwrap_or("no sandbox was found");
            return Err(format!(
                "the repository's git config names more than the usual keys, and there is no \
                 sandbox: {why}"
            ));
        }
        let mut policy = settings.policy(&root).map_err(|e| e.to_string())?;
        policy.read_only.push(policy.root.clone());
        policy.writable.clear();
        policy.network = false;
        policy.temp_dir = None;
        policy.env = env.clone();
        Ok(GitSandbox {
            root,
            env,
            confined: Some((state.clone(), policy)),
        })
    }

    /// True when git runs in the sandbox.
    pub fn confined(&self) -> bool {
        self.confined.is_some()
    }
}

/// The folder whose `.git` git would find for the canonical `root`: the root or the nearest
/// folder above it that holds one (a folder or a `gitdir:` file). None outside any repository.
fn repository_top(root: &Path) -> Option<&Path> {
    root.ancestors()
        .find(|d| d.join(".git").symlink_metadata().is_ok())
}

/// True when `top` (see [`repository_top`]) is a repository whose own files name nothing git
/// could run for `status` and `log`: `.git` is a folder (no `gitdir:` file), with no
/// `commondir` or `config.worktree` moving its config, no submodules (`.gitmodules`: git would
/// read theirs), and an inert `.git/config`, read confined to `top`.
fn repository_is_inert(root: &Path) -> bool {
    let Ok(root) = Root::open(root) else {
        return false;
    };
    let is = |rel: &str, want: EntryKind| root.kind(Path::new(rel)).ok().flatten() == Some(want);
    let absent = |rel: &str| matches!(root.kind(Path::new(rel)), Ok(None));
    if !is(".git", EntryKind::Dir)
        || !absent(".git/commondir")
        || !absent(".git/config.worktree")
        || !absent(".gitmodules")
    {
        return false;
    }
    match root.read_bytes(Path::new(".git/config"), CONFIG_CAP) {
        Ok((bytes, total)) if total <= CONFIG_CAP => {
            std::str::from_utf8(&bytes).is_ok_and(config_is_inert)
        }
        _ => false,
    }
}

/// Reads the git state of `root` within `timeout`, with git run as `sandbox` says; None
/// outside a repository or on any failure. Blocks: call it off the request loop.
pub fn read_git_state(root: &Path, timeout: Duration, sandbox: &GitSandbox) -> Option<GitState> {
    let deadline = std::time::Instant::now() + timeout;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    // A deadline already past starts nothing: a timer that has elapsed is only noticed when
    // the runtime next turns, by which time a fast git may have finished.
    if std::time::Instant::now() >= deadline {
        return None;
    }
    rt.block_on(async {
        tokio::time::timeout_at(deadline.into(), read_both(root, sandbox))
            .await
            .ok()
            .flatten()
    })
}

async fn read_both(root: &Path, sandbox: &GitSandbox) -> Option<GitState> {
    // Both run at once: the first request waits for this note, so the two git processes (or
    // sandboxes) cost one start, not two.
    let log_n = format!("-n{RECENT_COMMITS}");
    let status_args = [
        "status",
        "--porcelain=v1",
        "--branch",
        "--untracked-files=normal",
        "--ignore-submodules=dirty",
    ];
    // No signature check: it would run `gpg.program` (the user's own config may set
    // `log.showSignature`), and the note shows subjects only.
    let log_args = [
        "log",
        "--oneline",
        "--no-decorate",
        "--no-color",
        "--no-show-signature",
        &log_n,
    ];
    let (status, log) = tokio::join!(
        run_git(root, sandbox, &status_args),
        run_git(root, sandbox, &log_args)
    );
    // An empty repository has no log; that is not a failure.
    let commits: Vec<String> = log
        .map(|l| l.lines().map(str::to_string).collect())
        .unwrap_or_default();
    let status = status?;
    let mut lines = status.lines();
    let branch = lines.next()?.strip_prefix("## ")?.trim().to_string();
    let status: Vec<String> = lines.map(str::to_string).collect();
    Some(GitState {
        branch,
        status,
        commits,
    })
}

/// One read-only git command in the sandbox: its stdout when it exits 0. Dropped (the
/// deadline), the sandbox and everything in it ends.
async fn run_git(root: &Path, sandbox: &GitSandbox, args: &[&str]) -> Option<String> {
    let mut full: Vec<std::ffi::OsString> = vec!["-C".into(), root.as_os_str().to_owned()];
    // No index refresh written, no fsmonitor, no pager, no prompt: the sandbox would stop
    // them anyway, this keeps git from trying.
    for a in [
        "--no-optional-locks",
        "--no-pager",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "color.ui=false",
    ]
    .iter()
    .chain(args)
    {
        full.push(a.into());
    }
    let env = [
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GIT_OPTIONAL_LOCKS", "0"),
        ("LC_ALL", "C"),
    ];
    let (out, status) = match &sandbox.confined {
        Some((state, policy)) => {
            let mut cmd = SandboxCommand::new(state, policy, "git", &full).ok()?;
            for (k, v) in env {
                cmd.env(k, v);
            }
            cmd.stdout(Stdio::piped());
            let mut child = cmd.spawn().await.ok()?;
            let out = drain(child.take_stdout()?).await?;
            (out, child.wait().await.ok()?)
        }
        None => {
            // An inert repository's git starts directly: the sandbox's pre-exec setup (the
            // parent-death signal) makes every spawn a fork of the whole server, about half a
            // millisecond each on the path to the first request. The deadline's drop kills it.
            let mut cmd = tokio::process::Command::new("git");
            cmd.args(&full)
                .env_clear()
                .envs(sandbox.env.resolve(&|n| std::env::var_os(n)))
                .envs(env)
                .current_dir(&sandbox.root)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true);
            let mut child = cmd.spawn().ok()?;
            let out = drain(child.stdout.take()?).await?;
            (out, child.wait().await.ok()?)
        }
    };
    status
        .success()
        .then(|| String::from_utf8_lossy(&out).into_owned())
}

/// The first [`OUTPUT_CAP`] bytes of `out`; the rest is read and dropped so git is never
/// stalled on a full pipe.
async fn drain(out: impl tokio::io::AsyncRead + Unpin) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut capped = out.take(OUTPUT_CAP as u64);
    capped.read_to_end(&mut buf).await.ok()?;
    let _ = tokio::io::copy(&mut capped.into_inner(), &mut tokio::io::sink()).await;
    Some(buf)
}

/// The `<garuda_note>` the model gets with its first message (pure).
pub fn git_note(state: &GitState) -> String {
    let mut status = String::new();
    let mut left = 0usize;
    for line in &state.status {
        if status.chars().count() + line.chars().count() + 1 > STATUS_MAX_CHARS {
            left += 1;
            continue;
        }
        status.push_str(line);
        status.push('\n');
    }
    if status.is_empty() && left == 0 {
        status.push_str("(clean)\n");
    }
    if left > 0 {
        status.push_str(&format!(
            "... and {left} more changed path(s); run `git status` for all of them\n"
        ));
    }
    let commits = if state.commits.is_empty() {
        "(no commits yet)\n".to_string()
    } else {
        state.commits.iter().map(|c| format!("{c}\n")).collect()
    };
    format!(
        "<garuda_note>Git state of the workspace when this session started (a snapshot: it \
         is not updated as the session goes on).\nBranch: {}\n\nStatus:\n{status}\nRecent \
         commits:\n{commits}</garuda_note>",
        state.branch
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The sandbox git runs in here; None on a machine without one (the tests then check
    /// only that nothing runs).
    fn confined(root: &Path) -> Result<GitSandbox, String> {
        GitSandbox::new(crate::sandbox::probe, &SandboxSettings::default(), root)
    }

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn without_a_sandbox_git_runs_only_for_an_inert_repository() {
        let dir = tempfile::tempdir().unwrap();
        let off = SandboxSettings {
            enabled: false,
            ..SandboxSettings::default()
        };
        let none = SandboxState::none("no bwrap");
        // No repository here or above: nothing to run.
        let why = GitSandbox::new(crate::sandbox::probe, &off, dir.path()).unwrap_err();
        assert_eq!(why, "not in a git repository");
        // A repository as git init writes it runs git as the user would, sandbox or not.
        git(dir.path(), &["init", "-q", "-b", "trunk"]);
        let plain = GitSandbox::new(|| &none, &off, dir.path()).unwrap();
        assert!(!plain.confined());
        let s = read_git_state(dir.path(), Duration::from_secs(20), &plain).unwrap();
        assert!(s.branch.contains("trunk"), "{s:?}");
        // A subfolder is judged by the repository above it.
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(
            !GitSandbox::new(|| &none, &off, &dir.path().join("sub"))
                .unwrap()
                .confined()
        );
        // A filter in its config: the sandbox or nothing.
        git(dir.path(), &["config", "filter.x.clean", "cat"]);
        let why = GitSandbox::new(|| &none, &off, dir.path()).unwrap_err();
        assert!(why.contains("turned off"), "{why}");
        let why = GitSandbox::new(|| &none, &SandboxSettings::default(), dir.path()).unwrap_err();
        assert!(why.ends_with("no bwrap"), "{why}");
        assert!(GitSandbox::new(|| &none, &off, &dir.path().join("sub")).is_err());
        if let Ok(boxed) = confined(dir.path()) {
            assert!(boxed.confined());
        }
        // So do a commondir, a config.worktree and submodules.
        git(dir.path(), &["config", "--unset", "filter.x.clean"]);
        assert!(GitSandbox::new(|| &none, &off, dir.path()).is_ok());
        for f in [".git/commondir", ".git/config.worktree", ".gitmodules"] {
            std::fs::write(dir.path().join(f), "x").unwrap();
            assert!(GitSandbox::new(|| &none, &off, dir.path()).is_err(), "{f}");
            std::fs::remove_file(dir.path().join(f)).unwrap();
        }
    }

    #[test]
    fn git_state_of_a_repository_and_none_outside() {
        let outside = tempfile::tempdir().unwrap();
        assert_eq!(
            confined(outside.path()).unwrap_err(),
            "not in a git repository"
        );
        let timeout = Duration::from_secs(20);
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "trunk"]);
        let sb = confined(dir.path()).unwrap();
        let empty = read_git_state(dir.path(), timeout, &sb).unwrap();
        assert!(empty.branch.contains("trunk"), "{empty:?}");
        assert!(empty.commits.is_empty());
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        git(dir.path(), &["add", "a.txt"]);
        git(dir.path(), &["commit", "-q", "-m", "first commit"]);
        std::fs::write(dir.path().join("b.txt"), "b").unwrap();
        let s = read_git_state(dir.path(), timeout, &sb).unwrap();
        assert_eq!(s.branch, "trunk");
        assert_eq!(s.status, vec!["?? b.txt"]);
        assert_eq!(s.commits.len(), 1);
        assert!(s.commits[0].ends_with("first commit"));
        let note = git_note(&s);
        assert!(note.starts_with("<garuda_note>Git state"));
        assert!(note.contains("Branch: trunk\n"));
        assert!(note.contains("?? b.txt\n"));
        assert!(note.contains("first commit\n"));
        // A deadline already past gives nothing rather than waiting.
        assert_eq!(read_git_state(dir.path(), Duration::ZERO, &sb), None);
    }

    #[test]
    fn a_long_status_is_cut_and_counted() {
        let s = GitState {
            branch: "main".into(),
            status: (0..500).map(|i| format!("?? file-{i:04}.txt")).collect(),
            commits: Vec::new(),
        };
        let note = git_note(&s);
        assert!(note.contains("?? file-0000.txt"));
        assert!(!note.contains("?? file-0499.txt"));
        assert!(note.contains("more changed path(s)"));
        assert!(note.contains("(no commits yet)"));
        assert!(note.chars().count() < STATUS_MAX_CHARS + 600);
        let clean = git_note(&GitState {
            status: Vec::new(),
            ..s
        });
        assert!(clean.contains("Status:\n(clean)\n"));
    }
}
