//! Model providers behind one streaming trait.
//!
//! A provider takes a canonical [`ModelRequest`], converts it to its wire format at the edge,
//! streams the answer as [`StreamEvent`]s and returns the assembled [`ModelResponse`]. Only
//! this module knows HTTP. Retries, timeouts and cancellation are shared (`sse`, `retry`);
//! the wire formats live in `anthropic` and `openai`; `replay` plays recorded responses.

pub mod anthropic;
pub mod event_stream;
pub mod limit;
pub mod models;
pub mod normalize;
pub mod openai;
mod pool;
pub mod replay;
pub mod retry;
pub mod spec;
mod sse;
pub mod window;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::message::{Block, Message, StopReason, ToolSpec, Usage};

pub use limit::{ContextLimit, parse_context_limit};
pub use models::ModelInfo;
pub use normalize::ToolCallError;
pub use replay::{ReplayProvider, recording};
pub use spec::ModelSpec;
pub use window::ServerWindow;

/// Everything a provider needs for one model call, in canonical form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRequest {
    /// Provider-side model id (the part after `provider/` in a spec).
    pub model: String,
    /// The system prompt.
    pub system: String,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Output limit for this call.
    pub max_tokens: u32,
    /// Where prompt-cache breakpoints go.
    pub cache: CachePlan,
    /// Extended-thinking budget in tokens, when thinking is wanted.
    pub thinking_budget: Option<u32>,
    /// A JSON Schema for the answer's text, sent as the provider's structured output when
    /// its endpoint has it (`structured_output`); the turn's caller validates the answer.
    pub output_schema: Option<serde_json::Value>,
    /// The model may not call a tool (`tool_choice: none`): `tools` are sent for the request's
    /// shape only. A summary request, which must answer with text.
    pub no_tool_calls: bool,
    /// Old tool results the provider clears on its side (a main request of a session whose
    /// provider can; see [`ToolClearing`]).
    pub tool_clearing: Option<ToolClearing>,
}

/// Old tool results cleared by the provider itself (Anthropic's context editing,
/// `clear_tool_uses_20250919`, seed rows 122–126): the transcript and the view keep them
/// whole, and the time-based microcompact steps aside while this is on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolClearing {
    /// Clearing starts once a request's input passes this many tokens.
    pub trigger_tokens: u64,
    /// The most recent tool uses kept whole.
    pub keep_tool_uses: u32,
    /// The least a clearing takes away (it breaks the cached prefix, so it must be worth it).
    pub clear_at_least_tokens: u64,
    /// Tools whose results are never cleared (edits, the todo list, agents: what cannot be
    /// had again by calling the tool once more).
    pub exclude_tools: Vec<String>,
}

pub use crate::message::{CachePlan, MAX_CACHE_MARKERS};

/// One streamed piece of a response, in order of arrival.
///
/// Serializes as `{"type": "textDelta", "data": …}` (adjacently tagged, since some variants
/// carry a bare string).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "type",
    content = "data",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum StreamEvent {
    /// More answer text.
    TextDelta(String),
    /// More reasoning text.
    ThinkingDelta(String),
    /// A tool call began.
    ToolUseStart {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// More of a tool call's JSON arguments.
    ToolUseInputDelta {
        /// Call id.
        id: String,
        /// The next piece of the JSON text.
        partial_json: String,
    },
    /// A whole call of a tool the provider runs itself (its result follows in the stream).
    ServerToolUse {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        input: serde_json::Value,
    },
    /// The result of a call the provider ran.
    ServerToolResult {
        /// The call's id.
        id: String,
        /// Tool name.
        name: String,
        /// What it found, as a client shows it.
        output: String,
        /// True when the provider reports an error.
        is_error: bool,
    },
    /// Final usage of the response.
    Usage(Usage),
    /// The call failed transiently and will be retried after `delay_ms`.
    Retry {
        /// 1 for the first retry.
        attempt: u32,
        /// Wait before the retry.
        delay_ms: u64,
        /// Why (status and provider message).
        reason: String,
    },
}

/// A complete model answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelResponse {
    /// Content blocks in order.
    pub content: Vec<Block>,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// Token usage.
    #[serde(default)]
    pub usage: Usage,
    /// Tool calls that must not run as sent (bad arguments): the turn answers each with its
    /// error. Filled at the provider boundary by [`normalize::tool_calls`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_errors: Vec<ToolCallError>,
}

