//! Hooks end to end, with real shell scripts: Claude Code's settings imported unchanged (a
//! command policy, context after a compaction), every event of Garuda's own `[[hooks.EVENT]]`
//! with its input and effect, hooks that hang, flood or print broken JSON, and a workspace's
//! hooks that wait for the user's trust.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Framing, Garuda, isolated_env};
use crate::context::{WINDOW_100K, text, turn};
use crate::mock_model::*;
use crate::turns::{Mock, write_config};

fn call(id: &str, tool: &str, input: Value) -> MockReply {
    let j = input.to_string();
    MockReply::Sse(anthropic_tool_use(id, tool, &[j.as_str()]))
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).expect("mkdir");
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    p
}

/// A server for `home` and a workspace with AGENTS.md, a.txt and b.txt.
fn start(home: &Path, mock: &Mock) -> (Garuda, tempfile::TempDir, String) {
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("AGENTS.md"), "Be brief.\n").expect("write");
    std::fs::write(ws.path().join("a.txt"), "AAA\n").expect("write");
    std::fs::write(ws.path().join("b.txt"), "BBB-CONTENT\n").expect("write");
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home, &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    (g, ws, wid)
}

fn new_session(g: &mut Garuda, wid: &str) -> String {
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    r["sessionId"].as_str().expect("sessionId").to_string()
}

fn hook_events(g: &Garuda) -> Vec<Value> {
    g.turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "hook")
        .collect()
}

/// Waits (bounded) for a file a hook writes without being waited for.
fn eventually(p: &Path) -> String {
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        if let Ok(t) = std::fs::read_to_string(p)
            && !t.is_empty()
        {
            return t;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{} never appeared", p.display());
}

const NO_SANDBOX: &str = "[sandbox]\nenabled = false\n";

#[test]
fn claude_code_hooks_enforce_a_command_policy_and_add_context_after_compaction() {
    let home = tempfile::tempdir().expect("home");
    let dir = home.path().join("hooks");
    let policy = script(
        &dir,
        "policy.sh",
        "input=$(cat)\ncase \"$input\" in *'rm -rf'*) echo 'rm -rf is not allowed here' >&2; exit 2;; esac\nexit 0",
    );
    let after = script(&dir, "after_compact.sh", "echo 'REMEMBER: build with make'");
    std::fs::create_dir_all(home.path().join(".claude")).expect("mkdir");
    let settings = json!({"hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": policy}]}],
        "SessionStart": [{"matcher": "compact", "hooks": [{"type": "command", "command": after}]}],
    }});
    std::fs::write(
        home.path().join(".claude/settings.json"),
        settings.to_string(),
    )
    .expect("w");
    write_config(
        home.path(),
        &format!("{WINDOW_100K}{NO_SANDBOX}[hooks]\nimport = [\"claude\"]\n"),
    );
    let mut replies = vec![
        call(
            "toolu_1",
            "bash",
            json!({"command": "touch ran && rm -rf gone"}),
        ),
        text("it was blocked", 100),
        call("toolu_2", "bash", json!({"command": "touch safe"})),
        text("done", 100),
    ];
    for i in 3..=6 {
        replies.push(text(&format!("answer {i}"), 20_000));
    }
    replies.push(text("<summary>HOOKED</summary>", 50));
    replies.push(text("after", 100));
    let mock = Mock::start(replies);
    let (mut g, ws, wid) = start(home.path(), &mock);
    let sid = new_session(&mut g, &wid);
    for q in ["delete it", "make safe", "q3", "q4", "q5", "q6"] {
        let r = turn(&mut g, &sid, q);
        assert_eq!(r["stopReason"], "end_turn", "{q}: {r}");
    }
    assert!(
        !ws.path().join("ran").exists(),
        "the blocked command never ran"
    );
    assert!(ws.path().join("safe").exists(), "the allowed command ran");
    let blocked = g
        .turn_events()
        .into_iter()
        .find(|e| e["kind"] == "toolCallFinished" && e["id"] == "toolu_1")
        .expect("finished");
    assert_eq!(blocked["meta"]["blockedByHook"], true, "{blocked}");
    assert!(
        hook_events(&g)
            .iter()
            .any(|e| e["event"] == "PreToolUse" && e["phase"] == "blocked")
    );
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    let r = turn(&mut g, &sid, "go on");
    assert_eq!(r["stopReason"], "end_turn", "{r}");

    let bodies = mock.rec.bodies();
    let after_block = bodies[1].to_string();
    assert!(
        after_block.contains("Blocked by a hook: rm -rf is not allowed here"),
        "{after_block}"
    );
    assert!(
        bodies[0]["system"]
            .to_string()
            .contains("Blocked by a hook")
    );
    let last = bodies.last().expect("last").to_string();
    let note = last
        .find("REMEMBER: build with make")
        .expect("the SessionStart(compact) context");
    let summary = last.find("HOOKED").expect("summary");
    assert!(
        summary < note,
        "installed after the summary and attachments"
    );
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    let hooks = inspect["hooks"].as_array().expect("hooks");
    assert_eq!(hooks.len(), 2, "{inspect}");
    assert!(hooks.iter().all(|h| {
        h["origin"]
            .as_str()
            .unwrap_or("")
            .ends_with(".claude/settings.json")
    }));
}

