//! Issue 27: load that is queued, not refused. Many sessions on one server, each with a turn
//! against a model that answers after 0.5 s, while quick requests are pipelined: nothing is
//! refused, every turn completes, and quick requests are answered while the turns run.
//! Speed is measured by `benches/load.py`; these tests assert behaviour only.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{MockServer, ResponseTemplate};

use crate::client::{Framing, Garuda};
use crate::mock_model::{MockUsage, anthropic_text};
use crate::turns::write_config;

/// A model on 127.0.0.1 that gives every request the same answer after `delay`.
struct SlowModel {
    server: MockServer,
    _rt: tokio::runtime::Runtime,
}

impl SlowModel {
    fn start(reply: ResponseTemplate) -> SlowModel {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let server = rt.block_on(async {
            let server = MockServer::start().await;
            wiremock::Mock::given(method("POST"))
                .respond_with(reply)
                .mount(&server)
                .await;
            server
        });
        SlowModel { server, _rt: rt }
    }

    fn answering_after(delay: Duration) -> SlowModel {
        let body = anthropic_text("done", MockUsage::new(20, 2));
        Self::start(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(body)
                .set_delay(delay),
        )
    }

    /// Holds every answer back (a model that never answers, until cancelled).
    fn hanging() -> SlowModel {
        Self::start(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_delay(Duration::from_secs(600)),
        )
    }

    fn spawn(&self, config: &str) -> (Garuda, tempfile::TempDir, tempfile::TempDir, String) {
        let home = tempfile::tempdir().expect("home");
        write_config(home.path(), config);
        let ws = tempfile::tempdir().expect("ws");
        std::fs::write(ws.path().join("AGENTS.md"), "Be brief.\n").expect("write");
        let uri = self.server.uri();
        let env = [
            ("ANTHROPIC_BASE_URL", uri.as_str()),
            ("ANTHROPIC_API_KEY", "sk-test-not-a-real-key"),
        ];
        let mut g = Garuda::spawn_at(Framing::Ndjson, home.path(), &[], &env);
        g.call("initialize", json!({"capabilities": {}}));
        let wid = g.open(ws.path());
        (g, home, ws, wid)
    }
}

/// Reads until every id in `ids` is answered; answers by id, in arrival order.
fn answers(g: &mut Garuda, ids: &[i64]) -> Vec<(i64, Value)> {
    let mut want: HashMap<i64, ()> = ids.iter().map(|&i| (i, ())).collect();
    let mut out = Vec::new();
    while !want.is_empty() {
        let m = g.recv();
        if m.get("method").is_some() {
            continue;
        }
        let Some(id) = m["id"].as_i64() else {
            panic!("an answer without an id: {m}");
        };
        if want.remove(&id).is_some() {
            out.push((id, m));
        }
    }
    out
}

fn text(t: &str) -> Value {
    json!([{"type": "text", "text": t}])
}

