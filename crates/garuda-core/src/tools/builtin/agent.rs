//! `agent` and `explore`: hand a task to a sub-session and answer its final message. The
//! custom agents listed in `agent`'s description are fixed when the session starts, so its
//! bytes stay the same. The sub-session itself runs in the turn layer (the workbench's
//! `run_agent`).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::agents::{AGENT_TOOL, AgentSet, EXPLORE};
use crate::message::ToolSpec;
use crate::prompt::Offer;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::listing::Listing;
use crate::tools::util;
use crate::tools::vocab::{AgentCall, ToolClass, ToolContext, ToolKind, ToolOutput};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentInput {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    task: Option<String>,
    #[serde(default)]
    query: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExploreInput {
    task: String,
}

/// Runs `call` on the bench, refusing an empty task.
async fn run_on(bench: &dyn Workbench, ctx: &ToolContext, call: AgentCall) -> ToolOutput {
    if call.task.trim().is_empty() {
        return ToolOutput::error("the task is empty: say what the agent should do");
    }
    match bench.run_agent(call, ctx) {
        Some(run) => run.await,
        None => ToolOutput::error("agents cannot run here"),
    }
}

/// `agent`, over the custom agents a session found at its start.
pub struct AgentTool {
    set: Arc<AgentSet>,
    listing: Listing,
}

impl AgentTool {
    /// The tool for these agents, listing what fits a model window of `context_window`
    /// tokens in its description.
    pub fn new(set: Arc<AgentSet>, context_window: u64) -> AgentTool {
        let listing = set.listing(context_window);
        AgentTool { set, listing }
    }
}

impl Tool for AgentTool {
    fn name(&self) -> &str {
        AGENT_TOOL
    }
    fn spec(&self) -> ToolSpec {
        let mut description = String::from(
            "Hand a task to a custom agent: a helper with its own prompt and tools that works \
             in a context of its own and answers with one report. Give it everything it needs \
             in the task (it sees nothing of this conversation), and check its report.\n\n\
             Agents:",
        );
        description.push_str(&self.listing.text);
        if self.listing.left_out == 0 {
            let names: Vec<&str> = self.set.agents.iter().map(|a| a.name.as_str()).collect();
            return handler::spec(
                AGENT_TOOL,
                &description,
                json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "enum": names, "description": "The agent."},
                        "task": {"type": "string", "description": "What it should do, with all the context it needs."}
                    },
                    "required": ["name", "task"],
                    "additionalProperties": false
                }),
            );
        }
        // The rest are found by a search: no enum of every name, and `query` beside them.
        description.push_str(&format!(
            "\n({} more agents are not listed: call agent with `query` (keywords) to find \
             them, then with `name` and `task`.)",
            self.listing.left_out
        ));
        handler::spec(
            AGENT_TOOL,
            &description,
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The agent."},
                    "task": {"type": "string", "description": "What it should do, with all the context it needs."},
                    "query": {"type": "string", "description": "Keywords to find agents that are not listed (instead of name and task)."}
                },
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        // The agent's own calls are checked one by one against the policy.
        ToolClass::Other
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }
    fn offer(&self) -> Option<Offer> {
        Some(Offer::Agents)
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["Task", "Agent"]
    }
    fn describe(&self, input: &Value) -> String {
        if let Some(q) = input.get("query").and_then(Value::as_str) {
            return format!("search: {q}");
        }
        format!(
            "{}: {}",
            handler::field(input, "name"),
            handler::field(input, "task")
        )
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: AgentInput = match util::parse(AGENT_TOOL, input) {
                Ok(i) => i,
                Err(e) => return e,
            };
            if let Some(query) = input.query.as_deref().map(str::trim)
                && !query.is_empty()
            {
                return ToolOutput::ok(self.set.search(query));
            }
            let (Some(name), Some(task)) = (input.name, input.task) else {
                return ToolOutput::error(
                    "agent needs `name` and `task` (or `query`, keywords to find an agent)",
                );
            };
            let name = name.trim();
            if self.set.get(name).is_none() {
                return ToolOutput::error(format!(
                    "no agent is called {name:?}; the agents are: {}",
                    self.set.names_hint()
                ));
            }
            let call = AgentCall {
                agent: name.to_string(),
                task,
            };
            run_on(bench, ctx, call).await
        })
    }
}

/// `explore`: the built-in read-only agent.
pub struct ExploreTool;

impl Tool for ExploreTool {
    fn name(&self) -> &str {
        EXPLORE
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            EXPLORE,
            "Answer an open question about the workspace in a context of its own: a helper \
             searches and reads with read_file, list_files, glob and grep (it changes nothing \
             and runs no commands) and reports the answer with the paths and lines behind it. \
             Use it when finding the answer takes several searches; several explore calls in \
             one message run at the same time. For one known file, use read_file.",
            json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "The question, with what is known already."}
                },
                "required": ["task"],
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        // Not `Search`: its report is not cheap to have again, so no clearing takes it.
        ToolClass::Other
    }
    fn read_only(&self) -> bool {
        // Its sub-session has only the tools that read or search: plan mode runs it.
        true
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }
    fn offer(&self) -> Option<Offer> {
        Some(Offer::Explore)
    }
    fn concurrent(&self) -> bool {
        true
    }
    fn describe(&self, input: &Value) -> String {
        handler::field(input, "task").to_string()
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: ExploreInput = match util::parse(EXPLORE, input) {
                Ok(i) => i,
                Err(e) => return e,
            };
            let call = AgentCall {
                agent: EXPLORE.to_string(),
                task: input.task,
            };
            run_on(bench, ctx, call).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::AgentDef;

    #[test]
    fn a_long_list_is_cut_and_searched_instead_of_enumerated() {
        let agents = (0..1_000)
            .map(|i| AgentDef {
                name: format!("a{i:04}"),
                description: "Reviews a change. ".repeat(30),
                tools: None,
                model: None,
                prompt: "Review.".into(),
                file: format!(".claude/agents/a{i:04}.md"),
            })
            .collect();
        let set = Arc::new(AgentSet {
            agents,
            warnings: Vec::new(),
        });
        let tool = AgentTool::new(set.clone(), 200_000);
        let spec = tool.spec();
        assert!(
            spec.description.len() < 20_000,
            "{}",
            spec.description.len()
        );
        assert!(
            spec.input_schema["properties"]["name"]
                .get("enum")
                .is_none()
        );
        assert!(spec.input_schema["properties"].get("query").is_some());
        assert!(tool.listing.left_out > 0);
        assert!(
            set.search("a0999")
                .starts_with("1 of 1000 agents match `a0999`:")
        );
        assert!(
            set.names_hint()
                .ends_with("and 970 more (search with `query`)")
        );
        let few = AgentTool::new(
            Arc::new(AgentSet {
                agents: set.agents[..2].to_vec(),
                warnings: Vec::new(),
            }),
            200_000,
        )
        .spec();
        assert_eq!(few.input_schema["required"], json!(["name", "task"]));
        assert_eq!(
            few.input_schema["properties"]["name"]["enum"],
            json!(["a0000", "a0001"])
        );
    }
}
