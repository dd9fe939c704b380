//! JSON Schema generation for the native protocol.

use schemars::SchemaGenerator;
use serde_json::{Map, Value, json};

use crate::methods::{Direction, client_method_infos, method_infos};

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
    for c in client_method_infos() {
        let mut m = Map::new();
        let direction = match c.direction {
            Direction::Notification => "notification (server to client)",
            Direction::Request => "request (server to client)",
        };
        m.insert("direction".into(), json!(direction));
        if let Some(p) = (c.params)(&mut g) {
            m.insert("params".into(), p);
        }
        if let Some(r) = (c.result)(&mut g) {
            m.insert("result".into(), r);
        }
        methods.insert(c.name.into(), Value::Object(m));
    }
    let defs = g.take_definitions(true);
    let mut schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Garuda native protocol",
        "protocolVersion": crate::PROTOCOL_VERSION,
        "methods": methods,
        "$defs": defs,
    });
    // Sorted keys, so the file does not depend on serde_json's `preserve_order` feature
    // (which the ACP types turn on for the whole build) and diffs stay small.
    schema.sort_all_objects();
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every request the server sends its client is in the schema with its types: the native
    /// front sends them through these rows (`workspace/applyEdit` was once sent by name and
    /// missing here).
    #[test]
    fn every_request_the_server_sends_is_in_the_schema() {
        let schema = generate_schema();
        for name in [
            "workspace/applyEdit",
            "permission/request",
            "tool/call",
            "mcp/elicit",
        ] {
            let m = &schema["methods"][name];
            assert_eq!(m["direction"], "request (server to client)", "{name}");
            assert!(m["params"].is_object() && m["result"].is_object(), "{name}");
        }
    }
}
