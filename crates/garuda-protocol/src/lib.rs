//! The native protocol's request, result and notification types, defined once.
//!
//! `protocol/schema.json` is generated from these types (`garuda schema`); a test fails
//! when the checked-in file differs from what the code generates.

pub mod codes;
pub mod methods;
mod schema;
pub mod wire;

pub use methods::{METHODS, Method, Request, Schedule};
pub use schema::generate_schema;
pub use wire::*;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `workspace/open` parameters.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenParams {
    /// The workspace folder: a path or a `file://` URI.
    pub root: String,
}

/// A workspace as the client sees it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceInfo {
    /// Stable id derived from the canonical root.
    pub workspace_id: String,
    /// The canonical root path.
    pub root: String,
    /// Instruction and memory files present in the root.
    pub context_files: Vec<String>,
    /// Problems found while opening (config, unreadable files).
    pub warnings: Vec<String>,
}

/// Parameters naming one workspace.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspaceRef {
    /// The id from `workspace/open`.
    pub workspace_id: String,
}

/// `workspace/close` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloseResult {
    /// True when the workspace was open and is now closed.
    pub closed: bool,
}

/// `workspace/list` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListResult {
    /// Open workspaces, ordered by workspace id.
    pub workspaces: Vec<WorkspaceInfo>,
}

/// Options that change the assembled prompt.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssembleOptions {
    /// Model spec named in the identity line (default: the configured model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Features to use instead of the configured ones.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "methods::object_or_null"
    )]
    pub features: Option<Features>,
    /// Budgets to use instead of the configured ones.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "methods::object_or_null"
    )]
    pub limits: Option<Limits>,
}

/// `prompt/assemble` parameters.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssembleParams {
    /// The workspace.
    pub workspace_id: String,
    /// Overrides; absent means the configured defaults.
    #[serde(default, deserialize_with = "methods::object_or_null")]
    pub options: Option<AssembleOptions>,
}

/// `prompt/assemble` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AssembleResult {
    /// The system prompt.
    pub system: String,
    /// Hex sha256 of `system`'s UTF-8 bytes.
    pub sha256: String,
    /// Each section with its source, size and whether it was cut or skipped.
    pub sections: Vec<SectionReport>,
    /// Problems found (links out of the root, unreadable files, imports not read).
    pub warnings: Vec<String>,
    /// Every instruction source found: the root files, the user-global file and the
    /// always-on rules in this prompt, and the path-scoped rules that come into force when a
    /// matching path is touched (`inForce: false`).
    #[serde(default)]
    pub sources: Vec<InstructionSource>,
}

/// What kind of instruction source a file is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum InstructionSourceKind {
    /// An instruction file at the workspace root (`AGENTS.md`, `CLAUDE.md`, `GARUDA.md`,
    /// `GEMINI.md`).
    Root,
    /// The user's own file for every project (`$XDG_CONFIG_HOME/garuda/AGENTS.md`).
    Global,
    /// An instruction file in a subfolder.
    Nested,
    /// A rule of another agent's format (`.cursor/rules`, `.github`, `.claude/rules`).
    Rule,
}

/// Where an instruction source reaches the model.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum InstructionPlacement {
    /// In the system prompt (byte-stable within a phase).
    System,
    /// In a `<garuda_note>` of a user message (nested files, path-scoped rules).
    Note,
}

/// One instruction source: where it comes from, what it governs, what it costs.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstructionSource {
    /// Root-relative path (the user-global file: its absolute path).
    pub path: String,
    /// Root file, global file, nested file or rule.
    pub kind: InstructionSourceKind,
    /// What it governs: `.` (the whole project), a folder (`packages/a/`), a rule's globs
    /// (`packages/a/**`), or `every project` for the user-global file.
    pub scope: String,
    /// Where it reaches the model.
    pub placement: InstructionPlacement,
    /// True when the model has it now.
    pub in_force: bool,
    /// Characters it takes where it is (heading and cut note included; 0 when not in force).
    pub chars: u64,
    /// Estimated tokens.
    pub tokens: u64,
    /// True when it was cut to its limit.
    pub cut: bool,
    /// Characters left out when cut.
    pub missing_chars: Option<u64>,
    /// Why it is not used: `empty`, `duplicate of …`, `outside the workspace root`,
    /// `invalid frontmatter: line N: …`, …
    pub skipped: Option<String>,
}

