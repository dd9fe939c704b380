//! `bash`: runs a command in the workspace root through the session's
//! [`crate::sandbox::CommandRunner`] (confined by bubblewrap when the session's commands are),
//! with a timeout, an output cap, and prompt cancellation that kills the whole tree.
//!
//! Environment: the allow-list (`PATH`, `HOME`, `LANG`, `TERM` and the user's additions), never
//! the server's; pagers are disabled and git never prompts.
//!
//! Processes the command leaves running in the background are killed shortly after the shell
//! exits: a tool call must not leave orphans behind (nor hold the output pipes open). In the
//! sandbox the PID namespace ends them all, `setsid` included.
//!
//! `outside_sandbox: true` is the escape hatch for a command the sandbox blocks (an install
//! that needs the network, a tool that writes outside the root): the turn asks the user for
//! such a call whatever the policy or a hook says, and only an approved call runs unconfined
//! ([`ToolContext::outside_sandbox`]). Without a sandbox the flag changes nothing.

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::message::ToolSpec;
use crate::prompt::Offer;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::util::{self, lenient_bool, lenient_u64};
use crate::tools::vocab::{CommandRun, ToolClass, ToolContext, ToolMeta, ToolOutput};
use futures_util::future::BoxFuture;

/// How long output is still collected after the shell exited while something else holds the
/// pipes open.
const DRAIN_GRACE: Duration = Duration::from_millis(250);

#[derive(Deserialize)]
struct Input {
    command: String,
    #[serde(default, deserialize_with = "lenient_u64")]
    timeout_ms: Option<u64>,
    /// Asked for; it runs unconfined only once the turn says the user approved it.
    #[serde(default, deserialize_with = "lenient_bool")]
    outside_sandbox: bool,
}

/// What the approval title and the call's description say of a call that leaves the sandbox.
const OUTSIDE_LABEL: &str = "outside the sandbox, unconfined";

/// True when the call asks to run outside the sandbox (`true` or `"true"`, as the input's
/// parser accepts).
fn wants_outside(input: &Value) -> bool {
    match input.get("outside_sandbox") {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.trim() == "true",
        _ => false,
    }
}

