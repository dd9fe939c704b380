//! A stateful simulated Anthropic Messages provider for long-session tests and benchmarks.
//!
//! Independent of the crate's own code on purpose: it reads the wire (the JSON request body)
//! and answers on the wire (SSE, or an HTTP error with the real Anthropic error body).
//!
//! - **Tokens**: its own rule, deliberately not Garuda's 4 characters per token: the bytes of
//!   the JSON text of tools, system and messages (each block serialized without its
//!   `cache_control`, plus a fixed 30 bytes per message for its envelope) divided by 3.5,
//!   rounded up.
//! - **Window**: a request over it is answered HTTP 400 with
//!   `prompt is too long: N tokens > M maximum`, as the real API does.
//! - **Prompt cache**: every `cache_control` breakpoint (on a tool, a system block or a message
//!   block) stores the prefix up to and including that block (order tools → system →
//!   messages, block granularity, compared by bytes through a chained SHA-256). A request
//!   reads the longest stored entry that is a prefix of it; it writes from there to its last
//!   breakpoint; the rest is uncached. With `SimConfig::cache_ttl_ms` an entry expires that
//!   long after it was last written or read (Anthropic refreshes an entry's lifetime on every
//!   hit), in real time; an expired entry is not read, so the request writes it again. Without
//!   it, no expiry. No minimum cacheable length, no 20-block lookback limit: both in Garuda's
//!   favour.
//! - **Model**: a scripted, seeded model that decides from the request. A main request: it finds
//!   the current user turn (the last user text starting with `[TURN-`), counts the tool-result
//!   messages after it to know its step, and follows the turn's seeded plan (3 to 7 requests,
//!   5 on average): read_file of workspace files (sometimes again), grep, list_files, edit_file
//!   of a file it read earlier in the turn whose content it can see (changing its `FILEMARK`
//!   version line), write_file now and then, and a short text to end the turn. When the user's
//!   message is no longer in the request (compacted away mid-turn) it falls back to its memory
//!   of the turn. A summary request (the last user message holds Garuda's summary
//!   instruction) gets a *lossy* summary in the `<summary>` format that quotes none of the
//!   user's words. A memory request (the last user message holds Garuda's session-memory
//!   instruction, sent after a turn's answer) gets the same summary text.
//! - **Records**: every request with its classification, token count, window verdict, cache
//!   read/write/uncached, what it found in the request, and the answer.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::mock_model::{AnthropicSse, MockUsage, json_pieces};

/// How Garuda's summary instruction starts (`src/session/compact/summary_prompt.rs`).
pub const SUMMARY_INSTRUCTION_START: &str =
    "<garuda_note>The conversation above is about to be compacted";
/// How Garuda's collapse request (a side request, like the summary) begins its instruction.
pub const COLLAPSE_INSTRUCTION_START: &str =
    "Summarize the conversation above in a few short paragraphs";
/// How Garuda's session-memory update request (a side request after a turn) begins its
/// instruction.
pub const MEMORY_INSTRUCTION_START: &str = "<garuda_note>Update the session memory";
/// Every user message of the harness starts with this and the turn number.
pub const TURN_TAG: &str = "[TURN-";
/// The version line every workspace file carries: `FILEMARK <path> v<N>`.
pub const FILEMARK: &str = "FILEMARK ";
/// Envelope bytes counted per message (`{"role":"user","content":[]}` and separators).
const MESSAGE_OVERHEAD_BYTES: u64 = 30;

/// The sim's token count of `bytes` bytes of JSON: bytes / 3.5, rounded up.
pub fn tokens_of_bytes(bytes: u64) -> u64 {
    (bytes * 2).div_ceil(7)
}

/// What the simulated provider and model do.
#[derive(Debug, Clone, Default)]
pub struct SimConfig {
    /// The provider's real window, enforced.
    pub window: u64,
    /// Seed of the scripted model.
    pub seed: u64,
    /// Ordinary workspace files the model knows about (relative paths).
    pub files: Vec<String>,
    /// Large files; with `large_every_turn` the first step of every turn reads one.
    pub large_files: Vec<String>,
    /// Read one large file in every turn.
    pub large_every_turn: bool,
    /// Patterns the model greps for.
    pub grep_patterns: Vec<String>,
    /// Answer prompt-too-long to the first mid-turn main request once at least this many main
    /// requests arrived, although it fits.
    pub force_ptl_after_main: Option<usize>,
    /// More forced prompt-too-long answers: one for each of these counts of main requests,
    /// each on the first mid-turn main request once that many arrived.
    pub more_ptl_after_main: Vec<usize>,
    /// Every this many turns (0: never) the model's second step replaces the todo list with
    /// items tagged `TODO-STATE-NN` (NN: the turn).
    pub todo_every: u32,
    /// Summaries quote what the summarizer was shown: the `DECISION-NN` tags and the paths of
    /// edits (`EDITED-PATH[...]`), and nothing else of the user's. Off: the lossy summary.
    pub quoting_summary: bool,
    /// Whose tools the requests carry and the model calls.
    pub dialect: Dialect,
    /// The prompt cache's lifetime: an entry not written or read for this long is gone.
    /// None: entries never expire.
    pub cache_ttl_ms: Option<u64>,
    /// Summary, collapse and memory requests are answered this much later (a summary takes
    /// the model time), so a reader of arrival times can tell a request the agent waited for
    /// from one it sent beside its turn.
    pub side_delay_ms: u64,
}

/// The agent on the other end: its tool names and inputs, and how it asks for a summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Dialect {
    /// Garuda: read_file, grep, list_files, edit_file, write_file, todo_write; paths relative.
    #[default]
    Garuda,
    /// Claude Code: Read, Edit, Write with absolute `file_path`s under `root`, searches and
    /// listings through Bash; its compaction asks for "a detailed summary".
    ClaudeCode {
        /// The workspace's absolute path.
        root: String,
    },
}

/// How Claude Code's compaction request begins its instruction.
pub const CLAUDE_SUMMARY_START: &str =
    "Your task is to create a detailed summary of the conversation";