/// `workspace/contextChanged` notification: instruction or memory files changed on disk.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContextChanged {
    /// The workspace.
    pub workspace_id: String,
    /// Root-relative paths that changed in this burst, sorted.
    pub changed: Vec<String>,
    /// sha256 of the prompt assembled with the default options after the change.
    pub sha256: String,
}

/// How bad a configuration problem is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ConfigSeverity {
    /// An unknown key: ignored, the rest of the file applies.
    Warning,
    /// An invalid value or broken TOML: the file is not used until it is fixed.
    Error,
}

/// One problem of the user's config file.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigProblem {
    /// Warning or error.
    pub severity: ConfigSeverity,
    /// The file (`environment` for an environment variable).
    pub file: String,
    /// 1-based line, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 1-based column, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// The dotted key (`approval.policy`), or the table (`approvals`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// What is wrong and what was expected (with a "did you mean" for a misspelt key).
    pub message: String,
}

/// `window/showMessage` notification (LSP's, with Garuda's config problem beside it): sent
/// during `initialize` for each problem of the config file and whenever the watched file
/// changes.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ShowMessageParams {
    /// LSP's `MessageType`: 1 error, 2 warning, 3 info.
    #[serde(rename = "type")]
    pub kind: u8,
    /// One line for the user (a config problem: file, line, key and what was expected).
    pub message: String,
    /// The problem the message is about (none: the file is in force again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_problem: Option<ConfigProblem>,
}

/// LSP `window/showDocument` params: a page for the person to open (an MCP server's sign-in).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ShowDocumentParams {
    /// The page: an `https` (or `http`) URL.
    pub uri: String,
    /// Always true: the page opens in the person's browser, not in the editor.
    pub external: bool,
    /// Whether the browser should take focus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub take_focus: Option<bool>,
}

/// LSP `window/showDocument` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct ShowDocumentResult {
    /// True when the page was shown.
    pub success: bool,
}

/// What Garuda tells the client in its `initialize` result, beside the LSP fields.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GarudaCapabilities {
    /// Protocol version of the native surface.
    pub protocol_version: u32,
    /// Methods this server answers.
    pub methods: Vec<String>,
    /// Workspaces opened from `rootUri` / `workspaceFolders`.
    pub workspaces: Vec<WorkspaceInfo>,
    /// Problems of the user's config file (also sent as `window/showMessage`); an error
    /// keeps sessions from starting until the file is fixed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_problems: Vec<ConfigProblem>,
}

/// Name and version, as in LSP's `serverInfo`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerInfo {
    /// `garuda`.
    pub name: String,
    /// Crate version.
    pub version: String,
}

/// `initialize` result (an LSP `InitializeResult` with Garuda's capabilities inside).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// LSP server capabilities; Garuda's own live under `experimental.garuda` and `garuda`.
    pub capabilities: serde_json::Value,
    /// Name and version.
    pub server_info: ServerInfo,
    /// Garuda's capabilities.
    pub garuda: GarudaCapabilities,
}

/// Version of the native protocol; bumped on incompatible changes.
pub const PROTOCOL_VERSION: u32 = 1;

/// `session/new` parameters.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewSessionParams {
    /// The workspace.
    pub workspace_id: String,
    /// Model spec, e.g. `anthropic/claude-sonnet-4-5` or `replay:PATH` (default: configured).
    #[serde(default)]
    pub model: Option<String>,
    /// Approval policy: `ask`, `auto-edit`, `full-auto`, `plan` (default: configured, else
    /// `ask`).
    #[serde(default)]
    pub policy: Option<Policy>,
    /// Tools the client runs itself; Garuda forwards their calls with `tool/call`.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
}

