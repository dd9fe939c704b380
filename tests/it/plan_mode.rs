//! Plan mode: only read-only tools run, the rest is refused without asking; `exit_plan_mode`
//! asks the user to approve the plan and switches the mode; the approved plan survives a
//! compaction; the system prompt keeps its bytes. Native and ACP fronts.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::client::{Garuda, WAIT, isolated_env};
use crate::context::{WINDOW_100K, text};
use crate::mock_model::*;
use crate::turns::{Mock, setup, write_config};

const PLAN: &str = "1. Change alpha to ALPHA in a.txt\n2. Check the file";

fn call(id: &str, tool: &str, input: Value) -> MockReply {
    let j = input.to_string();
    MockReply::Sse(anthropic_tool_use(id, tool, &[j.as_str()]))
}

fn new_session(g: &mut Garuda, wid: &str, policy: &str) -> String {
    let r = g.call("session/new", json!({"workspaceId": wid, "policy": policy}));
    r["sessionId"].as_str().expect("sid").to_string()
}

/// Runs a turn answering permission requests with `answer`; returns the requests asked.
fn turn_answering(g: &mut Garuda, sid: &str, words: &str, answer: Value) -> Vec<Value> {
    let mut asked = Vec::new();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": words}]}),
        |req| {
            asked.push(req.clone());
            answer.clone()
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    asked
}

/// The `toolCallFinished` events of tool `name`, in order.
fn finished(g: &Garuda, name: &str) -> Vec<Value> {
    g.turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "toolCallFinished" && e["name"] == name)
        .collect()
}

fn policy(g: &mut Garuda, sid: &str) -> String {
    let r = g.call("session/configure", json!({"sessionId": sid}));
    r["policy"].as_str().expect("policy").to_string()
}

