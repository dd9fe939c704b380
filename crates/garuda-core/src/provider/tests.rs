//! Provider tests against loopback mock servers (wiremock and a raw TCP server for hangs).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::message::{ImageSource, Message, Role, ToolSpec};

const KEY: &str = "sk-test-SECRET-0123456789";

fn endpoint(kind: ProviderKind, base: &str, key: Option<&str>) -> Endpoint {
    Endpoint {
        name: match kind {
            ProviderKind::Anthropic => "anthropic".into(),
            ProviderKind::Openai => "openai".into(),
        },
        kind,
        base_url: base.trim_end_matches('/').to_string(),
        api_key: key.map(str::to_string),
        max_tokens_field: "max_tokens".into(),
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(10),
        retry: retry::RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(50),
        },
        structured_output: true,
        context_editing: false,
        max_in_flight: 16,
    }
}

fn anthropic(base: &str) -> Arc<dyn Provider> {
    build_endpoint(endpoint(ProviderKind::Anthropic, base, Some(KEY))).unwrap()
}

fn openai(base: &str) -> Arc<dyn Provider> {
    build_endpoint(endpoint(
        ProviderKind::Openai,
        &format!("{base}/v1"),
        Some(KEY),
    ))
    .unwrap()
}

fn request() -> ModelRequest {
    ModelRequest {
        model: "test-model".into(),
        system: "You are a test.".into(),
        messages: vec![Message::user_text("hello")],
        max_tokens: 1000,
        ..ModelRequest::default()
    }
}

async fn run(
    p: &Arc<dyn Provider>,
    req: ModelRequest,
) -> (Result<ModelResponse, ProviderError>, Vec<StreamEvent>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let res = p.complete(req, tx, CancellationToken::new()).await;
    let mut evs = Vec::new();
    while let Ok(e) = rx.try_recv() {
        evs.push(e);
    }
    (res, evs)
}

fn text_of(evs: &[StreamEvent]) -> String {
    evs.iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

// ---------- SSE builders ----------

fn sse(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(n, d)| format!("event: {n}\ndata: {d}\n\n"))
        .collect()
}

fn a_start(input: u64, created: u64, read: u64) -> (&'static str, Value) {
    (
        "message_start",
        json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":input,"output_tokens":1,"cache_creation_input_tokens":created,"cache_read_input_tokens":read}}}),
    )
}

fn a_text_block(index: u64, pieces: &[&str]) -> Vec<(&'static str, Value)> {
    let mut v = vec![(
        "content_block_start",
        json!({"type":"content_block_start","index":index,"content_block":{"type":"text","text":""}}),
    )];
    for p in pieces {
        v.push(("content_block_delta", json!({"type":"content_block_delta","index":index,"delta":{"type":"text_delta","text":p}})));
    }
    v.push((
        "content_block_stop",
        json!({"type":"content_block_stop","index":index}),
    ));
    v
}

fn a_end(stop: &str, output: u64) -> Vec<(&'static str, Value)> {
    vec![
        (
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":stop,"stop_sequence":null},"usage":{"output_tokens":output}}),
        ),
        ("message_stop", json!({"type":"message_stop"})),
    ]
}

fn a_text_body(pieces: &[&str]) -> String {
    let mut ev = vec![a_start(10, 0, 0)];
    ev.extend(a_text_block(0, pieces));
    ev.extend(a_end("end_turn", 5));
    sse(&ev)
}

fn sse_ok(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(body)
}

fn o_chunk(delta: Value, finish: Option<&str>) -> String {
    format!(
        "data: {}\n\n",
        json!({"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":delta,"finish_reason":finish}]})
    )
}

fn o_usage(prompt: u64, completion: u64, cached: u64) -> String {
    format!(
        "data: {}\n\n",
        json!({"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":prompt,"completion_tokens":completion,"total_tokens":prompt+completion,"prompt_tokens_details":{"cached_tokens":cached}}})
    )
}

fn o_text_body(pieces: &[&str]) -> String {
    let mut s = o_chunk(json!({"role":"assistant","content":""}), None);
    for p in pieces {
        s += &o_chunk(json!({"content": p}), None);
    }
    s += &o_chunk(json!({}), Some("stop"));
    s += &o_usage(100, 7, 60);
    s + "data: [DONE]\n\n"
}

// ---------- Anthropic ----------

#[tokio::test]
async fn anthropic_text_usage_and_headers() {
    let server = MockServer::start().await;
    let mut ev = vec![a_start(12, 300, 4000), ("ping", json!({"type":"ping"}))];
    ev.extend(a_text_block(0, &["Hel", "lo", " world"]));
    ev.extend(a_end("end_turn", 9));
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", KEY))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(sse_ok(sse(&ev)))
        .expect(1)
        .mount(&server)
        .await;
    let (res, evs) = run(&anthropic(&server.uri()), request()).await;
    let resp = res.unwrap();
    assert_eq!(resp.content, vec![Block::text("Hello world")]);
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
    let usage = Usage {
        input_tokens: 12,
        output_tokens: 9,
        cache_creation_input_tokens: 300,
        cache_read_input_tokens: 4000,
        cleared_input_tokens: 0,
    };
    assert_eq!(resp.usage, usage);
    assert_eq!(text_of(&evs), "Hello world");
    assert_eq!(evs.last(), Some(&StreamEvent::Usage(usage)));
}

#[tokio::test]
async fn anthropic_tool_use_split_across_deltas() {
    let server = MockServer::start().await;
    let mut ev = vec![a_start(5, 0, 0)];
    ev.extend(a_text_block(0, &["Let me look."]));
    ev.push(("content_block_start", json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"read_file","input":{}}})));
    let json_text = r#"{"path": "src/main.rs", "range": {"start": 1, "end": 40}}"#;
    let pieces: Vec<String> = json_text
        .chars()
        .collect::<Vec<_>>()
        .chunks(3)
        .map(|c| c.iter().collect())
        .collect();
    for p in &pieces {
        ev.push(("content_block_delta", json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":p}})));
    }
    ev.push((
        "content_block_stop",
        json!({"type":"content_block_stop","index":1}),
    ));
    // A tool with no arguments streams no deltas at all.
    ev.push(("content_block_start", json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"todo_read","input":{}}})));
    ev.push((
        "content_block_stop",
        json!({"type":"content_block_stop","index":2}),
    ));
    ev.extend(a_end("tool_use", 30));
    Mock::given(method("POST"))
        .respond_with(sse_ok(sse(&ev)))
        .mount(&server)
        .await;
    let (res, evs) = run(&anthropic(&server.uri()), request()).await;
    let resp = res.unwrap();
    assert_eq!(resp.stop_reason, StopReason::ToolUse);
    assert_eq!(
        resp.content,
        vec![
            Block::text("Let me look."),
            Block::ToolUse {
                id: "toolu_1".into(),
                name: "read_file".into(),
                input: json!({"path":"src/main.rs","range":{"start":1,"end":40}})
            },
            Block::ToolUse {
                id: "toolu_2".into(),
                name: "todo_read".into(),
                input: json!({})
            },
        ]
    );
    assert!(evs.contains(&StreamEvent::ToolUseStart {
        id: "toolu_1".into(),
        name: "read_file".into()
    }));
    let joined: String = evs
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolUseInputDelta { id, partial_json } if id == "toolu_1" => {
                Some(partial_json.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(joined, json_text);
    assert!(pieces.len() > 10);
}

#[tokio::test]
async fn anthropic_thinking_with_signature() {
    let server = MockServer::start().await;
    let ev = vec![
        a_start(5, 0, 0),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me "}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"think."}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkYIARgCIkAabc"}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"xyz"}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":1}),
        ),
    ];
    let mut ev = ev;
    ev.extend(a_text_block(2, &["Done."]));
    ev.extend(a_end("end_turn", 20));
    Mock::given(method("POST"))
        .respond_with(sse_ok(sse(&ev)))
        .mount(&server)
        .await;
    let mut req = request();
    req.thinking_budget = Some(2048);
    let (res, evs) = run(&anthropic(&server.uri()), req).await;
    let resp = res.unwrap();
    assert_eq!(
        resp.content,
        vec![
            Block::Thinking {
                thinking: "Let me think.".into(),
                signature: Some("EqQBCkYIARgCIkAabc".into())
            },
            Block::text("Done."),
        ]
    );
    assert_eq!(evs[0], StreamEvent::ThinkingDelta("Let me ".into()));
    let body: Value = server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(
        body["thinking"],
        json!({"type":"enabled","budget_tokens":2048})
    );
}

