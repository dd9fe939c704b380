//! The stdio server: lifecycle, workspaces, prompt assembly and every bad input.

use std::time::Duration;

use serde_json::{Value, json};

use crate::client::{BOTH, Framing, Garuda};

fn error_code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error, got {r}"))
}

fn workspace() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        d.path().join("AGENTS.md"),
        "Run the tests with `make check`.\n",
    )
    .expect("write");
    d
}

#[test]
fn lifecycle_in_both_framings() {
    for framing in BOTH {
        let ws = workspace();
        let mut g = Garuda::spawn(framing);
        let init = g.call(
            "initialize",
            json!({"processId": null, "clientInfo": {"name": "test"}, "capabilities": {}}),
        );
        assert_eq!(init["serverInfo"]["name"], "garuda");
        assert!(init["capabilities"].is_object());
        g.notify("initialized", json!({}));
        let id = g.open(ws.path());
        let again = g.call("workspace/open", json!({"root": ws.path()}));
        assert_eq!(again["workspaceId"], id, "same root, same workspace");
        let a = g.call("prompt/assemble", json!({"workspaceId": id}));
        assert!(a["system"].as_str().expect("system").contains("make check"));
        assert_eq!(a["sha256"].as_str().expect("sha").len(), 64);
        let b = g.call("prompt/assemble", json!({"workspaceId": id}));
        assert_eq!(a["sha256"], b["sha256"], "same inputs, same bytes");
        let list = g.call("workspace/list", json!({}));
        assert_eq!(list["workspaces"].as_array().expect("array").len(), 1);
        assert_eq!(
            g.call("workspace/close", json!({"workspaceId": id}))["closed"],
            true
        );
        assert_eq!(
            g.call("workspace/close", json!({"workspaceId": id}))["closed"],
            false
        );
        assert_eq!(
            error_code(&g.request("prompt/assemble", json!({"workspaceId": id}))),
            -32050
        );
        assert_eq!(g.call("shutdown", Value::Null), Value::Null);
        assert_eq!(
            error_code(&g.request("workspace/list", json!({}))),
            -32600,
            "requests after shutdown"
        );
        g.notify("exit", Value::Null);
        assert_eq!(g.wait_exit(), Some(0), "{framing:?}");
    }
}

#[test]
fn exit_without_shutdown_is_code_1() {
    let mut g = Garuda::started(Framing::Ndjson);
    g.notify("exit", Value::Null);
    assert_eq!(g.wait_exit(), Some(1));
}

#[test]
fn exits_cleanly_when_stdin_closes() {
    for framing in BOTH {
        let mut g = Garuda::started(framing);
        g.close_stdin();
        assert_eq!(g.wait_exit(), Some(0));
    }
}

#[test]
fn request_before_initialize_is_refused() {
    let mut g = Garuda::spawn(Framing::Lsp);
    assert_eq!(error_code(&g.request("workspace/list", json!({}))), -32002);
    // Still serving: initialize now works.
    g.call("initialize", json!({"capabilities": {}}));
    assert_eq!(
        error_code(&g.request("initialize", json!({}))),
        -32600,
        "initialize twice"
    );
}

