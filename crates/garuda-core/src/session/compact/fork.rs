//! Side requests as forks of the main request: the collapse summary asked with the session's
//! system prompt, tools and message prefix byte for byte, its instruction after the prefix,
//! so the provider reads the prefix from the cache the main loop wrote (seed 001 §2.5), and
//! the plain request (no tools, the span alone) only when the fork does not fit or fails.

use crate::message::{Block, CachePlan, Message, Role};
use crate::session::view::{ViewMessage, prefix_end, tag_messages};

/// How the collapse instruction begins, fork or plain (the plain one says no more).
pub const COLLAPSE_INSTRUCTION: &str = "Summarize the conversation above in a few short paragraphs";

/// What the collapse summary holds, after the opening and the span's bounds.
const COLLAPSE_ASK: &str = "what was asked, what was done (files, commands and their results), \
    decisions taken and anything still open. Quote user directives verbatim. Do not call any \
    tool; answer with the summary text only.";

/// The characters of a message's opening the fork quotes to mark where its span begins.
const QUOTE_CHARS: usize = 120;

/// The collapse instruction. `from`: when messages before the span are not part of it (the
/// fork repeats them for the cache), the quoted opening of the span's first message and how
/// many messages the span holds: two cues, since an opening may repeat.
pub fn collapse_instruction(from: Option<(&str, usize)>) -> String {
    match from {
        Some((q, n)) => format!(
            "{COLLAPSE_INSTRUCTION}, covering only the last {n} messages above, from the one \
             that begins \"{q}\" to the end (what comes before it is kept as it is): \
             {COLLAPSE_ASK}"
        ),
        None => format!("{COLLAPSE_INSTRUCTION}: {COLLAPSE_ASK}"),
    }
}

/// A fork's messages and markers.
#[derive(Debug, Clone, PartialEq)]
pub struct Fork {
    /// The shared prefix as the main request renders it, then the instruction.
    pub messages: Vec<Message>,
    /// Markers on the system prompt, the compacted prefix and the end of the shared prefix:
    /// the provider reads what the main loop cached and writes nothing after the prefix.
    pub cache: CachePlan,
}

/// The collapse fork of the span `first..=last` (indices into the view's messages): the view
/// through `last` rendered as the main request renders it, and the instruction after it.
/// None when the span is empty or out of range.
pub fn collapse_fork(messages: &[ViewMessage], first: usize, last: usize) -> Option<Fork> {
    if first > last || last >= messages.len() {
        return None;
    }
    let from = (first > 0).then(|| opening(&messages[first].message));
    let instruction = collapse_instruction(from.as_deref().map(|q| (q, last + 1 - first)));
    Some(fork_with(&messages[..=last], instruction))
}

/// A fork of the main request: `shared` (a prefix of the view) rendered as the main request
/// renders it, then `instruction`. The collapse and the compaction summary both ask this way.
pub fn fork_with(shared: &[ViewMessage], instruction: String) -> Fork {
    let mut out = tag_messages(shared);
    let last = shared.len().checked_sub(1);
    // The instruction joins a final user message, after everything it holds (results lead),
    // so the prefix up to the message before stays byte for byte the main request's.
    let shared_end = match out.last_mut() {
        Some(m) if m.role == Role::User => {
            m.content.push(Block::text(instruction));
            last.and_then(|l| l.checked_sub(1))
        }
        _ => {
            out.push(Message::user_text(instruction));
            last
        }
    };
    let mut marks: Vec<usize> = prefix_end(shared)
        .into_iter()
        .filter(|&p| shared_end.is_some_and(|e| p < e))
        .collect();
    marks.extend(shared_end);
    Fork {
        messages: out,
        cache: CachePlan {
            system: true,
            messages: marks,
        },
    }
}

