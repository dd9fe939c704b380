//! Hostile and legitimate commands through the real sandbox (bubblewrap must be installed:
//! `apt-get install -y bubblewrap`; set `GARUDA_SKIP_SANDBOX_TESTS=1` to skip them on a
//! machine without it). Cases that need a server process to die or to hold secrets run in a
//! helper: this test binary started again on [`helper`].

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt};

use super::*;

const SECRET: &str = "s3cr3t-Zq9-never-print-me";

/// The probed sandbox, or `None` (skip) when the machine has none and the skip switch is set.
fn sandbox() -> Option<&'static SandboxState> {
    let s = probe();
    if s.available() {
        return Some(s);
    }
    if std::env::var_os("GARUDA_SKIP_SANDBOX_TESTS").is_some() {
        eprintln!("skipped: {:?}", s.reason);
        return None;
    }
    panic!(
        "the sandbox tests need bubblewrap and user namespaces ({:?}); install it with \
         `apt-get install -y bubblewrap`, or set GARUDA_SKIP_SANDBOX_TESTS=1",
        s.reason
    );
}

/// A workspace and a home with secrets, outside /tmp (which the sandbox replaces, so files
/// there would be hidden whatever the policy says).
struct Fixture {
    _base: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    home: PathBuf,
    other_home: PathBuf,
}

fn fixture() -> Fixture {
    // The workspace's target folder: outside /tmp and outside any home.
    let parent = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/sandbox-tests");
    std::fs::create_dir_all(&parent).unwrap();
    let dir = tempfile::Builder::new()
        .prefix("t")
        .tempdir_in(&parent)
        .unwrap();
    let base = dir.path().canonicalize().unwrap();
    let root = base.join("ws");
    let home = base.join("home");
    let other_home = base.join("otherhome");
    for d in [
        root.join(".git/hooks"),
        root.join(".git/objects"),
        root.join(".garuda"),
        root.join(".claude"),
        home.join(".ssh"),
        home.join(".aws"),
        other_home.clone(),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    let write = |p: PathBuf, s: &str| std::fs::write(p, s).unwrap();
    write(root.join(".git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n");
    write(root.join(".git/config"), "[core]\n\tbare = false\n");
    write(root.join(".garuda/memory.md"), "memory\n");
    write(root.join(".claude/settings.json"), "{}\n");
    write(
        root.join("main.c"),
        "#include <stdio.h>\nint main(void){puts(\"hello-built\");return 0;}\n",
    );
    write(home.join(".ssh/id_ed25519"), SECRET);
    write(home.join(".aws/credentials"), SECRET);
    write(home.join(".netrc"), SECRET);
    write(home.join(".profile"), "plain-profile\n");
    write(other_home.join("notes"), SECRET);
    write(base.join("outside.txt"), "outside\n");
    Fixture {
        _base: dir,
        base,
        root,
        home,
        other_home,
    }
}

impl Fixture {
    fn policy(&self) -> SandboxPolicy {
        let mut p = SandboxPolicy::for_root_with(&self.root, Some(&self.home), &[]).unwrap();
        // When the checkout itself lives in a folder the defaults hide (/root on a CI machine),
        // the fixture's folders would show through anyway; keep the test about its own paths.
        p.deny_read.retain(|d| !self.base.starts_with(d));
        p.deny_read.push(self.other_home.clone());
        // A checkout under /tmp: the private /tmp would hide the fixture's folder around the
        // root, which a checkout elsewhere reads; show it read-only, as a home there is.
        if self.base.starts_with("/tmp") {
            p.visible.push(self.base.clone());
        }
        p
    }
}

/// Runs `script` with bash under `policy`; returns the exit code and stdout+stderr.
async fn run(policy: &SandboxPolicy, script: &str) -> (Option<i32>, String) {
    let state = sandbox().unwrap();
    let mut cmd = SandboxCommand::new(state, policy, "bash", &["-c", script]).unwrap();
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().await.unwrap();
    let mut out = child.take_stdout().unwrap();
    let mut err = child.take_stderr().unwrap();
    let work = async {
        let (mut a, mut b) = (String::new(), String::new());
        let (ra, rb, st) = tokio::join!(
            out.read_to_string(&mut a),
            err.read_to_string(&mut b),
            child.wait()
        );
        ra.unwrap();
        rb.unwrap();
        (st.unwrap().code(), format!("{a}{b}"))
    };
    tokio::time::timeout(Duration::from_secs(60), work)
        .await
        .expect("sandboxed command took over 60 s")
}

/// A number for `sleep` that no other process on the machine has in its command line.
fn token() -> String {
    let n = uuid::Uuid::new_v4().as_u128() % 1_000_000_000;
    format!("7000.{n:09}")
}

/// Whether a `sleep` with `token` runs on the host.
fn alive(token: &str) -> bool {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return false;
    };
    // bwrap's own command line holds the token too; only the sleeps count.
    let want = format!("sleep\0{token}");
    rd.flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).starts_with(&want))
            .unwrap_or(false)
    })
}

