//! The records that install a compaction: boundary, the summary message (with the user's
//! own words), the kept steps, restored files and the todo list, sized to the budgets.

use std::collections::HashSet;

use super::Budgets;
use super::fit::{KeptPlan, kept_chars};
use super::handoff::todo_note;
use super::pinned::Pinned;
use crate::message::{Block, Role, Usage};
use crate::session::records::{
    CompactBoundaryRecord, CompactTrigger, InstructionChangeRecord, MessageMeta, MessageRecord,
    Record, Summarizer, TrimRecord, new_id,
};
use crate::session::tokens::TokenEstimator;
use crate::session::view::ViewMessage;

/// A todo item as the session keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TodoEntry {
    /// What to do.
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
}

/// A file re-read from disk for restoration (the caller reads it through the root-confined
/// module; most recent first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSnapshot {
    /// Workspace-relative path.
    pub path: String,
    /// Current content.
    pub content: String,
}

/// A skill the model loaded, re-read from disk for restoration (most recent first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillSnapshot {
    /// Its name.
    pub name: String,
    /// Its text as the `skill` tool gives it.
    pub text: String,
}

/// A restoration decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The path.
    pub path: String,
    /// The content, or None when only the path comes back (too large for the budget).
    pub content: Option<String>,
}

/// Paths a set of messages already carries in tool calls (`input.path`).
fn paths_in(messages: &[ViewMessage]) -> HashSet<String> {
    let mut out = HashSet::new();
    for m in messages {
        for b in &m.message.content {
            if let Block::ToolUse { input, .. } = b
                && let Some(p) = input.get("path").and_then(|v| v.as_str())
            {
                out.insert(p.to_string());
            }
        }
    }
    out
}

/// Chooses which files come back: most recent first, skipping those the kept part already
/// holds, at most `max_files`, each within `file_tokens` and all within `total_tokens`; a
/// file over a limit comes back as its path only.
pub fn select_restored_files(
    files: &[FileSnapshot],
    kept: &[ViewMessage],
    estimator: &TokenEstimator,
    max_files: usize,
    file_tokens: u64,
    total_tokens: u64,
) -> Vec<Restored> {
    let present = paths_in(kept);
    let mut seen = HashSet::new();
    let mut total = 0u64;
    let mut out = Vec::new();
    for f in files {
        if out.len() >= max_files {
            break;
        }
        if present.contains(&f.path) || !seen.insert(f.path.as_str()) {
            continue;
        }
        let t = estimator.estimate(f.content.chars().count());
        let fits = t <= file_tokens && total + t <= total_tokens;
        if fits {
            total += t;
        }
        out.push(Restored {
            path: f.path.clone(),
            content: fits.then(|| f.content.clone()),
        });
    }
    out
}

/// The restored skills' messages: most recent first, skipping those the kept part still
/// holds, each cut to the per-skill budget and all within the skills' budget (seed 001:
/// 5 000 and 25 000 tokens at 200 000, scaled with the window).
pub fn select_restored_skills(
    skills: &[SkillSnapshot],
    kept: &[ViewMessage],
    estimator: &TokenEstimator,
    b: &super::Budgets,
) -> Vec<String> {
    let present: HashSet<&str> = kept
        .iter()
        .flat_map(|m| m.message.content.iter())
        .filter_map(|blk| match blk {
            Block::ToolUse { input, .. } => input.get("name").and_then(|v| v.as_str()),
            _ => None,
        })
        .collect();
    let mut total = 0u64;
    let mut out = Vec::new();
    for s in skills {
        if present.contains(s.name.as_str()) {
            continue;
        }
        let room = b
            .restore_skill
            .min(b.restore_skills_total.saturating_sub(total));
        if room == 0 {
            break;
        }
        let mut text = format!(
            "<restored_skill name=\"{}\">\nYou loaded this skill before the compaction; keep \
             following it:\n{}\n</restored_skill>",
            s.name, s.text
        );
        let mut t = estimator.estimate(text.chars().count());
        if t > room {
            let cut = |head: &str| {
                format!(
                    "<restored_skill name=\"{}\">\nYou loaded this skill before the compaction; \
                     keep following it. Its text is cut here: load it again with the skill tool \
                     for the rest.\n{head}\n</restored_skill>",
                    s.name
                )
            };
            let room_chars = (room as f64 * estimator.chars_per_token()) as usize;
            let chars = room_chars.saturating_sub(cut("").chars().count() + 1);
            let head: String = s.text.chars().take(chars).collect();
            text = cut(&head);
            t = estimator.estimate(text.chars().count());
        }
        total += t;
        out.push(text);
    }
    out
}

