//! Configuration: the user's `config.toml` and the harmless subset a workspace may set.
//!
//! Provider endpoints, keys and approval policy come only from the user's file: a cloned
//! repository must not be able to point Garuda at another server or weaken approvals.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::prompt::{Features, InstructionSettings, Limits};

pub mod check;
use crate::provider::{ModelOverride, ProviderConfig, ProviderEntry};
pub use check::{Checked, ConfigProblem, Severity};

/// A configuration file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The file is not valid TOML or has wrong types; the message names line and column.
    #[error("invalid config {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// The file has errors (invalid values, broken TOML), each named with its line and key.
    #[error("{}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid {
        /// The errors (warnings too, for the full picture).
        problems: Vec<ConfigProblem>,
    },
    /// An environment override has a value that cannot be used.
    #[error("invalid environment variable {var}={value:?}: {message}")]
    Env {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
        /// What is wrong with it.
        message: String,
    },
}

/// Lowers the context window of every model for one run (tokens; never raises it).
pub const ENV_CONTEXT_WINDOW: &str = "GARUDA_CONTEXT_WINDOW";
/// Lowers the compaction threshold for one run: a share of the window (`0.5`) or a
/// percentage (`50%`); never raises it.
pub const ENV_COMPACT_THRESHOLD: &str = "GARUDA_COMPACT_THRESHOLD";
/// Environment variable that sets `[context] cache_breaker` (debugging the prompt cache).
pub const ENV_CACHE_BREAKER: &str = "GARUDA_CACHE_BREAKER";
/// Environment variable that sets `[context] session_memory` (`on` or `off`): a script that
/// wants no request beside its turns turns it off without a config file.
pub const ENV_SESSION_MEMORY: &str = "GARUDA_SESSION_MEMORY";

/// Everything Garuda can be configured with.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Default model spec, e.g. `anthropic/claude-sonnet-4-5`, `ollama/qwen3-coder`, `replay:PATH`.
    pub model: Option<String>,
    /// Optional prompt features.
    pub features: Features,
    /// Instruction and memory budgets.
    pub limits: Limits,
    /// Which places instructions are read from, and the budgets of the files outside the
    /// system prompt's shared limit.
    pub instructions: InstructionSettings,
    /// The user-global instruction file, `$XDG_CONFIG_HOME/garuda/AGENTS.md` (set when the
    /// user's config is loaded; never from a file).
    #[serde(skip)]
    pub global_instructions: Option<PathBuf>,
    /// Transport settings.
    pub server: ServerSettings,
    /// Approval settings.
    pub approval: ApprovalSettings,
    /// Provider endpoints by name, e.g. `[providers.ollama]` (user config only).
    pub providers: BTreeMap<String, ProviderEntry>,
    /// Model table overrides, e.g. `[models."ollama/qwen3-coder"] contextWindow = 32768`.
    pub models: BTreeMap<String, ModelOverride>,
    /// Timeouts and retries for provider calls.
    pub network: NetworkSettings,
    /// Context pipeline and compaction settings.
    pub context: ContextSettings,
    /// The sandbox commands run in (user config only).
    pub sandbox: crate::sandbox::SandboxSettings,
    /// MCP servers by name, e.g. `[mcp_servers.github]` (user config only: a workspace's
    /// file must not start processes).
    pub mcp_servers: BTreeMap<String, crate::mcp::McpServerConfig>,
    /// MCP settings for all servers (`[mcp]`).
    pub mcp: crate::mcp::McpSettings,
    /// Skills (`[skills]`, user config only: it may read the user's `~/.claude/skills`).
    pub skills: crate::skills::SkillSettings,
    /// Agents (`[agents]`, user config only): custom agents, `explore`, nesting, bounds.
    pub agents: crate::agents::AgentSettings,
    /// Hooks (`[hooks]`, `[[hooks.EVENT]]`): the user's own, and which others to import.
    pub hooks: crate::hooks::HooksSettings,
    /// The web tools (`[web]`, user config only: a workspace's file must not open internal
    /// hosts, skip the question or name a search backend).
    pub web: crate::web::WebSettings,
    /// The workspace's own `[hooks]` with the file they came from (set by
    /// [`Config::with_workspace`]; they run only in a trusted workspace).
    #[serde(skip)]
    pub workspace_hooks: Option<(PathBuf, crate::hooks::HooksSettings)>,
}

