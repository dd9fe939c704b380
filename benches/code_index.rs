//! The code index: a cold build over this repository, the look-ups and the map over it, and
//! the update after one edit.
//!
//! Run with `cargo bench --bench code_index`. With `CODE_INDEX_ONLY=PATH` it indexes PATH
//! once as a plain tree (a large JS/TS one such as `editors/vscode/node_modules`, which takes
//! too long for criterion's samples) and prints the counts and the time instead, for
//! `/usr/bin/time -v`'s peak memory.
// Test and benchmark code: a panic is a failure with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use criterion::Criterion;
use garuda_core::code::{CodeIndex, IndexCaps, find_references, find_symbol, repo_map};
use garuda_core::fsroot::Root;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn built(root: &Path) -> CodeIndex {
    let idx = CodeIndex::new(Arc::new(Root::open(root).unwrap()), IndexCaps::default());
    idx.build();
    idx
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("code_index");
    g.sample_size(10);
    g.bench_function("cold index of this repository", |b| {
        b.iter(|| black_box(built(&repo())))
    });
    g.finish();
    let idx = built(&repo());
    let mut g = c.benchmark_group("code_index query");
    g.bench_function("find_symbol Engine", |b| {
        b.iter(|| black_box(find_symbol(&idx.read(), "Engine", None, 50)))
    });
    g.bench_function("find_references parse", |b| {
        b.iter(|| black_box(find_references(&idx.read(), "parse", 50)))
    });
    g.bench_function("repo_map 2048 tokens", |b| {
        b.iter(|| black_box(repo_map(&idx.read(), "", 2048)))
    });
    // The watcher's path: one changed file read and parsed again alone.
    let one = ["crates/garuda-core/src/engine/sessions.rs".to_string()];
    g.bench_function("update after one edit", |b| b.iter(|| idx.update(&one)));
    g.finish();
}

fn main() {
    if let Ok(only) = std::env::var("CODE_INDEX_ONLY") {
        let t = Instant::now();
        let idx = built(Path::new(&only));
        let st = idx.read();
        println!(
            "{only}: {} files indexed, {} left out, {} symbols, in {:.2} s",
            st.files.len(),
            st.skipped(),
            st.symbols(),
            t.elapsed().as_secs_f64()
        );
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
