//! The compaction worker (seed 003), pure: a bounded side session that browses an overview
//! of the older part instead of reading it whole. This module holds what needs no IO: the
//! capture (one entry per user text, assistant text or tool call with its result), the
//! overview, entry search and reads, the worker's seven read-only tools, its step, token and
//! restoration budgets, and what it hands back. `turn/worker.rs` runs it against the model.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Budgets;
use super::handoff::render_todo;
use super::install::TodoEntry;
use super::pinned::cut_with_marker;
use crate::message::{Block, Message, Role, ToolSpec};

/// Which summarizer a compaction uses (`[context] summarizer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Summarizer {
    /// The worker where the older part does not fit one summary request, else one request.
    #[default]
    Auto,
    /// Always the worker (the regular request when it writes no summary).
    Worker,
    /// One summary request (chunks when the older part does not fit one).
    Single,
}

impl<'de> Deserialize<'de> for Summarizer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // The key is named in the message: serde's own names only the values.
        let v = String::deserialize(d)?;
        match v.as_str() {
            "auto" => Ok(Summarizer::Auto),
            "worker" => Ok(Summarizer::Worker),
            "single" => Ok(Summarizer::Single),
            other => Err(serde::de::Error::custom(format!(
                "[context] summarizer = \"{other}\" is not a summarizer; expected \"auto\", \
                 \"worker\" or \"single\""
            ))),
        }
    }
}

impl Summarizer {
    /// True when the worker summarizes an older part that needs `chunks` summary requests.
    pub fn uses_worker(self, chunks: usize) -> bool {
        match self {
            Summarizer::Auto => chunks > 1,
            Summarizer::Worker => true,
            Summarizer::Single => false,
        }
    }
}

/// The worker's system prompt: seed 003's, with Garuda's tool names.
pub const WORKER_SYSTEM: &str = "You are Garuda's context compaction worker. Your job is to hand \
the next session a structured summary plus pointers to the files it actually needs, not a \
narrative transcript of the conversation.

The conversation input is a bounded overview of the older part of a coding session, not the \
full transcript. Tool result bodies and reasoning are intentionally omitted unless a tool \
exposes more detail. Your tools only read; nothing you do changes the workspace or the \
session. If you receive a compact worker budget warning, stop broad exploration immediately, \
read only if absolutely necessary, and call write_summary.

Workflow

1. Read the provided overview and the current todo list.
2. If the overview is not enough, call show_overview for the pinned capture. Use \
search_entries to locate relevant entries, then read_entry with the returned entry reference \
to inspect only what is needed.
3. Use read_file to inspect workspace files before deciding what the next session needs. \
Prefer skimming over blind inclusion.
4. For files whose current contents are load-bearing for the active work, call \
mark_read_required to inject them into the next session. They count against the restoration \
budget: spend it deliberately.
5. For files the next session should know about but can fetch on demand, call add_reference \
to record the path with a short note, without contents.
6. Finish with write_summary carrying the final text. You may call it more than once; only \
the last call is kept.

Stop nominating and close out with write_summary as soon as the restoration budget is spent, \
when a compact worker budget warning arrives, or whenever further exploration would not \
change the next session's next step.

Summary format

Produce the summary in exactly this format:

Completed Tasks

(task name)

• what was done (use concrete type / file / function names)
• gotchas or facts that came up

Active Task

(task name)

• goal
• current state (what is done / not done)
• next step

Key Decisions

• (decision) — (reason)

User Directives

• \"verbatim user line\" — only include directives whose wording the next session should not \
lose. (Garuda also carries the user's own messages verbatim beside your summary.)

Current Work

(2–3 lines on what was happening just before compaction.)

Constraints

• Keep code snippets and raw tool output OUT of the summary: that is what mark_read_required \
and add_reference are for.
• Follow the summary target stated in the run input; if asked to shrink, call write_summary \
again with a shorter version.";

/// The `show_overview` tool.
pub(crate) const SHOW_OVERVIEW: &str = "show_overview";
/// The `search_entries` tool.
pub(crate) const SEARCH_ENTRIES: &str = "search_entries";
/// The `read_entry` tool.
pub(crate) const READ_ENTRY: &str = "read_entry";
/// The `read_file` tool (the worker's own, read-only and root-confined).
pub(crate) const READ_FILE: &str = "read_file";
/// The `mark_read_required` tool.
pub(crate) const MARK_READ_REQUIRED: &str = "mark_read_required";
/// The `add_reference` tool.
pub(crate) const ADD_REFERENCE: &str = "add_reference";
/// The `write_summary` tool.
pub(crate) const WRITE_SUMMARY: &str = "write_summary";

