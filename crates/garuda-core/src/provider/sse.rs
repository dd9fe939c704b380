//! The shared HTTP + SSE driver: send with retries, stream with idle timeout and cancel.
//!
//! Wire formats plug in as a [`Decoder`]; this module owns everything that is the same for
//! both: status classification, `retry-after`, backoff, timeouts, cut streams, cancellation,
//! the caps on what a server may make Garuda hold (an error body is read up to
//! [`MAX_ERROR_BODY`]; a stream through the bounded [`SseParser`]), and the normalization of
//! tool calls at the boundary ([`super::normalize`]).

use std::collections::HashSet;
use std::time::Duration;

use reqwest::header::HeaderMap;
use tokio_util::sync::CancellationToken;

use super::event_stream::{SseEvent, SseParser};
use super::retry::{self, RetryPolicy, Verdict};
use super::{EventSink, ModelResponse, ProviderError, StreamEvent};
use crate::message::Block;

/// Most bytes read of an error answer (or of a JSON answer where a stream was asked for);
/// only a 500-character excerpt is kept, the rest is not read.
pub(crate) const MAX_ERROR_BODY: usize = 64 * 1024;

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
    /// The provider's request slots: each attempt holds one from the send to the stream's
    /// end, none during a backoff.
    pub slots: std::sync::Arc<tokio::sync::Semaphore>,
    pub url: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub idle: Duration,
    pub retry: RetryPolicy,
    pub secret: Option<String>,
    /// Tool call ids the request's messages already use (answers must not reuse them).
    pub taken: HashSet<String>,
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
        let slot = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ProviderError::Cancelled { partial: Vec::new() }),
            // The semaphore is never closed; were it, the call would go on without a slot.
            slot = call.slots.clone().acquire_owned() => slot.ok(),
        };
        let result = attempt_once(&call, &mut dec, &events, &cancel).await;
        drop(slot);
        let outcome = match result {
            Ok(resp) => {
                let _ = events.send(StreamEvent::Usage(resp.usage));
                return Ok(resp.normalized(&mut call.taken.clone()));
            }
            Err(o) => o,
        };
        let fail = |e: ProviderError| {
            Err(e
                .redact(call.secret.as_deref())
                .normalized(&mut call.taken.clone()))
        };
        let (err, after) = match outcome {
            Outcome::Fail(e) => return fail(e),
            Outcome::Retry { err, after } => (err, after),
        };
        if attempt >= call.retry.max_retries {
            return fail(err);
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
        let body = read_capped(resp, call.idle, cancel).await?;
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
        let body = read_capped(resp, call.idle, cancel).await?;
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

    let mut resp = resp;
    let mut parser = SseParser::default();
    let mut events_out: Vec<SseEvent> = Vec::new();
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                return Err(Outcome::Fail(ProviderError::Cancelled { partial: dec.partial() }));
            }
            n = tokio::time::timeout(call.idle, resp.chunk()) => n,
        };
        let chunk = match next {
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
            Ok(Ok(Some(chunk))) => chunk,
            Ok(Ok(None)) if dec.eof_ok() => return dec.finish().map_err(Outcome::Fail),
            Ok(Ok(None)) => {
                return Err(cut(
                    dec,
                    "the stream ended before the response was complete".into(),
                ));
            }
            Ok(Err(e)) => return Err(cut(dec, format!("stream error: {e}"))),
        };
        if let Err(e) = parser.push(&chunk, &mut events_out) {
            return Err(Outcome::Fail(ProviderError::Decode(e.to_string())));
        }
        for ev in events_out.drain(..) {
            match dec.event(&ev.event, &ev.data, events) {
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
            }
        }
    }
}

/// A stream that stopped early: before any content it is retried like a dropped connection
/// (nothing reached the client); after some, the partial answer is kept and the turn ends.
fn cut<D: Decoder>(dec: &D, reason: String) -> Outcome {
    let err = ProviderError::Cut {
        partial: dec.partial(),
        reason,
    };
    if dec.has_content() {
        Outcome::Fail(err)
    } else {
        Outcome::Retry { err, after: None }
    }
}

/// Reads at most [`MAX_ERROR_BODY`] bytes of an answer's body (lossy UTF-8); the rest is
/// never read. A body that does not arrive within `idle` counts as empty.
async fn read_capped(
    mut resp: reqwest::Response,
    idle: Duration,
    cancel: &CancellationToken,
) -> Result<String, Outcome> {
    let mut body: Vec<u8> = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                return Err(Outcome::Fail(ProviderError::Cancelled { partial: Vec::new() }));
            }
            n = tokio::time::timeout(idle, resp.chunk()) => n,
        };
        match next {
            Ok(Ok(Some(chunk))) => {
                let room = MAX_ERROR_BODY - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
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
