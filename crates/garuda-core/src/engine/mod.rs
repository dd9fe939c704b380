//! The engine: everything a front can ask of Garuda, with no knowledge of JSON-RPC.

mod context;
mod inline;
mod sessions;

pub use context::{ContextReport, LastCompaction, NextRequest};
pub use inline::Inline;
pub use sessions::{HistoryEntry, HistoryPage, NewSession, ResumeSession, Sessions, policy_name};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Config;
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

/// Receives engine events; the front turns them into notifications.
pub type EventSink = Arc<dyn Fn(EngineEvent) + Send + Sync>;

/// One Garuda engine: config, open workspaces, state directory.
pub struct Engine {
    /// The user's configuration.
    pub config: Config,
    /// Open workspaces.
    pub workspaces: Workspaces,
    /// Where transcripts and side files live.
    pub state_dir: PathBuf,
    /// Sessions loaded in memory.
    pub sessions: Sessions,
    events: EventSink,
    watch: bool,
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
            config,
            workspaces: Workspaces::default(),
            state_dir,
            sessions: Sessions::default(),
            events,
            watch,
        }
    }

    /// The provider settings from the user's config.
    pub fn provider_config(&self) -> Result<crate::provider::ProviderConfig, EngineError> {
        self.config.provider_config().map_err(EngineError::Config)
    }

    /// Opens (or finds) the workspace at `root` and starts watching it.
    pub fn open_workspace(&self, root: &Path) -> Result<Arc<Workspace>, WorkspaceError> {
        let (ws, is_new) = self.workspaces.open(root, &self.config)?;
        if is_new && self.watch {
            self.start_watch(&ws);
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