/// The restored plan's message: the plan the user approved last, unless the kept part still
/// holds the call that presented it; cut to the plan budget, visibly.
pub fn restored_plan(
    plan: Option<&str>,
    kept: &[ViewMessage],
    estimator: &TokenEstimator,
    b: &super::Budgets,
) -> Option<String> {
    let plan = plan?;
    let present = kept
        .iter()
        .flat_map(|m| m.message.content.iter())
        .any(|blk| match blk {
            Block::ToolUse { input, .. } => {
                input.get("plan").and_then(|v| v.as_str()).map(str::trim) == Some(plan)
            }
            _ => false,
        });
    if present || b.restore_plan == 0 {
        return None;
    }
    let wrap = |body: &str, cut: bool| {
        let tail = if cut {
            " Its text is cut here; ask the user for the rest if you need it."
        } else {
            ""
        };
        format!(
            "<restored_plan>\nThe user approved this plan before the compaction, and plan mode \
             ended then; carry on with what is not done yet.{tail}\n{body}\n</restored_plan>"
        )
    };
    let text = wrap(plan, false);
    if estimator.estimate(text.chars().count()) <= b.restore_plan {
        return Some(text);
    }
    let room = (b.restore_plan as f64 * estimator.chars_per_token()) as usize;
    let chars = room.saturating_sub(wrap("", true).chars().count() + 1);
    let head: String = plan.chars().take(chars).collect();
    Some(wrap(&head, true))
}

/// The text of a restored-file message.
pub fn restored_file_text(r: &Restored) -> String {
    match &r.content {
        Some(c) => format!(
            "<restored_file path=\"{}\">\nThis file was read or edited before the compaction; its current \
             content on disk:\n{c}\n</restored_file>",
            r.path
        ),
        None => format!(
            "<restored_file path=\"{}\">\nThis file was read or edited before the compaction. It is too large \
             to restore here; read it again with read_file when you need it.\n</restored_file>",
            r.path
        ),
    }
}

/// The first block of the summary message.
pub fn summary_intro(transcript_path: &str, extractive: bool) -> String {
    let what = if extractive {
        "An extractive handoff"
    } else {
        "A summary"
    };
    format!(
        "This session continues from an earlier, longer conversation that ran out of context. \
         The user's first request and their own later messages follow verbatim, then {} of the \
         earlier part; the full transcript is at {transcript_path}. Continue the work directly \
         from where it left off, without asking the user to repeat anything.",
        what.to_ascii_lowercase()
    )
}

/// The summary to install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummaryText {
    /// A model summary (already passed through `strip_analysis`).
    Model(String),
    /// An extractive handoff (from `extractive_handoff`).
    Extractive(String),
}

impl SummaryText {
    /// The text.
    pub fn text(&self) -> &str {
        match self {
            SummaryText::Model(s) | SummaryText::Extractive(s) => s,
        }
    }

    /// The last block of the summary message.
    pub fn block(&self) -> Block {
        match self {
            SummaryText::Model(s) => Block::text(format!("<summary>\n{s}\n</summary>")),
            SummaryText::Extractive(s) => Block::text(s.clone()),
        }
    }
}

/// Opens the list of references in a summary message.
pub const REFERENCES_OPEN: &str = "<references>";

/// Most paths an edited-files list names (the newest when there are more).
const MAX_EDITED: usize = 200;

/// The list of the files the session changed, carried by Garuda from the transcript like the
/// user's words: which files were touched never depends on the summary.
fn edited_block(paths: &[String]) -> Option<Block> {
    if paths.is_empty() {
        return None;
    }
    let skip = paths.len().saturating_sub(MAX_EDITED);
    let mut text = String::from(
        "<files_edited>\nFiles created or changed in this session so far, oldest first (read one for its current content):\n",
    );
    if skip > 0 {
        text.push_str(&format!("- … {skip} earlier files\n"));
    }
    for p in &paths[skip..] {
        text.push_str("- ");
        text.push_str(p);
        text.push('\n');
    }
    text.push_str("</files_edited>");
    Some(Block::text(text))
}

/// The summary block with the summarizer's references after it, in the same block (so it
/// stays the message's last block, the one a later compaction carries on): paths and notes,
/// never content.
pub fn with_references(block: Block, references: &[(String, String)]) -> Block {
    let Block::Text { mut text } = block else {
        return block;
    };
    if references.is_empty() {
        return Block::Text { text };
    }
    text.push_str(&format!(
        "\n{REFERENCES_OPEN}\nFiles the summarizer points to (not included here; read them when \
         you need them):\n"
    ));
    for (path, note) in references {
        if note.is_empty() {
            text.push_str(&format!("- {path}\n"));
        } else {
            text.push_str(&format!("- {path}: {note}\n"));
        }
    }
    text.push_str("</references>");
    Block::Text { text }
}

