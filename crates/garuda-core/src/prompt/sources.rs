//! Where a repository keeps instructions, and which of those places Garuda reads
//! (`[instructions] sources`): the root files, nested files in subfolders, and the
//! path-scoped rules of other agents (Cursor, Copilot, Claude Code). Pure: parsing rule
//! frontmatter and matching rule globs; the reads happen in [`super::gather`].

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Content, FileText, SourceFile};

/// A place instructions are kept, as named in `[instructions] sources`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// `AGENTS.md` (the root one in the system prompt; nested ones with `nested`).
    #[serde(rename = "AGENTS.md")]
    Agents,
    /// `CLAUDE.md`.
    #[serde(rename = "CLAUDE.md")]
    Claude,
    /// `GARUDA.md`.
    #[serde(rename = "GARUDA.md")]
    Garuda,
    /// `GEMINI.md`.
    #[serde(rename = "GEMINI.md")]
    Gemini,
    /// The enabled file names in subfolders, loaded when a tool works there.
    #[serde(rename = "nested")]
    Nested,
    /// `.cursor/rules/*.mdc` (`globs`, `alwaysApply`).
    #[serde(rename = "cursor")]
    Cursor,
    /// `.github/copilot-instructions.md` and `.github/instructions/*.instructions.md`
    /// (`applyTo`).
    #[serde(rename = "copilot")]
    Copilot,
    /// `.claude/rules/**/*.md` (`paths`).
    #[serde(rename = "claude-rules", alias = "claude_rules")]
    ClaudeRules,
}

impl Source {
    /// The file name of a per-folder instruction file source.
    pub fn file_name(self) -> Option<&'static str> {
        match self {
            Source::Agents => Some("AGENTS.md"),
            Source::Claude => Some("CLAUDE.md"),
            Source::Garuda => Some("GARUDA.md"),
            Source::Gemini => Some("GEMINI.md"),
            _ => None,
        }
    }
}

/// Every per-folder instruction file name, in the order they appear in the prompt (the
/// later wins on a conflict, so Garuda's own file comes last).
pub const FILE_NAMES: [&str; 4] = ["AGENTS.md", "CLAUDE.md", "GEMINI.md", "GARUDA.md"];

/// Folders that hold rules, for the watcher (root-relative).
pub const RULE_DIRS: [&str; 4] = [
    ".cursor/rules",
    ".github",
    ".github/instructions",
    ".claude/rules",
];

/// Copilot's repository-wide file.
pub const COPILOT_FILE: &str = ".github/copilot-instructions.md";

/// `[instructions]`: which places are read, and the budgets of the files outside the
/// system prompt's shared limit.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct InstructionSettings {
    /// The places read. Default: the three root files and the nested ones.
    pub sources: Vec<Source>,
    /// The most characters one nested file or one path-scoped rule brings in.
    #[serde(alias = "nestedChars")]
    pub nested_chars: usize,
    /// The most characters nested files and rules re-attached after a compaction take in
    /// all (the most recently attached first; the rest come back when touched again).
    #[serde(alias = "nestedTotalChars")]
    pub nested_total_chars: usize,
    /// The most characters of the user-global file (`$XDG_CONFIG_HOME/garuda/AGENTS.md`).
    #[serde(alias = "globalChars")]
    pub global_chars: usize,
}

impl Default for InstructionSettings {
    fn default() -> Self {
        InstructionSettings {
            sources: vec![
                Source::Agents,
                Source::Claude,
                Source::Garuda,
                Source::Nested,
            ],
            nested_chars: 20_000,
            nested_total_chars: 60_000,
            global_chars: 20_000,
        }
    }
}

impl InstructionSettings {
    /// True when `s` is read.
    pub fn has(&self, s: Source) -> bool {
        self.sources.contains(&s)
    }

    /// The per-folder file names read, in prompt order.
    pub fn file_names(&self) -> Vec<&'static str> {
        FILE_NAMES
            .into_iter()
            .filter(|n| self.sources.iter().any(|s| s.file_name() == Some(*n)))
            .collect()
    }

    /// True when anything can come into force after the session starts.
    pub fn scoped(&self) -> bool {
        self.has(Source::Nested)
            || self.has(Source::Cursor)
            || self.has(Source::Copilot)
            || self.has(Source::ClaudeRules)
    }
}