/// The script: 200 sessions with one turn each sent at once against a model that
/// answers after 0.5 s, and 1 000 pipelined quick requests meanwhile. Before: 136 turns and
/// 750 quick requests refused with -32054.
#[test]
fn two_hundred_turns_and_a_thousand_quick_requests_none_refused() {
    let model = SlowModel::answering_after(Duration::from_millis(500));
    let (mut g, _home, _ws, wid) = model.spawn("");
    let news: Vec<i64> = (0..200)
        .map(|_| g.send_request("session/new", json!({"workspaceId": wid})))
        .collect();
    let sessions: Vec<String> = answers(&mut g, &news)
        .into_iter()
        .map(|(_, r)| {
            r["result"]["sessionId"]
                .as_str()
                .unwrap_or_else(|| panic!("session/new failed: {r}"))
                .to_string()
        })
        .collect();
    assert_eq!(sessions.len(), 200);

    let turns: Vec<i64> = sessions
        .iter()
        .map(|sid| g.send_request("turn/run", json!({"sessionId": sid, "input": text("hi")})))
        .collect();
    let quick: Vec<i64> = (0..1000)
        .map(|i| match i % 4 {
            0 => g.send_request("workspace/list", json!({})),
            1 => g.send_request("session/list", json!({"workspaceId": wid})),
            2 => g.send_request("prompt/assemble", json!({"workspaceId": wid})),
            _ => g.send_request(
                "context/inspect",
                json!({"sessionId": sessions[i % sessions.len()]}),
            ),
        })
        .collect();
    let all: Vec<i64> = turns.iter().chain(&quick).copied().collect();
    let got = answers(&mut g, &all);

    let refused: Vec<&Value> = got
        .iter()
        .map(|(_, r)| r)
        .filter(|r| r.get("error").is_some())
        .collect();
    assert!(
        refused.is_empty(),
        "{} of 1 200 requests failed, e.g. {}",
        refused.len(),
        refused[0]
    );
    let completed = got
        .iter()
        .filter(|(id, r)| turns.contains(id) && r["result"]["stopReason"] == "end_turn")
        .count();
    assert_eq!(completed, 200, "every turn completed");
    // Quick requests do not wait for the turns: some are answered before the last turn is.
    let last_turn = got
        .iter()
        .rposition(|(id, _)| turns.contains(id))
        .expect("turn answers");
    let quick_before = got[..last_turn]
        .iter()
        .filter(|(id, _)| quick.contains(id))
        .count();
    assert!(
        quick_before > 0,
        "no quick request answered while turns ran"
    );
    // Memory stays bounded: a buffer that grew with the load would fail this (200 sessions
    // and their turns measure about 80 MiB in a debug build; benches/load.py has the figures).
    let rss = rss_kib(g.child.id());
    eprintln!("server RSS after 200 turns: {rss} KiB");
    assert!(rss < 256 * 1024, "server RSS {rss} KiB after 200 turns");
}

/// The resident set of a process, from /proc.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

/// A turn beyond the long-work limit waits; cancelling it answers -32800 at once without
/// running it, and quick requests are answered while the running turn holds its slot.
#[test]
fn a_waiting_turn_is_cancelled_unrun() {
    let model = SlowModel::hanging();
    let (mut g, _home, _ws, wid) = model.spawn("[server]\nmax_long_in_flight = 1\n");
    let a = g.call("session/new", json!({"workspaceId": wid}))["sessionId"].clone();
    let b = g.call("session/new", json!({"workspaceId": wid}))["sessionId"].clone();
    let running = g.send_request("turn/run", json!({"sessionId": a, "input": text("one")}));
    // The first turn has its slot once its model request is out.
    g.wait_method("turn/update");
    let waiting = g.send_request("turn/run", json!({"sessionId": b, "input": text("two")}));
    let listed = g.call("session/list", json!({"workspaceId": wid}));
    assert_eq!(listed["sessions"].as_array().map(Vec::len), Some(2));
    g.notify("$/cancelRequest", json!({"id": waiting}));
    let r = g.response(&json!(waiting));
    assert_eq!(r["error"]["code"], -32800, "{r}");
    // It never ran: session b holds no user message of it.
    let page = g.call("session/messages", json!({"sessionId": b}));
    assert!(!page.to_string().contains("\"two\""), "{page}");
    g.notify("$/cancelRequest", json!({"id": running}));
    let r = g.response(&json!(running));
    assert!(
        r["result"]["stopReason"] == "cancelled" || r["error"]["code"] == -32800,
        "{r}"
    );
}

/// A turn sent the moment the previous one answered never fails as busy because a client
/// was reading the session (`context/inspect` holds its state for a moment): the turn waits
/// the read out (benches/load.py's prober used to make a few turns fail with -32056).
#[test]
fn a_read_of_the_session_never_makes_a_turn_busy() {
    let model = SlowModel::answering_after(Duration::ZERO);
    let (mut g, _home, _ws, wid) = model.spawn("");
    let sid = g.call("session/new", json!({"workspaceId": wid}))["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();
    for i in 0..60 {
        let mut ids = Vec::new();
        for _ in 0..3 {
            ids.push(g.send_request("context/inspect", json!({"sessionId": sid})));
        }
        let turn = g.send_request(
            "turn/run",
            json!({"sessionId": sid, "input": text(&format!("turn {i}"))}),
        );
        for _ in 0..3 {
            ids.push(g.send_request("context/inspect", json!({"sessionId": sid})));
        }
        ids.push(turn);
        for (id, m) in answers(&mut g, &ids) {
            assert!(m.get("error").is_none(), "request {id} of round {i}: {m}");
        }
    }
}
