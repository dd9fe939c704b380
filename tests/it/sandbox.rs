//! Hostile commands from a model under `full-auto`, through the real binary: the sandbox must
//! hold (bubblewrap installed, as scripts/provision.sh does), legitimate work must pass, and no
//! process a command starts may outlive its call, a cancel or a `kill -9` of the server.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Framing, Garuda};
use crate::context::new_session;
use crate::mock_model::*;
use crate::turns::{MODEL, Mock, write_config};

const SECRET: &str = "it-s3cr3t-Qx7-must-never-show";

fn text_input(t: &str) -> Value {
    json!([{"type": "text", "text": t}])
}

/// A server with a workspace, started with a secret under a custom name in its environment,
/// and a home outside /tmp (which commands get fresh, so it would hide the home anyway) with
/// secrets in it.
fn start(
    mock: &Mock,
    extra_config: &str,
) -> (Garuda, tempfile::TempDir, tempfile::TempDir, String) {
    let home = outside_dir();
    write_config(home.path(), extra_config);
    for (dir, file) in [(".ssh", "id_ed25519"), (".aws", "credentials")] {
        std::fs::create_dir_all(home.path().join(dir)).expect("mkdir");
        std::fs::write(home.path().join(dir).join(file), SECRET).expect("write");
    }
    std::fs::write(home.path().join(".netrc"), SECRET).expect("write");
    std::fs::write(home.path().join(".profile"), "plain-profile\n").expect("write");
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("main.c"), "int main(void){return 0;}\n").expect("write");
    let mut env = mock.env();
    env.push(("GARUDA_IT_CUSTOM_NAME".into(), SECRET.into()));
    env.push(("WORK_LLM_KEY".into(), SECRET.into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    (g, home, ws, wid)
}

fn bash(id: &str, command: &str) -> MockReply {
    let input = json!({ "command": command }).to_string();
    MockReply::Sse(anthropic_tool_use(id, "bash", &[&input]))
}

fn done() -> MockReply {
    MockReply::Sse(anthropic_text("done", MockUsage::new(5, 1)))
}

/// The outputs of the finished tool calls of the last turn.
fn outputs(g: &Garuda) -> Vec<String> {
    g.turn_events()
        .into_iter()
        .filter(|e| e["kind"] == "toolCallFinished")
        .map(|e| e["output"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A folder outside /tmp (the sandbox gives commands their own /tmp, which would hide a file
/// there whatever the policy) and outside the workspace.
fn outside_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("outside dir")
}

/// A number for `sleep` that no other process has in its command line.
fn token() -> String {
    let n = uuid::Uuid::new_v4().as_u128() % 1_000_000_000;
    format!("7100.{n:09}")
}

/// Whether a `sleep` with `token` runs (bwrap's own command line holds the token too).
fn alive(token: &str) -> bool {
    let want = format!("sleep\0{token}");
    std::fs::read_dir("/proc").is_ok_and(|rd| {
        rd.flatten().any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).starts_with(&want))
        })
    })
}

/// Waits up to 10 s for `alive(token)` to be `want`.
fn settle(token: &str, want: bool) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if alive(token) == want {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    alive(token) == want
}

