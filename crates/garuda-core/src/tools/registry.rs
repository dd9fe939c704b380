//! The tools of a session, each registered once with what the rest of Garuda needs to know
//! about it: its spec, its class (approval policy, compaction, the fronts' display), where
//! it runs, and which input names a workspace file. Built-in tools, the session tool `snip`,
//! client tools and MCP tools register the same way; nothing else matches tool names.

use super::ToolClass;
use crate::message::ToolSpec;

/// Where a tool runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolSource {
    /// One of Garuda's built-in tools.
    Builtin,
    /// An operation on the session itself (`snip`).
    Session,
    /// A tool the client registered; it runs in the client (`tool/call`).
    Client,
    /// A tool of an MCP server, called through the session's [`crate::mcp::McpHub`].
    Mcp {
        /// The server's config name.
        server: String,
        /// The tool's own MCP name.
        tool: String,
    },
    /// `mcp_tool_search`: answers from the deferred MCP definitions.
    McpSearch,
}

/// How a tool's input names the place it works in (for nested instructions and rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touch {
    /// A file, in this input field: its folder is worked in.
    File(&'static str),
    /// A folder (the root when the field is absent).
    Folder(&'static str),
    /// A file or a folder (a search's `path`).
    Either(&'static str),
}

/// A place a call works in, root-relative as the model gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched<'a> {
    /// A file.
    File(&'a str),
    /// A folder.
    Folder(&'a str),
    /// A file or a folder: the caller looks.
    Either(&'a str),
}

/// One registered tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    /// What the model sees.
    pub spec: ToolSpec,
    /// What it does.
    pub class: ToolClass,
    /// Where it runs.
    pub source: ToolSource,
    /// The input field naming the workspace file it reads or writes (restoration after a
    /// compaction re-reads such files).
    pub path_arg: Option<&'static str>,
    /// It refuses to change a file the model has not read (and which changed since).
    pub needs_read: bool,
    /// Its definition is left out of requests (an MCP tool behind `mcp_tool_search`); it is
    /// still callable by name.
    pub deferred: bool,
    /// Which input names the place it reads, lists, searches or edits.
    pub touch: Option<Touch>,
}

impl ToolEntry {
    /// The place a call of this tool works in, from its input (None: none, or the root).
    pub fn touched<'a>(&self, input: &'a serde_json::Value) -> Option<Touched<'a>> {
        let field = |f: &str| input.get(f).and_then(|v| v.as_str()).map(str::trim);
        match self.touch? {
            Touch::File(f) => field(f).filter(|p| !p.is_empty()).map(Touched::File),
            Touch::Folder(f) => field(f).filter(|p| !p.is_empty()).map(Touched::Folder),
            Touch::Either(f) => field(f).filter(|p| !p.is_empty()).map(Touched::Either),
        }
    }

    /// The file a call of this tool touches, from its input.
    pub fn path_in<'a>(&self, input: &'a serde_json::Value) -> Option<&'a str> {
        input.get(self.path_arg?)?.as_str()
    }
}

/// Why a registry cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("client tool {0} clashes with a built-in tool")]
pub struct ToolClash(pub String);

/// A session's tools, in the fixed order the model sees them: built-ins, session tools, the
/// client's, then MCP tools (by server, then tool name) and `mcp_tool_search` when they are
/// deferred. Fixed for the session's life, so the tool definitions stay byte-stable.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolRegistry {
    entries: Vec<ToolEntry>,
}

impl ToolRegistry {
    /// The built-in and session tools plus `client` tools.
    pub fn for_session(client: Vec<ToolSpec>) -> Result<ToolRegistry, ToolClash> {
        Self::with_options(client, true)
    }

    /// The built-in tools, the session tool `snip` when `snip` is on (`[context] snip`), and
    /// `client` tools.
    pub fn with_options(client: Vec<ToolSpec>, snip: bool) -> Result<ToolRegistry, ToolClash> {
        let mut r = ToolRegistry::default();
        for spec in super::builtin_specs() {
            let (class, path_arg, needs_read) = super::builtin_traits(&spec.name);
            r.entries.push(ToolEntry {
                class,
                source: ToolSource::Builtin,
                path_arg,
                needs_read,
                deferred: false,
                touch: super::builtin_touch(&spec.name),
                spec,
            });
        }
        if snip {
            r.entries.push(ToolEntry {
                spec: crate::turn::snip_tool_spec(),
                class: ToolClass::Session,
                source: ToolSource::Session,
                path_arg: None,
                needs_read: false,
                deferred: false,
                touch: None,
            });
        }
        for spec in client {
            // `snip` stays reserved when it is off, so turning it on never breaks a client.
            if r.get(&spec.name).is_some() || spec.name == crate::turn::SNIP_TOOL {
                return Err(ToolClash(spec.name));
            }
            r.entries.push(ToolEntry {
                spec,
                class: ToolClass::Other,
                source: ToolSource::Client,
                path_arg: None,
                needs_read: false,
                deferred: false,
                touch: None,
            });
        }
        Ok(r)
    }

