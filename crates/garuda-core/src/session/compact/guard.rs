//! Which relief a context over the threshold gets. Progress is judged, not attempts: right
//! after a compaction, or after one that freed little, the model is not asked for another
//! summary; cheaper relief (trimming deeper, reinstalling the last summary with less kept)
//! runs instead, so summaries never come back to back.

use super::MIN_PROGRESS;
use crate::session::records::Record;

/// What the guard decides from (tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pressure {
    /// The context now.
    pub tokens: u64,
    /// Compaction starts above this.
    pub threshold: u64,
    /// Relief aims at or below this.
    pub target: u64,
    /// Tokens stage 1 frees before the kept steps.
    pub stage1_saves: u64,
    /// Tokens stage 1 frees when it spares only the newest step.
    pub deep_saves: u64,
    /// Main steps since the latest compaction (None: never compacted).
    pub steps_since: Option<u32>,
    /// The latest compaction freed little or left the context above the threshold.
    pub last_poor: bool,
}

/// The relief chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relief {
    /// Cut old tool results (stage 1); `deep` spares only the newest step.
    Trim {
        /// Cut everything older than the newest step.
        deep: bool,
    },
    /// Ask the model for a summary of the older part.
    Summary,
    /// Install again without the model: the last summary, an extractive account of what
    /// came after it, and a smaller kept part.
    Reinstall,
    /// When a request still does not fit: the extractive handoff with one step kept and the
    /// user's earlier words shortened to their budget (a tenth of the window).
    Handoff,
    /// The last resort: the view starts again from the current request, after a one-line
    /// note.
    FreshStart,
}

/// Chooses the relief; None when the context is at or below the threshold.
pub fn choose_relief(p: &Pressure, min_summary_gap: u32) -> Option<Relief> {
    if p.tokens <= p.threshold {
        return None;
    }
    let after = |saved: u64| p.tokens.saturating_sub(saved);
    if p.stage1_saves > 0 && after(p.stage1_saves) <= p.target {
        return Some(Relief::Trim { deep: false });
    }
    // Cutting every old result but the newest step's is still cheaper than a summary: no
    // model call, and the cache before the first cut result stays readable.
    if p.deep_saves > p.stage1_saves && after(p.deep_saves) <= p.target {
        return Some(Relief::Trim { deep: true });
    }
    let cooling = p.last_poor || p.steps_since.is_some_and(|s| s < min_summary_gap);
    if !cooling {
        return Some(Relief::Summary);
    }
    if p.deep_saves > p.stage1_saves && after(p.deep_saves) <= p.threshold {
        return Some(Relief::Trim { deep: true });
    }
    Some(Relief::Reinstall)
}

/// Main steps (model answers of turns, not side requests) since the latest compaction
/// boundary; None when the session was never compacted.
pub fn steps_since_compaction(records: &[Record]) -> Option<u32> {
    let mut steps = 0u32;
    for r in records.iter().rev() {
        match r {
            Record::Usage(u) if u.purpose.is_none() => steps = steps.saturating_add(1),
            Record::CompactBoundary(_) => return Some(steps),
            _ => {}
        }
    }
    None
}

/// True when the latest compaction freed under [`MIN_PROGRESS`] of the context or left it
/// above `threshold`.
pub fn last_progress_poor(records: &[Record], threshold: u64) -> bool {
    crate::session::records::latest_boundary(records).is_some_and(|b| {
        let freed = b.tokens_before.saturating_sub(b.tokens_after) as f64;
        b.tokens_after > threshold || freed < b.tokens_before as f64 * MIN_PROGRESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> Pressure {
        Pressure {
            tokens: 34_000,
            threshold: 32_000,
            target: 24_000,
            stage1_saves: 0,
            deep_saves: 0,
            steps_since: None,
            last_poor: false,
        }
    }

    #[test]
    fn below_threshold_nothing() {
        let q = Pressure {
            tokens: 32_000,
            ..p()
        };
        assert_eq!(choose_relief(&q, 3), None);
    }

    #[test]
    fn trim_when_it_reaches_the_target_else_summary() {
        let q = Pressure {
            stage1_saves: 10_000,
            ..p()
        };
        assert_eq!(choose_relief(&q, 3), Some(Relief::Trim { deep: false }));
        let q = Pressure {
            stage1_saves: 5_000,
            ..p()
        };
        assert_eq!(choose_relief(&q, 3), Some(Relief::Summary));
    }

    #[test]
    fn a_deeper_trim_before_a_summary() {
        let q = Pressure {
            stage1_saves: 5_000,
            deep_saves: 12_000,
            ..p()
        };
        assert_eq!(choose_relief(&q, 3), Some(Relief::Trim { deep: true }));
    }

    #[test]
    fn no_summary_right_after_one() {
        let q = Pressure {
            steps_since: Some(1),
            deep_saves: 4_000,
            ..p()
        };
        assert_eq!(choose_relief(&q, 3), Some(Relief::Trim { deep: true }));
        let q = Pressure {
            steps_since: Some(2),
            deep_saves: 1_000,
            ..p()
        };
        assert_eq!(choose_relief(&q, 3), Some(Relief::Reinstall));
        let q = Pressure {
            steps_since: Some(3),
            ..p()
        };
        assert_eq!(choose_relief(&q, 3), Some(Relief::Summary));
        let q = Pressure {
            steps_since: Some(30),
            last_poor: true,
            ..p()
        };
        assert_eq!(choose_relief(&q, 3), Some(Relief::Reinstall));
    }
}
