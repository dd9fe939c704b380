//! MCP servers as tool sources, against real servers from the package registries: the
//! reference "everything" server from npm over stdio, and a small server written with the
//! Python `mcp` package over Streamable HTTP (tests/mcp/http_server.py). scripts/provision.sh
//! installs both (scripts/mcp-test-servers.sh); without them these tests are skipped with a
//! note, unless GARUDA_MCP_TESTS=require (scripts/test-all.sh sets it), when they fail.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::mock_model::*;
use crate::turns::{Mock, setup};

/// Where scripts/mcp-test-servers.sh put the servers.
pub(crate) fn servers_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GARUDA_MCP_TEST_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache"));
    cache.join("garuda-test").join("mcp")
}

/// False (and a note) when a server is not installed; a failure when they are required.
pub(crate) fn present(what: &str, path: &std::path::Path) -> bool {
    if path.exists() {
        return true;
    }
    let msg = format!(
        "{what} not installed at {}: run scripts/provision.sh",
        path.display()
    );
    if std::env::var("GARUDA_MCP_TESTS").as_deref() == Ok("require") {
        panic!("{msg}");
    }
    eprintln!("skipped: {msg}");
    false
}

/// `[mcp_servers.everything]` for the npm reference server, or None when it is missing.
pub(crate) fn everything_config(name: &str, extra: &str) -> Option<String> {
    let script = servers_dir()
        .join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !present("@modelcontextprotocol/server-everything", &script) {
        return None;
    }
    let node = which("node")?;
    Some(format!(
        "[mcp_servers.{name}]\ncommand = {node:?}\nargs = [{:?}, \"stdio\"]\n{extra}\n",
        script.display().to_string()
    ))
}

fn which(program: &str) -> Option<String> {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!path.is_empty()).then_some(path)
}

