//! Elicitation: an MCP server asks the person for input while one of its tools runs.
//!
//! The server's request (a `elicitation/create` request, or an `input_required` result of the
//! stateless 2026-07-28 protocol, which rmcp turns into the same handler call) reaches the
//! hub's [`Relay`]. The relay hands it to the tool call in flight ([`super::McpHub::call`]),
//! whose caller asks its client through the [`Elicitor`] it passed (the turn's host). With
//! no call in flight, or a caller whose client cannot answer, the request is declined with
//! the reason in the answer's `_meta` (`garuda/reason`) and the log.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::future::BoxFuture;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, MetaObject};
use serde_json::{Map, Value};
use tokio::sync::{Mutex as AsyncMutex, mpsc, oneshot};

/// What a server asks the person.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitationRequest {
    /// The server's config name.
    pub server: String,
    /// Its message for the person.
    pub message: String,
    /// A form or a URL to open.
    pub mode: ElicitationMode,
    /// The model's tool call that led to it, when known (set by the turn).
    pub tool_call_id: Option<String>,
}

/// The two kinds of elicitation.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationMode {
    /// Fill in a form: `schema` is the server's `requestedSchema` (a flat JSON Schema object
    /// with primitive properties).
    Form {
        /// The requested schema.
        schema: Value,
    },
    /// Open `url` and complete the step there (for secrets Garuda must not see).
    Url {
        /// The page to open.
        url: String,
        /// The server's id for this elicitation (empty when the protocol has none).
        elicitation_id: String,
    },
}

/// The person's answer (or why there is none).
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAnswer {
    /// Accepted, with the form's content (a JSON object; empty for URL mode).
    Accept(Map<String, Value>),
    /// Declined by the person.
    Decline,
    /// Dismissed or cancelled.
    Cancel,
    /// Nobody can answer (the client has no elicitation, or there is no client); declined
    /// with this reason.
    Unavailable(String),
}

/// Who answers elicitations for one tool call: the turn's host.
pub trait Elicitor: Send + Sync {
    /// Asks the person; the future owns what it needs.
    fn elicit(&self, request: ElicitationRequest) -> BoxFuture<'static, ElicitationAnswer>;
}

/// An [`Elicitor`] that answers every request with [`ElicitationAnswer::Unavailable`].
pub struct NoElicitor(pub String);

impl Elicitor for NoElicitor {
    fn elicit(&self, _: ElicitationRequest) -> BoxFuture<'static, ElicitationAnswer> {
        let reason = self.0.clone();
        Box::pin(async move { ElicitationAnswer::Unavailable(reason) })
    }
}

/// One request waiting for the call in flight to answer it.
pub(crate) struct Pending {
    pub(crate) request: ElicitationRequest,
    pub(crate) answer: oneshot::Sender<ElicitationAnswer>,
}

/// Carries requests from the servers' handlers to the tool calls in flight.
pub(crate) struct Relay {
    tx: mpsc::UnboundedSender<Pending>,
    pub(crate) rx: AsyncMutex<mpsc::UnboundedReceiver<Pending>>,
    /// Tool calls in flight that can answer.
    pub(crate) active: AtomicUsize,
}

impl Relay {
    pub(crate) fn new() -> Arc<Relay> {
        let (tx, rx) = mpsc::unbounded_channel();
        Arc::new(Relay {
            tx,
            rx: AsyncMutex::new(rx),
            active: AtomicUsize::new(0),
        })
    }

    /// Asks the call in flight, or declines when there is none.
    pub(crate) async fn ask(&self, request: ElicitationRequest) -> ElicitationAnswer {
        if self.active.load(Ordering::SeqCst) == 0 {
            return ElicitationAnswer::Unavailable(
                "no tool call of this session is waiting for it (Garuda forwards elicitation only during a tool call)".into(),
            );
        }
        let (answer, rx) = oneshot::channel();
        if self.tx.send(Pending { request, answer }).is_err() {
            return ElicitationAnswer::Unavailable("the session is closing".into());
        }
        // A dropped sender means the call ended (finished, timed out or was cancelled).
        rx.await.unwrap_or(ElicitationAnswer::Cancel)
    }
}

/// The request as Garuda passes it on; `None` for a mode this rmcp does not know.
pub(crate) fn from_params(server: &str, params: ElicitRequestParams) -> Option<ElicitationRequest> {
    let (message, mode) = match params {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => (
            message,
            ElicitationMode::Form {
                schema: serde_json::to_value(&requested_schema).unwrap_or(Value::Null),
            },
        ),
        ElicitRequestParams::UrlElicitationParams {
            message,
            url,
            elicitation_id,
            ..
        } => (
            message,
            ElicitationMode::Url {
                url,
                elicitation_id,
            },
        ),
        _ => return None,
    };
    Some(ElicitationRequest {
        server: server.to_string(),
        message,
        mode,
        tool_call_id: None,
    })
}

/// The answer as MCP carries it.
pub(crate) fn to_result(server: &str, answer: ElicitationAnswer) -> ElicitResult {
    match answer {
        ElicitationAnswer::Accept(content) => {
            ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
        }
        ElicitationAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
        ElicitationAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        ElicitationAnswer::Unavailable(reason) => {
            tracing::info!(target: "garuda::mcp", server = %server, "elicitation declined: {reason}");
            let mut meta = Map::new();
            meta.insert("garuda/reason".into(), Value::String(reason));
            let mut r = ElicitResult::new(ElicitationAction::Decline);
            r.meta = Some(MetaObject(meta));
            r
        }
    }
}

/// Default values of a form schema's properties, as an answer that accepts the defaults
/// (what `garuda mcp-probe` answers; clients pre-fill forms with them).
pub fn schema_defaults(schema: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, p) in props {
            if let Some(d) = p.get("default") {
                out.insert(k.clone(), d.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_taken_from_properties() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "Ann"},
            "age": {"type": "integer"},
            "ok": {"type": "boolean", "default": true}}});
        let d = schema_defaults(&schema);
        assert_eq!(Value::Object(d), json!({"name": "Ann", "ok": true}));
    }

    #[test]
    fn unavailable_declines_with_the_reason() {
        let r = to_result("s", ElicitationAnswer::Unavailable("no client".into()));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["action"], "decline");
        assert_eq!(v["_meta"]["garuda/reason"], "no client");
    }

    #[tokio::test]
    async fn nothing_in_flight_is_declined() {
        let relay = Relay::new();
        let req = ElicitationRequest {
            server: "s".into(),
            message: "m".into(),
            mode: ElicitationMode::Form { schema: json!({}) },
            tool_call_id: None,
        };
        assert!(matches!(
            relay.ask(req).await,
            ElicitationAnswer::Unavailable(_)
        ));
    }
}