/// When a rule applies.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Applies {
    /// Always: it goes into the system prompt with the root files.
    Always,
    /// When a path matching one of these globs (root-relative) is touched.
    Paths(Vec<String>),
    /// Never (the reason is reported): malformed, or a kind Garuda cannot apply.
    Never(String),
}

/// A rule file of another agent's format.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// The file (root-relative name) and its body, frontmatter removed.
    pub file: SourceFile,
    /// Its format.
    pub source: Source,
    /// When it applies.
    pub applies: Applies,
}

impl Rule {
    /// Its globs, when it is path-scoped.
    pub fn globs(&self) -> Option<&[String]> {
        match &self.applies {
            Applies::Paths(g) => Some(g),
            _ => None,
        }
    }
}

/// A frontmatter problem: the line (1-based, in the file) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontmatterError {
    /// Line in the file.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FrontmatterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Splits `---` frontmatter from the body: `(yaml, body)`, or `None` when the file has none.
/// An opening `---` without its closing line is an error.
pub fn split_frontmatter(text: &str) -> Result<Option<(&str, &str)>, FrontmatterError> {
    let t = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = t
        .strip_prefix("---\n")
        .or_else(|| t.strip_prefix("---\r\n"))
    else {
        return Ok(None);
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            let yaml = &rest[..offset];
            let body = &rest[offset + line.len()..];
            return Ok(Some((yaml, body)));
        }
        offset += line.len();
    }
    Err(FrontmatterError {
        line: 1,
        message: "the frontmatter opened here is never closed with `---`".into(),
    })
}

