//! Retry policy: which answers are retried, backoff with jitter, and `retry-after` parsing.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

use super::ProviderError;

/// How often and how long to wait between attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Delay before the first retry (doubled each time).
    pub base_delay: Duration,
    /// Largest delay, also the cap on `retry-after`.
    pub max_delay: Duration,
}

impl RetryPolicy {
    /// Delay before retry number `attempt` (1-based): the provider's `retry-after` when given,
    /// else exponential backoff with jitter in [50 %, 100 %]; both capped at `max_delay`.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(ra) = retry_after {
            return ra.min(self.max_delay);
        }
        let exp = self
            .base_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let full = exp.min(self.max_delay);
        // Jitter from a v4 uuid: cheap randomness without another dependency.
        let r = (uuid::Uuid::new_v4().as_u128() % 1000) as u32;
        full / 2 + full / 2 * r / 1000
    }
}

/// Reads `retry-after-ms`, then `retry-after` (seconds or an HTTP date).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_millis(ms as u64));
    }
    let v = get("retry-after")?;
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::from_millis((secs * 1000.0) as u64));
    }
    let when = httpdate::parse_http_date(v).ok()?;
    Some(
        when.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// What to do with a non-success HTTP answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Retry; if retries are exhausted, return the error.
    Retry(ProviderError),
    /// Give up now with this error.
    Fail(ProviderError),
}

/// Phrases providers and local servers use for a request that exceeds the context window.
const TOO_LONG: &[&str] = &[
    "prompt is too long",
    "prompt too long",
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "context length",
    "context limit",
    "exceed_context",
    "exceeds the available context",
    "too many tokens",
    "input is too long",
    "request_too_large",
    "model_context_window_exceeded",
    "context size",
    "context the overflows",
    "n_keep",
    "while limit is",
];

/// True when an error text says the prompt does not fit.
pub fn says_prompt_too_long(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    TOO_LONG.iter().any(|p| lower.contains(p))
}

/// True when an error text says an image of the request cannot be accepted: Anthropic's
/// `image exceeds 5 MB maximum` and `image dimensions exceed max allowed size`, `Could not
/// process image`, OpenAI's `invalid_image` / `image_parse_error`, and the like.
pub fn says_media_refused(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    const PHRASES: &[&str] = &[
        "image exceeds",
        "image dimensions exceed",
        "could not process image",
        "invalid_image",
        "invalid image",
        "image_parse_error",
        "image too large",
        "image is too large",
        "unsupported image",
        "image_url is not supported",
    ];
    PHRASES.iter().any(|p| lower.contains(p))
}

/// Classifies an HTTP status and body excerpt.
pub fn classify(status: u16, excerpt: &str) -> Verdict {
    let lower = excerpt.to_ascii_lowercase();
    match status {
        401 | 403 => Verdict::Fail(ProviderError::Auth { status }),
        400 | 413 | 422 if says_media_refused(excerpt) => {
            Verdict::Fail(ProviderError::MediaRefused(excerpt.to_string()))
        }
        400 | 413 | 422 if says_prompt_too_long(excerpt) => {
            Verdict::Fail(ProviderError::PromptTooLong(excerpt.to_string()))
        }
        // A spent quota does not come back by waiting.
        429 if lower.contains("insufficient_quota") => Verdict::Fail(ProviderError::RateLimited {
            body_excerpt: excerpt.to_string(),
        }),
        429 => Verdict::Retry(ProviderError::RateLimited {
            body_excerpt: excerpt.to_string(),
        }),
        529 => Verdict::Retry(ProviderError::Overloaded {
            body_excerpt: excerpt.to_string(),
        }),
        _ if lower.contains("overloaded") && status >= 500 => {
            Verdict::Retry(ProviderError::Overloaded {
                body_excerpt: excerpt.to_string(),
            })
        }
        408 | 500..=599 => Verdict::Retry(ProviderError::Server {
            status,
            body_excerpt: excerpt.to_string(),
        }),
        _ => Verdict::Fail(ProviderError::Http(format!("HTTP {status}: {excerpt}"))),
    }
}

/// Classifies an error reported inside a stream by its type and message.
pub fn classify_stream_error(kind: &str, message: &str) -> Verdict {
    let text = format!("{kind}: {message}");
    let lower = text.to_ascii_lowercase();
    if lower.contains("overloaded") {
        Verdict::Retry(ProviderError::Overloaded { body_excerpt: text })
    } else if lower.contains("rate_limit") || lower.contains("rate limit") {
        Verdict::Retry(ProviderError::RateLimited { body_excerpt: text })
    } else if says_prompt_too_long(&text) {
        Verdict::Fail(ProviderError::PromptTooLong(text))
    } else if lower.contains("api_error")
        || lower.contains("server_error")
        || lower.contains("internal")
    {
        Verdict::Retry(ProviderError::Server {
            status: 500,
            body_excerpt: text,
        })
    } else {
        Verdict::Fail(ProviderError::Http(text))
    }
}

