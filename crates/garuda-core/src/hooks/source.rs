//! Where hooks come from: a leaf both the set (which resolves them) and the digest (which
//! records a workspace's for `garuda trust`) read, so neither imports the other.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::config::MatcherGroup;

/// Where a hook was defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookOrigin {
    /// The user's `config.toml`.
    UserConfig,
    /// The user's `~/.claude/settings.json`.
    ClaudeUser(PathBuf),
    /// The workspace's `.garuda/config.toml`.
    WorkspaceConfig(PathBuf),
    /// The workspace's `.claude/settings.json` or `.claude/settings.local.json`.
    ClaudeWorkspace(PathBuf),
}

impl HookOrigin {
    /// True for hooks the workspace defines (they need the user's trust).
    pub fn is_workspace(&self) -> bool {
        matches!(
            self,
            HookOrigin::WorkspaceConfig(_) | HookOrigin::ClaudeWorkspace(_)
        )
    }

    /// True for hooks imported from Claude Code's settings (they see Claude Code's tool names
    /// and get `CLAUDE_PROJECT_DIR`).
    pub fn is_claude(&self) -> bool {
        matches!(
            self,
            HookOrigin::ClaudeUser(_) | HookOrigin::ClaudeWorkspace(_)
        )
    }
}

impl std::fmt::Display for HookOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookOrigin::UserConfig => f.write_str("user config"),
            HookOrigin::ClaudeUser(p)
            | HookOrigin::WorkspaceConfig(p)
            | HookOrigin::ClaudeWorkspace(p) => {
                write!(f, "{}", p.display())
            }
        }
    }
}

/// Hooks from one place, as written.
#[derive(Debug, Clone)]
pub struct HookSource {
    /// Where they come from.
    pub origin: HookOrigin,
    /// Matcher groups by event name.
    pub events: BTreeMap<String, Vec<MatcherGroup>>,
}