/// A request's system prompt without cache markers.
fn system(raw: &[u8]) -> String {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(o) => {
                o.remove("cache_control");
                o.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let v: Value = serde_json::from_slice(raw).expect("json");
    let mut s = v["system"].clone();
    strip(&mut s);
    s.to_string()
}

#[test]
fn plan_mode_refuses_changes_without_asking_and_runs_reads() {
    let mock = Mock::start(vec![
        call("t1", "read_file", json!({"path": "a.txt"})),
        call(
            "t2",
            "edit_file",
            json!({"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
        ),
        call("t3", "bash", json!({"command": "echo ran > b.txt"})),
        call("t4", "remember", json!({"fact": "plans first"})),
        call("t5", "grep", json!({"pattern": "beta"})),
        text("Here is what I found.", 50),
        text("Back to work.", 50),
    ]);
    let (mut g, _home, ws, wid) = setup(&mock, "");
    let sid = new_session(&mut g, &wid, "plan");
    let asked = turn_answering(
        &mut g,
        &sid,
        "look around",
        json!({"optionId": "allow_once"}),
    );
    assert!(asked.is_empty(), "plan mode asks nothing: {asked:?}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "alpha\nbeta\n"
    );
    assert!(!ws.path().join("b.txt").exists());
    assert!(!ws.path().join(".garuda/memory.md").exists());
    for name in ["read_file", "grep"] {
        let done = finished(&g, name);
        assert_eq!(done[0]["isError"], false, "{name} runs: {done:?}");
    }
    for name in ["edit_file", "bash", "remember"] {
        let done = finished(&g, name);
        assert_eq!(done[0]["isError"], true, "{name} refused: {done:?}");
        assert_eq!(done[0]["meta"]["blockedByPlanMode"], true, "{done:?}");
        let out = done[0]["output"].as_str().unwrap();
        assert!(
            out.contains("Plan mode is on") && out.contains("exit_plan_mode"),
            "{out}"
        );
    }
    let bodies = mock.rec.bodies();
    // The mode is a note in the conversation, and the tool list holds exit_plan_mode.
    let first = bodies[0].to_string();
    assert!(first.contains("<garuda_note>Plan mode is on:"), "{first}");
    let tools: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"exit_plan_mode"), "{tools:?}");

    // The user leaves plan mode from the client: the next request says so, once.
    g.call(
        "session/configure",
        json!({"sessionId": sid, "policy": "ask"}),
    );
    let r = crate::context::turn(&mut g, &sid, "go on");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    let last = bodies.last().unwrap().to_string();
    assert!(
        last.contains("Plan mode is off: the session is in ask mode"),
        "{last}"
    );
    let raw = mock.rec.raw();
    assert_eq!(system(&raw[0]), system(&raw[raw.len() - 1]));
}

#[test]
fn an_approved_plan_switches_the_mode_and_survives_compaction() {
    let mut replies = vec![
        // Turn 1: the plan is sent back with the user's words.
        call(
            "p1",
            "exit_plan_mode",
            json!({"plan": "1. Rewrite everything"}),
        ),
        text("I will revise it.", 50),
        // Turn 2: approved into auto-edit; the edit then runs without asking.
        call("p2", "exit_plan_mode", json!({ "plan": PLAN })),
        call("r1", "read_file", json!({"path": "a.txt"})),
        call(
            "e1",
            "edit_file",
            json!({"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
        ),
        text("Done.", 50),
        // Turn 3: outside plan mode the tool is refused without asking.
        call("p3", "exit_plan_mode", json!({"plan": "again"})),
        text("Right.", 50),
    ];
    for i in 4..=6 {
        replies.push(text(&format!("answer {i}"), 20_000));
    }
    replies.push(text("<summary>EARLIER WORK</summary>", 50));
    replies.push(text("after", 100));
    let mock = Mock::start(replies);
    let (mut g, _home, ws, wid) =
        setup(&mock, &format!("{WINDOW_100K}[context]\nkeep_steps = 1\n"));
    let sid = new_session(&mut g, &wid, "plan");

    let asked = turn_answering(
        &mut g,
        &sid,
        "plan the change",
        json!({"optionId": "reject", "feedback": "Only touch a.txt"}),
    );
    assert_eq!(asked.len(), 1);
    let req = &asked[0]["params"];
    assert_eq!(asked[0]["method"], "permission/request");
    assert_eq!(req["toolName"], "exit_plan_mode");
    assert_eq!(req["plan"], "1. Rewrite everything");
    let ids: Vec<&str> = req["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["mode:auto-edit", "mode:ask", "mode:full-auto", "reject"]
    );
    let out = finished(&g, "exit_plan_mode")[0]["output"].to_string();
    assert!(
        out.contains("Only touch a.txt") && out.contains("stays in plan mode"),
        "{out}"
    );
    assert_eq!(policy(&mut g, &sid), "plan");

    let asked = turn_answering(&mut g, &sid, "again", json!({"optionId": "mode:auto-edit"}));
    assert_eq!(asked.len(), 1, "only the plan asks: {asked:?}");
    assert_eq!(asked[0]["params"]["plan"], PLAN);
    assert_eq!(policy(&mut g, &sid), "auto-edit");
    let events = g.turn_events();
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "modeChanged" && e["policy"] == "auto-edit"),
        "{events:?}"
    );
    let edit = finished(&g, "edit_file");
    assert_eq!(edit[0]["isError"], false, "{edit:?}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "ALPHA\nbeta\n"
    );
    let approved = finished(&g, "exit_plan_mode");
    let out = approved.last().unwrap()["output"].as_str().unwrap();
    assert!(
        out.contains("approved your plan") && out.contains("auto-edit"),
        "{out}"
    );

    let asked = turn_answering(&mut g, &sid, "and now?", json!({"optionId": "mode:ask"}));
    assert!(asked.is_empty(), "{asked:?}");
    let out = finished(&g, "exit_plan_mode").last().unwrap()["output"].to_string();
    assert!(out.contains("only for plan mode"), "{out}");
    assert_eq!(policy(&mut g, &sid), "auto-edit");

    for i in 4..=6 {
        let r = crate::context::turn(&mut g, &sid, &format!("question {i}"));
        assert_eq!(r["stopReason"], "end_turn", "{r}");
    }
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    let r = crate::context::turn(&mut g, &sid, "go on");
    assert_eq!(r["stopReason"], "end_turn", "{r}");

    let bodies = mock.rec.bodies();
    let before = bodies[bodies.len() - 3].to_string();
    assert!(!before.contains("<restored_plan>"));
    let after = bodies.last().unwrap().to_string();
    assert!(after.contains("<restored_plan>"), "{after}");
    assert!(
        after.contains("1. Change alpha to ALPHA in a.txt"),
        "{after}"
    );
    assert!(
        !after.contains("Rewrite everything"),
        "only the approved plan"
    );
    // No plan note after the approval: the tool result said it.
    assert!(
        !bodies[3]
            .to_string()
            .contains("<garuda_note>Plan mode is off")
    );
    assert!(
        !bodies[4]
            .to_string()
            .contains("<garuda_note>Plan mode is off")
    );
    // The mode switch left the system prompt's bytes alone (up to the compaction).
    let raw = mock.rec.raw();
    for r in &raw[1..bodies.len() - 2] {
        assert_eq!(system(&raw[0]), system(r));
    }
}

#[test]
fn an_approved_plan_whose_todo_list_is_done_is_not_restored() {
    let mut replies = vec![
        call("p1", "exit_plan_mode", json!({ "plan": PLAN })),
        call(
            "t1",
            "todo_write",
            json!({"todos": [
                {"content": "Change alpha", "status": "completed"},
                {"content": "Check the file", "status": "completed"}
            ]}),
        ),
        text("All done.", 50),
    ];
    for i in 2..=4 {
        replies.push(text(&format!("answer {i}"), 20_000));
    }
    replies.push(text("<summary>EARLIER WORK</summary>", 50));
    replies.push(text("after", 100));
    let mock = Mock::start(replies);
    let (mut g, _home, _ws, wid) =
        setup(&mock, &format!("{WINDOW_100K}[context]\nkeep_steps = 1\n"));
    let sid = new_session(&mut g, &wid, "plan");
    let asked = turn_answering(
        &mut g,
        &sid,
        "plan it",
        json!({"optionId": "mode:full-auto"}),
    );
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(policy(&mut g, &sid), "full-auto");
    for i in 2..=4 {
        let r = crate::context::turn(&mut g, &sid, &format!("question {i}"));
        assert_eq!(r["stopReason"], "end_turn", "{r}");
    }
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    let r = crate::context::turn(&mut g, &sid, "go on");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let after = mock.rec.bodies().last().expect("a request").to_string();
    assert!(
        !after.contains("<restored_plan>"),
        "the work the plan planned is done: {after}"
    );
}

/// A `garuda acp` wired to the mock model, driven by newline-delimited JSON-RPC.
struct AcpRun {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    rx: std::sync::mpsc::Receiver<Value>,
    next: i64,
    updates: Vec<Value>,
    permissions: Vec<Value>,
}

impl AcpRun {
    fn spawn(home: &std::path::Path, mock: &Mock) -> AcpRun {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_garuda"));
        cmd.arg("acp");
        isolated_env(&mut cmd, home);
        for (k, v) in mock.env() {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn garuda acp");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        AcpRun {
            stdin: child.stdin.take().expect("stdin"),
            child,
            rx,
            next: 1,
            updates: Vec::new(),
            permissions: Vec::new(),
        }
    }

    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// Calls `method`, answering permission requests with `option`.
    fn call(&mut self, method: &str, params: Value, option: &str) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let m = self.rx.recv_timeout(WAIT).expect("no message from garuda");
            match m.get("method").and_then(Value::as_str) {
                Some("session/update") => self.updates.push(m["params"]["update"].clone()),
                Some("session/request_permission") => {
                    self.permissions.push(m["params"].clone());
                    let answer = json!({"outcome": {"outcome": "selected", "optionId": option}});
                    self.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": answer}));
                }
                _ if m["id"] == json!(id) => {
                    return m.get("result").cloned().unwrap_or_else(|| panic!("{m}"));
                }
                _ => {}
            }
        }
    }
}

