//! Session-cost benchmark: the same scripted long session, one process per user turn, through
//! `garuda exec --continue` and (when given) Claude Code's `claude -p --resume`, against the
//! simulated provider of `tests/it/sim_provider.rs`, which enforces its window and the prompt
//! cache's prefix rules. Per agent and window: requests, input tokens, the share read from the
//! cache, cost-equivalent tokens (0.1 × read + 1.25 × written + uncached), prompt-too-long
//! refusals, the side requests' cache shares, directives lost, wall time per turn and peak RSS.
//! Side requests are summaries, collapses and Garuda's session-memory updates ("memory req"
//! counts the last apart); "summary waits" counts the summary and collapse requests, refused
//! ones included, that the turn waited for: the sim answers side requests 300 ms late, and a
//! wait is one after which the turn's next main request came only once it was answered. One
//! sent beside the turn (the next main request came at once) or after the turn's last main
//! request (a memory update, a collapse asked ahead) is no wait.
//!
//! `cargo bench --bench session_cost -- [--turns N] [--windows 200000,40000]
//! [--claude PATH] [--large] [--garuda-context "key = value; …"] [--idle-after N]
//! [--idle-secs S] [--cache-ttl-secs T]`; `benches/session_cost.sh` installs Claude Code from
//! the npm registry and passes it. Offline; the sim is seeded, so token figures repeat run to
//! run.
//!
//! The idle gap: `--idle-after N` sleeps `--idle-secs S` (default 8) between turn N and turn
//! N + 1 in both legs, a user who went away mid-session; the session resumes in a new process
//! either way. `--cache-ttl-secs T` gives the sim's prompt cache a lifetime of T seconds (an
//! entry expires T after its last write or read; default: none) for both legs and tells Garuda
//! the same (`cache_ttl_secs = T` under `[context]`), so a gap longer than T finds the cache
//! cold. "after the gap" is what the first main request after the gap wrote to the cache (the
//! prefix it had to write again) and the cost-equivalent tokens of every request of turn N + 1;
//! s/turn leaves the gap out.
// Benchmark code: a panic is a failure with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "../tests/it/client.rs"]
mod client;
#[path = "../tests/it/long_session.rs"]
mod long_session;
#[path = "../tests/it/mock_model.rs"]
mod mock_model;
#[path = "../tests/it/sim_provider.rs"]
mod sim_provider;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use sim_provider::{Dialect, Kind, Sim, SimConfig, SimRecord, Verdict};

/// The model both agents are told to use.
const MODEL: &str = "claude-sonnet-4-5";

/// What every leg of a run shares.
struct Run {
    turns: u32,
    large: bool,
    /// The idle gap: after this turn (when a later turn follows), sleep `idle`.
    idle_after: Option<u32>,
    idle: Duration,
    /// The sim's prompt-cache lifetime, told to Garuda too.
    cache_ttl_secs: Option<u64>,
    /// Lines of Garuda's `[context]` table.
    context: String,
}

/// One agent's run of the session.
struct Leg {
    agent: String,
    window: u64,
    records: Vec<SimRecord>,
    turns: u32,
    failed_turns: u32,
    /// Wall time of the turns, the idle gap left out.
    wall: Duration,
    peak_rss_kib: u64,
    /// Requests before the idle gap and requests by the end of the turn after it.
    gap: Option<(usize, usize)>,
    /// Each turn's process: the sim's request count when it started and when it ended.
    processes: Vec<(usize, usize)>,
}

fn cost(r: &SimRecord) -> f64 {
    0.1 * r.cache_read as f64 + 1.25 * r.cache_write as f64 + r.uncached as f64
}

fn answered(r: &SimRecord) -> bool {
    r.verdict == Verdict::Answered
}

/// The scenario the session's workspace and scripted model come from.
fn scenario(window: u64, turns: u32, large: bool) -> long_session::Scenario {
    long_session::Scenario {
        name: "session-cost",
        what: "one process per turn",
        config_window: window,
        sim_window: window,
        turns,
        large_every_turn: large,
        force_ptl_after_main: None,
        seed: 0x5EED_0026,
        cache_target: 0.0,
    }
}

