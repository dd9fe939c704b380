//! Slash commands typed in the editor's prompt box: `/compact [focus]` and `/context`.
//! (`/snip` is not offered: it takes message ids, which an ACP user never sees.)

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
        // Not a command here: it goes to the model as typed.
        assert_eq!(parse("/snip a b"), None);
        assert_eq!(parse("/usr/bin is where"), None);
        assert_eq!(parse("compact"), None);
    }
}
