//! Approval policy: which tool calls go to the client for permission. It follows risk, not
//! tool names: under `auto-edit` an edit of a path that runs code or steers Garuda
//! ([`risky_path`]) still asks, and a command asks unless the sandbox confines it and the user
//! let sandboxed commands run (`[sandbox] auto_run`). Without a sandbox every command asks,
//! whatever the policy, unless the user turned the sandbox off. Under `plan` nothing that
//! changes anything runs: only read-only tools do, and the rest is refused without asking.

use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

use super::vocab::{EditRisk, ToolClass};
use crate::sandbox::{CommandSandbox, Unconfined};

/// A session's approval policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Every write, every command and every memory change asks.
    #[default]
    Ask,
    /// Edits are allowed; commands ask.
    AutoEdit,
    /// Nothing asks.
    FullAuto,
    /// Plan mode: only read-only tools run; anything else is refused without asking, until
    /// the user approves a plan the model presents with `exit_plan_mode`.
    Plan,
}

impl Policy {
    /// The policy's name as configs and the wire spell it.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Ask => "ask",
            Policy::AutoEdit => "auto-edit",
            Policy::FullAuto => "full-auto",
            Policy::Plan => "plan",
        }
    }
}

/// A policy name that is not one of `ask`, `auto-edit`, `full-auto`, `plan`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown approval policy {0:?}: use ask, auto-edit, full-auto or plan")]
pub struct UnknownPolicy(pub String);

impl std::str::FromStr for Policy {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ask" => Ok(Policy::Ask),
            "auto-edit" => Ok(Policy::AutoEdit),
            "full-auto" => Ok(Policy::FullAuto),
            "plan" => Ok(Policy::Plan),
            other => Err(UnknownPolicy(other.to_string())),
        }
    }
}

/// True when a call of `class` must be approved by the client under `policy`.
///
/// Reads and todo changes never ask. A memory write asks only under `ask`. Client-registered
/// tools (`Other`) never go through `permission/request`: the client runs them in its own
/// `tool/call` handler, where it can ask the person itself. `exit_plan_mode` (`Plan`) asks in
/// its own way. Under `plan` a call that is not read-only never gets this far (it is refused,
/// see [`plan_refuses`]); what does is read-only and asks nothing, but for a network call,
/// which asks under every policy (only the user's config lets one through under `full-auto`:
/// `turn/approval.rs` weighs that).
pub fn needs_approval(policy: Policy, class: ToolClass) -> bool {
    match class {
        ToolClass::Read
        | ToolClass::Search
        | ToolClass::Todo
        | ToolClass::Session
        | ToolClass::Plan
        | ToolClass::Other => false,
        // Plan mode refuses these before approval is asked about; asking is the safe answer.
        ToolClass::Edit | ToolClass::Memory => matches!(policy, Policy::Ask | Policy::Plan),
        ToolClass::Exec => policy != Policy::FullAuto,
        ToolClass::Network => true,
    }
}

/// True when `policy` refuses a call, without asking, of a tool that is `read_only` or not:
/// plan mode runs read-only tools alone.
pub fn plan_refuses(policy: Policy, read_only: bool) -> bool {
    policy == Policy::Plan && !read_only
}

/// Files anywhere in the workspace whose change runs code later, outside any sandbox, or
/// changes what Garuda tells the model: direnv, package manifests and build scripts,
/// instruction files. Matched on the file name, ignoring case.
pub const RISKY_FILES: &[&str] = &[
    ".envrc",
    "AGENTS.md",
    "CLAUDE.md",
    "GARUDA.md",
    "package.json",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "justfile",
    "Taskfile.yml",
    "build.rs",
    "Cargo.toml",
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "tox.ini",
    "noxfile.py",
    "composer.json",
    "Gemfile",
    "Rakefile",
    "build.gradle",
    "build.gradle.kts",
    "settings.gradle",
    "settings.gradle.kts",
    "gradlew",
    "pom.xml",
    ".pre-commit-config.yaml",
    ".gitlab-ci.yml",
    ".travis.yml",
    "azure-pipelines.yml",
    "Jenkinsfile",
    ".drone.yml",
    ".gitattributes",
    ".gitmodules",
];

/// Folders anywhere in the workspace whose files run code or steer tools: git's own folder
/// (hooks, config), Garuda's, Claude Code's (settings with hooks), CI configs, git hook
/// managers, editor tasks and settings, cargo's config.
pub const RISKY_DIRS: &[&str] = &[
    ".git",
    ".garuda",
    ".claude",
    ".agents",
    ".github",
    ".circleci",
    ".buildkite",
    ".husky",
    ".vscode",
    ".idea",
    ".cargo",
    ".devcontainer",
];

/// The names of `rel` with `.` and `..` folded away (lexically).
fn folded(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    parts
}

