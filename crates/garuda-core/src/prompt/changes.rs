//! Changes to the instruction files the system prompt carries (root instruction files, the
//! user-global file, always-on rules, the memory file) while a session runs: their text as
//! one comparable string, what was removed or deleted, and the `<garuda_note>` that puts the
//! current text in force without touching the system prompt's bytes. Pure.

use std::collections::HashSet;

use super::{Assembled, PartKind, Placement};

/// The opening of every note about changed instruction files.
pub const NOTE_HEAD: &str = "<garuda_note>The project's instruction or memory files changed on disk since the system prompt was written.";
/// What precedes the current text in a note.
const TEXT_MARK: &str = "\nTheir current text:\n\n";
const NOTE_TAIL: &str = "\n</garuda_note>";
/// Removed lines listed at most.
const MAX_REMOVED: usize = 40;

/// The text of the instruction and memory parts of a prompt: what a note must carry when it
/// differs from the system prompt's.
pub fn instruction_text(a: &Assembled) -> String {
    [PartKind::Global, PartKind::Instructions, PartKind::Memory]
        .into_iter()
        .map(|k| a.part(k))
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The files behind [`instruction_text`]: instruction sources in the system prompt and the
/// memory file, in prompt order.
pub fn instruction_files(a: &Assembled) -> Vec<String> {
    let mut out: Vec<String> = a
        .sources
        .iter()
        .filter(|s| s.placement == Placement::System && s.in_force)
        .map(|s| s.path.clone())
        .collect();
    out.extend(
        a.sections
            .iter()
            .filter(|s| s.kind == "memory" && s.skipped.is_none() && s.bytes > 0)
            .filter_map(|s| s.source.clone()),
    );
    out
}

/// What the model may believe of the instructions: a text and the files it came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstructionText {
    /// The joined instruction and memory text.
    pub text: String,
    /// The files it came from.
    pub files: Vec<String>,
}

impl InstructionText {
    /// The instruction and memory text of a prompt, and its files.
    pub fn of(a: &Assembled) -> InstructionText {
        InstructionText {
            text: instruction_text(a),
            files: instruction_files(a),
        }
    }
}

/// Rule lines (non-empty, headings left out) of `text`, trimmed.
fn rule_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// The note that puts `current` in force. `believed` are the texts the model may still take
/// as in force (the system prompt's, an earlier note's): their rule lines missing from
/// `current` are listed as no longer in force, their files missing from it as deleted.
pub fn render_note(current: &InstructionText, believed: &[&InstructionText]) -> String {
    let now: HashSet<&str> = rule_lines(&current.text).collect();
    let mut seen = HashSet::new();
    let removed: Vec<&str> = believed
        .iter()
        .flat_map(|b| rule_lines(&b.text))
        .filter(|l| !now.contains(l) && seen.insert(*l))
        .collect();
    let mut gone_seen = HashSet::new();
    let deleted: Vec<&str> = believed
        .iter()
        .flat_map(|b| b.files.iter())
        .filter(|f| !current.files.contains(f) && gone_seen.insert(f.as_str()))
        .map(String::as_str)
        .collect();
    let mut out = String::from(NOTE_HEAD);
    out.push_str(
        " From here on the text below is in force; where it disagrees with the system prompt or an earlier note, it wins.",
    );
    if !deleted.is_empty() {
        out.push_str(&format!(
            "\nDeleted (its rules no longer apply): {}",
            deleted.join(", ")
        ));
    }
    if !removed.is_empty() {
        out.push_str("\nNo longer in force (removed from the files):");
        for l in removed.iter().take(MAX_REMOVED) {
            out.push_str("\n- ");
            out.push_str(l);
        }
        if removed.len() > MAX_REMOVED {
            out.push_str(&format!(
                "\n- … and {} more removed lines",
                removed.len() - MAX_REMOVED
            ));
        }
    }
    out.push_str(TEXT_MARK);
    if current.text.is_empty() {
        out.push_str("(no instruction or memory files now)");
    } else {
        out.push_str(&current.text);
    }
    out.push_str(NOTE_TAIL);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn it(text: &str, files: &[&str]) -> InstructionText {
        InstructionText {
            text: text.to_string(),
            files: files.iter().map(|f| f.to_string()).collect(),
        }
    }

    #[test]
    fn a_note_lists_what_was_removed_and_carries_the_current_text() {
        let prompt = it(
            "# Project instructions\n## AGENTS.md\n- Use tabs.\n- Run make test.\n## CLAUDE.md\nBe brief.",
            &["AGENTS.md", "CLAUDE.md"],
        );
        let now = it(
            "# Project instructions\n## AGENTS.md\n- Run make test.\n- Never push.",
            &["AGENTS.md"],
        );
        let note = render_note(&now, &[&prompt]);
        assert!(note.starts_with(NOTE_HEAD), "{note}");
        assert!(note.contains("Deleted (its rules no longer apply): CLAUDE.md"));
        assert!(
            note.contains(
                "No longer in force (removed from the files):\n- - Use tabs.\n- Be brief."
            )
        );
        assert!(
            !note.contains("- - Run make test.\n"),
            "kept lines are not removed: {note}"
        );
        assert!(note.ends_with("- Never push.\n</garuda_note>"));
        assert!(note.contains(
            "Their current text:\n\n# Project instructions\n## AGENTS.md\n- Run make test."
        ));
    }

    #[test]
    fn back_to_the_prompt_text_retracts_what_an_earlier_note_added() {
        let prompt = it("## AGENTS.md\n- Use tabs.", &["AGENTS.md"]);
        let noted = it(
            "## AGENTS.md\n- Use tabs.\n- Sign every commit.",
            &["AGENTS.md"],
        );
        let note = render_note(&prompt, &[&prompt, &noted]);
        assert!(
            note.contains("No longer in force (removed from the files):\n- - Sign every commit.")
        );
        assert!(note.ends_with("Their current text:\n\n## AGENTS.md\n- Use tabs.\n</garuda_note>"));
    }

    #[test]
    fn everything_deleted_says_so() {
        let prompt = it("## AGENTS.md\n- Use tabs.", &["AGENTS.md"]);
        let note = render_note(&InstructionText::default(), &[&prompt]);
        assert!(note.contains("(no instruction or memory files now)"));
    }
}
