//! Tests of the serve loop over in-memory pipes.

use super::*;
use crate::rpc::framing::encode;
use futures_util::FutureExt;
use serde_json::json;
use tokio::io::{DuplexStream, duplex};
use tokio::task::JoinHandle;

struct TestHandler {
    counter: Arc<Mutex<u64>>,
    /// The params of each `started` request, in the order they began to run.
    started: Arc<Mutex<Vec<Value>>>,
}

impl Handler for TestHandler {
    fn request(&self, method: &str, params: Value, ctx: RequestCtx) -> Dispatch {
        match method {
            // Scalars are wrapped by `req` since params must be structured.
            "echo" => Dispatch::Reply(Ok(params.get(0).cloned().unwrap_or(params))),
            "fail" => Dispatch::Reply(Err(RpcError::new(
                garuda_protocol::codes::NOT_FOUND,
                "nope",
            ))),
            "wait" => Dispatch::Spawn(
                async move {
                    ctx.cancel.cancelled().await;
                    Ok(json!("stopped"))
                }
                .boxed(),
            ),
            "long_wait" => Dispatch::Long(
                async move {
                    ctx.cancel.cancelled().await;
                    Ok(json!("stopped"))
                }
                .boxed(),
            ),
            "quick" => Dispatch::Spawn(async move { Ok(params) }.boxed()),
            // Records that it began, then waits to be cancelled and answers the record.
            "started" => {
                let started = self.started.clone();
                Dispatch::Spawn(
                    async move {
                        lock(&started).push(params);
                        ctx.cancel.cancelled().await;
                        Ok(Value::Array(lock(&started).clone()))
                    }
                    .boxed(),
                )
            }
            "sleep" => Dispatch::Spawn(cancellable(ctx.cancel, std::future::pending()).boxed()),
            "hang" => Dispatch::Spawn(std::future::pending().boxed()),
            "ask" => Dispatch::Spawn(
                async move { ctx.client.request("client/ask", params).await }.boxed(),
            ),
            "ask_timeout" => Dispatch::Spawn(
                async move {
                    let t = Duration::from_millis(20);
                    ctx.client.request_timeout("client/ask", params, t).await
                }
                .boxed(),
            ),
            "ticks" => {
                let counter = self.counter.clone();
                Dispatch::Spawn(
                    async move {
                        for _ in 0..50 {
                            {
                                let mut n = lock(&counter);
                                *n += 1;
                                ctx.client.notify("tick", json!({ "n": *n }));
                            }
                            tokio::task::yield_now().await;
                        }
                        Ok(Value::Null)
                    }
                    .boxed(),
                )
            }
            "panic" => Dispatch::Spawn(async { panic!("boom") }.boxed()),
            "panic_inline" => panic!("boom"),
            _ => Dispatch::Reply(Err(RpcError::method_not_found(method))),
        }
    }

    fn notification(&self, method: &str, params: Value, client: &Client) -> Flow {
        match method {
            "exit" => Flow::Exit(params["code"].as_i64().unwrap_or(0) as i32),
            "ping" => {
                client.notify("pong", params);
                Flow::Continue
            }
            _ => Flow::Continue,
        }
    }
}

struct Peer {
    w: Option<DuplexStream>,
    r: FrameReader<DuplexStream>,
    framing: Framing,
    serve: JoinHandle<ServeEnd>,
}

impl Peer {
    fn start(framing: Framing, config: ServerConfig) -> Self {
        Self::start_with_pipe(framing, config, 1 << 20)
    }

    fn start_with_pipe(framing: Framing, config: ServerConfig, in_capacity: usize) -> Self {
        Self::start_with_pipes(framing, config, in_capacity, 1 << 20)
    }