    /// Adds the MCP tools of a session (in their fixed order) as `plan` decided: loaded, or
    /// deferred behind `mcp_tool_search`. An MCP tool counts as a command unless the config
    /// marks it read-only.
    pub fn with_mcp(
        mut self,
        tools: &[crate::mcp::McpTool],
        plan: &crate::mcp::DeferPlan,
    ) -> Result<ToolRegistry, ToolClash> {
        for t in tools {
            if self.get(&t.name).is_some() {
                return Err(ToolClash(t.name.clone()));
            }
            self.entries.push(ToolEntry {
                spec: t.spec.clone(),
                class: if t.read_only {
                    ToolClass::Read
                } else {
                    ToolClass::Exec
                },
                source: ToolSource::Mcp {
                    server: t.server.clone(),
                    tool: t.tool.clone(),
                },
                path_arg: None,
                needs_read: false,
                deferred: plan.is_deferred(),
                touch: None,
            });
        }
        if let Some(search) = &plan.search_tool {
            if self.get(&search.name).is_some() {
                return Err(ToolClash(search.name.clone()));
            }
            self.entries.push(ToolEntry {
                spec: search.clone(),
                class: ToolClass::Search,
                source: ToolSource::McpSearch,
                path_arg: None,
                needs_read: false,
                deferred: false,
                touch: None,
            });
        }
        Ok(self)
    }

    /// This registry without its MCP tools and search tool (to add a changed list).
    pub fn without_mcp(&self) -> ToolRegistry {
        ToolRegistry {
            entries: self
                .entries
                .iter()
                .filter(|e| !matches!(e.source, ToolSource::Mcp { .. } | ToolSource::McpSearch))
                .cloned()
                .collect(),
        }
    }

    /// True when the session has MCP tools (loaded or deferred).
    pub fn has_mcp(&self) -> bool {
        self.entries
            .iter()
            .any(|e| matches!(e.source, ToolSource::Mcp { .. }))
    }

    /// True when MCP definitions are deferred behind `mcp_tool_search`.
    pub fn mcp_deferred(&self) -> bool {
        self.entries
            .iter()
            .any(|e| e.source == ToolSource::McpSearch)
    }

    /// The definitions `mcp_tool_search` answers from.
    pub fn deferred_specs(&self) -> Vec<ToolSpec> {
        self.entries
            .iter()
            .filter(|e| e.deferred)
            .map(|e| e.spec.clone())
            .collect()
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&ToolEntry> {
        self.entries.iter().find(|e| e.spec.name == name)
    }

    /// The built-in tool that reads a workspace file (its schema rides along in the regular
    /// summary request, as the seed's runtime keeps it).
    pub fn file_reader(&self) -> Option<&ToolSpec> {
        self.entries
            .iter()
            .find(|e| {
                e.source == ToolSource::Builtin
                    && e.class == ToolClass::Read
                    && e.path_arg.is_some()
            })
            .map(|e| &e.spec)
    }

    /// Every tool, in order.
    pub fn entries(&self) -> &[ToolEntry] {
        &self.entries
    }

    /// The specs the model sees, in order (deferred MCP definitions left out).
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.entries
            .iter()
            .filter(|e| !e.deferred)
            .map(|e| e.spec.clone())
            .collect()
    }

    /// The specs of the request that come from MCP (loaded definitions and the search tool),
    /// for `context/inspect`.
    pub fn mcp_specs(&self) -> Vec<ToolSpec> {
        self.entries
            .iter()
            .filter(|e| {
                !e.deferred && matches!(e.source, ToolSource::Mcp { .. } | ToolSource::McpSearch)
            })
            .map(|e| e.spec.clone())
            .collect()
    }

