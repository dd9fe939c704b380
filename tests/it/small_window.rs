//! Small windows (2 048, 4 096 and 8 192 tokens) through the real binary against the
//! simulated provider, which enforces the window it is given and counts tokens its own way
//! (`sim_provider`): a session is never stuck, every turn answers or gets Garuda's own
//! -32060, and every compaction is whole.

use serde_json::{Value, json};

use crate::client::{Framing, Garuda};
use crate::long_session::{self, Scenario, Session};
use crate::mock_model::{MockReply, MockUsage, openai_text};
use crate::sim_provider::Verdict;

fn small(name: &'static str, window: u64, turns: u32) -> Scenario {
    Scenario {
        name,
        what: "a small window",
        config_window: window,
        sim_window: window,
        turns,
        large_every_turn: false,
        force_ptl_after_main: None,
        seed: 0x5EED_0036,
        cache_target: 0.0,
    }
}

/// Turns that ended with an error or a stop other than `end_turn`, described.
fn failed(sess: &Session) -> Vec<String> {
    sess.turns
        .iter()
        .filter(|t| t.error.is_some() || t.stop_reason.as_deref() != Some("end_turn"))
        .map(|t| format!("turn {}: {:?} {:?}", t.turn, t.stop_reason, t.error))
        .collect()
}

/// Requests the sim refused as over its window.
fn overflows(sess: &Session) -> usize {
    sess.records
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::PromptTooLong { .. }))
        .count()
}

fn report(sess: &Session) -> String {
    let kinds: Vec<String> = sess
        .compactions
        .iter()
        .filter(|(_, e)| e["phase"] == "finished" || e["phase"] == "failed")
        .map(|(t, e)| format!("t{t}:{}:{}", e["phase"], e["message"]))
        .collect();
    format!(
        "requests {}, overflows {}, compactions {:?}",
        sess.records.len(),
        overflows(sess),
        kinds
    )
}

/// No summary was made and then thrown away, and none was installed cut.
fn whole_summaries(sess: &Session) {
    let f = long_session::figures(sess);
    assert_eq!(f.summaries_wasted, 0, "{}", report(sess));
    if std::env::var_os("SMALL_WINDOW_TABLE").is_some() {
        println!(
            "{}: {} turns, {} failed, {} main + {} summary requests, {} overflows, \
             compactions {:?}",
            sess.scenario.name,
            f.turns,
            f.turns_failed,
            f.main,
            f.summary,
            overflows(sess),
            f.installed
        );
    }
}

#[test]
fn window_8192_session_has_no_failed_turn() {
    let sess = long_session::run(&small("small-8k", 8_192, 18));
    let failed = failed(&sess);
    assert!(failed.is_empty(), "{failed:#?}\n{}", report(&sess));
    whole_summaries(&sess);
}

/// Every failed turn got Garuda's own -32060 naming the fixed part, never the provider's
/// overflow, and no request the sim refused went unanswered by a relief.
fn only_local_refusals(sess: &Session) {
    for t in &sess.turns {
        if let Some(e) = &t.error {
            assert_eq!(e["code"], -32060, "turn {}: {e}", t.turn);
            assert_eq!(e["data"]["kind"], "doesNotFit", "turn {}: {e}", t.turn);
            assert!(e["data"]["fixedTokens"].as_u64().unwrap_or(0) > 0, "{e}");
            let m = e["message"].as_str().unwrap_or("");
            assert!(m.contains("fixed part") && m.contains("--ctx-size"), "{m}");
        }
    }
}

#[test]
fn window_4096_session_has_no_failed_turn() {
    let sess = long_session::run(&small("small-4k", 4_096, 16));
    only_local_refusals(&sess);
    let failed = failed(&sess);
    assert!(failed.is_empty(), "{failed:#?}\n{}", report(&sess));
    stable_fixed_part(&sess);
    whole_summaries(&sess);
}

/// The lean fixed part is the same bytes in every main request (the server's prefix cache
/// keeps working), and small: the core tools and the tool search.
fn stable_fixed_part(sess: &Session) {
    let mains: Vec<serde_json::Value> = sess
        .records
        .iter()
        .filter(|r| r.kind == crate::sim_provider::Kind::Main)
        .map(|r| serde_json::from_slice(&r.body).expect("json body"))
        .collect();
    let first = &mains[0];
    let names: Vec<&str> = first["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "read_file",
            "grep",
            "edit_file",
            "write_file",
            "bash",
            "mcp_tool_search"
        ]
    );
    for m in &mains {
        assert_eq!(m["tools"], first["tools"]);
        assert_eq!(m["system"], first["system"]);
    }
}

#[test]
fn window_2048_answers_or_refuses_locally() {
    let sess = long_session::run(&small("small-2k", 2_048, 4));
    only_local_refusals(&sess);
    assert_eq!(overflows(&sess), 0, "{}", report(&sess));
    // Turn 1 answers; later ones may be refused while their own steps fill the room.
    assert!(sess.turns[0].error.is_none(), "{}", report(&sess));
    whole_summaries(&sess);
}

/// A local llama.cpp-like server: the chat replies in order, and `GET /props` saying
/// `n_ctx`.
struct LlamaServer {
    server: wiremock::MockServer,
    rec: crate::mock_model::Recorder,
    _rt: tokio::runtime::Runtime,
}

const PROPS: &str =
    include_str!("../../crates/garuda-core/src/provider/fixtures/llamacpp/props.json");

