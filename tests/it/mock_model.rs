//! A loopback mock model server for end-to-end tests of the real binary.
//!
//! Builders produce SSE bodies in the Anthropic Messages and OpenAI Chat Completions wire
//! formats; `start_anthropic` / `start_openai` serve a list of [`MockReply`]s in order and
//! record every request body, so tests can assert request shapes and byte stability.
//! Independent of the crate's own provider code on purpose: it checks the wire, not our types.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Token counts a mock response reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MockUsage {
    /// Uncached input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Tokens written to the cache (Anthropic only).
    pub cache_creation: u64,
    /// Tokens read from the cache.
    pub cache_read: u64,
}

impl MockUsage {
    /// Plain input/output usage.
    pub fn new(input: u64, output: u64) -> Self {
        MockUsage {
            input,
            output,
            ..Self::default()
        }
    }
}

// ---------------------------------------------------------------- Anthropic

/// Builds an Anthropic Messages SSE body block by block.
#[derive(Debug, Clone, Default)]
pub struct AnthropicSse {
    events: Vec<(String, Value)>,
    index: u64,
    usage: MockUsage,
}

impl AnthropicSse {
    /// Starts a message with the given usage.
    pub fn new(usage: MockUsage) -> Self {
        let start = json!({"type":"message_start","message":{
            "id":"msg_mock","type":"message","role":"assistant","content":[],"model":"mock-model",
            "stop_reason":null,"stop_sequence":null,
            "usage":{"input_tokens":usage.input,"output_tokens":1,
                     "cache_creation_input_tokens":usage.cache_creation,
                     "cache_read_input_tokens":usage.cache_read}}});
        AnthropicSse {
            events: vec![("message_start".into(), start)],
            index: 0,
            usage,
        }
    }

    /// The message id (`msg_mock` unless set): clients that merge the parts of one message by
    /// id need a fresh one per response.
    pub fn with_id(mut self, id: &str) -> Self {
        self.events[0].1["message"]["id"] = json!(id);
        self
    }

    fn push(&mut self, name: &str, data: Value) {
        self.events.push((name.to_string(), data));
    }

    /// A text block streamed in the given pieces.
    pub fn text_pieces(mut self, pieces: &[&str]) -> Self {
        let i = self.index;
        self.push("content_block_start", json!({"type":"content_block_start","index":i,"content_block":{"type":"text","text":""}}));
        for p in pieces {
            self.push("content_block_delta", json!({"type":"content_block_delta","index":i,"delta":{"type":"text_delta","text":p}}));
        }
        self.push(
            "content_block_stop",
            json!({"type":"content_block_stop","index":i}),
        );
        self.index += 1;
        self
    }

    /// A text block streamed in a few pieces.
    pub fn text(self, text: &str) -> Self {
        let pieces = split(text, 3);
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        self.text_pieces(&refs)
    }

    /// A thinking block with its signature.
    pub fn thinking(mut self, text: &str, signature: &str) -> Self {
        let i = self.index;
        self.push("content_block_start", json!({"type":"content_block_start","index":i,"content_block":{"type":"thinking","thinking":"","signature":""}}));
        for p in split(text, 2) {
            self.push("content_block_delta", json!({"type":"content_block_delta","index":i,"delta":{"type":"thinking_delta","thinking":p}}));
        }
        self.push("content_block_delta", json!({"type":"content_block_delta","index":i,"delta":{"type":"signature_delta","signature":signature}}));
        self.push(
            "content_block_stop",
            json!({"type":"content_block_stop","index":i}),
        );
        self.index += 1;
        self
    }

    /// A tool_use block whose JSON input arrives in `json_pieces`.
    pub fn tool_use(mut self, id: &str, name: &str, json_pieces: &[&str]) -> Self {
        let i = self.index;
        self.push("content_block_start", json!({"type":"content_block_start","index":i,"content_block":{"type":"tool_use","id":id,"name":name,"input":{}}}));
        for p in json_pieces {
            self.push("content_block_delta", json!({"type":"content_block_delta","index":i,"delta":{"type":"input_json_delta","partial_json":p}}));
        }
        self.push(
            "content_block_stop",
            json!({"type":"content_block_stop","index":i}),
        );
        self.index += 1;
        self
    }