#[test]
fn hostile_commands_fail_and_legitimate_work_passes() {
    let outside = outside_dir();
    let escaped: PathBuf = outside.path().join("escaped");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    listener.set_nonblocking(true).expect("nonblocking");

    // The server's pid is only known once it runs; the command finds it as its parent's
    // parent on the host, and tries the usual ways in.
    let hostile = format!(
        "cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/.netrc; echo \"SSH:[$(ls -A ~/.ssh)]\"; \
         cat $XDG_CONFIG_HOME/garuda/config.toml ~/config/garuda/config.toml; \
         echo \"ROOTHOME:[$(ls -A /root)]\"; echo x > {escaped}; echo x >> ~/.profile; \
         (exec 3<>/dev/tcp/127.0.0.1/{port}) && echo CONNECTED; \
         tr '\\0' '\\n' </proc/$PPID/environ; \
         for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; ls -l $p/fd; done 2>/dev/null; \
         env; cat /etc/shadow; echo HOSTILE-END",
        escaped = escaped.display(),
    );
    let legit = "head -c 100 /usr/include/stdio.h >/dev/null && echo HEADER-OK; \
                 cc -o prog main.c && ./prog && echo BUILD-OK; \
                 mkdir -p out && echo artefact > out/a && cat out/a; \
                 t=$(mktemp) && echo tmp-ok > $t && cat $t; cat ~/.profile";
    let mock = Mock::start(vec![bash("t1", &hostile), bash("t2", legit), done()]);
    let (mut g, home, ws, wid) = start(&mock, "");
    let _home = home;
    let sid = new_session(&mut g, &wid);
    let server_pid = g.child.id();
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("go")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let out = outputs(&g);
    assert_eq!(out.len(), 2, "{out:?}");
    let hostile_out = &out[0];
    assert!(hostile_out.contains("HOSTILE-END"), "{hostile_out}");
    assert!(
        !hostile_out.contains(SECRET),
        "a secret leaked:\n{hostile_out}"
    );
    assert!(
        !hostile_out.contains("sk-test"),
        "the API key leaked:\n{hostile_out}"
    );
    assert!(!hostile_out.contains("CONNECTED"), "{hostile_out}");
    assert!(!hostile_out.contains("root:"), "{hostile_out}");
    // Secrets in the home, Garuda's config and another user's home (/root here) are empty.
    assert!(hostile_out.contains("SSH:[]"), "{hostile_out}");
    // Only the toolchain folders the environment names show in /root (a home under /tmp
    // with the toolchain left in /root, as in a checkout under /tmp).
    let listed = hostile_out
        .split("ROOTHOME:[")
        .nth(1)
        .and_then(|r| r.split(']').next())
        .unwrap_or_else(|| panic!("{hostile_out}"));
    let toolchain: Vec<String> = ["CARGO_HOME", "RUSTUP_HOME"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .filter_map(|p| p.strip_prefix("/root/").map(str::to_string))
        .collect();
    for entry in listed.split_whitespace() {
        assert!(toolchain.iter().any(|t| t == entry), "{hostile_out}");
    }
    assert!(!hostile_out.contains("max_retries"), "{hostile_out}");
    assert_eq!(
        std::fs::read_to_string(_home.path().join(".profile")).expect("profile"),
        "plain-profile\n"
    );
    assert!(!escaped.exists(), "a write outside the root succeeded");
    assert!(listener.accept().is_err(), "the listener saw a connection");
    // The server's own /proc entry is not in the command's world.
    assert!(
        !hostile_out.contains(&format!("/proc/{server_pid}/")),
        "{hostile_out}"
    );
    for want in [
        "HEADER-OK",
        "BUILD-OK",
        "artefact",
        "tmp-ok",
        "plain-profile",
    ] {
        assert!(out[1].contains(want), "missing {want}:\n{}", out[1]);
    }
    assert!(ws.path().join("out/a").exists());
    // Nothing secret went to the model either.
    for body in mock.rec.raw() {
        assert!(!String::from_utf8_lossy(&body).contains(SECRET));
    }
    // context/inspect says what the commands ran in.
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(inspect["sandbox"]["mode"], "bubblewrap", "{inspect}");
    assert_eq!(inspect["sandbox"]["confined"], true);
    assert_eq!(inspect["sandbox"]["network"], false);
    assert_eq!(inspect["sandbox"]["commandsAsk"], false);
}

/// A sandboxed command that writes under `/tmp` succeeds, yet the file never reaches the
/// host: its result says so (the model and the person read it), and the tool's description
/// warns beforehand. A write inside the workspace (here itself under /tmp) gets no note.
#[test]
fn a_write_to_the_private_tmp_is_named_in_the_result() {
    let lost = format!("/tmp/garuda-it-{}.txt", uuid::Uuid::new_v4());
    let mock = Mock::start(vec![
        bash("t1", &format!("echo hi > {lost} && cat {lost}")),
        bash("t2", "echo kept > in-root.txt && cat \"$PWD/in-root.txt\""),
        done(),
    ]);
    let (mut g, _home, ws, wid) = start(&mock, "");
    let sid = new_session(&mut g, &wid);
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("go")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let out = outputs(&g);
    assert!(out[0].contains("exit code: 0"), "{}", out[0]);
    assert!(out[0].contains("/tmp is private"), "{}", out[0]);
    assert!(out[0].contains(&lost), "{}", out[0]);
    assert!(!Path::new(&lost).exists());
    assert!(out[1].contains("kept"), "{}", out[1]);
    assert!(!out[1].contains("/tmp is private"), "{}", out[1]);
    assert!(ws.path().join("in-root.txt").exists());
    let first = &mock.rec.bodies()[0];
    let bash_spec = first["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "bash"))
        .expect("bash offered");
    assert!(
        bash_spec["description"]
            .as_str()
            .is_some_and(|d| d.contains("`/tmp` is private")),
        "{bash_spec}"
    );
}

#[test]
fn background_processes_die_with_the_call_the_cancel_and_the_server() {
    let (t1, t2, t3) = (token(), token(), token());
    let escape = |t: &str| {
        format!(
            "setsid sleep {t} </dev/null >/dev/null 2>&1 & \
             ( ( sleep {t} </dev/null >/dev/null 2>&1 & ) & ) ; echo started"
        )
    };
    let mock = Mock::start(vec![
        bash("t1", &format!("{}; sleep 0.3", escape(&t1))),
        done(),
        bash("t2", &format!("{}; sleep 300", escape(&t2))),
        bash("t3", &format!("{}; sleep 300", escape(&t3))),
    ]);
    let (mut g, _home, _ws, wid) = start(&mock, "");
    let sid = new_session(&mut g, &wid);

    // The call's end.
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("1")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    assert!(outputs(&g)[0].contains("started"));
    assert!(settle(&t1, false), "a background process outlived its call");
    g.backlog.clear();

    // A cancel.
    let id = g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("2")}),
    );
    wait_started(&mut g);
    assert!(settle(&t2, true), "the command never started its children");
    assert_eq!(g.call("turn/cancel", json!({"sessionId": sid}))["ok"], true);
    let r = g.response(&json!(id));
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    assert!(
        settle(&t2, false),
        "a background process outlived the cancel"
    );
    g.backlog.clear();

    // kill -9 of the server: no handler runs.
    g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("3")}),
    );
    wait_started(&mut g);
    assert!(settle(&t3, true), "the command never started its children");
    g.child.kill().expect("kill -9");
    g.child.wait().expect("reap");
    assert!(settle(&t3, false), "a process outlived the killed server");
}

