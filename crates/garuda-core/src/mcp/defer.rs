//! Deferred MCP tool definitions: when they would take more than a share of the context
//! window, the model gets one small search tool instead and fetches definitions on demand.
//!
//! The rule (pure, so the same tools and window always give the same request bytes):
//! estimate each MCP definition at a token per 4 characters of its JSON (name, description,
//! input schema; the estimate the rest of Garuda uses). When the total exceeds
//! `share × context window` (default 10 %, `[mcp] defer_share`), every MCP definition is
//! deferred, not just the overflow: a partial cut would depend on the order and change as
//! servers come and go, and the model would have to know which half it holds. Deferred tools
//! are listed by name in the search tool's description (by server with counts when even the
//! names would take more than half the budget), and `mcp_tool_search` returns full definitions
//! as JSON. The model then calls a deferred tool by its name as usual: the registry keeps
//! every MCP tool callable; only the definitions are left out of the request.

use serde_json::{Value, json};

use crate::message::{ToolSpec, estimate_tokens};

/// Name of the search tool the model gets when definitions are deferred.
pub const SEARCH_TOOL_NAME: &str = "mcp_tool_search";

/// Results a search returns when the model does not say.
pub const DEFAULT_MAX_RESULTS: usize = 5;

/// Most results one search returns.
pub const MAX_RESULTS: usize = 20;

/// The line the prompt's `mcp` feature adds when definitions are deferred.
pub const DEFERRED_PROMPT_LINE: &str = "MCP tool definitions are deferred to save context: \
     call mcp_tool_search with keywords (or select:NAME) to get a tool's full definition, \
     then call that tool by its name.";

/// What goes into the request for the MCP tools of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct DeferPlan {
    /// Estimated tokens of all MCP definitions.
    pub total_tokens: u64,
    /// The most they may take before they are deferred.
    pub budget_tokens: u64,
    /// Definitions sent with every request: all of them, or none when deferred.
    pub loaded: Vec<ToolSpec>,
    /// The search tool, present exactly when definitions are deferred.
    pub search_tool: Option<ToolSpec>,
    /// Definitions the search tool answers from (empty when nothing is deferred).
    pub deferred: Vec<ToolSpec>,
}

impl DeferPlan {
    /// True when the definitions are deferred.
    pub fn is_deferred(&self) -> bool {
        self.search_tool.is_some()
    }

    /// Estimated tokens of what the request carries for MCP (the definitions or the search tool).
    pub fn request_tokens(&self) -> u64 {
        self.loaded
            .iter()
            .chain(self.search_tool.iter())
            .map(definition_tokens)
            .sum()
    }
}

/// A definition's name and description, for the keyword search.
fn spec_key(s: &ToolSpec) -> (&str, &str) {
    (&s.name, &s.description)
}

/// Estimated tokens of one tool definition.
pub fn definition_tokens(spec: &ToolSpec) -> u64 {
    estimate_tokens(
        spec.name.len()
            + spec.description.chars().count()
            + spec.input_schema.to_string().chars().count(),
    )
}