/// The Python server on a free port with a bearer token; killed on drop.
struct PyServer {
    child: Child,
    url: String,
}

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn py_server(token: &str) -> Option<PyServer> {
    let python = servers_dir().join("venv/bin/python");
    if !present("the Python mcp package", &python) {
        return None;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/http_server.py");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let mut child = Command::new(python)
        .arg(script)
        .arg(port.to_string())
        .arg(token)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the Python MCP server");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).expect("READY");
    assert_eq!(line.trim(), "READY", "the Python MCP server did not start");
    Some(PyServer {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    })
}

/// `mcp/servers` once no server is still starting (servers start in the background after
/// `session/new` has answered), polled without a wall-clock assertion.
pub(crate) fn servers_started(g: &mut crate::client::Garuda, sid: &str) -> Value {
    let mut status = Value::Null;
    for _ in 0..600 {
        status = g.call("mcp/servers", json!({"sessionId": sid}));
        let starting = status["servers"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["state"] == "starting"));
        if !starting {
            return status;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    status
}

fn text(t: &str) -> Value {
    json!([{"type": "text", "text": t}])
}

fn finished(g: &crate::client::Garuda) -> Vec<Value> {
    g.turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "toolCallFinished")
        .collect()
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn system_text(body: &Value) -> String {
    let mut v = body["system"].clone();
    strip(&mut v);
    v.to_string()
}

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

/// The `tool_result` blocks of the last message of a request.
fn last_results(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .map(|c| {
            c.iter()
                .filter(|b| b["type"] == "tool_result")
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn stdio_server_tools_reach_the_model_under_approvals() {
    let Some(cfg) = everything_config("everything", "tools_read_only = [\"get-sum\"]") else {
        return;
    };
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t1",
            "mcp__everything__echo",
            &["{\"message\": \"hello mcp\"}"],
        )),
        MockReply::Sse(
            AnthropicSse::new(MockUsage::new(30, 4))
                .tool_use("t2", "mcp__everything__get-sum", &["{\"a\": 2, \"b\": 3}"])
                .tool_use("t3", "mcp__everything__get-env", &["{}"])
                .finish("tool_use"),
        ),
        MockReply::Sse(anthropic_text("Done.", MockUsage::new(40, 2))),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, &cfg);
    let r = g.call("session/new", json!({"workspaceId": wid, "policy": "ask"}));
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    assert_eq!(r["warnings"], json!([]), "{r}");

    let status = servers_started(&mut g, &sid);
    let s = &status["servers"][0];
    assert_eq!(s["name"], "everything");
    assert_eq!(s["transport"], "stdio");
    assert_eq!(s["state"], "ready", "{status}");
    assert!(s["toolCount"].as_u64().expect("count") >= 5, "{status}");

    let mut asked = Vec::new();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": text("use the tools")}),
        |req| {
            asked.push(
                req["params"]["toolName"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string(),
            );
            json!({"optionId": "allow_once"})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    // MCP tools count as commands; get-sum is marked read-only in the config.
    assert_eq!(asked, ["mcp__everything__echo", "mcp__everything__get-env"]);

    let done = finished(&g);
    assert_eq!(done.len(), 3);
    let out0 = done[0]["output"].as_str().expect("output");
    assert!(out0.contains("Echo: hello mcp"), "{out0}");
    assert!(
        out0.starts_with("<mcp_result server=\"everything\" tool=\"echo\">"),
        "{out0}"
    );
    assert!(done[1]["output"].as_str().expect("out").contains('5'));
    // A stdio server gets a base environment, never Garuda's provider keys.
    let env_out = done[2]["output"].as_str().expect("out");
    assert!(env_out.contains("PATH"), "{env_out}");
    assert!(!env_out.contains("sk-test-not-a-real-key"), "{env_out}");

    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 3);
    let names = tool_names(&bodies[0]);
    let mcp: Vec<&String> = names.iter().filter(|n| n.starts_with("mcp__")).collect();
    // Built-ins first, then MCP tools sorted by name: a fixed order.
    assert!(!mcp.is_empty());
    let mut sorted = mcp.clone();
    sorted.sort();
    assert_eq!(mcp, sorted);
    assert!(
        names.iter().position(|n| n == "read_file")
            < names.iter().position(|n| n.starts_with("mcp__"))
    );
    assert!(system_text(&bodies[0]).contains("Tools named mcp__*"));
    for later in &bodies[1..] {
        assert_eq!(bodies[0]["tools"].to_string(), later["tools"].to_string());
        assert_eq!(system_text(&bodies[0]), system_text(later));
    }
    let results = last_results(&bodies[1]);
    assert!(results[0].to_string().contains("hello mcp"));

    // context/inspect counts the MCP definitions as their own part.
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    assert!(
        inspect["mcpTools"].as_u64().expect("mcpTools") > 0,
        "{inspect}"
    );
    // The server's stderr goes to the log, never to Garuda's stdout (the frames parsed).
}

#[test]
fn http_server_with_a_bearer_token_images_and_a_timeout() {
    let Some(py) = py_server("s3cret-test-token") else {
        return;
    };
    let cfg = format!(
        "[mcp_servers.py]\nurl = {:?}\nbearer_token_env = \"GARUDA_TEST_MCP_TOKEN\"\ncall_timeout_ms = 1500\n",
        py.url
    );
    let mock = Mock::start(vec![
        MockReply::Sse(
            AnthropicSse::new(MockUsage::new(30, 4))
                .tool_use("t1", "mcp__py__add", &["{\"a\": 2, \"b\": 40}"])
                .tool_use("t2", "mcp__py__image", &["{}"])
                .tool_use("t3", "mcp__py__slow", &["{\"seconds\": 30}"])
                .finish("tool_use"),
        ),
        MockReply::Sse(
            AnthropicSse::new(MockUsage::new(30, 4))
                .tool_use("t4", "mcp__py__echo", &["{\"message\": \"still here\"}"])
                .tool_use("t5", "mcp__py__big", &["{\"chars\": 80000}"])
                .finish("tool_use"),
        ),
        MockReply::Sse(anthropic_text("Done.", MockUsage::new(40, 2))),
    ]);
    let home = tempfile::tempdir().expect("home");
    crate::turns::write_config(home.path(), &cfg);
    let ws = tempfile::tempdir().expect("ws");
    let mut env = mock.env();
    env.push(("GARUDA_TEST_MCP_TOKEN".into(), "s3cret-test-token".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g =
        crate::client::Garuda::spawn_at(crate::client::Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    let status = servers_started(&mut g, &sid);
    assert_eq!(status["servers"][0]["state"], "ready", "{status}");
    assert_eq!(status["servers"][0]["transport"], "http");

    let r = g.call("turn/run", json!({"sessionId": sid, "input": text("go")}));
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let done = finished(&g);
    assert!(
        done[0]["output"].as_str().expect("out").contains("42"),
        "{done:?}"
    );
    assert_eq!(done[2]["isError"], true);
    let slow = done[2]["output"].as_str().expect("out");
    assert!(slow.contains("did not answer within 1500 ms"), "{slow}");
    // The server is still usable after a timed-out call.
    assert!(
        done[3]["output"]
            .as_str()
            .expect("out")
            .contains("still here"),
        "{done:?}"
    );

    let bodies = mock.rec.bodies();
    let results = last_results(&bodies[1]);
    let image = &results[1]["content"];
    assert!(
        image
            .as_array()
            .expect("content")
            .iter()
            .any(|b| b["type"] == "image" && b["source"]["media_type"] == "image/png"),
        "{image}"
    );
    // A large result goes to a side file like any tool result; the view keeps a preview.
    let big = last_results(&bodies[2])[1].to_string();
    assert!(
        big.contains("Tool result too large: 80"),
        "{}",
        &big[big.len() - 400..]
    );
    assert!(big.len() < 20_000);
    // The token never reaches the log.
    assert!(!g.stderr().contains("s3cret-test-token"));
}

#[test]
fn failing_servers_are_reported_and_the_session_goes_on() {
    let cfg = "[mcp_servers.missing]\ncommand = \"/nonexistent/mcp-server\"\n\
               [mcp_servers.dies]\ncommand = \"sh\"\nargs = [\"-c\", \"echo boom-on-stderr >&2; exit 3\"]\n\
               [mcp_servers.silent]\ncommand = \"sleep\"\nargs = [\"30\"]\nstartup_timeout_ms = 500\n\
               [mcp_servers.both]\ncommand = \"x\"\nurl = \"http://127.0.0.1:1/mcp\"\n\
               [mcp_servers.off]\ncommand = \"/nonexistent\"\nenabled = false\n";
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_text("ok", MockUsage::new(5, 1))),
        MockReply::Sse(anthropic_text("ok", MockUsage::new(5, 1))),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, cfg);
    let r = g.call("session/new", json!({"workspaceId": wid}));
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    // The servers start in the background: failures are not warnings of the answer, but
    // one `window/showMessage` each once the starts are over.
    assert!(!r["warnings"].to_string().contains("MCP server"), "{r}");
    let mut shown = String::new();
    for _ in 0..4 {
        let m = g.wait_method("window/showMessage");
        assert_eq!(m["params"]["type"], 2, "{m}");
        shown.push_str(m["params"]["message"].as_str().expect("message"));
    }
    for name in ["missing", "dies", "silent", "both"] {
        assert!(
            shown.contains(&format!("MCP server {name} failed to start")),
            "{shown}"
        );
    }
    let status = servers_started(&mut g, &sid);
    let by_name = |n: &str| -> Value {
        status["servers"]
            .as_array()
            .expect("servers")
            .iter()
            .find(|s| s["name"] == n)
            .cloned()
            .expect("server")
    };
    assert_eq!(by_name("off")["state"], "disabled");
    let dies = by_name("dies");
    assert_eq!(dies["state"], "failed");
    assert!(
        dies["reason"]
            .as_str()
            .expect("reason")
            .contains("boom-on-stderr"),
        "{dies}"
    );
    let silent = by_name("silent");
    assert!(
        silent["reason"]
            .as_str()
            .expect("reason")
            .contains("did not start within 500 ms"),
        "{silent}"
    );
    assert!(
        by_name("missing")["reason"]
            .as_str()
            .expect("reason")
            .contains("cannot start")
    );
    assert_eq!(by_name("both")["transport"], "invalid");

    // The session works; the model hears about the failures once, in a note.
    let r = g.call("turn/run", json!({"sessionId": sid, "input": text("hi")}));
    assert_eq!(r["stopReason"], "end_turn");
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": text("again")}),
    );
    assert_eq!(r["stopReason"], "end_turn");
    let bodies = mock.rec.bodies();
    let first = bodies[0]["messages"].to_string();
    assert!(
        first.contains("MCP server `dies` failed to start"),
        "{first}"
    );
    let second = bodies[1]["messages"].to_string();
    assert_eq!(
        second.matches("failed to start").count(),
        first.matches("failed to start").count()
    );
    // No MCP tools: no mcp line in the prompt, no MCP definitions.
    assert!(!system_text(&bodies[0]).contains("mcp__"));
    assert!(!tool_names(&bodies[0]).iter().any(|n| n.starts_with("mcp")));
    // Unknown sessions get a clear error.
    let e = g.request("mcp/servers", json!({"sessionId": "nope"}));
    assert!(
        e["error"]["message"]
            .as_str()
            .expect("msg")
            .contains("not loaded"),
        "{e}"
    );
}

#[test]
fn a_workspace_config_cannot_add_a_server() {
    let mock = Mock::start(vec![]);
    let (mut g, _h, ws, _wid) = setup(&mock, "");
    let dir = ws.path().join(".garuda");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("config.toml"),
        "[mcp_servers.evil]\ncommand = \"sh\"\nargs = [\"-c\", \"touch pwned\"]\n",
    )
    .expect("write");
    let other = tempfile::tempdir().expect("ws2");
    std::fs::create_dir_all(other.path().join(".garuda")).expect("mkdir");
    std::fs::copy(
        dir.join("config.toml"),
        other.path().join(".garuda/config.toml"),
    )
    .expect("copy");
    let wid = g.open(other.path());
    let r = g.call("session/new", json!({"workspaceId": wid}));
    let sid = r["sessionId"].as_str().expect("sessionId");
    let status = servers_started(&mut g, sid);
    assert_eq!(status["servers"], json!([]));
    assert!(!other.path().join("pwned").exists());
    let list = g.call("workspace/list", json!({}));
    assert!(list.to_string().contains("MCP servers"), "{list}");
}

#[test]
fn definitions_are_deferred_above_the_share() {
    let Some(cfg) = everything_config("everything", "") else {
        return;
    };
    let cfg = format!("{cfg}[mcp]\ndefer_share = 0.001\n");
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t1",
            "mcp_tool_search",
            &["{\"query\": \"select:mcp__everything__echo\"}"],
        )),
        MockReply::Sse(anthropic_tool_use(
            "t2",
            "mcp__everything__echo",
            &["{\"message\": \"deferred works\"}"],
        )),
        MockReply::Sse(anthropic_text("Done.", MockUsage::new(40, 2))),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, &cfg);
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    let r = g.call("turn/run", json!({"sessionId": sid, "input": text("go")}));
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let done = finished(&g);
    let found = done[0]["output"].as_str().expect("out");
    assert!(
        found.contains("\"name\":\"mcp__everything__echo\""),
        "{found}"
    );
    assert!(found.contains("input_schema"), "{found}");
    assert!(
        done[1]["output"]
            .as_str()
            .expect("out")
            .contains("deferred works")
    );
    let bodies = mock.rec.bodies();
    let names = tool_names(&bodies[0]);
    assert!(names.contains(&"mcp_tool_search".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("mcp__")), "{names:?}");
    assert!(system_text(&bodies[0]).contains("mcp_tool_search"));
    for later in &bodies[1..] {
        assert_eq!(bodies[0]["tools"].to_string(), later["tools"].to_string());
        assert_eq!(system_text(&bodies[0]), system_text(later));
    }
}

