//! The compaction worker end to end: a scripted provider drives it through each of its tools,
//! its summary, nominated file and references are installed, it falls back to the regular
//! summary request without write_summary, and cancelling it changes nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::context::{WINDOW_100K, new_session, text, turn};
use crate::mock_model::*;
use crate::turns::{Mock, setup};

/// The worker's tools, exactly (seed 003's, read-only).
const WORKER_TOOLS: [&str; 7] = [
    "show_overview",
    "search_entries",
    "read_entry",
    "read_file",
    "mark_read_required",
    "add_reference",
    "write_summary",
];

fn config(summarizer: &str) -> String {
    format!("{WINDOW_100K}[context]\nsummarizer = \"{summarizer}\"\n")
}

/// Five turns (six answers): turn 1 reads a.txt.
fn history() -> Vec<MockReply> {
    let read = json!({"path": "a.txt"}).to_string();
    vec![
        MockReply::Sse(anthropic_tool_use(
            "toolu_r1",
            "read_file",
            &[read.as_str()],
        )),
        text("read it", 100),
        text("two", 20_000),
        text("three", 20_000),
        text("four", 20_000),
        text("five", 20_000),
    ]
}

fn run_history(g: &mut crate::client::Garuda, sid: &str) {
    for i in 1..=5 {
        let r = turn(g, sid, &format!("question {i}: keep DECISION-{i}"));
        assert_eq!(r["stopReason"], "end_turn", "turn {i}: {r}");
    }
}

/// One worker answer calling `calls` (name, input) in order.
fn calls(calls: &[(&str, Value)]) -> MockReply {
    let mut sse = AnthropicSse::new(MockUsage::new(400, 30));
    for (k, (name, input)) in calls.iter().enumerate() {
        let j = input.to_string();
        sse = sse.tool_use(&format!("toolu_w{k}_{name}"), name, &[j.as_str()]);
    }
    MockReply::Sse(sse.finish("tool_use"))
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
    match &body["system"] {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => String::new(),
    }
}

fn is_worker(body: &Value) -> bool {
    system_text(body).starts_with("You are Garuda's context compaction worker")
}

fn view_texts(g: &mut crate::client::Garuda, sid: &str) -> Vec<String> {
    let v = g.call("session/view", json!({"sessionId": sid}));
    v["request"]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(Value::to_string)
        .collect()
}

fn find(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = find(&p, name) {
                return Some(f);
            }
        } else if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
    }
    None
}

