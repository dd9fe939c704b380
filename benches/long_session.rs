//! Long-session compaction benchmark: runs the scenarios of `tests/it/long_session.rs`
//! through the real binary against the simulated provider and prints one table.
//!
//! `cargo bench --bench long_session [-- NAME...]` (a name filters scenarios by substring).
//! Offline; figures are deterministic (seeded). Wall-clock seconds are reported, not judged.
// Test and benchmark code: a panic is a failure with its message.
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

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let mut rows = Vec::new();
    for s in long_session::scenarios() {
        if !filter.is_empty() && !filter.iter().any(|f| s.name.contains(f.as_str())) {
            continue;
        }
        eprintln!("running {} ({})", s.name, s.what);
        let sess = long_session::run(&s);
        let f = long_session::figures(&sess);
        rows.push((s, f));
    }
    println!("{}", long_session::table(&rows));
    for (s, f) in &rows {
        println!("{}", long_session::details(s, f));
        let v = long_session::violations(s, f);
        if v.is_empty() {
            println!("  all criteria met");
        }
        for line in v {
            println!("  FAIL {line}");
        }
    }
}