/// Context pipeline and compaction settings (`[context]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
pub struct ContextSettings {
    /// Compact above this share of the window.
    pub threshold: f64,
    /// Stage 1 alone suffices at or below this share of the window.
    pub target: f64,
    /// Assistant turns kept in full by a compaction.
    pub keep_steps: usize,
    /// Trigger at window − min(max output, 20 000) − 13 000 instead of `threshold`.
    pub reserved_formula: bool,
    /// Minutes since the last answer after which old tool results are cleared (0: never).
    pub microcompact_minutes: u64,
    /// Most recent tool results the time-based clearing keeps.
    pub microcompact_keep: usize,
    /// Tool results over this many characters go to a side file, with a preview in the view.
    pub tool_result_max_chars: usize,
    /// Characters of such a result kept as preview.
    pub tool_result_preview_chars: usize,
    /// Stage 1 cuts older tool results longer than this many characters...
    pub trim_over: usize,
    /// ...to this many, plus a note.
    pub trim_to: usize,
    /// Files re-read from disk after a compaction, most recent first.
    pub restore_files: usize,
    /// Most tokens of one restored file (a larger one comes back as its path).
    pub restore_file_tokens: u64,
    /// Most tokens of all restored files together.
    pub restore_total_tokens: u64,
    /// Retries of a summary request the provider refused as too long (each re-splits the
    /// older part into smaller chunks under the limit the refusal named).
    pub max_ptl_retries: u32,
    /// Consecutive failures after which auto-compaction pauses.
    pub max_failures: u32,
    /// Size target of the model's summary, as a share of the window (at most 20 000 tokens).
    pub summary_share: f64,
    /// Budget of the user's own messages carried verbatim, as a share of the window (at
    /// most 20 000 tokens).
    pub user_words_share: f64,
    /// Model steps after a summary before another summary may run (escalation without the
    /// model covers the gap).
    pub min_summary_gap: u32,
    /// The most of the window one tool result takes whole (0 or 1: no cap beyond
    /// `tool_result_max_chars` and the tools' own limits).
    pub result_share: f64,
    /// Compact automatically above the threshold (and reactively after a prompt-too-long).
    /// Off: nothing compacts unless asked, and a request that would not fit the window is
    /// refused before it is sent (-32060, `kind: "blockingLimit"`).
    pub auto_compact: bool,
    /// Offer the model the `snip` tool (and the context_efficiency nudge that suggests it).
    pub snip: bool,
    /// The context_efficiency nudge: after the context grew by this share of the window
    /// without a snip, the model gets a note suggesting one (0: never).
    pub nudge_share: f64,
    /// Collapse an older span into a summary by itself between `collapse_threshold` and the
    /// compaction threshold (the cheaper relief before a compaction).
    pub auto_collapse: bool,
    /// Automatic collapse starts above this share of the window.
    pub collapse_threshold: f64,
    /// The least an automatic collapse takes away, as a share of the window.
    pub collapse_min_share: f64,
    /// The automatic collapse starts at most at this many tokens, whatever the window (0: no
    /// cap): every request re-reads the whole context, so an old span costs by its size.
    pub collapse_max_tokens: u64,
    /// The compaction summarizer: `auto` (the worker when the older part does not fit one
    /// summary request), `worker` (always the worker) or `single` (one request, chunked).
    pub summarizer: crate::session::compact::Summarizer,
    /// Capture the repository's git state (branch, status, recent commits) at session start.
    pub git_state: bool,
    /// The longest the git state may take, in milliseconds (then it is skipped).
    pub git_timeout_ms: u64,
    /// Let the provider clear old tool results itself where it can (Anthropic's context
    /// editing on its own API, Claude 4 models): the cached microcompact of seed rows
    /// 122–126. Off: the time-based microcompact, as everywhere else.
    pub provider_clearing: bool,
    /// A debugging switch (seed row 97): text appended to the end of every session's system
    /// prompt, so no request reads a prefix cached before it changed (empty: none).
    /// `GARUDA_CACHE_BREAKER` sets it too.
    pub cache_breaker: String,
    /// Keep a session memory (running notes in the summary's sections) current in the
    /// background after turns, and compact from it first: no summary call at that moment.
    pub session_memory: bool,
    /// The memory is kept once the context passes this share of the window; idle compaction
    /// applies from there too.
    pub memory_start: f64,
    /// The memory is asked again once the context grew by this share of the window.
    pub memory_step: f64,
    /// Compact a session left idle with a large context shortly before its provider cache
    /// expires (or, when nothing ran then, at its next turn after), from the session memory.
    pub idle_compaction: bool,
    /// How long the provider keeps a prompt cache entry after its last use, in seconds
    /// (Anthropic: 300, or 3 600 with the one-hour cache).
    pub cache_ttl_secs: u64,
    /// `GARUDA_CONTEXT_WINDOW`: the window of every model, at most (read once at load).
    #[serde(skip)]
    pub window_override: Option<u64>,
    /// `GARUDA_COMPACT_THRESHOLD`: the threshold share, at most (read once at load).
    #[serde(skip)]
    pub threshold_override: Option<f64>,
}

