//! `[id:...]` tags: short stable ids on API-bound user messages, so the model can name
//! messages to its `snip` tool, and the way back from a tag to transcript ids.

use super::View;
use crate::message::{Block, Message, Role};

/// The short id of a transcript id: 8 base-36 characters of its FNV-1a hash. It depends only
/// on the id, so the tag's bytes never change between requests.
pub fn short_id(id: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut s = String::with_capacity(8);
    for _ in 0..8 {
        s.push(DIGITS[(h % 36) as usize] as char);
        h /= 36;
    }
    s
}

fn taggable(m: &super::ViewMessage) -> bool {
    m.message.role == Role::User && !m.source_ids.is_empty()
}

/// The view's messages with a trailing `[id:xxxxxxxx]` text block on each user message that
/// comes from the transcript.
pub fn render_id_tags(view: &View) -> Vec<Message> {
    tag_messages(&view.messages)
}

/// `render_id_tags` of a run of view messages (a prefix of a view renders byte for byte as
/// in the whole view).
pub fn tag_messages(messages: &[super::ViewMessage]) -> Vec<Message> {
    messages
        .iter()
        .map(|m| {
            let mut msg = m.message.clone();
            if taggable(m) {
                msg.content
                    .push(Block::text(format!("[id:{}]", short_id(&m.id))));
            }
            msg
        })
        .collect()
}

fn strip_tag(tag: &str) -> &str {
    let t = tag.trim();
    let t = t.strip_prefix("[id:").unwrap_or(t);
    t.strip_suffix(']').unwrap_or(t)
}

fn position(view: &View, tag: &str) -> Option<usize> {
    let tag = strip_tag(tag);
    view.messages
        .iter()
        .position(|m| taggable(m) && short_id(&m.id) == tag)
}

/// The transcript ids of the view message a tag names (None: no such tag in the view).
pub fn resolve_short_id(view: &View, tag: &str) -> Option<Vec<String>> {
    position(view, tag).map(|i| view.messages[i].source_ids.clone())
}

/// The transcript ids of every view message from the one tagged `from` through `to`
/// (inclusive, assistant messages between them too).
pub fn resolve_id_range(view: &View, from: &str, to: &str) -> Option<Vec<String>> {
    let (a, b) = (position(view, from)?, position(view, to)?);
    let (a, b) = (a.min(b), a.max(b));
    Some(
        view.messages[a..=b]
            .iter()
            .flat_map(|m| m.source_ids.iter().cloned())
            .collect(),
    )
}
