//! What a hook reads on stdin: one JSON object with Claude Code's field names.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::HookEvent;

/// Why a session started (SessionStart's `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionSource {
    /// A new session.
    Startup,
    /// A loaded session continues.
    Resume,
    /// The context was just rebuilt by a compaction.
    Compact,
}

impl SessionSource {
    /// The value hooks see and matchers match.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionSource::Startup => "startup",
            SessionSource::Resume => "resume",
            SessionSource::Compact => "compact",
        }
    }
}

/// The approval policy in Claude Code's words, for `permission_mode`.
pub fn permission_mode(policy: crate::tools::Policy) -> &'static str {
    match policy {
        crate::tools::Policy::Ask => "default",
        crate::tools::Policy::AutoEdit => "acceptEdits",
        crate::tools::Policy::FullAuto => "bypassPermissions",
        crate::tools::Policy::Plan => "plan",
    }
}

/// What started a compaction (PreCompact's and PostCompact's `trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactTrigger {
    /// The user or client asked (`session/compact`).
    Manual,
    /// The context grew past the threshold.
    Auto,
}

impl CompactTrigger {
    /// The value hooks see and matchers match.
    pub fn as_str(self) -> &'static str {
        match self {
            CompactTrigger::Manual => "manual",
            CompactTrigger::Auto => "auto",
        }
    }
}

/// The event-specific part of a hook's input.
#[derive(Debug, Clone, PartialEq)]
pub enum EventData {
    /// SessionStart.
    SessionStart {
        /// Why the session started.
        source: SessionSource,
        /// The session's model spec.
        model: Option<String>,
    },
    /// UserPromptSubmit.
    UserPromptSubmit {
        /// The user's text.
        prompt: String,
    },
    /// PreToolUse.
    PreToolUse {
        /// Garuda's tool name (hooks imported from Claude Code see Claude Code's name).
        tool_name: String,
        /// The call's input.
        tool_input: Value,
        /// The call's id.
        tool_use_id: String,
    },
    /// PostToolUse.
    PostToolUse {
        /// Garuda's tool name (hooks imported from Claude Code see Claude Code's name).
        tool_name: String,
        /// The call's input.
        tool_input: Value,
        /// What the tool answered.
        tool_response: Value,
        /// The call's id.
        tool_use_id: String,
    },
    /// PreCompact.
    PreCompact {
        /// Manual or automatic.
        trigger: CompactTrigger,
        /// The user's own instructions for this summary (empty when none).
        custom_instructions: String,
    },
    /// PostCompact.
    PostCompact {
        /// Manual or automatic.
        trigger: CompactTrigger,
        /// The summary installed.
        compact_summary: String,
    },
    /// Stop.
    Stop {
        /// True when the turn already continued because a Stop hook blocked.
        stop_hook_active: bool,
        /// The model's last text, when it has one.
        last_assistant_message: Option<String>,
    },
    /// SessionEnd.
    SessionEnd {
        /// Why (`clear`, `logout`, `prompt_input_exit`, `other`, …; Garuda says `close`,
        /// `shutdown`, `evicted` or `other`).
        reason: String,
    },
    /// Notification.
    Notification {
        /// What the user is told.
        message: String,
        /// `permission_prompt` for an approval.
        notification_type: String,
    },
    /// InstructionsLoaded.
    InstructionsLoaded {
        /// The file, absolute.
        file_path: PathBuf,
        /// `Project`, `User`, `Local` or `Rule` (Claude Code's memory types), or Garuda's source
        /// name.
        memory_type: String,
        /// Why it came into force: `session_start`, `nested_traversal`, `path_glob_match`,
        /// `compact`, `changed`.
        load_reason: String,
    },
    /// SubagentStart: fired in the sub-session, before its first request.
    SubagentStart {
        /// The agent's name (what matchers match).
        agent_type: String,
        /// The sub-session's id.
        agent_id: String,
        /// The session whose call runs it.
        parent_session_id: String,
    },
    /// SubagentStop: the sub-session's Stop.
    SubagentStop {
        /// True when the agent already went on because a SubagentStop hook blocked.
        stop_hook_active: bool,
        /// The agent's name.
        agent_type: String,
        /// The sub-session's id.
        agent_id: String,
        /// The session whose call runs it.
        parent_session_id: String,
        /// The sub-session's transcript.
        agent_transcript_path: Option<PathBuf>,
        /// The agent's last text (its report), when it has one.
        last_assistant_message: Option<String>,
    },
}

