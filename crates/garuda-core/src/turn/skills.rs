//! Skills in a live session: the folders of loaded user skills stay readable after a resume,
//! a change on disk is a note (the list itself comes in at the next compaction, so the tool
//! bytes stay the same until then), and loaded skills come back after a compaction.

use std::path::PathBuf;

use crate::message::{Block, Role};
use crate::session::compact::SkillSnapshot;
use crate::session::records::{MessageMeta, MessageRecord, Record};
use crate::skills::{SkillPlace, SkillSet};
use crate::tools::ToolRegistry;

use super::TurnError;
use super::live::{LiveSession, SessionState};

/// The names of the skills the model loaded, most recent first, each once.
pub(crate) fn loaded(records: &[Record], tools: &ToolRegistry) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in records.iter().rev().filter_map(Record::as_message) {
        for b in m.content.iter().rev() {
            if let Block::ToolUse { name, input, .. } = b
                && tools.is_skill(name)
                && let Some(skill) = input.get("name").and_then(|v| v.as_str())
                && !out.iter().any(|s| s == skill)
            {
                out.push(skill.to_string());
            }
        }
    }
    out
}

/// The folders of the user's skills the model loaded (read_file may read beneath them).
pub(crate) fn readable(records: &[Record], tools: &ToolRegistry, set: &SkillSet) -> Vec<PathBuf> {
    loaded(records, tools)
        .iter()
        .filter_map(|n| set.get(n))
        .filter(|s| s.place == SkillPlace::User)
        .map(|s| s.folder.clone())
        .collect()
}

/// The loaded skills re-read from disk for restoration, most recent first.
pub(crate) fn snapshots(session: &LiveSession, records: &[Record]) -> Vec<SkillSnapshot> {
    let tools = session.tools();
    let set = session.skills();
    let root = &session.setup.workspace.root;
    loaded(records, &tools)
        .into_iter()
        .filter_map(|name| {
            let skill = set.get(&name)?;
            let body = set.load(&name, root).ok()?;
            let folder = skill.folder.display().to_string();
            Some(SkillSnapshot {
                text: crate::tools::skill_text(&name, &folder, &body),
                name,
            })
        })
        .collect()
}

/// A note when the skills on disk changed since the list was fixed (once per change).
pub(crate) fn change_note(
    session: &LiveSession,
    state: &mut SessionState,
) -> Result<(), TurnError> {
    let Some(dirs) = &session.setup.skill_dirs else {
        return Ok(());
    };
    let now = crate::skills::scan(&session.setup.workspace.root, dirs);
    let changes = session.skills().changes(&now);
    if changes.is_empty() || state.skills_noted.as_ref() == Some(&now) {
        return Ok(());
    }
    state.skills_noted = Some(now);
    let text = format!(
        "<garuda_note>The skills on disk changed since this session's list was made: {}. The \
         skill tool keeps its list until the next compaction; a changed skill loads as it is \
         on disk now.</garuda_note>",
        changes.join("; ")
    );
    let mut note = MessageRecord::new(Role::User, vec![Block::text(text)], state.last_message_id());
    note.meta = Some(MessageMeta::SkillNote);
    state.append(vec![Record::Message(note)])?;
    Ok(())
}
