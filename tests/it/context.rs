//! The context pipeline end to end: compaction (auto, manual, reactive), snip, collapse,
//! session/view, context/inspect and crash safety, through the real binary and the mock model.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::{Framing, Garuda};
use crate::mock_model::*;
use crate::turns::{Mock, setup, shape};

/// Replaces the temporary transcript path and note bodies that vary between runs.
fn redact(v: &Value) -> Value {
    match v {
        Value::String(s) => {
            let mut s = s.clone();
            if let Some(a) = s.find("the full transcript is at ") {
                let from = a + "the full transcript is at ".len();
                if let Some(b) = s[from..].find(".jsonl") {
                    s.replace_range(from..from + b + ".jsonl".len(), "<transcript>");
                }
            }
            Value::String(s)
        }
        Value::Array(a) => Value::Array(a.iter().map(redact).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), redact(v))).collect()),
        other => other.clone(),
    }
}

/// A config giving the mock's model a 100 000-token window.
pub(crate) const WINDOW_100K: &str =
    "[models.\"anthropic/claude-sonnet-4-5\"]\ncontextWindow = 100000\n";

/// A `full-auto` session of the workspace.
pub(crate) fn new_session(g: &mut Garuda, wid: &str) -> String {
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    r["sessionId"].as_str().expect("sessionId").to_string()
}

/// Runs one text turn and answers its result.
pub(crate) fn turn(g: &mut Garuda, sid: &str, text: &str) -> Value {
    g.call(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": text}]}),
    )
}

/// A text answer reporting `input` tokens.
pub(crate) fn text(t: &str, input: u64) -> MockReply {
    MockReply::Sse(anthropic_text(t, MockUsage::new(input, 5)))
}

pub(crate) fn read(id: &str, path: &str) -> MockReply {
    let j = json!({"path": path}).to_string();
    MockReply::Sse(anthropic_tool_use(id, "read_file", &[j.as_str()]))
}

/// Five turns (six model answers): turn 1 reads a.txt, the last answer reports `last_input`.
pub(crate) fn history(last_input: u64) -> Vec<MockReply> {
    vec![
        read("toolu_r1", "a.txt"),
        text("read it", 100),
        text("two", 120),
        text("three", 140),
        text("four", 160),
        text("five", last_input),
    ]
}

pub(crate) fn run_history(g: &mut Garuda, sid: &str) {
    for i in 1..=5 {
        let r = turn(g, sid, &format!("question {i}"));
        assert_eq!(r["stopReason"], "end_turn", "turn {i}: {r}");
    }
}

fn compaction_events(g: &Garuda) -> Vec<Value> {
    g.turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "compaction")
        .collect()
}

fn phases(g: &Garuda) -> Vec<String> {
    compaction_events(g)
        .iter()
        .map(|e| e["phase"].as_str().unwrap_or("?").to_string())
        .collect()
}

pub(crate) fn strip_cache(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| k.as_str() != "cache_control")
                .map(|(k, v)| (k.clone(), strip_cache(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_cache).collect()),
        other => other.clone(),
    }
}

fn all_text(v: &Value) -> String {
    v.to_string()
}

/// The transcript file of session `sid` under the test's isolated state directory.
pub(crate) fn transcript_path(home: &Path, sid: &str) -> std::path::PathBuf {
    find_file(&home.join("state"), &format!("{sid}.jsonl")).expect("transcript file")
}

fn view_messages(g: &mut Garuda, sid: &str) -> Vec<Value> {
    let v = g.call("session/view", json!({"sessionId": sid}));
    v["request"]["messages"]
        .as_array()
        .expect("messages")
        .clone()
}

