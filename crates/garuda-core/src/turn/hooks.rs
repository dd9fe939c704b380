//! Hook events of a live session: the input a hook reads, the `turn/update` events that show
//! them, and the notes their output becomes. What each outcome does to the flow (a denied
//! call, a refused prompt, a continued turn) is decided where the event happens.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use crate::hooks::{EventData, HookEvent, HookInput, HookOutcome, PermissionDecision};
use crate::message::{Block, Role};
use crate::session::records::{MessageMeta, MessageRecord, Record};

use super::TurnError;
use super::events::{HookPhase, TurnEvent};
use super::host::TurnHost;
use super::live::{LiveSession, SessionState};

/// Runs the session's hooks for `data` (nothing when none matches), telling the client when
/// they start and how they end.
pub(crate) async fn fire(
    session: &LiveSession,
    host: &dyn TurnHost,
    transcript: Option<PathBuf>,
    data: EventData,
    cancel: &CancellationToken,
) -> HookOutcome {
    let hooks = &session.setup.hooks;
    let event = data.event();
    let input = HookInput {
        session_id: session.id.clone(),
        transcript_path: transcript,
        cwd: session.setup.workspace.root.path().to_path_buf(),
        permission_mode: Some(crate::hooks::permission_mode(session.policy()).to_string()),
        data,
    };
    let subject = input.subject().map(str::to_string);
    if hooks.matching(event, subject.as_deref()).is_empty() {
        return HookOutcome::none(event);
    }
    let say = |phase: HookPhase, message: Option<String>| {
        host.event(
            &session.id,
            TurnEvent::Hook {
                event: event.name().to_string(),
                phase,
                subject: subject.clone(),
                message,
            },
        );
    };
    say(HookPhase::Started, None);
    let outcome = hooks.run(&input, cancel).await;
    for w in &outcome.warnings {
        tracing::warn!(target: "garuda::hooks", "{} hook: {w}", event.name());
        say(HookPhase::Failed, Some(w.clone()));
    }
    let denied = outcome.permission == Some(PermissionDecision::Deny);
    let messages = outcome.system_messages.join("\n");
    match (&outcome.block, denied) {
        (Some(reason), _) => say(HookPhase::Blocked, Some(reason.clone())),
        (None, true) => say(HookPhase::Blocked, outcome.permission_reason.clone()),
        _ => say(
            HookPhase::Finished,
            (!messages.is_empty()).then_some(messages),
        ),
    }
    outcome
}

/// Runs hooks whose outcome changes nothing (SessionEnd, Notification, InstructionsLoaded)
/// without holding up the caller.
pub(crate) fn fire_and_forget(session: &std::sync::Arc<LiveSession>, data: EventData) {
    let event = data.event();
    if !session.setup.hooks.has(event) {
        return;
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        tracing::debug!(target: "garuda::hooks", "no runtime: {} hooks not run", event.name());
        return;
    };
    let session = session.clone();
    rt.spawn(async move {
        let host = super::host::NullHost;
        let cancel = CancellationToken::new();
        let _ = fire(&session, &host, None, data, &cancel).await;
    });
}

/// The text of a hook's context for the model, marked as coming from the user's hooks.
pub(crate) fn context_note(event: HookEvent, text: &str) -> String {
    format!(
        "<garuda_note>Context from the user's {} hook:\n{text}</garuda_note>",
        event.name()
    )
}

/// Appends a hook's context as a note of its own (meta `hook_context`).
pub(crate) fn append_context(
    state: &mut SessionState,
    event: HookEvent,
    text: &str,
) -> Result<(), TurnError> {
    let mut note = MessageRecord::new(
        Role::User,
        vec![Block::text(context_note(event, text))],
        state.last_message_id(),
    );
    note.meta = Some(MessageMeta::HookContext);
    state.append(vec![Record::Message(note)])?;
    Ok(())
}

