//! Round trips over stdio from a client process to a real `garuda serve`: a warm
//! `prompt/assemble` for a workspace with three 13 000-character instruction files, a small
//! `workspace/list`, and `cat` as the floor this machine's pipes and scheduler allow.
//!
//! Run with `cargo bench --bench stdio`.
// Test and benchmark code: a panic is a failure with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use criterion::{Criterion, criterion_group, criterion_main};

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Peer {
    fn spawn(cmd: &mut Command) -> Peer {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Peer {
            child,
            stdin,
            stdout,
            line: String::new(),
        }
    }

    /// Writes one line and reads one line back.
    fn round_trip(&mut self, msg: &[u8]) -> usize {
        self.stdin.write_all(msg).expect("write");
        self.stdin.flush().expect("flush");
        self.line.clear();
        self.stdout.read_line(&mut self.line).expect("read")
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bench(c: &mut Criterion) {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    for name in ["AGENTS.md", "CLAUDE.md", "GARUDA.md"] {
        std::fs::write(
            ws.path().join(name),
            format!("- {name}: keep it small.\n").repeat(600),
        )
        .expect("write");
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_garuda"));
    cmd.arg("serve")
        .env("XDG_CONFIG_HOME", home.path())
        .env("XDG_STATE_HOME", home.path())
        .env("HOME", home.path());
    let mut g = Peer::spawn(&mut cmd);
    g.round_trip(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{}}\n");
    let open = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"workspace/open\",\"params\":{{\"root\":{:?}}}}}\n",
        ws.path().display().to_string()
    );
    g.round_trip(open.as_bytes());
    let wid =
        serde_json::from_str::<serde_json::Value>(&g.line).expect("json")["result"]["workspaceId"]
            .as_str()
            .expect("id")
            .to_string();
    let assemble = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"prompt/assemble\",\"params\":{{\"workspaceId\":\"{wid}\"}}}}\n"
    );
    let list = b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"workspace/list\"}\n";
    g.round_trip(assemble.as_bytes());

    let mut group = c.benchmark_group("stdio round trip");
    group.bench_function("prompt/assemble warm", |b| {
        b.iter(|| g.round_trip(assemble.as_bytes()))
    });
    group.bench_function("workspace/list", |b| b.iter(|| g.round_trip(list)));
    let mut cat = Peer::spawn(&mut Command::new("cat"));
    group.bench_function("cat (floor)", |b| b.iter(|| cat.round_trip(list)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
