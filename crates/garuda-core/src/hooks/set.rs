//! The hooks in force for one workspace, and the ones skipped with the reason.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::HookEvent;
use super::claude::{self, SettingsFile};
use super::config::{HooksSettings, ImportSource};
use super::digest::WorkspaceHooks;
use super::event::CLAUDE_ONLY_EVENTS;
use super::matcher::{Matcher, MatcherError, tool_match_names};
pub use super::source::{HookOrigin, HookSource};
use super::trust::{TrustList, TrustStatus};
use crate::fsroot::Root;

/// Longest timeout a hook may ask for: an hour (a bigger number is a typo for milliseconds).
const MAX_TIMEOUT_SECS: f64 = 3_600.0;

/// One hook in force.
#[derive(Debug, Clone)]
pub struct Hook {
    /// Its event.
    pub event: HookEvent,
    /// The matcher as written (None: every subject).
    pub matcher_text: Option<String>,
    /// The compiled matcher.
    pub matcher: Matcher,
    /// The shell command line.
    pub command: String,
    /// How long it may run.
    pub timeout: Duration,
    /// Where it was defined.
    pub origin: HookOrigin,
    /// For a workspace's hook: the digest of the files its command names when the session
    /// started (and trust matched); checked again before each run.
    pub scripts: Option<String>,
}

/// Why a configured hook does not run.
#[derive(Debug, Clone, PartialEq)]
pub enum SkipReason {
    /// `[hooks] enabled = false`.
    Disabled,
    /// A Claude Code settings file says `disableAllHooks: true`.
    DisabledByClaude(PathBuf),
    /// The workspace defined it and the user has not trusted the workspace with the hooks it
    /// has now.
    Untrusted {
        /// The workspace root.
        root: PathBuf,
        /// What the trust list says about it.
        status: TrustStatus,
    },
    /// No such event; the closest known name, if one is close.
    UnknownEvent {
        /// The closest known name, if one is close.
        suggestion: Option<&'static str>,
    },
    /// A Claude Code event Garuda has no moment for (`TeammateIdle`, …).
    UnsupportedEvent,
    /// A handler type other than `command` (`prompt`, `http`, `agent`, …).
    UnsupportedType(String),
    /// No command, or an empty one.
    NoCommand,
    /// The matcher is not a valid regular expression.
    BadMatcher(MatcherError),
    /// The timeout is not a number of seconds above 0 and at most an hour.
    BadTimeout(f64),
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::Disabled => f.write_str("hooks are turned off ([hooks] enabled = false)"),
            SkipReason::DisabledByClaude(p) => {
                write!(f, "{} sets disableAllHooks", p.display())
            }
            SkipReason::Untrusted { root, status } => {
                let why = status.explain(root).unwrap_or_else(|| {
                    // Trusted hooks are never skipped for trust; say it plainly if one is.
                    "the workspace is not trusted".to_string()
                });
                f.write_str(&why)
            }
            SkipReason::UnknownEvent {
                suggestion: Some(s),
            } => {
                write!(f, "unknown event; did you mean {s}?")
            }
            SkipReason::UnknownEvent { suggestion: None } => write!(
                f,
                "unknown event; known: {}",
                HookEvent::ALL.map(HookEvent::name).join(", ")
            ),
            SkipReason::UnsupportedEvent => f.write_str("Garuda has no such event"),
            SkipReason::UnsupportedType(t) => {
                write!(f, "type {t:?} is not supported (only \"command\")")
            }
            SkipReason::NoCommand => f.write_str("no command"),
            SkipReason::BadMatcher(e) => write!(f, "{e}"),
            SkipReason::BadTimeout(t) => {
                write!(f, "timeout {t} is not a number of seconds in (0, 3600]")
            }
        }
    }
}

/// One configured hook that does not run.
#[derive(Debug, Clone, PartialEq)]
pub struct SkippedHook {
    /// The event name as written.
    pub event: String,
    /// The matcher as written.
    pub matcher: Option<String>,
    /// The command, when it has one.
    pub command: Option<String>,
    /// Where it was defined.
    pub origin: HookOrigin,
    /// Why it does not run.
    pub reason: SkipReason,
}

