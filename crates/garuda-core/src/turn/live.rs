//! A session loaded in memory: its transcript, system prompt, provider and tool state.

use std::collections::HashSet;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::message::{ToolSpec, Usage};
use crate::prompt::Assembled;
use crate::provider::{ModelInfo, Provider, ProviderError};
use crate::session::compact::{CompactPolicy, FailureTracker};
use crate::session::tokens::ContextTracker;
use crate::session::view::{View, ViewCache, ViewPolicy};
use crate::session::{Record, SessionFile, SessionHeader, StoreError};
use crate::tools::{FileTracker, Policy, TodoItem, ToolRegistry};
use crate::workspace::Workspace;

/// Why a turn or session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The model provider failed (after retries).
    #[error("{0}")]
    Provider(#[from] ProviderError),
    /// The transcript could not be written or read.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// Another turn of this session is running.
    #[error("session {0} is busy with another turn")]
    Busy(String),
    /// The session is an agent's sub-session whose call is still running: it can be read,
    /// and takes turns once the call ends.
    #[error(
        "session {session_id} is the sub-session of the agent {agent}, whose call {tool_call_id} \
         in session {parent_session_id} is still running: read it (session/messages) now, \
         and continue it once that call has ended"
    )]
    AgentRunning {
        /// The sub-session.
        session_id: String,
        /// The agent.
        agent: String,
        /// The session whose call runs it.
        parent_session_id: String,
        /// That call.
        tool_call_id: String,
    },
    /// Bad input from the client.
    #[error("{0}")]
    Invalid(String),
    /// The model answered a summary request without a summary (a tool call, no text) on
    /// every path; the session is unchanged. The model's failure, not the client's.
    #[error("{0}")]
    NoSummary(String),
    /// The operation was cancelled; the session is as it was.
    #[error("cancelled")]
    Cancelled,
    /// A hook of the user's refused it (a prompt, a manual compaction), with its reason.
    #[error("blocked by a hook: {0}")]
    Blocked(String),
    /// A user message that cannot fit the model's window whatever is compacted.
    #[error(
        "the message is about {message_tokens} tokens; with Garuda's fixed part (system prompt \
         and tool definitions, {fixed_tokens} tokens) it exceeds the model's \
         {window_tokens}-token window. Send a shorter message, put the content in a file the \
         agent can read in parts, or raise the server's context size (llama.cpp: --ctx-size; \
         Ollama: num_ctx)"
    )]
    TooLarge {
        /// Estimated tokens of the message.
        message_tokens: u64,
        /// System prompt and tool definitions.
        fixed_tokens: u64,
        /// The window the session plans with.
        window_tokens: u64,
    },
    /// Auto-compaction is off and the next request would not fit the window: refused before
    /// it is sent (the blocking limit).
    #[error(
        "the next request would carry about {context_tokens} tokens, over the {limit_tokens} \
         that fit the model's {window_tokens}-token window with room for an answer, and \
         auto-compaction is off ([context] auto_compact = false). Compact the session \
         (session/compact or /compact), snip messages, or turn auto-compaction on"
    )]
    OverLimit {
        /// Estimated tokens of the request.
        context_tokens: u64,
        /// The most a request may carry.
        limit_tokens: u64,
        /// The window the session plans with.
        window_tokens: u64,
    },
    /// Even with every relief taken, the next request would not fit the window with room
    /// for an answer: refused before it is sent.
    #[error(
        "the request does not fit the model's {window_tokens}-token window: Garuda's fixed \
         part (system prompt and tool definitions) is about {fixed_tokens} tokens, the \
         conversation {history_tokens}, this message {message_tokens}, and the answer needs at \
         least {output_tokens}. Raise the server's context size (llama.cpp: --ctx-size; \
         Ollama: num_ctx; or contextWindow in [models] when the server allows more), snip \
         messages or send a shorter one, or start a new session"
    )]
    DoesNotFit {
        /// System prompt and tool definitions.
        fixed_tokens: u64,
        /// The conversation before this message, as the view carries it.
        history_tokens: u64,
        /// This turn's message (and what the turn added since).
        message_tokens: u64,
        /// The least output room a request asks for at this window.
        output_tokens: u64,
        /// The window the session plans with.
        window_tokens: u64,
    },
}

impl TurnError {
    /// True when the turn failed because its request did not fit the window (the provider
    /// said so, or Garuda refused it before sending).
    pub fn is_context_full(&self) -> bool {
        match self {
            TurnError::Provider(p) => p.is_prompt_too_long(),
            TurnError::TooLarge { .. }
            | TurnError::OverLimit { .. }
            | TurnError::DoesNotFit { .. } => true,
            _ => false,
        }
    }

