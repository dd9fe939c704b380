//! Long sessions through the real binary against the simulated provider (`sim_provider`):
//! 40+ user turns and 200+ model requests per scenario, the acceptance criteria of
//! compaction as assertions, and the figures `benches/long_session.rs` prints from the same
//! code (`run` → `figures` → `violations` / `table`).
//!
//! Scenarios (window = what Garuda is configured with / what the sim enforces):
//! - `a-40k`, `a-60k`: baseline growth, ordinary reads, greps, edits;
//! - `b-40k`: a ~10 000-token file read in every turn;
//! - `c-40k`: one forced prompt-too-long mid-turn (the request fits);
//! - `d-60k/40k`: the provider's real window (40 000) is smaller than the configured one.
//!
//! Set `LONG_SESSION_DUMP=DIR` to write every request (body and record) and every turn event
//! of a run under `DIR/<scenario>/`.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;
use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Framing, Garuda};
use crate::sim_provider::{FILEMARK, Kind, Rng, Sim, SimConfig, SimRecord, Verdict, filler_lines};

/// The model every scenario configures.
pub const MODEL: &str = "anthropic/claude-sonnet-4-5";

/// One long session to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Short name (table row, test name).
    pub name: &'static str,
    /// One line on what it exercises.
    pub what: &'static str,
    /// `contextWindow` in Garuda's config.
    pub config_window: u64,
    /// The window the sim enforces.
    pub sim_window: u64,
    /// User turns.
    pub turns: u32,
    /// Read a ~10 000-token file in every turn.
    pub large_every_turn: bool,
    /// Force one prompt-too-long on the first mid-turn main request after this many.
    pub force_ptl_after_main: Option<usize>,
    /// Seed of the scripted model and the workspace.
    pub seed: u64,
    /// Share of main-request input tokens that must come from the cache.
    pub cache_target: f64,
}

/// Every scenario, in table order.
pub fn scenarios() -> Vec<Scenario> {
    let base = Scenario {
        name: "a-40k",
        what: "baseline growth: ordinary reads, greps, edits",
        config_window: 40_000,
        sim_window: 40_000,
        turns: 44,
        large_every_turn: false,
        force_ptl_after_main: None,
        seed: 0x5EED_0001,
        cache_target: 0.90,
    };
    vec![
        base.clone(),
        Scenario {
            name: "a-60k",
            what: "baseline growth at a 60 000-token window",
            config_window: 60_000,
            sim_window: 60_000,
            cache_target: 0.95,
            ..base.clone()
        },
        Scenario {
            name: "b-40k",
            what: "a ~10 000-token file read in every turn",
            large_every_turn: true,
            seed: 0x5EED_0002,
            ..base.clone()
        },
        Scenario {
            name: "c-40k",
            what: "one forced prompt-too-long mid-turn",
            force_ptl_after_main: Some(100),
            seed: 0x5EED_0003,
            ..base.clone()
        },
        Scenario {
            name: "d-60k/40k",
            what: "configured window 60 000, provider enforces 40 000",
            config_window: 60_000,
            sim_window: 40_000,
            seed: 0x5EED_0004,
            ..base
        },
    ]
}

/// The scenario with this name.
pub fn scenario(name: &str) -> Scenario {
    scenarios()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
}

// ---------------------------------------------------------------- workspace and script

