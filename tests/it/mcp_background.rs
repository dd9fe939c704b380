//! When an MCP server's tools enter a session: servers start in the background
//! (`session/new` answers while they start, the first turn waits for them, so its first
//! request already carries their tools; tests/mcp/slow_server.py answers nothing until its
//! gate file exists, which orders the steps without a timer), and a list past its cache hint
//! is listed again at a turn start and installed at the next compaction.

use serde_json::{Value, json};

use crate::mock_model::*;
use crate::turns::{Mock, setup};

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn session_new_answers_while_a_server_starts_and_the_first_turn_has_its_tools() {
    let gate_dir = tempfile::tempdir().expect("gate");
    let gate = gate_dir.path().join("gate");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/slow_server.py");
    let cfg = format!(
        "[mcp_servers.slow]\ncommand = \"python3\"\nargs = [{script:?}, {gate:?}]\n\
         tools_read_only = [\"ping\"]\n"
    );
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use("p1", "mcp__slow__ping", &["{}"])),
        MockReply::Sse(anthropic_text("Pinged.", MockUsage::new(5, 1))),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, &cfg);
    let r = g.call("session/new", json!({"workspaceId": wid}));
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    // Answered while the server cannot have started (its gate is closed).
    let status = g.call("mcp/servers", json!({"sessionId": sid}));
    assert_eq!(status["servers"][0]["state"], "starting", "{status}");
    // The turn is sent before the gate opens: it waits for the server.
    let id = g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "ping"}]}),
    );
    std::fs::write(&gate, "").expect("gate");
    let r = g.response(&json!(id));
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    assert!(
        tool_names(&bodies[0]).contains(&"mcp__slow__ping".to_string()),
        "{:?}",
        tool_names(&bodies[0])
    );
    assert!(
        bodies[0]["system"].to_string().contains("mcp__"),
        "the prompt names the MCP tools"
    );
    assert!(bodies[1]["messages"].to_string().contains("pong"));
    // The list is byte-identical in the next request.
    assert_eq!(bodies[0]["tools"], bodies[1]["tools"]);
    let status = g.call("mcp/servers", json!({"sessionId": sid}));
    assert_eq!(status["servers"][0]["state"], "ready", "{status}");
    assert_eq!(status["servers"][0]["toolCount"], 1, "{status}");
}

/// A list with a cache hint (`ttlMs`, here 0: stale at once) is listed again at the next turn
/// start, without any `tools/list_changed`: the change is a note, the request's tools stay
/// byte-identical, and the new list enters at the next compaction (tests/mcp/ttl_server.py
/// offers `a` first and `a`, `b` on every later listing).
#[test]
fn an_expired_list_is_listed_again_and_enters_at_the_next_compaction() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/ttl_server.py");
    let cfg = format!(
        "[mcp_servers.ttl]\ncommand = \"python3\"\nargs = [{script:?}]\n\
         [context]\nkeep_steps = 1\n"
    );
    let big = "lots of words to compact away. ".repeat(800);
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_text("one", MockUsage::new(40, 2))),
        // The real count the compaction decides on: the big first message.
        MockReply::Sse(anthropic_text("two", MockUsage::new(8_000, 2))),
        MockReply::Sse(anthropic_text(
            "<summary>The user talked.</summary>",
            MockUsage::new(40, 20),
        )),
        MockReply::Sse(anthropic_text("after", MockUsage::new(40, 2))),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, &cfg);
    let r = g.call("session/new", json!({"workspaceId": wid}));
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    let input = |t: &str| json!([{"type": "text", "text": t}]);
    for t in [big.as_str(), "next"] {
        let r = g.call("turn/run", json!({"sessionId": sid, "input": input(t)}));
        assert_eq!(r["stopReason"], "end_turn", "{r}");
    }
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": input("last")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");

    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 4);
    let a = "mcp__ttl__a".to_string();
    let b = "mcp__ttl__b".to_string();
    // Within the phase: the list of the first request, byte for byte.
    assert!(tool_names(&bodies[0]).contains(&a));
    assert!(!tool_names(&bodies[0]).contains(&b));
    assert_eq!(bodies[0]["tools"], bodies[1]["tools"]);
    let notes = bodies[1]["messages"].to_string();
    assert!(notes.contains("added: mcp__ttl__b"), "{notes}");
    assert_eq!(notes.matches("added: mcp__ttl__b").count(), 1, "{notes}");
    // After the compaction: the new list.
    assert!(tool_names(&bodies[3]).contains(&b));
}