fn sim_for(
    ws: &long_session::Workspace,
    s: &long_session::Scenario,
    dialect: Dialect,
    run: &Run,
) -> Sim {
    Sim::start(SimConfig {
        dialect,
        side_delay_ms: SIDE_DELAY_MS,
        cache_ttl_ms: run.cache_ttl_secs.map(|t| t * 1000),
        ..long_session::sim_config(s, ws)
    })
}

/// Runs `cmd` under `/usr/bin/time` when it exists: (exit success, stdout, peak RSS in KiB).
fn run_timed(mut cmd: Command, rss_file: &Path) -> (bool, String, u64) {
    let timed = Path::new("/usr/bin/time").exists();
    let mut c = if timed {
        let mut t = Command::new("/usr/bin/time");
        t.arg("-f").arg("%M").arg("-o").arg(rss_file);
        t.arg(cmd.get_program());
        t.args(cmd.get_args());
        if let Some(d) = cmd.get_current_dir() {
            t.current_dir(d);
        }
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => t.env(k, v),
                None => t.env_remove(k),
            };
        }
        t
    } else {
        std::mem::replace(&mut cmd, Command::new("true"))
    };
    let out = c
        .stdin(std::process::Stdio::null())
        .output()
        .expect("spawn the agent");
    let rss = std::fs::read_to_string(rss_file)
        .ok()
        .and_then(|t| t.lines().last().and_then(|l| l.trim().parse().ok()))
        .unwrap_or(0);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        rss,
    )
}

fn garuda_leg(window: u64, run: &Run) -> Leg {
    let turns = run.turns;
    let s = scenario(window, turns, run.large);
    let ws = long_session::make_workspace(&s);
    let sim = sim_for(&ws, &s, Dialect::Garuda, run);
    let mut context = run.context.clone();
    if let Some(t) = run.cache_ttl_secs
        && !context.contains("cache_ttl_secs")
    {
        context.push_str(&format!("\ncache_ttl_secs = {t}"));
    }
    let home = tempfile::tempdir().expect("home");
    let conf = home.path().join("config/garuda");
    std::fs::create_dir_all(&conf).expect("mkdir");
    std::fs::write(
        conf.join("config.toml"),
        format!(
            "model = \"anthropic/{MODEL}\"\n[network]\nmax_retries = 2\nidle_timeout_ms = 20000\n\
             [context]\n{context}\n[models.\"anthropic/{MODEL}\"]\ncontextWindow = {window}\n"
        ),
    )
    .expect("config");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_garuda"));
    let rss_file = home.path().join("rss");
    let (mut failed, mut peak) = (0, 0);
    let (mut gap, mut gap_start, mut idle) = (None, None, Duration::ZERO);
    let mut processes = Vec::new();
    let started = Instant::now();
    for turn in 1..=turns {
        let mut cmd = Command::new(&bin);
        client::isolated_env(&mut cmd, home.path());
        // The product's default (the test harness turns it off for scripted mocks).
        cmd.env("GARUDA_SESSION_MEMORY", "on");
        for (k, v) in sim.env() {
            cmd.env(k, v);
        }
        cmd.arg("exec").arg("--policy").arg("full-auto");
        if turn > 1 {
            cmd.arg("--continue");
        }
        cmd.arg(ws.dir.path()).arg(long_session::user_message(turn));
        let before = sim.count();
        let (ok, _, rss) = run_timed(cmd, &rss_file);
        processes.push((before, sim.count()));
        failed += u32::from(!ok);
        peak = peak.max(rss);
        note_gap(run, turn, &sim, &mut gap_start, &mut gap, &mut idle);
    }
    Leg {
        agent: "garuda exec --continue".into(),
        window,
        records: sim.records(),
        turns,
        failed_turns: failed,
        wall: started.elapsed().saturating_sub(idle),
        peak_rss_kib: peak,
        gap,
        processes,
    }
}

