//! OpenAI-compatible Chat Completions over SSE (OpenAI, Ollama, llama.cpp, vLLM, LM Studio).

use std::collections::BTreeMap;

use futures_util::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::retry::{Verdict, classify_stream_error};
use super::sse::{self, Decoder, Step};
use super::{
    Endpoint, EventSink, ModelRequest, ModelResponse, Provider, ProviderError, StreamEvent,
};
use crate::message::{Block, ImageSource, Message, Role, StopReason, Usage};

/// A provider speaking OpenAI-compatible Chat Completions.
pub struct OpenAiProvider {
    ep: Endpoint,
    /// The HTTP client and request slots every session on this endpoint shares.
    shared: std::sync::Arc<super::pool::Shared>,
}

impl OpenAiProvider {
    /// Creates the provider on the endpoint's shared HTTP client and request slots.
    pub fn new(ep: Endpoint) -> Result<Self, ProviderError> {
        let shared = super::pool::shared(&ep)?;
        Ok(OpenAiProvider { ep, shared })
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.ep.name
    }

    fn server_window(&self, model: &str) -> BoxFuture<'static, Option<super::ServerWindow>> {
        if !super::window::is_local(&self.ep.base_url) {
            return Box::pin(async { None });
        }
        let client = self.shared.client.clone();
        let (name, url, model) = (
            self.ep.name.clone(),
            self.ep.base_url.clone(),
            model.to_string(),
        );
        Box::pin(async move { super::window::ask(&client, &name, &url, &model).await })
    }

    fn complete(
        &self,
        req: ModelRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("accept", HeaderValue::from_static("text/event-stream"));
        let mut bad_key = false;
        if let Some(key) = &self.ep.api_key {
            match HeaderValue::from_str(&format!("Bearer {key}")) {
                Ok(mut v) => {
                    v.set_sensitive(true);
                    headers.insert("authorization", v);
                }
                Err(_) => bad_key = true,
            }
        }
        let mut req = req;
        if !self.ep.structured_output {
            req.output_schema = None;
        }
        let body =
            serde_json::to_vec(&request_body(&req, &self.ep.max_tokens_field)).unwrap_or_default();
        let call = sse::Call {
            client: self.shared.client.clone(),
            slots: self.shared.slots.clone(),
            url: format!("{}/chat/completions", self.ep.base_url),
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
            sse::run(call, OpenAiDecoder::default, events, cancel).await
        })
    }
}

/// The JSON body sent for a request; `max_tokens_field` names the output-limit field.
pub fn request_body(req: &ModelRequest, max_tokens_field: &str) -> Value {
    let mut messages = Vec::new();
    if !req.system.is_empty() {
        messages.push(json!({"role": "system", "content": req.system}));
    }
    for m in &req.messages {
        wire_messages(m, &mut messages);
    }
    let mut body = serde_json::Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert("messages".into(), Value::Array(messages));
    // Another provider's server tools (a model switched mid-session) mean nothing here.
    let functions: Vec<_> = req
        .tools
        .iter()
        .filter(|t| t.provider_definition().is_none())
        .collect();
    if !functions.is_empty() {
        let tools: Vec<Value> = functions
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema}})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        if req.no_tool_calls {
            body.insert("tool_choice".into(), json!("none"));
        }
    }
    body.insert(max_tokens_field.to_string(), json!(req.max_tokens));
    if let Some(schema) = &req.output_schema {
        // Not strict: strict mode accepts only schemas that close every object and require
        // every property, and the answer is validated by the caller anyway.
        body.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {"name": "final_answer", "schema": schema, "strict": false}}),
        );
    }
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    Value::Object(body)
}

fn image_url(src: &ImageSource) -> Value {
    let url = match src {
        ImageSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
        ImageSource::Url { url } => url.clone(),
    };
    json!({"type": "image_url", "image_url": {"url": url}})
}

/// Text parts as a plain string when there are no images, else a parts array.
fn content_value(parts: Vec<Value>) -> Value {
    if parts.iter().all(|p| p["type"] == "text") {
        let texts: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
        Value::String(texts.join("\n"))
    } else {
        Value::Array(parts)
    }
}

