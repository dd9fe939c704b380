//! The hub as a whole: the tool list, late and failed servers, and the retry of a legacy
//! server, against real (small) servers where it takes one.

use super::*;
use serde_json::json;

fn tool(name: &str) -> Tool {
    serde_json::from_value(json!({
        "name": name,
        "description": format!("does {name}"),
        "inputSchema": {"type": "object", "properties": {}}
    }))
    .unwrap()
}

#[test]
fn tools_are_ordered_by_server_then_name() {
    let cfg = McpServerConfig::stdio("x", &[]);
    let ro = McpServerConfig {
        tools_read_only: vec!["b".into()],
        ..McpServerConfig::stdio("x", &[])
    };
    let zeta = [tool("b"), tool("a")];
    let alpha = [tool("z"), tool("b"), tool("z")];
    let one = build_tools(&[("zeta", &cfg, &zeta), ("alpha", &ro, &alpha)]);
    let names: Vec<&str> = one.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mcp__alpha__b",
            "mcp__alpha__z",
            "mcp__zeta__a",
            "mcp__zeta__b"
        ]
    );
    assert!(one[0].read_only);
    assert!(!one[1].read_only && !one[3].read_only);
    // Listing order does not matter.
    let zeta2 = [tool("a"), tool("b")];
    let alpha2 = [tool("b"), tool("z")];
    let two = build_tools(&[("alpha", &ro, &alpha2), ("zeta", &cfg, &zeta2)]);
    assert_eq!(one, two);
}

#[test]
fn specs_always_have_an_object_schema_and_a_description() {
    let t: Tool = serde_json::from_value(json!({"name": "bare", "inputSchema": {}})).unwrap();
    let cfg = McpServerConfig::stdio("x", &[]);
    let built = build_tools(&[("s", &cfg, std::slice::from_ref(&t))]);
    assert_eq!(built[0].spec.input_schema, json!({"type": "object"}));
    assert_eq!(built[0].spec.description, "Tool `bare` of MCP server `s`.");
}

/// A server that is ready only after the list was fixed is a note, and its tools wait
/// for the next compaction (`has_tool_changes`), so the list stays as the first request
/// had it.
#[tokio::test]
async fn a_server_ready_after_the_list_is_fixed_is_reported_late() {
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/mcp/slow_server.py"
    );
    let gate_arg = gate.display().to_string();
    let cfg = McpServerConfig::stdio("python3", &[script, &gate_arg]);
    let hub = McpHub::new([("slow".to_string(), cfg)], None, 0.1);
    let background = hub.clone();
    let start = tokio::spawn(async move { background.start_servers().await });
    assert!(hub.is_starting());
    assert!(hub.settle(), "fixed now, before the server is up");
    assert!(!hub.settle(), "fixed once");
    std::fs::write(&gate, "").unwrap();
    start.await.unwrap();
    assert!(hub.wait_started().await);
    assert!(hub.tools().is_empty());
    assert!(hub.has_tool_changes());
    let events = hub.take_events().await;
    assert_eq!(
        events,
        [McpEvent::ServerLate {
            server: "slow".into(),
            tools: 1
        }]
    );
    assert!(events[0].note().contains("after the next compaction"));
    hub.shutdown().await;
}

/// A stdio server that answers `server/discover` with an empty result is started once
/// more with the `initialize` handshake, and works.
#[tokio::test]
async fn a_stdio_server_with_an_empty_probe_answer_gets_one_retry() {
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/mcp/empty_probe_server.py"
    );
    let starts_arg = starts.display().to_string();
    let cfg = McpServerConfig::stdio("python3", &[script, &starts_arg]);
    let hub = McpHub::new([("old".to_string(), cfg)], None, 0.1);
    hub.start().await;
    assert_eq!(hub.servers()[0].state, McpServerState::Ready);
    assert_eq!(hub.tools().len(), 1);
    assert_eq!(std::fs::read_to_string(&starts).unwrap(), "start\nstart\n");
    assert!(hub.take_events().await.is_empty());
    hub.shutdown().await;
}

#[tokio::test]
async fn invalid_and_disabled_entries_do_not_start() {
    let hub = McpHub::new(
        [
            ("bad".to_string(), McpServerConfig::default()),
            (
                "off".to_string(),
                McpServerConfig {
                    enabled: false,
                    ..McpServerConfig::stdio("true", &[])
                },
            ),
        ],
        None,
        0.1,
    );
    hub.start().await;
    let st = hub.servers();
    assert_eq!(st[0].transport, "invalid");
    assert!(matches!(st[0].state, McpServerState::Failed { .. }));
    assert_eq!(st[1].state, McpServerState::Disabled);
    let ev = hub.take_events().await;
    assert_eq!(ev.len(), 1);
    assert!(hub.take_events().await.is_empty(), "reported once");
    assert!(hub.tools().is_empty());
    assert_eq!(
        hub.call(
            "mcp__off__x",
            Value::Null,
            &CancellationToken::new(),
            &crate::mcp::NoElicitor("test".into()),
        )
        .await
        .unwrap_err(),
        McpCallError::UnknownTool("mcp__off__x".into())
    );
}
