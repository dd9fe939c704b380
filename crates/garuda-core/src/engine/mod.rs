//! The engine: everything a front can ask of Garuda, with no knowledge of JSON-RPC.

mod context;
mod inline;
mod sessions;

pub use context::{ContextReport, LastCompaction, MEMORY_MAX_CHARS, MemoryReport, NextRequest};
pub use inline::Inline;
pub use sessions::{HistoryEntry, HistoryPage, NewSession, ResumeSession, Sessions, policy_name};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::config::{Checked, Config, ConfigProblem, Severity};
use crate::prompt::{Assembled, Features, Limits};
use crate::workspace::{self, Workspace, WorkspaceError, Workspaces};

/// Instruction or memory files of a workspace changed on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextChange {
    /// The workspace.
    pub workspace_id: String,
    /// Root-relative paths that changed.
    pub changed: Vec<String>,
    /// sha256 of the prompt a new session would get now.
    pub sha256: String,
}

/// Something the engine tells the client without being asked.
#[derive(Debug, Clone)]
pub enum EngineEvent {
    /// Instruction or memory files of a workspace changed on disk.
    ContextChanged(ContextChange),
    /// The user's config file changed; these are its problems now (none: it is in force).
    ConfigChanged(Vec<ConfigProblem>),
}

/// A workspace as a client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceSummary {
    /// Its id.
    pub workspace_id: String,
    /// The canonical root.
    pub root: String,
    /// Instruction and memory files present.
    pub context_files: Vec<String>,
    /// Problems found when it was opened.
    pub warnings: Vec<String>,
}

/// What a client may change about an assembled prompt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptOverrides {
    /// The model named in the identity line.
    pub model: Option<String>,
    /// Features instead of the configured ones.
    pub features: Option<Features>,
    /// Limits instead of the configured ones.
    pub limits: Option<Limits>,
}

// A holder that panicked leaves these values whole (each is replaced in one assignment).
fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Receives engine events; the front turns them into notifications.
pub type EventSink = Arc<dyn Fn(EngineEvent) + Send + Sync>;

/// One Garuda engine: config, open workspaces, state directory.
pub struct Engine {
    /// The user's configuration in force: replaced when a watched config file is fixed.
    config: RwLock<Arc<Config>>,
    /// What is wrong with the user's config file; an error keeps new sessions from starting.
    problems: RwLock<Vec<ConfigProblem>>,
    /// The user's config file, once watched: read again while it has errors.
    config_path: Mutex<Option<PathBuf>>,
    /// The watch on the user's config file, when one runs.
    config_watch: Mutex<Option<crate::workspace::watch::WatchHandle>>,
    /// Open workspaces.
    pub(crate) workspaces: Workspaces,
    /// Where transcripts and side files live.
    pub(crate) state_dir: PathBuf,
    /// Sessions loaded in memory.
    pub(crate) sessions: Sessions,
    /// A git state read started before its session exists (`garuda exec`), with the folder
    /// it reads; the next new session in that folder takes it.
    git_ahead: Mutex<Option<(PathBuf, sessions::GitRead)>>,
    events: EventSink,
    watch: bool,
    /// How an MCP server's sign-in reaches the person; the front sets it (none by default).
    sign_in: RwLock<Arc<dyn crate::mcp::oauth::SignInDoor>>,
}

/// Why an engine operation failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Workspace problems.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// Transcript problems.
    #[error(transparent)]
    Store(#[from] crate::session::StoreError),
    /// Provider problems (configuration, network, model).
    #[error(transparent)]
    Provider(#[from] crate::provider::ProviderError),
    /// Turn problems.
    #[error(transparent)]
    Turn(#[from] crate::turn::TurnError),
    /// No session with this id.
    #[error("session {0} not found")]
    SessionNotFound(String),
    /// Configuration is missing or wrong.
    #[error("{0}")]
    Config(String),
    /// The user's config file has errors: nothing that needs the config runs until it is fixed.
    #[error("the config file has errors, fix it (it is reloaded when saved): {}", .0.iter().filter(|p| p.severity == Severity::Error).map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    ConfigFile(Vec<ConfigProblem>),
    /// No model was given and none is configured.
    #[error(
        "no model configured: pass `model` (e.g. \"anthropic/claude-sonnet-4-5\", \"ollama/qwen3-coder\", or \"replay:PATH\" to play a recorded cassette offline) or set `model = \"...\"` in $XDG_CONFIG_HOME/garuda/config.toml"
    )]
    NoModel,
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
}