/// The generated workspace.
pub struct Workspace {
    /// Its folder.
    pub dir: tempfile::TempDir,
    /// Ordinary files (relative paths).
    pub files: Vec<String>,
    /// ~10 000-token files.
    pub large: Vec<String>,
    /// Patterns that match something.
    pub patterns: Vec<String>,
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

/// Files with a `FILEMARK path v1` line each; deterministic from the seed.
pub fn make_workspace(s: &Scenario) -> Workspace {
    let dir = tempfile::tempdir().expect("workspace");
    let root = dir.path();
    write(
        root,
        "AGENTS.md",
        "Be brief. Prefer small, reviewable changes.\n",
    );
    let mut files = Vec::new();
    for i in 0..24u64 {
        let rel = format!("src/mod_{i:02}.rs");
        let lines = 30 + (i * 29 % 100) as usize;
        let mut rng = Rng::at(s.seed, &[10, i]);
        let mut text = format!("// {FILEMARK}{rel} v1\n");
        for (j, filler) in filler_lines(&mut rng, lines, 56, "note")
            .lines()
            .enumerate()
        {
            if j % 10 == 3 {
                let _ = writeln!(
                    text,
                    "pub fn handler_{i:02}_{j:03}(x: u32) -> u32 {{ x + {j} }}"
                );
            } else {
                text.push_str(filler);
                text.push('\n');
            }
        }
        write(root, &rel, &text);
        files.push(rel);
    }
    for i in 0..4u64 {
        let rel = format!("docs/guide_{i}.md");
        let mut rng = Rng::at(s.seed, &[11, i]);
        let text = format!(
            "<!-- {FILEMARK}{rel} v1 -->\n# Guide {i}\n{}",
            filler_lines(&mut rng, 40, 64, "guide")
        );
        write(root, &rel, &text);
        files.push(rel);
    }
    let mut large = Vec::new();
    if s.large_every_turn {
        for i in 0..6u64 {
            let rel = format!("big/large_{i}.txt");
            let mut rng = Rng::at(s.seed, &[12, i]);
            let text = format!(
                "// {FILEMARK}{rel} v1\n{}",
                filler_lines(&mut rng, 430, 68, "data")
            );
            write(root, &rel, &text);
            large.push(rel);
        }
    }
    let patterns = [
        "handler_0[0-9]_013",
        "fn handler_1[0-2]_0[0-4]3",
        "x \\+ 33 ",
        "handler_2[0-3]_023",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    Workspace {
        dir,
        files,
        large,
        patterns,
    }
}

const TASKS: &[&str] = &[
    "Look through the handler modules and tidy whatever needs it; tell me what you changed.",
    "Check how the handlers in src/ add their offsets and fix anything inconsistent.",
    "Read the guides in docs/ against the code and correct the code where they disagree.",
    "Find the handlers that are never called and mark them in their module.",
    "Go over the modules you touched recently once more and finish the clean-up.",
    "Make the naming in the next few modules consistent with the rest.",
];

const DIRECTIVES: &[&str] = &[
    "never rename a public function",
    "keep every line under 100 characters",
    "do not touch anything under docs/ without asking",
    "write comments in full sentences",
    "prefer early returns over nested ifs",
    "keep the handler signatures exactly as they are",
    "log nothing at info level",
    "use u32 arithmetic only, no casts",
    "leave the FILEMARK lines alone except for the version",
    "no new dependencies",
    "tests go next to the code they test",
    "answer in at most three sentences",
];

/// The directive a turn gives (every fourth turn from turn 2), if any.
pub fn directive_of(turn: u32) -> Option<u32> {
    (turn >= 2 && (turn - 2).is_multiple_of(4)).then(|| (turn - 2) / 4 + 1)
}

/// The user's message of a turn.
pub fn user_message(turn: u32) -> String {
    let mut t = format!("[TURN-{turn:02}] {}", TASKS[turn as usize % TASKS.len()]);
    if turn == 1 {
        t.push_str(" FIRST-REQUEST-MARKER: this is the start of a long refactoring session.");
    }
    if let Some(n) = directive_of(turn) {
        let d = DIRECTIVES[(n as usize - 1) % DIRECTIVES.len()];
        let _ = write!(t, " DIRECTIVE-{n:02}: from now on, {d}.");
    }
    t
}

// ---------------------------------------------------------------- running a session

/// How one `turn/run` ended.
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    /// 1-based.
    pub turn: u32,
    /// `result.stopReason`, when there was a result.
    pub stop_reason: Option<String>,
    /// The error answer, when there was one.
    pub error: Option<Value>,
    /// Indices of the sim's records this turn caused.
    pub requests: Range<usize>,
    /// Directives given up to and including this turn.
    pub directives: BTreeSet<u32>,
}

/// A finished tool call as the client saw it.
#[derive(Debug, Clone)]
pub struct ToolDone {
    /// Turn it ran in.
    pub turn: u32,
    /// tool_use id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Output text.
    pub output: String,
    /// Reported as an error.
    pub is_error: bool,
}

/// Everything a run produced.
pub struct Session {
    /// What was run.
    pub scenario: Scenario,
    /// Every request the sim received.
    pub records: Vec<SimRecord>,
    /// Every turn.
    pub turns: Vec<TurnOutcome>,
    /// Every `compaction` event, with the turn it came in.
    pub compactions: Vec<(u32, Value)>,
    /// Every finished tool call.
    pub tools: Vec<ToolDone>,
    /// Wall-clock time of the session (reported, never asserted).
    pub elapsed: Duration,
}

fn write_config(home: &Path, window: u64, extra: &str) {
    let dir = home.join("config/garuda");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "model = \"{MODEL}\"\n{extra}\n[network]\nmax_retries = 2\nidle_timeout_ms = 20000\n\
             [models.\"{MODEL}\"]\ncontextWindow = {window}\n"
        ),
    )
    .expect("config");
}