#[test]
fn every_event_runs_its_hooks_with_its_input_and_effect() {
    let home = tempfile::tempdir().expect("home");
    let log = home.path().join("log");
    std::fs::create_dir_all(&log).expect("mkdir");
    let l = log.display().to_string();
    let hook = |event: &str, matcher: Option<&str>, command: &str, timeout: Option<u32>| {
        let m = matcher
            .map(|m| format!("matcher = {m:?}\n"))
            .unwrap_or_default();
        let t = timeout
            .map(|t| format!(", timeout = {t}"))
            .unwrap_or_default();
        format!(
            "[[hooks.{event}]]\n{m}hooks = [{{ type = \"command\", command = {command:?}{t} }}]\n"
        )
    };
    let logged = |event: &str| format!("cat >> {l}/{event}.log; echo >> {l}/{event}.log");
    let mut cfg = String::from(WINDOW_100K);
    cfg.push_str(NO_SANDBOX);
    cfg.push_str(&hook(
        "SessionStart",
        None,
        &format!("{}; echo START-CONTEXT", logged("SessionStart")),
        None,
    ));
    // A hook that hangs is killed at its timeout; the session goes on.
    cfg.push_str(&hook("SessionStart", None, "sleep 30", Some(1)));
    cfg.push_str(&hook(
        "UserPromptSubmit",
        None,
        &format!(
            "input=$(cat); echo \"$input\" >> {l}/UserPromptSubmit.log; case \"$input\" in *forbidden*) echo 'no forbidden words' >&2; exit 2;; esac; echo '{{\"hookSpecificOutput\":{{\"hookEventName\":\"UserPromptSubmit\",\"additionalContext\":\"PROMPT-CONTEXT\"}}}}'"
        ),
        None,
    ));
    cfg.push_str(&hook(
        "PreToolUse",
        Some("read_file"),
        &format!(
            "{}; echo '{{\"hookSpecificOutput\":{{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"allow\",\"updatedInput\":{{\"path\":\"b.txt\"}}}}}}'",
            logged("PreToolUse")
        ),
        None,
    ));
    cfg.push_str(&hook(
        "PreToolUse",
        Some("Bash"),
        "cat > /dev/null; echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"ask\",\"permissionDecisionReason\":\"check this\"}}'",
        None,
    ));
    cfg.push_str(&hook(
        "PostToolUse",
        Some("read_file"),
        &format!(
            "{}; echo '{{\"decision\":\"block\",\"reason\":\"B-FILE-FEEDBACK\"}}'",
            logged("PostToolUse")
        ),
        None,
    ));
    // Megabytes of output and broken JSON: capped and warned about.
    cfg.push_str(&hook(
        "PostToolUse",
        Some("bash"),
        "cat > /dev/null; head -c 3000000 /dev/zero | tr '\\0' x",
        None,
    ));
    cfg.push_str(&hook(
        "PostToolUse",
        Some("bash"),
        "cat > /dev/null; echo '{\"decision\": '",
        None,
    ));
    cfg.push_str(&hook(
        "Stop",
        None,
        &format!(
            "input=$(cat); echo \"$input\" >> {l}/Stop.log; case \"$input\" in *'\"last_assistant_message\":\"done\"'*) echo '{{\"decision\":\"block\",\"reason\":\"run the tests first\"}}';; esac"
        ),
        None,
    ));
    cfg.push_str(&hook(
        "PreCompact",
        None,
        &format!(
            "{}; if [ -e {l}/block-compact ]; then echo 'not now' >&2; exit 2; fi; echo KEEP-THE-HOOK-LINE",
            logged("PreCompact")
        ),
        None,
    ));
    for event in [
        "PostCompact",
        "SessionEnd",
        "Notification",
        "InstructionsLoaded",
    ] {
        cfg.push_str(&hook(event, None, &logged(event), None));
    }
    write_config(home.path(), &cfg);
    let mut replies = vec![
        call("toolu_r", "read_file", json!({"path": "a.txt"})),
        call("toolu_b", "bash", json!({"command": "echo ran-bash"})),
        text("done", 100),
        text("tests pass", 100),
    ];
    for i in 3..=6 {
        replies.push(text(&format!("answer {i}"), 20_000));
    }
    replies.push(text("<summary>S</summary>", 50));
    let mock = Mock::start(replies);
    let (mut g, _ws, wid) = start(home.path(), &mock);
    let sid = new_session(&mut g, &wid);

    // Turn 1: the read is redirected and allowed, its result gets feedback; the command asks
    // though the policy is full-auto; the first Stop sends the model back once.
    let mut asked = Vec::new();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "read the file"}]}),
        |req| {
            asked.push(req.clone());
            json!({"optionId": "allow_once"})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(asked.len(), 1, "one approval, for the command: {asked:?}");
    assert!(
        asked[0]["params"]["title"]
            .to_string()
            .contains("echo ran-bash")
    );
    let bodies = mock.rec.bodies();
    let first = bodies[0].to_string();
    assert!(
        first.contains("START-CONTEXT") && first.contains("PROMPT-CONTEXT"),
        "{first}"
    );
    let second = bodies[1].to_string();
    assert!(
        second.contains("BBB-CONTENT"),
        "updatedInput read b.txt: {second}"
    );
    assert!(second.contains("<hook_feedback>B-FILE-FEEDBACK</hook_feedback>"));
    let continued = bodies[3].to_string();
    assert!(continued.contains("run the tests first"), "{continued}");
    let stop_log = std::fs::read_to_string(log.join("Stop.log")).expect("Stop.log");
    assert!(stop_log.contains("\"stop_hook_active\":false"));
    assert!(stop_log.contains("\"stop_hook_active\":true"), "{stop_log}");
    let events = hook_events(&g);
    let failed: Vec<&Value> = events.iter().filter(|e| e["phase"] == "failed").collect();
    assert!(
        failed.iter().any(|e| e["event"] == "SessionStart"),
        "the hanging hook: {events:?}"
    );
    assert!(
        failed.iter().any(|e| e["event"] == "PostToolUse"),
        "broken JSON: {events:?}"
    );
    // Each hook read its event's fields.
    let pre = std::fs::read_to_string(log.join("PreToolUse.log")).expect("log");
    let pre: Value = serde_json::from_str(pre.lines().next().expect("line")).expect("json");
    assert_eq!(pre["hook_event_name"], "PreToolUse");
    assert_eq!(pre["tool_name"], "read_file");
    assert_eq!(pre["tool_input"]["path"], "a.txt");
    assert_eq!(pre["session_id"], sid.as_str());
    assert!(
        pre["transcript_path"]
            .as_str()
            .expect("path")
            .ends_with(".jsonl")
    );
    let post = std::fs::read_to_string(log.join("PostToolUse.log")).expect("log");
    assert!(post.contains("\"tool_response\"") && post.contains("BBB-CONTENT"));
    let start = std::fs::read_to_string(log.join("SessionStart.log")).expect("log");
    assert!(start.contains("\"source\":\"startup\""), "{start}");
    assert!(eventually(&log.join("Notification.log")).contains("permission_prompt"));
    assert!(eventually(&log.join("InstructionsLoaded.log")).contains("AGENTS.md"));

    // A blocked prompt is refused with the reason and not sent.
    let sent = mock.rec.bodies().len();
    let r = g.request(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "this is forbidden"}]}),
    );
    assert_eq!(r["error"]["code"], -32062, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "no forbidden words");
    assert_eq!(mock.rec.bodies().len(), sent, "nothing went to the model");

    for q in ["q3", "q4", "q5", "q6"] {
        let r = turn(&mut g, &sid, q);
        assert_eq!(r["stopReason"], "end_turn", "{q}: {r}");
    }
    // PreCompact: blocked, then its instructions reach the summary request.
    std::fs::write(log.join("block-compact"), "").expect("flag");
    let r = g.request("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["error"]["code"], -32062, "{r}");
    std::fs::remove_file(log.join("block-compact")).expect("unflag");
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    let summary_request = mock.rec.bodies().last().expect("summary").to_string();
    assert!(
        summary_request.contains("KEEP-THE-HOOK-LINE"),
        "{summary_request}"
    );
    let pre_compact = std::fs::read_to_string(log.join("PreCompact.log")).expect("log");
    assert!(pre_compact.contains("\"trigger\":\"manual\""));
    let post_compact = std::fs::read_to_string(log.join("PostCompact.log")).expect("log");
    assert!(
        post_compact.contains("\"compact_summary\""),
        "{post_compact}"
    );
    let start = std::fs::read_to_string(log.join("SessionStart.log")).expect("log");
    assert!(start.contains("\"source\":\"compact\""), "{start}");

    g.call("session/delete", json!({"sessionId": sid}));
    assert!(eventually(&log.join("SessionEnd.log")).contains("\"reason\":\"delete\""));
}

