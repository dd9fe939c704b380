//! Wire shapes the protocol shares with the engine's own types: content blocks, usage, stop
//! reasons, prompt features and limits, the approval policy, turn events and permission
//! requests. They are defined here, apart from the engine's types, so a change on either side
//! is a compile error in the binary's conversions, never a silent change of the wire.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person (and tool results, which travel in user messages).
    User,
    /// The model.
    Assistant,
}

/// Where an image's bytes come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ImageSource {
    /// Inline base64 data.
    Base64 {
        /// MIME type, e.g. `image/png`.
        media_type: String,
        /// Base64-encoded bytes.
        data: String,
    },
    /// A URL the provider fetches.
    Url {
        /// The address.
        url: String,
    },
}

/// One content block of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// Its bytes or address.
        source: ImageSource,
    },
    /// The model's reasoning, with the provider's signature when it gave one.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// Opaque signature that must be sent back unchanged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A tool call made by the model.
    ToolUse {
        /// Provider-assigned call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments as JSON.
        input: Value,
    },
    /// The result of a tool call.
    ToolResult {
        /// The id of the `tool_use` this answers.
        tool_use_id: String,
        /// Result content (text or images).
        content: Vec<Block>,
        /// True when the tool failed or was refused.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// A block the provider made and ran itself (Anthropic's `server_tool_use`,
    /// `web_search_tool_result`), its JSON verbatim; only the model's messages carry one.
    Provider {
        /// The provider's block, its own `type` included.
        raw: Value,
    },
}

/// Token usage as reported by a provider for one response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Input tokens the provider cleared from the request itself (Anthropic's context
    /// editing, `[context] provider_clearing`); absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cleared_input_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why a main request read less from the provider's prompt cache than the previous one left
/// there (protocol/CONTEXT.md, "Cache misses").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CacheMiss {
    /// `firstRequest`, `modelSwitch`, `compaction`, `systemChanged`, `toolsChanged`,
    /// `messageChanged`, `expired` or `unknown`.
    pub cause: String,
    /// `messageChanged`: index of the first changed message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    /// `expired`: seconds since the previous request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_secs: Option<u64>,
    /// One line for people.
    pub message: String,
}

/// Why the model (or Garuda) ended a response or turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model wants tool results.
    ToolUse,
    /// The output limit was reached.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The model refused.
    Refusal,
    /// The client or user cancelled.
    Cancelled,
    /// The turn hit Garuda's built-in step limit.
    MaxSteps,
    /// The turn hit the step limit its caller set (`garuda exec --max-turns`).
    MaxTurns,
    /// The turn's cost reached the limit its caller set (`garuda exec --max-budget-usd`).
    MaxBudget,
    /// The turn ended with an error.
    Error,
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// Unique name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its input object.
    pub input_schema: Value,
    /// A client tool (`session/new`'s `tools`) that changes nothing: plan mode runs it. Not
    /// part of what the model sees.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

/// Which code-index tools the session has.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum CodeIndex {
    /// find_symbol and find_references.
    Lookup,
    /// Those plus repo_map.
    All,
}

/// The features of a session that change what the prompt says.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Features {
    /// Code-index tools for JS/TS.
    pub code_index: Option<CodeIndex>,
    /// Commands run in a sandbox without approval (otherwise the user approves each one).
    pub sandboxed: bool,
    /// web_fetch is available.
    pub web: bool,
    /// MCP tools are available.
    pub mcp: bool,
    /// User hooks may block calls.
    pub hooks: bool,
    /// The explore tool is available.
    pub explore: bool,
    /// todo_write is available.
    pub todo: bool,
    /// web_search is available.
    pub search: bool,
    /// Custom agents are available through the agent tool.
    pub agents: bool,
    /// Skills are available through the skill tool.
    pub skills: bool,
}

/// Character limits of the prompt's file-based parts.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct Limits {
    /// One limit shared by all instruction files (GARUDA.md first, then AGENTS.md, CLAUDE.md).
    pub instructions_chars: usize,
    /// Limit of the memory file.
    pub memory_chars: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            instructions_chars: 40_000,
            memory_chars: 8_000,
        }
    }
}

