//! Anthropic Messages API over SSE.

use std::collections::BTreeMap;

use futures_util::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::retry::{Verdict, classify_stream_error};
use super::sse::{self, Decoder, Step};
use super::{
    CachePlan, Endpoint, EventSink, MAX_CACHE_MARKERS, ModelRequest, ModelResponse, Provider,
    ProviderError, StreamEvent,
};
use crate::message::{Block, Role, SERVER_TOOL_USE, ServerSearch, StopReason, Usage};

/// The API version header value.
pub const API_VERSION: &str = "2023-06-01";
/// The beta that enables `output_format` (structured outputs).
pub const STRUCTURED_OUTPUTS: &str = "structured-outputs-2025-11-13";

/// The beta that enables `context_management` (the provider clearing old tool results).
pub const CONTEXT_MANAGEMENT: &str = "context-management-2025-06-27";

/// True for the models Anthropic's context editing serves: the Claude 4 family and later
/// (Opus 4, 4.1, Sonnet 4, 4.5, Haiku 4.5, …), not Claude 3.
pub fn edits_context(model: &str) -> bool {
    let Some(rest) = model.strip_prefix("claude-") else {
        return false;
    };
    ["opus-", "sonnet-", "haiku-"].iter().any(|family| {
        rest.strip_prefix(family)
            .and_then(|v| v.split(['-', '.']).next())
            .and_then(|major| major.parse::<u32>().ok())
            .is_some_and(|major| major >= 4)
    })
}

/// A provider speaking the Anthropic Messages API.
pub struct AnthropicProvider {
    ep: Endpoint,
    /// The HTTP client and request slots every session on this endpoint shares.
    shared: std::sync::Arc<super::pool::Shared>,
}

impl AnthropicProvider {
    /// Creates the provider on the endpoint's shared HTTP client and request slots.
    pub fn new(ep: Endpoint) -> Result<Self, ProviderError> {
        let shared = super::pool::shared(&ep)?;
        Ok(AnthropicProvider { ep, shared })
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        &self.ep.name
    }

    fn clears_tool_uses(&self, model: &str) -> bool {
        self.ep.context_editing && edits_context(model)
    }

    fn complete(
        &self,
        req: ModelRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        let mut headers = HeaderMap::new();
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("accept", HeaderValue::from_static("text/event-stream"));
        let mut bad_key = false;
        if let Some(key) = &self.ep.api_key {
            match HeaderValue::from_str(key) {
                Ok(mut v) => {
                    v.set_sensitive(true);
                    headers.insert("x-api-key", v);
                }
                Err(_) => bad_key = true,
            }
        }
        let mut req = req;
        if !self.ep.structured_output {
            req.output_schema = None;
        }
        if !self.clears_tool_uses(&req.model) {
            req.tool_clearing = None;
        }
        let betas: Vec<&str> = [
            req.output_schema.is_some().then_some(STRUCTURED_OUTPUTS),
            req.tool_clearing.is_some().then_some(CONTEXT_MANAGEMENT),
        ]
        .into_iter()
        .flatten()
        .collect();
        if let Ok(v) = HeaderValue::from_str(&betas.join(","))
            && !betas.is_empty()
        {
            headers.insert("anthropic-beta", v);
        }
        let body = serde_json::to_vec(&request_body(&req)).unwrap_or_default();
        let call = sse::Call {
            client: self.shared.client.clone(),
            slots: self.shared.slots.clone(),
            url: format!("{}/v1/messages", self.ep.base_url),
            headers,
            body,
            idle: self.ep.idle_timeout,
            retry: self.ep.retry,
            secret: self.ep.api_key.clone(),
            taken: super::normalize::used_ids(&req.messages),
        };
        Box::pin(async move {
            if bad_key {
                return Err(ProviderError::Config(
                    "the API key contains characters that cannot go in an HTTP header".into(),
                ));
            }
            sse::run(call, AnthropicDecoder::default, events, cancel).await
        })
    }
}

