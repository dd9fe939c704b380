//! Plan mode in a turn: a call that is not read-only is refused without asking; the model
//! hears the mode in a `<garuda_note>` (never in the system prompt, whose bytes stay); its
//! `exit_plan_mode` call asks the user to approve the plan and, approved, switches the
//! session to the mode the user picked; the approved plan is kept in the transcript and
//! comes back after a compaction.

use std::sync::Arc;

use serde_json::Value;

use super::events::{PermissionAnswer, PermissionRequest, TurnEvent};
use super::host::TurnHost;
use super::live::{LiveSession, SessionState, TurnError};
use crate::message::{Block, Role};
use crate::session::records::{MessageMeta, MessageRecord, Record};
use crate::tools::{self, Approval, Policy, ToolContext, ToolEntry, ToolMeta, ToolOutput};

/// What the model reads for a call plan mode refused.
pub const PLAN_REFUSED: &str = "Plan mode is on, so this call was refused without asking the \
user: only tools that change nothing run until the user approves a plan. Do not retry it or \
reach the same result another way. Read what you still need, then present your plan with \
exit_plan_mode.";

const NOTE_ON_HEAD: &str = "<garuda_note>Plan mode is on:";

/// The note saying plan mode is on.
pub fn plan_on_note() -> String {
    format!(
        "{NOTE_ON_HEAD} the user wants a plan before anything changes. Only tools that change \
         nothing run (reading, listing, searching, the todo list); an edit, a command or a \
         memory write is refused without asking. Read what you need, then present your plan \
         with exit_plan_mode: the user approves it before you carry it out.</garuda_note>"
    )
}

/// The note saying plan mode ended (the user switched the mode) and what runs now.
pub fn plan_off_note(policy: Policy) -> String {
    format!(
        "<garuda_note>Plan mode is off: the session is in {} mode ({}), and tools run under \
         that approval policy again.</garuda_note>",
        policy.name(),
        what_runs(policy)
    )
}

/// What runs without asking under `policy`, for the model.
fn what_runs(policy: Policy) -> &'static str {
    match policy {
        Policy::Ask => "every edit, command and memory write asks the user first",
        Policy::AutoEdit => "edits run without asking; commands ask",
        Policy::FullAuto => "edits and commands run without asking",
        Policy::Plan => "only tools that change nothing run",
    }
}

/// The refusal of a call plan mode does not run.
pub(super) fn refused() -> ToolOutput {
    ToolOutput::error(PLAN_REFUSED).with_meta(ToolMeta {
        blocked_by_plan_mode: true,
        ..Default::default()
    })
}

/// Before a request: the note the model needs when plan mode started or ended since it last
/// heard (a client switched the mode, a compaction dropped the note, a session loaded again).
pub(super) fn mode_note(session: &LiveSession, state: &mut SessionState) -> Result<(), TurnError> {
    let Some(on) = session.take_plan_note() else {
        return Ok(());
    };
    let text = if on {
        plan_on_note()
    } else {
        plan_off_note(session.policy())
    };
    let mut note = MessageRecord::new(Role::User, vec![Block::text(text)], state.last_message_id());
    note.meta = Some(MessageMeta::PlanNote);
    state.append(vec![Record::Message(note)])?;
    Ok(())
}

/// True for a note saying plan mode is on.
fn is_on_note(m: &MessageRecord) -> bool {
    m.meta == Some(MessageMeta::PlanNote)
        && m.content
            .iter()
            .any(|b| matches!(b, Block::Text { text } if text.starts_with(NOTE_ON_HEAD)))
}

/// Whether the model last heard that plan mode is on, from a transcript: the latest plan
/// note since the last compaction says so, and no plan was approved after it.
pub(crate) fn heard_in(records: &[Record]) -> bool {
    for r in records.iter().rev() {
        match r {
            Record::CompactBoundary(_) => return false,
            Record::Message(m) if m.meta == Some(MessageMeta::Plan) => return false,
            Record::Message(m) if m.meta == Some(MessageMeta::PlanNote) => return is_on_note(m),
            _ => {}
        }
    }
    false
}