    /// A stable name for the failure: the provider error's kind, or `store`, `busy`,
    /// `invalid`, `noSummary`, `cancelled`, `messageTooLarge`, `blockingLimit`, `doesNotFit`.
    pub fn kind(&self) -> &'static str {
        match self {
            TurnError::Provider(p) => p.kind(),
            TurnError::Store(_) => "store",
            TurnError::Busy(_) => "busy",
            TurnError::AgentRunning { .. } => "agentRunning",
            TurnError::Invalid(_) => "invalid",
            TurnError::NoSummary(_) => "noSummary",
            TurnError::Cancelled => "cancelled",
            TurnError::Blocked(_) => "hook",
            TurnError::TooLarge { .. } => "messageTooLarge",
            TurnError::OverLimit { .. } => "blockingLimit",
            TurnError::DoesNotFit { .. } => "doesNotFit",
        }
    }
}

/// Everything needed to bring a session to life.
pub struct SessionSetup {
    /// The workspace it belongs to.
    pub workspace: Arc<Workspace>,
    /// The model spec, fixed at creation.
    pub model_spec: String,
    /// The provider-side model id (the spec without its provider prefix).
    pub model_id: String,
    /// The provider for that spec.
    pub provider: Arc<dyn Provider>,
    /// Window and output limits of the model.
    pub model_info: ModelInfo,
    /// The approval policy the system prompt describes: the one the session started with.
    /// Kept only for the prompt's bytes (a client's switch is told in a note, so the cached
    /// prefix holds); the policy in force is [`LiveSession::policy`].
    pub prompt_policy: Policy,
    /// Seconds to wait for an approval.
    pub approval_timeout_secs: u64,
    /// The view pipeline's settings (side-file directory included).
    pub view_policy: ViewPolicy,
    /// Compaction settings.
    pub compact: CompactPolicy,
    /// How its commands run (`None`: the root cannot hold commands).
    pub commands: Option<Arc<crate::sandbox::CommandRunner>>,
    /// What its commands run in, measured at its start.
    pub sandbox: crate::sandbox::CommandSandbox,
    /// The session's MCP servers, started before its tools were fixed (None: no servers).
    pub mcp: Option<crate::mcp::McpHub>,
    /// Where skills are looked for (None: skills are off).
    pub skill_dirs: Option<crate::skills::SkillDirs>,
    /// The hooks in force for the session (and the ones skipped), fixed at its start.
    pub hooks: Arc<crate::hooks::HookSet>,
    /// The custom agents found at its start (listed in the `agent` tool).
    pub agents: Arc<crate::agents::AgentSet>,
    /// The `[agents]` settings at its start.
    pub agent_settings: crate::agents::AgentSettings,
    /// The agent this session runs as (None: a main session).
    pub role: Option<crate::agents::AgentRole>,
    /// Binds the model an agent names (None: agents run on the caller's model).
    pub bind_model: Option<ModelBinder>,
    /// Old tool results the provider clears itself (`[context] provider_clearing` on a
    /// provider and model that can); None: Garuda's own microcompact does the work.
    pub tool_clearing: Option<crate::provider::ToolClearing>,
}

/// What a session starts with that changes later: its tools (a compaction may install a
/// changed MCP list) and skills (a compaction installs the list on disk). The live session
/// keeps the one current copy ([`LiveSession::tools`], [`LiveSession::skills`]).
pub struct SessionStart {
    /// The session's tools at its start.
    pub tools: crate::tools::ToolRegistry,
    /// The skills found at its start (listed in the `skill` tool).
    pub skills: Arc<crate::skills::SkillSet>,
}

/// Binds a model spec to its provider and limits (an agent that names its model).
pub type ModelBinder = Arc<dyn Fn(&str) -> Result<ModelBinding, String> + Send + Sync>;

impl SessionSetup {
    /// The prompt options of this session: the workspace's, with the session's own facts
    /// (its policy, sandbox and `tools`, which include its MCP tools or their search tool)
    /// and the MCP servers' instructions its prompt holds.
    pub fn prompt_options(
        &self,
        model: &str,
        tools: &crate::tools::ToolRegistry,
    ) -> crate::prompt::PromptOptions {
        let mut o = self.workspace.default_options(Some(model));
        o.facts = crate::tools::session_facts(self.prompt_policy, &self.sandbox, tools);
        o.facts.hooks = self.hooks.any();
        o.agent = self.role.as_ref().map(|r| crate::prompt::AgentPrompt {
            name: r.name.clone(),
            prompt: r.prompt.clone(),
        });
        // An agent's prompt is about its task; the servers' text stays with its caller.
        if self.role.is_none()
            && let Some(hub) = &self.mcp
        {
            o.mcp_instructions = hub.prompt_instructions();
        }
        o
    }
}

/// The model a session talks to now: the one it started with, or the one a client switched to.
pub struct ModelBinding {
    /// The model spec (`provider/model`).
    pub spec: String,
    /// The provider-side model id.
    pub id: String,
    /// The provider for that spec.
    pub provider: Arc<dyn Provider>,
    /// Window and output limits of the model.
    pub info: ModelInfo,
}

