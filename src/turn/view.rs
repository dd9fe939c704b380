//! The messages of the next model request, from the transcript.

use crate::message::Message;
use crate::provider::CachePlan;
use crate::session::Record;

/// The provider-bound messages and cache plan for the next step.
pub fn request_messages(records: &[Record]) -> (Vec<Message>, CachePlan) {
    let start = records
        .iter()
        .rposition(|r| matches!(r, Record::CompactBoundary(_)))
        .map_or(0, |i| i + 1);
    let mut messages: Vec<Message> = Vec::new();
    for r in &records[start..] {
        let Some(m) = r.as_message() else { continue };
        if m.is_virtual {
            continue;
        }
        match messages.last_mut() {
            Some(last) if last.role == m.role => last.content.extend(m.content.iter().cloned()),
            _ => messages.push(m.to_message()),
        }
    }
    let last = messages.len().checked_sub(1);
    (
        messages,
        CachePlan {
            system: true,
            messages: last.into_iter().collect(),
        },
    )
}