/// Why a change of the root-relative `rel` is risky, or `None`. Lexical: `.` and `..` are
/// resolved first; see [`target_risk`] for links.
pub fn risky_path(rel: &Path) -> Option<String> {
    let parts = folded(rel);
    let eq = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    if let Some(d) = parts
        .iter()
        .take(parts.len().saturating_sub(1))
        .find(|p| RISKY_DIRS.iter().any(|d| eq(p, d)))
    {
        return Some(format!(
            "it is inside {d}/, which runs code or steers tools"
        ));
    }
    let name = parts.last()?;
    if RISKY_FILES.iter().any(|f| eq(name, f)) {
        return Some(format!("{name} runs code or steers the agent"));
    }
    None
}

/// How much a change of the root-relative `rel` matters, and why, as it resolves under `root`
/// now: the path as written and the one it leads to (a link into `.git/` is `.git/`) are both
/// judged, once each, a protected place before a risky one. None for an ordinary file. The
/// target need not exist.
pub fn target_risk(root: &Path, rel: &Path) -> Option<(EditRisk, String)> {
    let resolved = resolved(root, rel);
    let paths = || std::iter::once(rel).chain(resolved.as_deref());
    paths()
        .find_map(protected_path)
        .map(|why| (EditRisk::Protected, why))
        .or_else(|| {
            paths()
                .find_map(risky_path)
                .map(|why| (EditRisk::Risky, why))
        })
}

/// Why `rel` (as written, `..` folded) changes what runs outside the sandbox later, or None:
/// it is, or is inside, `.git` (its config, hooks, `commondir`, or a `.git` file holding
/// `gitdir:`; at any depth, a submodule's too), `.garuda`, `.claude` or `.agents` (settings with
/// hooks, agent and skill files). The sandbox keeps the same folders read-only at the root
/// ([`crate::sandbox::PROTECTED_IN_ROOT`]); a file-tool edit of them asks under every policy.
pub fn protected_path(rel: &Path) -> Option<String> {
    let parts = folded(rel);
    let last = parts.len().checked_sub(1)?;
    let (i, name) = parts.iter().enumerate().find(|(_, p)| {
        crate::sandbox::PROTECTED_IN_ROOT
            .iter()
            .any(|d| p.eq_ignore_ascii_case(d))
    })?;
    Some(if i == last {
        format!("{name} changes what runs outside the sandbox")
    } else {
        // The wording of `risky_path` for these folders, so titles read as before.
        format!("it is inside {name}/, which runs code or steers tools")
    })
}

/// `rel` with links resolved, relative to the canonical root: the nearest existing ancestor
/// made canonical, the rest appended. None outside the root.
fn resolved(root: &Path, rel: &Path) -> Option<std::path::PathBuf> {
    let full = root.join(rel);
    let mut base = full.as_path();
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(canon) = base.canonicalize() {
            let mut p = canon;
            for r in rest.iter().rev() {
                p.push(r);
            }
            let canon_root = root.canonicalize().ok()?;
            return p.strip_prefix(&canon_root).ok().map(Path::to_path_buf);
        }
        rest.push(base.file_name()?);
        base = base.parent()?;
    }
}