impl Engine {
    /// An engine with `config`; `watch` starts file watchers (needs a tokio runtime).
    pub fn new(config: Config, state_dir: PathBuf, events: EventSink, watch: bool) -> Engine {
        Engine {
            config: RwLock::new(Arc::new(config)),
            problems: RwLock::new(Vec::new()),
            config_path: Mutex::new(None),
            config_watch: Mutex::new(None),
            workspaces: Workspaces::default(),
            git_ahead: Mutex::new(None),
            state_dir,
            sessions: Sessions::default(),
            events,
            watch,
            sign_in: RwLock::new(Arc::new(crate::mcp::oauth::NoPerson)),
        }
    }

    /// Sets how MCP sign-ins reach the person, for the sessions started from now on.
    pub fn set_sign_in_door(&self, door: Arc<dyn crate::mcp::oauth::SignInDoor>) {
        *write(&self.sign_in) = door;
    }

    /// How sessions sign in to MCP servers: the front's door, tokens in the state folder.
    pub fn mcp_auth(&self) -> crate::mcp::oauth::AuthContext {
        crate::mcp::oauth::AuthContext {
            door: read(&self.sign_in).clone(),
            store: Arc::new(crate::mcp::oauth::FileStore::new(
                self.state_dir.join("mcp-auth"),
            )),
            client_secret: None,
            assertion: None,
            client_key_pem: None,
        }
    }

    /// An engine over a checked config file: its problems are kept (an error stops what
    /// needs the config until the file is fixed), and the defaults stand in for a file with
    /// errors.
    pub fn checked(checked: Checked, state_dir: PathBuf, events: EventSink, watch: bool) -> Engine {
        let engine = Engine::new(checked.config.unwrap_or_default(), state_dir, events, watch);
        *write(&engine.problems) = checked.problems;
        engine
    }

    /// The user's configuration in force.
    pub fn config(&self) -> Arc<Config> {
        read(&self.config).clone()
    }

    /// What is wrong with the user's config file now (warnings and errors).
    pub fn config_problems(&self) -> Vec<ConfigProblem> {
        read(&self.problems).clone()
    }

    /// `Err` while the config file has errors: for everything that needs the config. With
    /// errors standing, the file is read again first (it may have been fixed a moment ago,
    /// before the watcher's debounce ran), so a fix never waits for the watcher.
    pub fn config_ready(&self) -> Result<(), EngineError> {
        let has_errors = |p: &[ConfigProblem]| p.iter().any(|p| p.severity == Severity::Error);
        if !has_errors(&read(&self.problems)) {
            return Ok(());
        }
        let path = lock(&self.config_path).clone();
        if let Some(path) = path {
            let checked = Config::check_file(&path);
            if checked.problems != *read(&self.problems) {
                self.reload_config(checked);
            }
        }
        let problems = read(&self.problems);
        if has_errors(&problems) {
            return Err(EngineError::ConfigFile(problems.clone()));
        }
        Ok(())
    }

    /// Takes a config file read again: a file without errors is in force from now on (new
    /// sessions and workspaces opened again get it; live sessions keep theirs), a file with
    /// errors leaves the config in force as it was. Reports the problems as an event.
    pub fn reload_config(&self, checked: Checked) {
        // A reload that changes nothing (a write elsewhere in the config folder, a fix seen
        // twice) leaves the workspaces and their watchers alone: re-opening one replaces its
        // watcher, and a change pending in the old one would be lost.
        if let Some(cfg) = checked.config
            && **read(&self.config) != cfg
        {
            *write(&self.config) = Arc::new(cfg);
            self.reopen_workspaces();
        }
        *write(&self.problems) = checked.problems.clone();
        (self.events)(EngineEvent::ConfigChanged(checked.problems));
    }

