//! `session/configure`: switching the model and the approval policy of a running session.

use serde_json::{Value, json};

use crate::client::{Framing, Garuda};
use crate::context::turn;
use crate::mock_model::*;
use crate::turns::{MODEL, Mock, setup};

/// The text of the last user message of a request body.
fn last_user_text(body: &Value) -> String {
    let msgs = body["messages"].as_array().expect("messages");
    let last = msgs
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .expect("user");
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

#[test]
fn switching_the_model_keeps_the_system_prompt_and_tells_the_model() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_text("One.", MockUsage::new(20, 2))),
        MockReply::Sse(anthropic_text("Two.", MockUsage::new(30, 2))),
        MockReply::Sse(anthropic_text("Three.", MockUsage::new(40, 2))),
        MockReply::Sse(anthropic_text("Four.", MockUsage::new(50, 2))),
    ]);
    let (mut g, home, _ws, wid) = setup(&mock, "");
    let r = g.call("session/new", json!({"workspaceId": wid, "policy": "ask"}));
    let sid = r["sessionId"].as_str().expect("sid").to_string();
    assert_eq!(r["model"], MODEL);
    turn(&mut g, &sid, "first");

    let r = g.call(
        "session/configure",
        json!({"sessionId": sid, "model": "anthropic/claude-haiku-4-5"}),
    );
    assert_eq!(r["model"], "anthropic/claude-haiku-4-5");
    assert_eq!(r["policy"], "ask");
    turn(&mut g, &sid, "second");
    turn(&mut g, &sid, "third");

    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[0]["model"], "claude-sonnet-4-5");
    assert_eq!(bodies[1]["model"], "claude-haiku-4-5");
    assert_eq!(bodies[2]["model"], "claude-haiku-4-5");
    // The system prompt is the same bytes: it still names the start model (cache).
    let raw = mock.rec.raw();
    let system = |i: usize| {
        let v: Value = serde_json::from_slice(&raw[i]).expect("json");
        let mut s = v["system"].clone();
        strip(&mut s);
        s.to_string()
    };
    assert_eq!(system(0), system(1));
    assert!(system(1).contains("claude-sonnet-4-5"));
    // The next user message carries the note, once.
    let note = "<garuda_note>The model was switched: from here on the model is anthropic/claude-haiku-4-5.";
    assert!(last_user_text(&bodies[1]).contains(note), "{}", bodies[1]);
    assert!(last_user_text(&bodies[1]).contains("second"));
    assert!(!last_user_text(&bodies[2]).contains("The model was switched"));

    // A restart restores the switch from the transcript, without a second note.
    g.close_stdin();
    g.wait_exit();
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let r = g.call("session/load", json!({"sessionId": sid}));
    assert_eq!(r["model"], "anthropic/claude-haiku-4-5");
    turn(&mut g, &sid, "fourth");
    let bodies = mock.rec.bodies();
    assert_eq!(bodies[3]["model"], "claude-haiku-4-5");
    assert!(!last_user_text(&bodies[3]).contains("The model was switched"));
}

#[test]
fn switching_the_policy_applies_from_the_next_tool_call() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "toolu_1",
            "bash",
            &["{\"command\": \"echo ran\"}"],
        )),
        MockReply::Sse(anthropic_text("Done.", MockUsage::new(20, 2))),
    ]);
    let (mut g, _home, _ws, wid) = setup(&mock, "");
    let r = g.call("session/new", json!({"workspaceId": wid, "policy": "ask"}));
    let sid = r["sessionId"].as_str().expect("sid").to_string();
    let r = g.call(
        "session/configure",
        json!({"sessionId": sid, "policy": "full-auto"}),
    );
    assert_eq!(r["policy"], "full-auto");
    let r = turn(&mut g, &sid, "run it");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let events = g.turn_events();
    let done = events
        .iter()
        .find(|e| e["kind"] == "toolCallFinished")
        .expect("tool call");
    assert_eq!(done["isError"], false, "{done}");
    assert!(done["output"].as_str().unwrap_or("").contains("ran"));
}

#[test]
fn bad_configurations_are_refused_and_the_session_stays() {
    let mock = Mock::start(vec![MockReply::Sse(anthropic_text(
        "Fine.",
        MockUsage::new(20, 2),
    ))]);
    let (mut g, _home, _ws, wid) = setup(&mock, "");
    let r = g.call("session/new", json!({"workspaceId": wid}));
    let sid = r["sessionId"].as_str().expect("sid").to_string();
    for params in [
        json!({"sessionId": sid, "policy": "yolo"}),
        json!({"sessionId": sid, "model": ""}),
        json!({"sessionId": sid, "colour": "red"}),
        json!({"sessionId": "no-such-session", "policy": "ask"}),
    ] {
        let r = g.request("session/configure", params.clone());
        assert!(r.get("error").is_some(), "{params}: {r}");
    }
    let r = turn(&mut g, &sid, "still there?");
    assert_eq!(r["stopReason"], "end_turn");
    assert_eq!(mock.rec.bodies()[0]["model"], "claude-sonnet-4-5");
}

fn strip(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.remove("cache_control");
            o.values_mut().for_each(strip);
        }
        Value::Array(a) => a.iter_mut().for_each(strip),
        _ => {}
    }
}

#[test]
fn context_inspect_says_whether_commands_ask_under_the_policy_in_force() {
    // The system prompt keeps describing the start policy (its bytes are cached), but
    // `context/inspect` answers for the policy a client switched to.
    let mock = Mock::start(Vec::new());
    let (mut g, _home, _ws, wid) = setup(&mock, "");
    let r = g.call("session/new", json!({"workspaceId": wid, "policy": "ask"}));
    let sid = r["sessionId"].as_str().expect("sid").to_string();
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(inspect["sandbox"]["commandsAsk"], true, "{inspect}");
    let confined = inspect["sandbox"]["confined"] == true;
    let r = g.call(
        "session/configure",
        json!({"sessionId": sid, "policy": "full-auto"}),
    );
    assert_eq!(r["policy"], "full-auto");
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    // Under full-auto confined commands run unasked; unconfined ones still ask.
    assert_eq!(inspect["sandbox"]["commandsAsk"], !confined, "{inspect}");
}
