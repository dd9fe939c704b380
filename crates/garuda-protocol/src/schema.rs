//! JSON Schema generation for the native protocol.

use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use super::*;
use crate::methods::method_infos;

/// A client-bound method: (name, direction, params type, result type) as schema generators.
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

/// Methods the server calls or notifies on the client (not dispatched, so not in the table).
fn client_bound() -> Vec<Entry> {
    vec![
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
            s::<PermissionRequest>,
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
    for m in method_infos() {
        let mut e = Map::new();
        e.insert("direction".into(), json!("request"));
        if let Some(p) = (m.params)(&mut g) {
            e.insert("params".into(), p);
        }
        if let Some(r) = (m.result)(&mut g) {
            e.insert("result".into(), r);
        }
        methods.insert(m.name.into(), Value::Object(e));
    }
    for (name, direction, params, result) in client_bound() {
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
    let mut schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Garuda native protocol",
        "protocolVersion": PROTOCOL_VERSION,
        "methods": methods,
        "$defs": defs,
    });
    // Sorted keys, so the file does not depend on serde_json's `preserve_order` feature
    // (which the ACP types turn on for the whole build) and diffs stay small.
    schema.sort_all_objects();
    schema
}