/// The JSON body sent for a request (also what `session/view` can show).
pub fn request_body(req: &ModelRequest) -> Value {
    let (mark_system, marked) =
        plan_markers(&req.cache, req.messages.len(), !req.system.is_empty());
    let mut body = serde_json::Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert("max_tokens".into(), json!(req.max_tokens));
    if !req.system.is_empty() {
        let mut block = json!({"type": "text", "text": req.system});
        if mark_system {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
        body.insert("system".into(), json!([block]));
    }
    let messages: Vec<Value> = req
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut content: Vec<Value> = m.content.iter().filter_map(wire_block).collect();
            if marked.contains(&i) {
                // The API refuses markers on thinking blocks: mark the last block that can take one.
                let target = content.iter_mut().rev().find(|b| {
                    !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking"))
                });
                if let Some(Value::Object(last)) = target {
                    last.insert("cache_control".into(), json!({"type": "ephemeral"}));
                }
            }
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({"role": role, "content": content})
        })
        .collect();
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| match t.provider_definition() {
                Some(definition) => definition.clone(),
                None => json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}),
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if req.no_tool_calls {
            body.insert("tool_choice".into(), json!({"type": "none"}));
        }
    }
    if let Some(budget) = req.thinking_budget {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    if let Some(schema) = &req.output_schema {
        body.insert(
            "output_format".into(),
            json!({"type": "json_schema", "schema": schema}),
        );
    }
    if let Some(c) = &req.tool_clearing {
        let mut edit = json!({
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": c.trigger_tokens},
            "keep": {"type": "tool_uses", "value": c.keep_tool_uses},
            "clear_at_least": {"type": "input_tokens", "value": c.clear_at_least_tokens},
        });
        if !c.exclude_tools.is_empty() {
            edit["exclude_tools"] = json!(c.exclude_tools);
        }
        body.insert("context_management".into(), json!({"edits": [edit]}));
    }
    body.insert("stream".into(), json!(true));
    Value::Object(body)
}

/// Input tokens the provider's context editing cleared, from a `context_management` object
/// (`applied_edits`, each with `cleared_input_tokens`).
fn cleared_tokens(cm: &Value) -> u64 {
    cm.get("applied_edits")
        .and_then(Value::as_array)
        .map(|edits| {
            edits
                .iter()
                .filter_map(|e| u(e, "cleared_input_tokens"))
                .sum()
        })
        .unwrap_or(0)
}

/// Applies the 4-marker cap: the system marker first, then the latest planned messages.
fn plan_markers(plan: &CachePlan, n_messages: usize, has_system: bool) -> (bool, Vec<usize>) {
    let system = plan.system && has_system;
    let mut idx: Vec<usize> = plan
        .messages
        .iter()
        .copied()
        .filter(|&i| i < n_messages)
        .collect();
    idx.sort_unstable();
    idx.dedup();
    let room = MAX_CACHE_MARKERS - usize::from(system);
    let skip = idx.len().saturating_sub(room);
    (system, idx.split_off(skip))
}

/// The wire form of a canonical block; unsigned thinking (from other providers) is dropped
/// because the API rejects it.
fn wire_block(b: &Block) -> Option<Value> {
    match b {
        Block::Thinking {
            signature: None, ..
        } => None,
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let inner: Vec<Value> = content.iter().filter_map(wire_block).collect();
            let mut v =
                json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": inner});
            if *is_error {
                v["is_error"] = json!(true);
            }
            Some(v)
        }
        Block::Provider { raw } => Some(raw.clone()),
        other => serde_json::to_value(other).ok(),
    }
}

#[derive(Debug)]
enum Partial {
    Text(String),
    Thinking {
        text: String,
        signature: Option<String>,
    },
    Tool {
        id: String,
        name: String,
        json: String,
    },
    /// A call of a tool the provider runs: its block as sent, the input still arriving.
    Server {
        head: Value,
        json: String,
    },
    /// A provider block that arrives whole (a server tool's result).
    Raw(Value),
    Ignored,
}

/// Incremental parser of the Anthropic event stream.
#[derive(Debug, Default)]
pub(crate) struct AnthropicDecoder {
    blocks: BTreeMap<u64, (Partial, bool)>,
    usage: Usage,
    stop: Option<StopReason>,
    emitted: bool,
}

fn decode_err(what: &str) -> Verdict {
    Verdict::Fail(ProviderError::Decode(what.to_string()))
}

fn u(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}

fn stop_reason(s: &str) -> StopReason {
    match s {
        "tool_use" => StopReason::ToolUse,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        "pause_turn" => StopReason::PauseTurn,
        _ => StopReason::EndTurn,
    }
}

/// The input of a finished tool call: its JSON, or the raw text when it is not JSON (the
/// boundary's normalization turns that into an error the model sees).
fn tool_input(json: &str) -> Value {
    if json.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(json).unwrap_or_else(|_| Value::String(json.to_string()))
}

impl AnthropicDecoder {
    fn block(p: &Partial) -> Option<Block> {
        Some(match p {
            Partial::Text(t) => Block::Text { text: t.clone() },
            Partial::Thinking { text, signature } => Block::Thinking {
                thinking: text.clone(),
                signature: signature.clone().filter(|s| !s.is_empty()),
            },
            Partial::Tool { id, name, json } => Block::ToolUse {
                id: id.clone(),
                name: name.clone(),
                input: tool_input(json),
            },
            Partial::Server { head, json } => {
                let mut raw = head.clone();
                raw["input"] = tool_input(json);
                Block::Provider { raw }
            }
            Partial::Raw(raw) => Block::Provider { raw: raw.clone() },
            Partial::Ignored => return None,
        })
    }

