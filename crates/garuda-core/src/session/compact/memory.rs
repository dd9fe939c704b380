//! The session memory, pure: when its background update is due, the instruction that asks
//! for it, the latest one, where it ends in the view, and how long the session has been idle
//! (so a compaction can be timed to the provider's cache).
//!
//! The memory is the summary a compaction would ask for, asked ahead of time at a natural
//! pause (after a turn) as a fork of the request the turn just sent, so the provider reads the
//! whole prefix from its cache. A compaction then installs it without a model call.

use super::CompactPolicy;
use super::summary_prompt::push_sections;
use crate::session::records::{MemoryRecord, Record};
use crate::session::view::ViewMessage;

/// How the memory update's instruction begins (and how a reader of requests tells it apart).
pub const MEMORY_INSTRUCTION_START: &str = "<garuda_note>Update the session memory";

/// The memory update's instruction: the summary's sections, its size target, the project's
/// compact instructions, and the notes the user wrote, to be carried forward.
pub fn memory_instruction(
    compact_instructions: Option<&str>,
    user_notes: Option<&str>,
    target_tokens: u64,
) -> String {
    let mut s = String::from(MEMORY_INSTRUCTION_START);
    s.push_str(
        ": the running notes of this session. When the session is compacted later, they stand \
         in for the conversation above, beside its most recent steps and the user's own messages \
         verbatim. Write them now, covering the whole conversation above.\n\n",
    );
    push_sections(&mut s, compact_instructions, target_tokens);
    if let Some(n) = user_notes.map(str::trim).filter(|n| !n.is_empty()) {
        s.push_str(
            "\n\nThe user wrote these notes themselves; keep what they say unless the \
             conversation since has made it wrong:\n<user_notes>\n",
        );
        s.push_str(n);
        s.push_str("\n</user_notes>");
    }
    s.push_str("</garuda_note>");
    s
}

/// The newest session memory.
pub fn latest_memory(records: &[Record]) -> Option<&MemoryRecord> {
    records.iter().rev().find_map(|r| match r {
        Record::Memory(m) => Some(m),
        _ => None,
    })
}

/// Tokens past which the memory is kept (and idle compaction applies).
fn memory_start_tokens(window: u64, policy: &CompactPolicy) -> u64 {
    ((window as f64 * policy.memory_start) as u64).max(1)
}

/// True when an idle session of `tokens` would be compacted from its memory: the switches are
/// on and the context is past the memory's start (a smaller one's rewrite costs little).
pub fn idle_applies(tokens: u64, window: u64, policy: &CompactPolicy) -> bool {
    policy.idle_compaction
        && policy.session_memory
        && policy.auto_compact
        && tokens >= memory_start_tokens(window, policy)
}

/// The least growth, in tokens, after which the memory is asked again: a share of a small
/// window would ask after nearly every turn, which a local model pays for in time.
pub const MEMORY_STEP_MIN_TOKENS: u64 = 8_000;

/// True when the background update should run now: the context is past the memory's start,
/// and there is no memory yet, or its last message left the view (a compaction), or the
/// conversation after it (`grown`: estimated tokens of the view's messages after its last
/// one) reached the memory step.
pub fn memory_due(
    has_memory: bool,
    grown: Option<u64>,
    tokens: u64,
    window: u64,
    policy: &CompactPolicy,
) -> bool {
    if !policy.session_memory || !policy.auto_compact {
        return false;
    }
    if tokens < memory_start_tokens(window, policy) {
        return false;
    }
    let step = ((window as f64 * policy.memory_step) as u64).max(MEMORY_STEP_MIN_TOKENS);
    !has_memory || grown.is_none_or(|g| g >= step)
}

/// Index in the view of the last message the memory covers (None: out of the view).
pub fn memory_end(messages: &[ViewMessage], through_id: &str) -> Option<usize> {
    messages
        .iter()
        .rposition(|m| m.id == through_id || m.source_ids.iter().any(|s| s == through_id))
}