#[test]
fn initialize_opens_workspace_folders() {
    let ws = workspace();
    let uri = format!(
        "file://{}",
        ws.path().canonicalize().expect("canon").display()
    );
    let mut g = Garuda::spawn(Framing::Lsp);
    let init = g.call(
        "initialize",
        json!({"processId": std::process::id(), "rootUri": uri, "capabilities": {"workspace": {"applyEdit": true}},
               "workspaceFolders": [{"uri": uri, "name": "w"}]}),
    );
    assert_eq!(
        init["garuda"]["workspaces"].as_array().expect("ws").len(),
        1
    );
    let list = g.call("workspace/list", json!({}));
    assert_eq!(list["workspaces"].as_array().expect("array").len(), 1);
    // Folder removed and another added through the LSP notification.
    let other = workspace();
    let other_uri = format!(
        "file://{}",
        other.path().canonicalize().expect("canon").display()
    );
    g.notify(
        "workspace/didChangeWorkspaceFolders",
        json!({"event": {"added": [{"uri": other_uri, "name": "o"}], "removed": [{"uri": uri, "name": "w"}]}}),
    );
    // The change is applied off the read loop (it reads the disk): workspace/list shows it
    // once applied.
    let want = other.path().canonicalize().expect("canon");
    let deadline = std::time::Instant::now() + crate::client::WAIT;
    loop {
        let list = g.call("workspace/list", json!({}));
        let roots: Vec<String> = list["workspaces"]
            .as_array()
            .expect("array")
            .iter()
            .filter_map(|w| w["root"].as_str().map(str::to_string))
            .collect();
        if roots == [want.to_str().expect("utf8")] {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{roots:?}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn bad_workspace_roots_get_clear_errors() {
    let mut g = Garuda::started(Framing::Ndjson);
    let missing = g.request("workspace/open", json!({"root": "/definitely/not/here"}));
    assert!(
        missing["error"]["message"]
            .as_str()
            .expect("msg")
            .contains("/definitely/not/here"),
        "{missing}"
    );
    let file = tempfile::NamedTempFile::new().expect("file");
    let not_dir = g.request("workspace/open", json!({"root": file.path()}));
    assert!(not_dir.get("error").is_some(), "{not_dir}");
    assert_eq!(error_code(&g.request("workspace/open", json!({}))), -32602);
    assert_eq!(
        error_code(&g.request("workspace/open", json!({"root": 5}))),
        -32602
    );
    assert_eq!(
        error_code(&g.request("prompt/assemble", json!({"workspaceId": "ws-nope"}))),
        -32050
    );
    g.call("workspace/list", json!({}));
}

#[test]
fn unknown_methods_and_bad_json_keep_the_server_running() {
    for framing in BOTH {
        let mut g = Garuda::started(framing);
        assert_eq!(error_code(&g.request("no/such", json!({}))), -32601);
        // Malformed JSON: parse error with a null id.
        let body = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":";
        g.send_raw(&crate::client::frame(framing, body));
        let r = g.recv();
        assert_eq!(error_code(&r), -32700);
        // Invalid UTF-8.
        g.send_raw(&crate::client::frame(
            framing,
            b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"\xff\xfe\"}",
        ));
        assert_eq!(error_code(&g.recv()), -32700);
        // Valid JSON that is not a request.
        g.send_raw(&crate::client::frame(framing, b"[1,2,3]"));
        assert!(g.recv().get("error").is_some());
        g.send_raw(&crate::client::frame(
            framing,
            b"{\"jsonrpc\":\"2.0\",\"id\":9}",
        ));
        let r = g.recv();
        assert_eq!(error_code(&r), -32600);
        assert_eq!(r["id"], 9);
        // Wrong jsonrpc version.
        g.send_raw(&crate::client::frame(
            framing,
            b"{\"jsonrpc\":\"1.0\",\"id\":10,\"method\":\"workspace/list\"}",
        ));
        assert_eq!(error_code(&g.recv()), -32600);
        // Cancelling an id that is not running is harmless.
        g.notify("$/cancelRequest", json!({"id": 12345}));
        g.call("workspace/list", json!({}));
    }
}

#[test]
fn bad_headers_and_oversize_frames() {
    let mut g = Garuda::spawn_with(Framing::Lsp, &["--max-frame-bytes", "4096"], &[]);
    g.call("initialize", json!({"capabilities": {}}));
    // Oversize: refused with its id, skipped without being buffered, next message served.
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"workspace/list\",\"params\":{{\"pad\":\"{}\"}}}}",
        "x".repeat(100_000)
    );
    g.send_raw(&crate::client::frame(Framing::Lsp, big.as_bytes()));
    let r = g.recv();
    assert!(r.get("error").is_some(), "{r}");
    assert_eq!(r["id"], 77);
    g.call("workspace/list", json!({}));
    // Negative, non-numeric and absurd Content-Length, and a missing header.
    for bad in [
        "Content-Length: -5\r\n\r\n",
        "Content-Length: abc\r\n\r\n",
        "Content-Length: 99999999999999999999\r\n\r\n",
    ] {
        g.send_raw(bad.as_bytes());
        g.call("workspace/list", json!({}));
    }
    g.send_raw(b"Content-Type: application/json\r\n\r\n");
    g.call("workspace/list", json!({}));
    g.notify("exit", Value::Null);
    assert_eq!(g.wait_exit(), Some(1));
}

#[test]
fn oversize_line_in_ndjson_is_skipped() {
    let mut g = Garuda::spawn_with(Framing::Ndjson, &["--max-frame-bytes", "2048"], &[]);
    g.call("initialize", json!({"capabilities": {}}));
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"workspace/list\",\"params\":{{\"pad\":\"{}\"}}}}\n",
        "y".repeat(50_000)
    );
    g.send_raw(big.as_bytes());
    let r = g.recv();
    assert!(r.get("error").is_some(), "{r}");
    assert_eq!(r["id"], 5);
    g.call("workspace/list", json!({}));
}

fn drain_context_changed(g: &mut Garuda, wait: Duration) -> Vec<Value> {
    let mut out: Vec<Value> = g
        .backlog
        .drain(..)
        .filter(|m| m["method"] == "workspace/contextChanged")
        .collect();
    while let Some(m) = g.recv_timeout(wait) {
        if m["method"] == "workspace/contextChanged" {
            out.push(m);
        }
    }
    out
}

#[test]
fn watching_sends_one_notification_per_burst() {
    let ws = workspace();
    let mut g = Garuda::started(Framing::Ndjson);
    let id = g.open(ws.path());
    let before = g.call("prompt/assemble", json!({"workspaceId": id}))["sha256"].clone();

    // A burst of writes: one notification.
    for i in 0..5 {
        std::fs::write(ws.path().join("AGENTS.md"), format!("version {i}\n")).expect("write");
    }
    std::fs::write(ws.path().join("CLAUDE.md"), "Claude notes\n").expect("write");
    let n = g.wait_method("workspace/contextChanged");
    assert_eq!(n["params"]["workspaceId"], id.as_str());
    let changed: Vec<&str> = n["params"]["changed"]
        .as_array()
        .expect("changed")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        changed.contains(&"AGENTS.md") && changed.contains(&"CLAUDE.md"),
        "{n}"
    );
    assert_ne!(n["params"]["sha256"], before);
    let extra = drain_context_changed(&mut g, Duration::from_millis(500));
    assert!(
        extra.is_empty(),
        "one notification per burst, got more: {extra:?}"
    );
    let a = g.call("prompt/assemble", json!({"workspaceId": id}));
    assert!(a["system"].as_str().expect("system").contains("version 4"));
    assert_eq!(a["sha256"], n["params"]["sha256"]);

    // Atomic save: write a temp file and rename it over.
    std::fs::write(ws.path().join("AGENTS.md.tmp"), "renamed over\n").expect("write");
    std::fs::rename(ws.path().join("AGENTS.md.tmp"), ws.path().join("AGENTS.md")).expect("rename");
    let n = g.wait_method("workspace/contextChanged");
    assert!(
        n["params"]["changed"]
            .as_array()
            .expect("changed")
            .contains(&json!("AGENTS.md"))
    );
    let a = g.call("prompt/assemble", json!({"workspaceId": id}));
    assert!(
        a["system"]
            .as_str()
            .expect("system")
            .contains("renamed over")
    );

    // Delete, then recreate.
    std::fs::remove_file(ws.path().join("AGENTS.md")).expect("rm");
    g.wait_method("workspace/contextChanged");
    let a = g.call("prompt/assemble", json!({"workspaceId": id}));
    assert!(
        !a["system"]
            .as_str()
            .expect("system")
            .contains("renamed over")
    );
    std::fs::write(ws.path().join("AGENTS.md"), "back again\n").expect("write");
    g.wait_method("workspace/contextChanged");

    // Memory in a .garuda folder created after opening.
    std::fs::create_dir(ws.path().join(".garuda")).expect("mkdir");
    g.wait_method("workspace/contextChanged");
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(
        ws.path().join(".garuda/memory.md"),
        "- the build uses make\n",
    )
    .expect("write");
    let n = g.wait_method("workspace/contextChanged");
    assert!(
        n["params"]["changed"]
            .as_array()
            .expect("changed")
            .contains(&json!(".garuda/memory.md")),
        "{n}"
    );

    // Unrelated files make no noise; after close, nothing at all.
    std::fs::write(ws.path().join("main.rs"), "fn main() {}\n").expect("write");
    assert!(drain_context_changed(&mut g, Duration::from_millis(400)).is_empty());
    g.call("workspace/close", json!({"workspaceId": id}));
    std::fs::write(ws.path().join("AGENTS.md"), "after close\n").expect("write");
    assert!(drain_context_changed(&mut g, Duration::from_millis(600)).is_empty());
}