#[test]
fn stage2_summary_shares_prefix_and_installs_in_order() {
    let mut replies = history(90_000);
    replies.push(text(
        "<analysis>draft notes</analysis><summary>SUMMARY-XYZ: the user asked five questions.</summary>",
        50,
    ));
    replies.push(text("six", 200));
    let mock = Mock::start(replies);
    let (mut g, h, ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    // The instructions change on disk before the compaction: they come back changed.
    std::fs::write(ws.path().join("AGENTS.md"), "Be verbose now.\n").expect("write");
    let r = turn(&mut g, &sid, "question 6");
    assert_eq!(r["stopReason"], "end_turn");

    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 8);
    let summary_req = &bodies[6];
    let main_before = &bodies[5];
    // Same system and tools as the session's main requests.
    assert_eq!(
        strip_cache(&summary_req["system"]),
        strip_cache(&main_before["system"])
    );
    assert_eq!(summary_req["tools"], main_before["tools"]);
    let msgs = summary_req["messages"].as_array().expect("messages");
    let prev = main_before["messages"].as_array().expect("messages");
    // Only the older part goes to the summarizer: the kept steps stay out.
    assert!(msgs.len() < prev.len(), "{} vs {}", msgs.len(), prev.len());
    assert!(
        !all_text(&json!(msgs)).contains("\"five\""),
        "kept steps are not sent"
    );
    // It repeats the main request's messages byte for byte (ids, long results and all),
    // then the instruction follows the older part's last, completed round.
    for (a, b) in prev.iter().zip(msgs.iter()).take(msgs.len() - 1) {
        assert_eq!(strip_cache(a), strip_cache(b));
    }
    let last = msgs.last().expect("last");
    let blocks = last["content"].as_array().expect("blocks");
    let instruction = all_text(blocks.last().expect("instruction"));
    assert!(
        instruction.contains("about to be compacted"),
        "{instruction}"
    );
    assert!(instruction.contains("under about"), "names the size target");
    // The system prompt and the shared messages are read from cache: one marker ends the
    // shared prefix (the provider looks back from it to what the main loop cached), none
    // is on the instruction.
    assert!(all_text(&summary_req["system"]).contains("cache_control"));
    let marked: Vec<usize> = (0..msgs.len())
        .filter(|&i| all_text(&msgs[i]).contains("cache_control"))
        .collect();
    assert_eq!(marked, vec![msgs.len() - 2], "{}", json!(msgs));
    // Its usage is in the transcript, marked as a summary's.
    let transcript = std::fs::read_to_string(transcript_path(h.path(), &sid)).expect("transcript");
    assert!(
        transcript.contains("\"purpose\":\"summary\""),
        "usage recorded"
    );

    // The installed view: summary first, kept steps, the restored file.
    let main_after = &bodies[7];
    assert!(all_text(&main_after["system"]).contains("Be verbose now."));
    assert!(!all_text(&main_before["system"]).contains("Be verbose now."));
    let after = main_after["messages"].as_array().expect("messages");
    let first = all_text(&after[0]);
    assert!(first.contains("continues from an earlier"), "{first}");
    assert!(first.contains("SUMMARY-XYZ"));
    assert!(!first.contains("draft notes"));
    assert!(first.contains(".jsonl"), "names the transcript: {first}");
    let joined = all_text(&main_after["messages"]);
    assert!(joined.contains("five"), "kept steps");
    assert!(joined.contains("question 6"));
    assert!(
        joined.contains("restored_file path=\\\"a.txt\\\""),
        "{joined}"
    );
    // The user's own words come through verbatim, outside the model's summary.
    assert!(first.contains("<first_user_request>"), "{first}");
    assert!(first.contains("question 1"), "{first}");

    // Sorted keys: object order depends on serde_json's `preserve_order`, which is on
    // only when the build includes the ACP types (see src/front/acp).
    insta::with_settings!({sort_maps => true}, {
        insta::assert_json_snapshot!("summary_request", redact(&shape(summary_req)));
    });
    // Sorted keys: object order depends on serde_json's `preserve_order`, which is on
    // only when the build includes the ACP types (see src/front/acp).
    insta::with_settings!({sort_maps => true}, {
        insta::assert_json_snapshot!("post_compact_request", redact(&shape(main_after)));
    });

    let p = phases(&g);
    assert!(p.contains(&"started".to_string()), "{p:?}");
    assert!(p.contains(&"summary".to_string()));
    let fin = compaction_events(&g)
        .into_iter()
        .find(|e| e["phase"] == "finished")
        .expect("finished");
    assert_eq!(fin["trigger"], "auto");
    assert!(
        fin["tokensAfter"].as_u64().expect("after") < fin["tokensBefore"].as_u64().expect("before")
    );

    // The UI history keeps everything, with the compacted range marked.
    let h = g.call("session/messages", json!({"sessionId": sid}));
    let hm = h["messages"].as_array().expect("messages");
    assert!(hm.iter().any(|m| m["removed"] == "compacted"));
    assert!(hm.iter().any(|m| m["meta"] == "summary"));
    // Kept steps are marked as copies of messages the history already holds, so a client
    // renders each step once.
    let copies: Vec<&Value> = hm.iter().filter(|m| m["copyOf"].is_string()).collect();
    assert!(!copies.is_empty(), "kept steps are copies");
    for c in &copies {
        let original = hm
            .iter()
            .find(|m| m["id"] == c["copyOf"])
            .expect("the original is in the history");
        assert!(original["copyOf"].is_null(), "points at the first original");
        assert_eq!(original["content"], c["content"]);
    }
    let summary = hm.iter().find(|m| m["meta"] == "summary").expect("summary");
    assert!(summary["copyOf"].is_null());
}

/// Five turns, the first reading a ~30 000-character file, in a 10 000-token window where one
/// result may fill it (so the read comes back whole): the next step's compaction trims that
/// result. Returns the mock (its seventh answer is "six"), the server, its home, the
/// workspace and the session.
pub(crate) fn ready_to_trim() -> (Mock, Garuda, tempfile::TempDir, tempfile::TempDir, String) {
    let big: String = (0..300)
        .map(|i| format!("line {i:04} {}\n", "x".repeat(90)))
        .collect();
    let replies = vec![
        read("toolu_big", "big.txt"),
        text("read it", 100),
        text("two", 120),
        text("three", 140),
        text("four", 160),
        text("five", 8_500),
        text("six", 200),
    ];
    let mock = Mock::start(replies);
    let (mut g, home, ws, wid) = setup(
        &mock,
        "[models.\"anthropic/claude-sonnet-4-5\"]\ncontextWindow = 10000\n[context]\nresult_share = 1.0\n",
    );
    std::fs::write(ws.path().join("big.txt"), &big).expect("write");
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    (mock, g, home, ws, sid)
}

#[test]
fn stage1_alone_when_trimming_reaches_the_target() {
    let (mock, mut g, _h, _ws, sid) = ready_to_trim();
    turn(&mut g, &sid, "question 6");
    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 7, "no summary call");
    let p = phases(&g);
    assert!(p.contains(&"stage1".to_string()), "{p:?}");
    assert!(!p.contains(&"summary".to_string()));
    let msgs = bodies[6]["messages"].as_array().expect("messages");
    let result = msgs
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == "toolu_big")
        .expect("result");
    assert!(result.to_string().len() < 2_000, "trimmed: {result}");
}

#[test]
fn prompt_too_long_during_the_summary_learns_the_limit_and_splits() {
    let mut replies = history(50_000);
    // The provider's real limit is below the configured 100 000.
    replies.push(MockReply::status(
        400,
        json!({"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 58000 tokens > 40000 maximum"}}),
    ));
    replies.push(text("<summary>SHORTER</summary>", 50));
    replies.push(text("six", 200));
    let mock = Mock::start(replies);
    let (mut g, h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    // Over the threshold of the learned limit, not the configured window: a manual compaction.
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 8);
    // The retry is a plain request with the summary system prompt; nothing is dropped.
    let retry = &bodies[7];
    assert!(all_text(&retry["system"]).contains("context compaction assistant"));
    // Only the file-reading tool's schema rides along, as the seed's runtime keeps it.
    assert_eq!(
        retry["tools"].as_array().map(Vec::len),
        Some(1),
        "{}",
        retry["tools"]
    );
    assert_eq!(retry["tools"][0]["name"], "read_file");
    assert!(all_text(&retry["messages"]).contains("question 1"));
    assert!(!all_text(&retry["messages"]).contains("[earlier conversation truncated]"));
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(i["learnedLimit"], 40_000, "{i}");
    assert_eq!(i["window"], 40_000);
    assert_eq!(i["configuredWindow"], 100_000);
    turn(&mut g, &sid, "question 6");
    let bodies = mock.rec.bodies();
    assert!(all_text(&bodies[8]["messages"][0]).contains("SHORTER"));
    // The learned limit is in the transcript: a reload keeps it.
    let transcript = std::fs::read_to_string(transcript_path(h.path(), &sid)).expect("transcript");
    assert!(
        transcript.contains("\"type\":\"context_limit\""),
        "{transcript}"
    );
}