#[test]
fn a_server_that_dies_is_reported_once_and_its_calls_fail_clearly() {
    let script = servers_dir()
        .join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !present("@modelcontextprotocol/server-everything", &script) {
        return;
    }
    let Some(node) = which("node") else { return };
    let pid_dir = tempfile::tempdir().expect("pid dir");
    let pid_file = pid_dir.path().join("pid");
    // A shell in front of the server records the server's pid, so the test can kill it (the
    // server reads the shell's stdin through fd 3: a background job's stdin is /dev/null).
    let shell = format!(
        "exec 3<&0; {node} {} stdio <&3 & echo $! > {}; wait",
        script.display(),
        pid_file.display()
    );
    let cfg = format!("[mcp_servers.everything]\ncommand = \"sh\"\nargs = [\"-c\", {shell:?}]\n");
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_text("ok", MockUsage::new(40, 2))),
        MockReply::Sse(anthropic_tool_use(
            "t1",
            "mcp__everything__echo",
            &["{\"message\": \"anyone?\"}"],
        )),
        MockReply::Sse(anthropic_text("It is gone.", MockUsage::new(40, 2))),
        MockReply::Sse(anthropic_text("ok", MockUsage::new(40, 2))),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, &cfg);
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    let status = servers_started(&mut g, &sid);
    assert_eq!(status["servers"][0]["state"], "ready", "{status}");
    // A first turn fixes the session's tool list with the server's tools in it.
    let r = g.call("turn/run", json!({"sessionId": sid, "input": text("hi")}));
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let pid = std::fs::read_to_string(&pid_file).expect("pid");
    Command::new("kill").arg(pid.trim()).status().expect("kill");
    // Wait (without a wall-clock assertion) until Garuda has seen the exit.
    let mut state = Value::Null;
    for _ in 0..200 {
        let s = g.call("mcp/servers", json!({"sessionId": sid}));
        state = s["servers"][0].clone();
        if state["state"] == "exited" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(state["state"], "exited", "{state}");
    assert!(
        state["reason"].as_str().expect("reason").contains("exited"),
        "{state}"
    );

    let r = g.call("turn/run", json!({"sessionId": sid, "input": text("echo")}));
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let done = finished(&g);
    assert_eq!(done[0]["isError"], true);
    assert!(
        done[0]["output"]
            .as_str()
            .expect("out")
            .contains("is not available"),
        "{done:?}"
    );
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": text("again")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    let first = bodies[1]["messages"].to_string();
    assert!(first.contains("MCP server `everything` stopped"), "{first}");
    // Reported once: the last request carries the same single note.
    assert_eq!(
        bodies[3]["messages"]
            .to_string()
            .matches("stopped (")
            .count(),
        1
    );
}