/// Before a prompt reaches the model: the SessionStart hooks a live session has not run yet
/// (their context becomes a note), then UserPromptSubmit (a block refuses the prompt, which is
/// not recorded; context joins the prompt).
pub(crate) async fn before_prompt(
    session: &std::sync::Arc<LiveSession>,
    state: &mut SessionState,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
    mut input: Vec<Block>,
) -> Result<Vec<Block>, TurnError> {
    let transcript = Some(state.file.path().to_path_buf());
    let start = session.take_start_hooks();
    // An agent's sub-session is part of its caller's session: SubagentStart in place of
    // SessionStart, once, when its call starts it (a sub-session loaded again to go on has
    // its task in the transcript already: `Resume`).
    if let (Some(role), Some(link)) = (&session.setup.role, &session.header.parent) {
        if start == Some(crate::hooks::SessionSource::Startup) {
            let data = EventData::SubagentStart {
                agent_type: role.name.clone(),
                agent_id: session.id.clone(),
                parent_session_id: link.session_id.clone(),
            };
            let out = fire(session, host, transcript.clone(), data, cancel).await;
            if let Some(text) = out.context_text() {
                append_context(state, HookEvent::SubagentStart, &text)?;
            }
        }
    } else if let Some(source) = start {
        let data = EventData::SessionStart {
            source,
            model: Some(session.model_spec()),
        };
        let out = fire(session, host, transcript.clone(), data, cancel).await;
        if let Some(text) = out.context_text() {
            append_context(state, HookEvent::SessionStart, &text)?;
        }
        instructions_loaded(session, "session_start", &[]);
    }
    // An agent's task is not the user's prompt: the caller's prompt went through the hooks.
    if session.is_agent() || !session.setup.hooks.has(HookEvent::UserPromptSubmit) {
        return Ok(input);
    }
    let prompt: Vec<&str> = input
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let data = EventData::UserPromptSubmit {
        prompt: prompt.join("\n"),
    };
    let out = fire(session, host, transcript, data, cancel).await;
    if let Some(reason) = out.block.clone().or(out.stop.clone()) {
        return Err(TurnError::Blocked(reason));
    }
    if let Some(text) = out.context_text() {
        input.push(Block::text(context_note(
            HookEvent::UserPromptSubmit,
            &text,
        )));
    }
    Ok(input)
}

/// InstructionsLoaded for every instruction file of the system prompt and every nested file
/// or path-scoped rule in `scoped` (root-relative paths the view carries again), without
/// waiting. Reasons: `session_start`, `compact` (a reload re-reads all of them).
pub(crate) fn instructions_loaded(
    session: &std::sync::Arc<LiveSession>,
    reason: &str,
    scoped: &[String],
) {
    if !session.setup.hooks.has(HookEvent::InstructionsLoaded) {
        return;
    }
    let top = session
        .prompt()
        .sources
        .iter()
        .filter(|s| s.in_force)
        .map(|s| s.path.clone())
        .collect::<Vec<_>>();
    for path in top.iter().chain(scoped) {
        announce(session, path, reason);
    }
}

/// InstructionsLoaded for nested files and rules a scoped note just brought into force.
pub(crate) fn scoped_loaded(session: &std::sync::Arc<LiveSession>, loaded: &[(String, &str)]) {
    if !session.setup.hooks.has(HookEvent::InstructionsLoaded) {
        return;
    }
    for (path, reason) in loaded {
        announce(session, path, reason);
    }
}

/// One InstructionsLoaded, without waiting (`path` root-relative, or absolute for the user's
/// own file).
fn announce(session: &std::sync::Arc<LiveSession>, path: &str, reason: &str) {
    let global = std::path::Path::new(path).is_absolute();
    fire_and_forget(
        session,
        EventData::InstructionsLoaded {
            file_path: session.setup.workspace.root.path().join(path),
            memory_type: if global { "User" } else { "Project" }.to_string(),
            load_reason: reason.to_string(),
        },
    );
}

/// Why a PreToolUse outcome stops the call (a block or a deny), when it does.
pub(crate) fn denied(out: &HookOutcome) -> Option<String> {
    if let Some(reason) = &out.block {
        return Some(reason.clone());
    }
    (out.permission == Some(PermissionDecision::Deny)).then(|| {
        out.permission_reason
            .clone()
            .unwrap_or_else(|| "the user's rules forbid this call".to_string())
    })
}