    fn start_with_pipes(
        framing: Framing,
        config: ServerConfig,
        in_capacity: usize,
        out_capacity: usize,
    ) -> Self {
        let (w, server_in) = duplex(in_capacity);
        let (server_out, r) = duplex(out_capacity);
        let handler = Arc::new(TestHandler {
            counter: Arc::default(),
            started: Arc::default(),
        });
        let serve = tokio::spawn(serve(server_in, server_out, handler, config));
        Self {
            w: Some(w),
            r: FrameReader::new(r, usize::MAX),
            framing,
            serve,
        }
    }

    async fn raw(&mut self, bytes: &[u8]) {
        let w = self.w.as_mut().expect("input open");
        w.write_all(bytes).await.expect("write");
    }

    async fn send(&mut self, v: Value) {
        let bytes = encode(self.framing, &serde_json::to_vec(&v).unwrap());
        self.raw(&bytes).await;
    }

    async fn recv(&mut self) -> Value {
        // A generous bound so that a bug fails the test instead of hanging it.
        let ev = tokio::time::timeout(Duration::from_secs(20), self.r.next())
            .await
            .expect("an answer from the server");
        match ev {
            Some(FrameEvent::Frame(f)) => serde_json::from_slice(&f).expect("JSON from server"),
            other => panic!("unexpected {other:?}"),
        }
    }

    async fn recv_n(&mut self, n: usize) -> Vec<Value> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(self.recv().await);
        }
        out
    }

    /// Closes the input and returns how serving ended and everything written afterwards.
    async fn finish(mut self) -> (ServeEnd, Vec<Value>) {
        self.w = None;
        let end = self.serve.await.expect("serve task");
        let mut rest = Vec::new();
        while let Some(ev) = self.r.next().await {
            match ev {
                FrameEvent::Frame(f) => rest.push(serde_json::from_slice(&f).unwrap()),
                other => panic!("unexpected {other:?}"),
            }
        }
        (end, rest)
    }
}

fn req(id: impl Into<Value>, method: &str, params: Value) -> Value {
    let params = match params {
        Value::Object(_) | Value::Array(_) | Value::Null => params,
        scalar => json!([scalar]),
    };
    json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params})
}

fn note(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

fn code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error in {v}"))
}

#[tokio::test]
async fn inline_requests_both_framings() {
    for framing in [Framing::ContentLength, Framing::Newline] {
        let mut p = Peer::start(framing, ServerConfig::default());
        p.send(req(1, "echo", json!({"x": [1, 2]}))).await;
        p.send(req("two", "fail", json!({}))).await;
        p.send(json!({"jsonrpc": "2.0", "id": 3, "method": "nope"}))
            .await;
        p.send(note("ping", json!([7]))).await;
        let got = p.recv_n(4).await;
        assert_eq!(
            p.r.framing(),
            Some(framing),
            "answers use the client's framing"
        );
        assert_eq!(
            got[0],
            json!({"jsonrpc": "2.0", "id": 1, "result": {"x": [1, 2]}})
        );
        assert_eq!(
            (got[1]["id"].clone(), code(&got[1])),
            (json!("two"), garuda_protocol::codes::NOT_FOUND)
        );
        assert_eq!(code(&got[2]), codes::METHOD_NOT_FOUND);
        assert_eq!(
            got[3],
            json!({"jsonrpc": "2.0", "method": "pong", "params": [7]})
        );
        let (end, rest) = p.finish().await;
        assert_eq!((end, rest), (ServeEnd::Eof, vec![]));
    }
}

#[tokio::test]
async fn input_arriving_one_byte_at_a_time() {
    for framing in [Framing::ContentLength, Framing::Newline] {
        let mut p = Peer::start_with_pipe(framing, ServerConfig::default(), 1);
        p.send(req(1, "echo", json!("a"))).await;
        p.send(req(2, "echo", json!("b"))).await;
        let got = p.recv_n(2).await;
        assert_eq!(got[0]["result"], "a");
        assert_eq!(got[1]["result"], "b");
        assert_eq!(p.finish().await.0, ServeEnd::Eof);
    }
}