#[test]
fn a_workspace_hook_runs_only_once_the_user_trusts_the_workspace() {
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), NO_SANDBOX);
    let mock = Mock::start(vec![text("one", 10), text("two", 10)]);
    let (mut g, ws, wid) = start(home.path(), &mock);
    std::fs::create_dir_all(ws.path().join(".garuda")).expect("mkdir");
    // The workspace config is read when the workspace opens: reopen after writing it.
    std::fs::write(
        ws.path().join(".garuda/config.toml"),
        "[[hooks.UserPromptSubmit]]\nhooks = [{ type = \"command\", command = \"touch ws-hook-ran\" }]\n",
    )
    .expect("write");
    g.call("workspace/close", json!({"workspaceId": wid}));
    let wid = g.open(ws.path());
    let sid = new_session(&mut g, &wid);
    let r = turn(&mut g, &sid, "hi");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    assert!(
        !ws.path().join("ws-hook-ran").exists(),
        "untrusted: never runs"
    );
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    let skipped = inspect["hooksSkipped"].to_string();
    assert!(skipped.contains("trust"), "{inspect}");

    let mut trust = Command::new(env!("CARGO_BIN_EXE_garuda"));
    isolated_env(&mut trust, home.path());
    let out = trust
        .arg("trust")
        .arg(ws.path())
        .output()
        .expect("garuda trust");
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("touch ws-hook-ran"),
        "{out:?}"
    );
    let sid = new_session(&mut g, &wid);
    let r = turn(&mut g, &sid, "hi again");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    assert!(ws.path().join("ws-hook-ran").exists(), "trusted: it runs");
}