#[test]
fn three_failures_pause_auto_compaction_and_tell_the_client() {
    let bad = || {
        MockReply::status(
            400,
            json!({"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}),
        )
    };
    let mut replies = history(90_000);
    for _ in 0..3 {
        // The fork fails, then the regular request: one failed compaction.
        replies.push(bad());
        replies.push(bad());
        replies.push(text("still here", 90_000));
    }
    replies.push(text("no compaction tried", 90_000));
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    for i in 6..=9 {
        let r = turn(&mut g, &sid, &format!("question {i}"));
        assert_eq!(r["stopReason"], "end_turn", "{r}");
    }
    assert_eq!(mock.rec.count(), 16);
    let p = phases(&g);
    assert_eq!(p.iter().filter(|x| *x == "failed").count(), 3, "{p:?}");
    assert_eq!(p.iter().filter(|x| *x == "paused").count(), 1, "{p:?}");
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(i["paused"], true);
    // The session is unchanged by the failures.
    let h = g.call("session/messages", json!({"sessionId": sid}));
    assert!(
        h["messages"]
            .as_array()
            .expect("m")
            .iter()
            .all(|m| m.get("removed").is_none())
    );
}

#[test]
fn extractive_handoff_when_the_model_cannot_summarize() {
    let mut replies = history(90_000);
    // Neither the fork nor the regular request gives a summary.
    replies.push(text("<analysis>only a draft</analysis>", 50));
    replies.push(text("<analysis>a draft again</analysis>", 50));
    replies.push(text("six", 200));
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    turn(&mut g, &sid, "question 6");
    let bodies = mock.rec.bodies();
    let first = all_text(&bodies[8]["messages"][0]);
    assert!(first.contains("Extractive handoff"), "{first}");
    assert!(
        first.contains("question 1"),
        "user messages verbatim: {first}"
    );
    let fin = compaction_events(&g)
        .into_iter()
        .find(|e| e["phase"] == "finished")
        .expect("finished");
    assert_eq!(fin["message"], "handoff");
}

#[test]
fn reactive_compaction_after_prompt_too_long_then_the_step_succeeds() {
    let mut replies = history(500);
    replies.push(MockReply::prompt_too_long_anthropic());
    replies.push(text("<summary>REACTIVE</summary>", 50));
    replies.push(text("six", 200));
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let r = turn(&mut g, &sid, "question 6");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 9);
    assert!(all_text(&bodies[8]["messages"][0]).contains("REACTIVE"));
    let fin = compaction_events(&g)
        .into_iter()
        .find(|e| e["phase"] == "finished")
        .expect("finished");
    assert_eq!(fin["trigger"], "reactive");
}

#[test]
fn compacts_mid_turn_when_usage_passes_the_window_between_tool_steps() {
    let mut replies = Vec::new();
    for i in 1..=4 {
        replies.push(read(&format!("toolu_{i}"), "a.txt"));
    }
    replies.push(MockReply::Sse(
        AnthropicSse::new(MockUsage::new(20_000, 10))
            .tool_use("toolu_5", "read_file", &["{\"path\": \"a.txt\"}"])
            .finish("tool_use"),
    ));
    replies.push(text("<summary>MID-TURN</summary>", 50));
    replies.push(text("done", 300));
    let mock = Mock::start(replies);
    // A window the fixed part fits (a smaller one is refused before anything is sent).
    let (mut g, _h, _ws, wid) = setup(
        &mock,
        "[models.\"anthropic/claude-sonnet-4-5\"]\ncontextWindow = 8000\n",
    );
    let sid = new_session(&mut g, &wid);
    let r = turn(&mut g, &sid, "read a.txt five times");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 7);
    assert!(all_text(&bodies[6]["messages"][0]).contains("MID-TURN"));
    assert!(phases(&g).contains(&"finished".to_string()));
}