#[tokio::test]
async fn malformed_messages_are_answered_and_serving_continues() {
    let mut p = Peer::start(Framing::Newline, ServerConfig::default());
    p.raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\n").await;
    p.raw(b"[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"echo\"}]\n")
        .await;
    p.raw(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":7}\n")
        .await;
    p.raw(b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"echo\",\"params\":[\"\xff\"]}\n")
        .await;
    p.raw(b"\"just a string\"\n").await;
    // A response nobody asked for: logged, not answered.
    p.raw(b"{\"jsonrpc\":\"2.0\",\"id\":77,\"result\":1}\n")
        .await;
    p.send(req(7, "echo", json!(1))).await;
    let got = p.recv_n(6).await;
    assert_eq!(
        (got[0]["id"].clone(), code(&got[0])),
        (Value::Null, codes::PARSE_ERROR)
    );
    assert_eq!(
        (got[1]["id"].clone(), code(&got[1])),
        (Value::Null, codes::INVALID_REQUEST)
    );
    assert_eq!(
        (got[2]["id"].clone(), code(&got[2])),
        (json!(5), codes::INVALID_REQUEST)
    );
    assert_eq!(
        (got[3]["id"].clone(), code(&got[3])),
        (json!(6), codes::PARSE_ERROR)
    );
    assert_eq!(
        (got[4]["id"].clone(), code(&got[4])),
        (Value::Null, codes::INVALID_REQUEST)
    );
    assert_eq!(got[5], json!({"jsonrpc": "2.0", "id": 7, "result": 1}));
    assert_eq!(p.finish().await, (ServeEnd::Eof, vec![]));
}

