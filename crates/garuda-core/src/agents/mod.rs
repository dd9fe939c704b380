//! Agents: sub-sessions the model hands a task to. Custom agents are Markdown files (the
//! format of Claude Code's `.claude/agents/*.md`: frontmatter `name`, `description`, `tools`,
//! optional `model`; the body is the agent's prompt) found when a session starts in the
//! workspace's `.garuda/agents/` and `.claude/agents/` (root-confined, like every instruction
//! file) and in the user's `$XDG_CONFIG_HOME/garuda/agents/`. `explore` is the built-in agent
//! with read-only tools. Each call runs a child session of its own (see `turn::agents`).

use std::path::{Path, PathBuf};

use crate::fsroot::{EntryKind, Root};
use crate::prompt::sources::FrontmatterError;
use crate::skills::Frontmatter;

/// The workspace folders agents are found in, in precedence order (a name found in an
/// earlier folder shadows the same name later; the user's folder comes last).
pub const WORKSPACE_DIRS: [&str; 2] = [".garuda/agents", ".claude/agents"];

/// The name of the built-in read-only agent and of its tool.
pub const EXPLORE: &str = "explore";

/// The name of the tool that runs custom agents.
pub const AGENT_TOOL: &str = "agent";

/// Most model requests of one agent call (its own turn) before it stops.
pub const DEFAULT_MAX_STEPS: u32 = 50;

/// Most `explore` calls of one assistant message that run at the same time (the rest wait
/// for a free slot).
pub const DEFAULT_CONCURRENCY: usize = 4;

/// How deep agents may start agents when `[agents] nested` is on (the main session is 0).
pub const MAX_DEPTH: u32 = 3;

/// Largest agent file read, in characters.
const MAX_AGENT_CHARS: usize = 100_000;
/// Longest name kept.
const MAX_NAME: usize = 64;
/// Longest description kept in the tool's list.
const MAX_DESCRIPTION: usize = 1024;

/// The prompt of `explore`.
pub const EXPLORE_PROMPT: &str = "You explore the workspace to answer one question. Search \
with grep and glob, list folders with list_files, and read the files that matter with \
read_file; you cannot change files or run commands. Look before you conclude, and stop once \
the question is answered. Your final message is your report: the answer first, then the \
paths (with line numbers) that support it, short and exact; say what you looked for and \
could not find.";

/// The `[agents]` settings (user config only).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, rename_all = "snake_case", deny_unknown_fields)]
pub struct AgentSettings {
    /// Offer the `agent` tool when custom agents are found (default on).
    pub enabled: bool,
    /// Offer the built-in `explore` agent (default on).
    pub explore: bool,
    /// Let an agent start agents (`agent` or `explore` in its `tools`), up to [`MAX_DEPTH`]
    /// levels (default off: sub-sessions never get the agent tools).
    pub nested: bool,
    /// Most model requests of one agent call.
    pub max_steps: u32,
    /// Most `explore` calls of one message running at once.
    pub concurrency: usize,
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            enabled: true,
            explore: true,
            nested: false,
            max_steps: DEFAULT_MAX_STEPS,
            concurrency: DEFAULT_CONCURRENCY,
        }
    }
}

/// One custom agent found at session start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDef {
    /// Its name, as the model calls it.
    pub name: String,
    /// When to use it (one entry of the tool's list).
    pub description: String,
    /// The tools it gets: Garuda's names of built-in tools, then the other names as the
    /// file gives them (client or MCP tools of the calling session); `None` when the file
    /// lists none (every tool of the caller but the agent tools, as in Claude Code).
    pub tools: Option<Vec<String>>,
    /// The model spec it runs on (`None`: the calling session's model).
    pub model: Option<String>,
    /// Its prompt (the file's body).
    pub prompt: String,
    /// The file, root-relative or absolute.
    pub file: String,
}

/// The custom agents of a session, fixed when it starts (so the `agent` tool's bytes stay
/// the same), with the problems found on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentSet {
    /// The agents, sorted by name.
    pub agents: Vec<AgentDef>,
    /// Malformed files, unknown tools and shadowed names, each naming the file.
    pub warnings: Vec<String>,
}

impl AgentSet {
    /// The agent called `name`.
    pub fn get(&self, name: &str) -> Option<&AgentDef> {
        self.agents.iter().find(|a| a.name == name)
    }

    /// What the `agent` tool's description lists for a model window of `context_window`
    /// tokens (the rest are found with its `query`).
    pub fn listing(&self, context_window: u64) -> crate::listing::Listing {
        crate::listing::fit(
            self.agents
                .iter()
                .map(|a| (a.name.as_str(), a.description.as_str())),
            context_window,
        )
    }

