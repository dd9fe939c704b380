//! The words every tool speaks: what a call is given ([`ToolContext`], its limits and the
//! file tracker), what it gives back ([`ToolOutput`], [`ToolMeta`]), what kind of call it is
//! ([`ToolClass`], [`ToolKind`], [`Touch`]), what an edit would change ([`PlannedWrite`],
//! [`EditPreview`]) and what a client lends it ([`CommandRun`], [`AgentCall`]). It imports
//! nothing else of `tools/`, so the built-ins, the trait and the registry can all use it
//! without importing one another.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::fsroot::{FileStamp, Root};

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
    /// Folders outside the root that `read_file` may read by absolute path: those of the
    /// user's skills the model loaded.
    pub readable: Arc<Mutex<Vec<PathBuf>>>,
    /// The user approved this call's request to run outside the sandbox (`bash`'s
    /// `outside_sandbox`); only the turn sets it, for one call.
    pub outside_sandbox: bool,
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
            readable: Arc::new(Mutex::new(Vec::new())),
            outside_sandbox: false,
        }
    }

    /// The same context for the call `id`.
    pub fn for_call(&self, id: &str) -> Self {
        ToolContext {
            call_id: Some(id.to_string()),
            ..self.clone()
        }
    }

    /// Lets `read_file` read files beneath `folder` (a loaded skill of the user's).
    pub fn allow_reads_in(&self, folder: &Path) {
        let mut r = self.readable.lock().unwrap_or_else(|e| e.into_inner());
        if !r.iter().any(|f| f == folder) {
            r.push(folder.to_path_buf());
        }
    }

    /// Locks the file tracker, recovering from a poisoned lock (the data stays consistent:
    /// every update is a single map insert).
    pub(crate) fn tracker(&self) -> std::sync::MutexGuard<'_, FileTracker> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Facts about a tool call beyond its text, for the client and the turn loop.
#[derive(Debug, Clone, Default, PartialEq)]
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
    /// A PreToolUse hook of the user's blocked the call; it did not run.
    pub blocked_by_hook: bool,
    /// Plan mode refused the call without asking (it is not read-only); it did not run.
    pub blocked_by_plan_mode: bool,
    /// The sub-session an `agent` or `explore` call ran (boxed: most calls have none).
    pub agent: Option<Box<AgentRan>>,
    /// The provider ran the call itself (a server tool): Garuda neither asked nor ran it.
    pub server_side: bool,
}

/// The sub-session an `agent` or `explore` call ran.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRan {
    /// Its id (its transcript).
    pub session_id: String,
    /// What its requests used, summed (added to the calling session's).
    pub usage: crate::message::Usage,
    /// What they cost at its own model's prices, when that is not the caller's model and
    /// the config names its prices.
    pub cost_usd: Option<f64>,
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

/// How long a client's language servers may take over a [`SymbolQuery`] before the index
/// answers instead (the request is then cancelled).
pub const CLIENT_SYMBOLS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// A question about the code that a client may answer from its language servers before
/// Garuda's own index does (native `code/findSymbol`, `code/findReferences`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SymbolQuery {
    /// Definitions by name.
    Definitions {
        /// The name asked for.
        name: String,
        /// The kind asked for (LSP SymbolKind's name in lower case).
        kind: Option<String>,
        /// The most items wanted.
        limit: usize,
    },
    /// The uses of a symbol named, or at a place.
    References {
        /// The name asked for.
        name: Option<String>,
        /// Root-relative file.
        path: Option<String>,
        /// 1-based line in `path`.
        line: Option<u32>,
        /// The most items wanted.
        limit: usize,
    },
}

/// One place a client's language server gave.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SymbolSite {
    /// The symbol's name (definitions).
    pub name: Option<String>,
    /// Its kind (definitions).
    pub kind: Option<String>,
    /// What it sits in (definitions).
    pub container: Option<String>,
    /// Absolute or root-relative, as the client gave it.
    pub path: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based last line (definitions).
    pub end_line: Option<u32>,
    /// The signature (definitions) or the line's text (references).
    pub text: Option<String>,
}

/// A client's answer to a [`SymbolQuery`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolAnswer {
    /// The language server that answered (`ts_ls`, `rust-analyzer`, …).
    pub source: String,
    /// What it found.
    pub items: Vec<SymbolSite>,
}

/// Where a tool Garuda does not run itself runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remote {
    /// In the client that registered it (`tool/call`).
    Client,
    /// On the session's MCP server that offers it.
    Mcp,
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// Text for the model.
    pub content: String,
    /// True when the call failed or was refused.
    pub is_error: bool,
    /// Side facts.
    pub meta: ToolMeta,
    /// Blocks after the text (an MCP tool's images and resources).
    pub blocks: Vec<crate::message::Block>,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: false,
            meta: ToolMeta::default(),
            blocks: Vec::new(),
        }
    }

    /// A failed or refused call.
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: true,
            meta: ToolMeta::default(),
            blocks: Vec::new(),
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
    /// Ends plan mode (`exit_plan_mode`): asks the user to approve a plan, in its own way.
    Plan,
    /// Reaches the network (`web_fetch`, `web_search`): what it sends may carry what the
    /// session read, so it asks under every policy but a `full-auto` the user's config lets
    /// through.
    Network,
    /// Anything else (client-registered tools).
    Other,
}