/// Converts one canonical message into one or more chat messages: tool results become
/// `role: "tool"` messages placed first (they must follow the assistant's tool calls),
/// thinking is dropped, tool calls become `tool_calls`.
fn wire_messages(m: &Message, out: &mut Vec<Value>) {
    match m.role {
        Role::User => {
            let mut parts = Vec::new();
            for b in &m.content {
                match b {
                    Block::Text { text } => parts.push(json!({"type": "text", "text": text})),
                    Block::Image { source } => parts.push(image_url(source)),
                    Block::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } => {
                        let mut text = String::new();
                        for c in content {
                            match c {
                                Block::Text { text: t } => {
                                    if !text.is_empty() {
                                        text.push('\n');
                                    }
                                    text.push_str(t);
                                }
                                // Tool messages carry text only; images follow as user parts.
                                Block::Image { source } => parts.push(image_url(source)),
                                _ => {}
                            }
                        }
                        if text.is_empty() && parts.iter().any(|p| p["type"] == "image_url") {
                            text = "(image attached in the next user message)".into();
                        }
                        if *is_error {
                            text = format!("Error: {text}");
                        }
                        out.push(
                            json!({"role": "tool", "tool_call_id": tool_use_id, "content": text}),
                        );
                    }
                    // Only Anthropic's wire has server-side tools; their blocks mean nothing here.
                    Block::Thinking { .. } | Block::ToolUse { .. } | Block::Provider { .. } => {}
                }
            }
            if !parts.is_empty() {
                out.push(json!({"role": "user", "content": content_value(parts)}));
            }
        }
        Role::Assistant => {
            let mut text = String::new();
            let mut calls = Vec::new();
            for b in &m.content {
                match b {
                    Block::Text { text: t } => text.push_str(t),
                    Block::ToolUse { id, name, input } => calls.push(json!({
                        "id": id, "type": "function",
                        "function": {"name": name, "arguments": input.to_string()}})),
                    _ => {}
                }
            }
            let mut msg = json!({"role": "assistant"});
            msg["content"] = if text.is_empty() && !calls.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            if !calls.is_empty() {
                msg["tool_calls"] = Value::Array(calls);
            }
            out.push(msg);
        }
    }
}

#[derive(Debug, Default)]
struct ToolAcc {
    id: String,
    name: String,
    args: String,
    started: bool,
}

/// Incremental parser of Chat Completions chunks.
#[derive(Debug, Default)]
pub(crate) struct OpenAiDecoder {
    reasoning: String,
    text: String,
    tools: BTreeMap<u64, ToolAcc>,
    finish: Option<String>,
    usage: Usage,
    emitted: bool,
}

fn finish_reason(s: &str) -> StopReason {
    match s {
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        _ => StopReason::EndTurn,
    }
}

impl OpenAiDecoder {
    /// The tool calls; arguments that are not JSON stay raw text, which the boundary's
    /// normalization turns into an error the model sees.
    fn tool_blocks(&self) -> Vec<Block> {
        self.tools
            .iter()
            .map(|(i, t)| {
                let input = if t.args.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&t.args).unwrap_or_else(|_| Value::String(t.args.clone()))
                };
                let id = if t.id.is_empty() {
                    format!("call_{i}")
                } else {
                    t.id.clone()
                };
                Block::ToolUse {
                    id,
                    name: t.name.clone(),
                    input,
                }
            })
            .collect()
    }

    fn text_blocks(&self) -> Vec<Block> {
        let mut out = Vec::new();
        if !self.reasoning.is_empty() {
            out.push(Block::Thinking {
                thinking: self.reasoning.clone(),
                signature: None,
            });
        }
        if !self.text.is_empty() {
            out.push(Block::Text {
                text: self.text.clone(),
            });
        }
        out
    }
}

