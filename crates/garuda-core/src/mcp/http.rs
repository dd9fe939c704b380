//! The HTTP side of MCP's Streamable HTTP transport, on the reqwest 0.12 Garuda already uses.
//!
//! rmcp's own reqwest binding targets reqwest 0.13, which would put a second HTTP client and
//! TLS stack into the build; this is the same contract (`StreamableHttpClient`) in about 250
//! lines: POST a message (answer: 202, one JSON message, or an SSE stream), GET the
//! server-to-client SSE stream, DELETE the session. Bodies are read within rmcp's limits, and
//! an SSE event larger than the limit ends the stream. With sign-in ([`ServerAuth`]) a 401, or
//! a 403 `insufficient_scope`, is answered by refreshing or signing in, and the request is sent
//! again (bounded by [`crate::mcp::oauth::MAX_AUTHORIZATIONS`]); without it a 401 or 403
//! becomes rmcp's auth error. The bearer token is sent on every request and never logged.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use reqwest::StatusCode;
use reqwest::header::{
    ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE,
};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError, StreamableHttpClient,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

use crate::mcp::oauth::{ServerAuth, parse_challenge};

type HttpError = StreamableHttpError<reqwest::Error>;

/// A reqwest client speaking MCP Streamable HTTP.
#[derive(Clone, Debug)]
pub struct McpHttpClient {
    http: reqwest::Client,
    auth: Option<Arc<ServerAuth>>,
}

impl McpHttpClient {
    /// A client with a connect timeout and rmcp's redirect rule (same-origin 307/308 only, so
    /// a POST body and the session id never go to another host).
    pub fn new(connect_timeout: Duration) -> Result<Self, reqwest::Error> {
        reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            // rmcp found ~40 ms stalls (delayed ACK) when a pooled connection is reused before
            // the previous SSE body was read to the end; MCP calls are few, so no pooling.
            .pool_max_idle_per_host(0)
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                let keeps_body = matches!(
                    attempt.status(),
                    StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
                );
                let same_origin = attempt
                    .previous()
                    .first()
                    .is_some_and(|first| first.origin() == attempt.url().origin());
                if !keeps_body || !same_origin {
                    attempt.stop()
                } else if attempt.previous().len() > 10 {
                    attempt.error("more than 10 redirects")
                } else {
                    attempt.follow()
                }
            }))
            .build()
            .map(|http| McpHttpClient { http, auth: None })
    }

    /// Signs in through `auth` when the server asks (its token replaces any static one).
    pub fn with_auth(mut self, auth: Arc<ServerAuth>) -> Self {
        self.auth = Some(auth);
        self
    }

    /// The token to send: the signed-in one, else the static one rmcp passes.
    async fn token(&self, static_token: &Option<String>) -> Option<String> {
        match &self.auth {
            Some(auth) => auth.bearer().await,
            None => static_token.clone(),
        }
    }

    /// With sign-in, a 401 or a 403 `insufficient_scope` is answered: `Some(next attempt)`
    /// means send again; `None` leaves the response to the usual handling.
    async fn challenge(
        &self,
        response: &reqwest::Response,
        sent: Option<&str>,
        attempt: usize,
    ) -> Result<Option<usize>, HttpError> {
        let Some(auth) = &self.auth else {
            return Ok(None);
        };
        let status = response.status();
        let header = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default();
        let ours = match status {
            StatusCode::UNAUTHORIZED => true,
            StatusCode::FORBIDDEN => parse_challenge(&header)
                .is_some_and(|c| c.error.as_deref() == Some("insufficient_scope")),
            _ => false,
        };
        if !ours {
            return Ok(None);
        }
        match auth
            .handle_challenge(status.as_u16(), &header, sent, attempt)
            .await
        {
            Ok(()) => Ok(Some(attempt + 1)),
            Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                e.to_string(),
            ))),
        }
    }
}

/// A request with the headers every MCP call carries.
fn request(
    mut b: reqwest::RequestBuilder,
    session_id: Option<&str>,
    auth: Option<String>,
    custom: HashMap<HeaderName, HeaderValue>,
) -> reqwest::RequestBuilder {
    if let Some(token) = auth {
        b = b.bearer_auth(token);
    }
    // Custom headers include the worker's own `MCP-Protocol-Version`, so none are refused.
    for (name, value) in custom {
        b = b.header(name, value);
    }
    if let Some(id) = session_id {
        b = b.header(HEADER_SESSION_ID, id);
    }
    b
}