fn records(home: &Path, sid: &str) -> Vec<Value> {
    let path = find(&home.join("state"), &format!("{sid}.jsonl")).expect("transcript");
    std::fs::read_to_string(path)
        .expect("read")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn the_worker_uses_each_tool_and_its_summary_file_and_reference_are_installed() {
    let plan = format!(
        "PLAN-FILE-START\n{}PLAN-FILE-END\n",
        "step of the plan\n".repeat(100)
    );
    let mut replies = history();
    replies.extend([
        calls(&[
            ("show_overview", json!({})),
            ("search_entries", json!({"query": "DECISION-2"})),
        ]),
        calls(&[
            ("read_entry", json!({"entry": "E1"})),
            ("read_file", json!({"path": "notes.md"})),
        ]),
        calls(&[
            ("mark_read_required", json!({"path": "plan.md"})),
            (
                "add_reference",
                json!({"path": "docs/design.md", "note": "the design the user approved"}),
            ),
        ]),
        calls(&[(
            "write_summary",
            json!({"summary": "Active Task\n\nWORKER-SUMMARY: the parser, DECISION-2 kept."}),
        )]),
    ]);
    let mock = Mock::start(replies);
    let (mut g, home, ws, wid) = setup(&mock, &config("worker"));
    std::fs::write(ws.path().join("plan.md"), &plan).expect("write");
    std::fs::write(ws.path().join("notes.md"), "NOTES-CONTENT\n").expect("write");
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    assert_eq!(r["kind"], "summary", "{r}");

    let bodies = mock.rec.bodies();
    assert_eq!(
        bodies.len(),
        10,
        "six main answers and four worker requests"
    );
    let worker: Vec<&Value> = bodies.iter().filter(|b| is_worker(b)).collect();
    assert_eq!(worker.len(), 4);
    for b in &worker {
        // No worker request offers a tool that changes anything.
        assert_eq!(tool_names(b), WORKER_TOOLS, "{}", b["tools"]);
    }
    // Each request repeats the one before (its cache prefix), and every tool answered.
    let first = worker[0]["messages"][0].to_string();
    assert!(first.contains("compact_worker_input"), "{first}");
    assert!(
        first.contains("tool read_file [a.txt]"),
        "the overview names the call and its path: {first}"
    );
    let second = worker[1]["messages"].to_string();
    assert!(
        second.contains("entries match") && second.contains("DECISION-2"),
        "{second}"
    );
    assert!(second.contains("Overview of the older part"), "{second}");
    let third = worker[2]["messages"].to_string();
    assert!(
        third.contains("NOTES-CONTENT"),
        "read_file answered: {third}"
    );
    assert!(third.contains("question 1"), "read_entry answered: {third}");
    let fourth = worker[3]["messages"].to_string();
    assert!(
        fourth.contains("plan.md goes into the next session"),
        "{fourth}"
    );
    assert!(fourth.contains("docs/design.md is listed"), "{fourth}");
    for k in 1..4 {
        let prev = worker[k - 1]["messages"].as_array().expect("m").len();
        let now = worker[k]["messages"].as_array().expect("m");
        assert_eq!(now.len(), prev + 2);
        assert_eq!(
            crate::context::strip_cache(&Value::Array(now[..prev].to_vec())),
            crate::context::strip_cache(&worker[k - 1]["messages"]),
            "request {k} repeats the one before"
        );
    }

    let texts = view_texts(&mut g, &sid);
    let summary = texts
        .iter()
        .find(|t| t.contains("<summary>"))
        .expect("summary message");
    assert!(summary.contains("WORKER-SUMMARY"), "{summary}");
    assert!(summary.contains("<references>"), "{summary}");
    assert!(
        summary.contains("docs/design.md: the design the user approved"),
        "{summary}"
    );
    let restored: Vec<&String> = texts
        .iter()
        .filter(|t| t.contains("restored_file path"))
        .collect();
    assert_eq!(
        restored.len(),
        1,
        "the nomination replaces the heuristic: {restored:?}"
    );
    assert!(restored[0].contains("plan.md"));
    assert!(
        restored[0].contains("PLAN-FILE-START") && restored[0].contains("PLAN-FILE-END"),
        "the nominated file comes back in full"
    );

    let recs = records(home.path(), &sid);
    let boundary = recs
        .iter()
        .find(|r| r["type"] == "compact_boundary")
        .expect("boundary");
    assert_eq!(boundary["summarizer"], "worker", "{boundary}");
    let worker_usage = recs
        .iter()
        .filter(|r| r["type"] == "usage" && r["purpose"] == "worker")
        .count();
    assert_eq!(worker_usage, 4);
}

#[test]
fn a_worker_that_writes_no_summary_falls_back_to_the_regular_request() {
    let mut replies = history();
    replies.extend([
        calls(&[("show_overview", json!({}))]),
        text("I looked around.", 300),
        text("<summary>REGULAR-SUMMARY</summary>", 50),
    ]);
    let mock = Mock::start(replies);
    let (mut g, home, _ws, wid) = setup(&mock, &config("worker"));
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 9);
    assert!(is_worker(&bodies[6]) && is_worker(&bodies[7]));
    assert!(!is_worker(&bodies[8]), "the regular summary request");
    let texts = view_texts(&mut g, &sid);
    assert!(texts.iter().any(|t| t.contains("REGULAR-SUMMARY")));
    let recs = records(home.path(), &sid);
    let boundary = recs
        .iter()
        .find(|r| r["type"] == "compact_boundary")
        .expect("boundary");
    assert_ne!(boundary["summarizer"], "worker", "{boundary}");
}

#[test]
fn cancelling_the_worker_leaves_the_session_unchanged() {
    let mut replies = history();
    replies.extend([
        calls(&[("show_overview", json!({}))]),
        MockReply::Hang(Duration::from_secs(20)),
    ]);
    let mock = Mock::start(replies);
    let (mut g, _home, _ws, wid) = setup(&mock, &config("worker"));
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    let before = g.call("session/messages", json!({"sessionId": sid}));
    let view_before = view_texts(&mut g, &sid);
    let id = g.send_request("session/compact", json!({"sessionId": sid}));
    for _ in 0..300 {
        if mock.rec.count() == 8 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(mock.rec.count(), 8, "the worker's second request is out");
    g.call("turn/cancel", json!({"sessionId": sid}));
    let r = g.response(&json!(id));
    assert_eq!(r["error"]["code"], -32800, "{r}");
    assert_eq!(
        before,
        g.call("session/messages", json!({"sessionId": sid}))
    );
    assert_eq!(view_before, view_texts(&mut g, &sid));
}
