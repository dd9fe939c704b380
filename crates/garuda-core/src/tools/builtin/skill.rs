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
use crate::tools::listing::Listing;
use crate::tools::util;
use crate::tools::vocab::{ToolClass, ToolContext, ToolOutput};

/// The tool's name.
pub const SKILL_TOOL: &str = "skill";

#[derive(Deserialize)]
struct Input {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    query: Option<String>,
}

/// `skill`, over the skills a session found at its start.
pub struct SkillTool {
    set: Arc<SkillSet>,
    listing: Listing,
}

impl SkillTool {
    /// The tool for these skills, listing what fits a model window of `context_window`
    /// tokens in its description.
    pub fn new(set: Arc<SkillSet>, context_window: u64) -> SkillTool {
        let listing = set.listing(context_window);
        SkillTool { set, listing }
    }
}

impl Tool for SkillTool {
    fn name(&self) -> &str {
        SKILL_TOOL
    }
    fn spec(&self) -> ToolSpec {
        let mut description = String::from(
            "Load a skill: instructions the user or the project wrote for a kind of task. When \
             a task matches one of the skills below, load it first and follow it. Files of the \
             skill's folder that it names can then be read with read_file.\n\nSkills:",
        );
        description.push_str(&self.listing.text);
        if self.listing.left_out == 0 {
            let names: Vec<&str> = self
                .set
                .skills
                .iter()
                .map(|s| s.head.name.as_str())
                .collect();
            return handler::spec(
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
            );
        }
        // The rest are found by a search: no enum of every name (it would carry the whole
        // list again), and `query` beside `name`.
        description.push_str(&format!(
            "\n({} more skills are not listed: call skill with `query` (keywords) to find \
             them, then load one by its `name`.)",
            self.listing.left_out
        ));
        handler::spec(
            SKILL_TOOL,
            &description,
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The skill to load."},
                    "query": {"type": "string", "description": "Keywords to find skills that are not listed (instead of name)."}
                },
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
        match input.get("query").and_then(Value::as_str) {
            Some(q) => format!("search: {q}"),
            None => handler::field(input, "name").to_string(),
        }
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
            if let Some(query) = input.query.as_deref().map(str::trim)
                && !query.is_empty()
            {
                return ToolOutput::ok(self.set.search(query));
            }
            let Some(name) = input.name.map(|n| n.trim().to_string()) else {
                return ToolOutput::error(
                    "skill needs `name`, the skill to load (or `query`, keywords to find one)",
                );
            };
            let ctx2 = ctx.clone();
            let set = self.set.clone();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::{Skill, SkillHead};

    fn set(n: usize) -> Arc<SkillSet> {
        let skills = (0..n)
            .map(|i| Skill {
                head: SkillHead {
                    name: format!("s{i:04}"),
                    description: "Does a thing. ".repeat(40),
                    allowed_tools: Vec::new(),
                },
                folder: format!(".agents/skills/s{i:04}").into(),
                place: SkillPlace::Workspace,
            })
            .collect();
        Arc::new(SkillSet {
            skills,
            ..SkillSet::default()
        })
    }

    #[test]
    fn a_long_list_is_cut_and_searched_instead_of_enumerated() {
        let few = SkillTool::new(set(3), 200_000).spec();
        assert_eq!(few.input_schema["required"], json!(["name"]));
        assert_eq!(few.input_schema["properties"]["name"]["enum"][2], "s0002");
        assert!(few.input_schema["properties"].get("query").is_none());

        let tool = SkillTool::new(set(5_000), 200_000);
        let many = tool.spec();
        assert!(
            many.description.len() < 20_000,
            "{}",
            many.description.len()
        );
        assert!(
            many.input_schema["properties"]["name"]
                .get("enum")
                .is_none()
        );
        assert!(many.input_schema["properties"].get("query").is_some());
        assert!(many.input_schema.get("required").is_none());
        let left = tool.listing.left_out;
        assert!(
            many.description
                .contains(&format!("({left} more skills are not listed")),
            "{}",
            many.description
        );
        let found = tool.set.search("s4999");
        assert!(
            found.starts_with("1 of 5000 skills match `s4999`:\n- s4999: Does"),
            "{found}"
        );
    }
}