impl EventData {
    /// The event this data belongs to.
    pub fn event(&self) -> HookEvent {
        match self {
            EventData::SessionStart { .. } => HookEvent::SessionStart,
            EventData::UserPromptSubmit { .. } => HookEvent::UserPromptSubmit,
            EventData::PreToolUse { .. } => HookEvent::PreToolUse,
            EventData::PostToolUse { .. } => HookEvent::PostToolUse,
            EventData::PreCompact { .. } => HookEvent::PreCompact,
            EventData::PostCompact { .. } => HookEvent::PostCompact,
            EventData::Stop { .. } => HookEvent::Stop,
            EventData::SessionEnd { .. } => HookEvent::SessionEnd,
            EventData::Notification { .. } => HookEvent::Notification,
            EventData::InstructionsLoaded { .. } => HookEvent::InstructionsLoaded,
            EventData::SubagentStart { .. } => HookEvent::SubagentStart,
            EventData::SubagentStop { .. } => HookEvent::SubagentStop,
        }
    }
}

/// One event's input, for every hook that matches it.
#[derive(Debug, Clone, PartialEq)]
pub struct HookInput {
    /// The session's id.
    pub session_id: String,
    /// The session's transcript (JSONL), when it has one on disk.
    pub transcript_path: Option<PathBuf>,
    /// The workspace root.
    pub cwd: PathBuf,
    /// The approval policy in Claude Code's words (`default`, `acceptEdits`,
    /// `bypassPermissions`), when known.
    pub permission_mode: Option<String>,
    /// The event and its fields.
    pub data: EventData,
}

impl HookInput {
    /// The event.
    pub fn event(&self) -> HookEvent {
        self.data.event()
    }

    /// What matchers are matched against: the tool name, the source, the trigger, the
    /// reason, the notification type, the load reason; None for events without one.
    pub fn subject(&self) -> Option<&str> {
        match &self.data {
            EventData::PreToolUse { tool_name, .. } | EventData::PostToolUse { tool_name, .. } => {
                Some(tool_name)
            }
            EventData::SessionStart { source, .. } => Some(source.as_str()),
            EventData::PreCompact { trigger, .. } | EventData::PostCompact { trigger, .. } => {
                Some(trigger.as_str())
            }
            EventData::SessionEnd { reason } => Some(reason),
            EventData::Notification {
                notification_type, ..
            } => Some(notification_type),
            EventData::InstructionsLoaded { load_reason, .. } => Some(load_reason),
            EventData::SubagentStart { agent_type, .. }
            | EventData::SubagentStop { agent_type, .. } => Some(agent_type),
            EventData::UserPromptSubmit { .. } | EventData::Stop { .. } => None,
        }
    }