impl ModelResponse {
    /// Normalizes the answer's tool calls against the ids the request already uses.
    pub fn normalized(mut self, taken: &mut std::collections::HashSet<String>) -> Self {
        let errors = normalize::tool_calls(&mut self.content, taken);
        self.tool_errors.extend(errors);
        self
    }
}

/// Where streamed events go.
pub type EventSink = tokio::sync::mpsc::UnboundedSender<StreamEvent>;

/// A model backend.
pub trait Provider: Send + Sync {
    /// Short provider name (`anthropic`, `openai`, `ollama`, `replay`, …).
    fn name(&self) -> &str;
    /// The context window the server serving `model` was started with, when it is a local
    /// server that says (see [`window`]); None for hosted APIs and cassettes.
    fn server_window(&self, _model: &str) -> BoxFuture<'static, Option<ServerWindow>> {
        Box::pin(async { None })
    }
    /// True when the provider clears old tool results itself for `model` (Anthropic's
    /// context editing on its own API, for the models that have it).
    fn clears_tool_uses(&self, _model: &str) -> bool {
        false
    }
    /// Runs one model call, streaming events into `events`; stops promptly on `cancel`.
    fn complete(
        &self,
        req: ModelRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>>;
}

/// Why a model call failed. Messages never contain an API key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// Missing key, bad spec, unknown provider; says how to configure.
    #[error("{0}")]
    Config(String),
    /// The provider needs an API key and its environment variable is unset or empty.
    #[error(
        "no API key for provider `{provider}`: set the environment variable {variable}{hint}. \
         `replay:PATH` works offline without a key."
    )]
    MissingKey {
        /// The provider's name, e.g. `anthropic`.
        provider: String,
        /// The variable the key is read from.
        variable: String,
        /// How to name another variable (empty when the user already named one).
        hint: String,
    },
    /// The provider refused the credentials.
    #[error(
        "the provider rejected the API key (HTTP {status}); check that the key variable holds a valid key"
    )]
    Auth {
        /// 401 or 403.
        status: u16,
    },
    /// Still rate limited after the retries.
    #[error("rate limited by the provider (HTTP 429), retries exhausted: {body_excerpt}")]
    RateLimited {
        /// What the provider said.
        body_excerpt: String,
    },
    /// Still overloaded after the retries.
    #[error("the provider is overloaded, retries exhausted: {body_excerpt}")]
    Overloaded {
        /// What the provider said.
        body_excerpt: String,
    },
    /// Server errors after the retries.
    #[error("provider server error (HTTP {status}), retries exhausted: {body_excerpt}")]
    Server {
        /// HTTP status.
        status: u16,
        /// What the provider said.
        body_excerpt: String,
    },
    /// The request does not fit the model's context window.
    #[error("prompt too long for the model: {0}")]
    PromptTooLong(String),
    /// The provider could not accept an image of the request (too large, too many pixels,
    /// unreadable); the text says which when the provider did.
    #[error("the provider refused an image: {0}")]
    MediaRefused(String),
    /// The stream stopped mid-way; `partial` keeps the blocks that arrived.
    #[error("the model stream was cut: {reason}")]
    Cut {
        /// Blocks received before the cut.
        partial: Vec<Block>,
        /// What happened.
        reason: String,
    },
    /// Connect or idle timeout.
    #[error("timed out: {0}")]
    Timeout(String),
    /// Cancelled by the caller; `partial` keeps the blocks that arrived.
    #[error("cancelled")]
    Cancelled {
        /// Blocks received before the cancel.
        partial: Vec<Block>,
    },
    /// Transport failure or an unexpected HTTP status.
    #[error("HTTP error: {0}")]
    Http(String),
    /// The provider sent something that could not be understood.
    #[error("could not decode the provider's answer: {0}")]
    Decode(String),
    /// A replay cassette problem.
    #[error("replay: {0}")]
    Replay(String),
}