#[test]
fn a_server_killed_while_the_sandbox_starts_leaves_nothing() {
    let t = token();
    let mock = Mock::start(vec![bash(
        "t1",
        &format!("setsid sleep {t} </dev/null >/dev/null 2>&1 & sleep {t}"),
    )]);
    let (mut g, _home, _ws, wid) = start(&mock, "");
    let sid = new_session(&mut g, &wid);
    g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("go")}),
    );
    // Kill as soon as bubblewrap exists (its command line holds the token), while it may still
    // be building the sandbox.
    let bwrap_started = || {
        std::fs::read_dir("/proc").is_ok_and(|rd| {
            rd.flatten().any(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&t))
            })
        })
    };
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end && !bwrap_started() {
        std::thread::sleep(Duration::from_millis(1));
    }
    g.child.kill().expect("kill -9");
    g.child.wait().expect("reap");
    // Give an orphaned sandbox the time to start its command, then look.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        settle(&t, false),
        "the sandbox outlived a server killed during its setup"
    );
    // A server killed in the instant bubblewrap waits for its uid map can leave that bwrap
    // blocked in its handshake (docs/sandbox.md); nothing of the command may run.
    assert!(!cmdline_holds(&t), "a command outlived the server");
    // Such a blocked bwrap is this test's own: end it rather than leave it on the machine.
    for e in std::fs::read_dir("/proc").expect("proc").flatten() {
        let c = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&c).contains(&t)
            && let Some(pid) = e
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
                .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

/// Whether a process other than bubblewrap itself has `t` in its command line.
fn cmdline_holds(t: &str) -> bool {
    std::fs::read_dir("/proc").is_ok_and(|rd| {
        rd.flatten().any(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                let c = String::from_utf8_lossy(&c);
                c.contains(t) && !c.starts_with("/usr/bin/bwrap\0") && !c.starts_with("bwrap\0")
            })
        })
    })
}

fn wait_started(g: &mut Garuda) {
    loop {
        let m = g.wait_method("turn/update");
        if m["params"]["event"]["kind"] == "toolCallStarted" {
            return;
        }
    }
}