/// The summary body of a view that opens with an installed summary: the last block of that
/// message (the summary message's layout: intro, the user's words, then the body).
pub fn previous_summary(messages: &[ViewMessage]) -> Option<String> {
    let first = messages.first()?;
    if !matches!(
        first.meta,
        Some(MessageMeta::Summary | MessageMeta::Handoff)
    ) {
        return None;
    }
    match first.message.content.last()? {
        Block::Text { text } => Some(text.clone()),
        _ => None,
    }
}

/// Nested instruction files and path-scoped rules in force, re-read from disk, that the
/// installation carries right after the summary (in the compacted prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reattach {
    /// The note's text.
    pub text: String,
    /// The sources it holds: (path, version).
    pub sources: Vec<(String, String)>,
}

/// Everything `plan_installation` decides from.
#[derive(Debug, Clone)]
pub struct InstallInput<'a> {
    /// The view's messages being compacted (without regenerated material).
    pub messages: &'a [ViewMessage],
    /// The kept part.
    pub kept: &'a KeptPlan,
    /// The summary.
    pub summary: SummaryText,
    /// The user's words carried verbatim.
    pub pinned: &'a Pinned,
    /// What started it.
    pub trigger: CompactTrigger,
    /// Context tokens before.
    pub tokens_before: u64,
    /// System prompt and tool tokens, counted in the estimate after.
    pub fixed_tokens: u64,
    /// Path of the full transcript, named in the summary message.
    pub transcript_path: &'a str,
    /// Files read or edited, re-read from disk, most recent first.
    pub files: &'a [FileSnapshot],
    /// The session's todo list.
    pub todo: &'a [TodoEntry],
    /// The git state note captured at session start (carried past every compaction).
    pub git_state: Option<&'a str>,
    /// Nested instructions and rules in force, re-attached after the summary.
    pub instructions: Option<&'a Reattach>,
    /// The budgets.
    pub budgets: &'a Budgets,
    /// Characters a cut tool result keeps.
    pub trim_to: usize,
    /// The session's estimator.
    pub estimator: &'a TokenEstimator,
    /// Time of the records.
    pub now_ms: u64,
    /// The path that produced the summary.
    pub summarizer: Summarizer,
    /// What the summary requests used.
    pub summary_usage: Option<Usage>,
    /// Files the summarizer pointed to, with its notes: listed in the summary, no content.
    pub references: &'a [(String, String)],
    /// Every file the session's tools created or changed, oldest first (from the transcript).
    pub edited: &'a [String],
    /// The skills the model loaded, re-read from disk, most recent first.
    pub skills: &'a [SkillSnapshot],
    /// The plan the user approved last (`exit_plan_mode`), if any.
    pub plan: Option<&'a str>,
}

/// A planned installation.
#[derive(Debug, Clone, PartialEq)]
pub struct Installation {
    /// The records, in order: boundary, summary message, kept steps (copied, re-parented),
    /// restored files, the todo list, the git state, and a trim record for the kept results
    /// cut to fit.
    /// Append them in one batch.
    pub records: Vec<Record>,
    /// Estimated context tokens after.
    pub tokens_after: u64,
    /// Restored files whose whole content came back: (path, id of its message).
    pub restored: Vec<(String, String)>,
    /// The id of the message re-attaching nested instructions and rules, when there is one.
    pub instructions_id: Option<String>,
}