#[test]
fn cancel_during_compaction_leaves_the_session_unchanged() {
    let mut replies = history(100);
    replies.push(MockReply::Hang(Duration::from_secs(20)));
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let before = g.call("session/messages", json!({"sessionId": sid}));
    let view_before = view_messages(&mut g, &sid);
    let id = g.send_request("session/compact", json!({"sessionId": sid}));
    // Wait until the summary call is out, then cancel.
    for _ in 0..200 {
        if mock.rec.count() == 7 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    g.call("turn/cancel", json!({"sessionId": sid}));
    let r = g.response(&json!(id));
    assert_eq!(
        r["error"]["code"], -32800,
        "a cancelled manual compaction is an error: {r}"
    );
    let after = g.call("session/messages", json!({"sessionId": sid}));
    assert_eq!(before, after);
    assert_eq!(view_before, view_messages(&mut g, &sid));
}

#[test]
fn manual_compact_restores_files_within_budgets() {
    // Seven files read in one step; one is over the per-file budget.
    let mut calls = AnthropicSse::new(MockUsage::new(50, 10));
    for i in 0..7 {
        let j = json!({"path": format!("f{i}.txt")}).to_string();
        calls = calls.tool_use(&format!("toolu_f{i}"), "read_file", &[j.as_str()]);
    }
    let mut replies = vec![MockReply::Sse(calls.finish("tool_use"))];
    replies.push(text("read them", 100));
    for i in 2..=5 {
        replies.push(text(&format!("answer {i}"), 20_000));
    }
    replies.push(text("<summary>MANUAL</summary>", 50));
    let mock = Mock::start(replies);
    let (mut g, _h, ws, wid) = setup(&mock, WINDOW_100K);
    for i in 0..7 {
        let body = if i == 6 {
            "y".repeat(30_000)
        } else {
            format!("content of file {i}\n")
        };
        std::fs::write(ws.path().join(format!("f{i}.txt")), body).expect("write");
    }
    std::fs::write(
        ws.path().join("AGENTS.md"),
        "Be brief.\n\n## Compact Instructions\nKeep every file name verbatim.\n\n## Other\nNot this.\n",
    )
    .expect("write");
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let r = g.call(
        "session/compact",
        json!({"sessionId": sid, "focus": "the files"}),
    );
    assert_eq!(r["compacted"], true, "{r}");
    assert_eq!(r["kind"], "summary");
    // The focus text reaches the summary request.
    let summary_req = mock.rec.bodies()[6].clone();
    let instruction = all_text(
        summary_req["messages"]
            .as_array()
            .expect("m")
            .last()
            .expect("last"),
    );
    assert!(instruction.contains("the files"), "{instruction}");
    assert!(
        instruction.contains("Keep every file name verbatim."),
        "{instruction}"
    );
    assert!(!instruction.contains("Not this."));
    let msgs = view_messages(&mut g, &sid);
    let restored: Vec<String> = msgs
        .iter()
        .map(all_text)
        .filter(|t| t.contains("restored_file path"))
        .collect();
    assert!(!restored.is_empty() && restored.len() <= 5, "{restored:?}");
    assert!(restored.iter().all(|t| !t.contains(&"y".repeat(25_000))));
    // The file over the per-file budget comes back as its path only.
    assert!(
        restored
            .iter()
            .any(|t| t.contains("f6.txt") && t.contains("too large")),
        "{restored:?}"
    );
    // $/progress begin … end.
    let prog = g.wait_method("$/progress");
    assert_eq!(prog["params"]["value"]["kind"], "begin");
}

#[test]
fn manual_compact_with_few_steps_has_nothing_to_do() {
    let mock = Mock::start(vec![text("one", 100)]);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "hi");
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], false);
    assert!(
        r["message"]
            .as_str()
            .expect("msg")
            .contains("nothing to compact")
    );
}

#[test]
fn snip_collapse_view_and_inspect() {
    let mut replies = history(100);
    replies.push(text("collapsed summary from the model", 30));
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let h = g.call("session/messages", json!({"sessionId": sid}));
    let ids: Vec<(String, String, String)> = h["messages"]
        .as_array()
        .expect("m")
        .iter()
        .map(|m| {
            (
                m["id"].as_str().expect("id").to_string(),
                m["role"].as_str().expect("role").to_string(),
                m.to_string(),
            )
        })
        .collect();
    // Snip "question 3" (a plain user message).
    let q3 = ids
        .iter()
        .find(|(_, _, t)| t.contains("question 3"))
        .expect("q3")
        .0
        .clone();
    let r = g.call(
        "session/snip",
        json!({"sessionId": sid, "messageIds": [q3]}),
    );
    assert_eq!(r["removed"][0], json!(q3));
    let v = view_messages(&mut g, &sid);
    assert!(!all_text(&json!(v)).contains("question 3"));
    // Snipping the tool call's half is protected.
    let use_msg = ids
        .iter()
        .find(|(_, role, t)| role == "assistant" && t.contains("toolu_r1"))
        .expect("use")
        .0
        .clone();
    let r = g.call(
        "session/snip",
        json!({"sessionId": sid, "messageIds": [use_msg]}),
    );
    assert_eq!(r["protected"][0], json!(use_msg));

    // Collapse question 4 .. answer four, summary from the model.
    let q4 = ids
        .iter()
        .find(|(_, _, t)| t.contains("question 4"))
        .expect("q4")
        .0
        .clone();
    let a4 = ids
        .iter()
        .find(|(_, _, t)| t.contains("\"four\""))
        .expect("a4")
        .0
        .clone();
    let before = g.call("session/view", json!({"sessionId": sid}));
    let r = g.call(
        "session/collapse",
        json!({"sessionId": sid, "fromId": q4, "toId": a4}),
    );
    // The model's summary, then the span's user messages verbatim (Garuda's, not the model's).
    let summary = r["summary"].as_str().expect("summary");
    assert!(
        summary.starts_with("collapsed summary from the model"),
        "{summary}"
    );
    assert!(summary.contains("question 4"), "{summary}");
    // The collapse request is a fork of the main one: the same system prompt and tools, the
    // next main request's messages byte for byte up to the span's end, the instruction after
    // them and no marker on it (the provider reads the prefix and writes nothing new).
    let main = &before["request"];
    let fork = &mock.rec.bodies()[6];
    assert_eq!(strip_cache(&fork["system"]), strip_cache(&main["system"]));
    assert_eq!(strip_cache(&fork["tools"]), strip_cache(&main["tools"]));
    let fm = fork["messages"].as_array().expect("fork messages");
    let mm = main["messages"].as_array().expect("main messages");
    let shared = fm.len() - 1;
    assert_eq!(
        strip_cache(&json!(fm[..shared])),
        strip_cache(&json!(mm[..shared]))
    );
    let ask = fm[shared].to_string();
    assert!(ask.contains("Summarize the conversation above"), "{ask}");
    assert!(ask.contains("question 4"), "the span is named: {ask}");
    assert!(!ask.contains("cache_control"), "{ask}");
    assert!(
        fm[shared - 1].to_string().contains("cache_control"),
        "the end of the shared prefix is marked"
    );
    let v = json!(view_messages(&mut g, &sid));
    assert!(all_text(&v).contains("collapsed summary from the model"));
    assert_eq!(
        all_text(&v).matches("question 4").count(),
        1,
        "only in the collapse"
    );

    let view = g.call("session/view", json!({"sessionId": sid}));
    assert!(view["cacheMarkers"].as_u64().expect("markers") <= 4);
    assert!(all_text(&view["request"]).contains("cache_control"));
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(i["window"], 100_000);
    assert_eq!(i["threshold"], 80_000);
    assert!(i["tools"].as_u64().expect("tools") > 0);
    assert!(i["instructions"].as_u64().expect("instr") > 0);
    assert_eq!(i["paused"], false);
    // Usage per purpose: the turns' requests and the collapse's, each counted once.
    let rows = i["usageByPurpose"].as_array().expect("usageByPurpose");
    let purposes: Vec<&str> = rows.iter().filter_map(|r| r["purpose"].as_str()).collect();
    assert_eq!(purposes, ["main", "collapse"], "{rows:?}");
    assert_eq!(rows[0]["requests"], 6);
    assert_eq!(rows[1]["requests"], 1);
    assert!(rows[1]["usage"]["outputTokens"].as_u64().expect("out") > 0);

    let h = g.call("session/messages", json!({"sessionId": sid}));
    let removed: Vec<&str> = h["messages"]
        .as_array()
        .expect("m")
        .iter()
        .filter_map(|m| m["removed"].as_str())
        .collect();
    assert!(removed.contains(&"snip"));
    assert!(removed.contains(&"collapsed"));
}

