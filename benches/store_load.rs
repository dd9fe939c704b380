//! Loading a 100 MB transcript: time and peak memory above the process's baseline (the
//! high-water mark is per process, so this runs as a bench binary of its own).
//!
//! Run with `cargo bench --bench store_load`.
// Test and benchmark code: a panic is a failure with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use garuda_core::message::{Block, Role};
use garuda_core::session::records::{MessageRecord, Record, SessionHeader};
use garuda_core::session::store::SessionStore;

/// Peak resident memory of this process so far, in KiB.
fn vm_hwm_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path());
    let header = SessionHeader::new("/ws", "replay:x");
    let id = header.session_id.clone();
    {
        let mut f = store.create(&header).unwrap();
        let body = "let x = 1;\n".repeat(900);
        let mut batch = Vec::new();
        let mut written = 0usize;
        while written < 100 * 1024 * 1024 {
            let r = Record::Message(MessageRecord::new(
                Role::User,
                vec![Block::text(body.clone())],
                None,
            ));
            written += serde_json::to_string(&r).unwrap().len() + 1;
            batch.push(r);
            if batch.len() == 1000 {
                f.append_batch(&batch).unwrap();
                batch.clear();
            }
        }
        f.append_batch(&batch).unwrap();
    }
    let size = std::fs::metadata(store.path_of(&id)).unwrap().len();
    let before = vm_hwm_kib().unwrap_or(0);
    let start = std::time::Instant::now();
    let loaded = store.load(&id).unwrap();
    let took = start.elapsed();
    let after = vm_hwm_kib().unwrap_or(0);
    println!(
        "store load: file {} MiB, {} records, {:?}, peak memory {} MiB before, {} MiB after ({:.2}× the file above the baseline)",
        size >> 20,
        loaded.records.len(),
        took,
        before >> 10,
        after >> 10,
        (after.saturating_sub(before) * 1024) as f64 / size as f64
    );
}