#[tokio::test]
async fn anthropic_429_with_retry_after_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after-ms", "20")
                .set_body_json(json!({"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}})),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(sse_ok(a_text_body(&["ok"])))
        .mount(&server)
        .await;
    let (res, evs) = run(&anthropic(&server.uri()), request()).await;
    assert_eq!(res.unwrap().content, vec![Block::text("ok")]);
    match &evs[0] {
        StreamEvent::Retry {
            attempt,
            delay_ms,
            reason,
        } => {
            assert_eq!((*attempt, *delay_ms), (1, 20));
            assert!(reason.contains("Slow down"), "{reason}");
        }
        other => panic!("expected a retry event first, got {other:?}"),
    }
    // Both attempts sent identical bytes.
    let reqs = server.received_requests().await.unwrap();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body, reqs[1].body);
}

#[tokio::test]
async fn anthropic_529_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(529).set_body_json(
            json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
        ))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(sse_ok(a_text_body(&["fine"])))
        .mount(&server)
        .await;
    let (res, evs) = run(&anthropic(&server.uri()), request()).await;
    assert_eq!(res.unwrap().content, vec![Block::text("fine")]);
    assert!(
        matches!(&evs[0], StreamEvent::Retry { attempt: 1, reason, .. } if reason.contains("overloaded"))
    );
}

#[tokio::test]
async fn anthropic_overloaded_error_event_before_content_is_retried() {
    let server = MockServer::start().await;
    let bad = sse(&[
        a_start(1, 0, 0),
        (
            "error",
            json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
        ),
    ]);
    Mock::given(method("POST"))
        .respond_with(sse_ok(bad))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(sse_ok(a_text_body(&["second"])))
        .mount(&server)
        .await;
    let (res, evs) = run(&anthropic(&server.uri()), request()).await;
    assert_eq!(res.unwrap().content, vec![Block::text("second")]);
    assert!(matches!(evs[0], StreamEvent::Retry { attempt: 1, .. }));
}

#[tokio::test]
async fn anthropic_error_event_after_content_is_a_cut() {
    let server = MockServer::start().await;
    let mut ev = vec![a_start(1, 0, 0)];
    ev.push((
        "content_block_start",
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
    ));
    ev.push((
        "content_block_delta",
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"half"}}),
    ));
    ev.push((
        "error",
        json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
    ));
    Mock::given(method("POST"))
        .respond_with(sse_ok(sse(&ev)))
        .mount(&server)
        .await;
    let (res, _) = run(&anthropic(&server.uri()), request()).await;
    let err = res.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Cut { reason, .. } if reason.contains("overloaded")),
        "{err:?}"
    );
    assert_eq!(err.partial(), &[Block::text("half")]);
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn anthropic_500_exhausts_retries() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_json(
            json!({"type":"error","error":{"type":"api_error","message":"Internal server error"}}),
        ))
        .mount(&server)
        .await;
    let (res, evs) = run(&anthropic(&server.uri()), request()).await;
    let err = res.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Server { status: 500, body_excerpt } if body_excerpt.contains("Internal")),
        "{err:?}"
    );
    // One try plus max_retries (2) retries, each announced.
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
    let retries: Vec<u32> = evs
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retry { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(retries, vec![1, 2]);
}

#[tokio::test]
async fn unauthorized_never_shows_the_key() {
    let server = MockServer::start().await;
    // A hostile server echoing the key must not get it into any message either.
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(401).set_body_string(format!("invalid x-api-key {KEY}")),
        )
        .mount(&server)
        .await;
    let (res, _) = run(&anthropic(&server.uri()), request()).await;
    let err = res.unwrap_err();
    assert_eq!(err, ProviderError::Auth { status: 401 });
    assert!(!err.to_string().contains(KEY));
    assert!(!format!("{err:?}").contains(KEY));

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(418).set_body_string(format!("teapot {KEY}")))
        .mount(&server)
        .await;
    let (res, _) = run(&openai(&server.uri()), request()).await;
    let err = res.unwrap_err();
    assert!(matches!(err, ProviderError::Http(_)));
    assert!(!err.to_string().contains(KEY), "{err}");

    // Unreachable server: the transport error text must not carry the key either.
    let (res, _) = run(&anthropic("http://127.0.0.1:9"), request()).await;
    assert!(!res.unwrap_err().to_string().contains(KEY));
}

#[tokio::test]
async fn anthropic_stream_cut_keeps_partial() {
    let server = MockServer::start().await;
    let mut ev = vec![a_start(1, 0, 0)];
    ev.extend(a_text_block(0, &["first block"]));
    ev.push(("content_block_start", json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"bash","input":{}}})));
    ev.push(("content_block_delta", json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"comm"}})));
    Mock::given(method("POST"))
        .respond_with(sse_ok(sse(&ev)))
        .mount(&server)
        .await;
    let (res, _) = run(&anthropic(&server.uri()), request()).await;
    let err = res.unwrap_err();
    assert!(matches!(err, ProviderError::Cut { .. }), "{err:?}");
    // The unfinished tool call is dropped; the text is kept.
    assert_eq!(err.partial(), &[Block::text("first block")]);
}

#[tokio::test]
async fn hang_before_headers_is_a_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse_ok(a_text_body(&["late"])).set_delay(Duration::from_secs(30)))
        .mount(&server)
        .await;
    let mut ep = endpoint(ProviderKind::Anthropic, &server.uri(), Some(KEY));
    ep.idle_timeout = Duration::from_millis(100);
    let p = build_endpoint(ep).unwrap();
    let (res, _) = run(&p, request()).await;
    assert!(matches!(res, Err(ProviderError::Timeout(_))), "{res:?}");
}

#[tokio::test]
async fn prompt_too_long_is_recognized() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}})))
        .mount(&server)
        .await;
    let (res, _) = run(&anthropic(&server.uri()), request()).await;
    let err = res.unwrap_err();
    assert!(err.is_prompt_too_long(), "{err:?}");
    assert_eq!(server.received_requests().await.unwrap().len(), 1);

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}})))
        .mount(&server)
        .await;
    let (res, _) = run(&openai(&server.uri()), request()).await;
    assert!(res.unwrap_err().is_prompt_too_long());
}

#[tokio::test]
async fn json_error_with_status_200() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"error":{"message":"the request exceeds the available context size","type":"exceed_context_size_error"}})))
        .mount(&server)
        .await;
    let (res, _) = run(&openai(&server.uri()), request()).await;
    assert!(res.unwrap_err().is_prompt_too_long());
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id":"x","choices":[]})))
        .mount(&server)
        .await;
    let (res, _) = run(&openai(&server.uri()), request()).await;
    assert!(matches!(res, Err(ProviderError::Decode(_))), "{res:?}");
}

