//! Root instruction files, the memory file and the user-global file stay current in every
//! request: a change on disk reaches the model as a note, a relief that takes the note out of
//! the view (collapse, snip, a resume) gets it sent again once, a summary compaction rebuilds
//! the system prompt instead, and removed rules and deleted files are announced as no longer
//! in force. Through the real binary and the mock model.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::{Framing, Garuda};
use crate::context::{
    WINDOW_100K, history, new_session, ready_to_trim, run_history, text, transcript_path, turn,
};
use crate::mock_model::MockReply;
use crate::turns::{Mock, setup};

/// A rule added mid-session.
const ADDED: &str = "RULE-ADDED: sign every commit.";
/// A rule in the system prompt that is removed mid-session.
const REMOVED: &str = "RULE-REMOVED: indent with tabs.";

/// The system prompt's text and the messages' text of a request body.
fn parts(body: &Value) -> (String, String) {
    (body["system"].to_string(), body["messages"].to_string())
}

/// Times `needle` occurs in `hay`.
fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// The last request the mock received.
fn last(mock: &Mock) -> Value {
    mock.rec.bodies().last().cloned().expect("a request")
}

/// `rule` is in force in `body`: in the system prompt or in exactly one note, never both.
fn assert_in_force(body: &Value, rule: &str, when: &str) {
    let (system, messages) = parts(body);
    let (s, m) = (count(&system, rule), count(&messages, rule));
    assert!(
        (s == 1 && m == 0) || (s == 0 && m == 1),
        "{when}: {rule:?} must be carried once (system {s}, messages {m}):\n{messages}"
    );
}

/// `rule`, still in the system prompt, is announced as no longer in force by a note in view.
fn assert_retracted(body: &Value, rule: &str, when: &str) {
    let (system, messages) = parts(body);
    if !system.contains(rule) {
        assert!(
            !messages.contains(rule),
            "{when}: {rule:?} is gone: {messages}"
        );
        return;
    }
    let at = messages.find("No longer in force").unwrap_or_else(|| {
        panic!("{when}: no note retracts {rule:?}: {messages}");
    });
    assert!(
        messages[at..].contains(rule),
        "{when}: the note must list {rule:?} as removed: {messages}"
    );
}

/// Message records of the transcript: (uuid, role, meta, text).
fn transcript_messages(home: &Path, sid: &str) -> Vec<(String, String, String, String)> {
    transcript(home, sid)
        .into_iter()
        .filter(|r| r["type"] == "message")
        .map(|r| {
            (
                r["uuid"].as_str().unwrap_or_default().to_string(),
                r["role"].as_str().unwrap_or_default().to_string(),
                r["meta"].as_str().unwrap_or_default().to_string(),
                r["content"].to_string(),
            )
        })
        .collect()
}

fn transcript(home: &Path, sid: &str) -> Vec<Value> {
    std::fs::read_to_string(transcript_path(home, sid))
        .expect("read")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The id of the newest note about instruction files.
fn newest_note(home: &Path, sid: &str) -> String {
    transcript(home, sid)
        .iter()
        .rev()
        .find(|r| r["type"] == "instruction_change" && r["scoped"].is_null())
        .and_then(|r| r["messageId"].as_str().map(str::to_string))
        .expect("an instruction note")
}

/// The id of the message whose text contains `needle`.
fn id_of(home: &Path, sid: &str, needle: &str) -> String {
    transcript_messages(home, sid)
        .into_iter()
        .find(|(_, _, _, t)| t.contains(needle))
        .map(|(id, ..)| id)
        .unwrap_or_else(|| panic!("no message with {needle:?}"))
}

/// Writes a workspace file and waits until the server saw the change.
fn change(g: &mut Garuda, ws: &Path, rel: &str, content: Option<&str>) {
    let path = ws.join(rel);
    match content {
        Some(c) => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).expect("dir");
            }
            std::fs::write(&path, c).expect("write");
        }
        None => std::fs::remove_file(&path).expect("remove"),
    }
    g.wait_method("workspace/contextChanged");
}