fn kill9(g: &mut Garuda) {
    let _ = g.child.kill();
    let _ = g.child.wait();
}

fn restart(home: &Path, mock: &Mock) -> Garuda {
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home, &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    g
}

#[test]
fn kill_during_a_turn_and_during_a_compaction_then_resume() {
    let mut replies = history(100);
    replies.push(MockReply::Hang(Duration::from_secs(30)));
    let mock = Mock::start(replies);
    let (mut g, home, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let acked = g.call("session/messages", json!({"sessionId": sid}));
    let live_view = view_messages(&mut g, &sid);
    // During a compaction (the summary call hangs).
    g.send_request("session/compact", json!({"sessionId": sid}));
    for _ in 0..200 {
        if mock.rec.count() == 7 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    kill9(&mut g);
    let mut g = restart(home.path(), &mock);
    let l = g.call("session/load", json!({"sessionId": sid}));
    assert_eq!(l["messageCount"], acked["total"]);
    let after = g.call("session/messages", json!({"sessionId": sid}));
    assert_eq!(after["messages"], acked["messages"]);
    let v = view_messages(&mut g, &sid);
    assert_eq!(
        v.len(),
        12,
        "five turns (one with a tool step) and nothing else"
    );
    assert_eq!(v, live_view, "the resumed view equals the live one");

    // During a turn: the user message is acknowledged once the request is out.
    g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "question 6"}]}),
    );
    for _ in 0..200 {
        if mock.rec.count() == 8 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    kill9(&mut g);
    let _ = wid;
    let mut g = restart(home.path(), &mock);
    g.call("session/load", json!({"sessionId": sid}));
    let h = g.call("session/messages", json!({"sessionId": sid}));
    assert!(all_text(&h).contains("question 6"));
    let v = view_messages(&mut g, &sid);
    assert!(all_text(&json!(v)).contains("question 6"));
    assert_eq!(v[0]["role"], "user");
}

/// The first file named `name` below `dir`.
pub(crate) fn find_file(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = find_file(&p, name) {
                return Some(f);
            }
        } else if p.file_name().and_then(|n| n.to_str()) == Some(name) {
            return Some(p);
        }
    }
    None
}

#[test]
fn time_based_microcompact_after_a_long_pause_is_recorded_and_resumed() {
    let mut calls = AnthropicSse::new(MockUsage::new(50, 10));
    for i in 0..7 {
        calls = calls.tool_use(
            &format!("toolu_m{i}"),
            "read_file",
            &["{\"path\": \"a.txt\"}"],
        );
    }
    let mock = Mock::start(vec![
        MockReply::Sse(calls.finish("tool_use")),
        text("read seven times", 100),
        text("after the pause", 100),
    ]);
    let (mut g, home, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "read a.txt seven times");
    kill9(&mut g);
    // Two hours pass: shift every record's time back.
    let path = find_file(&home.path().join("state"), &format!("{sid}.jsonl")).expect("transcript");
    let two_hours = 2 * 60 * 60 * 1000u64;
    let shifted: String = std::fs::read_to_string(&path)
        .expect("read")
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).expect("json");
            if let Some(t) = v["time"].as_u64() {
                v["time"] = json!(t - two_hours);
            }
            format!("{v}\n")
        })
        .collect();
    std::fs::write(&path, shifted).expect("write");
    let mut g = restart(home.path(), &mock);
    turn(&mut g, &sid, "back again");
    let body = &mock.rec.bodies()[2];
    let cleared = all_text(body)
        .matches("[Old tool result content cleared]")
        .count();
    assert_eq!(cleared, 2, "all but the last five results cleared");
    let log = std::fs::read_to_string(&path).expect("read");
    assert!(log.contains("\"type\":\"microcompact\""));
    // Resume replays the record: the view after another restart is the same.
    let live = view_messages(&mut g, &sid);
    kill9(&mut g);
    let mut g = restart(home.path(), &mock);
    assert_eq!(view_messages(&mut g, &sid), live);
}

#[test]
fn the_model_snips_a_message_by_its_tag() {
    let first = Mock::start(vec![text("one", 100), text("two", 100)]);
    let (mut g, home, _ws, wid) = setup(&first, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "the task");
    turn(&mut g, &sid, "secret question");
    assert!(
        first.rec.bodies()[0]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .any(|t| t["name"] == "snip")
    );
    // The tag the model saw on the second user message (the first one states the task and
    // is never snipped).
    let tag = first.rec.bodies()[1]["messages"][2]["content"]
        .as_array()
        .expect("content")
        .iter()
        .filter_map(|b| b["text"].as_str())
        .find(|t| t.starts_with("[id:"))
        .expect("tag")
        .trim_start_matches("[id:")
        .trim_end_matches(']')
        .to_string();
    kill9(&mut g);
    let input = json!({"ids": [tag, "zzzzzzzz"]}).to_string();
    let second = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use("toolu_s", "snip", &[input.as_str()])),
        text("snipped", 100),
    ]);
    let mut g = restart(home.path(), &second);
    let r = turn(&mut g, &sid, "forget the first question");
    assert_eq!(r["stopReason"], "end_turn");
    let out = g
        .turn_events()
        .into_iter()
        .find(|e| e["kind"] == "toolCallFinished")
        .expect("snip ran");
    let out = out["output"].as_str().expect("output");
    assert!(out.contains("Removed 1 message"), "{out}");
    assert!(out.contains("Unknown ids: zzzzzzzz"), "{out}");
    let last = &second.rec.bodies()[1];
    assert!(!all_text(&last["messages"]).contains("secret question"));
    let h = g.call("session/messages", json!({"sessionId": sid}));
    assert_eq!(h["messages"][3]["removed"], "snip", "{h}");
}