/// What a benchmark built on this harness adds to a run (`run_with`): files, settings and
/// client actions between turns.
pub trait Hooks {
    /// Adjusts the workspace and the simulated provider before the session starts.
    fn prepare(&mut self, _root: &Path, _sim: &mut SimConfig) {}
    /// Lines for the top of Garuda's config.toml (before any table).
    fn config(&self) -> String {
        String::new()
    }
    /// Runs before user turn `turn` (files changed, client reliefs, restarts); returns text
    /// appended to the turn's user message.
    fn before_turn(&mut self, _turn: u32, _live: &mut Live<'_>) -> String {
        String::new()
    }
    /// Runs after the last turn, before the binary stops.
    fn finish(&mut self, _live: &mut Live<'_>) {}
}

/// No additions: the plain scenario.
pub struct NoHooks;

impl Hooks for NoHooks {}

/// The running session, as hooks see it.
pub struct Live<'a> {
    /// The client of the running binary.
    pub g: &'a mut Garuda,
    /// The session.
    pub sid: &'a str,
    /// Garuda's HOME (config and state).
    pub home: &'a Path,
    /// The workspace root.
    pub root: &'a Path,
    /// The simulated provider.
    pub sim: &'a Sim,
    env: &'a [(&'a str, &'a str)],
}

impl Live<'_> {
    /// Stops the binary (killed, as a crash or a closed editor would) and starts it again with
    /// the session loaded by `session/load`. With `pause_ms`, every record of the transcript is
    /// first moved that far into the past, as if the user had been away that long.
    pub fn restart(&mut self, pause_ms: u64) {
        let backlog = std::mem::take(&mut self.g.backlog);
        let _ = self.g.child.kill();
        let _ = self.g.child.wait();
        if pause_ms > 0 {
            let path = self.transcript();
            let shifted: String = std::fs::read_to_string(&path)
                .expect("read transcript")
                .lines()
                .map(|l| {
                    let mut v: Value = serde_json::from_str(l).expect("json");
                    if let Some(t) = v["time"].as_u64() {
                        v["time"] = json!(t.saturating_sub(pause_ms));
                    }
                    format!("{v}\n")
                })
                .collect();
            std::fs::write(&path, shifted).expect("write transcript");
        }
        *self.g = Garuda::spawn_at(Framing::Lsp, self.home, &[], self.env);
        self.g.backlog = backlog;
        self.g.call("initialize", json!({"capabilities": {}}));
        self.g.call("session/load", json!({"sessionId": self.sid}));
    }

    /// The session's transcript file.
    pub fn transcript(&self) -> std::path::PathBuf {
        fn find(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
            for e in std::fs::read_dir(dir).ok()?.flatten() {
                let p = e.path();
                if p.is_dir() {
                    if let Some(f) = find(&p, name) {
                        return Some(f);
                    }
                } else if p.file_name().and_then(|n| n.to_str()) == Some(name) {
                    return Some(p);
                }
            }
            None
        }
        find(&self.home.join("state"), &format!("{}.jsonl", self.sid)).expect("transcript")
    }
}

/// Runs one scenario to the end through the real binary.
pub fn run(s: &Scenario) -> Session {
    run_with(s, &mut NoHooks)
}

/// Sorts the client's notifications into the session's compactions and tool calls.
fn take_events(
    g: &mut Garuda,
    turn: u32,
    compactions: &mut Vec<(u32, Value)>,
    tools: &mut Vec<ToolDone>,
    events_log: &mut Vec<Value>,
) {
    for m in std::mem::take(&mut g.backlog) {
        if m["method"] != "turn/update" {
            continue;
        }
        let e = m["params"]["event"].clone();
        match e["kind"].as_str() {
            Some("compaction") => compactions.push((turn, e.clone())),
            Some("toolCallFinished") => tools.push(ToolDone {
                turn,
                id: e["id"].as_str().unwrap_or("").to_string(),
                name: e["name"].as_str().unwrap_or("").to_string(),
                output: e["output"].as_str().unwrap_or("").to_string(),
                is_error: e["isError"] == true,
            }),
            _ => {}
        }
        if !matches!(e["kind"].as_str(), Some("textDelta" | "thinkingDelta")) {
            events_log.push(json!({"turn": turn, "event": e}));
        }
    }
}

/// The simulated provider of scenario `s` over workspace `ws`.
pub fn sim_config(s: &Scenario, ws: &Workspace) -> SimConfig {
    SimConfig {
        window: s.sim_window,
        seed: s.seed,
        files: ws.files.clone(),
        large_files: ws.large.clone(),
        large_every_turn: s.large_every_turn,
        grep_patterns: ws.patterns.clone(),
        force_ptl_after_main: s.force_ptl_after_main,
        ..SimConfig::default()
    }
}

