//! `garuda acp` end to end: the real binary, a replay cassette, newline-delimited JSON-RPC.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};

use serde_json::{Value, json};

use crate::client::{WAIT, isolated_env};

/// A running `garuda acp`.
struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    next_id: i64,
    /// Every `session/update` received, in order.
    updates: Vec<Value>,
    /// How to answer `session/request_permission`.
    approve: &'static str,
    /// Permission requests seen.
    permissions: Vec<Value>,
}

impl Acp {
    fn spawn(home: &Path, cassette: &Path) -> Acp {
        let model = format!("replay:{}", cassette.display());
        Acp::spawn_env(home, &[("GARUDA_MODEL".to_string(), model)])
    }

    /// `garuda acp` with `env` set (a model of the user's config, a mock's address).
    fn spawn_env(home: &Path, env: &[(String, String)]) -> Acp {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_garuda"));
        cmd.arg("acp");
        isolated_env(&mut cmd, home);
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn garuda acp");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if line.trim().is_empty() {
                    continue;
                }
                let v: Value = serde_json::from_str(&line).expect("garuda sent invalid JSON");
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Acp {
            stdin: child.stdin.take(),
            child,
            rx,
            next_id: 1,
            updates: Vec::new(),
            approve: "allow_once",
            permissions: Vec::new(),
        }
    }

    fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{v}").expect("write");
        stdin.flush().expect("flush");
    }

    fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Handles one incoming message; returns it when it is a response.
    fn pump(&mut self) -> Value {
        let m = self.rx.recv_timeout(WAIT).expect("no message from garuda");
        match m.get("method").and_then(Value::as_str) {
            Some("session/update") => self.updates.push(m["params"].clone()),
            Some("session/request_permission") => {
                self.permissions.push(m["params"].clone());
                // An empty `approve` leaves the request unanswered, as a person who walked away.
                if !self.approve.is_empty() {
                    let answer =
                        json!({"outcome": {"outcome": "selected", "optionId": self.approve}});
                    self.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": answer}));
                }
            }
            _ => {}
        }
        m
    }

    fn wait_response(&mut self, id: i64) -> Value {
        loop {
            let m = self.pump();
            if m.get("method").is_none() && m["id"] == json!(id) {
                return m;
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        let r = self.wait_response(id);
        r.get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{method} failed: {r}"))
    }

    fn kinds(&self) -> Vec<String> {
        self.updates
            .iter()
            .map(|u| {
                u["update"]["sessionUpdate"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
    }

    /// Closes stdin and waits for a clean exit.
    fn finish(mut self) {
        self.stdin.take();
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "garuda acp exited with {status}");
    }
}

fn cassette(dir: &Path, lines: &[Value]) -> std::path::PathBuf {
    let path = dir.join("cassette.jsonl");
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&path, text.join("\n")).expect("write cassette");
    path
}

fn bash_call(id: &str, command: &str) -> Value {
    json!({"response": {"content": [
        {"type": "thinking", "thinking": "I should run it."},
        {"type": "tool_use", "id": id, "name": "bash", "input": {"command": command}}
    ], "stopReason": "tool_use", "usage": {"inputTokens": 40, "outputTokens": 10}}})
}

fn start(home: &Path, cassette: &Path, ws: &Path) -> (Acp, String) {
    let mut acp = Acp::spawn(home, cassette);
    let init = acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["image"],
        true
    );
    assert_eq!(init["agentInfo"]["name"], "garuda");
    let new = acp.call("session/new", json!({"cwd": ws, "mcpServers": []}));
    let sid = new["sessionId"].as_str().expect("sessionId").to_string();
    // The commands name the session the answer created: they follow the answer, in order,
    // without a timer.
    assert!(acp.updates.is_empty(), "{:?}", acp.updates);
    acp.pump();
    assert_eq!(acp.kinds(), ["available_commands_update"]);
    assert_eq!(new["modes"]["currentModeId"], "ask");
    assert_eq!(new["configOptions"][0]["id"], "model");
    (acp, sid)
}

#[test]
fn prompt_with_approval_then_load_replays_history() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let tape = cassette(
        home.path(),
        &[
            bash_call("toolu_1", "echo hello-from-bash"),
            json!({"response": {"content": [{"type": "text", "text": "It printed hello."}],
                "stopReason": "end_turn", "usage": {"inputTokens": 90, "outputTokens": 5}}}),
        ],
    );
    let (mut acp, sid) = start(home.path(), &tape, ws.path());
    let cmds = acp.updates.last().unwrap()["update"]["availableCommands"].clone();
    let names: Vec<&str> = cmds
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["compact", "context"]);
    acp.updates.clear();

    let r = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "run echo"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn");
    assert_eq!(acp.permissions.len(), 1, "one approval asked");
    assert_eq!(acp.permissions[0]["toolCall"]["toolCallId"], "toolu_1");
    let kinds = acp.kinds();
    for k in [
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
        "usage_update",
    ] {
        assert!(kinds.iter().any(|x| x == k), "no {k} in {kinds:?}");
    }
    let text: String = acp
        .updates
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["update"]["content"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "It printed hello.");
    let call = acp
        .updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "tool_call")
        .unwrap();
    // Pending (the default, left out) until approved.
    assert!(call["update"].get("status").is_none(), "{call}");
    let statuses: Vec<&Value> = acp
        .updates
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "tool_call_update")
        .map(|u| &u["update"]["status"])
        .collect();
    assert_eq!(statuses, [&json!("in_progress"), &json!("completed")]);
    let done = acp
        .updates
        .iter()
        .rfind(|u| u["update"]["sessionUpdate"] == "tool_call_update")
        .unwrap();
    assert_eq!(done["update"]["status"], "completed");
    assert!(
        done["update"]["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("hello-from-bash")
    );

    // A slash command the engine may not support yet still answers.
    let r = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "/compact keep tests"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn");
    acp.finish();

    // A new process on the same state replays the history.
    let mut acp = Acp::spawn(home.path(), &tape);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    acp.call(
        "session/load",
        json!({"sessionId": sid, "cwd": ws.path(), "mcpServers": []}),
    );
    let kinds = acp.kinds();
    let first = |k: &str| {
        kinds
            .iter()
            .position(|x| x == k)
            .unwrap_or_else(|| panic!("no {k} in {kinds:?}"))
    };
    assert!(first("user_message_chunk") < first("agent_thought_chunk"));
    assert!(first("agent_thought_chunk") < first("tool_call"));
    assert!(first("tool_call") < first("tool_call_update"));
    assert!(first("tool_call_update") < first("agent_message_chunk"));
    assert_eq!(acp.updates[0]["update"]["content"]["text"], "run echo");
    assert!(acp.updates.iter().all(|u| u["sessionId"] == json!(sid)));
    acp.finish();
}