/// A server that streams `head` then keeps the connection open without a byte more.
async fn stalling_server(head: String) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 65536];
        let mut seen = Vec::new();
        while !String::from_utf8_lossy(&seen).contains("\r\n\r\n") {
            let n = sock.read(&mut buf).await.unwrap();
            if n == 0 {
                return;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        let resp = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{}\r\n",
            head.len(),
            head
        );
        sock.write_all(resp.as_bytes()).await.unwrap();
        sock.flush().await.unwrap();
        tokio::time::sleep(Duration::from_secs(60)).await;
    });
    (format!("http://{addr}"), task)
}

fn partial_anthropic_head() -> String {
    let mut ev = vec![a_start(1, 0, 0)];
    ev.push((
        "content_block_start",
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
    ));
    ev.push(("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"so far"}})));
    sse(&ev)
}

#[tokio::test]
async fn idle_stream_after_content_is_a_cut() {
    let (base, task) = stalling_server(partial_anthropic_head()).await;
    let mut ep = endpoint(ProviderKind::Anthropic, &base, Some(KEY));
    ep.idle_timeout = Duration::from_millis(200);
    let p = build_endpoint(ep).unwrap();
    let (res, evs) = run(&p, request()).await;
    let err = res.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Cut { reason, .. } if reason.contains("no data")),
        "{err:?}"
    );
    assert_eq!(err.partial(), &[Block::text("so far")]);
    assert_eq!(text_of(&evs), "so far");
    task.abort();
}

#[tokio::test]
async fn cancel_mid_stream_keeps_partial() {
    let (base, task) = stalling_server(partial_anthropic_head()).await;
    let p = anthropic(&base);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let fut = p.complete(request(), tx, cancel.clone());
    let handle = tokio::spawn(fut);
    // Cancel as soon as the first text arrives.
    while let Some(ev) = rx.recv().await {
        if matches!(ev, StreamEvent::TextDelta(_)) {
            cancel.cancel();
            break;
        }
    }
    let err = handle.await.unwrap().unwrap_err();
    assert_eq!(
        err,
        ProviderError::Cancelled {
            partial: vec![Block::text("so far")]
        }
    );
    task.abort();
}

#[tokio::test]
async fn cancel_during_retry_sleep() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "600"))
        .mount(&server)
        .await;
    let mut ep = endpoint(ProviderKind::Anthropic, &server.uri(), Some(KEY));
    ep.retry.max_delay = Duration::from_secs(600);
    let p = build_endpoint(ep).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let handle = tokio::spawn(p.complete(request(), tx, cancel.clone()));
    let ev = rx.recv().await.unwrap();
    assert!(
        matches!(
            ev,
            StreamEvent::Retry {
                delay_ms: 600_000,
                ..
            }
        ),
        "{ev:?}"
    );
    cancel.cancel();
    assert_eq!(
        handle.await.unwrap(),
        Err(ProviderError::Cancelled { partial: vec![] })
    );
}

fn rich_request() -> ModelRequest {
    ModelRequest {
        model: "claude-sonnet-4-5".into(),
        system: "System prompt.".into(),
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            input_schema: json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}),
        }],
        messages: vec![
            Message::user_text("one"),
            Message {
                role: Role::Assistant,
                content: vec![
                    Block::Thinking {
                        thinking: "hmm".into(),
                        signature: Some("sig".into()),
                    },
                    Block::Thinking {
                        thinking: "unsigned, from another provider".into(),
                        signature: None,
                    },
                    Block::text("Reading."),
                    Block::ToolUse {
                        id: "toolu_1".into(),
                        name: "read_file".into(),
                        input: json!({"path":"a.rs"}),
                    },
                    Block::ToolUse {
                        id: "toolu_2".into(),
                        name: "read_file".into(),
                        input: json!({"path":"b.png"}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    Block::ToolResult {
                        tool_use_id: "toolu_1".into(),
                        content: vec![Block::text("fn main() {}")],
                        is_error: false,
                    },
                    Block::ToolResult {
                        tool_use_id: "toolu_2".into(),
                        content: vec![Block::Image {
                            source: ImageSource::Base64 {
                                media_type: "image/png".into(),
                                data: "iVBOR".into(),
                            },
                        }],
                        is_error: false,
                    },
                    Block::text("and now?"),
                ],
            },
            Message {
                role: Role::Assistant,
                content: vec![Block::text("Done.")],
            },
            Message::user_text("five"),
        ],
        max_tokens: 4096,
        cache: CachePlan {
            system: true,
            messages: vec![0, 1, 2, 4],
        },
        thinking_budget: None,
        output_schema: None,
        no_tool_calls: false,
        tool_clearing: None,
    }
}

#[test]
fn anthropic_request_shape() {
    let body = anthropic::request_body(&rich_request());
    // Sorted keys: object order depends on serde_json's `preserve_order`, which is on
    // only when the build includes the ACP types (see src/front/acp).
    insta::with_settings!({sort_maps => true}, {
        insta::assert_json_snapshot!("anthropic_request", body);
    });
    // System + the latest three planned messages: 4 markers in all.
    let text = body.to_string();
    assert_eq!(text.matches("cache_control").count(), 4);
    assert!(
        body["messages"][0]["content"][0]
            .get("cache_control")
            .is_none()
    );
    assert!(body["system"][0].get("cache_control").is_some());
    assert!(
        body["messages"][4]["content"][0]
            .get("cache_control")
            .is_some()
    );
}

#[test]
fn anthropic_marker_cap_without_system() {
    let mut req = rich_request();
    req.cache = CachePlan {
        system: false,
        messages: vec![4, 3, 2, 1, 0, 0, 99],
    };
    let body = anthropic::request_body(&req);
    assert_eq!(body.to_string().matches("cache_control").count(), 4);
    assert!(
        body["messages"][0]["content"][0]
            .get("cache_control")
            .is_none()
    );
    req.system.clear();
    req.cache.system = true;
    let body = anthropic::request_body(&req);
    assert!(body.get("system").is_none());
    assert_eq!(body.to_string().matches("cache_control").count(), 4);
}

#[test]
fn anthropic_marker_skips_trailing_thinking() {
    let req = ModelRequest {
        messages: vec![Message {
            role: Role::Assistant,
            content: vec![
                Block::text("a"),
                Block::Thinking {
                    thinking: "t".into(),
                    signature: Some("s".into()),
                },
            ],
        }],
        cache: CachePlan {
            system: false,
            messages: vec![0],
        },
        ..ModelRequest::default()
    };
    let body = anthropic::request_body(&req);
    assert!(
        body["messages"][0]["content"][0]
            .get("cache_control")
            .is_some()
    );
    assert!(
        body["messages"][0]["content"][1]
            .get("cache_control")
            .is_none()
    );
    assert!(model_info("replay:x.jsonl", &ProviderConfig::default()).known);
}

#[test]
fn openai_request_shape() {
    let body = openai::request_body(&rich_request(), "max_completion_tokens");
    // Sorted keys: object order depends on serde_json's `preserve_order`, which is on
    // only when the build includes the ACP types (see src/front/acp).
    insta::with_settings!({sort_maps => true}, {
        insta::assert_json_snapshot!("openai_request", body);
    });
    let cfg = ProviderConfig::default();
    assert_eq!(
        request_preview("openai/gpt-5.1", &cfg, &rich_request()).unwrap(),
        body
    );
    assert_eq!(
        request_preview("ollama/q", &cfg, &rich_request()).unwrap()["max_tokens"],
        json!(4096)
    );
    assert_eq!(
        request_preview("anthropic/c", &cfg, &rich_request()).unwrap(),
        anthropic::request_body(&rich_request())
    );
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "user",
            "assistant",
            "user"
        ]
    );
}

// ---------- OpenAI-compatible ----------