#[test]
fn a_changed_tool_list_is_a_note_and_enters_at_the_next_compaction() {
    let Some(py) = py_server("tok-list-changed") else {
        return;
    };
    let cfg = format!(
        "[mcp_servers.py]\nurl = {:?}\nheaders = {{ Authorization = \"Bearer tok-list-changed\" }}\n\
         [context]\nkeep_steps = 1\n",
        py.url
    );
    let big = "lots of words to compact away. ".repeat(800);
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use("t1", "mcp__py__grow", &["{}"])),
        MockReply::Sse(anthropic_text("grown", MockUsage::new(40, 2))),
        // The real count the compaction decides on: the big first message.
        MockReply::Sse(anthropic_text("noted", MockUsage::new(8_000, 2))),
        MockReply::Sse(anthropic_text(
            "<summary>The user grew a tool.</summary>",
            MockUsage::new(40, 20),
        )),
        MockReply::Sse(anthropic_text("after", MockUsage::new(40, 2))),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, &cfg);
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    let r = g.call("turn/run", json!({"sessionId": sid, "input": text(&big)}));
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let r = g.call("turn/run", json!({"sessionId": sid, "input": text("next")}));
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    let r = g.call("turn/run", json!({"sessionId": sid, "input": text("last")}));
    assert_eq!(r["stopReason"], "end_turn", "{r}");

    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 5);
    // Before the compaction: the same tools; the model hears of the change in a note.
    let before = tool_names(&bodies[2]);
    assert_eq!(tool_names(&bodies[0]), before);
    assert!(!before.contains(&"mcp__py__late_tool".to_string()));
    assert!(
        bodies[2]["messages"]
            .to_string()
            .contains("added: mcp__py__late_tool"),
        "{}",
        bodies[2]["messages"]
    );
    // After it: the new tool is in the request.
    assert!(tool_names(&bodies[4]).contains(&"mcp__py__late_tool".to_string()));
    let status = g.call("mcp/servers", json!({"sessionId": sid}));
    assert_eq!(status["servers"][0]["toolCount"], 8, "{status}");
}

