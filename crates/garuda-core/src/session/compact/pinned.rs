//! The user's own words, carried verbatim through every compaction: the first request and
//! the user's messages, newest first within a budget. They never depend on the model's
//! summary, and a summary retry never drops them.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use crate::message::{Block, Role};
use crate::session::records::Record;

/// One message the user wrote, in transcript order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserWords {
    /// The id of the original message record (copies made by compaction resolve to it).
    pub id: String,
    /// Its text blocks, joined.
    pub text: String,
}

/// The original message id of every message record (a kept step re-installed by a
/// compaction is a copy of an earlier record, perhaps of another copy).
pub fn origins(records: &[Record]) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = HashMap::new();
    for r in records {
        if let Record::Message(m) = r {
            let origin = match &m.copy_of {
                Some(c) => out.get(c).cloned().unwrap_or_else(|| c.clone()),
                None => m.uuid.clone(),
            };
            out.insert(m.uuid.clone(), origin);
        }
    }
    out
}

/// Every message the user wrote in the session, oldest first: user messages without a
/// `meta` that are not copies, their text blocks only (tool results are not the user's words;
/// an image counts as `[image]`).
pub fn user_messages(records: &[Record]) -> Vec<UserWords> {
    let mut out = Vec::new();
    for r in records {
        let Record::Message(m) = r else { continue };
        if m.role != Role::User || m.meta.is_some() || m.is_virtual || m.copy_of.is_some() {
            continue;
        }
        let mut text = String::new();
        for b in &m.content {
            match b {
                Block::Text { text: t } => {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(t);
                }
                Block::Image { .. } => {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str("[image]");
                }
                _ => {}
            }
        }
        if !text.trim().is_empty() {
            out.push(UserWords {
                id: m.uuid.clone(),
                text,
            });
        }
    }
    out
}

/// The words an installation carries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pinned {
    /// The first request (cut with a marker when over half the budget), unless the kept
    /// part holds it verbatim.
    pub first: Option<String>,
    /// Later messages, oldest first, the newest ones that fit; the oldest of them may be cut.
    pub recent: Vec<String>,
    /// Messages left out for space (the summary and the transcript still have them).
    pub omitted: usize,
}

/// Smallest remainder worth a cut message rather than leaving it out.
const MIN_CUT_CHARS: usize = 400;

