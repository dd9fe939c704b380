//! Prompt assembly: cold (open the root, read every file, assemble) and pure `assemble`.
//!
//! Run with `cargo bench --bench assembly`.
// Test and benchmark code: a panic is a failure with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use garuda_core::fsroot::Root;
use garuda_core::prompt::{Limits, MEMORY_FILE, PromptOptions, assemble, gather};

/// Roughly 13 000 characters of Markdown-like text.
fn instruction_text(seed: &str) -> String {
    let line = format!(
        "- {seed}: keep functions small, test behaviour, name things for what they hold.\n"
    );
    line.repeat(13_000 / line.len() + 1)
        .chars()
        .take(13_000)
        .collect()
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for name in ["AGENTS.md", "CLAUDE.md", "GARUDA.md"] {
        fs::write(dir.path().join(name), instruction_text(name)).expect("write");
    }
    fs::create_dir_all(dir.path().join(".garuda")).expect("mkdir");
    fs::write(
        dir.path().join(MEMORY_FILE),
        "- `cargo test -- --test-threads=1` for the integration tests.\n".repeat(40),
    )
    .expect("write");
    fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"bench\"\n",
    )
    .expect("write");
    dir
}

fn bench(c: &mut Criterion) {
    let dir = workspace();
    let opts = PromptOptions {
        model: "anthropic/claude-sonnet-4-5".into(),
        ..PromptOptions::default()
    };
    let limits = Limits::default();

    c.bench_function("cold gather+assemble (3 x 13k + memory)", |b| {
        b.iter(|| {
            let root = Root::open(dir.path()).expect("root");
            let g = gather(&root, &limits);
            black_box(assemble(&g, &opts))
        })
    });

    let root = Root::open(dir.path()).expect("root");
    let g = gather(&root, &limits);
    c.bench_function("assemble only", |b| {
        b.iter(|| black_box(assemble(black_box(&g), &opts)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
