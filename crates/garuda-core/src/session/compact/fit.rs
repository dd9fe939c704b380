//! What an installation keeps: the kept steps, shrunk until they fit the room the budgets
//! leave them, and the view without the material an installation regenerates anyway.

use std::collections::{HashMap, HashSet};

use super::split_index;
use crate::message::{Block, Role};
use crate::session::records::{MessageMeta, Record};
use crate::session::view::{ViewMessage, message_chars, trim_result};

/// The kept part of an installation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptPlan {
    /// Index of the first kept message.
    pub split: usize,
    /// Assistant steps kept.
    pub steps: usize,
    /// Tool results cut (to the stage-1 size) in the kept copies.
    pub trimmed: HashSet<String>,
    /// Characters of the kept part as installed.
    pub chars: usize,
}

/// Metas of messages an installation writes afresh (restored files and skills, the todo list,
/// instruction and model notes, the git state) or drops (snip nudges, skill-change notes): earlier copies of them
/// are left out of a new installation.
fn regenerated(meta: Option<MessageMeta>) -> bool {
    matches!(
        meta,
        Some(
            MessageMeta::RestoredFile
                | MessageMeta::Todo
                | MessageMeta::InstructionNote
                | MessageMeta::ModelNote
                | MessageMeta::GitState
                | MessageMeta::Nudge
                | MessageMeta::RestoredSkill
                | MessageMeta::SkillNote
                | MessageMeta::HookContext
                | MessageMeta::PlanNote
                | MessageMeta::RestoredPlan
        )
    )
}

/// The view's messages without the blocks of regenerated records (normalization may have
/// merged them into a neighbour); messages left empty go.
pub fn without_regenerated(messages: &[ViewMessage], records: &[Record]) -> Vec<ViewMessage> {
    let sources: HashSet<&str> = messages
        .iter()
        .flat_map(|m| m.source_ids.iter().map(String::as_str))
        .collect();
    let mut blocks_of: HashMap<&str, &[Block]> = HashMap::new();
    for r in records {
        if let Record::Message(m) = r
            && regenerated(m.meta)
            && sources.contains(m.uuid.as_str())
        {
            blocks_of.insert(m.uuid.as_str(), &m.content);
        }
    }
    if blocks_of.is_empty() {
        return messages.to_vec();
    }
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let drop: Vec<&Block> = m
            .source_ids
            .iter()
            .filter_map(|s| blocks_of.get(s.as_str()))
            .flat_map(|b| b.iter())
            .collect();
        if drop.is_empty() {
            out.push(m.clone());
            continue;
        }
        let mut m = m.clone();
        let mut drop = drop;
        m.message
            .content
            .retain(|b| match drop.iter().position(|d| *d == b) {
                Some(i) => {
                    drop.swap_remove(i);
                    false
                }
                None => true,
            });
        if !m.message.content.is_empty() {
            out.push(m);
        }
    }
    out
}

/// Characters of `kept` with the results in `trimmed` cut to `trim_to`.
pub fn kept_chars(kept: &[ViewMessage], trimmed: &HashSet<String>, trim_to: usize) -> usize {
    kept.iter()
        .map(|m| {
            if trimmed.is_empty() {
                return message_chars(&m.message);
            }
            m.message
                .content
                .iter()
                .map(|b| match b {
                    Block::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } if trimmed.contains(tool_use_id) => {
                        let mut c = content.clone();
                        trim_result(&mut c, trim_to);
                        Block::ToolResult {
                            tool_use_id: tool_use_id.clone(),
                            content: c,
                            is_error: *is_error,
                        }
                        .char_len()
                    }
                    other => other.char_len(),
                })
                .sum()
        })
        .sum()
}

/// Results in `kept` longer than `trim_to`, optionally only those before the newest step
/// (the last assistant message and what answers it).
fn long_results(kept: &[ViewMessage], trim_to: usize, spare_newest: bool) -> HashSet<String> {
    let newest = kept
        .iter()
        .rposition(|m| m.message.role == Role::Assistant)
        .unwrap_or(0);
    let mut out = HashSet::new();
    for (i, m) in kept.iter().enumerate() {
        if spare_newest && i >= newest {
            break;
        }
        for b in &m.message.content {
            if let Block::ToolResult {
                tool_use_id,
                content,
                ..
            } = b
                && content.iter().map(Block::char_len).sum::<usize>() > trim_to
            {
                out.insert(tool_use_id.clone());
            }
        }
    }
    out
}

/// Moves a split that would end the older part on the person's own request (a user message
/// with no tool results) to before it, so the request stays verbatim in the kept part and the
/// older part ends on a completed round: a summary instruction appended to the older part is
/// then never read as the person's pending words ("please read X. Summarize…" invites a read).
/// A split with nothing older than that request stays where it was.
pub fn with_its_request(messages: &[ViewMessage], split: usize) -> usize {
    let Some(before) = split.checked_sub(1) else {
        return split;
    };
    let m = &messages[before].message;
    let request = m.role == Role::User
        && !m
            .content
            .iter()
            .any(|b| matches!(b, Block::ToolResult { .. }));
    if request && before > 0 { before } else { split }
}

/// The kept part starting at `split` (a session memory covers what is before it), as it is or
/// with the results before the newest step cut, when that fits `room_chars`; None otherwise
/// or when nothing would be older than it.
pub fn kept_from(
    messages: &[ViewMessage],
    split: usize,
    trim_to: usize,
    room_chars: usize,
) -> Option<KeptPlan> {
    if split == 0 || split > messages.len() {
        return None;
    }
    let kept = &messages[split..];
    let steps = kept
        .iter()
        .filter(|m| m.message.role == Role::Assistant)
        .count();
    let none = HashSet::new();
    let chars = kept_chars(kept, &none, trim_to);
    if chars <= room_chars {
        return Some(KeptPlan {
            split,
            steps,
            trimmed: none,
            chars,
        });
    }
    let older = long_results(kept, trim_to, true);
    let chars = kept_chars(kept, &older, trim_to);
    (chars <= room_chars).then_some(KeptPlan {
        split,
        steps,
        trimmed: older,
        chars,
    })
}

/// Chooses the kept part so it fits `room_chars`: `keep_steps` steps as they are, then with
/// the results before the newest step cut, then fewer steps; as a last resort one step with
/// every result cut (the caller checks the whole still fits the window). None when the view
/// has nothing older than its last step.
pub fn plan_kept(
    messages: &[ViewMessage],
    keep_steps: usize,
    trim_to: usize,
    room_chars: usize,
) -> Option<KeptPlan> {
    let none = HashSet::new();
    let mut last = None;
    for steps in (1..=keep_steps.max(1)).rev() {
        let Some(split) = split_index(messages, steps).map(|s| with_its_request(messages, s))
        else {
            continue;
        };
        let kept = &messages[split..];
        let chars = kept_chars(kept, &none, trim_to);
        let plan = |trimmed: HashSet<String>, chars| KeptPlan {
            split,
            steps,
            trimmed,
            chars,
        };
        if chars <= room_chars {
            return Some(plan(none, chars));
        }
        let older = long_results(kept, trim_to, true);
        if !older.is_empty() {
            let c = kept_chars(kept, &older, trim_to);
            if c <= room_chars {
                return Some(plan(older, c));
            }
        }
        last = Some(split);
    }
    let split = last?;
    let kept = &messages[split..];
    let all = long_results(kept, trim_to, false);
    let chars = kept_chars(kept, &all, trim_to);
    Some(KeptPlan {
        split,
        steps: 1,
        trimmed: all,
        chars,
    })
}