/// Runs one scenario to the end through the real binary, with `hooks`' additions.
pub fn run_with(s: &Scenario, hooks: &mut dyn Hooks) -> Session {
    let ws = make_workspace(s);
    let mut cfg = sim_config(s, &ws);
    hooks.prepare(ws.dir.path(), &mut cfg);
    let sim = Sim::start(cfg);
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), s.config_window, &hooks.config());
    let env = sim.env();
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    // The product's default: the sim answers memory updates by what they ask.
    env.push(("GARUDA_SESSION_MEMORY", "on"));
    let started = Instant::now();
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.dir.path());
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();

    let mut turns = Vec::new();
    let mut compactions = Vec::new();
    let mut tools = Vec::new();
    let mut given = BTreeSet::new();
    let mut events_log = Vec::new();
    for turn in 1..=s.turns {
        if let Some(n) = directive_of(turn) {
            given.insert(n);
        }
        let before = sim.count();
        let mut live = Live {
            g: &mut g,
            sid: &sid,
            home: home.path(),
            root: ws.dir.path(),
            sim: &sim,
            env: &env,
        };
        let extra = hooks.before_turn(turn, &mut live);
        take_events(&mut g, turn, &mut compactions, &mut tools, &mut events_log);
        let text = user_message(turn) + &extra;
        let r = g.request_serving(
            "turn/run",
            json!({"sessionId": sid, "input": [{"type": "text", "text": text}]}),
            // full-auto asks nothing; answer anything else with a yes.
            |_| json!({"optionId": "allow_once"}),
        );
        let after = sim.count();
        take_events(&mut g, turn, &mut compactions, &mut tools, &mut events_log);
        turns.push(TurnOutcome {
            turn,
            stop_reason: r["result"]["stopReason"].as_str().map(str::to_string),
            error: r.get("error").cloned(),
            requests: before..after,
            directives: given.clone(),
        });
    }
    hooks.finish(&mut Live {
        g: &mut g,
        sid: &sid,
        home: home.path(),
        root: ws.dir.path(),
        sim: &sim,
        env: &env,
    });
    let elapsed = started.elapsed();
    let records = sim.records();
    if let Some(dir) = std::env::var_os("LONG_SESSION_DUMP") {
        dump(
            &Path::new(&dir).join(s.name.replace('/', "_")),
            &records,
            &events_log,
        );
    }
    drop(g);
    Session {
        scenario: s.clone(),
        records,
        turns,
        compactions,
        tools,
        elapsed,
    }
}

fn dump(dir: &Path, records: &[SimRecord], events: &[Value]) {
    std::fs::create_dir_all(dir).expect("dump dir");
    let mut lines = String::new();
    for r in records {
        let calls: Vec<Value> = r
            .calls
            .iter()
            .map(|c| json!({"id": c.id, "name": c.name, "path": c.path, "contentVisible": c.content_visible}))
            .collect();
        let line = json!({
            "index": r.index, "kind": format!("{:?}", r.kind), "turn": r.turn, "step": r.step,
            "positionFromRequest": r.position_from_request, "messages": r.messages,
            "tokens": r.tokens, "overWindow": r.over_window, "verdict": format!("{:?}", r.verdict),
            "cacheRead": r.cache_read, "cacheWrite": r.cache_write, "uncached": r.uncached,
            "output": r.output, "breakpoints": r.breakpoints, "response": r.response,
            "calls": calls, "directives": r.directives, "firstMarker": r.first_marker,
            "fullSends": r.full_sends,
        });
        let _ = writeln!(lines, "{line}");
        std::fs::write(
            dir.join(format!("req-{:04}.json", r.index)),
            r.body.as_slice(),
        )
        .expect("dump body");
    }
    std::fs::write(dir.join("requests.jsonl"), lines).expect("dump records");
    let ev: String = events.iter().map(|e| format!("{e}\n")).collect();
    std::fs::write(dir.join("events.jsonl"), ev).expect("dump events");
}

// ---------------------------------------------------------------- figures

