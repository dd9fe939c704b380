//! Attacks: trust, and the environment of what runs outside the sandbox. A workspace's hooks
//! run only as the user trusted them (`garuda trust` records the folder's identity and its
//! hooks), and nothing that runs outside the sandbox (a hook, an approved `outside_sandbox`
//! command, any command with `[sandbox] enabled = false`) gets a variable of the server's
//! environment off the allow-list, neither as its own variable nor by reading
//! `/proc/<server>/environ` (readable to a process running as root, as in a container).

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::client::{Framing, Garuda, isolated_env};
use crate::context::{text, turn};
use crate::mock_model::*;
use crate::turns::{Mock, write_config};

/// Secrets under names no deny-list of secret-looking names catches.
const PAT: (&str, &str) = ("GITHUB_PAT", "ghp_patvalue7Qx");
const DB: (&str, &str) = ("DATABASE_URL", "postgres://u:PASSw0rd9@db.internal/app");

/// What must never show up in output a command or hook can produce. As root the server's
/// `/proc` entry is readable despite its non-dumpable flag: then the output must show it was
/// read (the allow-listed PATH is in it), so the test covers that route too.
fn leaked(out: &str) -> Vec<&'static str> {
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if root {
        let server = out.split("\n---\n").nth(1).unwrap_or_default();
        assert!(
            server.contains("PATH="),
            "the server's environ was not read: {out}"
        );
    }
    [PAT.1, "PASSw0rd9"]
        .into_iter()
        .filter(|s| out.contains(s))
        .collect()
}

/// Prints the process's own environment and the server's (`$PPID` is the server: hooks and
/// unconfined commands are its children), one variable a line.
const SHOW_ENV: &str =
    "env; echo ---; tr '\\0' '\\n' < /proc/$PPID/environ 2>/dev/null; echo; echo end-of-env";

/// A server for `home` (config written by the caller) with the secrets in its environment.
fn serve(home: &Path, mock: &Mock) -> Garuda {
    let mut env = mock.env();
    env.push((PAT.0.into(), PAT.1.into()));
    env.push((DB.0.into(), DB.1.into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home, &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    g
}

fn new_session(g: &mut Garuda, wid: &str, policy: &str) -> Value {
    g.call("session/new", json!({"workspaceId": wid, "policy": policy}))
}

fn sid(r: &Value) -> String {
    r["sessionId"].as_str().expect("sessionId").to_string()
}

/// `garuda trust DIR` with `home`'s config; its stderr (the hooks it lists).
fn garuda_trust(home: &Path, dir: &Path) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_garuda"));
    isolated_env(&mut c, home);
    let out = c.arg("trust").arg(dir).output().expect("garuda trust");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn write(p: &Path, body: &str) {
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, body).expect("write");
}

/// A workspace config whose UserPromptSubmit hook runs `command`.
fn hook_config(command: &str) -> String {
    format!(
        "[[hooks.UserPromptSubmit]]\nhooks = [{{ type = \"command\", command = {} }}]\n",
        toml_str(command)
    )
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("json string")
}

/// (a) The user trusted the workspace with one hook; the hook set changed afterwards (here the
/// workspace's config; a model or a sandboxed command writing it is the route). The changed
/// set does not run, and the session's warnings name the hook that changed.
#[test]
fn a_hook_set_changed_after_trust_does_not_run_and_the_warning_names_it() {
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), "[sandbox]\nenabled = false\n");
    let ws = tempfile::tempdir().expect("ws");
    let cfg = ws.path().join(".garuda/config.toml");
    write(&cfg, &hook_config("touch trusted-ran"));
    let listed = garuda_trust(home.path(), ws.path());
    assert!(
        listed.contains("UserPromptSubmit [*] `touch trusted-ran`"),
        "garuda trust lists what it records: {listed}"
    );

    let mock = Mock::start(vec![text("one", 10), text("two", 10)]);
    let mut g = serve(home.path(), &mock);
    let wid = g.open(ws.path());
    let r = new_session(&mut g, &wid, "full-auto");
    assert_eq!(r["warnings"], json!([]), "{r}");
    turn(&mut g, &sid(&r), "hi");
    assert!(ws.path().join("trusted-ran").exists(), "trusted: it runs");

    // The hook set changes after trust: one hook replaced by another.
    write(
        &cfg,
        &(hook_config("touch trusted-ran") + &hook_config("touch planted-ran")),
    );
    std::fs::remove_file(ws.path().join("trusted-ran")).expect("rm");
    g.call("workspace/close", json!({"workspaceId": wid}));
    let wid = g.open(ws.path());
    let r = new_session(&mut g, &wid, "full-auto");
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("added UserPromptSubmit [*] `touch planted-ran`"),
        "{r}"
    );
    assert!(warnings.contains("garuda trust"), "{r}");
    let t = turn(&mut g, &sid(&r), "hi again");
    assert_eq!(t["stopReason"], "end_turn", "{t}");
    assert!(
        !ws.path().join("planted-ran").exists(),
        "the planted hook ran"
    );
    assert!(
        !ws.path().join("trusted-ran").exists(),
        "a changed set runs none of its hooks until trusted again"
    );
}

