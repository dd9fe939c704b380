//! Stage 7: prompt-cache breakpoints.

/// Most cache markers a request may carry (system included).
pub const MAX_CACHE_MARKERS: usize = 4;

/// Where the cache markers go: the end of the system prompt and the last block of the listed
/// messages (indices into the request's messages).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CachePlan {
    /// Mark the end of the system prompt.
    pub system: bool,
    /// Messages whose last block gets a marker.
    pub messages: Vec<usize>,
}

impl CachePlan {
    /// Markers in all.
    pub fn count(&self) -> usize {
        usize::from(self.system) + self.messages.len()
    }
}

/// The main request: system end and the last message.
pub fn main_cache_plan(len: usize) -> CachePlan {
    CachePlan {
        system: true,
        messages: len.checked_sub(1).into_iter().collect(),
    }
}

/// A side request (the summary call) that appends its own instruction after `prefix_len`
/// shared messages: the marker sits on the end of the shared prefix, so the side tail is
/// read from cache up to there and never written.
pub fn side_cache_plan(prefix_len: usize) -> CachePlan {
    main_cache_plan(prefix_len)
}