/// What resolving needs besides the sources.
#[derive(Debug, Clone)]
pub struct ResolveOptions {
    /// `[hooks] enabled`.
    pub enabled: bool,
    /// Seconds for hooks without their own timeout.
    pub default_timeout: f64,
    /// The workspace root (canonical).
    pub root: PathBuf,
    /// What the user's trust says about this workspace and its hooks now.
    pub trust: TrustStatus,
    /// A Claude Code settings file turned imported hooks off.
    pub claude_disabled_by: Option<PathBuf>,
}

/// The hooks of one workspace: those in force, in config order (user config, the user's
/// Claude Code settings, the workspace's config, its Claude Code settings), and those skipped.
#[derive(Debug, Clone, Default)]
pub struct HookSet {
    hooks: Vec<Hook>,
    skipped: Vec<SkippedHook>,
    problems: Vec<String>,
    root: PathBuf,
    workspace: WorkspaceHooks,
    trust: Option<TrustStatus>,
    env: Vec<String>,
}

/// What of the configuration the hooks read: the user's `[hooks]`, the workspace's own
/// `[hooks]` with the file it came from, and the variables the user passes to commands (hooks
/// get them too). The config builds it (`Config::hook_config`), so the hooks
/// need not know the whole config.
#[derive(Debug, Clone, Copy)]
pub struct HookConfig<'a> {
    /// The user's `[hooks]`.
    pub user: &'a HooksSettings,
    /// The workspace's `.garuda/config.toml` and its `[hooks]`, when it has them.
    pub workspace_hooks: Option<&'a (PathBuf, HooksSettings)>,
    /// The user's `[sandbox] env` names.
    pub command_env: &'a [String],
}

impl HookSet {
    /// Resolves hooks from `sources` (in order); pure.
    pub fn resolve(sources: Vec<HookSource>, opts: &ResolveOptions) -> HookSet {
        let mut set = HookSet {
            root: opts.root.clone(),
            ..HookSet::default()
        };
        let default_timeout = if valid_timeout(opts.default_timeout) {
            opts.default_timeout
        } else {
            super::config::DEFAULT_TIMEOUT_SECS
        };
        for source in sources {
            for (name, groups) in source.events {
                for group in groups {
                    for h in group.hooks {
                        let skip = |reason: SkipReason| SkippedHook {
                            event: name.clone(),
                            matcher: group.matcher.clone(),
                            command: h.command.clone(),
                            origin: source.origin.clone(),
                            reason,
                        };
                        match build(
                            &name,
                            &group.matcher,
                            &h,
                            &source.origin,
                            opts,
                            default_timeout,
                        ) {
                            Ok(hook) => set.hooks.push(hook),
                            Err(reason) => set.skipped.push(skip(reason)),
                        }
                    }
                }
            }
        }
        set
    }

