//! Transcript records: one JSON object per JSONL line, tagged by `type`.
//!
//! Every record carries a `uuid` and a `time` (unix milliseconds). Messages hold canonical
//! [`Block`]s; operation records (boundary, snip, collapse, microcompact, trim, usage,
//! instruction change) never change earlier lines, they are replayed by the view pipeline.

use serde::{Deserialize, Serialize};

use crate::message::{Block, Message, Role, Usage};

/// Milliseconds since the unix epoch, the `time` of every record.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A fresh record id (uuid v7, so ids sort by creation time).
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Why a message exists besides being conversation (absent for ordinary messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageMeta {
    /// The compaction summary that opens a compacted session.
    Summary,
    /// A file re-read from disk after compaction.
    RestoredFile,
    /// A `<garuda_note>` about changed instructions (or the instructions re-read at compaction).
    InstructionNote,
    /// An extractive handoff installed when the model could not summarize.
    Handoff,
    /// The marker saying older rounds were dropped for a prompt-too-long retry.
    TruncatedMarker,
    /// The todo list re-injected after compaction.
    Todo,
    /// Display-only text for the client (never sent to the model).
    Display,
    /// A `<garuda_note>` naming the model the session was switched to.
    ModelNote,
    /// The `<garuda_note>` with the repository's git state, captured once at session start.
    GitState,
    /// The `<garuda_note>` suggesting `snip` after the context grew (context_efficiency).
    Nudge,
    /// A skill the model had loaded, restored after compaction.
    RestoredSkill,
    /// A `<garuda_note>` saying the skills on disk changed since the session started.
    SkillNote,
    /// A `<garuda_note>` with what a user's hook gave for the model (SessionStart, a Stop
    /// hook's reason to go on).
    HookContext,
    /// A plan the user approved (`exit_plan_mode`), display-only: the model has it in its own
    /// call; a compaction restores it from here.
    Plan,
    /// A `<garuda_note>` saying plan mode started or ended.
    PlanNote,
    /// The approved plan, restored after compaction.
    RestoredPlan,
    /// A meta value written by a newer Garuda; treated like an ordinary message.
    #[serde(other)]
    Unknown,
}

/// One conversation message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageRecord {
    /// This message's id.
    pub uuid: String,
    /// The message before it in the conversation (None for the first).
    #[serde(default)]
    pub parent_uuid: Option<String>,
    /// Author.
    pub role: Role,
    /// Canonical content blocks.
    pub content: Vec<Block>,
    /// Unix milliseconds.
    pub time: u64,
    /// What kind of special message this is, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<MessageMeta>,
    /// Display-only: kept in history, never sent to the model.
    #[serde(
        default,
        rename = "virtual",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub is_virtual: bool,
    /// When this is a kept step re-installed after a compaction: the original message id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_of: Option<String>,
}

impl MessageRecord {
    /// A new ordinary message with a fresh id and the current time.
    pub fn new(role: Role, content: Vec<Block>, parent_uuid: Option<String>) -> Self {
        MessageRecord {
            uuid: new_id(),
            parent_uuid,
            role,
            content,
            time: now_ms(),
            meta: None,
            is_virtual: false,
            copy_of: None,
        }
    }

    /// The provider-facing message.
    pub fn to_message(&self) -> Message {
        Message {
            role: self.role,
            content: self.content.clone(),
        }
    }
}

/// What started a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactTrigger {
    /// `/compact` or `session/compact`.
    Manual,
    /// The threshold check at the start of a step.
    Auto,
    /// A prompt-too-long answer from the provider.
    Reactive,
    /// A large session left idle: compacted before its provider cache expires, or at resume
    /// after it expired (from a current session memory, without a model call).
    Idle,
}