#[tokio::test]
async fn openai_text_and_cached_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(sse_ok(o_text_body(&["Hi", " there"])))
        .expect(1)
        .mount(&server)
        .await;
    let (res, evs) = run(&openai(&server.uri()), request()).await;
    let resp = res.unwrap();
    assert_eq!(resp.content, vec![Block::text("Hi there")]);
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
    let usage = Usage {
        input_tokens: 40,
        output_tokens: 7,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 60,
        cleared_input_tokens: 0,
    };
    assert_eq!(resp.usage, usage);
    assert_eq!(text_of(&evs), "Hi there");
    let body: Value = server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["messages"][0],
        json!({"role":"system","content":"You are a test."})
    );
}

#[tokio::test]
async fn openai_tool_calls_assembled_by_index() {
    let server = MockServer::start().await;
    let mut s = o_chunk(json!({"role":"assistant","content":null}), None);
    s += &o_chunk(
        json!({"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"grep","arguments":""}}]}),
        None,
    );
    let args_a = r#"{"pattern":"fn main","path":"src"}"#;
    for piece in args_a.as_bytes().chunks(4) {
        let p = std::str::from_utf8(piece).unwrap();
        s += &o_chunk(
            json!({"tool_calls":[{"index":0,"function":{"arguments":p}}]}),
            None,
        );
    }
    s += &o_chunk(
        json!({"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"list_files","arguments":""}}]}),
        None,
    );
    s += &o_chunk(
        json!({"tool_calls":[{"index":1,"function":{"arguments":"{\"path\":"}}]}),
        None,
    );
    s += &o_chunk(
        json!({"tool_calls":[{"index":1,"function":{"arguments":"\".\"}"}}]}),
        None,
    );
    s += &o_chunk(json!({}), Some("tool_calls"));
    s += &o_usage(50, 20, 0);
    s += "data: [DONE]\n\n";
    Mock::given(method("POST"))
        .respond_with(sse_ok(s))
        .mount(&server)
        .await;
    let (res, evs) = run(&openai(&server.uri()), request()).await;
    let resp = res.unwrap();
    assert_eq!(resp.stop_reason, StopReason::ToolUse);
    assert_eq!(
        resp.content,
        vec![
            Block::ToolUse {
                id: "call_a".into(),
                name: "grep".into(),
                input: json!({"pattern":"fn main","path":"src"})
            },
            Block::ToolUse {
                id: "call_b".into(),
                name: "list_files".into(),
                input: json!({"path":"."})
            },
        ]
    );
    assert_eq!(
        evs[0],
        StreamEvent::ToolUseStart {
            id: "call_a".into(),
            name: "grep".into()
        }
    );
    let joined: String = evs
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolUseInputDelta { id, partial_json } if id == "call_a" => {
                Some(partial_json.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(joined, args_a);
}

#[tokio::test]
async fn openai_reasoning_stream_becomes_thinking() {
    let server = MockServer::start().await;
    let mut s = o_chunk(json!({"reasoning_content":"ponder"}), None);
    s += &o_chunk(json!({"content":"answer"}), None);
    s += &o_chunk(json!({}), Some("length"));
    // No usage, no [DONE]: accepted after a finish reason (some local servers).
    Mock::given(method("POST"))
        .respond_with(sse_ok(s))
        .mount(&server)
        .await;
    let (res, evs) = run(&openai(&server.uri()), request()).await;
    let resp = res.unwrap();
    assert_eq!(resp.stop_reason, StopReason::MaxTokens);
    assert_eq!(
        resp.content,
        vec![
            Block::Thinking {
                thinking: "ponder".into(),
                signature: None
            },
            Block::text("answer")
        ]
    );
    assert_eq!(evs[0], StreamEvent::ThinkingDelta("ponder".into()));
}

#[tokio::test]
async fn openai_429_then_success_and_cut() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "0")
                .set_body_json(json!({"error":{"message":"Rate limit reached","type":"requests"}})),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let cut = o_chunk(json!({"content":"partial ans"}), None);
    Mock::given(method("POST"))
        .respond_with(sse_ok(cut))
        .mount(&server)
        .await;
    let (res, evs) = run(&openai(&server.uri()), request()).await;
    assert!(
        matches!(
            evs[0],
            StreamEvent::Retry {
                attempt: 1,
                delay_ms: 0,
                ..
            }
        ),
        "{evs:?}"
    );
    let err = res.unwrap_err();
    assert!(matches!(err, ProviderError::Cut { .. }), "{err:?}");
    assert_eq!(err.partial(), &[Block::text("partial ans")]);
}

#[tokio::test]
async fn openai_401_and_local_without_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(
            json!({"error":{"message":format!("Incorrect API key provided: {KEY}")}}),
        ))
        .mount(&server)
        .await;
    let err = run(&openai(&server.uri()), request()).await.0.unwrap_err();
    assert_eq!(err, ProviderError::Auth { status: 401 });

    // A local server (ollama-style) gets no authorization header at all.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse_ok(o_text_body(&["local"])))
        .mount(&server)
        .await;
    let mut cfg = ProviderConfig::default();
    cfg.providers.insert(
        "ollama".into(),
        ProviderEntry {
            base_url: Some(format!("{}/v1", server.uri())),
            ..Default::default()
        },
    );
    let p = build_with_env("ollama/qwen3-coder", &cfg, &|_| None).unwrap();
    assert_eq!(p.name(), "ollama");
    let (res, _) = run(&p, request()).await;
    assert_eq!(res.unwrap().content, vec![Block::text("local")]);
    let reqs = server.received_requests().await.unwrap();
    assert!(reqs[0].headers.get("authorization").is_none());
    let body: Value = reqs[0].body_json().unwrap();
    assert_eq!(body["max_tokens"], json!(1000));
}

#[test]
fn stream_events_serialize() {
    let v = serde_json::to_value(StreamEvent::TextDelta("hi".into())).unwrap();
    assert_eq!(v, json!({"type":"textDelta","data":"hi"}));
    let v = serde_json::to_value(StreamEvent::Retry {
        attempt: 1,
        delay_ms: 5,
        reason: "r".into(),
    })
    .unwrap();
    assert_eq!(
        v,
        json!({"type":"retry","data":{"attempt":1,"delayMs":5,"reason":"r"}})
    );
}

// ---------- build and config ----------

#[test]
fn build_needs_a_key_and_says_how() {
    let cfg = ProviderConfig::default();
    let err = build_with_env("anthropic/claude-sonnet-4-5", &cfg, &|_| None)
        .err()
        .unwrap();
    let msg = err.to_string();
    assert!(
        matches!(&err, ProviderError::MissingKey { provider, variable, .. } if provider == "anthropic" && variable == "ANTHROPIC_API_KEY"),
        "{err:?}"
    );
    assert_eq!(err.kind(), "config");
    assert!(
        msg.contains("ANTHROPIC_API_KEY") && msg.contains("api_key_env") && msg.contains("replay:"),
        "{msg}"
    );
    let err = build_with_env("openai/gpt-5.1", &cfg, &|_| None)
        .err()
        .unwrap();
    assert!(err.to_string().contains("OPENAI_API_KEY"));
    let env = |v: &str| (v == "ANTHROPIC_API_KEY").then(|| KEY.to_string());
    assert_eq!(
        build_with_env("anthropic/claude-sonnet-4-5", &cfg, &env)
            .unwrap()
            .name(),
        "anthropic"
    );
    assert!(build_with_env("ollama/qwen3-coder", &cfg, &|_| None).is_ok());
    let err = build_with_env("nowhere/model", &cfg, &|_| None)
        .err()
        .unwrap();
    assert!(err.to_string().contains("[providers.nowhere]"));
}

#[test]
fn endpoint_resolution_merges_config_and_env() {
    let cfg: ProviderConfig = toml::from_str(
        r#"
        idle_timeout_ms = 5000
        [providers.anthropic]
        api_key_env = "MY_KEY"
        [providers.corp]
        kind = "openai"
        base_url = "https://llm.corp.example/v1/"
        api_key_env = "CORP_KEY"
        max_retries = 1
        [models."corp/big"]
        contextWindow = 1000000
        maxOutput = 32000
        "#,
    )
    .unwrap();
    let env = |v: &str| match v {
        "MY_KEY" => Some("k1".to_string()),
        "ANTHROPIC_BASE_URL" => Some("http://127.0.0.1:1/".to_string()),
        _ => None,
    };
    let ep = resolve_endpoint("anthropic", &cfg, &env).unwrap();
    assert_eq!(
        (ep.base_url.as_str(), ep.api_key.as_deref()),
        ("http://127.0.0.1:1", Some("k1"))
    );
    assert_eq!(ep.idle_timeout, Duration::from_secs(5));
    assert_eq!(ep.connect_timeout, Duration::from_secs(10));
    let err = resolve_endpoint("corp", &cfg, &env)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("CORP_KEY") && !err.contains("api_key_env"),
        "{err}"
    );
    let ep = resolve_endpoint("corp", &cfg, &|v| (v == "CORP_KEY").then(|| "k2".into())).unwrap();
    assert_eq!(
        (ep.kind, ep.base_url.as_str(), ep.retry.max_retries),
        (ProviderKind::Openai, "https://llm.corp.example/v1", 1)
    );
    let info = model_info("corp/big", &cfg);
    assert_eq!(
        info,
        ModelInfo {
            context_window: 1_000_000,
            max_output: 32_000,
            known: true,
            prices: None,
            window_from: "config",
        }
    );
    assert!(!model_info("ollama/unknown-thing", &cfg).known);
    assert!(model_info("anthropic/claude-sonnet-4-5", &cfg).known);
    let ep = resolve_endpoint("openai", &cfg, &|_| Some("k".into())).unwrap();
    assert_eq!(ep.max_tokens_field, "max_completion_tokens");
}

// ---------- replay ----------

fn cassette(lines: &[Value]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    for l in lines {
        use std::io::Write;
        writeln!(f, "{l}").unwrap();
    }
    f
}

fn replay_req(text: &str) -> ModelRequest {
    ModelRequest {
        messages: vec![Message::user_text(text)],
        ..ModelRequest::default()
    }
}

#[tokio::test]
async fn replay_plays_in_order_with_deltas() {
    let f = cassette(&[
        json!({"response":{"content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"first answer here"}],"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":4}}}),
        json!({"response":{"content":[{"type":"tool_use","id":"t1","name":"bash","input":{"command":"ls"}}],"stopReason":"tool_use","usage":{"inputTokens":1,"outputTokens":1}},"chunks":[]}),
        json!({"response":{"content":[{"type":"text","text":"third"}],"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1}},"chunks":["th","ird"]}),
    ]);
    let p = build(
        &format!("replay:{}", f.path().display()),
        &ProviderConfig::default(),
    )
    .unwrap();
    assert_eq!(p.name(), "replay");
    let (r, evs) = run(&p, replay_req("x")).await;
    let r = r.unwrap();
    assert_eq!(r.usage.output_tokens, 4);
    assert_eq!(text_of(&evs), "first answer here");
    assert!(
        evs.iter()
            .filter(|e| matches!(e, StreamEvent::TextDelta(_)))
            .count()
            > 1
    );
    assert_eq!(evs[0], StreamEvent::ThinkingDelta("h".into()));
    let (r, evs) = run(&p, replay_req("x")).await;
    assert_eq!(r.unwrap().stop_reason, StopReason::ToolUse);
    assert_eq!(
        evs[0],
        StreamEvent::ToolUseStart {
            id: "t1".into(),
            name: "bash".into()
        }
    );
    assert_eq!(
        evs[1],
        StreamEvent::ToolUseInputDelta {
            id: "t1".into(),
            partial_json: r#"{"command":"ls"}"#.into()
        }
    );
    let (r, evs) = run(&p, replay_req("x")).await;
    assert_eq!(r.unwrap().content, vec![Block::text("third")]);
    assert_eq!(
        &evs[..2],
        &[
            StreamEvent::TextDelta("th".into()),
            StreamEvent::TextDelta("ird".into())
        ]
    );
    let err = run(&p, replay_req("x")).await.0.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Replay(m) if m.contains("exhausted")),
        "{err}"
    );
}

#[tokio::test]
async fn replay_match_picks_first_fitting_entry() {
    let f = cassette(&[
        json!({"response":{"content":[{"type":"text","text":"about cats"}],"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1}},"match":"cat"}),
        json!({"response":{"content":[{"type":"text","text":"anything"}],"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1}}}),
        json!({"response":{"content":[{"type":"text","text":"about dogs"}],"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1}},"match":"dog"}),
    ]);
    let p = ReplayProvider::open(f.path()).unwrap();
    let p: Arc<dyn Provider> = Arc::new(p);
    let text = |r: Result<ModelResponse, ProviderError>| match &r.unwrap().content[0] {
        Block::Text { text } => text.clone(),
        b => panic!("{b:?}"),
    };
    assert_eq!(text(run(&p, replay_req("my dog")).await.0), "anything");
    assert_eq!(text(run(&p, replay_req("my dog")).await.0), "about dogs");
    let err = run(&p, replay_req("my dog")).await.0.unwrap_err();
    assert!(
        err.to_string().contains("no unused response matches"),
        "{err}"
    );
    // The match looks at the last user message, including tool results.
    let mut req = replay_req("ignored");
    req.messages.push(Message {
        role: Role::Assistant,
        content: vec![Block::text("?")],
    });
    req.messages.push(Message {
        role: Role::User,
        content: vec![Block::ToolResult {
            tool_use_id: "t".into(),
            content: vec![Block::text("a cat")],
            is_error: false,
        }],
    });
    assert_eq!(text(run(&p, req).await.0), "about cats");
}

#[test]
fn replay_malformed_line_names_its_number() {
    let text = "{\"response\":{\"content\":[],\"stopReason\":\"end_turn\"}}\n\n{not json}\n";
    let err = ReplayProvider::parse(std::path::Path::new("c.jsonl"), text)
        .err()
        .unwrap();
    assert!(err.to_string().contains("c.jsonl:3"), "{err}");
    let err = build(
        "replay:/nonexistent/cassette.jsonl",
        &ProviderConfig::default(),
    )
    .err()
    .unwrap();
    assert!(matches!(err, ProviderError::Replay(_)));
}

#[tokio::test]
async fn record_then_replay_round_trip() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse_ok(a_text_body(&["one"])))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let mut ev = vec![a_start(3, 1, 2)];
    ev.push(("content_block_start", json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_9","name":"bash","input":{}}})));
    ev.push(("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"ls\"}"}})));
    ev.push((
        "content_block_stop",
        json!({"type":"content_block_stop","index":0}),
    ));
    ev.extend(a_end("tool_use", 8));
    Mock::given(method("POST"))
        .respond_with(sse_ok(sse(&ev)))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rec.jsonl");
    let rec = recording(anthropic(&server.uri()), path.clone());
    let a = run(&rec, request()).await.0.unwrap();
    let b = run(&rec, request()).await.0.unwrap();
    let replay = build(
        &format!("replay:{}", path.display()),
        &ProviderConfig::default(),
    )
    .unwrap();
    assert_eq!(run(&replay, request()).await.0.unwrap(), a);
    assert_eq!(run(&replay, request()).await.0.unwrap(), b);
    assert_eq!(b.usage.cache_read_input_tokens, 2);
}

#[test]
fn replay_cancel_before_start() {
    let f = cassette(&[
        json!({"response":{"content":[{"type":"text","text":"x"}],"stopReason":"end_turn"}}),
    ]);
    let p = ReplayProvider::open(f.path()).unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let (tx, _rx) = mpsc::unbounded_channel();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let res = rt.block_on(p.complete(replay_req("x"), tx, cancel));
    assert!(matches!(res, Err(ProviderError::Cancelled { .. })));
}

fn tool_start(index: u64, id: &str, input: Value) -> (&'static str, Value) {
    (
        "content_block_start",
        json!({"type":"content_block_start","index":index,"content_block":{"type":"tool_use","id":id,"name":"read_file","input":input}}),
    )
}

fn tool_delta(index: u64, partial: &str) -> (&'static str, Value) {
    (
        "content_block_delta",
        json!({"type":"content_block_delta","index":index,"delta":{"type":"input_json_delta","partial_json":partial}}),
    )
}

fn block_stop(index: u64) -> (&'static str, Value) {
    (
        "content_block_stop",
        json!({"type":"content_block_stop","index":index}),
    )
}

fn tool_ids_and_inputs(content: &[Block]) -> Vec<(String, Value)> {
    content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, input, .. } => Some((id.clone(), input.clone())),
            _ => None,
        })
        .collect()
}

/// Defect: an array input, a repeated id or arguments that are not JSON were stored as sent
/// (poisoning every later request) or failed the whole turn.
#[tokio::test]
async fn bad_tool_calls_are_normalized_at_the_boundary() {
    let server = MockServer::start().await;
    let mut ev = vec![a_start(5, 0, 0)];
    ev.extend([
        tool_start(0, "t", json!({})),
        tool_delta(0, "[1, 2]"),
        block_stop(0),
    ]);
    ev.extend([
        tool_start(1, "t", json!({})),
        tool_delta(1, r#"{"path":"a"}"#),
        block_stop(1),
    ]);
    ev.extend([
        tool_start(2, "used", json!({})),
        tool_delta(2, r#"{"path": "#),
        block_stop(2),
    ]);
    ev.extend(a_end("tool_use", 30));
    Mock::given(method("POST"))
        .respond_with(sse_ok(sse(&ev)))
        .mount(&server)
        .await;
    let mut req = request();
    // The conversation already holds a call with id `used`.
    req.messages = vec![
        Message::user_text("hi"),
        Message {
            role: Role::Assistant,
            content: vec![Block::ToolUse {
                id: "used".into(),
                name: "read_file".into(),
                input: json!({"path": "x"}),
            }],
        },
        Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: "used".into(),
                content: vec![Block::text("x")],
                is_error: false,
            }],
        },
    ];
    let (res, _) = run(&anthropic(&server.uri()), req).await;
    let resp = res.unwrap();
    let calls = tool_ids_and_inputs(&resp.content);
    let ids: Vec<&str> = calls.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["t", "t_2", "used_2"]);
    assert!(calls.iter().all(|(_, input)| input.is_object()));
    assert_eq!(calls[1].1, json!({"path": "a"}));
    let refused: Vec<&str> = resp.tool_errors.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(refused, ["t", "used_2"]);
    assert!(resp.tool_errors[0].message.contains("an array"));
    assert!(resp.tool_errors[1].message.contains("not valid JSON"));

    // OpenAI: arguments that are not JSON are a tool error, not a failed turn.
    let server = MockServer::start().await;
    let mut body = o_chunk(json!({"role":"assistant","content":""}), None);
    body += &o_chunk(
        json!({"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{not json"}}]}),
        None,
    );
    body += &o_chunk(json!({}), Some("tool_calls"));
    body += "data: [DONE]\n\n";
    Mock::given(method("POST"))
        .respond_with(sse_ok(body))
        .mount(&server)
        .await;
    let (res, _) = run(&openai(&server.uri()), request()).await;
    let resp = res.unwrap();
    assert_eq!(resp.tool_errors.len(), 1, "{resp:?}");
    assert_eq!(resp.tool_errors[0].id, "call_1");
}

/// Defect: a stream cut before any content was not retried.
#[tokio::test]
async fn a_stream_cut_before_content_is_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse_ok(sse(&[a_start(1, 0, 0)])))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(sse_ok(a_text_body(&["second try"])))
        .mount(&server)
        .await;
    let (res, evs) = run(&anthropic(&server.uri()), request()).await;
    assert_eq!(res.unwrap().content, vec![Block::text("second try")]);
    assert!(
        evs.iter().any(|e| matches!(e, StreamEvent::Retry { .. })),
        "{evs:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

/// A server answering `status` with a `content-type` body of `total` bytes, written until the
/// client hangs up; returns the base URL and how many body bytes the server managed to write.
async fn huge_body_server(
    status: &'static str,
    content_type: &'static str,
    total: u64,
    line: bool,
) -> (String, tokio::task::JoinHandle<u64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 65536];
        let mut seen = Vec::new();
        while !String::from_utf8_lossy(&seen).contains("\r\n\r\n") {
            let n = sock.read(&mut buf).await.unwrap();
            if n == 0 {
                return 0;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {total}\r\n\r\n"
        );
        sock.write_all(head.as_bytes()).await.unwrap();
        let mut chunk = vec![b'x'; 1 << 20];
        if line {
            chunk[..6].copy_from_slice(b"data: ");
        }
        let mut written = 0u64;
        while written < total {
            if sock.write_all(&chunk).await.is_err() {
                break;
            }
            chunk[..6].copy_from_slice(b"xxxxxx");
            written += chunk.len() as u64;
        }
        written
    });
    (format!("http://{addr}"), task)
}

/// Defect: a provider's error body (or a 200 that is not SSE) was read whole: 300 MiB took the
/// server to 611 MiB. Now at most 64 KiB is read, and an SSE line stops at 4 MiB.
#[tokio::test]
async fn huge_bodies_are_not_read_whole() {
    let total = 300u64 << 20;
    for (status, ctype, line) in [
        ("400 Bad Request", "text/plain", false),
        ("200 OK", "application/json", false),
        ("200 OK", "text/event-stream", true),
    ] {
        let (base, task) = huge_body_server(status, ctype, total, line).await;
        let mut ep = endpoint(ProviderKind::Anthropic, &base, Some(KEY));
        ep.retry.max_retries = 0;
        let p = build_endpoint(ep).unwrap();
        let (res, _) = run(&p, request()).await;
        assert!(res.is_err(), "{status} {ctype}");
        drop(p);
        let written = tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("the server stops writing once the client hangs up")
            .unwrap();
        // What the server could write is the cap plus the sockets' buffers, far below 300 MiB.
        assert!(
            written < 64 << 20,
            "{status} {ctype}: {written} bytes written"
        );
    }
}

#[test]
fn misspelled_names_get_the_closest_known_one() {
    use super::models::{closest, table_ids};
    assert_eq!(
        closest("antropic", ["anthropic", "openai"]),
        Some("anthropic")
    );
    assert_eq!(
        closest("OpenAi", ["anthropic", "openai"]),
        None,
        "same name: nothing to suggest"
    );
    assert_eq!(closest("mistral", ["anthropic", "openai"]), None, "too far");
    assert_eq!(
        closest("claude-sonet-4-5", table_ids()),
        Some("claude-sonnet-4-5")
    );
    let cfg = ProviderConfig::default();
    let err = resolve_endpoint("anthropc", &cfg, &|_| None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("Did you mean `anthropic`?"), "{err}");
}

#[test]
fn an_output_schema_is_each_apis_structured_output() {
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
    let req = ModelRequest {
        output_schema: Some(schema.clone()),
        no_tool_calls: false,
        tool_clearing: None,
        ..request()
    };
    let body = anthropic::request_body(&req);
    assert_eq!(
        body["output_format"],
        json!({"type": "json_schema", "schema": schema})
    );
    let body = openai::request_body(&req, "max_tokens");
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["schema"], schema);
    // Without a schema neither field is sent, so other requests' bytes stay as they were.
    assert!(
        anthropic::request_body(&request())
            .get("output_format")
            .is_none()
    );
    assert!(
        openai::request_body(&request(), "max_tokens")
            .get("response_format")
            .is_none()
    );
}