/// Plans the installation. Restored files get what is left of the target after the summary,
/// the kept part and the todo list, within the scaled restoration budgets.
pub fn plan_installation(input: &InstallInput<'_>) -> Installation {
    let split = input.kept.split.min(input.messages.len());
    let kept = &input.messages[split..];
    let now = input.now_ms;
    let mut msgs: Vec<MessageRecord> = Vec::new();
    fn push(
        msgs: &mut Vec<MessageRecord>,
        role: Role,
        content: Vec<Block>,
        meta: Option<MessageMeta>,
        time: u64,
        copy_of: Option<String>,
    ) -> usize {
        let parent_uuid = msgs.last().map(|m| m.uuid.clone());
        msgs.push(MessageRecord {
            uuid: new_id(),
            parent_uuid,
            role,
            content,
            time,
            meta,
            is_virtual: false,
            copy_of,
        });
        msgs.len() - 1
    }
    let (meta, extractive) = match &input.summary {
        SummaryText::Model(_) => (MessageMeta::Summary, false),
        SummaryText::Extractive(_) => (MessageMeta::Handoff, true),
    };
    let mut content = vec![Block::text(summary_intro(
        input.transcript_path,
        extractive,
    ))];
    content.extend(input.pinned.blocks());
    content.extend(edited_block(input.edited));
    content.push(with_references(input.summary.block(), input.references));
    push(&mut msgs, Role::User, content, Some(meta), now, None);
    // The instructions in force join the compacted prefix (the view merges them into the
    // summary's user message), before the kept steps.
    let instructions_id = input.instructions.map(|r| {
        let i = push(
            &mut msgs,
            Role::User,
            vec![Block::text(r.text.clone())],
            Some(MessageMeta::InstructionNote),
            now,
            None,
        );
        msgs[i].uuid.clone()
    });
    let head = msgs.len();
    // Kept copies hold their content whole; the cuts are a trim record in the same batch, so
    // the view knows those results are not whole (and a resume replays the same cut).
    for m in kept {
        let copy_of = (!m.source_ids.is_empty()).then(|| m.id.clone());
        push(
            &mut msgs,
            m.message.role,
            m.message.content.clone(),
            m.meta,
            m.time,
            copy_of,
        );
    }
    let summary_chars: usize = msgs[..head]
        .iter()
        .flat_map(|m| m.content.iter())
        .map(Block::char_len)
        .sum();
    let kept_chars = kept_chars(kept, &input.kept.trimmed, input.trim_to);
    let todo_text = todo_note(input.todo);
    let chars_so_far = summary_chars
        + kept_chars
        + todo_text.as_ref().map_or(0, |t| t.chars().count())
        + input.git_state.map_or(0, |t| t.chars().count());
    let used = input.fixed_tokens + input.estimator.estimate(chars_so_far);
    let b = input.budgets;
    let room = b.target.saturating_sub(used).min(b.restore_total);
    let mut restored = Vec::new();
    for r in select_restored_files(
        input.files,
        kept,
        input.estimator,
        b.restore_files,
        b.restore_file,
        room,
    ) {
        let i = push(
            &mut msgs,
            Role::User,
            vec![Block::text(restored_file_text(&r))],
            Some(MessageMeta::RestoredFile),
            now,
            None,
        );
        if r.content.is_some() {
            restored.push((r.path.clone(), msgs[i].uuid.clone()));
        }
    }
    if let Some(text) = restored_plan(input.plan, kept, input.estimator, b) {
        push(
            &mut msgs,
            Role::User,
            vec![Block::text(text)],
            Some(MessageMeta::RestoredPlan),
            now,
            None,
        );
    }
    for text in select_restored_skills(input.skills, kept, input.estimator, b) {
        push(
            &mut msgs,
            Role::User,
            vec![Block::text(text)],
            Some(MessageMeta::RestoredSkill),
            now,
            None,
        );
    }
    if let Some(t) = todo_text {
        push(
            &mut msgs,
            Role::User,
            vec![Block::text(t)],
            Some(MessageMeta::Todo),
            now,
            None,
        );
    }
    if let Some(git) = input.git_state {
        push(
            &mut msgs,
            Role::User,
            vec![Block::text(git)],
            Some(MessageMeta::GitState),
            now,
            None,
        );
    }
    let restored_chars: usize = msgs[head + kept.len()..]
        .iter()
        .flat_map(|m| m.content.iter())
        .map(Block::char_len)
        .sum();
    let tokens_after = input.fixed_tokens
        + input
            .estimator
            .estimate(summary_chars + kept_chars + restored_chars);
    let trim = (!input.kept.trimmed.is_empty()).then(|| {
        let mut ids: Vec<String> = input.kept.trimmed.iter().cloned().collect();
        ids.sort();
        Record::Trim(TrimRecord {
            uuid: new_id(),
            time: now,
            tool_use_ids: ids,
            keep_chars: input.trim_to,
        })
    });
    let attached = input
        .instructions
        .zip(instructions_id.as_ref())
        .map(|(r, id)| {
            Record::InstructionChange(InstructionChangeRecord {
                uuid: new_id(),
                time: now,
                paths: r.sources.iter().map(|(p, _)| p.clone()).collect(),
                sha256: r.sources.iter().map(|(_, v)| v.clone()).collect(),
                scoped: true,
                message_id: Some(id.clone()),
            })
        });
    let boundary = CompactBoundaryRecord {
        uuid: new_id(),
        time: now,
        trigger: input.trigger,
        tokens_before: input.tokens_before,
        tokens_after,
        kept_head_id: kept.first().map(|m| m.id.clone()),
        kept_tail_id: kept.last().map(|m| m.id.clone()),
        kept_anchor_id: (!kept.is_empty())
            .then(|| head.checked_sub(1).map(|i| msgs[i].uuid.clone()))
            .flatten(),
        extractive,
        install_count: (msgs.len() + usize::from(trim.is_some()) + usize::from(attached.is_some()))
            as u32,
        summarizer: Some(input.summarizer),
        summary_usage: input.summary_usage,
    };
    let mut records = Vec::with_capacity(msgs.len() + 3);
    records.push(Record::CompactBoundary(boundary));
    records.extend(msgs.into_iter().map(Record::Message));
    records.extend(attached);
    records.extend(trim);
    Installation {
        records,
        tokens_after,
        restored,
        instructions_id,
    }
}

