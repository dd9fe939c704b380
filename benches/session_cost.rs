//! Session-cost benchmark: the same scripted long session, one process per user turn, through
//! `garuda exec --continue` and (when given) Claude Code's `claude -p --resume`, against the
//! simulated provider of `tests/it/sim_provider.rs`, which enforces its window and the prompt
//! cache's prefix rules. Per agent and window: requests, input tokens, the share read from the
//! cache, cost-equivalent tokens (0.1 × read + 1.25 × written + uncached), prompt-too-long
//! refusals, the side requests' cache shares, directives lost, wall time per turn and peak RSS.
//!
//! `cargo bench --bench session_cost -- [--turns N] [--windows 200000,40000]
//! [--claude PATH] [--large] [--garuda-context "key = value; …"]`; `benches/session_cost.sh` installs Claude Code from the npm
//! registry and passes it. Offline; the sim is seeded, so token figures repeat run to run.
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

/// One agent's run of the session.
struct Leg {
    agent: String,
    window: u64,
    records: Vec<SimRecord>,
    turns: u32,
    failed_turns: u32,
    wall: Duration,
    peak_rss_kib: u64,
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

fn sim_for(ws: &long_session::Workspace, s: &long_session::Scenario, dialect: Dialect) -> Sim {
    Sim::start(SimConfig {
        dialect,
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

fn garuda_leg(window: u64, turns: u32, large: bool, context: &str) -> Leg {
    let s = scenario(window, turns, large);
    let ws = long_session::make_workspace(&s);
    let sim = sim_for(&ws, &s, Dialect::Garuda);
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
    let started = Instant::now();
    for turn in 1..=turns {
        let mut cmd = Command::new(&bin);
        client::isolated_env(&mut cmd, home.path());
        for (k, v) in sim.env() {
            cmd.env(k, v);
        }
        cmd.arg("exec").arg("--policy").arg("full-auto");
        if turn > 1 {
            cmd.arg("--continue");
        }
        cmd.arg(ws.dir.path()).arg(long_session::user_message(turn));
        let (ok, _, rss) = run_timed(cmd, &rss_file);
        failed += u32::from(!ok);
        peak = peak.max(rss);
    }
    Leg {
        agent: "garuda exec --continue".into(),
        window,
        records: sim.records(),
        turns,
        failed_turns: failed,
        wall: started.elapsed(),
        peak_rss_kib: peak,
    }
}

fn claude_leg(claude: &Path, window: u64, turns: u32, large: bool) -> Leg {
    let s = scenario(window, turns, large);
    let ws = long_session::make_workspace(&s);
    let root = std::fs::canonicalize(ws.dir.path()).expect("root");
    let root_s = root.to_string_lossy().into_owned();
    let sim = sim_for(&ws, &s, Dialect::ClaudeCode { root: root_s });
    let home = tempfile::tempdir().expect("home");
    let rss_file = home.path().join("rss");
    let (mut failed, mut peak) = (0, 0);
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
        let (ok, out, rss) = run_timed(cmd, &rss_file);
        let v: Value = serde_json::from_str(out.trim()).unwrap_or(Value::Null);
        if session.is_none() {
            session = v["session_id"].as_str().map(str::to_string);
        }
        failed += u32::from(!ok || v["is_error"] == true);
        peak = peak.max(rss);
    }
    Leg {
        agent: "claude -p --resume".into(),
        window,
        records: sim.records(),
        turns,
        failed_turns: failed,
        wall: started.elapsed(),
        peak_rss_kib: peak,
    }
}

/// The figures of one leg.
#[derive(Default)]
struct Figures {
    main: usize,
    side: usize,
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
}

fn figures(leg: &Leg) -> Figures {
    let mut f = Figures::default();
    let (mut prev_main, mut main_index, mut last_break): (Option<u64>, usize, Option<usize>) =
        (None, 0, None);
    for r in &leg.records {
        if matches!(r.verdict, Verdict::PromptTooLong { .. }) {
            f.ptl += 1;
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
            Kind::Summary | Kind::Collapse => {
                f.side += 1;
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
    let large = args.iter().any(|a| a == "--large");
    // Lines for Garuda's `[context]` table, e.g. "collapse_threshold = 0.6" (experiments).
    let context = value("--garuda-context")
        .unwrap_or_default()
        .replace(';', "\n");
    let mut rows = Vec::new();
    for &w in &windows {
        eprintln!("garuda, window {w}, {turns} turns");
        let g = garuda_leg(w, turns, large, &context);
        let c = claude.as_ref().map(|c| {
            eprintln!("claude code, window {w}, {turns} turns");
            claude_leg(c, w, turns, large)
        });
        rows.push((g, c));
    }
    println!(
        "| agent | window | main req | side req | input tokens | cache read | cost-eq tokens | output | \
         per request | side cost-eq | side min read | prefix breaks (min gap, rewritten) | PTL | lost directives | failed turns | \
         s/turn | peak RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
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
        "| {} | {} | {} | {} | {:.2} M | {:.1} % | {:.2} M | {:.0} k | {:.0} | {:.0} | {} | {} ({}, {:.0} k) | {} | {} | {} | {:.2} | {} MiB |",
        leg.agent,
        leg.window,
        f.main,
        f.side,
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
        f.ptl,
        f.lost,
        leg.failed_turns,
        leg.wall.as_secs_f64() / leg.turns.max(1) as f64,
        leg.peak_rss_kib / 1024,
    );
}