/// Mutable state, held for the whole of a turn so turns of one session never interleave. Only
/// the turn module changes it; the rest of the crate reads it through its methods.
pub(crate) struct SessionState {
    /// The transcript file, opened for appending.
    pub(super) file: SessionFile,
    /// Every record, in file order (header excluded). Private to this file: records are only
    /// ever appended, through [`SessionState::append`], so memory and file agree.
    records: Vec<Record>,
    /// Usage of the last response.
    pub(super) last_usage: Option<Usage>,
    /// The last main request's print and usage, to explain the next one's cache misses.
    pub(super) cache_print: Option<(crate::session::cache_miss::RequestPrint, Usage)>,
    /// The latest note putting changed instruction files in force (None: the system prompt
    /// is current, or no note was sent since the last compaction).
    pub(super) root_note: Option<super::notes::RootNoted>,
    /// Notes about instruction files that a load made stale (its system prompt was assembled
    /// from disk): snipped before the next request.
    pub(super) stale_notes: Vec<String>,
    /// The incremental view of `records`.
    pub(super) view_cache: ViewCache,
    /// Context-size accounting.
    pub(super) tracker: ContextTracker,
    /// Consecutive compaction failures (auto-compaction pauses after too many).
    pub(super) failures: FailureTracker,
    /// The smallest context limit the provider named (from `context_limit` records).
    pub(super) learned_limit: Option<u64>,
    /// The context size the snip nudge counts growth from (None: taken at the next step).
    pub(super) nudge_since: Option<u64>,
    /// Automatic collapses that failed in a row.
    pub(super) collapse_failures: u32,
    /// Nested instruction files and path-scoped rules: touched paths, what is in force and
    /// what the model has.
    pub(super) scope: super::notes::ScopeState,
    /// The skills on disk when a change was last noted (so one change is noted once).
    pub(super) skills_noted: Option<Vec<crate::skills::SkillStamp>>,
    /// A plan the user approved in the running step, recorded after the step's results.
    pub(super) approved_plan: Option<String>,
    /// Message records in `records`, published for readers that must not wait.
    message_count: Arc<AtomicU64>,
}

impl SessionState {
    /// Appends records to the file and to memory, in order; stops at the first failure.
    pub(super) fn append(&mut self, records: Vec<Record>) -> Result<(), StoreError> {
        for r in records {
            self.file.append(&r)?;
            self.count(std::slice::from_ref(&r));
            self.records.push(r);
        }
        Ok(())
    }

    /// Appends records in one write (a compaction installation), then to memory.
    pub(super) fn append_batch(&mut self, records: Vec<Record>) -> Result<(), StoreError> {
        self.file.append_batch(&records)?;
        self.count(&records);
        self.records.extend(records);
        Ok(())
    }

