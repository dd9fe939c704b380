//! Compaction planning, pure: when to compact and how (`guard`), where to split and what the
//! kept part may cost (`fit`), stage-1 trimming, the summary requests (`summary_request`),
//! the user's own words carried verbatim (`pinned`), the extractive handoff, and the records
//! that install a compaction (`install`), and the lighter reliefs before it: the automatic
//! collapse and the snip nudge (`relief`), and the compaction worker's pure parts
//! (`worker`). The caller does the IO (model calls, file reads,
//! appends).

mod fit;
mod fork;
mod guard;
mod handoff;
mod install;
mod memory;
mod pinned;
mod relief;
mod summary_prompt;
mod summary_request;
mod worker;

use super::records::{TrimRecord, new_id};
use super::tokens::TokenEstimator;
use super::view::ViewMessage;
use crate::message::{Block, Role};

pub use fit::{KeptPlan, kept_chars, kept_from, plan_kept, with_its_request, without_regenerated};
pub use fork::{
    COLLAPSE_INSTRUCTION, Fork, collapse_fork, collapse_instruction, fork_with, opening,
};
pub use guard::{Pressure, Relief, choose_relief, last_progress_poor, steps_since_compaction};
pub use handoff::{
    HANDOFF_LABEL, exit_code, extractive_handoff, files_touched, render_files_touched, render_todo,
    todo_note,
};
pub use install::{
    FileSnapshot, FreshStart, InstallInput, Installation, REFERENCES_OPEN, Reattach, Restored,
    SkillSnapshot, SummaryText, TodoEntry, current_request, fresh_start_note, plan_fresh_start,
    plan_installation, previous_summary, restored_file_text, restored_plan, select_restored_files,
    select_restored_skills, summary_intro, with_references,
};
pub use memory::{
    MEMORY_INSTRUCTION_START, MEMORY_STEP_MIN_TOKENS, cache_idle_ms, idle_applies, idle_due,
    latest_memory, memory_due, memory_end, memory_instruction,
};
pub use pinned::{Pinned, UserWords, cut_with_marker, origins, pin, user_messages};
pub use relief::{auto_collapse_span, collapse_start, nudge_due, nudge_text, span_user_words};
pub use summary_prompt::{
    IMAGE_MARKER, SUMMARY_SYSTEM, rewrite_for_summary, shrink_instruction, strip_analysis,
    summary_instruction,
};
pub use summary_request::{
    SO_FAR_OPEN, api_round_groups, chunk_messages, chunk_rounds, summary_max_tokens, summary_source,
};
pub use worker::{
    BUDGET_WARNING, CLEARED, Capture, Entry, Summarizer, WORKER_SYSTEM, WorkerBudgets, WorkerCall,
    WorkerOutcome, WorkerRun, fit_conversation, run_input, worker_budgets, worker_tools,
};

/// Compaction settings (the seed's defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactPolicy {
    /// Compact above this share of the window.
    pub threshold: f64,
    /// Stage 1 alone suffices at or below this share; an installation aims at or below it.
    pub target: f64,
    /// Assistant turns kept in full.
    pub keep_steps: usize,
    /// Stage 1 trims tool results longer than this (characters)…
    pub trim_over: usize,
    /// …to this many characters.
    pub trim_to: usize,
    /// Use window − min(max output, 20 000) − 13 000 instead of `threshold`.
    pub use_reserved_formula: bool,
    /// Most files restored after compaction.
    pub restore_files: usize,
    /// Token limit of one restored file (the cap at large windows; see [`budgets`]).
    pub restore_file_tokens: u64,
    /// Token budget of all restored files (the cap at large windows; see [`budgets`]).
    pub restore_total_tokens: u64,
    /// Re-splits of a summary request the provider refused as too long.
    pub max_ptl_retries: u32,
    /// Consecutive failures after which auto-compaction pauses.
    pub max_failures: u32,
    /// Size target of the model's summary, as a share of the window.
    pub summary_share: f64,
    /// Budget of the user's words carried verbatim, as a share of the window.
    pub user_words_share: f64,
    /// Model steps after a compaction before the next summary may run.
    pub min_summary_gap: u32,
    /// The most of the window one tool result takes whole.
    pub result_share: f64,
    /// The threshold as a share of the window, at most (an environment override; it also
    /// lowers the reserved formula).
    pub threshold_cap: Option<f64>,
    /// Compact automatically (off: only on request, and over-window requests are refused).
    pub auto_compact: bool,
    /// Growth, as a share of the window, after which the model is nudged to snip (0: never).
    pub nudge_share: f64,
    /// Collapse an older span by itself between `collapse_threshold` and the threshold.
    pub auto_collapse: bool,
    /// Automatic collapse starts above this share of the window.
    pub collapse_threshold: f64,
    /// The least an automatic collapse takes away, as a share of the window.
    pub collapse_min_share: f64,
    /// The automatic collapse starts at most at this many tokens (0: no cap).
    pub collapse_max_tokens: u64,
    /// Which summarizer a compaction uses (the worker, one request, or the choice by size).
    pub summarizer: Summarizer,
    /// Keep a session memory current in the background and compact from it first.
    pub session_memory: bool,
    /// The memory is kept from this share of the window on (and idle compaction applies).
    pub memory_start: f64,
    /// The memory is asked again after the context grew by this share of the window.
    pub memory_step: f64,
    /// Compact a large idle session before its provider cache expires, or at resume after.
    pub idle_compaction: bool,
    /// How long the provider keeps a prompt cache entry, in seconds.
    pub cache_ttl_secs: u64,
}