/// Keeps the first and last `half` bytes of a stream and counts what falls between.
struct HeadTail {
    half: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl HeadTail {
    fn new(cap: usize) -> Self {
        let half = (cap / 2).max(1);
        HeadTail {
            half,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    fn push(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.head.len() < self.half {
            let n = (self.half - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        if data.len() >= self.half {
            self.tail.clear();
            self.tail.extend(&data[data.len() - self.half..]);
        } else {
            self.tail.extend(data);
            let extra = self.tail.len().saturating_sub(self.half);
            self.tail.drain(..extra);
        }
    }

    /// The kept text and whether anything was omitted.
    fn finish(self) -> (String, bool) {
        let omitted = self.total - self.head.len() as u64 - self.tail.len() as u64;
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        let tail: Vec<u8> = self.tail.into_iter().collect();
        if omitted > 0 {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("[… {omitted} bytes omitted …]\n"));
        }
        text.push_str(&String::from_utf8_lossy(&tail));
        (text, omitted > 0)
    }
}

enum End {
    Exited,
    TimedOut,
    Cancelled,
}

async fn run(input: Value, ctx: &ToolContext) -> ToolOutput {
    let input: Input = match util::parse("bash", input) {
        Ok(i) => i,
        Err(e) => return e,
    };
    if input.command.trim().is_empty() {
        return ToolOutput::error("bash needs a non-empty command");
    }
    let timeout_ms = input
        .timeout_ms
        .unwrap_or(ctx.limits.bash_timeout_ms)
        .clamp(1, ctx.limits.bash_max_timeout_ms.max(1));

    let Some(runner) = &ctx.commands else {
        return ToolOutput::error(
            "commands cannot run in this workspace (its root is the filesystem root)",
        );
    };
    let args = ["-c", input.command.as_str()];
    let made = if input.outside_sandbox && ctx.outside_sandbox {
        runner.unconfined_command("bash", &args)
    } else {
        runner.command("bash", &args)
    };
    let mut cmd = match made {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(format!("could not start bash: {e}")),
    };
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("GARUDA", "1")
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .env("GIT_TERMINAL_PROMPT", "0");
    // Dropping the child (a dropped tool future) kills the whole tree.
    let mut child = match cmd.spawn().await {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(format!("could not start bash: {e}")),
    };
    let mut stdout = child.take_stdout();
    let mut stderr = child.take_stderr();
    let mut buf = HeadTail::new(ctx.limits.output_max_chars);
    let (mut b1, mut b2) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    let deadline = tokio::time::sleep(Duration::from_millis(timeout_ms));
    tokio::pin!(deadline);
    let grace = tokio::time::sleep(Duration::from_secs(86_400));
    tokio::pin!(grace);
    let mut status = None;
    let end = loop {
        if status.is_some() && stdout.is_none() && stderr.is_none() {
            break End::Exited;
        }
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => break End::Cancelled,
            _ = &mut deadline => break End::TimedOut,
            r = read_some(&mut stdout, &mut b1), if stdout.is_some() => match r {
                Some(n) => buf.push(&b1[..n]),
                None => stdout = None,
            },
            r = read_some(&mut stderr, &mut b2), if stderr.is_some() => match r {
                Some(n) => buf.push(&b2[..n]),
                None => stderr = None,
            },
            st = child.wait(), if status.is_none() => {
                status = Some(st);
                grace.as_mut().reset(tokio::time::Instant::now() + DRAIN_GRACE);
            }
            _ = &mut grace, if status.is_some() => break End::Exited,
        }
    };
    // Kill the tree before reaping, so its group id cannot have been reused by then.
    child.kill();
    drop((stdout, stderr));
    let status = match status {
        Some(s) => s,
        None => child.wait().await,
    };

    let (mut text, truncated) = buf.finish();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let mut meta = ToolMeta {
        truncated,
        ..ToolMeta::default()
    };
    match end {
        End::TimedOut => {
            meta.timed_out = true;
            text.push_str(&format!(
                "[command timed out after {timeout_ms} ms; it and its child processes were killed]\nexit code: none"
            ));
            ToolOutput::error(text).with_meta(meta)
        }
        End::Cancelled => {
            meta.cancelled = true;
            text.push_str(
                "[command cancelled; it and its child processes were killed]\nexit code: none",
            );
            ToolOutput::error(text).with_meta(meta)
        }
        End::Exited => match status {
            Ok(st) => {
                if let Some(code) = st.code() {
                    meta.exit_code = Some(code);
                    text.push_str(&format!("exit code: {code}"));
                } else {
                    use std::os::unix::process::ExitStatusExt;
                    let sig = st.signal().unwrap_or(0);
                    text.push_str(&format!("exit code: none (killed by signal {sig})"));
                }
                ToolOutput::ok(text).with_meta(meta)
            }
            Err(e) => {
                ToolOutput::error(format!("{text}could not wait for bash: {e}")).with_meta(meta)
            }
        },
    }
}

/// Reads some bytes from an optional pipe; `None` at end of stream or on error.
async fn read_some<R: tokio::io::AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
) -> Option<usize> {
    let p = pipe.as_mut()?;
    match p.read(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

/// `bash`: in the client's terminal where the workbench offers one, else through the
/// session's runner.
pub(super) struct Bash;

impl Tool for Bash {
    fn name(&self) -> &str {
        "bash"
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["Bash"]
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            "bash",
            "Run a shell command with `bash -c` in the workspace root. Stdin is empty; stdout \
             and stderr are captured together and long output keeps only its beginning and end. \
             The command is killed after `timeout_ms` (default 120000, maximum 600000), and \
             processes it leaves in the background are stopped when it ends. Output ends with \
             the exit code. Use read_file, grep, glob and list_files rather than cat, grep or \
             find. Set `outside_sandbox` to true only for a command the sandbox blocks (a \
             package install that needs the network, a tool that writes outside the root): \
             the user approves each such call, and it runs with the user's full permissions.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line to run."},
                    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "Timeout in milliseconds. Default 120000."},
                    "outside_sandbox": {"type": "boolean", "description": "Run outside the sandbox, after the user approves. Only for a command the sandbox blocked. Default false."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        ToolClass::Exec
    }
    fn offer(&self) -> Option<Offer> {
        Some(Offer::Commands)
    }
    fn describe(&self, input: &Value) -> String {
        let command = handler::field(input, "command");
        if wants_outside(input) {
            format!("({OUTSIDE_LABEL}) {command}")
        } else {
            command.to_string()
        }
    }
    fn title(&self, input: &Value) -> Option<String> {
        // The whole command, so the dangerous part is never cut away; the warning comes
        // first, where a long command cannot push it out of sight.
        let command = input.get("command").and_then(Value::as_str)?;
        let command = handler::visible_line(command);
        if wants_outside(input) {
            Some(format!("bash ({OUTSIDE_LABEL}): {command}"))
        } else {
            Some(format!("bash: {command}"))
        }
    }
    fn leaves_sandbox(&self, input: &Value) -> bool {
        wants_outside(input)
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let Some(fut) = client_command(&input, ctx).and_then(|c| bench.run_command(c)) else {
                return run(input, ctx).await;
            };
            let r = fut.await;
            if ctx.cancel.is_cancelled() {
                ToolOutput::error(r.content).with_meta(ToolMeta {
                    cancelled: true,
                    ..Default::default()
                })
            } else if r.is_error {
                ToolOutput::error(r.content)
            } else {
                ToolOutput::ok(r.content)
            }
        })
    }
}

/// A call as the client would run it; `None` when the input has no command (the tool then
/// answers with its own error).
fn client_command(input: &Value, ctx: &ToolContext) -> Option<CommandRun> {
    let command = input.get("command")?.as_str()?.trim();
    if command.is_empty() {
        return None;
    }
    let timeout_ms = input
        .get("timeout_ms")
        .and_then(Value::as_u64)
        .unwrap_or(ctx.limits.bash_timeout_ms)
        .clamp(1, ctx.limits.bash_max_timeout_ms.max(1));
    Some(CommandRun {
        tool_call_id: ctx.call_id.clone().unwrap_or_default(),
        command: command.to_string(),
        cwd: ctx.root.path().to_path_buf(),
        timeout_ms,
        output_limit: ctx.limits.output_max_chars as u64,
        cancel: ctx.cancel.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_tail_keeps_both_ends() {
        let mut h = HeadTail::new(10);
        h.push(b"abcde");
        h.push(b"0123456789");
        h.push(b"vwxyz");
        let (t, cut) = h.finish();
        assert!(cut);
        assert!(t.starts_with("abcde\n[… 10 bytes omitted …]\n"), "{t}");
        assert!(t.ends_with("vwxyz"), "{t}");
    }

    #[test]
    fn head_tail_small_output_untouched() {
        let mut h = HeadTail::new(100);
        h.push(b"hello\n");
        assert_eq!(h.finish(), ("hello\n".to_string(), false));
    }
}
