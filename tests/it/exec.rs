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
const BASH_OUTSIDE: &str = r#"{"response":{"content":[{"type":"tool_use","id":"t1","name":"bash","input":{"command":"touch outside.txt","outside_sandbox":true}}],"stopReason":"tool_use"}}"#;
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

    // A command that asks to leave the sandbox asks under full-auto too; with no one to ask,
    // the run stops for approval (and on a machine without a sandbox every command asks).
    let model = cassette(ws.path(), &[BASH_OUTSIDE, DONE]);
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
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!ws.path().join("outside.txt").exists());
    let err = stderr(&out);
    assert!(
        err.contains("[approval needed] bash (outside the sandbox, unconfined): touch outside.txt"),
        "{err}"
    );

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

const PRICES: &str =
    "[models.\"anthropic/claude-sonnet-4-5\"]\ninput_price = 3.0\noutput_price = 15.0\n";

/// Stored transcript lines of a session.
fn transcript_lines(home: &Path, id: &str) -> usize {
    let p = home
        .join("state/garuda/sessions")
        .join(format!("{id}.jsonl"));
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .count()
}

#[test]
fn exec_json_starts_with_init_and_finishes_with_usage_and_cost() {
    let usage = MockUsage {
        input: 1000,
        output: 100,
        cache_creation: 200,
        cache_read: 3000,
    };
    let mock = Mock::start(vec![MockReply::Sse(anthropic_text("Hi.", usage))]);
    let home = tempfile::tempdir().expect("home");
    crate::turns::write_config(home.path(), PRICES);
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let out = run(
        home.path(),
        &mock.env(),
        &["exec", "--json", "--policy", "auto-edit", dir, "hi"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&out);
    let init = &evs[0]["event"];
    assert_eq!(init["kind"], "init", "{init}");
    assert_eq!(init["sessionId"], evs[0]["sessionId"]);
    assert_eq!(init["model"], MODEL);
    assert_eq!(init["approvalPolicy"], "auto-edit");
    assert_eq!(init["resumed"], false);
    let root = std::fs::canonicalize(ws.path()).expect("canon");
    assert_eq!(init["workspace"], root.to_str().expect("utf8"));
    let tools: Vec<&str> = init["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"read_file") && tools.contains(&"bash"),
        "{tools:?}"
    );
    assert!(init["sandbox"]["mode"].is_string(), "{init}");
    let fin = &evs.last().expect("events")["event"];
    assert_eq!(fin["kind"], "finished");
    assert_eq!(fin["stopReason"], "end_turn");
    assert_eq!(fin["steps"], 1);
    assert_eq!(fin["usage"]["inputTokens"], 1000, "{fin}");
    assert_eq!(fin["usage"]["outputTokens"], 100);
    assert_eq!(fin["usage"]["cacheCreationInputTokens"], 200);
    assert_eq!(fin["usage"]["cacheReadInputTokens"], 3000);
    // 1000 × 3 + 100 × 15 + 200 × 3.75 + 3000 × 0.3, per million tokens.
    let cost = fin["costUsd"].as_f64().expect("cost");
    assert!((cost - 0.00615).abs() < 1e-9, "{cost}");
    // Exactly one finished line: the core's own is folded into the run's.
    let finished = evs
        .iter()
        .filter(|e| e["event"]["kind"] == "finished")
        .count();
    assert_eq!(finished, 1);
}

fn schema_file(dir: &Path) -> String {
    let p = dir.join("schema.json");
    std::fs::write(
        &p,
        r#"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
            "properties":{"ok":{"type":"boolean"},"files":{"type":"array","items":{"type":"string"}}},
            "required":["ok"],"additionalProperties":false}"#,
    )
    .expect("schema");
    p.display().to_string()
}