/// A session still in memory when the client closes stdin: its SessionEnd hook runs with
/// reason `exit` and the server waits for it before exiting.
#[test]
fn session_end_runs_at_exit_and_is_waited_for() {
    let home = tempfile::tempdir().expect("home");
    let log = home.path().join("end.log");
    let mut cfg = String::from(NO_SANDBOX);
    cfg.push_str(&format!(
        "[[hooks.SessionEnd]]\nhooks = [{{ type = \"command\", command = \"sleep 0.5; cat > {}\" }}]\n",
        log.display()
    ));
    write_config(home.path(), &cfg);
    let mock = Mock::start(vec![text("hi", 10)]);
    let (mut g, _ws, wid) = start(home.path(), &mock);
    let sid = new_session(&mut g, &wid);
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "hello"}]}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    g.close_stdin();
    assert_eq!(g.wait_exit(), Some(0));
    // Written before the server exited: no waiting here.
    let end = std::fs::read_to_string(&log).expect("the SessionEnd hook ran before the exit");
    assert!(end.contains("\"reason\":\"exit\""), "{end}");
    assert!(end.contains(&sid), "{end}");
}

fn log_lines(dir: &Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(format!("{event}.log")))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("hook input"))
        .collect()
}

#[test]
fn sub_sessions_run_subagent_start_and_stop_and_not_the_callers_session_hooks() {
    let home = tempfile::tempdir().expect("home");
    let log = home.path().join("log");
    std::fs::create_dir_all(&log).expect("mkdir");
    let l = log.display().to_string();
    let hook = |event: &str, matcher: Option<&str>, command: &str| {
        let m = matcher
            .map(|m| format!("matcher = {m:?}\n"))
            .unwrap_or_default();
        format!("[[hooks.{event}]]\n{m}hooks = [{{ type = \"command\", command = {command:?} }}]\n")
    };
    let logged = |event: &str| format!("cat >> {l}/{event}.log; echo >> {l}/{event}.log");
    let mut cfg = String::from(NO_SANDBOX);
    for event in ["SessionStart", "UserPromptSubmit", "Stop", "PreToolUse"] {
        cfg.push_str(&hook(event, None, &logged(event)));
    }
    cfg.push_str(&hook(
        "SubagentStart",
        Some("explore"),
        &format!("{}; echo SUBAGENT-CONTEXT", logged("SubagentStart")),
    ));
    // Blocks the agent's first report once: it goes on and reports again.
    cfg.push_str(&hook(
        "SubagentStop",
        Some("explore"),
        &format!(
            "input=$(cat); echo \"$input\" >> {l}/SubagentStop.log; case \"$input\" in *FIRST-REPORT*) echo '{{\"decision\":\"block\",\"reason\":\"CHECK-AGAIN\"}}';; esac"
        ),
    ));
    write_config(home.path(), &cfg);
    let mock = Mock::start(vec![
        call("t_x", "explore", json!({"task": "look"})),
        text("FIRST-REPORT", 50),
        text("SECOND-REPORT", 50),
        text("done", 50),
    ]);
    let (mut g, _ws, wid) = start(home.path(), &mock);
    let sid = new_session(&mut g, &wid);
    let r = turn(&mut g, &sid, "explore it");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 4);
    assert!(
        bodies[1].to_string().contains("SUBAGENT-CONTEXT"),
        "context for the agent"
    );
    assert!(!bodies[0].to_string().contains("SUBAGENT-CONTEXT"));
    assert!(
        bodies[2].to_string().contains("CHECK-AGAIN"),
        "the agent went on"
    );
    assert!(
        bodies[3].to_string().contains("SECOND-REPORT"),
        "its last report is the result"
    );

    let start = log_lines(&log, "SubagentStart");
    assert_eq!(start.len(), 1, "{start:?}");
    assert_eq!(start[0]["hook_event_name"], "SubagentStart");
    assert_eq!(start[0]["agent_type"], "explore");
    assert_eq!(start[0]["parent_session_id"], sid.as_str());
    let child = start[0]["agent_id"].as_str().expect("agent_id").to_string();
    assert_eq!(start[0]["session_id"], child.as_str());
    let stop = log_lines(&log, "SubagentStop");
    assert_eq!(stop.len(), 2, "{stop:?}");
    assert_eq!(stop[0]["stop_hook_active"], false);
    assert_eq!(stop[1]["stop_hook_active"], true);
    assert_eq!(stop[1]["last_assistant_message"], "SECOND-REPORT");
    assert!(
        stop[0]["agent_transcript_path"]
            .as_str()
            .is_some_and(|p| p.contains(&child)),
        "{}",
        stop[0]
    );
    // The caller's session hooks ran for the caller alone.
    for event in ["SessionStart", "UserPromptSubmit", "Stop"] {
        let seen = log_lines(&log, event);
        assert_eq!(seen.len(), 1, "{event}: {seen:?}");
        assert_eq!(seen[0]["session_id"], sid.as_str(), "{event}");
    }
    let pre = log_lines(&log, "PreToolUse");
    assert_eq!(pre.len(), 1, "only the explore call had tools: {pre:?}");
    assert_eq!(pre[0]["tool_name"], "explore");
}

