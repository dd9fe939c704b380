//! Stage 6: make the view provider-valid.
//!
//! Drops virtual and display records, strips refused media, drops orphan tool results,
//! merges consecutive messages of one role, starts with a user message, and gives every
//! tool_use its tool_result in the very next message (moved there, or synthesized as
//! interrupted). Tool results come first in their user message.

use std::collections::{HashMap, HashSet};

use super::{ViewMessage, Work};
use crate::message::{Block, Message, Role};
use crate::session::records::MessageMeta;

/// The result synthesized for a tool_use that never got one.
pub const INTERRUPTED_TEXT: &str = "[interrupted]";
/// Replaces media the provider refused.
pub const MEDIA_REMOVED_TEXT: &str = "[image removed: the provider could not accept it]";
/// Opens a view whose first kept message is the model's.
pub const CONTINUES_TEXT: &str = "[The conversation continues from earlier messages.]";

/// Replaces every image (also inside tool results) with the marker; true when one was found.
fn strip_media(blocks: &mut [Block]) -> bool {
    let mut found = false;
    for b in blocks {
        match b {
            Block::Image { .. } => {
                *b = Block::text(MEDIA_REMOVED_TEXT);
                found = true;
            }
            Block::ToolResult { content, .. } => found |= strip_media(content),
            _ => {}
        }
    }
    found
}

fn has_media(blocks: &[Block]) -> bool {
    blocks.iter().any(|b| match b {
        Block::Image { .. } => true,
        Block::ToolResult { content, .. } => has_media(content),
        _ => false,
    })
}

/// The transcript ids whose media a provider refusal names: the message at the index the
/// error text gives (`messages.N.content…`, Anthropic's wording) when it carries media, else
/// every message of the view that still carries media. Empty: nothing left to strip.
pub fn media_refusal_targets(view: &super::View, reason: &str) -> Vec<String> {
    let named = reason
        .split("messages.")
        .skip(1)
        .filter_map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<usize>().ok()
        })
        .filter_map(|i| view.messages.get(i))
        .filter(|m| has_media(&m.message.content))
        .flat_map(|m| m.source_ids.iter().cloned())
        .collect::<Vec<_>>();
    if !named.is_empty() {
        return named;
    }
    view.messages
        .iter()
        .filter(|m| has_media(&m.message.content))
        .flat_map(|m| m.source_ids.iter().cloned())
        .collect()
}

fn merge_runs(msgs: Vec<Work>) -> Vec<Work> {
    let mut out: Vec<Work> = Vec::with_capacity(msgs.len());
    for m in msgs {
        if m.content.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(prev) if prev.role == m.role => {
                prev.content.extend(m.content);
                prev.source_ids.extend(m.source_ids);
            }
            _ => out.push(m),
        }
    }
    out
}

pub(crate) fn results_first(content: &mut Vec<Block>) {
    if content
        .iter()
        .any(|b| matches!(b, Block::ToolResult { .. }))
    {
        let (mut results, others): (Vec<Block>, Vec<Block>) = content
            .drain(..)
            .partition(|b| matches!(b, Block::ToolResult { .. }));
        results.extend(others);
        *content = results;
    }
}

fn synthetic(id: String, role: Role, content: Vec<Block>, time: u64) -> Work {
    Work {
        source_ids: Vec::new(),
        id,
        role,
        content,
        time,
        meta: None,
        is_virtual: false,
    }
}