/// Milliseconds since the session's last model request (any purpose: every request that
/// reads the prefix keeps the provider's cache alive). None before the first.
pub fn cache_idle_ms(records: &[Record], now_ms: u64) -> Option<u64> {
    records.iter().rev().find_map(|r| match r {
        Record::Usage(u) => Some(now_ms.saturating_sub(u.time)),
        _ => None,
    })
}

/// True when a turn about to start finds the provider's cache expired with the context past
/// the memory's start: compacting from the memory first makes the request that must write
/// the prefix anew write a small one.
pub fn idle_due(
    records: &[Record],
    tokens: u64,
    window: u64,
    policy: &CompactPolicy,
    now_ms: u64,
) -> bool {
    idle_applies(tokens, window, policy)
        && cache_idle_ms(records, now_ms).is_some_and(|i| i >= policy.cache_ttl_secs * 1_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::records::UsageRecord;

    fn usage(time: u64) -> Record {
        Record::Usage(UsageRecord {
            uuid: "u".into(),
            time,
            message_id: String::new(),
            usage: Default::default(),
            request_chars: None,
            view_chars: None,
            purpose: None,
            cost_usd: None,
            cache_miss: None,
        })
    }

    #[test]
    fn the_memory_is_due_from_its_start_then_after_each_step_of_growth() {
        let p = CompactPolicy::default();
        // 100 000-token window: from 30 000 on, again after 10 000 more.
        assert!(!memory_due(false, None, 29_999, 100_000, &p));
        assert!(memory_due(false, None, 30_000, 100_000, &p));
        assert!(!memory_due(true, Some(9_999), 60_000, 100_000, &p));
        assert!(memory_due(true, Some(10_000), 60_000, 100_000, &p));
        // Its last message left the view (a compaction): asked again.
        assert!(memory_due(true, None, 31_000, 100_000, &p));
        // A small window asks again only after 8 000 tokens.
        assert!(!memory_due(true, Some(7_999), 30_000, 40_000, &p));
        assert!(memory_due(true, Some(8_000), 30_000, 40_000, &p));
        let off = CompactPolicy {
            session_memory: false,
            ..p.clone()
        };
        assert!(!memory_due(false, None, 90_000, 100_000, &off));
        let manual = CompactPolicy {
            auto_compact: false,
            ..p
        };
        assert!(!memory_due(false, None, 90_000, 100_000, &manual));
    }

    #[test]
    fn idle_compaction_is_due_once_the_cache_expired_with_a_large_context() {
        let p = CompactPolicy::default();
        let rs = vec![usage(1_000)];
        let ttl = p.cache_ttl_secs * 1_000;
        assert!(!idle_due(&rs, 50_000, 100_000, &p, 1_000 + ttl - 1));
        assert!(idle_due(&rs, 50_000, 100_000, &p, 1_000 + ttl));
        // Small contexts keep their verbatim history: the rewrite costs little.
        assert!(!idle_due(&rs, 20_000, 100_000, &p, 1_000 + ttl));
        assert!(!idle_due(&[], 50_000, 100_000, &p, u64::MAX));
        let off = CompactPolicy {
            idle_compaction: false,
            ..p
        };
        assert!(!idle_due(&rs, 50_000, 100_000, &off, 1_000 + ttl));
        assert_eq!(cache_idle_ms(&rs, 3_500), Some(2_500));
    }

    #[test]
    fn the_instruction_asks_for_the_summary_sections_and_carries_the_users_notes() {
        let i = memory_instruction(Some("Keep paths."), Some("  my note  "), 2_000);
        assert!(i.starts_with(MEMORY_INSTRUCTION_START));
        assert!(i.contains("Active Task") && i.contains("User Directives"));
        assert!(i.contains("about 2000 tokens"));
        assert!(i.contains("Keep paths."));
        assert!(i.contains("<user_notes>\nmy note\n</user_notes>"));
        assert!(i.ends_with("</garuda_note>"));
        // Never mistaken for the compaction's own instruction.
        assert!(!i.contains("about to be compacted"));
        assert!(!memory_instruction(None, None, 100).contains("user_notes"));
    }
}