/// What a session measured.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// User turns.
    pub turns: usize,
    /// Main requests (all verdicts).
    pub main: usize,
    /// Compaction summary requests (all verdicts).
    pub summary: usize,
    /// Collapse requests (all verdicts).
    pub collapses: usize,
    /// Turns that did not end with `end_turn`, or ended with an error.
    pub turns_failed: usize,
    /// Genuine prompt-too-long answers (the request was over the sim's window).
    pub ptl_genuine: usize,
    /// Forced prompt-too-long answers.
    pub ptl_forced: usize,
    /// Genuine prompt-too-long answers to summary requests.
    pub ptl_on_summary: usize,
    /// Requests over the sim's window after the first prompt-too-long answer.
    pub over_after_first_ptl: usize,
    /// Requests the sim refused as invalid on the wire.
    pub invalid: usize,
    /// Compactions installed, by kind (`finished` events).
    pub installed: BTreeMap<String, usize>,
    /// `failed` compaction events.
    pub compaction_failed: usize,
    /// `paused` compaction events.
    pub paused: usize,
    /// Fewest main requests between two summary requests.
    pub min_summary_gap: Option<usize>,
    /// Pairs of summary requests with at most 3 main requests between them.
    pub close_summaries: usize,
    /// Main requests that lack a directive given so far or the first-request marker.
    pub missing_directive: usize,
    /// The first such request, described.
    pub first_missing: Option<String>,
    /// Distinct duplicate whole-file sends (same file version twice in one main request).
    pub dup_sends: usize,
    /// Main requests carrying such a duplicate.
    pub requests_with_dup: usize,
    /// Share of answered main requests' input read from the cache.
    pub cache_read_share: f64,
    /// Mean of 0.1 × read + 1.25 × written + uncached over answered main requests.
    pub cost_per_main: f64,
    /// Same over summary requests.
    pub cost_per_summary: f64,
    /// `finished` events with tokensAfter ≥ tokensBefore.
    pub grew_events: usize,
    /// Installed summaries after which the next main request was not smaller than the main
    /// request before the summary.
    pub grew_real: usize,
    /// Summary requests whose compaction was then not installed (failed).
    pub summaries_wasted: usize,
    /// Edits/writes refused as "not read" or "read it again" although the content was in view.
    pub edit_refused: usize,
    /// Other failed edits/writes.
    pub edit_failed_other: usize,
    /// Edits and writes issued.
    pub edits: usize,
    /// Main requests in which the user's message of the current turn was gone.
    pub position_lost: usize,
    /// Largest main request (sim tokens).
    pub max_main_tokens: u64,
    /// Mean main request (sim tokens).
    pub mean_main_tokens: f64,
    /// Examples of what failed, for the assertion message.
    pub examples: Vec<String>,
    /// Wall-clock time.
    pub elapsed: Duration,
}

impl Figures {
    /// `finished` compactions in all.
    pub fn compactions(&self) -> usize {
        self.installed.values().sum()
    }
}

fn cost(r: &SimRecord) -> f64 {
    0.1 * r.cache_read as f64 + 1.25 * r.cache_write as f64 + r.uncached as f64
}