#[test]
fn a_wrong_or_missing_token_is_a_clear_failure() {
    let Some(py) = py_server("the-right-token") else {
        return;
    };
    let cfg = format!(
        "[mcp_servers.wrong]\nurl = {url:?}\nbearer_token_env = \"GARUDA_TEST_WRONG_TOKEN\"\n\
         [mcp_servers.unset]\nurl = {url:?}\nbearer_token_env = \"GARUDA_TEST_UNSET_TOKEN\"\n",
        url = py.url
    );
    let mock = Mock::start(vec![]);
    let home = tempfile::tempdir().expect("home");
    crate::turns::write_config(home.path(), &cfg);
    let ws = tempfile::tempdir().expect("ws");
    let mut env = mock.env();
    env.push(("GARUDA_TEST_WRONG_TOKEN".into(), "not-the-token".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g =
        crate::client::Garuda::spawn_at(crate::client::Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    let r = g.call("session/new", json!({"workspaceId": wid}));
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    let status = servers_started(&mut g, &sid);
    let servers = status["servers"].as_array().expect("servers");
    assert_eq!(servers[0]["name"], "unset");
    assert!(
        servers[0]["reason"]
            .as_str()
            .expect("reason")
            .contains("GARUDA_TEST_UNSET_TOKEN` is not set"),
        "{status}"
    );
    assert_eq!(servers[1]["state"], "failed");
    assert!(
        servers[1]["reason"]
            .as_str()
            .expect("reason")
            .contains("401"),
        "{status}"
    );
    assert!(!g.stderr().contains("not-the-token"));
}

/// `garuda acp` with a replay cassette; newline-delimited JSON-RPC, answering permission
/// requests with `allow_once`. Returns every message received until the response to `id`.
struct AcpDriver {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<Value>,
    seen: Vec<Value>,
    /// The answer to `elicitation/create` requests (none: they are not answered).
    elicit_answer: Option<Value>,
}

impl AcpDriver {
    fn spawn(home: &std::path::Path, cassette: &std::path::Path) -> AcpDriver {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_garuda"));
        cmd.arg("acp");
        crate::client::isolated_env(&mut cmd, home);
        cmd.env("GARUDA_MODEL", format!("replay:{}", cassette.display()));
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn garuda acp");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
                let Ok(line) = line else { return };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        AcpDriver {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            seen: Vec::new(),
            elicit_answer: None,
        }
    }

    fn send(&mut self, v: Value) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{v}").expect("write");
        stdin.flush().expect("flush");
    }

    fn call(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let m = self
                .lines
                .recv_timeout(crate::client::WAIT)
                .expect("no answer from garuda acp");
            if m["method"] == "session/request_permission" {
                let answer = json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}});
                self.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": answer}));
            }
            if m["method"] == "elicitation/create"
                && let Some(answer) = self.elicit_answer.clone()
            {
                self.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": answer}));
            }
            if m.get("method").is_none() && m["id"] == json!(id) {
                return m;
            }
            self.seen.push(m);
        }
    }
}

