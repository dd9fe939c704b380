//! Session operations: create, load, list, page through, fork, delete, run turns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::{Engine, EngineError};
use crate::mcp::{McpHub, McpServerConfig, McpServerState};
use crate::message::{Block, ToolSpec};
use crate::provider::{self, ModelSpec};
use crate::session::records::MessageRecord;
use crate::session::store::SessionSummary;
use crate::session::view::Removal;
use crate::session::{Record, SessionHeader, SessionStore};
use crate::tools::Policy;
use crate::turn::{self, LiveSession, SessionSetup, TurnHost, TurnOutcome};
use crate::workspace::Workspace;

/// Sessions loaded in memory, by id.
#[derive(Default)]
pub struct Sessions {
    live: Mutex<HashMap<String, Arc<LiveSession>>>,
}

impl Sessions {
    /// The session with this id when it is in memory.
    pub fn live(&self, id: &str) -> Option<Arc<LiveSession>> {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }
}

/// What a new session is made of.
#[derive(Debug, Clone, Default)]
pub struct NewSession {
    /// Model spec (default: the configured model).
    pub model: Option<String>,
    /// Approval policy (default: the configured one).
    pub policy: Option<Policy>,
    /// Tools the client registered.
    pub client_tools: Vec<ToolSpec>,
    /// Write the provider's responses to this replay cassette.
    pub record: Option<std::path::PathBuf>,
    /// MCP servers the client passed (ACP's `mcpServers`), beside the user's config ones; a
    /// name in both takes the client's entry.
    pub mcp_servers: Vec<(String, McpServerConfig)>,
}

impl Engine {
    /// The transcript store.
    pub fn store(&self) -> SessionStore {
        SessionStore::new(self.state_dir.join("sessions"))
    }

    fn setup(
        &self,
        ws: Arc<Workspace>,
        model: &str,
        policy: Policy,
        client_tools: Vec<ToolSpec>,
        mcp_servers: Vec<(String, McpServerConfig)>,
    ) -> Result<(SessionSetup, Vec<String>), EngineError> {
        let cfg = self.provider_config()?;
        let spec = ModelSpec::parse(model)?;
        let model_id = match &spec {
            ModelSpec::Remote { model, .. } => model.clone(),
            ModelSpec::Replay(_) => "replay".to_string(),
        };
        let provider = provider::build(model, &cfg)?;
        let model_info = provider::model_info(model, &cfg);
        let mut warnings = Vec::new();
        if !model_info.known {
            warnings.push(format!(
                "model {model} is not in Garuda's table: assuming a {} token window and {} output tokens; set [models.\"{model}\"] in config.toml",
                model_info.context_window, model_info.max_output
            ));
        }
        let mut tools = crate::tools::ToolRegistry::for_session(client_tools)
            .map_err(|e| EngineError::Invalid(e.to_string()))?;
        let mcp = self.start_mcp(&ws, mcp_servers, &mut warnings);
        if let Some(hub) = &mcp {
            let mcp_tools = hub.tools();
            let specs: Vec<ToolSpec> = mcp_tools.iter().map(|t| t.spec.clone()).collect();
            let plan = crate::mcp::defer::plan(
                &specs,
                model_info.context_window,
                self.config.mcp.defer_share,
            );
            if plan.is_deferred() {
                tracing::info!(target: "garuda::mcp",
                    "{} MCP tool definitions (~{} tokens) exceed {} tokens: deferred behind {}",
                    specs.len(), plan.total_tokens, plan.budget_tokens, crate::mcp::SEARCH_TOOL_NAME);
            }
            tools = tools
                .with_mcp(&mcp_tools, &plan)
                .map_err(|e| EngineError::Invalid(e.to_string()))?;
        }
        Ok((
            SessionSetup {
                workspace: ws,
                model_spec: model.to_string(),
                model_id,
                provider,
                model_info,
                policy,
                tools,
                approval_timeout_secs: self.config.approval.timeout_secs,
                view_policy: Default::default(),
                compact: self.config.context.compact_policy(),
                mcp,
            },
            warnings,
        ))
    }