impl Dialect {
    /// A call of the agent's tools in the sim's own terms: (read_file | grep | list_files |
    /// edit_file | write_file | todo_write | other, input with a relative `path`).
    fn canonical(&self, name: &str, input: &Value) -> (String, Value) {
        let Dialect::ClaudeCode { root } = self else {
            return (name.to_string(), input.clone());
        };
        let rel = |v: &Value| {
            let p = v["file_path"].as_str().unwrap_or("");
            p.strip_prefix(root.as_str())
                .map(|r| r.trim_start_matches('/'))
                .unwrap_or(p)
                .to_string()
        };
        let mut out = input.clone();
        let canon = match name {
            "Read" => "read_file",
            "Edit" => "edit_file",
            "Write" => "write_file",
            "TodoWrite" => "todo_write",
            other => return (other.to_string(), input.clone()),
        };
        out["path"] = json!(rel(input));
        (canon.to_string(), out)
    }

    /// The sim's call in the agent's tools.
    fn call(&self, name: &str, input: Value) -> (String, Value) {
        let Dialect::ClaudeCode { root } = self else {
            return (name.to_string(), input);
        };
        let abs = |v: &Value| format!("{root}/{}", v["path"].as_str().unwrap_or(""));
        match name {
            "read_file" => ("Read".into(), json!({"file_path": abs(&input)})),
            "write_file" => (
                "Write".into(),
                json!({"file_path": abs(&input), "content": input["content"]}),
            ),
            "edit_file" => (
                "Edit".into(),
                json!({"file_path": abs(&input), "old_string": input["old_string"],
                       "new_string": input["new_string"]}),
            ),
            "grep" => (
                "Bash".into(),
                json!({"command": format!("grep -rnE '{}' {}", input["pattern"].as_str().unwrap_or(""),
                                          input["path"].as_str().unwrap_or(".")),
                       "description": "Search the code"}),
            ),
            "list_files" => (
                "Bash".into(),
                json!({"command": format!("ls {}", input["path"].as_str().unwrap_or(".")),
                       "description": "List the files"}),
            ),
            "todo_write" => ("TodoWrite".into(), input),
            other => (other.to_string(), input),
        }
    }
}

/// Main request, or which side request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A step of a turn.
    Main,
    /// A compaction summary call (Garuda's or the peer's).
    Summary,
    /// Garuda's collapse summary call (a lighter relief, not a compaction).
    Collapse,
    /// Garuda's session-memory update, sent after a turn's answer (nobody waits for it).
    Memory,
}

/// How the sim answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// 200 with an SSE answer.
    Answered,
    /// 400 prompt too long; `forced` when the request actually fit.
    PromptTooLong {
        /// The sim said so although the request fit its window.
        forced: bool,
    },
    /// 400 invalid_request_error: the request broke a wire rule (message says which).
    Invalid(String),
}

/// A tool call the scripted model issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCall {
    /// tool_use id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// The `path` input, if any.
    pub path: Option<String>,
    /// The file's whole content was in the request that led to this call.
    pub content_visible: bool,
    /// For edits: the version the model believed the file had.
    pub believed_version: Option<u32>,
}

/// One request as the sim saw and answered it.
#[derive(Debug, Clone)]
pub struct SimRecord {
    /// 0-based arrival order.
    pub index: usize,
    /// Main, or which side request.
    pub kind: Kind,
    /// The user turn the model placed the request in (main requests).
    pub turn: Option<u32>,
    /// Requests already answered in that turn (0: the turn's first request).
    pub step: usize,
    /// True when the turn and step came from the request (the user's message was in it);
    /// false when the model had to fall back to its memory.
    pub position_from_request: bool,
    /// Messages in the request.
    pub messages: usize,
    /// The sim's token count of the whole request.
    pub tokens: u64,
    /// Over the sim's window.
    pub over_window: bool,
    /// The answer's kind.
    pub verdict: Verdict,
    /// Input tokens read from the cache (answered requests).
    pub cache_read: u64,
    /// Input tokens written to the cache.
    pub cache_write: u64,
    /// Input tokens neither read nor written.
    pub uncached: u64,
    /// Output tokens of the answer.
    pub output: u64,
    /// `cache_control` markers in the request.
    pub breakpoints: usize,
    /// One line on the answer.
    pub response: String,
    /// Tool calls issued.
    pub calls: Vec<IssuedCall>,
    /// `DIRECTIVE-NN` numbers present anywhere in the request.
    pub directives: BTreeSet<u32>,
    /// `FIRST-REQUEST-MARKER` present.
    pub first_marker: bool,
    /// Whole-content sends of a file in the request: (`FILEMARK path vN`, source key). A
    /// source is an untrimmed read_file result or a restored file.
    pub full_sends: Vec<(String, String)>,
    /// The request body.
    pub body: Arc<Vec<u8>>,
    /// When the request arrived.
    pub arrived: std::time::Instant,
}

impl SimRecord {
    /// Input tokens the provider billed (read + written + uncached).
    pub fn input(&self) -> u64 {
        self.cache_read + self.cache_write + self.uncached
    }
}

/// A running simulated provider.
pub struct Sim {
    /// The loopback server.
    pub server: MockServer,
    state: Arc<Mutex<State>>,
    _rt: tokio::runtime::Runtime,
}

impl Sim {
    /// Starts the server on 127.0.0.1 with its own runtime.
    pub fn start(cfg: SimConfig) -> Sim {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let state = Arc::new(Mutex::new(State::new(cfg)));
        let responder = Responder {
            state: state.clone(),
        };
        let server = rt.block_on(async {
            let server = MockServer::builder()
                .disable_request_recording()
                .start()
                .await;
            Mock::given(method("POST"))
                .and(path("/v1/messages"))
                .respond_with(responder)
                .mount(&server)
                .await;
            server
        });
        Sim {
            server,
            state,
            _rt: rt,
        }
    }

