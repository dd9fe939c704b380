//! Attacks through git and the files that steer it: a repository's config naming a program
//! (a clean filter, `gpg.program` with `log.showSignature`) at session start in every front,
//! a sandboxed command redirecting git (`.git/commondir`, `git init` where there was no
//! `.git`), and file-tool writes to what runs later, under `full-auto`.
//!
//! The programs a repository names write a marker into a folder outside the workspace and
//! outside /tmp: unconfined they can, in the sandbox that folder is read-only. On a machine
//! without a sandbox git does not run at all, and the markers stay absent just the same.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::client::{Framing, Garuda};
use crate::mock_model::*;
use crate::turns::{Mock, write_config};

/// A folder outside /tmp (commands get their own) and outside the workspace.
fn outside_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("outside dir")
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?}");
}

/// An executable script at `path` that creates `marker` and then copies stdin to stdout (a
/// clean filter that works).
fn marker_script(path: &Path, marker: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(
        path,
        format!("#!/bin/sh\ntouch '{}'\ncat\n", marker.display()),
    )
    .expect("script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A committed repository in `ws` whose `.git/config` (written after the commit, as a
/// downloaded archive keeps it) names a clean filter for every file, with a tracked file
/// touched so that `git status` must run the filter to compare it. Returns the marker path.
fn repo_with_clean_filter(ws: &Path, out: &Path) -> std::path::PathBuf {
    git(ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("a.txt"), "alpha\n").expect("write");
    std::fs::write(ws.join(".gitattributes"), "* filter=evil\n").expect("write");
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-q", "-m", "first"]);
    let marker = out.join("filter-ran");
    let script = out.join("filter.sh");
    marker_script(&script, &marker);
    git(
        ws,
        &["config", "filter.evil.clean", &script.display().to_string()],
    );
    let later = SystemTime::now() + Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(ws.join("a.txt"))
        .and_then(|f| f.set_modified(later))
        .expect("touch");
    // The filter runs when plain git looks at this repository: the attack is real.
    let probe = out.join("probe-marker");
    marker_script(&out.join("probe.sh"), &probe);
    let ok = Command::new("git")
        .arg("-C")
        .arg(ws)
        .args([
            "-c",
            &format!("filter.evil.clean={}", out.join("probe.sh").display()),
        ])
        .args(["--no-optional-locks", "status", "--porcelain"])
        .stdout(Stdio::null())
        .status()
        .expect("git status")
        .success();
    assert!(
        ok && probe.exists(),
        "plain git status runs the clean filter"
    );
    marker
}

fn start(mock: &Mock, home: &Path, ws: &Path, extra_config: &str) -> (Garuda, String) {
    write_config(home, extra_config);
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home, &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws);
    (g, wid)
}

/// `garuda` (the subcommand still to add) with `home`'s config, wired to `mock`.
fn garuda(home: &Path, mock: &Mock) -> Command {
    write_config(home, "");
    let mut c = Command::new(env!("CARGO_BIN_EXE_garuda"));
    crate::client::isolated_env(&mut c, home);
    c.envs(mock.env());
    c
}

fn session(g: &mut Garuda, wid: &str, policy: &str) -> String {
    let r = g.call("session/new", json!({"workspaceId": wid, "policy": policy}));
    r["sessionId"].as_str().expect("sessionId").to_string()
}

fn done() -> MockReply {
    MockReply::Sse(anthropic_text("done", MockUsage::new(5, 1)))
}

fn tool(id: &str, name: &str, input: Value) -> MockReply {
    let j = input.to_string();
    MockReply::Sse(anthropic_tool_use(id, name, &[j.as_str()]))
}

/// Runs a turn answering every approval with `answer`; returns the approval requests.
fn turn(g: &mut Garuda, sid: &str, answer: &'static str) -> Vec<Value> {
    let mut asked = Vec::new();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": [{"type": "text", "text": "go"}]}),
        |req| {
            asked.push(req["params"].clone());
            json!({"optionId": answer})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    asked
}

/// The first request's session-start note: what git said, if anything.
fn first_note(mock: &Mock) -> String {
    let reqs = mock.rec.bodies();
    reqs.first()
        .map(|b| b["messages"][0].to_string())
        .unwrap_or_default()
}

#[test]
fn a_clean_filter_in_the_repository_config_never_runs_unconfined_at_session_start() {
    let (home, ws, out) = (
        outside_dir(),
        tempfile::tempdir().expect("ws"),
        outside_dir(),
    );
    let marker = repo_with_clean_filter(ws.path(), out.path());
    for policy in ["full-auto", "plan"] {
        let mock = Mock::start(vec![done()]);
        let (mut g, wid) = start(&mock, home.path(), ws.path(), "");
        let sid = session(&mut g, &wid, policy);
        turn(&mut g, &sid, "reject");
        assert!(
            !marker.exists(),
            "the repository's clean filter ran outside the sandbox ({policy})"
        );
        // The note still comes, from git in the sandbox, when the machine has one.
        let inspect = g.call("context/inspect", json!({"sessionId": sid}));
        if inspect["sandbox"]["confined"] == true {
            assert!(
                first_note(&mock).contains("Branch: main"),
                "{}",
                first_note(&mock)
            );
        }
    }
}

#[test]
fn exec_in_plan_mode_does_not_run_the_repository_s_clean_filter() {
    let (home, ws, out) = (
        outside_dir(),
        tempfile::tempdir().expect("ws"),
        outside_dir(),
    );
    let marker = repo_with_clean_filter(ws.path(), out.path());
    let mock = Mock::start(vec![done()]);
    let mut c = garuda(home.path(), &mock);
    let o = c
        .args(["exec", "--policy", "plan", "--json"])
        .arg(ws.path())
        .arg("look")
        .stdin(Stdio::null())
        .output()
        .expect("exec");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!marker.exists(), "exec --policy plan ran the clean filter");
}

#[test]
fn acp_session_start_does_not_run_the_repository_s_clean_filter() {
    use std::io::{BufRead, BufReader, Write};
    let (home, ws, out) = (
        outside_dir(),
        tempfile::tempdir().expect("ws"),
        outside_dir(),
    );
    let marker = repo_with_clean_filter(ws.path(), out.path());
    let mock = Mock::start(vec![done()]);
    let mut c = garuda(home.path(), &mock);
    let mut child = c
        .arg("acp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("garuda acp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut call = |id: u64, method: &str, params: Value| -> Value {
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{req}").expect("write");
        loop {
            let line = lines.next().expect("a line").expect("read");
            let m: Value = serde_json::from_str(&line).expect("json");
            if m["id"] == id && m.get("method").is_none() {
                return m;
            }
        }
    };
    call(1, "initialize", json!({"protocolVersion": 1}));
    let s = call(
        2,
        "session/new",
        json!({"cwd": ws.path(), "mcpServers": []}),
    );
    let sid = s["result"]["sessionId"].clone();
    let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]});
    let r = call(3, "session/prompt", prompt);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let _ = child.kill();
    let _ = child.wait();
    assert!(!marker.exists(), "garuda acp ran the clean filter");
}