#[tokio::test]
async fn bad_content_length_headers_are_answered_when_the_id_is_known() {
    let mut p = Peer::start(Framing::ContentLength, ServerConfig::default());
    p.raw(b"Content-Type: application/json\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"echo\"}")
        .await;
    p.raw(b"Content-Length: -3\r\n\r\n{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}")
        .await;
    p.raw(b"Content-Length: twelve\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"echo\"}")
        .await;
    p.raw(b"Content-Length: 99999999999999999999999\r\n\r\n{\"id\":\"z\",\"method\":\"echo\"}")
        .await;
    p.send(req(13, "echo", json!("ok"))).await;
    let got = p.recv_n(4).await;
    assert_eq!(
        (got[0]["id"].clone(), code(&got[0])),
        (json!(11), codes::INVALID_REQUEST)
    );
    assert!(
        got[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("missing Content-Length")
    );
    assert_eq!(
        (got[1]["id"].clone(), code(&got[1])),
        (json!(12), codes::INVALID_REQUEST)
    );
    assert_eq!(
        (got[2]["id"].clone(), code(&got[2])),
        (json!("z"), codes::INVALID_REQUEST)
    );
    assert_eq!(got[3]["result"], "ok");
    assert_eq!(p.finish().await, (ServeEnd::Eof, vec![]));
}

#[tokio::test]
async fn oversize_frames_are_skipped_in_both_framings() {
    let config = ServerConfig {
        max_frame_bytes: 128,
        ..ServerConfig::default()
    };
    for framing in [Framing::ContentLength, Framing::Newline] {
        let mut p = Peer::start(framing, config.clone());
        let big = "x".repeat(10_000);
        p.send(req(21, "echo", json!(big))).await;
        p.send(note("ping", json!([big]))).await; // no id: logged only
        p.send(json!({"jsonrpc": "2.0", "id": "big", "method": "echo", "params": [big]}))
            .await;
        p.send(req(22, "echo", json!("small"))).await;
        let got = p.recv_n(3).await;
        assert_eq!(
            (got[0]["id"].clone(), code(&got[0])),
            (json!(21), codes::INVALID_REQUEST)
        );
        assert!(
            got[0]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("too large")
        );
        assert_eq!(
            (got[1]["id"].clone(), code(&got[1])),
            (json!("big"), codes::INVALID_REQUEST)
        );
        assert_eq!(
            got[2],
            json!({"jsonrpc": "2.0", "id": 22, "result": "small"})
        );
        assert_eq!(p.finish().await, (ServeEnd::Eof, vec![]));
    }
}

#[tokio::test]
async fn absurd_content_length_is_answered_without_waiting_for_the_body() {
    let config = ServerConfig {
        max_frame_bytes: 1024,
        ..ServerConfig::default()
    };
    let mut p = Peer::start(Framing::ContentLength, config);
    p.raw(b"Content-Length: 1000000000000\r\n\r\n").await;
    p.raw(b"{\"jsonrpc\":\"2.0\",\"id\":31,\"method\":\"echo\",\"params\":[\"")
        .await;
    p.raw(&[b'x'; 5000]).await;
    let got = p.recv().await;
    assert_eq!(
        (got["id"].clone(), code(&got)),
        (json!(31), codes::INVALID_REQUEST)
    );
    assert_eq!(p.finish().await, (ServeEnd::Eof, vec![]));
}

#[tokio::test]
async fn cancel_request_cancels_only_its_target() {
    let mut p = Peer::start(Framing::ContentLength, ServerConfig::default());
    p.send(req(1, "wait", json!({}))).await;
    p.send(req(2, "sleep", json!({}))).await;
    p.send(note("$/cancelRequest", json!({"id": 2}))).await;
    p.send(note("$/cancelRequest", json!({"id": 99}))).await;
    p.send(note("$/cancelRequest", json!({}))).await;
    p.send(req(3, "echo", json!("alive"))).await;
    let mut got = p.recv_n(2).await;
    got.sort_by_key(|v| v["id"].as_i64());
    assert_eq!(code(&got[0]), codes::REQUEST_CANCELLED);
    assert_eq!(got[0]["id"], 2);
    assert_eq!(got[1]["result"], "alive");
    p.send(note("$/cancelRequest", json!({"id": 1}))).await;
    assert_eq!(
        p.recv().await,
        json!({"jsonrpc": "2.0", "id": 1, "result": "stopped"})
    );
    assert_eq!(p.finish().await, (ServeEnd::Eof, vec![]));
}

#[tokio::test]
async fn server_to_client_requests_are_routed_by_id() {
    let mut p = Peer::start(Framing::Newline, ServerConfig::default());
    p.send(req(1, "ask", json!({"q": 1}))).await;
    let ask = p.recv().await;
    assert_eq!(ask["method"], "client/ask");
    assert_eq!(ask["params"], json!({"q": 1}));
    assert_eq!(ask["jsonrpc"], "2.0");
    // Unknown ids are ignored; the client's own id 1 does not collide.
    p.send(json!({"jsonrpc": "2.0", "id": 4242, "result": "stray"}))
        .await;
    p.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"a": 2}}))
        .await;
    assert_eq!(
        p.recv().await,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"a": 2}})
    );

    p.send(req(2, "ask", json!({"q": 2}))).await;
    let ask2 = p.recv().await;
    assert_ne!(ask2["id"], ask["id"], "server ids are not reused");
    let err = json!({"code": garuda_protocol::codes::TOOL_ERROR, "message": "denied"});
    p.send(json!({"jsonrpc": "2.0", "id": ask2["id"], "error": err}))
        .await;
    let got = p.recv().await;
    assert_eq!((got["id"].clone(), got["error"].clone()), (json!(2), err));
    assert_eq!(p.finish().await, (ServeEnd::Eof, vec![]));
}

