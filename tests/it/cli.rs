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

/// Runs `garuda demo DIR` and returns its stdout, after checking it succeeded and that it
/// never printed a tool error, an answer the scripted model did not have, or a blank line.
fn demo(dir: &Path) -> String {
    let home = tempfile::tempdir().expect("home");
    let out = garuda(home.path())
        .arg("demo")
        .arg(dir)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("tool result error"), "{stdout}");
    assert!(!stdout.contains("has no answer"), "{stdout}");
    let body = stdout.split("\nNext steps").next().unwrap_or("");
    assert!(
        !body.lines().skip(5).any(|l| l.trim().is_empty()),
        "a blank line: {stdout}"
    );
    stdout
}

#[test]
fn demo_runs_offline_on_this_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let stdout = demo(root);
    // The instruction file Garuda found, with its size in the prompt.
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with("AGENTS.md") && l.contains("bytes in the prompt")),
        "{stdout}"
    );
    // The prompt's first lines and hash, the approval, the compaction and the summary.
    assert!(stdout.contains("│ You are Garuda"), "{stdout}");
    assert!(stdout.contains("sha256 "), "{stdout}");
    assert!(
        stdout.contains("approval    bash: wc -l -- README.md -> allow once (answered by the demo"),
        "{stdout}"
    );
    assert!(
        stdout.contains("compaction  finished (manual): summary, "),
        "{stdout}"
    );
    assert!(stdout.contains("│ Completed Tasks"), "{stdout}");
    // The answers agree with the files.
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let first = readme
        .lines()
        .find(|l| !l.trim().is_empty())
        .expect("a line");
    assert!(
        stdout.contains(&format!("README.md begins with “{}", first.trim())),
        "{stdout}"
    );
    let lines = readme.bytes().filter(|b| *b == b'\n').count();
    assert!(
        stdout.contains(&format!("README.md has {lines} lines")),
        "{stdout}"
    );
    for next in ["garuda prompt", "garuda exec", "editors/README.md"] {
        assert!(stdout.contains(next), "{stdout}");
    }
}

#[test]
fn demo_on_another_folder_answers_from_what_is_there() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join("AGENTS.md"),
        "Run make check before a commit.\n",
    )
    .expect("write");
    std::fs::create_dir_all(dir.path().join(".garuda")).expect("mkdir");
    std::fs::write(
        dir.path().join(".garuda/memory.md"),
        "The parser is in parse.c.\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("notes.txt"),
        "\nshopping list\napples\nbananas and cherries\n",
    )
    .expect("write");
    let stdout = demo(dir.path());
    for f in ["AGENTS.md", ".garuda/memory.md"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.trim_start().starts_with(f) && l.contains("bytes in the prompt")),
            "{f}: {stdout}"
        );
    }
    assert!(
        stdout.contains("At the top level: `.garuda/`, `AGENTS.md`, `notes.txt`"),
        "{stdout}"
    );
    // No README or manifest here: the first readable top-level file is read.
    assert!(
        stdout.contains("AGENTS.md begins with “Run make check before a commit.”"),
        "{stdout}"
    );
    assert!(stdout.contains("AGENTS.md has 1 line "), "{stdout}");
    assert!(
        stdout.contains("AGENTS.md mentions commit first on line 1."),
        "{stdout}"
    );
    // Nothing in the folder was changed.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("read")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

#[test]
fn demo_on_an_empty_folder_says_so() {
    let dir = tempfile::tempdir().expect("dir");
    let stdout = demo(dir.path());
    assert!(stdout.contains("none here"), "{stdout}");
    assert!(stdout.contains("no small text file"), "{stdout}");
    assert!(stdout.contains("The folder is empty"), "{stdout}");
    assert!(!stdout.contains("approval    "), "{stdout}");
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

#[test]
fn trust_adds_a_workspace_once_lists_it_and_shows_its_hooks() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    std::fs::create_dir_all(ws.path().join(".garuda")).expect("mkdir");
    std::fs::write(
        ws.path().join(".garuda/config.toml"),
        "[[hooks.PostToolUse]]\nmatcher = \"Edit|Write\"\nhooks = [{ command = \"cargo fmt\" }]\n",
    )
    .expect("write");
    let out = garuda(home.path())
        .arg("trust")
        .arg(ws.path())
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("trusted ") && stderr.contains("cargo fmt"),
        "{stderr}"
    );
    let file = home.path().join("config/garuda/trusted.toml");
    let text = std::fs::read_to_string(&file).expect("trust file");
    let canon = ws.path().canonicalize().expect("canon");
    assert!(text.contains(&*canon.to_string_lossy()), "{text}");
    let out = garuda(home.path())
        .arg("trust")
        .arg(ws.path())
        .output()
        .expect("run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("already"));
    let out = garuda(home.path())
        .args(["trust", "--list"])
        .output()
        .expect("run");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        listed.lines().collect::<Vec<_>>(),
        [&*canon.to_string_lossy()]
    );
    let out = garuda(home.path())
        .arg("trust")
        .arg(home.path().join("missing"))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
}