/// The worker's tools, in a fixed order (so its requests share their prefix): all read-only.
pub fn worker_tools() -> Vec<ToolSpec> {
    let spec = |name: &str, description: &str, props: Value, required: &[&str]| ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        input_schema: json!({
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": false,
        }),
    };
    let string = |d: &str| json!({"type": "string", "description": d});
    vec![
        spec(
            SHOW_OVERVIEW,
            "Shows the overview of the older part again, as captured when the compaction began.",
            json!({}),
            &[],
        ),
        spec(
            SEARCH_ENTRIES,
            "Lists the entries whose text contains the query (case-insensitive; every word when \
             the whole phrase is not found), with their references and a snippet.",
            json!({"query": string("Words to look for.")}),
            &["query"],
        ),
        spec(
            READ_ENTRY,
            "Shows one entry's content (bounded), by its reference from the overview, e.g. E12.",
            json!({"entry": string("The entry reference, e.g. E12.")}),
            &["entry"],
        ),
        spec(
            READ_FILE,
            "Reads a workspace file as it is now (bounded).",
            json!({"path": string("The file's path in the workspace.")}),
            &["path"],
        ),
        spec(
            MARK_READ_REQUIRED,
            "The file's current content goes into the next session, against the restoration \
             budget.",
            json!({"path": string("The file's path in the workspace.")}),
            &["path"],
        ),
        spec(
            ADD_REFERENCE,
            "Lists a file in the summary with a note, without its content.",
            json!({"path": string("The file's path."), "note": string("Why the next session may need it.")}),
            &["path", "note"],
        ),
        spec(
            WRITE_SUMMARY,
            "Records the summary in the required format; a later call replaces it.",
            json!({"summary": string("The whole summary text.")}),
            &["summary"],
        ),
    ]
}

/// One call of a worker tool, its input checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerCall {
    /// `show_overview {}`.
    ShowOverview,
    /// `search_entries {query}`.
    SearchEntries(String),
    /// `read_entry {entry}`.
    ReadEntry(String),
    /// `read_file {path}`.
    ReadFile(String),
    /// `mark_read_required {path}`.
    MarkReadRequired(String),
    /// `add_reference {path, note}`.
    AddReference(String, String),
    /// `write_summary {summary}`.
    WriteSummary(String),
}

impl WorkerCall {
    /// The call a tool_use names, or the message that refuses it.
    pub fn parse(name: &str, input: &Value) -> Result<WorkerCall, String> {
        let arg = |key: &str| {
            input
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("{name} needs a string `{key}`"))
        };
        Ok(match name {
            SHOW_OVERVIEW => WorkerCall::ShowOverview,
            SEARCH_ENTRIES => WorkerCall::SearchEntries(arg("query")?),
            READ_ENTRY => WorkerCall::ReadEntry(arg("entry")?),
            READ_FILE => WorkerCall::ReadFile(arg("path")?),
            MARK_READ_REQUIRED => WorkerCall::MarkReadRequired(arg("path")?),
            ADD_REFERENCE => WorkerCall::AddReference(arg("path")?, arg("note")?),
            WRITE_SUMMARY => WorkerCall::WriteSummary(arg("summary")?),
            other => {
                return Err(format!(
                    "{other} is not a tool of the compaction worker; its tools are {SHOW_OVERVIEW}, \
                     {SEARCH_ENTRIES}, {READ_ENTRY}, {READ_FILE}, {MARK_READ_REQUIRED}, \
                     {ADD_REFERENCE} and {WRITE_SUMMARY}"
                ));
            }
        })
    }
}

/// What one worker run may spend. Every figure scales with the window the session plans
/// with, so a small window gets a short, cheap worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerBudgets {
    /// Model requests in all (6 + window ÷ 10 000, between 8 and 30).
    pub steps: u32,
    /// Tokens of all its requests (input, cached or not, and output): 4 × the window.
    pub tokens: u64,
    /// The largest request, in tokens: the window less the output room and a twentieth.
    pub request_tokens: u64,
    /// Output room of one request.
    pub max_output: u64,
    /// Characters of one tool result (a tenth of the window, at least 2 000).
    pub result_chars: usize,
    /// Characters of the overview (a quarter of the window, at least 4 000).
    pub overview_chars: usize,
    /// Files `mark_read_required` may nominate.
    pub restore_files: usize,
    /// Tokens of one nominated file.
    pub restore_file: u64,
    /// Tokens of all nominated files.
    pub restore_total: u64,
}

