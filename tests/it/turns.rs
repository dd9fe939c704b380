//! End-to-end turns through the real binary against the loopback mock model.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::{Framing, Garuda};
use crate::mock_model::*;

/// A mock model server on 127.0.0.1 with its own runtime, so tests stay synchronous.
pub struct Mock {
    pub server: wiremock::MockServer,
    pub rec: Recorder,
    _rt: tokio::runtime::Runtime,
}

impl Mock {
    pub fn start(replies: Vec<MockReply>) -> Mock {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let (server, rec) = rt.block_on(start_anthropic(replies));
        Mock {
            server,
            rec,
            _rt: rt,
        }
    }

    /// The mock on OpenAI's wire: `POST /v1/chat/completions`, base URL `server.uri() + "/v1"`.
    pub fn start_openai(replies: Vec<MockReply>) -> Mock {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let (server, rec) = rt.block_on(start_openai(replies));
        Mock {
            server,
            rec,
            _rt: rt,
        }
    }

    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("ANTHROPIC_BASE_URL".to_string(), self.server.uri()),
            (
                "ANTHROPIC_API_KEY".to_string(),
                "sk-test-not-a-real-key".to_string(),
            ),
        ]
    }
}

pub const MODEL: &str = "anthropic/claude-sonnet-4-5";

/// Writes the user config (fast retries, short approval timeout) into `home`.
pub fn write_config(home: &Path, extra: &str) {
    let dir = home.join("config/garuda");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("config.toml"),
        format!("model = \"{MODEL}\"\n[network]\nmax_retries = 2\nidle_timeout_ms = 3000\n{extra}"),
    )
    .expect("config");
}

/// A started server wired to `mock`, with a workspace holding `a.txt` and AGENTS.md.
pub fn setup(
    mock: &Mock,
    extra_config: &str,
) -> (Garuda, tempfile::TempDir, tempfile::TempDir, String) {
    setup_env(mock, extra_config, &[])
}

/// `setup` with more environment variables for the server.
pub fn setup_env(
    mock: &Mock,
    extra_config: &str,
    extra_env: &[(&str, &str)],
) -> (Garuda, tempfile::TempDir, tempfile::TempDir, String) {
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), extra_config);
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("a.txt"), "alpha\nbeta\n").expect("write");
    std::fs::write(ws.path().join("AGENTS.md"), "Be brief.\n").expect("write");
    let env = mock.env();
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    env.extend_from_slice(extra_env);
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    (g, home, ws, wid)
}

fn new_session(g: &mut Garuda, wid: &str, policy: &str) -> String {
    let r = g.call("session/new", json!({"workspaceId": wid, "policy": policy}));
    r["sessionId"].as_str().expect("sessionId").to_string()
}

fn text_input(t: &str) -> Value {
    json!([{"type": "text", "text": t}])
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[test]
fn text_only_turn_streams_in_order() {
    let mock = Mock::start(vec![MockReply::Sse(
        AnthropicSse::new(MockUsage::new(20, 5))
            .text_pieces(&["Hel", "lo ", "there"])
            .finish("end_turn"),
    )]);
    let (mut g, _h, _w, wid) = setup(&mock, "");
    let sid = new_session(&mut g, &wid, "ask");
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("hi")}),
    );
    assert_eq!(r["stopReason"], "end_turn");
    assert_eq!(r["usage"]["outputTokens"], 5);
    assert_eq!(r["messageIds"].as_array().expect("ids").len(), 2);
    let events = g.turn_events();
    let text: String = events
        .iter()
        .filter(|e| e["kind"] == "textDelta")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(text, "Hello there");
    let k = kinds(&events);
    assert_eq!(k.first().map(String::as_str), Some("stepStarted"));
    assert_eq!(k.last().map(String::as_str), Some("finished"));
    let msgs = g.call("session/messages", json!({"sessionId": sid}));
    assert_eq!(
        msgs["total"], 3,
        "the session-start note, the question, the answer"
    );
    assert_eq!(msgs["messages"][0]["meta"], "git_state");
    assert_eq!(msgs["messages"][2]["content"][0]["text"], "Hello there");
    // The key never reaches logs.
    assert!(!g.stderr().contains("sk-test-not-a-real-key"));
}