/// Normalizes `msgs`; `at_start` says they open the view (a leading assistant message then
/// gets a synthetic user opener). Media of the `refused` messages becomes a text marker; the
/// second value lists the messages that lost media that way.
pub(crate) fn normalize(
    msgs: Vec<Work>,
    refused: &HashSet<String>,
    at_start: bool,
) -> (Vec<ViewMessage>, Vec<String>) {
    let mut stripped = Vec::new();
    // a. filter, strip media, drop misplaced and orphan blocks.
    let mut seen_uses: HashSet<String> = HashSet::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut kept = Vec::with_capacity(msgs.len());
    for mut m in msgs {
        if m.is_virtual || m.meta == Some(MessageMeta::Display) {
            continue;
        }
        if refused.contains(&m.id) && strip_media(&mut m.content) {
            stripped.push(m.id.clone());
        }
        let role = m.role;
        m.content.retain(|b| match b {
            Block::ToolUse { id, .. } => role == Role::Assistant && seen_uses.insert(id.clone()),
            Block::ToolResult { tool_use_id, .. } => {
                role == Role::User
                    && seen_uses.contains(tool_use_id)
                    && answered.insert(tool_use_id.clone())
            }
            Block::Provider { .. } => role == Role::Assistant,
            _ => true,
        });
        // A provider call and its result travel together or not at all.
        crate::message::pair_server_blocks(&mut m.content);
        kept.push(m);
    }
    // b. merge runs, start with the user.
    let mut msgs = merge_runs(kept);
    if let Some(first) = msgs.first()
        && first.role == Role::Assistant
        && at_start
    {
        let t = first.time;
        msgs.insert(
            0,
            synthetic(
                "synthetic-start".into(),
                Role::User,
                vec![Block::text(CONTINUES_TEXT)],
                t,
            ),
        );
    }
    // c. pair every tool_use with a result in the next message.
    let mut result_at: HashMap<String, usize> = HashMap::new();
    for (i, m) in msgs.iter().enumerate() {
        for b in &m.content {
            if let Block::ToolResult { tool_use_id, .. } = b {
                result_at.insert(tool_use_id.clone(), i);
            }
        }
    }
    let mut i = 0;
    while i < msgs.len() {
        let uses: Vec<String> = if msgs[i].role == Role::Assistant {
            msgs[i]
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, .. } => Some(id.clone()),
                    _ => None,
                })
                .collect()
        } else {
            Vec::new()
        };
        if msgs[i].role == Role::Assistant && !uses.is_empty() {
            if msgs.get(i + 1).is_none_or(|n| n.role != Role::User) {
                let t = msgs[i].time;
                msgs.insert(
                    i + 1,
                    synthetic(
                        format!("synthetic-results-{}", uses[0]),
                        Role::User,
                        Vec::new(),
                        t,
                    ),
                );
                // Indices after i shifted by one.
                for v in result_at.values_mut() {
                    if *v > i {
                        *v += 1;
                    }
                }
            }
            let use_set: HashSet<&String> = uses.iter().collect();
            // Results in the answer message that belong to nobody here are dropped.
            msgs[i + 1].content.retain(|b| match b {
                Block::ToolResult { tool_use_id, .. } => use_set.contains(tool_use_id),
                _ => true,
            });
            for u in &uses {
                let here = result_at.get(u).copied();
                match here {
                    Some(j) if j == i + 1 => {}
                    Some(j) if j > i + 1 => {
                        let pos = msgs[j].content.iter().position(
                            |b| matches!(b, Block::ToolResult { tool_use_id, .. } if tool_use_id == u),
                        );
                        if let Some(p) = pos {
                            let blk = msgs[j].content.remove(p);
                            msgs[i + 1].content.push(blk);
                        }
                    }
                    _ => msgs[i + 1].content.push(Block::ToolResult {
                        tool_use_id: u.clone(),
                        content: vec![Block::text(INTERRUPTED_TEXT)],
                        is_error: true,
                    }),
                }
            }
            // Keep results in the order of their uses.
            let order: HashMap<&String, usize> =
                uses.iter().enumerate().map(|(k, u)| (u, k)).collect();
            results_first(&mut msgs[i + 1].content);
            let n_results = msgs[i + 1]
                .content
                .iter()
                .take_while(|b| matches!(b, Block::ToolResult { .. }))
                .count();
            msgs[i + 1].content[..n_results].sort_by_key(|b| match b {
                Block::ToolResult { tool_use_id, .. } => {
                    order.get(tool_use_id).copied().unwrap_or(usize::MAX)
                }
                _ => usize::MAX,
            });
            i += 2;
        } else {
            if msgs[i].role == Role::User {
                // A user message not right after a tool call holds no results.
                msgs[i]
                    .content
                    .retain(|b| !matches!(b, Block::ToolResult { .. }));
            }
            i += 1;
        }
    }
    // d. moving results may have emptied messages; merging again cannot split a pair, since
    // every assistant tool_use is now followed by a non-empty user message.
    let mut msgs = merge_runs(msgs);
    for m in &mut msgs {
        if m.role == Role::User {
            results_first(&mut m.content);
        }
    }
    if let Some(first) = msgs.first()
        && first.role == Role::Assistant
        && at_start
    {
        let t = first.time;
        msgs.insert(
            0,
            synthetic(
                "synthetic-start".into(),
                Role::User,
                vec![Block::text(CONTINUES_TEXT)],
                t,
            ),
        );
    }
    let mut out = Vec::with_capacity(msgs.len());
    let mut parent: Option<String> = None;
    for m in msgs {
        let id = m.source_ids.first().cloned().unwrap_or(m.id);
        out.push(ViewMessage {
            parent: parent.replace(id.clone()),
            id,
            source_ids: m.source_ids,
            meta: m.meta,
            time: m.time,
            message: Message {
                role: m.role,
                content: m.content,
            },
        });
    }
    (out, stripped)
}

