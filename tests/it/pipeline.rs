//! The rest of the seeds' context pipeline end to end: git state at session start, the
//! context_efficiency nudge, automatic collapse, media refusals, compaction off with a
//! blocking limit, and the environment overrides.

use serde_json::{Value, json};

use crate::client::Garuda;
use crate::context::{WINDOW_100K, new_session, text, turn};
use crate::mock_model::*;
use crate::turns::{Mock, setup, setup_env};

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

fn tag_of(message: &Value) -> String {
    message["content"]
        .as_array()
        .expect("content")
        .iter()
        .filter_map(|b| b["text"].as_str())
        .find(|t| t.starts_with("[id:"))
        .expect("tag")
        .trim_start_matches("[id:")
        .trim_end_matches(']')
        .to_string()
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

#[test]
fn snip_keeps_the_first_request_and_can_be_turned_off() {
    // The model tries to snip the first request: it stays, and the tool says why.
    let first = Mock::start(vec![text("one", 100)]);
    let (mut g, home, _ws, wid) = setup(&first, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "THE-TASK: refactor the parser");
    let tag = tag_of(&first.rec.bodies()[0]["messages"][0]);
    let _ = g.child.kill();
    let _ = g.child.wait();
    let mock = Mock::start(vec![
        tool("toolu_s", "snip", json!({"ids": [tag]}), 100),
        text("tried", 100),
    ]);
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(crate::client::Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    assert_eq!(
        turn(&mut g, &sid, "drop the task")["stopReason"],
        "end_turn"
    );
    let out = g
        .turn_events()
        .into_iter()
        .find(|e| e["kind"] == "toolCallFinished")
        .expect("snip ran");
    let out = out["output"].as_str().expect("output");
    assert!(out.contains("Removed 0 message"), "{out}");
    assert!(out.contains("Kept the user's first request"), "{out}");
    assert!(
        mock.rec.bodies()[1]["messages"][0]
            .to_string()
            .contains("THE-TASK")
    );
    let h = g.call("session/messages", json!({"sessionId": sid}));
    assert!(h["messages"][0].get("removed").is_none(), "{h}");
    // The client's session/snip reports it protected.
    let first_id = h["messages"][0]["id"].as_str().expect("id").to_string();
    let r = g.call(
        "session/snip",
        json!({"sessionId": sid, "messageIds": [first_id.clone()]}),
    );
    assert_eq!(r["protected"], json!([first_id]), "{r}");
    assert_eq!(r["removed"], json!([]), "{r}");

    // `[context] snip = false`: no snip tool in the requests.
    let mock = Mock::start(vec![text("one", 100)]);
    let (mut g, _h, _ws, wid) = setup(&mock, &format!("{WINDOW_100K}[context]\nsnip = false\n"));
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "hello");
    let names = tool_names(&mock.rec.bodies()[0]);
    assert!(names.contains(&"read_file".to_string()), "{names:?}");
    assert!(!names.contains(&"snip".to_string()), "{names:?}");
}

/// Runs git in `dir` with a test identity; panics when it fails.
pub(crate) fn git(dir: &std::path::Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?}");
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn git_state_is_captured_once_in_a_repository_and_absent_outside() {
    let mock = Mock::start(vec![text("one", 100), text("two", 100)]);
    let (mut g, _h, ws, wid) = setup(&mock, WINDOW_100K);
    git(ws.path(), &["init", "-q"]);
    git(ws.path(), &["symbolic-ref", "HEAD", "refs/heads/trunk"]);
    git(ws.path(), &["add", "a.txt"]);
    git(ws.path(), &["commit", "-q", "-m", "FIRST-COMMIT"]);
    let sid = new_session(&mut g, &wid);
    let system_before =
        g.call("session/view", json!({"sessionId": sid}))["request"]["system"].to_string();
    turn(&mut g, &sid, "hello");
    turn(&mut g, &sid, "again");
    let bodies = mock.rec.bodies();
    for b in &bodies {
        let all = b["messages"].to_string();
        assert_eq!(count(&all, "Git state of the workspace"), 1, "{all}");
        assert!(all.contains("Branch: trunk"), "{all}");
        assert!(all.contains("FIRST-COMMIT"), "{all}");
        assert!(all.contains("?? AGENTS.md"), "{all}");
        // A note in the first user message, never in the system prompt.
        assert!(!b["system"].to_string().contains("Git state"));
    }
    assert!(bodies[0]["messages"][0].to_string().contains("hello"));
    assert_eq!(bodies[0]["system"].to_string(), system_before);
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    assert!(
        inspect["gitStateTokens"].as_u64().expect("n") > 0,
        "{inspect}"
    );
    let h = g.call("session/messages", json!({"sessionId": sid}));
    assert_eq!(h["messages"][0]["meta"], "git_state", "{h}");

    // Outside a repository the note has only the date, and nothing else changes.
    let mock = Mock::start(vec![text("one", 100)]);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "hello");
    let first = mock.rec.bodies()[0]["messages"][0].to_string();
    assert!(!first.contains("Git state"), "{first}");
    assert!(first.contains("<garuda_note>Today's date: "), "{first}");
    assert!(
        !mock.rec.bodies()[0]["system"]
            .to_string()
            .contains("Today's date")
    );

    // `[context] git_state = false` turns it off.
    let mock = Mock::start(vec![text("one", 100)]);
    let (mut g, _h, ws, wid) = setup(
        &mock,
        &format!("{WINDOW_100K}[context]\ngit_state = false\n"),
    );
    git(ws.path(), &["init", "-q"]);
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "hello");
    assert!(!mock.rec.bodies()[0].to_string().contains("Git state"));
}

