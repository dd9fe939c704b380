//! A test client that spawns the real `garuda` binary and speaks either framing.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use serde_json::{Value, json};

/// How messages are framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// LSP `Content-Length` headers.
    Lsp,
    /// One JSON value per line.
    Ndjson,
}

/// Generous: CI machines are slow; tests never assert on time.
pub const WAIT: Duration = Duration::from_secs(20);

/// A running `garuda serve` and its pipes.
pub struct Garuda {
    pub child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    pub framing: Framing,
    next_id: i64,
    /// Messages received while waiting for something else.
    pub backlog: Vec<Value>,
    /// Config and state live here; pass it to `spawn_at` to restart on the same state.
    #[allow(dead_code)]
    pub home: PathBuf,
    _owned_home: Option<tempfile::TempDir>,
    pub stderr_path: PathBuf,
}

/// Isolated config and state directories for one server.
pub fn isolated_env(cmd: &mut Command, home: &Path) {
    cmd.env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("HOME", home)
        // Scripted mocks answer in order: a background memory update would take a reply
        // meant for the turn. The tests of the memory, the long-session sim (which answers
        // by what a request asks) and the benchmarks turn it on.
        .env("GARUDA_SESSION_MEMORY", "off")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("OPENAI_BASE_URL");
}

fn read_frames(stdout: impl Read + Send + 'static, tx: std::sync::mpsc::Sender<Value>) {
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        loop {
            let mut line = String::new();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            if let Some(len) = trimmed.strip_prefix("Content-Length:") {
                let len: usize = len.trim().parse().expect("content length");
                // Skip remaining headers up to the blank line.
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).unwrap_or(0) == 0 {
                        return;
                    }
                    if h.trim().is_empty() {
                        break;
                    }
                }
                let mut body = vec![0u8; len];
                if r.read_exact(&mut body).is_err() {
                    return;
                }
                let v: Value = serde_json::from_slice(&body).expect("server sent invalid JSON");
                if tx.send(v).is_err() {
                    return;
                }
            } else {
                let v: Value =
                    serde_json::from_str(trimmed).expect("server sent invalid JSON line");
                if tx.send(v).is_err() {
                    return;
                }
            }
        }
    });
}

impl Garuda {
    /// Spawns `garuda serve` with isolated directories and extra args/env.
    pub fn spawn_with(framing: Framing, args: &[&str], env: &[(&str, &str)]) -> Garuda {
        let home = tempfile::tempdir().expect("tempdir");
        let mut g = Self::spawn_at(framing, home.path(), args, env);
        g._owned_home = Some(home);
        g
    }

    /// Spawns `garuda serve` with config and state under `home` (kept by the caller).
    pub fn spawn_at(framing: Framing, home: &Path, args: &[&str], env: &[(&str, &str)]) -> Garuda {
        let stderr_path = home.join(format!(
            "stderr-{}.log",
            std::process::id() as u128 * 1000 + rand_suffix()
        ));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_garuda"));
        cmd.arg("serve").args(args);
        isolated_env(&mut cmd, home);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .expect("spawn garuda");
        let (tx, rx) = channel();
        read_frames(child.stdout.take().expect("stdout"), tx);
        let stdin = child.stdin.take();
        Garuda {
            child,
            stdin,
            rx,
            framing,
            next_id: 1,
            backlog: Vec::new(),
            home: home.to_path_buf(),
            _owned_home: None,
            stderr_path,
        }
    }

    /// Spawns `garuda serve` with isolated directories.
    pub fn spawn(framing: Framing) -> Garuda {
        Self::spawn_with(framing, &[], &[])
    }

    /// Spawns and initializes.
    pub fn started(framing: Framing) -> Garuda {
        let mut g = Self::spawn(framing);
        let r = g.request("initialize", json!({"processId": null, "capabilities": {}}));
        assert!(r.get("result").is_some(), "initialize failed: {r}");
        g.notify("initialized", json!({}));
        g
    }