/// Waits up to 10 s for `alive(token)` to become `want`.
fn settle(token: &str, want: bool) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if alive(token) == want {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    alive(token) == want
}

/// Background processes in every escaping shape: setsid, a double fork, nohup + setsid.
fn escapees(t: &[String; 3]) -> String {
    format!(
        "setsid sleep {} </dev/null >/dev/null 2>&1 &\n\
         ( ( sleep {} </dev/null >/dev/null 2>&1 & ) & )\n\
         nohup setsid sh -c 'sleep {}' </dev/null >/dev/null 2>&1 &\n",
        t[0], t[1], t[2]
    )
}

#[tokio::test]
async fn legitimate_work_passes() {
    if sandbox().is_none() {
        return;
    }
    let f = fixture();
    let script = r#"set -e
head -c 200 /usr/include/stdio.h | grep -q . && echo header-ok
cc -o hello main.c && ./hello
mkdir -p build/sub && echo artefact > build/sub/out && cat build/sub/out
printf '#!/bin/sh\necho script-ran "$1"\n' > run.sh && chmod +x run.sh && ./run.sh arg
t=$(mktemp) && echo tmp > "$t" && cat "$t"
cat "$HOME/.profile"
cat ../outside.txt
touch .git/index.lock 2>/dev/null || echo git-dir-read-only
pwd
"#;
    let mut p = f.policy();
    p.env
        .set
        .push(("HOME".into(), f.home.display().to_string()));
    let (code, out) = run(&p, script).await;
    assert_eq!(code, Some(0), "{out}");
    for want in [
        "header-ok",
        "hello-built",
        "artefact",
        "script-ran arg",
        "tmp\n",
        "plain-profile",
        "outside",
        // As in codex: a commit needs `outside_sandbox`, so nothing in `.git` can be planted.
        "git-dir-read-only",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    assert!(out.contains(&f.root.display().to_string()), "{out}");
    assert_eq!(
        std::fs::read_to_string(f.root.join("build/sub/out")).unwrap(),
        "artefact\n"
    );
}

#[tokio::test]
async fn secrets_and_other_homes_cannot_be_read() {
    if sandbox().is_none() {
        return;
    }
    let f = fixture();
    let host_tmp = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(host_tmp.path(), SECRET).unwrap();
    let h = f.home.display();
    let script = format!(
        "cat {h}/.ssh/id_ed25519; cat {h}/.aws/credentials; cat {h}/.netrc; \
         echo \"ssh:[$(ls -A {h}/.ssh)]\"; cat {o}/notes; ls -A {o}; cat {t}; cat /etc/shadow; \
         grep -r {SECRET} {base} 2>/dev/null; echo done",
        o = f.other_home.display(),
        t = host_tmp.path().display(),
        base = f.base.display(),
    );
    let (code, out) = run(&f.policy(), &script).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("done"), "{out}");
    assert!(!out.contains(SECRET), "a secret was read:\n{out}");
    assert!(out.contains("ssh:[]"), "{out}");
    assert!(!out.contains("root:"), "/etc/shadow was read:\n{out}");
}