impl Drop for AcpRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn acp_offers_plan_mode_and_an_approved_plan_switches_it() {
    let mock = Mock::start(vec![
        call(
            "w1",
            "write_file",
            json!({"path": "new.txt", "content": "x"}),
        ),
        call("p1", "exit_plan_mode", json!({ "plan": PLAN })),
        call(
            "w2",
            "write_file",
            json!({"path": "new.txt", "content": "y"}),
        ),
        text("Written.", 50),
    ]);
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "");
    let ws = tempfile::tempdir().unwrap();
    let mut acp = AcpRun::spawn(home.path(), &mock);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
        "",
    );
    let new = acp.call(
        "session/new",
        json!({"cwd": ws.path(), "mcpServers": []}),
        "",
    );
    let sid = new["sessionId"].as_str().unwrap().to_string();
    let modes: Vec<&str> = new["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["ask", "auto-edit", "full-auto", "plan"]);
    acp.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "plan"}),
        "",
    );
    let r = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "plan, then write"}]}),
        "mode:auto-edit",
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    // The first write was refused without asking; only the plan asked.
    assert_eq!(acp.permissions.len(), 1, "{:?}", acp.permissions);
    let p = &acp.permissions[0];
    assert_eq!(p["toolCall"]["toolCallId"], "p1");
    assert!(
        p["toolCall"]["content"]
            .to_string()
            .contains("Change alpha to ALPHA"),
        "{p}"
    );
    let ids: Vec<&str> = p["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["mode:auto-edit", "mode:ask", "mode:full-auto", "reject"]
    );
    assert!(
        acp.updates
            .iter()
            .any(|u| u["sessionUpdate"] == "current_mode_update"
                && u["currentModeId"] == "auto-edit"),
        "{:?}",
        acp.updates
    );
    // A client that shows the mode as a config option hears of the switch too (ACP: the
    // agent sends the full set of options whenever one changes).
    let options = acp
        .updates
        .iter()
        .rev()
        .find(|u| u["sessionUpdate"] == "config_option_update")
        .unwrap_or_else(|| panic!("no config_option_update: {:?}", acp.updates));
    let mode = options["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "mode")
        .unwrap();
    assert_eq!(mode["currentValue"], "auto-edit", "{options}");
    // The second write ran under auto-edit.
    assert_eq!(
        std::fs::read_to_string(ws.path().join("new.txt")).unwrap(),
        "y"
    );
    let bodies = mock.rec.bodies();
    assert!(bodies[1].to_string().contains("Plan mode is on"));
}

