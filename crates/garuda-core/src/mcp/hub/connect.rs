//! Starting a server: spawning or connecting, the lifecycle (the stateless protocol or the
//! `initialize` handshake), the first tool listing, and the subscription to list changes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter, Tool};
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient};

use super::child::{Pipes, spawn};
use super::event::McpEvent;
use super::handler::Handler;
use super::server::{McpServerState, Server, Service, expiry, lock};
use crate::mcp::config::McpTransport;
use crate::mcp::elicit::Relay;
use crate::mcp::http::McpHttpClient;
use crate::mcp::oauth::{AuthContext, ServerAuth};

/// Connect timeout for Streamable HTTP servers.
const HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts one server within its startup timeout and records the outcome.
pub(super) async fn start_server(
    server: Arc<Server>,
    cwd: Option<PathBuf>,
    events: Arc<Mutex<Vec<McpEvent>>>,
    relay: Arc<Relay>,
    auth: AuthContext,
    settled: Arc<AtomicBool>,
) {
    let t0 = Instant::now();
    let ms = server.config.startup_timeout_ms.max(1);
    let connecting = connect(&server, cwd, events.clone(), relay, auth);
    tokio::pin!(connecting);
    let mut deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
    let result = loop {
        match tokio::time::timeout_at(deadline, &mut connecting).await {
            Ok(r) => break r,
            // The person's time in the browser is not the server's: the sign-in has its own
            // deadline, and the start gets its whole timeout again after it.
            Err(_) if server.waiting_for_person() => {
                deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
            }
            Err(_) => break Err(format!("did not start within {ms} ms")),
        }
    };
    match result {
        Ok((service, tools, ttl_ms)) => {
            *lock(&server.expires) = expiry(ttl_ms);
            let elapsed = t0.elapsed().as_millis() as u64;
            tracing::info!(target: "garuda::mcp", server = %server.name, tools = tools.len(),
                startup_ms = elapsed, "ready");
            *lock(&server.peer) = Some(service.peer().clone());
            *lock(&server.service) = Some(Arc::new(service));
            let count = tools.len();
            *lock(&server.listed) = tools;
            *lock(&server.startup_ms) = Some(elapsed);
            {
                let mut st = lock(&server.state);
                if *st == McpServerState::Starting {
                    *st = McpServerState::Ready;
                }
            }
            if settled.load(Ordering::SeqCst) {
                lock(&events).push(McpEvent::ServerLate {
                    server: server.name.clone(),
                    tools: count,
                });
            }
            // The process may have died between listing and here, when the waiter still saw
            // `Starting` and so reported nothing.
            let died = lock(&server.child)
                .as_ref()
                .and_then(|c| c.status.borrow().clone());
            if let Some(desc) = died {
                server.mark_exited(desc, &events);
            }
        }
        Err(mut reason) => {
            let status = lock(&server.child).as_ref().map(|c| c.status.clone());
            if let Some(mut status) = status {
                // A process that died during startup: wait briefly for its exit status.
                let _ = tokio::time::timeout(
                    Duration::from_millis(300),
                    status.wait_for(Option::is_some),
                )
                .await;
                if let Some(s) = status.borrow().as_ref() {
                    reason.push_str(&format!("; {s}"));
                }
                server.stderr.settled().await;
            }
            if let Some(tail) = server.stderr.text() {
                reason.push_str(&format!("; stderr: {tail}"));
            }
            if let Some(c) = lock(&server.child).as_ref() {
                c.signal(rustix::process::Signal::KILL);
            }
            tracing::warn!(target: "garuda::mcp", server = %server.name, "failed to start: {reason}");
            *lock(&server.state) = McpServerState::Failed {
                reason: reason.clone(),
            };
            server.report_failed(reason, &events);
        }
    }
}

/// The connection, its tools and their cache hint (`ttlMs`).
type Connected = (Service, Vec<Tool>, Option<u64>);

/// How a connection starts: the stateless 2026-07-28 protocol (`server/discover`, metadata on
/// every request) when the server speaks it, else the `initialize` handshake at 2025-11-25
/// (rmcp falls back when the server answers that it is a legacy one, or after 10 s of
/// silence).
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// On the stateless protocol a server sends `tools/list_changed` only on a subscription
/// (`subscriptions/listen`): opens one when the server offers `tools.listChanged`, and marks
/// the server dirty on each notification, as the handler does on the older protocol. The
/// acknowledgment is awaited here, so no change after start is missed.
async fn listen_for_tool_changes(server: &Arc<Server>, peer: &Peer<RoleClient>) {
    let Some(info) = peer.peer_info() else { return };
    // Some servers leave `listChanged` out and send changes anyway; only an explicit `false`
    // says there will be none.
    let offers = info
        .capabilities
        .tools
        .as_ref()
        .is_some_and(|t| t.list_changed != Some(false));
    if info.protocol_version < ProtocolVersion::V_2026_07_28 || !offers {
        return;
    }
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut sub = match peer.listen(filter).await {
        Ok(sub) => sub,
        Err(e) => {
            tracing::warn!(target: "garuda::mcp", server = %server.name, "subscriptions/listen failed: {e}");
            return;
        }
    };
    let (name, dirty) = (server.name.clone(), server.dirty.clone());
    tokio::spawn(async move {
        while let Ok(Some(n)) = sub.next().await {
            if matches!(n, ServerNotification::ToolListChangedNotification(_)) {
                tracing::info!(target: "garuda::mcp", server = %name, "tools/list_changed");
                dirty.store(true, Ordering::SeqCst);
            }
        }
    });
}

