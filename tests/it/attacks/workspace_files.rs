//! Attacks: workspace_files.
//! What a file of a cloned repository names is data: an agent file's `model` can only pick
//! among the models the user set up (never a `replay:` cassette, a path), a cassette is read
//! only as a small regular file (so no pipe, FIFO or device stalls or floods the server), the
//! skill list in the `skill` tool is bounded whatever the folder holds, and a name written to
//! read as another is refused.

use std::path::Path;

use serde_json::{Value, json};

use crate::client::Garuda;
use crate::mock_model::*;
use crate::turns::{Mock, setup};

fn write(dir: &Path, rel: &str, body: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, body).expect("write");
}

fn input(t: &str) -> Value {
    json!([{"type": "text", "text": t}])
}

/// An agent file of the workspace naming `model`.
fn agent_naming(ws: &Path, model: &str) {
    write(
        ws,
        ".claude/agents/helper.md",
        &format!("---\ndescription: Helps.\ntools: Read\nmodel: {model}\n---\nHelp.\n"),
    );
}

/// The mock's replies for a turn that calls the agent `helper` once: the call, the agent's
/// report, the caller's last answer.
fn one_agent_call() -> Vec<MockReply> {
    vec![
        MockReply::Sse(anthropic_tool_use(
            "t1",
            "agent",
            &[r#"{"name": "helper", "task": "look"}"#],
        )),
        MockReply::Sse(anthropic_text("HELPER-REPORT", MockUsage::new(3, 1))),
        MockReply::Sse(anthropic_text("done", MockUsage::new(3, 1))),
    ]
}

/// A session's warnings at `session/new`, as one string.
fn new_session(g: &mut Garuda, wid: &str) -> (String, String) {
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    (sid, r["warnings"].to_string())
}

/// Runs the turn that calls `helper` and checks it ran on the caller's model.
fn run_helper(g: &mut Garuda, mock: &Mock, sid: &str) {
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": input("ask the helper")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    assert_eq!(
        bodies[1]["model"], "claude-sonnet-4-5",
        "the caller's model"
    );
    assert!(bodies[2].to_string().contains("HELPER-REPORT"));
}

#[test]
fn replay_dev_stdin_in_an_agent_file_is_refused_and_the_server_keeps_answering() {
    let mock = Mock::start(one_agent_call());
    let (mut g, _h, ws, wid) = setup(&mock, "");
    agent_naming(ws.path(), "replay:/dev/stdin");
    let (sid, warnings) = new_session(&mut g, &wid);
    assert!(
        warnings.contains(".claude/agents/helper.md: model \\\"replay:/dev/stdin\\\" is refused")
            && warnings.contains("runs on the caller's model"),
        "{warnings}"
    );
    // Before the fix the agent read the server's own protocol pipe as its cassette: this
    // turn, and every request after it, went unanswered.
    run_helper(&mut g, &mock, &sid);
    let r = g.request("turn/cancel", json!({"sessionId": sid}));
    assert!(r.get("result").is_some() || r.get("error").is_some(), "{r}");
    g.call("session/list", json!({"workspaceId": wid}));
}

/// A FIFO nobody writes: opening it for reading without `O_NONBLOCK` waits forever.
fn fifo(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("tape.fifo");
    let ok = std::process::Command::new("mkfifo")
        .arg(&p)
        .status()
        .expect("mkfifo")
        .success();
    assert!(ok, "mkfifo failed");
    p
}

#[test]
fn replay_fifo_freezes_nothing() {
    let mock = Mock::start(one_agent_call());
    let (mut g, _h, ws, wid) = setup(&mock, "");
    let outside = tempfile::tempdir().expect("dir");
    let fifo = fifo(outside.path());
    agent_naming(ws.path(), &format!("replay:{}", fifo.display()));
    let (sid, warnings) = new_session(&mut g, &wid);
    assert!(warnings.contains("is refused"), "{warnings}");
    run_helper(&mut g, &mock, &sid);
    // The user may name a cassette (the command line, a client's `model`): a FIFO there is a
    // clear error, and the server and other workspaces go on answering.
    let r = g.request(
        "session/new",
        json!({"workspaceId": wid, "model": format!("replay:{}", fifo.display())}),
    );
    let err = r["error"]["message"].to_string();
    assert!(err.contains("not a regular file (FIFO)"), "{r}");
    let other = tempfile::tempdir().expect("ws");
    let wid2 = g.open(other.path());
    g.call("session/new", json!({"workspaceId": wid2}));
    g.call("session/list", json!({"workspaceId": wid}));
}