fn cancel_running_tool(by_request: bool) {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let tape = cassette(home.path(), &[bash_call("toolu_9", "sleep 30")]);
    let (mut acp, sid) = start(home.path(), &tape, ws.path());
    let id = acp.send_request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "sleep"}]}),
    );
    while acp.permissions.is_empty() {
        acp.pump();
    }
    if by_request {
        acp.send(
            json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": id}}),
        );
    } else {
        acp.send(
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}),
        );
    }
    let r = acp.wait_response(id);
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    acp.finish();
}

#[test]
fn session_cancel_stops_a_running_tool() {
    cancel_running_tool(false);
}

#[test]
fn cancel_request_stops_a_prompt() {
    cancel_running_tool(true);
}

#[test]
fn todo_write_becomes_a_plan_and_extra_directories_are_named() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let extra = tempfile::tempdir().unwrap();
    let todos = json!({"todos": [
        {"content": "read the code", "status": "completed"},
        {"content": "fix the bug", "status": "in_progress"},
        {"content": "run the tests", "status": "pending"},
    ]});
    let tape = cassette(
        home.path(),
        &[
            // Only answers when the first prompt names the additional directory.
            json!({"match": "also opened these directories",
                "response": {"content": [{"type": "tool_use", "id": "toolu_t", "name": "todo_write", "input": todos}],
                "stopReason": "tool_use"}}),
            json!({"response": {"content": [{"type": "text", "text": "Planned."}], "stopReason": "end_turn"}}),
        ],
    );
    let mut acp = Acp::spawn(home.path(), &tape);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let new = acp.call(
        "session/new",
        json!({"cwd": ws.path(), "mcpServers": [], "additionalDirectories": [extra.path()]}),
    );
    let sid = new["sessionId"].as_str().unwrap().to_string();
    let r = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "plan it"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let plan = acp
        .updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "plan")
        .expect("a plan update");
    assert_eq!(
        plan["update"]["entries"],
        json!([
            {"content": "read the code", "priority": "medium", "status": "completed"},
            {"content": "fix the bug", "priority": "medium", "status": "in_progress"},
            {"content": "run the tests", "priority": "medium", "status": "pending"},
        ])
    );
    assert!(acp.permissions.is_empty(), "todo_write needs no approval");
    acp.finish();

    // A fresh process replays the plan after the history.
    let mut acp = Acp::spawn(home.path(), &tape);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    acp.call(
        "session/load",
        json!({"sessionId": sid, "cwd": ws.path(), "mcpServers": []}),
    );
    let plan = acp
        .updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "plan")
        .expect("the plan replayed");
    assert_eq!(plan["update"]["entries"][1]["content"], "fix the bug");
    acp.finish();
}

/// ACP plan operations: a client that advertises `plan` gets the todo list as `plan_update`
/// with a stable id (`todos`), live and replayed, never the flat `plan`; an emptied list is
/// `plan_removed`.
#[test]
fn a_client_with_plans_gets_the_todo_list_by_id() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let todos = json!({"todos": [
        {"content": "read the code", "status": "completed"},
        {"content": "fix the bug", "status": "in_progress"},
    ]});
    let tape = cassette(
        home.path(),
        &[
            json!({"response": {"content": [{"type": "tool_use", "id": "toolu_t", "name": "todo_write", "input": todos}],
                "stopReason": "tool_use"}}),
            json!({"response": {"content": [{"type": "tool_use", "id": "toolu_u", "name": "todo_write", "input": {"todos": []}}],
                "stopReason": "tool_use"}}),
            json!({"response": {"content": [{"type": "text", "text": "Planned."}], "stopReason": "end_turn"}}),
        ],
    );
    let caps = json!({"protocolVersion": 1, "clientCapabilities": {"plan": {}}});
    let mut acp = Acp::spawn(home.path(), &tape);
    acp.call("initialize", caps.clone());
    let new = acp.call("session/new", json!({"cwd": ws.path(), "mcpServers": []}));
    let sid = new["sessionId"].as_str().unwrap().to_string();
    let r = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "plan it"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let kinds = acp.kinds();
    assert!(!kinds.iter().any(|k| k == "plan"), "{kinds:?}");
    let update = acp
        .updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "plan_update")
        .expect("a plan_update");
    let plan = &update["update"]["plan"];
    assert_eq!(plan["planId"], "todos", "{update}");
    assert_eq!(plan["entries"][1]["content"], "fix the bug", "{update}");
    let removed = acp
        .updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "plan_removed")
        .expect("the emptied list removed");
    assert_eq!(removed["update"]["planId"], "todos");
    acp.finish();
}