#[test]
fn oversized_tool_results_go_to_a_side_file_that_read_file_opens() {
    let big: String = (0..100)
        .map(|i| format!("row {i:03} {}\n", "z".repeat(40)))
        .collect();
    let first = Mock::start(vec![read("toolu_big", "big.txt"), text("seen", 100)]);
    let (mut g, home, ws, wid) = setup(
        &first,
        "[context]\ntool_result_max_chars = 1000\ntool_result_preview_chars = 100\n",
    );
    std::fs::write(ws.path().join("big.txt"), &big).expect("write");
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "read big.txt");
    let side = find_file(&home.path().join("state"), "toolu_big.txt").expect("side file");
    assert!(
        std::fs::read_to_string(&side)
            .expect("side")
            .contains("row 099")
    );
    // The model saw a preview and the path, not the whole result.
    let seen = all_text(&first.rec.bodies()[1]["messages"]);
    assert!(seen.contains(&side.display().to_string()), "{seen}");
    assert!(!seen.contains("row 099"));
    kill9(&mut g);
    let input = json!({"path": side.display().to_string()}).to_string();
    let second = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "toolu_side",
            "read_file",
            &[input.as_str()],
        )),
        text("done", 100),
    ]);
    let mut g = restart(home.path(), &second);
    turn(&mut g, &sid, "open the side file");
    let out = g
        .turn_events()
        .into_iter()
        .find(|e| e["kind"] == "toolCallFinished")
        .expect("read ran");
    assert_eq!(out["isError"], false, "{out}");
    assert!(out["output"].as_str().expect("out").contains("row 099"));
}

#[test]
fn view_and_inspect_answer_while_a_turn_runs() {
    let mut replies = history(100);
    replies.push(MockReply::Hang(Duration::from_secs(20)));
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "question 6"}]}),
    );
    for _ in 0..200 {
        if mock.rec.count() == 7 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert!(i["contextTokens"].as_u64().expect("tokens") > 0);
    let v = g.call("session/view", json!({"sessionId": sid}));
    assert!(all_text(&v["request"]).contains("question 6"));
    g.call("turn/cancel", json!({"sessionId": sid}));
}

#[test]
fn cancelling_a_turn_during_its_auto_compaction_changes_nothing() {
    let mut replies = history(90_000);
    replies.push(MockReply::Hang(Duration::from_secs(20)));
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let id = g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "question 6"}]}),
    );
    for _ in 0..200 {
        if mock.rec.count() == 7 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    g.call("turn/cancel", json!({"sessionId": sid}));
    let r = g.response(&json!(id));
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    assert!(phases(&g).contains(&"failed".to_string()));
    let h = g.call("session/messages", json!({"sessionId": sid}));
    let msgs = h["messages"].as_array().expect("m");
    assert_eq!(
        msgs.len(),
        14,
        "the start note, five turns and the new question"
    );
    assert!(msgs.iter().all(|m| m.get("removed").is_none()));
}

#[test]
fn a_summary_over_its_target_is_asked_once_to_shrink() {
    let mut replies = history(90_000);
    let long = format!("<summary>LONG {}</summary>", "detail ".repeat(30_000));
    replies.push(text(&long, 50));
    replies.push(text("<summary>SHORT-ONE</summary>", 20));
    replies.push(text("six", 200));
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    turn(&mut g, &sid, "question 6");
    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 9, "main, summary, shrink, main");
    let shrink = all_text(&bodies[7]);
    assert!(shrink.contains("the target is"), "{shrink}");
    assert!(shrink.contains("LONG detail"));
    let first = all_text(&bodies[8]["messages"][0]);
    assert!(first.contains("SHORT-ONE"), "{first}");
    assert!(!first.contains("LONG detail"));
}

#[test]
fn a_message_larger_than_the_window_is_refused_with_the_sizes() {
    let mock = Mock::start(vec![text("fine", 100)]);
    let (mut g, _h, _ws, wid) = setup(
        &mock,
        "[models.\"anthropic/claude-sonnet-4-5\"]\ncontextWindow = 10000\n",
    );
    let sid = new_session(&mut g, &wid);
    let huge = "word ".repeat(12_000);
    let r = g.request(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": huge}]}),
    );
    assert_eq!(r["error"]["code"], -32060, "{r}");
    assert_eq!(r["error"]["data"]["kind"], "messageTooLarge");
    assert_eq!(r["error"]["data"]["windowTokens"], 10_000);
    assert!(r["error"]["data"]["messageTokens"].as_u64().expect("n") > 10_000);
    assert_eq!(mock.rec.count(), 0, "nothing was sent");
    // Nothing was appended, and the session goes on.
    let h = g.call("session/messages", json!({"sessionId": sid}));
    let msgs = h["messages"].as_array().expect("m");
    assert!(
        msgs.iter().all(|m| m["meta"] == "git_state"),
        "only the session-start note: {h}"
    );
    let ok = turn(&mut g, &sid, "a short one");
    assert_eq!(ok["stopReason"], "end_turn");
}