/// `session/new` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionResult {
    /// The new session's id.
    pub session_id: String,
    /// The model spec it uses for its whole life.
    pub model: String,
    /// The model's context window in tokens.
    pub context_window: u64,
    /// Problems worth telling the person (unknown model, for instance).
    pub warnings: Vec<String>,
}

/// `session/configure` params: switch a running session's model or approval policy.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigureParams {
    /// The session.
    pub session_id: String,
    /// The model from the next model request on; the system prompt keeps the start model
    /// and the next user message carries a `<garuda_note>` naming this one.
    #[serde(default)]
    pub model: Option<String>,
    /// The approval policy from the next tool call on.
    #[serde(default)]
    pub policy: Option<Policy>,
}

/// `session/configure` result: the session's settings now.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigureResult {
    /// The model spec now.
    pub model: String,
    /// The model's context window in tokens.
    pub context_window: u64,
    /// The approval policy now.
    pub policy: Policy,
    /// Problems worth telling the person (unknown model, for instance).
    pub warnings: Vec<String>,
}

/// Parameters naming one session.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionRef {
    /// The session id.
    pub session_id: String,
}

/// A stored session.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    /// Its id.
    pub session_id: String,
    /// Creation time, unix milliseconds.
    pub created: u64,
    /// Model spec.
    pub model: String,
    /// Messages in its transcript.
    pub message_count: u64,
    /// The first user text, shortened.
    pub title: Option<String>,
    /// The session it was forked from.
    pub forked_from: Option<String>,
    /// True when the transcript's header line was missing or damaged and was rebuilt: the
    /// fields are what could be recovered; the messages are intact.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub damaged: bool,
    /// Which front created it (sessions stored before this was recorded: `serve`).
    pub origin: SessionOrigin,
    /// Time of its last record, unix milliseconds (its last activity).
    pub updated: u64,
    /// For an agent's sub-session: the session whose `agent` or `explore` call started it
    /// (pickers may hide or nest these).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    /// For an agent's sub-session: that tool call's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<String>,
    /// For an agent's sub-session: the agent's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// The front that created a session.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum SessionOrigin {
    /// `garuda serve`: an editor or script speaking the native protocol.
    Serve,
    /// `garuda acp`: an Agent Client Protocol client.
    Acp,
    /// `garuda exec`: a headless run.
    Exec,
}

/// `session/revokePermission` params.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RevokePermissionParams {
    /// The session.
    pub session_id: String,
    /// The tool whose "allow always" is taken back (absent: every tool).
    #[serde(default)]
    pub tool_name: Option<String>,
}

/// `session/revokePermission` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RevokePermissionResult {
    /// The tools that were allowed always and now ask again, sorted.
    pub revoked: Vec<String>,
    /// The tools still allowed always in the session, sorted.
    pub allowed_always: Vec<String>,
}

/// `session/list` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionList {
    /// Most recently active first (by `updated`).
    pub sessions: Vec<SessionInfo>,
}

/// `session/load` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadResult {
    /// The session id.
    pub session_id: String,
    /// Its workspace (opened if it was not).
    pub workspace_id: String,
    /// Model spec.
    pub model: String,
    /// Messages in its transcript.
    pub message_count: u64,
}

/// `session/messages` parameters.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessagesParams {
    /// The session.
    pub session_id: String,
    /// Index to start from (from a previous `nextCursor`); default 0.
    #[serde(default)]
    pub cursor: Option<u64>,
    /// Most messages to return (default 200).
    #[serde(default)]
    pub limit: Option<u64>,
}

/// One message of the durable history.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HistoryMessage {
    /// Message id.
    pub id: String,
    /// The message before it.
    pub parent_id: Option<String>,
    /// Author.
    pub role: Role,
    /// Content blocks.
    pub content: Vec<Block>,
    /// Unix milliseconds.
    pub time: u64,
    /// Special kind (`summary`, `restored_file`, ...), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<String>,
    /// Why the model no longer sees it: `compacted`, `snip` or `collapsed` (absent: it does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<String>,
    /// Set on a step a compaction kept and re-installed: the id of the original message,
    /// which the history also holds (render one of them, not both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_of: Option<String>,
}

