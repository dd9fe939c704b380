//! Why a main request read less from the prompt cache than the one before left there: the
//! print of each request (the model, hashes of the system prompt, the tools and each
//! message, the time, the latest compaction) compared with the previous one's. Pure: the
//! turn hands in the request and the provider's usage.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde::{Deserialize, Serialize};

use crate::message::{Message, Usage};

/// How long a provider keeps a cached prefix without a read: Anthropic's default `ephemeral`
/// cache lives five minutes (OpenAI's automatic cache at least as long).
pub const CACHE_TTL_MS: u64 = 5 * 60 * 1_000;

/// A read short of this share of the previous request's prompt is a miss; the rest of the
/// gap is the previous answer and the new tail, which no cache can hold yet.
const MISS_SHARE: f64 = 0.9;

/// What a request sent, in hashes: enough to say which part changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPrint {
    /// The model asked.
    pub model: String,
    /// Hash of the system prompt.
    pub system: u64,
    /// Hash of the tool definitions.
    pub tools: u64,
    /// Hash of each message, in order.
    pub messages: Vec<u64>,
    /// Unix milliseconds it was sent.
    pub time_ms: u64,
    /// The id of the latest compaction boundary in force (None: never compacted).
    pub boundary: Option<String>,
}

impl RequestPrint {
    /// The print of a request. `tools_json` is the tool list as sent (its order matters).
    pub fn new(
        model: &str,
        system: &str,
        tools_json: &str,
        messages: &[Message],
        time_ms: u64,
        boundary: Option<String>,
    ) -> RequestPrint {
        RequestPrint {
            model: model.to_string(),
            system: hash(system.as_bytes()),
            tools: hash(tools_json.as_bytes()),
            messages: messages
                .iter()
                .map(|m| hash(&serde_json::to_vec(m).unwrap_or_default()))
                .collect(),
            time_ms,
            boundary,
        }
    }
}

fn hash(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// Why the cache was missed (or read only in part).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cause", rename_all = "camelCase")]
pub enum CacheMiss {
    /// The session's first request: nothing was cached yet.
    FirstRequest,
    /// Another model: caches are per model.
    ModelSwitch,
    /// A compaction rewrote the conversation since the previous request.
    Compaction,
    /// The system prompt changed (instruction files, memory, a reload).
    SystemChanged,
    /// The tool list changed (an MCP server, a client's tools, a skill).
    ToolsChanged,
    /// A message before the end of the previous request changed (a snip, a collapse, a
    /// microcompact, a trim): the cache holds only what comes before it.
    #[serde(rename_all = "camelCase")]
    MessageChanged {
        /// Index of the first changed message.
        index: usize,
    },
    /// Nothing changed, but the request came after the cache's lifetime.
    #[serde(rename_all = "camelCase")]
    Expired {
        /// Seconds since the previous request.
        idle_secs: u64,
    },
    /// Nothing Garuda sent explains it (the provider evicted the entry early, or routed the
    /// request elsewhere).
    Unknown,
}

impl CacheMiss {
    /// One line for people.
    pub fn describe(&self) -> String {
        match self {
            CacheMiss::FirstRequest => "first request: nothing cached yet".into(),
            CacheMiss::ModelSwitch => "model switched: caches are per model".into(),
            CacheMiss::Compaction => "a compaction rewrote the conversation".into(),
            CacheMiss::SystemChanged => "the system prompt changed".into(),
            CacheMiss::ToolsChanged => "the tool list changed".into(),
            CacheMiss::MessageChanged { index } => {
                format!("the conversation changed at message {index} (snip, collapse, trim)")
            }
            CacheMiss::Expired { idle_secs } => {
                format!("the cache expired: {idle_secs} s since the previous request")
            }
            CacheMiss::Unknown => "not explained by what was sent (the provider's side)".into(),
        }
    }
}

/// Share of a request's prompt read from the cache (0 when it had no prompt).
pub fn hit_ratio(u: &Usage) -> f64 {
    let total = u.context_tokens();
    if total == 0 {
        0.0
    } else {
        u.cache_read_input_tokens as f64 / total as f64
    }
}

/// Why `cur` (answered with `usage`) read less than `prev` left in the cache; None when it
/// read what it could, or when the provider reports no cache at all.
pub fn explain(
    prev: Option<(&RequestPrint, &Usage)>,
    cur: &RequestPrint,
    usage: &Usage,
) -> Option<CacheMiss> {
    let Some((p, pu)) = prev else {
        return Some(CacheMiss::FirstRequest);
    };
    let reports_cache = |u: &Usage| u.cache_read_input_tokens + u.cache_creation_input_tokens > 0;
    if !reports_cache(usage) && !reports_cache(pu) {
        return None;
    }
    let expected = pu.context_tokens() as f64 * MISS_SHARE;
    if usage.cache_read_input_tokens as f64 >= expected {
        return None;
    }
    Some(cause(p, cur))
}

/// How a session's main requests read the cache, from its usage records.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CacheReport {
    /// Share of the last main request's prompt read from the cache (None before any).
    pub last_hit_ratio: Option<f64>,
    /// The same over every main request.
    pub session_hit_ratio: f64,
    /// The newest misses with their causes, oldest first: (unix milliseconds, cause).
    pub misses: Vec<(u64, CacheMiss)>,
}