#[test]
fn tool_loop_is_byte_stable_across_steps() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "toolu_1",
            "read_file",
            &["{\"pa", "th\": \"a.", "txt\"}"],
        )),
        MockReply::Sse(
            AnthropicSse::new(MockUsage::new(30, 4))
                .tool_use("toolu_2", "grep", &["{\"pattern\":", " \"beta\"}"])
                .tool_use("toolu_3", "list_files", &["{}"])
                .finish("tool_use"),
        ),
        MockReply::Sse(anthropic_text("Done.", MockUsage::new(40, 2))),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, "");
    let sid = new_session(&mut g, &wid, "ask");
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("read a.txt")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let events = g.turn_events();
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "toolCallFinished")
        .collect();
    assert_eq!(finished.len(), 3);
    assert!(
        finished[0]["output"]
            .as_str()
            .expect("out")
            .contains("alpha")
    );
    assert_eq!(finished[0]["isError"], false);
    assert!(
        finished[1]["output"]
            .as_str()
            .expect("out")
            .contains("beta")
    );

    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 3);
    // The system prompt and tools are the same bytes in every step, and every earlier
    // message is serialized identically (only cache markers may move).
    let strip = |v: &Value| -> Value {
        let mut v = v.clone();
        strip_cache_control(&mut v);
        v
    };
    for later in &bodies[1..] {
        assert_eq!(strip(&bodies[0]["system"]), strip(&later["system"]));
        assert_eq!(bodies[0]["tools"].to_string(), later["tools"].to_string());
    }
    let first_msgs = bodies[1]["messages"].as_array().expect("messages");
    let later_msgs = bodies[2]["messages"].as_array().expect("messages");
    for (a, b) in first_msgs.iter().zip(later_msgs) {
        assert_eq!(strip(a), strip(b));
    }
    let last = bodies[1]["messages"]
        .as_array()
        .expect("messages")
        .last()
        .cloned()
        .expect("last");
    assert_eq!(last["content"][0]["type"], "tool_result");
    assert_eq!(last["content"][0]["tool_use_id"], "toolu_1");
    // Sorted keys: object order depends on serde_json's `preserve_order`, which is on
    // only when the build includes the ACP types (see src/front/acp).
    insta::with_settings!({sort_maps => true}, {
        insta::assert_json_snapshot!("tool_loop_second_request_shape", shape(&bodies[1]));
    });
}

pub(crate) fn strip_cache_control(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.remove("cache_control");
            o.values_mut().for_each(strip_cache_control);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_cache_control),
        _ => {}
    }
}

/// The request without volatile text (system prompt body, tool schemas), to snapshot its shape.
pub fn shape(body: &Value) -> Value {
    let mut b = body.clone();
    if let Some(sys) = b.get_mut("system").and_then(Value::as_array_mut) {
        for block in sys {
            block["text"] = json!("<system prompt>");
        }
    }
    if let Some(tools) = b.get_mut("tools").and_then(Value::as_array_mut) {
        let names: Vec<Value> = tools.iter().map(|t| t["name"].clone()).collect();
        b["tools"] = Value::Array(names);
    }
    if let Some(msgs) = b.get_mut("messages").and_then(Value::as_array_mut) {
        for m in msgs {
            if let Some(content) = m.get_mut("content").and_then(Value::as_array_mut) {
                for c in content {
                    if c["type"] == "tool_result" {
                        c["content"] = json!("<tool output>");
                    }
                    // Snip tags hash the (random) message ids.
                    if c["text"].as_str().is_some_and(|t| t.starts_with("[id:")) {
                        c["text"] = json!("[id:<tag>]");
                    }
                    // The session-start note names today's date.
                    const DATE: &str = "<garuda_note>Today's date: ";
                    if let Some(t) = c["text"].as_str().filter(|t| t.starts_with(DATE)) {
                        let rest = t.get(DATE.len() + 10..).unwrap_or_default();
                        c["text"] = json!(format!("{DATE}YYYY-MM-DD{rest}"));
                    }
                }
            }
        }
    }
    b
}

fn answer_permissions(answer: &'static str) -> impl FnMut(&Value) -> Value {
    move |req: &Value| {
        assert_eq!(req["method"], "permission/request");
        json!({"optionId": answer})
    }
}