/// The plan the user approved last, from a transcript, with its record's index.
fn approved_at(records: &[Record]) -> Option<(usize, String)> {
    records.iter().enumerate().rev().find_map(|(i, r)| match r {
        Record::Message(m) if m.meta == Some(MessageMeta::Plan) => {
            m.content.iter().find_map(|b| match b {
                Block::Text { text } => Some((i, text.clone())),
                _ => None,
            })
        }
        _ => None,
    })
}

/// The plan the user approved last, from a transcript.
#[cfg(test)]
pub(crate) fn approved(records: &[Record]) -> Option<String> {
    approved_at(records).map(|(_, plan)| plan)
}

/// The approved plan while it is current, for restoration after a compaction: the plan the
/// user approved last (a later approval replaces it), unless since its approval plan mode
/// was entered again (`plan_mode` now, or a plan-mode note after it: a new plan is in the
/// making) or the todo list written after it has every item completed (the work it planned
/// is done). `tools` tells the todo tool's calls.
pub(crate) fn current(
    records: &[Record],
    tools: &tools::ToolRegistry,
    plan_mode: bool,
) -> Option<String> {
    if plan_mode {
        return None;
    }
    let (at, plan) = approved_at(records)?;
    let after = &records[at + 1..];
    let replanning = after
        .iter()
        .any(|r| matches!(r, Record::Message(m) if is_on_note(m)));
    let todos = super::todo::replay(after, tools);
    let done = !todos.is_empty()
        && todos
            .iter()
            .all(|t| t.status == crate::tools::TodoStatus::Completed);
    (!replanning && !done).then_some(plan)
}

/// After a step's results: the plan approved in it joins the transcript, display-only (the
/// model has it in its own call; it is what a compaction restores).
pub(super) fn record_approved(state: &mut SessionState) -> Result<(), TurnError> {
    let Some(plan) = state.approved_plan.take() else {
        return Ok(());
    };
    let mut m = MessageRecord::new(Role::User, vec![Block::text(plan)], state.last_message_id());
    m.meta = Some(MessageMeta::Plan);
    m.is_virtual = true;
    state.append(vec![Record::Message(m)])?;
    Ok(())
}

