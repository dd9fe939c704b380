//! The shared HTTP + SSE driver: send with retries, stream with idle timeout and cancel.
//!
//! Wire formats plug in as a [`Decoder`]; this module owns everything that is the same for
//! both: status classification, `retry-after`, backoff, timeouts, cut streams, cancellation.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use reqwest::header::HeaderMap;
use tokio_util::sync::CancellationToken;

use super::retry::{self, RetryPolicy, Verdict};
use super::{EventSink, ModelResponse, ProviderError, StreamEvent};
use crate::message::Block;

/// What a decoder says after one SSE event.
pub(crate) enum Step {
    /// Keep reading.
    More,
    /// The response is complete.
    Done,
}

/// One wire format's incremental parser for one attempt.
pub(crate) trait Decoder: Send {
    /// Handles one SSE event, sending deltas to `sink`.
    fn event(&mut self, name: &str, data: &str, sink: &EventSink) -> Result<Step, Verdict>;
    /// True once any content delta went to the sink (after that, no retry).
    fn has_content(&self) -> bool;
    /// Blocks that can be kept when the stream stops early.
    fn partial(&self) -> Vec<Block>;
    /// Whether a clean end of the stream without an explicit end marker is acceptable.
    fn eof_ok(&self) -> bool;
    /// The finished response.
    fn finish(&mut self) -> Result<ModelResponse, ProviderError>;
}

/// A prepared HTTP call.
pub(crate) struct Call {
    pub client: reqwest::Client,
    pub url: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub idle: Duration,
    pub retry: RetryPolicy,
    pub secret: Option<String>,
}

enum Outcome {
    Retry {
        err: ProviderError,
        after: Option<Duration>,
    },
    Fail(ProviderError),
}