/// Computes the figures of a session.
pub fn figures(sess: &Session) -> Figures {
    let recs = &sess.records;
    let mut f = Figures {
        turns: sess.turns.len(),
        elapsed: sess.elapsed,
        ..Figures::default()
    };
    f.main = recs.iter().filter(|r| r.kind == Kind::Main).count();
    f.summary = recs.iter().filter(|r| r.kind == Kind::Summary).count();
    f.collapses = recs.iter().filter(|r| r.kind == Kind::Collapse).count();
    for t in &sess.turns {
        if t.error.is_some() || t.stop_reason.as_deref() != Some("end_turn") {
            f.turns_failed += 1;
            if f.examples.len() < 12 {
                f.examples.push(format!(
                    "turn {} failed: stop {:?}, error {}",
                    t.turn,
                    t.stop_reason,
                    t.error.as_ref().map_or("none".into(), |e| e.to_string())
                ));
            }
        }
    }
    // Prompt too long and the window.
    let mut first_ptl = None;
    for r in recs {
        match r.verdict {
            Verdict::PromptTooLong { forced } => {
                if forced {
                    f.ptl_forced += 1;
                } else {
                    f.ptl_genuine += 1;
                    if r.kind == Kind::Summary {
                        f.ptl_on_summary += 1;
                    }
                }
                if first_ptl.is_none() {
                    first_ptl = Some(r.index);
                    continue;
                }
            }
            Verdict::Invalid(ref why) => {
                f.invalid += 1;
                f.examples
                    .push(format!("request {} invalid on the wire: {why}", r.index));
            }
            Verdict::Answered => {}
        }
        if first_ptl.is_some_and(|p| r.index > p) && r.over_window {
            f.over_after_first_ptl += 1;
        }
    }
    // Compaction events.
    for (turn, e) in &sess.compactions {
        match e["phase"].as_str() {
            Some("finished") => {
                let kind = e["message"].as_str().unwrap_or("?").to_string();
                *f.installed.entry(kind).or_insert(0) += 1;
                let before = e["tokensBefore"].as_u64().unwrap_or(0);
                let after = e["tokensAfter"].as_u64().unwrap_or(0);
                if after >= before {
                    f.grew_events += 1;
                    f.examples.push(format!(
                        "turn {turn}: compaction grew the context: {before} → {after} ({e})"
                    ));
                }
            }
            Some("failed") => f.compaction_failed += 1,
            Some("paused") => f.paused += 1,
            _ => {}
        }
    }
    // Summary spacing.
    let mut last_summary: Option<usize> = None;
    let mut mains_since = 0usize;
    for (i, r) in recs.iter().enumerate() {
        match r.kind {
            Kind::Main => mains_since += 1,
            // A collapse is a lighter relief and a memory update no relief at all, neither a
            // compaction: the spacing rule is not theirs.
            Kind::Collapse | Kind::Memory => {}
            Kind::Summary => {
                if let Some(prev) = last_summary {
                    f.min_summary_gap = Some(
                        f.min_summary_gap
                            .map_or(mains_since, |g| g.min(mains_since)),
                    );
                    if mains_since <= 3 {
                        f.close_summaries += 1;
                        if f.close_summaries <= 4 {
                            f.examples.push(format!(
                                "summary requests {prev} and {i} only {mains_since} main requests apart"
                            ));
                        }
                    }
                }
                last_summary = Some(i);
                mains_since = 0;
            }
        }
    }
    // The real size around each summary that was installed: the summary requests of a turn
    // (a prompt-too-long retry belongs to the same attempt) matched in order with the
    // turn's compaction attempts that reached the summary phase.
    for t in &sess.turns {
        let attempts = summary_attempts(&sess.compactions, t.turn);
        let groups = summary_groups(recs, t.requests.clone());
        if attempts.len() != groups.len() {
            f.examples.push(format!(
                "turn {}: {} summary request groups but {} compaction attempts with a summary",
                t.turn,
                groups.len(),
                attempts.len()
            ));
            continue;
        }
        for (g, installed) in groups.iter().zip(attempts) {
            if !installed {
                f.summaries_wasted += 1;
                continue;
            }
            let first = g.start;
            let before = recs[..first].iter().rev().find(|x| x.kind == Kind::Main);
            let after = recs[g.end..].iter().find(|x| x.kind == Kind::Main);
            if let (Some(b), Some(a)) = (before, after)
                && a.tokens >= b.tokens
            {
                f.grew_real += 1;
                if f.grew_real <= 4 {
                    f.examples.push(format!(
                        "summary request {first}: main request {} had {} tokens, the next one {} has {} \
                         (the compacted context, as the summary request carried it: {})",
                        b.index, b.tokens, a.index, a.tokens, recs[first].tokens
                    ));
                }
            }
        }
    }
    // Directives and the first-request marker.
    for t in &sess.turns {
        for r in &recs[t.requests.clone()] {
            if r.kind != Kind::Main {
                continue;
            }
            let missing: Vec<u32> = t.directives.difference(&r.directives).copied().collect();
            if !missing.is_empty() || !r.first_marker {
                f.missing_directive += 1;
                if f.first_missing.is_none() {
                    f.first_missing = Some(format!(
                        "request {} (turn {}): missing directives {missing:?}{}",
                        r.index,
                        t.turn,
                        if r.first_marker {
                            ""
                        } else {
                            " and FIRST-REQUEST-MARKER"
                        }
                    ));
                }
            }
        }
    }
    // Duplicate whole-file sends.
    let mut dup_keys = HashSet::new();
    for r in recs.iter().filter(|r| r.kind == Kind::Main) {
        let mut by_mark: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (mark, key) in &r.full_sends {
            by_mark.entry(mark).or_default().push(key);
        }
        let mut any = false;
        for (mark, keys) in by_mark {
            for k in keys.iter().skip(1) {
                any = true;
                if dup_keys.insert(format!("{mark}|{k}")) && dup_keys.len() <= 3 {
                    f.examples.push(format!(
                        "request {}: {mark} sent {} times ({keys:?})",
                        r.index,
                        keys.len()
                    ));
                }
            }
        }
        if any {
            f.requests_with_dup += 1;
        }
    }
    f.dup_sends = dup_keys.len();
    // Cache and cost.
    let answered: Vec<&SimRecord> = recs
        .iter()
        .filter(|r| r.kind == Kind::Main && r.verdict == Verdict::Answered)
        .collect();
    let input: u64 = answered.iter().map(|r| r.input()).sum();
    let read: u64 = answered.iter().map(|r| r.cache_read).sum();
    f.cache_read_share = if input == 0 {
        0.0
    } else {
        read as f64 / input as f64
    };
    f.cost_per_main = if answered.is_empty() {
        0.0
    } else {
        answered.iter().map(|r| cost(r)).sum::<f64>() / answered.len() as f64
    };
    let summaries: Vec<&SimRecord> = recs
        .iter()
        .filter(|r| r.kind == Kind::Summary && r.verdict == Verdict::Answered)
        .collect();
    f.cost_per_summary = if summaries.is_empty() {
        0.0
    } else {
        summaries.iter().map(|r| cost(r)).sum::<f64>() / summaries.len() as f64
    };
    let mains: Vec<&SimRecord> = recs.iter().filter(|r| r.kind == Kind::Main).collect();
    f.max_main_tokens = mains.iter().map(|r| r.tokens).max().unwrap_or(0);
    f.mean_main_tokens = if mains.is_empty() {
        0.0
    } else {
        mains.iter().map(|r| r.tokens as f64).sum::<f64>() / mains.len() as f64
    };
    f.position_lost = mains.iter().filter(|r| !r.position_from_request).count();
    // Edits refused although the file's content was in the request that issued them.
    let issued: BTreeMap<&str, (&SimRecord, bool)> = recs
        .iter()
        .flat_map(|r| r.calls.iter().map(move |c| (c, r)))
        .filter(|(c, _)| c.name == "edit_file" || c.name == "write_file")
        .map(|(c, r)| (c.id.as_str(), (r, c.content_visible)))
        .collect();
    f.edits = issued.len();
    for t in &sess.tools {
        let Some((r, visible)) = issued.get(t.id.as_str()) else {
            continue;
        };
        if !t.is_error {
            continue;
        }
        let not_read = t.output.contains("has not been read in this session")
            || t.output.contains("read it again before you");
        if not_read && *visible {
            f.edit_refused += 1;
            if f.edit_refused <= 3 {
                f.examples.push(format!(
                    "turn {}: {} {} refused although the file was in request {}: {}",
                    t.turn, t.name, t.id, r.index, t.output
                ));
            }
        } else {
            f.edit_failed_other += 1;
        }
    }
    f
}