/// An `exit_plan_mode` call: refused outside plan mode; in it, the user is asked to approve
/// the plan through the permission request and picks the mode the work runs in.
pub(super) async fn exit(
    session: &Arc<LiveSession>,
    state: &mut SessionState,
    host: &dyn TurnHost,
    ctx: &ToolContext,
    id: &str,
    entry: &ToolEntry,
    input: &Value,
) -> ToolOutput {
    let policy = session.policy();
    if policy != Policy::Plan {
        return ToolOutput::error(format!(
            "{} is only for plan mode, and the session is in {} mode: nothing was asked. Go on \
             with the task.",
            tools::PLAN_TOOL,
            policy.name()
        ));
    }
    let plan = match tools::plan_in(input) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    let title = entry.approval_title(input, None);
    let notice = format!("Garuda needs your approval of a plan: {title}");
    let req = PermissionRequest {
        session_id: session.id.clone(),
        tool_call_id: id.to_string(),
        tool_name: entry.spec.name.clone(),
        title,
        input: input.clone(),
        options: PermissionRequest::plan_options(),
        agent: None,
        // The plan is what the person approves: shown with format characters escaped, as
        // the title is (`input.plan` keeps the model's exact text).
        plan: Some(crate::text::escape_format_chars(&plan).into_owned()),
    };
    let Some(answer) = super::ask::ask_person(session, host, &ctx.cancel, req, notice).await else {
        return super::ask::interrupted();
    };
    let with = |out: ToolOutput, approval: Approval| {
        out.with_meta(ToolMeta {
            approval: Some(approval),
            ..Default::default()
        })
    };
    let mode = match answer {
        PermissionAnswer::Mode(Policy::Plan) | PermissionAnswer::Reject => {
            return with(
                ToolOutput::error(
                    "The user did not approve the plan, so the session stays in plan mode. Ask \
                     what they would change, or end your turn; do not present the same plan \
                     again.",
                ),
                Approval::Rejected,
            );
        }
        PermissionAnswer::RejectWith(words) => {
            return with(
                ToolOutput::error(format!(
                    "The user did not approve the plan and said:\n{words}\nThe session stays in \
                     plan mode: revise the plan with this in mind and present it again with {}.",
                    tools::PLAN_TOOL
                )),
                Approval::Rejected,
            );
        }
        PermissionAnswer::TimedOut | PermissionAnswer::Failed | PermissionAnswer::Unavailable => {
            let approval = match answer {
                PermissionAnswer::TimedOut => Approval::TimedOut,
                PermissionAnswer::Failed => Approval::Failed,
                _ => Approval::Unavailable,
            };
            return with(
                ToolOutput::error(
                    "Nobody answered the plan's approval request, so the session stays in plan \
                     mode. This is not a refusal: end your turn saying the plan waits for the \
                     user's approval.",
                ),
                approval,
            );
        }
        // A plain allow (a client that answers every request the same way) approves into
        // the first mode offered.
        PermissionAnswer::AllowOnce | PermissionAnswer::AllowAlways => Policy::AutoEdit,
        PermissionAnswer::Mode(p) => p,
    };
    session.set_policy(mode);
    // The result says so; no note is due.
    session.plan_noted(false);
    state.approved_plan = Some(plan);
    host.event(&session.id, TurnEvent::ModeChanged { policy: mode });
    with(
        ToolOutput::ok(format!(
            "The user approved your plan. Plan mode is off: the session is in {} mode ({}). \
             Carry out the plan now.",
            mode.name(),
            what_runs(mode)
        )),
        Approval::Allowed,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(meta: MessageMeta, text: &str) -> Record {
        let mut m = MessageRecord::new(Role::User, vec![Block::text(text)], None);
        m.meta = Some(meta);
        Record::Message(m)
    }

    #[test]
    fn what_the_model_heard_last() {
        assert!(!heard_in(&[]));
        let on = message(MessageMeta::PlanNote, &plan_on_note());
        let off = message(MessageMeta::PlanNote, &plan_off_note(Policy::Ask));
        let plan = message(MessageMeta::Plan, "1. do it");
        assert!(heard_in(std::slice::from_ref(&on)));
        assert!(!heard_in(&[on.clone(), off.clone()]));
        assert!(!heard_in(&[on.clone(), plan.clone()]));
        assert!(heard_in(&[off, on.clone()]));
        assert_eq!(approved(&[plan, on]), Some("1. do it".into()));
    }

    fn todo_call(statuses: &[&str]) -> Record {
        let todos: Vec<Value> = statuses
            .iter()
            .enumerate()
            .map(|(i, s)| serde_json::json!({"content": format!("step {i}"), "status": s}))
            .collect();
        let call = Block::ToolUse {
            id: format!("t{}", statuses.len()),
            name: "todo_write".into(),
            input: serde_json::json!({ "todos": todos }),
        };
        Record::Message(MessageRecord::new(Role::Assistant, vec![call], None))
    }

    #[test]
    fn the_approved_plan_is_current_until_replaced_replanned_or_done() {
        let tools = tools::ToolRegistry::builtins();
        let plan = |t: &str| message(MessageMeta::Plan, t);
        let on = message(MessageMeta::PlanNote, &plan_on_note());
        let cur = |records: &[Record]| current(records, &tools, false);
        assert_eq!(cur(&[]), None);
        assert_eq!(cur(&[plan("A")]), Some("A".into()));
        // Work under way: still current.
        let doing = [plan("A"), todo_call(&["completed", "in_progress"])];
        assert_eq!(cur(&doing), Some("A".into()));
        // Every item of the list written after the approval is done: no more.
        let done = [plan("A"), todo_call(&["completed", "completed"])];
        assert_eq!(cur(&done), None);
        // A list finished before the approval says nothing about this plan.
        let before = [todo_call(&["completed"]), plan("A")];
        assert_eq!(cur(&before), Some("A".into()));
        // A later plan replaces it, and is current itself.
        let replaced = [plan("A"), todo_call(&["completed"]), plan("B")];
        assert_eq!(cur(&replaced), Some("B".into()));
        // Plan mode entered again: a new plan is in the making.
        assert_eq!(cur(&[plan("A"), on]), None);
        assert_eq!(current(&[plan("A")], &tools, true), None);
    }
}
