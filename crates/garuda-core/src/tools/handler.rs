//! What a tool is: one type per tool that declares everything the rest of Garuda asks about it
//! (name, spec, class, editor kind, the paths it touches, its risk) and runs it. Built-ins
//! live in `builtin/`; a client's and an MCP server's tools in `remote.rs` (they forward
//! through the [`Workbench`]). The registry holds these handlers and the turn calls
//! `run` for every tool; nothing outside `tools/` matches a tool by name.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::vocab::{
    AgentCall, ClientToolResult, CommandRun, EditPreview, PlannedWrite, Remote, Risk, SymbolAnswer,
    SymbolQuery, ToolClass, ToolContext, ToolKind, ToolOutput, Touch,
};
use crate::fsroot::Root;
use crate::message::ToolSpec;
use crate::prompt::Offer;

/// What the turn lends a running tool: the client's buffers, edits, terminals and tools, the
/// session's own operations (snip, leaving plan mode, agents) and its MCP servers. Each
/// answers `None` when nothing lends it (the tool then does the work itself, or refuses).
pub trait Workbench: Send + Sync {
    /// The text of `path` as the editor holds it, unsaved changes included.
    fn read_text(&self, _path: PathBuf) -> Option<BoxFuture<'static, Result<String, String>>> {
        None
    }
    /// Replaces the whole text of `path` in the editor; answers whether it was applied.
    fn apply_edit(
        &self,
        _path: PathBuf,
        _old_text: Option<String>,
        _new_text: String,
    ) -> Option<BoxFuture<'static, Result<(), String>>> {
        None
    }
    /// Runs a command in the client's terminal (offered only where that is no weaker than
    /// Garuda's own runner: a session without a sandbox).
    fn run_command(&self, _run: CommandRun) -> Option<BoxFuture<'static, ClientToolResult>> {
        None
    }
    /// Runs an agent's sub-session on `call` and answers its final message (the turn layer
    /// lends this; a bench without sessions answers `None` and the tool refuses).
    fn run_agent<'a>(
        &'a self,
        _call: AgentCall,
        _ctx: &'a ToolContext,
    ) -> Option<BoxFuture<'a, ToolOutput>> {
        None
    }
    /// Removes messages from the session's view (`snip`): what the model reads back, or why
    /// nothing was removed.
    fn snip(&self, _input: Value) -> Option<BoxFuture<'_, Result<String, String>>> {
        None
    }
    /// Asks the person to approve the plan in `input` and, approved, leaves plan mode
    /// (`exit_plan_mode`).
    fn leave_plan<'a>(
        &'a self,
        _input: Value,
        _ctx: &'a ToolContext,
    ) -> Option<BoxFuture<'a, ToolOutput>> {
        None
    }
    /// Calls the tool the session knows as `name` where it runs: in the client, or on the
    /// session's MCP server that has it.
    fn call_remote<'a>(
        &'a self,
        _remote: Remote,
        _name: &'a str,
        _input: Value,
        _ctx: &'a ToolContext,
    ) -> Option<BoxFuture<'a, ToolOutput>> {
        None
    }
    /// Asks the client's language servers about the code (`find_symbol`, `find_references`);
    /// `Err` says why they gave nothing (no server, an error, a timeout), and the tool then
    /// answers from Garuda's own index.
    fn client_symbols(
        &self,
        _query: SymbolQuery,
    ) -> Option<BoxFuture<'static, Result<SymbolAnswer, String>>> {
        None
    }
}

/// A workbench that lends nothing: every tool does its own work.
pub struct NoWorkbench;

impl Workbench for NoWorkbench {}