#[tokio::test]
async fn writes_outside_the_root_fail() {
    if sandbox().is_none() {
        return;
    }
    let f = fixture();
    let host_tmp = tempfile::tempdir().unwrap();
    let script = format!(
        "touch {base}/escaped; echo x >> {h}/.profile; touch {h}/new; touch /usr/garuda-escaped; \
         touch /etc/garuda-escaped; touch {ht}/escaped; mkdir {o}/x; \
         ln -s /etc/passwd link && echo x >> link; echo done",
        base = f.base.display(),
        h = f.home.display(),
        ht = host_tmp.path().display(),
        o = f.other_home.display(),
    );
    let (code, out) = run(&f.policy(), &script).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("done"), "{out}");
    assert!(!f.base.join("escaped").exists());
    assert!(!f.home.join("new").exists());
    assert!(!Path::new("/usr/garuda-escaped").exists());
    assert!(!Path::new("/etc/garuda-escaped").exists());
    assert!(!host_tmp.path().join("escaped").exists());
    assert!(!f.other_home.join("x").exists());
    assert_eq!(
        std::fs::read_to_string(f.home.join(".profile")).unwrap(),
        "plain-profile\n"
    );
    assert!(
        !std::fs::read_to_string("/etc/passwd")
            .unwrap()
            .ends_with("x\n"),
        "/etc/passwd was written through a link"
    );
}

#[tokio::test]
async fn protected_paths_stay_read_only_whether_they_exist_or_not() {
    if sandbox().is_none() {
        return;
    }
    let f = fixture();
    let script = "echo evil > .git/hooks/pre-commit; echo evil > .git/hooks/post-checkout; \
                  echo '[alias] x = !evil' >> .git/config; mv .git/config .git/config.old; \
                  rm -rf .git/hooks; echo evil > .garuda/memory.md; touch .garuda/config.toml; \
                  rm -rf .garuda; echo evil > .claude/settings.json; rm -f .claude/settings.json; \
                  echo done";
    let (code, out) = run(&f.policy(), script).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("done"), "{out}");
    assert_eq!(
        std::fs::read_to_string(f.root.join(".git/hooks/pre-commit")).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
    assert!(!f.root.join(".git/hooks/post-checkout").exists());
    assert_eq!(
        std::fs::read_to_string(f.root.join(".git/config")).unwrap(),
        "[core]\n\tbare = false\n"
    );
    assert!(!f.root.join(".git/config.old").exists());
    assert_eq!(
        std::fs::read_to_string(f.root.join(".garuda/memory.md")).unwrap(),
        "memory\n"
    );
    assert!(!f.root.join(".garuda/config.toml").exists());
    assert_eq!(
        std::fs::read_to_string(f.root.join(".claude/settings.json")).unwrap(),
        "{}\n",
        "hooks a trusted workspace runs unsandboxed"
    );

    // Missing protected paths cannot be created either (no `git init`, no `.claude` with
    // hooks, no `.git` file pointing elsewhere), and the stand-in folders go with the command.
    std::fs::remove_dir_all(f.root.join(".garuda")).unwrap();
    std::fs::remove_dir_all(f.root.join(".claude")).unwrap();
    std::fs::remove_dir_all(f.root.join(".git")).unwrap();
    let script = "git init -q . ; echo 'gitdir: /tmp/x' > .git; mkdir -p .claude; \
                  echo '{}' > .claude/settings.local.json; mkdir .garuda/x; \
                  echo '[filter \"x\"]' > .git/config; find .git .claude .garuda .agents | wc -l";
    let (_, out) = run(&f.policy(), script).await;
    assert!(out.starts_with("4\n"), "four empty folders: {out}");
    for p in [".git", ".claude", ".garuda", ".agents"] {
        assert!(!f.root.join(p).exists(), "{p} is left behind: {out}");
    }
}