impl Default for ContextSettings {
    fn default() -> Self {
        ContextSettings {
            threshold: 0.8,
            target: 0.6,
            keep_steps: 4,
            reserved_formula: false,
            microcompact_minutes: 60,
            microcompact_keep: 5,
            tool_result_max_chars: 50_000,
            tool_result_preview_chars: 2_000,
            trim_over: 1_000,
            trim_to: 200,
            restore_files: 5,
            restore_file_tokens: 5_000,
            restore_total_tokens: 50_000,
            max_ptl_retries: 3,
            max_failures: 3,
            summary_share: 0.1,
            user_words_share: 0.1,
            min_summary_gap: 3,
            result_share: 0.1,
            auto_compact: true,
            snip: true,
            nudge_share: 0.1,
            auto_collapse: true,
            collapse_threshold: 0.6,
            collapse_min_share: 0.05,
            collapse_max_tokens: 60_000,
            summarizer: crate::session::compact::Summarizer::Auto,
            git_state: true,
            git_timeout_ms: 2_000,
            window_override: None,
            provider_clearing: false,
            cache_breaker: String::new(),
            session_memory: true,
            memory_start: 0.3,
            memory_step: 0.1,
            idle_compaction: true,
            cache_ttl_secs: 300,
            threshold_override: None,
        }
    }
}

impl ContextSettings {
    /// The compaction policy these settings describe.
    pub fn compact_policy(&self) -> crate::session::compact::CompactPolicy {
        crate::session::compact::CompactPolicy {
            threshold: self.threshold.clamp(0.05, 1.0),
            target: self.target.clamp(0.0, self.threshold.clamp(0.05, 1.0)),
            keep_steps: self.keep_steps.max(1),
            use_reserved_formula: self.reserved_formula,
            trim_over: self.trim_over,
            trim_to: self.trim_to.min(self.trim_over),
            restore_files: self.restore_files,
            restore_file_tokens: self.restore_file_tokens,
            restore_total_tokens: self.restore_total_tokens,
            max_ptl_retries: self.max_ptl_retries,
            max_failures: self.max_failures.max(1),
            summary_share: self.summary_share.clamp(0.01, 0.5),
            user_words_share: self.user_words_share.clamp(0.0, 0.5),
            min_summary_gap: self.min_summary_gap,
            result_share: self.result_share,
            threshold_cap: self.threshold_override,
            auto_compact: self.auto_compact,
            nudge_share: self.nudge_share.clamp(0.0, 1.0),
            auto_collapse: self.auto_collapse,
            collapse_threshold: self.collapse_threshold.clamp(0.0, 1.0),
            collapse_min_share: self.collapse_min_share.clamp(0.0, 1.0),
            collapse_max_tokens: self.collapse_max_tokens,
            summarizer: self.summarizer,
            session_memory: self.session_memory,
            memory_start: self.memory_start.clamp(0.0, 1.0),
            memory_step: self.memory_step.clamp(0.01, 1.0),
            idle_compaction: self.idle_compaction,
            cache_ttl_secs: self.cache_ttl_secs.max(1),
        }
    }

    /// The window a model gets: its configured one, lowered by `GARUDA_CONTEXT_WINDOW`.
    pub fn window(&self, configured: u64) -> u64 {
        self.window_override
            .map_or(configured, |w| w.min(configured))
    }

    /// Reads the environment overrides (`GARUDA_CONTEXT_WINDOW`, `GARUDA_COMPACT_THRESHOLD`)
    /// through `get`; they only ever lower what the file says.
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let bad = |var: &str, value: &str, message: &str| ConfigError::Env {
            var: var.to_string(),
            value: value.to_string(),
            message: message.to_string(),
        };
        if let Some(v) = get(ENV_CACHE_BREAKER).filter(|v| !v.trim().is_empty()) {
            self.cache_breaker = v.trim().to_string();
        }
        if let Some(v) = get(ENV_SESSION_MEMORY).filter(|v| !v.trim().is_empty()) {
            self.session_memory = match v.trim().to_ascii_lowercase().as_str() {
                "on" | "true" | "1" => true,
                "off" | "false" | "0" => false,
                _ => return Err(bad(ENV_SESSION_MEMORY, &v, "expected on or off")),
            };
        }
        if let Some(v) = get(ENV_CONTEXT_WINDOW).filter(|v| !v.trim().is_empty()) {
            let n: u64 = v
                .trim()
                .replace('_', "")
                .parse()
                .map_err(|_| bad(ENV_CONTEXT_WINDOW, &v, "expected a number of tokens"))?;
            if n < 1_000 {
                return Err(bad(ENV_CONTEXT_WINDOW, &v, "a window under 1 000 tokens"));
            }
            self.window_override = Some(n);
        }
        if let Some(v) = get(ENV_COMPACT_THRESHOLD).filter(|v| !v.trim().is_empty()) {
            let t = v.trim();
            let share = match t.strip_suffix('%') {
                Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
                None => t.parse::<f64>(),
            }
            .map_err(|_| {
                bad(
                    ENV_COMPACT_THRESHOLD,
                    &v,
                    "expected a share of the window (0.5) or a percentage (50%)",
                )
            })?;
            if !(share > 0.0 && share <= 1.0) {
                return Err(bad(
                    ENV_COMPACT_THRESHOLD,
                    &v,
                    "the share must be above 0 and at most 1 (100%)",
                ));
            }
            self.threshold_override = Some(share.max(0.05));
        }
        Ok(())
    }

    /// Applies these settings to a session's view policy.
    pub fn apply_view(&self, policy: &mut crate::session::view::ViewPolicy) {
        policy.microcompact_after_ms =
            (self.microcompact_minutes > 0).then(|| self.microcompact_minutes * 60_000);
        policy.microcompact_keep = self.microcompact_keep;
        policy.tool_result_max_chars = self.tool_result_max_chars.max(1_000);
        policy.tool_result_preview_chars = self
            .tool_result_preview_chars
            .min(policy.tool_result_max_chars);
        policy.trim_over = self.trim_over;
    }
}