/// The worker's budgets at the session's budgets and the model's output limit.
pub fn worker_budgets(b: &Budgets, max_output: u64, chars_per_token: f64) -> WorkerBudgets {
    let window = b.window;
    let max_output = max_output.min((b.summary * 2 + 2_048).max(4_096));
    let chars = |tokens: u64| (tokens as f64 * chars_per_token) as usize;
    WorkerBudgets {
        steps: (6 + window / 10_000).clamp(8, 30) as u32,
        tokens: window.saturating_mul(4),
        request_tokens: window.saturating_sub(max_output + window / 20),
        max_output,
        result_chars: chars(window / 10).max(2_000),
        overview_chars: chars(window / 4).max(4_000),
        restore_files: b.restore_files,
        restore_file: b.restore_file,
        restore_total: b.restore_total,
    }
}

/// One entry of the capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Stable reference within the capture: `E1`, `E2`, … in transcript order.
    pub reference: String,
    /// Who wrote it (a tool call and its result count as the assistant's).
    pub role: Role,
    /// The tool, for a tool call.
    pub tool: Option<String>,
    /// Workspace paths it touched.
    pub paths: Vec<String>,
    /// Its whole content: the text, or the call's input and its result.
    pub text: String,
}

/// The older part, pinned when the compaction began: entries appended while the worker
/// runs are not in it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capture {
    /// Entries in transcript order.
    pub entries: Vec<Entry>,
}

