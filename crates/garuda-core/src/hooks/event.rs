//! The events a hook can be attached to, by the names Claude Code gives them.

/// A point in a session where hooks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookEvent {
    /// A session started, resumed, or restarted after a compaction (`source`).
    SessionStart,
    /// The user sent a prompt, before the model sees it.
    UserPromptSubmit,
    /// The model asked for a tool call, before it runs (and before any approval).
    PreToolUse,
    /// A tool call finished.
    PostToolUse,
    /// A compaction is about to summarize (`trigger`: `manual` or `auto`).
    PreCompact,
    /// A compaction installed its summary.
    PostCompact,
    /// The model ended its turn.
    Stop,
    /// The session ends.
    SessionEnd,
    /// Garuda waits for the user (an approval).
    Notification,
    /// An instruction file came into force.
    InstructionsLoaded,
    /// An agent's sub-session starts its task (`agent_type`: the agent's name).
    SubagentStart,
    /// An agent's sub-session ended its report (its Stop; `agent_type`).
    SubagentStop,
}

/// Claude Code events Garuda has no moment for: hooks on them are listed as skipped, not
/// refused, so a Claude Code settings file imports whole.
pub const CLAUDE_ONLY_EVENTS: &[&str] = &[
    "PermissionRequest",
    "PermissionDenied",
    "PostToolUseFailure",
    "Setup",
    "TeammateIdle",
    "TaskCompleted",
    "ConfigChange",
    "WorktreeCreate",
    "WorktreeRemove",
    "Elicitation",
    "ElicitationResult",
];

impl HookEvent {
    /// Every event, in the order the docs list them.
    pub const ALL: [HookEvent; 12] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PreCompact,
        HookEvent::PostCompact,
        HookEvent::Stop,
        HookEvent::SessionEnd,
        HookEvent::Notification,
        HookEvent::InstructionsLoaded,
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
    ];

    /// The event's name in config files and in `hook_event_name`.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::PostCompact => "PostCompact",
            HookEvent::Stop => "Stop",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::Notification => "Notification",
            HookEvent::InstructionsLoaded => "InstructionsLoaded",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::SubagentStop => "SubagentStop",
        }
    }

    /// The event named `name` (case-sensitive, as Claude Code spells it).
    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.name() == name)
    }

    /// True for the events whose matcher is over tool names.
    pub fn is_tool_event(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::PostToolUse)
    }

    /// False for the events that have nothing to match (a matcher there is ignored, as
    /// Claude Code ignores it).
    pub fn uses_matcher(self) -> bool {
        !matches!(self, HookEvent::UserPromptSubmit | HookEvent::Stop)
    }

    /// True when exit code 2 (or `decision: "block"`) has an effect: the call, prompt,
    /// compaction or stop is refused, or (PostToolUse) the reason reaches the model.
    pub fn can_block(self) -> bool {
        matches!(
            self,
            HookEvent::UserPromptSubmit
                | HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::PreCompact
                | HookEvent::Stop
                | HookEvent::SubagentStop
        )
    }

    /// True when a hook's plain stdout (not JSON) is text for the model: context for
    /// SessionStart, SubagentStart and UserPromptSubmit, summary instructions for PreCompact.
    pub fn plain_stdout_is_context(self) -> bool {
        matches!(
            self,
            HookEvent::SessionStart
                | HookEvent::SubagentStart
                | HookEvent::UserPromptSubmit
                | HookEvent::PreCompact
        )
    }
}

impl std::fmt::Display for HookEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in HookEvent::ALL {
            assert_eq!(HookEvent::parse(e.name()), Some(e));
        }
        assert_eq!(HookEvent::parse("pretooluse"), None);
        assert!(
            CLAUDE_ONLY_EVENTS
                .iter()
                .all(|n| HookEvent::parse(n).is_none())
        );
    }
}
