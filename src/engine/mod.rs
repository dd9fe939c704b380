//! The engine: everything a front can ask of Garuda, with no knowledge of JSON-RPC.

mod context;
mod sessions;

pub use sessions::{NewSession, Sessions, policy_name};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Config;
use crate::protocol::{AssembleOptions, AssembleResult, ContextChanged, WorkspaceInfo};
use crate::workspace::{self, Workspace, WorkspaceError, Workspaces};

/// Something the engine tells the client without being asked.
#[derive(Debug, Clone)]
pub enum EngineEvent {
    /// Instruction or memory files of a workspace changed on disk.
    ContextChanged(ContextChanged),
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
            events(EngineEvent::ContextChanged(ContextChanged {
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
    pub fn info(&self, ws: &Workspace) -> WorkspaceInfo {
        WorkspaceInfo {
            workspace_id: ws.id.clone(),
            root: ws.root.path().display().to_string(),
            context_files: ws.context_files(),
            warnings: ws.warnings.clone(),
        }
    }

    /// Assembles the system prompt of an open workspace.
    pub fn assemble(
        &self,
        workspace_id: &str,
        options: Option<AssembleOptions>,
    ) -> Result<AssembleResult, WorkspaceError> {
        let ws = self.workspaces.require(workspace_id)?;
        let opts = Self::prompt_options(&ws, options);
        Ok(Self::result(&ws.assemble(&opts)))
    }

    /// The assembled prompt when it is already cached (no IO); `Ok(None)` otherwise.
    pub fn assemble_cached(
        &self,
        workspace_id: &str,
        options: Option<AssembleOptions>,
    ) -> Result<Option<AssembleResult>, WorkspaceError> {
        let ws = self.workspaces.require(workspace_id)?;
        let opts = Self::prompt_options(&ws, options);
        Ok(ws.cached(&opts).map(|a| Self::result(&a)))
    }

    fn prompt_options(
        ws: &Workspace,
        options: Option<AssembleOptions>,
    ) -> crate::prompt::PromptOptions {
        let options = options.unwrap_or_default();
        let mut opts = ws.default_options(options.model.as_deref());
        if let Some(f) = options.features {
            opts.features = f;
        }
        if let Some(l) = options.limits {
            opts.limits = l;
        }
        opts
    }

    fn result(a: &crate::prompt::Assembled) -> AssembleResult {
        AssembleResult {
            system: a.system.clone(),
            sha256: a.sha256.clone(),
            sections: a.sections.clone(),
            warnings: a.warnings.clone(),
        }
    }
}
