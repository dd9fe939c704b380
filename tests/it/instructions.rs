//! Instruction sources end to end: nested files and path-scoped rules of a monorepo reach the
//! model as notes when its tools work there, once per file and version, survive a compaction,
//! never read outside the root, and leave the system prompt byte-stable.

use std::path::Path;

use serde_json::{Value, json};

use crate::client::{Framing, Garuda};
use crate::mock_model::*;
use crate::turns::{Mock, write_config};

const SOURCES: &str = "[instructions]\nsources = [\"AGENTS.md\", \"CLAUDE.md\", \"GARUDA.md\", \
                       \"nested\", \"cursor\", \"copilot\"]\n";

/// Text that lives outside the workspace, behind links: it must never reach a request.
const OUTSIDE: &str = "SECRET-OUTSIDE-THE-ROOT";

fn write(root: &Path, name: &str, text: &str) {
    let p = root.join(name);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

/// The monorepo fixture: root AGENTS.md, packages/a/AGENTS.md, packages/b/CLAUDE.md, a cursor
/// rule for packages/a/**, a malformed rule, copilot's files, links out of the root and an
/// oversized nested file.
fn monorepo(root: &Path, outside: &Path) {
    write(root, "AGENTS.md", "Root rule: run the tests.\n");
    write(root, "packages/a/AGENTS.md", "Package A: use tabs.\n");
    write(root, "packages/a/x.rs", "fn x() {}\n");
    write(root, "packages/b/CLAUDE.md", "Package B: never touch.\n");
    write(root, "packages/b/y.rs", "fn y() {}\n");
    write(root, "packages/big/AGENTS.md", &"z".repeat(30_000));
    write(root, "packages/big/q.rs", "fn q() {}\n");
    write(
        root,
        ".cursor/rules/a.mdc",
        "---\ndescription: A\nglobs: packages/a/**\nalwaysApply: false\n---\nRule for A files.\n",
    );
    write(
        root,
        ".cursor/rules/bad.mdc",
        "---\ndescription: broken\nglobs: [unclosed\n---\nNever applied.\n",
    );
    write(
        root,
        ".github/copilot-instructions.md",
        "Copilot wide rule.\n",
    );
    write(
        root,
        ".github/instructions/py.instructions.md",
        "---\napplyTo: \"**/*.py\"\n---\nPython rule.\n",
    );
    write(outside, "secret.md", OUTSIDE);
    write(outside, "dir/AGENTS.md", OUTSIDE);
    write(outside, "dir/z.rs", OUTSIDE);
    std::os::unix::fs::symlink(outside.join("secret.md"), root.join("packages/a/GARUDA.md"))
        .expect("link");
    std::os::unix::fs::symlink(outside.join("dir"), root.join("packages/c")).expect("link");
}

fn text(t: &str) -> MockReply {
    MockReply::Sse(anthropic_text(t, MockUsage::new(20_000, 5)))
}

fn reads(paths: &[&str]) -> MockReply {
    let mut calls = AnthropicSse::new(MockUsage::new(100, 5));
    for (i, p) in paths.iter().enumerate() {
        let j = json!({ "path": p }).to_string();
        calls = calls.tool_use(
            &format!("toolu_{i}_{}", p.len()),
            "read_file",
            &[j.as_str()],
        );
    }
    MockReply::Sse(calls.finish("tool_use"))
}

fn turn(g: &mut Garuda, sid: &str, text: &str) {
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": text}]}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
}

fn messages(body: &Value) -> String {
    body["messages"].to_string()
}

fn system(body: &Value) -> String {
    let s = &body["system"];
    match s.as_array() {
        Some(blocks) => blocks
            .iter()
            .map(|b| b["text"].as_str().unwrap_or("").to_string())
            .collect(),
        None => s.as_str().unwrap_or("").to_string(),
    }
}

fn source<'a>(sources: &'a [Value], path: &str) -> &'a Value {
    sources
        .iter()
        .find(|s| s["path"] == path)
        .unwrap_or_else(|| panic!("no source {path} in {sources:?}"))
}