#[test]
fn unknown_sessions_are_resource_not_found_and_bad_settings_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let tape = cassette(home.path(), &[]);
    let (mut acp, sid) = start(home.path(), &tape, ws.path());
    // A well-formed id no session has (a malformed one is invalid params: attacks::names).
    const UNKNOWN: &str = "01a22afd-7749-750f-a192-51d5a23ec03e";
    for (method, params) in [
        ("session/close", json!({"sessionId": UNKNOWN})),
        (
            "session/resume",
            json!({"sessionId": UNKNOWN, "cwd": ws.path(), "mcpServers": []}),
        ),
        (
            "session/load",
            json!({"sessionId": UNKNOWN, "cwd": ws.path(), "mcpServers": []}),
        ),
        (
            "session/set_mode",
            json!({"sessionId": UNKNOWN, "modeId": "ask"}),
        ),
    ] {
        let id = acp.send_request(method, params);
        let r = acp.wait_response(id);
        assert_eq!(r["error"]["code"], -32002, "{method}: {r}");
    }
    for (method, params) in [
        (
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "yolo"}),
        ),
        (
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "model", "value": ""}),
        ),
        (
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "model", "type": "boolean", "value": true}),
        ),
        (
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "colour", "value": "red"}),
        ),
        ("session/list", json!({"cwd": "relative"})),
    ] {
        let id = acp.send_request(method, params);
        let r = acp.wait_response(id);
        assert_eq!(r["error"]["code"], -32602, "{method}: {r}");
    }
    // The two refusals a person reads: a boolean value and a notification sent as a request.
    let id = acp.send_request(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "mode", "type": "boolean", "value": true}),
    );
    let r = acp.wait_response(id);
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("must be a string") && !message.contains("untagged"),
        "{r}"
    );
    let id = acp.send_request("session/cancel", json!({"sessionId": sid}));
    let r = acp.wait_response(id);
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("is a notification"),
        "{r}"
    );
    // The session is still there and switches mode.
    let r = acp.call(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "mode", "value": "auto-edit"}),
    );
    assert_eq!(r["configOptions"][1]["currentValue"], "auto-edit");
    assert!(acp.kinds().iter().any(|k| k == "current_mode_update"));
    let r = acp.call("session/close", json!({"sessionId": sid}));
    assert_eq!(r, json!({}));
    acp.finish();
}

#[test]
fn a_permission_request_left_open_is_withdrawn_when_the_prompt_is_cancelled() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let tape = cassette(home.path(), &[bash_call("toolu_w", "echo never")]);
    let (mut acp, sid) = start(home.path(), &tape, ws.path());
    acp.approve = "";
    let id = acp.send_request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "run it"}]}),
    );
    let asked = loop {
        let m = acp.pump();
        if m["method"] == "session/request_permission" {
            break m["id"].clone();
        }
    };
    acp.send(json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": id}}));
    let mut withdrawn = false;
    let r = loop {
        let m = acp.pump();
        if m["method"] == "$/cancel_request" {
            assert_eq!(m["params"]["requestId"], asked);
            withdrawn = true;
        }
        if m.get("method").is_none() && m["id"] == json!(id) {
            break m;
        }
    };
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    assert!(withdrawn, "the open permission request was not withdrawn");
    acp.finish();
}

/// Hardening: the ACP lifecycle is enforced and lenient params are refused; the agent keeps
/// serving after each refusal.
#[test]
fn lifecycle_is_enforced() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let tape = cassette(home.path(), &[]);
    let mut acp = Acp::spawn(home.path(), &tape);
    let id = acp.send_request("session/new", json!({"cwd": ws.path(), "mcpServers": []}));
    assert_eq!(acp.wait_response(id)["error"]["code"], -32002);
    for bad in [json!([1]), json!({"clientCapabilities": {}})] {
        let id = acp.send_request("initialize", bad.clone());
        assert_eq!(acp.wait_response(id)["error"]["code"], -32602, "{bad}");
    }
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let id = acp.send_request("authenticate", json!({"methodId": "anything"}));
    assert_eq!(acp.wait_response(id)["error"]["code"], -32602);
    let id = acp.send_request("session/new", json!([ws.path()]));
    assert_eq!(acp.wait_response(id)["error"]["code"], -32602);
    let new = acp.call("session/new", json!({"cwd": ws.path(), "mcpServers": []}));
    assert!(new["sessionId"].is_string());
    acp.finish();
}

/// Conformance: `initialize` takes any `protocolVersion` the official `ProtocolVersion`
/// reads as unknown (a string, a fraction, a number it does not know) and answers the latest
/// version Garuda speaks; the connection goes on.
#[test]
fn initialize_answers_the_latest_version_to_any_asked_one() {
    let home = tempfile::tempdir().unwrap();
    let tape = cassette(home.path(), &[]);
    for asked in [
        json!("1"),
        json!("v1.2"),
        json!(1.5),
        json!(7),
        json!(99_999_999),
        json!(null),
    ] {
        let mut acp = Acp::spawn(home.path(), &tape);
        let init = acp.call(
            "initialize",
            json!({"protocolVersion": asked, "clientCapabilities": {}}),
        );
        assert_eq!(init["protocolVersion"], 1, "{asked}");
        let caps = &init["agentCapabilities"];
        assert_eq!(caps["mcpCapabilities"]["http"], true);
        assert_eq!(caps["mcpCapabilities"]["sse"], false);
        assert_eq!(caps["auth"]["logout"], json!({}));
        assert_eq!(caps["sessionCapabilities"]["delete"], json!({}));
        let list = acp.call("session/list", json!({}));
        assert!(list["sessions"].is_array(), "{asked}: {list}");
        acp.finish();
    }
}

/// `logout` answers success (keys come from the environment or config: nothing to forget);
/// `session/delete` closes a live session and removes its transcript; a second delete succeeds
/// silently, and a load of the deleted session is "resource not found".
#[test]
fn logout_and_session_delete() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let tape = cassette(home.path(), &[]);
    let (mut acp, sid) = start(home.path(), &tape, ws.path());
    assert_eq!(acp.call("logout", json!({})), json!({}));
    let transcripts = home.path().join("state/garuda/sessions");
    let files = || -> Vec<String> {
        std::fs::read_dir(&transcripts)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.contains(&sid))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(!files().is_empty(), "no transcript for {sid}");
    // Nobody wrote in it: nothing to resume, so not listed (its transcript is there).
    let listed = acp.call("session/list", json!({"cwd": ws.path()}));
    assert_eq!(listed["sessions"], json!([]));
    assert_eq!(
        acp.call("session/delete", json!({"sessionId": sid})),
        json!({})
    );
    assert!(files().is_empty(), "{:?}", files());
    let listed = acp.call("session/list", json!({"cwd": ws.path()}));
    assert_eq!(listed["sessions"], json!([]));
    // ACP: deleting a session already gone SHOULD succeed silently.
    assert_eq!(
        acp.call("session/delete", json!({"sessionId": sid})),
        json!({})
    );
    // ACP: a `cwd` that does not exist MUST list no sessions (not an error).
    let gone = ws.path().join("no-such-folder");
    let listed = acp.call("session/list", json!({"cwd": gone}));
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    for (method, params) in [
        (
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "ask"}),
        ),
        (
            "session/load",
            json!({"sessionId": sid, "cwd": ws.path(), "mcpServers": []}),
        ),
    ] {
        let id = acp.send_request(method, params);
        assert_eq!(acp.wait_response(id)["error"]["code"], -32002, "{method}");
    }
    acp.finish();
}