impl Drop for AcpDriver {
    fn drop(&mut self) {
        self.stdin.take();
        let _ = self.child.wait();
    }
}

#[test]
fn acp_mcp_servers_are_started_with_the_session() {
    let script = servers_dir()
        .join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !present("@modelcontextprotocol/server-everything", &script) {
        return;
    }
    let Some(node) = which("node") else { return };
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let cassette = home.path().join("cassette.jsonl");
    let lines = [
        json!({"response": {"content": [{"type": "tool_use", "id": "toolu_m", "name": "mcp__everything__echo",
            "input": {"message": "hello acp"}}], "stopReason": "tool_use"}}),
        json!({"response": {"content": [{"type": "text", "text": "Echoed."}], "stopReason": "end_turn"}}),
    ];
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&cassette, text.join("\n")).expect("cassette");
    let mut acp = AcpDriver::spawn(home.path(), &cassette);
    acp.call(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    // An sse server is refused with a clear error; the agent keeps serving.
    let bad = acp.call(
        2,
        "session/new",
        json!({"cwd": ws.path(), "mcpServers": [{"type": "sse", "name": "old", "url": "http://127.0.0.1:1/sse", "headers": []}]}),
    );
    assert!(
        bad["error"]["message"]
            .as_str()
            .expect("message")
            .contains("not supported"),
        "{bad}"
    );
    let new = acp.call(
        3,
        "session/new",
        json!({"cwd": ws.path(), "mcpServers": [{"name": "everything", "command": node,
            "args": [script.display().to_string(), "stdio"], "env": []}]}),
    );
    let sid = new["result"]["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();
    let r = acp.call(
        4,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "echo"}]}),
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let asked = acp
        .seen
        .iter()
        .any(|m| m["method"] == "session/request_permission");
    assert!(asked, "an MCP tool asks like a command");
    let updates: Vec<&Value> = acp
        .seen
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .collect();
    let call = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .expect("a tool_call update");
    assert_eq!(call["kind"], "execute", "{call}");
    let all = serde_json::to_string(&updates).expect("json");
    assert!(all.contains("Echo: hello acp"), "{all}");
}

