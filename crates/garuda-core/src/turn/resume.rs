//! Bringing a session to life from its transcript: each part of its state beyond the messages
//! is replayed by the file that keeps it up, so the state (`live.rs`) imports none of them.

use super::live::{LiveSession, Replayed, SessionSetup, SessionStart};
use crate::session::{Record, SessionFile, SessionHeader};

impl LiveSession {
    /// Brings a session to life from its header and records.
    pub fn new(
        header: SessionHeader,
        setup: SessionSetup,
        start: SessionStart,
        file: SessionFile,
        records: Vec<Record>,
    ) -> LiveSession {
        let replayed = Replayed {
            todos: super::todo::replay(&records, &start.tools),
            readable: super::skills::readable(&records, &start.tools, &start.skills),
            plan_heard: super::plan::heard_in(&records),
            stale_notes: super::instructions::notes_since_compaction(&records),
            scope: super::notes::ScopeState::replay(&records, &start.tools, &setup.workspace.root),
        };
        LiveSession::from_parts(header, setup, start, file, records, replayed)
    }
}
