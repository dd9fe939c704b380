//! `garuda demo`: a scripted, offline tour of Garuda over the real protocol.
//!
//! It starts `garuda serve` as a child, opens a folder as a workspace, assembles the prompt,
//! runs turns with a bundled replay model that reads files through tools, forces a
//! compaction, and prints what happened at each step with timings.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};

/// The bundled model: each line answers one model call, in order.
const CASSETTE: &str = include_str!("demo/cassette.jsonl");

struct Peer {
    child: Child,
    stdin: ChildStdin,
    rx: Receiver<Value>,
    next_id: u64,
}

impl Peer {
    fn start(state: &Path) -> anyhow::Result<Peer> {
        let exe = std::env::current_exe().context("cannot find the garuda binary")?;
        let mut child = Command::new(exe)
            .arg("serve")
            .env("XDG_STATE_HOME", state)
            .env("XDG_CONFIG_HOME", state.join("config"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start garuda serve")?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let stdin = child.stdin.take().ok_or_else(|| anyhow!("no stdin"))?;
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        Ok(Peer {
            child,
            stdin,
            rx,
            next_id: 1,
        })
    }

    fn send(&mut self, v: &Value) -> anyhow::Result<()> {
        writeln!(self.stdin, "{v}")?;
        self.stdin.flush()?;
        Ok(())
    }

    /// Sends a request and waits for its answer; notifications go to `on_note` as they come,
    /// and server requests (approvals) are allowed once.
    fn call(
        &mut self,
        method: &str,
        params: Value,
        mut on_note: impl FnMut(&Value),
    ) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let m = self
                .rx
                .recv_timeout(Duration::from_secs(60))
                .map_err(|_| anyhow!("{method}: no answer from garuda serve"))?;
            match (m.get("id"), m.get("method")) {
                (Some(i), None) if i == &json!(id) => {
                    return match m.get("error") {
                        Some(e) => bail!("{method} failed: {e}"),
                        None => Ok(m.get("result").cloned().unwrap_or(Value::Null)),
                    };
                }
                (Some(i), Some(_)) => {
                    let reply =
                        json!({"jsonrpc": "2.0", "id": i, "result": {"optionId": "allow_once"}});
                    self.send(&reply)?;
                }
                _ => on_note(&m),
            }
        }
    }
}

fn ms(t: Instant) -> String {
    format!("{:.1} ms", t.elapsed().as_secs_f64() * 1000.0)
}

fn print_event(m: &Value) {
    if m["method"] != "turn/update" {
        if m["method"] == "$/progress" {
            println!("    progress: {}", m["params"]["value"]);
        }
        return;
    }
    let e = &m["params"]["event"];
    match e["kind"].as_str().unwrap_or("") {
        "textDelta" => {
            print!("{}", e["text"].as_str().unwrap_or(""));
            let _ = std::io::stdout().flush();
        }
        "toolCallStarted" => println!(
            "\n    tool call: {} {}",
            e["name"].as_str().unwrap_or(""),
            e["input"]
        ),
        "toolCallFinished" => {
            let out = e["output"].as_str().unwrap_or("");
            println!(
                "    tool result: {} lines{}",
                out.lines().count(),
                if e["isError"] == true { " (error)" } else { "" }
            );
        }
        "usage" => println!("\n    usage: context {} tokens", e["contextTokens"]),
        "compaction" => println!(
            "    compaction {}: {}",
            e["phase"].as_str().unwrap_or(""),
            e.get("message").and_then(Value::as_str).unwrap_or("")
        ),
        _ => {}
    }
}

