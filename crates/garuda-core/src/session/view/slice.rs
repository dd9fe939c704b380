//! Stage 1: the records after the latest compact boundary, and the operations among them.

use std::collections::{HashMap, HashSet};

use super::Work;
use crate::session::records::{CollapseRecord, MessageRecord, Record};

/// The post-boundary part of a transcript, split into messages and operations.
pub(crate) struct Sliced {
    pub start: usize,
    pub messages: Vec<Work>,
    pub snips: HashSet<String>,
    /// User messages of turns that failed unanswered: out of the view, first request or not.
    pub unanswered: HashSet<String>,
    pub collapses: Vec<CollapseRecord>,
    pub cleared: HashSet<String>,
    pub trims: HashMap<String, usize>,
    pub skips: Vec<(usize, usize)>,
    /// Messages whose media the provider refused (`media_refused` records).
    pub refused_media: HashSet<String>,
}

/// A message record as pipeline input.
pub(crate) fn work_of(m: &MessageRecord) -> Work {
    Work {
        id: m.uuid.clone(),
        source_ids: vec![m.uuid.clone()],
        role: m.role,
        content: m.content.clone(),
        time: m.time,
        meta: m.meta,
        is_virtual: m.is_virtual,
    }
}

/// Ranges of records (inclusive) that belong to torn installations, and the slice start.
fn scan(records: &[Record]) -> (usize, Vec<(usize, usize)>) {
    let mut aborted: HashMap<&str, usize> = HashMap::new();
    let mut skips = Vec::new();
    for (i, r) in records.iter().enumerate().rev() {
        match r {
            Record::InstallAborted(a) => {
                aborted.insert(a.boundary_id.as_str(), i);
            }
            Record::CompactBoundary(b) => {
                if let Some(end) = aborted.get(b.uuid.as_str()) {
                    skips.push((i, *end));
                } else if records.len() - (i + 1) < b.install_count as usize {
                    // A torn installation not yet marked (the store's `resume` marks it):
                    // nothing can follow it, so it runs to the end.
                    skips.push((i, records.len() - 1));
                } else {
                    return (i + 1, skips);
                }
            }
            _ => {}
        }
    }
    (0, skips)
}

/// Index of the first record after the latest completely installed boundary (0 if none).
pub fn slice_start(records: &[Record]) -> usize {
    scan(records).0
}

pub(crate) fn slice(records: &[Record]) -> Sliced {
    let (start, skips) = scan(records);
    let mut out = Sliced {
        start,
        messages: Vec::new(),
        snips: HashSet::new(),
        unanswered: HashSet::new(),
        collapses: Vec::new(),
        cleared: HashSet::new(),
        trims: HashMap::new(),
        skips: Vec::new(),
        refused_media: HashSet::new(),
    };
    for (i, r) in records.iter().enumerate().skip(start) {
        if skips.iter().any(|&(a, b)| i >= a && i <= b) {
            continue;
        }
        match r {
            Record::Message(m) => out.messages.push(work_of(m)),
            Record::Snip(s) if s.failed_turn => {
                out.unanswered.extend(s.removed_ids.iter().cloned());
            }
            Record::Snip(s) => out.snips.extend(s.removed_ids.iter().cloned()),
            Record::Collapse(c) => out.collapses.push(c.clone()),
            Record::Microcompact(m) => out.cleared.extend(m.cleared_tool_use_ids.iter().cloned()),
            Record::Trim(t) => {
                for id in &t.tool_use_ids {
                    let keep = out.trims.entry(id.clone()).or_insert(t.keep_chars);
                    *keep = (*keep).min(t.keep_chars);
                }
            }
            Record::MediaRefused(m) => out.refused_media.extend(m.message_ids.iter().cloned()),
            Record::Header(_)
            | Record::CompactBoundary(_)
            | Record::Usage(_)
            | Record::InstructionChange(_)
            | Record::InstallAborted(_)
            | Record::ContextLimit(_)
            | Record::Memory(_)
            | Record::CollapseAhead(_) => {}
        }
    }
    out.skips = skips;
    out
}