    fn count(&self, records: &[Record]) {
        let n = records.iter().filter(|r| r.as_message().is_some()).count();
        self.message_count.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Every record, in file order (header excluded).
    pub(crate) fn records(&self) -> &[Record] {
        &self.records
    }

    /// The view of the records at `now` (built incrementally).
    pub(crate) fn view(&mut self, policy: &ViewPolicy, now: u64) -> &View {
        self.view_cache.view(&self.records, policy, now)
    }

    /// The size of the view's messages in characters, as last built.
    pub(crate) fn message_chars(&self) -> usize {
        self.view_cache.chars()
    }

    /// The context-size accounting.
    pub(crate) fn tracker(&self) -> ContextTracker {
        self.tracker
    }

    /// The smallest context limit the provider named.
    pub(crate) fn learned_limit(&self) -> Option<u64> {
        self.learned_limit
    }

    /// Automatic compaction is paused after too many failures in a row.
    pub(crate) fn compaction_paused(&self, policy: &CompactPolicy) -> bool {
        self.failures.paused(policy)
    }

    /// Nested instruction files and rules: what is in force and what the model has.
    pub(crate) fn scope_mut(&mut self) -> &mut super::notes::ScopeState {
        &mut self.scope
    }

    /// The id of the last message record, the parent of the next one.
    pub(super) fn last_message_id(&self) -> Option<String> {
        self.records
            .iter()
            .rev()
            .find_map(|r| r.as_message().map(|m| m.uuid.clone()))
    }
}

/// A session in memory. The engine owns it; fronts reach it through its methods. One
/// operation at a time (a turn, a compaction, a snip, a collapse) holds it through an
/// [`Operation`], which owns the busy state and the cancellation; reads that must not wait
/// use the published counters or the transcript on disk.
pub struct LiveSession {
    pub(crate) id: String,
    pub(crate) header: SessionHeader,
    pub(crate) setup: SessionSetup,
    /// The system prompt and its typed parts, byte-stable for the session's life (rebuilt
    /// only at compaction).
    prompt: Mutex<Arc<Assembled>>,
    /// Transcript and turn state, held by the running operation.
    state: tokio::sync::Mutex<SessionState>,
    /// Files read in this session.
    pub(crate) files: Arc<Mutex<FileTracker>>,
    /// The task list.
    pub(crate) todos: Arc<Mutex<Vec<TodoItem>>>,
    /// Tools the person allowed for the rest of the session; outside the state, so
    /// revoking one does not wait for the running turn. An agent's sub-session shares its
    /// caller's: an answer in either holds in both.
    always_allow: Arc<Mutex<HashSet<String>>>,
    /// The running operation's cancellation, for `turn/cancel`.
    running: Mutex<Option<CancellationToken>>,
    message_count: Arc<AtomicU64>,
    /// The approval policy now (starts as `setup.prompt_policy`; a client may switch it).
    policy: Mutex<Policy>,
    /// The model now (starts as the setup's; a client may switch it).
    model: Mutex<Arc<ModelBinding>>,
    /// The next user message carries a note naming the model (it differs from the one the
    /// system prompt names).
    model_note: std::sync::atomic::AtomicBool,
    /// The model last heard that plan mode is on (a note says when that changes).
    plan_heard: std::sync::atomic::AtomicBool,
    /// The tools now: the start's until a compaction installs a changed MCP tool list.
    tools: Mutex<Arc<ToolRegistry>>,
    /// The skills now: the start's until a compaction installs the list on disk.
    skills: Mutex<Arc<crate::skills::SkillSet>>,
    /// Folders outside the root `read_file` may read: loaded skills of the user's.
    pub readable: Arc<Mutex<Vec<std::path::PathBuf>>>,
    /// The SessionStart hooks still to run before the next turn (`startup` for a new
    /// session, `resume` for one loaded from disk), taken once.
    start_hooks: Mutex<Option<crate::hooks::SessionSource>>,
    /// The transcript holds a message of the user's own.
    user_words: std::sync::atomic::AtomicBool,
    /// An agent call is running this sub-session now (set by the call, see `turn/agents.rs`),
    /// so a client's own turn on it is refused as `AgentRunning`, not plain `Busy`.
    agent_call: std::sync::atomic::AtomicBool,
    /// What the model's server said of its window: (model id asked for, its answer).
    server_window: Mutex<Option<(String, Option<crate::provider::ServerWindow>)>>,
    /// The lean fixed part of a small window, once in force (it stays for the session).
    lean: Mutex<Option<LeanState>>,
    /// Requests run beside the session (the memory's update, a collapse asked ahead) and
    /// the idle timer.
    pub(super) background: super::background::Background,
}

/// The fewest characters a lean prompt keeps, whatever the budget: the short base rules and
/// the identity line.
const LEAN_PROMPT_FLOOR: usize = 1_200;

/// True when `a` is already a lean prompt (its assembly says so).
fn is_lean_prompt(a: &Assembled) -> bool {
    a.warnings
        .iter()
        .any(|w| w.starts_with(crate::prompt::lean::LEAN_NOTE))
}

/// The lean fixed part in force ([`crate::prompt::lean`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeanState {
    /// What the system prompt and tools aim at, in tokens.
    pub budget_tokens: u64,
    /// The prompt parts dropped or cut to reach it.
    pub dropped: Vec<String>,
    /// The tools deferred behind the tool search.
    pub deferred_tools: Vec<String>,
}

/// The tool registry a compaction would install, and the MCP list and skills behind it.
pub(crate) struct NextTools {
    /// The registry.
    pub(crate) registry: Arc<ToolRegistry>,
    /// The MCP tools to install in the hub with it (None: unchanged).
    pub(crate) mcp: Option<Vec<crate::mcp::McpTool>>,
    /// The skills on disk now (None: unchanged).
    pub(crate) skills: Option<Arc<crate::skills::SkillSet>>,
    /// The MCP servers' instructions the rebuilt prompt holds (None: a sub-session or no
    /// servers, whose prompt has none).
    pub(crate) mcp_instructions: Option<Vec<crate::mcp::McpInstructions>>,
}

/// The running operation of a session: the session's state, exclusively, until it drops.
pub(crate) struct Operation<'a> {
    state: tokio::sync::MutexGuard<'a, SessionState>,
    /// Dropped after `state`: the session stays claimed until its state is free.
    _claim: Claim<'a>,
}

/// A session's claim to run the one operation it may run; cleared when dropped, also when
/// the operation never got the state (its caller went away while it waited).
struct Claim<'a>(&'a LiveSession);

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        *self.0.running.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

impl Deref for Operation<'_> {
    type Target = SessionState;
    fn deref(&self) -> &SessionState {
        &self.state
    }
}

impl DerefMut for Operation<'_> {
    fn deref_mut(&mut self) -> &mut SessionState {
        &mut self.state
    }
}

