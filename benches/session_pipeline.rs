//! Session pipeline benchmarks: view of a 10 000-message session (full and incremental),
//! stage 1 on a session of about a million estimated tokens.
// Test and benchmark code: a panic is a failure with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use garuda_core::message::{Block, Role};
use garuda_core::session::compact::{CompactPolicy, split_index, stage1};
use garuda_core::session::records::{MessageRecord, Record};
use garuda_core::session::view::{ViewCache, ViewPolicy, build_view};
use serde_json::json;

fn msg(id: String, role: Role, content: Vec<Block>) -> Record {
    let mut m = MessageRecord::new(role, content, None);
    m.uuid = id;
    m.time = 0;
    Record::Message(m)
}

/// `rounds` × (user, assistant tool call, tool result of `result_chars`, assistant text).
fn session(rounds: usize, result_chars: usize) -> Vec<Record> {
    let mut recs = Vec::with_capacity(rounds * 4);
    for k in 0..rounds {
        recs.push(msg(
            format!("u{k}"),
            Role::User,
            vec![Block::text("question ".repeat(20))],
        ));
        recs.push(msg(
            format!("a{k}"),
            Role::Assistant,
            vec![Block::ToolUse {
                id: format!("t{k}"),
                name: "read_file".into(),
                input: json!({"path": "a.rs"}),
            }],
        ));
        recs.push(msg(
            format!("r{k}"),
            Role::User,
            vec![Block::ToolResult {
                tool_use_id: format!("t{k}"),
                content: vec![Block::text("x".repeat(result_chars))],
                is_error: false,
            }],
        ));
        recs.push(msg(
            format!("b{k}"),
            Role::Assistant,
            vec![Block::text("done")],
        ));
    }
    recs
}

fn bench(c: &mut Criterion) {
    let policy = ViewPolicy {
        microcompact_after_ms: None,
        ..ViewPolicy::default()
    };
    let recs = session(2_500, 1_000);
    c.bench_function("view_full_10k", |b| {
        b.iter(|| black_box(build_view(&recs, &policy, 0)))
    });

    c.bench_function("view_incremental_step_10k", |b| {
        let mut recs = recs.clone();
        let mut cache = ViewCache::new();
        cache.view(&recs, &policy, 0);
        let mut k = 0usize;
        b.iter(|| {
            k += 1;
            recs.push(msg(format!("x{k}"), Role::User, vec![Block::text("more")]));
            recs.push(msg(
                format!("y{k}"),
                Role::Assistant,
                vec![Block::text("ok")],
            ));
            black_box(cache.view(&recs, &policy, 0).messages.len())
        })
    });

    // 1 000 rounds with 4 000-character results: about 1 million estimated tokens.
    let big = session(1_000, 4_000);
    let view = build_view(&big, &policy, 0);
    let cp = CompactPolicy::default();
    let split = split_index(&view.messages, cp.keep_steps).unwrap_or(0);
    c.bench_function("stage1_1m_tokens", |b| {
        b.iter(|| black_box(stage1(&view.messages, split, &cp, 0).saved_chars))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
