//! The instruction files the system prompt carries (root files, the user-global file,
//! always-on rules, the memory file), kept current in every request of a live session. The
//! system prompt is rebuilt only at a compaction, so between compactions a change reaches the
//! model as a `<garuda_note>`; when a relief (collapse, snip, a resume) takes that note out of
//! the view, it is sent again at the end of the view, once. The decision is checked against
//! the view before every request, whatever relief ran, so no path can be missed. A session
//! loaded again gets a system prompt assembled from disk: its earlier notes are snipped, so
//! the model never has a file's text both in the prompt and in a note.

use super::live::{LiveSession, SessionState, TurnError};
pub use super::notes::RootNoted;
use super::view::current_view;
use crate::message::{Block, Role};
use crate::prompt::changes::{InstructionText, render_note};
use crate::session::records::{
    InstructionChangeRecord, MessageMeta, MessageRecord, Record, SnipRecord, new_id, now_ms,
};

/// The notes about instruction files since the last compaction. A loaded session's system
/// prompt is assembled from disk, so it already carries what they said (or newer text): they
/// are snipped before its next request, and a note is sent only for what differs from it.
pub(crate) fn notes_since_compaction(records: &[Record]) -> Vec<String> {
    let mut out = Vec::new();
    // The record comes just before its note (older transcripts name no message).
    let mut waiting: Option<Option<String>> = None;
    for r in records {
        match r {
            Record::CompactBoundary(_) => {
                out.clear();
                waiting = None;
            }
            Record::InstructionChange(c) if !c.scoped => waiting = Some(c.message_id.clone()),
            Record::Message(m) if m.meta == Some(MessageMeta::InstructionNote) => {
                let ours = |id: &mut Option<String>| id.as_deref().is_none_or(|i| i == m.uuid);
                if waiting.take_if(ours).is_some() {
                    out.push(m.uuid.clone());
                }
            }
            _ => {}
        }
    }
    out
}

/// The note records to append before the next request, when the model's view does not carry
/// the current text of the instruction files (a change on disk, or its note left the view);
/// empty when it does.
pub(crate) fn current_note(
    session: &LiveSession,
    state: &mut SessionState,
) -> Result<Vec<Record>, TurnError> {
    if !state.stale_notes.is_empty() {
        let stale = std::mem::take(&mut state.stale_notes);
        let view = current_view(state, &session.setup.view_policy)?;
        let ids: Vec<String> = stale.into_iter().filter(|id| view.holds(id)).collect();
        if !ids.is_empty() {
            state.append(vec![Record::Snip(SnipRecord {
                uuid: new_id(),
                time: now_ms(),
                removed_ids: ids,
                failed_turn: false,
            })])?;
        }
    }
    let now = session.setup.workspace.assemble(
        &session
            .setup
            .prompt_options(&session.header.model, &session.tools()),
    );
    let current = InstructionText::of(&now);
    let base = InstructionText::of(&session.prompt());
    let noted = state.root_note.clone();
    let view = current_view(state, &session.setup.view_policy)?;
    let in_view = noted.as_ref().filter(|n| view.holds(&n.message_id));
    let has = in_view.map_or(&base, |n| &n.text);
    if has.text == current.text {
        return Ok(Vec::new());
    }
    let mut believed = vec![&base];
    believed.extend(in_view.map(|n| &n.text));
    let note = render_note(&current, &believed);
    // A message of its own (the view merges it with its neighbour), so the user's words stay
    // the user's and a compaction, which rebuilds the system prompt, leaves it out.
    let mut message =
        MessageRecord::new(Role::User, vec![Block::text(note)], state.last_message_id());
    message.meta = Some(MessageMeta::InstructionNote);
    let record = Record::InstructionChange(InstructionChangeRecord {
        uuid: new_id(),
        time: now_ms(),
        paths: current.files.clone(),
        sha256: vec![crate::prompt::sha256_hex(&current.text)],
        scoped: false,
        message_id: Some(message.uuid.clone()),
    });
    state.root_note = Some(RootNoted {
        text: current,
        message_id: message.uuid.clone(),
    });
    Ok(vec![record, Record::Message(message)])
}