/// Decides whether `specs` (the MCP definitions, in their fixed order) are deferred for a
/// window of `context_window` tokens, with `share` of it as their budget.
pub fn plan(specs: &[ToolSpec], context_window: u64, share: f64) -> DeferPlan {
    let total_tokens: u64 = specs.iter().map(definition_tokens).sum();
    let share = if share.is_finite() {
        share.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let budget_tokens = (context_window as f64 * share) as u64;
    if specs.is_empty() || total_tokens <= budget_tokens {
        return DeferPlan {
            total_tokens,
            budget_tokens,
            loaded: specs.to_vec(),
            search_tool: None,
            deferred: Vec::new(),
        };
    }
    DeferPlan {
        total_tokens,
        budget_tokens,
        loaded: Vec::new(),
        search_tool: Some(search_tool_spec(specs, budget_tokens / 2)),
        deferred: specs.to_vec(),
    }
}

/// The search tool's definition, listing the deferred tools within `list_tokens`.
pub fn search_tool_spec(deferred: &[ToolSpec], list_tokens: u64) -> ToolSpec {
    let names: Vec<&str> = deferred.iter().map(|s| s.name.as_str()).collect();
    let by_name = names.join(", ");
    let listing = if estimate_tokens(by_name.len()) <= list_tokens {
        format!("Deferred tools: {by_name}.")
    } else {
        // Names are mcp__SERVER__TOOL; group by the SERVER part for a short listing.
        let mut servers: Vec<(String, usize)> = Vec::new();
        for n in &names {
            let server = n
                .strip_prefix(super::naming::PREFIX)
                .and_then(|rest| rest.split_once("__"))
                .map_or("?", |(s, _)| s)
                .to_string();
            match servers.iter_mut().find(|(s, _)| *s == server) {
                Some((_, c)) => *c += 1,
                None => servers.push((server, 1)),
            }
        }
        let parts: Vec<String> = servers
            .iter()
            .map(|(s, c)| format!("mcp__{s}__* ({c})"))
            .collect();
        format!(
            "Deferred tools ({} in all), by server: {}.",
            names.len(),
            parts.join(", ")
        )
    };
    ToolSpec {
        name: SEARCH_TOOL_NAME.into(),
        description: format!(
            "Finds MCP tools whose definitions are not loaded and returns their full \
             definitions (name, description, input_schema). Search by keywords, or fetch \
             exact tools with \"select:NAME,NAME\". Then call a tool by its name. {listing}"
        ),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Keywords matched against tool names and descriptions, or select:NAME[,NAME...]"
                },
                "max_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS,
                    "description": "Most tools to return (default 5)"
                }
            },
            "required": ["query"],
            "additionalProperties": false
        }),
    }
}