/// Timeouts and retries for provider calls.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
pub struct NetworkSettings {
    /// Connect timeout in milliseconds.
    pub connect_timeout_ms: u64,
    /// A stream silent for this long is cut, in milliseconds.
    pub idle_timeout_ms: u64,
    /// Retries on 429, 529 and 5xx.
    pub max_retries: u32,
}

impl Default for NetworkSettings {
    fn default() -> Self {
        let p = ProviderConfig::default();
        NetworkSettings {
            connect_timeout_ms: p.connect_timeout_ms,
            idle_timeout_ms: p.idle_timeout_ms,
            max_retries: p.max_retries,
        }
    }
}

/// Transport settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
pub struct ServerSettings {
    /// Largest accepted frame in bytes (64 MiB).
    pub max_frame_bytes: usize,
    /// Most quick requests (disk reads, cache misses) running at once; more wait.
    pub max_in_flight: usize,
    /// Most long requests (turns, compactions, collapses, MCP starts) running at once; more
    /// wait, so long work never takes the slots quick work needs.
    pub max_long_in_flight: usize,
    /// Most requests waiting for a slot (both kinds together) before `overloaded` errors.
    pub max_waiting: usize,
    /// Most bytes of waiting requests (their frames) before `overloaded` errors.
    pub max_waiting_bytes: usize,
    /// Most model requests in flight per provider, unless `[providers.NAME] max_in_flight`
    /// says otherwise: more wait for a slot instead of hammering the provider's rate limit.
    pub provider_max_in_flight: usize,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            max_frame_bytes: 64 << 20,
            max_in_flight: 64,
            max_long_in_flight: 32,
            max_waiting: 10_000,
            max_waiting_bytes: 64 << 20,
            provider_max_in_flight: 16,
        }
    }
}

/// Approval settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
pub struct ApprovalSettings {
    /// Default policy for new sessions: `ask`, `auto-edit` or `full-auto` (anything else is
    /// a configuration error, not a silent `ask`).
    pub policy: crate::tools::Policy,
    /// Seconds to wait for the client's answer before counting it as a rejection.
    pub timeout_secs: u64,
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        ApprovalSettings {
            policy: crate::tools::Policy::Ask,
            timeout_secs: 300,
        }
    }
}

/// Highest `limits.instructions_chars` (and `instructions.nested_chars`,
/// `instructions.nested_total_chars`) a workspace's own config may set (unless the user's
/// config allows more).
pub const WORKSPACE_INSTRUCTIONS_CHARS_CEILING: usize = 200_000;
/// Highest `limits.memory_chars` a workspace's own config may set (unless the user's allows
/// more).
pub const WORKSPACE_MEMORY_CHARS_CEILING: usize = 40_000;

/// The options a workspace's own `.garuda/config.toml` may set.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
struct WorkspaceFile {
    features: Option<Features>,
    limits: Option<Limits>,
    instructions: Option<InstructionSettings>,
    hooks: Option<crate::hooks::HooksSettings>,
    #[serde(flatten)]
    rest: toml::Table,
}