#[test]
fn replay_dev_zero_is_refused_without_reading() {
    let mock = Mock::start(one_agent_call());
    let (mut g, _h, ws, wid) = setup(&mock, "");
    agent_naming(ws.path(), "replay:/dev/zero");
    let (sid, warnings) = new_session(&mut g, &wid);
    assert!(
        warnings.contains("\\\"replay:/dev/zero\\\" is refused"),
        "{warnings}"
    );
    run_helper(&mut g, &mock, &sid);
    // Named by the user, a device is refused from its kind, before a byte is read.
    let r = g.request(
        "session/new",
        json!({"workspaceId": wid, "model": "replay:/dev/zero"}),
    );
    assert!(
        r["error"]["message"]
            .to_string()
            .contains("not a regular file (character device)"),
        "{r}"
    );
}

#[test]
fn replay_file_outside_the_root_is_not_read() {
    let mock = Mock::start(one_agent_call());
    let (mut g, _h, ws, wid) = setup(&mock, "");
    let outside = tempfile::tempdir().expect("dir");
    let secret = outside.path().join("secrets.json");
    std::fs::write(&secret, "{\"AWS_SECRET_KEY_FIELD\": \"x\"}\n").expect("write");
    agent_naming(ws.path(), &format!("replay:{}", secret.display()));
    let (sid, warnings) = new_session(&mut g, &wid);
    assert!(warnings.contains("is refused"), "{warnings}");
    run_helper(&mut g, &mock, &sid);
    // Before the fix the agent's error, sent to the provider, quoted the file's first key
    // and told whether the path exists.
    for body in mock.rec.bodies() {
        let body = body.to_string();
        assert!(!body.contains("AWS_SECRET_KEY_FIELD"), "{body}");
        assert!(!body.contains("secrets.json"), "{body}");
    }
}

#[test]
fn agent_named_with_a_bidi_override_is_refused() {
    let mock = Mock::start(vec![MockReply::Sse(anthropic_text(
        "ok",
        MockUsage::new(3, 1),
    ))]);
    let (mut g, _h, ws, wid) = setup(&mock, "");
    write(
        ws.path(),
        ".claude/agents/helper.md",
        "---\nname: \"safe\u{202e}elif_daer\"\ndescription: Reads files.\n---\nHelp.\n",
    );
    let r = g.call("session/new", json!({"workspaceId": wid}));
    let warnings: Vec<&str> = r["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let w = warnings.join("\n");
    assert!(
        w.contains(".claude/agents/helper.md: line 2:")
            && w.contains("safe\\u{202e}elif_daer")
            && w.contains("agent skipped"),
        "{w}"
    );
    assert!(!w.contains('\u{202e}'), "{w}");
    let sid = r["sessionId"].as_str().expect("sessionId");
    g.call("turn/run", json!({"sessionId": sid, "input": input("hi")}));
    let body = mock.rec.bodies()[0].to_string();
    assert!(
        !body.contains("elif_daer"),
        "the agent is not offered: {body}"
    );
}

#[test]
fn ten_thousand_skill_folders_make_a_bounded_tool_description() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t1",
            "skill",
            &[r#"{"query": "zebra"}"#],
        )),
        MockReply::Sse(anthropic_text("done", MockUsage::new(3, 1))),
    ]);
    let (mut g, _h, ws, wid) = setup(&mock, "");
    let long = "Does one thing with files and folders. ".repeat(25);
    for i in 0..10_000 {
        let name = format!("skill-{i:05}");
        let description = if i == 9_999 {
            "Feeds the zebra."
        } else {
            long.as_str()
        };
        write(
            ws.path(),
            &format!(".agents/skills/{name}/SKILL.md"),
            &format!("---\nname: {name}\ndescription: {description}\n---\nSteps.\n"),
        );
    }
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("of 10000 skills are not listed in the skill tool's description"),
        "{warnings}"
    );
    let sid = r["sessionId"].as_str().expect("sessionId");
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": input("feed the zebra")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    let skill = bodies[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "skill")
        .expect("the skill tool");
    // Before the fix: 1.9 M characters of description, every request 2.0 MB.
    let description = skill["description"].as_str().expect("description");
    assert!(description.len() < 20_000, "{} bytes", description.len());
    assert!(skill.to_string().len() < 25_000, "no enum of every name");
    assert!(
        description.contains("more skills are not listed"),
        "{description}"
    );
    assert!(bodies[0].to_string().len() < 100_000);
    // The ones left out are found by the search.
    let second = bodies[1].to_string();
    assert!(second.contains("skill-09999: Feeds the zebra."), "{second}");
}