/// Runs the demo on `dir`; returns the process exit code.
pub fn run(dir: &Path) -> anyhow::Result<u8> {
    let root =
        std::fs::canonicalize(dir).with_context(|| format!("{} is not a folder", dir.display()))?;
    let state = tempdir()?;
    let cassette = state.join("demo-cassette.jsonl");
    std::fs::write(&cassette, CASSETTE)?;
    let total = Instant::now();

    println!("1. start `garuda serve` and initialize");
    let t = Instant::now();
    let mut peer = Peer::start(&state)?;
    let init = peer.call("initialize", json!({"processId": std::process::id(), "clientInfo": {"name": "garuda-demo"}, "capabilities": {}}), |_| {})?;
    println!(
        "   {} {} ready in {}",
        init["serverInfo"]["name"].as_str().unwrap_or(""),
        init["serverInfo"]["version"].as_str().unwrap_or(""),
        ms(t)
    );
    peer.send(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}))?;

    println!("2. open {} as a workspace", root.display());
    let t = Instant::now();
    let ws = peer.call("workspace/open", json!({"root": root}), |_| {})?;
    let wid = ws["workspaceId"].as_str().unwrap_or("").to_string();
    println!(
        "   {wid} in {}; context files: {}",
        ms(t),
        ws["contextFiles"]
    );

    println!("3. assemble the system prompt (cold, then warm)");
    let t = Instant::now();
    let a = peer.call("prompt/assemble", json!({"workspaceId": wid}), |_| {})?;
    let cold = ms(t);
    let t = Instant::now();
    peer.call("prompt/assemble", json!({"workspaceId": wid}), |_| {})?;
    println!(
        "   {} bytes, sha256 {}…, cold {cold}, warm {}",
        a["system"].as_str().map_or(0, str::len),
        &a["sha256"].as_str().unwrap_or("")[..12.min(a["sha256"].as_str().unwrap_or("").len())],
        ms(t)
    );
    for s in a["sections"].as_array().into_iter().flatten() {
        let status = if s["skipped"].is_string() {
            format!("skipped: {}", s["skipped"].as_str().unwrap_or(""))
        } else if s["cut"] == true {
            "cut".into()
        } else {
            "included".into()
        };
        println!(
            "     - {:<28} {:>6} bytes  {status}",
            s["kind"].as_str().unwrap_or(""),
            s["bytes"]
        );
    }

    println!("4. new session with the bundled replay model");
    let s = peer.call("session/new", json!({"workspaceId": wid, "model": format!("replay:{}", cassette.display()), "policy": "ask"}), |_| {})?;
    let sid = s["sessionId"].as_str().unwrap_or("").to_string();
    println!("   session {sid}");

    let prompts = [
        "Which public functions does the crate have?",
        "What is this package called? Look at Cargo.toml.",
        "Where is the main function?",
        "Which modules does the library declare?",
    ];
    for (i, p) in prompts.iter().enumerate() {
        println!("{}. turn: {p}", 5 + i);
        let t = Instant::now();
        let r = peer.call(
            "turn/run",
            json!({"sessionId": sid, "input": [{"type": "text", "text": p}]}),
            print_event,
        )?;
        println!(
            "   -> {} in {}",
            r["stopReason"].as_str().unwrap_or(""),
            ms(t)
        );
    }

    let step = 5 + prompts.len();
    println!("{step}. force a compaction (session/compact)");
    let t = Instant::now();
    match peer.call(
        "session/compact",
        json!({"sessionId": sid, "focus": "the package layout"}),
        print_event,
    ) {
        Ok(r) => println!(
            "   {} in {}: {} -> {} tokens",
            r["kind"].as_str().unwrap_or("compacted"),
            ms(t),
            r["tokensBefore"],
            r["tokensAfter"]
        ),
        Err(e) => println!("   not available: {e}"),
    }
    match peer.call("context/inspect", json!({"sessionId": sid}), |_| {}) {
        Ok(r) => println!("   context now: {r}"),
        Err(e) => println!("   context/inspect not available: {e}"),
    }
    let msgs = peer.call("session/messages", json!({"sessionId": sid}), |_| {})?;
    println!("   durable history keeps all {} messages", msgs["total"]);

    println!("{}. shutdown", step + 1);
    peer.call("shutdown", Value::Null, |_| {})?;
    peer.send(&json!({"jsonrpc": "2.0", "method": "exit"}))?;
    let status = peer.child.wait()?;
    println!(
        "   garuda serve exited with {status}; whole demo {}",
        ms(total)
    );
    let _ = std::fs::remove_dir_all(&state);
    Ok(if status.success() { 0 } else { 1 })
}

fn tempdir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("garuda-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
