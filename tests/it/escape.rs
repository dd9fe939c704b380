//! The sandbox's escape hatch: a `bash` call with `outside_sandbox: true` asks the user every
//! time (under `full-auto`, after "allow always", past a hook's `allow`), runs unconfined only
//! once approved, and changes nothing where commands are unconfined anyway. Package caches are
//! writable inside the sandbox. Assertions about confinement itself are skipped on a machine
//! without a sandbox (context/inspect says so); the asking holds everywhere.

use serde_json::{Value, json};

use crate::client::{Framing, Garuda};
use crate::mock_model::*;
use crate::turns::{Mock, write_config};

/// What a hidden folder holds: not a secret, only proof that the command saw the host's copy.
const MARKER: &str = "host-only-marker-5Jq";

const TITLE_PREFIX: &str = "bash (outside the sandbox, unconfined): ";

fn text_input(t: &str) -> Value {
    json!([{"type": "text", "text": t}])
}

fn bash(id: &str, command: &str, outside: bool) -> MockReply {
    let mut input = json!({ "command": command });
    if outside {
        input["outside_sandbox"] = json!(true);
    }
    let input = input.to_string();
    MockReply::Sse(anthropic_tool_use(id, "bash", &[&input]))
}

fn done() -> MockReply {
    MockReply::Sse(anthropic_text("done", MockUsage::new(5, 1)))
}

/// A folder outside /tmp (commands get their own /tmp) and outside the workspace.
fn outside_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("outside dir")
}

/// A server whose home (outside /tmp) has `extra_config`, a hidden `.ssh` folder with the
/// marker and the package cache folders `.npm` and `cache/pip` (`XDG_CACHE_HOME` is
/// `HOME/cache`); `env` is added to the mock's.
fn start(
    mock: &Mock,
    extra_config: &str,
    env: &[(&str, &str)],
) -> (Garuda, tempfile::TempDir, tempfile::TempDir, String) {
    let home = outside_dir();
    write_config(home.path(), extra_config);
    for d in [".ssh", ".npm", "cache/pip"] {
        std::fs::create_dir_all(home.path().join(d)).expect("mkdir");
    }
    std::fs::write(home.path().join(".ssh/marker"), MARKER).expect("write");
    let ws = tempfile::tempdir().expect("ws");
    let mut all = mock.env();
    all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let all: Vec<(&str, &str)> = all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &all);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    (g, home, ws, wid)
}

fn session(g: &mut Garuda, wid: &str, policy: &str) -> String {
    let r = g.call("session/new", json!({"workspaceId": wid, "policy": policy}));
    r["sessionId"].as_str().expect("sid").to_string()
}

/// Whether the session's commands run confined; `false` on a machine without a sandbox,
/// where the confinement assertions are skipped.
fn confined(g: &mut Garuda, sid: &str) -> bool {
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    let c = inspect["sandbox"]["confined"] == true;
    if !c {
        eprintln!(
            "no sandbox here ({}); confinement assertions skipped",
            inspect["sandbox"]["description"]
        );
    }
    c
}

/// Runs a turn answering each approval with `answer(title)`; returns the requests.
fn turn_answering(
    g: &mut Garuda,
    sid: &str,
    mut answer: impl FnMut(&str) -> &'static str,
) -> Vec<Value> {
    let mut asked = Vec::new();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("go")}),
        |req| {
            asked.push(req["params"].clone());
            let title = req["params"]["title"].as_str().unwrap_or_default();
            json!({"optionId": answer(title)})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    asked
}

/// The outputs of the finished tool calls so far, by call id.
fn output(g: &Garuda, id: &str) -> String {
    g.turn_events()
        .into_iter()
        .find(|e| e["kind"] == "toolCallFinished" && e["id"] == id)
        .map(|e| e["output"].as_str().unwrap_or_default().to_string())
        .unwrap_or_else(|| panic!("no result for {id}"))
}

