//! The rest of the seeds' context pipeline end to end: git state at session start, the
//! context_efficiency nudge, automatic collapse, media refusals, compaction off with a
//! blocking limit, and the environment overrides.

use serde_json::{Value, json};

use crate::client::Garuda;
use crate::mock_model::*;
use crate::turns::{Mock, setup, setup_env};

const WINDOW_100K: &str = "[models.\"anthropic/claude-sonnet-4-5\"]\ncontextWindow = 100000\n";

fn new_session(g: &mut Garuda, wid: &str) -> String {
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    r["sessionId"].as_str().expect("sessionId").to_string()
}

fn turn(g: &mut Garuda, sid: &str, text: &str) -> Value {
    g.call(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": text}]}),
    )
}

fn text(t: &str, input: u64) -> MockReply {
    MockReply::Sse(anthropic_text(t, MockUsage::new(input, 5)))
}

fn tool(id: &str, name: &str, input: Value, usage: u64) -> MockReply {
    let j = input.to_string();
    MockReply::Sse(
        AnthropicSse::new(MockUsage::new(usage, 10))
            .tool_use(id, name, &[j.as_str()])
            .finish("tool_use"),
    )
}

fn phases(g: &Garuda) -> Vec<(String, String)> {
    g.turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "compaction")
        .map(|e| {
            (
                e["phase"].as_str().unwrap_or("?").to_string(),
                e["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn compaction_off_refuses_an_over_window_request_before_sending_it() {
    let mock = Mock::start(vec![
        text("fine", 2_500),
        tool("toolu_1", "read_file", json!({"path": "big.txt"}), 8_800),
        text("never sent", 100),
    ]);
    let (mut g, _h, ws, wid) = setup(
        &mock,
        "[models.\"anthropic/claude-sonnet-4-5\"]\ncontextWindow = 10000\n\
         [context]\nauto_compact = false\n",
    );
    std::fs::write(ws.path().join("big.txt"), "line of text\n".repeat(600)).expect("write");
    let sid = new_session(&mut g, &wid);
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(inspect["autoCompact"], false, "{inspect}");
    assert_eq!(turn(&mut g, &sid, "hello")["stopReason"], "end_turn");
    // The model reads a file: its result takes the context over the window's room, so the
    // second step is refused before it is sent, with the sizes.
    let r = g.request(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "read big.txt"}]}),
    );
    assert_eq!(r["error"]["code"], -32060, "{r}");
    let data = &r["error"]["data"];
    assert_eq!(data["kind"], "blockingLimit", "{r}");
    assert_eq!(data["windowTokens"], 10_000);
    assert_eq!(data["limitTokens"], 10_000 - 1_024);
    assert!(
        data["contextTokens"].as_u64().expect("n") > 10_000 - 1_024,
        "{r}"
    );
    let msg = r["error"]["message"].as_str().expect("message");
    assert!(msg.contains("auto_compact"), "{msg}");
    assert_eq!(
        mock.rec.count(),
        2,
        "the over-window request was never sent"
    );
    // Nothing compacted by itself, and the next turn is refused at once, with nothing written.
    assert!(phases(&g).is_empty(), "{:?}", phases(&g));
    let before = g.call("session/messages", json!({"sessionId": sid}))["total"].clone();
    let r = g.request(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "and now?"}]}),
    );
    assert_eq!(r["error"]["data"]["kind"], "blockingLimit", "{r}");
    assert_eq!(mock.rec.count(), 2);
    let after = g.call("session/messages", json!({"sessionId": sid}))["total"].clone();
    assert_eq!(before, after, "a refused turn writes nothing");
}

/// Five turns, the last one reporting `last_input` tokens.
fn five_turns(last_input: u64) -> Vec<MockReply> {
    vec![
        text("one", 100),
        text("two", 120),
        text("three", 140),
        text("four", 160),
        text("five", last_input),
    ]
}

#[test]
fn environment_overrides_lower_the_window_and_threshold() {
    let mut replies = five_turns(30_000);
    replies.push(text("<summary>SUMMARY-ENV</summary>", 50));
    replies.push(text("six", 200));
    // Without the overrides a 100 000-token window compacts above 80 000: 30 000 is far below.
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup_env(
        &mock,
        WINDOW_100K,
        &[
            ("GARUDA_CONTEXT_WINDOW", "50000"),
            ("GARUDA_COMPACT_THRESHOLD", "50%"),
        ],
    );
    let sid = new_session(&mut g, &wid);
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(inspect["window"], 50_000, "{inspect}");
    assert_eq!(inspect["configuredWindow"], 50_000);
    assert_eq!(inspect["threshold"], 25_000);
    for i in 1..=5 {
        assert_eq!(
            turn(&mut g, &sid, &format!("question {i}"))["stopReason"],
            "end_turn"
        );
    }
    assert!(phases(&g).is_empty());
    turn(&mut g, &sid, "question 6");
    let done: Vec<_> = phases(&g)
        .into_iter()
        .filter(|(p, _)| p == "finished")
        .collect();
    assert_eq!(done, vec![("finished".to_string(), "summary".to_string())]);
    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 7, "five turns, the summary, the sixth turn");
    assert!(bodies[6]["messages"][0].to_string().contains("SUMMARY-ENV"));

    // Values that would raise the window or threshold change nothing; a bad one is an error
    // naming the variable.
    let mock = Mock::start(Vec::new());
    let (mut g, _h, _ws, wid) = setup_env(
        &mock,
        WINDOW_100K,
        &[
            ("GARUDA_CONTEXT_WINDOW", "900000"),
            ("GARUDA_COMPACT_THRESHOLD", "0.95"),
        ],
    );
    let sid = new_session(&mut g, &wid);
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(inspect["window"], 100_000, "{inspect}");
    assert_eq!(inspect["threshold"], 80_000);
    drop(g);
    let home = tempfile::tempdir().expect("home");
    crate::turns::write_config(home.path(), "");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_garuda"))
        .args(["prompt", "--json"])
        .arg(home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_STATE_HOME", home.path().join("state"))
        .env("GARUDA_COMPACT_THRESHOLD", "lots")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("GARUDA_COMPACT_THRESHOLD"), "{err}");
}