/// Glob values written unquoted (`globs: **/*.ts`, as Cursor writes them) are not valid YAML
/// (`*` starts an alias): such a value of `keys` is read as the string it is.
fn quote_glob_values(yaml: &str, keys: &[&str]) -> String {
    let mut out = String::with_capacity(yaml.len() + 16);
    for line in yaml.split_inclusive('\n') {
        let (content, eol) = match line.strip_suffix('\n') {
            Some(c) => (c.strip_suffix('\r').unwrap_or(c), &line[c.len()..]),
            None => (line, ""),
        };
        let quoted = keys.iter().find_map(|k| {
            let v = content.strip_prefix(k)?.strip_prefix(':')?;
            let v = v.trim();
            let plain = !v.is_empty()
                && !v.starts_with(['"', '\'', '[', '{', '|', '>', '#', '-', '&', '!']);
            (plain && v.starts_with('*')).then(|| format!("{k}: '{}'", v.replace('\'', "''")))
        });
        match quoted {
            Some(q) => {
                out.push_str(&q);
                out.push_str(eol);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// The line (1-based in the file, the frontmatter starting on line 2) of `key:`.
fn key_line(yaml: &str, key: &str) -> usize {
    yaml.lines()
        .position(|l| {
            l.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with(':'))
        })
        .map_or(1, |i| i + 2)
}

/// A list of globs from a string (comma-separated) or a sequence of strings.
fn globs_of(
    v: &serde_yaml_ng::Value,
    yaml: &str,
    key: &str,
) -> Result<Vec<String>, FrontmatterError> {
    use serde_yaml_ng::Value;
    let bad = || FrontmatterError {
        line: key_line(yaml, key),
        message: format!(
            "`{key}` must be a glob, a comma-separated list of globs or a list of globs"
        ),
    };
    let mut out = Vec::new();
    match v {
        Value::Null => {}
        Value::String(s) => out.extend(s.split(',').map(str::trim).map(str::to_string)),
        Value::Sequence(items) => {
            for i in items {
                match i {
                    Value::String(s) => out.push(s.trim().to_string()),
                    _ => return Err(bad()),
                }
            }
        }
        _ => return Err(bad()),
    }
    out.retain(|g| !g.is_empty());
    Ok(out)
}

/// What the frontmatter of a rule says: when it applies.
pub fn parse_rule(source: Source, name: &str, text: &str) -> (Applies, String) {
    if source == Source::Copilot && name == COPILOT_FILE {
        return (Applies::Always, text.to_string());
    }
    let keys: &[&str] = match source {
        Source::Cursor => &["globs"],
        Source::Copilot => &["applyTo"],
        _ => &["paths"],
    };
    let (yaml, body) = match split_frontmatter(text) {
        Ok(Some(p)) => p,
        Ok(None) => {
            let applies = match source {
                // A Claude rule without `paths` applies everywhere.
                Source::ClaudeRules => Applies::Always,
                Source::Copilot => Applies::Never(
                    "no `applyTo` frontmatter: Copilot does not apply it on its own either".into(),
                ),
                _ => {
                    Applies::Never("no frontmatter: neither `globs` nor `alwaysApply: true`".into())
                }
            };
            return (applies, text.to_string());
        }
        Err(e) => {
            return (
                Applies::Never(format!("invalid frontmatter: {e}")),
                text.to_string(),
            );
        }
    };
    let body = body.to_string();
    let fixed = quote_glob_values(yaml, keys);
    let value: serde_yaml_ng::Value = if fixed.trim().is_empty() {
        serde_yaml_ng::Value::Null
    } else {
        match serde_yaml_ng::from_str(&fixed) {
            Ok(v) => v,
            Err(e) => {
                // Lines of the frontmatter start on the file's second line.
                let line = e.location().map_or(1, |l| l.line() + 1);
                let msg = e.to_string();
                let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
                let err = FrontmatterError { line, message: msg };
                return (Applies::Never(format!("invalid frontmatter: {err}")), body);
            }
        }
    };
    let map = match &value {
        serde_yaml_ng::Value::Mapping(m) => Some(m),
        serde_yaml_ng::Value::Null => None,
        _ => {
            let err = FrontmatterError {
                line: 2,
                message: "the frontmatter is not a mapping of keys to values".into(),
            };
            return (Applies::Never(format!("invalid frontmatter: {err}")), body);
        }
    };
    let get = |k: &str| map.and_then(|m| m.get(k));
    let globs = match get(keys[0]).map(|v| globs_of(v, yaml, keys[0])).transpose() {
        Ok(g) => g.unwrap_or_default(),
        Err(e) => return (Applies::Never(format!("invalid frontmatter: {e}")), body),
    };
    let everything = |g: &[String]| g.iter().any(|g| g == "**" || g == "**/*");
    let applies = match source {
        Source::Cursor => {
            let always = match get("alwaysApply") {
                None | Some(serde_yaml_ng::Value::Null) => false,
                Some(serde_yaml_ng::Value::Bool(b)) => *b,
                Some(_) => {
                    let err = FrontmatterError {
                        line: key_line(yaml, "alwaysApply"),
                        message: "`alwaysApply` must be true or false".into(),
                    };
                    return (Applies::Never(format!("invalid frontmatter: {err}")), body);
                }
            };
            if always || everything(&globs) {
                Applies::Always
            } else if !globs.is_empty() {
                Applies::Paths(globs)
            } else {
                Applies::Never(
                    "neither `globs` nor `alwaysApply: true`: an agent-requested or manual rule, \
                     which Garuda does not apply"
                        .into(),
                )
            }
        }
        Source::Copilot if globs.is_empty() => {
            Applies::Never("no `applyTo`: Copilot does not apply it on its own either".into())
        }
        Source::ClaudeRules if globs.is_empty() => Applies::Always,
        _ if everything(&globs) => Applies::Always,
        _ => Applies::Paths(globs),
    };
    (applies, body)
}

/// Builds a rule from a file read by gather (`file.content` holds the whole file).
pub fn rule_from(source: Source, file: SourceFile) -> (Rule, Option<String>) {
    let (applies, content) = match &file.content {
        Content::Text(t) => {
            let (applies, body) = parse_rule(source, &file.name, &t.text);
            let cut = t.text.len() - body.len();
            let content = Content::Text(FileText {
                text: body,
                truncated: t.truncated,
                total_bytes: t.total_bytes.saturating_sub(cut as u64),
                lossy: t.lossy,
                total_chars: t
                    .total_chars
                    .map(|c| c.saturating_sub(t.text[..cut].chars().count() as u64)),
            });
            (applies, content)
        }
        Content::Skipped(why) => (Applies::Never(why.clone()), file.content.clone()),
    };
    let warning = match &applies {
        Applies::Never(why) if why.starts_with("invalid frontmatter: line ") => {
            let rest = &why["invalid frontmatter: line ".len()..];
            let (line, msg) = rest.split_once(": ").unwrap_or(("1", rest));
            Some(format!(
                "{}:{line}: invalid frontmatter: {msg}; the rule is not applied",
                file.name
            ))
        }
        _ => None,
    };
    (
        Rule {
            file: SourceFile { content, ..file },
            source,
            applies,
        },
        warning,
    )
}

/// Compiled globs of one rule. A glob without `/` matches names at any depth; leading `/`
/// and `./` are dropped (globs are root-relative).
pub struct RuleMatcher {
    set: globset::GlobSet,
}

impl RuleMatcher {
    /// Compiles `globs`; invalid ones are left out (returned as errors for a warning).
    pub fn new(globs: &[String]) -> (RuleMatcher, Vec<String>) {
        let mut b = globset::GlobSetBuilder::new();
        let mut errors = Vec::new();
        for g in globs {
            let g = g.trim_start_matches("./").trim_start_matches('/');
            let g = if g.contains('/') {
                g.to_string()
            } else {
                format!("**/{g}")
            };
            match globset::GlobBuilder::new(&g)
                .literal_separator(true)
                .build()
            {
                Ok(glob) => {
                    b.add(glob);
                }
                Err(e) => errors.push(format!("{g}: {e}")),
            }
        }
        let set = b.build().unwrap_or_else(|_| globset::GlobSet::empty());
        (RuleMatcher { set }, errors)
    }

    /// True when the file `path` is matched.
    pub fn file(&self, path: &str) -> bool {
        self.set.is_match(path)
    }

    /// True when the rule covers the files directly in folder `dir` (`dir/*` matches).
    pub fn folder(&self, dir: &str) -> bool {
        self.set.is_match(dir) || self.set.is_match(format!("{dir}/\u{1}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_with_defaults() {
        let s: InstructionSettings = toml::from_str("").unwrap();
        assert_eq!(s, InstructionSettings::default());
        assert_eq!(s.file_names(), ["AGENTS.md", "CLAUDE.md", "GARUDA.md"]);
        let s: InstructionSettings = toml::from_str(
            "sources = [\"AGENTS.md\", \"GEMINI.md\", \"cursor\", \"claude-rules\"]",
        )
        .unwrap();
        assert_eq!(s.file_names(), ["AGENTS.md", "GEMINI.md"]);
        assert!(s.has(Source::Cursor) && s.has(Source::ClaudeRules) && !s.has(Source::Nested));
        assert!(toml::from_str::<InstructionSettings>("sources = [\"agents\"]").is_err());
    }

    #[test]
    fn cursor_rules() {
        let (a, body) = parse_rule(
            Source::Cursor,
            ".cursor/rules/a.mdc",
            "---\ndescription: A\nglobs: packages/a/**\nalwaysApply: false\n---\nUse tabs.\n",
        );
        assert_eq!(a, Applies::Paths(vec!["packages/a/**".into()]));
        assert_eq!(body, "Use tabs.\n");
        // Unquoted globs starting with `*`, as Cursor writes them.
        let (a, _) = parse_rule(Source::Cursor, "r.mdc", "---\nglobs: *.ts, *.tsx\n---\nx\n");
        assert_eq!(a, Applies::Paths(vec!["*.ts".into(), "*.tsx".into()]));
        let (a, _) = parse_rule(Source::Cursor, "r.mdc", "---\nalwaysApply: true\n---\nx\n");
        assert_eq!(a, Applies::Always);
        let (a, _) = parse_rule(Source::Cursor, "r.mdc", "---\ndescription: d\n---\nx\n");
        assert!(matches!(a, Applies::Never(w) if w.contains("agent-requested")));
        let (a, _) = parse_rule(Source::Cursor, "r.mdc", "---\nglobs: [a\n---\nx\n");
        assert!(
            matches!(&a, Applies::Never(w) if w.starts_with("invalid frontmatter: line ")),
            "{a:?}"
        );
        let (a, _) = parse_rule(
            Source::Cursor,
            "r.mdc",
            "---\nglobs: a\nalwaysApply: 3\n---\n",
        );
        assert_eq!(
            a,
            Applies::Never(
                "invalid frontmatter: line 3: `alwaysApply` must be true or false".into()
            )
        );
    }

    #[test]
    fn copilot_and_claude_rules() {
        let (a, _) = parse_rule(
            Source::Copilot,
            ".github/instructions/py.instructions.md",
            "---\napplyTo: \"**/*.py,docs/**\"\n---\nPEP 8.\n",
        );
        assert_eq!(a, Applies::Paths(vec!["**/*.py".into(), "docs/**".into()]));
        let (a, _) = parse_rule(
            Source::Copilot,
            ".github/instructions/x.instructions.md",
            "x",
        );
        assert!(matches!(a, Applies::Never(_)));
        let (a, b) = parse_rule(Source::Copilot, COPILOT_FILE, "---\nnot: parsed\n---\n");
        assert_eq!((a, b.len()), (Applies::Always, 20));
        let (a, _) = parse_rule(Source::ClaudeRules, ".claude/rules/x.md", "Always.\n");
        assert_eq!(a, Applies::Always);
        let (a, _) = parse_rule(
            Source::ClaudeRules,
            ".claude/rules/x.md",
            "---\npaths:\n  - \"src/api/**/*.ts\"\n  - lib/**\n---\nAPI rules.\n",
        );
        assert_eq!(
            a,
            Applies::Paths(vec!["src/api/**/*.ts".into(), "lib/**".into()])
        );
        let (a, _) = parse_rule(
            Source::ClaudeRules,
            ".claude/rules/x.md",
            "---\npaths: 5\n---\n",
        );
        assert_eq!(
            a,
            Applies::Never(
                "invalid frontmatter: line 2: `paths` must be a glob, a comma-separated list of \
                 globs or a list of globs"
                    .into()
            )
        );
        let (a, _) = parse_rule(Source::ClaudeRules, ".claude/rules/x.md", "---\npaths: a\n");
        assert!(matches!(a, Applies::Never(w) if w.contains("never closed")));
    }

    #[test]
    fn malformed_rules_warn_with_file_and_line() {
        let file = SourceFile {
            name: ".cursor/rules/bad.mdc".into(),
            link: None,
            content: Content::Text(FileText {
                text: "---\ndescription: ok\nglobs: [unclosed\n---\nbody\n".into(),
                truncated: false,
                total_bytes: 40,
                lossy: false,
                total_chars: Some(40),
            }),
        };
        let (rule, warning) = rule_from(Source::Cursor, file);
        let w = warning.expect("a warning");
        assert!(w.starts_with(".cursor/rules/bad.mdc:"), "{w}");
        assert!(w.contains("not applied"), "{w}");
        assert!(matches!(rule.applies, Applies::Never(_)));
    }

    #[test]
    fn matching() {
        let (m, errs) = RuleMatcher::new(&["packages/a/**".into(), "*.py".into()]);
        assert!(errs.is_empty());
        assert!(m.file("packages/a/x.rs"));
        assert!(m.file("packages/a/deep/y.rs"));
        assert!(!m.file("packages/b/x.rs"));
        assert!(m.file("tools/gen.py") && m.file("gen.py"));
        assert!(m.folder("packages/a") && m.folder("packages/a/src"));
        assert!(!m.folder("packages") && !m.folder("tools"));
        let (m, _) = RuleMatcher::new(&["**/*.rs".into()]);
        assert!(
            !m.folder("packages/a"),
            "listing a folder is not touching its Rust files"
        );
    }
}