/// One built-in tool. Defaults describe a tool that reads nothing in particular and has no
/// editor-side form; each tool overrides what it has.
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// What the model sees (bytes fixed: they sit in the cached prompt prefix).
    fn spec(&self) -> ToolSpec;
    /// What it does, for the approval policy and compaction.
    fn class(&self) -> ToolClass;
    /// The editor's icon.
    fn kind(&self) -> ToolKind {
        ToolKind::of(self.class())
    }
    /// It changes nothing outside the session, so plan mode runs it (by default: what its
    /// class says, see [`ToolClass::read_only`]).
    fn read_only(&self) -> bool {
        self.class().read_only()
    }
    /// The input field naming the one workspace file it reads or writes.
    fn path_arg(&self) -> Option<&'static str> {
        None
    }
    /// It refuses to change a file the model has not read.
    fn needs_read(&self) -> bool {
        false
    }
    /// Which input names the place it works in (nested instructions, rules).
    fn touch(&self) -> Option<Touch> {
        None
    }
    /// The prompt line it makes true.
    fn offer(&self) -> Option<Offer> {
        None
    }
    /// A short account of a call's input, for titles and logs (`name: ` is added); by
    /// default the input itself.
    fn describe(&self, input: &Value) -> String {
        input.to_string()
    }
    /// The approval title, where it must differ from the cut description (a command is
    /// shown whole, so the dangerous part is never cut away).
    fn title(&self, _input: &Value) -> Option<String> {
        None
    }
    /// The call asks to run outside the sandbox (`bash`'s `outside_sandbox`): in a sandboxed
    /// session the user approves it whatever the policy, "allow always" or a hook says.
    fn leaves_sandbox(&self, _input: &Value) -> bool {
        false
    }
    /// A network call the user's config lets run without asking under `full-auto`
    /// (`[web] fetch_without_asking`).
    fn network_unasked(&self) -> bool {
        false
    }
    /// The path a call would change that needs a second look (links resolved).
    fn risk(&self, _input: &Value, _root: &Root) -> Option<Risk> {
        None
    }
    /// What the call would change, for an editor to draw before it runs.
    fn preview(&self, _input: &Value, _root: &Root) -> Option<EditPreview> {
        None
    }
    /// The 1-based line the call starts at, when its input names one.
    fn line(&self, _input: &Value) -> Option<u32> {
        None
    }
    /// Claude Code's names for this tool (hooks and settings written for Claude Code).
    fn claude_names(&self) -> &'static [&'static str] {
        &[]
    }
    /// Calls of it that follow one another in one message may run at the same time
    /// (`explore`: it reads only, in a sub-session of its own).
    fn concurrent(&self) -> bool {
        false
    }
    /// Claude Code's input names this tool's file `file_path`, an absolute path.
    fn claude_file_path(&self) -> bool {
        false
    }
    /// The write a call would make, planned without writing (tools that change one file).
    fn plan(&self, _input: &Value, _ctx: &ToolContext) -> Option<Result<PlannedWrite, ToolOutput>> {
        None
    }
    /// The call's work, when it is plain filesystem work that blocks: the default `run` does
    /// it off the async workers.
    fn blocking_work(&self) -> Option<BlockingWork> {
        None
    }
    /// Runs the call. Never panics: bad input and refusals are error outputs. By default the
    /// [`Tool::blocking_work`], off the async workers.
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            match self.blocking_work() {
                Some(work) => blocking(self.name(), input, ctx, work).await,
                None => ToolOutput::error(format!("{} cannot be run here", self.name())),
            }
        })
    }
}

/// A registered built-in tool: shared, compared and shown by name.
#[derive(Clone)]
pub struct Handler(Arc<dyn Tool>);

impl Handler {
    /// Wraps a tool.
    pub fn new(tool: impl Tool) -> Handler {
        Handler(Arc::new(tool))
    }
}

impl std::ops::Deref for Handler {
    type Target = dyn Tool;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl fmt::Debug for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Handler({})", self.0.name())
    }
}

impl PartialEq for Handler {
    fn eq(&self, other: &Handler) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for Handler {}

/// A tool's blocking work: its input and context in, its output out.
pub(crate) type BlockingWork = fn(Value, &ToolContext) -> ToolOutput;

/// Runs blocking filesystem work off the async workers.
pub(crate) async fn blocking(
    name: &str,
    input: Value,
    ctx: &ToolContext,
    work: BlockingWork,
) -> ToolOutput {
    let ctx = ctx.clone();
    match tokio::task::spawn_blocking(move || work(input, &ctx)).await {
        Ok(out) => out,
        Err(e) => ToolOutput::error(format!("{name} failed internally: {e}")),
    }
}

/// A spec from its parts.
pub(crate) fn spec(name: &str, description: &str, input_schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        input_schema,
    }
}

/// The string field `k` of a call's input (empty when absent).
pub(crate) fn field<'a>(input: &'a Value, k: &str) -> &'a str {
    input.get(k).and_then(Value::as_str).unwrap_or("")
}

/// The `path` of a call, or `.` for the root.
pub(crate) fn path_or_root(input: &Value) -> String {
    match field(input, "path") {
        "" => ".".to_string(),
        p => p.to_string(),
    }
}

/// A search pattern and where it looks.
pub(crate) fn with_path(pattern: &str, path: &str) -> String {
    if path.is_empty() {
        pattern.to_string()
    } else {
        format!("{pattern} in {path}")
    }
}

/// `s` on one line with every character visible: line breaks show as ` ⏎ `, tabs as spaces,
/// other control characters (escape sequences that could erase what precedes them) as
/// `\u{..}`, so a terminal cannot be tricked by it.
pub(crate) fn visible_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str(" ⏎ "),
            '\r' => {}
            '\t' => out.push(' '),
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    out
}
