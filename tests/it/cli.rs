//! The command line: `prompt`, `exec`, `demo`, `schema`, `--version`, config errors.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn garuda(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_garuda"));
    crate::client::isolated_env(&mut c, home);
    c
}

fn cassette(dir: &Path, lines: &[&str]) -> String {
    let p = dir.join("cassette.jsonl");
    std::fs::write(&p, lines.join("\n")).expect("cassette");
    format!("replay:{}", p.display())
}

const HELLO: &str = r#"{"response":{"content":[{"type":"text","text":"Hello from replay."}],"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":4}}}"#;

#[test]
fn version_and_help() {
    let home = tempfile::tempdir().expect("home");
    let out = garuda(home.path()).arg("--version").output().expect("run");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("garuda "));
    let out = garuda(home.path()).arg("--help").output().expect("run");
    let help = String::from_utf8_lossy(&out.stdout);
    for cmd in ["serve", "prompt", "exec", "demo", "schema"] {
        assert!(help.contains(cmd), "{help}");
    }
}

#[test]
fn prompt_prints_the_prompt_and_a_report() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("AGENTS.md"), "Use make.\n").expect("write");
    let out = garuda(home.path())
        .args(["prompt", "--feature", "web", "--model", "x/y"])
        .arg(ws.path())
        .output()
        .expect("run");
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Use make.") && stdout.contains("x/y"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("sha256") && stderr.contains("AGENTS.md"),
        "{stderr}"
    );
    let out = garuda(home.path())
        .args(["prompt", "--json"])
        .arg(ws.path())
        .output()
        .expect("run");
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["sha256"].as_str().expect("sha").len(), 64);
    let out = garuda(home.path())
        .args(["prompt", "--feature", "nope"])
        .arg(ws.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
}

#[test]
fn bad_config_names_file_and_line() {
    let home = tempfile::tempdir().expect("home");
    let dir = home.path().join("config/garuda");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("config.toml"), "model = \"a\"\n[limits\n").expect("write");
    let out = garuda(home.path())
        .args(["prompt", "."])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config.toml") && err.contains("line 2"),
        "{err}"
    );
}

#[test]
fn exec_runs_one_turn_offline() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let model = cassette(ws.path(), &[HELLO]);
    let out = garuda(home.path())
        .args(["exec", "--model", &model])
        .arg(ws.path())
        .arg("hi")
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Hello from replay."
    );

    let model = cassette(ws.path(), &[HELLO]);
    let out = garuda(home.path())
        .args(["exec", "--json", "--model", &model])
        .arg(ws.path())
        .arg("hi")
        .output()
        .expect("run");
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert!(events.iter().any(|e| e["event"]["kind"] == "textDelta"));
    assert_eq!(events.last().expect("last")["event"]["kind"], "finished");

    // An exhausted cassette is a model error: exit 1.
    let model = cassette(ws.path(), &[]);
    let out = garuda(home.path())
        .args(["exec", "--model", &model])
        .arg(ws.path())
        .arg("hi")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));

    // Editors list these runs as headless ones.
    let mut g =
        crate::client::Garuda::spawn_at(crate::client::Framing::Ndjson, home.path(), &[], &[]);
    g.call("initialize", serde_json::json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    let listed = g.call("session/list", serde_json::json!({"workspaceId": wid}));
    let sessions = listed["sessions"].as_array().expect("sessions");
    assert!(!sessions.is_empty(), "{listed}");
    assert!(sessions.iter().all(|s| s["origin"] == "exec"), "{listed}");
    assert!(sessions.iter().all(|s| s["title"] == "hi"), "{listed}");
}

#[test]
fn exec_without_a_model_says_how_to_configure_one() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let out = garuda(home.path())
        .arg("exec")
        .arg(ws.path())
        .arg("hi")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("replay:") && err.contains("config.toml"),
        "{err}"
    );
}

#[test]
fn demo_runs_offline_on_this_repository() {
    let home = tempfile::tempdir().expect("home");
    let out = garuda(home.path())
        .arg("demo")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("tool call: read_file") && stdout.contains("The package is called garuda"),
        "{stdout}"
    );
}

#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let home = tempfile::tempdir().expect("home");
    let mut child = garuda(home.path())
        .arg("serve")
        .env_remove("NO_COLOR")
        .env("GARUDA_LOG", "info")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        // A batch is refused with a logged warning.
        stdin.write_all(b"[1]\n").expect("write");
    }
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.trim().is_empty(), "a log line is expected");
    assert!(!err.contains('\u{1b}'), "{err:?}");
}