fn llama_server(n_ctx: u64, replies: Vec<crate::mock_model::MockReply>) -> LlamaServer {
    use wiremock::matchers::{method, path};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let (server, rec) = rt.block_on(crate::mock_model::start_openai(replies));
    let props = PROPS.replace("\"n_ctx\":4096", &format!("\"n_ctx\":{n_ctx}"));
    rt.block_on(
        wiremock::Mock::given(method("GET"))
            .and(path("/props"))
            .respond_with(
                wiremock::ResponseTemplate::new(200)
                    .insert_header("content-type", "application/json")
                    .set_body_string(props),
            )
            .mount(&server),
    );
    LlamaServer {
        server,
        rec,
        _rt: rt,
    }
}

/// A workspace and a running binary whose model is `local/gemma-3-270m` on `s` (an unknown
/// model: Garuda's table says nothing of its window), with `max_output = 200`.
fn local_session(s: &LlamaServer) -> (Garuda, tempfile::TempDir, tempfile::TempDir, Value) {
    let home = tempfile::tempdir().expect("home");
    let dir = home.path().join("config/garuda");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "model = \"local/gemma-3-270m\"\n[network]\nmax_retries = 1\n\
             [providers.local]\nkind = \"openai\"\nbase_url = \"{}/v1\"\n\
             [models.\"local/gemma-3-270m\"]\nmax_output = 200\n",
            s.server.uri()
        ),
    )
    .expect("config");
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("AGENTS.md"), "Be brief.\n").expect("write");
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &[]);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    (g, home, ws, r)
}

#[test]
fn a_local_server_s_window_is_asked_for_and_max_tokens_stays_within_it() {
    let s = llama_server(
        4_096,
        vec![MockReply::Sse(openai_text("done", MockUsage::new(900, 2)))],
    );
    let (mut g, _h, _ws, r) = local_session(&s);
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    assert_eq!(r["contextWindow"], 4_096, "{r}");
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(i["window"], 4_096, "{i}");
    assert_eq!(i["windowSource"], "llama.cpp /props");
    assert_eq!(i["serverWindow"], 4_096);
    assert_eq!(i["lean"]["budgetTokens"], 1_024, "{i}");
    let deferred = i["lean"]["deferredTools"].as_array().expect("deferred");
    assert!(deferred.iter().any(|t| t == "list_files"), "{i}");
    // A 2 000-token message beside the lean fixed part still fits a 4 096-token window.
    let long = "word ".repeat(1_600);
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": long}]}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let body = &s.rec.bodies()[0];
    let max = body["max_tokens"].as_u64().expect("max_tokens");
    // The model's limit caps it, and never more than the window leaves.
    assert!(max <= 200, "{max}");
    assert_eq!(
        body["tools"].as_array().map(Vec::len),
        Some(6),
        "{}",
        body["tools"]
    );
}

#[test]
fn a_2048_token_server_refuses_locally_and_a_smaller_one_warns_at_session_new() {
    let s = llama_server(2_048, Vec::new());
    let (mut g, _h, _ws, r) = local_session(&s);
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    let says_server = r["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(Value::as_str)
        .any(|w| w.contains("2048-token window") && w.contains("llama.cpp /props"));
    assert!(says_server, "{r}");
    // A message that cannot fit beside the fixed part is refused before anything is sent.
    let long = "word ".repeat(1_600);
    let r = g.request(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": long}]}),
    );
    assert_eq!(r["error"]["code"], -32060, "{r}");
    let m = r["error"]["message"].as_str().unwrap_or("");
    assert!(m.contains("fixed part") && m.contains("--ctx-size"), "{m}");
    assert_eq!(s.rec.count(), 0, "nothing was sent");
    assert_eq!(r["error"]["data"]["windowTokens"], 2_048);
    // Under about 2 000 tokens even the lean fixed part takes more than half: session/new
    // says so, with the numbers.
    let s = llama_server(1_536, Vec::new());
    let (_g, _h, _ws, r) = local_session(&s);
    let warned = r["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(Value::as_str)
        .any(|w| w.contains("fixed part") && w.contains("more than half of the model's 1536"));
    assert!(warned, "{r}");
}

/// ACP's `session/new` asks the local server for its window too, and a client that shows
/// notices hears that Garuda's fixed part takes more than half of it.
#[test]
fn acp_session_new_warns_when_the_fixed_part_takes_half_the_window() {
    use std::io::{BufRead, BufReader, Write};
    let s = llama_server(1_536, Vec::new());
    let home = tempfile::tempdir().expect("home");
    let dir = home.path().join("config/garuda");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "model = \"local/gemma-3-270m\"\n[providers.local]\nkind = \"openai\"\n\
             base_url = \"{}/v1\"\n[models.\"local/gemma-3-270m\"]\nmax_output = 200\n",
            s.server.uri()
        ),
    )
    .expect("config");
    let ws = tempfile::tempdir().expect("ws");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_garuda"));
    cmd.arg("acp");
    crate::client::isolated_env(&mut cmd, home.path());
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn garuda acp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut send = |v: Value| writeln!(stdin, "{v}").expect("write");
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}}}),
    );
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {
        "cwd": ws.path(), "mcpServers": []}}),
    );
    let mut warned = false;
    let mut answered = false;
    // The notices follow the answer, before anything answered later: a third request marks
    // the end of what session/new sent.
    for line in lines.by_ref() {
        let m: Value = serde_json::from_str(&line.expect("line")).expect("json");
        if m["id"] == 2 {
            assert!(m["result"]["sessionId"].is_string(), "{m}");
            answered = true;
            send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": {}}));
        }
        if m["id"] == 3 {
            break;
        }
        let update = &m["params"]["update"];
        if update["sessionUpdate"] == "notice"
            && update.to_string().contains("fixed part")
            && update.to_string().contains("1536")
        {
            warned = true;
        }
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    assert!(answered && warned, "no fixed-part notice after session/new");
}