#[test]
fn an_added_rule_survives_collapse_and_snip_and_is_never_sent_twice() {
    let mock = Mock::start(vec![
        text("one", 100),
        text("two", 100),
        text("three", 100),
        text("collapsed: questions two and three", 30),
        text("four", 100),
        text("five", 100),
        text("six", 100),
    ]);
    let (mut g, home, ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "question one");
    change(
        &mut g,
        ws.path(),
        "AGENTS.md",
        Some(&format!("Be brief.\n{ADDED}\n")),
    );
    turn(&mut g, &sid, "question two");
    assert_in_force(&last(&mock), ADDED, "the turn after the change");
    turn(&mut g, &sid, "question three");
    assert_in_force(
        &last(&mock),
        ADDED,
        "the next turn (the note is still in view)",
    );

    // Collapse the span that holds the note.
    let from = newest_note(home.path(), &sid);
    let to = id_of(home.path(), &sid, "\"three\"");
    let r = g.call(
        "session/collapse",
        json!({"sessionId": sid, "fromId": from, "toId": to}),
    );
    let summary = r["summary"].as_str().expect("summary");
    assert!(
        summary.starts_with("collapsed: questions two and three"),
        "{r}"
    );
    turn(&mut g, &sid, "question four");
    assert_in_force(&last(&mock), ADDED, "after the collapse");
    let resent = newest_note(home.path(), &sid);
    assert_ne!(resent, from, "the note was sent again");

    // Snip the re-sent note.
    let r = g.call(
        "session/snip",
        json!({"sessionId": sid, "messageIds": [resent]}),
    );
    assert_eq!(r["removed"][0], json!(resent), "{r}");
    turn(&mut g, &sid, "question five");
    assert_in_force(&last(&mock), ADDED, "after the snip");
    turn(&mut g, &sid, "question six");
    assert_in_force(&last(&mock), ADDED, "a turn later, nothing new sent");
    let notes = transcript(home.path(), &sid)
        .iter()
        .filter(|r| r["type"] == "instruction_change")
        .count();
    assert_eq!(
        notes, 3,
        "one note per loss: the change, the collapse, the snip"
    );
}

#[test]
fn removed_rules_deleted_files_and_memory_changes_stop_being_in_force_until_a_summary_rebuilds_the_prompt()
 {
    let mock = Mock::start(vec![
        text("one", 100),
        text("two", 100),
        text("collapsed: question two", 30),
        text("three", 100),
        text("four", 100),
        // The provider's count is what a compaction measures its gain against.
        text("five", 20_000),
        text("summary of the session so far", 40),
        text("six", 100),
    ]);
    let (mut g, home, ws, wid) = setup(&mock, WINDOW_100K);
    change(
        &mut g,
        ws.path(),
        "CLAUDE.md",
        Some(&format!("{REMOVED}\nKeep it.\n")),
    );
    change(
        &mut g,
        ws.path(),
        ".garuda/memory.md",
        Some("- MEMORY-OLD: port 8080\n"),
    );
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "question one");
    let (system, _) = parts(&last(&mock));
    assert!(
        system.contains(REMOVED) && system.contains("MEMORY-OLD"),
        "{system}"
    );

    // The rule goes, then the whole file; the memory file changes.
    change(&mut g, ws.path(), "CLAUDE.md", Some("Keep it.\n"));
    change(
        &mut g,
        ws.path(),
        ".garuda/memory.md",
        Some("- MEMORY-NEW: port 9090\n"),
    );
    turn(&mut g, &sid, "question two");
    let body = last(&mock);
    assert_retracted(&body, REMOVED, "after the rule was removed");
    assert_retracted(&body, "MEMORY-OLD", "after the memory changed");
    assert_in_force(&body, "MEMORY-NEW", "after the memory changed");
    change(&mut g, ws.path(), "CLAUDE.md", None);
    // The collapse takes the note of the change away; its successor says the file is gone.
    let from = newest_note(home.path(), &sid);
    let to = id_of(home.path(), &sid, "\"two\"");
    g.call(
        "session/collapse",
        json!({"sessionId": sid, "fromId": from, "toId": to}),
    );
    turn(&mut g, &sid, "question three");
    let body = last(&mock);
    let (_, messages) = parts(&body);
    assert!(
        messages.contains("Deleted (its rules no longer apply): CLAUDE.md"),
        "{messages}"
    );
    assert_retracted(&body, REMOVED, "after the collapse");
    assert_retracted(&body, "Keep it.", "after the file was deleted");
    assert_in_force(&body, "MEMORY-NEW", "after the collapse");
    turn(&mut g, &sid, "question four");
    turn(&mut g, &sid, "question five");

    // A summary rebuilds the system prompt from disk: no note any more, nothing twice.
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    turn(&mut g, &sid, "question six");
    let body = last(&mock);
    let (system, messages) = parts(&body);
    assert!(
        !system.contains(REMOVED) && !system.contains("Keep it."),
        "{system}"
    );
    assert!(!system.contains("MEMORY-OLD"), "{system}");
    assert_in_force(&body, "MEMORY-NEW", "after the summary");
    assert!(
        !messages.contains("changed on disk since the system prompt"),
        "{messages}"
    );
}

