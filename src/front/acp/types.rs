//! The subset of the ACP v1 schema Garuda speaks, as serde types (wire names as in the spec).
//!
//! Hand-written rather than taken from `agent-client-protocol-schema`: that crate turns on
//! serde_json's `preserve_order` feature, which (features being unified across the build)
//! changes `serde_json::Value` for the whole of Garuda: key order of every JSON answer, the
//! generated `protocol/schema.json`, snapshots, and `Value`'s size. See the module docs.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version Garuda implements.
pub const PROTOCOL_VERSION: u16 = 1;

/// A content block of a prompt or a message chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// A base64 image.
    #[serde(rename_all = "camelCase")]
    Image {
        /// Base64 data.
        data: String,
        /// e.g. `image/png`.
        mime_type: String,
    },
    /// Audio (not supported by Garuda's models; described as text).
    #[serde(rename_all = "camelCase")]
    Audio {
        /// Base64 data.
        data: String,
        /// e.g. `audio/wav`.
        mime_type: String,
    },
    /// A link to a resource the agent may read.
    ResourceLink {
        /// Display name.
        name: String,
        /// Its URI.
        uri: String,
    },
    /// A resource embedded in the prompt (`@file` mentions).
    Resource {
        /// The contents.
        resource: EmbeddedResource,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(t: impl Into<String>) -> ContentBlock {
        ContentBlock::Text { text: t.into() }
    }
}

/// Embedded resource contents: text or a base64 blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddedResource {
    /// The resource URI.
    pub uri: String,
    /// Text contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Binary contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// What kind of work a tool call does (the editor picks an icon).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads files.
    Read,
    /// Edits files.
    Edit,
    /// Searches.
    Search,
    /// Runs commands.
    Execute,
    /// Plans or thinks.
    Think,
    /// Anything else.
    Other,
}

/// Where a tool call is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// Not started (waiting for approval or input).
    Pending,
    /// Running.
    InProgress,
    /// Done.
    Completed,
    /// Failed, refused or interrupted.
    Failed,
}

/// Content produced by a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolCallContent {
    /// A content block.
    Content {
        /// The block.
        content: ContentBlock,
    },
}

/// A tool call, announced (`tool_call`) or updated (`tool_call_update`, fields optional).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The call id.
    pub tool_call_id: String,
    /// One line for the editor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Kind of work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolKind>,
    /// Status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolCallStatus>,
    /// Arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
    /// Output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ToolCallContent>>,
}

/// Priority of a plan entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanEntryPriority {
    /// High.
    High,
    /// Medium (Garuda's todos have no priority).
    Medium,
    /// Low.
    Low,
}

/// Status of a plan entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanEntryStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// One entry of the agent's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanEntry {
    /// What to do.
    pub content: String,
    /// Priority.
    pub priority: PlanEntryPriority,
    /// Status.
    pub status: PlanEntryStatus,
}

/// A slash command the editor may offer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AvailableCommand {
    /// Name without the slash.
    pub name: String,
    /// What it does.
    pub description: String,
    /// `{hint}` when it takes free text after the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
}

/// The `update` of a `session/update` notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub enum SessionUpdate {
    /// Replayed user text.
    UserMessageChunk {
        /// The chunk.
        content: ContentBlock,
    },
    /// Answer text.
    AgentMessageChunk {
        /// The chunk.
        content: ContentBlock,
    },
    /// Reasoning text.
    AgentThoughtChunk {
        /// The chunk.
        content: ContentBlock,
    },
    /// A new tool call.
    ToolCall(ToolCall),
    /// A tool call changed.
    ToolCallUpdate(ToolCall),
    /// The whole plan.
    Plan {
        /// Entries in order.
        entries: Vec<PlanEntry>,
    },
    /// The slash commands.
    #[serde(rename_all = "camelCase")]
    AvailableCommandsUpdate {
        /// The commands.
        available_commands: Vec<AvailableCommand>,
    },
    /// Context window use.
    UsageUpdate {
        /// Tokens in the context.
        used: u64,
        /// The context window.
        size: u64,
    },
}

/// `session/update` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNotification {
    /// The session.
    pub session_id: String,
    /// What changed.
    pub update: SessionUpdate,
}

/// `session/new` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionRequest {
    /// The workspace root (absolute).
    pub cwd: PathBuf,
    /// MCP servers to start with the session (stdio and http).
    #[serde(default)]
    pub mcp_servers: Vec<Value>,
    /// Extra directories the editor has open.
    #[serde(default)]
    pub additional_directories: Vec<PathBuf>,
}

/// `session/load` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionRequest {
    /// The session to load.
    pub session_id: String,
    /// The editor's folder.
    pub cwd: PathBuf,
    /// MCP servers to start when the session is brought back from disk.
    #[serde(default)]
    pub mcp_servers: Vec<Value>,
}

/// `session/prompt` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptRequest {
    /// The session.
    pub session_id: String,
    /// The user's message.
    pub prompt: Vec<Value>,
}

/// `session/cancel` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelNotification {
    /// The session whose turn stops.
    pub session_id: String,
}

/// Why a prompt turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished.
    EndTurn,
    /// The output limit was hit.
    MaxTokens,
    /// Garuda's step limit was hit.
    MaxTurnRequests,
    /// The model refused.
    Refusal,
    /// The client cancelled.
    Cancelled,
}
