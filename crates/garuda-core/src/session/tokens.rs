//! Token accounting: the real count from the last response plus a calibrated estimate of
//! what changed since, and the `context/inspect` breakdown.

use super::records::Record;
use crate::message::ToolSpec;

/// Characters per token before any real count arrived.
pub const DEFAULT_CHARS_PER_TOKEN: f64 = 4.0;
const MIN_CHARS_PER_TOKEN: f64 = 1.0;
const MAX_CHARS_PER_TOKEN: f64 = 12.0;

/// Converts characters to tokens with a per-session ratio learned from real counts (an
/// exponentially weighted average of characters per token).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenEstimator {
    chars_per_token: f64,
    alpha: f64,
    samples: u32,
}

impl Default for TokenEstimator {
    fn default() -> Self {
        TokenEstimator {
            chars_per_token: DEFAULT_CHARS_PER_TOKEN,
            alpha: 0.3,
            samples: 0,
        }
    }
}

impl TokenEstimator {
    /// The current characters-per-token ratio.
    pub fn chars_per_token(&self) -> f64 {
        self.chars_per_token
    }

    /// Real counts seen so far.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// Estimated tokens for `chars` characters (rounded up).
    pub fn estimate(&self, chars: usize) -> u64 {
        (chars as f64 / self.chars_per_token).ceil() as u64
    }

    /// Signed estimate for a change in characters.
    pub fn estimate_delta(&self, delta_chars: i64) -> i64 {
        let t = (delta_chars.unsigned_abs() as f64 / self.chars_per_token).ceil() as i64;
        if delta_chars < 0 { -t } else { t }
    }

    /// Learns from a request of `chars` characters that the provider counted as `tokens`.
    pub fn observe(&mut self, chars: usize, tokens: u64) {
        if chars == 0 || tokens == 0 {
            return;
        }
        let ratio = (chars as f64 / tokens as f64).clamp(MIN_CHARS_PER_TOKEN, MAX_CHARS_PER_TOKEN);
        // The first sample replaces the guess; later ones move the average.
        self.chars_per_token = if self.samples == 0 {
            ratio
        } else {
            self.chars_per_token * (1.0 - self.alpha) + ratio * self.alpha
        };
        self.samples = self.samples.saturating_add(1);
    }
}

/// The real count of the last response and the view size it corresponds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    /// Input tokens of the last request plus the response's output tokens.
    pub tokens: u64,
    /// View message characters right after that response was appended.
    pub view_chars: usize,
}

/// Per-session context size: anchor + estimate of the change since.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ContextTracker {
    /// The calibrated estimator.
    pub estimator: TokenEstimator,
    /// The last real count (None: none yet, or reset by compaction).
    pub anchor: Option<Anchor>,
}

impl ContextTracker {
    /// Records a response's usage. `request_chars` is the whole request (system, tools,
    /// messages) for calibration; `view_chars` the view's messages after the response.
    pub fn on_usage(
        &mut self,
        usage: &crate::message::Usage,
        request_chars: Option<usize>,
        view_chars: usize,
    ) {
        let input = usage.context_tokens();
        if let Some(c) = request_chars {
            self.estimator.observe(c, input);
        }
        self.anchor = Some(Anchor {
            tokens: input + usage.output_tokens,
            view_chars,
        });
    }

    /// Learns from a refused request: the provider counted `tokens` for `request_chars`
    /// characters while the view held `view_chars`, so that is the context size now.
    pub fn on_refused(&mut self, request_chars: usize, tokens: u64, view_chars: usize) {
        self.estimator.observe(request_chars, tokens);
        self.anchor = Some(Anchor { tokens, view_chars });
    }

    /// The context size now: the anchor moved by the estimated change of the view, or, with
    /// no anchor, an estimate of everything (`fixed_chars` is the system prompt and tools).
    pub fn context_tokens(&self, view_chars: usize, fixed_chars: usize) -> u64 {
        match self.anchor {
            Some(a) => {
                let delta = view_chars as i64 - a.view_chars as i64;
                (a.tokens as i64 + self.estimator.estimate_delta(delta)).max(0) as u64
            }
            None => self.estimator.estimate(view_chars + fixed_chars),
        }
    }

