//! Canonical conversation content: Anthropic-shaped blocks, converted per provider at the edge.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person (and tool results, which travel in user messages).
    User,
    /// The model.
    Assistant,
}

/// Where an image's bytes come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ImageSource {
    /// Inline base64 data.
    Base64 {
        /// MIME type, e.g. `image/png`.
        media_type: String,
        /// Base64-encoded bytes.
        data: String,
    },
    /// A URL the provider fetches.
    Url {
        /// The address.
        url: String,
    },
}

/// One content block of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// Its bytes or address.
        source: ImageSource,
    },
    /// The model's reasoning, with the provider's signature when it gave one.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// Opaque signature that must be sent back unchanged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A tool call made by the model.
    ToolUse {
        /// Provider-assigned call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments as JSON.
        input: Value,
    },
    /// The result of a tool call.
    ToolResult {
        /// The id of the `tool_use` this answers.
        tool_use_id: String,
        /// Result content (text or images).
        content: Vec<Block>,
        /// True when the tool failed or was refused.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// A block the provider made and ran itself (Anthropic's `server_tool_use` and
    /// `web_search_tool_result`), kept as the provider's JSON verbatim: it goes back byte for
    /// byte, since its encrypted content must be returned as it came.
    Provider {
        /// The provider's block, its `type` included.
        raw: Value,
    },
}

/// The tool calls among `content`, in order: (id, name, input).
pub fn tool_calls(content: &[Block]) -> Vec<(String, String, Value)> {
    content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, name, input } => Some((id.clone(), name.clone(), input.clone())),
            _ => None,
        })
        .collect()
}

impl Block {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Block::Text { text: text.into() }
    }

    /// Characters of text this block carries (used for estimates and trimming).
    pub fn char_len(&self) -> usize {
        match self {
            Block::Text { text } => text.chars().count(),
            Block::Image { .. } => 0,
            Block::Thinking {
                thinking,
                signature,
            } => thinking.chars().count() + signature.as_ref().map_or(0, |s| s.len()),
            Block::ToolUse { name, input, .. } => name.len() + input.to_string().len(),
            Block::ToolResult { content, .. } => content.iter().map(Block::char_len).sum(),
            Block::Provider { raw } => raw.to_string().len(),
        }
    }
}

/// The `type` of the block in which Anthropic's model calls a tool the provider runs.
pub const SERVER_TOOL_USE: &str = "server_tool_use";

impl Block {
    /// The id of a provider block's call (`server_tool_use`).
    pub fn server_call_id(&self) -> Option<&str> {
        match self {
            Block::Provider { raw } if raw["type"] == SERVER_TOOL_USE => raw["id"].as_str(),
            _ => None,
        }
    }

    /// The id of the call a provider block's result answers (`*_tool_result`).
    pub fn server_result_for(&self) -> Option<&str> {
        match self {
            Block::Provider { raw } if raw["type"] != SERVER_TOOL_USE => {
                raw["tool_use_id"].as_str()
            }
            _ => None,
        }
    }
}

/// Keeps a provider call and its result together in one message's `content`: a call whose
/// result is not there and a result whose call is not there are dropped (the provider refuses
/// either alone, and a cut stream or trimmed view can leave one). Other blocks stay.
pub fn pair_server_blocks(content: &mut Vec<Block>) {
    if !content.iter().any(|b| matches!(b, Block::Provider { .. })) {
        return;
    }
    let calls: std::collections::HashSet<String> = content
        .iter()
        .filter_map(|b| b.server_call_id().map(str::to_string))
        .collect();
    let answered: std::collections::HashSet<String> = content
        .iter()
        .filter_map(|b| b.server_result_for().map(str::to_string))
        .collect();
    content.retain(|b| match b {
        Block::Provider { .. } => match (b.server_call_id(), b.server_result_for()) {
            (Some(id), _) => answered.contains(id),
            (_, Some(id)) => calls.contains(id),
            _ => false,
        },
        _ => true,
    });
}

/// What a provider-side web search found, for the people watching and for markers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSearch {
    /// The query, from the call's input.
    pub query: String,
    /// Title and URL of each result.
    pub results: Vec<(String, String)>,
    /// The provider's error code when the search failed.
    pub error: Option<String>,
}