/// After `turn`: marks where the turn after the gap ended, or sleeps out the gap when it
/// follows this turn.
fn note_gap(
    run: &Run,
    turn: u32,
    sim: &Sim,
    gap_start: &mut Option<usize>,
    gap: &mut Option<(usize, usize)>,
    idle: &mut Duration,
) {
    if let Some(start) = gap_start.take() {
        *gap = Some((start, sim.count()));
    }
    if run.idle_after == Some(turn) && turn < run.turns {
        *gap_start = Some(sim.count());
        std::thread::sleep(run.idle);
        *idle += run.idle;
    }
}

fn claude_leg(claude: &Path, window: u64, run: &Run) -> Leg {
    let turns = run.turns;
    let s = scenario(window, turns, run.large);
    let ws = long_session::make_workspace(&s);
    let root = std::fs::canonicalize(ws.dir.path()).expect("root");
    let root_s = root.to_string_lossy().into_owned();
    let sim = sim_for(&ws, &s, Dialect::ClaudeCode { root: root_s }, run);
    let home = tempfile::tempdir().expect("home");
    let rss_file = home.path().join("rss");
    let (mut failed, mut peak) = (0, 0);
    let (mut gap, mut gap_start, mut idle) = (None, None, Duration::ZERO);
    let mut processes = Vec::new();
    let mut session: Option<String> = None;
    let started = Instant::now();
    for turn in 1..=turns {
        let mut cmd = Command::new(claude);
        cmd.current_dir(&root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("IS_SANDBOX", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_AUTO_COMPACT_WINDOW", window.to_string());
        for (k, v) in sim.env() {
            cmd.env(k, v);
        }
        cmd.arg("-p")
            .arg(long_session::user_message(turn))
            .arg("--output-format")
            .arg("json")
            .arg("--model")
            .arg(MODEL)
            .arg("--dangerously-skip-permissions");
        if let Some(id) = &session {
            cmd.arg("--resume").arg(id);
        }
        let before = sim.count();
        let (ok, out, rss) = run_timed(cmd, &rss_file);
        processes.push((before, sim.count()));
        let v: Value = serde_json::from_str(out.trim()).unwrap_or(Value::Null);
        if session.is_none() {
            session = v["session_id"].as_str().map(str::to_string);
        }
        failed += u32::from(!ok || v["is_error"] == true);
        peak = peak.max(rss);
        note_gap(run, turn, &sim, &mut gap_start, &mut gap, &mut idle);
    }
    Leg {
        agent: "claude -p --resume".into(),
        window,
        records: sim.records(),
        turns,
        failed_turns: failed,
        wall: started.elapsed().saturating_sub(idle),
        peak_rss_kib: peak,
        gap,
        processes,
    }
}

/// The figures of one leg.
#[derive(Default)]
struct Figures {
    main: usize,
    /// Summaries, collapses and memory updates.
    side: usize,
    /// Memory updates (counted in `side` too).
    memory: usize,
    /// Summary and collapse requests, refused ones included: the user waits for each.
    summary_waits: usize,
    input: u64,
    read: u64,
    cost: f64,
    output: u64,
    ptl: usize,
    /// The smallest share of its input a side request read from the cache.
    side_min_read: Option<f64>,
    side_cost: f64,
    /// Main requests missing a directive given in an earlier turn, or the first request.
    lost: usize,
    /// Main requests that read less than the previous main request's whole prefix from the
    /// cache: a relief (or the agent) rewrote the prefix.
    breaks: usize,
    /// Fewest main requests between two breaks.
    min_break_gap: Option<usize>,
    /// Tokens the requests after the breaks wrote to the cache (the rewritten prefix).
    rewritten: u64,
    /// After the idle gap: what the first answered main request wrote to the cache, and the
    /// cost-equivalent tokens of the turn after the gap.
    after_gap: Option<(u64, f64)>,
}

/// A summary or collapse request the person waited for: its turn's process sent a main
/// request after it only once it was answered (the sim answers side requests
/// `SIDE_DELAY_MS` late). One sent beside the turn (Garuda's collapse asked while the turn
/// goes on) is followed by the turn's next request at once; one sent after the turn's last
/// main request (asked ahead, behind the answer) by none.
fn waited(leg: &Leg, index: usize) -> bool {
    let Some(&(_, end)) = leg
        .processes
        .iter()
        .find(|&&(start, end)| start <= index && index < end)
    else {
        return true;
    };
    let Some(side) = leg.records.iter().find(|r| r.index == index) else {
        return true;
    };
    let answered_at = side.arrived + Duration::from_millis(SIDE_DELAY_MS);
    leg.records
        .iter()
        .filter(|r| r.index > index && r.index < end && r.kind == Kind::Main)
        .min_by_key(|r| r.arrived)
        .is_some_and(|next| next.arrived >= answered_at)
}

/// How late the sim answers a summary, collapse or memory request.
const SIDE_DELAY_MS: u64 = 300;

fn figures(leg: &Leg) -> Figures {
    let mut f = Figures::default();
    let (mut prev_main, mut main_index, mut last_break): (Option<u64>, usize, Option<usize>) =
        (None, 0, None);
    if let Some((start, end)) = leg.gap {
        let after = &leg.records[start.min(leg.records.len())..end.min(leg.records.len())];
        let write = after
            .iter()
            .find(|r| r.kind == Kind::Main && answered(r))
            .map_or(0, |r| r.cache_write);
        let turn_cost = after.iter().filter(|r| answered(r)).map(cost).sum();
        f.after_gap = Some((write, turn_cost));
    }
    for r in &leg.records {
        if matches!(r.verdict, Verdict::PromptTooLong { .. }) {
            f.ptl += 1;
        }
        if matches!(r.kind, Kind::Summary | Kind::Collapse) && waited(leg, r.index) {
            f.summary_waits += 1;
        }
        if !answered(r) {
            continue;
        }
        f.input += r.input();
        f.read += r.cache_read;
        f.cost += cost(r);
        f.output += r.output;
        match r.kind {
            Kind::Main => {
                f.main += 1;
                main_index += 1;
                // A little slack: the last marker may sit before the request's very end.
                if let Some(p) = prev_main
                    && r.cache_read + 64 < p
                {
                    f.breaks += 1;
                    f.rewritten += r.cache_write;
                    if let Some(b) = last_break {
                        let gap = main_index - b;
                        f.min_break_gap = Some(f.min_break_gap.map_or(gap, |m| m.min(gap)));
                    }
                    last_break = Some(main_index);
                }
                prev_main = Some(r.tokens);
                let given: BTreeSet<u32> = (1..=r.turn.unwrap_or(0))
                    .filter_map(long_session::directive_of)
                    .collect();
                if !given.is_subset(&r.directives) || !r.first_marker {
                    f.lost += 1;
                }
            }
            Kind::Summary | Kind::Collapse | Kind::Memory => {
                f.side += 1;
                f.memory += usize::from(r.kind == Kind::Memory);
                f.side_cost += cost(r);
                let share = r.cache_read as f64 / r.input().max(1) as f64;
                f.side_min_read = Some(f.side_min_read.map_or(share, |m: f64| m.min(share)));
            }
        }
    }
    f
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let turns: u32 = value("--turns").map_or(40, |v| v.parse().expect("--turns N"));
    let windows: Vec<u64> = value("--windows")
        .unwrap_or_else(|| "200000,40000".into())
        .split(',')
        .map(|w| w.trim().parse().expect("--windows W,W"))
        .collect();
    let claude = value("--claude").map(PathBuf::from);
    let run = Run {
        turns,
        large: args.iter().any(|a| a == "--large"),
        idle_after: value("--idle-after").map(|v| v.parse().expect("--idle-after N")),
        idle: Duration::from_secs(
            value("--idle-secs").map_or(8, |v| v.parse().expect("--idle-secs S")),
        ),
        cache_ttl_secs: value("--cache-ttl-secs").map(|v| v.parse().expect("--cache-ttl-secs T")),
        // Lines for Garuda's `[context]` table, e.g. "collapse_threshold = 0.6" (experiments).
        context: value("--garuda-context")
            .unwrap_or_default()
            .replace(';', "\n"),
    };
    let mut rows = Vec::new();
    for &w in &windows {
        eprintln!("garuda, window {w}, {turns} turns");
        let g = garuda_leg(w, &run);
        let c = claude.as_ref().map(|c| {
            eprintln!("claude code, window {w}, {turns} turns");
            claude_leg(c, w, &run)
        });
        rows.push((g, c));
    }
    let gap = match run.idle_after {
        Some(n) if n < turns => format!("{} s after turn {n}", run.idle.as_secs()),
        _ => "none".into(),
    };
    let ttl = run
        .cache_ttl_secs
        .map_or("none (no expiry)".into(), |t| format!("{t} s"));
    println!("{turns} turns; idle gap: {gap}; prompt-cache TTL: {ttl}\n");
    println!(
        "| agent | window | main req | side req | memory req | summary waits | input tokens | cache read | cost-eq tokens | output | \
         per request | side cost-eq | side min read | prefix breaks (min gap, rewritten) | after the gap: first main write, turn cost-eq | \
         PTL | lost directives | failed turns | s/turn | peak RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut ratios = Vec::new();
    for (g, c) in &rows {
        let gf = figures(g);
        row(g, &gf);
        if let Some(c) = c {
            let cf = figures(c);
            row(c, &cf);
            ratios.push((g.window, gf.cost / cf.cost.max(1.0)));
        }
    }
    for (w, r) in ratios {
        println!("\nwindow {w}: garuda / claude code cost-equivalent tokens = {r:.2}");
    }
}

/// With `SESSION_COST_DUMP=DIR`: every request body and the sim's answer line, per leg.
fn dump(leg: &Leg) {
    let Some(dir) = std::env::var_os("SESSION_COST_DUMP") else {
        return;
    };
    let dir = Path::new(&dir).join(format!(
        "{}-{}",
        leg.agent.split_whitespace().next().unwrap_or("agent"),
        leg.window
    ));
    std::fs::create_dir_all(&dir).expect("dump dir");
    for r in &leg.records {
        std::fs::write(dir.join(format!("{:05}.json", r.index)), r.body.as_slice()).expect("dump");
        std::fs::write(
            dir.join(format!("{:05}.txt", r.index)),
            format!(
                "{:?} turn {:?} step {} tokens {} read {} write {} uncached {}\n{}\n",
                r.kind,
                r.turn,
                r.step,
                r.tokens,
                r.cache_read,
                r.cache_write,
                r.uncached,
                r.response
            ),
        )
        .expect("dump");
    }
}

fn row(leg: &Leg, f: &Figures) {
    dump(leg);
    println!(
        "| {} | {} | {} | {} | {} | {} | {:.2} M | {:.1} % | {:.2} M | {:.0} k | {:.0} | {:.0} | {} | {} ({}, {:.0} k) | {} | {} | {} | {} | {:.2} | {} MiB |",
        leg.agent,
        leg.window,
        f.main,
        f.side,
        f.memory,
        f.summary_waits,
        f.input as f64 / 1e6,
        100.0 * f.read as f64 / f.input.max(1) as f64,
        f.cost / 1e6,
        f.output as f64 / 1e3,
        f.cost / (f.main + f.side).max(1) as f64,
        f.side_cost,
        f.side_min_read
            .map_or("-".into(), |m| format!("{:.1} %", 100.0 * m)),
        f.breaks,
        f.min_break_gap.map_or("-".into(), |g| g.to_string()),
        f.rewritten as f64 / 1e3,
        f.after_gap.map_or("-".into(), |(w, c)| format!(
            "{:.1} k, {:.1} k",
            w as f64 / 1e3,
            c / 1e3
        )),
        f.ptl,
        f.lost,
        leg.failed_turns,
        leg.wall.as_secs_f64() / leg.turns.max(1) as f64,
        leg.peak_rss_kib / 1024,
    );
}