#[test]
fn exec_output_schema_validates_repairs_once_then_fails() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_text("Sure, it is fine.", MockUsage::new(10, 2))),
        MockReply::Sse(anthropic_text(
            r#"{"ok": true, "files": ["a.rs"]}"#,
            MockUsage::new(10, 2),
        )),
        MockReply::Sse(anthropic_text(r#"{"ok": "yes"}"#, MockUsage::new(10, 2))),
        MockReply::Sse(anthropic_text("still prose", MockUsage::new(10, 2))),
    ]);
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let schema = schema_file(home.path());
    let env = mock.env();

    // Prose first, then a valid answer after the repair request: stdout is the object alone.
    let out = run(
        home.path(),
        &env,
        &[
            "exec",
            "--model",
            MODEL,
            "--output-schema",
            &schema,
            dir,
            "check it",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "{\"ok\":true,\"files\":[\"a.rs\"]}\n");
    let bodies = mock.rec.bodies();
    // The provider's structured output carries the schema, and so does the message.
    assert_eq!(bodies[0]["output_format"]["type"], "json_schema");
    assert_eq!(
        bodies[0]["output_format"]["schema"]["required"][0], "ok",
        "{}",
        bodies[0]
    );
    assert!(bodies[0].to_string().contains("<output_format>"));
    let headers = mock.rec.headers();
    assert!(
        headers[0]
            .iter()
            .any(|(k, v)| k == "anthropic-beta" && v.contains("structured-outputs")),
        "{:?}",
        headers[0]
    );
    assert!(
        bodies[1].to_string().contains("cannot be used"),
        "{}",
        bodies[1]
    );

    // Two answers that do not match: exit 4, kind `schema`, nothing on stdout.
    let out = run(
        home.path(),
        &env,
        &[
            "exec",
            "--json",
            "--model",
            MODEL,
            "--output-schema",
            &schema,
            dir,
            "check it",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let evs = events(&out);
    let fin = &evs.last().expect("events")["event"];
    assert_eq!(fin["error"]["kind"], "schema", "{fin}");
    assert!(fin.get("structuredOutput").is_none());
    assert_eq!(mock.rec.count(), 4);

    // A schema that is not one: a usage error before any request.
    let bad = home.path().join("bad.json");
    std::fs::write(&bad, r#"{"type": 12}"#).expect("bad");
    let out = run(
        home.path(),
        &env,
        &[
            "exec",
            "--model",
            MODEL,
            "--output-schema",
            bad.to_str().expect("utf8"),
            dir,
            "x",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--output-schema"), "{}", stderr(&out));
    assert_eq!(mock.rec.count(), 4);
}

#[test]
fn exec_output_schema_with_json_puts_the_object_in_finished() {
    let mock = Mock::start(vec![MockReply::Sse(anthropic_text(
        "```json\n{\"ok\": false}\n```",
        MockUsage::new(10, 2),
    ))]);
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let schema = schema_file(home.path());
    let out = run(
        home.path(),
        &mock.env(),
        &[
            "exec",
            "--json",
            "--model",
            MODEL,
            "--output-schema",
            &schema,
            dir,
            "check",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&out);
    let fin = &evs.last().expect("events")["event"];
    assert_eq!(fin["structuredOutput"], serde_json::json!({"ok": false}));
}

#[test]
fn exec_max_turns_stops_cleanly_and_the_session_continues() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use("toolu_1", "list_files", &["{}"])),
        MockReply::Sse(anthropic_tool_use("toolu_2", "list_files", &["{}"])),
        MockReply::Sse(anthropic_text("Listed.", MockUsage::new(10, 2))),
    ]);
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let env = mock.env();
    let out = run(
        home.path(),
        &env,
        &[
            "exec",
            "--json",
            "--model",
            MODEL,
            "--max-turns",
            "1",
            dir,
            "list",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let evs = events(&out);
    let fin = &evs.last().expect("events")["event"];
    assert_eq!(fin["stopReason"], "max_turns", "{fin}");
    assert_eq!(fin["error"]["kind"], "maxTurns");
    assert_eq!(fin["steps"], 1);
    assert_eq!(mock.rec.count(), 1);
    // The call ran and has its result before the stop.
    assert!(
        evs.iter()
            .any(|e| e["event"]["kind"] == "toolCallFinished" && e["event"]["id"] == "toolu_1")
    );

    // Continued: the next request answers toolu_1 and the turn ends normally.
    let out = run(
        home.path(),
        &env,
        &["exec", "--continue", dir, "go on"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let body = mock.rec.bodies()[1].to_string();
    assert!(
        body.contains(r#""tool_use_id":"toolu_1""#) && body.contains("go on"),
        "{body}"
    );
    assert_eq!(stdout(&out), "Listed.\n");
}

#[test]
fn exec_max_budget_needs_prices_and_stops_at_the_limit() {
    let big = AnthropicSse::new(MockUsage::new(100_000, 1000))
        .tool_use("toolu_1", "list_files", &["{}"])
        .finish("tool_use");
    let mock = Mock::start(vec![
        MockReply::Sse(big),
        MockReply::Sse(anthropic_text("never", MockUsage::new(10, 2))),
    ]);
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let env = mock.env();
    let args = [
        "exec",
        "--json",
        "--model",
        MODEL,
        "--max-budget-usd",
        "0.10",
        dir,
        "spend",
    ];
    // No prices configured: a usage error naming the config keys, no request.
    let out = run(home.path(), &env, &args, None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("input_price") && stderr(&out).contains("output_price"),
        "{}",
        stderr(&out)
    );
    assert_eq!(mock.rec.count(), 0);

    // With prices: the first step costs $0.315, over the budget, so no second request.
    crate::turns::write_config(home.path(), PRICES);
    let out = run(home.path(), &env, &args, None);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let evs = events(&out);
    let fin = &evs.last().expect("events")["event"];
    assert_eq!(fin["stopReason"], "max_budget", "{fin}");
    assert_eq!(fin["error"]["kind"], "maxBudget");
    assert!(fin["costUsd"].as_f64().expect("cost") > 0.1);
    assert_eq!(mock.rec.count(), 1);
}

#[test]
fn exec_fork_starts_a_new_session_from_the_history() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_text("First answer.", MockUsage::new(10, 2))),
        MockReply::Sse(anthropic_text("Forked answer.", MockUsage::new(10, 2))),
        MockReply::Sse(anthropic_text("Original again.", MockUsage::new(10, 2))),
    ]);
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let env = mock.env();
    let out = run(
        home.path(),
        &env,
        &["exec", "--json", "--model", MODEL, dir, "first question"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let sid = events(&out)[0]["sessionId"]
        .as_str()
        .expect("id")
        .to_string();
    let before = transcript_lines(home.path(), &sid);

    let out = run(
        home.path(),
        &env,
        &["exec", "--json", "--fork", &sid, "forked question"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&out);
    let init = &evs[0]["event"];
    let fork = init["sessionId"].as_str().expect("id").to_string();
    assert_ne!(fork, sid);
    assert_eq!(init["forkedFrom"], sid.as_str());
    assert_eq!(init["resumed"], true);
    let body = mock.rec.bodies()[1].to_string();
    assert!(
        body.contains("first question") && body.contains("forked question"),
        "{body}"
    );
    // The original is unchanged and goes on without the fork's messages.
    assert_eq!(transcript_lines(home.path(), &sid), before);
    let out = run(
        home.path(),
        &env,
        &["exec", "--session", &sid, "again"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let body = mock.rec.bodies()[2].to_string();
    assert!(!body.contains("forked question"), "{body}");

    let out = run(home.path(), &env, &["exec", "--fork", "nope", "x"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--fork"), "{}", stderr(&out));
}

#[test]
fn exec_stream_json_runs_a_turn_per_line() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_text("One.", MockUsage::new(10, 2))),
        MockReply::Sse(anthropic_text("Two.", MockUsage::new(10, 2))),
    ]);
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let input = concat!(
        r#"{"type":"user","message":{"role":"user","content":"first line"}}"#,
        "\n\n",
        r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"second line"}]}}"#,
        "\n"
    );
    let out = run(
        home.path(),
        &mock.env(),
        &[
            "exec",
            "--json",
            "--input-format",
            "stream-json",
            "--model",
            MODEL,
            dir,
        ],
        Some(input),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&out);
    let kinds: Vec<&str> = evs
        .iter()
        .filter_map(|e| e["event"]["kind"].as_str())
        .filter(|k| matches!(*k, "init" | "finished"))
        .collect();
    assert_eq!(kinds, ["init", "finished", "finished"]);
    let ids: std::collections::BTreeSet<&str> =
        evs.iter().filter_map(|e| e["sessionId"].as_str()).collect();
    assert_eq!(ids.len(), 1, "one session");
    let second = mock.rec.bodies()[1].to_string();
    assert!(
        second.contains("first line") && second.contains("One.") && second.contains("second line"),
        "{second}"
    );
    // Without --json it is a usage error.
    let out = run(
        home.path(),
        &mock.env(),
        &[
            "exec",
            "--input-format",
            "stream-json",
            "--model",
            MODEL,
            dir,
        ],
        Some(input),
    );
    assert_eq!(out.status.code(), Some(2));
}

/// Starts `garuda exec --json` that runs a long command, waits for the command to start,
/// sends `signal` and returns the exit code and the output lines.
fn signalled_exec(signal: &str) -> (Option<i32>, Vec<Value>, String) {
    use std::io::BufRead;
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "toolu_1",
            "bash",
            &[r#"{"command":"sleep 30"}"#],
        )),
        MockReply::Sse(anthropic_text("never", MockUsage::new(10, 2))),
    ]);
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let mut c = Command::new(env!("CARGO_BIN_EXE_garuda"));
    crate::client::isolated_env(&mut c, home.path());
    for (k, v) in mock.env() {
        c.env(k, v);
    }
    c.args([
        "exec",
        "--json",
        "--policy",
        "full-auto",
        "--model",
        MODEL,
        ws.path().to_str().expect("utf8"),
        "sleep",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut child = c.spawn().expect("spawn");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let v: Value = serde_json::from_str(&line.expect("line")).expect("json");
        let started = v["event"]["kind"] == "toolCallStarted";
        seen.push(v);
        if started {
            break;
        }
    }
    let sid = seen[0]["sessionId"].as_str().expect("id").to_string();
    let st = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    for line in lines {
        seen.push(serde_json::from_str(&line.expect("line")).expect("json"));
    }
    let code = child.wait().expect("wait").code();
    let transcript = std::fs::read_to_string(
        home.path()
            .join("state/garuda/sessions")
            .join(format!("{sid}.jsonl")),
    )
    .expect("transcript");
    (code, seen, transcript)
}