/// The start of a compacted context: the view begins after the latest boundary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactBoundaryRecord {
    /// Record id.
    pub uuid: String,
    /// Unix milliseconds.
    pub time: u64,
    /// What started it.
    pub trigger: CompactTrigger,
    /// Context tokens before compaction.
    pub tokens_before: u64,
    /// Estimated context tokens after compaction.
    pub tokens_after: u64,
    /// Original id of the first kept message (None when nothing was kept).
    #[serde(default)]
    pub kept_head_id: Option<String>,
    /// Original id of the last kept message.
    #[serde(default)]
    pub kept_tail_id: Option<String>,
    /// Id of the installed message the kept suffix hangs from (its first copy's parent), so
    /// a reader can reconnect the suffix without walking the chain; None when nothing was
    /// kept, and in transcripts of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_anchor_id: Option<String>,
    /// True when the summary is an extractive handoff, not a model summary.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub extractive: bool,
    /// How many records follow as part of the same installation (written in one batch).
    #[serde(default)]
    pub install_count: u32,
    /// Which path produced the summary (absent in transcripts of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarizer: Option<Summarizer>,
    /// Tokens the summary requests of this compaction used, all paths together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_usage: Option<Usage>,
}

/// The path that produced a compaction's summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Summarizer {
    /// The cache-sharing fork of the session's request.
    Fork,
    /// The regular request with the summary system prompt.
    Regular,
    /// The regular request in chunks, each with the summary so far.
    Chunked,
    /// The compaction worker.
    Worker,
    /// The session memory, kept current in the background: no model call at compaction.
    Memory,
    /// No model: the extractive handoff (or a reinstall).
    Extractive,
    /// A value written by a newer Garuda.
    #[serde(other)]
    Unknown,
}

impl Summarizer {
    /// The name in transcripts and on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Summarizer::Fork => "fork",
            Summarizer::Regular => "regular",
            Summarizer::Chunked => "chunked",
            Summarizer::Worker => "worker",
            Summarizer::Memory => "memory",
            Summarizer::Extractive => "extractive",
            Summarizer::Unknown => "unknown",
        }
    }
}

/// Marks a compaction whose installation was torn by a crash: the view ignores the boundary
/// and the records between it and this marker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallAbortedRecord {
    /// Record id.
    pub uuid: String,
    /// Unix milliseconds.
    pub time: u64,
    /// The boundary whose installation is incomplete.
    pub boundary_id: String,
}

/// Messages removed from the model's view (the transcript keeps them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnipRecord {
    /// Record id.
    pub uuid: String,
    /// Unix milliseconds.
    pub time: u64,
    /// Message ids to drop.
    pub removed_ids: Vec<String>,
    /// The ids are user messages of turns that failed unanswered (the window was too
    /// small): they leave the view even when one is the session's first request.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed_turn: bool,
}

/// A committed span summary substituted for the span at read time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CollapseRecord {
    /// Record id (also the id of the summary message in the view).
    pub uuid: String,
    /// Unix milliseconds.
    pub time: u64,
    /// First message of the span.
    pub from_id: String,
    /// Last message of the span.
    pub to_id: String,
    /// Every message id of the span as the view held it when committed.
    pub span_ids: Vec<String>,
    /// The summary text.
    pub summary: String,
    /// True when Garuda collapsed the span by itself (before auto-compaction).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto: bool,
}

/// The session memory: running notes that stand in for the conversation through `through_id`
/// when the session is compacted. Written by a background fork after a turn, or by the user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryRecord {
    /// Record id.
    pub uuid: String,
    /// Unix milliseconds.
    pub time: u64,
    /// The notes (seed 003's sections).
    pub text: String,
    /// The last message the notes cover.
    pub through_id: String,
    /// The context's estimated tokens when the notes were asked for.
    pub tokens_at: u64,
    /// Who wrote them.
    pub source: MemorySource,
}

/// Who wrote a session memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    /// The model, asked in the background after a turn.
    Model,
    /// The user (`session/memory` with a text).
    User,
    /// A value written by a newer Garuda.
    #[serde(other)]
    Unknown,
}

/// A collapse summary asked ahead, behind a turn's answer: the automatic collapse installs it
/// without a model call while its span is still in the view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CollapseAheadRecord {
    /// Record id.
    pub uuid: String,
    /// Unix milliseconds.
    pub time: u64,
    /// First message of the span.
    pub from_id: String,
    /// Last message of the span.
    pub to_id: String,
    /// The model's summary of the span.
    pub summary: String,
}