/// `text` within `max` characters: whole, or its head and a marker naming what was cut.
pub fn cut_with_marker(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let marker = |cut: usize| {
        format!(
            "\n[… {cut} more characters of this message were cut to fit the compaction budget; \
             the whole message is in the transcript]"
        )
    };
    let keep = max.saturating_sub(marker(total).chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(&marker(total - keep));
    out
}

/// Chooses the words to carry: the first request (at most half of `budget_chars`), then the
/// other messages newest first while they fit. Messages whose original id is in `present`
/// (the kept part holds them verbatim) are skipped.
pub fn pin(all: &[UserWords], present: &HashSet<String>, budget_chars: usize) -> Pinned {
    let mut out = Pinned::default();
    let mut left = budget_chars;
    let Some((first, rest)) = all.split_first() else {
        return out;
    };
    if !present.contains(&first.id) {
        let t = cut_with_marker(&first.text, budget_chars / 2);
        left = left.saturating_sub(t.chars().count());
        out.first = Some(t);
    }
    let candidates: Vec<&UserWords> = rest.iter().filter(|u| !present.contains(&u.id)).collect();
    let mut taken = Vec::new();
    for (k, u) in candidates.iter().enumerate().rev() {
        let n = u.text.chars().count();
        if n <= left {
            left -= n;
            taken.push(u.text.clone());
            continue;
        }
        if left >= MIN_CUT_CHARS {
            taken.push(cut_with_marker(&u.text, left));
            out.omitted = k;
        } else {
            out.omitted = k + 1;
        }
        break;
    }
    taken.reverse();
    out.recent = taken;
    out
}

impl Pinned {
    /// The blocks of the summary message that carry these words (none when empty).
    pub fn blocks(&self) -> Vec<Block> {
        let mut out = Vec::new();
        if let Some(f) = &self.first {
            out.push(Block::text(format!(
                "<first_user_request>\n{f}\n</first_user_request>"
            )));
        }
        if !self.recent.is_empty() || self.omitted > 0 {
            let mut s = String::from(
                "<user_messages>\nThe user's own messages from the compacted part, verbatim, oldest first.\n",
            );
            if self.omitted > 0 {
                let _ = writeln!(
                    s,
                    "[{} earlier user message(s) are not repeated here for space; the summary covers them and the transcript has them]",
                    self.omitted
                );
            }
            for m in &self.recent {
                let _ = write!(s, "<message>\n{m}\n</message>\n");
            }
            s.push_str("</user_messages>");
            out.push(Block::text(s));
        }
        out
    }

    /// Characters of `blocks()`.
    pub fn chars(&self) -> usize {
        self.blocks().iter().map(Block::char_len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::records::MessageRecord;

    fn user(id: &str, text: &str) -> Record {
        Record::Message(MessageRecord {
            uuid: id.into(),
            parent_uuid: None,
            role: Role::User,
            content: vec![Block::text(text)],
            time: 0,
            meta: None,
            is_virtual: false,
            copy_of: None,
        })
    }

    fn words(n: usize, len: usize) -> Vec<UserWords> {
        (0..n)
            .map(|i| UserWords {
                id: format!("u{i}"),
                text: format!("{i}").repeat(len),
            })
            .collect()
    }

    #[test]
    fn collects_only_the_users_own_text() {
        let mut copy = user("c1", "copied");
        if let Record::Message(m) = &mut copy {
            m.copy_of = Some("u1".into());
        }
        let mut note = user("n1", "<garuda_note>x</garuda_note>");
        if let Record::Message(m) = &mut note {
            m.meta = Some(crate::session::records::MessageMeta::InstructionNote);
        }
        let results = Record::Message(MessageRecord {
            content: vec![Block::ToolResult {
                tool_use_id: "t".into(),
                content: vec![Block::text("out")],
                is_error: false,
            }],
            ..match user("r1", "") {
                Record::Message(m) => m,
                _ => unreachable!(),
            }
        });
        let recs = vec![
            user("u1", "first"),
            copy,
            note,
            results,
            user("u2", "second"),
        ];
        let got: Vec<String> = user_messages(&recs).into_iter().map(|u| u.text).collect();
        assert_eq!(got, vec!["first", "second"]);
        let o = origins(&recs);
        assert_eq!(o["c1"], "u1");
    }

    #[test]
    fn newest_first_within_budget_with_visible_cuts() {
        let all = words(6, 100);
        let p = pin(&all, &HashSet::new(), 10_000);
        assert_eq!(p.first.as_deref(), Some("0".repeat(100).as_str()));
        assert_eq!(p.recent.len(), 5);
        assert_eq!(p.omitted, 0);

        // Room for the first, two whole messages and a cut third.
        let all = words(6, 1_000);
        // Too little room left for a useful cut of the third: it is left out.
        let p = pin(&all, &HashSet::new(), 3_300);
        assert_eq!(p.recent.len(), 2, "{p:?}");
        assert!(p.recent[0].starts_with('4'));
        assert_eq!(p.omitted, 3);
        let p = pin(&all, &HashSet::new(), 3_600);
        assert_eq!(p.recent.len(), 3);
        assert!(p.recent[0].starts_with('3'));
        assert!(p.recent[0].contains("were cut to fit the compaction budget"));
        assert!(p.recent[0].chars().count() <= 600);
        assert_eq!(p.omitted, 2);
        let text: String = p.blocks().iter().map(|b| format!("{b:?}")).collect();
        assert!(text.contains("2 earlier user message(s) are not repeated"));
    }

    #[test]
    fn first_request_is_cut_not_dropped_and_kept_ones_are_skipped() {
        let mut all = words(3, 10);
        all[0].text = "x".repeat(5_000);
        let p = pin(&all, &HashSet::new(), 2_000);
        let f = p.first.expect("first");
        assert!(f.chars().count() <= 1_000, "{}", f.len());
        assert!(f.contains("more characters of this message were cut"));

        let present: HashSet<String> = ["u0".to_string(), "u2".to_string()].into();
        let p = pin(&words(3, 10), &present, 2_000);
        assert_eq!(p.first, None);
        assert_eq!(p.recent, vec!["1".repeat(10)]);
    }
}
