//! The ACP turn host: turn events become `session/update`, approvals
//! `session/request_permission`, and, when the client offers them, edits `fs/write_text_file`
//! and commands `terminal/*`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol_schema::v1 as acp;
use futures_util::future::BoxFuture;
use serde_json::Value;

use super::convert::{self, ClientCaps};
use super::methods::{self, ClientMethod};
use super::subagent;
use crate::front::acp_permission_answer as permission_answer;
use crate::rpc::{Client, RpcError};
use garuda_core::fsroot::Root;
use garuda_core::tools::{Policy, ToolRegistry};
use garuda_core::turn::{
    AgentMark, ClientToolResult, CommandRun, HookPhase, PermissionAnswer, PermissionRequest,
    TurnEvent, TurnHost,
};

/// Relays a turn to an ACP client.
pub struct AcpHost {
    /// The connection.
    pub client: Client,
    /// The session's context window, for `usage_update`.
    pub context_window: u64,
    /// The session's tools, for the kind and file of each call.
    pub tools: ToolRegistry,
    /// The workspace root: previews of edits read through it, paths are made absolute on it.
    pub root: Arc<Root>,
    /// What the client can do.
    pub caps: ClientCaps,
    /// The session.
    pub session_id: String,
    /// The session's model and the known models: a mode change re-sends the config options
    /// they make (None: only the mode is sent).
    pub models: Option<(String, Vec<String>)>,
    /// Tool calls announced and not finished: what the permission request repeats and the
    /// content (diff, terminal) the final update keeps.
    calls: Calls,
    /// The running compaction's id.
    compaction: Mutex<Option<String>>,
    /// Each running agent's text since its last tool call, by sub-session (shown on the
    /// card of the call that runs it).
    agent_text: Mutex<HashMap<String, String>>,
    /// With `subagents`: the child session of each agent's call in flight, by call id
    /// (its status, terminal and permission request go to that session).
    agent_calls: Mutex<HashMap<String, String>>,
}

/// Most characters of an agent's text shown on the card of its call (the latest ones).
const AGENT_TEXT_CHARS: usize = 2_000;

/// The `_meta` of a relayed agent's update: `{"garuda": {"agent": {name, sessionId,
/// toolCallId}}}`.
pub fn agent_meta(agent: &AgentMark) -> acp::Meta {
    let mut meta = acp::Meta::new();
    meta.insert(
        "garuda".into(),
        serde_json::json!({"agent": {
            "name": agent.name,
            "sessionId": agent.session_id,
            "toolCallId": agent.tool_call_id,
        }}),
    );
    meta
}

/// The last `max` characters of `s`.
fn tail_chars(s: &str, max: usize) -> &str {
    let n = s.chars().count();
    match s.char_indices().nth(n.saturating_sub(max)) {
        Some((at, _)) if n > max => &s[at..],
        _ => s,
    }
}

/// Tool calls in flight by id (shared with commands running in the client's terminals).
type Calls = Arc<Mutex<HashMap<String, acp::ToolCall>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sends one `session/update` notification.
pub fn send_update(client: &Client, session_id: &str, update: acp::SessionUpdate) {
    let n = acp::SessionNotification::new(session_id.to_string(), update);
    match serde_json::to_value(n) {
        Ok(v) => client.notify(methods::SessionUpdate::NAME, v),
        Err(e) => tracing::error!("session/update not serialized: {e}"),
    }
}

/// The choices of a permission request: allow once, allow always (unless `always` is false:
/// a call that leaves the sandbox is asked for every time), reject.
fn permission_options(always: bool) -> Vec<acp::PermissionOption> {
    let mut options = vec![acp::PermissionOption::new(
        "allow_once",
        "Allow once",
        acp::PermissionOptionKind::AllowOnce,
    )];
    if always {
        options.push(acp::PermissionOption::new(
            "allow_always",
            "Allow always",
            acp::PermissionOptionKind::AllowAlways,
        ));
    }
    options.push(acp::PermissionOption::new(
        "reject_once",
        "Reject",
        acp::PermissionOptionKind::RejectOnce,
    ));
    options
}