    /// Watches the user's config file (its folder; the file may not exist yet) and reloads it
    /// on the blocking pool after each burst of changes. Needs a tokio runtime.
    pub fn watch_config(self: &Arc<Self>, path: PathBuf) {
        *lock(&self.config_path) = Some(path.clone());
        let weak = Arc::downgrade(self);
        let file = path.clone();
        let res =
            workspace::watch::watch_file(path.clone(), workspace::watch::DEBOUNCE, move || {
                let weak = weak.clone();
                let file = file.clone();
                tokio::task::spawn_blocking(move || {
                    if let Some(engine) = weak.upgrade() {
                        engine.reload_config(Config::check_file(&file));
                    }
                });
            });
        match res {
            Ok(handle) => *lock(&self.config_watch) = Some(handle),
            // No config folder is the usual case without a config: nothing to watch.
            Err(e) if path.parent().is_some_and(|d| !d.is_dir()) => {
                tracing::debug!("config file not watched: {e}")
            }
            Err(e) => tracing::warn!("cannot watch the config file: {e}"),
        }
    }

    /// Opens every open workspace again on the config in force, so its merged config is the
    /// new one; a workspace that cannot be opened now keeps its old state.
    fn reopen_workspaces(&self) {
        let cfg = self.config();
        for old in self.workspaces.list() {
            match workspace::Workspace::open(old.root.path(), &cfg) {
                Ok(ws) => {
                    let ws = Arc::new(ws);
                    // Watch the new one before the old watcher goes, so no change falls between;
                    // sessions on the old one see changes through the new one's watcher.
                    if self.watch {
                        self.start_watch(&ws);
                    }
                    self.workspaces.replace(ws.clone());
                    old.set_watcher(None);
                    ws.succeed(&old);
                    ws.code_index();
                }
                Err(e) => tracing::warn!("{} keeps its old config: {e}", old.root.path().display()),
            }
        }
    }

    /// The provider settings from the user's config.
    pub fn provider_config(&self) -> Result<crate::provider::ProviderConfig, EngineError> {
        self.config().provider_config().map_err(EngineError::Config)
    }

    /// Opens (or finds) the workspace at `root` and starts watching it.
    pub fn open_workspace(&self, root: &Path) -> Result<Arc<Workspace>, WorkspaceError> {
        let (ws, is_new) = self.workspaces.open(root, &self.config())?;
        if is_new && self.watch {
            self.start_watch(&ws);
        }
        if is_new {
            // Starts the build in the background (after the watcher, which it adds folders to).
            ws.code_index();
        }
        Ok(ws)
    }

    fn start_watch(&self, ws: &Arc<Workspace>) {
        let weak = Arc::downgrade(ws);
        let events = self.events.clone();
        let res = workspace::watch_workspace(ws, move |changed| {
            let Some(ws) = weak.upgrade() else { return };
            ws.invalidate();
            let sha256 = ws.assemble(&ws.default_options(None)).sha256.clone();
            events(EngineEvent::ContextChanged(ContextChange {
                workspace_id: ws.id.clone(),
                changed,
                sha256,
            }));
        });
        if let Err(e) = res {
            tracing::warn!("cannot watch {}: {e}", ws.root.path().display());
        }
    }

    /// The client-facing description of a workspace.
    pub fn info(&self, ws: &Workspace) -> WorkspaceSummary {
        WorkspaceSummary {
            workspace_id: ws.id.clone(),
            root: ws.root.path().display().to_string(),
            context_files: ws.context_files(),
            warnings: ws
                .warnings
                .iter()
                .cloned()
                .chain(ws.watch_warning())
                .collect(),
        }
    }

    /// Assembles the system prompt of an open workspace.
    pub fn assemble(
        &self,
        workspace_id: &str,
        overrides: PromptOverrides,
    ) -> Result<Arc<Assembled>, WorkspaceError> {
        let ws = self.workspaces.require(workspace_id)?;
        let opts = Self::prompt_options(&ws, overrides);
        Ok(ws.assemble(&opts))
    }

    /// The assembled prompt when it is already cached (no IO); `Ok(None)` otherwise.
    pub fn assemble_cached(
        &self,
        workspace_id: &str,
        overrides: PromptOverrides,
    ) -> Result<Option<Arc<Assembled>>, WorkspaceError> {
        let ws = self.workspaces.require(workspace_id)?;
        let opts = Self::prompt_options(&ws, overrides);
        Ok(ws.cached(&opts))
    }

    fn prompt_options(ws: &Workspace, o: PromptOverrides) -> crate::prompt::PromptOptions {
        let mut opts = ws.default_options(o.model.as_deref());
        if let Some(f) = o.features {
            opts.features = f;
        }
        if let Some(l) = o.limits {
            opts.limits = l;
        }
        opts
    }
}
