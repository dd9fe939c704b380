//! Session operations: create, load, list, page through, fork, delete, run turns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::{Engine, EngineError};
use crate::mcp::{McpHub, McpServerConfig};
use crate::message::{Block, ToolSpec};
use crate::provider::{self, ModelSpec};
use crate::session::records::{MessageRecord, SessionOrigin};
use crate::session::store::SessionSummary;
use crate::session::view::Removal;
use crate::session::{Record, SessionHeader, SessionStore};
use crate::tools::Policy;
use crate::turn::{
    self, LiveSession, ModelBinding, SessionSetup, SessionStart, TurnHost, TurnOutcome,
};
use crate::workspace::GitState;
use crate::workspace::Workspace;

/// A session-start git state being read on its own thread.
pub(crate) type GitRead = std::thread::JoinHandle<Option<GitState>>;

/// How long the process waits at exit for the sessions' SessionEnd hooks.
pub(crate) const EXIT_HOOKS_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Most sessions kept in memory; past it the least recently used idle ones are dropped (their
/// transcripts are on disk, and the next request for one loads it again).
pub(crate) const MAX_LIVE_SESSIONS: usize = 256;

struct Entry {
    session: Arc<LiveSession>,
    used: u64,
}

/// Sessions loaded in memory, by id, with least-recently-used eviction.
pub struct Sessions {
    live: Mutex<HashMap<String, Entry>>,
    tick: std::sync::atomic::AtomicU64,
    max: usize,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::with_capacity(MAX_LIVE_SESSIONS)
    }
}

