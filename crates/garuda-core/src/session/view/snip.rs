//! Stage 3: snip projection. Snipped ids leave the view; a message is protected (kept) while
//! the other side of one of its tool pairs stays in the view.

use std::collections::{HashMap, HashSet};

use super::Work;
use crate::message::{Block, Role};
use crate::session::records::MessageMeta;

/// For every message, the indices of the messages holding the other side of its tool pairs.
pub(crate) fn pair_partners(msgs: &[Work]) -> Vec<Vec<usize>> {
    let mut uses: HashMap<&str, usize> = HashMap::new();
    let mut results: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, m) in msgs.iter().enumerate() {
        for b in &m.content {
            match b {
                Block::ToolUse { id, .. } => {
                    uses.insert(id.as_str(), i);
                }
                Block::ToolResult { tool_use_id, .. } => {
                    results.entry(tool_use_id.as_str()).or_default().push(i);
                }
                _ => {}
            }
        }
    }
    let mut partners = vec![Vec::new(); msgs.len()];
    for (id, &u) in &uses {
        if let Some(rs) = results.get(id) {
            for &r in rs {
                if r != u {
                    partners[u].push(r);
                    partners[r].push(u);
                }
            }
        }
    }
    partners
}

/// The message that carries the session's task: the first user message with the user's own
/// words (or, after a compaction, the summary message that quotes it). Snips never remove it:
/// deleting from the beginning would lose the point of the session.
pub(crate) fn first_request(msgs: &[Work]) -> Option<String> {
    msgs.iter()
        .find(|m| {
            m.role == Role::User
                && !m.is_virtual
                && matches!(
                    m.meta,
                    None | Some(MessageMeta::Summary | MessageMeta::Handoff)
                )
                && m.content
                    .iter()
                    .any(|b| matches!(b, Block::Text { text } if !text.trim().is_empty()))
        })
        .map(|m| m.id.clone())
}

/// Removes snipped messages, never `keep` (the first request) nor the session-start note;
/// returns (removed ids,
/// protected ids), both in view order.
pub(crate) fn apply(
    msgs: &mut Vec<Work>,
    snips: &HashSet<String>,
    keep: Option<&str>,
) -> (Vec<String>, Vec<String>) {
    if snips.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let mut remove: Vec<bool> = msgs.iter().map(|m| snips.contains(&m.id)).collect();
    if !remove.iter().any(|&r| r) {
        return (Vec::new(), Vec::new());
    }
    let partners = pair_partners(msgs);
    let mut protected = vec![false; msgs.len()];
    if let Some(k) = keep
        && let Some(i) = msgs.iter().position(|m| m.id == k)
        && remove[i]
    {
        remove[i] = false;
        protected[i] = true;
    }
    // The session-start note (the date, the git state) is small and read once: it stays
    // with the first request, which a tag of their merged message also names.
    for (i, m) in msgs.iter().enumerate() {
        if remove[i] && m.meta == Some(MessageMeta::GitState) {
            remove[i] = false;
            protected[i] = true;
        }
    }
    // Un-removing a message can protect its partners in turn; iterate to a fixpoint.
    loop {
        let mut changed = false;
        for i in 0..msgs.len() {
            if remove[i] && partners[i].iter().any(|&p| !remove[p]) {
                remove[i] = false;
                protected[i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut removed = Vec::new();
    let mut prot = Vec::new();
    let mut i = 0;
    msgs.retain(|m| {
        let keep = !remove[i];
        if !keep {
            removed.push(m.id.clone());
        } else if protected[i] {
            prot.push(m.id.clone());
        }
        i += 1;
        keep
    });
    (removed, prot)
}