#[test]
fn approvals_allow_reject_and_always() {
    let bash = |id: &str| {
        MockReply::Sse(anthropic_tool_use(
            id,
            "bash",
            &["{\"command\": \"echo approved-run\"}"],
        ))
    };
    let mock = Mock::start(vec![
        bash("t1"),
        MockReply::Sse(anthropic_text("ok", MockUsage::new(5, 1))),
        bash("t2"),
        MockReply::Sse(anthropic_text("ok", MockUsage::new(5, 1))),
        bash("t3"),
        MockReply::Sse(anthropic_text("ok", MockUsage::new(5, 1))),
        bash("t4"),
        MockReply::Sse(anthropic_text("ok", MockUsage::new(5, 1))),
        bash("t5"),
        MockReply::Sse(anthropic_text("ok", MockUsage::new(5, 1))),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, "");
    let sid = new_session(&mut g, &wid, "ask");

    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("run it")}),
        answer_permissions("allow_once"),
    );
    assert_eq!(r["result"]["stopReason"], "end_turn");
    let done: Vec<Value> = g
        .turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "toolCallFinished")
        .collect();
    assert!(
        done[0]["output"]
            .as_str()
            .expect("out")
            .contains("approved-run"),
        "{done:?}"
    );
    assert_eq!(done[0]["meta"]["approval"], "allowed", "{done:?}");
    g.backlog.clear();

    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("again")}),
        answer_permissions("reject"),
    );
    assert_eq!(r["result"]["stopReason"], "end_turn");
    let done: Vec<Value> = g
        .turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "toolCallFinished")
        .collect();
    assert_eq!(done[0]["isError"], true);
    assert!(done[0]["output"].as_str().expect("out").contains("denied"));
    assert_eq!(done[0]["meta"]["approval"], "rejected", "{done:?}");
    g.backlog.clear();

    // Allow always: asked once, then not again in this session.
    let mut asked = 0;
    g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("3")}),
        |_| {
            asked += 1;
            json!({"optionId": "allow_always"})
        },
    );
    g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("4")}),
        |_| {
            asked += 1;
            json!({"optionId": "reject"})
        },
    );
    assert_eq!(asked, 1);
    let done: Vec<Value> = g
        .turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "toolCallFinished")
        .collect();
    assert!(done.iter().all(|d| d["isError"] == false), "{done:?}");
    assert!(
        done.iter()
            .all(|d| d["meta"]["approval"] == "allowedAlways"),
        "{done:?}"
    );

    // Revoked: the next call asks again.
    let r = g.call(
        "session/revokePermission",
        json!({"sessionId": sid, "toolName": "bash"}),
    );
    assert_eq!(r, json!({"revoked": ["bash"], "allowedAlways": []}));
    let r = g.call("session/revokePermission", json!({"sessionId": sid}));
    assert_eq!(r, json!({"revoked": [], "allowedAlways": []}));
    g.backlog.clear();
    g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("5")}),
        |_| {
            asked += 1;
            json!({"optionId": "reject"})
        },
    );
    assert_eq!(asked, 2);
    let r = g.request(
        "session/revokePermission",
        json!({"sessionId": "01a22afd-7749-750f-a192-51d5a23ec03e"}),
    );
    assert_eq!(r["error"]["code"], -32051, "{r}");
    let r = g.request("session/revokePermission", json!({"sessionId": "../x"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[test]
fn approval_timeout_is_reported_as_a_timeout() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t1",
            "write_file",
            &["{\"path\": \"new.txt\", \"content\": \"x\"}"],
        )),
        MockReply::Sse(anthropic_text("ok", MockUsage::new(5, 1))),
    ]);
    let (mut g, _h, ws, wid) = setup(&mock, "[approval]\ntimeout_secs = 1\n");
    let sid = new_session(&mut g, &wid, "ask");
    let id = json!(g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("write")})
    ));
    let req = g.wait_method("permission/request");
    assert_eq!(req["params"]["toolName"], "write_file");
    // Never answer: the turn goes on after the timeout, which is not a denial.
    let r = g.response(&id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert!(!ws.path().join("new.txt").exists());
    let done: Vec<Value> = g
        .turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "toolCallFinished")
        .collect();
    assert_eq!(done[0]["isError"], true);
    assert_eq!(done[0]["meta"]["approval"], "timedOut", "{done:?}");
    let output = done[0]["output"].as_str().expect("output");
    assert!(output.contains("Nobody answered"), "{output}");
    assert!(!output.contains("denied"), "{output}");
    let bodies = mock.rec.bodies();
    assert!(bodies[1].to_string().contains("Nobody answered"));
    // The client is told to drop its prompt.
    let cancel = g
        .backlog
        .iter()
        .find(|m| m["method"] == "$/cancelRequest")
        .cloned()
        .expect("a $/cancelRequest for the unanswered approval");
    assert_eq!(cancel["params"]["id"], req["id"]);
}