#[tokio::test]
async fn no_network_unless_allowed() {
    if sandbox().is_none() {
        return;
    }
    let f = fixture();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo connected-v4; \
         (exec 4<>/dev/tcp/localhost/{port}) && echo connected-name; echo done"
    );
    let (_, out) = run(&f.policy(), &script).await;
    assert!(out.contains("done"), "{out}");
    assert!(!out.contains("connected"), "{out}");
    let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "the listener saw a connection");

    let mut open = f.policy();
    open.network = true;
    let (_, out) = run(
        &open,
        &format!("(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo connected"),
    )
    .await;
    assert!(out.contains("connected"), "{out}");
}

#[tokio::test]
async fn environment_is_the_allow_list() {
    if sandbox().is_none() {
        return;
    }
    let f = fixture();
    let mut p = f.policy();
    p.env.pass.push("GARUDA_TEST_EXTRA_NAME".into()); // listed but unset: absent
    p.env.set.push(("PAGER".into(), "cat".into()));
    let (code, out) = run(&p, "env -0 | tr '\\0' '\\n' | cut -d= -f1 | sort").await;
    assert_eq!(code, Some(0), "{out}");
    // bash itself adds PWD, SHLVL and `_`; TMPDIR is the sandbox's private /tmp.
    let allowed = [
        "PATH",
        "HOME",
        "LANG",
        "TERM",
        "GARUDA_OWNER",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "PAGER",
        "TMPDIR",
        "PWD",
        "SHLVL",
        "_",
    ];
    for name in out.lines().filter(|l| !l.is_empty()) {
        assert!(
            allowed.contains(&name),
            "{name} reached the command:\n{out}"
        );
    }
    assert!(out.lines().any(|l| l == "PATH"), "{out}");
}

#[test]
fn no_sandbox_means_no_command() {
    let f = fixture();
    let state = SandboxState::none("user namespaces are blocked");
    let err = SandboxCommand::new(&state, &f.policy(), "true", &[] as &[&str]).unwrap_err();
    assert!(
        matches!(&err, SandboxError::Unavailable { reason } if reason.contains("blocked")),
        "{err}"
    );
    let on = SandboxSettings {
        network: true,
        ..SandboxSettings::default()
    };
    let runner = CommandRunner::new(&state, &on, &f.root).unwrap();
    assert!(!runner.report().confined() && !runner.report().network);
    assert!(runner.report().describe().contains("blocked"));
}

#[tokio::test]
async fn the_tree_ends_with_the_call() {
    if sandbox().is_none() {
        return;
    }
    let f = fixture();
    let t = [token(), token(), token()];
    let script = format!("{}echo started\nsleep 0.5\n", escapees(&t));
    let state = sandbox().unwrap();
    let mut cmd = SandboxCommand::new(state, &f.policy(), "bash", &["-c", &script]).unwrap();
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = cmd.spawn().await.unwrap();
    let mut lines = tokio::io::BufReader::new(child.take_stdout().unwrap()).lines();
    assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("started"));
    for x in &t {
        assert!(settle(x, true), "{x} never started");
    }
    assert!(child.wait().await.unwrap().success());
    for x in &t {
        assert!(settle(x, false), "{x} outlived the call");
    }
}