    /// A server-side web search as the provider streams it: a `server_tool_use` block whose
    /// input arrives as `input_json_delta`, then its `web_search_tool_result` whole, with
    /// `results` as `(title, url)` (each with its encrypted content and page age).
    pub fn server_search(mut self, id: &str, query: &str, results: &[(&str, &str)]) -> Self {
        let i = self.index;
        self.push("content_block_start", json!({"type":"content_block_start","index":i,"content_block":{"type":"server_tool_use","id":id,"name":"web_search","input":{}}}));
        let input = json!({"query": query}).to_string();
        for p in split(&input, 2) {
            self.push("content_block_delta", json!({"type":"content_block_delta","index":i,"delta":{"type":"input_json_delta","partial_json":p}}));
        }
        self.push(
            "content_block_stop",
            json!({"type":"content_block_stop","index":i}),
        );
        let content: Vec<Value> = results
            .iter()
            .enumerate()
            .map(|(n, (title, url))| json!({"type":"web_search_result","url":url,"title":title,
                "encrypted_content":format!("EqgfCioIARgBIiQ3YTAw{n}+/=="),"page_age":"April 30, 2025"}))
            .collect();
        self.server_result(id, Value::Array(content))
    }

    /// A `web_search_tool_result` block for the call `id`: `content` is its list of results
    /// or an error object (`{"type":"web_search_tool_result_error","error_code":…}`).
    pub fn server_result(mut self, id: &str, content: Value) -> Self {
        let i = self.index + 1;
        self.push("content_block_start", json!({"type":"content_block_start","index":i,"content_block":{"type":"web_search_tool_result","tool_use_id":id,"content":content}}));
        self.push(
            "content_block_stop",
            json!({"type":"content_block_stop","index":i}),
        );
        self.index += 2;
        self
    }

    /// A text block that cites a search result, its citation arriving as a `citations_delta`.
    pub fn cited_text(mut self, text: &str, url: &str) -> Self {
        let i = self.index;
        self.push("content_block_start", json!({"type":"content_block_start","index":i,"content_block":{"type":"text","text":"","citations":[]}}));
        self.push("content_block_delta", json!({"type":"content_block_delta","index":i,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","cited_text":text,"url":url,"title":"Cited","encrypted_index":"Eo8BCioIAhgBIiQyYjQ0"}}}));
        self.push("content_block_delta", json!({"type":"content_block_delta","index":i,"delta":{"type":"text_delta","text":text}}));
        self.push(
            "content_block_stop",
            json!({"type":"content_block_stop","index":i}),
        );
        self.index += 1;
        self
    }

    /// A keep-alive ping.
    pub fn ping(mut self) -> Self {
        self.push("ping", json!({"type":"ping"}));
        self
    }

    /// An in-stream error event (e.g. `overloaded_error`), ending the body.
    pub fn error(mut self, kind: &str, message: &str) -> String {
        self.push(
            "error",
            json!({"type":"error","error":{"type":kind,"message":message}}),
        );
        render(&self.events)
    }

    /// Ends the message with `stop_reason` and returns the SSE body.
    pub fn finish(mut self, stop_reason: &str) -> String {
        let out = self.usage.output;
        self.push("message_delta", json!({"type":"message_delta","delta":{"stop_reason":stop_reason,"stop_sequence":null},"usage":{"output_tokens":out}}));
        self.push("message_stop", json!({"type":"message_stop"}));
        render(&self.events)
    }

    /// The end of an answer whose request the provider edited: `message_delta` reports the
    /// context editing it applied (`applied_edits`), as Anthropic's beta does.
    pub fn finish_with_cleared(mut self, stop_reason: &str, tool_uses: u64, tokens: u64) -> String {
        let out = self.usage.output;
        self.push("message_delta", json!({"type":"message_delta","delta":{"stop_reason":stop_reason,"stop_sequence":null},"usage":{"output_tokens":out},
            "context_management":{"applied_edits":[{"type":"clear_tool_uses_20250919","cleared_tool_uses":tool_uses,"cleared_input_tokens":tokens}]}}));
        self.push("message_stop", json!({"type":"message_stop"}));
        render(&self.events)
    }

    /// The body so far, without an end: a stream cut mid-way.
    pub fn cut(self) -> String {
        render(&self.events)
    }
}

/// A complete Anthropic text answer.
pub fn anthropic_text(text: &str, usage: MockUsage) -> String {
    AnthropicSse::new(usage).text(text).finish("end_turn")
}

/// A complete Anthropic answer that calls one tool, its JSON input split into `json_pieces`.
pub fn anthropic_tool_use(id: &str, name: &str, json_pieces: &[&str]) -> String {
    AnthropicSse::new(MockUsage::new(10, 10))
        .tool_use(id, name, json_pieces)
        .finish("tool_use")
}

// ---------------------------------------------------------------- OpenAI

/// Builds an OpenAI Chat Completions SSE body chunk by chunk.
#[derive(Debug, Clone, Default)]
pub struct OpenAiSse {
    chunks: Vec<Value>,
    tools: u64,
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id":"chatcmpl-mock","object":"chat.completion.chunk","created":0,"model":"mock-model",
           "choices":[{"index":0,"delta":delta,"finish_reason":finish}]})
}

impl OpenAiSse {
    /// Starts an answer (the role chunk).
    pub fn new() -> Self {
        OpenAiSse {
            chunks: vec![chunk(json!({"role":"assistant","content":""}), None)],
            tools: 0,
        }
    }