#[test]
fn an_error_answer_to_an_approval_is_a_failure() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t1",
            "write_file",
            &["{\"path\": \"new.txt\", \"content\": \"x\"}"],
        )),
        MockReply::Sse(anthropic_text("ok", MockUsage::new(5, 1))),
    ]);
    let (mut g, _h, ws, wid) = setup(&mock, "");
    let sid = new_session(&mut g, &wid, "ask");
    let id = json!(g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("write")})
    ));
    let req = g.wait_method("permission/request");
    g.send(&json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32603, "message": "prompt crashed"}}));
    let r = g.response(&id);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert!(!ws.path().join("new.txt").exists());
    let done: Vec<Value> = g
        .turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "toolCallFinished")
        .collect();
    assert_eq!(done[0]["meta"]["approval"], "failed", "{done:?}");
    assert!(!done[0]["output"].as_str().expect("out").contains("denied"));
}

#[test]
fn client_tools_are_called_on_the_client() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use("t1", "editor_selection", &["{}"])),
        MockReply::Sse(anthropic_text("seen", MockUsage::new(5, 1))),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, "");
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto", "tools": [{"name": "editor_selection", "description": "The selected text", "inputSchema": {"type": "object"}}]}),
    );
    let sid = r["sessionId"].as_str().expect("sid").to_string();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("what is selected?")}),
        |req| {
            assert_eq!(req["method"], "tool/call");
            assert_eq!(req["params"]["name"], "editor_selection");
            json!({"content": "fn main() {}"})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn");
    let bodies = mock.rec.bodies();
    assert!(
        bodies[0]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .any(|t| t["name"] == "editor_selection")
    );
    assert!(bodies[1].to_string().contains("fn main() {}"));
}

#[test]
fn cancel_mid_stream_keeps_the_transcript_consistent() {
    let mock = Mock::start(vec![
        MockReply::Hang(Duration::from_secs(30)),
        MockReply::Sse(anthropic_text("after", MockUsage::new(5, 1))),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, "");
    let sid = new_session(&mut g, &wid, "ask");
    let id = g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("slow")}),
    );
    // Cancel once the request has fully reached the model (it then hangs there).
    let deadline = std::time::Instant::now() + crate::client::WAIT;
    while mock.rec.count() < 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    g.notify("$/cancelRequest", json!({"id": id}));
    let r = g.response(&json!(id));
    let cancelled = r["result"]["stopReason"] == "cancelled" || r["error"]["code"] == -32800;
    assert!(cancelled, "{r}");
    // The session still works.
    let r = g.request(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("again")}),
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
}

#[test]
fn cancel_mid_tool_answers_every_tool_use() {
    let mock = Mock::start(vec![
        MockReply::Sse(
            AnthropicSse::new(MockUsage::new(5, 1))
                .tool_use("t1", "bash", &["{\"command\": \"sleep 30\"}"])
                .tool_use("t2", "read_file", &["{\"path\": \"a.txt\"}"])
                .finish("tool_use"),
        ),
        MockReply::Sse(anthropic_text("after", MockUsage::new(5, 1))),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, "");
    let sid = new_session(&mut g, &wid, "full-auto");
    let id = g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("sleep")}),
    );
    loop {
        let m = g.wait_method("turn/update");
        if m["params"]["event"]["kind"] == "toolCallStarted" {
            break;
        }
    }
    assert_eq!(g.call("turn/cancel", json!({"sessionId": sid}))["ok"], true);
    let r = g.response(&json!(id));
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    let msgs = g.call("session/messages", json!({"sessionId": sid}));
    let last = msgs["messages"]
        .as_array()
        .expect("msgs")
        .last()
        .cloned()
        .expect("last");
    let results = last["content"].as_array().expect("content");
    assert_eq!(
        results.len(),
        2,
        "every tool_use has its tool_result: {last}"
    );
    assert!(
        results
            .iter()
            .all(|b| b["type"] == "tool_result" && b["is_error"] == true)
    );
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("again")}),
    );
    assert_eq!(r["stopReason"], "end_turn");
}