impl Sessions {
    /// Keeps at most `max` sessions in memory (tests use small numbers).
    pub fn with_capacity(max: usize) -> Self {
        Sessions {
            live: Mutex::new(HashMap::new()),
            tick: Default::default(),
            max: max.max(1),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn next_tick(&self) -> u64 {
        self.tick.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The session with this id when it is in memory.
    pub fn live(&self, id: &str) -> Option<Arc<LiveSession>> {
        let tick = self.next_tick();
        self.map().get_mut(id).map(|e| {
            e.used = tick;
            e.session.clone()
        })
    }

    /// How many sessions are in memory.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// True when no session is in memory.
    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }

    /// Adds a session (keeping one already there under the same id) and evicts past the cap.
    pub(crate) fn insert(&self, live: Arc<LiveSession>) -> Arc<LiveSession> {
        let tick = self.next_tick();
        let mut map = self.map();
        let kept = map
            .entry(live.id.clone())
            .or_insert(Entry {
                session: live,
                used: tick,
            })
            .session
            .clone();
        if map.len() > self.max {
            // Only sessions nobody holds (no request is using them), that run nothing and
            // have no client tools (those were registered by `session/new` and are not in
            // the transcript) may go; the rest stay even past the cap.
            let mut idle: Vec<(u64, String)> = map
                .iter()
                .filter(|(id, e)| {
                    **id != kept.id
                        && Arc::strong_count(&e.session) == 1
                        && e.session.try_state().is_some()
                        && !e
                            .session
                            .tools()
                            .entries()
                            .iter()
                            .any(|t| t.source == crate::tools::ToolSource::Client)
                })
                .map(|(id, e)| (e.used, id.clone()))
                .collect();
            idle.sort_unstable();
            let excess = map.len() - self.max;
            for (_, id) in idle.into_iter().take(excess) {
                if let Some(e) = map.remove(&id) {
                    e.session.ended("evicted");
                }
            }
        }
        kept
    }

    /// Every session in memory.
    pub(crate) fn all(&self) -> Vec<Arc<LiveSession>> {
        self.map().values().map(|e| e.session.clone()).collect()
    }

    fn remove(&self, id: &str) -> Option<Arc<LiveSession>> {
        self.map().remove(id).map(|e| e.session)
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
    /// Those of them the client marked read-only: plan mode runs them.
    pub read_only_tools: Vec<String>,
    /// Write the provider's responses to this replay cassette.
    pub record: Option<std::path::PathBuf>,
    /// The front creating it (recorded in the transcript header).
    pub origin: SessionOrigin,
    /// MCP servers the client passed (ACP's `mcpServers`), beside the user's config ones; a
    /// name in both takes the client's entry.
    pub mcp_servers: Vec<(String, McpServerConfig)>,
}

/// Overrides for a stored session brought back by [`Engine::resume_session`].
#[derive(Debug, Clone, Default)]
pub struct ResumeSession {
    /// Approval policy for this process instead of the one stored with the session.
    pub policy: Option<Policy>,
    /// Write the provider's responses to this replay cassette.
    pub record: Option<std::path::PathBuf>,
    /// MCP servers the client passed (ACP's `session/load`), beside the configured ones.
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
    ) -> Result<(SessionSetup, SessionStart, Vec<String>), EngineError> {
        let (binding, mut warnings) = self.binding(model)?;
        let mut tools =
            crate::tools::ToolRegistry::with_options(client_tools, self.config().context.snip)
                .map_err(|e| EngineError::Invalid(e.to_string()))?;
        let skill_dirs = self.config().skills.enabled.then(|| {
            let config_dir = crate::config::Config::user_path();
            let config_dir = config_dir.as_deref().and_then(std::path::Path::parent);
            crate::skills::SkillDirs::of_user(config_dir, self.config().skills.claude_user)
        });
        let skills = std::sync::Arc::new(match &skill_dirs {
            Some(dirs) => crate::skills::discover(&ws.root, dirs),
            None => crate::skills::SkillSet::default(),
        });
        warnings.extend(skills.warnings.iter().cloned());
        if !skills.skills.is_empty() && tools.get(crate::tools::SKILL_TOOL).is_some() {
            warnings.push(format!(
                "a client tool is called {}: the workspace's skills are not offered",
                crate::tools::SKILL_TOOL
            ));
        } else {
            tools = tools.with_skills(skills.clone(), binding.info.context_window);
            let listing = skills.listing(binding.info.context_window);
            warnings.extend(listing.left_out_warning("skills", crate::tools::SKILL_TOOL));
        }
        let agent_settings = self.config().agents.clone();
        let agents = std::sync::Arc::new(if agent_settings.enabled {
            let config_dir = crate::config::Config::user_path();
            let config_dir = config_dir.as_deref().and_then(std::path::Path::parent);
            let mut set = crate::agents::discover(
                &ws.root,
                crate::agents::user_dir(config_dir).as_deref(),
                &crate::tools::ToolRegistry::resolve_names,
            );
            let allowed = self.named_model_check();
            set.vet_models(|m| allowed(m));
            set
        } else {
            crate::agents::AgentSet::default()
        });
        warnings.extend(agents.warnings.iter().cloned());
        let (with_agents, clashes) = tools.with_agents(
            agents.clone(),
            agent_settings.explore,
            binding.info.context_window,
        );
        tools = with_agents;
        if !agents.agents.is_empty() && !clashes.iter().any(|c| c == crate::agents::AGENT_TOOL) {
            let listing = agents.listing(binding.info.context_window);
            warnings.extend(listing.left_out_warning("agents", crate::agents::AGENT_TOOL));
        }
        let mut clashes = clashes;
        // `[web]` is the user's alone; the switch for web_fetch may be the workspace's.
        let anthropic = self
            .provider_config()
            .is_ok_and(|cfg| crate::provider::speaks_anthropic(&binding.spec, &cfg));
        let (with_web, web_clashes) =
            tools.with_web(self.config().web(), ws.config.features.web, anthropic);
        tools = with_web;
        clashes.extend(web_clashes);
        if let Some(index) = ws.code_index() {
            let map = ws.config.features.code_index == Some(crate::prompt::CodeIndex::All);
            let (with_code, code_clashes) = tools.with_code_index(index, map);
            tools = with_code;
            clashes.extend(code_clashes);
        }
        for name in clashes {
            warnings.push(format!(
                "a client tool is called {name}: Garuda's {name} is not offered"
            ));
        }
        let hooks = std::sync::Arc::new(self.hook_set(&ws, &mut warnings));
        let (commands, sandbox) =
            crate::sandbox::session_runner(&self.config().sandbox, ws.root.path());
        if let Some(crate::sandbox::Unconfined::Unavailable(why)) = &sandbox.unconfined {
            warnings.push(format!(
                "commands are not sandboxed ({why}): every command asks for approval"
            ));
        }
        let mcp = self.start_mcp(&ws, mcp_servers);
        if let Some(hub) = &mcp {
            let mcp_tools = hub.tools();
            let plan = hub.defer_plan(&mcp_tools, binding.info.context_window);
            if plan.is_deferred() {
                tracing::info!(target: "garuda::mcp",
                    "{} MCP tool definitions (~{} tokens) exceed {} tokens: deferred behind {}",
                    mcp_tools.len(), plan.total_tokens, plan.budget_tokens, crate::mcp::SEARCH_TOOL_NAME);
            }
            tools = tools
                .with_mcp(&mcp_tools, &plan)
                .map_err(|e| EngineError::Invalid(e.to_string()))?;
        }
        warnings.extend(agents.missing_tools(|names| tools.missing_for_agent(names)));
        Ok((
            SessionSetup {
                commands,
                sandbox,
                workspace: ws,
                model_spec: binding.spec,
                model_id: binding.id,
                provider: binding.provider,
                model_info: binding.info,
                prompt_policy: policy,
                approval_timeout_secs: self.config().approval.timeout_secs,
                view_policy: Default::default(),
                compact: self.config().context.compact_policy(),
                mcp,
                skill_dirs,
                hooks,
                agents,
                agent_settings,
                role: None,
                bind_model: Some(self.binder()),
                tool_clearing: None,
            },
            SessionStart { tools, skills },
            warnings,
        ))
    }

    /// The hooks in force for a session of `ws`: the user's, imported ones, and the
    /// workspace's own once it is trusted; problems become warnings.
    fn hook_set(&self, ws: &Workspace, warnings: &mut Vec<String>) -> crate::hooks::HookSet {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(std::path::PathBuf::from);
        let trust = crate::hooks::TrustList::for_settings(&ws.config.hooks, home.as_deref())
            .unwrap_or_else(|e| {
                warnings.push(format!("hooks: {e}; no workspace is trusted"));
                crate::hooks::TrustList::default()
            });
        let set =
            crate::hooks::HookSet::load(ws.config.hook_config(), &ws.root, &trust, home.as_deref());
        warnings.extend(set.problems().iter().map(|p| format!("hooks: {p}")));
        // Hooks that ran before and now wait for `garuda trust` again: say which and why, as
        // direnv does for a changed `.envrc`.
        warnings.extend(set.trust_notice());
        set
    }

    /// The provider and limits for a model spec, with a warning when the model is unknown.
    fn binding(&self, model: &str) -> Result<(ModelBinding, Vec<String>), EngineError> {
        // Every session start, load and model switch binds a model: one check for all.
        self.config_ready()?;
        let cfg = self.provider_config()?;
        bind(model, &cfg, &self.config().context)
    }

    /// What an agent that names its model binds it with: the provider settings in force
    /// when its caller started. It binds only a model an agent file may name (checked at
    /// the session start too, with a warning; here again so no other way in opens a path).
    fn binder(&self) -> crate::turn::ModelBinder {
        let cfg = self.provider_config();
        let context = self.config().context.clone();
        let allowed = self.named_model_check();
        std::sync::Arc::new(move |model: &str| {
            allowed(model)?;
            let cfg = cfg.as_ref().map_err(ToString::to_string)?;
            bind(model, cfg, &context)
                .map(|(b, _)| b)
                .map_err(|e| e.to_string())
        })
    }

    /// Whether an agent file may name a model: one the user's config or Garuda's table
    /// knows ([`provider::named_model_allowed`]), under the provider settings now.
    fn named_model_check(&self) -> impl Fn(&str) -> Result<(), String> + Send + Sync + 'static {
        let cfg = self.provider_config();
        let configured: Vec<String> = self.config().model.iter().cloned().collect();
        move |model: &str| {
            let cfg = cfg.as_ref().map_err(ToString::to_string)?;
            provider::named_model_allowed(model, cfg, &configured)
        }
    }
}

/// Binds a model spec to its provider and limits, with a warning when the model is unknown.
fn bind(
    model: &str,
    cfg: &crate::provider::ProviderConfig,
    context: &crate::config::ContextSettings,
) -> Result<(ModelBinding, Vec<String>), EngineError> {
    let spec = ModelSpec::parse(model)?;
    let id = match &spec {
        ModelSpec::Remote { model, .. } => model.clone(),
        ModelSpec::Replay(_) => "replay".to_string(),
    };
    let provider = provider::build(model, cfg)?;
    let mut info = provider::model_info(model, cfg);
    // `GARUDA_CONTEXT_WINDOW` lowers every model's window for this run.
    let lowered = context.window(info.context_window);
    if lowered < info.context_window {
        info.window_from = "environment";
    }
    info.context_window = lowered;
    let mut warnings = Vec::new();
    if !info.known {
        let mut known: Vec<&str> = crate::provider::models::table_ids().collect();
        known.extend(cfg.models.keys().filter_map(|k| k.rsplit('/').next()));
        let hint = crate::provider::models::closest(&id, known)
            .map(|k| format!(" (did you mean {k}?)"))
            .unwrap_or_default();
        warnings.push(format!(
                "model {model} is not in Garuda's table{hint}: assuming a {} token window and {} output tokens; set [models.\"{model}\"] in config.toml",
                info.context_window, info.max_output
            ));
    }
    let binding = ModelBinding {
        spec: model.to_string(),
        id,
        provider,
        info,
    };
    Ok((binding, warnings))
}

impl Engine {
    /// Switches a session's model from its next model request on. The system prompt keeps
    /// the model the session started with; the next user message carries a note naming the
    /// new one. Answers warnings (an unknown model's assumed limits).
    pub fn set_model(&self, id: &str, model: &str) -> Result<Vec<String>, EngineError> {
        let live = self.session(id)?;
        let model = model.trim();
        if model.is_empty() {
            return Err(EngineError::Invalid("model must not be empty".into()));
        }
        if model == live.model_spec() {
            return Ok(Vec::new());
        }
        let (binding, warnings) = self.binding(model)?;
        live.switch_model(binding, true);
        Ok(warnings)
    }