/// The provider refused media (an oversized or unreadable image) in these messages: later
/// requests carry a text marker in its place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MediaRefusedRecord {
    /// Record id.
    pub uuid: String,
    /// Unix milliseconds.
    pub time: u64,
    /// Transcript ids of the messages whose media is stripped from now on.
    pub message_ids: Vec<String>,
    /// What the provider said.
    pub reason: String,
}

/// Tool results replaced by `[Old tool result content cleared]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MicrocompactRecord {
    /// Record id.
    pub uuid: String,
    /// Unix milliseconds.
    pub time: u64,
    /// The `tool_use_id`s whose results are cleared.
    pub cleared_tool_use_ids: Vec<String>,
}

/// Stage-1 compaction: long tool results cut to their first `keep_chars` characters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrimRecord {
    /// Record id.
    pub uuid: String,
    /// Unix milliseconds.
    pub time: u64,
    /// The `tool_use_id`s whose results are cut.
    pub tool_use_ids: Vec<String>,
    /// Characters kept from each.
    pub keep_chars: usize,
}

/// Which request a usage record counts, when it is not a main step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsagePurpose {
    /// A compaction summary request (or its shrink request).
    Summary,
    /// A collapse summary request.
    Collapse,
    /// A request of the compaction worker.
    Worker,
    /// A session-memory update (a background fork after a turn).
    Memory,
    /// The requests of an agent's sub-session (its whole turn, summed): recorded in the
    /// calling session so its cost covers its agents.
    Agent,
}

impl UsagePurpose {
    /// The wire name (`summary`, `collapse`, `worker`, `memory`, `agent`).
    pub fn name(self) -> &'static str {
        match self {
            UsagePurpose::Summary => "summary",
            UsagePurpose::Collapse => "collapse",
            UsagePurpose::Worker => "worker",
            UsagePurpose::Memory => "memory",
            UsagePurpose::Agent => "agent",
        }
    }
}

/// The provider refused a request as too long: the limit it enforces, which every later
/// request of the session stays under (with the configured window, the smaller wins).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextLimitRecord {
    /// Record id.
    pub uuid: String,
    /// Unix milliseconds.
    pub time: u64,
    /// The most input tokens the provider accepts.
    pub limit_tokens: u64,
    /// Tokens of the refused request, when the provider said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_tokens: Option<u64>,
    /// True when the answer named no limit and it was inferred from the request's size.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inferred: bool,
}

/// Token usage the provider reported for one response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageRecord {
    /// Record id.
    pub uuid: String,
    /// Unix milliseconds.
    pub time: u64,
    /// The assistant message the usage belongs to.
    pub message_id: String,
    /// The counts.
    pub usage: Usage,
    /// Characters of the whole request that produced it (for estimator calibration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_chars: Option<u64>,
    /// Characters of the view's messages right after the response was appended (the anchor
    /// later estimates grow or shrink from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_chars: Option<u64>,
    /// Set for side requests (summaries, collapses); absent for a main step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<UsagePurpose>,
    /// What it cost in US dollars when another model answered at other prices (an agent on
    /// its own model); absent: the session's model, priced at its current prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// A main request's cache miss and its cause (absent: it read what it could, a side
    /// request, or a transcript of an earlier version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_miss: Option<super::cache_miss::CacheMiss>,
}

/// Instruction or memory files changed on disk; or (with `scoped`) nested instruction files
/// and path-scoped rules given to the model in a note.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstructionChangeRecord {
    /// Record id.
    pub uuid: String,
    /// Unix milliseconds.
    pub time: u64,
    /// Workspace-relative paths that changed.
    pub paths: Vec<String>,
    /// Hex sha256 of each file's new content (scoped: of its block in the note), same order
    /// (empty string: deleted, or no longer in force).
    pub sha256: Vec<String>,
    /// True for nested files and rules: `paths` are in force with these versions from now on
    /// (the view keeps them while `messageId` is in it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scoped: bool,
    /// The note message carrying their text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