/// A manual compaction whose fork answers with `fork`: the regular request follows and its
/// summary is installed, recorded as `regular` in the transcript and in `context/inspect`.
fn fork_fails_then_regular(fork: Vec<MockReply>) {
    let tries = fork.len();
    let mut replies = history(20_000);
    replies.extend(fork);
    replies.push(text("<summary>REGULAR SUMMARY</summary>", 40));
    replies.push(text("six", 200));
    let mock = Mock::start(replies);
    let (mut g, home, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    let bodies = mock.rec.bodies();
    assert_eq!(
        bodies.len(),
        7 + tries,
        "the fork, then the regular request"
    );
    assert_eq!(
        bodies[6]["tools"], bodies[5]["tools"],
        "the fork shares the tools"
    );
    let regular = &bodies[6 + tries];
    assert!(all_text(&regular["system"]).contains("context compaction assistant"));
    assert_eq!(regular["tools"][0]["name"], "read_file");
    assert!(regular.get("thinking").is_none(), "thinking is off");
    let said = compaction_events(&g)
        .iter()
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        said.contains("asking again with the summary prompt"),
        "{said}"
    );
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(i["lastCompaction"]["summarizer"], "regular", "{i}");
    assert_eq!(i["lastCompaction"]["trigger"], "manual");
    assert!(
        i["lastCompaction"]["usage"]["outputTokens"]
            .as_u64()
            .is_some(),
        "{i}"
    );
    let log = std::fs::read_to_string(transcript_path(home.path(), &sid)).expect("transcript");
    assert!(log.contains("\"summarizer\":\"regular\""), "{log}");
    turn(&mut g, &sid, "question 6");
    assert!(all_text(&mock.rec.bodies()[7 + tries]["messages"][0]).contains("REGULAR SUMMARY"));
}

/// An HTTP 500 answer, as often as the client tries (the first try and two retries).
fn server_errors(message: &str) -> Vec<MockReply> {
    let e = json!({"type":"error","error":{"type":"api_error","message": message}});
    (0..3).map(|_| MockReply::status(500, e.clone())).collect()
}

#[test]
fn the_summary_comes_by_the_regular_request_when_the_fork_calls_a_tool() {
    let call = json!({"path": "a.txt"}).to_string();
    fork_fails_then_regular(vec![MockReply::Sse(anthropic_tool_use(
        "toolu_f",
        "read_file",
        &[call.as_str()],
    ))]);
}

#[test]
fn the_summary_comes_by_the_regular_request_when_the_fork_answers_500() {
    fork_fails_then_regular(server_errors("Internal server error"));
}

#[test]
fn a_manual_compaction_fails_only_when_every_path_failed_with_the_last_error() {
    let mut replies = history(20_000);
    replies.extend(server_errors("fork went wrong"));
    replies.push(MockReply::status(
        400,
        json!({"type":"error","error":{"type":"invalid_request_error","message":"regular went wrong"}}),
    ));
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let before = g.call("session/messages", json!({"sessionId": sid}));
    let r = g.request("session/compact", json!({"sessionId": sid}));
    assert!(r["error"].to_string().contains("regular went wrong"), "{r}");
    let after = g.call("session/messages", json!({"sessionId": sid}));
    assert_eq!(before, after, "the session is unchanged");
}

