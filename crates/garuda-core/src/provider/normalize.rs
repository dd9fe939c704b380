//! Tool calls normalized at the provider boundary, so bad model output never poisons a session.
//!
//! The transcript stores what the model answered and every later request sends it again; the
//! Anthropic API refuses a request whose tool calls have non-object inputs or repeated ids, so
//! one such answer stored as is would make the session unusable for good. Every answer (and
//! every partial answer kept after a cut) goes through [`tool_calls`]:
//!
//! - an id outside `[A-Za-z0-9_-]` (or longer than 64 characters) is rewritten to fit, an
//!   empty one is generated;
//! - an id used before (in the request's messages or earlier in the answer) is renamed
//!   `<id>_2`, `<id>_3`, …;
//! - an input that is a JSON object is kept; a string holding a JSON object (arguments encoded
//!   twice, as some servers send them) is decoded; anything else (an array, a number, text
//!   that is not JSON, arguments cut mid-way) is stored as `{}` and the call gets a
//!   [`ToolCallError`]: the turn answers it with that error instead of running the tool, so
//!   the model sees what was wrong and can call again.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{Block, Message};

/// Longest tool call id kept.
pub const MAX_ID_CHARS: usize = 64;

/// A tool call that cannot run as the model sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallError {
    /// The call's (normalized) id.
    pub id: String,
    /// What the model is told.
    pub message: String,
}

/// Ids of the tool calls already in a conversation.
pub fn used_ids(messages: &[Message]) -> HashSet<String> {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::ToolUse { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect()
}

fn clean_id(id: &str) -> String {
    let mut s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_ID_CHARS)
        .collect();
    if s.is_empty() {
        s = format!("toolu_garuda_{}", uuid::Uuid::now_v7().simple());
    }
    s
}

fn unique(id: String, taken: &HashSet<String>) -> String {
    if !taken.contains(&id) {
        return id;
    }
    let base: String = id.chars().take(MAX_ID_CHARS - 8).collect();
    (2u64..)
        .map(|n| format!("{base}_{n}"))
        .find(|c| !taken.contains(c))
        .unwrap_or(id)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(200).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// The object a tool call's input stands for, or why there is none.
fn object_input(name: &str, input: &Value) -> Result<Option<Value>, String> {
    let detail = match input {
        Value::Object(_) => return Ok(None),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => return Ok(Some(v)),
            Ok(v) => format!("they are {} ({})", kind(&v), excerpt(s)),
            Err(e) => format!("they are not valid JSON ({e}): {}", excerpt(s)),
        },
        other => format!("they are {} ({})", kind(other), excerpt(&other.to_string())),
    };
    Err(format!(
        "The arguments of this {name} call must be one JSON object, but {detail}. \
         Nothing was run; call the tool again with a JSON object as its arguments."
    ))
}

/// Normalizes the tool calls in `content` in place (see the module docs); `taken` holds the
/// ids already used in the conversation and gains the new ones. Returns the calls that must
/// not run, by their final ids.
pub fn tool_calls(content: &mut [Block], taken: &mut HashSet<String>) -> Vec<ToolCallError> {
    let mut errors = Vec::new();
    for b in content.iter_mut() {
        let Block::ToolUse { id, name, input } = b else {
            continue;
        };
        let fixed = unique(clean_id(id), taken);
        *id = fixed.clone();
        taken.insert(fixed.clone());
        match object_input(name, input) {
            Ok(None) => {}
            Ok(Some(decoded)) => *input = decoded,
            Err(message) => {
                *input = Value::Object(Default::default());
                errors.push(ToolCallError { id: fixed, message });
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, input: Value) -> Block {
        Block::ToolUse {
            id: id.into(),
            name: "read_file".into(),
            input,
        }
    }

    #[test]
    fn bad_inputs_become_errors_and_ids_become_unique() {
        let mut content = vec![
            call("t1", json!({"path": "a"})),
            call("t1", json!(["a"])),
            call("t 1", Value::String("{\"path\":\"b\"}".into())),
            call("", Value::String("{\"path\": ".into())),
            call("toolu_9", json!(null)),
        ];
        let mut taken: HashSet<String> = ["toolu_9".to_string()].into();
        let errors = tool_calls(&mut content, &mut taken);
        let ids: Vec<&str> = content
            .iter()
            .map(|b| match b {
                Block::ToolUse { id, .. } => id.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(ids[0], "t1");
        assert_eq!(ids[1], "t1_2");
        assert_eq!(ids[2], "t_1");
        assert!(ids[3].starts_with("toolu_garuda_"));
        assert_eq!(ids[4], "toolu_9_2");
        let inputs: Vec<&Value> = content
            .iter()
            .map(|b| match b {
                Block::ToolUse { input, .. } => input,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(inputs[2], &json!({"path": "b"}));
        assert!(inputs.iter().all(|v| v.is_object()));
        let bad: Vec<&str> = errors.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(bad, vec!["t1_2", ids[3], "toolu_9_2"]);
        assert!(
            errors[0].message.contains("an array"),
            "{}",
            errors[0].message
        );
        assert!(
            errors[1].message.contains("not valid JSON"),
            "{}",
            errors[1].message
        );
        assert_eq!(taken.len(), 6);
    }
}