/// The `session/request_permission` params for a call announced as `call`; `always` offers
/// "allow always".
pub fn permission_params(session_id: &str, call: acp::ToolCall, always: bool) -> Value {
    let req = acp::RequestPermissionRequest::new(
        session_id.to_string(),
        convert::tool_call_fields(call),
        permission_options(always),
    );
    serde_json::to_value(req).unwrap_or(Value::Null)
}

/// The `session/request_permission` params asking to approve `plan`: the plan is the call's
/// content, and the options are the modes the work may go on in, or keep planning.
pub fn plan_params(
    session_id: &str,
    call: acp::ToolCall,
    plan: &str,
    req: &PermissionRequest,
) -> Value {
    let call = call.content(vec![acp::ToolCallContent::from(convert::text(plan))]);
    let options = req
        .options
        .iter()
        .map(|o| {
            let kind = if o.option_id.starts_with("mode:") {
                acp::PermissionOptionKind::AllowOnce
            } else {
                acp::PermissionOptionKind::RejectOnce
            };
            acp::PermissionOption::new(o.option_id.clone(), o.name.clone(), kind)
        })
        .collect();
    let req = acp::RequestPermissionRequest::new(
        session_id.to_string(),
        convert::tool_call_fields(call),
        options,
    );
    serde_json::to_value(req).unwrap_or(Value::Null)
}

/// True when `path` (absolute, beneath the root by construction) stays beneath the root
/// once links are followed: the editor follows them when it writes.
fn stays_beneath(root: &Path, path: &Path) -> bool {
    let Ok(root) = std::fs::canonicalize(root) else {
        return false;
    };
    // A new file: its folder must resolve beneath the root.
    let probe = if path.exists() {
        path.to_path_buf()
    } else {
        match path.parent() {
            Some(p) => p.to_path_buf(),
            None => return false,
        }
    };
    std::fs::canonicalize(probe).is_ok_and(|p| p.starts_with(&root))
}

impl AcpHost {
    /// A host for one prompt turn (or slash command) of a session.
    pub fn new(
        client: Client,
        context_window: u64,
        tools: ToolRegistry,
        root: Arc<Root>,
        caps: ClientCaps,
        session_id: String,
    ) -> AcpHost {
        AcpHost {
            client,
            context_window,
            tools,
            root,
            caps,
            session_id,
            models: None,
            calls: Arc::new(Mutex::new(HashMap::new())),
            compaction: Mutex::new(None),
            agent_text: Mutex::new(HashMap::new()),
            agent_calls: Mutex::new(HashMap::new()),
        }
    }

    /// The session a call's updates go to: an agent's child session (with `subagents`),
    /// else `session_id`.
    fn call_session(&self, session_id: &str, tool_call_id: &str) -> String {
        lock(&self.agent_calls)
            .get(tool_call_id)
            .cloned()
            .unwrap_or_else(|| session_id.to_string())
    }

    /// An agent's event as its child session's own update (the `subagents` capability).
    fn child_event(&self, agent: &AgentMark, event: TurnEvent) {
        let child = &agent.session_id;
        match event {
            TurnEvent::ToolCallStarted { id, name, input } => {
                lock(&self.agent_calls).insert(id.clone(), child.clone());
                self.announce(child, id, &name, &input);
            }
            TurnEvent::ToolCallFinished {
                id,
                output,
                is_error,
                ..
            } => {
                self.finish(child, &id, &output, is_error);
                lock(&self.agent_calls).remove(&id);
            }
            TurnEvent::TextDelta { text } => {
                send_update(&self.client, child, convert::agent_text(text));
            }
            _ => {}
        }
    }