    /// Loads the hooks for a workspace: the user's `[hooks]`, the workspace's own (when its
    /// `.garuda/config.toml` has `[hooks]`), and with `import = ["claude"]` Claude Code's settings under `home` and
    /// beneath `root`. Workspace hooks run only when `trust` holds the root.
    pub fn load(
        config: HookConfig<'_>,
        root: &Root,
        trust: &TrustList,
        home: Option<&Path>,
    ) -> HookSet {
        let HookConfig {
            user,
            workspace_hooks,
            command_env,
        } = config;
        let import_claude = user.import.contains(&ImportSource::Claude);
        let mut sources = vec![HookSource {
            origin: HookOrigin::UserConfig,
            events: user.events.clone(),
        }];
        let mut problems = Vec::new();
        let mut disabled_by = None;
        let mut take =
            |file: SettingsFile, origin: HookOrigin, sources: &mut Vec<HookSource>| match file
                .settings
            {
                Ok(s) => {
                    if s.disable_all_hooks && disabled_by.is_none() {
                        disabled_by = Some(file.path.clone());
                    }
                    sources.push(HookSource {
                        origin,
                        events: s.hooks,
                    });
                }
                Err(e) => problems.push(format!("{} not used: {e}", file.path.display())),
            };
        if import_claude && let Some(f) = home.and_then(claude::read_user_settings) {
            let origin = HookOrigin::ClaudeUser(f.path.clone());
            take(f, origin, &mut sources);
        }
        if let Some((path, ws)) = workspace_hooks {
            sources.push(HookSource {
                origin: HookOrigin::WorkspaceConfig(path.clone()),
                events: ws.events.clone(),
            });
        }
        if import_claude {
            for f in claude::read_workspace_settings(root) {
                let origin = HookOrigin::ClaudeWorkspace(f.path.clone());
                take(f, origin, &mut sources);
            }
        }
        let mut scripts = std::collections::HashMap::new();
        let workspace = WorkspaceHooks::from_sources(&sources, root, &mut scripts);
        let status = trust.status(root, &workspace);
        let opts = ResolveOptions {
            enabled: user.enabled,
            default_timeout: user.timeout,
            root: root.path().to_path_buf(),
            trust: status.clone(),
            claude_disabled_by: disabled_by,
        };
        let mut set = HookSet::resolve(sources, &opts);
        for h in set.hooks.iter_mut().filter(|h| h.origin.is_workspace()) {
            let files = scripts
                .get(&h.command)
                .cloned()
                .unwrap_or_else(|| super::digest::scripts_digest(&h.command, root));
            h.scripts = Some(files);
        }
        set.problems = problems;
        set.workspace = workspace;
        set.trust = Some(status);
        set.env = command_env.iter().chain(&user.env).cloned().collect();
        set
    }

    /// Names hooks get from the server's environment besides the built-in allow-list: the
    /// user's `[sandbox] env` (what commands get) and `[hooks] env` (hooks only).
    pub fn env_names(&self) -> &[String] {
        &self.env
    }

    /// The workspace's own hooks as trust records them (empty unless built by
    /// [`HookSet::load`]): what `garuda trust` records and lists.
    pub fn workspace_hooks(&self) -> &WorkspaceHooks {
        &self.workspace
    }

    /// A warning for the session's start when the workspace has hooks that trust once covered
    /// but no longer does (they changed, the folder was replaced, the entry is from before
    /// hooks were recorded); `None` when they run or were never trusted (those are listed as
    /// skipped, as before).
    pub fn trust_notice(&self) -> Option<String> {
        match &self.trust {
            Some(TrustStatus::Trusted | TrustStatus::Untrusted) | None => None,
            Some(_) if self.workspace.is_empty() => None,
            Some(s) => s.explain(&self.root).map(|why| format!("hooks: {why}")),
        }
    }

    /// The hooks in force, in config order.
    pub fn hooks(&self) -> &[Hook] {
        &self.hooks
    }

    /// The configured hooks that do not run, with the reason.
    pub fn skipped(&self) -> &[SkippedHook] {
        &self.skipped
    }

    /// Settings files that could not be used (unreadable, invalid JSON, outside the root).
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// The workspace root hooks run in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True when some hook is in force (the prompt's hooks line says so).
    pub fn any(&self) -> bool {
        !self.hooks.is_empty()
    }

    /// True when some hook is in force for `event`.
    pub fn has(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|h| h.event == event)
    }

    /// The hooks of `event` whose matcher takes `subject` (a tool's Garuda name for tool
    /// events, matched under its Claude Code names too), in config order, a command listed
    /// twice once (as Claude Code deduplicates). An event without a subject runs all its hooks.
    pub fn matching(&self, event: HookEvent, subject: Option<&str>) -> Vec<&Hook> {
        let names: Vec<&str> = match subject {
            Some(s) if event.is_tool_event() => tool_match_names(s),
            Some(s) => vec![s],
            None => Vec::new(),
        };
        let mut out: Vec<&Hook> = Vec::new();
        for h in self.hooks.iter().filter(|h| h.event == event) {
            let hit = !event.uses_matcher() || subject.is_none() || h.matcher.matches_any(&names);
            if hit && !out.iter().any(|o| o.command == h.command) {
                out.push(h);
            }
        }
        out
    }
}

fn valid_timeout(t: f64) -> bool {
    t.is_finite() && t > 0.0 && t <= MAX_TIMEOUT_SECS
}