    /// Switches a session's approval policy; it applies from the next tool call.
    pub fn set_policy(&self, id: &str, policy: Policy) -> Result<(), EngineError> {
        self.session(id)?.set_policy(policy);
        Ok(())
    }

    /// Models a client may offer for switching: the configured default, the models the
    /// config names, then the built-in table; each once, in that order.
    pub fn known_models(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let cfg = self.config();
        let configured = cfg.model.iter().cloned();
        let named = cfg.models.keys().filter(|k| k.contains('/')).cloned();
        for m in configured
            .chain(named)
            .chain(crate::provider::models::builtin_specs())
        {
            if !out.contains(&m) {
                out.push(m);
            }
        }
        out
    }

    /// Starts the MCP servers of a new session (the user's config ones and `extra`) in the
    /// background; None when there are none. The session's first turn waits for them (at
    /// most their startup timeout) and fixes its tool list then; a server that fails is a
    /// note to the model, and fronts learn of failures through [`McpHub::when_started`].
    fn start_mcp(&self, ws: &Workspace, extra: Vec<(String, McpServerConfig)>) -> Option<McpHub> {
        let servers: Vec<(String, McpServerConfig)> = self
            .config()
            .mcp_servers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(extra)
            .collect();
        if servers.is_empty() {
            return None;
        }
        let hub = McpHub::with_auth(
            servers,
            Some(ws.root.path().to_path_buf()),
            self.config().mcp.defer_share,
            self.mcp_auth(),
        );
        hub.start_background();
        Some(hub)
    }