#[test]
fn restart_then_load_and_continue() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_text("first answer", MockUsage::new(5, 1))),
        MockReply::Sse(anthropic_text("second answer", MockUsage::new(5, 1))),
    ]);
    let (mut g, home, _w, wid) = setup(&mock, "");
    let sid = new_session(&mut g, &wid, "ask");
    g.call(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("remember 42")}),
    );
    let listed = g.call("session/list", json!({"workspaceId": wid}));
    assert_eq!(listed["sessions"][0]["sessionId"], sid.as_str());
    assert_eq!(listed["sessions"][0]["origin"], "serve");
    assert_eq!(listed["sessions"][0]["title"], "remember 42");
    let created = listed["sessions"][0]["created"].as_u64().expect("created");
    assert!(listed["sessions"][0]["updated"].as_u64().expect("updated") >= created);
    g.call("shutdown", Value::Null);
    g.notify("exit", Value::Null);
    assert_eq!(g.wait_exit(), Some(0));

    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Ndjson, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let loaded = g.call("session/load", json!({"sessionId": sid}));
    assert_eq!(
        loaded["messageCount"], 3,
        "the start note, the question, the answer"
    );
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("what number?")}),
    );
    assert_eq!(r["stopReason"], "end_turn");
    let bodies = mock.rec.bodies();
    let msgs = bodies[1]["messages"].as_array().expect("messages");
    assert_eq!(msgs.len(), 3, "history came back after the restart");
    assert!(msgs[0].to_string().contains("remember 42"));
    // Fork and delete.
    let fork = g.call("session/fork", json!({"sessionId": sid}));
    let fid = fork["sessionId"].as_str().expect("fork id").to_string();
    assert_eq!(
        g.call("session/messages", json!({"sessionId": fid}))["total"],
        5
    );
    assert_eq!(
        g.call("session/delete", json!({"sessionId": fid}))["ok"],
        true
    );
    assert_eq!(
        g.request("session/load", json!({"sessionId": fid}))["error"]["code"],
        -32051
    );
}

#[test]
fn instruction_change_reaches_the_model_as_a_note() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_text("one", MockUsage::new(5, 1))),
        MockReply::Sse(anthropic_text("two", MockUsage::new(5, 1))),
    ]);
    let (mut g, _h, ws, wid) = setup(&mock, "");
    let sid = new_session(&mut g, &wid, "ask");
    g.call(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("first")}),
    );
    std::fs::write(ws.path().join("AGENTS.md"), "Use tabs, not spaces.\n").expect("write");
    g.wait_method("workspace/contextChanged");
    g.call(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("second")}),
    );
    let bodies = mock.rec.bodies();
    assert_eq!(
        bodies[0]["system"].to_string().len(),
        bodies[1]["system"].to_string().len()
    );
    let mut s0 = bodies[0]["system"].clone();
    let mut s1 = bodies[1]["system"].clone();
    strip_cache_control(&mut s0);
    strip_cache_control(&mut s1);
    assert_eq!(s0, s1, "the system prompt stays byte-identical");
    let last_user = bodies[1]["messages"]
        .as_array()
        .expect("msgs")
        .last()
        .cloned()
        .expect("last")
        .to_string();
    assert!(
        last_user.contains("<garuda_note>") && last_user.contains("Use tabs, not spaces."),
        "{last_user}"
    );
}

#[test]
fn provider_errors_are_clear_and_keep_the_session() {
    let mock = Mock::start(vec![
        MockReply::rate_limited(0),
        MockReply::Sse(anthropic_text("after retry", MockUsage::new(5, 1))),
        MockReply::unauthorized(),
        MockReply::Sse(
            AnthropicSse::new(MockUsage::new(5, 1))
                .text("partial answ")
                .cut(),
        ),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, "");
    let sid = new_session(&mut g, &wid, "ask");
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("a")}),
    );
    assert_eq!(r["stopReason"], "end_turn");
    assert!(
        g.turn_events().iter().any(|e| e["kind"] == "retry"),
        "each retry is reported"
    );
    let r = g.request(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("b")}),
    );
    assert_eq!(r["error"]["code"], -32061, "{r}");
    assert!(!r.to_string().contains("sk-test-not-a-real-key"));
    let r = g.request(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("c")}),
    );
    assert_eq!(r["error"]["code"], -32052, "{r}");
    // What arrived before the cut is kept.
    let msgs = g.call("session/messages", json!({"sessionId": sid}));
    assert!(msgs.to_string().contains("partial answ"), "{msgs}");
}