/// The text of the last user message of a request body.
fn last_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .expect("user")
        .to_string()
}

#[test]
fn the_model_is_nudged_to_snip_after_growth_and_never_twice_in_a_row() {
    let replies = || {
        vec![
            text("one", 100),
            text("two", 15_000),
            text("three", 15_100),
            text("four", 30_000),
            text("five", 30_100),
        ]
    };
    let mock = Mock::start(replies());
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    for i in 1..=5 {
        assert_eq!(
            turn(&mut g, &sid, &format!("question {i}"))["stopReason"],
            "end_turn"
        );
    }
    let bodies = mock.rec.bodies();
    let nudged: Vec<bool> = bodies
        .iter()
        .map(|b| last_user(b).contains("context_efficiency"))
        .collect();
    // Grown by a tenth of the window (10 000 tokens) since the start, then again since the
    // first note; the step right after a note has none.
    assert_eq!(nudged, vec![false, false, true, false, true]);
    let all = bodies[4]["messages"].to_string();
    assert_eq!(count(&all, "context_efficiency"), 2);
    assert!(all.contains("snip tool"));
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(inspect["nudges"], 2, "{inspect}");

    // Without the snip tool there is nothing to suggest.
    let mock = Mock::start(replies());
    let (mut g, _h, _ws, wid) = setup(&mock, &format!("{WINDOW_100K}[context]\nsnip = false\n"));
    let sid = new_session(&mut g, &wid);
    for i in 1..=5 {
        turn(&mut g, &sid, &format!("question {i}"));
    }
    assert!(
        !mock
            .rec
            .bodies()
            .iter()
            .any(|b| b.to_string().contains("context_efficiency"))
    );
}

#[test]
fn a_snip_resets_the_nudge() {
    let mock = Mock::start(vec![
        text("one", 100),
        text("two", 100),
        tool("toolu_s", "snip", json!({"ids": []}), 15_000),
        text("snipped", 15_050),
        text("three", 15_100),
    ]);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "question 1");
    turn(&mut g, &sid, "question 2");
    turn(&mut g, &sid, "question 3");
    turn(&mut g, &sid, "question 4");
    // The context grew past the nudge while the model snipped: counting starts again there.
    assert!(
        !mock
            .rec
            .bodies()
            .iter()
            .any(|b| b.to_string().contains("context_efficiency")),
        "no note after a snip"
    );
}