    /// A session's view settings and the provider's clearing, which replaces the
    /// time-based microcompact where it is on (the provider clears old results without
    /// rewriting Garuda's view).
    fn settle_view(&self, setup: &mut SessionSetup, id: &str, tools: &crate::tools::ToolRegistry) {
        setup.view_policy = self.view_policy(id, &setup.model_info, tools);
        setup.tool_clearing = self.tool_clearing(setup, tools);
        if setup.tool_clearing.is_some() {
            setup.view_policy.microcompact_after_ms = None;
        }
    }

    /// The provider's own clearing of old tool results for a session, when the config
    /// asks for it and its provider and model can: it starts at the collapse threshold,
    /// keeps the results the time-based microcompact would keep, and takes away at least a
    /// tenth of the window each time (a clearing rewrites the cached prefix, so it must be
    /// worth the cache write). Only results of tools that can be called again are cleared.
    fn tool_clearing(
        &self,
        setup: &SessionSetup,
        tools: &crate::tools::ToolRegistry,
    ) -> Option<crate::provider::ToolClearing> {
        let c = &self.config().context;
        if !c.provider_clearing || !setup.provider.clears_tool_uses(&setup.model_id) {
            return None;
        }
        let window = setup.model_info.context_window;
        let clearable = tools.compactable();
        Some(crate::provider::ToolClearing {
            trigger_tokens: (window as f64 * c.collapse_threshold) as u64,
            keep_tool_uses: c.microcompact_keep as u32,
            clear_at_least_tokens: window / 10,
            exclude_tools: tools
                .specs()
                .into_iter()
                .map(|s| s.name)
                .filter(|n| !clearable.contains(n))
                .collect(),
        })
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
        self.config().context.apply_view(&mut p);
        p.compactable_tools = tools.compactable();
        let budget = crate::session::compact::result_budget_chars(
            info.context_window,
            self.config().context.result_share,
        );
        p.tool_result_max_chars = p.tool_result_max_chars.min(budget.max(4_096));
        p.tool_result_preview_chars = p.tool_result_preview_chars.min(p.tool_result_max_chars);
        p
    }

    /// The model a session of `ws` gets when none is named: the configured `model`.
    pub fn configured_model(&self, ws: &Workspace) -> Option<String> {
        ws.config
            .model
            .clone()
            .or_else(|| self.config().model.clone())
    }

    fn default_model(&self, ws: &Workspace) -> Result<String, EngineError> {
        self.configured_model(ws).ok_or(EngineError::NoModel)
    }