/// (b) A trusted folder is replaced by a link to another folder with the very same hooks: the
/// trust was for the folder, not for whatever the path leads to, so its hooks do not run.
#[test]
fn a_trusted_folder_replaced_by_a_link_does_not_run_its_targets_hooks() {
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), "[sandbox]\nenabled = false\n");
    let parent = tempfile::tempdir().expect("parent");
    let proj = parent.path().join("proj");
    let evil = parent.path().join("evil");
    let hooks = hook_config("touch hook-ran");
    write(&proj.join(".garuda/config.toml"), &hooks);
    write(&evil.join(".garuda/config.toml"), &hooks);
    garuda_trust(home.path(), &proj);
    std::fs::rename(&proj, parent.path().join("proj.old")).expect("mv");
    std::os::unix::fs::symlink(&evil, &proj).expect("ln -s");

    let mock = Mock::start(vec![text("one", 10)]);
    let mut g = serve(home.path(), &mock);
    let wid = g.open(&proj);
    let r = new_session(&mut g, &wid, "full-auto");
    let t = turn(&mut g, &sid(&r), "hi");
    assert_eq!(t["stopReason"], "end_turn", "{t}");
    assert!(
        !evil.join("hook-ran").exists(),
        "trust moved to the link's target"
    );
    let inspect = g.call("context/inspect", json!({"sessionId": sid(&r)}));
    assert!(
        inspect["hooksSkipped"].to_string().contains("garuda trust"),
        "{inspect}"
    );
}

/// (c) A hook (here the user's own) sees neither secret: not as a variable, not in the server's
/// `/proc` entry.
#[test]
fn a_hook_sees_no_server_secret() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let out = ws.path().join("hook-env.txt");
    write_config(
        home.path(),
        &format!(
            "[[hooks.UserPromptSubmit]]\nhooks = [{{ command = {} }}]\n",
            toml_str(&format!("({SHOW_ENV}) > '{}'", out.display()))
        ),
    );
    let mock = Mock::start(vec![text("one", 10)]);
    let mut g = serve(home.path(), &mock);
    let wid = g.open(ws.path());
    let r = new_session(&mut g, &wid, "full-auto");
    turn(&mut g, &sid(&r), "hi");
    let seen = std::fs::read_to_string(&out).expect("the hook ran");
    assert!(seen.contains("end-of-env"), "{seen}");
    assert!(seen.contains("GARUDA_PROJECT_DIR="), "{seen}");
    assert!(seen.contains("PATH="), "{seen}");
    assert_eq!(leaked(&seen), Vec::<&str>::new(), "{seen}");
}

fn bash(id: &str, command: &str, outside: bool) -> MockReply {
    let mut input = json!({ "command": command });
    if outside {
        input["outside_sandbox"] = json!(true);
    }
    let input = input.to_string();
    MockReply::Sse(anthropic_tool_use(id, "bash", &[&input]))
}

/// Runs one turn, approving every request; the output of the call `id`.
fn approved_output(g: &mut Garuda, sid: &str, id: &str) -> String {
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "go"}]}),
        |_| json!({"optionId": "allow_once"}),
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    g.turn_events()
        .into_iter()
        .find(|e| e["kind"] == "toolCallFinished" && e["id"] == id)
        .and_then(|e| e["output"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no result for {id}"))
}

/// (d) A bash call the user approved to run outside the sandbox sees neither secret.
#[test]
fn an_approved_outside_sandbox_command_sees_no_server_secret() {
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), "");
    let ws = tempfile::tempdir().expect("ws");
    let mock = Mock::start(vec![
        bash("b1", SHOW_ENV, true),
        MockReply::Sse(anthropic_text("done", MockUsage::new(5, 1))),
    ]);
    let mut g = serve(home.path(), &mock);
    let wid = g.open(ws.path());
    let r = new_session(&mut g, &wid, "full-auto");
    let seen = approved_output(&mut g, &sid(&r), "b1");
    assert!(
        seen.contains("end-of-env") && seen.contains("PATH="),
        "{seen}"
    );
    assert_eq!(leaked(&seen), Vec::<&str>::new(), "{seen}");
}

/// (d, sandbox off) With `[sandbox] enabled = false` every command runs unconfined; none sees
/// either secret.
#[test]
fn a_command_with_the_sandbox_off_sees_no_server_secret() {
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), "[sandbox]\nenabled = false\n");
    let ws = tempfile::tempdir().expect("ws");
    let mock = Mock::start(vec![
        bash("b1", SHOW_ENV, false),
        bash("b2", SHOW_ENV, true),
        MockReply::Sse(anthropic_text("done", MockUsage::new(5, 1))),
    ]);
    let mut g = serve(home.path(), &mock);
    let wid = g.open(ws.path());
    let r = new_session(&mut g, &wid, "full-auto");
    let plain = approved_output(&mut g, &sid(&r), "b1");
    let events = g.turn_events();
    let outside = events
        .into_iter()
        .find(|e| e["kind"] == "toolCallFinished" && e["id"] == "b2")
        .and_then(|e| e["output"].as_str().map(str::to_string))
        .expect("b2 ran");
    for seen in [plain, outside] {
        assert!(
            seen.contains("end-of-env") && seen.contains("PATH="),
            "{seen}"
        );
        assert_eq!(leaked(&seen), Vec::<&str>::new(), "{seen}");
    }
}