/// First line of every transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHeader {
    /// Record id.
    pub uuid: String,
    /// Unix milliseconds when the session was created.
    pub time: u64,
    /// Record format version.
    #[serde(default = "format_version")]
    pub version: u32,
    /// The session id (file stem).
    pub session_id: String,
    /// Absolute workspace root.
    pub workspace_root: String,
    /// Model spec, e.g. `anthropic/claude-sonnet-4-5`.
    pub model: String,
    /// Approval policy name.
    #[serde(default)]
    pub policy: Option<String>,
    /// The session this one was forked from, and at which message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
    /// Which front created the session (transcripts written before it was recorded: `serve`).
    #[serde(default)]
    pub origin: SessionOrigin,
    /// For an agent's sub-session: the session and tool call that started it, and what the
    /// agent was (so the session loads again as that agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
}

/// Where an agent's sub-session came from, and the agent it runs as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentLink {
    /// The calling session.
    pub session_id: String,
    /// The `agent` or `explore` call of the calling session whose result this session gave.
    pub tool_call_id: String,
    /// The agent's name.
    pub agent: String,
    /// Garuda's names of the tools it has.
    pub tools: Vec<String>,
    /// Its prompt.
    pub prompt: String,
    /// 1 for an agent the main session started, 2 for one that agent started, …
    #[serde(default = "first_level")]
    pub depth: u32,
}

fn first_level() -> u32 {
    1
}

fn format_version() -> u32 {
    1
}

/// The front that created a session, so pickers can tell chats from headless runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionOrigin {
    /// The native protocol (`garuda serve`), an editor client.
    #[default]
    Serve,
    /// The Agent Client Protocol (`garuda acp`).
    Acp,
    /// A headless run (`garuda exec`).
    Exec,
    /// A value written by a newer Garuda.
    #[serde(other)]
    Unknown,
}

/// Where a forked session came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkOrigin {
    /// The parent session.
    pub session_id: String,
    /// The last message copied (None: the whole transcript).
    #[serde(default)]
    pub message_id: Option<String>,
}

impl SessionHeader {
    /// A header for a new session with a fresh id.
    pub fn new(workspace_root: impl Into<String>, model: impl Into<String>) -> Self {
        SessionHeader {
            uuid: new_id(),
            time: now_ms(),
            version: format_version(),
            session_id: uuid::Uuid::now_v7().to_string(),
            workspace_root: workspace_root.into(),
            model: model.into(),
            policy: None,
            forked_from: None,
            origin: SessionOrigin::Serve,
            parent: None,
        }
    }
}

/// One transcript line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// Session header (first line).
    Header(SessionHeader),
    /// A conversation message.
    Message(MessageRecord),
    /// Compaction boundary.
    CompactBoundary(CompactBoundaryRecord),
    /// Snip.
    Snip(SnipRecord),
    /// Collapse.
    Collapse(CollapseRecord),
    /// Time-based microcompact.
    Microcompact(MicrocompactRecord),
    /// Stage-1 trim.
    Trim(TrimRecord),
    /// Usage.
    Usage(UsageRecord),
    /// Instruction change.
    InstructionChange(InstructionChangeRecord),
    /// A torn compaction installation.
    InstallAborted(InstallAbortedRecord),
    /// A context limit learned from the provider.
    ContextLimit(ContextLimitRecord),
    /// Media the provider refused.
    MediaRefused(MediaRefusedRecord),
    /// The session memory.
    Memory(MemoryRecord),
    /// A collapse summary asked ahead.
    CollapseAhead(CollapseAheadRecord),
}

/// Record type names this version understands.
pub const KNOWN_TYPES: &[&str] = &[
    "header",
    "message",
    "compact_boundary",
    "snip",
    "collapse",
    "microcompact",
    "trim",
    "usage",
    "instruction_change",
    "install_aborted",
    "context_limit",
    "media_refused",
    "memory",
    "collapse_ahead",
];

/// The newest compaction boundary among `records`.
pub fn latest_boundary(records: &[Record]) -> Option<&CompactBoundaryRecord> {
    records.iter().rev().find_map(|r| match r {
        Record::CompactBoundary(b) => Some(b),
        _ => None,
    })
}

