//! The headless front of `garuda exec`: one turn, printed as text or as JSON lines.
//!
//! Exit codes (documented in the README and `garuda exec --help`): [`EXIT_OK`],
//! [`EXIT_TURN_FAILED`], [`EXIT_USAGE`], [`EXIT_APPROVAL`], [`EXIT_CANCELLED`].

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use garuda_core::message::StopReason;
use garuda_core::turn::{PermissionAnswer, PermissionRequest, TurnEvent, TurnFailure, TurnHost};

/// The turn ended normally.
pub const EXIT_OK: u8 = 0;
/// The turn failed: a provider error (after retries), a message too large for the window.
pub const EXIT_TURN_FAILED: u8 = 1;
/// A usage or configuration error; no turn ran.
pub const EXIT_USAGE: u8 = 2;
/// The turn stopped because a tool call needed approval and no one could be asked (no
/// terminal on stdin); `--policy auto-edit` or `full-auto` allows it.
pub const EXIT_APPROVAL: u8 = 3;
/// Cancelled with Ctrl-C.
pub const EXIT_CANCELLED: u8 = 130;

/// The `error.kind` of the `finished` event when the turn stopped for an approval.
pub const APPROVAL_REQUIRED: &str = "approvalRequired";

/// Prints a turn's events: answer text to stdout (or every event as a JSON line), the rest to
/// stderr.
pub struct ExecHost {
    /// One JSON object per line on stdout instead of plain text.
    json: bool,
    /// The turn's cancellation: fired once a call needed an approval no one could give.
    stop: CancellationToken,
    state: Mutex<HostState>,
}

#[derive(Default)]
struct HostState {
    /// Answer text is on stdout and its last line is not ended.
    mid_line: bool,
    /// A step began since the last answer text.
    new_step: bool,
    /// The call that needed an approval no one could give: its id and title.
    unasked: Option<(String, String)>,
}

impl ExecHost {
    /// A host for one turn; `stop` must be the token the turn runs with.
    pub fn new(json: bool, stop: CancellationToken) -> Arc<ExecHost> {
        Arc::new(ExecHost {
            json,
            stop,
            state: Mutex::new(HostState::default()),
        })
    }

    /// The title of the call the turn stopped for (`bash: cargo test`), if it did.
    pub fn approval_needed(&self) -> Option<String> {
        self.lock().unasked.as_ref().map(|(_, title)| title.clone())
    }

    /// The exit code for a turn that ran to `stop_reason`.
    pub fn exit_code(&self, stop_reason: StopReason) -> u8 {
        if self.approval_needed().is_some() {
            EXIT_APPROVAL
        } else if stop_reason == StopReason::Cancelled {
            EXIT_CANCELLED
        } else {
            EXIT_OK
        }
    }