/// What one part of the prompt holds.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SectionReport {
    /// "base", "features", "build", "instructions", "instructions:<file>" or "memory".
    pub kind: String,
    /// The file (or files) it comes from.
    pub source: Option<String>,
    /// Its size in the prompt, in bytes.
    pub bytes: usize,
    /// Estimated tokens.
    pub tokens: u64,
    /// True when a file was cut to its limit.
    pub cut: bool,
    /// Characters left out of a cut file (estimated from bytes when not all was read).
    pub missing_chars: Option<u64>,
    /// Why a file was left out.
    pub skipped: Option<String>,
}

/// A session's approval policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Every write, every command and every memory change asks.
    #[default]
    Ask,
    /// Edits are allowed; commands ask.
    AutoEdit,
    /// Nothing asks.
    FullAuto,
    /// Plan mode: only read-only tools run, anything else is refused without asking, until
    /// the user approves the plan the model presents with `exit_plan_mode`.
    Plan,
}

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on (at most one at a time).
    InProgress,
    /// Done.
    Completed,
}

/// One task of the session's list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TodoItem {
    /// What to do.
    pub content: String,
    /// Its state.
    pub status: TodoStatus,
}

/// Facts about a tool call beyond its text, for the client and the turn loop.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolMeta {
    /// Exit code of a `bash` command (None when killed or not started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Root-relative path the tool read or wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// True when the tool changed a workspace file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wrote: bool,
    /// True when the session's todo list was replaced.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub todos_changed: bool,
    /// True when output was cut to fit a cap.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// True when a `bash` command hit its timeout.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// True when the call was cancelled.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// How the approval went, when the policy asked for one (absent: no approval needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// A PreToolUse hook blocked the call: it did not run, and the output gives the reason.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blocked_by_hook: bool,
    /// An `agent` or `explore` call: the sub-session it ran, whose transcript `session/load`
    /// and `session/messages` open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_session_id: Option<String>,
    /// Plan mode refused the call without asking (it is not read-only): it did not run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blocked_by_plan_mode: bool,
    /// The provider ran the call itself (its web search server tool): nobody was asked and
    /// Garuda ran nothing; the output lists what it found.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub server_side: bool,
}

/// The outcome of a tool call's approval (`toolCallFinished`'s `meta.approval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Approval {
    /// The person allowed this call (`allow_once`).
    Allowed,
    /// Allowed by "allow always", answered now or earlier in the session.
    AllowedAlways,
    /// The person rejected it; the call did not run.
    Rejected,
    /// Nobody answered within the approval timeout; the call did not run.
    TimedOut,
    /// The question failed (an error answer, the connection closed); the call did not run.
    Failed,
    /// Nobody could be asked (`garuda exec` without a terminal); the call did not run.
    Unavailable,
}