/// The one-line note that opens a view restarted from the current request.
pub fn fresh_start_note(transcript_path: &str) -> String {
    format!(
        "<garuda_note>The window is too small for the earlier conversation: it was left out \
         (the full transcript is at {transcript_path}); continue from the request below.\
         </garuda_note>"
    )
}

/// What a fresh start is planned from.
#[derive(Debug, Clone, Copy)]
pub struct FreshStart<'a> {
    /// The view's messages.
    pub messages: &'a [ViewMessage],
    /// Index of the first message kept (the current request).
    pub from: usize,
    /// The note before it ([`fresh_start_note`]).
    pub note: &'a str,
    /// What asked for it.
    pub trigger: CompactTrigger,
    /// Context tokens before.
    pub tokens_before: u64,
    /// Tokens of the system prompt and tools.
    pub fixed_tokens: u64,
    /// The session's estimator.
    pub estimator: &'a TokenEstimator,
    /// Unix milliseconds.
    pub now_ms: u64,
}

/// The last resort when nothing else fits the window: an installation whose view starts
/// from `messages[from..]` (the current request and what its turn did since), after a
/// one-line note. No summary, no restored files: nothing but what the request needs.
pub fn plan_fresh_start(input: &FreshStart<'_>) -> Installation {
    let FreshStart {
        messages,
        from,
        note,
        trigger,
        tokens_before,
        fixed_tokens,
        estimator,
        now_ms,
    } = *input;
    let kept = &messages[from.min(messages.len())..];
    let mut msgs = vec![MessageRecord {
        uuid: new_id(),
        parent_uuid: None,
        role: Role::User,
        content: vec![Block::text(note)],
        time: now_ms,
        meta: Some(MessageMeta::Handoff),
        is_virtual: false,
        copy_of: None,
    }];
    for m in kept {
        msgs.push(MessageRecord {
            uuid: new_id(),
            parent_uuid: msgs.last().map(|p| p.uuid.clone()),
            role: m.message.role,
            content: m.message.content.clone(),
            time: m.time,
            meta: m.meta,
            is_virtual: false,
            copy_of: (!m.source_ids.is_empty()).then(|| m.id.clone()),
        });
    }
    let chars: usize = msgs
        .iter()
        .flat_map(|m| m.content.iter())
        .map(Block::char_len)
        .sum();
    let tokens_after = fixed_tokens + estimator.estimate(chars);
    let boundary = CompactBoundaryRecord {
        uuid: new_id(),
        time: now_ms,
        trigger,
        tokens_before,
        tokens_after,
        kept_head_id: kept.first().map(|m| m.id.clone()),
        kept_tail_id: kept.last().map(|m| m.id.clone()),
        kept_anchor_id: (!kept.is_empty()).then(|| msgs[0].uuid.clone()),
        extractive: true,
        install_count: msgs.len() as u32,
        summarizer: Some(Summarizer::Extractive),
        summary_usage: None,
    };
    let mut records = vec![Record::CompactBoundary(boundary)];
    records.extend(msgs.into_iter().map(Record::Message));
    Installation {
        records,
        tokens_after,
        restored: Vec::new(),
        instructions_id: None,
    }
}

/// Index of the current request in `messages`: the last user message that answers no tool
/// call (the user's words, with any notes merged into it). None when there is none.
pub fn current_request(messages: &[ViewMessage]) -> Option<usize> {
    messages.iter().rposition(|m| {
        m.message.role == Role::User
            && !m
                .message
                .content
                .iter()
                .any(|b| matches!(b, Block::ToolResult { .. }))
    })
}