/// Runs the call to completion with retries; the final usage goes to the sink as well.
pub(crate) async fn run<D: Decoder>(
    call: Call,
    new_decoder: impl Fn() -> D,
    events: EventSink,
    cancel: CancellationToken,
) -> Result<ModelResponse, ProviderError> {
    let mut attempt = 0u32;
    loop {
        let mut dec = new_decoder();
        let outcome = match attempt_once(&call, &mut dec, &events, &cancel).await {
            Ok(resp) => {
                let _ = events.send(StreamEvent::Usage(resp.usage));
                return Ok(resp);
            }
            Err(o) => o,
        };
        let (err, after) = match outcome {
            Outcome::Fail(e) => return Err(e.redact(call.secret.as_deref())),
            Outcome::Retry { err, after } => (err, after),
        };
        if attempt >= call.retry.max_retries {
            return Err(err.redact(call.secret.as_deref()));
        }
        attempt += 1;
        let delay = call.retry.delay(attempt, after);
        let reason = retry_reason(&err.redact(call.secret.as_deref()));
        let _ = events.send(StreamEvent::Retry {
            attempt,
            delay_ms: delay.as_millis() as u64,
            reason,
        });
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ProviderError::Cancelled { partial: Vec::new() }),
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// The text of a `Retry` event: what went wrong, without the "retries exhausted" wording.
fn retry_reason(err: &ProviderError) -> String {
    match err {
        ProviderError::RateLimited { body_excerpt } => {
            format!("rate limited (HTTP 429): {body_excerpt}")
        }
        ProviderError::Overloaded { body_excerpt } => format!("overloaded: {body_excerpt}"),
        ProviderError::Server {
            status,
            body_excerpt,
        } => {
            format!("server error (HTTP {status}): {body_excerpt}")
        }
        other => other.to_string(),
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

async fn attempt_once<D: Decoder>(
    call: &Call,
    dec: &mut D,
    events: &EventSink,
    cancel: &CancellationToken,
) -> Result<ModelResponse, Outcome> {
    let send = call
        .client
        .post(&call.url)
        .headers(call.headers.clone())
        .body(call.body.clone())
        .send();
    let sent = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(Outcome::Fail(ProviderError::Cancelled { partial: Vec::new() })),
        r = tokio::time::timeout(call.idle, send) => r,
    };
    let resp = match sent {
        Err(_) => {
            return Err(Outcome::Fail(ProviderError::Timeout(format!(
                "no answer from {} within {}",
                call.url,
                secs(call.idle)
            ))));
        }
        // Refused or timed-out connections fail fast (a local server that is not running
        // should say so at once); a connection dropped mid-request is retried.
        Ok(Err(e)) if e.is_connect() || e.is_timeout() => {
            return Err(Outcome::Fail(transport_error(&call.url, &e)));
        }
        Ok(Err(e)) => {
            return Err(Outcome::Retry {
                err: transport_error(&call.url, &e),
                after: None,
            });
        }
        Ok(Ok(r)) => r,
    };
    let status = resp.status();
    if !status.is_success() {
        let after = retry::retry_after(resp.headers());
        let body = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(Outcome::Fail(ProviderError::Cancelled { partial: Vec::new() })),
            b = tokio::time::timeout(call.idle, resp.text()) => b.ok().and_then(|b| b.ok()).unwrap_or_default(),
        };
        return Err(
            match retry::classify(status.as_u16(), &retry::excerpt(&body)) {
                Verdict::Retry(err) => Outcome::Retry { err, after },
                Verdict::Fail(err) => Outcome::Fail(err),
            },
        );
    }

    // A JSON answer where a stream was asked for is an error report (some gateways and
    // local servers send these with status 200).
    let is_json = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        let body = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(Outcome::Fail(ProviderError::Cancelled { partial: Vec::new() })),
            b = tokio::time::timeout(call.idle, resp.text()) => b.ok().and_then(|b| b.ok()).unwrap_or_default(),
        };
        let text = retry::excerpt(&body);
        let has_error = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .is_some_and(|v| v.get("error").is_some());
        return Err(if has_error {
            match retry::classify_stream_error("error", &text) {
                Verdict::Retry(err) => Outcome::Retry { err, after: None },
                Verdict::Fail(err) => Outcome::Fail(err),
            }
        } else {
            Outcome::Fail(ProviderError::Decode(format!(
                "expected an event stream, got JSON: {text}"
            )))
        });
    }

    let mut stream = resp.bytes_stream().eventsource();
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                return Err(Outcome::Fail(ProviderError::Cancelled { partial: dec.partial() }));
            }
            n = tokio::time::timeout(call.idle, stream.next()) => n,
        };
        match next {
            Err(_) => {
                let what = format!("no data from the model for {}", secs(call.idle));
                return Err(Outcome::Fail(if dec.has_content() {
                    ProviderError::Cut {
                        partial: dec.partial(),
                        reason: what,
                    }
                } else {
                    ProviderError::Timeout(what)
                }));
            }
            Ok(None) if dec.eof_ok() => return dec.finish().map_err(Outcome::Fail),
            Ok(None) => {
                return Err(Outcome::Fail(ProviderError::Cut {
                    partial: dec.partial(),
                    reason: "the stream ended before the response was complete".into(),
                }));
            }
            Ok(Some(Err(e))) => {
                return Err(Outcome::Fail(ProviderError::Cut {
                    partial: dec.partial(),
                    reason: format!("stream error: {e}"),
                }));
            }
            Ok(Some(Ok(ev))) => match dec.event(&ev.event, &ev.data, events) {
                Ok(Step::More) => {}
                Ok(Step::Done) => return dec.finish().map_err(Outcome::Fail),
                Err(Verdict::Retry(err)) if !dec.has_content() => {
                    return Err(Outcome::Retry { err, after: None });
                }
                Err(Verdict::Retry(err)) | Err(Verdict::Fail(err)) => {
                    return Err(Outcome::Fail(match err {
                        e @ (ProviderError::PromptTooLong(_) | ProviderError::Decode(_))
                            if !dec.has_content() =>
                        {
                            e
                        }
                        e => ProviderError::Cut {
                            partial: dec.partial(),
                            reason: e.to_string(),
                        },
                    }));
                }
            },
        }
    }
}

fn transport_error(url: &str, e: &reqwest::Error) -> ProviderError {
    // Walk the source chain: reqwest's top-level text hides the cause.
    let mut text = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        text.push_str(": ");
        text.push_str(&s.to_string());
        src = s.source();
    }
    if e.is_timeout() {
        ProviderError::Timeout(format!("connecting to {url}: {text}"))
    } else if e.is_connect() {
        ProviderError::Http(format!("cannot connect to {url}: {text}"))
    } else {
        ProviderError::Http(text)
    }
}

/// An HTTP client with the endpoint's connect timeout.
pub(crate) fn http_client(ep: &super::Endpoint) -> Result<reqwest::Client, ProviderError> {
    reqwest::Client::builder()
        .connect_timeout(ep.connect_timeout)
        .user_agent(concat!("garuda/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ProviderError::Config(format!("cannot build the HTTP client: {e}")))
}
