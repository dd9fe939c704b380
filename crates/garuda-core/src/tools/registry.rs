//! The tools of a session, each registered once with what the rest of Garuda needs to know
//! about it: its handler (what runs it), its spec, its class (approval policy, compaction,
//! the fronts' display), where it runs, and which input names a workspace file. Built-in
//! tools, the session tool `snip`, client tools, MCP tools and `mcp_tool_search` register the
//! same way, each with a handler; nothing outside `tools/` matches tool names.

use serde_json::Value;

use super::builtin::{
    self, AgentTool, ExploreTool, FIND_REFERENCES, FIND_SYMBOL, FindReferences, FindSymbol,
    McpSearchTool, REPO_MAP, RepoMap, SKILL_TOOL, SNIP_TOOL, ServerWebSearch, SkillTool, SnipTool,
    WebFetch, WebSearch,
};
use super::handler::Handler;
use super::remote::RemoteTool;
use super::util;
use super::vocab::{EditPreview, Risk, ToolClass, ToolKind, Touch};
use crate::fsroot::Root;
use crate::message::ToolSpec;
use crate::prompt::Offer;

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
    /// What runs it and answers for it.
    pub handler: Handler,
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
    /// The editor's icon for its calls.
    pub kind: ToolKind,
    /// The prompt line it makes true.
    pub offer: Option<Offer>,
    /// It changes nothing outside the session: plan mode runs it (MCP tools the config
    /// marks read-only, client tools the client marks so, read-only built-ins).
    pub read_only: bool,
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

    /// True for one of Garuda's built-in tools.
    pub fn is_builtin(&self) -> bool {
        self.source == ToolSource::Builtin
    }

    /// True for a tool that works on the session itself (`snip`, `exit_plan_mode`,
    /// `mcp_tool_search`): it is never asked for, and plan mode runs it.
    pub fn works_on_session(&self) -> bool {
        matches!(self.source, ToolSource::Session | ToolSource::McpSearch)
            || self.class == ToolClass::Plan
    }

    /// One line describing a call, for titles and logs: e.g. `bash: cargo test`.
    pub fn describe(&self, input: &Value) -> String {
        let detail = self.handler.describe(input);
        let line = format!("{}: {}", self.spec.name, one_line(&detail));
        // Titles of ACP cards and exec's lines come from here: a bidi override in a path or
        // a command must show as `\u{202e}`, not turn the line around.
        crate::text::escape_format_chars(&util::cut_chars(&line, 200)).into_owned()
    }

    /// The title of an approval request: like [`ToolEntry::describe`], but a command is
    /// given whole and on one line a terminal cannot be tricked by. `risk` (why the path
    /// matters) follows an edit's path. Unicode format characters (bidi overrides,
    /// zero-width characters, line separators) show escaped, so what is approved reads as
    /// what runs.
    pub fn approval_title(&self, input: &Value, risk: Option<&str>) -> String {
        let base = self
            .handler
            .title(input)
            .unwrap_or_else(|| self.describe(input));
        let title = match risk {
            Some(why) => format!("{base} ({why})"),
            None => base,
        };
        // Every front shows this title as is (native, ACP, exec's prompt), so escaping here
        // covers them all; `input` keeps the exact text.
        crate::text::escape_format_chars(&title).into_owned()
    }

    /// The call asks to run outside the sandbox (see [`crate::tools::Tool::leaves_sandbox`]).
    pub fn leaves_sandbox(&self, input: &Value) -> bool {
        self.handler.leaves_sandbox(input)
    }

    /// The path a call would change that needs a second look, and why.
    pub fn risk(&self, input: &Value, root: &Root) -> Option<Risk> {
        self.handler.risk(input, root)
    }

    /// What a call would change, for an editor to draw before it runs. The texts are for a
    /// person's eyes, so format characters in them show escaped (the write itself uses the
    /// call's exact input); `rel_path` stays exact, for navigation.
    pub fn preview(&self, input: &Value, root: &Root) -> Option<EditPreview> {
        let mut p = self.handler.preview(input, root)?;
        let shown = |t: &str| crate::text::escape_format_chars(t).into_owned();
        p.old_text = p.old_text.as_deref().map(shown);
        p.new_text = shown(&p.new_text);
        Some(p)
    }

    /// The 1-based line a call starts at, when its input names one.
    pub fn line(&self, input: &Value) -> Option<u32> {
        self.handler.line(input)
    }

    /// A tool Garuda does not implement itself, or a session tool: what its handler
    /// declares, with `source` saying where it runs.
    fn other(h: Handler, source: ToolSource) -> ToolEntry {
        let mut e = ToolEntry::builtin(h);
        e.offer = offer_of(&e.spec.name, &source);
        e.source = source;
        e
    }

    fn builtin(h: Handler) -> ToolEntry {
        ToolEntry {
            spec: h.spec(),
            class: h.class(),
            kind: h.kind(),
            offer: h.offer(),
            path_arg: h.path_arg(),
            needs_read: h.needs_read(),
            touch: h.touch(),
            read_only: h.read_only(),
            deferred: false,
            source: ToolSource::Builtin,
            handler: h,
        }
    }
}