impl ServerSearch {
    /// The search a call (`server_tool_use`) and its result (`web_search_tool_result`) made.
    pub fn of(call: &Value, result: &Value) -> ServerSearch {
        let query = call
            .pointer("/input/query")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let content = &result["content"];
        let results = content
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|r| {
                        let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
                        (s("title"), s("url"))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let error = content["error_code"]
            .as_str()
            .map(str::to_string)
            .or_else(|| (!content.is_array()).then(|| "unavailable".to_string()));
        ServerSearch {
            query,
            results,
            error,
        }
    }

    /// A one-line marker: `[web search: QUERY → N results]` (or its error).
    pub fn marker(&self) -> String {
        match &self.error {
            Some(e) => format!("[web search: {} → error {e}]", self.query),
            None => format!(
                "[web search: {} → {} result{}]",
                self.query,
                self.results.len(),
                if self.results.len() == 1 { "" } else { "s" }
            ),
        }
    }

    /// The results as lines of title and URL (or the error), as a client shows them.
    pub fn listing(&self) -> String {
        if let Some(e) = &self.error {
            return format!("the provider's web search failed: {e}");
        }
        let mut out = String::new();
        for (title, url) in &self.results {
            out.push_str(&format!("{title} — {url}\n"));
        }
        out
    }
}

/// The provider-side searches in `content`, each call with its result, in order, as one
/// marker each; used where provider blocks cannot go (a request without the server tool).
pub fn server_markers(content: &[Block]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, b) in content.iter().enumerate() {
        let (Block::Provider { raw }, Some(id)) = (b, b.server_call_id()) else {
            continue;
        };
        let result = content.iter().find_map(|r| match r {
            Block::Provider { raw } if r.server_result_for() == Some(id) => Some(raw),
            _ => None,
        });
        if let Some(result) = result {
            out.push((i, ServerSearch::of(raw, result).marker()));
        }
    }
    out
}

/// A provider-facing message: a role and its blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Content blocks in order.
    pub content: Vec<Block>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: vec![Block::text(text)],
        }
    }

    /// The concatenated text blocks.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for b in &self.content {
            if let Block::Text { text } = b {
                out.push_str(text);
            }
        }
        out
    }
}

/// Token usage as reported by a provider for one response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Input tokens the provider cleared from the request itself (Anthropic's context
    /// editing); not part of the context it counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cleared_input_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Everything the provider counted as input (the real context size).
    pub fn context_tokens(&self) -> u64 {
        self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
    }

    /// Adds another response's usage to this total.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.cleared_input_tokens += other.cleared_input_tokens;
    }
}

/// Why the model (or Garuda) ended a response or turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model wants tool results.
    ToolUse,
    /// The output limit was reached.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The model refused.
    Refusal,
    /// The provider paused a long turn of server-side tool work (Anthropic's `pause_turn`):
    /// the answer so far goes back as it is for the model to go on. The turn loop continues
    /// it; a turn never ends with it.
    PauseTurn,
    /// The client or user cancelled.
    Cancelled,
    /// The turn hit Garuda's built-in step limit.
    MaxSteps,
    /// The turn hit the step limit its caller set (`garuda exec --max-turns`).
    MaxTurns,
    /// The turn's cost reached the limit its caller set (`garuda exec --max-budget-usd`).
    MaxBudget,
    /// The turn ended with an error.
    Error,
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// Unique name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its input object.
    pub input_schema: Value,
}

/// Most cache breakpoints a request may carry, the system prompt's included (Anthropic's
/// limit; the view pipeline plans within it and the provider enforces it).
pub const MAX_CACHE_MARKERS: usize = 4;

/// Where a request's prompt-cache breakpoints go: the end of the system prompt and the last
/// block of the listed messages (indices into the request's messages, ascending).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CachePlan {
    /// Mark the end of the system prompt.
    pub system: bool,
    /// Messages whose last block gets a marker.
    pub messages: Vec<usize>,
}

impl ToolSpec {
    /// A tool the provider runs itself: `definition` is its entry in a request's tools as the
    /// provider spells it (Anthropic's `{"type": "web_search_20250305", "name": …}`), carried
    /// where an input schema would be, so the spec keeps its one shape everywhere it travels.
    pub fn provider(name: &str, definition: Value) -> ToolSpec {
        ToolSpec {
            name: name.to_string(),
            description: String::new(),
            input_schema: definition,
        }
    }

    /// The provider's definition of a tool it runs itself (see [`ToolSpec::provider`]): an
    /// input schema's `type` is a JSON Schema type, a provider tool's is its own versioned
    /// name.
    pub fn provider_definition(&self) -> Option<&Value> {
        const SCHEMA_TYPES: [&str; 7] = [
            "object", "string", "array", "number", "integer", "boolean", "null",
        ];
        match self.input_schema.get("type").and_then(Value::as_str) {
            Some(t) if !SCHEMA_TYPES.contains(&t) => Some(&self.input_schema),
            _ => None,
        }
    }
}

impl CachePlan {
    /// Markers in all.
    pub fn count(&self) -> usize {
        usize::from(self.system) + self.messages.len()
    }
}

/// Estimated tokens for a number of characters (characters / 4, rounded up).
pub fn estimate_tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}