#[test]
fn schema_file_is_current() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_garuda"))
        .arg("schema")
        .output()
        .expect("run");
    assert!(out.status.success());
    let generated: Value = serde_json::from_slice(&out.stdout).expect("json");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/protocol/schema.json");
    let checked_in: Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_default())
            .unwrap_or(Value::Null);
    assert!(
        generated == checked_in,
        "protocol/schema.json is stale: run `cargo run -- schema > protocol/schema.json`"
    );
}

#[test]
fn protocol_readme_lists_the_method_table() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_garuda"))
        .args(["schema", "--methods"])
        .output()
        .expect("run");
    assert!(out.status.success());
    let generated = String::from_utf8(out.stdout).expect("utf-8");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/protocol/README.md");
    let doc = std::fs::read_to_string(path).unwrap_or_default();
    let begin = "<!-- methods table: generated by `garuda schema --methods` -->\n";
    let end = "<!-- end of methods table -->";
    let listed = doc
        .split_once(begin)
        .and_then(|(_, rest)| rest.split_once(end))
        .map(|(table, _)| table)
        .unwrap_or_default();
    assert_eq!(
        listed, generated,
        "protocol/README.md's method table is stale: paste `cargo run -- schema --methods` between its markers"
    );
}

#[test]
fn exits_when_the_client_process_dies() {
    let mut parent = std::process::Command::new("sleep")
        .arg("1")
        .spawn()
        .expect("sleep");
    let mut g = Garuda::spawn(Framing::Lsp);
    g.call(
        "initialize",
        json!({"processId": parent.id(), "capabilities": {}}),
    );
    // Reaped, so the pid is really gone.
    parent.wait().expect("wait");
    assert_eq!(g.wait_exit(), Some(0));
}

#[test]
fn a_script_may_send_requests_right_after_initialize() {
    // initialize runs off the read loop, yet the loop reads on only after answering it, and
    // vscode-jsonrpc's `[null]` counts as no params.
    let mut g = Garuda::spawn(Framing::Ndjson);
    let a = g.send_request("initialize", json!({"capabilities": {}}));
    let b = g.send_request("workspace/list", json!([null]));
    let ra = g.response(&json!(a));
    assert!(ra.get("result").is_some(), "{ra}");
    let rb = g.response(&json!(b));
    assert_eq!(rb["result"]["workspaces"], json!([]), "{rb}");
    let bad = g.request("workspace/list", json!({"unexpected": 1}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}