#[test]
fn pre_tool_use_does_not_run_for_a_call_plan_mode_refuses() {
    let home = tempfile::tempdir().expect("home");
    let log = home.path().join("log");
    std::fs::create_dir_all(&log).expect("mkdir");
    let l = log.display().to_string();
    write_config(
        home.path(),
        &format!(
            "{NO_SANDBOX}[[hooks.PreToolUse]]\nhooks = [{{ type = \"command\", command = \"cat >> {l}/PreToolUse.log; echo >> {l}/PreToolUse.log\" }}]\n"
        ),
    );
    let mock = Mock::start(vec![
        call(
            "t_w",
            "write_file",
            json!({"path": "x.txt", "content": "x"}),
        ),
        call("t_r", "read_file", json!({"path": "a.txt"})),
        text("here is my plan", 50),
    ]);
    let (mut g, ws, wid) = start(home.path(), &mock);
    let r = g.call("session/new", json!({"workspaceId": wid, "policy": "plan"}));
    let sid = r["sessionId"].as_str().expect("sid").to_string();
    let r = turn(&mut g, &sid, "plan it");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let refused = g
        .turn_events()
        .into_iter()
        .find(|e| e["kind"] == "toolCallFinished" && e["id"] == "t_w")
        .expect("the write finished");
    assert_eq!(refused["meta"]["blockedByPlanMode"], true, "{refused}");
    assert!(!ws.path().join("x.txt").exists());
    let pre = log_lines(&log, "PreToolUse");
    let tools: Vec<&str> = pre.iter().filter_map(|p| p["tool_name"].as_str()).collect();
    assert_eq!(tools, ["read_file"], "no hook for the refused write");
}

