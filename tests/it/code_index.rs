//! The code index end to end over the native protocol: with `codeIndex = "all"` a session
//! offers `find_symbol`, `find_references` and `repo_map` over the workspace's index, an edit
//! reaches the next query, and a client that declared `codeSymbols` is asked first
//! (`code/findSymbol`, `code/findReferences`) with the index as the fallback.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Framing, Garuda, WAIT};
use crate::mock_model::{MockReply, MockUsage, anthropic_text, anthropic_tool_use};
use crate::turns::{Mock, write_config};

fn fixture_into(ws: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/code/ts/src");
    std::fs::create_dir_all(ws.join("src")).expect("mkdir");
    for f in ["greeter.ts", "main.ts", "view.tsx"] {
        std::fs::copy(src.join(f), ws.join("src").join(f)).expect("copy");
    }
}

/// Waits until the server has logged `what` `n` times (the index's own log lines).
fn wait_logged(g: &Garuda, what: &str, n: usize) {
    let deadline = Instant::now() + WAIT;
    while g.stderr().matches(what).count() < n {
        assert!(
            Instant::now() < deadline,
            "never logged {what:?}: {}",
            g.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server with the TS fixture as its workspace and the index built.
fn start(
    mock: &Mock,
    capabilities: Value,
) -> (Garuda, tempfile::TempDir, tempfile::TempDir, String) {
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), "[features]\ncode_index = \"all\"\n");
    let ws = tempfile::tempdir().expect("ws");
    fixture_into(ws.path());
    let mut env = mock.env();
    env.push(("GARUDA_LOG".into(), "warn,garuda::code=info".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": capabilities}));
    let wid = g.open(ws.path());
    wait_logged(&g, "code index of", 1);
    (g, home, ws, wid)
}

fn text_input(t: &str) -> Value {
    json!([{"type": "text", "text": t}])
}

/// The output of each tool call finished so far.
fn outputs(g: &Garuda) -> Vec<String> {
    g.turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "toolCallFinished")
        .map(|e| e["output"].as_str().unwrap_or("").to_string())
        .collect()
}

fn tool_turn(name: &str, input: &str) -> Vec<MockReply> {
    vec![
        MockReply::Sse(anthropic_tool_use("t1", name, &[input])),
        MockReply::Sse(anthropic_text("ok", MockUsage::new(5, 1))),
    ]
}

#[test]
fn a_session_finds_definitions_callers_and_the_map_and_sees_an_edit() {
    let mut replies = Vec::new();
    replies.extend(tool_turn("find_symbol", r#"{"name": "Greeter"}"#));
    replies.extend(tool_turn("find_references", r#"{"name": "formatName"}"#));
    replies.extend(tool_turn("repo_map", r#"{"budget": 128}"#));
    replies.extend(tool_turn(
        "find_references",
        r#"{"path": "src/greeter.ts", "line": 11}"#,
    ));
    let mock = Mock::start(replies);
    let (mut g, _h, ws, wid) = start(&mock, json!({}));
    let r = g.call("session/new", json!({"workspaceId": wid, "policy": "ask"}));
    let sid = r["sessionId"].as_str().expect("sid").to_string();
    let turn = |g: &mut Garuda| {
        let r = g.request(
            "turn/run",
            json!({"sessionId": sid, "input": text_input("look")}),
        );
        assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    };
    turn(&mut g);
    let body = &mock.rec.bodies()[0];
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for t in ["find_symbol", "find_references", "repo_map"] {
        assert!(tools.contains(&t), "{tools:?}");
    }
    assert!(
        body.to_string()
            .contains("use find_symbol and find_references"),
        "the prompt line is missing"
    );
    assert_eq!(
        outputs(&g)[0],
        "source: garuda index (3 of 3 files indexed)\nsrc/greeter.ts:5-9 class Greeter\n    export class Greeter {\n"
    );
    turn(&mut g);
    let refs = &outputs(&g)[1];
    assert!(
        refs.starts_with("source: garuda index (3 of 3 files indexed)\n3 references to formatName in 3 files\nsrc/greeter.ts\n  7: return { text: formatName(name) };  (in greet)\nsrc/main.ts\n  6: console.log(formatName(\" bob \"));  (in main)\n"),
        "{refs}"
    );
    turn(&mut g);
    let map = &outputs(&g)[2];
    assert!(
        map.starts_with("source: garuda index (3 of 3 files indexed)\nsrc/greeter.ts:\n"),
        "{map}"
    );
    // The file of the most-used definitions comes first, within the budget (128 tokens).
    assert!(
        map.contains("formatName(name: string): string {  [2 uses]"),
        "{map}"
    );
    let (greeter, main) = (map.find("src/greeter.ts:"), map.find("src/main.ts:"));
    assert!(greeter < main, "{map}");
    assert!(map.len() <= 128 * 4 + 100, "{map}");
    // An edit: a new caller, seen by the next query without a restart.
    let main = ws.path().join("src/main.ts");
    let text = std::fs::read_to_string(&main).expect("read");
    std::fs::write(
        &main,
        format!("{text}\nexport function again() {{\n  return formatName(\"c\");\n}}\n"),
    )
    .expect("write");
    wait_logged(&g, "changed files read again", 1);
    turn(&mut g);
    let refs = &outputs(&g)[3];
    assert!(
        refs.contains("4 references to formatName in 3 files"),
        "{refs}"
    );
    assert!(
        refs.contains("  12: return formatName(\"c\");  (in again)"),
        "{refs}"
    );
}

/// Runs one turn, answering every `code/*` request with `answer` (`None`: never answered)
/// and noting each request and each `$/cancelRequest`.
fn serve_turn(
    g: &mut Garuda,
    sid: &str,
    mut answer: impl FnMut(&Value) -> Option<Value>,
) -> (Vec<Value>, Vec<Value>) {
    let id = json!(g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("look")})
    ));
    let (mut asked, mut cancels) = (Vec::new(), Vec::new());
    loop {
        let m = g.recv();
        if m.get("id") == Some(&id) && m.get("method").is_none() {
            assert_eq!(m["result"]["stopReason"], "end_turn", "{m}");
            return (asked, cancels);
        }
        let method = m["method"].as_str().unwrap_or("");
        if method.starts_with("code/") {
            asked.push(m.clone());
            if let Some(reply) = answer(&m) {
                let mut reply = reply;
                reply["jsonrpc"] = json!("2.0");
                reply["id"] = m["id"].clone();
                g.send(&reply);
            }
        } else if method == "$/cancelRequest" {
            cancels.push(m.clone());
        }
        g.backlog.push(m);
    }
}

#[test]
fn a_client_with_language_servers_is_asked_first_and_the_index_answers_when_it_cannot() {
    let mut replies = Vec::new();
    replies.extend(tool_turn(
        "find_symbol",
        r#"{"name": "Greeter", "kind": "class"}"#,
    ));
    for _ in 0..4 {
        replies.extend(tool_turn(
            "find_references",
            r#"{"path": "src/greeter.ts", "line": 11, "name": "formatName"}"#,
        ));
    }
    let mock = Mock::start(replies);
    let caps = json!({"experimental": {"garuda": {"codeSymbols": true}}});
    let (mut g, _h, ws, wid) = start(&mock, caps);
    let r = g.call("session/new", json!({"workspaceId": wid, "policy": "ask"}));
    let sid = r["sessionId"].as_str().expect("sid").to_string();
    let root = ws.path().canonicalize().expect("canon");
    // The documented answer: paths made root-relative, one outside the root dropped.
    let inside = root.join("src/greeter.ts").display().to_string();
    let (asked, _) = serve_turn(&mut g, &sid, |_| {
        Some(json!({"result": {"source": "ts_ls", "items": [
            {"name": "Greeter", "kind": "class", "path": inside, "line": 5, "endLine": 9, "signature": "export class Greeter {"},
            {"name": "Greeter", "kind": "class", "path": "/elsewhere/x.ts", "line": 1}
        ]}}))
    });
    assert_eq!(asked[0]["method"], "code/findSymbol");
    assert_eq!(
        asked[0]["params"],
        json!({"sessionId": sid, "name": "Greeter", "kind": "class", "limit": 50})
    );
    assert_eq!(
        outputs(&g)[0],
        "source: language server ts_ls\nsrc/greeter.ts:5-9 class Greeter\n    export class Greeter {\n"
    );
    let index_answer = |out: &str| {
        assert!(
            out.starts_with("source: garuda index (3 of 3 files indexed)\n3 references to formatName in 3 files\n"),
            "{out}"
        );
    };
    // null: no language server for it.
    let (asked, _) = serve_turn(&mut g, &sid, |_| Some(json!({"result": null})));
    assert_eq!(asked[0]["method"], "code/findReferences");
    assert_eq!(
        asked[0]["params"],
        json!({"sessionId": sid, "name": "formatName", "path": "src/greeter.ts", "line": 11, "limit": 50})
    );
    index_answer(&outputs(&g)[1]);
    // An error.
    serve_turn(&mut g, &sid, |_| {
        Some(json!({"error": {"code": -32603, "message": "ts_ls crashed"}}))
    });
    index_answer(&outputs(&g)[2]);
    // No items.
    serve_turn(&mut g, &sid, |_| {
        Some(json!({"result": {"source": "ts_ls", "items": []}}))
    });
    index_answer(&outputs(&g)[3]);
    // Never answered: cancelled after the timeout, the index answers.
    let (asked, cancels) = serve_turn(&mut g, &sid, |_| None);
    index_answer(&outputs(&g)[4]);
    assert_eq!(cancels.len(), 1, "{cancels:?}");
    assert_eq!(cancels[0]["params"]["id"], asked[0]["id"]);
}