    /// The agents whose name or description match keyword `query`, best first, as the
    /// model reads them.
    pub fn search(&self, query: &str) -> String {
        use crate::listing;
        fn key(a: &AgentDef) -> (&str, &str) {
            (&a.name, &a.description)
        }
        let found = listing::search(&self.agents, key, query, listing::SEARCH_RESULTS);
        listing::search_text(
            "agents",
            query,
            self.agents.len(),
            found.into_iter().map(key),
        )
    }

    /// Its names for an error message (bounded).
    pub fn names_hint(&self) -> String {
        crate::listing::names_hint(self.agents.iter().map(|a| a.name.as_str()))
    }

    /// Keeps each agent's model only when `allowed` accepts it: a refused one (a cassette,
    /// an unknown provider or model) is dropped with a warning naming the file and the
    /// value, and the agent runs on its caller's model. What a file names is data: it can
    /// pick among the models the user set up, never make Garuda open a path or a URL.
    pub fn vet_models(&mut self, allowed: impl Fn(&str) -> Result<(), String>) {
        for a in &mut self.agents {
            let Some(model) = &a.model else { continue };
            if let Err(why) = allowed(model) {
                self.warnings.push(format!(
                    "{}: model \"{}\" is refused ({why}); the agent runs on the caller's model",
                    a.file,
                    crate::text::escape_format_chars(model)
                ));
                a.model = None;
            }
        }
    }

    /// A warning for each agent listing tools that neither Garuda nor the session's tools
    /// (its client and MCP tools) has; `missing` answers which of a list the session lacks
    /// (the session's `ToolRegistry::missing_for_agent`).
    pub fn missing_tools(&self, missing: impl Fn(&[String]) -> Vec<String>) -> Vec<String> {
        self.agents
            .iter()
            .filter_map(|a| {
                let missing = missing(a.tools.as_deref()?);
                (!missing.is_empty()).then(|| {
                    format!(
                        "{}: this session has no tool called {}; the agent runs without it",
                        a.file,
                        missing.join(", ")
                    )
                })
            })
            .collect()
    }
}

/// What a session running as an agent is: its name, its prompt and how deep it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRole {
    /// The agent's name (`explore` or a custom agent's).
    pub name: String,
    /// Its prompt, joined to Garuda's base rules and the project's instructions.
    pub prompt: String,
    /// 1 for an agent the main session started, 2 for one that agent started, …
    pub depth: u32,
}

/// The user's agent folder: `agents/` beside the user's config file.
pub fn user_dir(config_dir: Option<&Path>) -> Option<PathBuf> {
    config_dir.map(|d| d.join("agents"))
}

/// What an agent file declares, before its tools are resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentHead {
    /// Its name.
    pub name: String,
    /// When to use it.
    pub description: String,
    /// The tools as the file names them (Garuda's or Claude Code's names).
    pub tools: Option<Vec<String>>,
    /// The model spec, when it names one (Claude Code's `inherit` and model aliases mean
    /// the caller's model).
    pub model: Option<String>,
}

/// Reads an agent file: its head and its prompt. `stem` (the file name without `.md`) is the
/// name when the frontmatter gives none.
pub fn parse_agent(text: &str, stem: &str) -> Result<(AgentHead, String), FrontmatterError> {
    let Some((front, body)) = Frontmatter::read(text)? else {
        return Err(FrontmatterError {
            line: 1,
            message: "no frontmatter: an agent file starts with `---`, then `name:`, \
                      `description:` and `tools:`, then `---`"
                .into(),
        });
    };
    let name = front.text("name")?.unwrap_or_else(|| stem.to_string());
    front.refuse_format_chars(&name)?;
    if name.is_empty() || name.chars().count() > MAX_NAME || name.contains(char::is_whitespace) {
        return Err(FrontmatterError {
            line: front.line_of("name"),
            message: format!(
                "`name` must be one word of at most {MAX_NAME} characters, not {name:?}"
            ),
        });
    }
    let Some(description) = front.text("description")?.filter(|d| !d.is_empty()) else {
        return Err(FrontmatterError {
            line: front.line_of("description"),
            message: "`description` is missing: it says when to use the agent".into(),
        });
    };
    let description: String = description.chars().take(MAX_DESCRIPTION).collect();
    let tools = front.list("tools")?;
    // Claude Code's aliases pick among its own models: the caller's model stands in.
    let model = front
        .text("model")?
        .filter(|m| !matches!(m.as_str(), "" | "inherit" | "sonnet" | "opus" | "haiku"));
    let prompt = body.trim_matches(['\n', '\r', ' ']).to_string();
    if prompt.is_empty() {
        return Err(FrontmatterError {
            line: 1,
            message: "the agent has no prompt: its body (after the frontmatter) is empty".into(),
        });
    }
    Ok((
        AgentHead {
            name,
            description,
            tools,
            model,
        },
        prompt,
    ))
}