/// Per compaction attempt of a turn that reached the summary phase: whether it was installed.
fn summary_attempts(compactions: &[(u32, Value)], turn: u32) -> Vec<bool> {
    let mut out = Vec::new();
    let mut summary = false;
    for (t, e) in compactions {
        if *t != turn {
            continue;
        }
        match e["phase"].as_str() {
            Some("started") => summary = false,
            Some("summary") => summary = true,
            Some("finished") if summary => out.push(true),
            Some("failed") if summary => out.push(false),
            _ => {}
        }
    }
    out
}

/// Runs of consecutive summary requests within `range`.
fn summary_groups(recs: &[SimRecord], range: Range<usize>) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for i in range {
        if recs[i].kind != Kind::Summary {
            continue;
        }
        match out.last_mut() {
            Some(g) if g.end == i => g.end = i + 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

/// The acceptance criteria the figures break, one line each (empty: all met).
pub fn violations(s: &Scenario, f: &Figures) -> Vec<String> {
    let mut v = Vec::new();
    if f.turns_failed > 0 {
        v.push(format!("{} of {} turns failed", f.turns_failed, f.turns));
    }
    if f.missing_directive > 0 {
        v.push(format!(
            "{} of {} main requests lack a directive or the first-request marker; first: {}",
            f.missing_directive,
            f.main,
            f.first_missing.as_deref().unwrap_or("?")
        ));
    }
    if f.ptl_genuine > 1 {
        v.push(format!(
            "{} genuine prompt-too-long answers (at most 1)",
            f.ptl_genuine
        ));
    }
    if f.over_after_first_ptl > 0 {
        v.push(format!(
            "{} requests over the provider's window after the first prompt-too-long",
            f.over_after_first_ptl
        ));
    }
    if f.grew_events + f.grew_real > 0 {
        v.push(format!(
            "compactions grew the context: {} by their events, {} by the real request sizes",
            f.grew_events, f.grew_real
        ));
    }
    if f.close_summaries > 0 {
        v.push(format!(
            "{} summary requests within 3 main requests of the previous one (min gap {:?})",
            f.close_summaries, f.min_summary_gap
        ));
    }
    if f.dup_sends > 0 {
        v.push(format!(
            "{} duplicate whole-file sends (in {} main requests)",
            f.dup_sends, f.requests_with_dup
        ));
    }
    if f.edit_refused > 0 {
        v.push(format!(
            "{} edits/writes refused as unread although the file was in the view",
            f.edit_refused
        ));
    }
    if f.invalid > 0 {
        v.push(format!("{} requests invalid on the wire", f.invalid));
    }
    if f.cache_read_share < s.cache_target {
        v.push(format!(
            "cache read share {:.1} % < {:.0} %",
            f.cache_read_share * 100.0,
            s.cache_target * 100.0
        ));
    }
    v
}

/// Properties of the harness itself: the session is long enough to mean something.
pub fn check_harness(s: &Scenario, f: &Figures) {
    assert!(f.turns >= 40, "{}: only {} turns", s.name, f.turns);
    assert!(
        f.main + f.summary >= 200,
        "{}: only {} requests",
        s.name,
        f.main + f.summary
    );
}

/// The figures as one table (one row per scenario).
pub fn table(rows: &[(Scenario, Figures)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| scenario | requests main/summary | turns failed | PTL answers (genuine+forced) | over window after 1st PTL | collapses | min gap | missing directive | dup file sends | cache read % | cost-eq/main | compactions grew (events/real) | edits refused | compactions trim/summary/handoff | secs |"
    );
    let _ = writeln!(
        out,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for (s, f) in rows {
        let _ = writeln!(
            out,
            "| {} | {}/{} | {}/{} | {}+{} | {} | {} | {} | {}/{} | {} | {:.1} | {:.0} | {}/{} | {}/{} | {}/{}/{} | {:.0} |",
            s.name,
            f.main,
            f.summary,
            f.turns_failed,
            f.turns,
            f.ptl_genuine,
            f.ptl_forced,
            f.over_after_first_ptl,
            f.collapses,
            f.min_summary_gap.map_or("-".to_string(), |g| g.to_string()),
            f.missing_directive,
            f.main,
            f.dup_sends,
            f.cache_read_share * 100.0,
            f.cost_per_main,
            f.grew_events,
            f.grew_real,
            f.edit_refused,
            f.edits,
            f.installed.get("trim").copied().unwrap_or(0),
            f.installed.get("summary").copied().unwrap_or(0),
            f.installed.get("handoff").copied().unwrap_or(0),
            f.elapsed.as_secs_f64(),
        );
    }
    out
}

/// More figures per scenario, for the reader of the bench output.
pub fn details(s: &Scenario, f: &Figures) -> String {
    format!(
        "{}: {} — window {}/{}; main tokens mean {:.0} max {}; cost-eq/summary {:.0}; \
         prompt-too-long on summary requests {}; \
         compaction failed {} paused {}; summary attempts not installed {}; invalid {}; \
         turn position lost in {} main requests; other edit failures {}",
        s.name,
        s.what,
        s.config_window,
        s.sim_window,
        f.mean_main_tokens,
        f.max_main_tokens,
        f.cost_per_summary,
        f.ptl_on_summary,
        f.compaction_failed,
        f.paused,
        f.summaries_wasted,
        f.invalid,
        f.position_lost,
        f.edit_failed_other,
    )
}

/// Runs a scenario and asserts every acceptance criterion.
pub fn assert_scenario(name: &str) {
    let s = scenario(name);
    let sess = run(&s);
    let f = figures(&sess);
    check_harness(&s, &f);
    let v = violations(&s, &f);
    if std::env::var_os("LONG_SESSION_TABLE").is_some() {
        println!("{}", table(&[(s.clone(), f.clone())]));
    }
    assert!(
        v.is_empty(),
        "{name}: {} criteria not met:\n- {}\n\n{}\n{}\nexamples:\n{}",
        v.len(),
        v.join("\n- "),
        table(&[(s.clone(), f.clone())]),
        details(&s, &f),
        f.examples.join("\n")
    );
}

/// The harness itself, on the baseline scenario: it runs long enough, the sim classifies and
/// accounts every request consistently, and the wire stays valid. Not the acceptance criteria.
#[test]
fn long_session_harness_sanity() {
    let s = scenario("a-40k");
    let sess = run(&s);
    let f = figures(&sess);
    check_harness(&s, &f);
    assert_eq!(f.invalid, 0, "{:?}", f.examples);
    assert_eq!(f.turns_failed, 0, "{:?}", f.examples);
    assert!(
        sess.records.iter().any(|r| r.kind != Kind::Main),
        "the session reaches a summary or a collapse"
    );
    let first = &sess.records[0];
    assert!(first.first_marker && first.kind == Kind::Main);
    for r in sess
        .records
        .iter()
        .filter(|r| r.verdict == Verdict::Answered)
    {
        assert_eq!(r.input(), r.tokens, "request {}", r.index);
        assert!(r.tokens <= s.sim_window);
    }
    // Every turn asked the sim for its scripted number of requests (nothing was lost).
    for t in &sess.turns {
        let mains = sess.records[t.requests.clone()]
            .iter()
            .filter(|r| r.kind == Kind::Main && r.verdict == Verdict::Answered)
            .count();
        assert_eq!(
            mains,
            crate::sim_provider::turn_length(s.seed, t.turn),
            "turn {}",
            t.turn
        );
    }
}

#[test]
fn long_session_a_baseline_40k() {
    assert_scenario("a-40k");
}

#[test]
fn long_session_a_baseline_60k() {
    assert_scenario("a-60k");
}

#[test]
fn long_session_b_large_file_every_turn() {
    assert_scenario("b-40k");
}

#[test]
fn long_session_c_forced_prompt_too_long() {
    assert_scenario("c-40k");
}

#[test]
fn long_session_d_provider_window_smaller_than_configured() {
    assert_scenario("d-60k/40k");
}