    /// After a compaction the old anchor no longer describes the view.
    pub fn reset(&mut self) {
        self.anchor = None;
    }

    /// Rebuilds the tracker from a transcript: calibrates from every usage record and anchors
    /// at the last one after the latest boundary.
    pub fn replay(records: &[Record]) -> Self {
        let start = super::view::slice_start(records);
        let mut t = ContextTracker::default();
        for (i, r) in records.iter().enumerate() {
            if let Record::Usage(u) = r {
                if let Some(c) = u.request_chars {
                    t.estimator.observe(c as usize, u.usage.context_tokens());
                }
                if i >= start && u.purpose.is_none() {
                    t.anchor = u.view_chars.map(|v| Anchor {
                        tokens: u.usage.context_tokens() + u.usage.output_tokens,
                        view_chars: v as usize,
                    });
                }
            }
        }
        t
    }
}

/// The smallest context limit the provider taught the session (None: none learned).
pub fn learned_limit(records: &[Record]) -> Option<u64> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::ContextLimit(l) => Some(l.limit_tokens),
            _ => None,
        })
        .min()
}

/// The window a session plans with: the configured one, or the provider's smaller limit.
pub fn effective_window(configured: u64, learned: Option<u64>) -> u64 {
    learned.map_or(configured, |l| l.min(configured))
}

/// The window planned with, and where it comes from: `learned` (a refusal named it), the
/// server's endpoint (`llama.cpp /props`, …) when it reported less, or the model's `config`,
/// `table`, `default` or `environment`.
pub fn planned_window(
    info: &crate::provider::ModelInfo,
    server: Option<crate::provider::ServerWindow>,
    learned: Option<u64>,
) -> (u64, &'static str) {
    let (declared, from) = match server {
        Some(s) if s.tokens < info.context_window => (s.tokens, s.source),
        _ => (info.context_window, info.window_from),
    };
    let w = effective_window(declared, learned);
    (w, if w < declared { "learned" } else { from })
}

/// Characters the tool list costs in a request.
pub fn tool_chars(tools: &[ToolSpec]) -> usize {
    tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.input_schema.to_string().len())
        .sum()
}

/// Sizes, in characters, of the parts of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartSizes {
    /// The system prompt without instructions and memory.
    pub system_chars: usize,
    /// The project instructions section.
    pub instructions_chars: usize,
    /// The project memory section.
    pub memory_chars: usize,
    /// The tool specs.
    pub tool_chars: usize,
    /// The view's messages.
    pub message_chars: usize,
}

/// `context/inspect`: tokens by part, with the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ContextParts {
    /// System prompt (without instructions and memory).
    pub system: u64,
    /// Tool specs.
    pub tools: u64,
    /// Project instructions.
    pub instructions: u64,
    /// Project memory.
    pub memory: u64,
    /// Conversation messages.
    pub messages: u64,
    /// Room left before the reserved output.
    pub free: u64,
    /// Reserved for the model's output.
    pub reserved: u64,
    /// The whole window.
    pub window: u64,
    /// Everything used (system + tools + instructions + memory + messages).
    pub used: u64,
    /// Compaction starts above this many tokens.
    pub threshold: u64,
}

