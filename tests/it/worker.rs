//! The compaction worker end to end: a scripted provider drives it through each of its tools,
//! its summary, nominated file and references are installed, it falls back to the regular
//! summary request without write_summary, and cancelling it changes nothing.

use std::path::Path;
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

fn records(home: &Path, sid: &str) -> Vec<Value> {
    std::fs::read_to_string(crate::context::transcript_path(home, sid))
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
            ("search_entries", json!({"query": "DECISION-1"})),
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
        second.contains("entries match") && second.contains("DECISION-1"),
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

// ---------------------------------------------------------------- the measurement

/// The summarizer's window in the measurement (the provider refuses larger requests).
const SUMMARIZER_WINDOW: u64 = 16_000;
/// Turns of the history; each reads one large file.
const TURNS: usize = 40;

/// What the harness's provider saw of one side request.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    tokens: u64,
    uncached: u64,
    cache_write: u64,
    cache_read: u64,
    output: u64,
    refused: bool,
}

#[derive(Default)]
struct HarnessState {
    /// Prefix hash at a cache breakpoint → its bytes.
    cache: std::collections::HashMap<u64, u64>,
    side: Vec<(String, Seen)>,
}

/// A scripted provider for the measurement: main requests read one large file per turn and
/// are not limited; summary and worker requests are held to [`SUMMARIZER_WINDOW`] (the
/// sim's count: JSON bytes / 3.5) and their cache is simulated (breakpoints store prefixes;
/// a request reads the longest stored one it starts with). The scripted summarizers quote
/// only the `DECISION-N` marks they were shown.
struct Harness {
    state: std::sync::Arc<std::sync::Mutex<HarnessState>>,
}

fn blocks(m: &Value) -> Vec<Value> {
    match &m["content"] {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    }
}

