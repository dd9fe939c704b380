//! The sandbox's cost per command: `bash -c true` and a small real command, run unconfined
//! (environment allow-list, process group) and in the sandbox (bubblewrap, namespaces, the
//! mount plan), one after the other, as the `bash` tool runs them. Also the one-off probe.
//!
//! Run with `cargo bench --bench sandbox` (needs bubblewrap: `apt-get install bubblewrap`).
// Test and benchmark code: a panic is a failure with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::{Duration, Instant};

use garuda_core::sandbox::{CommandRunner, SandboxSettings, probe_uncached};

const RUNS: usize = 60;

fn stats(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mean = v.iter().map(|d| ms(*d)).sum::<f64>() / v.len() as f64;
    (ms(v[v.len() / 2]), mean, ms(v[v.len() * 9 / 10]))
}

async fn time(runner: &CommandRunner, script: &str) -> Vec<Duration> {
    let mut out = Vec::with_capacity(RUNS);
    for i in 0..RUNS + 5 {
        let start = Instant::now();
        let mut cmd = runner.command("bash", &["-c", script]).unwrap();
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let mut child = cmd.spawn().await.unwrap();
        assert!(child.wait().await.unwrap().success());
        // The first runs warm the page cache.
        if i >= 5 {
            out.push(start.elapsed());
        }
    }
    out
}

fn main() {
    let t = Instant::now();
    let state = probe_uncached();
    let probe_ms = t.elapsed().as_secs_f64() * 1000.0;
    assert!(
        state.available(),
        "no sandbox on this machine: {:?}",
        state.reason
    );
    // Outside /tmp, as a checkout usually is.
    let root = tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/target")).unwrap();
    let off = SandboxSettings {
        enabled: false,
        ..SandboxSettings::default()
    };
    let unconfined = CommandRunner::new(&state, &off, root.path()).unwrap();
    let confined = CommandRunner::new(&state, &SandboxSettings::default(), root.path()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "sandbox: {} {} (probe {probe_ms:.1} ms), {RUNS} runs each",
        state.mode.name(),
        state
            .bwrap
            .as_ref()
            .map(|b| b.version.as_str())
            .unwrap_or("?")
    );
    println!(
        "{:<34} {:>10} {:>10} {:>10}",
        "command", "median ms", "mean ms", "p90 ms"
    );
    for (label, script) in [
        ("true", "true"),
        (
            "ls + grep in the root",
            "ls -la . >/dev/null; grep -rq x . || true",
        ),
    ] {
        for (mode, runner) in [("unconfined", &unconfined), ("sandboxed", &confined)] {
            let (median, mean, p90) = stats(rt.block_on(time(runner, script)));
            println!(
                "{:<34} {median:>10.2} {mean:>10.2} {p90:>10.2}",
                format!("{label} ({mode})")
            );
        }
    }
}