    fn default_policy(&self) -> Policy {
        self.config().approval.policy
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
        // git answers while the session is set up (the sandbox probe, MCP, skills, the
        // prompt), so nothing waits on it before the first request.
        let git = self.start_git(&ws);
        let (mut setup, mut start, warnings) = self.setup(
            ws.clone(),
            &model,
            policy,
            req.client_tools,
            req.mcp_servers,
        )?;
        if let Some(path) = req.record {
            setup.provider = provider::recording(setup.provider, path);
        }
        if !req.read_only_tools.is_empty() {
            start.tools = start
                .tools
                .with_read_only_client_tools(&req.read_only_tools);
        }
        let mut header = SessionHeader::new(ws.root.path().display().to_string(), model);
        header.policy = Some(policy_name(policy));
        header.origin = req.origin;
        let mut file = self.store().create(&header)?;
        self.settle_view(&mut setup, &header.session_id, &start.tools);
        let mut records = Vec::new();
        let note = start_note(git.and_then(|h| h.join().ok()).flatten());
        file.append(&note)?;
        records.push(note);
        let live = Arc::new(LiveSession::new(header, setup, start, file, records));
        let live = self.sessions.insert(live);
        Ok((live, warnings))
    }

    /// Asks the session's model server for its window (a local server; cached) and warns
    /// when Garuda's fixed part (system prompt and tool definitions) takes more than half of
    /// the window the session will plan with.
    pub async fn window_warning(&self, live: &LiveSession) -> Vec<String> {
        let server = live.ask_server_window().await;
        let info = live.model().info;
        let (window, from) = crate::session::tokens::planned_window(&info, server, None);
        live.settle_lean(window);
        let fixed =
            crate::session::tokens::TokenEstimator::default().estimate(turn::fixed_chars(live));
        let reported = server.filter(|s| s.tokens < info.context_window).map(|s| {
            format!(
                "the model's server reports a {}-token window ({}): the session plans with it",
                s.tokens, s.source
            )
        });
        let half = (fixed * 2 > window).then(|| {
            format!(
                "Garuda's fixed part (system prompt and {} tool definitions) is about {fixed} \
                 tokens, more than half of the model's {window}-token window ({from}): about {} \
                 tokens are left for the conversation and the answers. Raise the server's \
                 context size (llama.cpp: --ctx-size; Ollama: num_ctx) and the model's \
                 contextWindow if you can",
                live.tool_specs().len(),
                window.saturating_sub(fixed)
            )
        });
        reported.into_iter().chain(half).collect()
    }

    /// Starts reading the repository's git state for the session-start note, on its own
    /// thread; None when off (`[context] git_state = false`). A read started ahead for this
    /// root ([`Engine::read_git_ahead`]) is taken instead.
    fn start_git(&self, ws: &Workspace) -> Option<GitRead> {
        let ahead = super::lock(&self.git_ahead).take();
        if let Some((dir, read)) = ahead
            && dir == ws.root.path()
        {
            return Some(read);
        }
        self.spawn_git(ws.root.path().to_path_buf())
    }

    /// Starts the git state read of the session `garuda exec` is about to start in `dir`,
    /// before the workspace is opened, so the first request waits for git as little as it
    /// can. Nothing happens when the git note is off or `dir` does not exist.
    pub fn read_git_ahead(&self, dir: &std::path::Path) {
        let Ok(dir) = std::fs::canonicalize(dir) else {
            return;
        };
        if let Some(read) = self.spawn_git(dir.clone()) {
            *super::lock(&self.git_ahead) = Some((dir, read));
        }
    }

    fn spawn_git(&self, root: std::path::PathBuf) -> Option<GitRead> {
        let cfg = self.config();
        if !cfg.context.git_state {
            return None;
        }
        let timeout = std::time::Duration::from_millis(cfg.context.git_timeout_ms);
        let settings = cfg.sandbox.clone();
        // Judging the repository reads a few files: on the thread too, off the caller's path.
        std::thread::Builder::new()
            .name("garuda-git".into())
            .spawn(move || {
                // A repository's config can name programs git runs: git runs as the user
                // would only when it names none, else confined, else not at all.
                match crate::workspace::GitSandbox::new(crate::sandbox::probe, &settings, &root) {
                    Ok(sandbox) => crate::workspace::read_git_state(&root, timeout, &sandbox),
                    Err(why) => {
                        tracing::info!("no git state note for {}: {why}", root.display());
                        None
                    }
                }
            })
            .ok()
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
        if let Some(s) = self.live_or_running(id) {
            return Ok(s);
        }
        let req = ResumeSession {
            mcp_servers,
            ..ResumeSession::default()
        };
        let (live, warnings) = self.bring_back(id, req)?;
        for w in warnings {
            tracing::warn!("session {id}: {w}");
        }
        Ok(live)
    }

    /// Brings a stored session back for this process with `req`'s overrides (what
    /// `garuda exec --session` does); also answers the setup's warnings. A session already
    /// in memory takes the policy but is refused a recording (its provider is bound).
    pub fn resume_session(
        &self,
        id: &str,
        req: ResumeSession,
    ) -> Result<(Arc<LiveSession>, Vec<String>), EngineError> {
        if let Some(s) = self.live_or_running(id) {
            if req.record.is_some() {
                return Err(EngineError::Invalid(format!(
                    "session {id} is loaded already; its provider cannot be recorded"
                )));
            }
            if let Some(p) = req.policy {
                s.set_policy(p);
            }
            return Ok((s, Vec::new()));
        }
        self.bring_back(id, req)
    }