/// What a session's records say beyond the messages, found by the files that keep each part
/// up (todos, skills, plan mode, instruction notes) when the session is brought to life.
pub(super) struct Replayed {
    /// The task list.
    pub todos: Vec<TodoItem>,
    /// Folders outside the root `read_file` may read (loaded skills of the user's).
    pub readable: Vec<std::path::PathBuf>,
    /// The model last heard that plan mode is on.
    pub plan_heard: bool,
    /// Instruction notes since the last compaction.
    pub stale_notes: Vec<String>,
    /// Nested instructions and rules touched and attached.
    pub scope: super::notes::ScopeState,
}

impl LiveSession {
    /// A session from its header, records and what [`Replayed`] made of them (see
    /// `turn/resume.rs`, which builds both: `LiveSession::new`).
    pub(super) fn from_parts(
        header: SessionHeader,
        setup: SessionSetup,
        start: SessionStart,
        file: SessionFile,
        records: Vec<Record>,
        replayed: Replayed,
    ) -> LiveSession {
        let Replayed {
            todos,
            readable,
            plan_heard,
            stale_notes,
            scope,
        } = replayed;
        let opts = setup.prompt_options(&header.model, &start.tools);
        let assembled = setup.workspace.assemble(&opts);
        let count = records.iter().filter(|r| r.as_message().is_some()).count();
        let message_count = Arc::new(AtomicU64::new(count as u64));
        let SessionStart { tools, skills } = start;
        let user_words = records
            .iter()
            .filter_map(Record::as_message)
            .any(|m| m.role == crate::message::Role::User && m.meta.is_none());
        LiveSession {
            message_count: message_count.clone(),
            id: header.session_id.clone(),
            header,
            prompt: Mutex::new(assembled.clone()),
            state: tokio::sync::Mutex::new(SessionState {
                file,
                last_usage: None,
                cache_print: None,
                root_note: None,
                stale_notes,
                view_cache: ViewCache::new(),
                tracker: ContextTracker::replay(&records),
                failures: FailureTracker::default(),
                learned_limit: crate::session::tokens::learned_limit(&records),
                nudge_since: None,
                collapse_failures: 0,
                skills_noted: None,
                approved_plan: None,
                scope,
                message_count,
                records,
            }),
            policy: Mutex::new(setup.prompt_policy),
            model: Mutex::new(Arc::new(ModelBinding {
                spec: setup.model_spec.clone(),
                id: setup.model_id.clone(),
                provider: setup.provider.clone(),
                info: setup.model_info,
            })),
            model_note: std::sync::atomic::AtomicBool::new(false),
            plan_heard: std::sync::atomic::AtomicBool::new(plan_heard),
            setup,
            files: Arc::new(Mutex::new(FileTracker::new())),
            todos: Arc::new(Mutex::new(todos)),
            always_allow: Arc::new(Mutex::new(HashSet::new())),
            running: Mutex::new(None),
            tools: Mutex::new(Arc::new(tools)),
            skills: Mutex::new(skills),
            start_hooks: Mutex::new(Some(if user_words {
                crate::hooks::SessionSource::Resume
            } else {
                crate::hooks::SessionSource::Startup
            })),
            readable: Arc::new(Mutex::new(readable)),
            user_words: std::sync::atomic::AtomicBool::new(user_words),
            agent_call: std::sync::atomic::AtomicBool::new(false),
            server_window: Mutex::new(None),
            lean: Mutex::new(None),
            background: Default::default(),
        }
    }

    /// This session as an agent's sub-session of `parent`: "allow always" answers are shared
    /// with it, and its first turn runs SubagentStart (not SessionStart: the caller's
    /// session started).
    pub(crate) fn child_of(mut self, parent: &LiveSession) -> LiveSession {
        self.always_allow = parent.always_allow.clone();
        self.start_hooks = Mutex::new(Some(crate::hooks::SessionSource::Startup));
        self
    }

    /// True for an agent's sub-session.
    pub fn is_agent(&self) -> bool {
        self.setup.role.is_some()
    }

