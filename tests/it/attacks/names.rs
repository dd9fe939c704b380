//! Attacks: names.
//! What a person approves is what runs: bidi overrides, zero-width characters and line
//! separators in a command, a path, a diff or an agent's name reach every front's approval
//! escaped (`\u{202e}`), while the call's input keeps the exact text. Session ids are UUIDs
//! wherever a path is built from one: a file planted in the sessions folder under another name
//! and `../` ids are refused with -32602, and a transcript whose header is gone is paged
//! read-only.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};

use serde_json::{Value, json};

use crate::client::{Framing, Garuda, WAIT, isolated_env};
use crate::mock_model::*;
use crate::turns::{Mock, setup};

/// The issue's command: shown raw, the override makes the terminal print `ls ; curl | eval.sh`
/// backwards after `echo`.
const REVERSED: &str = "echo \u{202e}; hs.lave | lruc ; ls";
const REVERSED_SHOWN: &str = "echo \\u{202e}; hs.lave | lruc ; ls";
/// An agent whose name, shown raw, turns the title after it around.
const AGENT: &str = "safe\u{202e}elif_daer";
const AGENT_SHOWN: &str = "safe\\u{202e}elif_daer";

/// True when `s` holds a character that changes how the text around it shows.
fn has_format_char(s: &str) -> bool {
    s.chars().any(|c| {
        matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}' | '\u{2028}' | '\u{2029}')
    })
}

fn input(t: &str) -> Value {
    json!([{"type": "text", "text": t}])
}

fn session(g: &mut Garuda, wid: &str, policy: &str) -> String {
    let r = g.call("session/new", json!({"workspaceId": wid, "policy": policy}));
    r["sessionId"].as_str().expect("sessionId").to_string()
}

/// Runs a turn rejecting every approval; returns the `permission/request` params.
fn turn_rejecting(g: &mut Garuda, sid: &str) -> Vec<Value> {
    let mut asked = Vec::new();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": input("go")}),
        |m| {
            if m["method"] == "permission/request" {
                asked.push(m["params"].clone());
            }
            json!({"optionId": "reject"})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    asked
}

#[test]
fn a_reversed_command_is_escaped_in_the_native_permission_title() {
    let command = format!("{REVERSED} \u{200b}x\u{2028}y\u{2066}");
    let shown = format!("{REVERSED_SHOWN} \\u{{200b}}x\\u{{2028}}y\\u{{2066}}");
    let bash = json!({"command": command}).to_string();
    let write = json!({"path": "a\u{202e}txt.exe", "content": "x"}).to_string();
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use("b1", "bash", &[&bash])),
        MockReply::Sse(anthropic_tool_use("w1", "write_file", &[&write])),
        MockReply::Sse(anthropic_text("done", MockUsage::new(5, 1))),
    ]);
    let (mut g, _h, _ws, wid) = setup(&mock, "");
    let sid = session(&mut g, &wid, "ask");
    let asked = turn_rejecting(&mut g, &sid);
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[0]["title"], format!("bash: {shown}"), "{}", asked[0]);
    // The record keeps the exact command.
    assert_eq!(asked[0]["input"]["command"], command.as_str());
    let t = asked[1]["title"].as_str().expect("title");
    assert!(t.contains("a\\u{202e}txt.exe"), "{t}");
    for a in &asked {
        assert!(!has_format_char(&a["title"].to_string()), "{a}");
    }
}

#[test]
fn an_agents_name_does_not_head_a_title_reversed() {
    let call = json!({"name": AGENT, "task": "run echo hi"}).to_string();
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use("t_agent", "agent", &[&call])),
        MockReply::Sse(anthropic_tool_use(
            "t_bash",
            "bash",
            &[r#"{"command": "echo hi"}"#],
        )),
        MockReply::Sse(anthropic_text("RAN", MockUsage::new(4, 2))),
        MockReply::Sse(anthropic_text("done", MockUsage::new(5, 1))),
    ]);
    let (mut g, _h, ws, wid) = setup(&mock, "");
    let dir = ws.path().join(".garuda/agents");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("helper.md"),
        format!(
            "---\nname: {AGENT}\ndescription: Runs commands.\ntools: Read, Bash\n---\nRun it.\n"
        ),
    )
    .expect("agent file");
    let sid = session(&mut g, &wid, "ask");
    let asked = turn_rejecting(&mut g, &sid);
    // Whatever asks (the agent, or the caller when the agent was refused), no title or
    // agent name carries the override raw.
    assert!(!asked.is_empty());
    for a in &asked {
        assert!(!has_format_char(&a["title"].to_string()), "{a}");
        assert!(!has_format_char(&a["agent"].to_string()), "{a}");
        if a.get("agent").is_some_and(|n| !n.is_null()) {
            assert_eq!(a["agent"], AGENT_SHOWN, "{a}");
            let t = a["title"].as_str().expect("title");
            assert!(
                t.starts_with(&format!("[agent {AGENT_SHOWN}] bash: echo hi")),
                "{t}"
            );
        }
    }
}