impl ProviderError {
    /// True when the provider said the prompt exceeds the context window.
    pub fn is_prompt_too_long(&self) -> bool {
        matches!(self, ProviderError::PromptTooLong(_))
    }

    /// The sizes a prompt-too-long answer names (None for other errors).
    pub fn context_limit(&self) -> Option<ContextLimit> {
        match self {
            ProviderError::PromptTooLong(text) => Some(parse_context_limit(text)),
            _ => None,
        }
    }

    /// True when the provider refused media of the request.
    pub fn is_media_refused(&self) -> bool {
        matches!(self, ProviderError::MediaRefused(_))
    }

    /// Blocks that arrived before a cut or cancel; empty for other errors.
    pub fn partial(&self) -> &[Block] {
        match self {
            ProviderError::Cut { partial, .. } | ProviderError::Cancelled { partial } => partial,
            _ => &[],
        }
    }

    /// Normalizes the tool calls of the partial answer a cut or cancel kept, like a whole
    /// answer's (see [`normalize`]); they are closed as interrupted, never run.
    pub fn normalized(mut self, taken: &mut std::collections::HashSet<String>) -> Self {
        if let ProviderError::Cut { partial, .. } | ProviderError::Cancelled { partial } = &mut self
        {
            normalize::tool_calls(partial, taken);
        }
        self
    }

    /// A stable short name of the error kind, for protocol error data.
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::Config(_) | ProviderError::MissingKey { .. } => "config",
            ProviderError::Auth { .. } => "auth",
            ProviderError::RateLimited { .. } => "rateLimited",
            ProviderError::Overloaded { .. } => "overloaded",
            ProviderError::Server { .. } => "server",
            ProviderError::PromptTooLong(_) => "promptTooLong",
            ProviderError::MediaRefused(_) => "mediaRefused",
            ProviderError::Cut { .. } => "cut",
            ProviderError::Timeout(_) => "timeout",
            ProviderError::Cancelled { .. } => "cancelled",
            ProviderError::Http(_) => "http",
            ProviderError::Decode(_) => "decode",
            ProviderError::Replay(_) => "replay",
        }
    }

    /// Replaces every occurrence of `secret` in the error's text (defence in depth).
    pub(crate) fn redact(self, secret: Option<&str>) -> Self {
        let Some(secret) = secret.filter(|s| !s.is_empty()) else {
            return self;
        };
        let r = |s: String| s.replace(secret, "[redacted]");
        match self {
            ProviderError::Config(s) => ProviderError::Config(r(s)),
            ProviderError::RateLimited { body_excerpt } => ProviderError::RateLimited {
                body_excerpt: r(body_excerpt),
            },
            ProviderError::Overloaded { body_excerpt } => ProviderError::Overloaded {
                body_excerpt: r(body_excerpt),
            },
            ProviderError::Server {
                status,
                body_excerpt,
            } => ProviderError::Server {
                status,
                body_excerpt: r(body_excerpt),
            },
            ProviderError::PromptTooLong(s) => ProviderError::PromptTooLong(r(s)),
            ProviderError::MediaRefused(s) => ProviderError::MediaRefused(r(s)),
            ProviderError::Cut { partial, reason } => ProviderError::Cut {
                partial,
                reason: r(reason),
            },
            ProviderError::Timeout(s) => ProviderError::Timeout(r(s)),
            ProviderError::Http(s) => ProviderError::Http(r(s)),
            ProviderError::Decode(s) => ProviderError::Decode(r(s)),
            ProviderError::Replay(s) => ProviderError::Replay(r(s)),
            other @ (ProviderError::Auth { .. }
            | ProviderError::Cancelled { .. }
            | ProviderError::MissingKey { .. }) => other,
        }
    }
}

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI-compatible Chat Completions.
    Openai,
}

