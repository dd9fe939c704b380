//! Elicitation: an MCP server's request for the person's input during a tool call, answered
//! by the native client (`mcp/elicit`, when it advertised
//! `capabilities.experimental.garuda.elicitation`) or declined with a reason (a client that
//! did not advertise it, `garuda exec`). The server is tests/mcp/elicit_server.py (standard
//! library only), whose tool answers with what came back. ACP's `elicitation/create` is in
//! tests/it/mcp.rs beside the other ACP MCP test.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::client::{Framing, Garuda};
use crate::mock_model::*;
use crate::turns::{MODEL, Mock, write_config};

/// `[mcp_servers.el]` running tests/mcp/elicit_server.py in `mode`.
pub(crate) fn elicit_config(mode: &str) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/elicit_server.py");
    format!("[mcp_servers.el]\ncommand = \"python3\"\nargs = [{script:?}, {mode:?}]\n")
}

fn mock_calling_ask() -> Mock {
    Mock::start(vec![
        MockReply::Sse(anthropic_tool_use("t1", "mcp__el__ask", &["{}"])),
        MockReply::Sse(anthropic_text("Done.", MockUsage::new(40, 2))),
    ])
}

/// A native session with the elicit server; `capabilities` as the client's `initialize` sends them.
fn start(mock: &Mock, mode: &str, capabilities: Value) -> (Garuda, String, tempfile::TempDir) {
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), &elicit_config(mode));
    let ws = tempfile::tempdir().expect("ws");
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": capabilities}));
    let wid = g.open(ws.path());
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    let status = crate::mcp::servers_started(&mut g, &sid);
    assert_eq!(status["servers"][0]["state"], "ready", "{status}");
    std::mem::forget(ws);
    (g, sid, home)
}

/// The tool's output as the model got it.
fn ask_output(g: &Garuda) -> String {
    g.turn_events()
        .iter()
        .find(|e| e["kind"] == "toolCallFinished")
        .and_then(|e| e["output"].as_str())
        .expect("toolCallFinished")
        .to_string()
}

#[test]
fn a_native_client_that_advertised_it_answers_the_form() {
    let mock = mock_calling_ask();
    let caps = json!({"experimental": {"garuda": {"elicitation": true}}});
    let (mut g, sid, _home) = start(&mock, "form", caps);
    let mut asked = Vec::new();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "ask me"}]}),
        |req| {
            asked.push(req.clone());
            json!({"action": "accept", "content": {"name": "Ann", "sure": true}})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let req = &asked[0];
    assert_eq!(req["method"], "mcp/elicit");
    let p = &req["params"];
    assert_eq!(p["sessionId"], sid.as_str());
    assert_eq!(p["server"], "el");
    assert_eq!(p["mode"], "form");
    assert_eq!(p["message"], "Who are you?");
    assert_eq!(p["requestedSchema"]["required"], json!(["name"]), "{p}");
    assert_eq!(p["requestedSchema"]["properties"]["sure"]["default"], true);
    let out = ask_output(&g);
    assert!(
        out.contains(r#"action=accept content={"name": "Ann", "sure": true}"#),
        "{out}"
    );
}

#[test]
fn a_native_url_elicitation_and_a_decline() {
    let mock = mock_calling_ask();
    let caps = json!({"experimental": {"garuda": {"elicitation": true}}});
    let (mut g, sid, _home) = start(&mock, "url", caps);
    let mut asked = Vec::new();
    g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "ask me"}]}),
        |req| {
            asked.push(req["params"].clone());
            json!({"action": "decline"})
        },
    );
    assert_eq!(asked[0]["mode"], "url");
    assert_eq!(asked[0]["url"], "https://example.com/login");
    assert_eq!(asked[0]["elicitationId"], "el-1");
    assert!(asked[0].get("requestedSchema").is_none(), "{}", asked[0]);
    let out = ask_output(&g);
    assert!(
        out.contains("action=decline content=null meta=null"),
        "{out}"
    );
}

#[test]
fn a_native_client_that_did_not_advertise_it_is_never_asked() {
    let mock = mock_calling_ask();
    let (mut g, sid, _home) = start(&mock, "form", json!({}));
    let mut asked = 0;
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "ask me"}]}),
        |_| {
            asked += 1;
            json!({})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(asked, 0);
    let out = ask_output(&g);
    assert!(out.contains("action=decline"), "{out}");
    assert!(
        out.contains("did not advertise elicitation support"),
        "the server hears why: {out}"
    );
}

#[test]
fn garuda_exec_declines_with_a_reason() {
    let mock = mock_calling_ask();
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), &elicit_config("form"));
    let mut c = Command::new(env!("CARGO_BIN_EXE_garuda"));
    crate::client::isolated_env(&mut c, home.path());
    for (k, v) in mock.env() {
        c.env(k, v);
    }
    let out = c
        .args([
            "exec",
            "--json",
            "--policy",
            "full-auto",
            "--model",
            MODEL,
            "ask me",
        ])
        .current_dir(home.path())
        .stdin(Stdio::null())
        .output()
        .expect("garuda exec");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|l| l["event"].clone())
        .find(|e| e["kind"] == "toolCallFinished")
        .unwrap_or_else(|| panic!("no toolCallFinished in {stdout}"));
    let output = done["output"].as_str().expect("output");
    assert!(output.contains("action=decline"), "{output}");
    assert!(
        output.contains("garuda exec runs without a client"),
        "{output}"
    );
}