#[test]
fn no_model_configured_says_how_to_configure() {
    let mut g = Garuda::started(Framing::Ndjson);
    let ws = tempfile::tempdir().expect("ws");
    let wid = g.open(ws.path());
    let r = g.request("session/new", json!({"workspaceId": wid}));
    assert_eq!(r["error"]["code"], -32057, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .expect("msg")
            .contains("replay:")
    );
    // Data a client reads to name its own setting.
    assert_eq!(
        r["error"]["data"],
        json!({"kind": "config", "reason": "noModel"})
    );
    let r = g.request(
        "session/new",
        json!({"workspaceId": wid, "model": "anthropic/claude-sonnet-4-5"}),
    );
    assert_eq!(r["error"]["code"], -32057, "{r}");
    assert_eq!(
        r["error"]["data"],
        json!({"kind": "config", "reason": "missingKey", "provider": "anthropic", "variable": "ANTHROPIC_API_KEY"})
    );
    // Other configuration errors carry the kind only; the server goes on.
    let r = g.request(
        "session/new",
        json!({"workspaceId": wid, "model": "ollama"}),
    );
    assert_eq!(r["error"]["data"], json!({"kind": "config"}), "{r}");
    let r = g.request("workspace/list", json!({}));
    assert!(r["result"].is_object(), "{r}");
}

#[test]
fn edits_go_through_the_editor_when_it_can_apply_them() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t1",
            "read_file",
            &["{\"path\": \"a.txt\"}"],
        )),
        MockReply::Sse(anthropic_tool_use(
            "t2",
            "edit_file",
            &["{\"path\": \"a.txt\", \"old_string\": \"alpha\", \"new_string\": \"ALPHA\"}"],
        )),
        MockReply::Sse(anthropic_text("edited", MockUsage::new(5, 1))),
    ]);
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), "");
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("a.txt"), "alpha\nbeta\n").expect("write");
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &env);
    g.call(
        "initialize",
        json!({"capabilities": {"workspace": {"applyEdit": true}}}),
    );
    let wid = g.open(ws.path());
    let sid = new_session(&mut g, &wid, "full-auto");
    let mut applied = Vec::new();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("edit")}),
        |req| {
            assert_eq!(req["method"], "workspace/applyEdit");
            let changes = req["params"]["edit"]["changes"]
                .as_object()
                .expect("changes");
            let (uri, edits) = changes.iter().next().expect("one file");
            let path = uri.strip_prefix("file://").expect("file uri");
            // The editor applies the edit to its buffer (and here, to disk).
            std::fs::write(path, edits[0]["newText"].as_str().expect("text")).expect("apply");
            applied.push(uri.clone());
            json!({"applied": true})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(applied.len(), 1);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).expect("read"),
        "ALPHA\nbeta\n"
    );
    let done: Vec<Value> = g
        .turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "toolCallFinished")
        .collect();
    assert_eq!(done[1]["isError"], false, "{done:?}");
}

#[test]
fn exec_record_then_replay() {
    let mock = Mock::start(vec![MockReply::Sse(anthropic_text(
        "recorded answer",
        MockUsage::new(5, 2),
    ))]);
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let cassette = ws.path().join("rec.jsonl");
    let run = |model: &str, extra: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_garuda"));
        crate::client::isolated_env(&mut c, home.path());
        for (k, v) in mock.env() {
            c.env(k, v);
        }
        c.arg("exec")
            .arg("--model")
            .arg(model)
            .args(extra)
            .arg(ws.path())
            .arg("hi")
            .output()
            .expect("run")
    };
    let out = run(MODEL, &["--record", cassette.to_str().expect("utf8")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "recorded answer"
    );
    let out = run(&format!("replay:{}", cassette.display()), &[]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "recorded answer"
    );
    assert_eq!(mock.rec.count(), 1, "the replay did not call the model");
}