/// Garuda's names for the tools an agent file lists (its own names or Claude Code's), and the
/// names no tool answers to: the tools know their names (`ToolRegistry::resolve_names`), so
/// the caller hands the answer in and agents stay below the tools.
pub type ResolveTools<'a> = &'a dyn Fn(&[String]) -> (Vec<String>, Vec<String>);

/// One folder to scan: the root it is read through and the folder beneath it.
struct Place<'a> {
    root: &'a Root,
    dir: PathBuf,
    user: bool,
}

/// Finds the custom agents of a session: the workspace's folders first, then the user's;
/// `resolve` turns the tool names each file lists into Garuda's.
pub fn discover(root: &Root, user: Option<&Path>, resolve: ResolveTools<'_>) -> AgentSet {
    let user_root = user.and_then(|d| Root::open(d).ok());
    let mut places: Vec<Place> = WORKSPACE_DIRS
        .iter()
        .map(|d| Place {
            root,
            dir: PathBuf::from(d),
            user: false,
        })
        .collect();
    if let Some(r) = &user_root {
        places.push(Place {
            root: r,
            dir: PathBuf::new(),
            user: true,
        });
    }
    let mut set = AgentSet::default();
    for place in places {
        let Ok(mut entries) = place.root.list(&place.dir) else {
            continue;
        };
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for e in entries {
            let Some(stem) = e.name.strip_suffix(".md") else {
                continue;
            };
            if e.kind != EntryKind::File {
                continue;
            }
            let rel = place.dir.join(&e.name);
            let shown = if place.user {
                place.root.path().join(&rel).display().to_string()
            } else {
                rel.display().to_string()
            };
            // Warnings and approval titles name the file: an invisible character in its
            // name is shown, not obeyed.
            let shown = crate::text::escape_format_chars(&shown).into_owned();
            let Some(text) = crate::skills::read_definition(
                place.root,
                &rel,
                &shown,
                MAX_AGENT_CHARS,
                &mut set.warnings,
            ) else {
                continue;
            };
            let (head, prompt) = match parse_agent(&text, stem) {
                Ok(p) => p,
                Err(err) => {
                    set.warnings.push(format!("{shown}: {err}; agent skipped"));
                    continue;
                }
            };
            if head.name == EXPLORE {
                set.warnings.push(format!(
                    "{shown}: {EXPLORE} is the built-in agent's name; agent skipped"
                ));
                continue;
            }
            if let Some(first) = set.get(&head.name) {
                set.warnings.push(format!(
                    "{shown}: agent {} is shadowed by {}",
                    head.name, first.file
                ));
                continue;
            }
            // A name no built-in tool answers to may be a client or MCP tool of the
            // session: kept as written, checked once the session's tools are known.
            let tools = head.tools.as_ref().map(|listed| {
                let (mut tools, unknown) = resolve(listed);
                tools.extend(unknown);
                tools
            });
            set.agents.push(AgentDef {
                name: head.name,
                description: head.description,
                tools,
                model: head.model,
                prompt,
                file: shown,
            });
        }
    }
    set.agents.sort_by(|a, b| a.name.cmp(&b.name));
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stands in for the tools' resolver (`ToolRegistry::resolve_names`, tested beside it):
    /// Claude Code's `Read` is `read_file`, every other name is unknown.
    fn resolve(listed: &[String]) -> (Vec<String>, Vec<String>) {
        let (known, unknown): (Vec<String>, Vec<String>) =
            listed.iter().cloned().partition(|n| n == "Read");
        (
            known.iter().map(|_| "read_file".to_string()).collect(),
            unknown,
        )
    }

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn reads_claude_code_agent_files() {
        let text = "---\nname: reviewer\ndescription: Reviews a diff.\ntools: Read, Grep, Glob, Bash\nmodel: inherit\n---\n\nYou review code.\n";
        let (head, prompt) = parse_agent(text, "x").unwrap();
        assert_eq!(head.name, "reviewer");
        assert_eq!(
            head.tools.as_deref(),
            Some(&["Read", "Grep", "Glob", "Bash"].map(String::from)[..])
        );
        assert_eq!(head.model, None, "inherit is the caller's model");
        assert_eq!(prompt, "You review code.");
        let (head, _) = parse_agent(
            "---\ndescription: d\nmodel: openai/gpt-4o\n---\nBody",
            "stem",
        )
        .unwrap();
        assert_eq!(head.name, "stem");
        assert_eq!(head.tools, None);
        assert_eq!(head.model.as_deref(), Some("openai/gpt-4o"));
        let err = parse_agent("---\nname: x\n---\nBody", "x").unwrap_err();
        assert!(err.message.contains("description"), "{err}");
        let err = parse_agent("---\nname: x\ndescription: d\n---\n\n", "x").unwrap_err();
        assert!(err.message.contains("no prompt"), "{err}");
    }

    #[test]
    fn finds_agents_sorted_with_shadowing_and_warnings() {
        let ws = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        let agent = |name: &str| {
            format!("---\nname: {name}\ndescription: {name} things\ntools: Read\n---\nBe {name}.\n")
        };
        write(ws.path(), ".garuda/agents/zed.md", &agent("zed"));
        write(ws.path(), ".claude/agents/alpha.md", &agent("alpha"));
        write(ws.path(), ".claude/agents/again.md", &agent("zed"));
        write(ws.path(), ".claude/agents/bad.md", "---\nname: bad\n---\nx");
        write(ws.path(), ".claude/agents/notes.txt", "not an agent");
        write(ws.path(), ".claude/agents/explore.md", &agent("explore"));
        write(user.path(), "mine.md", &agent("mine"));
        let root = Root::open(ws.path()).unwrap();
        let set = discover(&root, Some(user.path()), &resolve);
        let names: Vec<&str> = set.agents.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["alpha", "mine", "zed"]);
        assert_eq!(
            set.get("alpha").unwrap().tools.as_deref(),
            Some(&["read_file".to_string()][..])
        );
        assert_eq!(set.get("zed").unwrap().file, ".garuda/agents/zed.md");
        assert!(set.get("mine").unwrap().file.starts_with('/'));
        let w = set.warnings.join("\n");
        assert!(
            w.contains(".claude/agents/bad.md: line 2: `description` is missing"),
            "{w}"
        );
        assert!(w.contains("shadowed by .garuda/agents/zed.md"), "{w}");
        assert!(w.contains("built-in agent's name"), "{w}");
    }

    #[test]
    fn names_with_format_characters_are_refused_and_shown_escaped() {
        let ws = tempfile::tempdir().unwrap();
        write(
            ws.path(),
            ".claude/agents/helper.md",
            "---\nname: \"safe\u{202e}elif_daer\"\ndescription: d\n---\nBody\n",
        );
        // Without a `name`, the file's stem is the name: the same rule holds.
        write(
            ws.path(),
            ".garuda/agents/zero\u{200b}width.md",
            "---\ndescription: d\n---\nBody\n",
        );
        let set = discover(&Root::open(ws.path()).unwrap(), None, &resolve);
        assert!(set.agents.is_empty(), "{:?}", set.agents);
        let w = set.warnings.join("\n");
        assert!(
            w.contains(".claude/agents/helper.md: line 2:")
                && w.contains("safe\\u{202e}elif_daer")
                && w.contains("agent skipped"),
            "{w}"
        );
        assert!(w.contains(".garuda/agents/zero\\u{200b}width.md"), "{w}");
        assert!(!w.contains('\u{202e}') && !w.contains('\u{200b}'), "{w}");
    }

    #[test]
    fn a_refused_model_falls_back_to_the_callers_with_a_warning() {
        let ws = tempfile::tempdir().unwrap();
        let agent = |name: &str, model: &str| {
            format!("---\ndescription: d\nmodel: {model}\n---\nBe {name}.\n")
        };
        write(
            ws.path(),
            ".claude/agents/tape.md",
            &agent("tape", "replay:/dev/stdin"),
        );
        write(
            ws.path(),
            ".claude/agents/fast.md",
            &agent("fast", "anthropic/claude-haiku-4-5"),
        );
        let mut set = discover(&Root::open(ws.path()).unwrap(), None, &resolve);
        set.vet_models(|m| {
            if m.starts_with("replay:") {
                Err("a path".into())
            } else {
                Ok(())
            }
        });
        assert_eq!(set.get("tape").unwrap().model, None);
        assert_eq!(
            set.get("fast").unwrap().model.as_deref(),
            Some("anthropic/claude-haiku-4-5")
        );
        assert_eq!(
            set.warnings,
            [
                ".claude/agents/tape.md: model \"replay:/dev/stdin\" is refused (a path); the \
              agent runs on the caller's model"
            ]
        );
    }

    #[test]
    fn a_link_out_of_the_root_is_not_an_agent() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        write(
            outside.path(),
            "evil.md",
            "---\nname: evil\ndescription: e\n---\nSteal.\n",
        );
        std::fs::create_dir_all(ws.path().join(".garuda/agents")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("evil.md"),
            ws.path().join(".garuda/agents/evil.md"),
        )
        .unwrap();
        let root = Root::open(ws.path()).unwrap();
        assert!(discover(&root, None, &resolve).agents.is_empty());
    }
}
