//! Slash commands typed in the editor's prompt box: `/compact [focus]`, `/context`, `/snip`.
//!
//! TODO(lead): this build's engine has no compaction or context inspection yet; branch `ctx`
//! adds `Engine::compact(id, focus, host, cancel) -> CompactResult`,
//! `Engine::inspect(id) -> InspectResult` and `Engine::snip(id, message_ids) -> SnipResult`.
//! After merging it, replace the three stubs at the end of this file:
//!
//! ```text
//! async fn compact(engine, id, focus, host, cancel) -> String {
//!     match engine.compact(id, focus, host, cancel).await {
//!         Ok(r) if r.compacted => format!("Compacted: {} → {} tokens.", r.tokens_before, r.tokens_after),
//!         Ok(r) => r.message.unwrap_or_else(|| "Nothing to compact.".into()),
//!         Err(e) => format!("Compaction failed: {e}"),
//!     }
//! }
//! fn context(engine, id) -> String {
//!     match engine.inspect(id) {
//!         Ok(r) => format!("| part | tokens |\n|---|---|\n| system | {} |\n| tools | {} |\n\
//!             | instructions | {} |\n| memory | {} |\n| messages | {} |\n| free | {} |\n\n\
//!             {} of {} tokens used; compaction at {}.", r.system, r.tools, r.instructions,
//!             r.memory, r.messages, r.free, r.context_tokens, r.window, r.threshold),
//!         Err(e) => e.to_string(),
//!     }
//! }
//! fn snip(engine, id, ids: Vec<String>) -> String  // `/snip ID...` → engine.snip(id, ids)
//! ```
//!
//! Until then each command answers with a message saying it is not available.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

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

/// Compacts a session (stub until the `ctx` merge; see the module TODO).
async fn compact(
    _engine: &Engine,
    _id: &str,
    _focus: Option<String>,
    _host: Arc<dyn TurnHost>,
    _cancel: CancellationToken,
) -> String {
    "compaction is not available in this build".into()
}

/// The context accounting as a table (stub until the `ctx` merge).
fn context(_engine: &Engine, _id: &str) -> String {
    "context inspection is not available in this build".into()
}

/// Drops messages from the model's view (stub until the `ctx` merge).
fn snip(_engine: &Engine, _id: &str, _ids: Vec<String>) -> String {
    "snip is not available in this build".into()
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