#[test]
fn a_monorepo_s_instructions_reach_the_model_once_and_survive_compaction() {
    let mock = Mock::start(vec![
        // Turn 1: read a file in packages/a.
        reads(&["packages/a/x.rs"]),
        text("read a"),
        // Turn 2: read it again: nothing new to attach.
        reads(&["packages/a/x.rs"]),
        text("again"),
        // Turn 3: a link out of the root, and the package with the oversized file.
        reads(&["packages/c/z.rs", "packages/big/q.rs"]),
        text("read big"),
        // Turn 4, after packages/a/AGENTS.md changed on disk.
        text("noted"),
        // The manual compaction's summary.
        text("<summary>SUMMARY</summary>"),
        // Turn 5, after the compaction.
        text("after"),
    ]);
    let home = tempfile::tempdir().expect("home");
    write_config(
        home.path(),
        &format!("{SOURCES}[context]\nkeep_steps = 2\n"),
    );
    write(
        home.path(),
        "config/garuda/AGENTS.md",
        "Global: sign every commit.\n",
    );
    let ws = tempfile::tempdir().expect("ws");
    let outside = tempfile::tempdir().expect("outside");
    monorepo(ws.path(), outside.path());
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.path());

    // The prompt: root file, always-on copilot file and the user's own file; the malformed
    // rule is a warning with its file and line; the path-scoped rules wait.
    let a = g.call("prompt/assemble", json!({"workspaceId": wid}));
    let sys = a["system"].as_str().expect("system");
    assert!(sys.contains("Root rule: run the tests."), "{sys}");
    assert!(sys.contains("Copilot wide rule."), "{sys}");
    assert!(sys.contains("# Your instructions") && sys.contains("Global: sign every commit."));
    assert!(!sys.contains("Package A") && !sys.contains("Rule for A files."));
    let warnings = a["warnings"].to_string();
    assert!(
        warnings.contains(".cursor/rules/bad.mdc:") && warnings.contains("invalid frontmatter"),
        "{warnings}"
    );
    let sources = a["sources"].as_array().expect("sources").clone();
    assert_eq!(source(&sources, "AGENTS.md")["kind"], "root");
    assert_eq!(
        source(&sources, ".github/copilot-instructions.md")["placement"],
        "system"
    );
    let rule = source(&sources, ".cursor/rules/a.mdc");
    assert_eq!(
        (&rule["scope"], &rule["inForce"], &rule["placement"]),
        (&json!("packages/a/**"), &json!(false), &json!("note"))
    );
    assert!(
        source(&sources, ".cursor/rules/bad.mdc")["skipped"]
            .as_str()
            .expect("skipped")
            .contains("invalid frontmatter: line ")
    );
    assert!(sources.iter().any(|s| s["kind"] == "global"), "{sources:?}");

    let sid = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    )["sessionId"]
        .as_str()
        .expect("sid")
        .to_string();
    turn(&mut g, &sid, "look at package a");
    turn(&mut g, &sid, "and again");
    turn(&mut g, &sid, "now the others");
    let bodies = mock.rec.bodies();
    assert!(!messages(&bodies[0]).contains("Package A"));
    // Reading packages/a/x.rs brings in exactly its folder's file and the matching rule.
    let after_read = messages(&bodies[1]);
    assert!(
        after_read.contains("packages/a/AGENTS.md (governs packages/a/)"),
        "{after_read}"
    );
    assert!(after_read.contains("Package A: use tabs."));
    assert!(after_read.contains(".cursor/rules/a.mdc (a rule for packages/a/**)"));
    assert!(after_read.contains("Rule for A files."));
    assert!(!after_read.contains("Package B") && !after_read.contains("Python rule."));
    // Once: reading there again sends nothing new.
    let turn2 = messages(&bodies[3]);
    assert_eq!(turn2.matches("Package A: use tabs.").count(), 1, "{turn2}");
    assert_eq!(turn2.matches("Rule for A files.").count(), 1, "{turn2}");
    // The oversized nested file comes cut to its own limit, visibly.
    let turn3 = messages(&bodies[5]);
    assert!(
        turn3.contains("packages/big/AGENTS.md (governs packages/big/)"),
        "{turn3}"
    );
    assert!(turn3.contains("10000 characters are missing"), "{turn3}");
    assert!(!turn3.contains(&"z".repeat(20_001)));

    // context/inspect lists every source with its scope, size and cut.
    let r = g.call("context/inspect", json!({"sessionId": sid}));
    let sources = r["sources"].as_array().expect("sources").clone();
    let a_file = source(&sources, "packages/a/AGENTS.md");
    assert_eq!(
        (&a_file["kind"], &a_file["scope"], &a_file["inForce"]),
        (&json!("nested"), &json!("packages/a/"), &json!(true))
    );
    assert_eq!(source(&sources, ".cursor/rules/a.mdc")["inForce"], true);
    let big = source(&sources, "packages/big/AGENTS.md");
    assert_eq!(
        (&big["cut"], &big["missingChars"]),
        (&json!(true), &json!(10_000))
    );
    assert!(
        source(&sources, "packages/a/GARUDA.md")["skipped"]
            .as_str()
            .expect("skipped")
            .contains("outside")
    );
    assert!(!sources.iter().any(|s| s["path"] == "packages/b/CLAUDE.md"));

    // An edit of a nested file while the session runs: a notification, then a note.
    write(
        ws.path(),
        "packages/a/AGENTS.md",
        "Package A: use spaces now.\n",
    );
    loop {
        let n = g.wait_method("workspace/contextChanged");
        if n["params"]["changed"]
            .to_string()
            .contains("packages/a/AGENTS.md")
        {
            break;
        }
    }
    turn(&mut g, &sid, "carry on");
    let bodies = mock.rec.bodies();
    let turn4 = messages(&bodies[6]);
    assert!(turn4.contains("changed on disk"), "{turn4}");
    assert!(turn4.contains("Package A: use spaces now."));

    // A forced compaction: everything in force before is in force after, re-read from disk.
    let c = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(c["compacted"], true, "{c}");
    turn(&mut g, &sid, "after the compaction");
    let bodies = mock.rec.bodies();
    let last = &bodies[8];
    let after = messages(last);
    assert!(after.contains("SUMMARY"), "{after}");
    assert!(after.contains("Package A: use spaces now."), "{after}");
    assert!(!after.contains("Package A: use tabs."), "{after}");
    assert!(after.contains("Rule for A files."));
    assert!(after.contains("packages/big/AGENTS.md (governs packages/big/)"));
    assert!(!after.contains("Package B"));
    let sys_after = system(last);
    assert!(
        sys_after.contains("Root rule: run the tests.") && sys_after.contains("Copilot wide rule.")
    );
    assert!(sys_after.contains("Global: sign every commit."));

    // The system prompt's bytes never changed within the phase (nor across, here).
    let first = system(&bodies[0]);
    for (i, b) in bodies.iter().enumerate().filter(|(i, _)| *i != 7) {
        assert_eq!(system(b), first, "request {i}");
    }
    // Nothing outside the root ever reached the model.
    for (i, b) in bodies.iter().enumerate() {
        assert!(!b.to_string().contains(OUTSIDE), "request {i}");
    }
}