    /// Whether `id` is the call the turn stops for.
    fn is_unasked(&self, id: &str) -> bool {
        self.lock().unasked.as_ref().is_some_and(|(u, _)| u == id)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HostState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn out(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    /// Ends the answer's current line on stdout, so that what follows (a line on stderr, the
    /// next step's text) starts on a line of its own.
    fn end_line(&self, state: &mut HostState) {
        if state.mid_line && !self.json {
            self.out("\n");
            state.mid_line = false;
        }
    }

    /// A line on stderr, after the answer's current line is ended.
    fn note(&self, line: &str) {
        let mut state = self.lock();
        self.end_line(&mut state);
        eprintln!("{line}");
    }

    fn text(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut state = self.lock();
        if state.new_step {
            // Steps are separated by a newline: "Writing." then "Wrote it." are two lines.
            self.end_line(&mut state);
            state.new_step = false;
        }
        self.out(text);
        state.mid_line = !text.ends_with('\n');
    }
}

fn unasked_message(title: &str) -> String {
    format!(
        "{title} needs approval and there is no terminal to ask, so the turn stopped; \
         --policy full-auto allows every call (--policy auto-edit allows edits, not commands), \
         as does approval.policy in config.toml; --continue carries the session on"
    )
}

impl TurnHost for ExecHost {
    fn event(&self, session_id: &str, event: TurnEvent) {
        let event = match event {
            TurnEvent::ToolCallFinished { ref id, .. } => {
                // The call it stopped for has its result: end the turn here.
                if self.is_unasked(id) {
                    self.stop.cancel();
                }
                event
            }
            TurnEvent::Finished {
                stop_reason,
                usage,
                error: None,
            } if self.approval_needed().is_some() => TurnEvent::Finished {
                stop_reason,
                usage,
                error: self.approval_needed().map(|title| TurnFailure {
                    kind: APPROVAL_REQUIRED.to_string(),
                    message: unasked_message(&title),
                }),
            },
            other => other,
        };
        if self.json {
            let line = json!({"sessionId": session_id, "event": super::wire::event_out(event)});
            self.out(&format!("{line}\n"));
            return;
        }
        match event {
            TurnEvent::StepStarted { .. } => self.lock().new_step = true,
            TurnEvent::TextDelta { text } => self.text(&text),
            TurnEvent::ToolCallStarted { name, input, .. } => self.note(&format!(
                "[tool] {}",
                garuda_core::tools::describe_call(&name, &input)
            )),
            TurnEvent::ToolCallFinished {
                id,
                is_error: true,
                output,
                ..
            } if !self.is_unasked(&id) => self.note(&format!(
                "[tool error] {}",
                output.lines().next().unwrap_or("")
            )),
            TurnEvent::Retry {
                attempt,
                delay_ms,
                reason,
            } => self.note(&format!("[retry {attempt} in {delay_ms} ms] {reason}")),
            TurnEvent::Compaction {
                phase,
                tokens_before,
                tokens_after,
                message,
                ..
            } => {
                let mut line = format!("[compaction {}]", phase.name());
                if let (Some(b), Some(a)) = (tokens_before, tokens_after) {
                    line.push_str(&format!(" {b} → {a} tokens"));
                }
                if let Some(m) = message.filter(|m| !m.is_empty()) {
                    line.push_str(&format!(" {m}"));
                }
                self.note(&line);
            }
            TurnEvent::Finished { .. } => {
                let mut state = self.lock();
                self.end_line(&mut state);
            }
            _ => {}
        }
    }

    fn ask_permission(&self, req: PermissionRequest) -> BoxFuture<'static, PermissionAnswer> {
        if !std::io::stdin().is_terminal() {
            self.note(&format!(
                "[approval needed] {}",
                unasked_message(&req.title)
            ));
            // The turn stops after the first such call; later calls of the same step are
            // refused the same way and do not change which call is reported.
            self.lock()
                .unasked
                .get_or_insert_with(|| (req.tool_call_id.clone(), req.title.clone()));
            return Box::pin(async { PermissionAnswer::Unavailable });
        }
        {
            let mut state = self.lock();
            self.end_line(&mut state);
        }
        Box::pin(async move {
            let answer = tokio::task::spawn_blocking(move || {
                eprint!("Allow {}? [y]es / [a]lways / [N]o: ", req.title);
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
                match line.trim() {
                    "y" | "Y" | "yes" => PermissionAnswer::AllowOnce,
                    "a" | "A" | "always" => PermissionAnswer::AllowAlways,
                    _ => PermissionAnswer::Reject,
                }
            })
            .await;
            // The prompt thread failed: nobody said no.
            answer.unwrap_or(PermissionAnswer::Failed)
        })
    }
}

/// The user message of an exec run: the prompt argument (`None` or `-`: the prompt is stdin),
/// with stdin appended as context when both are given, as other agent CLIs do.
pub fn compose_prompt(arg: Option<&str>, stdin: Option<&str>) -> Result<String, String> {
    let stdin = stdin
        .map(|s| s.trim_end_matches(['\n', '\r']))
        .filter(|s| !s.trim().is_empty());
    match arg {
        None | Some("-") => stdin.map(str::to_string).ok_or_else(|| {
            "no prompt: give it as an argument, or pass `-` (or no PROMPT) and pipe it on stdin"
                .to_string()
        }),
        Some(p) if p.trim().is_empty() => Err("the prompt is empty".to_string()),
        Some(p) => Ok(match stdin {
            Some(s) => format!("{p}\n\n<stdin>\n{s}\n</stdin>"),
            None => p.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_from_argument_and_stdin() {
        assert_eq!(compose_prompt(Some("hi"), None).unwrap(), "hi");
        assert_eq!(
            compose_prompt(Some("-"), Some("from stdin\n")).unwrap(),
            "from stdin"
        );
        assert_eq!(compose_prompt(None, Some("piped")).unwrap(), "piped");
        assert_eq!(
            compose_prompt(Some("explain"), Some("a log\n")).unwrap(),
            "explain\n\n<stdin>\na log\n</stdin>"
        );
        assert_eq!(compose_prompt(Some("hi"), Some(" \n")).unwrap(), "hi");
        assert!(compose_prompt(Some("-"), Some("")).is_err());
        assert!(compose_prompt(None, None).is_err());
        assert!(compose_prompt(Some("  "), None).is_err());
    }
}