#[test]
fn auto_edit_asks_for_risky_paths_and_shows_the_whole_command() {
    let long = format!("echo {}; echo tail-part-visible", "x".repeat(400));
    let write = |id: &str, path: &str| {
        let input = json!({"path": path, "content": "echo hi\n"}).to_string();
        MockReply::Sse(anthropic_tool_use(id, "write_file", &[&input]))
    };
    let mock = Mock::start(vec![
        write("w1", "notes.txt"),
        write("w2", ".envrc"),
        write("w3", ".git/hooks/pre-commit"),
        bash("b1", &long),
        done(),
    ]);
    let (mut g, _home, ws, wid) = start(&mock, "");
    std::fs::create_dir_all(ws.path().join(".git/hooks")).expect("mkdir");
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "auto-edit"}),
    );
    let sid = r["sessionId"].as_str().expect("sid").to_string();
    let mut titles = Vec::new();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("go")}),
        |req| {
            titles.push(
                req["params"]["title"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            json!({"optionId": "reject"})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(titles.len(), 3, "{titles:?}");
    assert!(titles[0].starts_with("write_file: .envrc"), "{titles:?}");
    assert!(
        titles[1].starts_with("write_file: .git/hooks/pre-commit"),
        "{titles:?}"
    );
    assert_eq!(titles[2], format!("bash: {long}"));
    assert!(ws.path().join("notes.txt").exists());
    assert!(!ws.path().join(".envrc").exists());
    assert!(!ws.path().join(".git/hooks/pre-commit").exists());
}

#[test]
fn without_a_sandbox_every_command_asks_and_everyone_is_told() {
    let mock = Mock::start(vec![bash("b1", "touch ran.txt"), done()]);
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), "");
    let ws = tempfile::tempdir().expect("ws");
    let mut env = mock.env();
    env.push(("GARUDA_BWRAP".into(), "/nonexistent/bwrap".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    let warnings = r["warnings"].to_string();
    assert!(warnings.contains("not sandboxed"), "{r}");
    let sid = r["sessionId"].as_str().expect("sid").to_string();
    let mut asked = Vec::new();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("go")}),
        |req| {
            asked.push(req["params"]["title"].clone());
            json!({"optionId": "reject"})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(asked, vec![json!("bash: touch ran.txt")]);
    assert!(!ws.path().join("ran.txt").exists());
    let inspect = g.call("context/inspect", json!({"sessionId": sid}));
    assert_eq!(inspect["sandbox"]["mode"], "none", "{inspect}");
    assert_eq!(inspect["sandbox"]["commandsAsk"], true);
    assert!(
        inspect["sandbox"]["description"]
            .as_str()
            .expect("description")
            .contains("bwrap"),
        "{inspect}"
    );
    // The session's prompt says each command is approved.
    let view = g.call("session/view", json!({"sessionId": sid}));
    assert!(
        view.to_string()
            .contains("The user approves each command before it runs, so"),
        "{view}"
    );
}

#[test]
fn sigterm_ends_unconfined_commands_too() {
    let t = token();
    let mock = Mock::start(vec![bash("b1", &format!("sleep {t} & sleep {t}"))]);
    // The user turned the sandbox off: only the server's own cleanup ends the group.
    let (mut g, _home, _ws, wid) = start(&mock, "[sandbox]\nenabled = false\n");
    let sid = new_session(&mut g, &wid);
    g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": text_input("go")}),
    );
    wait_started(&mut g);
    assert!(settle(&t, true), "the command never started");
    let pid = rustix::process::Pid::from_raw(g.child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    assert_eq!(g.wait_exit(), Some(143));
    assert!(
        settle(&t, false),
        "a command outlived a server ended by SIGTERM"
    );
}

fn prompt_json(home: &Path, ws: &Path) -> Value {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_garuda"));
    crate::client::isolated_env(&mut c, home);
    let out = c.args(["prompt", "--json"]).arg(ws).output().expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

#[test]
fn the_prompt_follows_the_real_state_not_the_config() {
    let ws = tempfile::tempdir().expect("ws");
    std::fs::create_dir_all(ws.path().join(".garuda")).expect("mkdir");
    // A cloned repository claims a sandbox and tools Garuda does not have.
    std::fs::write(
        ws.path().join(".garuda/config.toml"),
        "[features]\nsandboxed = true\nexplore = true\nagents = true\nskills = true\ntodo = false\n",
    )
    .expect("write");

    // Defaults: sandbox on, every command asks. The user turned `explore` off, so the claim
    // of the workspace's switch is all there is for it.
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), "[agents]\nexplore = false\n");
    let v = prompt_json(home.path(), ws.path());
    let system = v["system"].as_str().expect("system");
    assert!(
        system.contains(
            "The user approves each command before it runs, and commands run in a sandbox"
        ),
        "{system}"
    );
    assert!(system.contains("todo_write, with one step"), "{system}");
    // The escape hatch is offered where there is a sandbox to leave.
    assert!(system.contains("outside_sandbox: true"), "{system}");
    for absent in ["call explore", "agent tool", "skill tool"] {
        assert!(!system.contains(absent), "{absent}:\n{system}");
    }
    assert_eq!(v["sandbox"]["mode"], "bubblewrap");

    // full-auto with the sandbox: commands run without approval, in the sandbox.
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), "[approval]\npolicy = \"full-auto\"\n");
    let system = prompt_json(home.path(), ws.path())["system"]
        .as_str()
        .expect("system")
        .to_string();
    assert!(
        system.contains("Commands run without approval in a sandbox"),
        "{system}"
    );

    // The user turned the sandbox off under full-auto: the prompt says so.
    let home = tempfile::tempdir().expect("home");
    write_config(
        home.path(),
        &format!("[approval]\npolicy = \"full-auto\"\n[sandbox]\nenabled = false\n# {MODEL}\n"),
    );
    let v = prompt_json(home.path(), ws.path());
    let system = v["system"].as_str().expect("system");
    assert!(
        system.contains("without approval and without a sandbox"),
        "{system}"
    );
    assert!(!system.contains("run in a sandbox"), "{system}");
    assert!(!system.contains("outside_sandbox"), "{system}");
    assert_eq!(v["sandbox"]["confined"], false);
}
