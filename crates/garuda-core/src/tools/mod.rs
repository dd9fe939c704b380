//! Built-in agent tools: file reading, listing, searching, editing, shell, memory and todos.
//!
//! Every workspace file access goes through [`crate::fsroot::Root`]; directory walks use the
//! `ignore` crate beneath the canonical root and never follow links. Tools never panic: bad
//! input or a refusal becomes a [`ToolOutput`] with `is_error` set and a message the model can
//! act on.

#![warn(missing_docs)]

mod bash;
mod edit;
mod grep;
mod list;
mod memory;
mod policy;
mod read;
mod registry;
mod schema;
mod todo;
mod util;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::fsroot::{FileStamp, Root};

pub use edit::{
    EditPreview, PlannedWrite, call_line, commit_write, finish_write, plan_edit, preview_edit,
};
pub use policy::{
    Policy, RISKY_DIRS, RISKY_FILES, UnknownPolicy, approval_needed, needs_approval, risky_path,
    risky_target,
};
pub use registry::{ToolClash, ToolEntry, ToolRegistry, ToolSource, Touch, Touched};
pub use schema::builtin_specs;
pub use todo::{TodoItem, TodoStatus, todos_in};

/// The built-in tool that reads one file (its result may carry an editor's unsaved text).
pub const READ_TOOL: &str = "read_file";

/// Name of the file `remember` appends to, relative to the workspace root.
pub const MEMORY_FILE: &str = ".garuda/memory.md";

/// Size limits applied by the tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolLimits {
    /// Most lines `read_file` returns in one call.
    pub read_max_lines: usize,
    /// Most bytes of text `read_file` returns in one call.
    pub read_max_bytes: usize,
    /// Most characters of output any other tool returns.
    pub output_max_chars: usize,
    /// Most entries `list_files`, `glob` and `grep` report.
    pub max_results: usize,
    /// Default `bash` timeout in milliseconds.
    pub bash_timeout_ms: u64,
    /// Largest `bash` timeout the model may ask for, in milliseconds.
    pub bash_max_timeout_ms: u64,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits {
            read_max_lines: 2000,
            read_max_bytes: 256 * 1024,
            output_max_chars: 30_000,
            max_results: 1000,
            bash_timeout_ms: 120_000,
            bash_max_timeout_ms: 600_000,
        }
    }
}

/// Where a file's content is in the model's view: it stays "read" while that is there.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Anchor {
    /// The result of this tool call (a read), while it is in the view whole.
    Result(String),
    /// This tool call (an edit or write), while it is in the view.
    Call(String),
    /// This message (a file restored after compaction), while it is in the view.
    Message(String),
}

/// The anchors present in a view (the turn layer computes them from the view).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewAnchors {
    /// Tool results in the view exactly as the transcript holds them.
    pub results: HashSet<String>,
    /// Tool calls in the view.
    pub calls: HashSet<String>,
    /// Message ids in the view.
    pub messages: HashSet<String>,
}

impl ViewAnchors {
    /// True when `a` is in the view.
    pub fn contains(&self, a: &Anchor) -> bool {
        match a {
            Anchor::Result(id) => self.results.contains(id),
            Anchor::Call(id) => self.calls.contains(id),
            Anchor::Message(id) => self.messages.contains(id),
        }
    }
}

/// One read whose content the model has seen: what was asked and where the answer is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadMark {
    /// The `offset` asked for.
    pub offset: Option<u64>,
    /// The `limit` asked for.
    pub limit: Option<u64>,
    /// True when the answer held the whole file (any range of it is covered).
    pub whole: bool,
    /// The file's stamp when read.
    pub stamp: FileStamp,
    /// Where the content is.
    pub anchor: Anchor,
}

#[derive(Debug, Clone)]
struct Seen {
    stamp: FileStamp,
    anchor: Option<Anchor>,
}

impl ToolLimits {
    /// These limits with one result held to `chars` characters (a share of the window).
    pub fn within(self, chars: usize) -> Self {
        let chars = chars.max(4_096);
        ToolLimits {
            read_max_bytes: self.read_max_bytes.min(chars),
            output_max_chars: self.output_max_chars.min(chars),
            ..self
        }
    }
}

/// Which files the model read in this session, with their stamp at read time, and where
/// their content sits in the view (for edits after compaction and for read deduplication).
#[derive(Debug, Default, Clone)]
pub struct FileTracker {
    seen: HashMap<PathBuf, Seen>,
    reads: HashMap<PathBuf, Vec<ReadMark>>,
}

/// Whether a file may be edited given what the model has read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadState {
    /// Never read in this session.
    NotRead,
    /// Read, and unchanged on disk since.
    Fresh,
    /// Read, but its stamp changed since.
    Stale,
}