/// Provider settings from the user's config (`[providers.NAME]`, `[models."NAME"]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderConfig {
    /// Per-provider settings keyed by the name used in model specs; merged over built-ins.
    pub providers: BTreeMap<String, ProviderEntry>,
    /// Context window and output limit overrides, keyed by model id or full spec.
    pub models: BTreeMap<String, ModelOverride>,
    /// Connect timeout in milliseconds.
    #[serde(alias = "connectTimeoutMs")]
    pub connect_timeout_ms: u64,
    /// Longest silence on an open stream, in milliseconds.
    #[serde(alias = "idleTimeoutMs")]
    pub idle_timeout_ms: u64,
    /// Retries after a 429, 529/overloaded or 5xx answer.
    #[serde(alias = "maxRetries")]
    pub max_retries: u32,
    /// First backoff delay in milliseconds (doubles per attempt, with jitter).
    #[serde(alias = "retryBaseDelayMs")]
    pub retry_base_delay_ms: u64,
    /// Largest backoff delay, also the cap on a provider's `retry-after`, in milliseconds.
    #[serde(alias = "retryMaxDelayMs")]
    pub retry_max_delay_ms: u64,
    /// Most requests in flight per provider, for providers without their own
    /// `max_in_flight` (`[server] provider_max_in_flight`).
    pub max_in_flight: usize,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            providers: BTreeMap::new(),
            models: BTreeMap::new(),
            connect_timeout_ms: 10_000,
            idle_timeout_ms: 120_000,
            max_retries: 4,
            retry_base_delay_ms: 500,
            retry_max_delay_ms: 60_000,
            max_in_flight: 16,
        }
    }
}

/// One provider's settings; unset fields fall back to the built-in defaults for that name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderEntry {
    /// Wire format; required for names that are not built in.
    pub kind: Option<ProviderKind>,
    /// Base URL (Anthropic: without `/v1`; OpenAI-compatible: including `/v1`).
    #[serde(alias = "baseUrl")]
    pub base_url: Option<String>,
    /// Environment variable that overrides the base URL.
    #[serde(alias = "baseUrlEnv")]
    pub base_url_env: Option<String>,
    /// Environment variable holding the API key.
    #[serde(alias = "apiKeyEnv")]
    pub api_key_env: Option<String>,
    /// Whether a missing key is an error (default: true when `api_key_env` is set).
    #[serde(alias = "requiresKey")]
    pub requires_key: Option<bool>,
    /// Name of the output-limit field for OpenAI-compatible servers
    /// (`max_completion_tokens` for OpenAI itself, `max_tokens` elsewhere).
    #[serde(alias = "maxTokensField")]
    pub max_tokens_field: Option<String>,
    /// Connect timeout override in milliseconds.
    #[serde(alias = "connectTimeoutMs")]
    pub connect_timeout_ms: Option<u64>,
    /// Idle timeout override in milliseconds.
    #[serde(alias = "idleTimeoutMs")]
    pub idle_timeout_ms: Option<u64>,
    /// Retry count override.
    #[serde(alias = "maxRetries")]
    pub max_retries: Option<u32>,
    /// Most requests in flight to this provider, all sessions together (more wait for a
    /// slot); overrides `[server] provider_max_in_flight`.
    #[serde(alias = "maxInFlight")]
    pub max_in_flight: Option<usize>,
    /// Whether a requested output schema goes to the server as structured output
    /// (default: true for `anthropic` and `openai`; false elsewhere, since local servers
    /// constrain every token to the schema, which rules out tool calls).
    pub structured_output: Option<bool>,
    /// Whether the server takes Anthropic's context editing (`context_management`, beta
    /// `context-management-2025-06-27`): default true for `anthropic` (its own API), false
    /// elsewhere (a gateway may not pass it through).
    pub context_editing: Option<bool>,
}

