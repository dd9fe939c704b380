//! Sessions: the durable transcript and the pure parts of the context pipeline.
//!
//! `records` is the JSONL record format, `store` the append-only files, `view` the pipeline
//! that selects what the model sees, `tokens` the context accounting, `usage` what the requests used per purpose and
//! `compact` the compaction planning. Everything except `store` is pure.

pub mod cache_miss;
pub mod compact;
pub mod records;
pub mod store;
pub mod tokens;
pub mod usage;
pub mod view;

pub use records::{MessageMeta, MessageRecord, ParentLink, Record, SessionHeader, SessionOrigin};
pub use store::{Loaded, ParentRef, SessionFile, SessionStore, SessionSummary, StoreError};