    /// Environment that points Garuda's Anthropic provider here.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("ANTHROPIC_BASE_URL".to_string(), self.server.uri()),
            (
                "ANTHROPIC_API_KEY".to_string(),
                "sk-sim-not-a-real-key".to_string(),
            ),
        ]
    }

    /// Requests received so far.
    pub fn count(&self) -> usize {
        self.lock().records.len()
    }

    /// Every request so far.
    pub fn records(&self) -> Vec<SimRecord> {
        self.lock().records.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Responder {
    state: Arc<Mutex<State>>,
}

impl Respond for Responder {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.handle(&req.body)
    }
}

// ---------------------------------------------------------------- deterministic randomness

/// SplitMix64: small, seeded, reproducible.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for this seed and these coordinates.
    pub fn at(seed: u64, coords: &[u64]) -> Rng {
        let mut r = Rng(seed ^ 0x9E37_79B9_7F4A_7C15);
        for c in coords {
            r.0 ^= c.wrapping_mul(0xD1B5_4A32_D192_ED03);
            r.next();
        }
        r
    }

    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Lines of plausible file text, for generated files.
pub fn filler_lines(rng: &mut Rng, n: usize, width: usize, tag: &str) -> String {
    const WORDS: &[&str] = &[
        "let", "value", "state", "config", "parse", "render", "buffer", "index", "result",
        "handle", "request", "window", "token", "cache", "update", "return", "match", "error",
    ];
    let mut out = String::new();
    for i in 0..n {
        let mut line = format!("    // {tag} {i:04}:");
        while line.len() < width {
            line.push(' ');
            line.push_str(WORDS[rng.below(WORDS.len())]);
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------- the request, as read

/// One cacheable unit of a request (a tool, a system block, a message block).
struct Unit {
    /// Chained hash of the prefix up to and including this unit.
    hash: [u8; 32],
    /// Bytes of the prefix up to and including this unit.
    cum_bytes: u64,
    /// A `cache_control` marker sits on this unit.
    breakpoint: bool,
}

fn strip_cache_control(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| k.as_str() != "cache_control")
                .map(|(k, v)| (k.clone(), strip_cache_control(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_cache_control).collect()),
        other => other.clone(),
    }
}

fn has_marker(v: &Value) -> bool {
    v.get("cache_control").is_some()
}

fn count_markers(v: &Value) -> usize {
    match v {
        Value::Object(o) => {
            usize::from(o.contains_key("cache_control"))
                + o.values().map(count_markers).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_markers).sum(),
        _ => 0,
    }
}

/// The request's cacheable units in cache order: tools, system, messages.
fn units(body: &Value) -> Vec<Unit> {
    let mut out = Vec::new();
    let mut hash = [0u8; 32];
    let mut cum = 0u64;
    let mut push = |key: String, bytes: u64, breakpoint: bool| {
        let mut h = Sha256::new();
        h.update(hash);
        h.update(key.as_bytes());
        hash = h.finalize().into();
        cum += bytes;
        out.push(Unit {
            hash,
            cum_bytes: cum,
            breakpoint,
        });
    };
    for t in body["tools"].as_array().into_iter().flatten() {
        let s = strip_cache_control(t).to_string();
        push(format!("tool:{s}"), s.len() as u64, has_marker(t));
    }
    match &body["system"] {
        Value::String(s) => {
            let s = json!(s).to_string();
            push(format!("system:{s}"), s.len() as u64, false);
        }
        Value::Array(blocks) => {
            for b in blocks {
                let s = strip_cache_control(b).to_string();
                push(format!("system:{s}"), s.len() as u64, has_marker(b));
            }
        }
        _ => {}
    }
    for (i, m) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let role = m["role"].as_str().unwrap_or("?");
        let blocks: Vec<Value> = match &m["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(a) => a.clone(),
            _ => Vec::new(),
        };
        for (j, b) in blocks.iter().enumerate() {
            let s = strip_cache_control(b).to_string();
            let overhead = if j == 0 { MESSAGE_OVERHEAD_BYTES } else { 0 };
            push(
                format!("msg{i}:{role}:{s}"),
                s.len() as u64 + overhead,
                has_marker(b),
            );
        }
    }
    out
}

/// The text of a block's content (a string, or text blocks).
fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Every `FILEMARK path vN` in `text`: (path, version, the marker text).
pub fn filemarks(text: &str) -> Vec<(String, u32, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(a) = rest.find(FILEMARK) {
        let after = &rest[a + FILEMARK.len()..];
        let path_end = after
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\\')
            .unwrap_or(after.len());
        let p = &after[..path_end];
        let tail = &after[path_end..];
        if let Some(v) = tail.strip_prefix(" v") {
            let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse::<u32>() {
                out.push((p.to_string(), n, format!("{FILEMARK}{p} v{n}")));
            }
        }
        rest = &after[path_end..];
    }
    out
}

/// Marker texts the results carry when they are not the whole file any more.
const NOT_WHOLE: &[&str] = &[
    "tool result trimmed by compaction",
    "[Tool result too large",
    "[Old tool result content cleared]",
    "too large to restore",
];

/// What the scripted model and the records need from a request.
#[derive(Default)]
struct Seen {
    /// tool_use id → (name, input).
    uses: HashMap<String, (String, Value)>,
    /// tool_use ids whose result is an error.
    errors: HashSet<String>,
    /// Index and turn of the last user message holding a `[TURN-` text.
    user_turn: Option<(usize, u32)>,
    /// User messages with tool results after that one.
    results_after: usize,
    /// Paths whose whole content is in the request.
    whole: BTreeSet<String>,
    /// Highest version of each path the request shows.
    versions: BTreeMap<String, u32>,
    /// Whole-content sends: (marker, source key).
    full_sends: Vec<(String, String)>,
    /// Paths of the model's tool calls in the request.
    paths: BTreeSet<String>,
    /// The last user message holds the summary instruction.
    summary: bool,
    /// ... and it is the collapse instruction.
    collapse: bool,
    /// The last user message holds the session-memory instruction.
    memory: bool,
    /// A wire rule the request breaks.
    invalid: Option<String>,
}

fn parse_turn(text: &str) -> Option<u32> {
    let rest = text.strip_prefix(TURN_TAG)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn read_request(body: &Value, dialect: &Dialect) -> Seen {
    let mut s = Seen::default();
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    let blocks_of = |m: &Value| -> Vec<Value> {
        match &m["content"] {
            Value::String(t) => vec![json!({"type": "text", "text": t})],
            Value::Array(a) => a.clone(),
            _ => Vec::new(),
        }
    };
    // Pass 1: tool uses, errors, pairing.
    let mut pending: Vec<String> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        let blocks = blocks_of(m);
        if i == 0 && role != "user" {
            s.invalid.get_or_insert_with(|| {
                "messages.0: the first message must use the user role".into()
            });
        }
        if role == "assistant" {
            if !pending.is_empty() {
                s.invalid.get_or_insert_with(|| {
                    format!(
                        "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}",
                        pending.join(", ")
                    )
                });
            }
            pending.clear();
            for b in &blocks {
                if b["type"] == "tool_use" {
                    let id = b["id"].as_str().unwrap_or("").to_string();
                    let (name, input) =
                        dialect.canonical(b["name"].as_str().unwrap_or(""), &b["input"]);
                    if let Some(p) = input["path"].as_str() {
                        s.paths.insert(p.to_string());
                    }
                    s.uses.insert(id.clone(), (name, input));
                    pending.push(id);
                }
            }
        } else {
            for b in &blocks {
                if b["type"] == "tool_result" {
                    let id = b["tool_use_id"].as_str().unwrap_or("");
                    if let Some(k) = pending.iter().position(|p| p == id) {
                        pending.remove(k);
                    } else {
                        s.invalid.get_or_insert_with(|| {
                            format!(
                                "messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                            )
                        });
                    }
                    if b["is_error"] == true {
                        s.errors.insert(id.to_string());
                    }
                }
            }
            if !pending.is_empty() {
                s.invalid.get_or_insert_with(|| {
                    format!(
                        "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}",
                        pending.join(", ")
                    )
                });
                pending.clear();
            }
        }
    }
    if count_markers(body) > 4 {
        s.invalid.get_or_insert_with(|| {
            "A maximum of 4 blocks with cache_control may be provided.".to_string()
        });
    }
    // Pass 2: user turn, versions, whole-content sends.
    for (i, m) in msgs.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        for b in blocks_of(m) {
            match (role, b["type"].as_str().unwrap_or("")) {
                ("user", "text") => {
                    let t = b["text"].as_str().unwrap_or("");
                    if let Some(n) = parse_turn(t) {
                        s.user_turn = Some((i, n));
                        s.results_after = 0;
                    }
                    for (p, v, _) in filemarks(t) {
                        let e = s.versions.entry(p).or_insert(0);
                        *e = (*e).max(v);
                    }
                    if t.starts_with("<restored_file") && !NOT_WHOLE.iter().any(|n| t.contains(n)) {
                        for (p, _, mark) in filemarks(t) {
                            s.whole.insert(p.clone());
                            s.full_sends.push((mark, format!("restored:{i}:{p}")));
                        }
                    }
                }
                ("user", "tool_result") => {
                    let id = b["tool_use_id"].as_str().unwrap_or("").to_string();
                    let t = content_text(&b["content"]);
                    for (p, v, _) in filemarks(&t) {
                        let e = s.versions.entry(p).or_insert(0);
                        *e = (*e).max(v);
                    }
                    let is_read = s.uses.get(&id).is_some_and(|(n, _)| n == "read_file");
                    if is_read
                        && !s.errors.contains(&id)
                        && !NOT_WHOLE.iter().any(|n| t.contains(n))
                    {
                        for (p, _, mark) in filemarks(&t) {
                            s.whole.insert(p.clone());
                            s.full_sends.push((mark, format!("read:{id}")));
                        }
                    }
                }
                ("assistant", "tool_use") => {
                    let id = b["id"].as_str().unwrap_or("");
                    let name = s.uses.get(id).map_or("", |(n, _)| n.as_str());
                    // The model's own whole-file writes, when they succeeded.
                    if name == "write_file" && !s.errors.contains(id) {
                        let content = b["input"]["content"].as_str().unwrap_or("");
                        for (p, v, _) in filemarks(content) {
                            s.whole.insert(p.clone());
                            let e = s.versions.entry(p).or_insert(0);
                            *e = (*e).max(v);
                        }
                    }
                }
                _ => {}
            }
        }
        if role == "user"
            && s.user_turn.is_some_and(|(u, _)| i > u)
            && blocks_of(m).iter().any(|b| b["type"] == "tool_result")
        {
            s.results_after += 1;
        }
    }
    if let Some(last) = msgs.last()
        && last["role"] == "user"
    {
        s.collapse = blocks_of(last).iter().any(|b| {
            b["text"]
                .as_str()
                .is_some_and(|t| t.contains(COLLAPSE_INSTRUCTION_START))
        });
        s.memory = blocks_of(last).iter().any(|b| {
            b["text"]
                .as_str()
                .is_some_and(|t| t.contains(MEMORY_INSTRUCTION_START))
        });
        s.summary = blocks_of(last).iter().any(|b| {
            b["text"].as_str().is_some_and(|t| {
                t.contains(SUMMARY_INSTRUCTION_START)
                    || t.contains(COLLAPSE_INSTRUCTION_START)
                    || t.contains(CLAUDE_SUMMARY_START)
            })
        });
    }
    s
}

/// Numbers of every `DIRECTIVE-NN` in `text`.
pub fn directives_in(text: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("DIRECTIVE-") {
        let digits: String = text[i + "DIRECTIVE-".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let Ok(n) = digits.parse() {
            out.insert(n);
        }
    }
    out
}

// ---------------------------------------------------------------- state and answers

enum Answer {
    Text(String),
    Tools(Vec<(String, Value)>),
}

struct State {
    cfg: SimConfig,
    /// Prefix hash → tokens of the prefix and when the entry was last written or read.
    cache: HashMap<[u8; 32], (u64, Instant)>,
    records: Vec<SimRecord>,
    main_seen: usize,
    /// Forced prompt-too-long answers given so far.
    forced_count: usize,
    current_turn: u32,
    /// Main answers given per turn.
    answered: BTreeMap<u32, usize>,
    /// Paths read per turn (the model's memory of its own calls).
    turn_reads: BTreeMap<u32, BTreeSet<String>>,
    /// Paths read in the session.
    read_ever: BTreeSet<String>,
    next_id: u64,
}

/// Requests of a turn (3 to 7, 5 on average), from the seed.
pub fn turn_length(seed: u64, turn: u32) -> usize {
    3 + Rng::at(seed, &[1, turn as u64]).below(5)
}

impl State {
    fn new(cfg: SimConfig) -> State {
        State {
            cfg,
            cache: HashMap::new(),
            records: Vec::new(),
            main_seen: 0,
            forced_count: 0,
            current_turn: 0,
            answered: BTreeMap::new(),
            turn_reads: BTreeMap::new(),
            read_ever: BTreeSet::new(),
            next_id: 0,
        }
    }

    fn handle(&mut self, raw: &[u8]) -> ResponseTemplate {
        let index = self.records.len();
        let body: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
        let text = String::from_utf8_lossy(raw);
        let units = units(&body);
        let total_bytes = units.last().map_or(0, |u| u.cum_bytes);
        let tokens = tokens_of_bytes(total_bytes);
        let seen = read_request(&body, &self.cfg.dialect);
        let kind = if seen.collapse {
            Kind::Collapse
        } else if seen.summary {
            Kind::Summary
        } else if seen.memory {
            Kind::Memory
        } else {
            Kind::Main
        };
        let (turn, step, from_request) = match (kind, seen.user_turn) {
            (Kind::Summary | Kind::Collapse | Kind::Memory, _) => (None, 0, false),
            (Kind::Main, Some((_, t))) => (Some(t), seen.results_after, true),
            (Kind::Main, None) => (
                Some(self.current_turn),
                self.answered.get(&self.current_turn).copied().unwrap_or(0),
                false,
            ),
        };
        let mut rec = SimRecord {
            arrived: std::time::Instant::now(),
            index,
            kind,
            turn,
            step,
            position_from_request: from_request,
            messages: body["messages"].as_array().map_or(0, Vec::len),
            tokens,
            over_window: tokens > self.cfg.window,
            verdict: Verdict::Answered,
            cache_read: 0,
            cache_write: 0,
            uncached: 0,
            output: 0,
            breakpoints: count_markers(&body),
            response: String::new(),
            calls: Vec::new(),
            directives: directives_in(&text),
            first_marker: text.contains("FIRST-REQUEST-MARKER"),
            full_sends: seen.full_sends.clone(),
            body: Arc::new(raw.to_vec()),
        };
        if kind == Kind::Main {
            self.main_seen += 1;
        }
        if let Some(why) = seen.invalid.clone().or_else(|| {
            (body["messages"].as_array().is_none_or(Vec::is_empty))
                .then(|| "messages: at least one message is required".to_string())
        }) {
            rec.response = format!("400 invalid_request_error: {why}");
            rec.verdict = Verdict::Invalid(why.clone());
            self.records.push(rec);
            return error_400("invalid_request_error", &why);
        }
        let due = self
            .cfg
            .force_ptl_after_main
            .iter()
            .chain(&self.cfg.more_ptl_after_main)
            .filter(|n| self.main_seen >= **n)
            .count();
        let forced = kind == Kind::Main && !rec.over_window && self.forced_count < due && step >= 1;
        if rec.over_window || forced {
            if forced {
                self.forced_count += 1;
            }
            let claimed = tokens.max(self.cfg.window + 1);
            let msg = format!(
                "prompt is too long: {claimed} tokens > {} maximum",
                self.cfg.window
            );
            rec.response = format!("400 {msg}");
            rec.verdict = Verdict::PromptTooLong { forced };
            self.records.push(rec);
            return error_400("invalid_request_error", &msg);
        }
        // The prompt cache.
        let now = Instant::now();
        if let Some(ttl) = self.cfg.cache_ttl_ms.map(Duration::from_millis) {
            self.cache
                .retain(|_, (_, used)| now.duration_since(*used) < ttl);
        }
        let hit = units
            .iter()
            .rev()
            .find(|u| self.cache.contains_key(&u.hash));
        let read = match hit.and_then(|u| self.cache.get_mut(&u.hash)) {
            Some((tokens, used)) => {
                *used = now;
                *tokens
            }
            None => 0,
        };
        let write_to = units
            .iter()
            .rev()
            .find(|u| u.breakpoint)
            .map_or(0, |u| tokens_of_bytes(u.cum_bytes));
        let write = write_to.saturating_sub(read);
        for u in units.iter().filter(|u| u.breakpoint) {
            self.cache
                .insert(u.hash, (tokens_of_bytes(u.cum_bytes), now));
        }
        rec.cache_read = read;
        rec.cache_write = write;
        rec.uncached = tokens.saturating_sub(read + write);

        let answer = match kind {
            Kind::Summary | Kind::Collapse | Kind::Memory if self.cfg.quoting_summary => {
                Answer::Text(quoting_summary(&seen, &text))
            }
            Kind::Summary | Kind::Collapse | Kind::Memory => Answer::Text(lossy_summary(&seen)),
            Kind::Main => {
                let t = turn.unwrap_or(0);
                if from_request {
                    self.current_turn = t;
                }
                let a = match self.main_answer(t, step, &seen, &mut rec) {
                    Answer::Tools(calls) => Answer::Tools(
                        calls
                            .into_iter()
                            .map(|(n, i)| self.cfg.dialect.call(&n, i))
                            .collect(),
                    ),
                    text => text,
                };
                *self.answered.entry(t).or_insert(0) += 1;
                a
            }
        };
        let (sse, out_bytes, line) = self.render(answer, &mut rec);
        rec.output = tokens_of_bytes(out_bytes);
        rec.response = line;
        // The usage the SSE reports (output is only known now: rebuild the start).
        let usage = MockUsage {
            input: rec.uncached,
            output: rec.output,
            cache_creation: rec.cache_write,
            cache_read: rec.cache_read,
        };
        let body = sse(usage);
        let delay = if rec.kind == Kind::Main {
            0
        } else {
            self.cfg.side_delay_ms
        };
        self.records.push(rec);
        ResponseTemplate::new(200)
            .insert_header("content-type", "text/event-stream")
            .insert_header("cache-control", "no-cache")
            .set_body_string(body)
            .set_delay(std::time::Duration::from_millis(delay))
    }

    fn new_id(&mut self) -> String {
        self.next_id += 1;
        format!("toolu_sim_{:05}", self.next_id)
    }

    /// The SSE body builder, the bytes of output and a one-line description.
    #[allow(clippy::type_complexity)]
    fn render(
        &mut self,
        answer: Answer,
        rec: &mut SimRecord,
    ) -> (Box<dyn Fn(MockUsage) -> String>, u64, String) {
        let msg_id = format!("msg_sim_{:05}", rec.index);
        match answer {
            Answer::Text(t) => {
                let line = format!("text: {}", t.chars().take(60).collect::<String>());
                let n = t.len() as u64;
                (
                    Box::new(move |u| {
                        AnthropicSse::new(u)
                            .with_id(&msg_id)
                            .text(&t)
                            .finish("end_turn")
                    }),
                    n,
                    line,
                )
            }
            Answer::Tools(calls) => {
                let mut built: Vec<(String, String, String)> = Vec::new();
                let mut names = Vec::new();
                for (name, input) in calls {
                    let id = self.new_id();
                    let path = input["path"]
                        .as_str()
                        .or(input["file_path"].as_str())
                        .map(str::to_string);
                    names.push(format!("{name}({})", path.clone().unwrap_or_default()));
                    if let Some(c) = rec.calls.iter_mut().find(|c| c.id.is_empty()) {
                        c.id = id.clone();
                    }
                    built.push((id, name, input.to_string()));
                }
                let lead = format!("Working on it: {}.", names.join(", "));
                let n = lead.len() as u64 + built.iter().map(|b| b.2.len() as u64).sum::<u64>();
                let line = format!("tools: {}", names.join(", "));
                (
                    Box::new(move |u| {
                        let mut sse = AnthropicSse::new(u).with_id(&msg_id).text(&lead);
                        for (id, name, input) in &built {
                            let pieces = json_pieces(input, 48);
                            let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
                            sse = sse.tool_use(id, name, &refs);
                        }
                        sse.finish("tool_use")
                    }),
                    n,
                    line,
                )
            }
        }
    }

    fn pick_file(&mut self, rng: &mut Rng) -> String {
        let reread = !self.read_ever.is_empty() && rng.below(100) < 35;
        if reread {
            let v: Vec<&String> = self.read_ever.iter().collect();
            v[rng.below(v.len())].clone()
        } else {
            self.cfg.files[rng.below(self.cfg.files.len())].clone()
        }
    }

    fn read_call(&mut self, turn: u32, p: String, rec: &mut SimRecord) -> (String, Value) {
        self.turn_reads.entry(turn).or_default().insert(p.clone());
        self.read_ever.insert(p.clone());
        rec.calls.push(IssuedCall {
            id: String::new(),
            name: "read_file".into(),
            path: Some(p.clone()),
            content_visible: false,
            believed_version: None,
        });
        ("read_file".into(), json!({"path": p}))
    }

    fn main_answer(&mut self, turn: u32, step: usize, seen: &Seen, rec: &mut SimRecord) -> Answer {
        let k = turn_length(self.cfg.seed, turn);
        if step + 1 >= k || step >= 12 {
            return Answer::Text(format!(
                "Done with this request after {step} tool steps; the changes are in place."
            ));
        }
        let mut rng = Rng::at(self.cfg.seed, &[2, turn as u64, step as u64]);
        if step == 1 && self.cfg.todo_every > 0 && turn.is_multiple_of(self.cfg.todo_every) {
            rec.calls.push(IssuedCall {
                id: String::new(),
                name: "todo_write".into(),
                path: None,
                content_visible: false,
                believed_version: None,
            });
            let tag = format!("TODO-STATE-{turn:02}");
            return Answer::Tools(vec![(
                "todo_write".into(),
                json!({"todos": [
                    {"content": format!("{tag} finish the clean-up of this request"), "status": "in_progress"},
                    {"content": format!("{tag} review the modules touched so far"), "status": "pending"},
                ]}),
            )]);
        }
        if self.cfg.large_every_turn && step == 0 && !self.cfg.large_files.is_empty() {
            let p = self.cfg.large_files[rng.below(self.cfg.large_files.len())].clone();
            return Answer::Tools(vec![self.read_call(turn, p, rec)]);
        }
        let roll = rng.below(100);
        // Files read this turn whose whole content the request shows: what the model can edit.
        let editable: Vec<String> = self
            .turn_reads
            .get(&turn)
            .map(|s| {
                s.iter()
                    .filter(|p| seen.whole.contains(*p) && seen.versions.contains_key(*p))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        match roll {
            0..50 => {
                let p = self.pick_file(&mut rng);
                Answer::Tools(vec![self.read_call(turn, p, rec)])
            }
            50..60 => {
                let a = self.pick_file(&mut rng);
                let mut b = self.cfg.files[rng.below(self.cfg.files.len())].clone();
                if b == a {
                    b = self.cfg.files
                        [(rng.below(self.cfg.files.len()) + 1) % self.cfg.files.len()]
                    .clone();
                }
                let mut calls = vec![self.read_call(turn, a.clone(), rec)];
                if b != a {
                    calls.push(self.read_call(turn, b, rec));
                }
                Answer::Tools(calls)
            }
            60..68 if !self.cfg.grep_patterns.is_empty() => {
                let pat = self.cfg.grep_patterns[rng.below(self.cfg.grep_patterns.len())].clone();
                rec.calls.push(IssuedCall {
                    id: String::new(),
                    name: "grep".into(),
                    path: None,
                    content_visible: false,
                    believed_version: None,
                });
                Answer::Tools(vec![(
                    "grep".into(),
                    json!({"pattern": pat, "path": "src"}),
                )])
            }
            68..72 => {
                rec.calls.push(IssuedCall {
                    id: String::new(),
                    name: "list_files".into(),
                    path: None,
                    content_visible: false,
                    believed_version: None,
                });
                Answer::Tools(vec![("list_files".into(), json!({"path": "src"}))])
            }
            72..94 if !editable.is_empty() => {
                let p = editable[rng.below(editable.len())].clone();
                let v = seen.versions[&p];
                rec.calls.push(IssuedCall {
                    id: String::new(),
                    name: "edit_file".into(),
                    path: Some(p.clone()),
                    content_visible: true,
                    believed_version: Some(v),
                });
                Answer::Tools(vec![(
                    "edit_file".into(),
                    json!({
                        "path": p,
                        "old_string": format!("{FILEMARK}{p} v{v}"),
                        "new_string": format!("{FILEMARK}{p} v{}\n// edited in turn {turn}, step {step}", v + 1),
                    }),
                )])
            }
            94..100 => {
                let overwrite = !editable.is_empty() && rng.below(2) == 0;
                let (p, v) = if overwrite {
                    let p = editable[rng.below(editable.len())].clone();
                    let v = seen.versions[&p] + 1;
                    (p, v)
                } else {
                    (format!("gen/t{turn:02}_s{step}.md"), 1)
                };
                let mut body_rng = Rng::at(self.cfg.seed, &[3, turn as u64, step as u64]);
                let content = format!(
                    "// {FILEMARK}{p} v{v}\n{}",
                    filler_lines(&mut body_rng, 12, 60, "written")
                );
                if overwrite {
                    self.turn_reads.entry(turn).or_default().insert(p.clone());
                }
                rec.calls.push(IssuedCall {
                    id: String::new(),
                    name: "write_file".into(),
                    path: Some(p.clone()),
                    content_visible: overwrite,
                    believed_version: overwrite.then_some(v - 1),
                });
                Answer::Tools(vec![(
                    "write_file".into(),
                    json!({"path": p, "content": content}),
                )])
            }
            _ => {
                let p = self.pick_file(&mut rng);
                Answer::Tools(vec![self.read_call(turn, p, rec)])
            }
        }
    }
}

/// A summary that keeps the gist and forgets the user's words.
fn lossy_summary(seen: &Seen) -> String {
    let files: Vec<&String> = seen.paths.iter().take(8).collect();
    let files = if files.is_empty() {
        "none".to_string()
    } else {
        files
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "<analysis>Going through the conversation in order: several requests about the code, \
         files read, a few edits.</analysis>\n<summary>\nCompleted Tasks\n(code review)\n\
         • Read and tidied several modules; touched files include {files}.\n\n\
         Active Task\n(ongoing changes)\n• goal: carry on with the user's latest request\n\
         • current state: partly done\n• next step: continue where the work stopped\n\n\
         Key Decisions\n• Keep the changes small — easier to review.\n\n\
         User Directives\n• The user gave a few preferences about style earlier.\n\n\
         User Messages\n• The user asked for a series of changes to the code.\n\n\
         Current Work\nWorking through the most recent request.\n</summary>"
    )
}

/// Where a quoting summary lists the path of an edit it saw.
pub const EDITED_PATH: &str = "EDITED-PATH[";

/// A summary that quotes only what the request showed: the `DECISION-NN` tags and the paths of
/// edits (its own tool calls, or an earlier summary's `EDITED-PATH[...]`), none of the user's
/// other words.
fn quoting_summary(seen: &Seen, raw: &str) -> String {
    let mut decisions = BTreeSet::new();
    for (i, _) in raw.match_indices("DECISION-") {
        let digits: String = raw[i + "DECISION-".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if !digits.is_empty() {
            decisions.insert(format!("DECISION-{digits}"));
        }
    }
    let mut edited: BTreeSet<String> = seen
        .uses
        .iter()
        .filter(|(id, (name, _))| {
            (name == "edit_file" || name == "write_file") && !seen.errors.contains(*id)
        })
        .filter_map(|(_, (_, input))| input["path"].as_str().map(str::to_string))
        .collect();
    for (i, _) in raw.match_indices(EDITED_PATH) {
        let rest = &raw[i + EDITED_PATH.len()..];
        if let Some(end) = rest.find(']') {
            edited.insert(rest[..end].to_string());
        }
    }
    let decisions: Vec<String> = decisions
        .iter()
        .map(|d| format!("• The user stated {d}."))
        .collect();
    let edited: Vec<String> = edited
        .iter()
        .map(|p| format!("• {EDITED_PATH}{p}]"))
        .collect();
    format!(
        "<analysis>Going through the conversation in order.</analysis>\n<summary>\n\
         Completed Tasks\n• Edited files:\n{}\n\nActive Task\n• carry on with the user's latest request\n\n\
         Key Decisions\n{}\n\nCurrent Work\nWorking through the most recent request.\n</summary>",
        edited.join("\n"),
        decisions.join("\n")
    )
}

fn error_400(kind: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(400)
        .insert_header("content-type", "application/json")
        .set_body_string(
            json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(system: &str, msgs: Value) -> Value {
        json!({
            "model": "m", "max_tokens": 10, "stream": true,
            "tools": [{"name": "read_file", "description": "d", "input_schema": {}}],
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            "messages": msgs,
        })
    }

    #[test]
    fn filemarks_are_found_in_escaped_and_plain_text() {
        let t = "     1\t// FILEMARK src/a.rs v3\n  2\tx";
        assert_eq!(
            filemarks(t),
            vec![("src/a.rs".into(), 3, "FILEMARK src/a.rs v3".into())]
        );
        let j = json!({"t": t}).to_string();
        assert_eq!(filemarks(&j)[0].1, 3);
        assert_eq!(
            directives_in("x DIRECTIVE-07: y DIRECTIVE-12"),
            BTreeSet::from([7, 12])
        );
    }

    #[test]
    fn the_cache_reads_the_longest_stored_prefix_and_writes_to_the_last_marker() {
        let mut st = State::new(SimConfig {
            window: 1_000_000,
            seed: 1,
            files: vec!["a".into()],
            large_files: vec![],
            large_every_turn: false,
            grep_patterns: vec![],
            force_ptl_after_main: None,
            ..SimConfig::default()
        });
        let m1 = json!([{"role": "user", "content": [
            {"type": "text", "text": "[TURN-01] hello", "cache_control": {"type": "ephemeral"}}]}]);
        st.handle(body("sys", m1).to_string().as_bytes());
        let r = st.records[0].clone();
        assert_eq!(r.cache_read, 0);
        assert_eq!(
            r.cache_write, r.tokens,
            "everything up to the last marker is written"
        );
        assert_eq!(r.uncached, 0);
        let id = r.calls[0].id.clone();
        // The next step: same prefix, marker moved to the new last block.
        let m2 = json!([
            {"role": "user", "content": [{"type": "text", "text": "[TURN-01] hello"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "read_file", "input": {"path": "a"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id,
                "content": [{"type": "text", "text": "x"}], "cache_control": {"type": "ephemeral"}}]}]);
        st.handle(body("sys", m2.clone()).to_string().as_bytes());
        let r2 = st.records[1].clone();
        assert_eq!(r2.verdict, Verdict::Answered);
        assert_eq!(r2.cache_read, r.tokens);
        assert_eq!(r2.cache_read + r2.cache_write, r2.tokens);
        assert_eq!(r2.turn, Some(1));
        assert_eq!(r2.step, 1);
        // A changed system prompt misses everything but nothing before it (tools are unmarked).
        st.handle(body("other", m2).to_string().as_bytes());
        assert_eq!(st.records[2].cache_read, 0);
    }

    #[test]
    fn a_cache_entry_expires_a_ttl_after_its_last_use() {
        let mut st = State::new(SimConfig {
            window: 1_000_000,
            seed: 1,
            files: vec!["a".into()],
            cache_ttl_ms: Some(150),
            ..SimConfig::default()
        });
        let m = json!([{"role": "user", "content": [
            {"type": "text", "text": "[TURN-01] hello", "cache_control": {"type": "ephemeral"}}]}]);
        let req = body("sys", m).to_string();
        st.handle(req.as_bytes());
        let first = st.records[0].clone();
        assert_eq!(first.cache_read, 0);
        assert_eq!(first.cache_write, first.tokens);
        // Within the lifetime: read whole, nothing written.
        st.handle(req.as_bytes());
        assert_eq!(st.records[1].cache_read, first.tokens);
        assert_eq!(st.records[1].cache_write, 0);
        // Past it: nothing read, the prefix written again.
        std::thread::sleep(Duration::from_millis(400));
        st.handle(req.as_bytes());
        assert_eq!(st.records[2].cache_read, 0);
        assert_eq!(st.records[2].cache_write, first.tokens);
        // And that write stored it anew.
        st.handle(req.as_bytes());
        assert_eq!(st.records[3].cache_read, first.tokens);
    }

    #[test]
    fn without_a_ttl_an_entry_does_not_expire() {
        let mut st = State::new(SimConfig {
            window: 1_000_000,
            seed: 1,
            files: vec!["a".into()],
            ..SimConfig::default()
        });
        let m = json!([{"role": "user", "content": [
            {"type": "text", "text": "[TURN-01] hello", "cache_control": {"type": "ephemeral"}}]}]);
        let req = body("sys", m).to_string();
        st.handle(req.as_bytes());
        std::thread::sleep(Duration::from_millis(50));
        st.handle(req.as_bytes());
        assert_eq!(st.records[1].cache_read, st.records[0].tokens);
    }

    #[test]
    fn a_memory_request_is_a_side_request_answered_with_a_summary() {
        let mut st = State::new(SimConfig {
            window: 1_000_000,
            seed: 1,
            files: vec!["a".into()],
            ..SimConfig::default()
        });
        let m = json!([
            {"role": "user", "content": "[TURN-03] hello"},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": [{"type": "text",
                "text": format!("{MEMORY_INSTRUCTION_START} with what the turn decided.")}]}]);
        st.handle(body("sys", m).to_string().as_bytes());
        let r = &st.records[0];
        assert_eq!(r.kind, Kind::Memory);
        assert_eq!(r.turn, None, "not placed in a turn");
        assert!(r.calls.is_empty(), "no tool call");
        assert!(r.response.starts_with("text: <analysis>"), "{}", r.response);
        assert_eq!(st.main_seen, 0, "not counted as a main request");
        assert_eq!(st.answered.values().sum::<usize>(), 0);
        // The summary instruction in the last message still makes a summary request.
        let m = json!([
            {"role": "user", "content": "[TURN-03] hello"},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": format!("{SUMMARY_INSTRUCTION_START}, write the summary.")}]);
        st.handle(body("sys", m).to_string().as_bytes());
        assert_eq!(st.records[1].kind, Kind::Summary);
        // The memory instruction earlier in the conversation does not make a memory request.
        let m = json!([
            {"role": "user", "content": format!("{MEMORY_INSTRUCTION_START} then.")},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "[TURN-04] next"}]);
        st.handle(body("sys", m).to_string().as_bytes());
        assert_eq!(st.records[2].kind, Kind::Main);
    }

    #[test]
    fn over_the_window_is_prompt_too_long_and_broken_pairing_is_invalid() {
        let mut st = State::new(SimConfig {
            window: 10,
            seed: 1,
            files: vec!["a".into()],
            large_files: vec![],
            large_every_turn: false,
            grep_patterns: vec![],
            force_ptl_after_main: None,
            ..SimConfig::default()
        });
        let m = json!([{"role": "user", "content": "[TURN-01] hello there, a long message"}]);
        let r = st.handle(body("sys", m).to_string().as_bytes());
        let _ = r;
        assert_eq!(
            st.records[0].verdict,
            Verdict::PromptTooLong { forced: false }
        );
        st.cfg.window = 1_000_000;
        let bad = json!([
            {"role": "user", "content": "[TURN-01] hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}]},
            {"role": "user", "content": "no result"}]);
        st.handle(body("sys", bad).to_string().as_bytes());
        assert!(matches!(st.records[1].verdict, Verdict::Invalid(_)));
    }
}
