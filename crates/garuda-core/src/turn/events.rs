//! What a running turn tells its host, and what it asks of it.

use serde_json::Value;

use crate::message::{StopReason, Usage};
use crate::session::records::CompactTrigger;
use crate::tools::{Policy, TodoItem, ToolMeta};

/// One streamed event of a turn (`turn/update` notification payload).
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
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
        /// The session's cost so far in US dollars, when the config names the model's prices.
        cost_usd: Option<f64>,
        /// Share of this request's prompt read from the provider's cache.
        cache_hit_ratio: f64,
        /// The same over the session's main requests so far.
        session_cache_hit_ratio: f64,
        /// Why this request read less than the previous one left cached (None: it did not).
        cache_miss: Option<crate::session::cache_miss::CacheMiss>,
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
        /// Where it is.
        phase: CompactionPhase,
        /// What triggered it.
        trigger: CompactTrigger,
        /// Estimated context tokens before.
        tokens_before: Option<u64>,
        /// Estimated context tokens after.
        tokens_after: Option<u64>,
        /// Human-readable detail.
        message: Option<String>,
    },
    /// A hook event: its hooks started, finished, blocked something or failed.
    Hook {
        /// The hook event (`PreToolUse`, `Stop`, …).
        event: String,
        /// What happened.
        phase: HookPhase,
        /// What it was about (the tool name, the source, the trigger), when it has one.
        subject: Option<String>,
        /// The reason, warning or message, for the user.
        message: Option<String>,
    },
    /// The session's approval policy changed within the turn (an approved plan left plan
    /// mode for the mode the user picked).
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
        /// What went wrong, when the turn failed.
        error: Option<TurnFailure>,
    },
}

/// The agent's sub-session an event, a client tool call or a request comes from, relayed
/// through the caller's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentMark {
    /// The agent (`explore` or a custom agent's name), as shown: format characters escaped
    /// (`\u{202e}`).
    pub name: String,
    /// Its sub-session.
    pub session_id: String,
    /// The `agent` or `explore` call that runs it, in the session that started it.
    pub tool_call_id: String,
    /// The session that started it: the caller's, or for a nested agent the sub-session of
    /// the agent that started it (where `tool_call_id` lives).
    pub parent_session_id: String,
}

/// Why a turn failed, as its `finished` event reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnFailure {
    /// A stable name: a provider error's kind (`auth`, `rateLimited`, `replay`, ...),
    /// `store`, `invalid`, `messageTooLarge`, `cancelled`.
    pub kind: String,
    /// What happened, for a person.
    pub message: String,
}

/// What a hook event's hooks did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookPhase {
    /// They started.
    Started,
    /// They finished without effect on the flow (context and messages may have come).
    Finished,
    /// They blocked or denied what the event is about.
    Blocked,
    /// One failed (a warning for the user: exit code, timeout, bad output).
    Failed,
}

impl HookPhase {
    /// The phase's wire name.
    pub fn name(self) -> &'static str {
        match self {
            HookPhase::Started => "started",
            HookPhase::Finished => "finished",
            HookPhase::Blocked => "blocked",
            HookPhase::Failed => "failed",
        }
    }
}

/// Where a compaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionPhase {
    /// It began.
    Started,
    /// A trim (stage 1) was installed.
    Stage1,
    /// A summary request is under way.
    Summary,
    /// It was installed.
    Finished,
    /// It failed; the session is unchanged.
    Failed,
    /// Auto-compaction stopped after repeated failures.
    Paused,
}

impl CompactionPhase {
    /// The phase's wire name.
    pub fn name(self) -> &'static str {
        match self {
            CompactionPhase::Started => "started",
            CompactionPhase::Stage1 => "stage1",
            CompactionPhase::Summary => "summary",
            CompactionPhase::Finished => "finished",
            CompactionPhase::Failed => "failed",
            CompactionPhase::Paused => "paused",
        }
    }
}

/// A tool call that needs the client's approval.
#[derive(Debug, Clone, PartialEq)]
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
    /// The choices: `allow_once`, `allow_always` (not for a call that leaves the sandbox),
    /// `reject`; for a plan, a `mode:POLICY` per mode the work may run in, and `reject`.
    pub options: Vec<PermissionOption>,
    /// The agent whose sub-session asks (its title starts `[agent NAME]`); None for the
    /// session's own calls.
    pub agent: Option<String>,
    /// The plan to approve, when this asks about one (`exit_plan_mode`).
    pub plan: Option<String>,
}

/// One choice offered to the person.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionOption {
    /// Id to answer with.
    pub option_id: String,
    /// Label.
    pub name: String,
}

/// The client's answer to a permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionAnswer {
    /// Run this call.
    AllowOnce,
    /// Run this call and every later call of this tool in the session.
    AllowAlways,
    /// Do not run it.
    Reject,
    /// Do not run it, and here is why or what to do instead (the person's words, for the
    /// model).
    RejectWith(String),
    /// Approved, and the session goes on in this mode (the `mode:POLICY` options of a plan).
    Mode(Policy),
    /// Nobody answered in time (the host's approval timeout).
    TimedOut,
    /// The question could not be delivered or answered (client error, connection closed).
    Failed,
    /// No one can be asked (a headless run without a terminal): the call does not run, and
    /// the model is told so rather than that the user refused.
    Unavailable,
}

impl PermissionRequest {
    /// Allow once or reject: for a call that must be asked for every time (one that leaves
    /// the sandbox).
    pub fn once_options() -> Vec<PermissionOption> {
        Self::standard_options()
            .into_iter()
            .filter(|o| o.option_id != "allow_always")
            .collect()
    }

    /// The standard three options.
    pub fn standard_options() -> Vec<PermissionOption> {
        [
            ("allow_once", "Allow once"),
            ("allow_always", "Allow always"),
            ("reject", "Reject"),
        ]
        .into_iter()
        .map(|(id, name)| PermissionOption {
            option_id: id.into(),
            name: name.into(),
        })
        .collect()
    }

    /// The options of a plan's approval: a mode for the work to run in, or keep planning.
    pub fn plan_options() -> Vec<PermissionOption> {
        [
            ("mode:auto-edit", "Yes, and edit files without asking"),
            ("mode:ask", "Yes, and ask before each change"),
            ("mode:full-auto", "Yes, and run everything without asking"),
            ("reject", "No, keep planning"),
        ]
        .into_iter()
        .map(|(id, name)| PermissionOption {
            option_id: id.into(),
            name: name.into(),
        })
        .collect()
    }
}

impl PermissionAnswer {
    /// The answer a client's option id (and the person's words, when it gave any) stands
    /// for: `allow_once` (or `allow`), `allow_always`, `mode:POLICY`; anything else rejects.
    pub fn of_option(option_id: Option<&str>, feedback: Option<&str>) -> PermissionAnswer {
        let mode = option_id
            .and_then(|id| id.strip_prefix("mode:"))
            .and_then(|p| p.parse::<Policy>().ok());
        match (option_id, mode) {
            (Some("allow_once" | "allow"), _) => PermissionAnswer::AllowOnce,
            (Some("allow_always"), _) => PermissionAnswer::AllowAlways,
            (_, Some(p)) => PermissionAnswer::Mode(p),
            _ => match feedback.map(str::trim).filter(|f| !f.is_empty()) {
                Some(f) => PermissionAnswer::RejectWith(f.to_string()),
                None => PermissionAnswer::Reject,
            },
        }
    }
}
