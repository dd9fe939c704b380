//! `skill`: loads one of the session's skills (its body and the list of its folder's files).
//! The list in its description is fixed when the session starts, so its bytes stay the same.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::message::ToolSpec;
use crate::prompt::Offer;
use crate::skills::{SkillPlace, SkillSet};
use crate::tools::handler::{self, Tool, Workbench};
use crate::tools::{ToolClass, ToolContext, ToolOutput, util};

/// The tool's name.
pub const SKILL_TOOL: &str = "skill";

#[derive(Deserialize)]
struct Input {
    name: String,
}

/// `skill`, over the skills a session found at its start.
pub struct SkillTool {
    set: Arc<SkillSet>,
}

impl SkillTool {
    /// The tool for these skills.
    pub fn new(set: Arc<SkillSet>) -> SkillTool {
        SkillTool { set }
    }
}

impl Tool for SkillTool {
    fn name(&self) -> &'static str {
        SKILL_TOOL
    }
    fn spec(&self) -> ToolSpec {
        let mut description = String::from(
            "Load a skill: instructions the user or the project wrote for a kind of task. When \
             a task matches one of the skills below, load it first and follow it. Files of the \
             skill's folder that it names can then be read with read_file.\n\nSkills:",
        );
        for s in &self.set.skills {
            description.push_str(&format!("\n- {}: {}", s.head.name, s.head.description));
        }
        let names: Vec<&str> = self
            .set
            .skills
            .iter()
            .map(|s| s.head.name.as_str())
            .collect();
        handler::spec(
            SKILL_TOOL,
            &description,
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "enum": names, "description": "The skill to load."}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
        )
    }
    fn class(&self) -> ToolClass {
        ToolClass::Read
    }
    fn offer(&self) -> Option<Offer> {
        Some(Offer::Skills)
    }
    fn claude_names(&self) -> &'static [&'static str] {
        &["Skill"]
    }
    fn describe(&self, input: &Value) -> String {
        handler::field(input, "name").to_string()
    }
    fn run<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _bench: &'a dyn Workbench,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: Input = match util::parse(SKILL_TOOL, input) {
                Ok(i) => i,
                Err(e) => return e,
            };
            let ctx2 = ctx.clone();
            let set = self.set.clone();
            let name = input.name.trim().to_string();
            let job = tokio::task::spawn_blocking(move || {
                let body = set.load(&name, &ctx2.root)?;
                let skill = set.get(&name).cloned();
                Ok::<_, String>((body, skill))
            });
            let (body, skill) = match job.await {
                Ok(Ok((body, Some(skill)))) => (body, skill),
                Ok(Ok((_, None))) => return ToolOutput::error("the skill went away"),
                Ok(Err(e)) => return ToolOutput::error(e),
                Err(e) => return ToolOutput::error(format!("skill failed internally: {e}")),
            };
            if skill.place == SkillPlace::User {
                ctx.allow_reads_in(&skill.folder);
            }
            ToolOutput::ok(skill_text(
                &skill.head.name,
                &skill.folder.display().to_string(),
                &body,
            ))
        })
    }
}

/// A loaded skill as the model reads it (also when it is restored after a compaction).
pub fn skill_text(name: &str, folder: &str, body: &crate::skills::SkillBody) -> String {
    let mut out = format!("<skill name=\"{name}\" folder=\"{folder}\">\n{}", body.text);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if !body.files.is_empty() {
        out.push_str(&format!(
            "Files in the skill's folder (read them with read_file, under {folder}/, when the \
             skill says to): {}\n",
            body.files.join(", ")
        ));
    }
    out.push_str("</skill>");
    out
}