/// Answers a `mcp_tool_search` call: `Ok` text for the model, or `Err` text for a bad input.
pub fn search(deferred: &[ToolSpec], input: &Value) -> Result<String, String> {
    let query = input
        .get("query")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .ok_or("mcp_tool_search needs a non-empty string `query`")?;
    let max = match input.get("max_results") {
        None | Some(Value::Null) => DEFAULT_MAX_RESULTS,
        Some(v) => v
            .as_u64()
            .filter(|n| *n >= 1)
            .ok_or("max_results must be a positive integer")?
            .min(MAX_RESULTS as u64) as usize,
    };
    let (found, missing): (Vec<&ToolSpec>, Vec<&str>) =
        if let Some(list) = query.strip_prefix("select:") {
            let mut found = Vec::new();
            let mut missing = Vec::new();
            for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                match deferred.iter().find(|s| s.name == name) {
                    Some(s) if !found.contains(&s) => found.push(s),
                    Some(_) => {}
                    None => missing.push(name),
                }
            }
            (found, missing)
        } else {
            (
                crate::listing::search(deferred, spec_key, query, max),
                Vec::new(),
            )
        };
    let mut out = if found.is_empty() {
        format!(
            "No deferred MCP tool matches `{query}` ({} deferred).",
            deferred.len()
        )
    } else {
        format!(
            "{} of {} deferred MCP tools; call them by name with arguments matching input_schema:",
            found.len(),
            deferred.len()
        )
    };
    for s in &found {
        out.push('\n');
        out.push_str(
            &json!({
                "name": s.name,
                "description": s.description,
                "input_schema": s.input_schema,
            })
            .to_string(),
        );
    }
    if !missing.is_empty() {
        out.push_str(&format!("\nNot found: {}.", missing.join(", ")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, desc: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: desc.into(),
            input_schema: json!({"type": "object", "properties": {"x": {"type": "string"}}}),
        }
    }

    fn many(n: usize) -> Vec<ToolSpec> {
        (0..n)
            .map(|i| {
                spec(
                    &format!("mcp__srv{}__tool{i:03}", i % 3),
                    &"Does a thing with files. ".repeat(10),
                )
            })
            .collect()
    }

    #[test]
    fn under_the_budget_nothing_is_deferred() {
        let specs = many(5);
        let p = plan(&specs, 200_000, 0.10);
        assert!(!p.is_deferred());
        assert_eq!(p.loaded, specs);
        assert!(p.deferred.is_empty());
        assert_eq!(p.request_tokens(), p.total_tokens);
        assert!(!plan(&[], 10, 0.0).is_deferred());
    }

    #[test]
    fn over_the_budget_everything_is_deferred() {
        let specs = many(60);
        let total: u64 = specs.iter().map(definition_tokens).sum();
        // A window where the definitions take just over 10 %.
        let window = total * 10 - 10;
        let p = plan(&specs, window, 0.10);
        assert!(p.is_deferred());
        assert!(p.loaded.is_empty());
        assert_eq!(p.deferred, specs);
        let search = p.search_tool.as_ref().unwrap();
        assert_eq!(search.name, SEARCH_TOOL_NAME);
        assert!(search.description.contains("mcp__srv0__tool000"));
        assert!(p.request_tokens() < p.total_tokens / 4);
        // Exactly at the budget stays loaded.
        assert!(!plan(&specs, total * 10, 0.10).is_deferred());
        // Deterministic: same input, same bytes.
        assert_eq!(p, plan(&specs, window, 0.10));
    }

    #[test]
    fn long_listings_group_by_server() {
        let specs = many(300);
        let s = search_tool_spec(&specs, 50);
        assert!(s.description.contains("300 in all"), "{}", s.description);
        assert!(
            s.description.contains("mcp__srv0__* (100)"),
            "{}",
            s.description
        );
        assert!(definition_tokens(&s) < 1_000);
    }

    #[test]
    fn keyword_search_ranks_names_first() {
        let specs = vec![
            spec("mcp__gh__create_issue", "Create an issue in a repository"),
            spec("mcp__gh__list_issues", "List issues"),
            spec("mcp__fs__read", "Read a file; mentions issue trackers"),
            spec("mcp__fs__write", "Write a file"),
        ];
        let out = search(&specs, &json!({"query": "issue"})).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("3 of 4"), "{out}");
        assert!(lines[1].contains("\"name\":\"mcp__gh__create_issue\""));
        assert!(lines[2].contains("mcp__gh__list_issues"));
        assert!(lines[3].contains("mcp__fs__read"));
        let v: Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(v["input_schema"]["type"], "object");
        let one = search(&specs, &json!({"query": "issue", "max_results": 1})).unwrap();
        assert_eq!(one.lines().count(), 2);
        let none = search(&specs, &json!({"query": "zebra"})).unwrap();
        assert!(none.starts_with("No deferred MCP tool matches"));
    }

    #[test]
    fn select_fetches_exact_names() {
        let specs = vec![spec("mcp__a__x", "x"), spec("mcp__a__y", "y")];
        let out = search(
            &specs,
            &json!({"query": "select:mcp__a__y, mcp__a__nope,mcp__a__y"}),
        )
        .unwrap();
        assert!(out.starts_with("1 of 2"), "{out}");
        assert!(out.contains("\"name\":\"mcp__a__y\""));
        assert!(out.ends_with("Not found: mcp__a__nope."));
    }

    #[test]
    fn bad_inputs_are_errors_for_the_model() {
        let specs = vec![spec("mcp__a__x", "x")];
        assert!(search(&specs, &json!({})).is_err());
        assert!(search(&specs, &json!({"query": "  "})).is_err());
        assert!(search(&specs, &json!({"query": "x", "max_results": 0})).is_err());
        assert!(search(&specs, &json!({"query": "x", "max_results": "2"})).is_err());
    }
}
