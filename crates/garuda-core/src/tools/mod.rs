//! Built-in agent tools: file reading, listing, searching, editing, shell, memory and todos.
//!
//! Every workspace file access goes through [`crate::fsroot::Root`]; directory walks use the
//! `ignore` crate beneath the canonical root and never follow links. Tools never panic: bad
//! input or a refusal becomes a [`ToolOutput`] with `is_error` set and a message the model can
//! act on.

#![warn(missing_docs)]

mod builtin;
mod handler;
pub mod lean;
mod policy;
mod registry;
mod remote;
mod util;
mod vocab;
mod walk;
mod write;

#[cfg(test)]
mod tests;

use serde_json::Value;

pub use builtin::{
    AgentTool, ExploreTool, PLAN_TOOL, SKILL_TOOL, SNIP_TOOL, SkillTool, plan_in, skill_text,
    snip_tool_spec, todos_in,
};
pub use handler::{Handler, NoWorkbench, Tool, Workbench};
pub use policy::{
    Policy, RISKY_DIRS, RISKY_FILES, UnknownPolicy, approval_needed, needs_approval, plan_refuses,
    protected_path, risky_path, target_risk,
};
pub use registry::{ToolClash, ToolEntry, ToolRegistry, ToolSource, Touched};
pub use vocab::{
    AgentCall, AgentRan, Anchor, Approval, CLIENT_SYMBOLS_TIMEOUT, ClientToolResult, CommandRun,
    EditPreview, EditRisk, FileTracker, MEMORY_FILE, PlannedWrite, ReadMark, ReadState, Remote,
    Risk, SymbolAnswer, SymbolQuery, SymbolSite, TodoItem, TodoStatus, ToolClass, ToolContext,
    ToolKind, ToolLimits, ToolMeta, ToolOutput, Touch, ViewAnchors,
};
pub use write::{commit_write, finish_write};

/// The built-in tools' specs, in the order the model sees them.
pub fn builtin_specs() -> Vec<crate::message::ToolSpec> {
    builtin::all().iter().map(|h| h.spec()).collect()
}

/// Claude Code's names for a tool, so hooks and settings written for Claude Code match
/// Garuda's tools (`MultiEdit` edits like `edit_file`); empty for tools Claude Code has no
/// equivalent of. MCP tools are `mcp__SERVER__TOOL` in both and need no alias.
pub fn claude_aliases(name: &str) -> &'static [&'static str] {
    if let Some(h) = ToolRegistry::builtins().get(name).map(|e| &e.handler) {
        return h.claude_names();
    }
    // Tools a client may register under the names Claude Code's own tools have.
    match name {
        "web_fetch" => &["WebFetch"],
        "web_search" => &["WebSearch"],
        _ => &[],
    }
}

/// The input field Claude Code names `file_path` (an absolute path) where Garuda's tool has a
/// root-relative `path`, for hooks written for Claude Code.
pub fn claude_file_path_field(name: &str) -> Option<&'static str> {
    let tools = ToolRegistry::builtins();
    let h = tools.get(name).map(|e| &e.handler)?;
    h.claude_file_path().then_some(h.path_arg()).flatten()
}

/// What a session with these tools, policy and command sandbox really has, for the prompt.
pub fn session_facts(
    policy: Policy,
    sandbox: &crate::sandbox::CommandSandbox,
    tools: &ToolRegistry,
) -> crate::prompt::SessionFacts {
    crate::prompt::SessionFacts {
        sandboxed: sandbox.confined(),
        network: sandbox.network,
        package_caches: sandbox.package_caches,
        commands_ask: approval_needed(policy, ToolClass::Exec, sandbox, EditRisk::Plain),
        offers: tools.offers(),
        hooks: false,
    }
}

/// One line describing a call of a built-in tool, for logs and notes (other tools show their
/// input); a front that holds the session's registry asks [`ToolRegistry::describe`].
pub fn describe_call(name: &str, input: &Value) -> String {
    ToolRegistry::builtins().describe(name, input)
}

/// Runs the built-in tool `name` with nothing lent by a client. Never panics; unknown tools
/// and bad input are error outputs.
pub async fn run(name: &str, input: Value, ctx: &ToolContext) -> ToolOutput {
    let tools = ToolRegistry::builtins();
    match tools.get(name).map(|e| &e.handler) {
        Some(h) => run_handler(h, input, ctx, &NoWorkbench).await,
        None => ToolOutput::error(format!(
            "unknown tool `{name}`; available tools: {}",
            builtin_specs()
                .into_iter()
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Keeps the head and tail of text longer than `max` characters, noting what was left out;
/// answers whether it was cut.
pub(crate) fn cap_text(s: &str, max: usize) -> (String, bool) {
    util::cap_middle(s, max)
}

/// Runs a built-in tool's handler, unless the turn was cancelled before it started.
pub async fn run_handler(
    h: &Handler,
    input: Value,
    ctx: &ToolContext,
    bench: &dyn Workbench,
) -> ToolOutput {
    if ctx.cancel.is_cancelled() {
        let mut out = ToolOutput::error("cancelled before it started");
        out.meta.cancelled = true;
        return out;
    }
    h.run(input, ctx, bench).await
}
