//! The repository's git state at session start: branch, short status and recent commits,
//! read with the `git` binary under a deadline. Outside a repository, without `git`, or past
//! the deadline there is none, and the session starts without it.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Characters of `git status` kept in the note (the rest is counted, not shown).
pub const STATUS_MAX_CHARS: usize = 2_000;
/// Recent commits shown.
pub const RECENT_COMMITS: usize = 5;
/// Bytes read of one command's output.
const OUTPUT_CAP: usize = 64 * 1024;

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

/// Reads the git state of `root` within `timeout`; None outside a repository or on any
/// failure.
pub fn read_git_state(root: &Path, timeout: Duration) -> Option<GitState> {
    let deadline = Instant::now() + timeout;
    // Both run at once: the first request waits for this note, so the two git processes
    // cost one start, not two.
    let status = start_git(
        root,
        &[
            "status",
            "--porcelain=v1",
            "--branch",
            "--untracked-files=normal",
            "--ignore-submodules=dirty",
        ],
    );
    let log = start_git(
        root,
        &[
            "log",
            "--oneline",
            "--no-decorate",
            "--no-color",
            &format!("-n{RECENT_COMMITS}"),
        ],
    );
    let status = status.and_then(|g| g.finish(deadline));
    // An empty repository has no log; that is not a failure.
    let commits: Vec<String> = log
        .and_then(|g| g.finish(deadline))
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

/// A read-only git command started, its stdout drained on a thread.
struct RunningGit {
    child: std::process::Child,
    out: std::sync::mpsc::Receiver<Vec<u8>>,
}

/// Starts one read-only git command in `root`.
fn start_git(root: &Path, args: &[&str]) -> Option<RunningGit> {
    let mut child = Command::new("git")
        .arg("-C")
        .arg(root)
        // Read-only: no index refresh written, no fsmonitor hook run, no pager, no prompt.
        .args([
            "--no-optional-locks",
            "--no-pager",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "color.ui=false",
        ])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let Some(mut out) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    };
    let (tx, rx) = std::sync::mpsc::channel();
    // The pipe is drained on a thread so a large output never stalls git past the deadline.
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut out).take(OUTPUT_CAP as u64).read_to_end(&mut buf);
        let _ = std::io::copy(&mut out, &mut std::io::sink());
        let _ = tx.send(buf);
    });
    Some(RunningGit { child, out: rx })
}

impl RunningGit {
    /// Its stdout when it exits 0 before `deadline`; killed past it.
    fn finish(mut self, deadline: Instant) -> Option<String> {
        if Instant::now() >= deadline {
            let _ = self.child.kill();
            let _ = self.child.wait();
            return None;
        }
        let buf = match self
            .out
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            Ok(b) => b,
            Err(_) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
        };
        // Its stdout has closed, so it is exiting: poll from a fraction of a millisecond
        // up, not a fixed sleep that the first request would wait out.
        let mut pause = Duration::from_micros(100);
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) if s.success() => break,
                Ok(Some(_)) | Err(_) => return None,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return None;
                }
                Ok(None) => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(5));
                }
            }
        }
        Some(String::from_utf8_lossy(&buf).into_owned())
    }
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
    fn git_state_of_a_repository_and_none_outside() {
        let outside = tempfile::tempdir().unwrap();
        assert_eq!(read_git_state(outside.path(), Duration::from_secs(5)), None);
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "trunk"]);
        let empty = read_git_state(dir.path(), Duration::from_secs(5)).unwrap();
        assert!(empty.branch.contains("trunk"), "{empty:?}");
        assert!(empty.commits.is_empty());
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        git(dir.path(), &["add", "a.txt"]);
        git(dir.path(), &["commit", "-q", "-m", "first commit"]);
        std::fs::write(dir.path().join("b.txt"), "b").unwrap();
        let s = read_git_state(dir.path(), Duration::from_secs(5)).unwrap();
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
        assert_eq!(read_git_state(dir.path(), Duration::ZERO), None);
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