impl ToolClass {
    /// True for what changes nothing outside the session: reads, searches, the todo list,
    /// the session's own context and `exit_plan_mode`. Plan mode runs these alone.
    pub fn read_only(self) -> bool {
        matches!(
            self,
            ToolClass::Read
                | ToolClass::Search
                | ToolClass::Todo
                | ToolClass::Session
                | ToolClass::Plan
        )
    }
}

/// What a client-side tool (or a command in the client's terminal) returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientToolResult {
    /// Text for the model.
    pub content: String,
    /// True on failure.
    pub is_error: bool,
}

/// A `bash` call the client runs in a terminal of its own (ACP `terminal/*`).
#[derive(Debug, Clone)]
pub struct CommandRun {
    /// The tool call.
    pub tool_call_id: String,
    /// The command line, run by `bash -c`.
    pub command: String,
    /// The workspace root, where it runs.
    pub cwd: PathBuf,
    /// Milliseconds before it is killed.
    pub timeout_ms: u64,
    /// Largest output kept, in bytes.
    pub output_limit: u64,
    /// Cancelled with the turn: the host kills the command.
    pub cancel: tokio_util::sync::CancellationToken,
}

/// One call of an agent: which agent, and the task handed to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCall {
    /// `explore` or a custom agent's name.
    pub agent: String,
    /// The task, as the agent reads it (its first user message).
    pub task: String,
}

/// The editor's icon for a call (the ACP tool kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolKind {
    /// Reads files or data.
    Read,
    /// Changes files.
    Edit,
    /// Searches.
    Search,
    /// Runs commands.
    Execute,
    /// Thinks or plans.
    Think,
    /// Switches the session's mode (`exit_plan_mode`).
    SwitchMode,
    /// Fetches from the network.
    Fetch,
    /// Anything else.
    Other,
}

impl ToolKind {
    /// The kind a tool of `class` shows when it declares none (client and MCP tools).
    pub fn of(class: ToolClass) -> ToolKind {
        match class {
            ToolClass::Read => ToolKind::Read,
            ToolClass::Search => ToolKind::Search,
            ToolClass::Edit => ToolKind::Edit,
            ToolClass::Exec => ToolKind::Execute,
            ToolClass::Todo => ToolKind::Think,
            ToolClass::Plan => ToolKind::SwitchMode,
            ToolClass::Network => ToolKind::Fetch,
            ToolClass::Memory | ToolClass::Session | ToolClass::Other => ToolKind::Other,
        }
    }
}

/// How much the path an edit changes matters to the approval policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EditRisk {
    /// An ordinary file.
    #[default]
    Plain,
    /// Runs code or steers the agent later (`tools::target_risk`): asks under `auto-edit`.
    Risky,
    /// Changes what runs outside the sandbox (`tools::protected_path`): asks under every policy,
    /// as a command that leaves the sandbox does.
    Protected,
}

/// A path an edit would change that deserves a second look: the path, how much it matters,
/// and why.
pub type Risk = (PathBuf, EditRisk, String);

/// How a tool's input names the place it works in (for nested instructions and rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touch {
    /// A file, in this input field: its folder is worked in.
    File(&'static str),
    /// A folder (the root when the field is absent).
    Folder(&'static str),
    /// A file or a folder (a search's `path`).
    Either(&'static str),
}

/// A computed write: the whole new text of one file, not yet written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedWrite {
    /// Root-relative path of the file.
    pub rel_path: PathBuf,
    /// The file's text before the write; `None` when the file is new.
    pub old_text: Option<String>,
    /// The file's text after the write.
    pub new_text: String,
    /// The file's stamp when the plan was made; the write is refused if it changed since.
    pub base: Option<FileStamp>,
    /// One line for the model describing what the write does.
    pub summary: String,
}

/// What an `edit_file` or `write_file` call would change, for an editor to draw before it
/// runs (ACP diff content and locations). Best effort: no freshness check, and `None` when
/// the call would fail or the tool is not an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditPreview {
    /// Root-relative path of the file.
    pub rel_path: PathBuf,
    /// The whole text before; `None` for a new file.
    pub old_text: Option<String>,
    /// The whole text after.
    pub new_text: String,
    /// 1-based line where the change starts.
    pub line: u32,
}

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    /// What to do.
    pub content: String,
    /// Its state.
    pub status: TodoStatus,
}
