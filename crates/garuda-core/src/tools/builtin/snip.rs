//! `snip`'s spec: the tool works on the session's own view, so the turn runs it
//! (`turn::ops`); its name and spec sit here beside the other tools' so the registry offers
//! it without importing the turn. It is not in [`super::all`]: it has no handler.

use serde_json::json;

use crate::message::ToolSpec;

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