    /// Names of the tools whose old results the time-based microcompact may clear: those
    /// that read or search the workspace or run commands (their output can be had again).
    pub fn compactable(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| {
                matches!(
                    e.class,
                    ToolClass::Read | ToolClass::Search | ToolClass::Exec
                ) && e.source == ToolSource::Builtin
            })
            .map(|e| e.spec.name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: "d".into(),
            input_schema: serde_json::json!({"type": "object"}),
        }
    }

    #[test]
    fn order_classes_and_clashes() {
        let r = ToolRegistry::for_session(vec![spec("open_in_editor")]).unwrap();
        let names: Vec<&str> = r.entries().iter().map(|e| e.spec.name.as_str()).collect();
        assert_eq!(names.first(), Some(&"read_file"));
        assert_eq!(names[names.len() - 2..], ["snip", "open_in_editor"]);
        assert_eq!(r.get("bash").map(|e| e.class), Some(ToolClass::Exec));
        assert_eq!(r.get("grep").map(|e| e.class), Some(ToolClass::Search));
        assert_eq!(r.get("snip").map(|e| &e.source), Some(&ToolSource::Session));
        assert_eq!(
            r.get("open_in_editor").map(|e| &e.source),
            Some(&ToolSource::Client)
        );
        let edit = r.get("edit_file").unwrap();
        assert!(edit.needs_read);
        assert_eq!(
            edit.path_in(&serde_json::json!({"path": "a.rs"})),
            Some("a.rs")
        );
        assert_eq!(
            r.get("read_file")
                .unwrap()
                .touched(&serde_json::json!({"path": "p/a.rs"})),
            Some(Touched::File("p/a.rs"))
        );
        assert_eq!(
            r.get("list_files")
                .unwrap()
                .touched(&serde_json::json!({"path": "p"})),
            Some(Touched::Folder("p"))
        );
        assert_eq!(r.get("grep").unwrap().touched(&serde_json::json!({})), None);
        assert_eq!(
            r.get("bash")
                .unwrap()
                .touched(&serde_json::json!({"path": "p"})),
            None
        );
        assert_eq!(
            r.compactable(),
            ["read_file", "list_files", "glob", "grep", "bash"]
        );
        assert_eq!(
            ToolRegistry::for_session(vec![spec("bash")]),
            Err(ToolClash("bash".into()))
        );
        assert_eq!(
            ToolRegistry::for_session(vec![spec("snip")]),
            Err(ToolClash("snip".into()))
        );
        let off = ToolRegistry::with_options(vec![spec("open_in_editor")], false).unwrap();
        assert!(off.get("snip").is_none());
        assert_eq!(off.entries().len(), r.entries().len() - 1);
        assert_eq!(
            ToolRegistry::with_options(vec![spec("snip")], false),
            Err(ToolClash("snip".into()))
        );
    }

    fn mcp_tool(server: &str, tool: &str, read_only: bool) -> crate::mcp::McpTool {
        let name = format!("mcp__{server}__{tool}");
        crate::mcp::McpTool {
            spec: spec(&name),
            name,
            server: server.into(),
            tool: tool.into(),
            read_only,
        }
    }

    #[test]
    fn mcp_tools_come_last_as_commands_unless_read_only() {
        let tools = [mcp_tool("a", "x", false), mcp_tool("a", "y", true)];
        let specs: Vec<ToolSpec> = tools.iter().map(|t| t.spec.clone()).collect();
        let loaded = crate::mcp::defer::plan(&specs, 200_000, 0.1);
        let r = ToolRegistry::for_session(vec![spec("open_in_editor")])
            .unwrap()
            .with_mcp(&tools, &loaded)
            .unwrap();
        let names: Vec<String> = r.specs().into_iter().map(|s| s.name).collect();
        assert_eq!(
            names[names.len() - 3..],
            ["open_in_editor", "mcp__a__x", "mcp__a__y"]
        );
        assert_eq!(r.get("mcp__a__x").map(|e| e.class), Some(ToolClass::Exec));
        assert_eq!(r.get("mcp__a__y").map(|e| e.class), Some(ToolClass::Read));
        assert!(r.has_mcp() && !r.mcp_deferred());
        assert_eq!(r.mcp_specs().len(), 2);
        assert!(!r.compactable().contains(&"mcp__a__y".to_string()));

        let deferred = crate::mcp::defer::plan(&specs, 10, 0.1);
        let r = ToolRegistry::for_session(Vec::new())
            .unwrap()
            .with_mcp(&tools, &deferred)
            .unwrap();
        let names: Vec<String> = r.specs().into_iter().map(|s| s.name).collect();
        assert_eq!(names.last().map(String::as_str), Some("mcp_tool_search"));
        assert!(!names.iter().any(|n| n.starts_with("mcp__")));
        assert!(r.get("mcp__a__x").is_some(), "still callable");
        assert!(r.mcp_deferred());
        assert_eq!(r.deferred_specs().len(), 2);
        assert_eq!(r.mcp_specs().len(), 1);

        let clash = ToolRegistry::for_session(vec![spec("mcp__a__x")])
            .unwrap()
            .with_mcp(&tools, &loaded);
        assert_eq!(clash, Err(ToolClash("mcp__a__x".into())));
    }
}
