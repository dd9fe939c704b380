//! Hooks: the user's commands at fixed points of a session, in the format Claude Code made
//! common (settings → event → matcher groups → handlers; exit code 2 blocks;
//! `hookSpecificOutput` for decisions and context). `protocol/HOOKS.md` documents events,
//! inputs, outputs and effects for users.
//!
//! The parts, pure where they can be:
//! - [`HooksSettings`] (`config`): the `[hooks]` table of a config file;
//! - [`claude`]: Claude Code's settings files as a source (`[hooks] import = ["claude"]`);
//! - [`TrustList`] (`trust`): the workspaces whose own hooks may run, and which hooks
//!   ([`WorkspaceHooks`], `digest`);
//! - [`HookSet`] (`set`): the hooks in force for a workspace and the ones skipped, with why;
//! - [`Matcher`] (`matcher`): Claude Code's matcher rules, with Claude Code's tool names;
//! - [`HookInput`] (`input`): the JSON a hook reads;
//! - [`HookSet::run`] (`run`): one event's hooks, concurrently, bounded in time and output;
//! - [`HookOutcome`] (`output`): what their exit codes and output mean, merged.
//!
//! The turn loop decides what an outcome does (a denied call, context for the model, a
//! blocked compaction); this module only says what the hooks asked for.

#![warn(missing_docs)]

pub mod claude;
mod config;
mod digest;
mod event;
mod input;
mod matcher;
mod output;
mod run;
mod set;
mod source;
mod trust;

#[cfg(test)]
mod tests;

/// How many times a turn continues because a Stop hook blocked, before it ends anyway (so a
/// hook that always blocks cannot keep a turn running forever).
pub const STOP_CONTINUATIONS_MAX: u32 = 3;

pub use config::{DEFAULT_TIMEOUT_SECS, HandlerConfig, HooksSettings, ImportSource, MatcherGroup};
pub use digest::{HookChanges, TrustedHook, WorkspaceHooks};
pub use event::{CLAUDE_ONLY_EVENTS, HookEvent};
pub use input::{CompactTrigger, EventData, HookInput, SessionSource, permission_mode};
pub use matcher::{Matcher, MatcherError, tool_match_names};
pub use output::{
    HookExit, HookOutcome, HookReport, HookResult, HookRun, PermissionDecision, interpret,
};
pub use run::{ENV_CLAUDE_PROJECT_DIR, ENV_PROJECT_DIR, OUTPUT_CAP_BYTES, RunLimits, run_hooks};
pub use set::{
    Hook, HookConfig, HookOrigin, HookSet, HookSource, ResolveOptions, SkipReason, SkippedHook,
};
pub use trust::{TRUST_FILE, TrustEntry, TrustError, TrustList, TrustStatus};
