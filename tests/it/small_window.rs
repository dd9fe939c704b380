//! Small windows (2 048, 4 096 and 8 192 tokens) through the real binary against the
//! simulated provider, which enforces the window it is given and counts tokens its own way
//! (`sim_provider`): a session is never stuck, every turn answers or gets Garuda's own
//! -32060, and every compaction is whole.

use crate::long_session::{self, Scenario, Session};
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

#[test]
fn window_8192_session_has_no_failed_turn() {
    let sess = long_session::run(&small("small-8k", 8_192, 18));
    let failed = failed(&sess);
    assert!(failed.is_empty(), "{failed:#?}\n{}", report(&sess));
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
    // Turns 1 and 2 answer; later ones may be refused while their own steps fill the room.
    assert!(sess.turns[0].error.is_none(), "{}", report(&sess));
}