    fn announce(&self, session_id: &str, id: String, name: &str, input: &Value) {
        let preview = self.tools.preview(name, input, &self.root);
        // A tool the provider runs is under way when it is reported: nothing waits to ask.
        let on_provider = self
            .tools
            .get(name)
            .is_some_and(|e| e.spec.provider_definition().is_some());
        let call = convert::tool_call(
            &self.tools,
            self.root.path(),
            &id,
            name,
            input,
            preview.as_ref(),
            if on_provider {
                acp::ToolCallStatus::InProgress
            } else {
                acp::ToolCallStatus::Pending
            },
        );
        lock(&self.calls).insert(id, call.clone());
        send_update(&self.client, session_id, acp::SessionUpdate::ToolCall(call));
    }

    fn finish(&self, session_id: &str, id: &str, output: &str, is_error: bool) {
        // The diff of an applied edit and the terminal of a command stay on the card.
        let keep = lock(&self.calls)
            .remove(id)
            .map(|c| {
                c.content
                    .into_iter()
                    .filter(|c| {
                        (!is_error && matches!(c, acp::ToolCallContent::Diff(_)))
                            || matches!(
                                c,
                                acp::ToolCallContent::Terminal(_)
                                    | acp::ToolCallContent::Session(_)
                            )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let u = convert::tool_result(id, output, is_error, keep);
        send_update(
            &self.client,
            session_id,
            acp::SessionUpdate::ToolCallUpdate(u),
        );
    }

    fn compaction(
        &self,
        session_id: &str,
        phase: garuda_core::turn::CompactionPhase,
        message: Option<String>,
    ) {
        use garuda_core::turn::CompactionPhase as P;
        let id = {
            let mut cur = lock(&self.compaction);
            let id = cur
                .get_or_insert_with(|| uuid::Uuid::new_v4().to_string())
                .clone();
            if matches!(phase, P::Finished | P::Failed | P::Paused) {
                *cur = None;
            }
            id
        };
        if let Some(u) = convert::compaction(self.caps, &id, phase, message) {
            send_update(&self.client, session_id, u);
        }
    }
}

impl TurnHost for AcpHost {
    fn event(&self, session_id: &str, event: TurnEvent) {
        match event {
            TurnEvent::ToolCallStarted { id, name, input } => {
                self.announce(session_id, id, &name, &input)
            }
            TurnEvent::ToolCallFinished {
                id,
                output,
                is_error,
                ..
            } => self.finish(session_id, &id, &output, is_error),
            TurnEvent::Compaction { phase, message, .. } => {
                self.compaction(session_id, phase, message)
            }
            // A client that shows notices gets a hook that blocked or failed as one (a
            // warning for a failure); others get the thought line of `event_update`.
            TurnEvent::Hook {
                event,
                phase: phase @ (HookPhase::Blocked | HookPhase::Failed),
                subject,
                message,
            } if self.caps.notices => {
                let severity = match phase {
                    HookPhase::Failed => acp::NoticeSeverity::Warning,
                    _ => acp::NoticeSeverity::Info,
                };
                let what = subject.map(|s| format!(" ({s})")).unwrap_or_default();
                let title = format!("hook {event}{what} {}", phase.name());
                send_update(
                    &self.client,
                    session_id,
                    convert::notice(severity, &title, message),
                );
            }
            TurnEvent::Todos { todos } => {
                send_update(
                    &self.client,
                    session_id,
                    convert::todos_update(&todos, self.caps),
                );
            }
            // An approved plan switched the mode: a client may show it as the mode or as the
            // `mode` config option, so both are sent.
            TurnEvent::ModeChanged { policy } => {
                let mode = acp::CurrentModeUpdate::new(policy.name());
                send_update(
                    &self.client,
                    session_id,
                    acp::SessionUpdate::CurrentModeUpdate(mode),
                );
                if let Some((model, known)) = &self.models {
                    let options = convert::config_options(model, known, policy);
                    send_update(
                        &self.client,
                        session_id,
                        acp::SessionUpdate::ConfigOptionUpdate(acp::ConfigOptionUpdate::new(
                            options,
                        )),
                    );
                }
            }
            other => {
                if let Some(u) = convert::event_update(other, self.context_window) {
                    send_update(&self.client, session_id, u);
                }
            }
        }
    }

    fn agent_started(&self, _session_id: &str, agent: &AgentMark, task: &str) {
        if !self.caps.subagents {
            return;
        }
        // Announced on the session that started it, before any update naming the child.
        let parent = &agent.parent_session_id;
        let child = &agent.session_id;
        for u in subagent::started(agent, task) {
            send_update(&self.client, &u.0, u.1);
        }
        // The call that runs it links to the child, and keeps the link when it finishes.
        let link = acp::ToolCallContent::Session(acp::SessionReference::new(child.clone()));
        if let Some(call) = lock(&self.calls).get_mut(&agent.tool_call_id) {
            call.content.push(link.clone());
        }
        let u = acp::ToolCallUpdate::new(
            agent.tool_call_id.clone(),
            acp::ToolCallUpdateFields::new().content(vec![link]),
        );
        send_update(&self.client, parent, acp::SessionUpdate::ToolCallUpdate(u));
    }

    fn agent_finished(&self, _session_id: &str, agent: &AgentMark, report: &str, failed: bool) {
        if !self.caps.subagents {
            return;
        }
        lock(&self.agent_text).remove(&agent.session_id);
        for u in subagent::finished(agent, report, failed) {
            send_update(&self.client, &u.0, u.1);
        }
    }

    fn agent_event(&self, session_id: &str, agent: &AgentMark, event: TurnEvent) {
        if self.caps.subagents {
            return self.child_event(agent, event);
        }
        // An agent's calls become cards of their own, marked in `_meta`; its text goes on
        // the card of the call that runs it; the rest of its stream stays in its transcript.
        let meta = agent_meta(agent);
        match event {
            TurnEvent::ToolCallStarted { id, name, input } => {
                lock(&self.agent_text).remove(&agent.session_id);
                let mut call = convert::tool_call(
                    &self.tools,
                    self.root.path(),
                    &id,
                    &name,
                    &input,
                    None,
                    acp::ToolCallStatus::Pending,
                )
                .meta(meta);
                call.title = format!("[agent {}] {}", agent.name, call.title);
                lock(&self.calls).insert(id, call.clone());
                send_update(&self.client, session_id, acp::SessionUpdate::ToolCall(call));
            }
            TurnEvent::ToolCallFinished {
                id,
                output,
                is_error,
                ..
            } => {
                lock(&self.calls).remove(&id);
                let u = convert::tool_result(&id, &output, is_error, Vec::new()).meta(meta);
                send_update(
                    &self.client,
                    session_id,
                    acp::SessionUpdate::ToolCallUpdate(u),
                );
            }
            TurnEvent::TextDelta { text } => {
                let shown = {
                    let mut all = lock(&self.agent_text);
                    let t = all.entry(agent.session_id.clone()).or_default();
                    t.push_str(&text);
                    let keep = tail_chars(t, AGENT_TEXT_CHARS).to_string();
                    *t = keep.clone();
                    keep
                };
                let u = acp::ToolCallUpdate::new(
                    agent.tool_call_id.clone(),
                    acp::ToolCallUpdateFields::new()
                        .content(vec![acp::ToolCallContent::from(convert::text(shown))]),
                )
                .meta(meta);
                send_update(
                    &self.client,
                    session_id,
                    acp::SessionUpdate::ToolCallUpdate(u),
                );
            }
            _ => {}
        }
    }

    fn ask_permission(&self, req: PermissionRequest) -> BoxFuture<'static, PermissionAnswer> {
        let client = self.client.clone();
        let mut call = lock(&self.calls)
            .get(&req.tool_call_id)
            .cloned()
            .unwrap_or_else(|| {
                convert::tool_call(
                    &self.tools,
                    self.root.path(),
                    &req.tool_call_id,
                    &req.tool_name,
                    &req.input,
                    None,
                    acp::ToolCallStatus::Pending,
                )
            });
        let always = req.options.iter().any(|o| o.option_id == "allow_always");
        if req.agent.is_some() {
            // An agent's call was never announced: its title says whose it is.
            call.title = req.title.clone();
        }
        // An agent's call shown in its child session is asked about there.
        let asked_in = self.call_session(&req.session_id, &req.tool_call_id);
        let params = match &req.plan {
            Some(plan) => plan_params(&asked_in, call, plan, &req),
            None => permission_params(&asked_in, call, always),
        };
        // A client that keeps plans by id shows plan mode's plan as one while it is asked
        // about; a rejected plan leaves (the model presents a revised one).
        let plan_shown = match &req.plan {
            Some(plan) if self.caps.plans => {
                send_update(&client, &req.session_id, convert::plan_mode_update(plan));
                Some(req.session_id.clone())
            }
            _ => None,
        };
        Box::pin(async move {
            // A turn cancelled meanwhile drops this future: the client hears `$/cancel_request`.
            let asked = client.request_or_cancel(
                methods::RequestPermission::NAME,
                params,
                methods::CANCEL_REQUEST,
            );
            let answer = match asked.await {
                // `{outcome: {outcome: "cancelled"}}` and unknown ids count as a rejection.
                Ok(v) => permission_answer(&v),
                Err(e) => {
                    tracing::info!(
                        "session/request_permission failed ({}); the call is not run",
                        e.message
                    );
                    PermissionAnswer::Failed
                }
            };
            // Approved, the plan stays: it is the work now. Any other answer takes it away.
            let approved = matches!(answer, PermissionAnswer::Mode(p) if p != Policy::Plan);
            if let Some(session_id) = plan_shown
                && !approved
            {
                let gone = acp::PlanRemoved::new(convert::PLAN_MODE_PLAN);
                send_update(&client, &session_id, acp::SessionUpdate::PlanRemoved(gone));
            }
            answer
        })
    }

    fn elicit(
        &self,
        session_id: &str,
        request: garuda_core::mcp::ElicitationRequest,
    ) -> BoxFuture<'static, garuda_core::mcp::ElicitationAnswer> {
        use garuda_core::mcp::{ElicitationAnswer, ElicitationMode};
        let (supported, cap) = match request.mode {
            ElicitationMode::Form { .. } => (self.caps.elicitation_form, "elicitation.form"),
            ElicitationMode::Url { .. } => (self.caps.elicitation_url, "elicitation.url"),
        };
        let params = if supported {
            convert::elicitation_params(session_id, &request)
        } else {
            Err(format!(
                "the editor did not advertise the ACP client capability {cap}"
            ))
        };
        let client = self.client.clone();
        Box::pin(async move {
            let params = match params {
                Ok(p) => p,
                Err(reason) => return ElicitationAnswer::Unavailable(reason),
            };
            // A turn cancelled meanwhile drops this future: the client hears `$/cancel_request`.
            let asked = client.request_or_cancel(
                methods::CreateElicitation::NAME,
                params,
                methods::CANCEL_REQUEST,
            );
            match asked.await {
                Ok(v) => convert::elicitation_answer(v),
                Err(e) => ElicitationAnswer::Unavailable(format!(
                    "the editor failed elicitation/create: {}",
                    e.message
                )),
            }
        })
    }

    fn tool_running(&self, session_id: &str, tool_call_id: &str) {
        send_update(
            &self.client,
            &self.call_session(session_id, tool_call_id),
            convert::tool_status(tool_call_id, acp::ToolCallStatus::InProgress),
        );
    }

    fn apply_edit(
        &self,
        path: PathBuf,
        _old_text: Option<String>,
        new_text: String,
    ) -> Option<BoxFuture<'static, Result<(), String>>> {
        if !self.caps.write {
            return None;
        }
        if !stays_beneath(self.root.path(), &path) {
            // Garuda's own write refuses it with the usual wording.
            return None;
        }
        let client = self.client.clone();
        let session_id = self.session_id.clone();
        Some(Box::pin(async move {
            let req = acp::WriteTextFileRequest::new(session_id, path, new_text);
            request::<methods::WriteTextFile>(&client, req)
                .await
                .map(|_| ())
                .map_err(|e| e.message)
        }))
    }

    fn read_text(&self, path: PathBuf) -> Option<BoxFuture<'static, Result<String, String>>> {
        if !self.caps.read || !stays_beneath(self.root.path(), &path) {
            return None;
        }
        let client = self.client.clone();
        let session_id = self.session_id.clone();
        Some(Box::pin(async move {
            let req = acp::ReadTextFileRequest::new(session_id, path);
            request::<methods::ReadTextFile>(&client, req)
                .await
                .map(|r| r.content)
                .map_err(|e| e.message)
        }))
    }