impl FileTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        FileTracker::default()
    }

    /// Records that `rel` was read (or written by a tool) when it had stamp `stamp`.
    pub fn record(&mut self, rel: &Path, stamp: FileStamp) {
        self.record_at(rel, stamp, None);
    }

    /// Records that `rel` had stamp `stamp` when the model saw it at `anchor`.
    pub fn record_at(&mut self, rel: &Path, stamp: FileStamp, anchor: Option<Anchor>) {
        self.seen.insert(rel.to_path_buf(), Seen { stamp, anchor });
    }

    /// Records a read whose content is now in the view.
    pub fn record_read(&mut self, rel: &Path, mark: ReadMark) {
        self.record_at(rel, mark.stamp, Some(mark.anchor.clone()));
        let marks = self.reads.entry(rel.to_path_buf()).or_default();
        marks.retain(|m| !(m.offset == mark.offset && m.limit == mark.limit));
        marks.push(mark);
    }

    /// An earlier read still in the view that answers this one: same range (or the whole
    /// file), and the file unchanged since.
    pub fn unchanged_read(
        &self,
        rel: &Path,
        offset: Option<u64>,
        limit: Option<u64>,
        current: FileStamp,
    ) -> Option<&ReadMark> {
        self.reads
            .get(rel)?
            .iter()
            .find(|m| m.stamp == current && (m.whole || (m.offset == offset && m.limit == limit)))
    }

    /// Anchors of the reads deduplication may point to.
    pub fn read_anchors(&self) -> Vec<Anchor> {
        self.reads
            .values()
            .flatten()
            .map(|m| m.anchor.clone())
            .collect()
    }

    /// Forgets reads whose content left the view (trimmed, cleared, snipped, collapsed,
    /// compacted): the next read of such a file returns its content again.
    pub fn keep_reads_in(&mut self, view: &ViewAnchors) {
        self.reads.retain(|_, marks| {
            marks.retain(|m| view.contains(&m.anchor));
            !marks.is_empty()
        });
    }

    /// After a compaction: files whose content is still in the view (kept steps, restored
    /// files) stay read; the others must be read again before an edit.
    pub fn keep_in(&mut self, view: &ViewAnchors) {
        self.seen
            .retain(|_, s| s.anchor.as_ref().is_some_and(|a| view.contains(a)));
        self.keep_reads_in(view);
    }

    /// Forgets a file (e.g. after compaction dropped the read from the model's view).
    pub fn forget(&mut self, rel: &Path) {
        self.seen.remove(rel);
        self.reads.remove(rel);
    }

    /// The stamp recorded for `rel`, if it was read.
    pub fn stamp(&self, rel: &Path) -> Option<FileStamp> {
        self.seen.get(rel).map(|s| s.stamp)
    }

    /// Compares the recorded stamp with the file's current one.
    pub fn state(&self, rel: &Path, current: FileStamp) -> ReadState {
        match self.seen.get(rel) {
            None => ReadState::NotRead,
            Some(s) if s.stamp == current => ReadState::Fresh,
            Some(_) => ReadState::Stale,
        }
    }

    /// Every file read so far, sorted, for post-compaction restoration.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.seen.keys().cloned().collect();
        v.sort();
        v
    }
}

/// Everything a tool call may touch.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The workspace root; all file access goes through it.
    pub root: Arc<Root>,
    /// Files read in this session and their stamps at read time.
    pub files: Arc<Mutex<FileTracker>>,
    /// The session's task list.
    pub todos: Arc<Mutex<Vec<TodoItem>>>,
    /// Size and time limits.
    pub limits: ToolLimits,
    /// Cancelled when the turn is cancelled; running tools stop promptly.
    pub cancel: CancellationToken,
    /// Folder of tool-result side files; `read_file` may read absolute paths inside it.
    pub state_dir: Option<PathBuf>,
    /// The id of the call being run (where its result will sit in the view).
    pub call_id: Option<String>,
    /// How `bash` runs commands (`None`: this root cannot run commands, e.g. `/`).
    pub commands: Option<Arc<crate::sandbox::CommandRunner>>,
}

impl ToolContext {
    /// A context with default limits, a fresh tracker and todo list, no state folder, and
    /// unconfined commands with the environment allow-list.
    pub fn new(root: Arc<Root>) -> Self {
        let commands = crate::sandbox::CommandRunner::unconfined(root.path())
            .ok()
            .map(Arc::new);
        ToolContext {
            commands,
            root,
            files: Arc::new(Mutex::new(FileTracker::new())),
            todos: Arc::new(Mutex::new(Vec::new())),
            limits: ToolLimits::default(),
            cancel: CancellationToken::new(),
            state_dir: None,
            call_id: None,
        }
    }

