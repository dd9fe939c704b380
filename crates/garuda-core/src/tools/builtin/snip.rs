//! `snip`: the model removes earlier messages from its own view. The work is the session's
//! (`turn::ops`), lent through the [`Workbench`]; this handler declares the tool and asks.
//! It is not in [`super::all`]: the registry adds it when `[context] snip` is on.

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use crate::message::ToolSpec;
use crate::tools::handler::{Tool, Workbench};
use crate::tools::vocab::{ToolClass, ToolContext, ToolOutput};

/// The name of the model's snip tool.
pub const SNIP_TOOL: &str = "snip";

/// The spec of the model's snip tool.
pub fn snip_tool_spec() -> ToolSpec {
    ToolSpec {
        name: SNIP_TOOL.to_string(),
        description: "Remove earlier messages you no longer need from your context, to keep it \
                      small. Pass the ids shown as [id:...] tags at the end of user messages. \
                      Messages carrying tool calls or results that later messages still need are \
                      kept, and so is the user's first request."
            .to_string(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "ids": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Tags of the messages to remove, e.g. [\"a1b2c3d4\"]"
                }
            },
            "required": ["ids"]
        }),
    }
}

/// `snip`.
pub(crate) struct SnipTool;

impl Tool for SnipTool {
    fn name(&self) -> &str {
        SNIP_TOOL
    }
    fn spec(&self) -> ToolSpec {
        snip_tool_spec()
    }
    fn class(&self) -> ToolClass {
        ToolClass::Session
    }
    fn describe(&self, input: &Value) -> String {
        input.to_string()
    }
    fn run<'a>(
        &'a self,
        input: Value,
        _ctx: &'a ToolContext,
        bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let Some(snip) = bench.snip(input) else {
                return ToolOutput::error(format!("{SNIP_TOOL} needs a session's view to work on"));
            };
            match snip.await {
                Ok(text) => ToolOutput::ok(text),
                Err(e) => ToolOutput::error(e),
            }
        })
    }
}
