//! Stdio servers' processes: each in its own process group (so a server's own children go
//! with it), a clean environment, stderr to the log with its last lines kept, and a waiter
//! that notices the exit.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;

use crate::mcp::config::McpServerConfig;

/// Variables a stdio server inherits from Garuda's environment; everything else (provider
/// keys above all) stays out unless the server's `env` names it.
pub const BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TMPDIR",
    "TZ",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
];

/// Lines of a server's stderr kept to explain a failure.
const STDERR_TAIL: usize = 5;
/// Longest stderr line kept (characters).
const STDERR_LINE: usize = 300;
/// How long a stopping server gets after SIGTERM before SIGKILL.
pub(super) const TERM_GRACE: Duration = Duration::from_secs(2);

/// A spawned stdio server's process group.
pub(super) struct Child {
    pgid: i32,
    exited: Arc<AtomicBool>,
    pub(super) status: watch::Receiver<Option<String>>,
}

impl Child {
    pub(super) fn signal(&self, sig: rustix::process::Signal) {
        // After the leader is reaped its pid could in principle be reused; the waiter kills
        // the group and sets `exited` at that moment, so later signals are skipped.
        if self.exited.load(Ordering::SeqCst) {
            return;
        }
        if let Some(pid) = rustix::process::Pid::from_raw(self.pgid) {
            let _ = rustix::process::kill_process_group(pid, sig);
        }
    }
}

/// Our ends of a stdio server's stdout and stdin: the transport rmcp speaks over.
pub(super) type Pipes = (tokio::process::ChildStdout, tokio::process::ChildStdin);

/// The last lines of a server's stderr, kept to explain a failure, and whether its end was
/// read (so the tail is complete). Clones share the lines.
#[derive(Clone)]
pub(super) struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    eof: watch::Sender<bool>,
}

impl StderrTail {
    pub(super) fn new() -> StderrTail {
        StderrTail {
            lines: Arc::new(Mutex::new(VecDeque::new())),
            eof: watch::Sender::new(false),
        }
    }

    /// Takes the lines even if a panicking thread poisoned the lock: a queue of strings
    /// stays consistent between statements.
    fn lines(&self) -> MutexGuard<'_, VecDeque<String>> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, line: &str) {
        let mut t = self.lines();
        if t.len() == STDERR_TAIL {
            t.pop_front();
        }
        t.push_back(line.chars().take(STDERR_LINE).collect());
    }

    /// Waits briefly for the child's stderr to end, so a dead server's last words are read.
    pub(super) async fn settled(&self) {
        let mut eof = self.eof.subscribe();
        let _ = tokio::time::timeout(Duration::from_millis(300), eof.wait_for(|done| *done)).await;
    }

    /// The kept lines on one line, if there are any.
    pub(super) fn text(&self) -> Option<String> {
        let tail = self.lines();
        (!tail.is_empty()).then(|| tail.iter().cloned().collect::<Vec<_>>().join(" | "))
    }
}

/// Starts a stdio server in its own process group (in `cwd` unless its config names a
/// folder), with its stderr going to the log and into `stderr`, and a waiter that calls
/// `on_exit` with the reason once the process has ended and its stderr settled.
pub(super) fn spawn(
    name: &str,
    config: &McpServerConfig,
    command: &str,
    args: &[String],
    cwd: Option<PathBuf>,
    stderr: &StderrTail,
    on_exit: impl FnOnce(String) + Send + 'static,
) -> Result<(Child, Pipes), String> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(
            BASE_ENV
                .iter()
                .filter_map(|k| std::env::var_os(k).map(|v| (*k, v))),
        )
        .envs(&config.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so the whole tree can be signalled at once.
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = config.cwd.clone().or(cwd) {
        cmd.current_dir(dir);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start `{command}`: {e}"))?;
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err("the child's pipes are missing".into());
    };
    if let Some(pipe) = child.stderr.take() {
        let name = name.to_string();
        let tail = stderr.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(pipe);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match lines.read_until(b'\n', &mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let line = String::from_utf8_lossy(&buf);
                let line = line.trim_end();
                if line.is_empty() {
                    continue;
                }
                tracing::info!(target: "garuda::mcp", server = %name, "stderr: {line}");
                tail.push(line);
            }
            tail.eof.send_replace(true);
        });
    }
    let exited = Arc::new(AtomicBool::new(false));
    let (tx, rx) = watch::channel(None);
    let handle = Child {
        pgid,
        exited: exited.clone(),
        status: rx,
    };
    let tail = stderr.clone();
    tokio::spawn(async move {
        let status = child.wait().await;
        // Take the rest of the tree down with the leader, before its pid can be reused.
        if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        exited.store(true, Ordering::SeqCst);
        let desc = match status {
            Ok(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
                (Some(c), _) => format!("exited with status {c}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => "exited".to_string(),
            },
            Err(e) => format!("lost track of the process: {e}"),
        };
        let _ = tx.send(Some(desc.clone()));
        tail.settled().await;
        let mut reason = desc;
        if let Some(text) = tail.text() {
            reason.push_str(&format!("; stderr: {text}"));
        }
        on_exit(reason);
    });
    Ok((handle, (stdout, stdin)))
}