    /// Starts the MCP servers of a new session (the user's config ones and `extra`), blocking
    /// until each is ready or failed; None when there are none. A server that fails adds a
    /// warning; the session goes on without it.
    fn start_mcp(
        &self,
        ws: &Workspace,
        extra: Vec<(String, McpServerConfig)>,
        warnings: &mut Vec<String>,
    ) -> Option<McpHub> {
        let servers: Vec<(String, McpServerConfig)> = self
            .config
            .mcp_servers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(extra)
            .collect();
        if servers.is_empty() {
            return None;
        }
        let hub = McpHub::new(
            servers,
            Some(ws.root.path().to_path_buf()),
            self.config.mcp.defer_share,
        );
        hub.start_blocking();
        for s in hub.servers() {
            if let McpServerState::Failed { reason } = s.state {
                warnings.push(format!("MCP server {} failed to start: {reason}", s.name));
            }
        }
        Some(hub)
    }

    /// A session's view pipeline settings: the config's, with one tool result held to its
    /// share of the model's window.
    fn view_policy(
        &self,
        id: &str,
        info: &crate::provider::ModelInfo,
        tools: &crate::tools::ToolRegistry,
    ) -> crate::session::view::ViewPolicy {
        let mut p = self.store().view_policy(id);
        self.config.context.apply_view(&mut p);
        p.compactable_tools = tools.compactable();
        let budget = crate::session::compact::result_budget_chars(
            info.context_window,
            self.config.context.result_share,
        );
        p.tool_result_max_chars = p.tool_result_max_chars.min(budget.max(4_096));
        p.tool_result_preview_chars = p.tool_result_preview_chars.min(p.tool_result_max_chars);
        p
    }

    fn default_model(&self, ws: &Workspace) -> Result<String, EngineError> {
        ws.config.model.clone().or_else(|| self.config.model.clone()).ok_or_else(|| {
            EngineError::Config(
                "no model configured: pass `model` (e.g. \"anthropic/claude-sonnet-4-5\", \"ollama/qwen3-coder\", or \"replay:PATH\" to play a recorded cassette offline) or set `model = \"...\"` in $XDG_CONFIG_HOME/garuda/config.toml".into(),
            )
        })
    }

    fn default_policy(&self) -> Policy {
        self.config.approval.policy
    }

    /// Creates a session in an open workspace.
    pub fn new_session(
        &self,
        workspace_id: &str,
        req: NewSession,
    ) -> Result<(Arc<LiveSession>, Vec<String>), EngineError> {
        let ws = self.workspaces.require(workspace_id)?;
        let model = match req.model {
            Some(m) => m,
            None => self.default_model(&ws)?,
        };
        let policy = req.policy.unwrap_or_else(|| self.default_policy());
        let (mut setup, warnings) = self.setup(
            ws.clone(),
            &model,
            policy,
            req.client_tools,
            req.mcp_servers,
        )?;
        if let Some(path) = req.record {
            setup.provider = provider::recording(setup.provider, path);
        }
        let mut header = SessionHeader::new(ws.root.path().display().to_string(), model);
        header.policy = Some(policy_name(policy));
        let file = self.store().create(&header)?;
        setup.view_policy = self.view_policy(&header.session_id, &setup.model_info, &setup.tools);
        let live = Arc::new(LiveSession::new(header, setup, file, Vec::new()));
        self.sessions
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(live.id.clone(), live.clone());
        Ok((live, warnings))
    }

    /// The live session with this id, loading it from disk (after a restart) when needed.
    pub fn session(&self, id: &str) -> Result<Arc<LiveSession>, EngineError> {
        self.load_session(id, Vec::new())
    }