/// A session's warnings (here an MCP server that cannot start) are `notice` updates after the
/// answer when the client advertises `session.notices`, and never sent when it does not.
#[test]
fn warnings_are_notices_only_for_clients_that_show_them() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let tape = cassette(home.path(), &[]);
    let broken =
        json!([{"name": "broken", "command": "/nonexistent/mcp-server", "args": [], "env": []}]);
    for notices in [true, false] {
        let mut acp = Acp::spawn(home.path(), &tape);
        let caps = if notices {
            json!({"session": {"notices": {}}})
        } else {
            json!({})
        };
        acp.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": caps}),
        );
        acp.call(
            "session/new",
            json!({"cwd": ws.path(), "mcpServers": broken}),
        );
        // A round trip after the answer: what followed the answer itself has arrived (an
        // MCP server's failure comes when its start ended, waited for below).
        acp.call("session/list", json!({}));
        let is_broken = |u: &Value| {
            u["update"]["sessionUpdate"] == "notice"
                && u["update"]["title"]
                    .as_str()
                    .unwrap_or("")
                    .contains("broken")
        };
        if notices {
            // The servers start in the background: the notice follows once the start failed.
            while !acp.updates.iter().any(is_broken) {
                acp.pump();
            }
            let n = acp.updates.iter().find(|u| is_broken(u)).expect("notice");
            assert_eq!(n["update"]["severity"], "warning");
        } else {
            let found: Vec<&Value> = acp
                .updates
                .iter()
                .filter(|u| u["update"]["sessionUpdate"] == "notice")
                .collect();
            assert!(found.is_empty(), "{found:?}");
        }
        acp.finish();
    }
}

/// A session loaded again (`session/load`, or `session/resume` of a stored one) with an MCP
/// server that cannot start says so as it did at `session/new`: a `notice` once the start
/// failed.
#[test]
fn a_loaded_session_reports_its_failed_mcp_server_too() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let tape = cassette(home.path(), &[]);
    let broken =
        json!([{"name": "broken", "command": "/nonexistent/mcp-server", "args": [], "env": []}]);
    let caps = json!({"session": {"notices": {}}});
    let is_broken = |u: &Value| {
        u["update"]["sessionUpdate"] == "notice"
            && u["update"]["title"]
                .as_str()
                .unwrap_or("")
                .contains("broken")
    };
    let mut acp = Acp::spawn(home.path(), &tape);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": caps}),
    );
    let r = acp.call(
        "session/new",
        json!({"cwd": ws.path(), "mcpServers": broken}),
    );
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    acp.finish();
    for method in ["session/load", "session/resume"] {
        let mut acp = Acp::spawn(home.path(), &tape);
        acp.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": caps}),
        );
        acp.call(
            method,
            json!({"sessionId": sid, "cwd": ws.path(), "mcpServers": broken}),
        );
        while !acp.updates.iter().any(is_broken) {
            acp.pump();
        }
        acp.finish();
    }
}

/// `session/new` with an MCP server that is slow to start answers at once, and other
/// requests on the connection (`session/list`, `session/set_mode` and `session/cancel` for
/// another session) are answered while the server is still starting. The server
/// (tests/mcp/slow_server.py) answers nothing until the test creates its gate file, so the
/// order is certain without a timer. The first prompt, sent before the gate opens, waits
/// for the server: its tool is in the first request and works.
#[test]
fn a_slow_mcp_server_does_not_hold_up_the_connection() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let tape = cassette(
        home.path(),
        &[
            json!({"response": {"content": [{"type": "tool_use", "id": "toolu_p", "name": "mcp__slow__ping", "input": {}}], "stopReason": "tool_use"}}),
            json!({"response": {"content": [{"type": "text", "text": "Pinged."}], "stopReason": "end_turn"}}),
        ],
    );
    let (mut acp, first) = start(home.path(), &tape, ws.path());
    let gate = home.path().join("gate");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/slow_server.py");
    let slow = acp.send_request(
        "session/new",
        json!({"cwd": ws.path(), "mcpServers": [{"name": "slow", "command": "python3",
            "args": [script, gate], "env": []}]}),
    );
    let list = acp.send_request("session/list", json!({"cwd": ws.path()}));
    acp.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": first}}));
    let mode = acp.send_request(
        "session/set_mode",
        json!({"sessionId": first, "modeId": "auto-edit"}),
    );
    let mut answered = std::collections::HashMap::new();
    while ![list, mode, slow]
        .iter()
        .all(|id| answered.contains_key(id))
    {
        let m = acp.pump();
        if m.get("method").is_none() {
            assert!(m.get("result").is_some(), "{m}");
            answered.insert(m["id"].as_i64().expect("id"), m);
        }
    }
    // Everything was answered while the server still waits for its gate.
    assert!(!gate.exists());
    let new = &answered[&slow];
    let sid = new["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{new}"))
        .to_string();
    let prompt = acp.send_request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "ping"}]}),
    );
    std::fs::write(&gate, "").unwrap();
    let r = acp.wait_response(prompt);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let all = serde_json::to_string(&acp.updates).unwrap();
    assert!(
        all.contains("pong"),
        "the slow server's tool did not answer: {all}"
    );
    acp.finish();
}