#[test]
fn exec_sigterm_exits_143_and_sigint_130_with_the_transcript_written() {
    for (signal, code) in [("-TERM", 143), ("-INT", 130)] {
        let (status, evs, transcript) = signalled_exec(signal);
        assert_eq!(status, Some(code), "{signal}: {evs:?}");
        let fin = &evs.last().expect("events")["event"];
        assert_eq!(fin["kind"], "finished", "{signal}: {fin}");
        assert_eq!(fin["stopReason"], "cancelled");
        // The interrupted call has its result in the transcript: nothing dangles.
        assert!(
            transcript.contains("toolu_1") && transcript.contains("tool_result"),
            "{transcript}"
        );
    }
}

/// The git state `garuda exec` reads before its workspace is open reaches the first request
/// as the session-start note, also when DIR is given as a relative path with `..` in it.
#[test]
fn exec_sends_the_git_state_read_ahead() {
    let home = tempfile::tempdir().expect("home");
    let ws = home.path().join("repo");
    std::fs::create_dir_all(ws.join("sub")).expect("mkdir");
    std::fs::write(ws.join("a.txt"), "a\n").expect("write");
    let git = |args: &[&str]| crate::pipeline::git(&ws, args);
    git(&["init", "-q"]);
    git(&["symbolic-ref", "HEAD", "refs/heads/ahead"]);
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "AHEAD-COMMIT"]);
    let mock = Mock::start(vec![crate::context::text("hi", 10)]);
    let o = run(
        home.path(),
        &mock.env(),
        &["exec", "--model", MODEL, "repo/sub/..", "hello"],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let first = mock.rec.bodies()[0]["messages"].to_string();
    assert!(first.contains("Branch: ahead"), "{first}");
    assert!(first.contains("AHEAD-COMMIT"), "{first}");
}