/// Share of the session's main prompts read from the cache, `latest` (an answer not yet
/// recorded) included.
pub fn session_hit_ratio(records: &[crate::session::Record], latest: &Usage) -> f64 {
    let mut total = *latest;
    for r in records {
        if let crate::session::Record::Usage(u) = r
            && u.purpose.is_none()
        {
            total.add(&u.usage);
        }
    }
    hit_ratio(&total)
}

/// Misses [`report`] lists.
pub const REPORTED_MISSES: usize = 20;

/// The cache report of `records`.
pub fn report(records: &[crate::session::Record]) -> CacheReport {
    let mut last = None;
    let mut misses = Vec::new();
    for r in records {
        let crate::session::Record::Usage(u) = r else {
            continue;
        };
        if u.purpose.is_some() {
            continue;
        }
        last = Some(hit_ratio(&u.usage));
        if let Some(m) = &u.cache_miss {
            misses.push((u.time, m.clone()));
        }
    }
    let skip = misses.len().saturating_sub(REPORTED_MISSES);
    CacheReport {
        last_hit_ratio: last,
        session_hit_ratio: session_hit_ratio(records, &Usage::default()),
        misses: misses.split_off(skip),
    }
}

/// The same for the first request after the session was loaded again, when only the last
/// main request's usage and time are known (its print stayed with the process before).
pub fn explain_after_load(
    last: (&Usage, u64),
    cur: &RequestPrint,
    usage: &Usage,
) -> Option<CacheMiss> {
    let (lu, time) = last;
    let prev = RequestPrint {
        time_ms: time,
        ..cur.clone()
    };
    explain(Some((&prev, lu)), cur, usage)
}

