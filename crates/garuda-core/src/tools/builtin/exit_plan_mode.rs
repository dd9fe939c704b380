//! `exit_plan_mode`: the model presents its plan; the user approves it (and picks the mode
//! the work runs in) or sends it back. The question itself is the turn's (a permission
//! request with the plan), lent through the [`Workbench`]; this handler declares the tool,
//! reads its input and asks.
//!
//! It is offered in every session, plan mode or not, so the tool definitions stay the same
//! bytes when the mode changes (the provider's cache holds); outside plan mode a call is
//! refused without asking.

use serde_json::{Value, json};

use crate::message::ToolSpec;
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::vocab::{ToolClass, ToolContext, ToolKind, ToolOutput};
use futures_util::future::BoxFuture;

/// The tool's name.
pub const PLAN_TOOL: &str = "exit_plan_mode";

/// Longest plan accepted, in characters.
const MAX_PLAN_CHARS: usize = 40_000;

/// The plan of an `exit_plan_mode` call, or what is wrong with its input (for the model).
pub fn plan_in(input: &Value) -> Result<String, String> {
    let plan = match input.get("plan") {
        Some(Value::String(s)) => s.trim(),
        Some(_) => return Err(format!("{PLAN_TOOL}: `plan` must be a string")),
        None => return Err(format!("{PLAN_TOOL} needs `plan`: the steps you will take")),
    };
    if plan.is_empty() {
        return Err(format!(
            "{PLAN_TOOL} needs a non-empty plan: the steps you will take, the files you will \
             change and how you will check the result"
        ));
    }
    let n = plan.chars().count();
    if n > MAX_PLAN_CHARS {
        return Err(format!(
            "the plan has {n} characters, over the {MAX_PLAN_CHARS} allowed; state it more briefly"
        ));
    }
    Ok(plan.to_string())
}

/// `exit_plan_mode`.
pub(super) struct ExitPlanMode;

impl Tool for ExitPlanMode {
    fn name(&self) -> &str {
        PLAN_TOOL
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["ExitPlanMode"]
    }
    fn spec(&self) -> ToolSpec {
        handler::spec(
            PLAN_TOOL,
            "Only in plan mode (a <garuda_note> says when it is on): present your plan and ask \
             the user to approve it. Call it once you have read enough to know what to change; \
             the plan names the steps, the files and how you will check the result, in \
             Markdown. When the user approves, plan mode ends and you carry out the plan; when \
             they do not, you stay in plan mode and hear why. Outside plan mode it is refused.",
            json!({
                "type": "object",
                "properties": {
                    "plan": {"type": "string", "description": "The plan, in Markdown."}
                },
                "required": ["plan"],
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        ToolClass::Plan
    }
    fn kind(&self) -> ToolKind {
        ToolKind::SwitchMode
    }
    fn describe(&self, input: &Value) -> String {
        handler::field(input, "plan")
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .to_string()
    }
    fn title(&self, _input: &Value) -> Option<String> {
        Some("Approve the plan and leave plan mode?".to_string())
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            // A session lends the question (and the mode change); run alone, the tool has no
            // one to ask.
            if let Some(leave) = bench.leave_plan(input.clone(), ctx) {
                return leave.await;
            }
            match plan_in(&input) {
                Ok(_) => ToolOutput::error(format!(
                    "{PLAN_TOOL} needs a session in plan mode to ask the user"
                )),
                Err(e) => ToolOutput::error(e),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_plan() {
        assert_eq!(
            plan_in(&json!({"plan": "  1. Fix it\n"})),
            Ok("1. Fix it".into())
        );
        assert!(plan_in(&json!({"plan": " "})).is_err());
        assert!(plan_in(&json!({})).is_err());
        assert!(plan_in(&json!({"plan": 3})).is_err());
        let long = "x".repeat(MAX_PLAN_CHARS + 1);
        assert!(plan_in(&json!({ "plan": long })).is_err());
        let h = ExitPlanMode;
        assert_eq!(h.describe(&json!({"plan": "\n# Plan\n1. a"})), "# Plan");
        assert!(h.read_only());
    }
}