    /// The session with this id when it is in memory (no load from disk): what a front asks
    /// of a session it already holds open, without reaching into the engine's tables.
    pub fn session_in_memory(&self, id: &str) -> Option<Arc<LiveSession>> {
        self.sessions.live(id)
    }

    /// The session in memory: a live one, or an agent's sub-session whose call is running
    /// (that copy, now live too: a second one would write the same file). While the call
    /// runs its turns answer `AgentRunning`; reads work.
    fn live_or_running(&self, id: &str) -> Option<Arc<LiveSession>> {
        if let Some(s) = self.sessions.live(id) {
            return Some(s);
        }
        turn::running_agent(id).map(|s| self.sessions.insert(s))
    }

    /// Loads a stored session into memory with `req`'s overrides.
    fn bring_back(
        &self,
        id: &str,
        req: ResumeSession,
    ) -> Result<(Arc<LiveSession>, Vec<String>), EngineError> {
        let loaded = self.store().load(id).map_err(|e| not_found(id, e))?;
        self.bring_back_loaded(id, loaded, req)
    }

    /// [`Self::bring_back`] of a transcript already read. A transcript whose workspace
    /// folder was lost with its header is refused: there is nothing to run it in.
    fn bring_back_loaded(
        &self,
        id: &str,
        loaded: crate::session::Loaded,
        req: ResumeSession,
    ) -> Result<(Arc<LiveSession>, Vec<String>), EngineError> {
        if loaded.header.workspace_root.is_empty() {
            // Checked before the file is opened for appending: nothing is written to it.
            return Err(EngineError::Invalid(format!(
                "session {id}'s header is damaged and its workspace folder could not be recovered, so it cannot be loaded or continued; session/messages pages its {} intact records read-only, and they are in {}",
                loaded.records.len(),
                self.store().path_of(id).display()
            )));
        }
        let (file, loaded) = self.store().reopen(id, loaded)?;
        let ws = self.open_workspace(std::path::Path::new(&loaded.header.workspace_root))?;
        let policy = req.policy.unwrap_or_else(|| {
            loaded
                .header
                .policy
                .as_deref()
                .and_then(|p| p.parse().ok())
                .unwrap_or_else(|| self.default_policy())
        });
        let model = match loaded.header.model.as_str() {
            // A header rebuilt without its model: the configured one.
            "" => self.default_model(&ws)?,
            m => m.to_string(),
        };
        let (mut setup, mut start, warnings) =
            self.setup(ws, &model, policy, Vec::new(), req.mcp_servers)?;
        if let Some(link) = &loaded.header.parent {
            as_agent(&mut setup, &mut start, link);
        }
        if let Some(path) = req.record {
            setup.provider = provider::recording(setup.provider, path);
        }
        self.settle_view(&mut setup, id, &start.tools);
        let switched = switched_model(&loaded.records).filter(|m| *m != loaded.header.model);
        let live = Arc::new(LiveSession::new(
            loaded.header,
            setup,
            start,
            file,
            loaded.records,
        ));
        if let Some(model) = switched {
            match self.binding(&model) {
                Ok((binding, _)) => live.switch_model(binding, false),
                Err(e) => tracing::warn!("session {id}: switched model {model} unavailable: {e}"),
            }
        }
        Ok((self.sessions.insert(live), warnings))
    }

    /// The session of a workspace with the newest activity (its last record), if it has any.
    pub fn latest_session(&self, workspace_id: &str) -> Result<Option<String>, EngineError> {
        // Listed most recently active first; an agent's sub-session is part of its caller's,
        // never the one to continue.
        Ok(self
            .list_sessions(workspace_id)?
            .into_iter()
            .find(|s| s.parent.is_none())
            .map(|s| s.id))
    }

    /// Sessions stored for a workspace, most recently active first.
    pub fn list_sessions(&self, workspace_id: &str) -> Result<Vec<SessionSummary>, EngineError> {
        let ws = self.workspaces.require(workspace_id)?;
        Ok(self
            .store()
            .list_workspace(&ws.root.path().display().to_string())?)
    }

