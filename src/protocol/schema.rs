//! JSON Schema generation for the native protocol.

use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use super::*;

/// Every native method: (name, direction, params type, result type) as schema generators.
type Entry = (
    &'static str,
    &'static str,
    fn(&mut SchemaGenerator) -> Value,
    fn(&mut SchemaGenerator) -> Value,
);

fn s<T: JsonSchema>(g: &mut SchemaGenerator) -> Value {
    g.subschema_for::<T>().to_value()
}

fn none(_: &mut SchemaGenerator) -> Value {
    Value::Null
}

/// Names of the methods the native front answers, in documentation order.
pub const METHODS: &[&str] = &[
    "initialize",
    "shutdown",
    "workspace/open",
    "workspace/close",
    "workspace/list",
    "prompt/assemble",
    "session/new",
    "session/list",
    "session/load",
    "session/messages",
    "session/fork",
    "session/delete",
    "turn/run",
    "turn/cancel",
    "session/compact",
    "session/snip",
    "session/collapse",
    "session/view",
    "context/inspect",
];

fn entries() -> Vec<Entry> {
    vec![
        ("initialize", "request", none, s::<InitializeResult>),
        ("shutdown", "request", none, none),
        (
            "workspace/open",
            "request",
            s::<OpenParams>,
            s::<WorkspaceInfo>,
        ),
        (
            "workspace/close",
            "request",
            s::<WorkspaceRef>,
            s::<CloseResult>,
        ),
        ("workspace/list", "request", none, s::<ListResult>),
        (
            "prompt/assemble",
            "request",
            s::<AssembleParams>,
            s::<AssembleResult>,
        ),
        (
            "session/new",
            "request",
            s::<NewSessionParams>,
            s::<NewSessionResult>,
        ),
        (
            "session/list",
            "request",
            s::<WorkspaceRef>,
            s::<SessionList>,
        ),
        ("session/load", "request", s::<SessionRef>, s::<LoadResult>),
        (
            "session/messages",
            "request",
            s::<MessagesParams>,
            s::<MessagesPage>,
        ),
        ("session/fork", "request", s::<ForkParams>, s::<SessionRef>),
        ("session/delete", "request", s::<SessionRef>, s::<Ack>),
        ("turn/run", "request", s::<TurnParams>, s::<TurnResult>),
        ("turn/cancel", "request", s::<SessionRef>, s::<Ack>),
        (
            "session/compact",
            "request",
            s::<CompactParams>,
            s::<CompactResult>,
        ),
        ("session/snip", "request", s::<SnipParams>, s::<SnipResult>),
        (
            "session/collapse",
            "request",
            s::<CollapseParams>,
            s::<CollapseResult>,
        ),
        ("session/view", "request", s::<SessionRef>, s::<ViewResult>),
        (
            "context/inspect",
            "request",
            s::<SessionRef>,
            s::<InspectResult>,
        ),
        (
            "$/progress",
            "notification (server to client)",
            s::<ProgressParams>,
            none,
        ),
        (
            "workspace/contextChanged",
            "notification (server to client)",
            s::<ContextChanged>,
            none,
        ),
        (
            "turn/update",
            "notification (server to client)",
            s::<TurnUpdate>,
            none,
        ),
        (
            "permission/request",
            "request (server to client)",
            s::<crate::turn::PermissionRequest>,
            s::<PermissionResult>,
        ),
        (
            "tool/call",
            "request (server to client)",
            s::<ToolCallParams>,
            s::<ToolCallResult>,
        ),
    ]
}

/// The whole protocol as one JSON Schema document with shared definitions.
pub fn generate_schema() -> Value {
    let mut g = SchemaGenerator::default();
    let mut methods = Map::new();
    for (name, direction, params, result) in entries() {
        let mut m = Map::new();
        m.insert("direction".into(), json!(direction));
        let p = params(&mut g);
        if !p.is_null() {
            m.insert("params".into(), p);
        }
        let r = result(&mut g);
        if !r.is_null() {
            m.insert("result".into(), r);
        }
        methods.insert(name.into(), Value::Object(m));
    }
    let defs = g.take_definitions(true);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Garuda native protocol",
        "protocolVersion": PROTOCOL_VERSION,
        "methods": methods,
        "$defs": defs,
    })
}