/// True when a call really ran (PostToolUse is about calls that ran, not refused ones).
pub(crate) fn ran(out: &crate::tools::ToolOutput) -> bool {
    use crate::tools::Approval;
    !out.meta.blocked_by_hook
        && !out.meta.blocked_by_plan_mode
        && !out.meta.cancelled
        && !matches!(
            out.meta.approval,
            Some(
                Approval::Rejected | Approval::TimedOut | Approval::Failed | Approval::Unavailable
            )
        )
}

/// A PostToolUse outcome for the model: a block's reason as `<hook_feedback>`, context as a
/// note, both after the tool's own result.
pub(crate) fn add_feedback(out: &mut crate::tools::ToolOutput, post: &HookOutcome) {
    if let Some(reason) = &post.block {
        out.content
            .push_str(&format!("\n\n<hook_feedback>{reason}</hook_feedback>"));
    }
    if let Some(text) = post.context_text() {
        out.content.push_str(&format!(
            "\n\n{}",
            context_note(HookEvent::PostToolUse, &text)
        ));
    }
}

/// The Stop hooks at the end of a turn: true when one blocked, after its reason was appended
/// as a note for the model to act on.
pub(crate) async fn stop_blocks(
    session: &std::sync::Arc<LiveSession>,
    state: &mut SessionState,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
    response: &crate::provider::ModelResponse,
    active: bool,
) -> Result<bool, TurnError> {
    // An agent's end is its SubagentStop (its report goes back to its caller, whose own
    // end the Stop hooks judge).
    let agent = session
        .setup
        .role
        .as_ref()
        .zip(session.header.parent.as_ref());
    let event = match agent {
        Some(_) => HookEvent::SubagentStop,
        None => HookEvent::Stop,
    };
    if !session.setup.hooks.has(event) {
        return Ok(false);
    }
    let last: Vec<&str> = response
        .content
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let last_assistant_message = (!last.is_empty()).then(|| last.join("\n"));
    let transcript = Some(state.file.path().to_path_buf());
    let data = match agent {
        Some((role, link)) => EventData::SubagentStop {
            stop_hook_active: active,
            agent_type: role.name.clone(),
            agent_id: session.id.clone(),
            parent_session_id: link.session_id.clone(),
            agent_transcript_path: transcript.clone(),
            last_assistant_message,
        },
        None => EventData::Stop {
            stop_hook_active: active,
            last_assistant_message,
        },
    };
    let out = fire(session, host, transcript, data, cancel).await;
    let Some(reason) = out.block else {
        return Ok(false);
    };
    let text = match agent {
        Some(_) => format!(
            "<garuda_note>A SubagentStop hook of the user's asks you to go on before ending \
             your report:\n{reason}</garuda_note>"
        ),
        None => format!(
            "<garuda_note>A Stop hook of the user's asks you to go on before ending your \
             turn:\n{reason}</garuda_note>"
        ),
    };
    let mut note = MessageRecord::new(Role::User, vec![Block::text(text)], state.last_message_id());
    note.meta = Some(MessageMeta::HookContext);
    state.append(vec![Record::Message(note)])?;
    Ok(true)
}

/// A session leaving memory runs its SessionEnd hooks: here, beside the other firings, so the
/// session state need not import the hooks.
impl LiveSession {
    /// The session leaves memory (`close`, `delete`, `evicted`): its SessionEnd hooks run,
    /// without holding up the caller.
    pub fn ended(self: &std::sync::Arc<Self>, reason: &str) {
        // Its background requests and idle timer end with it.
        self.background.stop();
        if self.is_agent() {
            return;
        }
        fire_and_forget(
            self,
            crate::hooks::EventData::SessionEnd {
                reason: reason.to_string(),
            },
        );
    }

    /// The process exits with the session in memory: its SessionEnd hooks run (reason
    /// `exit`) and the caller waits for them, so a cleanup hook is not cut off by the exit.
    pub async fn end_at_exit(self: &std::sync::Arc<Self>) {
        let data = crate::hooks::EventData::SessionEnd {
            reason: "exit".to_string(),
        };
        if self.is_agent() || !self.setup.hooks.has(data.event()) {
            return;
        }
        let cancel = tokio_util::sync::CancellationToken::new();
        let _ = fire(self, &super::host::NullHost, None, data, &cancel).await;
    }
}
