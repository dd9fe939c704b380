//! Config errors never kill a server: `garuda serve` starts with a broken config file, reports
//! each problem (file, line, key, what was expected) at `initialize` and in the error data of
//! what needs the config, and takes the fixed file without a restart. `garuda exec` still
//! exits 2 on an error; an unknown key is only a warning everywhere.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::client::{Framing, Garuda, isolated_env};

/// The user's config file under an isolated home.
pub fn write_config(home: &Path, text: &str) -> std::path::PathBuf {
    let dir = home.join("config/garuda");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// An unknown table (a warning) and an invalid value (an error).
pub const BROKEN: &str = "[approvals]\npolicy = \"full-auto\"\n\n[approval]\npolicy = \"yolo\"\n";

/// What every front reports for [`BROKEN`].
pub fn assert_broken_problems(problems: &Value) {
    let list = problems.as_array().unwrap_or_else(|| panic!("{problems}"));
    assert_eq!(list.len(), 2, "{problems}");
    let (w, e) = (&list[0], &list[1]);
    assert_eq!(w["severity"], "warning");
    assert_eq!(w["line"], 1);
    assert_eq!(w["key"], "approvals");
    assert!(
        w["file"].as_str().unwrap().ends_with("garuda/config.toml"),
        "{w}"
    );
    let msg = w["message"].as_str().unwrap();
    assert!(msg.contains("did you mean `approval`?"), "{msg}");
    assert_eq!(e["severity"], "error");
    assert_eq!(e["line"], 5);
    assert_eq!(e["key"], "approval.policy");
    assert!(e["message"].as_str().unwrap().contains("full-auto"), "{e}");
}

#[test]
fn serve_reports_config_problems_and_takes_the_fixed_file() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let path = write_config(home.path(), BROKEN);
    let tape = ws.path().join("tape.jsonl");
    std::fs::write(&tape, "").unwrap();
    let model = format!("replay:{}", tape.display());
    let mut g = Garuda::spawn_at(Framing::Ndjson, home.path(), &[], &[]);
    let init = g.call("initialize", json!({"processId": null, "capabilities": {}}));
    assert_broken_problems(&init["garuda"]["configProblems"]);
    // One window/showMessage per problem, sent while initialize was answered.
    let first = g.wait_method("window/showMessage");
    let second = g.wait_method("window/showMessage");
    assert_eq!(first["params"]["type"], 2, "{first}");
    assert_eq!(second["params"]["type"], 1, "{second}");
    let text = second["params"]["message"].as_str().unwrap();
    assert!(
        text.contains("config.toml: line 5") && text.contains("approval.policy"),
        "{text}"
    );
    assert_eq!(second["params"]["configProblem"]["key"], "approval.policy");
    // What needs no config works; what needs it says why, with the problems as data.
    let wsid = g.open(ws.path());
    let r = g.request("session/new", json!({"workspaceId": wsid, "model": model}));
    assert_eq!(r["error"]["code"], -32057, "{r}");
    assert_eq!(r["error"]["data"]["kind"], "config", "{r}");
    assert_broken_problems(&r["error"]["data"]["problems"]);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("approval.policy"),
        "{r}"
    );
    // Fixing the file is enough: the watcher reloads it and says so.
    std::fs::write(&path, "[approval]\npolicy = \"ask\"\n").unwrap();
    let reloaded = g.wait_method("window/showMessage");
    assert_eq!(reloaded["params"]["type"], 3, "{reloaded}");
    let r = g.call("session/new", json!({"workspaceId": wsid, "model": model}));
    assert!(r["sessionId"].is_string(), "{r}");
    // Broken again: the config in force stays, the problem is reported.
    std::fs::write(&path, "[approval]\ntimeout_secs = \"soon\"\n").unwrap();
    let again = g.wait_method("window/showMessage");
    assert_eq!(again["params"]["type"], 1, "{again}");
    assert_eq!(again["params"]["configProblem"]["line"], 2, "{again}");
}

#[test]
fn an_unknown_key_alone_is_a_warning_and_sessions_start() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    write_config(home.path(), "[server]\nmax_in_flite = 4\n");
    let tape = ws.path().join("tape.jsonl");
    std::fs::write(&tape, "").unwrap();
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &[]);
    let init = g.call("initialize", json!({"processId": null, "capabilities": {}}));
    let problems = &init["garuda"]["configProblems"];
    assert_eq!(problems[0]["severity"], "warning", "{problems}");
    assert_eq!(problems[0]["key"], "server.max_in_flite");
    assert!(
        problems[0]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `max_in_flight`?"),
        "{problems}"
    );
    let wsid = g.open(ws.path());
    let model = format!("replay:{}", tape.display());
    let r = g.call("session/new", json!({"workspaceId": wsid, "model": model}));
    assert!(r["sessionId"].is_string(), "{r}");
}

#[test]
fn exec_exits_2_on_a_config_error_and_runs_with_a_warning() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let tape = ws.path().join("tape.jsonl");
    std::fs::write(
        &tape,
        r#"{"response":{"content":[{"type":"text","text":"Done."}],"stopReason":"end_turn"}}"#,
    )
    .unwrap();
    let model = format!("replay:{}", tape.display());
    let exec = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_garuda"));
        isolated_env(&mut c, home.path());
        c.args(["exec", "--model", &model])
            .arg(ws.path())
            .arg("hi")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.output().unwrap()
    };
    write_config(home.path(), BROKEN);
    let out = exec();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("config.toml: line 5") && err.contains("approval.policy"),
        "{err}"
    );
    write_config(home.path(), "[approvals]\npolicy = \"ask\"\n");
    let out = exec();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("did you mean `approval`?"), "{err}");
}