/// `session/messages` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessagesPage {
    /// The page.
    pub messages: Vec<HistoryMessage>,
    /// Cursor of the next page; absent on the last page.
    pub next_cursor: Option<u64>,
    /// Messages in the whole history.
    pub total: u64,
}

/// `session/fork` parameters.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkParams {
    /// The session to copy.
    pub session_id: String,
    /// Copy up to and including this message (default: everything).
    #[serde(default)]
    pub at_message_id: Option<String>,
}

/// `turn/run` parameters.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnParams {
    /// The session.
    pub session_id: String,
    /// The user's message: content blocks (`{"type":"text","text":"..."}`, images).
    pub input: Vec<Block>,
}

/// `turn/run` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnResult {
    /// Why the turn ended.
    pub stop_reason: StopReason,
    /// Usage summed over its steps.
    pub usage: Usage,
    /// Ids of the messages it appended.
    pub message_ids: Vec<String>,
}

/// `turn/update` notification.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnUpdate {
    /// The session.
    pub session_id: String,
    /// What happened.
    pub event: TurnEvent,
    /// Set when the event is relayed from an agent's sub-session running in this session's
    /// turn: which agent (`event` is the sub-session's: its text, its tool calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentOrigin>,
}

/// `permission/request` result from the client.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionResult {
    /// `allow_once`, `allow_always` or `reject`; for a plan, one of its `mode:POLICY` options
    /// or `reject`.
    pub option_id: String,
    /// With a rejection: the person's words for the model (why, or what to do instead; a
    /// rejected plan is revised with them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
}

/// `workspace/applyEdit` parameters (server to client; LSP's `ApplyWorkspaceEditParams` as
/// Garuda sends them): one edit that replaces the whole text of one file.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApplyEditParams {
    /// Always `garuda`.
    pub label: String,
    /// The change.
    pub edit: WorkspaceEdit,
}

/// LSP's `WorkspaceEdit`, with `changes` only: the edits by `file://` URI.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceEdit {
    /// The text edits of each file, keyed by its `file://` URI.
    pub changes: std::collections::BTreeMap<String, Vec<TextEdit>>,
}

/// LSP's `TextEdit`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TextEdit {
    /// The text replaced (Garuda's: from `0:0` to the end of the old text).
    pub range: Range,
    /// The text put in its place.
    pub new_text: String,
}

/// LSP's `Range`: zero-based lines, UTF-16 columns.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct Range {
    /// Where it starts.
    pub start: Position,
    /// Where it ends (exclusive).
    pub end: Position,
}

/// LSP's `Position`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct Position {
    /// Zero-based line.
    pub line: u32,
    /// Zero-based column in UTF-16 code units.
    pub character: u32,
}

/// `workspace/applyEdit` result from the client (LSP's `ApplyWorkspaceEditResult`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApplyEditResult {
    /// The edit landed.
    pub applied: bool,
    /// Why not, when the client says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
}

/// `mcp/elicit` parameters (server to client): an MCP server asks the person for input
/// while one of its tools runs.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ElicitParams {
    /// The session whose tool call is waiting.
    pub session_id: String,
    /// The MCP server's config name.
    pub server: String,
    /// The server's message for the person.
    pub message: String,
    /// `form` (fill in `requestedSchema`) or `url` (open `url`).
    pub mode: ElicitMode,
    /// For `form`: a flat JSON Schema object with primitive properties (MCP's `requestedSchema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_schema: Option<serde_json::Value>,
    /// For `url`: the page to open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// For `url`: the server's id of this elicitation, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation_id: Option<String>,
}

/// The kind of an `mcp/elicit` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ElicitMode {
    /// A form.
    Form,
    /// A page to open.
    Url,
}