/// After a compaction, in the seed's order: SessionStart(compact) runs before PostCompact
/// gets the summary; and InstructionsLoaded announces every instruction file the view carries
/// again with the reason `compact`, a nested file the session attached included.
#[test]
fn after_a_compaction_session_start_runs_before_post_compact_and_nested_files_are_announced() {
    let home = tempfile::tempdir().expect("home");
    let log = home.path().join("log");
    std::fs::create_dir_all(&log).expect("mkdir");
    let l = log.display().to_string();
    let mut cfg = format!("{WINDOW_100K}{NO_SANDBOX}");
    for event in ["SessionStart", "PostCompact", "InstructionsLoaded"] {
        cfg.push_str(&format!(
            "[[hooks.{event}]]\nhooks = [{{ type = \"command\", command = {:?} }}]\n",
            format!(
                "input=$(cat); echo \"$input\" >> {l}/{event}.log; echo \"{event} $(echo \"$input\" | grep -o '\"source\":\"[a-z]*\"')\" >> {l}/order.log"
            )
        ));
    }
    write_config(home.path(), &cfg);
    let mut replies = vec![
        call("toolu_r", "read_file", json!({"path": "pkg/x.txt"})),
        text("read it", 100),
    ];
    for i in 2..=6 {
        replies.push(text(&format!("answer {i}"), 20_000));
    }
    replies.push(text("<summary>S</summary>", 50));
    let mock = Mock::start(replies);
    let (mut g, ws, wid) = start(home.path(), &mock);
    std::fs::create_dir_all(ws.path().join("pkg")).expect("mkdir");
    std::fs::write(ws.path().join("pkg/AGENTS.md"), "NESTED-RULE\n").expect("write");
    std::fs::write(ws.path().join("pkg/x.txt"), "x\n").expect("write");
    let sid = new_session(&mut g, &wid);
    for q in ["read pkg/x.txt", "q2", "q3", "q4", "q5", "q6"] {
        let r = turn(&mut g, &sid, q);
        assert_eq!(r["stopReason"], "end_turn", "{q}: {r}");
    }
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    let order = std::fs::read_to_string(log.join("order.log")).expect("order");
    let lines: Vec<&str> = order.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.contains("\"source\":\"compact\""))
        .expect("SessionStart(compact)");
    let post = lines
        .iter()
        .position(|l| l.starts_with("PostCompact"))
        .expect("PostCompact");
    assert!(start < post, "{order}");
    // InstructionsLoaded is fired without waiting: wait for the nested file's announcement.
    let end = Instant::now() + Duration::from_secs(20);
    let announced = loop {
        let t = std::fs::read_to_string(log.join("InstructionsLoaded.log")).unwrap_or_default();
        let compact: Vec<&str> = t
            .lines()
            .filter(|l| l.contains("\"load_reason\":\"compact\""))
            .collect();
        if compact.iter().any(|l| l.contains("pkg/AGENTS.md")) || Instant::now() > end {
            break compact.join("\n");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(announced.contains("pkg/AGENTS.md"), "{announced}");
    assert!(
        announced
            .lines()
            .any(|l| l.contains("AGENTS.md") && !l.contains("pkg/AGENTS.md")),
        "{announced}"
    );
    // The nested file was announced when the read first brought it into force, too.
    let all = std::fs::read_to_string(log.join("InstructionsLoaded.log")).expect("log");
    assert!(
        all.lines()
            .any(|l| l.contains("pkg/AGENTS.md")
                && l.contains("\"load_reason\":\"nested_traversal\"")),
        "{all}"
    );
}