    /// [`Self::session`], with MCP servers the client passed (ACP's `session/load`) started
    /// beside the configured ones when the session is brought back from disk.
    pub fn load_session(
        &self,
        id: &str,
        mcp_servers: Vec<(String, McpServerConfig)>,
    ) -> Result<Arc<LiveSession>, EngineError> {
        if let Some(s) = self
            .sessions
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
        {
            return Ok(s.clone());
        }
        let (file, loaded) = self.store().resume(id).map_err(|e| match e {
            crate::session::StoreError::NotFound(_) => EngineError::SessionNotFound(id.to_string()),
            other => other.into(),
        })?;
        let ws = self.open_workspace(std::path::Path::new(&loaded.header.workspace_root))?;
        let policy = loaded
            .header
            .policy
            .as_deref()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| self.default_policy());
        let (mut setup, warnings) = self.setup(
            ws,
            &loaded.header.model.clone(),
            policy,
            Vec::new(),
            mcp_servers,
        )?;
        for w in warnings {
            tracing::warn!("{w}");
        }
        setup.view_policy = self.view_policy(id, &setup.model_info, &setup.tools);
        let live = Arc::new(LiveSession::new(loaded.header, setup, file, loaded.records));
        let mut map = self.sessions.live.lock().unwrap_or_else(|p| p.into_inner());
        Ok(map.entry(id.to_string()).or_insert(live).clone())
    }

    /// Sessions stored for a workspace, newest first.
    pub fn list_sessions(&self, workspace_id: &str) -> Result<Vec<SessionSummary>, EngineError> {
        let ws = self.workspaces.require(workspace_id)?;
        let mut list = self
            .store()
            .list_workspace(&ws.root.path().display().to_string())?;
        list.sort_by(|a, b| b.created.cmp(&a.created).then_with(|| b.id.cmp(&a.id)));
        Ok(list)
    }

    /// A page of the durable history (every message, including ones the model no longer sees).
    pub fn messages(
        &self,
        id: &str,
        cursor: Option<u64>,
        limit: Option<u64>,
    ) -> Result<HistoryPage, EngineError> {
        let live = self.session(id)?;
        let records: Vec<Record> = match live.try_state() {
            Some(s) => s.records.clone(),
            // An operation is running: read what is on disk instead of waiting for it.
            None => self.store().load(id)?.records,
        };
        let view =
            crate::session::view::build_view(&records, &live.setup.view_policy, now_ms_plain());
        let marks = crate::session::view::removal_marks(&records, &view);
        let all: Vec<HistoryEntry> = records
            .iter()
            .filter_map(Record::as_message)
            .map(|m| HistoryEntry {
                message: m.clone(),
                removed: marks.get(&m.uuid).copied(),
            })
            .collect();
        let start = cursor.unwrap_or(0) as usize;
        let limit = limit.unwrap_or(200).clamp(1, 10_000) as usize;
        let end = (start + limit).min(all.len());
        let page = all.get(start..end).map(<[_]>::to_vec).unwrap_or_default();
        Ok(HistoryPage {
            messages: page,
            next_cursor: (end < all.len()).then_some(end as u64),
            total: all.len() as u64,
        })
    }

    /// Deletes a session's transcript (and stops it when live).
    pub fn delete_session(&self, id: &str) -> Result<(), EngineError> {
        if let Some(live) = self
            .sessions
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
        {
            live.cancel();
        }
        self.store().delete(id).map_err(|e| match e {
            crate::session::StoreError::NotFound(_) => EngineError::SessionNotFound(id.to_string()),
            other => other.into(),
        })
    }

    /// Copies a session (up to a message) into a new one.
    pub fn fork_session(
        &self,
        id: &str,
        at_message_id: Option<&str>,
    ) -> Result<String, EngineError> {
        self.store().fork(id, at_message_id).map_err(|e| match e {
            crate::session::StoreError::NotFound(_) => EngineError::SessionNotFound(id.to_string()),
            other => other.into(),
        })
    }

    /// Runs one user turn.
    pub async fn run_turn(
        &self,
        id: &str,
        input: Vec<Block>,
        host: Arc<dyn TurnHost>,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, EngineError> {
        let live = self.session(id)?;
        Ok(turn::run_turn(&live, input, host, cancel, turn::DEFAULT_MAX_STEPS).await?)
    }
}

/// One message of the durable history and why the model no longer sees it, if it does not.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    /// The transcript record.
    pub message: MessageRecord,
    /// Why it is out of the model's view.
    pub removed: Option<Removal>,
}

/// A page of the durable history.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    /// The messages, in transcript order.
    pub messages: Vec<HistoryEntry>,
    /// Where the next page starts, when there is one.
    pub next_cursor: Option<u64>,
    /// Messages in all.
    pub total: u64,
}

fn now_ms_plain() -> u64 {
    crate::session::records::now_ms()
}

/// The wire name of a policy.
pub fn policy_name(p: Policy) -> String {
    p.name().to_string()
}
