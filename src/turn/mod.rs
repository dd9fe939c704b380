//! Turns: the step loop that streams a model's answer, runs its tool calls (asking the
//! client where policy says so), and persists every step.

mod events;
mod host;
mod live;
mod run;
mod view;

pub use events::{PermissionAnswer, PermissionOption, PermissionRequest, TurnEvent};
pub use host::{ClientToolResult, NullHost, TurnHost};
pub use live::{LiveSession, SessionSetup, TurnError};
pub use run::{TurnOutcome, run_turn};
pub use view::request_messages;

/// Most model requests in one turn before it stops with `max_steps`.
pub const DEFAULT_MAX_STEPS: u32 = 50;
