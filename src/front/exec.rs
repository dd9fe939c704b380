//! The headless front of `garuda exec`: one turn, printed as text or as JSON lines.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::json;

use garuda_core::turn::{PermissionAnswer, PermissionRequest, TurnEvent, TurnHost};

/// Prints a turn's events: answer text to stdout (or every event as a JSON line), the rest to stderr.
pub struct ExecHost {
    /// One JSON object per line on stdout instead of plain text.
    pub json: bool,
}

impl ExecHost {
    fn out(&self, line: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
}

impl TurnHost for ExecHost {
    fn event(&self, session_id: &str, event: TurnEvent) {
        if self.json {
            let line = json!({"sessionId": session_id, "event": super::wire::event_out(event)});
            self.out(&format!("{line}\n"));
            return;
        }
        match event {
            TurnEvent::TextDelta { text } => self.out(&text),
            TurnEvent::ToolCallStarted { name, input, .. } => {
                eprintln!(
                    "\n[tool] {}",
                    garuda_core::tools::describe_call(&name, &input)
                );
            }
            TurnEvent::ToolCallFinished {
                is_error: true,
                output,
                ..
            } => {
                eprintln!("[tool error] {}", output.lines().next().unwrap_or(""));
            }
            TurnEvent::Retry {
                attempt,
                delay_ms,
                reason,
            } => {
                eprintln!("[retry {attempt} in {delay_ms} ms] {reason}");
            }
            TurnEvent::Compaction { phase, message, .. } => {
                eprintln!(
                    "[compaction {}] {}",
                    phase.name(),
                    message.unwrap_or_default()
                );
            }
            TurnEvent::Finished { .. } => self.out("\n"),
            _ => {}
        }
    }

    fn ask_permission(&self, req: PermissionRequest) -> BoxFuture<'static, PermissionAnswer> {
        Box::pin(async move {
            if !std::io::stdin().is_terminal() {
                eprintln!(
                    "[denied] {} (no terminal to ask; use --policy auto-edit or full-auto)",
                    req.title
                );
                return PermissionAnswer::Reject;
            }
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
            answer.unwrap_or(PermissionAnswer::Reject)
        })
    }
}

/// A shareable exec host.
pub fn exec_host(json: bool) -> Arc<dyn TurnHost> {
    Arc::new(ExecHost { json })
}