impl Default for CompactPolicy {
    fn default() -> Self {
        CompactPolicy {
            threshold: 0.8,
            target: 0.6,
            keep_steps: 4,
            trim_over: 1_000,
            trim_to: 200,
            use_reserved_formula: false,
            restore_files: 5,
            restore_file_tokens: 5_000,
            restore_total_tokens: 50_000,
            max_ptl_retries: 3,
            max_failures: 3,
            summary_share: 0.1,
            user_words_share: 0.1,
            min_summary_gap: 3,
            result_share: 0.1,
            threshold_cap: None,
            auto_compact: true,
            nudge_share: 0.1,
            auto_collapse: true,
            collapse_threshold: 0.6,
            collapse_min_share: 0.05,
            collapse_max_tokens: 60_000,
            summarizer: Summarizer::Auto,
            session_memory: true,
            memory_start: 0.3,
            memory_step: 0.1,
            idle_compaction: true,
            cache_ttl_secs: 300,
        }
    }
}

/// Output room the reserved formula sets aside at most.
pub const SUMMARY_OUTPUT_RESERVE: u64 = 20_000;
/// Further room the reserved formula sets aside.
pub const EXTRA_RESERVE: u64 = 13_000;
/// The most tokens the summary target and the user's-words budget take at any window.
pub const SHARE_CAP: u64 = 20_000;
/// A compaction that frees less than this share of the context is poor progress: the next
/// one escalates instead of asking the model again.
pub const MIN_PROGRESS: f64 = 0.1;
/// Characters one tool result may take at `window` tokens: `share` of the window (past it,
/// a read stops and says how to read on, other output goes to a side file with a preview).
/// A share of 0 or 1 and above sets no cap.
pub fn result_budget_chars(window: u64, share: f64) -> usize {
    if share <= 0.0 || share >= 1.0 {
        return usize::MAX;
    }
    (window as f64 * share * super::tokens::DEFAULT_CHARS_PER_TOKEN) as usize
}

/// Tokens above which compaction starts.
pub fn threshold_tokens(window: u64, max_output: u64, policy: &CompactPolicy) -> u64 {
    let base = if policy.use_reserved_formula {
        window
            .saturating_sub(max_output.min(SUMMARY_OUTPUT_RESERVE))
            .saturating_sub(EXTRA_RESERVE)
    } else {
        (window as f64 * policy.threshold) as u64
    };
    match policy.threshold_cap {
        Some(cap) => base.min((window as f64 * cap) as u64),
        None => base,
    }
}

/// The least output room a request asks for, however full the window.
pub const MIN_OUTPUT: u64 = 1_024;

/// The least output room a request leaves at `window`: [`MIN_OUTPUT`], or an eighth of a
/// window under 8 192 tokens (at 4 096, 512), so a small window is not half answer room.
pub fn output_floor(window: u64) -> u64 {
    MIN_OUTPUT.min(window / 8)
}

/// The largest context a request may carry: the window less the least output room. With
/// auto-compaction off a larger request is refused before it is sent; with it on, the
/// reliefs run until the request fits, or it is refused.
pub fn blocking_limit(window: u64) -> u64 {
    window.saturating_sub(output_floor(window))
}

/// Tokens at or below which stage 1 alone is enough.
pub fn target_tokens(window: u64, policy: &CompactPolicy) -> u64 {
    (window as f64 * policy.target) as u64
}

/// True when the context is over the threshold.
pub fn should_compact(tokens: u64, window: u64, max_output: u64, policy: &CompactPolicy) -> bool {
    tokens > threshold_tokens(window, max_output, policy)
}

/// What one installation may spend, in tokens, scaled to the window the session plans with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    /// The effective window.
    pub window: u64,
    /// Compaction starts above this.
    pub threshold: u64,
    /// An installation aims at or below this.
    pub target: u64,
    /// Size target of the model's summary.
    pub summary: u64,
    /// The user's words carried verbatim.
    pub user_words: u64,
    /// Most files restored.
    pub restore_files: usize,
    /// Most tokens of one restored file.
    pub restore_file: u64,
    /// Most tokens of all restored files.
    pub restore_total: u64,
    /// Most tokens of one restored skill.
    pub restore_skill: u64,
    /// Most tokens of all restored skills.
    pub restore_skills_total: u64,
    /// Most tokens of the approved plan restored.
    pub restore_plan: u64,
}