    fn run_command(
        &self,
        session_id: &str,
        run: CommandRun,
    ) -> Option<BoxFuture<'static, ClientToolResult>> {
        if !self.caps.terminal {
            return None;
        }
        let client = self.client.clone();
        let session_id = self.call_session(session_id, &run.tool_call_id);
        let calls = self.calls.clone();
        Some(Box::pin(run_in_terminal(client, session_id, run, calls)))
    }
}

/// `bash -c COMMAND` in a terminal of the client: create it, show it on the call's card,
/// wait for the exit (killing it on cancel or timeout), read the output, release it.
async fn run_in_terminal(
    client: Client,
    session_id: String,
    run: CommandRun,
    calls: Calls,
) -> ClientToolResult {
    let fail = |what: &str, e: RpcError| ClientToolResult {
        content: format!("the editor's terminal failed ({what}): {}", e.message),
        is_error: true,
    };
    let env = [
        ("GARUDA", "1"),
        ("PAGER", "cat"),
        ("GIT_PAGER", "cat"),
        ("GIT_TERMINAL_PROMPT", "0"),
    ]
    .into_iter()
    .map(|(k, v)| acp::EnvVariable::new(k, v))
    .collect();
    let create = acp::CreateTerminalRequest::new(session_id.clone(), "bash")
        .args(vec!["-c".to_string(), run.command.clone()])
        .env(env)
        .cwd(run.cwd.clone())
        .output_byte_limit(run.output_limit);
    let created = match request::<methods::CreateTerminal>(&client, create).await {
        Ok(r) => r,
        Err(e) => return fail(methods::CreateTerminal::NAME, e),
    };
    let terminal = created.terminal_id;
    // The terminal joins the call's card, after the diff or text it already shows.
    let content = {
        let mut calls = lock(&calls);
        let call = calls.get_mut(&run.tool_call_id);
        let shown = acp::ToolCallContent::Terminal(acp::Terminal::new(terminal.clone()));
        match call {
            Some(c) => {
                c.content.push(shown);
                c.content.clone()
            }
            None => vec![shown],
        }
    };
    send_update(
        &client,
        &session_id,
        acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(
            run.tool_call_id.clone(),
            acp::ToolCallUpdateFields::new().content(content),
        )),
    );
    let wait = request::<methods::WaitForTerminalExit>(
        &client,
        acp::WaitForTerminalExitRequest::new(session_id.clone(), terminal.clone()),
    );
    let ended = tokio::select! {
        r = wait => Ended::Exited(r.map(|r| r.exit_status)),
        _ = run.cancel.cancelled() => Ended::Cancelled,
        _ = tokio::time::sleep(Duration::from_millis(run.timeout_ms)) => Ended::TimedOut,
    };
    if !matches!(ended, Ended::Exited(_)) {
        let kill = acp::KillTerminalRequest::new(session_id.clone(), terminal.clone());
        if let Err(e) = request::<methods::KillTerminal>(&client, kill).await {
            tracing::info!("terminal/kill failed: {}", e.message);
        }
    }
    let output = request::<methods::TerminalOutput>(
        &client,
        acp::TerminalOutputRequest::new(session_id.clone(), terminal.clone()),
    )
    .await;
    let release = acp::ReleaseTerminalRequest::new(session_id.clone(), terminal);
    if let Err(e) = request::<methods::ReleaseTerminal>(&client, release).await {
        tracing::info!("terminal/release failed: {}", e.message);
    }
    let output = match output {
        Ok(o) => o,
        Err(e) => return fail(methods::TerminalOutput::NAME, e),
    };
    let mut text = output.output;
    if output.truncated {
        text = format!("[earlier output truncated by the editor]\n{text}");
    }
    let status = match ended {
        Ended::Exited(Ok(s)) => Some(s),
        Ended::Exited(Err(e)) => return fail(methods::WaitForTerminalExit::NAME, e),
        Ended::Cancelled => {
            return ClientToolResult {
                content: format!(
                    "{text}\n[command cancelled; the editor's terminal was killed]\nexit code: none"
                ),
                is_error: true,
            };
        }
        Ended::TimedOut => {
            return ClientToolResult {
                content: format!(
                    "{text}\n[command timed out after {} ms; the editor's terminal was killed]\nexit code: none",
                    run.timeout_ms
                ),
                is_error: true,
            };
        }
    }
    .or(output.exit_status);
    let (code, signal) = status.map_or((None, None), |s| (s.exit_code, s.signal));
    let mut content = text;
    if !content.is_empty() && !content.ends_with('\n') {
        content.push('\n');
    }
    match (code, &signal) {
        (Some(c), _) => content.push_str(&format!("exit code: {c}")),
        (None, Some(sig)) => content.push_str(&format!("killed by signal {sig}\nexit code: none")),
        (None, None) => content.push_str("exit code: none"),
    }
    ClientToolResult {
        content,
        is_error: code != Some(0),
    }
}

