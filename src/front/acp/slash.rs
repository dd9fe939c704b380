//! Slash commands typed in the editor's prompt box: `/compact [focus]`, `/context`, `/snip`.
//!
//! TODO(lead): this build's engine has no `compact_session` / `inspect_context` yet (branch
//! `ctx` adds `session/compact`, `context/inspect` and `session/snip`). After the merge, make
//! [`run`] call `engine.compact_session(id, focus, host).await` for `/compact`, render
//! `engine.inspect_context(id)` as an agent message for `/context`, and the engine's snip for
//! `/snip`; until then each answers with a message saying it is not available.

use std::sync::Arc;

use crate::engine::Engine;
use crate::turn::{TurnEvent, TurnHost};

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
    /// `/snip`.
    Snip,
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
        "snip" => Some(Slash::Snip),
        _ => None,
    }
}

/// Runs a slash command, answering through the host as agent message chunks.
pub async fn run(engine: &Engine, id: &str, cmd: Slash, host: Arc<dyn TurnHost>) {
    let say = |text: String| host.event(id, TurnEvent::TextDelta { text });
    if let Err(e) = engine.session(id) {
        say(format!("{e}"));
        return;
    }
    match cmd {
        Slash::Compact { focus } => say(compact(engine, id, focus)),
        Slash::Context => say("context inspection is not available in this build".into()),
        Slash::Snip => say("snip is not available in this build".into()),
    }
}

/// Compacts a session; the engine call lands with the `ctx` branch (see the module TODO).
fn compact(_engine: &Engine, _id: &str, _focus: Option<String>) -> String {
    "compaction is not available in this build".into()
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
        assert_eq!(parse("/snip"), Some(Slash::Snip));
        assert_eq!(parse("/usr/bin is where"), None);
        assert_eq!(parse("compact"), None);
    }
}