    /// Text in the given pieces.
    pub fn text_pieces(mut self, pieces: &[&str]) -> Self {
        for p in pieces {
            self.chunks.push(chunk(json!({"content":p}), None));
        }
        self
    }

    /// Text in a few pieces.
    pub fn text(self, text: &str) -> Self {
        let pieces = split(text, 3);
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        self.text_pieces(&refs)
    }

    /// Reasoning text as local servers stream it (`reasoning_content`).
    pub fn reasoning(mut self, text: &str) -> Self {
        self.chunks
            .push(chunk(json!({"reasoning_content":text}), None));
        self
    }

    /// A tool call: id and name first, then the arguments in `arg_pieces`.
    pub fn tool_call(mut self, id: &str, name: &str, arg_pieces: &[&str]) -> Self {
        let i = self.tools;
        self.chunks.push(chunk(json!({"tool_calls":[{"index":i,"id":id,"type":"function","function":{"name":name,"arguments":""}}]}), None));
        for p in arg_pieces {
            self.chunks.push(chunk(
                json!({"tool_calls":[{"index":i,"function":{"arguments":p}}]}),
                None,
            ));
        }
        self.tools += 1;
        self
    }

    /// Ends with `finish_reason`, a usage chunk and `[DONE]`.
    pub fn finish(mut self, finish_reason: &str, usage: MockUsage) -> String {
        self.chunks.push(chunk(json!({}), Some(finish_reason)));
        let prompt = usage.input + usage.cache_read;
        self.chunks.push(json!({"id":"chatcmpl-mock","object":"chat.completion.chunk","created":0,"model":"mock-model","choices":[],
            "usage":{"prompt_tokens":prompt,"completion_tokens":usage.output,"total_tokens":prompt+usage.output,
                     "prompt_tokens_details":{"cached_tokens":usage.cache_read}}}));
        let mut s = self.cut();
        s.push_str("data: [DONE]\n\n");
        s
    }

