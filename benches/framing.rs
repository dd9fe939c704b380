//! Frame decoding and message parsing throughput (MB/s) for both framings.
// Test and benchmark code: a panic is a failure with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use garuda::rpc::framing::{Decoder, FrameEvent, Framing, encode};
use garuda::rpc::message;
use std::hint::black_box;

/// `count` requests whose bodies are about `body_bytes` long, framed for the wire.
fn stream(framing: Framing, count: usize, body_bytes: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..count {
        let text = "lorem ipsum dolor sit amet ".repeat(body_bytes / 27 + 1);
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": i,
            "method": "turn/run",
            "params": {"sessionId": "s-1", "text": &text[..body_bytes]},
        });
        out.extend(encode(framing, &serde_json::to_vec(&body).expect("JSON")));
    }
    out
}

/// Decodes and parses `wire` as it would arrive: in 64 KiB reads.
fn decode_and_parse(wire: &[u8]) -> usize {
    let mut decoder = Decoder::new(64 * 1024 * 1024);
    let mut events = Vec::new();
    let mut parsed = 0;
    for chunk in wire.chunks(64 * 1024) {
        decoder.push(chunk, &mut events);
        for ev in events.drain(..) {
            if let FrameEvent::Frame(f) = ev
                && message::parse(&f).is_ok()
            {
                parsed += 1;
            }
        }
    }
    parsed
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode_and_parse");
    for (label, count, size) in [("1k_x_1000", 1000, 1024), ("1m_x_4", 4, 1 << 20)] {
        for (name, framing) in [
            ("content_length", Framing::ContentLength),
            ("newline", Framing::Newline),
        ] {
            let wire = stream(framing, count, size);
            group.throughput(Throughput::Bytes(wire.len() as u64));
            group.bench_with_input(BenchmarkId::new(name, label), &wire, |b, wire| {
                b.iter(|| assert_eq!(decode_and_parse(black_box(wire)), count));
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