#[tokio::test]
async fn the_tree_ends_with_a_cancel() {
    if sandbox().is_none() {
        return;
    }
    let f = fixture();
    let state = sandbox().unwrap();
    for by_drop in [false, true] {
        let t = [token(), token(), token()];
        let script = format!("{}echo started\nsleep 1000\n", escapees(&t));
        let mut cmd = SandboxCommand::new(state, &f.policy(), "bash", &["-c", &script]).unwrap();
        cmd.stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = cmd.spawn().await.unwrap();
        let mut lines = tokio::io::BufReader::new(child.take_stdout().unwrap()).lines();
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("started"));
        for x in &t {
            assert!(settle(x, true), "{x} never started");
        }
        if by_drop {
            drop(child);
        } else {
            child.kill();
            child.wait().await.unwrap();
        }
        for x in &t {
            assert!(
                settle(x, false),
                "{x} outlived the cancel (drop: {by_drop})"
            );
        }
    }
}

/// Starts this test binary as a helper process running `mode`.
fn start_helper(mode: &str, f: &Fixture, extra_env: &[(&str, &str)]) -> std::process::Child {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = std::process::Command::new(exe);
    cmd.args([
        "sandbox::tests::helper",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("GARUDA_SANDBOX_HELPER", mode)
    .env("GARUDA_SANDBOX_HELPER_ROOT", &f.root)
    .env("GARUDA_SANDBOX_HELPER_HOME", &f.home)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// The helper's `HELPER:` lines, up to and including the one starting with `until`. The rest
/// of its output is drained on a thread, so it never dies of a closed pipe.
fn helper_lines(child: &mut std::process::Child, until: &str) -> Vec<String> {
    let out = child.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    let mut got = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        // libtest prints `test NAME ... ` before the first line the test prints.
        if let Some((_, l)) = line.split_once("HELPER:") {
            got.push(l.to_string());
            if l.starts_with(until) {
                break;
            }
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    got
}

#[test]
fn the_tree_ends_when_the_server_is_killed() {
    if sandbox().is_none() {
        return;
    }
    let f = fixture();
    let t = [token(), token(), token()];
    let mut helper = start_helper(
        "orphans",
        &f,
        &[("GARUDA_SANDBOX_HELPER_TOKENS", &t.join(" "))],
    );
    let lines = helper_lines(&mut helper, "ready");
    assert_eq!(lines.last().map(String::as_str), Some("ready"), "{lines:?}");
    for x in &t {
        assert!(settle(x, true), "{x} never started");
    }
    // kill -9: no handler, no drop, no chance to clean up.
    helper.kill().unwrap();
    helper.wait().unwrap();
    for x in &t {
        assert!(settle(x, false), "{x} outlived the killed server");
    }
}

#[test]
fn the_server_process_is_invisible() {
    if sandbox().is_none() {
        return;
    }
    let f = fixture();
    let mut helper = start_helper("snoop", &f, &[("GARUDA_TEST_CUSTOM_NAME", SECRET)]);
    let lines = helper_lines(&mut helper, "end");
    helper.wait().unwrap();
    let text = lines.join("\n");
    assert!(text.contains("snooped"), "{text}");
    assert!(
        !text.contains(SECRET),
        "the command saw the server's secret:\n{text}"
    );
    assert!(!text.contains("VISIBLE"), "{text}");
}

#[test]
fn secrets_leave_the_server_environment() {
    let f = fixture();
    let mut helper = start_helper(
        "scrub",
        &f,
        &[
            ("GARUDA_TEST_API_KEY", SECRET),
            ("GARUDA_TEST_CUSTOM_NAME", SECRET),
        ],
    );
    let lines = helper_lines(&mut helper, "end");
    assert!(helper.wait().unwrap().success());
    assert_eq!(
        lines,
        vec![
            "kept GARUDA_TEST_API_KEY=true GARUDA_TEST_CUSTOM_NAME=true",
            "env GARUDA_TEST_API_KEY=false GARUDA_TEST_CUSTOM_NAME=false",
            "proc-environ-has-secret=false",
            "end",
        ]
    );
}

/// The helper process. Does nothing unless a test started it.
#[test]
#[ignore = "a helper process the sandbox tests start; it does nothing alone"]
fn helper() {
    let Ok(mode) = std::env::var("GARUDA_SANDBOX_HELPER") else {
        return;
    };
    let say = |s: &str| println!("HELPER:{s}");
    if mode == "scrub" {
        // SAFETY: this process runs only this test, on one thread, and nothing else reads the
        // environment meanwhile.
        let kept = unsafe { take_secrets(&["GARUDA_TEST_CUSTOM_NAME"]) };
        let names = ["GARUDA_TEST_API_KEY", "GARUDA_TEST_CUSTOM_NAME"];
        let show = |f: &dyn Fn(&str) -> bool| {
            names
                .iter()
                .map(|n| format!("{n}={}", f(n)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        say(&format!(
            "kept {}",
            show(&|n| kept.get(n).as_deref() == Some(SECRET))
        ));
        say(&format!("env {}", show(&|n| std::env::var_os(n).is_some())));
        let environ = std::fs::read("/proc/self/environ").unwrap_or_default();
        let has = environ
            .windows(SECRET.len())
            .any(|w| w == SECRET.as_bytes());
        say(&format!("proc-environ-has-secret={has}"));
        say("end");
        return;
    }
    let root = PathBuf::from(std::env::var_os("GARUDA_SANDBOX_HELPER_ROOT").unwrap());
    let home = PathBuf::from(std::env::var_os("GARUDA_SANDBOX_HELPER_HOME").unwrap());
    let policy = SandboxPolicy::for_root_with(&root, Some(&home), &[]).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let state = probe();
        let script = match mode.as_str() {
            "orphans" => {
                let t: Vec<String> = std::env::var("GARUDA_SANDBOX_HELPER_TOKENS")
                    .unwrap()
                    .split(' ')
                    .map(String::from)
                    .collect();
                format!(
                    "{}echo started\nsleep 1000\n",
                    escapees(&[t[0].clone(), t[1].clone(), t[2].clone()])
                )
            }
            "snoop" => {
                // A descriptor the server holds without close-on-exec, pointing at a secret.
                let path = root.join("fd-secret");
                std::fs::write(&path, SECRET).unwrap();
                let file = std::fs::File::open(&path).unwrap();
                std::fs::remove_file(&path).unwrap();
                rustix::io::fcntl_setfd(&file, rustix::io::FdFlags::empty()).unwrap();
                use std::os::fd::AsRawFd;
                let fd = file.as_raw_fd();
                std::mem::forget(file);
                let pid = std::process::id();
                format!(
                    "env; cat /proc/{pid}/environ; ls -l /proc/{pid}/fd; \
                     head -c 64 /proc/{pid}/mem; cat /proc/{pid}/cmdline; \
                     test -e /proc/{pid} && echo VISIBLE; cat <&{fd}; cat /proc/self/fd/{fd}; \
                     for p in /proc/[0-9]*; do cat $p/environ; done; \
                     kill -0 {pid} && echo VISIBLE; echo snooped"
                )
            }
            other => panic!("unknown helper mode {other}"),
        };
        let mut cmd = SandboxCommand::new(state, &policy, "bash", &["-c", &script]).unwrap();
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().await.unwrap();
        let mut out = tokio::io::BufReader::new(child.take_stdout().unwrap()).lines();
        let mut err = child.take_stderr().unwrap();
        if mode == "orphans" {
            assert_eq!(out.next_line().await.unwrap().as_deref(), Some("started"));
            say("ready");
            // Wait to be killed.
            tokio::time::sleep(Duration::from_secs(600)).await;
            return;
        }
        let mut errs = String::new();
        let mut lines = Vec::new();
        while let Some(l) = out.next_line().await.unwrap() {
            lines.push(l);
        }
        err.read_to_string(&mut errs).await.unwrap();
        child.wait().await.unwrap();
        for l in lines.iter().map(String::as_str).chain(errs.lines()) {
            say(l);
        }
        say("end");
    });
}