#[tokio::test]
async fn server_to_client_request_timeout_sends_cancel() {
    let mut p = Peer::start(Framing::Newline, ServerConfig::default());
    p.send(req(1, "ask_timeout", json!({}))).await;
    let ask = p.recv().await;
    let cancel = p.recv().await;
    assert_eq!(cancel, note("$/cancelRequest", json!({"id": ask["id"]})));
    let got = p.recv().await;
    assert_eq!(
        (got["id"].clone(), code(&got)),
        (json!(1), codes::REQUEST_CANCELLED)
    );
    // A late answer is ignored.
    p.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": 1}))
        .await;
    p.send(req(2, "echo", json!(2))).await;
    assert_eq!(p.recv().await["result"], 2);
    assert_eq!(p.finish().await, (ServeEnd::Eof, vec![]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_keep_their_order_under_concurrent_tasks() {
    let mut p = Peer::start(Framing::ContentLength, ServerConfig::default());
    for id in 1..=4 {
        p.send(req(id, "ticks", Value::Null)).await;
    }
    let mut ticks = Vec::new();
    let mut answered = 0;
    while answered < 4 {
        let v = p.recv().await;
        if v["method"] == "tick" {
            ticks.push(v["params"]["n"].as_u64().unwrap());
        } else {
            assert_eq!(v["result"], Value::Null);
            answered += 1;
        }
    }
    assert_eq!(ticks, (1..=200).collect::<Vec<_>>());
    assert_eq!(p.finish().await, (ServeEnd::Eof, vec![]));
}

#[tokio::test]
async fn eof_cancels_in_flight_and_fails_pending_client_requests() {
    let mut p = Peer::start(Framing::ContentLength, ServerConfig::default());
    p.send(req(1, "wait", json!({}))).await;
    p.send(req(2, "ask", json!({}))).await;
    assert_eq!(p.recv().await["method"], "client/ask");
    let (end, mut rest) = p.finish().await;
    assert_eq!(end, ServeEnd::Eof);
    rest.sort_by_key(|v| v["id"].as_i64());
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert_eq!(
        rest[0],
        json!({"jsonrpc": "2.0", "id": 1, "result": "stopped"})
    );
    assert_eq!(
        (rest[1]["id"].clone(), code(&rest[1])),
        (json!(2), codes::INTERNAL_ERROR)
    );
}

#[tokio::test]
async fn eof_does_not_wait_forever_for_a_stubborn_task() {
    let mut p = Peer::start(Framing::Newline, ServerConfig::default());
    p.send(req(1, "hang", json!({}))).await;
    p.send(req(2, "echo", json!(2))).await;
    assert_eq!(p.recv().await["id"], 2);
    assert_eq!(p.finish().await, (ServeEnd::Eof, vec![]));
}

#[tokio::test]
async fn exit_notification_ends_serving_after_flushing() {
    let mut p = Peer::start(Framing::Newline, ServerConfig::default());
    p.send(req(1, "echo", json!(1))).await;
    p.send(req(2, "wait", json!({}))).await;
    p.send(note("exit", json!({"code": 3}))).await;
    p.send(req(3, "echo", json!(3))).await;
    let end = tokio::time::timeout(Duration::from_secs(20), &mut p.serve)
        .await
        .expect("serve returns")
        .expect("serve task");
    assert_eq!(end, ServeEnd::Exit(3));
    let got = p.recv_n(2).await;
    assert_eq!(got[0]["id"], 1);
    assert_eq!(
        got[1],
        json!({"jsonrpc": "2.0", "id": 2, "result": "stopped"})
    );
    assert_eq!(p.r.next().await, None, "nothing after exit is served");
}

/// Defect (issue 27): a request beyond `max_in_flight` was refused with `overloaded` at once.
/// Now it waits in its lane's queue, in arrival order, and runs when a slot frees.
#[tokio::test]
async fn requests_beyond_the_limit_wait_and_run_in_arrival_order() {
    let config = ServerConfig {
        max_in_flight: 1,
        ..ServerConfig::default()
    };
    let mut p = Peer::start(Framing::Newline, config);
    for id in 1..=4 {
        p.send(req(id, "started", json!({ "n": id }))).await;
    }
    // The duplicate-id check covers waiting requests too.
    p.send(req(3, "echo", json!(0))).await;
    let got = p.recv().await;
    assert_eq!(
        (got["id"].clone(), code(&got)),
        (json!(3), codes::INVALID_REQUEST)
    );
    // Inline requests are not limited.
    p.send(req(9, "echo", json!(9))).await;
    assert_eq!(p.recv().await["result"], 9);
    for id in 1..=4 {
        p.send(note("$/cancelRequest", json!({ "id": id }))).await;
        let got = p.recv().await;
        assert_eq!(got["id"], id);
        let order: Vec<_> = (1..=id).map(|n| json!({ "n": n })).collect();
        assert_eq!(
            got["result"],
            json!(order),
            "ran in arrival order, one at a time"
        );
    }
    assert_eq!(p.finish().await, (ServeEnd::Eof, vec![]));
}

#[tokio::test]
async fn cancelling_a_waiting_request_removes_it_unrun() {
    let config = ServerConfig {
        max_in_flight: 1,
        ..ServerConfig::default()
    };
    let mut p = Peer::start(Framing::Newline, config);
    for id in 1..=3 {
        p.send(req(id, "started", json!({ "n": id }))).await;
    }
    p.send(note("$/cancelRequest", json!({"id": 2}))).await;
    let got = p.recv().await;
    assert_eq!(
        (got["id"].clone(), code(&got)),
        (json!(2), codes::REQUEST_CANCELLED)
    );
    p.send(note("$/cancelRequest", json!({"id": 1}))).await;
    assert_eq!(p.recv().await["result"], json!([{ "n": 1 }]));
    p.send(note("$/cancelRequest", json!({"id": 3}))).await;
    // 2 never ran: 3 followed 1.
    assert_eq!(p.recv().await["result"], json!([{ "n": 1 }, { "n": 3 }]));
    // A cancelled id may be used again.
    p.send(req(2, "quick", json!({"again": true}))).await;
    assert_eq!(p.recv().await["result"], json!({"again": true}));
    assert_eq!(p.finish().await, (ServeEnd::Eof, vec![]));
}

/// Only a full queue refuses: the bound counts requests, and frame bytes.
#[tokio::test]
async fn a_full_wait_queue_refuses_with_overloaded() {
    let config = ServerConfig {
        max_in_flight: 1,
        max_waiting: 2,
        ..ServerConfig::default()
    };
    let overloaded = config.overloaded.code;
    let mut p = Peer::start(Framing::Newline, config);
    for id in 1..=4 {
        p.send(req(id, "wait", json!({}))).await;
    }
    let got = p.recv().await;
    assert_eq!((got["id"].clone(), code(&got)), (json!(4), overloaded));
    // A slot frees, a waiting request runs, and the queue has room again.
    p.send(note("$/cancelRequest", json!({"id": 1}))).await;
    assert_eq!(p.recv().await["id"], 1);
    p.send(req(5, "wait", json!({}))).await;
    let (end, mut rest) = p.finish().await;
    assert_eq!(end, ServeEnd::Eof);
    rest.sort_by_key(|v| v["id"].as_i64());
    let ids: Vec<_> = rest.iter().map(|v| v["id"].clone()).collect();
    assert_eq!(ids, vec![json!(2), json!(3), json!(5)]);

    let config = ServerConfig {
        max_in_flight: 1,
        max_waiting_bytes: 200,
        ..ServerConfig::default()
    };
    let mut p = Peer::start(Framing::Newline, config);
    p.send(req(1, "wait", json!({}))).await;
    p.send(req(2, "wait", json!({"pad": "x".repeat(100)})))
        .await;
    p.send(req(3, "wait", json!({"pad": "x".repeat(100)})))
        .await;
    let got = p.recv().await;
    assert_eq!((got["id"].clone(), code(&got)), (json!(3), overloaded));
    let (_, rest) = p.finish().await;
    assert_eq!(rest.len(), 2);
}

/// Issue 27: long work (turns) runs under a limit of its own, so however many long requests
/// run or wait, a quick one is answered.
#[tokio::test]
async fn long_requests_do_not_hold_quick_slots() {
    let config = ServerConfig {
        max_in_flight: 1,
        max_long_in_flight: 2,
        ..ServerConfig::default()
    };
    let mut p = Peer::start(Framing::Newline, config);
    for id in 1..=50 {
        p.send(req(id, "long_wait", json!({}))).await;
    }
    for id in 100..110 {
        p.send(req(id, "quick", json!({ "n": id }))).await;
        assert_eq!(p.recv().await["result"], json!({ "n": id }));
    }
    // Cancelling a running long request starts the next waiting one (3), not a later one.
    p.send(note("$/cancelRequest", json!({"id": 1}))).await;
    assert_eq!(p.recv().await["result"], "stopped");
    p.send(note("$/cancelRequest", json!({"id": 3}))).await;
    assert_eq!(p.recv().await["result"], "stopped");
    // End of input: the running ones answer, the waiting ones are cancelled unrun.
    let (end, rest) = p.finish().await;
    assert_eq!(end, ServeEnd::Eof);
    assert_eq!(rest.len(), 48);
    let running: Vec<_> = rest.iter().filter(|v| v["result"] == "stopped").collect();
    assert_eq!(running.len(), 2, "two ran: {running:?}");
    assert!(
        rest.iter()
            .filter(|v| v.get("error").is_some())
            .all(|v| code(v) == codes::REQUEST_CANCELLED)
    );
}

#[tokio::test]
async fn handler_panics_become_internal_errors() {
    let mut p = Peer::start(Framing::Newline, ServerConfig::default());
    p.send(req(1, "panic", json!({}))).await;
    let got = p.recv().await;
    assert_eq!(
        (got["id"].clone(), code(&got)),
        (json!(1), codes::INTERNAL_ERROR)
    );
    p.send(req(2, "panic_inline", json!({}))).await;
    let got = p.recv().await;
    assert_eq!(
        (got["id"].clone(), code(&got)),
        (json!(2), codes::INTERNAL_ERROR)
    );
    p.send(req(3, "echo", json!(3))).await;
    assert_eq!(p.recv().await["result"], 3);
    assert_eq!(p.finish().await, (ServeEnd::Eof, vec![]));
}

#[tokio::test]
async fn client_requests_fail_after_close() {
    let (tx, _rx) = mpsc::unbounded_channel();
    let client = Client::new(tx, Arc::default());
    client.close();
    let err = client.request("x", Value::Null).await.unwrap_err();
    assert_eq!(err.code, codes::INTERNAL_ERROR);
    client.notify("still", Value::Null); // queued or dropped, never a panic
}

/// Defect: a client that stopped reading stdout while sending requests grew the output queue
/// without bound (20 000 requests: 301 MiB). Now the read loop stops reading while more than
/// `max_queued_bytes` wait, and every answer still arrives, in order, once the client reads.
#[tokio::test]
async fn a_client_that_stops_reading_stops_being_read() {
    let config = ServerConfig {
        max_queued_bytes: 16 * 1024,
        ..ServerConfig::default()
    };
    let mut p = Peer::start_with_pipes(Framing::Newline, config, 4096, 4096);
    let payload = "x".repeat(1000);
    let n = 2000u64;
    let frames: Vec<u8> = (0..n)
        .flat_map(|i| {
            let body = serde_json::to_vec(&req(i, "echo", json!(payload))).unwrap();
            encode(Framing::Newline, &body)
        })
        .collect();
    let mut w = p.w.take().expect("input");
    let writer = tokio::spawn(async move {
        w.write_all(&frames).await.expect("write");
        w
    });
    // Nobody reads the output: the server stops reading input, so the writer stays blocked.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !writer.is_finished(),
        "the server read all input while its output was not read"
    );
    for i in 0..n {
        let v = p.recv().await;
        assert_eq!(v["id"], i);
        assert_eq!(v["result"], json!(payload));
    }
    p.w = Some(writer.await.expect("writer"));
    assert_eq!(p.finish().await, (ServeEnd::Eof, vec![]));
}