/// `code/findSymbol` parameters (server to client, only to clients that declared
/// `capabilities.experimental.garuda.codeSymbols`): definitions by name from the editor's
/// language servers, asked for a `find_symbol` tool call before Garuda's own index.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindSymbolParams {
    /// The session whose tool call asks.
    pub session_id: String,
    /// The name asked for (exact, case-insensitive or contained; best first).
    pub name: String,
    /// Only this kind: the LSP SymbolKind's name in lower case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The most items to answer.
    pub limit: u32,
}

/// `code/findSymbol` result: `null` when no language server of the client can answer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindSymbolResult {
    /// The language server that answered (`ts_ls`, `rust-analyzer`, `pyright`, …).
    pub source: String,
    /// The definitions, at most `limit`.
    pub items: Vec<SymbolItem>,
}

/// One definition a client's language server found.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SymbolItem {
    /// Its name.
    pub name: String,
    /// The LSP SymbolKind's name in lower case (`function`, `class`, `method`, …).
    pub kind: String,
    /// What it sits in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Absolute or root-relative.
    pub path: String,
    /// 1-based first line.
    pub line: u32,
    /// 1-based last line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u32>,
    /// The definition's first line, trimmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// `code/findReferences` parameters (server to client, as `code/findSymbol`): `name`, or
/// `path` and `line`, or all three.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindReferencesParams {
    /// The session whose tool call asks.
    pub session_id: String,
    /// The symbol's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A root-relative file holding it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The 1-based line in `path` where it is defined or used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The most items to answer.
    pub limit: u32,
}

/// `code/findReferences` result: `null` when no language server of the client can answer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindReferencesResult {
    /// The language server that answered.
    pub source: String,
    /// The uses, at most `limit`.
    pub items: Vec<ReferenceItem>,
}

/// One use a client's language server found.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceItem {
    /// Absolute or root-relative.
    pub path: String,
    /// 1-based line.
    pub line: u32,
    /// The line, trimmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// `mcp/elicit` result from the client.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ElicitResult {
    /// `accept`, `decline` or `cancel`.
    pub action: ElicitAction,
    /// With `accept` of a form: the values, an object matching `requestedSchema`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What the person did with an `mcp/elicit` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ElicitAction {
    /// Gave the input (or completed the page).
    Accept,
    /// Refused.
    Decline,
    /// Dismissed without choosing.
    Cancel,
}

/// The agent's sub-session a relayed `turn/update` or a `tool/call` comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentOrigin {
    /// The agent (`explore` or a custom agent's name).
    pub name: String,
    /// Its sub-session (`session/load` and `session/messages` open it).
    pub session_id: String,
    /// The `agent` or `explore` call that runs it, in the session that started it (the
    /// notification's session, or for a nested agent the sub-session of the agent that
    /// started it).
    pub tool_call_id: String,
    /// The session that started it (where `toolCallId` lives): the notification's session,
    /// or for a nested agent the sub-session of the agent that started it.
    #[serde(default)]
    pub parent_session_id: String,
}

/// `tool/call` parameters (server to client).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallParams {
    /// The session (the calling session when an agent's sub-session calls).
    pub session_id: String,
    /// The client tool's name.
    pub name: String,
    /// Arguments from the model.
    pub input: serde_json::Value,
    /// Set when an agent's sub-session calls the tool: which agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentOrigin>,
}

/// `tool/call` result from the client.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallResult {
    /// Text for the model.
    pub content: String,
    /// True on failure.
    #[serde(default)]
    pub is_error: bool,
}

/// A result that only says it worked.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ack {
    /// True.
    pub ok: bool,
}

/// `session/compact` parameters.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactParams {
    /// The session.
    pub session_id: String,
    /// What the summary should focus on (the text after `/compact`).
    #[serde(default)]
    pub focus: Option<String>,
}

/// `session/compact` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactResult {
    /// True when a compaction was installed.
    pub compacted: bool,
    /// Estimated context tokens before.
    pub tokens_before: u64,
    /// Estimated context tokens after.
    pub tokens_after: u64,
    /// `summary`, `handoff` (extractive, the model could not summarize) or `trim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Why nothing was installed, when nothing was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `session/snip` parameters.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnipParams {
    /// The session.
    pub session_id: String,
    /// Transcript message ids to drop from the model's view.
    pub message_ids: Vec<String>,
}