#[test]
fn exec_in_plan_mode_refuses_changes_and_stops_at_the_unapproved_plan() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let plan = r#"{"response":{"content":[{"type":"tool_use","id":"p1","name":"exit_plan_mode","input":{"plan":"1. touch ran.txt"}}],"stopReason":"tool_use"}}"#;
    let model = cassette(ws.path(), &[BASH_TOUCH, plan, DONE]);
    let out = run(
        home.path(),
        &[],
        &[
            "exec", "--model", &model, "--policy", "plan", dir, "plan it",
        ],
        None,
    );
    // The command was refused without asking; the plan needs an approval no one can give.
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!ws.path().join("ran.txt").exists());
    let err = stderr(&out);
    assert!(err.contains("Approve the plan"), "{err}");
    assert!(
        !err.contains("[approval needed] bash"),
        "plan mode asks nothing: {err}"
    );
}

/// `--continue` takes the user's session, never the sub-session its `explore` call wrote
/// (sub-sessions are listed too, and may tie with their caller on time).
#[test]
fn exec_continue_skips_agent_sub_sessions() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let explore = r#"{"response":{"content":[{"type":"tool_use","id":"x1","name":"explore","input":{"task":"look around"}}],"stopReason":"tool_use"}}"#;
    let report =
        r#"{"response":{"content":[{"type":"text","text":"REPORT"}],"stopReason":"end_turn"}}"#;
    let model = cassette(ws.path(), &[explore, report, DONE, DONE]);
    let first = run(
        home.path(),
        &[],
        &["exec", "--json", "--model", &model, dir, "explore it"],
        None,
    );
    assert!(first.status.success(), "{}", stderr(&first));
    let sid = events(&first)[0]["sessionId"].clone();
    let stored = std::fs::read_dir(home.path().join("state/garuda/sessions"))
        .expect("sessions")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .count();
    assert_eq!(stored, 2, "the session and its explore sub-session");
    let again = run(
        home.path(),
        &[],
        &["exec", "--json", "--continue", dir, "and now"],
        None,
    );
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(events(&again)[0]["sessionId"], sid);
}

