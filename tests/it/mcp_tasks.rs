//! The MCP tasks extension (SEP-2663) against tests/mcp/tasks_server.py (standard library
//! only): Garuda declares the extension, so the server runs its tools as tasks; the call is
//! polled with `tasks/get`, an in-task input request goes to the person and back with
//! `tasks/update`, and a cancelled turn sends `tasks/cancel`.

use serde_json::{Value, json};

use crate::client::{Framing, Garuda};
use crate::mock_model::*;
use crate::turns::{Mock, write_config};

/// A session on the tasks server (its tools read-only, so none asks for approval), and the
/// marker folder the server writes to; `caps` as the client's `initialize` sends them.
fn start(mock: &Mock, caps: Value) -> (Garuda, String, tempfile::TempDir) {
    let markers = tempfile::tempdir().expect("markers");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/tasks_server.py");
    let cfg = format!(
        "[mcp_servers.tasks]\ncommand = \"python3\"\nargs = [{script:?}, {:?}]\nread_only = true\n",
        markers.path()
    );
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), &cfg);
    let ws = tempfile::tempdir().expect("ws");
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": caps}));
    let wid = g.open(ws.path());
    let r = g.call("session/new", json!({"workspaceId": wid}));
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    // Kept for the whole test: the server runs in the workspace and reads its config.
    std::mem::forget(ws);
    std::mem::forget(home);
    (g, sid, markers)
}

fn output(g: &Garuda) -> String {
    g.turn_events()
        .iter()
        .find(|e| e["kind"] == "toolCallFinished")
        .and_then(|e| e["output"].as_str())
        .expect("toolCallFinished")
        .to_string()
}

fn calling(tool: &str) -> Mock {
    Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t1",
            &format!("mcp__tasks__{tool}"),
            &["{}"],
        )),
        MockReply::Sse(anthropic_text("Done.", MockUsage::new(40, 2))),
    ])
}

#[test]
fn a_tool_the_server_runs_as_a_task_is_polled_to_its_result() {
    let mock = calling("slow");
    let (mut g, sid, _m) = start(&mock, json!({}));
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "go"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let out = output(&g);
    assert!(out.contains("slow done after 3 polls"), "{out}");
    assert!(!out.contains("answered at once"), "{out}");
}

#[test]
fn an_input_request_inside_a_task_goes_to_the_person() {
    let mock = calling("ask");
    let caps = json!({"experimental": {"garuda": {"elicitation": true}}});
    let (mut g, sid, _m) = start(&mock, caps);
    let mut asked = Vec::new();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "go"}]}),
        |req| {
            asked.push(req.clone());
            json!({"action": "accept", "content": {"name": "Ada"}})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["method"], "mcp/elicit");
    assert_eq!(asked[0]["params"]["message"], "Who runs this task?");
    let out = output(&g);
    assert!(out.contains(r#"answered: {"name": "Ada"}"#), "{out}");
}

#[test]
fn cancelling_the_turn_cancels_the_task_at_the_server() {
    let mock = calling("forever");
    let (mut g, sid, markers) = start(&mock, json!({}));
    let id = g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "go"}]}),
    );
    // The task is being polled; then the person cancels.
    let polled = markers.path().join("polled");
    for _ in 0..600 {
        if polled.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(polled.exists(), "the task was never polled");
    g.call("turn/cancel", json!({"sessionId": sid}));
    let r = g.response(&json!(id));
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    let cancelled = std::fs::read_to_string(markers.path().join("cancelled"))
        .expect("tasks/cancel reached the server");
    assert_eq!(cancelled, "task-1");
}