/// One streamed event of a turn (`turn/update` notification payload).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum TurnEvent {
    /// `garuda exec --json` only, its first line: what the run is. The native front never
    /// sends it (`session/new` and `context/inspect` answer the same questions).
    Init {
        /// The session the run's turns go to.
        session_id: String,
        /// The workspace root.
        workspace: String,
        /// The model spec.
        model: String,
        /// The tools offered to the model, in the registry's order.
        tools: Vec<String>,
        /// Where commands run.
        sandbox: crate::SandboxReport,
        /// `ask`, `auto-edit` or `full-auto`.
        approval_policy: String,
        /// The session this one was forked from (`--fork`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        forked_from: Option<String>,
        /// True when the run continues a stored session (`--session`, `--continue`, `--fork`).
        resumed: bool,
    },
    /// A model request is about to be sent.
    StepStarted {
        /// 1-based step number within the turn.
        step: u32,
    },
    /// Streamed answer text.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// Streamed reasoning text.
    ThinkingDelta {
        /// The new text.
        text: String,
    },
    /// A tool call is about to run.
    ToolCallStarted {
        /// The call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        input: Value,
    },
    /// A tool call finished (or was refused or interrupted).
    ToolCallFinished {
        /// The call id.
        id: String,
        /// Tool name.
        name: String,
        /// Text given to the model.
        output: String,
        /// True on failure, refusal or interruption.
        is_error: bool,
        /// Exit code, path, truncation and similar facts.
        meta: ToolMeta,
    },
    /// Usage of the step that just ended.
    Usage {
        /// As reported by the provider.
        usage: Usage,
        /// The real context size (input + cache creation + cache read).
        context_tokens: u64,
        /// The session's cost so far in US dollars (every response, summaries included, at
        /// the current model's prices); absent when the config names no prices for the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        /// Share of this request's prompt read from the provider's cache (0 to 1).
        #[serde(default)]
        cache_hit_ratio: f64,
        /// The same over the session's main requests so far.
        #[serde(default)]
        session_cache_hit_ratio: f64,
        /// Present when this request read less than the previous one left cached: why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_miss: Option<CacheMiss>,
    },
    /// A hook event: its hooks `started`, `finished`, `blocked` what the event is about,
    /// or one `failed` (a warning for the user); see protocol/HOOKS.md.
    Hook {
        /// The hook event (`PreToolUse`, `Stop`, …).
        event: String,
        /// `started`, `finished`, `blocked` or `failed`.
        phase: String,
        /// What it was about (the tool name, the source, the trigger).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subject: Option<String>,
        /// The reason, warning or message, for the user.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// The provider call is retried after an error.
    Retry {
        /// Retry number, from 1.
        attempt: u32,
        /// Wait before the retry.
        delay_ms: u64,
        /// What went wrong.
        reason: String,
    },
    /// The session's task list changed.
    Todos {
        /// The whole list.
        todos: Vec<TodoItem>,
    },
    /// Compaction progress.
    Compaction {
        /// `started`, `stage1`, `summary`, `finished`, `failed`, `paused`.
        phase: String,
        /// What triggered it: `auto`, `manual`, `reactive`, `idle`.
        trigger: String,
        /// Estimated context tokens before.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens_before: Option<u64>,
        /// Estimated context tokens after.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens_after: Option<u64>,
        /// Human-readable detail.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// The session's approval policy changed within the turn: the user approved a plan and
    /// picked the mode the work runs in.
    ModeChanged {
        /// The policy now.
        policy: Policy,
    },
    /// The turn ended.
    Finished {
        /// Why.
        stop_reason: StopReason,
        /// Summed usage of every step.
        usage: Usage,
        /// What went wrong, when `stopReason` is `error` (and, from `garuda exec`, when it
        /// stopped for an approval no one could give or its answer did not match
        /// `--output-schema`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<TurnFailure>,
        /// `garuda exec` only: the cost of `usage` in US dollars, when the config names the
        /// model's prices.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        /// `garuda exec --output-schema` only: the final answer, parsed and valid.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        structured_output: Option<Value>,
        /// `garuda exec` only: model requests the run made (what `--max-turns` counts).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        steps: Option<u32>,
    },
}

/// Why a turn failed, in its `finished` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnFailure {
    /// A stable name: a provider error's kind (`config`, `auth`, `rateLimited`, `overloaded`,
    /// `server`, `promptTooLong`, `cut`, `timeout`, `http`, `decode`, `replay`), or `store`,
    /// `invalid`, `messageTooLarge`, `cancelled`; from `garuda exec` also `approvalRequired`,
    /// `schema` (the answer did not match `--output-schema`), `maxTurns`, `maxBudget`.
    pub kind: String,
    /// What happened, for a person.
    pub message: String,
}

/// A tool call that needs the client's approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionRequest {
    /// The session.
    pub session_id: String,
    /// The tool call id.
    pub tool_call_id: String,
    /// Tool name.
    pub tool_name: String,
    /// One line for a prompt, e.g. `bash: cargo test`.
    pub title: String,
    /// Arguments.
    pub input: Value,
    /// The choices: `allow_once`, `allow_always` (not offered for a `bash` call with
    /// `outside_sandbox`, which is asked for every time), `reject`; for a plan
    /// (`exit_plan_mode`), `mode:auto-edit`, `mode:ask`, `mode:full-auto` (approve, and go on
    /// in that mode) and `reject` (keep planning).
    pub options: Vec<PermissionOption>,
    /// The agent whose sub-session asks (the title then starts `[agent NAME]`); absent for
    /// the session's own calls. The answer holds in the calling session too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The plan to approve, in Markdown, when the request is about one (`exit_plan_mode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
}

/// One choice offered to the person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    /// Id to answer with.
    pub option_id: String,
    /// Label.
    pub name: String,
}