/// A running `garuda acp` on newline-delimited JSON, rejecting every permission request.
struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    next_id: i64,
    permissions: Vec<Value>,
}

impl Acp {
    fn spawn(home: &Path, model: &str) -> Acp {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_garuda"));
        cmd.arg("acp");
        isolated_env(&mut cmd, home);
        cmd.env("GARUDA_MODEL", model);
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
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
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
            permissions: Vec::new(),
        }
    }

    fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{v}").expect("write");
        stdin.flush().expect("flush");
    }

    /// Sends a request and waits for its response, rejecting permission requests meanwhile.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let m = self
                .rx
                .recv_timeout(WAIT)
                .expect("no message from garuda acp");
            if m["method"] == "session/request_permission" {
                self.permissions.push(m["params"].clone());
                let answer = json!({"outcome": {"outcome": "selected", "optionId": "reject_once"}});
                self.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": answer}));
            } else if m.get("method").is_none() && m["id"] == json!(id) {
                return m;
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let r = self.request(method, params);
        r.get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{method}: {r}"))
    }

    fn started(home: &Path, model: &str, ws: &Path) -> (Acp, String) {
        let mut acp = Acp::spawn(home, model);
        acp.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        let new = acp.call("session/new", json!({"cwd": ws, "mcpServers": []}));
        let sid = new["sessionId"].as_str().expect("sessionId").to_string();
        (acp, sid)
    }
}

impl Drop for Acp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A replay cassette of `answers`, as a `replay:` model spec.
fn cassette(dir: &Path, answers: &[Value]) -> String {
    let p = dir.join("cassette.jsonl");
    let lines: Vec<String> = answers.iter().map(Value::to_string).collect();
    std::fs::write(&p, lines.join("\n")).expect("cassette");
    format!("replay:{}", p.display())
}

fn replay_tool(id: &str, name: &str, input: Value) -> Value {
    json!({"response": {"content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
        "stopReason": "tool_use", "usage": {"inputTokens": 40, "outputTokens": 10}}})
}

fn replay_done() -> Value {
    json!({"response": {"content": [{"type": "text", "text": "Done."}], "stopReason": "end_turn"}})
}

#[test]
fn a_reversed_command_and_diff_are_escaped_in_acp_request_permission() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let tapes = tempfile::tempdir().expect("tapes");
    let model = cassette(
        tapes.path(),
        &[
            replay_tool("b1", "bash", json!({"command": REVERSED})),
            replay_tool(
                "w1",
                "write_file",
                json!({"path": "n\u{202e}txt.sh", "content": "rm -rf \u{2066}~\u{2069}\n"}),
            ),
            replay_done(),
        ],
    );
    let (mut acp, sid) = Acp::started(home.path(), &model, ws.path());
    let r = acp.call(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    assert_eq!(acp.permissions.len(), 2, "{:?}", acp.permissions);
    let bash = &acp.permissions[0]["toolCall"];
    assert_eq!(bash["title"], format!("bash: {REVERSED_SHOWN}"), "{bash}");
    assert_eq!(
        bash["rawInput"]["command"], REVERSED,
        "the record stays exact"
    );
    let write = &acp.permissions[1]["toolCall"];
    assert!(
        write["title"]
            .as_str()
            .expect("title")
            .contains("n\\u{202e}txt.sh"),
        "{write}"
    );
    let diff = &write["content"][0];
    assert_eq!(diff["type"], "diff", "{write}");
    assert_eq!(diff["newText"], "rm -rf \\u{2066}~\\u{2069}\n", "{diff}");
    assert!(
        diff["path"]
            .as_str()
            .expect("path")
            .ends_with("n\\u{202e}txt.sh"),
        "{diff}"
    );
    for p in &acp.permissions {
        let mut shown = p["toolCall"].clone();
        shown["rawInput"] = Value::Null;
        shown["locations"] = Value::Null;
        assert!(!has_format_char(&shown.to_string()), "{p}");
    }
}

