//! Turns: the step loop that streams a model's answer, runs its tool calls (asking the
//! client where policy says so), and persists every step.

mod agents;
mod approval;
mod ask;
mod background;
mod budget;
mod call;
mod compact;
mod events;
mod fit;
mod hooks;
mod host;
mod instructions;
mod live;
mod memory;
mod notes;
mod ops;
mod plan;
mod resume;
mod run;
mod scoped;
mod side;
mod skills;
mod todo;
mod view;
mod worker;

pub use crate::tools::{SNIP_TOOL, snip_tool_spec};
pub use agents::running_agent;
pub(crate) use budget::context_tokens;
pub use budget::fixed_chars;
pub(crate) use compact::compact_session;
pub use compact::{CompactOutcome, CompactRequest, ProgressFn};
pub use events::{
    AgentMark, CompactionPhase, HookPhase, PermissionAnswer, PermissionOption, PermissionRequest,
    TurnEvent, TurnFailure,
};
pub use host::{ClientToolResult, CommandRun, NullHost, Progress, TurnHost};
pub use instructions::RootNoted;
pub(crate) use live::SessionState;
pub use live::{
    LeanState, LiveSession, ModelBinder, ModelBinding, SessionSetup, SessionStart, TurnError,
};
pub use memory::settle as settle_memory;
pub(crate) use memory::{set_by_user as set_memory, write_pending as write_memory};
pub use ops::{CollapseOutcome, SnipOutcome};
pub(crate) use ops::{collapse, snip_ids};
pub use plan::{PLAN_REFUSED, plan_off_note, plan_on_note};
pub use run::{TurnOptions, TurnOutcome, model_in_note, model_note, run_turn, run_turn_with};
pub use scoped::{Attached, ScopeState, scoped_sources};
pub(crate) use view::step_view;
pub use view::{StepView, request_messages, view_anchors};

/// Most model requests in one turn before it stops with `max_steps`.
pub const DEFAULT_MAX_STEPS: u32 = 50;

#[cfg(test)]
mod tests;