#[test]
fn acp_elicitation_goes_to_elicitation_create_when_advertised() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let cassette = home.path().join("cassette.jsonl");
    let lines = [
        json!({"response": {"content": [{"type": "tool_use", "id": "toolu_e", "name": "mcp__el__ask",
            "input": {}}], "stopReason": "tool_use"}}),
        json!({"response": {"content": [{"type": "text", "text": "Asked."}], "stopReason": "end_turn"}}),
        json!({"response": {"content": [{"type": "tool_use", "id": "toolu_f", "name": "mcp__el__ask",
            "input": {}}], "stopReason": "tool_use"}}),
        json!({"response": {"content": [{"type": "text", "text": "Asked."}], "stopReason": "end_turn"}}),
    ];
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&cassette, text.join("\n")).expect("cassette");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/elicit_server.py");
    let server = json!([{"name": "el", "command": "python3", "args": [script, "form"], "env": []}]);
    let outputs = |seen: &[Value]| -> String {
        seen.iter()
            .filter(|m| m["method"] == "session/update")
            .map(|m| m["params"]["update"].to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };

    // Advertised: the form goes to the editor and its answer back to the server.
    let mut acp = AcpDriver::spawn(home.path(), &cassette);
    acp.elicit_answer = Some(json!({"action": "accept", "content": {"name": "Ann"}}));
    acp.call(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"elicitation": {"form": {}}}}),
    );
    let new = acp.call(
        2,
        "session/new",
        json!({"cwd": ws.path(), "mcpServers": server}),
    );
    let sid = new["result"]["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();
    let r = acp.call(
        3,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "ask"}]}),
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let asked: Vec<&Value> = acp
        .seen
        .iter()
        .filter(|m| m["method"] == "elicitation/create")
        .collect();
    assert_eq!(asked.len(), 1);
    let p = &asked[0]["params"];
    assert_eq!(p["mode"], "form", "{p}");
    assert_eq!(p["sessionId"], sid.as_str());
    // Scoped to the tool call the server asked during.
    assert_eq!(p["toolCallId"], "toolu_e", "{p}");
    assert!(
        p["message"]
            .as_str()
            .expect("message")
            .contains("Who are you?"),
        "{p}"
    );
    assert_eq!(
        p["requestedSchema"]["properties"]["name"]["type"], "string",
        "{p}"
    );
    let all = outputs(&acp.seen);
    assert!(
        all.contains(r#"action=accept content={\"name\": \"Ann\"}"#),
        "{all}"
    );
    drop(acp);

    // Not advertised: the editor is never asked and the server hears why.
    let mut acp = AcpDriver::spawn(home.path(), &cassette);
    acp.call(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let new = acp.call(
        2,
        "session/new",
        json!({"cwd": ws.path(), "mcpServers": server}),
    );
    let sid = new["result"]["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();
    acp.call(
        3,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "ask"}]}),
    );
    assert!(!acp.seen.iter().any(|m| m["method"] == "elicitation/create"));
    let all = outputs(&acp.seen);
    assert!(all.contains("action=decline"), "{all}");
    assert!(
        all.contains("did not advertise the ACP client capability elicitation.form"),
        "{all}"
    );
}