/// Limits for one model, overriding the built-in table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelOverride {
    /// Context window in tokens (`context_window`; `contextWindow` is read too).
    #[serde(alias = "contextWindow")]
    pub context_window: Option<u64>,
    /// Output limit in tokens (`max_output`; `maxOutput` is read too).
    #[serde(alias = "maxOutput")]
    pub max_output: Option<u32>,
    /// US dollars per million uncached input tokens (with `output_price`: the session's cost
    /// is reported, e.g. ACP's `usage_update.cost`).
    pub input_price: Option<f64>,
    /// US dollars per million output tokens.
    pub output_price: Option<f64>,
    /// US dollars per million tokens written to the prompt cache (default 1.25 × input).
    pub cache_write_price: Option<f64>,
    /// US dollars per million tokens read from the prompt cache (default 0.1 × input).
    pub cache_read_price: Option<f64>,
}

impl ModelOverride {
    /// The prices it names: input and output both, cache prices defaulting to the providers'
    /// usual ratios of the input price.
    pub fn prices(&self) -> Option<models::Prices> {
        let (input, output) = (self.input_price?, self.output_price?);
        Some(models::Prices {
            input,
            output,
            cache_write: self.cache_write_price.unwrap_or(input * 1.25),
            cache_read: self.cache_read_price.unwrap_or(input * 0.1),
        })
    }
}

/// A provider's settings after merging config, built-ins and the environment.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Provider name from the spec.
    pub name: String,
    /// Wire format.
    pub kind: ProviderKind,
    /// Base URL without a trailing slash.
    pub base_url: String,
    /// The key, when one is configured (never printed).
    pub api_key: Option<String>,
    /// OpenAI-compatible output-limit field name.
    pub max_tokens_field: String,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Idle timeout.
    pub idle_timeout: Duration,
    /// Retry policy.
    pub retry: retry::RetryPolicy,
    /// A request's `output_schema` is sent as the API's structured output.
    pub structured_output: bool,
    /// The server takes Anthropic's context editing (see `ProviderEntry::context_editing`).
    pub context_editing: bool,
    /// Most requests in flight to this endpoint, every session together.
    pub max_in_flight: usize,
}

/// Built-in defaults for a provider name.
fn builtin(name: &str) -> Option<ProviderEntry> {
    let local = |url: &str| ProviderEntry {
        kind: Some(ProviderKind::Openai),
        base_url: Some(url.to_string()),
        ..ProviderEntry::default()
    };
    Some(match name {
        "anthropic" => ProviderEntry {
            kind: Some(ProviderKind::Anthropic),
            base_url: Some("https://api.anthropic.com".into()),
            base_url_env: Some("ANTHROPIC_BASE_URL".into()),
            api_key_env: Some("ANTHROPIC_API_KEY".into()),
            structured_output: Some(true),
            context_editing: Some(true),
            ..ProviderEntry::default()
        },
        "openai" => ProviderEntry {
            kind: Some(ProviderKind::Openai),
            base_url: Some("https://api.openai.com/v1".into()),
            base_url_env: Some("OPENAI_BASE_URL".into()),
            api_key_env: Some("OPENAI_API_KEY".into()),
            max_tokens_field: Some("max_completion_tokens".into()),
            structured_output: Some(true),
            ..ProviderEntry::default()
        },
        "ollama" => local("http://127.0.0.1:11434/v1"),
        "lmstudio" => local("http://127.0.0.1:1234/v1"),
        "llamacpp" => local("http://127.0.0.1:8080/v1"),
        "vllm" => local("http://127.0.0.1:8000/v1"),
        _ => return None,
    })
}

/// Names of the built-in providers.
pub const BUILTIN_PROVIDERS: &[&str] = &[
    "anthropic",
    "openai",
    "ollama",
    "lmstudio",
    "llamacpp",
    "vllm",
];

fn nonempty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.trim().is_empty())
}