/// Checks what providers require: the first message is the user's, roles alternate, every
/// tool_use is answered in the next message, results come first there, and no result is an
/// orphan. Returns a description of the first violation.
pub fn check_pairing(messages: &[Message]) -> Result<(), String> {
    if let Some(first) = messages.first()
        && first.role != Role::User
    {
        return Err("first message is not from the user".into());
    }
    for (i, m) in messages.iter().enumerate() {
        if i > 0 && messages[i - 1].role == m.role {
            return Err(format!("messages {} and {i} have the same role", i - 1));
        }
        if m.content.is_empty() {
            return Err(format!("message {i} is empty"));
        }
        let results: Vec<&String> = m
            .content
            .iter()
            .filter_map(|b| match b {
                Block::ToolResult { tool_use_id, .. } => Some(tool_use_id),
                _ => None,
            })
            .collect();
        let leading = m
            .content
            .iter()
            .take_while(|b| matches!(b, Block::ToolResult { .. }))
            .count();
        if leading != results.len() {
            return Err(format!("message {i}: tool results do not come first"));
        }
        let expected: Vec<&String> = if i > 0 {
            messages[i - 1]
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, .. } => Some(id),
                    _ => None,
                })
                .collect()
        } else {
            Vec::new()
        };
        if m.role == Role::User {
            let mut a = results.clone();
            let mut b = expected.clone();
            a.sort();
            b.sort();
            if a != b {
                return Err(format!(
                    "message {i}: results {a:?} do not answer uses {b:?}"
                ));
            }
        } else if !results.is_empty() {
            return Err(format!("assistant message {i} holds tool results"));
        }
        // A provider-side call is answered in its own message, by the provider.
        let mut paired = m.content.clone();
        crate::message::pair_server_blocks(&mut paired);
        if paired.len() != m.content.len() {
            return Err(format!("message {i}: a provider call without its result"));
        }
        if m.role == Role::User
            && m.content
                .iter()
                .any(|b| matches!(b, Block::Provider { .. }))
        {
            return Err(format!("user message {i} holds a provider block"));
        }
    }
    if let Some(last) = messages.last()
        && last
            .content
            .iter()
            .any(|b| matches!(b, Block::ToolUse { .. }))
    {
        return Err("the last message has unanswered tool calls".into());
    }
    Ok(())
}