/// Runs `garuda ARGS` in `home` with stdin from /dev/null (no terminal to ask).
fn exec(home: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_garuda"));
    isolated_env(&mut c, home);
    c.args(args)
        .current_dir(home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.output().expect("run garuda")
}

#[test]
fn a_reversed_command_is_escaped_in_execs_approval_line_and_json_events() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let tapes = tempfile::tempdir().expect("tapes");
    let tape = [
        replay_tool("b1", "bash", json!({"command": REVERSED})),
        replay_done(),
    ];
    let model = cassette(tapes.path(), &tape);
    let out = exec(
        home.path(),
        &["exec", "--model", &model, "--policy", "ask", dir, "run"],
    );
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "[approval needed] bash: {REVERSED_SHOWN} needs approval"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("[tool] bash: {REVERSED_SHOWN}")),
        "{err}"
    );
    assert!(!has_format_char(&err), "{err}");

    let model = cassette(tapes.path(), &tape);
    let out = exec(
        home.path(),
        &[
            "exec", "--json", "--model", &model, "--policy", "ask", dir, "run",
        ],
    );
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let finished = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"]["kind"] == "finished")
        .expect("finished");
    let message = finished["event"]["error"]["message"]
        .as_str()
        .expect("message");
    assert!(
        message.starts_with(&format!("bash: {REVERSED_SHOWN} needs approval")),
        "{message}"
    );
}

/// A server on `home`'s state with one finished session in a workspace; returns the server,
/// the workspace, its id and the session.
fn with_a_session(home: &Path, mock: &Mock) -> (Garuda, tempfile::TempDir, String, String) {
    crate::turns::write_config(home, "");
    let ws = tempfile::tempdir().expect("ws");
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Ndjson, home, &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    let sid = session(&mut g, &wid, "ask");
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": input("remember 42")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    (g, ws, wid, sid)
}

fn sessions_dir(home: &Path) -> std::path::PathBuf {
    home.join("state/garuda/sessions")
}

/// The ACP requests that build a transcript's path from `id`.
fn acp_session_calls(id: &str, cwd: &Path) -> Vec<(&'static str, Value)> {
    let at = json!({"sessionId": id, "cwd": cwd, "mcpServers": []});
    vec![
        ("session/fork", at.clone()),
        ("session/load", at.clone()),
        ("session/resume", at),
        ("session/delete", json!({"sessionId": id})),
    ]
}