/// 401/403 with a challenge as rmcp's auth errors, so its callers see what they expect.
fn auth_error(status: StatusCode, headers: &HeaderMap) -> Option<HttpError> {
    let challenge = headers.get(WWW_AUTHENTICATE)?;
    let header = String::from_utf8_lossy(challenge.as_bytes()).into_owned();
    match status {
        StatusCode::UNAUTHORIZED => Some(StreamableHttpError::AuthRequired(
            AuthRequiredError::new(header),
        )),
        StatusCode::FORBIDDEN => {
            let scope = header
                .split("scope=\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .map(str::to_string);
            Some(StreamableHttpError::InsufficientScope(
                InsufficientScopeError::new(header, scope),
            ))
        }
        _ => None,
    }
}

/// 429 and 5xx as status metadata (no body), as rmcp's own client reports them.
fn status_error(status: StatusCode, headers: &HeaderMap) -> Option<HttpStatusError> {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let retry_after = headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    Some(HttpStatusError::new(status.as_u16(), retry_after))
}

/// True when a `Content-Type` value names `mime` (ignoring parameters and case).
fn is_type(value: Option<&HeaderValue>, mime: &str) -> bool {
    value
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(mime))
}

/// Reads a body up to `max` bytes; `Err` when it is longer (or the read fails).
async fn read_bounded(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, HttpError> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(StreamableHttpError::Client)?
    {
        if chunk.len() > max - body.len() {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Reads at most `max` bytes of a diagnostic body, dropping the rest.
async fn read_prefix(mut response: reqwest::Response, max: usize) -> String {
    let mut body = Vec::new();
    while body.len() < max {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let n = chunk.len().min(max - body.len());
                body.extend_from_slice(&chunk[..n]);
            }
            _ => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The response body as SSE events; an event over `max_event` bytes ends the stream with an
/// error instead of growing a buffer without bound.
fn sse(response: reqwest::Response, max_event: usize) -> BoxStream<'static, Result<Sse, SseError>> {
    let mut pending = 0usize;
    let bytes = response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        // Bytes since the last blank line approximate the size of the event being read.
        pending = match chunk.windows(2).rposition(|w| w == b"\n\n") {
            Some(i) => chunk.len() - i - 2,
            None => pending + chunk.len(),
        };
        if pending > max_event {
            return Err(std::io::Error::other(format!(
                "SSE event larger than {max_event} bytes"
            )));
        }
        Ok(chunk)
    });
    SseStream::from_bytes_stream(bytes).boxed()
}

impl StreamableHttpClient for McpHttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let had_session = session_id.is_some();
        let body = serde_json::to_vec(&message).map_err(|e| {
            StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                "cannot encode the message: {e}"
            )))
        })?;
        let mut attempt = 0;
        let response = loop {
            let token = self.token(&auth_header).await;
            let b = self
                .http
                .post(uri.as_ref())
                .header(
                    ACCEPT,
                    format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
                )
                .header(CONTENT_TYPE, JSON_MIME_TYPE);
            let response = request(
                b,
                session_id.as_deref(),
                token.clone(),
                custom_headers.clone(),
            )
            .body(body.clone())
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
            match self.challenge(&response, token.as_deref(), attempt).await? {
                Some(next) => attempt = next,
                None => break response,
            }
        };
        let status = response.status();
        if let Some(e) = auth_error(status, response.headers()) {
            return Err(e);
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && had_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        let content_type = response.headers().get(CONTENT_TYPE).cloned();
        let json = is_type(content_type.as_ref(), JSON_MIME_TYPE);
        let new_session = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        // A notification or a response to the server expects no answer; servers differ in
        // how they say "accepted" (202, empty 200, 200 with any body).
        let awaits_nothing = !matches!(message, ClientJsonRpcMessage::Request(_));
        if !status.is_success() {
            let metadata = status_error(status, response.headers());
            let body = if json && status != StatusCode::TOO_MANY_REQUESTS {
                // A JSON-RPC error in the body is the most useful thing to pass on.
                let body = read_bounded(response, limits.max_json_response_size)
                    .await
                    .unwrap_or_default();
                if let Ok(m @ JsonRpcMessage::Error(_)) =
                    serde_json::from_slice::<ServerJsonRpcMessage>(&body)
                {
                    return Ok(StreamableHttpPostResponse::Json(m, new_session));
                }
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(limits.max_error_response_size)
                    .collect()
            } else if metadata.is_none() {
                read_prefix(response, limits.max_error_response_size).await
            } else {
                String::new()
            };
            if let Some(e) = metadata {
                return Err(e.into());
            }
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {body}"),
            )));
        }
        if is_type(content_type.as_ref(), EVENT_STREAM_MIME_TYPE) {
            return Ok(StreamableHttpPostResponse::Sse(
                sse(response, limits.max_sse_event_size),
                new_session,
            ));
        }
        if json {
            let body = read_bounded(response, limits.max_json_response_size).await?;
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(m) => Ok(StreamableHttpPostResponse::Json(m, new_session)),
                Err(_) if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    format!(
                        "invalid JSON-RPC answer ({e}): {}",
                        String::from_utf8_lossy(&body[..body.len().min(256)])
                    ),
                ))),
            };
        }
        if awaits_nothing {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(
            content_type.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
        ))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        let b = self.http.delete(uri.as_ref());
        let token = self.token(&auth_header).await;
        let response = request(b, Some(&session_id), token, custom_headers)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            // Deleting a session is optional for servers.
            return Ok(());
        }
        response
            .error_for_status()
            .map(|_| ())
            .map_err(StreamableHttpError::Client)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        let mut attempt = 0;
        let response = loop {
            let mut b = self.http.get(uri.as_ref()).header(
                ACCEPT,
                format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
            );
            if let Some(id) = &last_event_id {
                b = b.header(HEADER_LAST_EVENT_ID, id);
            }
            let token = self.token(&auth_header).await;
            let response = request(
                b,
                session_id.as_deref(),
                token.clone(),
                custom_headers.clone(),
            )
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
            match self.challenge(&response, token.as_deref(), attempt).await? {
                Some(next) => attempt = next,
                None => break response,
            }
        };
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if let Some(e) = auth_error(status, response.headers()) {
            return Err(e);
        }
        if let Some(e) = status_error(status, response.headers()) {
            return Err(e.into());
        }
        let response = response
            .error_for_status()
            .map_err(StreamableHttpError::Client)?;
        let ct = response.headers().get(CONTENT_TYPE);
        if !is_type(ct, EVENT_STREAM_MIME_TYPE) && !is_type(ct, JSON_MIME_TYPE) {
            return Err(StreamableHttpError::UnexpectedContentType(
                ct.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
            ));
        }
        Ok(sse(response, max_sse_event_size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        let v = HeaderValue::from_static("Application/JSON; charset=utf-8");
        assert!(is_type(Some(&v), JSON_MIME_TYPE));
        assert!(!is_type(Some(&v), EVENT_STREAM_MIME_TYPE));
        assert!(!is_type(None, JSON_MIME_TYPE));
    }

    #[test]
    fn auth_challenges() {
        let mut h = HeaderMap::new();
        assert!(auth_error(StatusCode::UNAUTHORIZED, &h).is_none());
        h.insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"x\", scope=\"repo read\""),
        );
        assert!(matches!(
            auth_error(StatusCode::UNAUTHORIZED, &h),
            Some(StreamableHttpError::AuthRequired(_))
        ));
        match auth_error(StatusCode::FORBIDDEN, &h) {
            Some(StreamableHttpError::InsufficientScope(e)) => {
                assert_eq!(e.required_scope.as_deref(), Some("repo read"))
            }
            other => panic!("{other:?}"),
        }
        assert!(status_error(StatusCode::BAD_REQUEST, &h).is_none());
        assert_eq!(
            status_error(StatusCode::SERVICE_UNAVAILABLE, &h).map(|e| e.status),
            Some(503)
        );
    }
}
