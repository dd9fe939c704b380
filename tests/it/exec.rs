//! `garuda exec` as scripts and CI use it: stdin, step separators, the JSON `finished` event,
//! exit codes, and continuing a session.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::mock_model::*;
use crate::turns::{MODEL, Mock};

/// Runs `garuda ARGS` with `stdin` piped in (or `/dev/null` when `None`) and `env` set.
fn run(home: &Path, env: &[(String, String)], args: &[&str], stdin: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_garuda"));
    crate::client::isolated_env(&mut c, home);
    for (k, v) in env {
        c.env(k, v);
    }
    c.args(args)
        .current_dir(home)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    let mut child = c.spawn().expect("spawn garuda");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(text.as_bytes()).expect("write stdin");
    }
    child.wait_with_output().expect("wait")
}

fn cassette(dir: &Path, lines: &[&str]) -> String {
    let p = dir.join("cassette.jsonl");
    std::fs::write(&p, lines.join("\n")).expect("cassette");
    format!("replay:{}", p.display())
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn events(o: &Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

/// An answer the replay model gives only when the last user message contains `needle`.
fn answer_if(needle: &str, text: &str) -> String {
    serde_json::json!({
        "response": {"content": [{"type": "text", "text": text}], "stopReason": "end_turn"},
        "match": needle,
    })
    .to_string()
}

const BASH_TOUCH: &str = r#"{"response":{"content":[{"type":"text","text":"Running it."},{"type":"tool_use","id":"t1","name":"bash","input":{"command":"touch ran.txt"}}],"stopReason":"tool_use"}}"#;
const DONE: &str =
    r#"{"response":{"content":[{"type":"text","text":"Done."}],"stopReason":"end_turn"}}"#;

#[test]
fn exec_separates_steps_with_a_newline() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("a.txt"), "alpha\n").expect("write");
    let model = cassette(
        ws.path(),
        &[
            r#"{"response":{"content":[{"type":"text","text":"Writing."},{"type":"tool_use","id":"t1","name":"read_file","input":{"path":"a.txt"}}],"stopReason":"tool_use"}}"#,
            r#"{"response":{"content":[{"type":"tool_use","id":"t2","name":"list_files","input":{}}],"stopReason":"tool_use"}}"#,
            r#"{"response":{"content":[{"type":"text","text":"Wrote it."}],"stopReason":"end_turn"}}"#,
        ],
    );
    let dir = ws.path().to_str().expect("utf8");
    let out = run(
        home.path(),
        &[],
        &["exec", "--model", &model, dir, "go"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // One line per step with text; the step without text adds no blank line.
    assert_eq!(stdout(&out), "Writing.\nWrote it.\n");
    assert!(
        stderr(&out).contains("[tool] read_file: a.txt"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn exec_reads_the_prompt_from_stdin() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");

    // `-` is the prompt read from stdin, not the text "-".
    let model = cassette(ws.path(), &[&answer_if("question from stdin", "A1")]);
    let out = run(
        home.path(),
        &[],
        &["exec", "--model", &model, dir, "-"],
        Some("question from stdin\n"),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "A1\n");

    // No PROMPT at all with a pipe on stdin: the same.
    let model = cassette(ws.path(), &[&answer_if("piped question", "A2")]);
    let out = run(
        home.path(),
        &[],
        &["exec", "--model", &model],
        Some("piped question"),
    );
    // The workspace is the current folder (here the test's home).
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "A2\n");

    // A PROMPT and piped stdin: stdin is appended to the prompt as context.
    let model = cassette(
        ws.path(),
        &[&answer_if(
            "explain this\n\n<stdin>\nerror: linker failed\n</stdin>",
            "A3",
        )],
    );
    let out = run(
        home.path(),
        &[],
        &["exec", "--model", &model, dir, "explain this"],
        Some("error: linker failed\n"),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "A3\n");

    // `-` with nothing on stdin is a usage error.
    let out = run(
        home.path(),
        &[],
        &["exec", "--model", &model, dir, "-"],
        Some(""),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no prompt"), "{}", stderr(&out));
}

#[test]
fn exec_json_finished_event_carries_the_provider_error() {
    let mock = Mock::start(vec![MockReply::unauthorized()]);
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let out = run(
        home.path(),
        &mock.env(),
        &["exec", "--json", "--model", MODEL, dir, "hi"],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let evs = events(&out);
    let last = &evs.last().expect("events")["event"];
    assert_eq!(last["kind"], "finished");
    assert_eq!(last["stopReason"], "error");
    assert_eq!(last["error"]["kind"], "auth", "{last}");
    assert!(
        last["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("HTTP 401")),
        "{last}"
    );
    assert!(!stdout(&out).contains("sk-test-not-a-real-key"));

    // A replay problem is reported the same way, with its own kind.
    let model = cassette(ws.path(), &[]);
    let out = run(
        home.path(),
        &[],
        &["exec", "--json", "--model", &model, dir, "hi"],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let evs = events(&out);
    let last = &evs.last().expect("events")["event"];
    assert_eq!(last["error"]["kind"], "replay", "{last}");
    assert!(
        last["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("exhausted"))
    );

    // A turn that ends well carries no error field.
    let model = cassette(ws.path(), &[DONE]);
    let out = run(
        home.path(),
        &[],
        &["exec", "--json", "--model", &model, dir, "hi"],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let evs = events(&out);
    let last = &evs.last().expect("events")["event"];
    assert_eq!(last["stopReason"], "end_turn");
    assert!(last.get("error").is_none(), "{last}");
}

#[test]
fn exec_exit_codes() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");

    // A command that needs approval, with no terminal to ask: the turn stops, exit 3.
    let model = cassette(ws.path(), &[BASH_TOUCH, DONE]);
    let out = run(
        home.path(),
        &[],
        &["exec", "--model", &model, "--policy", "ask", dir, "run"],
        None,
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!ws.path().join("ran.txt").exists());
    assert_eq!(
        stdout(&out),
        "Running it.\n",
        "the turn stopped before Done."
    );
    let err = stderr(&out);
    assert!(
        err.contains("[approval needed] bash: touch ran.txt") && err.contains("--policy"),
        "{err}"
    );

    // The same with --json: the finished event says why.
    let model = cassette(ws.path(), &[BASH_TOUCH, DONE]);
    let out = run(
        home.path(),
        &[],
        &[
            "exec", "--json", "--model", &model, "--policy", "ask", dir, "run",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(3));
    let evs = events(&out);
    let last = &evs.last().expect("events")["event"];
    assert_eq!(last["kind"], "finished");
    assert_eq!(last["error"]["kind"], "approvalRequired", "{last}");
    let result = evs
        .iter()
        .find(|e| e["event"]["kind"] == "toolCallFinished")
        .expect("tool result");
    assert!(
        result["event"]["output"]
            .as_str()
            .is_some_and(|o| o.contains("no one could be asked")),
        "the model is not told the user refused: {result}"
    );
    assert_eq!(
        result["event"]["meta"]["approval"], "unavailable",
        "not a rejection: {result}"
    );

    // full-auto runs it: exit 0.
    let model = cassette(ws.path(), &[BASH_TOUCH, DONE]);
    let out = run(
        home.path(),
        &[],
        &[
            "exec",
            "--model",
            &model,
            "--policy",
            "full-auto",
            dir,
            "run",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(ws.path().join("ran.txt").exists());
    assert_eq!(stdout(&out), "Running it.\nDone.\n");

    // The model failing: exit 1.
    let model = cassette(ws.path(), &[]);
    let out = run(
        home.path(),
        &[],
        &["exec", "--model", &model, dir, "hi"],
        None,
    );
    assert_eq!(out.status.code(), Some(1));

    // Usage and configuration errors: exit 2, naming the flag and the config key.
    let out = run(home.path(), &[], &["exec", dir, "hi"], None);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("--model") && err.contains("config.toml") && !err.contains("pass `model`"),
        "{err}"
    );
    let out = run(
        home.path(),
        &[],
        &[
            "exec",
            "--model",
            &model,
            "--policy",
            "sometimes",
            dir,
            "hi",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("--policy") && err.contains("approval.policy"),
        "{err}"
    );
    let out = run(
        home.path(),
        &[],
        &["exec", "--model", "nonsense", dir, "hi"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--model nonsense"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn exec_continues_a_session() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_text("First answer.", MockUsage::new(10, 2))),
        MockReply::Sse(anthropic_text("Second answer.", MockUsage::new(20, 2))),
        MockReply::Sse(anthropic_text("Third answer.", MockUsage::new(30, 2))),
    ]);
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let env = mock.env();

    // Nothing to continue yet.
    let out = run(
        home.path(),
        &env,
        &["exec", "--continue", "--model", MODEL, dir, "x"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--continue"), "{}", stderr(&out));
    assert_eq!(mock.rec.count(), 0);

    let out = run(
        home.path(),
        &env,
        &["exec", "--json", "--model", MODEL, dir, "first question"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let sid = events(&out)[0]["sessionId"]
        .as_str()
        .expect("session id")
        .to_string();

    // --continue: the latest session of the workspace, with its history.
    let out = run(
        home.path(),
        &env,
        &["exec", "--continue", dir, "second question"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Second answer.\n");
    assert!(stderr(&out).contains(&sid), "{}", stderr(&out));
    let second = mock.rec.bodies()[1].to_string();
    assert!(
        second.contains("first question") && second.contains("First answer."),
        "{second}"
    );

    // --session ID, from another folder: the session keeps its own workspace.
    let out = run(
        home.path(),
        &env,
        &["exec", "--session", &sid, "third question"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Third answer.\n");
    let third = mock.rec.bodies()[2].to_string();
    assert!(
        third.contains("first question") && third.contains("Second answer."),
        "{third}"
    );

    // An unknown session, another model, another folder: usage errors, no request.
    let out = run(home.path(), &env, &["exec", "--session", "nope", "x"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--session"), "{}", stderr(&out));
    let out = run(
        home.path(),
        &env,
        &["exec", "--session", &sid, "--model", "openai/gpt-5.1", "x"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("keeps its model"), "{}", stderr(&out));
    let other = tempfile::tempdir().expect("other");
    let out = run(
        home.path(),
        &env,
        &[
            "exec",
            "--session",
            &sid,
            other.path().to_str().expect("utf8"),
            "x",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("belongs to"), "{}", stderr(&out));
    assert_eq!(mock.rec.count(), 3);
}

#[test]
fn exec_takes_a_prompt_that_looks_like_a_flag_after_double_dash() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let model = cassette(ws.path(), &[&answer_if("--verbose means what?", "A flag.")]);
    let out = run(
        home.path(),
        &[],
        &[
            "exec",
            "--model",
            &model,
            "--",
            dir,
            "--verbose means what?",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "A flag.\n");
    // Without `--` it is an unknown flag: a usage error, no turn.
    let out = run(
        home.path(),
        &[],
        &["exec", "--model", &model, dir, "--verbose"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
}