#[test]
fn a_planted_non_uuid_transcript_is_no_session() {
    let mock = Mock::start(vec![MockReply::Sse(anthropic_text(
        "kept",
        MockUsage::new(5, 1),
    ))]);
    let home = tempfile::tempdir().expect("home");
    let (mut g, _ws, wid, sid) = with_a_session(home.path(), &mock);
    let dir = sessions_dir(home.path());
    let planted = dir.join("planted.jsonl");
    std::fs::copy(dir.join(format!("{sid}.jsonl")), &planted).expect("plant");

    let listed = g.call("session/list", json!({"workspaceId": wid}));
    let ids: Vec<&Value> = listed["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| &s["sessionId"])
        .collect();
    assert_eq!(ids, vec![&json!(sid)], "{listed}");
    for (method, params) in [
        ("session/fork", json!({"sessionId": "planted"})),
        ("session/delete", json!({"sessionId": "planted"})),
        ("session/load", json!({"sessionId": "planted"})),
        ("session/messages", json!({"sessionId": "planted"})),
        (
            "turn/run",
            json!({"sessionId": "planted", "input": input("hi")}),
        ),
    ] {
        let r = g.request(method, params);
        assert_eq!(r["error"]["code"], -32602, "{method}: {r}");
        let m = r["error"]["message"].as_str().expect("message");
        assert!(
            m.contains("invalid session id") && m.contains("UUID"),
            "{m}"
        );
    }
    assert!(planted.exists(), "the planted file was not touched");

    // The same through ACP.
    drop(g);
    let ws = tempfile::tempdir().expect("ws");
    let tapes = tempfile::tempdir().expect("tapes");
    let model = cassette(tapes.path(), &[replay_done()]);
    let (mut acp, _) = Acp::started(home.path(), &model, ws.path());
    for (method, params) in acp_session_calls("planted", ws.path()) {
        let r = acp.request(method, params);
        assert_eq!(r["error"]["code"], -32602, "{method}: {r}");
    }
    let listed = acp.call("session/list", json!({}));
    assert!(!listed.to_string().contains("planted"), "{listed}");
    assert!(planted.exists(), "the planted file was not touched");
}

#[test]
fn dot_dot_session_ids_are_invalid_params_in_every_front() {
    let mock = Mock::start(vec![MockReply::Sse(anthropic_text(
        "kept",
        MockUsage::new(5, 1),
    ))]);
    let home = tempfile::tempdir().expect("home");
    let (mut g, ws, _wid, sid) = with_a_session(home.path(), &mock);
    let dotted = [
        format!("../sessions/{sid}"),
        format!("{sid}/../{sid}"),
        "../../../../etc/passwd".to_string(),
        sid.to_uppercase(),
    ];
    for id in &dotted {
        for method in [
            "session/fork",
            "session/delete",
            "session/load",
            "session/messages",
        ] {
            let r = g.request(method, json!({"sessionId": id}));
            assert_eq!(r["error"]["code"], -32602, "{method} {id}: {r}");
        }
    }
    drop(g);
    let tapes = tempfile::tempdir().expect("tapes");
    let model = cassette(tapes.path(), &[replay_done()]);
    let (mut acp, _) = Acp::started(home.path(), &model, ws.path());
    for id in &dotted {
        for (method, params) in acp_session_calls(id, ws.path()) {
            let r = acp.request(method, params);
            assert_eq!(r["error"]["code"], -32602, "{method} {id}: {r}");
        }
    }
    drop(acp);
    // exec --session and --fork say the id is not one, not that it was not found.
    for flag in ["--session", "--fork"] {
        let out = exec(home.path(), &["exec", flag, &dotted[0], "go"]);
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("invalid session id") && err.contains("UUID"),
            "{flag}: {err}"
        );
    }
    // The session is still there.
    assert!(
        sessions_dir(home.path())
            .join(format!("{sid}.jsonl"))
            .exists()
    );
}

#[test]
fn a_transcript_without_its_header_is_paged_read_only() {
    let mock = Mock::start(vec![MockReply::Sse(anthropic_text(
        "the answer is 42",
        MockUsage::new(5, 1),
    ))]);
    let home = tempfile::tempdir().expect("home");
    let (g, ws, _wid, sid) = with_a_session(home.path(), &mock);
    drop(g);
    let path = sessions_dir(home.path()).join(format!("{sid}.jsonl"));
    let text = std::fs::read_to_string(&path).expect("transcript");
    let headerless: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, &headerless).expect("drop the header");

    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Ndjson, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    let page = g.call("session/messages", json!({"sessionId": sid}));
    assert_eq!(
        page["total"], 3,
        "the start note, the question, the answer: {page}"
    );
    let all = page["messages"].to_string();
    assert!(
        all.contains("remember 42") && all.contains("the answer is 42"),
        "{page}"
    );
    // Paging works too.
    let first = g.call("session/messages", json!({"sessionId": sid, "limit": 2}));
    assert_eq!(first["messages"].as_array().map(Vec::len), Some(2));
    assert_eq!(first["nextCursor"], 2, "{first}");
    // Loading it to continue is refused, with what to do instead; nothing was written.
    for (method, params) in [
        ("session/load", json!({"sessionId": sid})),
        (
            "turn/run",
            json!({"sessionId": sid, "input": input("more")}),
        ),
    ] {
        let r = g.request(method, params);
        let m = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            m.contains("header is damaged") && m.contains("session/messages"),
            "{method}: {r}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&path).expect("transcript"),
        headerless
    );
    // It is listed, marked damaged.
    let listed = g.call("session/list", json!({"workspaceId": wid}));
    let s = listed["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|s| s["sessionId"] == sid.as_str())
        .expect("listed")
        .clone();
    assert_eq!(s["damaged"], true, "{s}");
}