#[test]
fn only_the_default_sources_without_config_and_bad_sources_are_an_error() {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    let outside = tempfile::tempdir().expect("outside");
    monorepo(ws.path(), outside.path());
    let garuda = || {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_garuda"));
        crate::client::isolated_env(&mut c, home.path());
        c
    };
    let out = garuda()
        .args(["prompt", "--json"])
        .arg(ws.path())
        .output()
        .expect("run");
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let sys = v["system"].as_str().expect("system");
    assert!(sys.contains("Root rule") && !sys.contains("Copilot wide rule."));
    let sources = v["sources"].as_array().expect("sources");
    assert_eq!(sources.len(), 1, "{sources:?}");
    assert_eq!(sources[0]["path"], "AGENTS.md");
    // A workspace may choose its sources.
    write(ws.path(), ".garuda/config.toml", SOURCES);
    let out = garuda()
        .args(["prompt", "--json"])
        .arg(ws.path())
        .output()
        .expect("run");
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        v["system"]
            .as_str()
            .expect("s")
            .contains("Copilot wide rule.")
    );
    assert!(v["sources"].to_string().contains(".cursor/rules/a.mdc"));
    // An unknown source is a configuration error naming the file and line.
    write(
        home.path(),
        "config/garuda/config.toml",
        "[instructions]\nsources = [\"AGENTS.md\", \"cursorr\"]\n",
    );
    let out = garuda()
        .args(["prompt"])
        .arg(ws.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config.toml") && err.contains("line 2"),
        "{err}"
    );
}