#[test]
fn gpg_program_for_a_signed_commit_never_runs_unconfined() {
    let (home, ws, out) = (
        outside_dir(),
        tempfile::tempdir().expect("ws"),
        outside_dir(),
    );
    let w = ws.path();
    git(w, &["init", "-q", "-b", "main"]);
    // A commit carrying a signature, made by hand: no key is needed to have one.
    let tree = Command::new("git")
        .arg("-C")
        .arg(w)
        .arg("write-tree")
        .output()
        .expect("write-tree");
    let tree = String::from_utf8_lossy(&tree.stdout).trim().to_string();
    let body = format!(
        "tree {tree}\nauthor t <t@e> 1700000000 +0000\ncommitter t <t@e> 1700000000 +0000\n\
         gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\nsigned\n"
    );
    let mut hash = Command::new("git")
        .arg("-C")
        .arg(w)
        .args(["hash-object", "-t", "commit", "-w", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("hash-object");
    use std::io::Write;
    hash.stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("write");
    let id = hash.wait_with_output().expect("hash");
    let id = String::from_utf8_lossy(&id.stdout).trim().to_string();
    git(w, &["update-ref", "HEAD", &id]);
    let marker = out.path().join("gpg-ran");
    let gpg = out.path().join("gpg.sh");
    marker_script(&gpg, &marker);
    git(w, &["config", "log.showSignature", "true"]);
    git(w, &["config", "gpg.program", &gpg.display().to_string()]);

    let mock = Mock::start(vec![done()]);
    let (mut g, wid) = start(&mock, home.path(), w, "");
    let sid = session(&mut g, &wid, "plan");
    turn(&mut g, &sid, "reject");
    assert!(!marker.exists(), "gpg.program ran outside the sandbox");
}

#[test]
fn a_sandboxed_command_cannot_redirect_git_through_commondir() {
    let (home, ws, out) = (
        outside_dir(),
        tempfile::tempdir().expect("ws"),
        outside_dir(),
    );
    let w = ws.path();
    git(w, &["init", "-q", "-b", "main"]);
    std::fs::write(w.join("a.txt"), "alpha\n").expect("write");
    std::fs::write(w.join(".gitattributes"), "* filter=evil\n").expect("write");
    git(w, &["add", "-A"]);
    git(w, &["commit", "-q", "-m", "first"]);
    let marker = out.path().join("commondir-filter-ran");
    let script = out.path().join("filter.sh");
    marker_script(&script, &marker);
    // The command builds a common dir of its own whose config names the filter, points
    // .git/commondir at it and touches a tracked file.
    let attack = format!(
        "cp -r .git evil && printf '[filter \"evil\"]\\n\\tclean = {}\\n' >> evil/config && \
         echo \"$PWD/evil\" > .git/commondir; touch -d '+1 hour' a.txt; \
         echo '[filter \"evil\"]' >> .git/config.worktree; mkdir -p .git/info; \
         echo '* filter=evil' >> .git/info/attributes; echo tried",
        script.display()
    );
    let mock = Mock::start(vec![
        tool("b1", "bash", json!({"command": attack})),
        done(),
        done(),
    ]);
    let (mut g, wid) = start(&mock, home.path(), w, "");
    let sid = session(&mut g, &wid, "full-auto");
    let boxed = g.call("context/inspect", json!({"sessionId": sid}))["sandbox"]["confined"] == true;
    if !boxed {
        eprintln!("no sandbox here: the command would ask; skipped");
        return;
    }
    assert!(
        turn(&mut g, &sid, "reject").is_empty(),
        "a sandboxed command asks nothing"
    );
    for p in [
        ".git/commondir",
        ".git/config.worktree",
        ".git/info/attributes",
    ] {
        assert!(!w.join(p).exists(), "the sandboxed command wrote {p}");
    }
    // The next session start reads git again: nothing of the command's runs.
    let sid2 = session(&mut g, &wid, "plan");
    turn(&mut g, &sid2, "reject");
    assert!(!marker.exists(), "the planted filter ran");
    let st = Command::new("git")
        .arg("-C")
        .arg(w)
        .args(["status", "--porcelain"])
        .output()
        .expect("git");
    assert!(st.status.success(), "the user's own git still works");
    assert!(
        !marker.exists(),
        "the user's own git ran the planted filter"
    );
}

#[test]
fn a_sandboxed_command_cannot_create_a_repository_or_hooks_where_there_were_none() {
    let (home, ws, out) = (
        outside_dir(),
        tempfile::tempdir().expect("ws"),
        outside_dir(),
    );
    let w = ws.path();
    std::fs::write(w.join("a.txt"), "alpha\n").expect("write");
    let marker = out.path().join("planted-ran");
    let script = out.path().join("planted.sh");
    marker_script(&script, &marker);
    let settings = json!({"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": script.display().to_string()}]}]}});
    let attack = format!(
        "git init -q . ; git config filter.evil.clean {s}; echo '* filter=evil' > .gitattributes; \
         mkdir -p .claude .garuda .agents/skills/x; echo '{settings}' > .claude/settings.local.json; \
         echo 'gitdir: /nowhere' > .git; echo tried",
        s = script.display()
    );
    let mock = Mock::start(vec![
        tool("b1", "bash", json!({"command": attack})),
        done(),
        done(),
    ]);
    // The workspace is trusted: a planted settings file would run its hook as the user.
    let trust = format!(
        "[hooks]\ntrusted = [\"{}\"]\n",
        w.canonicalize().expect("canon").display()
    );
    let (mut g, wid) = start(&mock, home.path(), w, &trust);
    let sid = session(&mut g, &wid, "full-auto");
    let boxed = g.call("context/inspect", json!({"sessionId": sid}))["sandbox"]["confined"] == true;
    if !boxed {
        eprintln!("no sandbox here: the command would ask; skipped");
        return;
    }
    turn(&mut g, &sid, "reject");
    for p in [".git", ".claude", ".garuda", ".agents"] {
        assert!(
            !w.join(p).exists(),
            "{p} exists after the sandboxed command"
        );
    }
    let sid2 = session(&mut g, &wid, "plan");
    turn(&mut g, &sid2, "reject");
    assert!(!marker.exists(), "a planted hook or filter ran");
}