/// Reads one HTTP request (headers and a `content-length` body); false at end of stream.
async fn read_request(sock: &mut tokio::net::TcpStream) -> bool {
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 65536];
    loop {
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if seen.len() >= end + 4 + len {
                return true;
            }
        }
        let n = sock.read(&mut buf).await.unwrap();
        if n == 0 {
            return false;
        }
        seen.extend_from_slice(&buf[..n]);
    }
}

/// Issue 27: the providers of every session on one endpoint share its HTTP client and its
/// request slots, so with `max_in_flight = 1` a second session's request is sent only once
/// the first has its answer, on the same connection.
#[tokio::test]
async fn requests_in_flight_are_bounded_per_endpoint_across_sessions() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let received = Arc::new(AtomicUsize::new(0));
    let connections = Arc::new(AtomicUsize::new(0));
    // The test releases each held answer by adding a permit.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (arrived_tx, mut arrived) = mpsc::unbounded_channel::<()>();
    let server = {
        let (received, connections, gate) = (received.clone(), connections.clone(), gate.clone());
        tokio::spawn(async move {
            loop {
                let (mut sock, _) = listener.accept().await.unwrap();
                connections.fetch_add(1, Ordering::SeqCst);
                let (received, gate, arrived_tx) =
                    (received.clone(), gate.clone(), arrived_tx.clone());
                tokio::spawn(async move {
                    while read_request(&mut sock).await {
                        received.fetch_add(1, Ordering::SeqCst);
                        let _ = arrived_tx.send(());
                        gate.acquire().await.unwrap().forget();
                        let body = a_text_body(&["hi"]);
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        sock.write_all(resp.as_bytes()).await.unwrap();
                    }
                });
            }
        })
    };
    let mut ep = endpoint(ProviderKind::Anthropic, &base, Some(KEY));
    ep.max_in_flight = 1;
    let shared = pool::shared(&ep).unwrap();
    assert!(Arc::ptr_eq(&shared, &pool::shared(&ep).unwrap()));
    let (one, two) = (
        build_endpoint(ep.clone()).unwrap(),
        build_endpoint(ep).unwrap(),
    );
    let a = tokio::spawn(async move { run(&one, request()).await.0 });
    arrived.recv().await.unwrap();
    let b = tokio::spawn(async move { run(&two, request()).await.0 });
    // However long the first answer takes, the second request waits for its slot.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(received.load(Ordering::SeqCst), 1);
    assert_eq!(shared.slots.available_permits(), 0);
    gate.add_permits(1);
    assert_eq!(text_of_response(&a.await.unwrap()), "hi");
    arrived.recv().await.unwrap();
    gate.add_permits(1);
    assert_eq!(text_of_response(&b.await.unwrap()), "hi");
    assert_eq!(received.load(Ordering::SeqCst), 2);
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "the second session reused the first one's connection"
    );
    assert_eq!(shared.slots.available_permits(), 1);
    server.abort();
}

