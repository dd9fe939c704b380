//! The built-in tools, one file each. Adding a tool means one new file here and one line in
//! [`all`].

mod agent;
mod bash;
mod edit_file;
mod exit_plan_mode;
mod find_references;
mod find_symbol;
mod glob;
mod grep;
mod list_files;
mod mcp_search;
mod read_file;
mod remember;
mod repo_map;
mod skill;
mod snip;
mod symbols;
mod todo_write;
mod web_fetch;
mod web_search;
mod write_file;

pub use agent::{AgentTool, ExploreTool};
pub use exit_plan_mode::{PLAN_TOOL, plan_in};
pub(crate) use find_references::{FIND_REFERENCES, FindReferences};
pub(crate) use find_symbol::{FIND_SYMBOL, FindSymbol};
pub(crate) use mcp_search::McpSearchTool;
pub(crate) use repo_map::{REPO_MAP, RepoMap};
pub use skill::{SKILL_TOOL, SkillTool, skill_text};
pub(crate) use snip::SnipTool;
pub use snip::{SNIP_TOOL, snip_tool_spec};
pub use todo_write::todos_in;
pub(crate) use web_fetch::WebFetch;
pub(crate) use web_search::{ServerWebSearch, WebSearch};

use super::handler::Handler;
use super::write::WholeFile;

/// The built-in tools every session has, in the order the model sees them (tools built from
/// what a session finds at its start, like `skill`, follow them).
pub(crate) fn all() -> Vec<Handler> {
    vec![
        Handler::new(read_file::ReadFile),
        Handler::new(list_files::ListFiles),
        Handler::new(glob::Glob),
        Handler::new(grep::Grep),
        Handler::new(WholeFile(edit_file::EditFile)),
        Handler::new(WholeFile(write_file::WriteFile)),
        Handler::new(bash::Bash),
        Handler::new(remember::Remember),
        Handler::new(todo_write::TodoWrite),
        Handler::new(exit_plan_mode::ExitPlanMode),
    ]
}