fn blocks_text(content: &[Block]) -> String {
    content
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            Block::Image { .. } => Some(super::IMAGE_MARKER),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Capture {
    /// Captures `messages` (the older part, rewritten for the summarizer). `path_of` names
    /// the workspace path a tool call touches (the registry knows which input holds it).
    pub fn new(messages: &[Message], path_of: &dyn Fn(&str, &Value) -> Option<String>) -> Self {
        let mut results: HashMap<&str, (&[Block], bool)> = HashMap::new();
        for m in messages {
            for b in &m.content {
                if let Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } = b
                {
                    results.insert(tool_use_id.as_str(), (content.as_slice(), *is_error));
                }
            }
        }
        let mut entries = Vec::new();
        let mut push = |role: Role, tool: Option<String>, paths: Vec<String>, text: String| {
            entries.push(Entry {
                reference: format!("E{}", entries.len() + 1),
                role,
                tool,
                paths,
                text,
            });
        };
        for m in messages {
            let text = blocks_text(&m.content);
            if !text.trim().is_empty() {
                push(m.role, None, Vec::new(), text);
            }
            if m.role != Role::Assistant {
                continue;
            }
            for b in &m.content {
                let Block::ToolUse { id, name, input } = b else {
                    continue;
                };
                let (result, error) = results
                    .get(id.as_str())
                    .map_or((String::from("[no result]"), false), |(c, e)| {
                        (blocks_text(c), *e)
                    });
                let label = if error { "error" } else { "result" };
                push(
                    Role::Assistant,
                    Some(name.clone()),
                    path_of(name, input).into_iter().collect(),
                    format!("input: {input}\n{label}:\n{result}"),
                );
            }
        }
        Capture { entries }
    }

    fn find(&self, reference: &str) -> Option<&Entry> {
        let r = reference.trim().trim_start_matches(['E', 'e', '#']);
        let n: usize = r.parse().ok()?;
        self.entries.get(n.checked_sub(1)?)
    }

    /// One overview line: reference, role, tool, paths, size and a preview.
    fn line(e: &Entry, preview: usize) -> String {
        let role = match (e.role, &e.tool) {
            (_, Some(t)) => format!("tool {t}"),
            (Role::User, None) => "user".into(),
            (Role::Assistant, None) => "assistant".into(),
        };
        let paths = if e.paths.is_empty() {
            String::new()
        } else {
            format!(" [{}]", e.paths.join(", "))
        };
        let mut out = format!(
            "{} {role}{paths} {} chars",
            e.reference,
            e.text.chars().count()
        );
        if preview > 0 {
            let flat: String = e.text.split_whitespace().collect::<Vec<_>>().join(" ");
            let p: String = flat.chars().take(preview).collect();
            let more = if flat.chars().count() > preview {
                "…"
            } else {
                ""
            };
            out.push_str(&format!(": {p}{more}"));
        }
        out
    }

    /// The overview within `max_chars`: previews shorten first, then the middle entries are
    /// left out with a line saying which (search_entries and read_entry still reach them).
    pub fn overview(&self, max_chars: usize) -> String {
        let head = format!(
            "Overview of the older part: {} entries (pinned when the compaction began).\n",
            self.entries.len()
        );
        for preview in [100usize, 50, 0] {
            let lines: Vec<String> = self
                .entries
                .iter()
                .map(|e| Self::line(e, preview))
                .collect();
            let total: usize = head.len() + lines.iter().map(|l| l.len() + 1).sum::<usize>();
            if total <= max_chars || preview == 0 {
                if total <= max_chars {
                    return head + &lines.join("\n");
                }
                // Keep the first and the last entries, whose lines fit; say what is left out.
                let budget = max_chars.saturating_sub(head.len() + 120);
                let (mut front, mut back) = (Vec::new(), Vec::new());
                let (mut used, mut i, mut j) = (0usize, 0usize, lines.len());
                while i < j {
                    let take_back = back.len() < front.len();
                    let l = if take_back { &lines[j - 1] } else { &lines[i] };
                    if used + l.len() + 1 > budget {
                        break;
                    }
                    used += l.len() + 1;
                    if take_back {
                        back.push(l.clone());
                        j -= 1;
                    } else {
                        front.push(l.clone());
                        i += 1;
                    }
                }
                back.reverse();
                let gap = format!(
                    "[entries E{}–E{} left out of this overview for size; search_entries and \
                     read_entry reach them]",
                    i + 1,
                    j
                );
                return format!("{head}{}\n{gap}\n{}", front.join("\n"), back.join("\n"));
            }
        }
        head
    }

    /// The entries matching `query` (the phrase, else every word), with a snippet each,
    /// within `max_chars`.
    pub fn search(&self, query: &str, max_chars: usize) -> String {
        let q = query.trim().to_lowercase();
        if q.is_empty() {
            return "search_entries needs a query".into();
        }
        let words: Vec<&str> = q.split_whitespace().collect();
        let lower: Vec<String> = self
            .entries
            .iter()
            .map(|e| format!("{} {}", e.paths.join(" "), e.text).to_lowercase())
            .collect();
        let mut hits: Vec<usize> = (0..lower.len())
            .filter(|&i| lower[i].contains(&q))
            .collect();
        if hits.is_empty() && words.len() > 1 {
            hits = (0..lower.len())
                .filter(|&i| words.iter().all(|w| lower[i].contains(w)))
                .collect();
        }
        if hits.is_empty() {
            return format!("No entry matches \"{}\".", query.trim());
        }
        let mut out = format!("{} entries match \"{}\":\n", hits.len(), query.trim());
        for (k, &i) in hits.iter().enumerate() {
            let e = &self.entries[i];
            let text: Vec<char> = lower[i].chars().collect();
            let at = lower[i]
                .find(words.first().copied().unwrap_or(""))
                .map_or(0, |b| lower[i][..b].chars().count());
            let original: Vec<char> = format!("{} {}", e.paths.join(" "), e.text)
                .chars()
                .collect();
            let from = at.saturating_sub(60);
            let to = (at + 100).min(text.len()).min(original.len());
            let snippet: String = original[from.min(to)..to]
                .iter()
                .collect::<String>()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let line = format!("{}: …{snippet}…\n", Self::line(e, 0));
            if out.len() + line.len() > max_chars {
                out.push_str(&format!(
                    "[{} more matches left out; search with more words]",
                    hits.len() - k
                ));
                break;
            }
            out.push_str(&line);
        }
        out
    }

    /// One entry's content, within `max_chars` (cut with a visible marker).
    pub fn read(&self, reference: &str, max_chars: usize) -> Result<String, String> {
        let e = self.find(reference).ok_or_else(|| {
            format!(
                "no entry {reference}; references run from E1 to E{}",
                self.entries.len()
            )
        })?;
        Ok(format!(
            "{}\n{}",
            Self::line(e, 0),
            cut_with_marker(&e.text, max_chars)
        ))
    }
}