/// Merges config, built-ins and environment into an [`Endpoint`]; `env` looks up variables.
pub fn resolve_endpoint(
    name: &str,
    cfg: &ProviderConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Endpoint, ProviderError> {
    let user = cfg.providers.get(name).cloned();
    let base = builtin(name);
    if user.is_none() && base.is_none() {
        let known = BUILTIN_PROVIDERS
            .iter()
            .copied()
            .chain(cfg.providers.keys().map(String::as_str));
        let hint = models::closest(name, known)
            .map(|k| format!(" Did you mean `{k}`?"))
            .unwrap_or_default();
        return Err(ProviderError::Config(format!(
            "unknown provider `{name}`.{hint} Built-in providers: {}. Add one in the user config, e.g.\n\
             [providers.{name}]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:8000/v1\"\n\
             (`replay:PATH` works offline)",
            BUILTIN_PROVIDERS.join(", ")
        )));
    }
    let user = user.unwrap_or_default();
    let base = base.unwrap_or_default();
    let kind = user.kind.or(base.kind).ok_or_else(|| {
        ProviderError::Config(format!(
            "provider `{name}` needs `kind = \"anthropic\"` or `kind = \"openai\"` in [providers.{name}]"
        ))
    })?;
    let base_url_env = user.base_url_env.or(base.base_url_env);
    let base_url = base_url_env
        .as_deref()
        .and_then(|v| nonempty(env(v)))
        .or(user.base_url)
        .or(base.base_url)
        .ok_or_else(|| {
            ProviderError::Config(format!(
                "provider `{name}` needs `base_url` in [providers.{name}]"
            ))
        })?;
    let user_set_key_env = user.api_key_env.is_some();
    let api_key_env = user.api_key_env.or(base.api_key_env);
    let requires_key = user
        .requires_key
        .or(base.requires_key)
        .unwrap_or(api_key_env.is_some());
    let api_key = api_key_env.as_deref().and_then(|v| nonempty(env(v)));
    if requires_key && api_key.is_none() {
        let var = api_key_env.as_deref().unwrap_or("API_KEY");
        let hint = if user_set_key_env {
            String::new()
        } else {
            format!(
                ", or name another variable with `api_key_env = \"MY_VAR\"` under [providers.{name}] in $XDG_CONFIG_HOME/garuda/config.toml"
            )
        };
        return Err(ProviderError::MissingKey {
            provider: name.to_string(),
            variable: var.to_string(),
            hint,
        });
    }
    let max_tokens_field = user
        .max_tokens_field
        .or(base.max_tokens_field)
        .unwrap_or_else(|| "max_tokens".to_string());
    Ok(Endpoint {
        name: name.to_string(),
        kind,
        base_url: base_url.trim_end_matches('/').to_string(),
        api_key,
        max_tokens_field,
        connect_timeout: Duration::from_millis(
            user.connect_timeout_ms.unwrap_or(cfg.connect_timeout_ms),
        ),
        idle_timeout: Duration::from_millis(user.idle_timeout_ms.unwrap_or(cfg.idle_timeout_ms)),
        retry: retry::RetryPolicy {
            max_retries: user.max_retries.unwrap_or(cfg.max_retries),
            base_delay: Duration::from_millis(cfg.retry_base_delay_ms),
            max_delay: Duration::from_millis(cfg.retry_max_delay_ms),
        },
        structured_output: user
            .structured_output
            .or(base.structured_output)
            .unwrap_or(false),
        context_editing: user
            .context_editing
            .or(base.context_editing)
            .unwrap_or(false),
        max_in_flight: user.max_in_flight.unwrap_or(cfg.max_in_flight).max(1),
    })
}

/// Builds the provider a model spec names, reading keys from the environment the process
/// started with (the binary moves them out of its live environment, see
/// [`crate::sandbox::secret_var`]).
pub fn build(spec: &str, cfg: &ProviderConfig) -> Result<Arc<dyn Provider>, ProviderError> {
    build_with_env(spec, cfg, &crate::sandbox::secret_var)
}

/// Like [`build`], with an explicit environment lookup (for tests and embedders).
pub fn build_with_env(
    spec: &str,
    cfg: &ProviderConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Provider>, ProviderError> {
    match ModelSpec::parse(spec)? {
        ModelSpec::Replay(path) => Ok(Arc::new(ReplayProvider::open(&path)?)),
        ModelSpec::Remote { provider, .. } => {
            let ep = resolve_endpoint(&provider, cfg, env)?;
            build_endpoint(ep)
        }
    }
}

/// Builds a provider for an already resolved endpoint.
pub fn build_endpoint(ep: Endpoint) -> Result<Arc<dyn Provider>, ProviderError> {
    Ok(match ep.kind {
        ProviderKind::Anthropic => Arc::new(anthropic::AnthropicProvider::new(ep)?),
        ProviderKind::Openai => Arc::new(openai::OpenAiProvider::new(ep)?),
    })
}

/// The exact JSON body the provider named by `spec` would send for `req` (for `session/view`);
/// needs no key. A replay spec shows the canonical (Anthropic-shaped) body.
pub fn request_preview(
    spec: &str,
    cfg: &ProviderConfig,
    req: &ModelRequest,
) -> Result<serde_json::Value, ProviderError> {
    match ModelSpec::parse(spec)? {
        ModelSpec::Replay(_) => Ok(anthropic::request_body(req)),
        ModelSpec::Remote { provider, .. } => {
            // Only the wire kind and field names matter here, so any key will do.
            let ep = resolve_endpoint(&provider, cfg, &|_| Some("preview".to_string()))?;
            Ok(match ep.kind {
                ProviderKind::Anthropic => anthropic::request_body(req),
                ProviderKind::Openai => openai::request_body(req, &ep.max_tokens_field),
            })
        }
    }
}

/// Whether the model `spec` names is reached over Anthropic's Messages API (a cassette is not:
/// it answers for any wire), so the provider's server tools can be offered.
pub fn speaks_anthropic(spec: &str, cfg: &ProviderConfig) -> bool {
    match ModelSpec::parse(spec) {
        Ok(ModelSpec::Remote { provider, .. }) => {
            resolve_endpoint(&provider, cfg, &|_| Some("preview".to_string()))
                .is_ok_and(|ep| ep.kind == ProviderKind::Anthropic)
        }
        _ => false,
    }
}

/// Context window and output limit for a spec; unknown models get safe defaults, `known: false`.
pub fn model_info(spec: &str, cfg: &ProviderConfig) -> ModelInfo {
    let model = match ModelSpec::parse(spec) {
        Ok(ModelSpec::Remote { model, .. }) => model,
        // A cassette has no window of its own; the defaults are fine and need no warning.
        Ok(ModelSpec::Replay(_)) => {
            let mut info = models::lookup(spec, spec, &cfg.models);
            info.known = true;
            return info;
        }
        Err(_) => spec.to_string(),
    };
    models::lookup(spec, &model, &cfg.models)
}

/// Whether a model named by a file Garuda found (an agent file's `model`) may be used: only
/// a model the user's config or Garuda's table knows, on a provider the user's config or
/// the built-ins define, or exactly one of `configured` (the user's configured models).
/// A file never names a cassette (`replay:` is a path: only the user's config and the
/// command line name one) nor a provider endpoint; `Err` says why not.
pub fn named_model_allowed(
    spec: &str,
    cfg: &ProviderConfig,
    configured: &[String],
) -> Result<(), String> {
    match ModelSpec::parse(spec).map_err(|e| e.to_string())? {
        ModelSpec::Replay(_) => Err("a replay cassette is a path, which only the user's config \
             or the command line may name"
            .into()),
        ModelSpec::Remote { provider, model } => {
            if builtin(&provider).is_none() && !cfg.providers.contains_key(&provider) {
                return Err(format!(
                    "`{provider}` is neither a built-in provider nor one of the user's config"
                ));
            }
            let known = configured.iter().any(|c| c.trim() == spec.trim())
                || cfg.models.contains_key(spec.trim())
                || cfg.models.contains_key(&model)
                || models::lookup(spec, &model, &cfg.models).known;
            if known {
                Ok(())
            } else {
                Err("neither the user's config nor Garuda's model table knows it".into())
            }
        }
    }
}