/// Most tokens of one skill restored after compaction (seed 001), at large windows.
pub const SKILL_TOKENS: u64 = 5_000;
/// Most tokens of all restored skills (seed 001), at large windows.
pub const SKILLS_TOTAL_TOKENS: u64 = 25_000;
/// Most tokens of the approved plan restored after compaction (plan-mode material, seed 001;
/// the seed names no number, so a plan gets what one restored file or skill gets).
pub const PLAN_TOKENS: u64 = 5_000;

/// The budgets at `window`. Restoration scales with the window: a quarter of it in all and
/// a fortieth per file, which at 200 000 tokens are the seed's 50 000 and 5 000; the
/// configured numbers are the caps. The summary target and the user's words each get their
/// share of the window, at most [`SHARE_CAP`].
pub fn budgets(window: u64, max_output: u64, policy: &CompactPolicy) -> Budgets {
    let threshold = threshold_tokens(window, max_output, policy);
    let share = |s: f64| ((window as f64 * s) as u64).min(SHARE_CAP);
    Budgets {
        window,
        threshold,
        target: target_tokens(window, policy).min(threshold),
        summary: share(policy.summary_share).max(256),
        user_words: share(policy.user_words_share),
        restore_files: policy.restore_files,
        restore_file: policy.restore_file_tokens.min(window / 40),
        restore_total: policy.restore_total_tokens.min(window / 4),
        restore_skill: SKILL_TOKENS.min(window / 40),
        restore_skills_total: SKILLS_TOTAL_TOKENS.min(window / 8),
        restore_plan: PLAN_TOKENS.min(window / 40),
    }
}

/// Index of the `keep_steps`-th assistant message from the end: the kept part starts there.
/// None when there is nothing older to compact.
pub fn split_index(messages: &[ViewMessage], keep_steps: usize) -> Option<usize> {
    let keep = keep_steps.max(1);
    let (i, _) = messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.message.role == Role::Assistant)
        .nth(keep - 1)?;
    (i > 0).then_some(i)
}

/// The outcome of stage 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage1 {
    /// The view with long old tool results cut.
    pub messages: Vec<ViewMessage>,
    /// Characters saved.
    pub saved_chars: usize,
    /// The record that makes replay cut the same results (None: nothing to cut).
    pub record: Option<TrimRecord>,
}

/// Stage 1: tool results longer than `trim_over` before `split` are cut to `trim_to` plus a
/// note. The returned record, appended, makes `build_view` reproduce the same cut.
pub fn stage1(
    messages: &[ViewMessage],
    split: usize,
    policy: &CompactPolicy,
    now_ms: u64,
) -> Stage1 {
    let mut out = messages.to_vec();
    let mut ids = Vec::new();
    let mut saved = 0usize;
    for m in out.iter_mut().take(split) {
        for b in &mut m.message.content {
            let Block::ToolResult {
                tool_use_id,
                content,
                ..
            } = b
            else {
                continue;
            };
            let before: usize = content.iter().map(Block::char_len).sum();
            if before <= policy.trim_over {
                continue;
            }
            super::view::trim_result(content, policy.trim_to);
            let after: usize = content.iter().map(Block::char_len).sum();
            if after < before {
                saved += before - after;
                ids.push(tool_use_id.clone());
            }
        }
    }
    let record = (!ids.is_empty()).then(|| TrimRecord {
        uuid: new_id(),
        time: now_ms,
        tool_use_ids: ids,
        keep_chars: policy.trim_to,
    });
    Stage1 {
        messages: out,
        saved_chars: saved,
        record,
    }
}

/// True when stage 1 alone brings the context to `goal` tokens.
pub fn stage1_reaches(
    tokens_before: u64,
    saved_chars: usize,
    goal: u64,
    estimator: &TokenEstimator,
) -> bool {
    saved_chars > 0 && tokens_before.saturating_sub(estimator.estimate(saved_chars)) <= goal
}

/// True when stage 1 alone brings the context to the target.
pub fn stage1_enough(
    tokens_before: u64,
    saved_chars: usize,
    window: u64,
    estimator: &TokenEstimator,
    policy: &CompactPolicy,
) -> bool {
    stage1_reaches(
        tokens_before,
        saved_chars,
        target_tokens(window, policy),
        estimator,
    )
}

/// A compaction that would not reduce the size is not installed.
pub fn worth_installing(tokens_before: u64, tokens_after: u64) -> bool {
    tokens_after < tokens_before
}

/// Consecutive-failure bookkeeping: after `max_failures` auto-compaction pauses (no loops).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FailureTracker {
    /// Failures in a row.
    pub consecutive: u32,
}

impl FailureTracker {
    /// Counts a failure; true when auto-compaction must now pause (tell the client).
    pub fn failed(&mut self, policy: &CompactPolicy) -> bool {
        self.consecutive = self.consecutive.saturating_add(1);
        self.consecutive == policy.max_failures
    }

    /// A success (or a manual compaction) resumes auto-compaction.
    pub fn succeeded(&mut self) {
        self.consecutive = 0;
    }

    /// True while auto-compaction is paused.
    pub fn paused(&self, policy: &CompactPolicy) -> bool {
        self.consecutive >= policy.max_failures
    }
}

#[cfg(test)]
mod tests;