    /// The JSON a hook reads. `claude`: for a hook imported from Claude Code, tool names and
    /// file inputs as Claude Code has them (`Bash`, `file_path`), so its scripts work as
    /// they are.
    pub fn to_json(&self, claude: bool) -> Value {
        let mut m = Map::new();
        m.insert("session_id".into(), json!(self.session_id));
        m.insert(
            "transcript_path".into(),
            json!(self.transcript_path.as_deref().map(path_str)),
        );
        m.insert("cwd".into(), json!(path_str(&self.cwd)));
        if let Some(p) = &self.permission_mode {
            m.insert("permission_mode".into(), json!(p));
        }
        m.insert("hook_event_name".into(), json!(self.event().name()));
        let tool = |name: &str| -> String {
            match crate::tools::claude_aliases(name).first() {
                Some(alias) if claude => alias.to_string(),
                _ => name.to_string(),
            }
        };
        let input = |name: &str, v: &Value| -> Value {
            if claude {
                super::claude::claude_tool_input(name, v, &self.cwd)
            } else {
                v.clone()
            }
        };
        let mut put = |k: &str, v: Value| {
            m.insert(k.into(), v);
        };
        match &self.data {
            EventData::SessionStart { source, model } => {
                put("source", json!(source.as_str()));
                if let Some(model) = model {
                    put("model", json!(model));
                }
            }
            EventData::UserPromptSubmit { prompt } => put("prompt", json!(prompt)),
            EventData::PreToolUse {
                tool_name,
                tool_input,
                tool_use_id,
            } => {
                put("tool_name", json!(tool(tool_name)));
                put("tool_input", input(tool_name, tool_input));
                put("tool_use_id", json!(tool_use_id));
            }
            EventData::PostToolUse {
                tool_name,
                tool_input,
                tool_response,
                tool_use_id,
            } => {
                put("tool_name", json!(tool(tool_name)));
                put("tool_input", input(tool_name, tool_input));
                put("tool_response", tool_response.clone());
                put("tool_use_id", json!(tool_use_id));
            }
            EventData::PreCompact {
                trigger,
                custom_instructions,
            } => {
                put("trigger", json!(trigger.as_str()));
                put("custom_instructions", json!(custom_instructions));
            }
            EventData::PostCompact {
                trigger,
                compact_summary,
            } => {
                put("trigger", json!(trigger.as_str()));
                put("compact_summary", json!(compact_summary));
            }
            EventData::Stop {
                stop_hook_active,
                last_assistant_message,
            } => {
                put("stop_hook_active", json!(stop_hook_active));
                if let Some(t) = last_assistant_message {
                    put("last_assistant_message", json!(t));
                }
            }
            EventData::SessionEnd { reason } => put("reason", json!(reason)),
            EventData::Notification {
                message,
                notification_type,
            } => {
                put("message", json!(message));
                put("notification_type", json!(notification_type));
            }
            EventData::InstructionsLoaded {
                file_path,
                memory_type,
                load_reason,
            } => {
                put("file_path", json!(path_str(file_path)));
                put("memory_type", json!(memory_type));
                put("load_reason", json!(load_reason));
            }
            EventData::SubagentStart {
                agent_type,
                agent_id,
                parent_session_id,
            } => {
                put("agent_type", json!(agent_type));
                put("agent_id", json!(agent_id));
                put("parent_session_id", json!(parent_session_id));
            }
            EventData::SubagentStop {
                stop_hook_active,
                agent_type,
                agent_id,
                parent_session_id,
                agent_transcript_path,
                last_assistant_message,
            } => {
                put("stop_hook_active", json!(stop_hook_active));
                put("agent_type", json!(agent_type));
                put("agent_id", json!(agent_id));
                put("parent_session_id", json!(parent_session_id));
                put(
                    "agent_transcript_path",
                    json!(agent_transcript_path.as_deref().map(path_str)),
                );
                if let Some(t) = last_assistant_message {
                    put("last_assistant_message", json!(t));
                }
            }
        }
        Value::Object(m)
    }
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(data: EventData) -> HookInput {
        HookInput {
            session_id: "s1".into(),
            transcript_path: Some("/state/s1.jsonl".into()),
            cwd: "/w".into(),
            permission_mode: Some("default".into()),
            data,
        }
    }

    #[test]
    fn fields_carry_claude_names() {
        let i = input(EventData::PreToolUse {
            tool_name: "edit_file".into(),
            tool_input: json!({"path": "a.rs"}),
            tool_use_id: "t1".into(),
        });
        let native = i.to_json(false);
        assert_eq!(native["hook_event_name"], "PreToolUse");
        assert_eq!(native["session_id"], "s1");
        assert_eq!(native["transcript_path"], "/state/s1.jsonl");
        assert_eq!(native["cwd"], "/w");
        assert_eq!(native["tool_name"], "edit_file");
        assert_eq!(native["tool_input"], json!({"path": "a.rs"}));
        let claude = i.to_json(true);
        assert_eq!(claude["tool_name"], "Edit");
        assert_eq!(claude["tool_input"]["file_path"], "/w/a.rs");
        assert_eq!(i.subject(), Some("edit_file"));

        let mcp = input(EventData::PostToolUse {
            tool_name: "mcp__gh__search".into(),
            tool_input: json!({}),
            tool_response: json!({"content": "x"}),
            tool_use_id: "t2".into(),
        });
        assert_eq!(mcp.to_json(true)["tool_name"], "mcp__gh__search");
        assert_eq!(mcp.to_json(true)["tool_response"]["content"], "x");

        let pc = input(EventData::PreCompact {
            trigger: CompactTrigger::Auto,
            custom_instructions: "keep the API".into(),
        });
        let j = pc.to_json(false);
        assert_eq!(
            (j["trigger"].as_str(), j["custom_instructions"].as_str()),
            (Some("auto"), Some("keep the API"))
        );
        assert_eq!(pc.subject(), Some("auto"));

        let stop = input(EventData::Stop {
            stop_hook_active: true,
            last_assistant_message: None,
        });
        assert_eq!(stop.to_json(false)["stop_hook_active"], true);
        assert_eq!(stop.subject(), None);

        let n = input(EventData::Notification {
            message: "Garuda needs your permission to use bash".into(),
            notification_type: "permission_prompt".into(),
        });
        assert_eq!(
            n.to_json(false)["message"],
            "Garuda needs your permission to use bash"
        );
        let ss = input(EventData::SessionStart {
            source: SessionSource::Compact,
            model: None,
        });
        assert_eq!(ss.to_json(false)["source"], "compact");
        assert_eq!(ss.subject(), Some("compact"));
    }
}