#[test]
fn a_resumed_session_drops_its_stale_notes_and_hears_of_changes_made_while_it_was_down() {
    let mock = Mock::start(vec![
        text("one", 100),
        text("two", 100),
        text("three", 100),
        text("four", 100),
    ]);
    let (mut g, home, ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "question one");
    change(
        &mut g,
        ws.path(),
        "AGENTS.md",
        Some(&format!("Be brief.\n{ADDED}\n")),
    );
    turn(&mut g, &sid, "question two");
    assert_in_force(&last(&mock), ADDED, "before the restart");
    let _ = g.child.kill();
    let _ = g.child.wait();

    let restart = |mock: &Mock| {
        let env = mock.env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &env);
        g.call("initialize", json!({"capabilities": {}}));
        g.open(ws.path());
        g
    };
    // The prompt assembled at load has the rule: the old note goes, nothing is sent twice.
    let mut g = restart(&mock);
    g.call("session/load", json!({"sessionId": sid}));
    turn(&mut g, &sid, "question three");
    assert_in_force(&last(&mock), ADDED, "after the resume");
    let _ = g.child.kill();
    let _ = g.child.wait();

    // Removed while the server was down: the prompt at load no longer has it.
    std::fs::write(ws.path().join("AGENTS.md"), "Be brief.\n").expect("write");
    std::thread::sleep(Duration::from_millis(50));
    let mut g = restart(&mock);
    g.call("session/load", json!({"sessionId": sid}));
    turn(&mut g, &sid, "question four");
    let (system, messages) = parts(&last(&mock));
    assert!(
        !system.contains(ADDED) && !messages.contains(ADDED),
        "{messages}"
    );
}

#[test]
fn a_note_survives_a_stage1_trim() {
    let (mock, mut g, _h, ws, sid) = ready_to_trim();
    change(
        &mut g,
        ws.path(),
        "AGENTS.md",
        Some(&format!("Be brief.\n{ADDED}\n")),
    );
    turn(&mut g, &sid, "question 6");
    let events = g.turn_events();
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "compaction" && e["phase"] == "stage1"),
        "a trim ran"
    );
    assert_in_force(&last(&mock), ADDED, "after the trim");
}

#[test]
fn a_reactive_compaction_rebuilds_the_prompt_with_the_change_and_drops_the_note() {
    let mut replies = history(500);
    replies.push(MockReply::prompt_too_long_anthropic());
    replies.push(text("<summary>REACTIVE</summary>", 50));
    replies.push(text("six", 200));
    let mock = Mock::start(replies);
    let (mut g, _h, ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    run_history(&mut g, &sid);
    change(
        &mut g,
        ws.path(),
        "AGENTS.md",
        Some(&format!("Be brief.\n{ADDED}\n")),
    );
    let r = turn(&mut g, &sid, "question 6");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    let (_, refused) = parts(&bodies[bodies.len() - 3]);
    assert!(refused.contains(ADDED), "the refused request had the note");
    let body = last(&mock);
    let (system, _) = parts(&body);
    assert!(system.contains(ADDED), "the rebuilt prompt has the rule");
    assert_in_force(&body, ADDED, "after the reactive compaction");
}

/// Defect: a config change reopened the workspace and dropped the watcher of the one live
/// sessions held, so a later change to AGENTS.md never reached them.
#[test]
fn a_change_after_a_config_reload_still_reaches_a_live_session() {
    let mock = Mock::start(vec![text("one", 100), text("two", 100)]);
    let (mut g, home, ws, wid) = setup(&mock, WINDOW_100K);
    let sid = new_session(&mut g, &wid);
    turn(&mut g, &sid, "question one");
    let config = home.path().join("config/garuda/config.toml");
    let mut text_now = std::fs::read_to_string(&config).expect("config");
    text_now.push_str("\n[server]\nmax_in_flight = 7\n");
    std::fs::write(&config, text_now).expect("write config");
    let reloaded = g.wait_method("window/showMessage");
    assert_eq!(reloaded["params"]["type"], 3, "{reloaded}");
    change(
        &mut g,
        ws.path(),
        "AGENTS.md",
        Some(&format!("Be brief.\n{ADDED}\n")),
    );
    turn(&mut g, &sid, "question two");
    assert_in_force(&last(&mock), ADDED, "the turn after the change");
}