/// The opening of a message as one line, to name it in an instruction: its first text, or
/// what its first call or result is.
pub fn opening(m: &Message) -> String {
    let first = m.content.iter().find_map(|b| match b {
        Block::Text { text } if !text.trim().is_empty() => Some(text.clone()),
        Block::ToolUse { name, .. } => Some(format!("[a call of {name}]")),
        Block::ToolResult { content, .. } => Some(
            content
                .iter()
                .find_map(|c| match c {
                    Block::Text { text } => Some(text.clone()),
                    _ => None,
                })
                .unwrap_or_else(|| "[a tool result]".to_string()),
        ),
        _ => None,
    });
    let line: String = first
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('"', "'");
    let mut q: String = line.chars().take(QUOTE_CHARS).collect();
    if q.chars().count() < line.chars().count() {
        q.push('…');
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::records::MessageMeta;

    fn vm(id: &str, role: Role, text: &str) -> ViewMessage {
        ViewMessage {
            id: id.into(),
            source_ids: vec![id.into()],
            parent: None,
            meta: None,
            time: 0,
            message: Message {
                role,
                content: vec![Block::text(text)],
            },
        }
    }

    fn view() -> Vec<ViewMessage> {
        let mut summary = vm("s", Role::User, "the summary");
        summary.meta = Some(MessageMeta::Summary);
        vec![
            summary,
            vm("a0", Role::Assistant, "ok"),
            vm("u1", Role::User, "first \"quoted\"   words\nof the span"),
            vm("a1", Role::Assistant, "done"),
            vm("u2", Role::User, "the current turn"),
        ]
    }

    #[test]
    fn the_fork_repeats_the_main_prefix_and_asks_after_it() {
        let v = view();
        let f = collapse_fork(&v, 2, 3).expect("fork");
        let main = tag_messages(&v);
        // Byte for byte the main request's first four messages, then the instruction.
        assert_eq!(f.messages[..4], main[..4]);
        assert_eq!(f.messages.len(), 5);
        let ask = f.messages[4].text();
        assert!(ask.starts_with(COLLAPSE_INSTRUCTION), "{ask}");
        assert!(
            ask.contains("the last 2 messages above, from the one that begins \"first 'quoted' words of the span\""),
            "{ask}"
        );
        // The compacted prefix and the end of the shared prefix; nothing on the instruction.
        assert_eq!(
            f.cache,
            CachePlan {
                system: true,
                messages: vec![0, 3]
            }
        );
    }

    #[test]
    fn a_span_ending_on_a_user_message_takes_the_instruction_into_it() {
        let v = view();
        let f = collapse_fork(&v, 0, 2).expect("fork");
        assert_eq!(f.messages.len(), 3);
        let last = &f.messages[2];
        assert_eq!(last.role, Role::User);
        assert!(last.text().contains(COLLAPSE_INSTRUCTION));
        // From the first message on: no quote; the marker stops before the changed message.
        assert!(!last.text().contains("begins"));
        assert_eq!(f.cache.messages, vec![0, 1]);
        assert!(collapse_fork(&v, 3, 2).is_none());
        assert!(collapse_fork(&v, 0, 9).is_none());
    }

    #[test]
    fn the_summary_fork_repeats_thinking_media_and_long_results_whole() {
        let mut v = view();
        v[1].message.content.insert(
            0,
            Block::Thinking {
                thinking: "THINKING".into(),
                signature: Some("sig".into()),
            },
        );
        v[2].message.content.push(Block::text("R".repeat(50_000)));
        let f = fork_with(&v[..4], "Summarize.".into());
        // Nothing is rewritten: the provider reads all of it from cache.
        assert_eq!(f.messages[..4], tag_messages(&v[..4])[..4]);
        assert_eq!(f.messages[4].text(), "Summarize.");
        assert_eq!(f.cache.messages.last(), Some(&3));
    }

    #[test]
    fn openings_are_one_short_line() {
        let long = Message::user_text("x ".repeat(400));
        let o = opening(&long);
        assert!(o.ends_with('…') && o.chars().count() == QUOTE_CHARS + 1);
        let call = Message {
            role: Role::Assistant,
            content: vec![Block::ToolUse {
                id: "t".into(),
                name: "read_file".into(),
                input: serde_json::json!({}),
            }],
        };
        assert_eq!(opening(&call), "[a call of read_file]");
    }
}
