//! Hardening: a crash-safety test that `kill -9`s the server at random points of turns and
//! compactions, a load test with a client that stops reading, and regression tests for the
//! defects of the hardening issue that need the whole binary.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::{Framing, Garuda, frame, isolated_env};
use crate::mock_model::*;
use crate::turns::{Mock, write_config};

/// A tiny deterministic generator, so a failure names the seed that reproduces it.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below.max(1)
    }
}

fn seed() -> u64 {
    std::env::var("GARUDA_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

/// `(id, role, content)` of every message of the durable history.
fn history(g: &mut Garuda, sid: &str) -> Vec<Value> {
    let page = g.call(
        "session/messages",
        json!({"sessionId": sid, "limit": 10000}),
    );
    page["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| json!([m["id"], m["role"], m["content"]]))
        .collect()
}

fn spawn(home: &std::path::Path, mock: &Mock) -> Garuda {
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Ndjson, home, &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    g
}

/// `kill -9` at random points of turns (before the model answers, mid-tool, while writing)
/// and of compactions; after every restart the session loads and every message that was
/// acknowledged (its turn or compaction answered) is there, unchanged and in order.
/// `GARUDA_CRASH_ROUNDS` sets the number of kills (default 12), `GARUDA_CRASH_SEED` the seed.
#[test]
fn kill_9_mid_turn_and_mid_compaction_loses_no_acknowledged_message() {
    let rounds: u64 = std::env::var("GARUDA_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let seed = seed();
    eprintln!("crash test seed {seed} (GARUDA_CRASH_SEED={seed} reproduces it)");
    let mut rng = Lcg(seed);
    // Every request gets a tool call (read a.txt) or a text that is also a valid summary.
    let replies: Vec<MockReply> = (0..(rounds as usize * 8 + 16))
        .map(|i| {
            if i % 3 == 0 {
                MockReply::Sse(anthropic_tool_use(
                    &format!("toolu_{i}"),
                    "read_file",
                    &["{\"path\":", "\"a.txt\"}"],
                ))
            } else {
                MockReply::Sse(anthropic_text(
                    &format!("<summary>state {i}: the user asked for numbers</summary> answer {i}"),
                    MockUsage::new(50, 5),
                ))
            }
        })
        .collect();
    let mock = Mock::start(replies);
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "[approval]\npolicy = \"full-auto\"\n");
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n".repeat(200)).unwrap();
    let mut g = spawn(home.path(), &mock);
    let wid = g.open(ws.path());
    let sid = g.call("session/new", json!({"workspaceId": wid}))["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut acked: Vec<Value> = Vec::new();
    for round in 0..rounds {
        // One acknowledged turn.
        let r = g.request(
            "turn/run",
            json!({"sessionId": sid, "input": [{"type": "text", "text": format!("turn {round}")}]}),
        );
        if r.get("result").is_some() {
            acked = history(&mut g, &sid);
        }
        // Then a turn or a compaction, killed at a random point.
        let compact = rng.below(3) == 0;
        if compact {
            g.send_request("session/compact", json!({"sessionId": sid}));
        } else {
            g.send_request(
                "turn/run",
                json!({"sessionId": sid, "input": [{"type": "text", "text": format!("doomed {round}")}]}),
            );
        }
        std::thread::sleep(Duration::from_micros(rng.below(40_000)));
        g.child.kill().unwrap(); // SIGKILL
        g.child.wait().unwrap();
        drop(g);

        g = spawn(home.path(), &mock);
        let loaded = g.request("session/load", json!({"sessionId": sid}));
        assert!(
            loaded.get("result").is_some(),
            "round {round} (seed {seed}): the session did not load after kill -9: {loaded}"
        );
        let now = history(&mut g, &sid);
        assert!(
            now.len() >= acked.len() && now[..acked.len()] == acked[..],
            "round {round} (seed {seed}, compaction: {compact}): acknowledged messages changed or lost\nbefore: {acked:?}\nafter: {now:?}"
        );
        let wid = g.open(ws.path());
        let listed = g.call("session/list", json!({"workspaceId": wid}));
        assert!(
            listed["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["sessionId"] == sid.as_str()),
            "round {round}: the session left session/list"
        );
    }
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Load: 300 sessions (more than the 256 kept live), then a client that sends 3 000
/// `prompt/assemble` requests (about 40 KB of answer each; `GARUDA_LOAD_REQUESTS` for more)
/// and reads nothing. The server
/// stops reading once its output queue is full, its memory stays bounded, and when the client
/// reads again every answer arrives. Prints the RSS figures (run with `--nocapture`).
#[test]
fn load_many_sessions_and_a_client_that_stops_reading() {
    let mock = Mock::start(Vec::new());
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "");
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("AGENTS.md"), "Keep it short. ".repeat(2600)).unwrap();

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_garuda"));
    cmd.arg("serve");
    isolated_env(&mut cmd, home.path());
    for (k, v) in mock.env() {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let send = |w: &mut dyn Write, id: u64, method: &str, params: Value| {
        let body = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .unwrap();
        w.write_all(&frame(Framing::Ndjson, &body)).unwrap();
    };
    // Set-up requests and their answers, read line by line.
    let mut reader = std::io::BufReader::new(&mut stdout);
    let mut call = |w: &mut dyn Write, id: u64, method: &str, params: Value| -> Value {
        send(w, id, method, params);
        loop {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    call(&mut stdin, 1, "initialize", json!({"capabilities": {}}));
    let wid =
        call(&mut stdin, 2, "workspace/open", json!({"root": ws.path()}))["result"]["workspaceId"]
            .as_str()
            .unwrap()
            .to_string();
    for i in 0..300u64 {
        let r = call(
            &mut stdin,
            10 + i,
            "session/new",
            json!({"workspaceId": wid}),
        );
        assert!(r.get("result").is_some(), "{r}");
    }
    let after_sessions = rss_kib(pid, "VmRSS:");
    drop(reader);

    let n: u64 = std::env::var("GARUDA_LOAD_REQUESTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3_000);
    let sent = Arc::new(AtomicUsize::new(0));
    let writer = {
        let sent = sent.clone();
        let wid = wid.clone();
        std::thread::spawn(move || {
            for i in 0..n {
                let body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 100_000 + i, "method": "prompt/assemble", "params": {"workspaceId": wid}})).unwrap();
                if stdin.write_all(&frame(Framing::Ndjson, &body)).is_err() {
                    return;
                }
                sent.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    // Wait until the writer stops making progress (the server stopped reading) or is done.
    let mut last = usize::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = sent.load(Ordering::SeqCst);
        if now == last || now as u64 == n {
            break;
        }
        last = now;
    }
    let blocked_at = sent.load(Ordering::SeqCst) as u64;
    let rss_blocked = rss_kib(pid, "VmRSS:");
    let hwm_blocked = rss_kib(pid, "VmHWM:");
    assert!(
        blocked_at < n,
        "the server read all {n} requests although nobody read its answers"
    );
    // Now read everything: every request is answered.
    let mut answered = 0u64;
    let mut buf = std::io::BufReader::new(stdout);
    while answered < n {
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut buf, &mut line).unwrap() == 0 {
            break;
        }
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"].as_u64().is_some_and(|id| id >= 100_000) {
            assert!(v.get("result").is_some(), "{v}");
            answered += 1;
        }
    }
    writer.join().unwrap();
    let hwm_end = rss_kib(pid, "VmHWM:");
    let _ = child.kill();
    let _ = child.wait();
    eprintln!(
        "load: RSS after 300 sessions {after_sessions} KiB; client stopped reading: server stopped after {blocked_at} of {n} requests, RSS {rss_blocked} KiB (peak {hwm_blocked} KiB); all {answered} answered, peak RSS {hwm_end} KiB"
    );
    assert_eq!(answered, n);
    // Without the bound the queue held every answer: 3 000 × 40 KB = 120 MB.
    assert!(hwm_end < 100 * 1024, "peak RSS {hwm_end} KiB");
}

/// Defect 2 end to end: a cloned repository's `[limits]` cannot lift the instruction budget.
#[test]
fn a_workspace_cannot_lift_the_instruction_budget() {
    let mock = Mock::start(Vec::new());
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "");
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".garuda")).unwrap();
    std::fs::write(
        ws.path().join(".garuda/config.toml"),
        "[limits]\ninstructionsChars = 1000000000000\n",
    )
    .unwrap();
    // 1 MiB of instructions: far above the ceiling.
    let mut f = std::fs::File::create(ws.path().join("AGENTS.md")).unwrap();
    for _ in 0..1024 {
        f.write_all(&[b'x'; 1024]).unwrap();
    }
    drop(f);
    let mut g = spawn(home.path(), &mock);
    let opened = g.call("workspace/open", json!({"root": ws.path()}));
    let warnings = opened["warnings"].to_string();
    assert!(warnings.contains("ceiling"), "{warnings}");
    let wid = opened["workspaceId"].as_str().unwrap();
    let p = g.call("prompt/assemble", json!({"workspaceId": wid}));
    let len = p["system"].as_str().unwrap().chars().count();
    assert!(len < 210_000, "the prompt carries {len} characters");
}

/// Defect 7: lenient params are refused with -32602, and the server keeps serving.
#[test]
fn lenient_params_are_refused() {
    let mut g = Garuda::started(Framing::Ndjson);
    let ws = tempfile::tempdir().unwrap();
    let wid = g.open(ws.path());
    for (method, params) in [
        ("workspace/list", json!({"x": 1})),
        ("shutdown", json!([1])),
        (
            "prompt/assemble",
            json!({"workspaceId": wid, "options": []}),
        ),
        ("session/load", json!(["nope"])),
    ] {
        let r = g.request(method, params.clone());
        assert_eq!(r["error"]["code"], -32602, "{method} {params}: {r}");
    }
    assert!(g.call("workspace/list", Value::Null)["workspaces"].is_array());
}

/// Defect 3 end to end: a transcript whose header line lost a byte stays listed (marked
/// damaged), loads, and keeps its messages.
#[test]
fn a_damaged_header_keeps_the_session() {
    let mock = Mock::start(vec![MockReply::Sse(anthropic_text(
        "kept answer",
        MockUsage::new(5, 1),
    ))]);
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), "");
    let ws = tempfile::tempdir().unwrap();
    let mut g = spawn(home.path(), &mock);
    let wid = g.open(ws.path());
    let sid = g.call("session/new", json!({"workspaceId": wid}))["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    g.call(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "remember 42"}]}),
    );
    drop(g);
    let path = home
        .path()
        .join(format!("state/garuda/sessions/{sid}.jsonl"));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] = b'#';
    std::fs::write(&path, &bytes).unwrap();

    let mut g = spawn(home.path(), &mock);
    let wid = g.open(ws.path());
    let listed = g.call("session/list", json!({"workspaceId": wid}));
    let s = &listed["sessions"][0];
    assert_eq!(s["sessionId"], sid.as_str(), "{listed}");
    assert_eq!(s["damaged"], true);
    assert_eq!(
        s["messageCount"], 3,
        "the start note, the question, the answer"
    );
    let loaded = g.call("session/load", json!({"sessionId": sid}));
    assert_eq!(loaded["messageCount"], 3);
    let h = history(&mut g, &sid);
    assert!(h[1].to_string().contains("remember 42"));
}