fn decisions(text: &str) -> std::collections::BTreeSet<u32> {
    let mut out = std::collections::BTreeSet::new();
    for (i, _) in text.match_indices("DECISION-") {
        let d: String = text[i + 9..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let Ok(n) = d.parse() {
            out.insert(n);
        }
    }
    out
}

/// (tokens, cache read, cache write) of a request under the simulated cache.
fn account(body: &Value, cache: &mut std::collections::HashMap<u64, u64>) -> (u64, u64, u64) {
    use std::hash::{Hash, Hasher};
    let mut units: Vec<(u64, u64, bool)> = Vec::new();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut cum = 0u64;
    let mut push = |v: &Value, extra: u64| {
        let marked = v.get("cache_control").is_some();
        let s = crate::context::strip_cache(v).to_string();
        s.hash(&mut h);
        cum += s.len() as u64 + extra;
        units.push((h.finish(), cum, marked));
    };
    for t in body["tools"].as_array().into_iter().flatten() {
        push(t, 0);
    }
    match &body["system"] {
        Value::Array(a) => a.iter().for_each(|b| push(b, 0)),
        s => push(s, 0),
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        for (j, b) in blocks(m).iter().enumerate() {
            push(b, if j == 0 { 30 } else { 0 });
        }
    }
    let total = units.last().map_or(0, |u| u.1);
    let read = units
        .iter()
        .filter(|u| cache.contains_key(&u.0))
        .map(|u| u.1)
        .max()
        .unwrap_or(0);
    let last_mark = units.iter().filter(|u| u.2).map(|u| u.1).max().unwrap_or(0);
    for u in units.iter().filter(|u| u.2) {
        cache.insert(u.0, u.1);
    }
    let tok = crate::sim_provider::tokens_of_bytes;
    (tok(total), tok(read), tok(last_mark.saturating_sub(read)))
}

impl Harness {
    fn answer(&self, body: &Value) -> wiremock::ResponseTemplate {
        let sse = |text: String| {
            wiremock::ResponseTemplate::new(200).set_body_raw(text, "text/event-stream")
        };
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let system = system_text(body);
        let msgs = body["messages"].as_array().cloned().unwrap_or_default();
        let (tokens, read, write) = account(body, &mut st.cache);
        let usage = |out: u64| MockUsage {
            input: tokens.saturating_sub(read + write),
            output: out,
            cache_creation: write,
            cache_read: read,
        };
        let fork = msgs.last().is_some_and(|m| {
            m.to_string()
                .contains(crate::sim_provider::SUMMARY_INSTRUCTION_START)
        });
        let summary_req =
            fork || system.starts_with("You are Garuda's context compaction assistant");
        if !is_worker(body) && !summary_req {
            // A main step: four small reads, then a long answer that ends the turn.
            let last = msgs.last().map(blocks).unwrap_or_default();
            let turn = msgs
                .iter()
                .filter(|m| m["role"] == "user" && blocks(m).iter().any(|b| b["type"] == "text"))
                .count();
            if last.iter().any(|b| b["type"] == "tool_result") {
                let mut rng = crate::sim_provider::Rng::at(11, &[turn as u64]);
                let text =
                    crate::sim_provider::filler_lines(&mut rng, 120, 96, &format!("answer{turn}"));
                return sse(anthropic_text(&text, usage(3_000)));
            }
            let mut sse_body = AnthropicSse::new(usage(40));
            for k in 0..4 {
                let j = json!({"path": format!("f{turn}_{k}.txt")}).to_string();
                sse_body =
                    sse_body.tool_use(&format!("toolu_main{turn}_{k}"), "read_file", &[j.as_str()]);
            }
            return sse(sse_body.finish("tool_use"));
        }
        let kind = if is_worker(body) { "worker" } else { "summary" };
        let mut seen = Seen {
            tokens,
            uncached: tokens.saturating_sub(read + write),
            cache_write: write,
            cache_read: read,
            ..Seen::default()
        };
        if tokens > SUMMARIZER_WINDOW {
            seen.refused = true;
            st.side.push((kind.into(), seen));
            return wiremock::ResponseTemplate::new(400).set_body_json(json!({"type":"error","error":{"type":"invalid_request_error","message":format!("prompt is too long: {tokens} tokens > {SUMMARIZER_WINDOW} maximum")}}));
        }
        let shown = decisions(&body["messages"].to_string());
        let quoted: Vec<String> = shown.iter().map(|d| format!("DECISION-{d}")).collect();
        let summary = format!(
            "Active Task\n\n• the parser work over {TURNS} turns; decisions seen: {}\n",
            quoted.join(", ")
        );
        let reply = if kind == "summary" {
            anthropic_text(&format!("<summary>{summary}</summary>"), usage(200))
        } else {
            let step = msgs.iter().filter(|m| m["role"] == "assistant").count();
            let last = msgs.last().map(Value::to_string).unwrap_or_default();
            let call = |name: &str, input: Value| (name.to_string(), input);
            let script: Vec<(String, Value)> = match step {
                0 => vec![call("search_entries", json!({"query": "DECISION-3"}))],
                1 => {
                    let e = last
                        .find(" tool read_file")
                        .and_then(|i| last[..i].rfind('E').map(|s| last[s..i].to_string()))
                        .unwrap_or_else(|| "E2".into());
                    vec![call("read_entry", json!({"entry": e}))]
                }
                2 => vec![call("read_file", json!({"path": "plan.md"}))],
                3 => vec![
                    call("mark_read_required", json!({"path": "plan.md"})),
                    call(
                        "add_reference",
                        json!({"path": "f3_0.txt", "note": "the file DECISION-3 is about"}),
                    ),
                ],
                _ => vec![call("write_summary", json!({"summary": summary}))],
            };
            let mut sse_body = AnthropicSse::new(usage(60));
            for (k, (name, input)) in script.iter().enumerate() {
                let j = input.to_string();
                sse_body = sse_body.tool_use(&format!("toolu_s{step}_{k}"), name, &[j.as_str()]);
            }
            sse_body.finish("tool_use")
        };
        seen.output = if kind == "summary" { 200 } else { 60 };
        st.side.push((kind.into(), seen));
        sse(reply)
    }
}

impl wiremock::Respond for Harness {
    fn respond(&self, req: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        self.answer(&body)
    }
}

/// Builds the same long history, lowers the window to the summarizer's and compacts it with
/// `summarizer`: the side requests as the provider saw them, and the boundary record.
fn measure(summarizer: &str) -> (Vec<(String, Seen)>, Value, u64, usize) {
    use wiremock::matchers::{method, path};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let state = std::sync::Arc::new(std::sync::Mutex::new(HarnessState::default()));
    let server = rt.block_on(async {
        let s = wiremock::MockServer::start().await;
        wiremock::Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(Harness {
                state: state.clone(),
            })
            .mount(&s)
            .await;
        s
    });
    let env = [
        ("ANTHROPIC_BASE_URL".to_string(), server.uri()),
        (
            "ANTHROPIC_API_KEY".to_string(),
            "sk-test-not-a-real-key".to_string(),
        ),
    ];
    let home = tempfile::tempdir().unwrap();
    crate::turns::write_config(
        home.path(),
        &format!(
            "[models.\"anthropic/claude-sonnet-4-5\"]\ncontextWindow = 400000\n[context]\n\
             auto_compact = false\nsummarizer = \"{summarizer}\"\n"
        ),
    );
    let ws = tempfile::tempdir().unwrap();
    for t in 1..=TURNS {
        for k in 0..4 {
            let mut rng = crate::sim_provider::Rng::at(7, &[t as u64, k]);
            let body = crate::sim_provider::filler_lines(&mut rng, 9, 90, &format!("f{t}_{k}"));
            let mark = if k == 0 {
                format!("DECISION-{t} applies here\n")
            } else {
                String::new()
            };
            std::fs::write(
                ws.path().join(format!("f{t}_{k}.txt")),
                format!("{mark}{body}"),
            )
            .unwrap();
        }
    }
    std::fs::write(
        ws.path().join("plan.md"),
        "PLAN: tokenizer first, then the parser.\n",
    )
    .unwrap();
    let envs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g =
        crate::client::Garuda::spawn_at(crate::client::Framing::Lsp, home.path(), &[], &envs);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    let sid = new_session(&mut g, &wid);
    for t in 1..=TURNS {
        let r = turn(
            &mut g,
            &sid,
            &format!("turn {t}: we decided DECISION-{t}; read the next file"),
        );
        assert_eq!(r["stopReason"], "end_turn", "turn {t}: {r}");
    }
    let _ = g.child.kill();
    let _ = g.child.wait();
    // The same session under the summarizer's window: its older part is ten times that.
    let mut envs = envs.clone();
    envs.push(("GARUDA_CONTEXT_WINDOW", "16000"));
    let mut g =
        crate::client::Garuda::spawn_at(crate::client::Framing::Lsp, home.path(), &[], &envs);
    g.call("initialize", json!({"capabilities": {}}));
    g.call("session/load", json!({"sessionId": sid}));
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    let before = inspect["used"]
        .as_u64()
        .or(inspect["parts"]["used"].as_u64())
        .unwrap_or(0);
    let id = g.send_request("session/compact", json!({"sessionId": sid}));
    let r = g.response(&json!(id));
    let side = state.lock().unwrap().side.clone();
    let r = r["result"].clone();
    assert_eq!(r["compacted"], true, "{summarizer}: {r} {side:?} {before}");
    let recs = records(home.path(), &sid);
    let boundary = recs
        .iter()
        .rev()
        .find(|r| r["type"] == "compact_boundary")
        .cloned()
        .unwrap();
    let _ = before;
    // The decisions the installed summary body still names.
    let body = recs
        .iter()
        .rev()
        .find(|r| r["type"] == "message" && r["meta"] == "summary")
        .and_then(|m| {
            m["content"].as_array()?.last()?["text"]
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_default();
    let kept = decisions(body.split("<references>").next().unwrap_or("")).len();
    (
        side,
        boundary,
        r["tokensBefore"].as_u64().unwrap_or(0),
        kept,
    )
}

fn cost(side: &[(String, Seen)]) -> (usize, u64, u64, u64, u64, u64, f64) {
    let n = side.len();
    let max = side.iter().map(|(_, s)| s.tokens).max().unwrap_or(0);
    let sum = |f: fn(&Seen) -> u64| {
        side.iter()
            .filter(|(_, s)| !s.refused)
            .map(|(_, s)| f(s))
            .sum::<u64>()
    };
    let (u, w, r, o) = (
        sum(|s| s.uncached),
        sum(|s| s.cache_write),
        sum(|s| s.cache_read),
        sum(|s| s.output),
    );
    // Input-token equivalents at Anthropic's relative prices: write 1.25, read 0.1, output 5.
    let weighted = u as f64 + 1.25 * w as f64 + 0.1 * r as f64 + 5.0 * o as f64;
    (n, max, u, w, r, o, weighted)
}

#[test]
fn the_worker_summarizes_ten_windows_of_history_within_the_window() {
    let (worker, wb, before, worker_kept) = measure("auto");
    let (single, sb, _, single_kept) = measure("single");
    println!(
        "older part: about {before} tokens (Garuda's estimate) against a {SUMMARIZER_WINDOW}-token summarizer window"
    );
    println!(
        "path     requests  largest  uncached  cache-write  cache-read  output  input-equivalent  decisions named"
    );
    for (name, side, kept) in [
        ("worker", &worker, worker_kept),
        ("chunked", &single, single_kept),
    ] {
        let (n, max, u, w, r, o, weighted) = cost(side);
        println!(
            "{name:<8} {n:>8} {max:>8} {u:>9} {w:>12} {r:>11} {o:>7} {weighted:>17.0}  {kept:>6} of {TURNS}"
        );
    }
    assert!(
        before >= 10 * SUMMARIZER_WINDOW,
        "the older part is ten windows: {before}"
    );
    assert_eq!(wb["summarizer"], "worker", "auto picks the worker: {wb}");
    assert_ne!(sb["summarizer"], "worker");
    assert!(worker.iter().all(|(k, _)| k == "worker"), "{worker:?}");
    assert!(
        worker
            .iter()
            .all(|(_, s)| !s.refused && s.tokens <= SUMMARIZER_WINDOW),
        "no worker request over the window: {worker:?}"
    );
    assert!(single.len() > 1, "the single path needs chunks here");
}