/// ACP plan operations: to a client that advertises `plan`, plan mode's plan is a Markdown
/// `plan_update` (id `plan`) while it is asked about, and a rejected one is `plan_removed`.
#[test]
fn acp_shows_the_plan_by_id_to_a_client_with_plans() {
    let mock = Mock::start(vec![
        call("p1", "exit_plan_mode", json!({ "plan": PLAN })),
        text("I will revise it.", 50),
    ]);
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "");
    let ws = tempfile::tempdir().unwrap();
    let mut acp = AcpRun::spawn(home.path(), &mock);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"plan": {}}}),
        "",
    );
    let new = acp.call(
        "session/new",
        json!({"cwd": ws.path(), "mcpServers": []}),
        "",
    );
    let sid = new["sessionId"].as_str().unwrap().to_string();
    acp.call(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "plan"}),
        "",
    );
    let r = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "plan it"}]}),
        "reject",
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let kinds: Vec<&str> = acp
        .updates
        .iter()
        .filter_map(|u| u["sessionUpdate"].as_str())
        .filter(|k| k.starts_with("plan"))
        .collect();
    assert_eq!(kinds, ["plan_update", "plan_removed"], "{:?}", acp.updates);
    let shown = acp
        .updates
        .iter()
        .find(|u| u["sessionUpdate"] == "plan_update")
        .unwrap();
    assert_eq!(shown["plan"]["planId"], "plan", "{shown}");
    assert!(
        shown["plan"]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("Change alpha to ALPHA"),
        "{shown}"
    );
}
