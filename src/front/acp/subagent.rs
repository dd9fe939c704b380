//! An agent's sub-session as an ACP child session (the client capability `subagents`): the
//! updates that announce it and hand it its task, and those that bring its report back and
//! say it is idle. Pure: each function returns `(session, update)` pairs in sending order.

use agent_client_protocol_schema::v1 as acp;
use garuda_core::turn::AgentMark;

use super::convert;

/// Most characters of the task shown as the child's description.
const DESCRIPTION_CHARS: usize = 200;

/// Where and what to send.
pub type Routed = (String, acp::SessionUpdate);

/// The id of the task message in the child's transcript.
fn task_id(agent: &AgentMark) -> String {
    format!("{}-task", agent.session_id)
}

/// The id of the report message in the parent's transcript.
fn report_id(agent: &AgentMark) -> String {
    format!("{}-report", agent.session_id)
}

/// The task's first line, cut, with format characters escaped: a display title only.
fn description(task: &str) -> String {
    let line = task.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let shown: String = line.trim().chars().take(DESCRIPTION_CHARS).collect();
    garuda_core::text::escape_format_chars(&shown).into_owned()
}

/// The child announced on the session that started it (running), then its task as a
/// message from that session, in the child's own transcript.
pub fn started(agent: &AgentMark, task: &str) -> Vec<Routed> {
    let parent = &agent.parent_session_id;
    let child = &agent.session_id;
    let announce = acp::SubagentUpdate::new(child.clone())
        .title(agent.name.clone())
        .description(description(task))
        .state(acp::StateUpdate::Running(acp::RunningStateUpdate::new()));
    let message = acp::SessionMessage::new(task_id(agent))
        .sender_session_id(acp::SessionId::new(parent.clone()))
        .recipient_session_id(acp::SessionId::new(child.clone()));
    let chunk = acp::SessionMessageChunk::new(task_id(agent), convert::text(task));
    vec![
        (parent.clone(), acp::SessionUpdate::SubagentUpdate(announce)),
        (child.clone(), acp::SessionUpdate::SessionMessage(message)),
        (
            child.clone(),
            acp::SessionUpdate::SessionMessageChunk(chunk),
        ),
    ]
}

/// The child's report as a message from it in the parent's transcript, then the child idle
/// (with the error stop reason when its call failed).
pub fn finished(agent: &AgentMark, report: &str, failed: bool) -> Vec<Routed> {
    let parent = &agent.parent_session_id;
    let child = &agent.session_id;
    let message = acp::SessionMessage::new(report_id(agent))
        .sender_session_id(acp::SessionId::new(child.clone()))
        .recipient_session_id(acp::SessionId::new(parent.clone()));
    let chunk = acp::SessionMessageChunk::new(report_id(agent), convert::text(report));
    let stop = if failed {
        acp::IdleStopReason::Error(acp::ErrorStopReason::default())
    } else {
        acp::IdleStopReason::EndTurn
    };
    let idle = acp::SubagentUpdate::new(child.clone()).state(acp::StateUpdate::Idle(
        acp::IdleStateUpdate::new().stop_reason(stop),
    ));
    vec![
        (parent.clone(), acp::SessionUpdate::SessionMessage(message)),
        (
            parent.clone(),
            acp::SessionUpdate::SessionMessageChunk(chunk),
        ),
        (parent.clone(), acp::SessionUpdate::SubagentUpdate(idle)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn mark() -> AgentMark {
        AgentMark {
            name: "explore".into(),
            session_id: "child".into(),
            tool_call_id: "call".into(),
            parent_session_id: "parent".into(),
        }
    }

    fn j(u: &Routed) -> (String, Value) {
        (u.0.clone(), serde_json::to_value(&u.1).unwrap())
    }

    #[test]
    fn the_child_is_announced_on_its_parent_before_its_task() {
        let out: Vec<_> = started(&mark(), "Find the config loader.\nThen report.")
            .iter()
            .map(j)
            .collect();
        assert_eq!(out[0].0, "parent");
        assert_eq!(
            out[0].1,
            json!({"sessionUpdate": "subagent_update", "sessionId": "child", "title": "explore",
                   "description": "Find the config loader.", "state": {"state": "running"}})
        );
        assert_eq!(out[1].0, "child");
        assert_eq!(
            out[1].1,
            json!({"sessionUpdate": "session_message", "messageId": "child-task",
                   "senderSessionId": "parent", "recipientSessionId": "child"})
        );
        assert_eq!(out[2].1["sessionUpdate"], "session_message_chunk");
        assert_eq!(
            out[2].1["content"]["text"],
            "Find the config loader.\nThen report."
        );
    }

    #[test]
    fn the_report_comes_back_then_the_child_is_idle() {
        let out: Vec<_> = finished(&mark(), "Found it.", false)
            .iter()
            .map(j)
            .collect();
        assert!(out.iter().all(|(s, _)| s == "parent"));
        assert_eq!(out[0].1["senderSessionId"], "child");
        assert_eq!(out[1].1["content"]["text"], "Found it.");
        assert_eq!(
            out[2].1,
            json!({"sessionUpdate": "subagent_update", "sessionId": "child",
                   "state": {"state": "idle", "stopReason": "end_turn"}})
        );
        let failed: Vec<_> = finished(&mark(), "x", true).iter().map(j).collect();
        assert_eq!(failed[2].1["state"]["stopReason"], "error");
    }

    #[test]
    fn the_description_is_one_visible_line() {
        assert_eq!(description("\n  a\u{202e}b  \nc"), "a\\u{202e}b");
        assert_eq!(description(&"x".repeat(500)).len(), DESCRIPTION_CHARS);
    }
}