    /// The same context for the call `id`.
    pub fn for_call(&self, id: &str) -> Self {
        ToolContext {
            call_id: Some(id.to_string()),
            ..self.clone()
        }
    }

    /// Locks the file tracker, recovering from a poisoned lock (the data stays consistent:
    /// every update is a single map insert).
    pub(crate) fn tracker(&self) -> std::sync::MutexGuard<'_, FileTracker> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Facts about a tool call beyond its text, for the client and the turn loop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolMeta {
    /// Exit code of a `bash` command (None when killed or not started).
    pub exit_code: Option<i32>,
    /// Root-relative path the tool read or wrote.
    pub path: Option<String>,
    /// True when the tool changed a workspace file.
    pub wrote: bool,
    /// True when the session's todo list was replaced.
    pub todos_changed: bool,
    /// True when output was cut to fit a cap.
    pub truncated: bool,
    /// True when a `bash` command hit its timeout.
    pub timed_out: bool,
    /// True when the call was cancelled.
    pub cancelled: bool,
    /// How the call's approval went, when the policy asked for one.
    pub approval: Option<Approval>,
}

/// The outcome of a tool call's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// The person allowed this call.
    Allowed,
    /// Allowed by "allow always", given now or earlier in the session.
    AllowedAlways,
    /// The person rejected it.
    Rejected,
    /// Nobody answered within the approval timeout; the call did not run.
    TimedOut,
    /// The question could not be asked or answered (the client failed or went away).
    Failed,
    /// Nobody could be asked (a headless run without a terminal); the call did not run.
    Unavailable,
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text for the model.
    pub content: String,
    /// True when the call failed or was refused.
    pub is_error: bool,
    /// Side facts.
    pub meta: ToolMeta,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: false,
            meta: ToolMeta::default(),
        }
    }

    /// A failed or refused call.
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: true,
            meta: ToolMeta::default(),
        }
    }

    /// The `tool_result` block answering the call `tool_use_id`.
    pub fn into_block(self, tool_use_id: impl Into<String>) -> crate::message::Block {
        crate::message::Block::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: vec![crate::message::Block::text(self.content)],
            is_error: self.is_error,
        }
    }

    /// The same output with `meta` replaced.
    pub fn with_meta(mut self, meta: ToolMeta) -> Self {
        self.meta = meta;
        self
    }
}

/// What a tool does, for the approval policy, compaction and the fronts' display.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolClass {
    /// Reads the workspace only.
    Read,
    /// Searches the workspace (reads only).
    Search,
    /// Changes workspace files.
    Edit,
    /// Runs commands.
    Exec,
    /// Writes the workspace memory file.
    Memory,
    /// Changes the session's todo list.
    Todo,
    /// Works on the session's own context (`snip`).
    Session,
    /// Anything else (client-registered tools).
    Other,
}

/// The built-in tools, in the order the model sees them: name, class, the input field
/// naming a workspace file, and whether it needs a prior read of that file.
const BUILTINS: &[(&str, ToolClass, Option<&str>, bool)] = &[
    ("read_file", ToolClass::Read, Some("path"), false),
    ("list_files", ToolClass::Read, None, false),
    ("glob", ToolClass::Search, None, false),
    ("grep", ToolClass::Search, None, false),
    ("edit_file", ToolClass::Edit, Some("path"), true),
    ("write_file", ToolClass::Edit, Some("path"), true),
    ("bash", ToolClass::Exec, None, false),
    ("remember", ToolClass::Memory, None, false),
    ("todo_write", ToolClass::Todo, None, false),
];

/// Names of the built-in tools, in the order the model sees them.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|b| b.0)
}

/// Class, file input and read requirement of a built-in tool (`Other` for other names).
pub(crate) fn builtin_traits(name: &str) -> (ToolClass, Option<&'static str>, bool) {
    BUILTINS
        .iter()
        .find(|b| b.0 == name)
        .map_or((ToolClass::Other, None, false), |b| (b.1, b.2, b.3))
}

/// Claude Code's names for a built-in tool, so hooks and settings written for Claude Code
/// match Garuda's tools (`MultiEdit` edits like `edit_file`); empty for tools Claude Code has
/// no equivalent of. MCP tools are `mcp__SERVER__TOOL` in both and need no alias.
pub fn claude_aliases(name: &str) -> &'static [&'static str] {
    match name {
        "bash" => &["Bash"],
        "read_file" => &["Read"],
        "edit_file" => &["Edit", "MultiEdit"],
        "write_file" => &["Write"],
        "grep" => &["Grep"],
        "glob" => &["Glob"],
        "list_files" => &["LS"],
        "todo_write" => &["TodoWrite"],
        "web_fetch" => &["WebFetch"],
        "web_search" => &["WebSearch"],
        _ => &[],
    }
}

