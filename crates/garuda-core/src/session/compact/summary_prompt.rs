//! The summary request: the instruction text (yoi sections) and the message rewriting for
//! the fallback path.

use crate::message::{Block, Message};

/// The system prompt of a summary request that does not share the session's prefix.
pub const SUMMARY_SYSTEM: &str = "You are Garuda's context compaction assistant. You read part \
of a coding session between a user and a coding agent and write the structured summary the \
agent will continue from. You never call tools; you answer with text only.";

/// Builds the summary instruction. `compact_instructions` is the "Compact Instructions"
/// section of the instruction files; `focus` the manual `/compact` focus text;
/// `target_tokens` the size the summary must stay under.
pub fn summary_instruction(
    compact_instructions: Option<&str>,
    focus: Option<&str>,
    target_tokens: u64,
) -> String {
    let mut s = String::from("<garuda_note>");
    s.push_str(SUMMARY_OPENING);
    push_sections(&mut s, compact_instructions, target_tokens);
    if let Some(f) = focus.map(str::trim).filter(|s| !s.is_empty()) {
        s.push_str("\n\nThe user asks the summary to keep, above all: ");
        s.push_str(f);
    }
    s.push_str("</garuda_note>");
    s
}

/// Appends the sections, the size target and the project's compact instructions.
pub(super) fn push_sections(
    s: &mut String,
    compact_instructions: Option<&str>,
    target_tokens: u64,
) {
    s.push_str(SUMMARY_SECTIONS);
    s.push_str(&format!(
        "\n\nKeep the summary under about {target_tokens} tokens (about {} words): it must fit \
         the window with room to continue the work.",
        target_tokens * 3 / 4
    ));
    if let Some(ci) = compact_instructions
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        s.push_str("\n\nThe project's compact instructions (follow them):\n");
        s.push_str(ci);
    }
}

const SUMMARY_OPENING: &str = "\
The conversation above is about to be compacted: it will be replaced by your summary \
plus the most recent steps. Write that summary now.

";

/// What every summary writes, and how: the analysis draft, then seed 003's sections. The
/// compaction's instruction and the session memory's share it.
const SUMMARY_SECTIONS: &str = "\
Do not call any tool: tools are disabled for this request and any call is refused. Answer with \
text only.

First think in an <analysis> block: go through the conversation in order and note every user \
request, decision, file, change, command and result, and what was happening at the end. This \
draft is removed before the summary is used.

Then write the summary inside <summary>...</summary>, in exactly these sections:

Completed Tasks
(task name)
• what was done (concrete type, file and function names, paths with line numbers)
• gotchas or facts that came up

Active Task
(task name)
• goal
• current state (what is done, what is not)
• next step

Key Decisions
• (decision) — (reason)

User Directives
• \"verbatim user line\" — every instruction, constraint or preference the user gave, quoted \
exactly as written. (Garuda also carries the user's own messages verbatim beside your summary; \
list the directives here anyway, so they stand out.)

Current Work
(2–3 lines on what was happening just before this point, precise enough to continue without \
asking the user.)

Keep code snippets, file contents and raw tool output out of the summary: files can be read \
again. Drop greetings and repeated output. Keep commands that were run and their results, and \
open problems.";

/// Asks for a shorter version of a summary that came back over its size target.
pub fn shrink_instruction(summary: &str, tokens: u64, target_tokens: u64) -> String {
    format!(
        "<garuda_note>The summary below is about {tokens} tokens; the target is {target_tokens}. \
         Rewrite it in the same sections under about {target_tokens} tokens: keep every user \
         directive verbatim, every file path and decision, and the current work; drop detail \
         the next session can re-read from files. Answer with the summary inside \
         <summary>...</summary> only.</garuda_note>\n\n<summary>\n{summary}\n</summary>"
    )
}

/// Marker that replaces an image in the rewritten (non-shared) summary request.
pub const IMAGE_MARKER: &str = "[image]";

/// Rewrites messages for the summary request that does not share the cached prefix:
/// thinking blocks are left out, media become text markers, and a provider's server-side
/// search (call and result) one marker (`[web search: QUERY → N results]`): the request
/// carries no server tool, and the results' encrypted content means nothing to a summary.
pub fn rewrite_for_summary(messages: &[Message]) -> Vec<Message> {
    fn blocks(content: &[Block]) -> Vec<Block> {
        let markers = crate::message::server_markers(content);
        content
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b {
                Block::Provider { .. } => markers
                    .iter()
                    .find(|(at, _)| *at == i)
                    .map(|(_, m)| Block::text(m.clone())),
                Block::Thinking { .. } => None,
                Block::Image { .. } => Some(Block::text(IMAGE_MARKER)),
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => Some(Block::ToolResult {
                    tool_use_id: tool_use_id.clone(),
                    content: blocks(content),
                    is_error: *is_error,
                }),
                other => Some(other.clone()),
            })
            .collect()
    }
    messages
        .iter()
        .map(|m| Message {
            role: m.role,
            content: blocks(&m.content),
        })
        .filter(|m| !m.content.is_empty())
        .collect()
}

/// The summary out of the model's answer: the `<analysis>` draft removed, the `<summary>`
/// tags unwrapped. Empty when the answer holds no summary text.
pub fn strip_analysis(text: &str) -> String {
    let mut rest = text.to_string();
    while let Some(a) = rest.find("<analysis>") {
        match rest[a..].find("</analysis>") {
            Some(b) => rest.replace_range(a..a + b + "</analysis>".len(), ""),
            // An unterminated draft: everything after it is draft.
            None => rest.truncate(a),
        }
    }
    if let Some(a) = rest.find("<summary>") {
        let inner = &rest[a + "<summary>".len()..];
        let inner = inner.find("</summary>").map_or(inner, |b| &inner[..b]);
        return inner.trim().to_string();
    }
    rest.trim().to_string()
}