fn build(
    name: &str,
    matcher: &Option<String>,
    h: &super::config::HandlerConfig,
    origin: &HookOrigin,
    opts: &ResolveOptions,
    default_timeout: f64,
) -> Result<Hook, SkipReason> {
    if !opts.enabled {
        return Err(SkipReason::Disabled);
    }
    if origin.is_claude()
        && let Some(p) = &opts.claude_disabled_by
    {
        return Err(SkipReason::DisabledByClaude(p.clone()));
    }
    // Trust before anything about the hook itself: an untrusted workspace's hooks are listed
    // as untrusted even when they also have other problems.
    if origin.is_workspace() && !opts.trust.is_trusted() {
        return Err(SkipReason::Untrusted {
            root: opts.root.clone(),
            status: opts.trust.clone(),
        });
    }
    let Some(event) = HookEvent::parse(name) else {
        if CLAUDE_ONLY_EVENTS.contains(&name) {
            return Err(SkipReason::UnsupportedEvent);
        }
        let suggestion = HookEvent::ALL
            .iter()
            .map(|e| {
                (
                    strsim::jaro_winkler(
                        &name.to_ascii_lowercase(),
                        &e.name().to_ascii_lowercase(),
                    ),
                    e.name(),
                )
            })
            .filter(|(score, _)| *score > 0.85)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, n)| n);
        return Err(SkipReason::UnknownEvent { suggestion });
    };
    let kind = h.kind.as_deref().unwrap_or("command");
    if kind != "command" {
        return Err(SkipReason::UnsupportedType(kind.to_string()));
    }
    let command = match h.command.as_deref().map(str::trim) {
        Some(c) if !c.is_empty() => c.to_string(),
        _ => return Err(SkipReason::NoCommand),
    };
    let secs = h.timeout.unwrap_or(default_timeout);
    if !valid_timeout(secs) {
        return Err(SkipReason::BadTimeout(secs));
    }
    let compiled = Matcher::parse(matcher.as_deref()).map_err(SkipReason::BadMatcher)?;
    Ok(Hook {
        event,
        matcher_text: matcher.clone().filter(|m| !m.trim().is_empty()),
        matcher: compiled,
        command,
        timeout: Duration::from_secs_f64(secs),
        origin: origin.clone(),
        scripts: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::config::{HandlerConfig, MatcherGroup};
    use std::collections::BTreeMap;

    fn group(matcher: Option<&str>, kind: Option<&str>, command: Option<&str>) -> MatcherGroup {
        MatcherGroup {
            matcher: matcher.map(str::to_string),
            hooks: vec![HandlerConfig {
                kind: kind.map(str::to_string),
                command: command.map(str::to_string),
                timeout: None,
            }],
        }
    }

    fn source(origin: HookOrigin, events: &[(&str, MatcherGroup)]) -> HookSource {
        let mut map: BTreeMap<String, Vec<MatcherGroup>> = BTreeMap::new();
        for (e, g) in events {
            map.entry(e.to_string()).or_default().push(g.clone());
        }
        HookSource {
            origin,
            events: map,
        }
    }

    fn opts(trusted: bool) -> ResolveOptions {
        ResolveOptions {
            enabled: true,
            default_timeout: 60.0,
            root: "/w".into(),
            trust: if trusted {
                TrustStatus::Trusted
            } else {
                TrustStatus::Untrusted
            },
            claude_disabled_by: None,
        }
    }

    #[test]
    fn skips_say_why() {
        let user = source(
            HookOrigin::UserConfig,
            &[
                ("PreToolUse", group(Some("Bash"), None, Some("a.sh"))),
                ("PreToolUse", group(Some("Edit("), None, Some("b.sh"))),
                ("PreToolUs", group(None, None, Some("c.sh"))),
                ("Nonsense", group(None, None, Some("c.sh"))),
                ("TeammateIdle", group(None, None, Some("d.sh"))),
                ("Stop", group(None, Some("prompt"), None)),
                ("Stop", group(None, Some("command"), Some("  "))),
            ],
        );
        let ws = source(
            HookOrigin::WorkspaceConfig("/w/.garuda/config.toml".into()),
            &[("PreToolUse", group(None, None, Some("evil.sh")))],
        );
        let set = HookSet::resolve(vec![user.clone(), ws.clone()], &opts(false));
        assert_eq!(set.hooks().len(), 1);
        assert_eq!(set.hooks()[0].command, "a.sh");
        assert_eq!(set.hooks()[0].timeout, Duration::from_secs(60));
        let reasons: Vec<String> = set.skipped().iter().map(|s| s.reason.to_string()).collect();
        let find = |cmd: &str| {
            set.skipped()
                .iter()
                .find(|s| s.command.as_deref() == Some(cmd))
                .map(|s| s.reason.clone())
                .unwrap()
        };
        assert!(
            matches!(find("b.sh"), SkipReason::BadMatcher(_)),
            "{reasons:?}"
        );
        assert!(
            set.skipped().iter().any(|s| s.event == "PreToolUs"
                && s.reason
                    == SkipReason::UnknownEvent {
                        suggestion: Some("PreToolUse")
                    }),
            "{reasons:?}"
        );
        assert!(
            reasons
                .iter()
                .any(|r| r.starts_with("unknown event; known:"))
        );
        assert_eq!(find("d.sh"), SkipReason::UnsupportedEvent);
        assert!(
            set.skipped()
                .iter()
                .any(|s| s.reason == SkipReason::UnsupportedType("prompt".into()))
        );
        assert!(
            set.skipped()
                .iter()
                .any(|s| s.reason == SkipReason::NoCommand)
        );
        let untrusted = find("evil.sh");
        assert_eq!(
            untrusted,
            SkipReason::Untrusted {
                root: "/w".into(),
                status: TrustStatus::Untrusted
            }
        );
        assert!(untrusted.to_string().contains("garuda trust /w"));

        let trusted = HookSet::resolve(vec![user.clone(), ws], &opts(true));
        assert_eq!(trusted.hooks().len(), 2);
        assert_eq!(
            trusted.hooks()[1].command,
            "evil.sh",
            "config order: user, then workspace"
        );

        let off = HookSet::resolve(
            vec![user],
            &ResolveOptions {
                enabled: false,
                ..opts(true)
            },
        );
        assert!(!off.any());
        assert!(
            off.skipped()
                .iter()
                .any(|s| s.reason == SkipReason::Disabled)
        );
    }

    #[test]
    fn matching_uses_claude_names_and_dedups() {
        let user = source(
            HookOrigin::UserConfig,
            &[
                ("PreToolUse", group(Some("Bash"), None, Some("policy.sh"))),
                ("PreToolUse", group(Some("bash"), None, Some("policy.sh"))),
                (
                    "PreToolUse",
                    group(Some("Edit|Write"), None, Some("fmt.sh")),
                ),
                ("PreToolUse", group(None, None, Some("log.sh"))),
                (
                    "SessionStart",
                    group(Some("compact"), None, Some("after.sh")),
                ),
                ("Stop", group(Some("ignored"), None, Some("stop.sh"))),
            ],
        );
        let set = HookSet::resolve(vec![user], &opts(true));
        fn cmds(hs: Vec<&Hook>) -> Vec<&str> {
            hs.into_iter().map(|h| h.command.as_str()).collect()
        }
        assert_eq!(
            cmds(set.matching(HookEvent::PreToolUse, Some("bash"))),
            ["policy.sh", "log.sh"]
        );
        assert_eq!(
            cmds(set.matching(HookEvent::PreToolUse, Some("edit_file"))),
            ["fmt.sh", "log.sh"]
        );
        assert_eq!(
            cmds(set.matching(HookEvent::PreToolUse, Some("mcp__x__y"))),
            ["log.sh"]
        );
        assert_eq!(
            cmds(set.matching(HookEvent::SessionStart, Some("compact"))),
            ["after.sh"]
        );
        assert!(
            set.matching(HookEvent::SessionStart, Some("startup"))
                .is_empty()
        );
        assert_eq!(cmds(set.matching(HookEvent::Stop, None)), ["stop.sh"]);
        assert!(set.has(HookEvent::Stop) && !set.has(HookEvent::PostCompact));
    }
}