/// `session/snip` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnipResult {
    /// Ids now out of the view.
    pub removed: Vec<String>,
    /// Ids kept because the other side of a tool pair is still in the view.
    pub protected: Vec<String>,
}

/// `session/collapse` parameters.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CollapseParams {
    /// The session.
    pub session_id: String,
    /// First message of the span.
    pub from_id: String,
    /// Last message of the span.
    pub to_id: String,
    /// The span's summary (made by the model when absent).
    #[serde(default)]
    pub summary: Option<String>,
}

/// `session/collapse` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CollapseResult {
    /// Id of the summary message in the view (the collapse record's id).
    pub collapse_id: String,
    /// Every message the summary replaces (widened so no tool pair is split).
    pub span_ids: Vec<String>,
    /// The summary text.
    pub summary: String,
}

/// `session/view` result: the request the next step would send.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ViewResult {
    /// The provider request body, cache markers included.
    pub request: serde_json::Value,
    /// Messages in the request.
    pub message_count: u64,
    /// Cache markers in the request (system included).
    pub cache_markers: u64,
    /// Estimated context tokens.
    pub context_tokens: u64,
}

/// The lean fixed part of a small window, in `context/inspect`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeanFixedPart {
    /// Tokens the system prompt and tool definitions aim at (a quarter of the window).
    pub budget_tokens: u64,
    /// The prompt parts dropped or cut to reach it, in order (`dropped: build and test
    /// commands`, …).
    pub dropped: Vec<String>,
    /// The tools whose definitions are deferred behind `mcp_tool_search`.
    pub deferred_tools: Vec<String>,
}

