//! Running one event's hooks: each `bash -c COMMAND` (`sh` when there is no bash) in its own
//! process group, in the workspace root, the input JSON on stdin, all of the event's hooks at
//! once. Hooks are the user's own code and run outside the command sandbox (see
//! [`super::TrustList`] for why workspace hooks need trust), but with the sandbox's process
//! handling: a parent-death signal, and a group that is killed at a timeout, at a cancel, and
//! when the hook is done (a process a hook wants to outlive it must leave the group, e.g.
//! `setsid`); and with the commands' environment allow-list, never the server's environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::output::{HookExit, HookOutcome, HookReport, HookRun, interpret};
use super::{Hook, HookInput, HookSet};
use crate::sandbox::{EnvPolicy, SandboxCommand, SandboxPolicy};

/// Bytes of stdout and of stderr kept per hook; the rest is read and dropped, so a hook that
/// prints without end neither blocks on a full pipe nor fills memory.
pub const OUTPUT_CAP_BYTES: usize = 64 << 10;

/// The workspace root, for every hook.
pub const ENV_PROJECT_DIR: &str = "GARUDA_PROJECT_DIR";
/// The workspace root again, for hooks imported from Claude Code.
pub const ENV_CLAUDE_PROJECT_DIR: &str = "CLAUDE_PROJECT_DIR";

/// How hooks run.
#[derive(Debug, Clone)]
pub struct RunLimits {
    /// Bytes of stdout and of stderr kept.
    pub output_cap: usize,
    /// How long the output of a hook that exited may still take to end (a background process
    /// holding its stdout) before its group is killed.
    pub exit_grace: Duration,
    /// Names passed from the server's environment besides [`crate::sandbox::ENV_ALLOW_LIST`]:
    /// the user's `[sandbox] env` and `[hooks] env`.
    pub env: Vec<String>,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            output_cap: OUTPUT_CAP_BYTES,
            exit_grace: Duration::from_secs(1),
            env: Vec::new(),
        }
    }
}

impl HookSet {
    /// Runs the hooks matching `input` (all at once) and merges their results in config
    /// order. Cancelling `cancel` kills the hooks still running; the outcome then says
    /// `cancelled` and holds only what finished.
    pub async fn run(&self, input: &HookInput, cancel: &CancellationToken) -> HookOutcome {
        let hooks = self.matching(input.event(), input.subject());
        let limits = RunLimits {
            env: self.env_names().to_vec(),
            ..RunLimits::default()
        };
        run_hooks(&hooks, input, self.root(), cancel, &limits).await
    }
}

/// Runs `hooks` for `input` in `root` and merges their results in the order given.
pub async fn run_hooks(
    hooks: &[&Hook],
    input: &HookInput,
    root: &Path,
    cancel: &CancellationToken,
    limits: &RunLimits,
) -> HookOutcome {
    let event = input.event();
    if hooks.is_empty() {
        return HookOutcome::none(event);
    }
    // Two renderings at most: Garuda's names, and Claude Code's for imported hooks.
    let native = serde_json::to_vec(&input.to_json(false)).unwrap_or_default();
    let claude = if hooks.iter().any(|h| h.origin.is_claude()) {
        serde_json::to_vec(&input.to_json(true)).unwrap_or_default()
    } else {
        Vec::new()
    };
    let shell = shell();
    let runs = futures_util::future::join_all(hooks.iter().map(|h| {
        let stdin = if h.origin.is_claude() {
            &claude
        } else {
            &native
        };
        run_one(h, stdin.clone(), root, &shell, cancel, limits)
    }))
    .await;
    let cancelled = runs.iter().any(|r| r.exit == HookExit::Cancelled);
    let results = hooks
        .iter()
        .zip(runs)
        .map(|(h, run)| {
            let mut result = interpret(event, &run, &label(&h.command));
            // A hook written for Claude Code answers in Claude Code's shape (`file_path`).
            if h.origin.is_claude()
                && let (Some(updated), super::EventData::PreToolUse { tool_name, .. }) =
                    (&result.updated_input, &input.data)
            {
                result.updated_input = Some(super::claude::garuda_tool_input(
                    tool_name, updated, &input.cwd,
                ));
            }
            let report = HookReport {
                command: h.command.clone(),
                origin: h.origin.clone(),
                exit: run.exit,
                elapsed: run.elapsed,
                blocked: false,
            };
            (result, report)
        })
        .collect();
    let mut outcome = HookOutcome::merge(event, results);
    outcome.cancelled = cancelled;
    outcome
}

/// A command short enough for a warning line.
fn label(command: &str) -> String {
    let one: String = command.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > 60 {
        format!("{}…", one.chars().take(59).collect::<String>())
    } else {
        one
    }
}

/// `bash` from PATH, else `sh` (Claude Code's hooks are bash command lines).
fn shell() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("bash"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

/// The environment a hook gets: the commands' allow-list plus the names the user's config
/// adds, and the project folder. Never the server's whole environment: a deny-list of
/// secret-looking names misses `GITHUB_PAT` or a password inside `DATABASE_URL`.
fn env_policy(root: &Path, claude: bool, extra: &[String]) -> EnvPolicy {
    let mut policy = EnvPolicy::with_extra(extra);
    let root = root.display().to_string();
    policy.set.push((ENV_PROJECT_DIR.to_string(), root.clone()));
    if claude {
        policy.set.push((ENV_CLAUDE_PROJECT_DIR.to_string(), root));
    }
    policy
}

#[derive(Default)]
struct Capture {
    kept: Vec<u8>,
    truncated: bool,
}

/// Reads `r` to its end into `into`, keeping at most `cap` bytes.
async fn pump<R: AsyncRead + Unpin>(mut r: R, cap: usize, into: Arc<Mutex<Capture>>) {
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut c = into.lock().unwrap_or_else(|p| p.into_inner());
        let room = cap.saturating_sub(c.kept.len());
        c.kept.extend_from_slice(&buf[..n.min(room)]);
        if n > room {
            c.truncated = true;
        }
    }
}