    /// A page of the durable history (every message, including ones the model no longer sees).
    /// A transcript whose header and workspace folder are lost is paged read-only from disk
    /// (it cannot be loaded: there is no workspace to run it in).
    pub fn messages(
        &self,
        id: &str,
        cursor: Option<u64>,
        limit: Option<u64>,
    ) -> Result<HistoryPage, EngineError> {
        let (records, policy) = match self.live_or_running(id) {
            Some(live) => (self.records_of(&live)?, live.setup.view_policy.clone()),
            None => {
                let loaded = self.store().load(id).map_err(|e| not_found(id, e))?;
                if loaded.header.workspace_root.is_empty() {
                    (loaded.records, self.store().view_policy(id))
                } else {
                    let (live, warnings) =
                        self.bring_back_loaded(id, loaded, ResumeSession::default())?;
                    for w in warnings {
                        tracing::warn!("session {id}: {w}");
                    }
                    (self.records_of(&live)?, live.setup.view_policy.clone())
                }
            }
        };
        Ok(history_page(&records, &policy, cursor, limit))
    }

    /// A live session's records: from memory, or from disk while an operation holds them
    /// (reading instead of waiting).
    fn records_of(&self, live: &LiveSession) -> Result<Vec<Record>, EngineError> {
        Ok(match live.try_state() {
            Some(s) => s.records().to_vec(),
            None => self.store().load(live.id())?.records,
        })
    }

    /// Waits, up to `wait`, for the session-memory updates in flight and writes what they
    /// brought (`garuda exec` before it exits: the next process compacts from those notes).
    pub async fn settle_memory(&self, wait: std::time::Duration) {
        let all: Vec<_> = self
            .sessions
            .all()
            .into_iter()
            .map(|s| async move { turn::settle_memory(&s).await })
            .collect();
        if all.is_empty() {
            return;
        }
        if tokio::time::timeout(wait, futures_util::future::join_all(all))
            .await
            .is_err()
        {
            tracing::warn!(
                "a session memory update still running after {} s at exit: left behind",
                wait.as_secs()
            );
        }
    }

    /// The process is exiting: the SessionEnd hooks (reason `exit`) of every session still
    /// in memory run together, and this waits for them up to [`EXIT_HOOKS_WAIT`].
    pub async fn end_sessions_at_exit(&self) {
        let ends: Vec<_> = self
            .sessions
            .all()
            .into_iter()
            .map(|s| async move { s.end_at_exit().await })
            .collect();
        if ends.is_empty() {
            return;
        }
        let all = futures_util::future::join_all(ends);
        if tokio::time::timeout(EXIT_HOOKS_WAIT, all).await.is_err() {
            tracing::warn!(
                target: "garuda::hooks",
                "SessionEnd hooks still running after {} s at exit: left behind",
                EXIT_HOOKS_WAIT.as_secs()
            );
        }
    }

    /// Stops a session's running operation and frees it from memory; its transcript stays
    /// (a later `session` call loads it again). False when it was not in memory.
    pub(crate) fn close_session(&self, id: &str) -> bool {
        match self.sessions.remove(id) {
            Some(live) => {
                live.cancel();
                live.ended("close");
                true
            }
            None => false,
        }
    }