/// A short, readable excerpt of an error body: the JSON `error.message` when present.
pub fn excerpt(body: &str) -> String {
    let msg = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            let e = v.get("error")?;
            let m = e
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string);
            let t = e
                .get("type")
                .or_else(|| e.get("code"))
                .and_then(|t| t.as_str());
            // llama.cpp names the sizes beside its message: they teach the window.
            let sizes = match (e.get("n_prompt_tokens"), e.get("n_ctx")) {
                (Some(n), Some(c)) if n.is_u64() && c.is_u64() => {
                    format!(" {{\"n_prompt_tokens\":{n},\"n_ctx\":{c}}}")
                }
                _ => String::new(),
            };
            match (t, m) {
                (Some(t), Some(m)) => Some(format!("{t}: {m}{sizes}")),
                (None, Some(m)) => Some(format!("{m}{sizes}")),
                (_, None) => e.as_str().map(str::to_string),
            }
        });
    let text = msg.unwrap_or_else(|| body.trim().to_string());
    let mut out: String = text.chars().take(500).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(
            retry_after(&headers(&[("retry-after", "3")])),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "250"), ("retry-after", "9")])),
            Some(Duration::from_millis(250))
        );
        let future = SystemTime::now() + Duration::from_secs(120);
        let d = retry_after(&headers(&[(
            "retry-after",
            &httpdate::fmt_http_date(future),
        )]))
        .unwrap();
        assert!(d > Duration::from_secs(100) && d <= Duration::from_secs(120));
        let past = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(60));
        assert_eq!(
            retry_after(&headers(&[("retry-after", &past)])),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")])), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            max_retries: 4,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
        };
        for attempt in 1..=6 {
            let d = p.delay(attempt, None);
            let full = Duration::from_millis((100u64 << (attempt - 1)).min(1000));
            assert!(d >= full / 2 && d <= full, "{attempt}: {d:?}");
        }
        assert_eq!(
            p.delay(1, Some(Duration::from_millis(30))),
            Duration::from_millis(30)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(30))),
            Duration::from_millis(1000)
        );
    }

    #[test]
    fn classification() {
        assert!(matches!(
            classify(401, "x"),
            Verdict::Fail(ProviderError::Auth { status: 401 })
        ));
        assert!(matches!(
            classify(429, "slow down"),
            Verdict::Retry(ProviderError::RateLimited { .. })
        ));
        assert!(matches!(
            classify(429, "insufficient_quota: pay"),
            Verdict::Fail(_)
        ));
        assert!(matches!(
            classify(529, "x"),
            Verdict::Retry(ProviderError::Overloaded { .. })
        ));
        assert!(matches!(
            classify(503, "overloaded_error"),
            Verdict::Retry(ProviderError::Overloaded { .. })
        ));
        assert!(matches!(
            classify(502, "bad gateway"),
            Verdict::Retry(ProviderError::Server { status: 502, .. })
        ));
        assert!(matches!(
            classify(404, "nope"),
            Verdict::Fail(ProviderError::Http(_))
        ));
        for body in [
            "invalid_request_error: prompt is too long: 210000 tokens > 200000 maximum",
            "context_length_exceeded",
            "This model's maximum context length is 8192 tokens",
            "the request exceeds the available context size",
        ] {
            assert!(
                matches!(
                    classify(400, body),
                    Verdict::Fail(ProviderError::PromptTooLong(_))
                ),
                "{body}"
            );
        }
        assert!(matches!(
            classify(400, "bad field"),
            Verdict::Fail(ProviderError::Http(_))
        ));
        for body in [
            "invalid_request_error: messages.1.content.0.image.source.base64: image exceeds 5 MB maximum: 7340032 bytes > 5242880 bytes",
            "invalid_request_error: messages.3.content.1.image.source.base64.data: image dimensions exceed max allowed size: 8000 pixels",
            "invalid_request_error: Could not process image",
            "invalid_image: Invalid image data",
            "image_parse_error: You uploaded an unsupported image.",
        ] {
            let v = classify(400, body);
            assert!(
                matches!(&v, Verdict::Fail(e) if e.is_media_refused() && e.kind() == "mediaRefused"),
                "{body}"
            );
        }
    }

    #[test]
    fn excerpts() {
        assert_eq!(
            excerpt(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "overloaded_error: Overloaded"
        );
        assert_eq!(
            excerpt(r#"{"error":{"message":"m","code":"context_length_exceeded"}}"#),
            "context_length_exceeded: m"
        );
        assert_eq!(excerpt(r#"{"error":"plain"}"#), "plain");
        assert_eq!(excerpt(" oops \n"), "oops");
        assert_eq!(excerpt(&"x".repeat(600)).chars().count(), 501);
    }
}