/// `context/inspect` result: the context by part, in tokens.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InspectResult {
    /// System prompt without instructions and memory.
    pub system: u64,
    /// Tool specs (without MCP's).
    pub tools: u64,
    /// MCP tool definitions (or `mcp_tool_search` when they are deferred).
    #[serde(default)]
    pub mcp_tools: u64,
    /// Project instructions.
    pub instructions: u64,
    /// Project memory.
    pub memory: u64,
    /// Conversation messages.
    pub messages: u64,
    /// Room left.
    pub free: u64,
    /// Reserved for the model's output.
    pub reserved: u64,
    /// The window the session plans with: the configured one, the smaller one the model's
    /// local server reported, or the smaller limit the provider named in a prompt-too-long
    /// answer.
    pub window: u64,
    /// Where `window` comes from: `learned` (a prompt-too-long answer named it), the local
    /// server's endpoint that reported it (`llama.cpp /props`, `ollama /api/show`,
    /// `lmstudio /api/v0/models`, `vllm /v1/models`), or the model's `config`, `table`,
    /// `default` or `environment` (`GARUDA_CONTEXT_WINDOW`).
    #[serde(default)]
    pub window_source: String,
    /// The model's window from the model table or the config.
    pub configured_window: u64,
    /// The window the model's local server reported, once asked (before the first request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_window: Option<u64>,
    /// The limit learned from the provider, when one was (kept in the transcript).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_limit: Option<u64>,
    /// The lean fixed part of a small window (under 16 384 tokens), when in force: what it
    /// aims at, the prompt parts dropped or cut, and the tools deferred behind
    /// `mcp_tool_search`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lean: Option<LeanFixedPart>,
    /// Compaction starts above this many tokens.
    pub threshold: u64,
    /// The context size now (real count of the last response plus the estimate since).
    pub context_tokens: u64,
    /// True while auto-compaction is paused after repeated failures.
    pub paused: bool,
    /// What the session's commands run in, measured at its start.
    pub sandbox: SandboxReport,
    /// False when `[context] auto_compact = false`: nothing compacts unless asked.
    pub auto_compact: bool,
    /// With auto-compaction off: the most tokens a request may carry (the window less the
    /// least output room); a larger one is refused with -32060 before it is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking_limit: Option<u64>,
    /// Tokens of the git state note (captured at session start) in the view; 0 when none.
    #[serde(default)]
    pub git_state_tokens: u64,
    /// context_efficiency notes (suggesting `snip`) sent over the session's life.
    #[serde(default)]
    pub nudges: u64,
    /// Collapse summaries in the view (manual and automatic).
    #[serde(default)]
    pub collapses: u64,
    /// Of those, the ones Garuda installed by itself before a compaction was needed.
    #[serde(default)]
    pub auto_collapses: u64,
    /// Messages whose images the view replaced with a marker after a provider refused them.
    #[serde(default)]
    pub media_stripped: u64,
    /// Every instruction source of the session: those of its system prompt, the nested files
    /// and path-scoped rules in force for the paths its tools touched (`placement: "note"`),
    /// and the rules not in force yet.
    #[serde(default)]
    pub sources: Vec<InstructionSource>,
    /// What prompt assembly reported for this session's prompt: files cut or skipped, and
    /// feature switches that add no line because the session offers no such tool.
    #[serde(default)]
    pub prompt_warnings: Vec<String>,
    /// The newest compaction that installed a summary or a handoff, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_compaction: Option<LastCompaction>,
    /// The session's hooks in force (protocol/HOOKS.md).
    #[serde(default)]
    pub hooks: Vec<HookInForce>,
    /// Configured hooks that do not run, each with why (an untrusted workspace, an unknown
    /// event, an unsupported type, …).
    #[serde(default)]
    pub hooks_skipped: Vec<HookSkipped>,
    /// What the session's model requests used and cost, per purpose: `main` (the turns'
    /// steps), `summary`, `collapse`, `worker`, `memory`, `agent`; purposes without a request are left
    /// out. The session's cost (`costUsd` of `usage` events) is the sum of these rows.
    #[serde(default)]
    pub usage_by_purpose: Vec<PurposeUsage>,
    /// How the main requests read the provider's prompt cache.
    #[serde(default)]
    pub cache: CacheInspect,
    /// True when the provider clears old tool results itself (`[context] provider_clearing`
    /// on a provider and model that can); Garuda's time-based microcompact is then off.
    #[serde(default)]
    pub tool_clearing: bool,
    /// The MCP servers' own instructions the model has (from their `initialize` result), one
    /// entry per server: in the system prompt, or in the note that re-announced them after
    /// the servers changed. Their tokens count in `system`.
    #[serde(default)]
    pub mcp_instructions: Vec<McpInstructionsInfo>,
    /// The session memory (running notes a compaction installs without a model call), when
    /// one was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_memory: Option<SessionMemory>,
}

/// A session's memory: the notes kept current in the background after turns (or written by
/// the user), which a compaction installs as its summary without a model call.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionMemory {
    /// The notes, in the summary's sections.
    pub text: String,
    /// The last transcript message they cover.
    pub through_id: String,
    /// When they were written (unix ms).
    pub time: u64,
    /// `model` (the background update) or `user` (`session/memory` with a text).
    pub source: String,
    /// The context's estimated tokens when they were asked for.
    pub tokens_at: u64,
    /// They cover the newest message.
    pub current: bool,
    /// Their last message is in the model's view, so a compaction can install them (with
    /// what came after them kept verbatim).
    pub in_view: bool,
}

/// `session/memory` parameters.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionMemoryParams {
    /// The session.
    pub session_id: String,
    /// New notes, replacing the memory (they cover the conversation so far; the next update
    /// carries them forward). Absent: read only. Empty: clear it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// `session/memory` result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionMemoryResult {
    /// The memory now (null: none was written yet).
    pub memory: Option<SessionMemory>,
}

/// The prompt cache in `context/inspect`: hit ratios and the newest misses with their causes
/// (protocol/CONTEXT.md, "Cache misses").
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CacheInspect {
    /// Share of the last main request's prompt read from the cache; absent before any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_hit_ratio: Option<f64>,
    /// The same over the session's main requests.
    pub session_hit_ratio: f64,
    /// The newest misses (at most 20), oldest first.
    pub misses: Vec<CacheMissAt>,
}

