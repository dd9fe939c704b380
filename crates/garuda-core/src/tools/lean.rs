//! The tools of a small window (see [`crate::prompt::lean`]): the core tools stay in every
//! request with compact descriptions, the others are deferred behind the tool search as MCP
//! tools already are (still callable by name once their definition is fetched). Pure and
//! deterministic, so the request bytes are the same from turn to turn.

use serde_json::{Value, json};

use crate::message::ToolSpec;

/// The tools every request carries in a small window.
pub const CORE_TOOLS: [&str; 5] = ["read_file", "edit_file", "write_file", "bash", "grep"];

/// Most characters a compact description keeps.
const DESCRIPTION_CHARS: usize = 160;
/// Most characters a compact parameter description keeps.
const PARAM_CHARS: usize = 60;

/// The first sentence of `text`, at most `max` characters (whole words where it can).
fn first_sentence(text: &str, max: usize) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let end = one
        .find(". ")
        .map(|i| i + 1)
        .unwrap_or(one.len())
        .min(one.len());
    let s = &one[..end];
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut: String = s.chars().take(max).collect();
    match cut.rfind(' ') {
        Some(i) if i > max / 2 => format!("{}…", &cut[..i]),
        _ => format!("{cut}…"),
    }
}

/// `spec` with its description and its parameters' descriptions cut to their first sentence.
pub fn compact_spec(spec: &ToolSpec) -> ToolSpec {
    let mut schema = spec.input_schema.clone();
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for p in props.values_mut() {
            if let Some(d) = p.get("description").and_then(Value::as_str) {
                let short = first_sentence(d, PARAM_CHARS);
                p["description"] = Value::String(short);
            }
        }
    }
    ToolSpec {
        name: spec.name.clone(),
        description: first_sentence(&spec.description, DESCRIPTION_CHARS),
        input_schema: schema,
    }
}

/// The tool search of a small window, listing every deferred tool by name.
pub fn search_spec(deferred: &[ToolSpec]) -> ToolSpec {
    let names: Vec<&str> = deferred.iter().map(|s| s.name.as_str()).collect();
    ToolSpec {
        name: crate::mcp::SEARCH_TOOL_NAME.into(),
        description: format!(
            "Returns the full definitions of tools not loaded here (the window is small). \
             Search by keywords or \"select:NAME\", then call the tool by name. Deferred: {}.",
            names.join(", ")
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Keywords, or select:NAME[,NAME...]"},
                "max_results": {"type": "integer", "minimum": 1}
            },
            "required": ["query"],
            "additionalProperties": false
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_descriptions_keep_the_first_sentence() {
        assert_eq!(
            first_sentence("Reads a file. Then more.", 100),
            "Reads a file."
        );
        assert_eq!(first_sentence("no period at all", 100), "no period at all");
        assert_eq!(first_sentence("aaaa bbbb cccc dddd", 12), "aaaa bbbb…");
        let spec = ToolSpec {
            name: "t".into(),
            description: "Does a thing.\nLong details follow here.".into(),
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "The path. Relative to the root."}
            }}),
        };
        let c = compact_spec(&spec);
        assert_eq!(c.description, "Does a thing.");
        assert_eq!(
            c.input_schema["properties"]["path"]["description"],
            "The path."
        );
        assert_eq!(compact_spec(&c), c, "compacting is stable");
    }
}
