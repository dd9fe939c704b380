//! Fidelity benchmark: the long sessions of `tests/it/fidelity.rs` (probes planted, every
//! kind of relief chained) through the real binary against the simulated provider; prints the
//! share of later requests that still carry each probe class, per window.
//!
//! `cargo bench --bench fidelity [-- NAME...]` (a name filters scenarios by substring).
//! Offline and deterministic (seeded); wall-clock seconds are reported, not judged.
// Test and benchmark code: a panic is a failure with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "../tests/it/client.rs"]
mod client;
#[path = "../tests/it/fidelity.rs"]
mod fidelity;
#[path = "../tests/it/long_session.rs"]
mod long_session;
#[path = "../tests/it/mock_model.rs"]
mod mock_model;
#[path = "../tests/it/sim_provider.rs"]
mod sim_provider;

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let mut rows = Vec::new();
    for s in fidelity::scenarios() {
        if !filter.is_empty() && !filter.iter().any(|f| s.name.contains(f.as_str())) {
            continue;
        }
        eprintln!("running {} ({})", s.name, s.what);
        let (sess, hooks) = fidelity::run(&s, fidelity::full_turns(&s));
        let f = fidelity::figures(&sess, &hooks);
        rows.push((s, f));
    }
    println!("{}", fidelity::table(&rows));
    let enforced = fidelity::enforced();
    for (s, f) in &rows {
        print!("{}", fidelity::details(s, f));
        for c in &enforced {
            let sh = f.shares.get(c).cloned().unwrap_or_default();
            if sh.carried < sh.expected {
                println!("  FAIL {} at {:.1} %", c.name(), sh.percent());
            }
        }
        for (kind, n) in f.reliefs.kinds() {
            if n < 5 {
                println!("  FEW {kind}: {n} (at least 5 wanted)");
            }
        }
    }
}