#[test]
fn an_automatic_collapse_comes_before_a_summary_is_needed() {
    let mut replies: Vec<MockReply> = (1..=6).map(|i| text(&format!("answer {i}"), 200)).collect();
    replies.push(text("answer 7", 75_000));
    replies.push(text("COLLAPSED-MIDDLE: questions 2 to 3 answered", 300));
    replies.push(text("answer 8", 20_000));
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup(
        &mock,
        &format!("{WINDOW_100K}[context]\ncollapse_min_share = 0.0\nnudge_share = 0.0\n"),
    );
    let sid = new_session(&mut g, &wid);
    for i in 1..=8 {
        assert_eq!(
            turn(&mut g, &sid, &format!("question {i}"))["stopReason"],
            "end_turn"
        );
    }
    let bodies = mock.rec.bodies();
    assert_eq!(
        bodies.len(),
        9,
        "seven turns, the collapse, the eighth turn"
    );
    // The collapse request: a fork of the main request (its tools, its messages up to the
    // span's end), the collapse instruction naming where the span begins.
    let c = &bodies[7];
    assert_eq!(c["tools"], bodies[6]["tools"], "{c}");
    assert!(c["messages"].to_string().contains("question 2"));
    assert!(!c["messages"].to_string().contains("question 7"));
    assert!(
        c["messages"]
            .to_string()
            .contains("from the one that begins \\\"answer 1\\\""),
        "{c}"
    );
    // The next request: the task, the summary in place of the span, the kept steps.
    let all = bodies[8]["messages"].to_string();
    assert!(all.contains("question 1"), "the task stays");
    assert!(all.contains("[Summary of an earlier part of this conversation]"));
    assert!(all.contains("COLLAPSED-MIDDLE"));
    // The model's answers of the span are gone; the user's words stay, verbatim.
    assert!(
        !all.contains("answer 2") && !all.contains("answer 3"),
        "{all}"
    );
    assert!(
        all.contains("<user_messages>") && all.contains("question 2"),
        "{all}"
    );
    assert!(all.contains("question 7") && all.contains("question 8"));
    // No summary compaction: the collapse was enough.
    let p = phases(&g);
    assert_eq!(
        p,
        vec![
            ("started".to_string(), "collapse".to_string()),
            ("finished".to_string(), "collapse".to_string())
        ]
    );
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(inspect["collapses"], 1, "{inspect}");
    assert_eq!(inspect["autoCollapses"], 1, "{inspect}");
    let h = g.call("session/messages", json!({"sessionId": sid}));
    let removed = h["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["removed"] == "collapsed")
        .count();
    assert!(removed >= 2, "{h}");
}

fn png() -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
}

#[test]
fn a_refused_image_is_replaced_by_a_marker_and_the_step_runs_again() {
    let refusal = json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "messages.0.content.1.image.source.base64: image exceeds 5 MB maximum: 7340032 bytes > 5242880 bytes"}});
    let mock = Mock::start(vec![
        MockReply::Status {
            status: 400,
            headers: Vec::new(),
            body: refusal.to_string(),
        },
        text("I cannot see the image, but here is my answer", 100),
        text("later", 100),
    ]);
    let (mut g, home, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "look at this"}, png()]}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    turn(&mut g, &sid, "and now?");
    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 3);
    assert!(bodies[0]["messages"].to_string().contains("\"image\""));
    for b in &bodies[1..] {
        let all = b["messages"].to_string();
        assert!(!all.contains("\"image\""), "{all}");
        assert!(
            all.contains("[image removed: the provider could not accept it]"),
            "{all}"
        );
        assert!(all.contains("look at this"));
    }
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(inspect["mediaStripped"], 1, "{inspect}");
    // The transcript keeps the image; only the view replaces it.
    let h = g.call("session/messages", json!({"sessionId": sid}));
    assert!(h.to_string().contains("iVBORw0KGgo="));
    // A restarted server replays the refusal: the next request still has the marker.
    let _ = g.child.kill();
    let _ = g.child.wait();
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(crate::client::Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let v = g.call("session/view", json!({"sessionId": sid}));
    let all = v["request"]["messages"].to_string();
    assert!(!all.contains("\"image\""), "{all}");
    assert!(
        all.contains("[image removed: the provider could not accept it]"),
        "{all}"
    );
}