/// The regular summary request keeps the file reader's schema for its shape but sends
/// `tool_choice: none`, so a pending "please read X" in the older part cannot get a read
/// instead of the summary; the fork (the main request's bytes) sends none.
#[test]
fn the_regular_summary_request_may_not_call_a_tool() {
    let mut replies = history(20_000);
    replies.push(MockReply::Sse(anthropic_tool_use(
        "toolu_fork",
        "read_file",
        &[r#"{"path":"big4.txt"}"#],
    )));
    replies.push(MockReply::Sse(anthropic_text(
        "<summary>THE-SUMMARY of the work so far</summary>",
        MockUsage::new(500, 60),
    )));
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    let bodies = mock.rec.bodies();
    let (fork, regular) = (&bodies[bodies.len() - 2], &bodies[bodies.len() - 1]);
    assert!(fork.get("tool_choice").is_none(), "{fork}");
    // The fork's older part ends on a completed round: the instruction is a message of its
    // own after the assistant's answer, never joined to the person's pending request.
    let msgs = fork["messages"].as_array().expect("messages");
    let (answer, last) = (&msgs[msgs.len() - 2], &msgs[msgs.len() - 1]);
    assert_eq!(answer["role"], "assistant", "{fork}");
    assert_eq!(last["content"].as_array().map(Vec::len), Some(1), "{last}");
    assert!(
        last["content"][0]["text"].as_str().is_some_and(
            |t| t.starts_with("<garuda_note>The conversation above is about to be compacted")
        ),
        "{last}"
    );
    assert_eq!(regular["tool_choice"], json!({"type": "none"}), "{regular}");
    assert!(
        regular["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "read_file")),
        "{regular}"
    );
}

/// A manual compaction whose model answers every summary request with a tool call (a
/// pending "read X" invites one) fails as the provider's failure, -32052 with
/// `data.kind: "noSummary"`, never -32602 (reserved for params of the wrong shape), and the
/// session is unchanged.
#[test]
fn a_manual_compaction_without_a_summary_is_the_models_failure_not_bad_params() {
    let mut replies = history(20_000);
    for id in ["toolu_fork", "toolu_regular"] {
        replies.push(MockReply::Sse(anthropic_tool_use(
            id,
            "read_file",
            &[r#"{"path":"big4.txt"}"#],
        )));
    }
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let before = g.call("session/messages", json!({"sessionId": sid}));
    let r = g.request("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["error"]["code"], -32052, "{r}");
    assert_eq!(r["error"]["data"]["kind"], "noSummary", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("the session is unchanged"),
        "{r}"
    );
    let after = g.call("session/messages", json!({"sessionId": sid}));
    assert_eq!(before, after, "the session is unchanged");
}

/// A summary that ends on the output limit is asked once for half the size; cut again, it is
/// not installed: the extractive handoff is. The answer, `context/inspect` and the
/// `compaction` event give the same tokensAfter.
#[test]
fn a_cut_summary_is_never_installed_and_the_three_tokens_after_agree() {
    let cut = |t: &str| {
        MockReply::Sse(
            AnthropicSse::new(MockUsage::new(500, 4_000))
                .text(t)
                .finish("max_tokens"),
        )
    };
    let mut replies = history(60_000);
    replies.push(cut("<summary>CUT-ONE and then"));
    replies.push(cut("<summary>CUT-TWO and then"));
    let mock = Mock::start(replies);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    assert_eq!(r["kind"], "handoff", "{r}");
    let bodies = mock.rec.bodies();
    assert_eq!(
        bodies.len(),
        8,
        "one summary request, then one asking for less"
    );
    let first = all_text(&bodies[6]["messages"]);
    let second = all_text(&bodies[7]["messages"]);
    assert!(first.contains("under about 10000 tokens"), "{first}");
    assert!(second.contains("under about 5000 tokens"), "{second}");
    // Its own output budget, not the session's.
    assert!(bodies[6]["max_tokens"].as_u64().unwrap_or(0) >= 10_000);
    let view = view_messages(&mut g, &sid);
    let shown = all_text(&json!(view));
    assert!(
        !shown.contains("CUT-ONE") && !shown.contains("CUT-TWO"),
        "{shown}"
    );
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(
        inspect["lastCompaction"]["tokensAfter"], r["tokensAfter"],
        "{inspect}"
    );
    let finished = compaction_events(&g)
        .into_iter()
        .find(|e| e["phase"] == "finished")
        .expect("finished");
    assert_eq!(finished["tokensAfter"], r["tokensAfter"], "{finished}");
}

/// A main request that reads less from the cache than the previous one left there says
/// why, in its `usage` event and in `context/inspect` (the newest misses and the ratios).
#[test]
fn every_cache_miss_has_a_cause_in_the_usage_event_and_inspect() {
    let cached = |t: &str, read: u64, write: u64| {
        MockReply::Sse(anthropic_text(
            t,
            MockUsage {
                input: 10,
                output: 5,
                cache_creation: write,
                cache_read: read,
            },
        ))
    };
    let mock = Mock::start(vec![
        cached("one", 0, 1_000),
        cached("two", 1_000, 100),
        // Nothing Garuda sent changed, yet nothing was read: the provider's side.
        cached("three", 0, 1_200),
    ]);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    for q in ["q1", "q2", "q3"] {
        let r = turn(&mut g, &sid, q);
        assert_eq!(r["stopReason"], "end_turn", "{r}");
    }
    let usage: Vec<Value> = g
        .turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "usage")
        .collect();
    assert_eq!(usage.len(), 3, "{usage:?}");
    assert_eq!(
        usage[0]["cacheMiss"]["cause"], "firstRequest",
        "{}",
        usage[0]
    );
    assert!(usage[1].get("cacheMiss").is_none(), "{}", usage[1]);
    let ratio = usage[1]["cacheHitRatio"].as_f64().expect("ratio");
    assert!((ratio - 1_000.0 / 1_110.0).abs() < 1e-6, "{ratio}");
    assert_eq!(usage[2]["cacheMiss"]["cause"], "unknown", "{}", usage[2]);
    assert!(usage[2]["cacheMiss"]["message"].as_str().is_some());
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    let misses = i["cache"]["misses"].as_array().expect("misses");
    let causes: Vec<&str> = misses.iter().filter_map(|m| m["cause"].as_str()).collect();
    assert_eq!(causes, ["firstRequest", "unknown"], "{i}");
    assert_eq!(i["cache"]["lastHitRatio"], 0.0, "{i}");
    let session = i["cache"]["sessionHitRatio"].as_f64().expect("ratio");
    assert!((session - 1_000.0 / 3_330.0).abs() < 1e-6, "{session}");
}

/// `[context] provider_clearing` on Anthropic's API with a Claude 4 model: the main request
/// asks the provider to clear old tool results itself (context editing, its beta header),
/// excluding the tools whose results cannot be had again; what it cleared is in the usage;
/// Garuda's own time-based microcompact steps aside. Summary requests never carry it.
#[test]
fn the_provider_clears_old_tool_results_where_it_can() {
    let mock = Mock::start(vec![
        read("toolu_r1", "a.txt"),
        MockReply::Sse(
            AnthropicSse::new(MockUsage::new(900, 5))
                .text("read it")
                .finish_with_cleared("end_turn", 3, 4_200),
        ),
    ]);
    let cfg = format!("{WINDOW_100K}[context]\nprovider_clearing = true\n");
    let (mut g, _h, _ws, wid) = setup(&mock, &cfg);
    let sid = new_session(&mut g, &wid);
    let r = turn(&mut g, &sid, "read a.txt");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    let edit = &bodies[0]["context_management"]["edits"][0];
    assert_eq!(edit["type"], "clear_tool_uses_20250919", "{}", bodies[0]);
    assert_eq!(
        edit["trigger"],
        json!({"type": "input_tokens", "value": 60_000})
    );
    assert_eq!(edit["keep"]["type"], "tool_uses");
    assert_eq!(
        edit["clear_at_least"],
        json!({"type": "input_tokens", "value": 10_000})
    );
    let excluded: Vec<&str> = edit["exclude_tools"]
        .as_array()
        .expect("exclude_tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        excluded.contains(&"edit_file") && excluded.contains(&"todo_write"),
        "{excluded:?}"
    );
    assert!(
        !excluded.contains(&"read_file") && !excluded.contains(&"bash"),
        "{excluded:?}"
    );
    let beta = mock.rec.headers()[0]
        .iter()
        .find(|(k, _)| k == "anthropic-beta")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert!(beta.contains("context-management-2025-06-27"), "{beta}");
    let usage: Vec<Value> = g
        .turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "usage")
        .collect();
    assert_eq!(
        usage.last().expect("usage")["usage"]["clearedInputTokens"],
        4_200
    );
    // The time-based microcompact is off for this session: the provider does that work.
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(i["toolClearing"], true, "{i}");
}

/// Without the switch, or on a model the provider's context editing does not serve, nothing
/// of it is sent.
#[test]
fn no_provider_clearing_without_the_switch() {
    let mock = Mock::start(vec![text("one", 10)]);
    let (mut g, _h, _ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "hi");
    let bodies = mock.rec.bodies();
    assert!(
        bodies[0].get("context_management").is_none(),
        "{}",
        bodies[0]
    );
    let i = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(i["toolClearing"], false, "{i}");
}