impl Record {
    /// The record's id.
    pub fn uuid(&self) -> &str {
        match self {
            Record::Header(r) => &r.uuid,
            Record::Message(r) => &r.uuid,
            Record::CompactBoundary(r) => &r.uuid,
            Record::Snip(r) => &r.uuid,
            Record::Collapse(r) => &r.uuid,
            Record::Microcompact(r) => &r.uuid,
            Record::Trim(r) => &r.uuid,
            Record::Usage(r) => &r.uuid,
            Record::InstructionChange(r) => &r.uuid,
            Record::InstallAborted(r) => &r.uuid,
            Record::ContextLimit(r) => &r.uuid,
            Record::MediaRefused(r) => &r.uuid,
            Record::Memory(r) => &r.uuid,
            Record::CollapseAhead(r) => &r.uuid,
        }
    }

    /// The record's time (unix ms).
    pub fn time(&self) -> u64 {
        match self {
            Record::Header(r) => r.time,
            Record::Message(r) => r.time,
            Record::CompactBoundary(r) => r.time,
            Record::Snip(r) => r.time,
            Record::Collapse(r) => r.time,
            Record::Microcompact(r) => r.time,
            Record::Trim(r) => r.time,
            Record::Usage(r) => r.time,
            Record::InstructionChange(r) => r.time,
            Record::InstallAborted(r) => r.time,
            Record::ContextLimit(r) => r.time,
            Record::MediaRefused(r) => r.time,
            Record::Memory(r) => r.time,
            Record::CollapseAhead(r) => r.time,
        }
    }

    /// The message, when this is a message record.
    pub fn as_message(&self) -> Option<&MessageRecord> {
        match self {
            Record::Message(m) => Some(m),
            _ => None,
        }
    }
}

/// Outcome of parsing one line.
#[derive(Debug)]
pub enum ParsedLine {
    /// A record this version understands.
    Record(Box<Record>),
    /// Valid JSON object with a `type` this version does not know (skipped).
    Unknown(String),
    /// Not a valid record.
    Invalid(String),
}

/// Parses one JSONL line, telling apart unknown record types (forward compatible) from garbage.
pub fn parse_line(line: &str) -> ParsedLine {
    match serde_json::from_str::<Record>(line) {
        Ok(r) => ParsedLine::Record(Box::new(r)),
        Err(e) => {
            #[derive(Deserialize)]
            struct TypeOnly {
                #[serde(rename = "type")]
                ty: String,
            }
            match serde_json::from_str::<TypeOnly>(line) {
                Ok(t) if !KNOWN_TYPES.contains(&t.ty.as_str()) => ParsedLine::Unknown(t.ty),
                _ => ParsedLine::Invalid(e.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_round_trip_and_field_names() {
        let mut m = MessageRecord::new(Role::User, vec![Block::text("hi")], Some("p".into()));
        m.meta = Some(MessageMeta::Summary);
        m.is_virtual = true;
        let line = serde_json::to_string(&Record::Message(m.clone())).unwrap();
        assert!(line.contains("\"type\":\"message\""));
        assert!(line.contains("\"parentUuid\":\"p\""));
        assert!(line.contains("\"virtual\":true"));
        match parse_line(&line) {
            ParsedLine::Record(r) => assert_eq!(*r, Record::Message(m)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_type_and_meta_are_tolerated() {
        assert!(matches!(
            parse_line(r#"{"type":"future_thing","uuid":"x","time":1}"#),
            ParsedLine::Unknown(t) if t == "future_thing"
        ));
        assert!(matches!(parse_line("{not json"), ParsedLine::Invalid(_)));
        assert!(matches!(
            parse_line(r#"{"type":"snip","uuid":1}"#),
            ParsedLine::Invalid(_)
        ));
        let line = r#"{"type":"message","uuid":"a","role":"user","content":[],"time":1,"meta":"newfangled"}"#;
        match parse_line(line) {
            ParsedLine::Record(r) => {
                assert_eq!(r.as_message().unwrap().meta, Some(MessageMeta::Unknown))
            }
            other => panic!("{other:?}"),
        }
    }
}