impl Config {
    /// The user's config file: `$XDG_CONFIG_HOME/garuda/config.toml` (or `~/.config/...`).
    pub fn user_path() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        Some(base.join("garuda").join("config.toml"))
    }

    /// Loads the user's config; a missing file gives the defaults.
    pub fn load_user() -> Result<Config, ConfigError> {
        match Self::user_path() {
            Some(p) => Self::load_file(&p),
            None => Ok(Config::default()),
        }
    }

    /// The user-global instruction file: `AGENTS.md` beside the user's config file.
    pub fn global_instructions_path() -> Option<PathBuf> {
        Self::user_path().map(|p| p.with_file_name("AGENTS.md"))
    }

    /// Loads one config file (a missing file gives the defaults), then the environment
    /// overrides of `[context]` (`GARUDA_CONTEXT_WINDOW`, `GARUDA_COMPACT_THRESHOLD`), with the
    /// user-global instruction file of this user.
    /// Unknown keys are warnings (logged; the rest applies); an invalid value is an error.
    pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
        let checked = Self::check_file(path);
        for p in checked
            .problems
            .iter()
            .filter(|p| p.severity == Severity::Warning)
        {
            tracing::warn!("{p}");
        }
        match checked.config {
            Some(cfg) => Ok(cfg),
            None => Err(ConfigError::Invalid {
                problems: checked.problems,
            }),
        }
    }

    /// Reads one config file the way a server does: never fails, names every problem. A
    /// missing file is the defaults; the environment overrides and the user-global
    /// instruction file apply as in [`Config::load_file`].
    pub fn check_file(path: &Path) -> Checked {
        let mut checked = match std::fs::read_to_string(path) {
            Ok(t) => check::check_text(&t, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Checked {
                config: Some(Config::default()),
                problems: Vec::new(),
            },
            Err(e) => Checked {
                config: None,
                problems: vec![ConfigProblem {
                    severity: Severity::Error,
                    path: path.to_owned(),
                    line: None,
                    column: None,
                    key: None,
                    message: format!("cannot read it: {e}"),
                }],
            },
        };
        if let Some(cfg) = &mut checked.config {
            cfg.global_instructions = Self::global_instructions_path();
            cfg.hooks.trust_file = Some(crate::hooks::TrustList::path_beside(path));
            if let Err(e) = cfg.context.apply_env(|k| std::env::var(k).ok()) {
                let key = match &e {
                    ConfigError::Env { var, .. } => Some(var.clone()),
                    _ => None,
                };
                checked.problems.push(ConfigProblem {
                    severity: Severity::Error,
                    path: PathBuf::from("environment"),
                    line: None,
                    column: None,
                    key,
                    message: e.to_string(),
                });
                checked.config = None;
            }
        }
        checked
    }

    /// The user's config file checked ([`Config::check_file`]) and its path; without a
    /// config folder (no `$XDG_CONFIG_HOME`, no `$HOME`), the defaults.
    pub fn check_user() -> (Checked, Option<PathBuf>) {
        match Self::user_path() {
            Some(p) => (Self::check_file(&p), Some(p)),
            None => (
                Checked {
                    config: Some(Config::default()),
                    problems: Vec::new(),
                },
                None,
            ),
        }
    }

    /// Parses config text; `path` only names the source in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: one_line(&e, text),
        })
    }

    /// The provider settings in the shape the provider module takes.
    pub fn provider_config(&self) -> Result<ProviderConfig, String> {
        Ok(ProviderConfig {
            providers: self.providers.clone(),
            models: self.models.clone(),
            connect_timeout_ms: self.network.connect_timeout_ms,
            idle_timeout_ms: self.network.idle_timeout_ms,
            max_retries: self.network.max_retries,
            max_in_flight: self.server.provider_max_in_flight,
            ..ProviderConfig::default()
        })
    }

    /// Applies a workspace's `.garuda/config.toml` text: only features, limits and the
    /// instruction sources are taken (the user-global file's limit stays the user's); every
    /// other key is ignored with a warning.
    pub fn with_workspace(
        &self,
        text: &str,
        path: &Path,
    ) -> Result<(Config, Vec<String>), ConfigError> {
        let file: WorkspaceFile = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: one_line(&e, text),
        })?;
        let mut merged = self.clone();
        if let Some(f) = file.features {
            merged.features = f;
        }
        let mut warnings: Vec<String> = Vec::new();
        // A cloned repository must not lift a budget: above the user's value a workspace may
        // go only up to the ceiling.
        let mut ceil = |asked: usize, user: usize, ceiling: usize, key: &str| {
            let allowed = user.max(ceiling);
            if asked > allowed {
                warnings.push(format!(
                    "{}: {key} = {asked} is above the ceiling; {allowed} is used",
                    path.display()
                ));
            }
            asked.min(allowed)
        };
        if let Some(l) = file.limits {
            merged.limits = l;
            merged.limits.instructions_chars = ceil(
                l.instructions_chars,
                self.limits.instructions_chars,
                WORKSPACE_INSTRUCTIONS_CHARS_CEILING,
                "limits.instructions_chars",
            );
            merged.limits.memory_chars = ceil(
                l.memory_chars,
                self.limits.memory_chars,
                WORKSPACE_MEMORY_CHARS_CEILING,
                "limits.memory_chars",
            );
        }
        if let Some(i) = file.instructions {
            merged.instructions = InstructionSettings {
                nested_chars: ceil(
                    i.nested_chars,
                    self.instructions.nested_chars,
                    WORKSPACE_INSTRUCTIONS_CHARS_CEILING,
                    "instructions.nested_chars",
                ),
                nested_total_chars: ceil(
                    i.nested_total_chars,
                    self.instructions.nested_total_chars,
                    WORKSPACE_INSTRUCTIONS_CHARS_CEILING,
                    "instructions.nested_total_chars",
                ),
                global_chars: self.instructions.global_chars,
                ..i
            };
        }
        // Only the workspace's matcher groups count; they run once the user trusts it.
        merged.workspace_hooks = file.hooks.map(|h| {
            warnings.extend(h.workspace_warnings(path));
            (path.to_owned(), h)
        });
        warnings.extend(file
            .rest
            .keys()
            .map(|k| {
                format!(
                    "{}: `{k}` is ignored here; provider endpoints, keys, models, MCP servers, approval policy, sandbox and web settings are read only from the user's config",
                    path.display()
                )
            }));
        Ok((merged, warnings))
    }
}