    /// The provider's call `id`, as its block will be stored.
    fn server_call(&self, id: &str) -> Option<Block> {
        self.blocks.values().find_map(|(p, _)| match p {
            Partial::Server { head, .. } if head["id"] == id => Self::block(p),
            _ => None,
        })
    }
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, name: &str, data: &str, sink: &EventSink) -> Result<Step, Verdict> {
        if name == "ping" {
            return Ok(Step::More);
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| decode_err(&format!("bad `{name}` event: {e}")))?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or(name);
        match kind {
            "message_start" => {
                if let Some(cm) = v.pointer("/message/context_management") {
                    self.usage.cleared_input_tokens = cleared_tokens(cm);
                }
                if let Some(us) = v.pointer("/message/usage") {
                    self.usage.input_tokens = u(us, "input_tokens").unwrap_or(0);
                    self.usage.output_tokens = u(us, "output_tokens").unwrap_or(0);
                    self.usage.cache_creation_input_tokens =
                        u(us, "cache_creation_input_tokens").unwrap_or(0);
                    self.usage.cache_read_input_tokens =
                        u(us, "cache_read_input_tokens").unwrap_or(0);
                }
            }
            "content_block_start" => {
                let index = u(&v, "index").ok_or_else(|| decode_err("block without index"))?;
                let cb = v
                    .get("content_block")
                    .ok_or_else(|| decode_err("no content_block"))?;
                let s = |k: &str| cb.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let p = match cb.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let t = s("text");
                        if !t.is_empty() {
                            self.emitted = true;
                            let _ = sink.send(StreamEvent::TextDelta(t.clone()));
                        }
                        Partial::Text(t)
                    }
                    Some("thinking") => Partial::Thinking {
                        text: s("thinking"),
                        signature: cb
                            .get("signature")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                    },
                    Some("tool_use") => {
                        let (id, name) = (s("id"), s("name"));
                        self.emitted = true;
                        let _ = sink.send(StreamEvent::ToolUseStart {
                            id: id.clone(),
                            name: name.clone(),
                        });
                        // Anthropic sends `{}` here and the real input as deltas.
                        let json = match cb.get("input") {
                            Some(Value::Object(m)) if m.is_empty() => String::new(),
                            None | Some(Value::Null) => String::new(),
                            Some(other) => other.to_string(),
                        };
                        Partial::Tool { id, name, json }
                    }
                    Some(SERVER_TOOL_USE) => {
                        self.emitted = true;
                        let json = match cb.get("input") {
                            Some(Value::Object(m)) if m.is_empty() => String::new(),
                            None | Some(Value::Null) => String::new(),
                            Some(other) => other.to_string(),
                        };
                        // The block's own fields in its order; the input goes back last.
                        let head: serde_json::Map<String, Value> = cb
                            .as_object()
                            .into_iter()
                            .flatten()
                            .filter(|(k, _)| *k != "input")
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        Partial::Server {
                            head: Value::Object(head),
                            json,
                        }
                    }
                    // A server tool's result (`web_search_tool_result`, …) arrives whole.
                    Some(_) if cb.get("tool_use_id").is_some_and(Value::is_string) => {
                        self.emitted = true;
                        let id = s("tool_use_id");
                        if let Some(Block::Provider { raw: call }) = self.server_call(&id) {
                            let found = ServerSearch::of(&call, cb);
                            let _ = sink.send(StreamEvent::ServerToolResult {
                                id,
                                name: call["name"].as_str().unwrap_or("").to_string(),
                                output: found.listing(),
                                is_error: found.error.is_some(),
                            });
                        }
                        Partial::Raw(cb.clone())
                    }
                    _ => Partial::Ignored,
                };
                self.blocks.insert(index, (p, false));
            }
            "content_block_delta" => {
                let index = u(&v, "index").ok_or_else(|| decode_err("delta without index"))?;
                let d = v.get("delta").ok_or_else(|| decode_err("no delta"))?;
                let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let Some((p, _)) = self.blocks.get_mut(&index) else {
                    return Err(decode_err("delta for a block that never started"));
                };
                match (d.get("type").and_then(Value::as_str), p) {
                    (Some("text_delta"), Partial::Text(t)) => {
                        let piece = s("text");
                        t.push_str(&piece);
                        self.emitted = true;
                        let _ = sink.send(StreamEvent::TextDelta(piece));
                    }
                    (Some("thinking_delta"), Partial::Thinking { text, .. }) => {
                        let piece = s("thinking");
                        text.push_str(&piece);
                        self.emitted = true;
                        let _ = sink.send(StreamEvent::ThinkingDelta(piece));
                    }
                    (Some("signature_delta"), Partial::Thinking { signature, .. }) => {
                        signature
                            .get_or_insert_with(String::new)
                            .push_str(&s("signature"));
                    }
                    (Some("input_json_delta"), Partial::Tool { id, json, .. }) => {
                        let piece = s("partial_json");
                        json.push_str(&piece);
                        let _ = sink.send(StreamEvent::ToolUseInputDelta {
                            id: id.clone(),
                            partial_json: piece,
                        });
                    }
                    (Some("input_json_delta"), Partial::Server { json, .. }) => {
                        json.push_str(&s("partial_json"));
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(index) = u(&v, "index")
                    && let Some((p, done)) = self.blocks.get_mut(&index)
                {
                    *done = true;
                    if let Partial::Server { .. } = p
                        && let Some(Block::Provider { raw }) = Self::block(p)
                    {
                        let _ = sink.send(StreamEvent::ServerToolUse {
                            id: raw["id"].as_str().unwrap_or("").to_string(),
                            name: raw["name"].as_str().unwrap_or("").to_string(),
                            input: raw["input"].clone(),
                        });
                    }
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop_reason(r));
                }
                // Where the edits applied to this request are reported.
                if let Some(cm) = v.get("context_management") {
                    self.usage.cleared_input_tokens = cleared_tokens(cm);
                }
                if let Some(us) = v.get("usage") {
                    if let Some(o) = u(us, "output_tokens") {
                        self.usage.output_tokens = o;
                    }
                    // Some gateways report input usage only at the end.
                    if let Some(i) = u(us, "input_tokens") {
                        self.usage.input_tokens = i;
                    }
                    if let Some(c) = u(us, "cache_creation_input_tokens") {
                        self.usage.cache_creation_input_tokens = c;
                    }
                    if let Some(c) = u(us, "cache_read_input_tokens") {
                        self.usage.cache_read_input_tokens = c;
                    }
                }
            }
            "message_stop" => return Ok(Step::Done),
            "error" => {
                let t = v
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                let m = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                return Err(classify_stream_error(t, m));
            }
            _ => {}
        }
        Ok(Step::More)
    }

    fn has_content(&self) -> bool {
        self.emitted
    }

    fn partial(&self) -> Vec<Block> {
        let mut content: Vec<Block> = self
            .blocks
            .values()
            .filter_map(|(p, done)| match p {
                Partial::Text(t) if !t.is_empty() => Some(Block::Text { text: t.clone() }),
                // Thinking is only worth keeping with its signature; tool calls only when whole.
                Partial::Thinking { .. }
                | Partial::Tool { .. }
                | Partial::Server { .. }
                | Partial::Raw(_)
                    if *done =>
                {
                    Self::block(p).filter(|b| {
                        !matches!(
                            b,
                            Block::Thinking {
                                signature: None,
                                ..
                            }
                        )
                    })
                }
                _ => None,
            })
            .collect();
        crate::message::pair_server_blocks(&mut content);
        content
    }

    fn eof_ok(&self) -> bool {
        false
    }

    fn finish(&mut self) -> Result<ModelResponse, ProviderError> {
        let mut content = Vec::new();
        for (p, _) in self.blocks.values() {
            if let Some(b) = Self::block(p) {
                content.push(b);
            }
        }
        crate::message::pair_server_blocks(&mut content);
        let has_tool = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
        let stop_reason = self.stop.unwrap_or(if has_tool {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        });
        Ok(ModelResponse {
            content,
            stop_reason,
            usage: self.usage,
            tool_errors: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_editing_serves_the_claude_4_family_only() {
        for m in [
            "claude-sonnet-4-5",
            "claude-sonnet-4-20250514",
            "claude-opus-4-1-20250805",
            "claude-haiku-4-5-20251001",
            "claude-opus-5",
        ] {
            assert!(edits_context(m), "{m}");
        }
        for m in [
            "claude-3-5-sonnet-latest",
            "claude-3-opus",
            "gpt-5",
            "claude-sonnet-x",
        ] {
            assert!(!edits_context(m), "{m}");
        }
    }

    #[test]
    fn cleared_tokens_sum_the_applied_edits() {
        let cm = json!({"applied_edits": [
            {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2, "cleared_input_tokens": 100},
            {"type": "clear_thinking_20251015", "cleared_input_tokens": 20}
        ]});
        assert_eq!(cleared_tokens(&cm), 120);
        assert_eq!(cleared_tokens(&json!({})), 0);
    }
}
