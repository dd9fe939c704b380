//! The Agent Skills format, pure: a `SKILL.md` with YAML frontmatter (`name`, `description`,
//! optional `allowed-tools`) and a body of instructions.

use crate::prompt::sources::{FrontmatterError, split_frontmatter};

/// Longest name kept (the Agent Skills format allows 64 characters).
const MAX_NAME: usize = 64;
/// Longest description kept in the tool's list (the format allows 1 024 characters).
const MAX_DESCRIPTION: usize = 1024;

/// What a `SKILL.md` declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillHead {
    /// Its name, as the model calls it.
    pub name: String,
    /// When to use it (one entry of the tool's list).
    pub description: String,
    /// The tools it expects (informational: Garuda's approvals still decide).
    pub allowed_tools: Vec<String>,
}

/// A file's YAML frontmatter read as a mapping, with the line of each key, for the
/// formats that declare themselves in one (skills, agents).
pub(crate) struct Frontmatter<'a> {
    yaml: &'a str,
    map: serde_yaml_ng::Mapping,
}

impl<'a> Frontmatter<'a> {
    /// Splits `text` into its frontmatter and its body; `None` when it has no frontmatter.
    pub(crate) fn read(
        text: &'a str,
    ) -> Result<Option<(Frontmatter<'a>, &'a str)>, FrontmatterError> {
        let Some((yaml, body)) = split_frontmatter(text)? else {
            return Ok(None);
        };
        let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(yaml).map_err(|e| {
            let msg = e.to_string();
            FrontmatterError {
                // Lines of the frontmatter start on the file's second line.
                line: e.location().map_or(1, |l| l.line() + 1),
                message: msg.split(" at line ").next().unwrap_or(&msg).to_string(),
            }
        })?;
        let map = match value {
            serde_yaml_ng::Value::Mapping(map) => map,
            // `---` then `---`: an empty frontmatter.
            serde_yaml_ng::Value::Null => serde_yaml_ng::Mapping::new(),
            _ => {
                return Err(FrontmatterError {
                    line: 2,
                    message: "the frontmatter is not a mapping of keys to values".into(),
                });
            }
        };
        Ok(Some((Frontmatter { yaml, map }, body)))
    }

    /// The file's line of `key` (the frontmatter's first line when it is absent).
    pub(crate) fn line_of(&self, key: &str) -> usize {
        self.yaml
            .lines()
            .position(|l| l.trim_start().starts_with(&format!("{key}:")))
            .map_or(2, |i| i + 2)
    }

    /// Refuses a name holding a Unicode format character: `safe\u{202e}elif_daer` shows as
    /// `saferead_file`, so a person would approve a name other than the one that runs.
    pub(crate) fn refuse_format_chars(&self, name: &str) -> Result<(), FrontmatterError> {
        if !name.chars().any(crate::text::is_format_char) {
            return Ok(());
        }
        Err(FrontmatterError {
            line: self.line_of("name"),
            message: format!(
                "`name` holds an invisible formatting character (\"{}\"), which can make it \
                 show as another name; refused",
                crate::text::escape_format_chars(name)
            ),
        })
    }

    /// The string `key`, on one line; `None` when absent or null.
    pub(crate) fn text(&self, key: &str) -> Result<Option<String>, FrontmatterError> {
        match self.map.get(key) {
            None | Some(serde_yaml_ng::Value::Null) => Ok(None),
            Some(serde_yaml_ng::Value::String(s)) => Ok(Some(one_line(s))),
            Some(_) => Err(FrontmatterError {
                line: self.line_of(key),
                message: format!("`{key}` must be a string"),
            }),
        }
    }

    /// The list `key`: a YAML sequence, or one string of names split at commas and spaces;
    /// `None` when absent or null.
    pub(crate) fn list(&self, key: &str) -> Result<Option<Vec<String>>, FrontmatterError> {
        match self.map.get(key) {
            None | Some(serde_yaml_ng::Value::Null) => Ok(None),
            Some(serde_yaml_ng::Value::String(s)) => Ok(Some(
                s.split([',', ' '])
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect(),
            )),
            Some(serde_yaml_ng::Value::Sequence(items)) => Ok(Some(
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_string))
                    .collect(),
            )),
            Some(_) => Err(FrontmatterError {
                line: self.line_of(key),
                message: format!("`{key}` must be a list of tool names"),
            }),
        }
    }
}

/// Reads a `SKILL.md`: its head and its body. `folder` (the folder's name) is the name when
/// the frontmatter gives none.
pub fn parse_skill(text: &str, folder: &str) -> Result<(SkillHead, String), FrontmatterError> {
    let Some((front, body)) = Frontmatter::read(text)? else {
        return Err(FrontmatterError {
            line: 1,
            message: "no frontmatter: a SKILL.md starts with `---`, then `name:` and \
                      `description:`, then `---`"
                .into(),
        });
    };
    let name = front.text("name")?.unwrap_or_else(|| folder.to_string());
    front.refuse_format_chars(&name)?;
    if name.is_empty() || name.chars().count() > MAX_NAME || name.contains(char::is_whitespace) {
        return Err(FrontmatterError {
            line: front.line_of("name"),
            message: format!(
                "`name` must be one word of at most {MAX_NAME} characters (lowercase letters, \
                 digits and hyphens), not {name:?}"
            ),
        });
    }
    let Some(description) = front.text("description")?.filter(|d| !d.is_empty()) else {
        return Err(FrontmatterError {
            line: front.line_of("description"),
            message: "`description` is missing: it says when to use the skill".into(),
        });
    };
    let description: String = description.chars().take(MAX_DESCRIPTION).collect();
    let allowed_tools = front.list("allowed-tools")?.unwrap_or_default();
    let head = SkillHead {
        name,
        description,
        allowed_tools,
    };
    Ok((head, body.trim_start_matches(['\n', '\r']).to_string()))
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_agent_skills_format() {
        let text = "---\nname: pdf-forms\ndescription: >\n  Fill PDF forms.\n  Use for any PDF.\nallowed-tools: Read, Bash\n---\n\n# Steps\nRun it.\n";
        let (head, body) = parse_skill(text, "folder").unwrap();
        assert_eq!(head.name, "pdf-forms");
        assert_eq!(head.description, "Fill PDF forms. Use for any PDF.");
        assert_eq!(head.allowed_tools, ["Read", "Bash"]);
        assert_eq!(body, "# Steps\nRun it.\n");
        let (head, _) = parse_skill("---\ndescription: d\n---\nbody", "from-folder").unwrap();
        assert_eq!(head.name, "from-folder");
    }

    #[test]
    fn malformed_frontmatter_names_the_line() {
        let missing = parse_skill("---\nname: x\n---\nbody", "x").unwrap_err();
        assert!(missing.message.contains("description"), "{missing}");
        let bad = parse_skill("---\nname: x\ndescription: [unclosed\n---\n", "x").unwrap_err();
        assert!(bad.line >= 3, "{bad}");
        let spaced = parse_skill("---\nname: two words\ndescription: d\n---\n", "x").unwrap_err();
        assert_eq!(spaced.line, 2, "{spaced}");
        let none = parse_skill("# no frontmatter\n", "x").unwrap_err();
        assert_eq!(none.line, 1);
        let open = parse_skill("---\nname: x\n", "x").unwrap_err();
        assert!(open.message.contains("never closed"), "{open}");
    }
}