    /// Writes raw bytes to the server's stdin.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write");
        stdin.flush().expect("flush");
    }

    /// Frames and sends one JSON value.
    pub fn send(&mut self, v: &Value) {
        let body = serde_json::to_vec(v).expect("json");
        let framed = frame(self.framing, &body);
        self.send_raw(&framed);
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and returns its id without waiting.
    pub fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and waits for its response (the whole response object).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(&json!(id))
    }

    /// The `result` of a request, panicking with the error otherwise.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let r = self.request(method, params);
        match r.get("result") {
            Some(v) => v.clone(),
            None => panic!("{method} failed: {r}\nstderr:\n{}", self.stderr()),
        }
    }

    /// The next message from the server.
    pub fn recv(&mut self) -> Value {
        self.recv_timeout(WAIT)
            .unwrap_or_else(|| panic!("no message from garuda\nstderr:\n{}", self.stderr()))
    }

    /// The next message, or `None` after `t`.
    pub fn recv_timeout(&mut self, t: Duration) -> Option<Value> {
        match self.rx.recv_timeout(t) {
            Ok(v) => Some(v),
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Sends a request and waits for its response, answering server-to-client requests
    /// (`permission/request`, `tool/call`, ...) with `serve` meanwhile; notifications are kept
    /// in the backlog in order.
    pub fn request_serving(
        &mut self,
        method: &str,
        params: Value,
        mut serve: impl FnMut(&Value) -> Value,
    ) -> Value {
        let id = json!(self.send_request(method, params));
        loop {
            let m = self.recv();
            if m.get("id") == Some(&id) && m.get("method").is_none() {
                return m;
            }
            if m.get("method").is_some() && m.get("id").is_some() {
                let result = serve(&m);
                let reply = json!({"jsonrpc": "2.0", "id": m["id"], "result": result});
                self.send(&reply);
            }
            self.backlog.push(m);
        }
    }

    /// The `turn/update` events received so far (from the backlog), in order.
    pub fn turn_events(&self) -> Vec<Value> {
        self.backlog
            .iter()
            .filter(|m| m["method"] == "turn/update")
            .map(|m| m["params"]["event"].clone())
            .collect()
    }

    /// Waits for the response with this id; other messages go to the backlog.
    pub fn response(&mut self, id: &Value) -> Value {
        if let Some(i) = self
            .backlog
            .iter()
            .position(|m| m.get("id") == Some(id) && m.get("method").is_none())
        {
            return self.backlog.remove(i);
        }
        loop {
            let m = self.recv();
            if m.get("id") == Some(id) && m.get("method").is_none() {
                return m;
            }
            self.backlog.push(m);
        }
    }

    /// Waits for a notification (or server request) with this method.
    pub fn wait_method(&mut self, method: &str) -> Value {
        if let Some(i) = self
            .backlog
            .iter()
            .position(|m| m.get("method").and_then(Value::as_str) == Some(method))
        {
            return self.backlog.remove(i);
        }
        loop {
            let m = self.recv();
            if m.get("method").and_then(Value::as_str) == Some(method) {
                return m;
            }
            self.backlog.push(m);
        }
    }

    /// Closes stdin (the client went away).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits for the process to exit and returns its code.
    pub fn wait_exit(&mut self) -> Option<i32> {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code();
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("garuda did not exit\nstderr:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// What the server logged.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Opens a workspace and returns its id.
    pub fn open(&mut self, root: &Path) -> String {
        let r = self.call("workspace/open", json!({"root": root}));
        r["workspaceId"].as_str().expect("workspaceId").to_string()
    }
}

impl Drop for Garuda {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rand_suffix() -> u128 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst) as u128
}

/// Frames a body for the wire.
pub fn frame(framing: Framing, body: &[u8]) -> Vec<u8> {
    match framing {
        Framing::Lsp => {
            let mut v = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
            v.extend_from_slice(body);
            v
        }
        Framing::Ndjson => {
            let mut v = body.to_vec();
            v.push(b'\n');
            v
        }
    }
}

/// Both framings, for tests that must pass in each.
pub const BOTH: [Framing; 2] = [Framing::Lsp, Framing::Ndjson];
