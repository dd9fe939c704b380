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
use crate::tools::handler::{self, AgentCall, Tool, ToolKind, Workbench};
use crate::tools::{ToolClass, ToolContext, ToolOutput, util};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentInput {
    name: String,
    task: String,
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
}

impl AgentTool {
    /// The tool for these agents.
    pub fn new(set: Arc<AgentSet>) -> AgentTool {
        AgentTool { set }
    }
}

impl Tool for AgentTool {
    fn name(&self) -> &'static str {
        AGENT_TOOL
    }
    fn spec(&self) -> ToolSpec {
        let mut description = String::from(
            "Hand a task to a custom agent: a helper with its own prompt and tools that works \
             in a context of its own and answers with one report. Give it everything it needs \
             in the task (it sees nothing of this conversation), and check its report.\n\n\
             Agents:",
        );
        for a in &self.set.agents {
            description.push_str(&format!("\n- {}: {}", a.name, a.description));
        }
        let names: Vec<&str> = self.set.agents.iter().map(|a| a.name.as_str()).collect();
        handler::spec(
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
            let name = input.name.trim();
            if self.set.get(name).is_none() {
                let names: Vec<&str> = self.set.agents.iter().map(|a| a.name.as_str()).collect();
                return ToolOutput::error(format!(
                    "no agent is called {name:?}; the agents are: {}",
                    names.join(", ")
                ));
            }
            let call = AgentCall {
                agent: name.to_string(),
                task: input.task,
            };
            run_on(bench, ctx, call).await
        })
    }
}

/// `explore`: the built-in read-only agent.
pub struct ExploreTool;

impl Tool for ExploreTool {
    fn name(&self) -> &'static str {
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
