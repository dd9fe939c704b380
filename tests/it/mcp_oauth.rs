//! Signing in to an MCP server end to end: `garuda exec`, `garuda mcp login`/`logout` and
//! `garuda doctor` against a local MCP server with its own OAuth authorization server
//! (tests/mcp/oauth_server.py, on 127.0.0.1), the browser step done by the test: it reads the
//! URL Garuda prints and follows its redirects to Garuda's loopback listener. No token may
//! appear in a log, a transcript, the config or a workspace file.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::mock_model::*;
use crate::turns::Mock;

/// The test's OAuth-protected MCP server; killed on drop.
struct OAuthServer {
    child: Child,
    base: String,
    rt: tokio::runtime::Runtime,
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl OAuthServer {
    fn start() -> Option<OAuthServer> {
        let python = which_python()?;
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/oauth_server.py");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let mut child = Command::new(python)
            .arg(script)
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the OAuth test server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("READY");
        assert_eq!(line.trim(), "READY", "the OAuth test server did not start");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        Some(OAuthServer {
            child,
            base: format!("http://127.0.0.1:{port}"),
            rt,
        })
    }

    fn url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    fn log(&self) -> Value {
        self.rt.block_on(async {
            reqwest::get(format!("{}/control/log", self.base))
                .await
                .expect("log")
                .json()
                .await
                .expect("log json")
        })
    }

    /// Every access token issued so far stops working (server-side expiry).
    fn expire(&self) {
        self.rt.block_on(async {
            reqwest::Client::new()
                .post(format!("{}/control/expire", self.base))
                .send()
                .await
                .expect("expire");
        });
    }
}

fn which_python() -> Option<String> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: python3 not found (the OAuth test server needs it)");
    }
    ok.then(|| "python3".to_string())
}

/// The browser: opens `url` and follows the redirects, to Garuda's loopback listener.
fn browse(url: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let page = reqwest::get(url).await.expect("the sign-in page");
        assert!(page.status().is_success(), "{}", page.status());
        let text = page.text().await.expect("page");
        assert!(text.contains("Signed in"), "{text}");
    });
}