fn take(c: &Arc<Mutex<Capture>>) -> (String, bool) {
    let c = c.lock().unwrap_or_else(|p| p.into_inner());
    (String::from_utf8_lossy(&c.kept).into_owned(), c.truncated)
}

async fn run_one(
    hook: &Hook,
    stdin: Vec<u8>,
    root: &Path,
    shell: &Path,
    cancel: &CancellationToken,
    limits: &RunLimits,
) -> HookRun {
    let start = Instant::now();
    let failed = |e: String| HookRun {
        exit: HookExit::SpawnFailed(e),
        stdout: String::new(),
        stderr: String::new(),
        truncated: false,
        elapsed: start.elapsed(),
    };
    if cancel.is_cancelled() {
        return HookRun {
            exit: HookExit::Cancelled,
            ..failed(String::new())
        };
    }
    // A workspace hook's scripts must still be the ones trusted: a command the model ran
    // during the session may have rewritten one, and the hook would run it unsandboxed.
    if let Some(expected) = &hook.scripts {
        let now = crate::fsroot::Root::open(root)
            .map(|r| super::digest::scripts_digest(&hook.command, &r))
            .ok();
        if now.as_ref() != Some(expected) {
            return failed(format!(
                "not run: a script its command names changed since the session started; if \
                 the change is yours, run `garuda trust {}` and start a new session",
                root.display()
            ));
        }
    }
    let policy = SandboxPolicy {
        root: root.to_path_buf(),
        temp_dir: None,
        writable: Vec::new(),
        read_only: Vec::new(),
        deny_read: Vec::new(),
        visible: Vec::new(),
        network: true,
        env: env_policy(root, hook.origin.is_claude(), &limits.env),
    };
    let args: [OsString; 2] = ["-c".into(), hook.command.clone().into()];
    let mut cmd = match SandboxCommand::unconfined(&policy, shell, &args) {
        Ok(c) => c,
        Err(e) => return failed(e.to_string()),
    };
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn().await {
        Ok(c) => c,
        Err(e) => return failed(e.to_string()),
    };
    let mut tasks = Vec::new();
    if let Some(mut w) = child.take_stdin() {
        // A hook that never reads its input must not stall the others: the write runs on its
        // own and a closed pipe (the hook exited) is fine.
        tasks.push(tokio::spawn(async move {
            let _ = w.write_all(&stdin).await;
            let _ = w.shutdown().await;
        }));
    }
    let out = Arc::new(Mutex::new(Capture::default()));
    let err = Arc::new(Mutex::new(Capture::default()));
    let mut readers = Vec::new();
    if let Some(r) = child.take_stdout() {
        readers.push(tokio::spawn(pump(r, limits.output_cap, out.clone())));
    }
    if let Some(r) = child.take_stderr() {
        readers.push(tokio::spawn(pump(r, limits.output_cap, err.clone())));
    }
    let exit = tokio::select! {
        status = child.wait() => match status {
            Ok(st) => {
                use std::os::unix::process::ExitStatusExt;
                match (st.code(), st.signal()) {
                    (Some(c), _) => HookExit::Code(c),
                    (None, Some(s)) => HookExit::Signal(s),
                    (None, None) => HookExit::Code(-1),
                }
            }
            Err(e) => HookExit::SpawnFailed(e.to_string()),
        },
        _ = tokio::time::sleep(hook.timeout) => HookExit::TimedOut,
        _ = cancel.cancelled() => HookExit::Cancelled,
    };
    let elapsed = start.elapsed();
    if matches!(exit, HookExit::TimedOut | HookExit::Cancelled) {
        child.kill();
    }
    // The pipes end when the last process holding them is gone: at once for a hook that left
    // nothing behind, after the kill for one that did.
    let aborts: Vec<_> = readers
        .iter()
        .chain(tasks.iter())
        .map(|t| t.abort_handle())
        .collect();
    let mut all_read = Box::pin(futures_util::future::join_all(readers));
    if tokio::time::timeout(limits.exit_grace, &mut all_read)
        .await
        .is_err()
    {
        child.kill();
        // A process that left the group (setsid) may hold them still: stop reading then.
        let _ = tokio::time::timeout(Duration::from_millis(500), &mut all_read).await;
    }
    for a in aborts {
        a.abort();
    }
    drop(child);
    let (stdout, t1) = take(&out);
    let (stderr, t2) = take(&err);
    HookRun {
        exit,
        stdout,
        stderr,
        truncated: t1 || t2,
        elapsed,
    }
}

#[cfg(test)]
mod env_tests {
    use super::*;

    #[test]
    fn a_hook_gets_the_allow_list_the_users_names_and_the_project_folder_only() {
        let p = env_policy(Path::new("/w"), true, &["SLACK_WEBHOOK".to_string()]);
        let got = p.resolve(&|n| match n {
            "PATH" => Some("/bin".into()),
            "SLACK_WEBHOOK" => Some("https://hooks".into()),
            "GITHUB_PAT" | "DATABASE_URL" => Some("secret".into()),
            _ => None,
        });
        let names: Vec<String> = got
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "PATH",
                "SLACK_WEBHOOK",
                ENV_PROJECT_DIR,
                ENV_CLAUDE_PROJECT_DIR
            ]
        );
        let native = env_policy(Path::new("/w"), false, &[]);
        assert!(!native.set.iter().any(|(k, _)| k == ENV_CLAUDE_PROJECT_DIR));
    }
}
