//! `garuda mcp-probe`: Garuda's MCP client alone, against one server, for the MCP
//! conformance suite's client mode (tests/it/mcp_conformance.rs) and for trying a server.
//!
//! It starts the server through the same hub a session uses, prints the server's state and
//! tool list, then calls every tool once and prints each result, one JSON object per line.
//! Arguments: each property's `default`, else a plain value of its type; an object property
//! named `schema` gets the input schema of the server's first other tool as Garuda sends it
//! to the model (so a server can check what survives). When `MCP_CONFORMANCE_CONTEXT` (set
//! by the conformance suite) lists `toolCalls` (`{name, arguments}`), those calls are made
//! instead. Elicitation requests are accepted with the form's defaults. Exit code 0 when
//! the server started, 1 when it did not.
//!
//! A server that asks for sign-in is signed in to without a person: the authorization page
//! is fetched and its redirects followed to the loopback listener, and tokens stay in memory.
//! The suite's context gives a pre-registered client (`client_id`, `client_secret`, or
//! `private_key_pem` for signed assertions), the client-credentials scenarios' client, or a
//! workload JWT (`valid_jwt`); its client ID
//! metadata document URL is the one the suite expects.

use std::sync::Arc;

use garuda_core::mcp::oauth::{AuthContext, FollowRedirects, MemoryStore, OAuthGrant};
use garuda_core::mcp::{
    ElicitationAnswer, ElicitationMode, ElicitationRequest, Elicitor, McpHub, McpServerConfig,
    McpServerState, elicit::schema_defaults,
};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// Accepts every form with its defaults, and URL elicitations as if the page was visited.
struct AcceptDefaults;

impl Elicitor for AcceptDefaults {
    fn elicit(
        &self,
        request: ElicitationRequest,
    ) -> futures_util::future::BoxFuture<'static, ElicitationAnswer> {
        let content = match &request.mode {
            ElicitationMode::Form { schema } => schema_defaults(schema),
            ElicitationMode::Url { .. } => Map::new(),
        };
        println!(
            "{}",
            json!({"elicitation": {"server": request.server, "message": request.message}})
        );
        Box::pin(async move { ElicitationAnswer::Accept(content) })
    }
}

/// Arguments for a tool from its input schema; `other` is another tool's exposed schema.
fn arguments(schema: &Value, other: Option<&Value>) -> Value {
    let mut args = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            let echo = (name == "schema" && p.get("type") == Some(&json!("object")))
                .then(|| other.cloned())
                .flatten();
            let v = echo
                .or_else(|| p.get("default").cloned())
                .unwrap_or_else(|| {
                    match p.get("type").and_then(Value::as_str).unwrap_or("string") {
                        "number" | "integer" => json!(1),
                        "boolean" => json!(true),
                        "array" => json!([]),
                        "object" => json!({}),
                        _ => json!("test"),
                    }
                });
            args.insert(name.clone(), v);
        }
    }
    Value::Object(args)
}

/// Runs the probe on `target`: a URL, or a command and its arguments.
pub fn run(target: &[String]) -> anyhow::Result<u8> {
    let Some(first) = target.first() else {
        anyhow::bail!("mcp-probe needs a server URL or a command");
    };
    let mut config = McpServerConfig::default();
    if first.starts_with("http://") || first.starts_with("https://") {
        config.url = Some(first.clone());
    } else {
        config.command = Some(first.clone());
        config.args = target[1..].to_vec();
    }
    let auth = if config.url.is_some() {
        sign_in_setup(&mut config)
    } else {
        AuthContext::default()
    };
    let hub = McpHub::with_auth([("probe".to_string(), config)], None, 1.0, auth);
    hub.start_blocking();
    let status = hub.servers().remove(0);
    println!(
        "{}",
        json!({"server": {"state": format!("{:?}", status.state), "tools": status.tool_count}})
    );
    if status.state != McpServerState::Ready {
        return Ok(1);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cancel = CancellationToken::new();
    let tools = hub.tools();
    let calls: Vec<(String, Value)> = match context_calls() {
        Some(calls) => calls
            .into_iter()
            .filter_map(|(mcp_name, args)| {
                let t = tools.iter().find(|t| t.tool == mcp_name)?;
                Some((t.name.clone(), args))
            })
            .collect(),
        None => tools
            .iter()
            .map(|t| {
                let other = tools
                    .iter()
                    .find(|o| o.name != t.name)
                    .map(|o| &o.spec.input_schema);
                (t.name.clone(), arguments(&t.spec.input_schema, other))
            })
            .collect(),
    };
    rt.block_on(async {
        for (name, args) in calls {
            let Some(tool) = hub.find(&name) else {
                continue;
            };
            let out = match hub.call(&name, args, &cancel, &AcceptDefaults).await {
                Ok(r) => json!({"tool": tool.tool, "isError": r.is_error,
                    "text": r.text()}),
                Err(e) => json!({"tool": tool.tool, "error": e.to_string()}),
            };
            println!("{out}");
        }
        hub.shutdown().await;
    });
    Ok(0)
}

/// The client ID metadata document URL the conformance suite checks for.
const SUITE_CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// Sign-in without a person, from the conformance suite's context.
fn sign_in_setup(config: &mut McpServerConfig) -> AuthContext {
    let ctx: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let text = |k: &str| ctx.get(k).and_then(Value::as_str).map(str::to_string);
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    config.oauth.client_metadata_url = Some(SUITE_CLIENT_METADATA_URL.to_string());
    config.oauth.client_id = text("client_id");
    let assertion = text("valid_jwt");
    if assertion.is_some() {
        config.oauth.grant = OAuthGrant::JwtBearer;
    } else if scenario.contains("client-credentials") {
        config.oauth.grant = OAuthGrant::ClientCredentials;
    }
    AuthContext {
        door: Arc::new(FollowRedirects),
        store: Arc::new(MemoryStore::default()),
        client_secret: text("client_secret"),
        assertion,
        client_key_pem: text("private_key_pem"),
    }
}

/// The calls the conformance suite's context asks for, if any.
fn context_calls() -> Option<Vec<(String, Value)>> {
    let ctx: Value = serde_json::from_str(&std::env::var("MCP_CONFORMANCE_CONTEXT").ok()?).ok()?;
    let calls = ctx.get("toolCalls")?.as_array()?;
    Some(
        calls
            .iter()
            .filter_map(|c| {
                let name = c.get("name")?.as_str()?.to_string();
                Some((name, c.get("arguments").cloned().unwrap_or(Value::Null)))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_follow_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "number"}, "s": {"type": "string", "default": "x"}, "b": {"type": "boolean"}}});
        assert_eq!(
            arguments(&schema, None),
            json!({"a": 1, "s": "x", "b": true})
        );
        let echo = json!({"type": "object", "properties": {"schema": {"type": "object"}}});
        let other = json!({"$schema": "x"});
        assert_eq!(
            arguments(&echo, Some(&other)),
            json!({"schema": {"$schema": "x"}})
        );
    }
}