/// A broken config file leaves `garuda acp` up: `initialize` answers with the problems in
/// `_meta`, `session/new` fails with `kind: config` in its error data, and fixing the file is
/// enough. With a session open, a file broken again reaches it as an `error` notice.
#[test]
fn a_config_error_leaves_the_agent_up_and_a_fixed_file_is_enough() {
    use crate::config_errors::{BROKEN, assert_broken_problems, write_config};
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let tape = cassette(home.path(), &[]);
    let path = write_config(home.path(), BROKEN);
    let mut acp = Acp::spawn(home.path(), &tape);
    let init = acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}}),
    );
    assert_broken_problems(&init["_meta"]["garuda"]["configProblems"]);
    let id = acp.send_request("session/new", json!({"cwd": ws.path(), "mcpServers": []}));
    let r = acp.wait_response(id);
    assert_eq!(r["error"]["code"], -32057, "{r}");
    assert_eq!(r["error"]["data"]["kind"], "config", "{r}");
    assert_broken_problems(&r["error"]["data"]["problems"]);
    // The watch starts off the read loop; writing again until it is seen keeps the test
    // free of a timing guess.
    let deadline = std::time::Instant::now() + crate::client::WAIT;
    let sid = loop {
        std::fs::write(&path, "[approval]\npolicy = \"ask\"\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let id = acp.send_request("session/new", json!({"cwd": ws.path(), "mcpServers": []}));
        let r = acp.wait_response(id);
        if let Some(sid) = r["result"]["sessionId"].as_str() {
            break sid.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "never reloaded: {r}");
    };
    std::fs::write(&path, "[approval]\npolicy = 5\n").unwrap();
    let notice = loop {
        acp.pump();
        let found = acp.updates.iter().find(|u| {
            u["sessionId"] == sid.as_str()
                && u["update"]["sessionUpdate"] == "notice"
                && u["update"]["severity"] == "error"
        });
        if let Some(n) = found {
            break n.clone();
        }
    };
    let title = notice["update"]["title"].as_str().unwrap();
    assert!(
        title.contains("config.toml: line 2") && title.contains("approval.policy"),
        "{title}"
    );
    acp.finish();
}

/// A PreToolUse hook that blocks a command: the call fails with the hook's reason, no
/// permission is asked, and the block reaches the user as a `notice` for clients that show
/// notices, else as a thought line.
#[test]
fn a_blocked_call_is_a_notice_or_a_thought() {
    for notices in [true, false] {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let dir = home.path().join("config/garuda");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.toml"),
            "[[hooks.PreToolUse]]\nmatcher = \"Bash\"\n\
             hooks = [{ type = \"command\", command = \"echo 'no rm here' >&2; exit 2\" }]\n",
        )
        .unwrap();
        let tape = cassette(
            home.path(),
            &[
                bash_call("toolu_h", "rm -rf build"),
                json!({"response": {"content": [{"type": "text", "text": "Understood."}],
                    "stopReason": "end_turn"}}),
            ],
        );
        let mut acp = Acp::spawn(home.path(), &tape);
        let caps = if notices {
            json!({"session": {"notices": {}}})
        } else {
            json!({})
        };
        acp.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": caps}),
        );
        let sid = acp.call("session/new", json!({"cwd": ws.path(), "mcpServers": []}))["sessionId"]
            .as_str()
            .unwrap()
            .to_string();
        let r = acp.call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "clean"}]}),
        );
        assert_eq!(r["stopReason"], "end_turn");
        assert!(acp.permissions.is_empty(), "{:?}", acp.permissions);
        let failed = acp
            .updates
            .iter()
            .find(|u| {
                u["update"]["sessionUpdate"] == "tool_call_update"
                    && u["update"]["status"] == "failed"
            })
            .unwrap_or_else(|| panic!("no failed call: {:?}", acp.updates));
        assert!(
            failed.to_string().contains("Blocked by a hook: no rm here"),
            "{failed}"
        );
        let notice = acp
            .updates
            .iter()
            .find(|u| u["update"]["sessionUpdate"] == "notice");
        let thought = acp.updates.iter().any(|u| {
            u["update"]["sessionUpdate"] == "agent_thought_chunk"
                && u.to_string().contains("[hook PreToolUse bash] no rm here")
        });
        if notices {
            let n = notice.unwrap_or_else(|| panic!("no notice: {:?}", acp.updates));
            assert_eq!(n["update"]["title"], "hook PreToolUse (bash) blocked");
            assert_eq!(n["update"]["description"], "no rm here");
            assert!(!thought);
        } else {
            assert!(notice.is_none());
            assert!(thought, "{:?}", acp.updates);
        }
        acp.finish();
    }
}

fn answer_if(needle: &str, text: &str) -> Value {
    json!({"response": {"content": [{"type": "text", "text": text}],
        "stopReason": "end_turn", "usage": {"inputTokens": 30, "outputTokens": 5}},
        "match": needle})
}

/// The user messages a `session/load` of `sid` replays, in order.
fn replayed_prompts(acp: &mut Acp, sid: &str, ws: &Path) -> Vec<String> {
    acp.updates.clear();
    acp.call(
        "session/load",
        json!({"sessionId": sid, "cwd": ws, "mcpServers": []}),
    );
    acp.updates
        .iter()
        .filter(|u| u["update"]["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["update"]["content"]["text"].as_str().map(str::to_string))
        .collect()
}

/// What a resume picker shows: sessions someone wrote in, by last activity, titled by the
/// user's own words (not a rule file the client shared first), with `updatedAt` the last
/// activity; a replayed message sent in blocks reads as the user wrote it.
#[test]
fn session_list_shows_titled_sessions_by_last_activity_and_a_replay_keeps_blocks_apart() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let tape = cassette(
        home.path(),
        &[
            answer_if("fix the parser", "Fixed."),
            answer_if("older one", "Noted."),
            answer_if("back to it", "Again."),
        ],
    );
    let mut acp = Acp::spawn(home.path(), &tape);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let new_session = |acp: &mut Acp| {
        let r = acp.call("session/new", json!({"cwd": ws.path(), "mcpServers": []}));
        r["sessionId"].as_str().expect("sessionId").to_string()
    };
    let shared = "Sharing AGENTS.md:\n---\n# proj1\nBe brief.";
    let first = new_session(&mut acp);
    acp.updates.clear();
    acp.call(
        "session/prompt",
        json!({"sessionId": first, "prompt": [
            {"type": "text", "text": shared},
            {"type": "text", "text": "fix the parser"}]}),
    );
    let live_title = acp
        .updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "session_info_update")
        .map(|u| u["update"]["title"].clone());
    assert_eq!(live_title, Some(json!("fix the parser")));
    let second = new_session(&mut acp);
    acp.call(
        "session/prompt",
        json!({"sessionId": second, "prompt": [{"type": "text", "text": "older one"}]}),
    );
    let empty = new_session(&mut acp);
    // Written in last, the first session is the most recent again.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    acp.call(
        "session/prompt",
        json!({"sessionId": first, "prompt": [{"type": "text", "text": "back to it"}]}),
    );
    let listed = acp.call("session/list", json!({"cwd": ws.path()}));
    let sessions = listed["sessions"].as_array().expect("sessions");
    let ids: Vec<&str> = sessions
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert_eq!(ids, [first.as_str(), second.as_str()], "{listed}");
    assert!(!ids.contains(&empty.as_str()));
    assert_eq!(sessions[0]["title"], "fix the parser", "{listed}");
    assert_eq!(sessions[1]["title"], "older one", "{listed}");
    let at = |i: usize| sessions[i]["updatedAt"].as_str().unwrap().to_string();
    assert!(at(0) > at(1), "{listed}");
    acp.finish();

    let mut acp = Acp::spawn(home.path(), &tape);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let chunks = replayed_prompts(&mut acp, &first, ws.path());
    // The first message's blocks with a blank line between; the next message starts afresh.
    assert_eq!(
        chunks,
        [shared, "\n\nfix the parser", "back to it"],
        "{chunks:?}"
    );
    acp.finish();
}