#[test]
fn file_tools_ask_before_writing_what_runs_later_even_under_full_auto() {
    let (home, ws) = (outside_dir(), tempfile::tempdir().expect("ws"));
    let w = ws.path();
    git(w, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(w.join(".claude")).expect("mkdir");
    let config_before = std::fs::read_to_string(w.join(".git/config")).expect("config");
    let targets = [
        ".git/config",
        ".git/commondir",
        ".git/hooks/pre-commit",
        ".claude/settings.local.json",
        ".claude/settings.json",
        ".garuda/config.toml",
        ".claude/agents/helper.md",
        ".agents/skills/x/SKILL.md",
    ];
    let mut replies: Vec<MockReply> = targets
        .iter()
        .enumerate()
        .map(|(i, p)| {
            tool(
                &format!("w{i}"),
                "write_file",
                json!({"path": p, "content": "[filter \"evil\"]\n"}),
            )
        })
        .collect();
    // The model reads the existing config first: an unread file's write is refused before
    // anyone is asked (and writes nothing either way).
    replies.insert(0, tool("r0", "read_file", json!({"path": ".git/config"})));
    replies.push(done());
    let mock = Mock::start(replies);
    let (mut g, wid) = start(&mock, home.path(), w, "");
    let sid = session(&mut g, &wid, "full-auto");
    let asked = turn(&mut g, &sid, "reject");
    assert_eq!(
        asked.len(),
        targets.len(),
        "every protected write asks: {asked:?}"
    );
    for (req, p) in asked.iter().zip(targets) {
        assert!(req.to_string().contains(p), "{p}: {req}");
    }
    assert_eq!(
        std::fs::read_to_string(w.join(".git/config")).expect("config"),
        config_before
    );
    for p in &targets[1..] {
        assert!(!w.join(p).exists(), "{p} was written without approval");
    }
}

#[test]
fn writing_a_gitdir_file_asks_even_under_full_auto() {
    let (home, ws) = (outside_dir(), tempfile::tempdir().expect("ws"));
    let w = ws.path();
    std::fs::create_dir_all(w.join("sub")).expect("mkdir");
    // A `.git` *file* moves where git reads its config from (`gitdir: …`), at the root or in
    // any folder the user later runs git in.
    let targets = [".git", "sub/.git"];
    let mut replies: Vec<MockReply> = targets
        .iter()
        .enumerate()
        .map(|(i, p)| {
            tool(
                &format!("g{i}"),
                "write_file",
                json!({"path": p, "content": "gitdir: /elsewhere\n"}),
            )
        })
        .collect();
    replies.push(done());
    let mock = Mock::start(replies);
    let (mut g, wid) = start(&mock, home.path(), w, "");
    let sid = session(&mut g, &wid, "full-auto");
    let asked = turn(&mut g, &sid, "reject");
    assert_eq!(
        asked.len(),
        targets.len(),
        "every gitdir write asks: {asked:?}"
    );
    for p in targets {
        assert!(!w.join(p).exists(), "{p} was written without approval");
    }
}
