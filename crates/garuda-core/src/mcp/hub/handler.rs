//! Our side of each connection (the rmcp client handler) and the elicitation relay: a
//! server's requests for the person's input reach the tool call in flight, which asks the
//! turn's client while the call waits.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationCapability,
    ErrorData, FormElicitationCapability, Implementation, InputRequest, InputRequests,
    InputResponses, TASKS_EXTENSION_ID, UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient, ServiceError};
use tokio_util::sync::CancellationToken;

use crate::mcp::elicit::{self, ElicitationAnswer, Elicitor, Relay};

/// Our side of the MCP connection: identifies Garuda, hears notifications and passes
/// elicitation requests to the tool call in flight.
#[derive(Clone)]
pub(super) struct Handler {
    pub(super) server: String,
    pub(super) dirty: Arc<AtomicBool>,
    pub(super) relay: Arc<Relay>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::info!(target: "garuda::mcp", server = %self.server, "tools/list_changed");
        self.dirty.store(true, Ordering::SeqCst);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(answer_elicitation(&self.server, &self.relay, request).await)
    }

    fn get_info(&self) -> ClientConfig {
        // Elicitation, both modes: the turn's client answers, or Garuda declines with a reason.
        // No roots or sampling: Garuda answers neither.
        let mut caps = ClientCapabilities::default();
        let mut elicitation = ElicitationCapability::new();
        elicitation.form = Some(FormElicitationCapability::new());
        elicitation.url = Some(UrlElicitationCapability::new());
        caps.elicitation = Some(elicitation);
        // Tasks (SEP-2663): a server may run a tool call as a task, which `call` polls.
        caps.extensions
            .get_or_insert_with(Default::default)
            .insert(TASKS_EXTENSION_ID.to_string(), Default::default());
        ClientConfig::new(
            caps,
            Implementation::new("garuda", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// Passes a server's elicitation to the tool call in flight and answers with the outcome.
async fn answer_elicitation(
    server: &str,
    relay: &Relay,
    request: ElicitRequestParams,
) -> ElicitResult {
    let answer = match elicit::from_params(server, request) {
        Some(request) => relay.ask(request).await,
        None => ElicitationAnswer::Unavailable("an elicitation mode Garuda does not know".into()),
    };
    elicit::to_result(server, answer)
}

/// Answers the input requests of an `input_required` result or task: elicitations go to the
/// person; Garuda offers no sampling and no roots, so those fail the call.
pub(super) async fn answer_inputs(
    server: &str,
    relay: &Relay,
    requests: InputRequests,
) -> Result<InputResponses, ServiceError> {
    let mut out = InputResponses::new();
    for (key, request) in requests {
        let InputRequest::Elicitation(request) = request else {
            return Err(ServiceError::McpError(ErrorData::invalid_request(
                "the server asked for sampling or roots, which Garuda does not offer",
                None,
            )));
        };
        let result = answer_elicitation(server, relay, request.params).await;
        let value = serde_json::to_value(result)
            .map_err(|e| ServiceError::McpError(ErrorData::internal_error(e.to_string(), None)))?;
        out.insert(key, value);
    }
    Ok(out)
}

/// Counts a call in flight on the relay while it lives.
struct Active<'a>(&'a Relay);

impl<'a> Active<'a> {
    fn enter(relay: &'a Relay) -> Active<'a> {
        relay.active.fetch_add(1, Ordering::SeqCst);
        Active(relay)
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Why a call ended without the server's answer.
pub(super) enum Stopped {
    /// The call's time ran out.
    Timeout,
    /// The turn was cancelled.
    Cancelled,
}

/// Drives `call` to its answer within `limit`, handing the elicitation requests that arrive
/// meanwhile to `elicitor`. Dropping `call` on a timeout or a cancel is what cancels its
/// request at the server.
pub(super) async fn relay_during<T>(
    call: impl Future<Output = T>,
    relay: &Relay,
    elicitor: &dyn Elicitor,
    cancel: &CancellationToken,
    limit: Duration,
) -> Result<T, Stopped> {
    let _active = Active::enter(relay);
    tokio::pin!(call);
    let sleep = tokio::time::sleep(limit);
    tokio::pin!(sleep);
    loop {
        let pending = async { relay.rx.lock().await.recv().await };
        tokio::select! {
            r = &mut call => return Ok(r),
            _ = &mut sleep => return Err(Stopped::Timeout),
            _ = cancel.cancelled() => return Err(Stopped::Cancelled),
            Some(p) = pending => {
                let asked = Instant::now();
                let answer = tokio::select! {
                    a = elicitor.elicit(p.request) => a,
                    _ = cancel.cancelled() => return Err(Stopped::Cancelled),
                };
                let _ = p.answer.send(answer);
                // The person's time does not count against the call's timeout.
                let deadline = sleep.deadline() + asked.elapsed();
                sleep.as_mut().reset(deadline);
            }
        }
    }
}