#[test]
fn session_fork_copies_the_history_into_a_new_session_and_leaves_the_source() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let tape = cassette(
        home.path(),
        &[
            answer_if("apple", "Noted: apple."),
            answer_if("which word", "The word was apple."),
        ],
    );
    let mut acp = Acp::spawn(home.path(), &tape);
    let init = acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    // Advertised in ACP's unstable form only: `sessionCapabilities.fork`.
    assert_eq!(
        init["agentCapabilities"]["sessionCapabilities"]["fork"],
        json!({}),
        "{init}"
    );
    let new = acp.call("session/new", json!({"cwd": ws.path(), "mcpServers": []}));
    let sid = new["sessionId"].as_str().expect("sessionId").to_string();
    acp.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "full-auto"}),
    );
    let r = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "remember apple"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn");
    acp.updates.clear();

    let fork = acp.call(
        "session/fork",
        json!({"sessionId": sid, "cwd": ws.path(), "mcpServers": []}),
    );
    let fid = fork["sessionId"].as_str().expect("sessionId").to_string();
    assert_ne!(fid, sid);
    // The source's mode carries over; the commands and the title follow the answer.
    assert_eq!(fork["modes"]["currentModeId"], "full-auto", "{fork}");
    assert_eq!(fork["configOptions"][0]["id"], "model", "{fork}");
    acp.pump();
    acp.pump();
    assert_eq!(
        acp.kinds(),
        ["available_commands_update", "session_info_update"]
    );
    assert!(acp.updates.iter().all(|u| u["sessionId"] == json!(fid)));
    assert_eq!(acp.updates[1]["update"]["title"], "remember apple");

    // The fork goes on from the history; the source does not see it.
    let r = acp.call(
        "session/prompt",
        json!({"sessionId": fid, "prompt": [{"type": "text", "text": "which word was it?"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let listed = acp.call("session/list", json!({"cwd": ws.path()}));
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert!(
        ids.contains(&sid.as_str()) && ids.contains(&fid.as_str()),
        "{listed}"
    );

    // Bad requests answer errors and leave the agent up.
    let id = acp.send_request(
        "session/fork",
        json!({"sessionId": "01a22afd-0000-7000-8000-000000000000", "cwd": ws.path()}),
    );
    assert_eq!(acp.wait_response(id)["error"]["code"], -32002);
    let id = acp.send_request(
        "session/fork",
        json!({"sessionId": sid, "cwd": "relative/dir"}),
    );
    assert_eq!(acp.wait_response(id)["error"]["code"], -32602);
    acp.finish();

    // A new process: the fork holds both prompts, the source only its own.
    let mut acp = Acp::spawn(home.path(), &tape);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(
        replayed_prompts(&mut acp, &fid, ws.path()),
        ["remember apple", "which word was it?"]
    );
    assert_eq!(
        replayed_prompts(&mut acp, &sid, ws.path()),
        ["remember apple"]
    );
    acp.finish();
}

#[test]
fn an_agents_calls_are_cards_marked_in_meta_and_its_text_goes_on_its_call() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let tape = cassette(
        home.path(),
        &[
            json!({"response": {"content": [
                {"type": "tool_use", "id": "toolu_x", "name": "explore", "input": {"task": "what is in a.txt?"}}
            ], "stopReason": "tool_use", "usage": {"inputTokens": 40, "outputTokens": 10}}}),
            json!({"response": {"content": [
                {"type": "text", "text": "CHILD-READING"},
                {"type": "tool_use", "id": "toolu_r", "name": "read_file", "input": {"path": "a.txt"}}
            ], "stopReason": "tool_use", "usage": {"inputTokens": 40, "outputTokens": 10}}}),
            json!({"response": {"content": [{"type": "text", "text": "CHILD-REPORT alpha"}],
                "stopReason": "end_turn", "usage": {"inputTokens": 50, "outputTokens": 5}}}),
            json!({"response": {"content": [{"type": "text", "text": "done"}],
                "stopReason": "end_turn", "usage": {"inputTokens": 60, "outputTokens": 5}}}),
        ],
    );
    let (mut acp, sid) = start(home.path(), &tape, ws.path());
    acp.updates.clear();
    let r = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "look"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn");
    let ups: Vec<&Value> = acp.updates.iter().map(|u| &u["update"]).collect();
    let of = |id: &str| -> Vec<&Value> {
        ups.iter()
            .copied()
            .filter(|u| u["toolCallId"] == id)
            .collect()
    };
    let child = of("toolu_r");
    assert_eq!(child.len(), 3, "{ups:?}");
    assert_eq!(child[0]["sessionUpdate"], "tool_call");
    assert_eq!(child[1]["status"], "in_progress");
    assert!(
        child[0]["title"]
            .as_str()
            .unwrap()
            .starts_with("[agent explore] read_file"),
        "{}",
        child[0]
    );
    for u in [child[0], child[2]] {
        let a = &u["_meta"]["garuda"]["agent"];
        assert_eq!(a["name"], "explore", "{u}");
        assert_eq!(a["toolCallId"], "toolu_x", "{u}");
        assert!(a["sessionId"].as_str().is_some_and(|s| s != sid));
    }
    assert_eq!(child[2]["status"], "completed");
    let own = of("toolu_x");
    let texts: Vec<String> = own
        .iter()
        .filter(|u| u["_meta"]["garuda"]["agent"].is_object())
        .map(|u| {
            u["content"][0]["content"]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(texts.iter().any(|t| t == "CHILD-READING"), "{own:?}");
    assert!(texts.iter().any(|t| t == "CHILD-REPORT alpha"), "{own:?}");
    let last = own.last().unwrap();
    assert_eq!(last["status"], "completed", "{last}");
    assert!(
        last["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("CHILD-REPORT alpha")
    );
    // The agent's words are not the session's own message.
    let said: String = ups
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(said, "done");
    acp.finish();
}

/// With the client capability `subagents`, an `explore` run is a child session: announced on
/// the caller's session before any of its traffic, its task and report as `session_message`s,
/// its text and calls under its own session id, linked from the call that runs it, and idle
/// at its end. Every update parses as the schema crate's `SessionNotification` and comes
/// back the same when written again.
#[test]
fn with_subagents_an_agent_is_a_child_session() {
    use agent_client_protocol_schema::v1 as schema;
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let tape = cassette(
        home.path(),
        &[
            json!({"response": {"content": [
                {"type": "tool_use", "id": "toolu_x", "name": "explore", "input": {"task": "what is in a.txt?"}}
            ], "stopReason": "tool_use", "usage": {"inputTokens": 40, "outputTokens": 10}}}),
            json!({"response": {"content": [
                {"type": "text", "text": "CHILD-READING"},
                {"type": "tool_use", "id": "toolu_r", "name": "read_file", "input": {"path": "a.txt"}}
            ], "stopReason": "tool_use", "usage": {"inputTokens": 40, "outputTokens": 10}}}),
            json!({"response": {"content": [{"type": "text", "text": "CHILD-REPORT alpha"}],
                "stopReason": "end_turn", "usage": {"inputTokens": 50, "outputTokens": 5}}}),
            json!({"response": {"content": [{"type": "text", "text": "done"}],
                "stopReason": "end_turn", "usage": {"inputTokens": 60, "outputTokens": 5}}}),
        ],
    );
    let mut acp = Acp::spawn(home.path(), &tape);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"subagents": {}}}),
    );
    let new = acp.call("session/new", json!({"cwd": ws.path(), "mcpServers": []}));
    let sid = new["sessionId"].as_str().unwrap().to_string();
    acp.pump();
    acp.updates.clear();
    let r = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "look"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn");
    for u in &acp.updates {
        let n: schema::SessionNotification = serde_json::from_value(u.clone())
            .unwrap_or_else(|e| panic!("not a SessionNotification ({e}): {u}"));
        assert_eq!(
            &serde_json::to_value(&n).unwrap(),
            u,
            "lost in a round trip"
        );
    }
    let at = acp
        .updates
        .iter()
        .position(|u| u["update"]["sessionUpdate"] == "subagent_update")
        .expect("announced");
    let announce = &acp.updates[at];
    assert_eq!(announce["sessionId"], sid.as_str());
    let child = announce["update"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(child, sid);
    assert_eq!(announce["update"]["title"], "explore");
    assert_eq!(announce["update"]["description"], "what is in a.txt?");
    assert_eq!(announce["update"]["state"]["state"], "running");
    // Nothing names the child before it is announced.
    for u in &acp.updates[..at] {
        assert!(!u.to_string().contains(&child), "{u}");
    }
    let of = |s: &str| -> Vec<&Value> {
        acp.updates
            .iter()
            .filter(|u| u["sessionId"] == s)
            .map(|u| &u["update"])
            .collect()
    };
    let kinds = |us: &[&Value]| -> Vec<String> {
        us.iter()
            .map(|u| u["sessionUpdate"].as_str().unwrap().to_string())
            .collect()
    };
    let theirs = of(&child);
    assert_eq!(
        kinds(&theirs),
        [
            "session_message",
            "session_message_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "tool_call_update",
            "agent_message_chunk",
        ],
        "{theirs:?}"
    );
    assert_eq!(theirs[0]["senderSessionId"], sid.as_str());
    assert_eq!(theirs[0]["recipientSessionId"], child.as_str());
    assert_eq!(theirs[1]["content"]["text"], "what is in a.txt?");
    assert_eq!(theirs[2]["content"]["text"], "CHILD-READING");
    assert_eq!(theirs[3]["toolCallId"], "toolu_r");
    assert!(!theirs[3]["title"].as_str().unwrap().starts_with("[agent"));
    assert_eq!(theirs[4]["status"], "in_progress");
    assert_eq!(theirs[5]["status"], "completed");
    assert_eq!(theirs[6]["content"]["text"], "CHILD-REPORT alpha");

    let ours = of(&sid);
    // The call that runs it links to the child, and still does when it finishes.
    let link = json!({"type": "session", "sessionId": child});
    let x: Vec<&&Value> = ours
        .iter()
        .filter(|u| u["toolCallId"] == "toolu_x")
        .collect();
    assert!(x.iter().any(|u| u["content"] == json!([link])), "{x:?}");
    let last = x.last().unwrap();
    assert_eq!(last["status"], "completed");
    assert!(
        last["content"].as_array().unwrap().contains(&link),
        "{last}"
    );
    let report = ours
        .iter()
        .position(|u| u["sessionUpdate"] == "session_message")
        .expect("report");
    assert_eq!(ours[report]["senderSessionId"], child.as_str());
    assert_eq!(ours[report + 1]["sessionUpdate"], "session_message_chunk");
    assert_eq!(ours[report + 1]["content"]["text"], "CHILD-REPORT alpha");
    assert_eq!(
        ours[report + 2],
        &json!({"sessionUpdate": "subagent_update", "sessionId": child,
                "state": {"state": "idle", "stopReason": "end_turn"}})
    );
    // None of the agent's traffic is in the caller's session.
    assert!(ours.iter().all(|u| u["toolCallId"] != "toolu_r"));
    let said: String = ours
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(said, "done");
    acp.finish();
}

/// With `subagents`, an agent's call that needs approval is asked about in the child session,
/// where its card is.
#[test]
fn with_subagents_an_agents_approval_is_asked_in_its_child_session() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".garuda/agents")).unwrap();
    std::fs::write(
        ws.path().join(".garuda/agents/runner.md"),
        "---\nname: runner\ndescription: Runs commands and reports.\ntools: Read, Bash\n---\nRun what you are asked.\n",
    )
    .unwrap();
    let tape = cassette(
        home.path(),
        &[
            json!({"response": {"content": [
                {"type": "tool_use", "id": "toolu_a", "name": "agent", "input": {"name": "runner", "task": "run echo hi"}}
            ], "stopReason": "tool_use", "usage": {"inputTokens": 40, "outputTokens": 10}}}),
            bash_call("toolu_b", "echo hi-from-agent"),
            json!({"response": {"content": [{"type": "text", "text": "RAN"}],
                "stopReason": "end_turn", "usage": {"inputTokens": 50, "outputTokens": 5}}}),
            json!({"response": {"content": [{"type": "text", "text": "done"}],
                "stopReason": "end_turn", "usage": {"inputTokens": 60, "outputTokens": 5}}}),
        ],
    );
    let mut acp = Acp::spawn(home.path(), &tape);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"subagents": {}}}),
    );
    let new = acp.call("session/new", json!({"cwd": ws.path(), "mcpServers": []}));
    let sid = new["sessionId"].as_str().unwrap().to_string();
    acp.pump();
    acp.updates.clear();
    let r = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "run it"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn");
    let child = acp
        .updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "subagent_update")
        .map(|u| u["update"]["sessionId"].as_str().unwrap().to_string())
        .expect("announced");
    assert_eq!(acp.permissions.len(), 1, "{:?}", acp.permissions);
    let p = &acp.permissions[0];
    assert_eq!(p["sessionId"], child.as_str(), "{p}");
    assert_eq!(p["toolCall"]["toolCallId"], "toolu_b", "{p}");
    let b: Vec<&Value> = acp
        .updates
        .iter()
        .filter(|u| u["update"]["toolCallId"] == "toolu_b")
        .collect();
    assert!(!b.is_empty());
    assert!(b.iter().all(|u| u["sessionId"] == child.as_str()), "{b:?}");
    assert_eq!(b.last().unwrap()["update"]["status"], "completed");
    acp.finish();
}