fn text_of_response(r: &Result<ModelResponse, ProviderError>) -> String {
    match r {
        Ok(resp) => resp
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect(),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn replay_refuses_what_is_not_a_small_regular_file_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    // A sparse file just over the cap: refused from its size, never read.
    let huge = dir.path().join("huge.jsonl");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(replay::MAX_CASSETTE_BYTES + 1)
        .unwrap();
    // `/dev/stdin` is the integration tests' (a test runner's stdin may be a regular file).
    let cases: [(&std::path::Path, &str); 4] = [
        (&fifo, "not a regular file (FIFO)"),
        (std::path::Path::new("/dev/zero"), "not a regular file"),
        (dir.path(), "not a regular file (folder)"),
        (&huge, "larger than 64 MiB"),
    ];
    for (path, want) in cases {
        let err = ReplayProvider::open(path)
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains(want), "{}: {err}", path.display());
    }
    let ok = cassette(&[
        json!({"response":{"content":[{"type":"text","text":"hi"}],"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1}}}),
    ]);
    assert!(ReplayProvider::open(ok.path()).is_ok());
}

#[test]
fn a_file_names_only_models_the_config_or_the_table_knows() {
    let cfg: ProviderConfig = toml::from_str(
        "[providers.mine]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
         [models.\"mine/custom\"]\ncontext_window = 1000\n",
    )
    .unwrap();
    let configured = vec!["mine/default".to_string()];
    let ok = |s: &str| named_model_allowed(s, &cfg, &configured);
    for s in [
        "anthropic/claude-haiku-4-5",
        "claude-sonnet-4-5-20250929",
        "ollama/qwen3-coder:30b",
        "mine/custom",
        "mine/default",
    ] {
        assert_eq!(ok(s), Ok(()), "{s}");
    }
    for (s, why) in [
        ("replay:/dev/stdin", "only the user's config"),
        ("replay:cassette.jsonl", "only the user's config"),
        ("evil/claude-sonnet-4-5", "neither a built-in provider"),
        ("anthropic/made-up", "neither the user's config nor"),
        ("mine/other", "neither the user's config nor"),
        ("nowhere", "model"),
    ] {
        let err = ok(s).unwrap_err();
        assert!(err.contains(why), "{s}: {err}");
    }
}

// ---------- llama.cpp shapes (fixtures/llamacpp), replayed by a local server ----------

const LLAMA_OVERFLOW: &str = include_str!("fixtures/llamacpp/overflow_400.json");
const LLAMA_TOOL_LENGTH: &str = include_str!("fixtures/llamacpp/tool_call_length.sse");
const LLAMA_TEXT: &str = include_str!("fixtures/llamacpp/text_timings.sse");
const LLAMA_PROPS: &str = include_str!("fixtures/llamacpp/props.json");

async fn llama_server(status: u16, body: &str, sse_body: bool) -> MockServer {
    let server = MockServer::start().await;
    let t = ResponseTemplate::new(status).set_body_string(body.to_string());
    let t = if sse_body {
        t.insert_header("content-type", "text/event-stream")
    } else {
        t.insert_header("content-type", "application/json")
    };
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(t)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/props"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "application/json")
                .set_body_string(LLAMA_PROPS),
        )
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn llamacpp_overflow_names_the_request_and_the_window() {
    let server = llama_server(400, LLAMA_OVERFLOW, false).await;
    let (res, _) = run(&openai(&server.uri()), request()).await;
    let err = res.unwrap_err();
    assert!(err.is_prompt_too_long(), "{err:?}");
    let lim = err.context_limit().expect("a limit");
    assert_eq!(
        (lim.request_tokens, lim.limit_tokens),
        (Some(4_135), Some(4_096))
    );
}

#[tokio::test]
async fn llamacpp_tool_call_cut_by_length_and_its_usage_chunk() {
    let server = llama_server(200, LLAMA_TOOL_LENGTH, true).await;
    let (res, _) = run(&openai(&server.uri()), request()).await;
    let resp = res.unwrap();
    assert_eq!(resp.stop_reason, StopReason::MaxTokens);
    // The usage chunk has no choices and carries llama.cpp's timings beside the usage.
    assert_eq!(
        resp.usage,
        Usage {
            input_tokens: 62,
            output_tokens: 200,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 3_850,
            cleared_input_tokens: 0,
        }
    );
    // The arguments were cut mid-JSON: the call is answered with an error, never run.
    assert_eq!(resp.tool_errors.len(), 1, "{resp:?}");
}

#[tokio::test]
async fn llamacpp_text_with_comment_pings_and_timings() {
    let server = llama_server(200, LLAMA_TEXT, true).await;
    let (res, evs) = run(&openai(&server.uri()), request()).await;
    let resp = res.unwrap();
    assert_eq!(
        resp.content,
        vec![Block::text("The handlers add their offsets consistently.")]
    );
    assert_eq!(resp.stop_reason, StopReason::EndTurn);
    assert_eq!(
        (resp.usage.input_tokens, resp.usage.cache_read_input_tokens),
        (168, 1_312)
    );
    assert_eq!(
        text_of(&evs),
        "The handlers add their offsets consistently."
    );
}

#[tokio::test]
async fn llamacpp_props_give_the_server_window() {
    let server = llama_server(200, LLAMA_TEXT, true).await;
    let p = openai(&server.uri());
    let w = p.server_window("gemma-3-270m").await.expect("a window");
    assert_eq!((w.tokens, w.source), (4_096, "llama.cpp /props"));
    // Asked once per server and model: a second ask is answered from the cache.
    assert_eq!(p.server_window("gemma-3-270m").await, Some(w));
    let props = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/props")
        .count();
    assert_eq!(props, 1);
    // A hosted API is never asked.
    let remote = build_endpoint(endpoint(
        ProviderKind::Openai,
        "https://api.example.com/v1",
        None,
    ))
    .unwrap();
    assert_eq!(remote.server_window("m").await, None);
}

#[test]
fn a_request_that_may_not_call_tools_says_so_in_each_wire_format() {
    let mut req = rich_request();
    assert!(anthropic::request_body(&req).get("tool_choice").is_none());
    assert!(
        openai::request_body(&req, "max_tokens")
            .get("tool_choice")
            .is_none()
    );
    req.no_tool_calls = true;
    assert_eq!(
        anthropic::request_body(&req)["tool_choice"],
        json!({"type": "none"})
    );
    assert_eq!(
        openai::request_body(&req, "max_tokens")["tool_choice"],
        json!("none")
    );
    // Without tools there is nothing to forbid: both formats reject a tool_choice alone.
    req.tools.clear();
    assert!(anthropic::request_body(&req).get("tool_choice").is_none());
    assert!(
        openai::request_body(&req, "max_tokens")
            .get("tool_choice")
            .is_none()
    );
}

// ---------- provider-side tools (Anthropic's web search server tool) ----------

/// Feeds `events` to an Anthropic decoder: the events it streamed, and the decoder.
fn decode(events: &[(&str, Value)]) -> (Vec<StreamEvent>, super::anthropic::AnthropicDecoder) {
    use super::sse::Decoder;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut dec = super::anthropic::AnthropicDecoder::default();
    for (name, data) in events {
        let _ = dec.event(name, &data.to_string(), &tx);
    }
    let mut evs = Vec::new();
    while let Ok(e) = rx.try_recv() {
        evs.push(e);
    }
    (evs, dec)
}

fn a_server_call(index: u64, id: &str, pieces: &[&str]) -> Vec<(&'static str, Value)> {
    let mut v = vec![(
        "content_block_start",
        json!({"type":"content_block_start","index":index,"content_block":{"type":"server_tool_use","id":id,"name":"web_search","input":{}}}),
    )];
    for p in pieces {
        v.push(("content_block_delta", json!({"type":"content_block_delta","index":index,"delta":{"type":"input_json_delta","partial_json":p}})));
    }
    v.push((
        "content_block_stop",
        json!({"type":"content_block_stop","index":index}),
    ));
    v
}

fn a_server_result(index: u64, block: &Value) -> Vec<(&'static str, Value)> {
    vec![
        (
            "content_block_start",
            json!({"type":"content_block_start","index":index,"content_block":block}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":index}),
        ),
    ]
}

#[test]
fn anthropic_server_search_is_kept_verbatim_and_sent_back_the_same() {
    use super::sse::Decoder;
    let result = json!({"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[
        {"type":"web_search_result","url":"https://serde.rs/","title":"Serde",
         "encrypted_content":"Eqgf+/==","page_age":"April 30, 2025"}]});
    let mut ev = vec![a_start(10, 0, 0)];
    ev.extend(a_text_block(0, &["Looking."]));
    ev.extend(a_server_call(
        1,
        "srvtoolu_1",
        &["{\"query\":", "\"serde derive\"}"],
    ));
    ev.extend(a_server_result(2, &result));
    // A cited text block: the citation arrives as its own delta and is not kept.
    ev.push(("content_block_start", json!({"type":"content_block_start","index":3,"content_block":{"type":"text","text":"","citations":[]}})));
    ev.push(("content_block_delta", json!({"type":"content_block_delta","index":3,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","url":"https://serde.rs/","title":"Serde","encrypted_index":"Eo8=","cited_text":"derive"}}})));
    ev.push(("content_block_delta", json!({"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"Derive it."}})));
    ev.push((
        "content_block_stop",
        json!({"type":"content_block_stop","index":3}),
    ));
    ev.push(("message_delta", json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9,"server_tool_use":{"web_search_requests":1}}})));
    let (evs, mut dec) = decode(&ev);
    let call = json!({"type":"server_tool_use","id":"srvtoolu_1","name":"web_search",
                      "input":{"query":"serde derive"}});
    assert!(evs.contains(&StreamEvent::ServerToolUse {
        id: "srvtoolu_1".into(),
        name: "web_search".into(),
        input: json!({"query": "serde derive"}),
    }));
    assert!(evs.contains(&StreamEvent::ServerToolResult {
        id: "srvtoolu_1".into(),
        name: "web_search".into(),
        output: "Serde — https://serde.rs/\n".into(),
        is_error: false,
    }));
    let res = dec.finish().unwrap();
    assert_eq!(res.stop_reason, StopReason::EndTurn);
    assert_eq!(
        res.content,
        [
            Block::text("Looking."),
            Block::Provider { raw: call.clone() },
            Block::Provider {
                raw: result.clone()
            },
            Block::text("Derive it."),
        ]
    );
    // Sent back as they came, beside the server tool's definition in place of a schema.
    let mut req = request();
    req.messages.push(Message {
        role: Role::Assistant,
        content: res.content,
    });
    req.tools = vec![ToolSpec::provider(
        "web_search",
        json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 2}),
    )];
    let body = super::anthropic::request_body(&req);
    assert_eq!(body["messages"][1]["content"][1], call);
    assert_eq!(body["messages"][1]["content"][2], result);
    assert_eq!(
        body["tools"],
        json!([{"type": "web_search_20250305", "name": "web_search", "max_uses": 2}])
    );
    // Another wire has no server tools: neither the definition nor the blocks go there.
    let oa = super::openai::request_body(&req, "max_tokens");
    assert!(oa.get("tools").is_none(), "{oa}");
    assert!(!oa.to_string().contains("srvtoolu_1"), "{oa}");
}

#[test]
fn anthropic_server_search_errors_and_cuts_leave_no_lone_call() {
    use super::sse::Decoder;
    // The provider's error object is a result like any other, reported as an error.
    let failed = json!({"type":"web_search_tool_result","tool_use_id":"srvtoolu_2",
        "content":{"type":"web_search_tool_result_error","error_code":"max_uses_exceeded"}});
    let mut ev = vec![a_start(10, 0, 0)];
    ev.extend(a_server_call(0, "srvtoolu_2", &["{\"query\":\"x\"}"]));
    ev.extend(a_server_result(1, &failed));
    // A second search cut before its result.
    ev.extend(a_server_call(2, "srvtoolu_3", &["{\"query\":\"y\"}"]));
    let (evs, dec) = decode(&ev);
    assert!(evs.contains(&StreamEvent::ServerToolResult {
        id: "srvtoolu_2".into(),
        name: "web_search".into(),
        output: "the provider's web search failed: max_uses_exceeded".into(),
        is_error: true,
    }));
    let kept = dec.partial();
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(kept[0].server_call_id(), Some("srvtoolu_2"));
    assert_eq!(kept[1].server_result_for(), Some("srvtoolu_2"));
}