/// The first difference between two requests, in the order the cache reads them.
fn cause(p: &RequestPrint, cur: &RequestPrint) -> CacheMiss {
    if p.model != cur.model {
        return CacheMiss::ModelSwitch;
    }
    if p.boundary != cur.boundary {
        return CacheMiss::Compaction;
    }
    if p.tools != cur.tools {
        return CacheMiss::ToolsChanged;
    }
    if p.system != cur.system {
        return CacheMiss::SystemChanged;
    }
    if let Some(index) = p
        .messages
        .iter()
        .zip(&cur.messages)
        .position(|(a, b)| a != b)
        .or((cur.messages.len() < p.messages.len()).then_some(cur.messages.len()))
    {
        return CacheMiss::MessageChanged { index };
    }
    let idle = cur.time_ms.saturating_sub(p.time_ms);
    if idle > CACHE_TTL_MS {
        return CacheMiss::Expired {
            idle_secs: idle / 1_000,
        };
    }
    CacheMiss::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn print(system: &str, msgs: &[&str], time_ms: u64) -> RequestPrint {
        let messages: Vec<Message> = msgs.iter().map(|t| Message::user_text(*t)).collect();
        RequestPrint::new("m", system, "[]", &messages, time_ms, None)
    }

    fn usage(read: u64, write: u64, input: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: 10,
            cache_creation_input_tokens: write,
            cache_read_input_tokens: read,
            cleared_input_tokens: 0,
        }
    }

    #[test]
    fn a_request_that_reads_what_the_last_one_left_is_no_miss() {
        let a = print("s", &["a"], 0);
        let b = print("s", &["a", "b"], 1_000);
        assert_eq!(
            explain(Some((&a, &usage(0, 1_000, 10))), &b, &usage(1_000, 200, 5)),
            None
        );
        assert_eq!(
            explain(None, &a, &usage(0, 1_000, 10)),
            Some(CacheMiss::FirstRequest)
        );
        // A provider that reports no cache never misses.
        assert_eq!(
            explain(Some((&a, &usage(0, 0, 900))), &b, &usage(0, 0, 1_000)),
            None
        );
    }

    #[test]
    fn each_cause_in_the_order_the_cache_reads() {
        let prev = usage(0, 10_000, 10);
        let miss = usage(0, 10_000, 10);
        let a = print("s", &["a", "b"], 0);
        let mut m = a.clone();
        m.model = "other".into();
        assert_eq!(
            explain(Some((&a, &prev)), &m, &miss),
            Some(CacheMiss::ModelSwitch)
        );
        let mut c = a.clone();
        c.boundary = Some("b1".into());
        assert_eq!(
            explain(Some((&a, &prev)), &c, &miss),
            Some(CacheMiss::Compaction)
        );
        let mut t = a.clone();
        t.tools = 1;
        assert_eq!(
            explain(Some((&a, &prev)), &t, &miss),
            Some(CacheMiss::ToolsChanged)
        );
        let s = print("s2", &["a", "b"], 0);
        assert_eq!(
            explain(Some((&a, &prev)), &s, &miss),
            Some(CacheMiss::SystemChanged)
        );
        let changed = print("s", &["a", "B", "c"], 0);
        assert_eq!(
            explain(Some((&a, &prev)), &changed, &miss),
            Some(CacheMiss::MessageChanged { index: 1 })
        );
        let shorter = print("s", &["a"], 0);
        assert_eq!(
            explain(Some((&a, &prev)), &shorter, &miss),
            Some(CacheMiss::MessageChanged { index: 1 })
        );
        let late = print("s", &["a", "b", "c"], CACHE_TTL_MS + 61_000);
        assert_eq!(
            explain(Some((&a, &prev)), &late, &miss),
            Some(CacheMiss::Expired { idle_secs: 361 })
        );
        let same = print("s", &["a", "b", "c"], 1_000);
        assert_eq!(
            explain(Some((&a, &prev)), &same, &miss),
            Some(CacheMiss::Unknown)
        );
    }

    #[test]
    fn after_a_load_only_the_time_can_explain() {
        let cur = print("s", &["a"], CACHE_TTL_MS * 3);
        let last = usage(0, 10_000, 10);
        assert_eq!(
            explain_after_load((&last, 0), &cur, &usage(0, 10_000, 10)),
            Some(CacheMiss::Expired { idle_secs: 900 })
        );
        assert_eq!(
            explain_after_load(
                (&last, CACHE_TTL_MS * 3 - 1_000),
                &cur,
                &usage(0, 10_000, 10)
            ),
            Some(CacheMiss::Unknown)
        );
        assert_eq!(
            explain_after_load((&last, 0), &cur, &usage(10_000, 100, 10)),
            None
        );
    }

    #[test]
    fn causes_serialize_as_tagged_objects_and_read_as_lines() {
        let v = serde_json::to_value(CacheMiss::Expired { idle_secs: 400 }).unwrap();
        assert_eq!(v, serde_json::json!({"cause": "expired", "idleSecs": 400}));
        let v = serde_json::to_value(CacheMiss::MessageChanged { index: 3 }).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"cause": "messageChanged", "index": 3})
        );
        assert!(
            CacheMiss::Expired { idle_secs: 400 }
                .describe()
                .contains("400 s")
        );
        assert!((hit_ratio(&usage(750, 200, 50)) - 0.75).abs() < 1e-9);
        assert_eq!(hit_ratio(&Usage::default()), 0.0);
    }
}
