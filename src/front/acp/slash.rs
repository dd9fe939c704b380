//! Slash commands typed in the editor's prompt box: `/compact [focus]`, `/context`, `/snip`.
//!

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use garuda_core::engine::Engine;
use garuda_core::turn::{TurnEvent, TurnHost};

/// A recognised slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slash {
    /// `/compact [focus]`.
    Compact {
        /// What the summary should keep.
        focus: Option<String>,
    },
    /// `/context`.
    Context,
    /// `/snip [message ids]`.
    Snip {
        /// Message ids to drop from the model's view.
        ids: Vec<String>,
    },
}

/// The command a prompt starts with, if any; other `/words` go to the model unchanged.
pub fn parse(text: &str) -> Option<Slash> {
    let text = text.trim_start();
    let rest = text.strip_prefix('/')?;
    let (name, arg) = match rest.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (rest.trim_end(), ""),
    };
    match name {
        "compact" => Some(Slash::Compact {
            focus: (!arg.is_empty()).then(|| arg.to_string()),
        }),
        "context" => Some(Slash::Context),
        "snip" => Some(Slash::Snip {
            ids: arg.split_whitespace().map(str::to_string).collect(),
        }),
        _ => None,
    }
}

/// Runs a slash command, answering through the host as agent message chunks.
pub async fn run(
    engine: &Engine,
    id: &str,
    cmd: Slash,
    host: Arc<dyn TurnHost>,
    cancel: CancellationToken,
) {
    let say = |text: String| host.event(id, TurnEvent::TextDelta { text });
    if let Err(e) = engine.session(id) {
        say(format!("{e}"));
        return;
    }
    let text = match cmd {
        Slash::Compact { focus } => compact(engine, id, focus, host.clone(), cancel).await,
        Slash::Context => context(engine, id),
        Slash::Snip { ids } => snip(engine, id, ids),
    };
    say(text);
}

/// Compacts a session, whatever its size (`/compact [focus]`).
async fn compact(
    engine: &Engine,
    id: &str,
    focus: Option<String>,
    host: Arc<dyn TurnHost>,
    cancel: CancellationToken,
) -> String {
    match engine.compact(id, focus, host, cancel).await {
        Ok(r) if r.compacted => format!(
            "Compacted ({}): {} → {} tokens.",
            r.kind.as_deref().unwrap_or("summary"),
            r.tokens_before,
            r.tokens_after
        ),
        Ok(r) => r.message.unwrap_or_else(|| "Nothing to compact.".into()),
        Err(e) => format!("Compaction failed: {e}"),
    }
}

/// The context accounting as a table (`/context`).
fn context(engine: &Engine, id: &str) -> String {
    match engine.inspect(id) {
        Ok(r) => format!(
            "| part | tokens |\n|---|---|\n| system | {} |\n| tools | {} |\n| instructions | {} |\n\
             | memory | {} |\n| messages | {} |\n| free | {} |\n| reserved | {} |\n\n\
             {} of {} tokens used; compaction starts at {}{}.",
            r.parts.system,
            r.parts.tools,
            r.parts.instructions,
            r.parts.memory,
            r.parts.messages,
            r.parts.free,
            r.parts.reserved,
            r.context_tokens,
            r.parts.window,
            r.parts.threshold,
            if r.paused {
                " (auto-compaction paused after repeated failures)"
            } else {
                ""
            }
        ),
        Err(e) => e.to_string(),
    }
}

/// Drops messages from the model's view (`/snip ID...`).
fn snip(engine: &Engine, id: &str, ids: Vec<String>) -> String {
    if ids.is_empty() {
        return "Usage: /snip MESSAGE_ID... (ids from the session history)".into();
    }
    match engine.snip(id, ids) {
        Ok(r) if r.protected.is_empty() => format!("Snipped {} message(s).", r.removed.len()),
        Ok(r) => format!(
            "Snipped {} message(s); kept {} that later messages still need.",
            r.removed.len(),
            r.protected.len()
        ),
        Err(e) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands() {
        assert_eq!(
            parse("/compact keep the tests"),
            Some(Slash::Compact {
                focus: Some("keep the tests".into())
            })
        );
        assert_eq!(parse(" /compact "), Some(Slash::Compact { focus: None }));
        assert_eq!(parse("/context"), Some(Slash::Context));
        assert_eq!(parse("/snip"), Some(Slash::Snip { ids: vec![] }));
        assert_eq!(
            parse("/snip a b"),
            Some(Slash::Snip {
                ids: vec!["a".into(), "b".into()]
            })
        );
        assert_eq!(parse("/usr/bin is where"), None);
        assert_eq!(parse("compact"), None);
    }
}