/// Runs `garuda ARGS`; each sign-in URL it prints on stderr is opened by [`browse`]. Returns
/// the exit code, stdout and stderr.
fn run_signing_in(home: &Path, env: &[(String, String)], args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_garuda"));
    crate::client::isolated_env(&mut c, home);
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c
        .args(args)
        .current_dir(home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn garuda");
    let stdout = child.stdout.take().expect("stdout");
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let mut err = String::new();
    for line in BufReader::new(child.stderr.take().expect("stderr")).lines() {
        let line = line.expect("stderr line");
        if let Some(url) = line.trim().strip_prefix("http")
            && line.contains("/authorize?")
        {
            browse(&format!("http{url}"));
        }
        err.push_str(&line);
        err.push('\n');
    }
    let status = child.wait().expect("wait");
    (
        status.code().unwrap_or(-1),
        out.join().expect("stdout"),
        err,
    )
}

/// Every file under `dir` (but `skip`), as text.
fn files_under(dir: &Path, skip: &Path, out: &mut Vec<(PathBuf, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.starts_with(skip) {
            continue;
        }
        if p.is_dir() {
            files_under(&p, skip, out);
        } else if let Ok(bytes) = std::fs::read(&p) {
            out.push((p, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
}

/// Fails when a token issued by `server` is in a file under `dirs` (the token store aside)
/// or in `texts`.
fn assert_no_token(server: &OAuthServer, store: &Path, dirs: &[&Path], texts: &[&str]) {
    let log = server.log();
    let issued: Vec<&str> = log["issued"]
        .as_array()
        .expect("issued")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(!issued.is_empty());
    let mut files = Vec::new();
    for d in dirs {
        files_under(d, store, &mut files);
    }
    assert!(!files.is_empty());
    for token in &issued {
        for (path, text) in &files {
            assert!(!text.contains(token), "a token is in {}", path.display());
        }
        for t in texts {
            assert!(!t.contains(token), "a token is in the output:\n{t}");
        }
    }
}

fn echo_turn() -> Mock {
    Mock::start(vec![
        MockReply::Sse(
            AnthropicSse::new(MockUsage::new(30, 4))
                .tool_use("t1", "mcp__remote__echo", &["{\"message\": \"hello\"}"])
                .finish("tool_use"),
        ),
        MockReply::Sse(anthropic_text("Done.", MockUsage::new(40, 2))),
    ])
}

/// The tool result the model got in its second request.
fn echoed(mock: &Mock) -> String {
    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    bodies[1]["messages"].to_string()
}

#[test]
fn sign_in_refresh_and_sign_out_keep_tokens_out_of_logs_transcripts_and_workspaces() {
    let Some(server) = OAuthServer::start() else {
        return;
    };
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("a.txt"), "workspace file\n").expect("ws file");
    crate::turns::write_config(
        home.path(),
        &format!("[mcp_servers.remote]\nurl = {:?}\n", server.url()),
    );
    let store = home.path().join("state/garuda/mcp-auth");
    let log_file = home.path().join("garuda.log");
    let log = log_file.to_str().expect("utf-8");
    let dir = ws.path().to_str().expect("utf-8");

    // 1. exec meets the 401, prints the sign-in URL and waits; the browser step signs in.
    let mock = echo_turn();
    let (code, out, err) = run_signing_in(
        home.path(),
        &mock.env(),
        &[
            "--log-file",
            log,
            "--log-level",
            "debug",
            "exec",
            "--policy",
            "full-auto",
            dir,
            "say hello",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Done.\n");
    assert!(err.contains("needs you to sign in"), "{err}");
    assert!(echoed(&mock).contains("echo: hello"));
    let after_sign_in = server.log();
    assert_eq!(after_sign_in["authorizations"], 1, "{after_sign_in}");
    assert_eq!(after_sign_in["code_grants"], 1);
    assert_eq!(after_sign_in["errors"], serde_json::json!([]));
    let kept: Vec<_> = std::fs::read_dir(&store)
        .expect("store")
        .flatten()
        .collect();
    assert_eq!(kept.len(), 1);
    use std::os::unix::fs::PermissionsExt;
    let mode = kept[0].metadata().expect("meta").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // 2. The server lets the token expire: the next run refreshes it, with no browser.
    server.expire();
    let mock = echo_turn();
    let (code, out, err) = run_signing_in(
        home.path(),
        &mock.env(),
        &[
            "--log-file",
            log,
            "--log-level",
            "debug",
            "exec",
            "--policy",
            "full-auto",
            dir,
            "again",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Done.\n");
    assert!(!err.contains("needs you to sign in"), "{err}");
    assert!(echoed(&mock).contains("echo: hello"));
    let after_refresh = server.log();
    assert_eq!(after_refresh["authorizations"], 1, "{after_refresh}");
    assert_eq!(after_refresh["refreshes"], 1, "{after_refresh}");

    let (code, doctor, _) = run_signing_in(home.path(), &[], &["doctor"]);
    assert_eq!(code, 0, "{doctor}");
    assert!(doctor.contains("mcp server `remote`"), "{doctor}");
    assert!(doctor.contains("signed in (token expires in"), "{doctor}");
    assert!(doctor.contains("refreshable"), "{doctor}");

    // 3. Logout forgets it; login signs in again through the browser.
    let (code, _, err) = run_signing_in(home.path(), &[], &["mcp", "logout", "remote"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("signed out"), "{err}");
    assert_eq!(std::fs::read_dir(&store).expect("store").count(), 0);
    let (_, doctor, _) = run_signing_in(home.path(), &[], &["doctor"]);
    assert!(doctor.contains("not signed in"), "{doctor}");
    let (code, _, login) = run_signing_in(home.path(), &[], &["mcp", "login", "remote"]);
    assert_eq!(code, 0, "{login}");
    assert!(
        login.contains("signed in to MCP server `remote`"),
        "{login}"
    );
    assert_eq!(server.log()["authorizations"], 2);
    let (_, doctor, _) = run_signing_in(home.path(), &[], &["doctor"]);
    assert!(doctor.contains("signed in (token expires in"), "{doctor}");

    // Not in the log file, the transcripts, the config, the workspace, or any output.
    let transcripts = home.path().join("state/garuda/sessions");
    assert!(transcripts.is_dir());
    let log_text = std::fs::read_to_string(&log_file).expect("log");
    assert!(log_text.contains("signed in"), "the log has the sign-in");
    assert_no_token(
        &server,
        &store,
        &[home.path(), ws.path()],
        &[&out, &err, &doctor, &login],
    );
}

#[test]
fn a_sign_in_with_no_one_to_answer_fails_the_server_with_how_to_sign_in() {
    let Some(server) = OAuthServer::start() else {
        return;
    };
    let mock = Mock::start(vec![MockReply::Sse(anthropic_text(
        "Fine.",
        MockUsage::new(10, 2),
    ))]);
    let home = tempfile::tempdir().expect("home");
    crate::turns::write_config(
        home.path(),
        &format!("[mcp_servers.remote]\nurl = {:?}\n", server.url()),
    );
    let ws = tempfile::tempdir().expect("ws");
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g =
        crate::client::Garuda::spawn_at(crate::client::Framing::Lsp, home.path(), &[], &env);
    // No `window.showDocument` capability: no one can open the page.
    g.call("initialize", serde_json::json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    let r = g.call(
        "session/new",
        serde_json::json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    let status = crate::mcp::servers_started(&mut g, &sid);
    let server_status = &status["servers"][0];
    assert_eq!(server_status["state"], "failed", "{status}");
    let reason = server_status["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("needs you to sign in")
            && reason.contains("no one can answer")
            && reason.contains("garuda mcp login remote"),
        "{status}"
    );
    // Nothing was registered or authorized for no one.
    let log = server.log();
    assert_eq!(log["registrations"], 0, "{log}");
    assert_eq!(log["authorizations"], 0, "{log}");
}

#[test]
fn an_acp_client_with_url_elicitation_gets_the_sign_in_page() {
    use std::io::Write;
    let Some(server) = OAuthServer::start() else {
        return;
    };
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let cassette = home.path().join("cassette.jsonl");
    let lines = [
        serde_json::json!({"response": {"content": [{"type": "tool_use", "id": "toolu_o",
            "name": "mcp__remote__echo", "input": {"message": "from acp"}}], "stopReason": "tool_use"}}),
        serde_json::json!({"response": {"content": [{"type": "text", "text": "Echoed."}],
            "stopReason": "end_turn"}}),
    ];
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&cassette, text.join("\n")).expect("cassette");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_garuda"));
    cmd.arg("acp");
    crate::client::isolated_env(&mut cmd, home.path());
    cmd.env("GARUDA_MODEL", format!("replay:{}", cassette.display()));
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn garuda acp");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(line) = line else { return };
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && tx.send(v).is_err()
            {
                return;
            }
        }
    });
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").expect("write");
        stdin.flush().expect("flush");
    };
    let mut asked = Vec::new();
    let mut call = |send: &mut dyn FnMut(Value), id: i64, method: &str, params: Value| -> Value {
        send(serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let m = rx.recv_timeout(crate::client::WAIT).expect("no answer");
            if m["method"] == "session/request_permission" {
                let answer = serde_json::json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}});
                send(serde_json::json!({"jsonrpc": "2.0", "id": m["id"], "result": answer}));
            }
            if m["method"] == "elicitation/create" {
                // The person opens the page and signs in, then the client answers.
                browse(m["params"]["url"].as_str().expect("url"));
                asked.push(m["params"].clone());
                send(serde_json::json!({"jsonrpc": "2.0", "id": m["id"],
                    "result": {"action": "accept"}}));
            }
            if m.get("method").is_none() && m["id"] == serde_json::json!(id) {
                return m;
            }
        }
    };
    call(
        &mut send,
        1,
        "initialize",
        serde_json::json!({"protocolVersion": 1, "clientCapabilities": {"elicitation": {"url": {}}}}),
    );
    let servers =
        serde_json::json!([{"type": "http", "name": "remote", "url": server.url(), "headers": []}]);
    let new = call(
        &mut send,
        2,
        "session/new",
        serde_json::json!({"cwd": ws.path(), "mcpServers": servers}),
    );
    let sid = new["result"]["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();
    let r = call(
        &mut send,
        3,
        "session/prompt",
        serde_json::json!({"sessionId": sid, "prompt": [{"type": "text", "text": "echo"}]}),
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    // End of input ends `garuda acp`.
    drop(stdin);
    let _ = child.wait();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["mode"], "url");
    assert_eq!(asked[0]["sessionId"], sid.as_str());
    assert!(
        asked[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("MCP server `remote`")
    );
    let log = server.log();
    assert_eq!(log["authorizations"], 1, "{log}");
    assert!(log["mcp_with_token"].as_u64().unwrap_or(0) > 0, "{log}");
}