enum Ended {
    Exited(Result<acp::TerminalExitStatus, RpcError>),
    Cancelled,
    TimedOut,
}

/// A request to the client, typed by the client-method table. A `null` answer reads as `{}`:
/// clients answer an empty result either way.
async fn request<M: ClientMethod>(
    client: &Client,
    params: M::Params,
) -> Result<M::Result, RpcError> {
    let params = serde_json::to_value(params).map_err(|e| RpcError::internal(e.to_string()))?;
    let v = match client.request(M::NAME, params).await? {
        Value::Null => Value::Object(Default::default()),
        v => v,
    };
    serde_json::from_value(v).map_err(|e| RpcError::internal(format!("{} answer: {e}", M::NAME)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_text_keeps_its_tail() {
        assert_eq!(tail_chars("abcdé", 2), "dé");
        assert_eq!(tail_chars("ab", 5), "ab");
        let m = agent_meta(&AgentMark {
            name: "explore".into(),
            session_id: "s".into(),
            tool_call_id: "t".into(),
            parent_session_id: "p".into(),
        });
        assert_eq!(m["garuda"]["agent"]["toolCallId"], "t");
    }
    use serde_json::json;

    #[test]
    fn only_a_selected_outcome_selects() {
        // Only a selected outcome selects; a cancelled one never runs the tool.
        for cancelled in [
            json!({"outcome": "cancelled", "optionId": "allow_once"}),
            json!({"outcome": {"outcome": "cancelled", "optionId": "allow_once"}}),
            json!({"optionId": "allow_once"}),
            json!({"outcome": ["selected", "allow_once"]}),
        ] {
            assert_eq!(
                permission_answer(&cancelled),
                PermissionAnswer::Reject,
                "{cancelled}"
            );
        }
        assert_eq!(
            permission_answer(
                &json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}})
            ),
            PermissionAnswer::AllowOnce
        );
        assert_eq!(
            crate::front::permission_answer(
                &json!({"outcome": "cancelled", "optionId": "allow_once"})
            ),
            PermissionAnswer::Reject
        );
    }
}