/// Spawns or connects, initializes, and lists the tools.
async fn connect(
    server: &Arc<Server>,
    cwd: Option<PathBuf>,
    events: Arc<Mutex<Vec<McpEvent>>>,
    relay: Arc<Relay>,
    auth: AuthContext,
) -> Result<Connected, String> {
    let handler = Handler {
        server: server.name.clone(),
        dirty: server.dirty.clone(),
        relay,
    };
    let transport = server.transport.clone()?;
    let service = match transport {
        McpTransport::Stdio { command, args } => {
            let pipes = spawn_child(server, &command, &args, cwd.clone(), events.clone())?;
            let first = handler
                .clone()
                .serve_with_lifecycle(pipes, lifecycle())
                .await;
            match first {
                // A legacy server that answers `server/discover` with an empty result instead
                // of "method not found": once more, a fresh process with the handshake.
                Err(ClientInitializeError::ExpectedInitResult(_)) => {
                    tracing::info!(target: "garuda::mcp", server = %server.name,
                        "server/discover answered with an empty result: starting again with initialize");
                    if let Some(c) = lock(&server.child).take() {
                        c.signal(rustix::process::Signal::KILL);
                    }
                    let pipes = spawn_child(server, &command, &args, cwd, events)?;
                    handler
                        .serve_with_lifecycle(pipes, ClientLifecycleMode::Initialize)
                        .await
                }
                other => other,
            }
            .map_err(|e| format!("initialize failed: {}", tidy(&e.to_string())))?
        }
        McpTransport::Http { url } => {
            let mut cfg = StreamableHttpClientTransportConfig::with_uri(url);
            if let Some(var) = &server.config.bearer_token_env {
                let token = crate::sandbox::secret_var(var)
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| format!("bearer_token_env `{var}` is not set"))?;
                cfg = cfg.auth_header(token);
            }
            let mut headers = std::collections::HashMap::new();
            for (k, v) in &server.config.headers {
                let name = HeaderName::try_from(k.as_str())
                    .map_err(|_| format!("invalid header name `{k}`"))?;
                let value = HeaderValue::try_from(v.as_str())
                    .map_err(|_| format!("invalid value for header `{k}`"))?;
                headers.insert(name, value);
            }
            let static_auth = server.config.bearer_token_env.is_some()
                || headers.keys().any(|k| k == reqwest::header::AUTHORIZATION);
            cfg = cfg.custom_headers(headers);
            let mut client = McpHttpClient::new(HTTP_CONNECT_TIMEOUT)
                .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
            // A configured token or Authorization header is the user's choice; sign-in only
            // where there is none.
            if !static_auth && server.config.oauth.is_enabled() {
                let sign_in = match server.auth.get() {
                    Some(a) => a.clone(),
                    None => {
                        let a = ServerAuth::new(
                            &server.name,
                            &cfg.uri,
                            server.config.oauth.clone(),
                            auth,
                        )
                        .map_err(|e| e.to_string())?;
                        server.auth.get_or_init(|| Arc::new(a)).clone()
                    }
                };
                client = client.with_auth(sign_in);
            }
            let first = handler
                .clone()
                .serve_with_lifecycle(
                    StreamableHttpClientTransport::with_client(client.clone(), cfg.clone()),
                    lifecycle(),
                )
                .await;
            match first {
                // A legacy server that answers `server/discover` with an empty result instead
                // of "method not found": a fresh connection with the `initialize` handshake.
                Err(ClientInitializeError::ExpectedInitResult(_)) => {
                    handler
                        .serve_with_lifecycle(
                            StreamableHttpClientTransport::with_client(client, cfg),
                            ClientLifecycleMode::Initialize,
                        )
                        .await
                }
                other => other,
            }
            .map_err(|e| {
                sign_in_failure(server)
                    .unwrap_or_else(|| format!("initialize failed: {}", tidy(&e.to_string())))
            })?
        }
    };
    let list = service
        .peer()
        .list_all_tools_with_cache_hint()
        .await
        .map_err(|e| {
            sign_in_failure(server).unwrap_or_else(|| format!("tools/list failed: {e}"))
        })?;
    listen_for_tool_changes(server, service.peer()).await;
    Ok((service, list.items, list.ttl_ms))
}

/// Starts the stdio server's process (see [`spawn`]) and keeps it as the server's child; its
/// exit marks a ready server stopped.
fn spawn_child(
    server: &Arc<Server>,
    command: &str,
    args: &[String],
    cwd: Option<PathBuf>,
    events: Arc<Mutex<Vec<McpEvent>>>,
) -> Result<Pipes, String> {
    let waiter = server.clone();
    let on_exit = move |reason| waiter.mark_exited(reason, &events);
    let (child, pipes) = spawn(
        &server.name,
        &server.config,
        command,
        args,
        cwd,
        &server.stderr,
        on_exit,
    )?;
    *lock(&server.child) = Some(child);
    Ok(pipes)
}

/// Why the server's sign-in failed, when it did: the whole reason, without rmcp's wrapping.
fn sign_in_failure(server: &Server) -> Option<String> {
    let e = server.auth.get()?.last_error()?;
    Some(match e {
        crate::mcp::oauth::OAuthError::NeedsPerson { .. } => e.to_string(),
        other => format!("sign-in failed: {other}"),
    })
}

/// rmcp's error text without the Rust type names it puts in brackets.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '[' => depth += 1,
            ']' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_type_names_leave_error_text() {
        assert_eq!(
            tidy("Send message error Transport [a::B<c::D, e::F>] error: Broken pipe"),
            "Send message error Transport error: Broken pipe"
        );
    }
}