/// True when a call of `class` must be approved under `policy`, for a session whose commands
/// run as `commands` and a call whose edit carries `risk` (see [`target_risk`]).
pub fn approval_needed(
    policy: Policy,
    class: ToolClass,
    commands: &CommandSandbox,
    risk: EditRisk,
) -> bool {
    match class {
        ToolClass::Edit => match policy {
            Policy::Ask | Policy::Plan => true,
            Policy::AutoEdit => risk != EditRisk::Plain,
            Policy::FullAuto => risk == EditRisk::Protected,
        },
        ToolClass::Exec => {
            // No sandbox the user did not choose: every command asks.
            let fallback = matches!(commands.unconfined, Some(Unconfined::Unavailable(_)));
            match policy {
                Policy::Ask | Policy::Plan => true,
                Policy::AutoEdit => fallback || !(commands.confined() && commands.auto_run),
                Policy::FullAuto => fallback,
            }
        }
        other => needs_approval(policy, other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(unconfined: Option<Unconfined>, auto_run: bool) -> CommandSandbox {
        CommandSandbox::for_tests(unconfined, auto_run)
    }

    #[test]
    fn risky_paths() {
        for p in [
            ".git/hooks/pre-commit",
            ".git/config",
            "./.GIT/hooks/x",
            "a/../.garuda/config.toml",
            ".envrc",
            "sub/.envrc",
            ".github/workflows/ci.yml",
            "AGENTS.md",
            "docs/CLAUDE.md",
            "package.json",
            "crates/x/build.rs",
            ".vscode/tasks.json",
            ".cargo/config.toml",
        ] {
            assert!(risky_path(Path::new(p)).is_some(), "{p}");
        }
        for p in [
            "src/main.rs",
            "README.md",
            "git/hooks.rs",
            ".gitignore",
            "a/.garuda_x",
        ] {
            assert!(risky_path(Path::new(p)).is_none(), "{p}");
        }
    }

    #[test]
    fn a_link_into_git_is_risky() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(".git/hooks")).unwrap();
        std::os::unix::fs::symlink(".git/hooks", d.path().join("h")).unwrap();
        assert!(target_risk(d.path(), Path::new("h/pre-commit")).is_some());
        assert!(target_risk(d.path(), Path::new("new/dir/file.rs")).is_none());
    }

    #[test]
    fn commands_follow_the_sandbox() {
        use Policy::*;
        let confined = sandbox(None, false);
        let confined_auto = sandbox(None, true);
        let none = sandbox(Some(Unconfined::Unavailable("x".into())), true);
        let off = sandbox(Some(Unconfined::TurnedOff), false);
        let ex = |p, s: &CommandSandbox| approval_needed(p, ToolClass::Exec, s, EditRisk::Plain);
        assert!(ex(Ask, &confined_auto));
        assert!(ex(AutoEdit, &confined));
        assert!(!ex(AutoEdit, &confined_auto));
        assert!(ex(AutoEdit, &none));
        assert!(!ex(FullAuto, &confined));
        // No sandbox the user did not choose: full-auto asks too.
        assert!(ex(FullAuto, &none));
        assert!(!ex(FullAuto, &off));
        let ed = |p, risk| approval_needed(p, ToolClass::Edit, &confined, risk);
        assert!(ed(AutoEdit, EditRisk::Risky));
        assert!(!ed(AutoEdit, EditRisk::Plain));
        assert!(ed(Ask, EditRisk::Plain));
        assert!(!ed(FullAuto, EditRisk::Risky));
        // What runs outside the sandbox later asks under every policy.
        assert!(ed(FullAuto, EditRisk::Protected));
        assert!(ed(AutoEdit, EditRisk::Protected));
    }

    #[test]
    fn protected_paths_are_what_changes_what_runs() {
        for p in [
            ".git/config",
            ".git/commondir",
            "sub/.git",
            ".GIT/hooks/x",
            ".claude/settings.local.json",
            ".claude/agents/a.md",
            ".garuda/config.toml",
            ".agents/skills/x/SKILL.md",
            "a/../.git/info/attributes",
        ] {
            assert!(protected_path(Path::new(p)).is_some(), "{p}");
        }
        for p in [
            "src/main.rs",
            "AGENTS.md",
            ".github/workflows/ci.yml",
            ".gitignore",
        ] {
            assert!(protected_path(Path::new(p)).is_none(), "{p}");
        }
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(".git/hooks")).unwrap();
        std::os::unix::fs::symlink(".git/hooks", d.path().join("h")).unwrap();
        let risk = |p: &str| target_risk(d.path(), Path::new(p)).map(|(r, _)| r);
        assert_eq!(risk("h/pre-commit"), Some(EditRisk::Protected));
        assert_eq!(risk("src/x.rs"), None);
        assert_eq!(risk(".envrc"), Some(EditRisk::Risky));
        // A `.git` file (`gitdir:`) is protected where it is written, the root or deeper.
        assert_eq!(risk(".git"), Some(EditRisk::Protected));
        assert_eq!(risk("sub/.git"), Some(EditRisk::Protected));
    }

    #[test]
    fn table() {
        use ToolClass::*;
        let cases = [
            (Policy::Ask, [false, true, true, true, false, false]),
            (Policy::AutoEdit, [false, false, true, false, false, false]),
            (Policy::FullAuto, [false, false, false, false, false, false]),
            (Policy::Plan, [false, true, true, true, false, false]),
        ];
        for (p, want) in cases {
            let got = [Read, Edit, Exec, Memory, Todo, Other].map(|c| needs_approval(p, c));
            assert_eq!(got, want, "{p:?}");
        }
    }

    #[test]
    fn serde_names() {
        assert_eq!(
            serde_json::to_string(&Policy::AutoEdit).unwrap(),
            "\"auto-edit\""
        );
        assert_eq!(
            serde_json::from_str::<Policy>("\"full-auto\"").unwrap(),
            Policy::FullAuto
        );
        assert_eq!(
            serde_json::from_str::<Policy>("\"ask\"").unwrap(),
            Policy::Ask
        );
        assert_eq!("plan".parse::<Policy>(), Ok(Policy::Plan));
        assert_eq!(Policy::Plan.name(), "plan");
    }

    #[test]
    fn plan_mode_runs_read_only_tools_alone() {
        assert!(plan_refuses(Policy::Plan, false));
        assert!(!plan_refuses(Policy::Plan, true));
        for p in [Policy::Ask, Policy::AutoEdit, Policy::FullAuto] {
            assert!(!plan_refuses(p, false), "{p:?}");
        }
    }
}