/// The first message of a worker run: what to summarize and within what.
pub fn run_input(
    overview: &str,
    todo: &[TodoEntry],
    previous: Option<&str>,
    summary_target: u64,
    budgets: &WorkerBudgets,
    compact_instructions: Option<&str>,
    focus: Option<&str>,
) -> String {
    let mut s = format!(
        "<compact_worker_input>\nSummarize the older part of this coding session for the next \
         session. Summary target: about {summary_target} tokens (about {} words).\n\
         Restoration budget for mark_read_required: {} tokens in all, at most {} files of at \
         most {} tokens each.\nYour own budget: {} model requests and about {} tokens; end with \
         write_summary.\n",
        summary_target * 3 / 4,
        budgets.restore_total,
        budgets.restore_files,
        budgets.restore_file,
        budgets.steps,
        budgets.tokens,
    );
    if let Some(ci) = compact_instructions
        .map(str::trim)
        .filter(|c| !c.is_empty())
    {
        s.push_str(&format!(
            "\nThe project's compact instructions (follow them):\n{ci}\n"
        ));
    }
    if let Some(f) = focus.map(str::trim).filter(|f| !f.is_empty()) {
        s.push_str(&format!(
            "\nThe user asks the summary to keep, above all: {f}\n"
        ));
    }
    if let Some(p) = previous {
        s.push_str(&format!(
            "\nThe older part starts from an earlier summary (entry E1); carry what still \
             matters from it:\n{}\n",
            cut_with_marker(p, (summary_target as usize).saturating_mul(6))
        ));
    }
    if todo.is_empty() {
        s.push_str("\nTodo list: empty.\n");
    } else {
        s.push_str(&format!("\nTodo list:\n{}", render_todo(todo)));
    }
    s.push('\n');
    s.push_str(overview);
    s.push_str("\n</compact_worker_input>");
    s
}

/// What a worker run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerOutcome {
    /// The last `write_summary` text.
    pub summary: String,
    /// Paths whose current content goes into the next session, in nomination order.
    pub nominated: Vec<String>,
    /// Paths listed in the summary message with their notes.
    pub references: Vec<(String, String)>,
}

/// The bookkeeping of one worker run: budgets spent, nominations, references, the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRun {
    /// The budgets.
    pub budgets: WorkerBudgets,
    summary_target: u64,
    steps: u32,
    tokens: u64,
    restore_used: u64,
    nominated: Vec<(String, u64)>,
    references: Vec<(String, String)>,
    summary: Option<(String, u64)>,
    warned: bool,
    told_final: bool,
}

/// Opens every budget note the worker gets.
pub const BUDGET_WARNING: &str = "[compact worker budget warning]";

impl WorkerRun {
    /// A run within `budgets`, its summary aimed at `summary_target` tokens.
    pub fn new(budgets: WorkerBudgets, summary_target: u64) -> Self {
        WorkerRun {
            budgets,
            summary_target,
            steps: 0,
            tokens: 0,
            restore_used: 0,
            nominated: Vec::new(),
            references: Vec::new(),
            summary: None,
            warned: false,
            told_final: false,
        }
    }

    /// Counts one answered request and the tokens it carried.
    pub fn step_done(&mut self, tokens: u64) {
        self.steps += 1;
        self.tokens = self.tokens.saturating_add(tokens);
    }

    /// True when no further request may go out: the steps are spent, or the tokens are and
    /// the worker already had its last request.
    pub fn spent(&self) -> bool {
        self.steps >= self.budgets.steps || (self.told_final && self.tokens >= self.budgets.tokens)
    }

    /// The note for the next request, when a budget runs low: a warning once, then at the
    /// limit the order to write the summary now (its request is the last).
    pub fn budget_note(&mut self) -> Option<String> {
        let steps_left = self.budgets.steps.saturating_sub(self.steps);
        let tokens_left = self.budgets.tokens.saturating_sub(self.tokens);
        if !self.told_final && (steps_left <= 1 || tokens_left == 0) {
            self.told_final = true;
            // Spent tokens still allow this one last request.
            self.budgets.steps = self.budgets.steps.min(self.steps + 1);
            return Some(format!(
                "{BUDGET_WARNING} The budget is spent: call write_summary now, with the final \
                 summary. This is your last request; no other tool call will be answered."
            ));
        }
        if !self.warned
            && !self.told_final
            && (steps_left <= 3 || tokens_left <= self.budgets.tokens / 4)
        {
            self.warned = true;
            return Some(format!(
                "{BUDGET_WARNING} {steps_left} requests and about {tokens_left} tokens left: stop \
                 exploring, nominate only what the next step needs, and call write_summary."
            ));
        }
        None
    }