pub use crate::dirs::{cache_dir, state_dir};

impl Config {
    /// The web tools' guard for a session under this config: its `[web]` settings (the
    /// user's: a workspace cannot set them) and the secret values a URL may not carry, those
    /// of the server's environment and of the MCP servers' variables and headers.
    pub fn web(&self) -> std::sync::Arc<crate::web::Web> {
        let mut pairs = crate::sandbox::secret_values();
        for (name, s) in &self.mcp_servers {
            for (k, v) in s.env.iter().chain(s.headers.iter()) {
                pairs.push((format!("mcp_servers.{name}.{k}"), v.clone()));
            }
        }
        crate::web::Web::new(self.web.clone(), crate::web::Secrets::new(pairs))
    }
}

impl Config {
    /// What the hooks read of this config.
    pub fn hook_config(&self) -> crate::hooks::HookConfig<'_> {
        crate::hooks::HookConfig {
            user: &self.hooks,
            workspace_hooks: self.workspace_hooks.as_ref(),
            command_env: &self.sandbox.env,
        }
    }
}

/// toml errors span several lines with a source excerpt; protocol errors want one line.
fn one_line(e: &toml::de::Error, text: &str) -> String {
    let msg = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {msg}")
        }
        None => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_config_takes_only_harmless_options() {
        let user = Config {
            model: Some("anthropic/x".into()),
            ..Config::default()
        };
        let text = "model = \"evil/model\"\n[features]\nweb = true\n[limits]\ninstructionsChars = 100\nmemoryChars = 10\n[providers.anthropic]\nbase_url = \"http://evil.invalid\"\n[approval]\npolicy = \"full-auto\"\n[sandbox]\nenabled = false\nnetwork = true\n[mcp_servers.evil]\ncommand = \"sh\"\n";
        let (merged, warnings) = user
            .with_workspace(text, Path::new("/w/.garuda/config.toml"))
            .expect("parse");
        assert!(merged.features.web);
        assert_eq!(merged.limits.instructions_chars, 100);
        assert_eq!(merged.model.as_deref(), Some("anthropic/x"));
        assert!(merged.providers.is_empty());
        assert_eq!(merged.approval.policy, crate::tools::Policy::Ask);
        assert_eq!(merged.sandbox, crate::sandbox::SandboxSettings::default());
        assert!(merged.mcp_servers.is_empty());
        assert_eq!(warnings.len(), 5, "{warnings:?}");
        assert!(warnings.iter().all(|w| w.contains("ignored")));
    }

    #[test]
    fn workspace_limits_stop_at_the_ceiling() {
        let user = Config::default();
        let p = Path::new("/w/.garuda/config.toml");
        let text = "[limits]\ninstructionsChars = 1000000000000\nmemory_chars = 5\n";
        let (merged, warnings) = user.with_workspace(text, p).expect("parse");
        assert_eq!(
            merged.limits.instructions_chars,
            WORKSPACE_INSTRUCTIONS_CHARS_CEILING
        );
        assert_eq!(merged.limits.memory_chars, 5);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("ceiling"), "{warnings:?}");
        // A user who allows more lets workspaces go up to the user's value.
        let mut generous = Config::default();
        generous.limits.instructions_chars = 1_000_000;
        let (merged, _) = generous.with_workspace(text, p).expect("parse");
        assert_eq!(merged.limits.instructions_chars, 1_000_000);
    }

    #[test]
    fn workspace_config_chooses_sources_but_not_the_global_limit() {
        let user = Config::default();
        let text = "[instructions]\nsources = [\"AGENTS.md\", \"cursor\"]\nglobal_chars = 0\n";
        let (merged, warnings) = user
            .with_workspace(text, Path::new("/w/.garuda/config.toml"))
            .expect("parse");
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(merged.instructions.has(crate::prompt::Source::Cursor));
        assert!(!merged.instructions.has(crate::prompt::Source::Nested));
        assert_eq!(merged.instructions.global_chars, 20_000);
        // Nor lift the nested budgets past the ceiling.
        let text = "[instructions]\nnested_chars = 999999999\nnested_total_chars = 5\n";
        let (merged, warnings) = user
            .with_workspace(text, Path::new("/w/.garuda/config.toml"))
            .expect("parse");
        assert_eq!(
            merged.instructions.nested_chars,
            WORKSPACE_INSTRUCTIONS_CHARS_CEILING
        );
        assert_eq!(merged.instructions.nested_total_chars, 5);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("instructions.nested_chars"),
            "{warnings:?}"
        );
        let bad = Config::parse(
            "[instructions]\nsources = [\"cursorr\"]\n",
            Path::new("c.toml"),
        );
        assert!(bad.unwrap_err().to_string().contains("line 2"));
    }

    #[test]
    fn parse_errors_name_file_line_and_column() {
        let err = Config::parse("model = 1\n", Path::new("/c.toml")).expect_err("type error");
        let msg = err.to_string();
        assert!(msg.contains("/c.toml") && msg.contains("line 1"), "{msg}");
        let err = Config::parse("a = \n", Path::new("/c.toml")).expect_err("syntax error");
        assert!(err.to_string().contains("line 1"));
    }

    #[test]
    fn user_config_reads_providers_and_models() {
        let text = "model = \"ollama/qwen3-coder\"\n[providers.ollama]\nbase_url = \"http://127.0.0.1:11434/v1\"\n[models.\"ollama/qwen3-coder\"]\ncontextWindow = 32768\n[network]\nmax_retries = 1\n";
        let c = Config::parse(text, Path::new("/c.toml")).expect("parse");
        let p = c.provider_config().expect("providers");
        assert_eq!(p.max_retries, 1);
        assert!(p.providers.contains_key("ollama"));
        assert_eq!(p.models["ollama/qwen3-coder"].context_window, Some(32768));
    }

    #[test]
    fn keys_are_snake_case_and_camel_case_is_still_read() {
        let p = Path::new("c.toml");
        let snake = Config::parse(
            "[features]\ncode_index = \"lookup\"\n[limits]\ninstructions_chars = 10\n\
             [models.\"a/b\"]\ncontext_window = 5\nmax_output = 2\n",
            p,
        )
        .unwrap();
        let camel = Config::parse(
            "[features]\ncodeIndex = \"lookup\"\n[limits]\ninstructionsChars = 10\n\
             [models.\"a/b\"]\ncontextWindow = 5\nmaxOutput = 2\n",
            p,
        )
        .unwrap();
        assert_eq!(snake, camel);
        assert_eq!(snake.limits.instructions_chars, 10);
        assert_eq!(snake.models["a/b"].context_window, Some(5));
    }

    #[test]
    fn user_config_reads_mcp_servers() {
        let text = "[mcp_servers.everything]\ncommand = \"npx\"\nargs = [\"-y\", \"x\"]\n\
                    [mcp_servers.remote]\nurl = \"https://h/mcp\"\nbearer_token_env = \"T\"\n\
                    [mcp]\ndefer_share = 0.2\n";
        let c = Config::parse(text, Path::new("c.toml")).unwrap();
        assert_eq!(c.mcp_servers.len(), 2);
        assert_eq!(c.mcp_servers["everything"].args, ["-y", "x"]);
        assert_eq!(c.mcp.defer_share, 0.2);
        let e =
            Config::parse("[mcp_servers.x]\ncomand = \"y\"\n", Path::new("c.toml")).unwrap_err();
        assert!(e.to_string().contains("comand"), "{e}");
    }

    #[test]
    fn the_summarizer_key_takes_three_values_and_names_itself_when_wrong() {
        use crate::session::compact::Summarizer;
        let at = |v: &str| {
            Config::parse(
                &format!("[context]\nsummarizer = \"{v}\"\n"),
                Path::new("c.toml"),
            )
        };
        assert_eq!(
            Config::parse("", Path::new("c.toml"))
                .unwrap()
                .context
                .summarizer,
            Summarizer::Auto
        );
        for (v, s) in [
            ("auto", Summarizer::Auto),
            ("worker", Summarizer::Worker),
            ("single", Summarizer::Single),
        ] {
            let c = at(v).unwrap();
            assert_eq!(c.context.summarizer, s);
            assert_eq!(c.context.compact_policy().summarizer, s);
        }
        let e = at("chunked").unwrap_err().to_string();
        assert!(e.contains("summarizer") && e.contains("chunked"), "{e}");
        assert!(
            e.contains("auto") && e.contains("worker") && e.contains("single"),
            "{e}"
        );
    }

    #[test]
    fn the_cache_breaker_comes_from_the_file_or_the_environment() {
        let c: ContextSettings = toml::from_str("cache_breaker = \"a\"").unwrap();
        assert_eq!(c.cache_breaker, "a");
        let mut c = ContextSettings::default();
        c.apply_env(|k: &str| (k == ENV_CACHE_BREAKER).then(|| " b ".to_string()))
            .unwrap();
        assert_eq!(c.cache_breaker, "b");
    }

    #[test]
    fn the_session_memory_is_on_by_default_and_the_environment_switches_it() {
        let c = ContextSettings::default();
        assert!(c.session_memory && c.idle_compaction);
        assert_eq!(c.cache_ttl_secs, 300);
        let c: ContextSettings =
            toml::from_str("session_memory = false\ncache_ttl_secs = 3600").unwrap();
        assert!(!c.session_memory);
        assert_eq!(c.compact_policy().cache_ttl_secs, 3_600);
        for (v, on) in [("off", false), ("0", false), ("ON", true), ("true", true)] {
            let mut c = ContextSettings {
                session_memory: !on,
                ..Default::default()
            };
            c.apply_env(|k: &str| (k == ENV_SESSION_MEMORY).then(|| v.to_string()))
                .unwrap();
            assert_eq!(c.session_memory, on, "{v}");
        }
        let e = ContextSettings::default()
            .apply_env(|k: &str| (k == ENV_SESSION_MEMORY).then(|| "maybe".to_string()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(ENV_SESSION_MEMORY) && e.contains("on or off"),
            "{e}"
        );
    }

    #[test]
    fn environment_overrides_only_lower_the_window_and_threshold() {
        let env = |w: &'static str, t: &'static str| {
            move |k: &str| match k {
                ENV_CONTEXT_WINDOW => Some(w.to_string()),
                ENV_COMPACT_THRESHOLD => Some(t.to_string()),
                _ => None,
            }
        };
        let mut c = ContextSettings::default();
        c.apply_env(env("20000", "50%")).unwrap();
        assert_eq!(c.window(200_000), 20_000);
        assert_eq!(c.window(8_000), 8_000, "never raised");
        let p = c.compact_policy();
        assert_eq!(p.threshold_cap, Some(0.5));
        assert_eq!(
            crate::session::compact::threshold_tokens(20_000, 8_000, &p),
            10_000
        );
        let mut c = ContextSettings::default();
        c.apply_env(env("", "0.9")).unwrap();
        assert_eq!(c.window_override, None);
        let p = c.compact_policy();
        assert_eq!(
            crate::session::compact::threshold_tokens(100_000, 8_000, &p),
            80_000,
            "0.9 does not raise 0.8"
        );
        let p = ContextSettings {
            reserved_formula: true,
            threshold_override: Some(0.3),
            ..ContextSettings::default()
        }
        .compact_policy();
        assert_eq!(
            crate::session::compact::threshold_tokens(200_000, 64_000, &p),
            60_000
        );
        for (w, t) in [
            ("many", "0.5"),
            ("50000", "1.5"),
            ("50000", "x%"),
            ("10", "0.5"),
        ] {
            let e = ContextSettings::default().apply_env(env(w, t)).unwrap_err();
            assert!(e.to_string().contains("GARUDA_"), "{e}");
        }
    }

    #[test]
    fn hook_tables_load_and_a_workspace_cannot_trust_itself() {
        let text = "[features]\nhooks = true\n[hooks]\nimport = [\"claude\"]\n\
                    [[hooks.PreToolUse]]\nmatcher = \"Bash\"\n\
                    hooks = [{ type = \"command\", command = \"policy.sh\", timeout = 5 }]\n";
        let c = Config::parse(text, Path::new("c.toml")).unwrap();
        assert!(c.features.hooks, "the old switch still reads");
        assert_eq!(c.hooks.import, [crate::hooks::ImportSource::Claude]);
        assert_eq!(c.hooks.events["PreToolUse"][0].hooks[0].timeout, Some(5.0));
        let e = Config::parse("[hooks]\nimport = [\"cursor\"]\n", Path::new("c.toml")).unwrap_err();
        assert!(e.to_string().contains("cursor"), "{e}");
        let ws = "[hooks]\ntrusted = [\"/w\"]\nimport = [\"claude\"]\nenv = [\"GITHUB_PAT\"]\n\
                  [[hooks.Stop]]\nhooks = [{ command = \"x\" }]\n";
        let (merged, warnings) = c
            .with_workspace(ws, Path::new("/w/.garuda/config.toml"))
            .unwrap();
        assert_eq!(merged.hooks, c.hooks, "the user's hooks stay the user's");
        let (path, h) = merged.workspace_hooks.unwrap();
        assert_eq!(path, Path::new("/w/.garuda/config.toml"));
        assert!(h.events.contains_key("Stop"));
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(
            warnings.iter().any(|w| w.contains("hooks.env")),
            "a workspace cannot take the server's variables for its hooks: {warnings:?}"
        );
    }

    #[test]
    fn a_policy_typo_is_an_error_not_ask() {
        let e =
            Config::parse("[approval]\npolicy = \"full_auto\"\n", Path::new("c.toml")).unwrap_err();
        assert!(e.to_string().contains("full_auto"), "{e}");
        let ok =
            Config::parse("[approval]\npolicy = \"auto-edit\"\n", Path::new("c.toml")).unwrap();
        assert_eq!(ok.approval.policy, crate::tools::Policy::AutoEdit);
        assert_eq!(
            "nope".parse::<crate::tools::Policy>().unwrap_err().0,
            "nope"
        );
    }
}