/// True for the names of Garuda's code tools.
fn is_code_tool(name: &str) -> bool {
    [FIND_SYMBOL, FIND_REFERENCES, REPO_MAP].contains(&name)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The prompt line a tool Garuda does not implement makes true, by the name editors and MCP
/// servers give such tools (code index, web, explore, agents, skills).
fn offer_of(name: &str, source: &ToolSource) -> Option<Offer> {
    match source {
        ToolSource::Mcp { .. } => return Some(Offer::Mcp),
        ToolSource::McpSearch => return Some(Offer::McpSearch),
        _ => {}
    }
    Some(match name {
        "find_symbol" => Offer::FindSymbol,
        "find_references" => Offer::FindReferences,
        "repo_map" => Offer::RepoMap,
        "web_fetch" => Offer::WebFetch,
        "web_search" => Offer::WebSearch,
        "explore" => Offer::Explore,
        "agent" => Offer::Agents,
        "skill" => Offer::Skills,
        _ => return None,
    })
}

/// The name an agent file gives every tool of an MCP server by: `mcp__SERVER`.
fn mcp_server_name(server: &str) -> String {
    format!(
        "{}{}",
        crate::mcp::naming::PREFIX,
        crate::mcp::naming::sanitize(server)
    )
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
    /// Garuda's built-in tools alone.
    pub fn builtins() -> ToolRegistry {
        ToolRegistry {
            entries: builtin::all().into_iter().map(ToolEntry::builtin).collect(),
        }
    }

    /// The built-in and session tools plus `client` tools.
    pub fn for_session(client: Vec<ToolSpec>) -> Result<ToolRegistry, ToolClash> {
        Self::with_options(client, true)
    }

    /// The built-in tools, the session tool `snip` when `snip` is on (`[context] snip`), and
    /// `client` tools.
    pub fn with_options(client: Vec<ToolSpec>, snip: bool) -> Result<ToolRegistry, ToolClash> {
        let mut r = ToolRegistry::builtins();
        if snip {
            r.entries.push(ToolEntry::other(
                Handler::new(SnipTool),
                ToolSource::Session,
            ));
        }
        for spec in client {
            // `snip` stays reserved when it is off, so turning it on never breaks a client.
            if r.get(&spec.name).is_some() || spec.name == SNIP_TOOL {
                return Err(ToolClash(spec.name));
            }
            let tool = Handler::new(RemoteTool::client(spec));
            r.entries.push(ToolEntry::other(tool, ToolSource::Client));
        }
        Ok(r)
    }

    /// This registry with the client tools named in `names` marked read-only (the client
    /// said they change nothing), so plan mode runs them; other names are ignored.
    pub fn with_read_only_client_tools(mut self, names: &[String]) -> ToolRegistry {
        for e in &mut self.entries {
            if e.source == ToolSource::Client && names.contains(&e.spec.name) {
                e.read_only = true;
            }
        }
        self
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
            let source = ToolSource::Mcp {
                server: t.server.clone(),
                tool: t.tool.clone(),
            };
            let tool = Handler::new(RemoteTool::mcp(t.spec.clone(), t.read_only));
            let mut entry = ToolEntry::other(tool, source);
            entry.deferred = plan.is_deferred();
            self.entries.push(entry);
        }
        if let Some(search) = &plan.search_tool {
            if self.get(&search.name).is_some() {
                return Err(ToolClash(search.name.clone()));
            }
            let entry = self.search_entry(search.clone());
            self.entries.push(entry);
        }
        Ok(self)
    }

    /// `mcp_tool_search` over this registry's deferred definitions.
    fn search_entry(&self, spec: ToolSpec) -> ToolEntry {
        let tool = Handler::new(McpSearchTool::new(spec, self.deferred_specs()));
        ToolEntry::other(tool, ToolSource::McpSearch)
    }

    /// This registry with the `skill` tool over `set` (replacing an earlier one), after the
    /// built-in tools; without it when `set` holds no skill.
    pub fn with_skills(
        mut self,
        set: std::sync::Arc<crate::skills::SkillSet>,
        context_window: u64,
    ) -> ToolRegistry {
        self.entries
            .retain(|e| e.offer != Some(Offer::Skills) || !e.is_builtin());
        if set.skills.is_empty() {
            return self;
        }
        let at = self
            .entries
            .iter()
            .rposition(ToolEntry::is_builtin)
            .map_or(0, |i| i + 1);
        let tool = Handler::new(SkillTool::new(set, context_window));
        self.entries.insert(at, ToolEntry::builtin(tool));
        self
    }

    /// This registry with the agent tools, after the built-in tools: `explore` when
    /// `explore` is on, and `agent` over `set` when it holds an agent. A client tool of the
    /// same name keeps its place (the answer lists the names left out).
    pub fn with_agents(
        mut self,
        set: std::sync::Arc<crate::agents::AgentSet>,
        explore: bool,
        context_window: u64,
    ) -> (ToolRegistry, Vec<String>) {
        let mut clashes = Vec::new();
        let mut add = |r: &mut ToolRegistry, tool: Handler| {
            if r.get(tool.name()).is_some() {
                clashes.push(tool.name().to_string());
                return;
            }
            let at = r
                .entries
                .iter()
                .rposition(ToolEntry::is_builtin)
                .map_or(0, |i| i + 1);
            r.entries.insert(at, ToolEntry::builtin(tool));
        };
        if explore {
            add(&mut self, Handler::new(ExploreTool));
        }
        if !set.agents.is_empty() {
            add(&mut self, Handler::new(AgentTool::new(set, context_window)));
        }
        (self, clashes)
    }

    /// This registry with the web tools over `web`, after the built-in tools: `web_fetch` when
    /// `fetch` is on (`[features] web`), `web_search` when the user's config names a search
    /// backend: the provider's own server tool when the user turned it on and the session's
    /// model speaks Anthropic's wire (`anthropic`), else the SearXNG backend. A client tool of
    /// the same name keeps its place (the answer lists the names left out).
    pub fn with_web(
        self,
        web: std::sync::Arc<crate::web::Web>,
        fetch: bool,
        anthropic: bool,
    ) -> (ToolRegistry, Vec<String>) {
        let mut tools = Vec::new();
        if fetch {
            tools.push(Handler::new(WebFetch(web.clone())));
        }
        match web.settings.search.anthropic_tool() {
            Some(definition) if anthropic => {
                tools.push(Handler::new(ServerWebSearch(definition)));
            }
            _ if web.can_search() => tools.push(Handler::new(WebSearch(web.for_search()))),
            _ => {}
        }
        self.with_builtins(tools)
    }

    /// This registry with the code tools over `index`, after the built-in tools:
    /// `find_symbol` and `find_references`, and `repo_map` when `map`. A client tool of the
    /// same name keeps its place (the answer lists the names left out).
    pub fn with_code_index(
        self,
        index: std::sync::Arc<crate::code::CodeIndex>,
        map: bool,
    ) -> (ToolRegistry, Vec<String>) {
        let mut tools = vec![
            Handler::new(FindSymbol(index.clone())),
            Handler::new(FindReferences(index.clone())),
        ];
        if map {
            tools.push(Handler::new(RepoMap(index)));
        }
        self.with_builtins(tools)
    }

    /// `tools` added after the built-in ones, each unless a client tool already has its name
    /// (those names are returned).
    fn with_builtins(mut self, tools: Vec<Handler>) -> (ToolRegistry, Vec<String>) {
        let mut clashes = Vec::new();
        for tool in tools {
            if self.get(tool.name()).is_some() {
                clashes.push(tool.name().to_string());
                continue;
            }
            let at = self
                .entries
                .iter()
                .rposition(ToolEntry::is_builtin)
                .map_or(0, |i| i + 1);
            self.entries.insert(at, ToolEntry::builtin(tool));
        }
        (self, clashes)
    }

    /// The names of this registry's code tools (Garuda's own, over the workspace's index).
    pub fn code_tool_names(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| e.is_builtin() && is_code_tool(&e.spec.name))
            .map(|e| e.spec.name.clone())
            .collect()
    }

    /// Garuda's names for tools an agent file lists (Garuda's own names or Claude Code's, as
    /// each handler declares them; `agent` and `explore` included), each once, and the names
    /// no tool answers to.
    pub fn resolve_names(listed: &[String]) -> (Vec<String>, Vec<String>) {
        let set = std::sync::Arc::new(crate::agents::AgentSet::default());
        let mut handlers: Vec<Handler> = builtin::all();
        handlers.push(Handler::new(ExploreTool));
        // Only the names matter here: any window will do.
        let window = crate::provider::models::DEFAULT_CONTEXT_WINDOW;
        handlers.push(Handler::new(AgentTool::new(set, window)));
        handlers.push(Handler::new(SkillTool::new(Default::default(), window)));
        // Only the names matter here too: no request is made.
        let web = crate::web::Web::new(Default::default(), Default::default());
        handlers.push(Handler::new(WebFetch(web.clone())));
        handlers.push(Handler::new(WebSearch(web)));
        let mut tools: Vec<String> = Vec::new();
        let mut unknown = Vec::new();
        for name in listed {
            let n = name.as_str();
            match handlers
                .iter()
                .find(|h| h.name() == n || h.claude_names().contains(&n))
            {
                Some(h) if !tools.iter().any(|t| t == h.name()) => tools.push(h.name().into()),
                Some(_) => {}
                None => unknown.push(name.clone()),
            }
        }
        (tools, unknown)
    }

    /// The built-in tools that only read or search the workspace (`explore`'s tools).
    pub fn read_only_names() -> Vec<String> {
        ToolRegistry::builtins()
            .entries
            .iter()
            .filter(|e| matches!(e.class, ToolClass::Read | ToolClass::Search))
            .map(|e| e.spec.name.clone())
            .collect()
    }

    /// The built-in tools named `names` (Garuda's names), in the registry's order, with the
    /// agent tools among them when `agents` gives their set; for a sub-session.
    pub fn only(
        names: &[String],
        agents: Option<std::sync::Arc<crate::agents::AgentSet>>,
        context_window: u64,
    ) -> ToolRegistry {
        let mut r = ToolRegistry::builtins();
        r.entries.retain(|e| names.contains(&e.spec.name));
        if let Some(set) = agents {
            let explore = names.iter().any(|n| n == crate::agents::EXPLORE);
            let agent = names.iter().any(|n| n == crate::agents::AGENT_TOOL);
            let set = if agent {
                set
            } else {
                std::sync::Arc::new(crate::agents::AgentSet::default())
            };
            r = r.with_agents(set, explore, context_window).0;
        }
        r
    }

    /// The tools of an agent's sub-session whose file lists `names` (Garuda's names, as
    /// [`Self::resolve_names`] gives them, and other names verbatim), taken from the caller's
    /// registry `from`: the built-in tools named, the agent tools when `agents` gives their
    /// set (nesting), the caller's `skill` tool (its skill list) when `skill` is named, and
    /// the caller's web, client and MCP tools named (an MCP tool by its `mcp__SERVER__TOOL` name,
    /// or every tool of a server by `mcp__SERVER`). MCP definitions are loaded unless the
    /// names hold `mcp_tool_search`, which keeps the caller's deferral.
    pub fn for_agent(
        names: &[String],
        from: &ToolRegistry,
        agents: Option<std::sync::Arc<crate::agents::AgentSet>>,
        context_window: u64,
    ) -> ToolRegistry {
        let listed = |n: &str| names.iter().any(|x| x == n);
        let mut r = ToolRegistry::only(names, agents, context_window);
        if listed(SKILL_TOOL)
            && let Some(skill) = from.entries.iter().find(|e| from.is_skill(&e.spec.name))
        {
            r.entries.push(skill.clone());
        }
        let search = from
            .entries
            .iter()
            .find(|e| e.source == ToolSource::McpSearch && listed(&e.spec.name));
        for e in &from.entries {
            match &e.source {
                ToolSource::Client if listed(&e.spec.name) => r.entries.push(e.clone()),
                // The caller's web tools (with its settings) and code tools (its workspace
                // index): they are not in `only`'s set.
                ToolSource::Builtin
                    if (e.class == ToolClass::Network || is_code_tool(&e.spec.name))
                        && listed(&e.spec.name) =>
                {
                    r.entries.push(e.clone())
                }
                ToolSource::Mcp { server, .. }
                    if listed(&e.spec.name) || listed(&mcp_server_name(server)) =>
                {
                    let mut e = e.clone();
                    e.deferred = e.deferred && search.is_some();
                    r.entries.push(e);
                }
                _ => {}
            }
        }
        // Its handler searches the definitions this sub-session defers, not the caller's.
        if let Some(s) = search
            && r.mcp_deferred_entries()
        {
            let entry = r.search_entry(s.spec.clone());
            r.entries.push(entry);
        }
        r
    }

    /// The names of `names` no tool of an agent's sub-session from this registry answers
    /// to (for a warning): not a built-in tool, `skill`, an agent tool, nor one of this
    /// registry's client or MCP tools (or an MCP server's `mcp__SERVER`).
    pub fn missing_for_agent(&self, names: &[String]) -> Vec<String> {
        let known = [
            SKILL_TOOL,
            crate::agents::AGENT_TOOL,
            crate::agents::EXPLORE,
        ];
        let code = self.code_tool_names();
        names
            .iter()
            .filter(|n| {
                let n = n.as_str();
                !known.contains(&n)
                    && !code.iter().any(|c| c == n)
                    && !builtin::all().iter().any(|h| h.name() == n)
                    && !self.entries.iter().any(|e| match &e.source {
                        ToolSource::Client | ToolSource::McpSearch => e.spec.name == n,
                        ToolSource::Builtin => e.class == ToolClass::Network && e.spec.name == n,
                        ToolSource::Mcp { server, .. } => {
                            e.spec.name == n || mcp_server_name(server) == n
                        }
                        _ => false,
                    })
            })
            .cloned()
            .collect()
    }

    /// Every tool an agent whose file lists none gets, by name: the built-in tools (no
    /// agent tools), `skill`, and this registry's web, client and MCP tools (with
    /// `mcp_tool_search` when their definitions are deferred here).
    pub fn agent_default_names(&self) -> Vec<String> {
        let mut names: Vec<String> = builtin::all()
            .iter()
            .map(|h| h.name().to_string())
            .collect();
        names.push(SKILL_TOOL.to_string());
        names.extend(self.code_tool_names());
        names.extend(
            self.entries
                .iter()
                .filter(|e| {
                    matches!(
                        e.source,
                        ToolSource::Client | ToolSource::Mcp { .. } | ToolSource::McpSearch
                    ) || e.class == ToolClass::Network
                })
                .map(|e| e.spec.name.clone()),
        );
        names
    }

    fn mcp_deferred_entries(&self) -> bool {
        self.entries
            .iter()
            .any(|e| matches!(e.source, ToolSource::Mcp { .. }) && e.deferred)
    }

    /// True when `name` is the session's `skill` tool.
    pub fn is_skill(&self, name: &str) -> bool {
        self.get(name)
            .is_some_and(|e| e.is_builtin() && e.offer == Some(Offer::Skills))
    }

    /// This registry for a small window ([`super::lean`]): the core tools with compact
    /// descriptions, every other tool deferred behind the tool search (which then also
    /// answers for deferred MCP tools); the same registry twice gives the same one.
    pub fn lean(&self) -> ToolRegistry {
        let mut entries: Vec<ToolEntry> = self
            .entries
            .iter()
            .filter(|e| e.source != ToolSource::McpSearch)
            .cloned()
            .collect();
        for e in &mut entries {
            if super::lean::CORE_TOOLS.contains(&e.spec.name.as_str()) {
                e.spec = super::lean::compact_spec(&e.spec);
            } else {
                e.deferred = true;
            }
        }
        let mut r = ToolRegistry { entries };
        let deferred = r.deferred_specs();
        if !deferred.is_empty() {
            let entry = r.search_entry(super::lean::search_spec(&deferred));
            r.entries.push(entry);
        }
        r
    }

    /// True when this is a small window's registry ([`Self::lean`]).
    pub fn is_lean(&self) -> bool {
        self.entries.iter().any(|e| {
            e.deferred
                && e.source != ToolSource::McpSearch
                && !matches!(e.source, ToolSource::Mcp { .. })
        })
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

    /// The schemas the regular summary request keeps for its shape, as the seed's runtime
    /// does: the built-in file reader, and while MCP definitions are deferred the tool search
    /// with the MCP definitions the session has loaded. The request may call none of them.
    pub fn summary_tools(&self) -> Vec<ToolSpec> {
        let reader = self
            .entries
            .iter()
            .find(|e| e.is_builtin() && e.class == ToolClass::Read && e.path_arg.is_some())
            .map(|e| e.spec.clone());
        let mut out: Vec<ToolSpec> = reader.into_iter().collect();
        if self.mcp_deferred() {
            out.extend(self.mcp_specs());
        }
        out
    }

    /// The prompt lines the session's tools make true, sorted.
    pub fn offers(&self) -> Vec<Offer> {
        let mut v: Vec<Offer> = self.entries.iter().filter_map(|e| e.offer).collect();
        v.sort();
        v.dedup();
        v
    }

    /// True when the model has the session tool `snip`.
    pub fn offers_snip(&self) -> bool {
        self.entries.iter().any(|e| e.source == ToolSource::Session)
    }

    /// One line describing a call of the tool `name` (unknown tools show their input).
    pub fn describe(&self, name: &str, input: &Value) -> String {
        match self.get(name) {
            Some(e) => e.describe(input),
            None => util::cut_chars(&format!("{name}: {}", one_line(&input.to_string())), 200),
        }
    }

    /// What a call of `name` would change, for an editor to draw before it runs.
    pub fn preview(&self, name: &str, input: &Value, root: &Root) -> Option<EditPreview> {
        self.get(name)?.preview(input, root)
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
                ) && e.is_builtin()
            })
            .map(|e| e.spec.name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model window for the tests' tools.
    const W: u64 = 200_000;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: "d".into(),
            input_schema: serde_json::json!({"type": "object"}),
        }
    }

    #[test]
    fn claude_code_tool_names_map_to_garudas() {
        let listed = [
            "Read",
            "Grep",
            "Glob",
            "Bash",
            "Edit",
            "MultiEdit",
            "LS",
            "WebFetch",
            "NotebookEdit",
        ]
        .map(String::from);
        let (tools, unknown) = ToolRegistry::resolve_names(&listed);
        assert_eq!(
            tools,
            [
                "read_file",
                "grep",
                "glob",
                "bash",
                "edit_file",
                "list_files",
                "web_fetch"
            ]
        );
        assert_eq!(unknown, ["NotebookEdit"]);
        let (tools, _) =
            ToolRegistry::resolve_names(&["read_file".into(), "Task".into(), "explore".into()]);
        assert_eq!(tools, ["read_file", "agent", "explore"]);
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

    #[test]
    fn sub_session_tools_come_from_names_and_agent_tools_need_their_set() {
        assert_eq!(
            ToolRegistry::read_only_names(),
            ["read_file", "list_files", "glob", "grep"]
        );
        let names: Vec<String> = ["bash", "read_file", "agent", "explore"]
            .map(String::from)
            .into();
        let plain = ToolRegistry::only(&names, None, W);
        let listed: Vec<&str> = plain
            .entries()
            .iter()
            .map(|e| e.spec.name.as_str())
            .collect();
        assert_eq!(
            listed,
            ["read_file", "bash"],
            "no agent tools without their set"
        );
        let set = std::sync::Arc::new(crate::agents::AgentSet {
            agents: vec![crate::agents::AgentDef {
                name: "a".into(),
                description: "d".into(),
                tools: None,
                model: None,
                prompt: "p".into(),
                file: "a.md".into(),
            }],
            warnings: Vec::new(),
        });
        let nested = ToolRegistry::only(&names, Some(set.clone()), W);
        let listed: Vec<&str> = nested
            .entries()
            .iter()
            .map(|e| e.spec.name.as_str())
            .collect();
        assert_eq!(listed, ["read_file", "bash", "explore", "agent"]);
        let (main, clashes) = ToolRegistry::for_session(vec![spec("explore")])
            .unwrap()
            .with_agents(set, true, W);
        assert_eq!(clashes, ["explore"], "a client's explore keeps its place");
        assert!(main.get("agent").is_some_and(ToolEntry::is_builtin));
        assert_eq!(
            main.get("explore").map(|e| &e.source),
            Some(&ToolSource::Client)
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
    fn an_agent_takes_the_client_mcp_and_skill_tools_it_names() {
        let tools = [
            mcp_tool("a", "x", false),
            mcp_tool("a", "y", true),
            mcp_tool("b", "z", false),
        ];
        let specs: Vec<ToolSpec> = tools.iter().map(|t| t.spec.clone()).collect();
        let skills = std::sync::Arc::new(crate::skills::SkillSet {
            skills: vec![crate::skills::Skill {
                head: crate::skills::SkillHead {
                    name: "s".into(),
                    description: "d".into(),
                    allowed_tools: Vec::new(),
                },
                folder: "s".into(),
                place: crate::skills::SkillPlace::Workspace,
            }],
            ..Default::default()
        });
        let names = |r: &ToolRegistry| -> Vec<String> {
            r.entries().iter().map(|e| e.spec.name.clone()).collect()
        };
        let deferred = crate::mcp::defer::plan(&specs, 10, 0.1);
        let parent = ToolRegistry::for_session(vec![spec("sel"), spec("other")])
            .unwrap()
            .with_skills(skills, W)
            .with_mcp(&tools, &deferred)
            .unwrap();
        let listed: Vec<String> = ["read_file", "sel", "skill", "mcp__a", "mcp__b__z", "nope"]
            .map(String::from)
            .into();
        let child = ToolRegistry::for_agent(&listed, &parent, None, W);
        assert_eq!(
            names(&child),
            [
                "read_file",
                "skill",
                "sel",
                "mcp__a__x",
                "mcp__a__y",
                "mcp__b__z"
            ]
        );
        assert!(!child.mcp_deferred(), "named MCP tools are loaded");
        assert_eq!(child.get("mcp__a__y").map(|e| e.read_only), Some(true));
        assert_eq!(parent.missing_for_agent(&listed), ["nope"]);
        // Without a list: every tool but the agent tools, the caller's deferral kept.
        let all = ToolRegistry::for_agent(&parent.agent_default_names(), &parent, None, W);
        assert!(all.mcp_deferred());
        assert!(all.get("other").is_some() && all.get("snip").is_none());
        assert!(all.is_skill("skill"));
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
        let summary_names = |r: &ToolRegistry| -> Vec<String> {
            r.summary_tools().into_iter().map(|s| s.name).collect()
        };
        // The regular summary request keeps the file reader alone while MCP is loaded...
        assert_eq!(summary_names(&r), ["read_file"]);

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
        // ...and the tool search too while MCP definitions are deferred (seed row 153).
        assert_eq!(summary_names(&r), ["read_file", "mcp_tool_search"]);

        let clash = ToolRegistry::for_session(vec![spec("mcp__a__x")])
            .unwrap()
            .with_mcp(&tools, &loaded);
        assert_eq!(clash, Err(ToolClash("mcp__a__x".into())));
    }

    #[test]
    fn a_small_window_s_registry_defers_all_but_the_core_tools() {
        let full = ToolRegistry::for_session(vec![spec("client_tool")]).unwrap();
        let lean = full.lean();
        let names: Vec<String> = lean.specs().into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "read_file",
                "grep",
                "edit_file",
                "write_file",
                "bash",
                "mcp_tool_search"
            ]
        );
        assert!(lean.is_lean() && !full.is_lean());
        // Deferred tools stay callable by name; the search answers with their full specs.
        assert!(lean.get("todo_write").is_some_and(|e| e.deferred));
        assert!(
            lean.deferred_specs()
                .iter()
                .any(|s| s.name == "client_tool")
        );
        let full_len: usize = full.specs().iter().map(|s| s.description.len()).sum();
        let lean_len: usize = lean.specs().iter().map(|s| s.description.len()).sum();
        assert!(lean_len < full_len / 2, "{lean_len} vs {full_len}");
        assert_eq!(
            lean.lean(),
            lean,
            "the same registry twice gives the same one"
        );
    }

    #[test]
    fn web_tools_follow_the_switch_and_the_backend_and_yield_to_a_client_tool() {
        let web = |searxng: Option<&str>| {
            crate::web::Web::new(
                crate::web::WebSettings {
                    search: crate::web::SearchSettings {
                        searxng_url: searxng.map(str::to_string),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                Default::default(),
            )
        };
        let names = |r: &ToolRegistry| -> Vec<String> {
            r.entries.iter().map(|e| e.spec.name.clone()).collect()
        };
        let (off, _) =
            ToolRegistry::for_session(Vec::new())
                .unwrap()
                .with_web(web(None), false, false);
        assert!(!names(&off).iter().any(|n| n.starts_with("web_")));
        assert!(!off.offers().contains(&Offer::WebFetch));
        let (both, clashes) = ToolRegistry::for_session(vec![spec("open_in_editor")])
            .unwrap()
            .with_web(web(Some("http://127.0.0.1:8888")), true, false);
        assert!(clashes.is_empty());
        let n = names(&both);
        // After the built-ins, before the client's tools.
        let at = |t: &str| n.iter().position(|x| x == t).unwrap();
        assert!(at("exit_plan_mode") < at("web_fetch") && at("web_fetch") < at("web_search"));
        assert!(at("web_search") < at("open_in_editor"));
        let fetch = both.get("web_fetch").unwrap();
        assert_eq!(
            (fetch.class, fetch.kind),
            (ToolClass::Network, ToolKind::Fetch)
        );
        assert!(fetch.read_only && fetch.is_builtin());
        assert!(both.offers().contains(&Offer::WebSearch));
        // The provider's server tool takes the backend's place on Anthropic's wire only: its
        // spec is the provider's definition, its line the same.
        let server = |anthropic: bool| {
            let settings = crate::web::WebSettings {
                search: crate::web::SearchSettings {
                    searxng_url: Some("http://127.0.0.1:8888".into()),
                    anthropic_server_tool: true,
                    max_uses: Some(2),
                    blocked_domains: vec!["example.com".into()],
                    ..Default::default()
                },
                ..Default::default()
            };
            let web = crate::web::Web::new(settings, Default::default());
            ToolRegistry::for_session(Vec::new())
                .unwrap()
                .with_web(web, false, anthropic)
                .0
        };
        let on = server(true);
        let server_spec = on.get("web_search").unwrap().spec.clone();
        assert_eq!(
            server_spec.provider_definition(),
            Some(
                &serde_json::json!({"type": "web_search_20250305", "name": "web_search",
                "max_uses": 2, "blocked_domains": ["example.com"]})
            )
        );
        assert_eq!(on.get("web_search").unwrap().kind, ToolKind::Search);
        assert!(on.offers().contains(&Offer::WebSearch));
        let backend = server(false);
        assert_eq!(
            backend
                .get("web_search")
                .unwrap()
                .spec
                .provider_definition(),
            None
        );
        // A client's web_fetch keeps its place; Garuda's is left out and named.
        let (client, clashes) = ToolRegistry::for_session(vec![spec("web_fetch")])
            .unwrap()
            .with_web(web(None), true, false);
        assert_eq!(clashes, ["web_fetch"]);
        assert_eq!(client.get("web_fetch").unwrap().source, ToolSource::Client);
        // An agent file may list them by Garuda's or Claude Code's names; the sub-session gets
        // the caller's (with the caller's settings), and none the caller lacks.
        let (names, unknown) =
            ToolRegistry::resolve_names(&["WebFetch".into(), "web_search".into()]);
        assert_eq!(
            (names.as_slice(), unknown.len()),
            (
                ["web_fetch".to_string(), "web_search".to_string()].as_slice(),
                0
            )
        );
        let sub = ToolRegistry::for_agent(&names, &both, None, W);
        assert!(sub.get("web_fetch").is_some() && sub.get("web_search").is_some());
        assert!(both.missing_for_agent(&names).is_empty());
        assert!(
            both.agent_default_names()
                .contains(&"web_fetch".to_string())
        );
        assert_eq!(off.missing_for_agent(&names), names);
        assert!(
            ToolRegistry::for_agent(&names, &off, None, W)
                .get("web_fetch")
                .is_none()
        );
    }
}