/// A cache miss and when it happened.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CacheMissAt {
    /// Unix milliseconds of the request's answer.
    pub time: u64,
    /// Why.
    #[serde(flatten)]
    pub miss: wire::CacheMiss,
}

/// One MCP server's instructions in the context (`context/inspect`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpInstructionsInfo {
    /// The server's name.
    pub server: String,
    /// Where the model has them: `system` or `note`.
    pub placement: InstructionPlacement,
    /// Characters the server sent.
    pub original_chars: u64,
    /// Characters in the context (0 when left out).
    pub chars: u64,
    /// Estimated tokens.
    pub tokens: u64,
    /// True when cut to the per-server or the total cap.
    pub cut: bool,
    /// Why they are left out, when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// The requests of one purpose over a session (`context/inspect`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PurposeUsage {
    /// `main`, `summary`, `collapse`, `worker` or `agent`.
    pub purpose: String,
    /// Usage records counted (an agent's record sums its whole run).
    pub requests: u64,
    /// Their usage, summed: cache reads and writes show what the cache saved.
    pub usage: Usage,
    /// Their cost in US dollars, when the config names the model's prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// A hook in force for a session (`context/inspect`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookInForce {
    /// The event (`PreToolUse`, …).
    pub event: String,
    /// The matcher as written (absent: every subject).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// The command line.
    pub command: String,
    /// Seconds it may run.
    pub timeout_secs: f64,
    /// Where it was defined: `user config` or the settings file's path.
    pub origin: String,
}

/// A configured hook that does not run (`context/inspect`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookSkipped {
    /// The event as written.
    pub event: String,
    /// The matcher as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// The command, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Where it was defined.
    pub origin: String,
    /// Why it does not run.
    pub reason: String,
}

/// The newest installed compaction of a session (`context/inspect`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastCompaction {
    /// `auto`, `manual`, `reactive` or `idle`.
    pub trigger: String,
    /// The path that produced the summary: `fork` (the cache-sharing request), `regular` (the
    /// summary system prompt), `chunked`, `worker`, `memory` (the session memory, no model call), or `extractive` (no model); absent for
    /// compactions of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarizer: Option<String>,
    /// Tokens its summary requests used, all paths together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Context tokens before.
    pub tokens_before: u64,
    /// Estimated context tokens after.
    pub tokens_after: u64,
}

/// What a session's commands run in (`context/inspect`, `garuda exec`'s `init`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxReport {
    /// `bubblewrap`, or `none`.
    pub mode: String,
    /// Commands run confined.
    pub confined: bool,
    /// Confined commands reach the network.
    pub network: bool,
    /// Each command waits for the user's approval.
    pub commands_ask: bool,
    /// One line for people: the confinement, or why there is none.
    pub description: String,
}

/// `mcp/servers` result: the MCP servers of a live session.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServersResult {
    /// Every configured server (the user's config and the client's), in name order.
    pub servers: Vec<McpServerInfo>,
}

/// Where an MCP server is in its life.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum McpServerState {
    /// `enabled = false` in the config; never started.
    Disabled,
    /// Spawned or connecting, tools not yet listed.
    Starting,
    /// Running; its tools are in the session.
    Ready,
    /// Did not start (bad config or command, an error, the startup timeout).
    Failed,
    /// Was ready, then stopped (the process exited or the connection was lost).
    Exited,
}

/// One MCP server of a session.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerInfo {
    /// Its name in the config (or in ACP's `mcpServers`).
    pub name: String,
    /// `stdio`, `http`, or `invalid` for an entry that cannot be used.
    pub transport: String,
    /// Its state.
    pub state: McpServerState,
    /// Why it failed or stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Tools it contributes to the session.
    pub tool_count: u64,
    /// Milliseconds from start to its listed tools, once ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_ms: Option<u64>,
}

/// `$/progress` parameters (LSP work-done progress) for `session/compact`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProgressParams {
    /// The progress token.
    pub token: String,
    /// `{kind: "begin"|"report"|"end", title?, message?}`.
    pub value: serde_json::Value,
}
