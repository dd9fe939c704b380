//! `garuda demo`: a scripted, offline tour of Garuda over the real protocol.
//!
//! It starts `garuda serve` as a child, opens a folder as a workspace, shows the instruction
//! and memory files found and the assembled prompt, runs turns with a replay model whose
//! answers are written from what the demo itself saw in the folder, answers one approval,
//! forces a compaction and shows its summary, and ends with what to try next.
//!
//! Every scripted answer that states a fact carries a replay `match` on the tool result it
//! relies on: if the tool saw something else, no answer fits, and the demo says so instead of
//! printing an answer that contradicts the result.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};

/// Lines of the assembled prompt shown.
const PROMPT_LINES: usize = 6;
/// Lines of the compaction summary shown.
const SUMMARY_LINES: usize = 8;
/// Lines `read_file` is asked for, so the demo's context stays small.
const READ_LIMIT: usize = 40;
/// Largest file the scripted model picks to read.
const MAX_FILE_BYTES: u64 = 512 * 1024;
/// Files the scripted model prefers to read, in order, before any other top-level file.
const PREFERRED: &[&str] = &[
    "README.md",
    "README",
    "README.txt",
    "Cargo.toml",
    "package.json",
    "pyproject.toml",
    "go.mod",
    "Makefile",
];

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

    /// Sends a request and waits for its answer; notifications go to `on_note` as they come.
    /// An approval request is answered "allow once", and said so, as an editor would after
    /// asking its user.
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
                        Some(e) => bail!(
                            "{}",
                            e["message"]
                                .as_str()
                                .map_or_else(|| e.to_string(), str::to_string)
                        ),
                        None => Ok(m.get("result").cloned().unwrap_or(Value::Null)),
                    };
                }
                (Some(i), Some(req)) if req == "permission/request" => {
                    println!(
                        "   approval    {} -> allow once (answered by the demo: an editor asks you, `garuda exec` asks on the terminal)",
                        m["params"]["title"].as_str().unwrap_or("")
                    );
                    let reply =
                        json!({"jsonrpc": "2.0", "id": i, "result": {"optionId": "allow_once"}});
                    self.send(&reply)?;
                }
                (Some(i), Some(_)) => {
                    let reply = json!({"jsonrpc": "2.0", "id": i, "error": {"code": -32601, "message": "the demo does not handle this request"}});
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

/// Prints a turn's events: the model's text once a step's text is complete (a step without
/// text prints nothing), tool calls and results, compaction progress.
#[derive(Default)]
struct Printer {
    text: String,
}

impl Printer {
    fn flush(&mut self) {
        let text = std::mem::take(&mut self.text);
        let mut lines = text.trim().lines();
        if let Some(first) = lines.next() {
            println!("   model       {first}");
            for l in lines {
                println!("               {l}");
            }
        }
    }

    fn on(&mut self, m: &Value) {
        if m["method"] != "turn/update" {
            return;
        }
        let e = &m["params"]["event"];
        match e["kind"].as_str().unwrap_or("") {
            "textDelta" => self.text.push_str(e["text"].as_str().unwrap_or("")),
            "stepStarted" | "finished" => self.flush(),
            "toolCallStarted" => {
                self.flush();
                println!(
                    "   tool call   {} {}",
                    e["name"].as_str().unwrap_or(""),
                    e["input"]
                );
            }
            "toolCallFinished" => {
                let out = e["output"].as_str().unwrap_or("");
                if e["isError"] == true {
                    println!("   tool result error: {}", out.lines().next().unwrap_or(""));
                } else {
                    let first = out.lines().next().unwrap_or("");
                    println!(
                        "   tool result {} lines, the first: {}",
                        out.lines().count(),
                        cut(first.trim(), 70)
                    );
                }
            }
            "compaction" => {
                self.flush();
                println!("   {}", compaction_line(e));
            }
            _ => {}
        }
    }
}

/// One line for a `compaction` event: its phase, trigger and sizes.
fn compaction_line(e: &Value) -> String {
    let phase = e["phase"].as_str().unwrap_or("");
    let trigger = e["trigger"].as_str().unwrap_or("");
    let message = e["message"].as_str().filter(|m| !m.is_empty());
    let before = e["tokensBefore"].as_u64();
    let after = e["tokensAfter"].as_u64();
    let mut line = format!("compaction  {phase} ({trigger})");
    match phase {
        "started" => {
            if let Some(b) = before {
                line.push_str(&format!(": ~{b} tokens in the context"));
            }
        }
        "stage1" => line.push_str(": older tool results trimmed"),
        "summary" => {
            line.push_str(": the model is asked for a summary");
            if let Some(m) = message {
                line.push_str(&format!(" ({m})"));
            }
        }
        "finished" => {
            if let Some(m) = message {
                line.push_str(&format!(": {m}"));
            }
            if let (Some(b), Some(a)) = (before, after) {
                line.push_str(&format!(", {b} -> {a} tokens"));
            }
        }
        _ => {
            if let Some(m) = message {
                line.push_str(&format!(": {m}"));
            }
        }
    }
    line
}

/// `n thing` or `n things`.
fn plural(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// `s` cut to `n` characters, with an ellipsis when cut.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// What the demo saw in the folder before the turns, so the scripted answers agree with what
/// the tools will find.
struct Scout {
    /// The top level as `list_files` with depth 1 shows it (ignore files honoured, `.git`
    /// left out, folders with `/`, links with `@`), sorted.
    top: Vec<String>,
    /// A small text file at the top level to read, search and count.
    file: Option<FileFacts>,
}

struct FileFacts {
    /// Its name (shell-safe: letters, digits, `.`, `_`, `-`).
    name: String,
    /// Its first non-empty line, trimmed.
    first_line: String,
    /// Newlines in it, as `wc -l` counts.
    newlines: usize,
    /// A word of it, the 1-based line it first appears on.
    word: Option<(String, usize)>,
    /// Characters of the lines `read_file` shows, and of the lines `grep` finds.
    read_chars: usize,
    grep_chars: usize,
}

impl Scout {
    fn of(root: &Path) -> Scout {
        let mut top = Vec::new();
        let mut walk = ignore::WalkBuilder::new(root);
        walk.follow_links(false)
            .hidden(false)
            .require_git(false)
            .max_depth(Some(1))
            .filter_entry(|e| e.file_name() != ".git");
        for entry in walk.build().flatten() {
            if entry.depth() != 1 {
                continue;
            }
            let mut name = entry.file_name().to_string_lossy().into_owned();
            match entry.file_type() {
                Some(t) if t.is_dir() => name.push('/'),
                Some(t) if t.is_symlink() => name.push('@'),
                _ => {}
            }
            top.push(name);
        }
        top.sort();
        let mut candidates: Vec<&str> = PREFERRED
            .iter()
            .copied()
            .filter(|p| top.iter().any(|t| t == p))
            .collect();
        candidates.extend(
            top.iter()
                .map(String::as_str)
                .filter(|t| !PREFERRED.contains(t)),
        );
        let file = candidates
            .into_iter()
            .find_map(|name| FileFacts::of(root, name));
        Scout { top, file }
    }
}

impl FileFacts {
    fn of(root: &Path, name: &str) -> Option<FileFacts> {
        let safe = !name.starts_with(['-', '.'])
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !safe {
            return None;
        }
        let path = root.join(name);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() || meta.len() == 0 || meta.len() > MAX_FILE_BYTES {
            return None;
        }
        let text = String::from_utf8(std::fs::read(&path).ok()?).ok()?;
        if text.contains('\0') {
            return None;
        }
        let shown: Vec<&str> = text.split('\n').take(READ_LIMIT).collect();
        let first_line = shown
            .iter()
            .map(|l| l.trim())
            .find(|l| !l.is_empty())?
            .to_string();
        // The longest plain word of the lines read: a regex that matches itself.
        let word = shown
            .iter()
            .flat_map(|l| l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
            .filter(|w| w.len() >= 4 && w.len() <= 40)
            .max_by_key(|w| w.len())
            .and_then(|w| {
                let line = text.split('\n').position(|l| l.contains(w))? + 1;
                Some((w.to_string(), line))
            });
        // Line numbers and the path take about 8 characters a line.
        let read_chars = shown.iter().map(|l| l.len() + 8).sum();
        let grep_chars = word.as_ref().map_or(0, |(w, _)| {
            text.split('\n')
                .filter(|l| l.contains(w.as_str()))
                .map(|l| l.len() + name.len() + 8)
                .sum()
        });
        Some(FileFacts {
            name: name.to_string(),
            first_line,
            newlines: text.bytes().filter(|b| *b == b'\n').count(),
            word,
            read_chars,
            grep_chars,
        })
    }
}

/// One scripted turn: the user's prompt and the tool the model calls for it.
struct Turn {
    prompt: String,
}

/// The cassette for a folder: per turn, a tool call (matched on the prompt) and an answer
/// (matched on what the tool must have returned for the answer to be true), then the summary.
///
/// `fixed_tokens` is the session's system prompt and tools; each response reports as input
/// that plus about a quarter of the conversation's characters, as a provider would count.
fn script(scout: &Scout, fixed_tokens: u64) -> (Vec<Turn>, String) {
    let mut turns = Vec::new();
    let mut lines: Vec<Value> = Vec::new();
    let mut done: Vec<String> = Vec::new();
    let mut chars = 0usize;
    let usage = |chars: usize, out: usize| json!({"inputTokens": fixed_tokens + chars.div_ceil(4) as u64, "outputTokens": out.div_ceil(4).max(1)});
    let mut step = |prompt: String,
                    say: &str,
                    tool: &str,
                    input: Value,
                    result_chars: usize,
                    answer: String,
                    expect: String| {
        let id = format!("toolu_demo_{}", turns.len() + 1);
        let mut content = Vec::new();
        if !say.is_empty() {
            content.push(json!({"type": "text", "text": say}));
        }
        content.push(json!({"type": "tool_use", "id": id, "name": tool, "input": input}));
        chars += prompt.len();
        let call_chars = say.len() + input.to_string().len() + tool.len();
        lines.push(json!({"response": {"content": content, "stopReason": "tool_use", "usage": usage(chars, call_chars)}, "match": prompt}));
        chars += call_chars + result_chars;
        lines.push(json!({"response": {"content": [{"type": "text", "text": answer}], "stopReason": "end_turn", "usage": usage(chars, answer.len())}, "match": expect}));
        chars += answer.len();
        turns.push(Turn { prompt });
    };

    // The answer names the first entries and matches on exactly them, so a listing that
    // differs (another ignore file, a new entry) gets no answer rather than a wrong one.
    let listing = match scout.top.as_slice() {
        [] => None,
        top => {
            let first = &top[..top.len().min(3)];
            let named: Vec<String> = first.iter().map(|t| format!("`{t}`")).collect();
            let names = if top.len() > first.len() {
                format!("{}, and more", named.join(", "))
            } else {
                named.join(", ")
            };
            Some((names, format!("{}\n", first.join("\n"))))
        }
    };
    let (answer, expect) = match &listing {
        Some((names, first)) => (
            format!("At the top level: {names} (the listing above has them all)."),
            first.clone(),
        ),
        None => (
            "The folder is empty (or everything in it is ignored), so there is nothing to read."
                .to_string(),
            "is empty".to_string(),
        ),
    };
    if let Some((names, _)) = &listing {
        done.push(format!("• listed the top level: {names}"));
    }
    step(
        "What is at the top of this folder?".into(),
        "Let me list it.",
        "list_files",
        json!({"depth": 1}),
        scout.top.iter().map(|t| t.len() + 1).sum(),
        answer,
        expect,
    );

    if let Some(f) = &scout.file {
        let first = cut(&f.first_line, 60);
        let first = first.trim_end_matches('…');
        step(
            format!("What does {} begin with?", f.name),
            "",
            "read_file",
            json!({"path": f.name, "limit": READ_LIMIT}),
            f.read_chars,
            format!("{} begins with “{}”.", f.name, cut(&f.first_line, 60)),
            first.to_string(),
        );
        done.push(format!(
            "• {} begins with “{}”",
            f.name,
            cut(&f.first_line, 60)
        ));
        if let Some((word, line)) = &f.word {
            step(
                format!("Where does {} mention {word}?", f.name),
                "Searching for it.",
                "grep",
                json!({"pattern": word, "path": f.name}),
                f.grep_chars,
                format!("{} mentions {word} first on line {line}.", f.name),
                format!("{}:{line}:", f.name),
            );
            done.push(format!("• {word} is first on line {line} of {}", f.name));
        }
        step(
            format!("How many lines does {} have? Count them with wc.", f.name),
            "I'll count them with wc (a command: it needs your approval).",
            "bash",
            json!({"command": format!("wc -l -- {}", f.name)}),
            f.name.len() + 24,
            format!(
                "{} has {} (wc -l counts newlines).",
                f.name,
                plural(f.newlines, "line")
            ),
            format!("{} {}", f.newlines, f.name),
        );
        done.push(format!(
            "• wc -l -- {} (allowed once): {}",
            f.name,
            plural(f.newlines, "line")
        ));
    }

    let directives: Vec<String> = turns
        .iter()
        .map(|t| format!("• \"{}\"", t.prompt))
        .collect();
    let summary = format!(
        "<analysis>The user asked about the folder; each answer came from a tool result.</analysis>\n<summary>\nCompleted Tasks\n\nLook around the folder\n{}\n\nActive Task\n\nNone\n\nKey Decisions\n\n• none yet\n\nUser Directives\n\n{}\n\nCurrent Work\n\nAnswering questions about the folder's files.\n</summary>",
        if done.is_empty() {
            "• nothing found to read".to_string()
        } else {
            done.join("\n")
        },
        directives.join("\n")
    );
    // The summary request adds its instructions, about 2 500 characters.
    let summary_usage = usage(chars + 2_500, summary.len());
    lines.push(json!({"response": {"content": [{"type": "text", "text": summary}], "stopReason": "end_turn", "usage": summary_usage}, "match": "about to be compacted"}));
    let cassette = lines.iter().map(|l| format!("{l}\n")).collect();
    (turns, cassette)
}

/// Runs the demo on `dir`; returns the process exit code.
pub fn run(dir: &Path) -> anyhow::Result<u8> {
    let root =
        std::fs::canonicalize(dir).with_context(|| format!("{} is not a folder", dir.display()))?;
    if !root.is_dir() {
        bail!("{} is not a folder", dir.display());
    }
    let state = tempdir()?;
    let result = tour(&root, &state);
    let _ = std::fs::remove_dir_all(&state);
    result
}

fn tour(root: &Path, state: &Path) -> anyhow::Result<u8> {
    let scout = Scout::of(root);
    // Keep one step in full and bring back only small files after a compaction, so that a
    // session this short has something to compact.
    let config = state.join("config").join("garuda");
    std::fs::create_dir_all(&config)?;
    std::fs::write(
        config.join("config.toml"),
        "[context]\nkeep_steps = 1\nrestore_file_tokens = 300\n",
    )?;
    let total = Instant::now();

    println!("Garuda demo: an offline tour of {}", root.display());
    println!(
        "A scripted model (a replay cassette the demo wrote from what it saw in this folder) stands in"
    );
    println!(
        "for a live one: no network, no key. Nothing in the folder is changed; sessions go to a"
    );
    println!("temporary folder that is removed at the end.");
    println!();

    println!("1. Start `garuda serve` and initialize, as an editor does (JSON-RPC on stdio)");
    let t = Instant::now();
    let mut peer = Peer::start(state)?;
    let init = peer.call("initialize", json!({"processId": std::process::id(), "clientInfo": {"name": "garuda-demo"}, "capabilities": {}}), |_| {})?;
    println!(
        "   {} {} ready in {}",
        init["serverInfo"]["name"].as_str().unwrap_or(""),
        init["serverInfo"]["version"].as_str().unwrap_or(""),
        ms(t)
    );
    peer.send(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}))?;

    println!("2. Open the folder as a workspace");
    let t = Instant::now();
    let ws = peer.call("workspace/open", json!({"root": root}), |_| {})?;
    let wid = ws["workspaceId"].as_str().unwrap_or("").to_string();
    println!("   {wid} in {}", ms(t));
    for w in ws["warnings"].as_array().into_iter().flatten() {
        println!("   warning: {}", w.as_str().unwrap_or(""));
    }

    let t = Instant::now();
    let a = peer.call("prompt/assemble", json!({"workspaceId": wid}), |_| {})?;
    let cold = ms(t);
    let t = Instant::now();
    peer.call("prompt/assemble", json!({"workspaceId": wid}), |_| {})?;
    let warm = ms(t);
    let sections: Vec<Value> = a["sections"].as_array().cloned().unwrap_or_default();
    let files: Vec<&str> = ws["contextFiles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    println!("3. Instruction and memory files Garuda found (read only inside the root, watched):");
    if files.is_empty() {
        println!(
            "   none here. Garuda reads AGENTS.md, CLAUDE.md, GARUDA.md and .garuda/memory.md into the"
        );
        println!("   prompt, within budgets, and tells a running session when they change.");
    }
    for f in &files {
        let section = sections.iter().find(|s| {
            s["source"].as_str() == Some(f)
                && s["kind"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("instructions:") || k == "memory")
        });
        match section {
            Some(s) => println!(
                "   {f:<20} {:>7} bytes in the prompt (~{} tokens), {}",
                s["bytes"].as_u64().unwrap_or(0),
                s["tokens"].as_u64().unwrap_or(0),
                status(s)
            ),
            None => println!("   {f}"),
        }
    }

    let system = a["system"].as_str().unwrap_or("");
    let sha = a["sha256"].as_str().unwrap_or("");
    println!(
        "4. The assembled system prompt: {} bytes, sha256 {}… (cold {cold}, warm {warm}: cached",
        system.len(),
        &sha[..12.min(sha.len())]
    );
    println!(
        "   until a watched file changes, and byte-identical between compactions so the provider's"
    );
    println!("   prompt cache keeps hitting). Its parts:");
    for s in &sections {
        println!(
            "     {:<28} {:>7} bytes  {}{}",
            s["kind"].as_str().unwrap_or(""),
            s["bytes"].as_u64().unwrap_or(0),
            s["source"]
                .as_str()
                .map(|src| format!("from {src}, "))
                .unwrap_or_default(),
            status(s)
        );
    }
    println!("   Its first lines:");
    for l in system.lines().take(PROMPT_LINES) {
        println!("{}", format!("   │ {}", cut(l, 96)).trim_end());
    }
    println!("   The whole prompt: `garuda prompt {}`", root.display());

    // The scripted usage needs the size of the system prompt and tools: a session with an
    // empty cassette reports it, and is deleted.
    let probe = state.join("probe.jsonl");
    std::fs::write(&probe, "")?;
    let p = peer.call(
        "session/new",
        json!({"workspaceId": wid, "model": format!("replay:{}", probe.display())}),
        |_| {},
    )?;
    let probe_id = p["sessionId"].as_str().unwrap_or("");
    let fixed = peer
        .call("context/inspect", json!({"sessionId": probe_id}), |_| {})
        .map_or(0, |r| {
            ["system", "tools", "instructions", "memory"]
                .iter()
                .filter_map(|k| r[k].as_u64())
                .sum()
        });
    peer.call("session/delete", json!({"sessionId": probe_id}), |_| {})?;
    let (turns, cassette_text) = script(&scout, fixed);
    let cassette = state.join("demo-cassette.jsonl");
    std::fs::write(&cassette, cassette_text)?;

    println!("5. A new session with the scripted model, approval policy \"ask\"");
    let s = peer.call("session/new", json!({"workspaceId": wid, "model": format!("replay:{}", cassette.display()), "policy": "ask"}), |_| {})?;
    let sid = s["sessionId"].as_str().unwrap_or("").to_string();
    println!("   session {sid}");
    if scout.file.is_none() {
        println!(
            "   This folder has no small text file at its top level, so the scripted model only lists it"
        );
        println!("   (a live model would look deeper); there is no approval to show.");
    }

    let mut n = 6;
    let mut complete = true;
    for (i, turn) in turns.iter().enumerate() {
        println!(
            "{n}. Turn {} of {}: \"{}\"",
            i + 1,
            turns.len(),
            turn.prompt
        );
        n += 1;
        let t = Instant::now();
        let mut printer = Printer::default();
        let r = peer.call(
            "turn/run",
            json!({"sessionId": sid, "input": [{"type": "text", "text": turn.prompt}]}),
            |m| printer.on(m),
        );
        printer.flush();
        match r {
            Ok(r) => println!(
                "   -> {} in {}",
                r["stopReason"].as_str().unwrap_or(""),
                ms(t)
            ),
            Err(e) => {
                println!("   -> the scripted model has no answer for this: {e}");
                println!(
                    "   Its answers were written from what the demo saw before the turns, and the tool saw"
                );
                println!(
                    "   something else, so it stops here rather than contradict the tool. A live model would"
                );
                println!(
                    "   carry on. The remaining turns, and the compaction whose summary was scripted for"
                );
                println!("   them, are skipped.");
                complete = false;
                break;
            }
        }
    }

    if complete {
        n = compact(&mut peer, &sid, n)?;
    }
    println!("{n}. Shut down");
    peer.call("shutdown", Value::Null, |_| {})?;
    peer.send(&json!({"jsonrpc": "2.0", "method": "exit"}))?;
    let status = peer.child.wait()?;
    println!(
        "   garuda serve exited with code {}; the whole demo took {}",
        status
            .code()
            .map_or_else(|| "none".to_string(), |c| c.to_string()),
        ms(total)
    );

    println!();
    println!("Next steps (from a checkout, `cargo run --` stands for `garuda`):");
    let next = [
        (
            format!("garuda prompt {}", root.display()),
            "the whole system prompt, and where each part came from",
        ),
        (
            "garuda exec --model SPEC \"...\"".to_string(),
            "one turn headless, for scripts and CI (--json, exit codes)",
        ),
        (
            "editors/README.md".to_string(),
            "Neovim, Emacs, VS Code, Python, and ACP editors (garuda acp)",
        ),
    ];
    let width = next
        .iter()
        .map(|(c, _)| c.chars().count())
        .max()
        .unwrap_or(0);
    for (command, what) in &next {
        println!("  {command:<width$}  {what}");
    }
    println!(
        "  A live model: `model = \"anthropic/claude-sonnet-4-5\"` (or \"ollama/qwen3-coder\") in"
    );
    println!("  ~/.config/garuda/config.toml, with ANTHROPIC_API_KEY set for Anthropic.");
    Ok(if status.success() { 0 } else { 1 })
}

/// Step `n`: a manual compaction, its summary's first lines and the context after it; returns
/// the next step's number.
fn compact(peer: &mut Peer, sid: &str, mut n: usize) -> anyhow::Result<usize> {
    println!("{n}. Compact the session (session/compact; `/compact` in an editor)");
    n += 1;
    let t = Instant::now();
    let mut printer = Printer::default();
    match peer.call(
        "session/compact",
        json!({"sessionId": sid, "focus": "the folder's files"}),
        |m| printer.on(m),
    ) {
        Ok(r) if r["compacted"] == false => {
            println!(
                "   nothing compacted: {}",
                r["message"].as_str().unwrap_or("")
            );
            println!(
                "   (a session this short is mostly what a compaction keeps: the last step, the files"
            );
            println!("   read, the user's words; in a long one the summary replaces far more)");
        }
        Ok(r) => println!(
            "   {} in {}: {} -> {} tokens",
            r["kind"].as_str().unwrap_or("compacted"),
            ms(t),
            r["tokensBefore"],
            r["tokensAfter"]
        ),
        Err(e) => println!("   not compacted: {e}"),
    }
    let msgs = peer.call(
        "session/messages",
        json!({"sessionId": sid, "limit": 10000}),
        |_| {},
    )?;
    let summary = msgs["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["meta"] == "summary")
        .and_then(|m| m["content"].as_array()?.last()?["text"].as_str());
    if let Some(text) = summary {
        let body = text
            .split_once("<summary>")
            .map_or(text, |(_, b)| b)
            .split("</summary>")
            .next()
            .unwrap_or("");
        println!("   The summary the model now sees in place of the older steps begins:");
        for l in body
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .take(SUMMARY_LINES)
        {
            println!("   │ {}", cut(l, 96));
        }
        println!(
            "   Beside it, Garuda carries the user's own words verbatim, not left to the summary."
        );
    }
    if let Ok(r) = peer.call("context/inspect", json!({"sessionId": sid}), |_| {}) {
        println!(
            "   The context is now ~{} tokens of a {}-token window; the durable history keeps all {} messages.",
            r["contextTokens"], r["window"], msgs["total"]
        );
    }

    Ok(n)
}

/// How a prompt section fared: included, cut (and how much), or skipped and why.
fn status(s: &Value) -> String {
    if let Some(why) = s["skipped"].as_str() {
        format!("skipped: {why}")
    } else if s["cut"] == true {
        format!("cut ({} characters left out)", s["missingChars"])
    } else {
        "included".into()
    }
}

fn tempdir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("garuda-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(cassette: &str) -> Vec<Value> {
        cassette
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn every_scripted_answer_is_matched_on_what_makes_it_true() {
        let scout = Scout {
            top: vec!["README.md".into(), "src/".into()],
            file: Some(FileFacts {
                name: "README.md".into(),
                first_line: "# Widget".into(),
                newlines: 12,
                word: Some(("Widget".into(), 1)),
                read_chars: 200,
                grep_chars: 30,
            }),
        };
        let (turns, cassette) = script(&scout, 1000);
        let lines = lines(&cassette);
        assert_eq!(turns.len(), 4);
        assert_eq!(lines.len(), 9);
        // A line without `match` would fit any request: none may have one.
        assert!(lines.iter().all(|l| l["match"].is_string()), "{cassette}");
        let answer = |i: usize| {
            (
                lines[i]["response"]["content"][0]["text"].as_str().unwrap(),
                lines[i]["match"].as_str().unwrap(),
            )
        };
        assert_eq!(
            answer(1),
            (
                "At the top level: `README.md`, `src/` (the listing above has them all).",
                "README.md\nsrc/\n"
            )
        );
        assert_eq!(answer(3), ("README.md begins with “# Widget”.", "# Widget"));
        assert_eq!(
            answer(5),
            ("README.md mentions Widget first on line 1.", "README.md:1:")
        );
        assert_eq!(
            answer(7),
            (
                "README.md has 12 lines (wc -l counts newlines).",
                "12 README.md"
            )
        );
        assert_eq!(lines[2]["match"], "What does README.md begin with?");
        // The reported input grows with the conversation, from the fixed part up.
        let inputs: Vec<u64> = lines
            .iter()
            .map(|l| l["response"]["usage"]["inputTokens"].as_u64().unwrap())
            .collect();
        assert!(
            inputs[0] > 1000 && inputs.windows(2).all(|w| w[0] < w[1]),
            "{inputs:?}"
        );
    }

    #[test]
    fn an_empty_folder_gets_one_turn() {
        let (turns, cassette) = script(
            &Scout {
                top: Vec::new(),
                file: None,
            },
            1000,
        );
        assert_eq!(turns.len(), 1);
        let lines = lines(&cassette);
        assert_eq!(lines[1]["match"], "is empty");
        assert!(lines.iter().all(|l| l["match"].is_string()));
    }
}