    /// Deletes a session's transcript (and stops it when live).
    pub fn delete_session(&self, id: &str) -> Result<(), EngineError> {
        if let Some(live) = self.sessions.remove(id) {
            live.cancel();
            live.ended("delete");
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

    /// Takes back "allow always" in a session for `tool` (None: every tool). Returns the
    /// tools revoked and those still allowed always. A stored session that is not in memory
    /// has none: the answers are not stored.
    pub fn revoke_permission(
        &self,
        id: &str,
        tool: Option<&str>,
    ) -> Result<(Vec<String>, Vec<String>), EngineError> {
        if let Some(live) = self.sessions.live(id) {
            let revoked = live.revoke(tool);
            return Ok((revoked, live.always_allowed()));
        }
        if self.store().exists(id)? {
            Ok((Vec::new(), Vec::new()))
        } else {
            Err(EngineError::SessionNotFound(id.to_string()))
        }
    }

    /// Runs one user turn.
    pub async fn run_turn(
        &self,
        id: &str,
        input: Vec<Block>,
        host: Arc<dyn TurnHost>,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, EngineError> {
        self.run_turn_with(id, input, host, cancel, turn::TurnOptions::default())
            .await
    }

    /// [`Engine::run_turn`] with a caller's step and cost limits and output schema.
    pub async fn run_turn_with(
        &self,
        id: &str,
        input: Vec<Block>,
        host: Arc<dyn TurnHost>,
        cancel: CancellationToken,
        opts: turn::TurnOptions,
    ) -> Result<TurnOutcome, EngineError> {
        // Only the provider makes its blocks; a client's would reach the model unchecked.
        if input.iter().any(|b| matches!(b, Block::Provider { .. })) {
            return Err(EngineError::Invalid(
                "a turn's input cannot hold a provider block: only the model's messages carry them"
                    .into(),
            ));
        }
        let live = self.session(id)?;
        Ok(turn::run_turn_with(&live, input, host, cancel, turn::DEFAULT_MAX_STEPS, opts).await?)
    }
}

/// One message of the durable history and why the model no longer sees it, if it does not.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    /// The transcript record.
    pub message: MessageRecord,
    /// Why it is out of the model's view.
    pub removed: Option<Removal>,
    /// For a step a compaction re-installed: the first message it copies (copies of copies
    /// are followed back to it).
    pub copy_of: Option<String>,
}

/// The message a chain of copies starts from; stops on a cycle (a damaged transcript).
fn original_of<'a>(copies: &HashMap<&'a str, &'a str>, mut id: &'a str) -> &'a str {
    for _ in 0..copies.len() {
        match copies.get(id) {
            Some(next) => id = next,
            None => break,
        }
    }
    id
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

/// A stored agent's sub-session loads again as that agent: its tools and its prompt, no
/// MCP servers and no skills.
fn as_agent(setup: &mut SessionSetup, start: &mut SessionStart, link: &crate::session::ParentLink) {
    // The agent tools are in `link.tools` only when nesting gave them; the MCP tools it
    // names come from the servers started for this load, client tools are gone with the
    // client that had them.
    start.tools = crate::tools::ToolRegistry::for_agent(
        &link.tools,
        &start.tools,
        Some(setup.agents.clone()),
        setup.model_info.context_window,
    );
    setup.role = Some(crate::agents::AgentRole {
        name: link.agent.clone(),
        prompt: link.prompt.clone(),
        depth: link.depth,
    });
    if !start.tools.has_mcp() {
        setup.mcp = None;
    }
    if !start.tools.is_skill(crate::tools::SKILL_TOOL) {
        start.skills = Arc::new(crate::skills::SkillSet::default());
    }
    setup.skill_dirs = None;
}

/// The model the last model note of a transcript names.
fn switched_model(records: &[Record]) -> Option<String> {
    records.iter().rev().find_map(|r| {
        let m = r.as_message()?;
        if m.meta != Some(crate::session::records::MessageMeta::ModelNote) {
            return None;
        }
        m.content.iter().find_map(|b| match b {
            Block::Text { text } => turn::model_in_note(text).map(str::to_string),
            _ => None,
        })
    })
}

fn now_ms_plain() -> u64 {
    crate::session::records::now_ms()
}

/// The wire name of a policy.
pub fn policy_name(p: Policy) -> String {
    p.name().to_string()
}

/// The session-start context as the session's first record: today's date and, in a
/// repository, its git state (a note the first request carries, so the system prompt stays
/// byte-stable). The git part is left out when off, outside a repository, or when git did not
/// answer in time.
fn start_note(git: Option<GitState>) -> Record {
    let git = git.map(|s| crate::workspace::git_note(&s));
    let text = crate::workspace::start_note(&crate::workspace::today(), git.as_deref());
    let mut m = MessageRecord::new(crate::message::Role::User, vec![Block::text(text)], None);
    m.meta = Some(crate::session::records::MessageMeta::GitState);
    Record::Message(m)
}

/// One page of `records`' messages, each marked with whether the view built with `policy`
/// still holds it.
fn history_page(
    records: &[Record],
    policy: &crate::session::view::ViewPolicy,
    cursor: Option<u64>,
    limit: Option<u64>,
) -> HistoryPage {
    let view = crate::session::view::build_view(records, policy, now_ms_plain());
    let marks = crate::session::view::removal_marks(records, &view);
    let copies: HashMap<&str, &str> = records
        .iter()
        .filter_map(Record::as_message)
        .filter_map(|m| Some((m.uuid.as_str(), m.copy_of.as_deref()?)))
        .collect();
    let all: Vec<HistoryEntry> = records
        .iter()
        .filter_map(Record::as_message)
        .map(|m| HistoryEntry {
            message: m.clone(),
            removed: marks.get(&m.uuid).copied(),
            copy_of: m
                .copy_of
                .as_deref()
                .map(|c| original_of(&copies, c).to_string()),
        })
        .collect();
    let start = cursor.unwrap_or(0) as usize;
    let limit = limit.unwrap_or(200).clamp(1, 10_000) as usize;
    let end = (start + limit).min(all.len());
    let page = all.get(start..end).map(<[_]>::to_vec).unwrap_or_default();
    HistoryPage {
        messages: page,
        next_cursor: (end < all.len()).then_some(end as u64),
        total: all.len() as u64,
    }
}

/// A store error of session `id` as the engine's: a missing transcript is an unknown session.
fn not_found(id: &str, e: crate::session::StoreError) -> EngineError {
    match e {
        crate::session::StoreError::NotFound(_) => EngineError::SessionNotFound(id.to_string()),
        other => other.into(),
    }
}