/// An explore agent's stream reaches `garuda exec`: with --json its events are lines marked
/// with the agent, on a terminal its tool calls are lines on stderr.
#[test]
fn exec_shows_an_agents_calls() {
    let replies = || {
        vec![
            MockReply::Sse(anthropic_tool_use(
                "t_x",
                "explore",
                &[r#"{"task": "what is in a.txt?"}"#],
            )),
            MockReply::Sse(anthropic_tool_use(
                "t_read",
                "read_file",
                &[r#"{"path": "a.txt"}"#],
            )),
            MockReply::Sse(anthropic_text("CHILD-REPORT: alpha", MockUsage::new(7, 3))),
            MockReply::Sse(anthropic_text("done", MockUsage::new(5, 1))),
        ]
    };
    let home = tempfile::tempdir().expect("home");
    crate::turns::write_config(home.path(), "");
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("a.txt"), "alpha\n").expect("write");
    let dir = ws.path().to_str().expect("utf8");

    let mock = Mock::start(replies());
    let out = run(
        home.path(),
        &mock.env(),
        &["exec", "--json", "--policy", "auto-edit", dir, "look"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&out);
    let child: Vec<&Value> = evs.iter().filter(|e| e.get("agent").is_some()).collect();
    assert!(
        child.iter().any(|e| e["agent"]["name"] == "explore"
            && e["agent"]["toolCallId"] == "t_x"
            && e["event"]["kind"] == "toolCallStarted"
            && e["event"]["name"] == "read_file"),
        "{evs:?}"
    );
    assert!(child.iter().all(|e| e["sessionId"] == evs[0]["sessionId"]));

    let mock = Mock::start(replies());
    let out = run(
        home.path(),
        &mock.env(),
        &["exec", "--policy", "auto-edit", dir, "look"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[agent explore] [tool] read_file"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains("done"), "{}", stdout(&out));
}

#[test]
fn exec_prints_a_line_for_a_search_the_provider_ran() {
    let search = AnthropicSse::new(MockUsage::new(30, 20))
        .server_search(
            "srvtoolu_01",
            "serde derive",
            &[
                ("Serde", "https://serde.rs/"),
                ("Docs", "https://docs.rs/serde"),
            ],
        )
        .text("Derive it.")
        .finish("end_turn");
    let mock = Mock::start(vec![MockReply::Sse(search)]);
    let home = tempfile::tempdir().expect("home");
    crate::turns::write_config(home.path(), "[web.search]\nanthropic_server_tool = true\n");
    let ws = tempfile::tempdir().expect("ws");
    let dir = ws.path().to_str().expect("utf8");
    let out = run(
        home.path(),
        &mock.env(),
        &["exec", dir, "search serde"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("Derive it."), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("[tool] web_search"), "{err}");
    assert!(err.contains("[tool on the provider] 2 results"), "{err}");
    assert_eq!(
        mock.rec.bodies()[0]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter(|t| t["type"] == "web_search_20250305")
            .count(),
        1
    );
}