fn option_ids(req: &Value) -> Vec<String> {
    req["options"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|o| o["optionId"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn outside_sandbox_asks_under_full_auto_and_runs_unconfined_only_once_approved() {
    let outside = outside_dir();
    let o = outside.path().display().to_string();
    let see = "cat ~/.ssh/marker";
    let mock = Mock::start(vec![
        bash("b1", &format!("echo x > {o}/rejected"), true),
        bash("b2", &format!("echo x > {o}/approved; {see}"), true),
        bash("b3", &format!("echo x > {o}/plain; {see}"), false),
        bash("b4", &format!("echo x > {o}/always"), true),
        bash("b5", &format!("echo x > {o}/again"), true),
        done(),
    ]);
    let (mut g, _home, _ws, wid) = start(&mock, "", &[]);
    let sid = session(&mut g, &wid, "full-auto");
    let boxed = confined(&mut g, &sid);
    let asked = turn_answering(&mut g, &sid, |title| {
        if title.contains("/rejected") {
            "reject"
        } else if title.contains("/always") {
            // A client that answers "always" anyway allows this one call only.
            "allow_always"
        } else {
            "allow_once"
        }
    });
    let titles: Vec<&str> = asked
        .iter()
        .map(|r| r["title"].as_str().unwrap_or_default())
        .collect();
    if boxed {
        // Every escape asked, the sandboxed command did not; no "allow always" offered.
        assert_eq!(titles.len(), 4, "{titles:?}");
        for (t, r) in titles.iter().zip(&asked) {
            assert!(t.starts_with(TITLE_PREFIX), "{t}");
            assert_eq!(option_ids(r), ["allow_once", "reject"], "{r}");
        }
        // The rejected call did not run; the approved ones ran unconfined: a write outside
        // the root and a folder the sandbox hides.
        assert!(!outside.path().join("rejected").exists());
        assert!(outside.path().join("approved").exists());
        assert!(output(&g, "b2").contains(MARKER), "{}", output(&g, "b2"));
        assert!(outside.path().join("always").exists());
        assert!(outside.path().join("again").exists());
        // The same command without the flag ran sandboxed, without asking.
        assert!(!outside.path().join("plain").exists());
        assert!(!output(&g, "b3").contains(MARKER), "{}", output(&g, "b3"));
        let finished = g
            .turn_events()
            .into_iter()
            .find(|e| e["kind"] == "toolCallFinished" && e["id"] == "b1")
            .expect("b1");
        assert_eq!(finished["meta"]["approval"], "rejected", "{finished}");
    } else {
        // Without a sandbox every command asks anyway, the flag changes nothing.
        assert_eq!(titles.len(), 5, "{titles:?}");
        assert!(!outside.path().join("rejected").exists());
        assert!(outside.path().join("approved").exists());
    }
}

#[test]
fn without_a_sandbox_the_flag_is_accepted_and_changes_nothing() {
    let mock = Mock::start(vec![bash("b1", "touch ran.txt", true), done()]);
    let (mut g, _home, ws, wid) = start(&mock, "", &[("GARUDA_BWRAP", "/nonexistent/bwrap")]);
    let sid = session(&mut g, &wid, "full-auto");
    assert!(!confined(&mut g, &sid));
    let asked = turn_answering(&mut g, &sid, |_| "allow_once");
    // It asks as every command does on such a machine, with the usual choices.
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        option_ids(&asked[0]).contains(&"allow_always".to_string()),
        "{asked:?}"
    );
    assert!(ws.path().join("ran.txt").exists());
    assert!(output(&g, "b1").contains("exit code: 0"));

    // The user turned the sandbox off under full-auto: the flag adds no question.
    let mock = Mock::start(vec![bash("b1", "touch off.txt", true), done()]);
    let (mut g, _home, ws, wid) = start(&mock, "[sandbox]\nenabled = false\n", &[]);
    let sid = session(&mut g, &wid, "full-auto");
    let asked = turn_answering(&mut g, &sid, |_| "reject");
    assert!(asked.is_empty(), "{asked:?}");
    assert!(ws.path().join("off.txt").exists());
}

#[test]
fn a_hooks_allow_and_allow_always_do_not_skip_the_question() {
    let home_hooks = outside_dir();
    let allow = home_hooks.path().join("allow.sh");
    std::fs::write(
        &allow,
        "#!/bin/sh\ncat > /dev/null\necho '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"allow\"}}'\n",
    )
    .expect("write");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&allow, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let config = format!(
        "[[hooks.PreToolUse]]\nmatcher = \"bash\"\nhooks = [{{ type = \"command\", command = {:?} }}]\n",
        allow.display().to_string()
    );
    let mock = Mock::start(vec![
        bash("b1", "touch plain.txt", false),
        bash("b2", "touch escaped.txt", true),
        done(),
    ]);
    let (mut g, _home, ws, wid) = start(&mock, &config, &[]);
    // Under `ask` the hook's allow lets the sandboxed command run without a question.
    let sid = session(&mut g, &wid, "ask");
    let boxed = confined(&mut g, &sid);
    let asked = turn_answering(&mut g, &sid, |_| "reject");
    if boxed {
        assert!(ws.path().join("plain.txt").exists());
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(
            asked[0]["title"]
                .as_str()
                .is_some_and(|t| t.starts_with(TITLE_PREFIX)),
            "{asked:?}"
        );
        assert!(!ws.path().join("escaped.txt").exists());
    }
}

#[test]
fn the_flag_is_in_the_tool_schema_and_package_caches_are_writable() {
    let mock = Mock::start(vec![
        bash(
            "b1",
            "echo n > ~/.npm/w && echo p > ~/cache/pip/w && echo CACHES-OK; echo h > ~/not-a-cache",
            false,
        ),
        done(),
    ]);
    let (mut g, home, _ws, wid) = start(&mock, "", &[]);
    let sid = session(&mut g, &wid, "full-auto");
    let boxed = confined(&mut g, &sid);
    let _ = turn_answering(&mut g, &sid, |_| "allow_once");
    assert!(
        output(&g, "b1").contains("CACHES-OK"),
        "{}",
        output(&g, "b1")
    );
    assert!(home.path().join(".npm/w").exists());
    assert!(home.path().join("cache/pip/w").exists());
    if boxed {
        // Only the caches: the rest of the home stays read-only.
        assert!(!home.path().join("not-a-cache").exists());
        let inspect = g.call("context/inspect", json!({"sessionId": sid}));
        assert!(
            inspect["sandbox"]["description"]
                .as_str()
                .is_some_and(|d| d.contains("package caches")),
            "{inspect}"
        );
    }
    // The model was offered the flag.
    let bodies = mock.rec.raw();
    let first: Value = serde_json::from_slice(&bodies[0]).expect("request body");
    let bash = first["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "bash"))
        .expect("bash tool");
    assert_eq!(
        bash["input_schema"]["properties"]["outside_sandbox"]["type"], "boolean",
        "{bash}"
    );
    if boxed {
        let system = first["system"].to_string();
        assert!(system.contains("outside_sandbox: true"), "{system}");
    }
}