/// Tokens by part. With a tracker anchor the total follows the real count, and the
/// difference from the estimate is attributed to the messages. `threshold` is where
/// compaction starts (from the compaction budgets).
pub fn inspect(
    sizes: &PartSizes,
    tracker: &ContextTracker,
    window: u64,
    max_output: u64,
    threshold: u64,
) -> ContextParts {
    let e = &tracker.estimator;
    let system = e.estimate(sizes.system_chars);
    let tools = e.estimate(sizes.tool_chars);
    let instructions = e.estimate(sizes.instructions_chars);
    let memory = e.estimate(sizes.memory_chars);
    let fixed = system + tools + instructions + memory;
    let fixed_chars =
        sizes.system_chars + sizes.tool_chars + sizes.instructions_chars + sizes.memory_chars;
    let total = tracker.context_tokens(sizes.message_chars, fixed_chars);
    let messages = if tracker.anchor.is_some() {
        total.saturating_sub(fixed)
    } else {
        e.estimate(sizes.message_chars)
    };
    let used = fixed + messages;
    let reserved = max_output.min(window);
    ContextParts {
        system,
        tools,
        instructions,
        memory,
        messages,
        free: window.saturating_sub(reserved).saturating_sub(used),
        reserved,
        window,
        used,
        threshold,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Usage;
    use crate::session::records::UsageRecord;

    #[test]
    fn estimator_converges_on_synthetic_data() {
        let mut e = TokenEstimator::default();
        assert_eq!(e.estimate(400), 100);
        // A tokenizer that gives 3.2 characters per token, with ±10 % noise.
        let mut seed = 7u64;
        for _ in 0..60 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let noise = ((seed >> 33) % 200) as f64 / 1000.0 - 0.1;
            let chars = 10_000 + (seed >> 40) as usize % 50_000;
            let tokens = (chars as f64 / (3.2 * (1.0 + noise))) as u64;
            e.observe(chars, tokens);
        }
        assert!(
            (e.chars_per_token() - 3.2).abs() < 0.3,
            "{}",
            e.chars_per_token()
        );
        e.observe(0, 10);
        e.observe(10, 0);
        assert_eq!(e.samples(), 60);
    }

    #[test]
    fn context_is_anchor_plus_estimated_change() {
        let mut t = ContextTracker::default();
        assert_eq!(t.context_tokens(4_000, 4_000), 2_000);
        let usage = Usage {
            input_tokens: 100,
            output_tokens: 50,
            cache_creation_input_tokens: 1_000,
            cache_read_input_tokens: 8_900,
            cleared_input_tokens: 0,
        };
        t.on_usage(&usage, Some(40_000), 30_000);
        assert_eq!(t.estimator.chars_per_token(), 4.0);
        assert_eq!(t.context_tokens(30_000, 0), 10_050);
        assert_eq!(t.context_tokens(34_000, 0), 11_050);
        assert_eq!(t.context_tokens(26_000, 0), 9_050);
        t.reset();
        assert_eq!(t.context_tokens(4, 0), 1);

        let rec = Record::Usage(UsageRecord {
            uuid: "u".into(),
            time: 0,
            message_id: "m".into(),
            usage,
            request_chars: Some(40_000),
            view_chars: Some(30_000),
            purpose: None,
            cost_usd: None,
            cache_miss: None,
        });
        let r = ContextTracker::replay(&[rec]);
        assert_eq!(r.context_tokens(34_000, 0), 11_050);
    }

    #[test]
    fn inspect_splits_parts_and_threshold() {
        let sizes = PartSizes {
            system_chars: 4_000,
            instructions_chars: 2_000,
            memory_chars: 400,
            tool_chars: 8_000,
            message_chars: 40_000,
        };
        let p = inspect(&sizes, &ContextTracker::default(), 200_000, 32_000, 160_000);
        assert_eq!(
            (p.system, p.instructions, p.memory, p.tools, p.messages),
            (1_000, 500, 100, 2_000, 10_000)
        );
        assert_eq!(p.used, 13_600);
        assert_eq!(p.reserved, 32_000);
        assert_eq!(p.free, 200_000 - 32_000 - 13_600);
        assert_eq!(p.threshold, 160_000);
        let mut t = ContextTracker::default();
        t.on_usage(
            &Usage {
                input_tokens: 20_000,
                ..Usage::default()
            },
            None,
            40_000,
        );
        let p = inspect(&sizes, &t, 200_000, 32_000, 160_000);
        assert_eq!(p.used, 20_000);
        assert_eq!(p.messages, 20_000 - 3_600);
    }
}