/// The input field Claude Code names `file_path` (an absolute path) where Garuda's tool has a
/// root-relative `path`, for hooks written for Claude Code.
pub fn claude_file_path_field(name: &str) -> Option<&'static str> {
    matches!(name, "read_file" | "edit_file" | "write_file").then_some("path")
}

/// Where a built-in tool works, from its input: the file read or edited, the folder listed,
/// the file or folder searched.
pub(crate) fn builtin_touch(name: &str) -> Option<Touch> {
    match name {
        "read_file" | "edit_file" | "write_file" => Some(Touch::File("path")),
        "list_files" => Some(Touch::Folder("path")),
        "glob" | "grep" => Some(Touch::Either("path")),
        _ => None,
    }
}

/// One line describing a call, for approval prompts: e.g. `bash: cargo test`.
pub fn describe_call(name: &str, input: &Value) -> String {
    let s = |k: &str| input.get(k).and_then(Value::as_str).unwrap_or("");
    let detail = match name {
        "read_file" | "list_files" | "edit_file" => {
            let p = s("path");
            if p.is_empty() {
                ".".to_string()
            } else {
                p.to_string()
            }
        }
        "write_file" => {
            format!("{} ({} bytes)", s("path"), s("content").len())
        }
        "glob" => with_path(s("pattern"), s("path")),
        "grep" => with_path(s("pattern"), s("path")),
        "bash" => s("command").to_string(),
        "remember" => s("fact").to_string(),
        "todo_write" => {
            let n = input
                .get("todos")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            format!("{n} items")
        }
        _ => input.to_string(),
    };
    let line = format!("{name}: {}", one_line(&detail));
    util::cut_chars(&line, 200)
}

/// The title of an approval request: like [`describe_call`], but a command is given whole, so
/// the dangerous part is never cut away. It stays one line a terminal cannot be tricked by:
/// line breaks show as ` ⏎ `, tabs as spaces, other control characters (escape sequences that
/// could erase what precedes them) as `\u{..}`. `risk` (why the path matters, see
/// [`risky_target`]) follows an edit's path.
pub fn approval_title(name: &str, input: &Value, risk: Option<&str>) -> String {
    let base = match (name, input.get("command").and_then(Value::as_str)) {
        ("bash", Some(command)) => format!("bash: {}", visible_line(command)),
        _ => describe_call(name, input),
    };
    match risk {
        Some(why) => format!("{base} ({why})"),
        None => base,
    }
}

/// `s` on one line with every character visible.
fn visible_line(s: &str) -> String {
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

fn with_path(pattern: &str, path: &str) -> String {
    if path.is_empty() {
        pattern.to_string()
    } else {
        format!("{pattern} in {path}")
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
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
        commands_ask: approval_needed(policy, ToolClass::Exec, sandbox, false),
        tools: tools
            .entries()
            .iter()
            .map(|e| e.spec.name.clone())
            .collect(),
    }
}

/// Runs a built-in tool. Never panics; unknown tools and bad input are error outputs.
pub async fn run(name: &str, input: Value, ctx: &ToolContext) -> ToolOutput {
    if ctx.cancel.is_cancelled() {
        let mut out = ToolOutput::error("cancelled before it started");
        out.meta.cancelled = true;
        return out;
    }
    match name {
        "bash" => bash::run(input, ctx).await,
        "todo_write" => todo::run(input, ctx),
        "read_file" | "list_files" | "glob" | "grep" | "edit_file" | "write_file" | "remember" => {
            // Filesystem work blocks; keep it off the async workers.
            let ctx2 = ctx.clone();
            let name2 = name.to_string();
            let job = tokio::task::spawn_blocking(move || run_blocking(&name2, input, &ctx2));
            match job.await {
                Ok(out) => out,
                Err(e) => ToolOutput::error(format!("{name} failed internally: {e}")),
            }
        }
        _ => ToolOutput::error(format!(
            "unknown tool `{name}`; available tools: {}",
            builtin_names().collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The synchronous tools, run on a blocking thread.
fn run_blocking(name: &str, input: Value, ctx: &ToolContext) -> ToolOutput {
    match name {
        "read_file" => read::run(input, ctx),
        "list_files" => list::run_list(input, ctx),
        "glob" => list::run_glob(input, ctx),
        "grep" => grep::run(input, ctx),
        "edit_file" | "write_file" => match plan_edit(name, &input, ctx) {
            Ok(plan) => commit_write(&plan, ctx),
            Err(out) => out,
        },
        "remember" => memory::run(input, ctx),
        _ => ToolOutput::error(format!("unknown tool `{name}`")),
    }
}