impl Decoder for OpenAiDecoder {
    fn event(&mut self, _name: &str, data: &str, sink: &EventSink) -> Result<Step, Verdict> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(Step::Done);
        }
        if data.is_empty() {
            return Ok(Step::More);
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| Verdict::Fail(ProviderError::Decode(format!("bad chunk: {e}"))))?;
        if let Some(err) = v.get("error") {
            let kind = err
                .get("type")
                .or_else(|| err.get("code"))
                .and_then(Value::as_str)
                .unwrap_or("error");
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .or_else(|| err.as_str())
                .unwrap_or("");
            return Err(classify_stream_error(kind, msg));
        }
        if let Some(us) = v.get("usage").filter(|u| u.is_object()) {
            let n = |p: &str| us.pointer(p).and_then(Value::as_u64).unwrap_or(0);
            let cached = n("/prompt_tokens_details/cached_tokens");
            self.usage = Usage {
                input_tokens: n("/prompt_tokens").saturating_sub(cached),
                output_tokens: n("/completion_tokens"),
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: cached,
                cleared_input_tokens: 0,
            };
        }
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(Step::More);
        };
        if let Some(d) = choice.get("delta") {
            // Local servers stream reasoning as `reasoning_content` or `reasoning`.
            let r = d
                .get("reasoning_content")
                .or_else(|| d.get("reasoning"))
                .and_then(Value::as_str);
            if let Some(r) = r.filter(|r| !r.is_empty()) {
                self.reasoning.push_str(r);
                self.emitted = true;
                let _ = sink.send(StreamEvent::ThinkingDelta(r.to_string()));
            }
            if let Some(t) = d
                .get("content")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                self.text.push_str(t);
                self.emitted = true;
                let _ = sink.send(StreamEvent::TextDelta(t.to_string()));
            }
            for tc in d
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let index = tc
                    .get("index")
                    .and_then(Value::as_u64)
                    .unwrap_or(self.tools.len() as u64);
                let acc = self.tools.entry(index).or_default();
                if let Some(id) = tc
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    && !acc.started
                {
                    acc.id = id.to_string();
                }
                if let Some(name) = tc.pointer("/function/name").and_then(Value::as_str)
                    && !acc.started
                {
                    acc.name.push_str(name);
                }
                if !acc.started && !acc.name.is_empty() {
                    acc.started = true;
                    if acc.id.is_empty() {
                        acc.id = format!("call_{index}");
                    }
                    self.emitted = true;
                    let _ = sink.send(StreamEvent::ToolUseStart {
                        id: acc.id.clone(),
                        name: acc.name.clone(),
                    });
                }
                // Arguments are a JSON text; a few servers send the object itself.
                let args = match tc.pointer("/function/arguments") {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(v @ Value::Object(_)) => Some(v.to_string()),
                    _ => None,
                };
                if let Some(args) = args
                    && !args.is_empty()
                {
                    acc.args.push_str(&args);
                    if acc.started {
                        let _ = sink.send(StreamEvent::ToolUseInputDelta {
                            id: acc.id.clone(),
                            partial_json: args,
                        });
                    }
                }
            }
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_string());
        }
        Ok(Step::More)
    }

    fn has_content(&self) -> bool {
        self.emitted
    }

    fn partial(&self) -> Vec<Block> {
        // Unfinished tool calls are dropped: their arguments may be incomplete.
        let mut out: Vec<Block> = self
            .text_blocks()
            .into_iter()
            .filter(|b| matches!(b, Block::Text { .. }))
            .collect();
        if self.finish.is_some() {
            out.extend(self.tool_blocks());
        }
        out
    }

    fn eof_ok(&self) -> bool {
        // Some local servers close the stream after the finish chunk without `[DONE]`.
        self.finish.is_some()
    }

    fn finish(&mut self) -> Result<ModelResponse, ProviderError> {
        let mut content = self.text_blocks();
        let tools = self.tool_blocks();
        let has_tools = !tools.is_empty();
        content.extend(tools);
        let mut stop_reason = self
            .finish
            .as_deref()
            .map_or(StopReason::EndTurn, finish_reason);
        // Some servers say "stop" even when they called tools.
        if has_tools && stop_reason == StopReason::EndTurn {
            stop_reason = StopReason::ToolUse;
        }
        Ok(ModelResponse {
            content,
            stop_reason,
            usage: self.usage,
            tool_errors: Vec::new(),
        })
    }
}