    /// Starts an operation; `Busy` while another one runs. `cancel` is what `cancel()`
    /// cancels until the operation ends. A read that holds the state for a moment
    /// (`context/inspect`, a fork's copy) is waited out, so a turn sent right after another
    /// one answered never fails because a client was looking at the session.
    pub(crate) async fn begin(
        &self,
        cancel: &CancellationToken,
    ) -> Result<Operation<'_>, TurnError> {
        let claim = self.claim(cancel)?;
        let state = self.state.lock().await;
        Ok(Operation {
            state,
            _claim: claim,
        })
    }

    /// [`Self::begin`] for a caller that cannot wait: `Busy` also while a read holds the
    /// state.
    pub(crate) fn try_begin(&self, cancel: &CancellationToken) -> Result<Operation<'_>, TurnError> {
        let claim = self.claim(cancel)?;
        let state = self
            .state
            .try_lock()
            .map_err(|_| TurnError::Busy(self.id.clone()))?;
        Ok(Operation {
            state,
            _claim: claim,
        })
    }

    /// Marks this sub-session as run by an agent call (`on`) or no longer.
    pub(super) fn set_agent_call(&self, on: bool) {
        self.agent_call.store(on, Ordering::SeqCst);
    }

    /// Claims the session for one operation; `Busy` while another holds it.
    fn claim(&self, cancel: &CancellationToken) -> Result<Claim<'_>, TurnError> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if running.is_some() {
            if let Some(link) = &self.header.parent
                && self.agent_call.load(Ordering::SeqCst)
            {
                return Err(TurnError::AgentRunning {
                    session_id: self.id.clone(),
                    agent: link.agent.clone(),
                    parent_session_id: link.session_id.clone(),
                    tool_call_id: link.tool_call_id.clone(),
                });
            }
            return Err(TurnError::Busy(self.id.clone()));
        }
        *running = Some(cancel.clone());
        Ok(Claim(self))
    }

    /// The state when no operation runs, for a read that must not wait (None: busy).
    pub(crate) fn try_state(&self) -> Option<tokio::sync::MutexGuard<'_, SessionState>> {
        self.state.try_lock().ok()
    }

    /// Whether "allow always" covers `tool`.
    pub(crate) fn is_always_allowed(&self, tool: &str) -> bool {
        self.always_allow
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(tool)
    }

    /// Remembers "allow always" for `tool` until the session leaves memory.
    pub(crate) fn allow_always(&self, tool: &str) {
        self.always_allow
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(tool.to_string());
    }

    /// The tools allowed always, sorted.
    pub fn always_allowed(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .always_allow
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// Takes back "allow always" for `tool` (None: every tool); the next call asks again.
    /// Returns the entries revoked, sorted (a risky edit's entry is `tool:path`).
    pub fn revoke(&self, tool: Option<&str>) -> Vec<String> {
        let mut set = self.always_allow.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<String> = match tool {
            Some(t) => {
                let scoped = format!("{t}:");
                let hit: Vec<String> = set
                    .iter()
                    .filter(|k| *k == t || k.starts_with(&scoped))
                    .cloned()
                    .collect();
                for k in &hit {
                    set.remove(k);
                }
                hit
            }
            None => set.drain().collect(),
        };
        v.sort();
        v
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The transcript's header.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The spec of the model the session talks to now.
    pub fn model_spec(&self) -> String {
        self.model().spec.clone()
    }

    /// The configured context window of the session's current model.
    pub fn context_window(&self) -> u64 {
        self.model().info.context_window
    }

    /// The configured window, lowered to what the model's server reported (before any limit
    /// a refusal teaches).
    pub fn planned_window(&self) -> u64 {
        crate::session::tokens::planned_window(&self.model().info, self.server_window(), None).0
    }

    /// The model the session talks to now.
    pub fn model(&self) -> Arc<ModelBinding> {
        self.model.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The lean fixed part in force, if any.
    pub fn lean(&self) -> Option<LeanState> {
        self.lean.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Puts the lean fixed part in force when `window` is small ([`crate::prompt::lean`]):
    /// the core tools with compact descriptions and the rest behind the tool search, and the
    /// system prompt cut to what the budget leaves. Before the first request (or once a
    /// refusal showed the window small); once in force it stays, so the bytes stay stable.
    pub(crate) fn settle_lean(&self, window: u64) {
        use crate::prompt::lean;
        let held = self.lean();
        if held.is_none() && !lean::is_lean(window) {
            return;
        }
        let budget_tokens = held
            .as_ref()
            .map_or((window as f64 * lean::LEAN_SHARE) as u64, |l| {
                l.budget_tokens
            });
        let tools = self.tools();
        let lean_tools = tools.lean();
        if lean_tools != *tools {
            *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(lean_tools);
        }
        let prompt = self.prompt();
        let deferred_tools = self
            .tools()
            .deferred_specs()
            .into_iter()
            .map(|s| s.name)
            .collect();
        let mut state = LeanState {
            budget_tokens,
            dropped: held.map(|h| h.dropped).unwrap_or_default(),
            deferred_tools,
        };
        if !is_lean_prompt(&prompt) {
            let (p, dropped) = lean::lean_prompt(
                &prompt,
                &self.root_text(),
                self.prompt_budget(budget_tokens),
            );
            state.dropped = dropped;
            self.set_prompt(Arc::new(p));
        }
        *self.lean.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
    }

    /// A prompt rebuilt from disk (a compaction), lean when the lean fixed part is in force.
    pub(crate) fn fit_prompt(&self, a: Arc<Assembled>) -> Arc<Assembled> {
        let Some(mut held) = self.lean() else {
            return a;
        };
        if is_lean_prompt(&a) {
            return a;
        }
        let (p, dropped) = crate::prompt::lean::lean_prompt(
            &a,
            &self.root_text(),
            self.prompt_budget(held.budget_tokens),
        );
        held.dropped = dropped;
        *self.lean.lock().unwrap_or_else(|p| p.into_inner()) = Some(held);
        Arc::new(p)
    }

    /// The working root as the prompt names it.
    fn root_text(&self) -> String {
        self.setup.workspace.root.path().display().to_string()
    }

    /// Characters the lean prompt may take: the budget less the tools' definitions.
    fn prompt_budget(&self, budget_tokens: u64) -> usize {
        let tools = crate::session::tokens::tool_chars(&self.tools().specs());
        ((budget_tokens as f64 * crate::session::tokens::DEFAULT_CHARS_PER_TOKEN) as usize)
            .saturating_sub(tools)
            .max(LEAN_PROMPT_FLOOR)
    }

    /// The window the current model's server reported, once asked ([`Self::ask_server_window`]).
    pub fn server_window(&self) -> Option<crate::provider::ServerWindow> {
        let id = self.model().id.clone();
        let held = self.server_window.lock().unwrap_or_else(|p| p.into_inner());
        held.as_ref()
            .filter(|(m, _)| *m == id)
            .and_then(|(_, w)| *w)
    }

    /// Asks the current model's server for its window once per model (a local server only;
    /// the provider caches the answer per server and model across sessions).
    pub async fn ask_server_window(&self) -> Option<crate::provider::ServerWindow> {
        let model = self.model();
        {
            let held = self.server_window.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((m, w)) = held.as_ref()
                && *m == model.id
            {
                return *w;
            }
        }
        let w = model.provider.server_window(&model.id).await;
        *self.server_window.lock().unwrap_or_else(|p| p.into_inner()) = Some((model.id.clone(), w));
        w
    }

    /// Switches the model from the next model request on. The system prompt keeps naming the
    /// model the session started with (its bytes, and the provider's cache, stay); the next
    /// user message carries a note naming the new one. `note: false` restores a switch
    /// the transcript already holds (a session loaded again).
    pub fn switch_model(&self, binding: ModelBinding, note: bool) {
        *self.model.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(binding);
        if note {
            // Also when switching back to the start model: the model heard of another one.
            self.model_note.store(true, Ordering::Relaxed);
        }
    }

    /// Takes the pending model note: the spec to name in the next user message.
    pub(crate) fn take_model_note(&self) -> Option<String> {
        self.model_note
            .swap(false, Ordering::Relaxed)
            .then(|| self.model_spec())
    }

    /// After a compaction, whose kept part may have lost the earlier note: name the model
    /// again when it is not the one the system prompt names.
    pub(crate) fn renew_model_note(&self) {
        if self.model().spec != self.header.model {
            self.model_note.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the model must hear that plan mode is on (`Some(true)`) or off
    /// (`Some(false)`): the mode differs from what it last heard. Taking it counts as heard.
    pub(crate) fn take_plan_note(&self) -> Option<bool> {
        let on = self.policy() == Policy::Plan;
        (self.plan_heard.swap(on, Ordering::Relaxed) != on).then_some(on)
    }

    /// Records what the model now knows of plan mode (a tool result told it).
    pub(crate) fn plan_noted(&self, on: bool) {
        self.plan_heard.store(on, Ordering::Relaxed);
    }

    /// After a compaction, which drops plan notes: in plan mode, say so again.
    pub(crate) fn renew_plan_note(&self) {
        self.plan_heard.store(false, Ordering::Relaxed);
    }

    /// The approval policy the next tool call is checked against.
    pub fn policy(&self) -> Policy {
        *self.policy.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Switches the approval policy; it applies from the next tool call, also within a
    /// running turn. Held in memory: a session loaded again starts with its stored policy.
    pub fn set_policy(&self, policy: Policy) {
        *self.policy.lock().unwrap_or_else(|p| p.into_inner()) = policy;
    }

    /// The workspace it belongs to.
    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.setup.workspace
    }

    /// How it was set up.
    pub fn setup(&self) -> &SessionSetup {
        &self.setup
    }

    /// Message records in its transcript, also while an operation runs.
    pub fn message_count(&self) -> u64 {
        self.message_count.load(Ordering::Relaxed)
    }

    /// True once the user said something in this session (notes such as the session-start
    /// note do not count): a session without it has no title yet.
    pub fn has_user_words(&self) -> bool {
        self.user_words.load(Ordering::Relaxed)
    }

    /// Marks that the user's first message is in the transcript.
    pub(crate) fn heard_user(&self) {
        self.user_words.store(true, Ordering::Relaxed);
    }

    /// The system prompt now.
    pub fn system(&self) -> String {
        self.prompt().system.clone()
    }

    /// The session's assembled prompt, with its typed parts.
    pub fn prompt(&self) -> Arc<Assembled> {
        self.prompt
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the prompt (after a compaction, when the cache is cold anyway).
    pub fn set_prompt(&self, prompt: Arc<Assembled>) {
        *self.prompt.lock().unwrap_or_else(|p| p.into_inner()) = prompt;
    }

    /// Cancels the running turn, if any; true when one was running.
    pub fn cancel(&self) -> bool {
        match self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// The tools the model sees, in their fixed order.
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        self.tools().specs()
    }

    /// The session's tool registry now (fixed between compactions).
    pub fn tools(&self) -> Arc<ToolRegistry> {
        self.tools.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The SessionStart source still to fire, once.
    pub(crate) fn take_start_hooks(&self) -> Option<crate::hooks::SessionSource> {
        self.start_hooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// The skills the session lists now.
    pub fn skills(&self) -> Arc<crate::skills::SkillSet> {
        self.skills
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The registry a compaction would install: the current one, or one with the MCP tools
    /// the servers list now when a `tools/list_changed` changed them, and with the skills on
    /// disk now when they changed.
    pub(crate) fn next_tools(&self) -> NextTools {
        let mut next = NextTools {
            registry: self.tools(),
            mcp: None,
            skills: None,
            mcp_instructions: None,
        };
        // A sub-session shares its caller's servers: their changes are the caller's to
        // install (installing them here would hide them from it).
        if let Some(hub) = &self.setup.mcp
            && !self.is_agent()
        {
            // The prompt is rebuilt anyway: it takes the servers as they are now.
            next.mcp_instructions = Some(hub.current_instructions());
        }
        if let Some(hub) = &self.setup.mcp
            && !self.is_agent()
            && hub.has_tool_changes()
        {
            let fresh = hub.current_tools();
            match self.with_mcp_tools(hub, &fresh) {
                Ok(r) => {
                    next.registry = Arc::new(r);
                    next.mcp = Some(fresh);
                }
                Err(e) => {
                    tracing::warn!(target: "garuda::mcp", "changed MCP tools not installed: {e}");
                }
            }
        }
        if let Some(dirs) = &self.setup.skill_dirs {
            let root = &self.setup.workspace.root;
            let offered = next.registry.get(crate::tools::SKILL_TOOL);
            let ours = offered.is_none_or(|e| next.registry.is_skill(&e.spec.name));
            if ours
                && !self
                    .skills()
                    .changes(&crate::skills::scan(root, dirs))
                    .is_empty()
            {
                let fresh = Arc::new(crate::skills::discover(root, dirs));
                next.registry = Arc::new(
                    (*next.registry)
                        .clone()
                        .with_skills(fresh.clone(), self.setup.model_info.context_window),
                );
                next.skills = Some(fresh);
            }
        }
        if self.lean().is_some() && (next.mcp.is_some() || next.skills.is_some()) {
            next.registry = Arc::new(next.registry.lean());
        }
        next
    }

    /// Fixes the MCP tool list before the session's first model request: waits for servers
    /// still starting (at most their startup timeout; not past `cancel`), then puts the
    /// tools of those that are up into the registry and rebuilds the prompt, which names
    /// them. Nothing has been sent yet, so no cached prefix is lost; after this the list
    /// changes only at a compaction (a server that comes later is a note).
    pub async fn settle_mcp(&self, cancel: &CancellationToken) {
        let Some(hub) = &self.setup.mcp else { return };
        if hub.is_settled() {
            return;
        }
        if hub.is_starting() {
            tokio::select! {
                _ = hub.wait_started() => {}
                // Not settled: the next turn waits again.
                _ = cancel.cancelled() => return,
            }
        }
        if !hub.settle() || (hub.tools().is_empty() && hub.prompt_instructions().is_empty()) {
            return;
        }
        match self.with_mcp_tools(hub, &hub.tools()) {
            Ok(registry) => {
                let opts = self.setup.prompt_options(&self.header.model, &registry);
                self.set_prompt(self.setup.workspace.assemble(&opts));
                *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(registry);
            }
            Err(e) => tracing::warn!(target: "garuda::mcp", "MCP tools not installed: {e}"),
        }
    }

    /// The current registry with `fresh` as its MCP tools (deferred behind the search tool
    /// when they would take too much of the window).
    fn with_mcp_tools(
        &self,
        hub: &crate::mcp::McpHub,
        fresh: &[crate::mcp::McpTool],
    ) -> Result<ToolRegistry, crate::tools::ToolClash> {
        let plan = hub.defer_plan(fresh, self.setup.model_info.context_window);
        self.tools().without_mcp().with_mcp(fresh, &plan)
    }

    /// Installs what [`Self::next_tools`] gave, with the rebuilt prompt (a compaction).
    pub(crate) fn install_tools(&self, next: NextTools) {
        if let (Some(list), Some(hub)) = (next.mcp_instructions, &self.setup.mcp) {
            hub.install_instructions(list);
        }
        let changed = next.mcp.is_some() || next.skills.is_some();
        if let (Some(list), Some(hub)) = (next.mcp, &self.setup.mcp) {
            hub.install_tools(list);
        }
        if let Some(skills) = next.skills {
            *self.skills.lock().unwrap_or_else(|p| p.into_inner()) = skills;
        }
        if changed {
            *self.tools.lock().unwrap_or_else(|p| p.into_inner()) = next.registry;
        }
    }
}