    /// Nominates `path` (its current content is `tokens` tokens): the result for the model.
    pub fn nominate(&mut self, path: &str, tokens: u64) -> Result<String, String> {
        if let Some((_, t)) = self.nominated.iter().find(|(p, _)| p == path) {
            return Ok(format!("{path} is already nominated ({t} tokens)."));
        }
        let left = self.budgets.restore_total.saturating_sub(self.restore_used);
        if self.nominated.len() >= self.budgets.restore_files || left == 0 {
            return Err(format!(
                "refused: the restoration budget is spent ({} files, {} of {} tokens); use \
                 add_reference for {path}, or write_summary",
                self.nominated.len(),
                self.restore_used,
                self.budgets.restore_total
            ));
        }
        if tokens > self.budgets.restore_file {
            return Err(format!(
                "refused: {path} is about {tokens} tokens, over the {} a restored file may take; \
                 use add_reference for it",
                self.budgets.restore_file
            ));
        }
        if tokens > left {
            return Err(format!(
                "refused: {path} is about {tokens} tokens and only {left} of the restoration \
                 budget are left; use add_reference for it, or nominate a smaller file"
            ));
        }
        self.restore_used += tokens;
        self.nominated.push((path.to_string(), tokens));
        Ok(format!(
            "{path} goes into the next session ({tokens} tokens; {} of {} left).",
            self.budgets.restore_total - self.restore_used,
            self.budgets.restore_total
        ))
    }

    /// Records a reference (a second one for the same path replaces its note).
    pub fn add_reference(&mut self, path: &str, note: &str) -> String {
        let note = note.trim().to_string();
        match self.references.iter_mut().find(|(p, _)| p == path) {
            Some(r) => r.1 = note,
            None => self.references.push((path.to_string(), note)),
        }
        format!("{path} is listed in the summary with its note.")
    }

    /// Records the summary (`tokens` its size); asks for a shorter one when it is well over
    /// the target.
    pub fn write_summary(&mut self, text: &str, tokens: u64) -> Result<String, String> {
        if text.trim().is_empty() {
            return Err("write_summary needs the summary text".into());
        }
        self.summary = Some((text.trim().to_string(), tokens));
        if !self.summary_fits() {
            return Ok(format!(
                "Recorded, but it is about {tokens} tokens and the target is {}: call \
                 write_summary again with a shorter version.",
                self.summary_target
            ));
        }
        Ok("Recorded. End now unless something important is missing.".into())
    }

    /// True when a summary is recorded within 1.25 × its target.
    pub fn summary_fits(&self) -> bool {
        self.summary
            .as_ref()
            .is_some_and(|(_, t)| *t <= self.summary_target + self.summary_target / 4)
    }

    /// Steps and tokens spent so far.
    pub fn spent_so_far(&self) -> (u32, u64) {
        (self.steps, self.tokens)
    }

    /// What the run produced: None without a summary.
    pub fn outcome(self) -> Option<WorkerOutcome> {
        let (summary, _) = self.summary?;
        Some(WorkerOutcome {
            summary,
            nominated: self.nominated.into_iter().map(|(p, _)| p).collect(),
            references: self.references,
        })
    }
}

/// Marker of a worker tool result cleared to keep its requests within the window.
pub const CLEARED: &str = "[cleared to keep the worker within its window; call the tool again \
if you still need it]";

/// Clears the oldest tool results of the worker's conversation (never its first message,
/// the run input) until it is at most `goal_chars`; true when it then fits `limit_chars`.
/// Results go in bulk, down to the goal, so the requests after it share a prefix again.
pub fn fit_conversation(messages: &mut [Message], limit_chars: usize, goal_chars: usize) -> bool {
    let total = |m: &[Message]| -> usize {
        m.iter()
            .flat_map(|m| m.content.iter())
            .map(Block::char_len)
            .sum()
    };
    let mut size = total(messages);
    if size <= limit_chars {
        return true;
    }
    for m in messages.iter_mut().skip(1) {
        for b in &mut m.content {
            if size <= goal_chars {
                return true;
            }
            if let Block::ToolResult { content, .. } = b {
                let before: usize = content.iter().map(Block::char_len).sum();
                if before > CLEARED.len() {
                    *content = vec![Block::text(CLEARED)];
                    size = size - before + CLEARED.len();
                }
            }
        }
    }
    size <= limit_chars
}

#[cfg(test)]
mod tests;