#[test]
fn a_search_the_provider_ran_is_a_completed_search_call() {
    use crate::mock_model::*;
    let search = AnthropicSse::new(MockUsage::new(30, 20))
        .server_search(
            "srvtoolu_01",
            "serde derive",
            &[("Serde", "https://serde.rs/")],
        )
        .text("Derive it.")
        .finish("end_turn");
    let mock = crate::turns::Mock::start(vec![MockReply::Sse(search)]);
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    crate::turns::write_config(home.path(), "[web.search]\nanthropic_server_tool = true\n");
    let mut acp = Acp::spawn_env(home.path(), &mock.env());
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let new = acp.call("session/new", json!({"cwd": ws.path(), "mcpServers": []}));
    let sid = new["sessionId"].as_str().expect("sessionId").to_string();
    let r = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "search"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    assert!(acp.permissions.is_empty(), "nothing is asked");
    let call = acp
        .updates
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "tool_call")
        .expect("tool_call");
    assert_eq!(call["update"]["toolCallId"], "srvtoolu_01");
    assert_eq!(call["update"]["kind"], "search", "{call}");
    assert_eq!(call["update"]["status"], "in_progress", "{call}");
    let done = acp
        .updates
        .iter()
        .rfind(|u| u["update"]["sessionUpdate"] == "tool_call_update")
        .expect("tool_call_update");
    assert_eq!(done["update"]["status"], "completed", "{done}");
    assert!(done.to_string().contains("https://serde.rs/"), "{done}");
    // A load replays the search as it was shown.
    acp.updates.clear();
    acp.call(
        "session/load",
        json!({"sessionId": sid, "cwd": ws.path(), "mcpServers": []}),
    );
    let replayed: Vec<&Value> = acp
        .updates
        .iter()
        .filter(|u| u["update"]["toolCallId"] == "srvtoolu_01")
        .collect();
    assert_eq!(replayed.len(), 2, "{:?}", acp.updates);
    assert_eq!(replayed[0]["update"]["kind"], "search");
    assert_eq!(replayed[1]["update"]["status"], "completed");
    acp.finish();
}