    /// The body so far, without a finish: a stream cut mid-way.
    pub fn cut(self) -> String {
        self.chunks
            .iter()
            .map(|c| format!("data: {c}\n\n"))
            .collect()
    }
}

/// A complete OpenAI text answer.
pub fn openai_text(text: &str, usage: MockUsage) -> String {
    OpenAiSse::new().text(text).finish("stop", usage)
}

/// A complete OpenAI answer that calls one tool, arguments split into `arg_pieces`.
pub fn openai_tool_call(id: &str, name: &str, arg_pieces: &[&str]) -> String {
    OpenAiSse::new()
        .tool_call(id, name, arg_pieces)
        .finish("tool_calls", MockUsage::new(10, 10))
}

// ---------------------------------------------------------------- helpers

fn render(events: &[(String, Value)]) -> String {
    events
        .iter()
        .map(|(n, d)| format!("event: {n}\ndata: {d}\n\n"))
        .collect()
}

/// Splits text into about `n` pieces at character boundaries.
pub fn split(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(n.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// Splits a JSON text into pieces of `size` characters (tool arguments "across many deltas").
pub fn json_pieces(json: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = json.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

// ---------------------------------------------------------------- server

/// One scripted answer of the mock server.
#[derive(Debug, Clone)]
pub enum MockReply {
    /// 200 with an SSE body (complete, or cut when built with `.cut()`).
    Sse(String),
    /// Any status with headers and a body.
    Status {
        /// HTTP status.
        status: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// Body text.
        body: String,
    },
    /// Holds the answer back this long (a hang).
    Hang(Duration),
    /// 200 with an SSE body, sent no sooner than this long after the request arrived.
    Slow(String, Duration),
}

impl MockReply {
    /// 429 with `retry-after: SECS`.
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        MockReply::Status {
            status: 429,
            headers: vec![("retry-after".into(), retry_after_secs.to_string())],
            body:
                json!({"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}})
                    .to_string(),
        }
    }

    /// 429 with `retry-after-ms: MS`.
    pub fn rate_limited_ms(ms: u64) -> Self {
        MockReply::Status {
            status: 429,
            headers: vec![("retry-after-ms".into(), ms.to_string())],
            body:
                json!({"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}})
                    .to_string(),
        }
    }

    /// 529 overloaded (Anthropic).
    pub fn overloaded() -> Self {
        Self::status(
            529,
            json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
        )
    }

    /// 500 internal error.
    pub fn server_error() -> Self {
        Self::status(
            500,
            json!({"type":"error","error":{"type":"api_error","message":"Internal server error"}}),
        )
    }

    /// 401 invalid key.
    pub fn unauthorized() -> Self {
        Self::status(
            401,
            json!({"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}),
        )
    }

    /// 400 prompt too long, Anthropic wording.
    pub fn prompt_too_long_anthropic() -> Self {
        Self::status(
            400,
            json!({"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}),
        )
    }

    /// 400 prompt too long, OpenAI wording.
    pub fn prompt_too_long_openai() -> Self {
        Self::status(
            400,
            json!({"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}),
        )
    }

    /// A status with a JSON body.
    pub fn status(status: u16, body: Value) -> Self {
        MockReply::Status {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    fn template(&self) -> ResponseTemplate {
        match self {
            MockReply::Sse(body) => ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .insert_header("cache-control", "no-cache")
                .set_body_string(body.clone()),
            MockReply::Status {
                status,
                headers,
                body,
            } => {
                let mut t = ResponseTemplate::new(*status)
                    .insert_header("content-type", "application/json")
                    .set_body_string(body.clone());
                for (k, v) in headers {
                    t = t.insert_header(k.as_str(), v.as_str());
                }
                t
            }
            MockReply::Hang(d) => ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(String::new())
                .set_delay(*d),
            MockReply::Slow(body, d) => ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .insert_header("cache-control", "no-cache")
                .set_body_string(body.clone())
                .set_delay(*d),
        }
    }
}

/// Header name/value pairs of one request.
pub type Headers = Vec<(String, String)>;

/// The requests the mock server received, in order.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    raw: Arc<Mutex<Vec<Vec<u8>>>>,
    headers: Arc<Mutex<Vec<Headers>>>,
    arrived: Arc<Mutex<Vec<std::time::Instant>>>,
}

impl Recorder {
    /// Raw request bodies (for byte-stability assertions).
    pub fn raw(&self) -> Vec<Vec<u8>> {
        self.raw.lock().unwrap().clone()
    }

    /// Request bodies parsed as JSON (`Value::Null` for a body that is not JSON).
    pub fn bodies(&self) -> Vec<Value> {
        self.raw()
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap_or(Value::Null))
            .collect()
    }

    /// Request headers (lower-case names), per request.
    pub fn headers(&self) -> Vec<Headers> {
        self.headers.lock().unwrap().clone()
    }

    /// When each request arrived. With a [`MockReply::Slow`] answer, the request was in
    /// flight at least until its arrival plus the delay: a later request that arrived before
    /// then overlapped it.
    pub fn arrivals(&self) -> Vec<std::time::Instant> {
        self.arrived.lock().unwrap().clone()
    }

    /// How many requests arrived.
    pub fn count(&self) -> usize {
        self.raw.lock().unwrap().len()
    }
}

struct Script {
    replies: Vec<MockReply>,
    next: AtomicUsize,
    rec: Recorder,
}

impl Respond for Script {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        self.rec
            .arrived
            .lock()
            .unwrap()
            .push(std::time::Instant::now());
        self.rec.raw.lock().unwrap().push(req.body.clone());
        let hs = req
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    v.to_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        self.rec.headers.lock().unwrap().push(hs);
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        match self.replies.get(n) {
            Some(r) => r.template(),
            // 400 so that a client does not retry into a confusing loop.
            None => ResponseTemplate::new(400).set_body_string(format!(
                "{{\"error\":{{\"type\":\"mock_exhausted\",\"message\":\"mock model: no reply scripted for request {}\"}}}}",
                n + 1
            )),
        }
    }
}

async fn start(route: &str, replies: Vec<MockReply>) -> (MockServer, Recorder) {
    let server = MockServer::start().await;
    let rec = Recorder::default();
    let script = Script {
        replies,
        next: AtomicUsize::new(0),
        rec: rec.clone(),
    };
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(script)
        .mount(&server)
        .await;
    (server, rec)
}

/// Serves `replies` in order at `POST /v1/messages`; point `ANTHROPIC_BASE_URL` at `server.uri()`.
pub async fn start_anthropic(replies: Vec<MockReply>) -> (MockServer, Recorder) {
    start("/v1/messages", replies).await
}

/// Serves `replies` in order at `POST /v1/chat/completions`; the base URL is `server.uri() + "/v1"`.
pub async fn start_openai(replies: Vec<MockReply>) -> (MockServer, Recorder) {
    start("/v1/chat/completions", replies).await
}
