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
        }
    }
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