/// ACP has no symbol request: with `code_index` on, an ACP session's `find_symbol` answers
/// from Garuda's own index, without asking for approval.
#[test]
fn an_acp_session_finds_symbols_in_garudas_index() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("config/garuda");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        "[features]\ncode_index = \"lookup\"\n",
    )
    .unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("lib.py"),
        "def parse_config(s):\n    return s\n",
    )
    .unwrap();
    let tape = cassette(
        home.path(),
        &[
            json!({"response": {"content": [
                {"type": "tool_use", "id": "toolu_1", "name": "find_symbol", "input": {"name": "parse_config"}}
            ], "stopReason": "tool_use", "usage": {"inputTokens": 40, "outputTokens": 10}}}),
            json!({"response": {"content": [{"type": "text", "text": "Found it."}],
                "stopReason": "end_turn", "usage": {"inputTokens": 90, "outputTokens": 5}}}),
        ],
    );
    let (mut acp, sid) = start(home.path(), &tape, ws.path());
    let r = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "where is parse_config?"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn");
    assert!(acp.permissions.is_empty(), "{:?}", acp.permissions);
    let done = acp
        .updates
        .iter()
        .rfind(|u| u["update"]["sessionUpdate"] == "tool_call_update")
        .unwrap();
    let text = done["update"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap();
    // The build runs beside the session: done by now as a rule, but never waited for.
    assert!(text.starts_with("source: garuda index ("), "{text}");
    if !text.contains("still building") {
        assert!(text.contains("lib.py:1-2 function parse_config"), "{text}");
    }
    acp.finish();
}
