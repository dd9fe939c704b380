//! The session memory end to end: the background update after a turn (a fork of the turn's
//! last request), compactions that install it without a model call, the user's own notes,
//! idle compaction before the cache expires and at resume after it did, and the update's
//! failures, through the real binary and the scripted mock.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::Garuda;
use crate::context::{
    WINDOW_100K, history, new_session, read, run_history, strip_cache, text, turn,
};
use crate::mock_model::*;
use crate::turns::{MODEL, Mock, setup_env};

/// How the memory update's instruction begins (`session/compact/memory.rs`).
const MEMORY_START: &str = "<garuda_note>Update the session memory";

const MEMORY_ON: &[(&str, &str)] = &[("GARUDA_SESSION_MEMORY", "on")];

fn notes(tag: &str) -> MockReply {
    text(
        &format!(
            "<analysis>draft</analysis><summary>Active Task\n{tag}: the user asked five \
             questions.</summary>"
        ),
        40_000,
    )
}

/// Waits until the mock has seen `n` requests.
fn wait_requests(mock: &Mock, n: usize) {
    let until = Instant::now() + Duration::from_secs(20);
    while mock.rec.count() < n {
        assert!(Instant::now() < until, "only {} requests", mock.rec.count());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `session/memory` until the update in flight is written.
fn wait_memory(g: &mut Garuda, sid: &str) -> Value {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let r = g.call("session/memory", json!({"sessionId": sid}));
        if !r["memory"].is_null() {
            return r["memory"].clone();
        }
        assert!(Instant::now() < until, "no memory: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The error of a request that must fail.
fn call_err(g: &mut Garuda, method: &str, params: Value) -> Value {
    let r = g.request(method, params);
    r.get("error")
        .cloned()
        .unwrap_or_else(|| panic!("{method} succeeded: {r}"))
}

fn is_idle_finish(e: &Value) -> bool {
    e["kind"] == "compaction" && e["trigger"] == "idle" && e["phase"] == "finished"
}

/// Waits for the idle compaction's `finished` event, outside any turn.
fn wait_idle_compaction(g: &mut Garuda) -> bool {
    let until = Instant::now() + Duration::from_secs(20);
    if g.turn_events().iter().any(is_idle_finish) {
        return true;
    }
    while Instant::now() < until {
        if let Some(m) = g.recv_timeout(Duration::from_millis(100))
            && m["method"] == "turn/update"
            && is_idle_finish(&m["params"]["event"])
        {
            return true;
        }
    }
    false
}

/// A session of five turns, the last at 40 000 of a 100 000 window, whose memory update
/// (answered with MEMORY-NOTES) was written; `more` are the replies after it.
/// The temporary home and workspace, kept alive with the session.
type Dirs = (tempfile::TempDir, tempfile::TempDir);

fn with_memory(more: Vec<MockReply>) -> (Mock, Garuda, Dirs, String, Value) {
    let mut replies = history(40_000);
    replies.push(notes("MEMORY-NOTES"));
    replies.extend(more);
    let mock = Mock::start(replies);
    let (mut g, home, ws, wid) = setup_env(&mock, WINDOW_100K, MEMORY_ON);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    wait_requests(&mock, 7);
    let memory = wait_memory(&mut g, &sid);
    (mock, g, (home, ws), sid, memory)
}

fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m.to_string())
        .unwrap_or_default()
}

#[test]
fn a_memory_written_behind_the_answer_is_what_a_compaction_installs_without_a_model_call() {
    // Five turns; the last reports 40 000 of a 100 000 window, past the memory's start.
    let (mock, mut g, _h, sid, memory) = with_memory(Vec::new());
    assert_eq!(memory["source"], "model");
    assert_eq!(memory["current"], true);
    assert_eq!(memory["inView"], true);
    assert!(
        memory["text"]
            .as_str()
            .expect("text")
            .starts_with("Active Task\nMEMORY-NOTES"),
        "{memory}"
    );

    // The update is a fork of the turn's last request: the same system prompt and tools,
    // its messages byte for byte, then the answer and the instruction.
    let bodies = mock.rec.bodies();
    let (main, update) = (&bodies[5], &bodies[6]);
    assert_eq!(strip_cache(&main["system"]), strip_cache(&update["system"]));
    assert_eq!(strip_cache(&main["tools"]), strip_cache(&update["tools"]));
    let (mm, um) = (
        main["messages"].as_array().expect("m"),
        update["messages"].as_array().expect("m"),
    );
    assert_eq!(um.len(), mm.len() + 2, "{update}");
    assert_eq!(strip_cache(&json!(mm)), strip_cache(&json!(um[..mm.len()])));
    assert!(last_user_text(update).contains(MEMORY_START), "{update}");
    assert!(last_user_text(update).contains("User Directives"));
    assert!(
        update.get("tool_choice").is_none(),
        "the fork keeps the request's shape"
    );

    // context/inspect shows it; the usage is recorded under its own purpose.
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(i["sessionMemory"]["throughId"], memory["throughId"], "{i}");
    let purposes: Vec<&str> = i["usageByPurpose"]
        .as_array()
        .expect("usage")
        .iter()
        .filter_map(|u| u["purpose"].as_str())
        .collect();
    assert!(purposes.contains(&"memory"), "{purposes:?}");

    // `/compact` without a focus installs the notes: no model call.
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    assert_eq!(r["kind"], "summary");
    assert_eq!(mock.rec.count(), 7, "no summary request");
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(i["lastCompaction"]["summarizer"], "memory", "{i}");
    let view = g.call("session/view", json!({"sessionId": sid}));
    let msgs = view["request"]["messages"].to_string();
    assert!(msgs.contains("MEMORY-NOTES"), "{msgs}");
    // The user's words stay verbatim beside the notes.
    assert!(msgs.contains("question 1"), "{msgs}");
}

#[test]
fn a_compaction_with_a_focus_asks_the_model_even_with_a_memory() {
    let (mock, mut g, _h, sid, _) =
        with_memory(vec![text("<summary>FOCUSED-SUMMARY</summary>", 100)]);
    let r = g.call(
        "session/compact",
        json!({"sessionId": sid, "focus": "the tests"}),
    );
    assert_eq!(r["compacted"], true, "{r}");
    assert_eq!(mock.rec.count(), 8);
    assert!(last_user_text(&mock.rec.bodies()[7]).contains("the tests"));
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert_ne!(i["lastCompaction"]["summarizer"], "memory", "{i}");
}

#[test]
fn the_users_notes_replace_the_memory_and_the_next_update_carries_them() {
    let (mock, mut g, _h, sid, _) = with_memory(vec![text("six", 55_000), notes("NEWER-NOTES")]);

    let r = g.call(
        "session/memory",
        json!({"sessionId": sid, "text": "MY-NOTES: keep the tests green"}),
    );
    assert_eq!(r["memory"]["source"], "user", "{r}");
    assert_eq!(r["memory"]["text"], "MY-NOTES: keep the tests green");
    assert_eq!(r["memory"]["current"], true);

    // The conversation after the notes grows by more than the step: a long message.
    let long = format!("question 6: {}", "context ".repeat(6_000));
    let t = turn(&mut g, &sid, &long);
    assert_eq!(t["stopReason"], "end_turn", "{t}");
    wait_requests(&mock, 9);
    let ask = last_user_text(&mock.rec.bodies()[8]);
    assert!(ask.contains(MEMORY_START), "{ask}");
    assert!(
        ask.contains("<user_notes>\\nMY-NOTES: keep the tests green\\n</user_notes>"),
        "{ask}"
    );
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let m = g.call("session/memory", json!({"sessionId": sid}));
        if m["memory"]["source"] == "model" {
            assert!(
                m["memory"]["text"]
                    .as_str()
                    .expect("t")
                    .contains("NEWER-NOTES")
            );
            break;
        }
        assert!(Instant::now() < until, "{m}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn bad_memory_requests_are_refused_and_change_nothing() {
    let mock = Mock::start(vec![text("one", 100)]);
    let (mut g, _h, _ws, wid) = setup_env(&mock, WINDOW_100K, MEMORY_ON);
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "hi");
    let r = g.call("session/memory", json!({"sessionId": sid}));
    assert!(r["memory"].is_null(), "{r}");
    let e = call_err(
        &mut g,
        "session/memory",
        json!({"sessionId": sid, "text": 5}),
    );
    assert_eq!(e["code"], -32602, "{e}");
    let e = call_err(
        &mut g,
        "session/memory",
        json!({"sessionId": sid, "text": "x", "extra": 1}),
    );
    assert_eq!(e["code"], -32602, "{e}");
    let big = "n".repeat(100_001);
    let e = call_err(
        &mut g,
        "session/memory",
        json!({"sessionId": sid, "text": big}),
    );
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().expect("m").contains("100000"), "{e}");
    let e = call_err(
        &mut g,
        "session/memory",
        json!({"sessionId": "00000000-0000-4000-8000-000000000000"}),
    );
    assert!(e["code"].as_i64().is_some(), "{e}");
    let r = g.call("session/memory", json!({"sessionId": sid}));
    assert!(r["memory"].is_null(), "{r}");
    // The server still answers.
    assert_eq!(
        g.call("workspace/list", json!({}))["workspaces"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

#[test]
fn an_update_that_fails_or_calls_a_tool_leaves_no_memory_and_the_session_goes_on() {
    let mut replies = history(40_000);
    // The update is refused (a 400, never retried), then, after turn six, calls a tool.
    replies.push(MockReply::status(
        400,
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}),
    ));
    replies.push(text("six", 52_000));
    replies.push(read("toolu_m", "a.txt"));
    replies.push(text("seven", 53_000));
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup_env(&mock, WINDOW_100K, MEMORY_ON);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    wait_requests(&mock, 7);
    let t = turn(&mut g, &sid, "question 6");
    assert_eq!(t["stopReason"], "end_turn", "{t}");
    wait_requests(&mock, 9);
    // Give the tool-calling update its moment to be (not) written.
    std::thread::sleep(Duration::from_millis(200));
    let r = g.call("session/memory", json!({"sessionId": sid}));
    assert!(r["memory"].is_null(), "{r}");
    let t = turn(&mut g, &sid, "question 7");
    assert_eq!(t["stopReason"], "end_turn", "{t}");
    assert!(mock.rec.bodies()[9].to_string().contains("question 7"));
}

#[test]
fn an_idle_session_is_compacted_from_its_memory_before_the_cache_expires() {
    let mut replies = history(40_000);
    replies.push(notes("MEMORY-NOTES"));
    let mock = Mock::start(replies);
    // A one-second cache: the timer fires at nine tenths of it.
    let (mut g, _h, _ws, wid) = setup_env(
        &mock,
        &format!("{WINDOW_100K}[context]\ncache_ttl_secs = 1\n"),
        MEMORY_ON,
    );
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    assert!(wait_idle_compaction(&mut g), "no idle compaction");
    // The memory was current: no summary request.
    assert_eq!(mock.rec.count(), 7);
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(i["lastCompaction"]["trigger"], "idle", "{i}");
    assert_eq!(i["lastCompaction"]["summarizer"], "memory", "{i}");
}

fn exec(home: &Path, env: &[(String, String)], args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_garuda"));
    crate::client::isolated_env(&mut c, home);
    for (k, v) in env {
        c.env(k, v);
    }
    c.env("GARUDA_SESSION_MEMORY", "on")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run garuda exec")
}

#[test]
fn exec_writes_the_memory_before_it_exits_and_a_resume_after_the_cache_expired_starts_from_it() {
    let mut replies = vec![
        text("one", 100),
        text("two", 120),
        text("three", 140),
        text("four", 160),
        text("five", 40_000),
    ];
    replies.push(notes("MEMORY-NOTES"));
    replies.push(text("six", 9_000));
    let mock = Mock::start(replies);
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let config = home.path().join("config/garuda");
    std::fs::create_dir_all(&config).expect("mkdir");
    std::fs::write(
        config.join("config.toml"),
        format!("{WINDOW_100K}[context]\ncache_ttl_secs = 1\n"),
    )
    .expect("config");
    let dir = ws.path().to_str().expect("utf8");
    let env = mock.env();
    for i in 1..=5 {
        let mut args = vec!["exec", "--model", MODEL];
        if i > 1 {
            args.push("--continue");
        }
        let q = format!("question {i}");
        args.extend([dir, q.as_str()]);
        let out = exec(home.path(), &env, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The fifth process waited for the update before it exited.
    assert_eq!(mock.rec.count(), 6);
    assert!(last_user_text(&mock.rec.bodies()[5]).contains(MEMORY_START));
    std::thread::sleep(Duration::from_millis(1_200));
    let out = exec(
        home.path(),
        &env,
        &["exec", "--json", "--continue", dir, "question 6"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        lines
            .iter()
            .any(|e| e.to_string().contains("\"trigger\":\"idle\"")),
        "{lines:?}"
    );
    // One request: the turn's, starting from the notes, without the old answers.
    assert_eq!(mock.rec.count(), 7);
    let sent = mock.rec.bodies()[6]["messages"].to_string();
    assert!(sent.contains("MEMORY-NOTES"), "{sent}");
    assert!(sent.contains("question 6"), "{sent}");
}

#[test]
fn a_collapse_asked_ahead_is_installed_when_due_without_a_wait() {
    // Five turns each read a file of about 10 000 tokens; the counts the mock reports follow
    // the content, so the estimate stays calibrated.
    let mut replies = Vec::new();
    for (i, f) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        replies.push(read(&format!("toolu_{f}"), &format!("{f}.txt")));
        replies.push(text(&format!("read {f}"), 5_000 + 10_000 * (i as u64 + 1)));
    }
    // Turn five ends at 55 000 of 100 000: past nine tenths of the collapse's start (60 000).
    replies.push(text("AHEAD-SUMMARY of the early reads", 55_000));
    replies.push(text("six", 62_000));
    replies.push(text("seven", 30_000));
    let mock = Mock::start(replies);
    // The memory's start is out of reach: only the collapse is asked ahead. Results come
    // whole (the mock's counts would make the tenth-of-the-window cap cut them).
    let (mut g, _h, ws, wid) = setup_env(
        &mock,
        &format!("{WINDOW_100K}[context]\nmemory_start = 0.99\nresult_share = 0\n"),
        MEMORY_ON,
    );
    for f in ["a", "b", "c", "d", "e"] {
        let body = format!("{f} line of the file\n").repeat(1_700);
        std::fs::write(ws.path().join(format!("{f}.txt")), body).expect("write");
    }
    let sid = new_session(&mut g, &wid);
    for i in 1..=5 {
        let r = turn(&mut g, &sid, &format!("question {i}"));
        assert_eq!(r["stopReason"], "end_turn", "turn {i}: {r}");
    }
    wait_requests(&mock, 11);
    let bodies = mock.rec.bodies();
    let ask = last_user_text(&bodies[10]);
    assert!(ask.contains("Summarize the conversation above"), "{ask}");
    // The same fork as the collapse sends: the turn's system prompt and tools.
    assert_eq!(
        strip_cache(&bodies[10]["system"]),
        strip_cache(&bodies[9]["system"])
    );
    assert_eq!(
        strip_cache(&bodies[10]["tools"]),
        strip_cache(&bodies[9]["tools"])
    );
    turn(&mut g, &sid, "question 6");
    // Turn seven starts over the collapse's start: the summary asked ahead goes in, no call.
    let r = turn(&mut g, &sid, "question 7");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    assert_eq!(mock.rec.count(), 13, "no collapse request in turn seven");
    let sent = mock.rec.bodies()[12]["messages"].to_string();
    assert!(sent.contains("AHEAD-SUMMARY"), "{sent}");
    assert!(
        !sent.contains("a line of the file"),
        "the span is collapsed"
    );
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(i["autoCollapses"], 1, "{i}");
}

#[test]
fn an_automatic_compaction_at_the_threshold_installs_the_memory_without_a_wait() {
    // Turn six ends over the threshold (80 000 of 100 000).
    let (mock, mut g, _h, sid, _) = with_memory(vec![text("six", 90_000), text("seven", 12_000)]);
    turn(&mut g, &sid, "question 6");
    let r = turn(&mut g, &sid, "question 7");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    // Turn seven compacted before its request, from the notes: no summary request.
    assert_eq!(mock.rec.count(), 9);
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(i["lastCompaction"]["trigger"], "auto", "{i}");
    assert_eq!(i["lastCompaction"]["summarizer"], "memory", "{i}");
    let sent = mock.rec.bodies()[8]["messages"].to_string();
    assert!(
        sent.contains("MEMORY-NOTES") && sent.contains("question 7"),
        "{sent}"
    );
    let events = g.turn_events();
    assert!(
        events.iter().any(|e| e["kind"] == "compaction"
            && e["message"] == "from the session memory: no model call"),
        "{events:?}"
    );
}
