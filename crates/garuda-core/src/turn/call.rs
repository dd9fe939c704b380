//! One tool call, through one door: plan mode's refusal, the PreToolUse hooks, the approval
//! (decided by [`super::approval::decide`], asked here), the handler, the PostToolUse hooks.
//! Every tool goes through it, built-in, session, MCP or client: each is a handler, and what
//! a handler cannot do alone (ask the person, change the session, reach an MCP server or the
//! client) the call lends it through its [`tools::Workbench`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::approval::{CallFacts, Decision, decide};
use super::ask::{ask_person, interrupted};
use super::events::{PermissionAnswer, PermissionRequest};
use super::host::{CommandRun, TurnHost};
use super::live::{LiveSession, SessionState};
use crate::hooks::{EventData, PermissionDecision};
use crate::message::Block;
use crate::tools::{self, Approval, ToolContext, ToolEntry, ToolMeta, ToolOutput};

const UNASKED: &str = "This tool call needs the user's approval and no one could be asked (a headless run without a terminal), so it did not run. The user has not refused it: they may allow it and continue this session.";
const DENIED: &str = "The user denied this tool call. Do not retry it as is; ask the user what to do instead, or take another approach.";
const APPROVAL_FAILED: &str = "The approval request for this tool call could not be completed (the client failed to answer), so it was not run. Do not retry it as is; take another approach, or end your turn saying what you need approved.";

/// One tool call of a turn, with everything it may touch.
pub(super) struct Call<'a> {
    /// The session the call belongs to.
    pub session: &'a Arc<LiveSession>,
    /// The turn's host (the client, for questions, edits, terminals and its tools).
    pub host: &'a dyn TurnHost,
    /// The session's state where the call may change it; `None` for a call that runs beside
    /// others (consecutive `explore`s), which never needs it.
    pub state: Option<&'a mut SessionState>,
    /// The transcript's path: hooks read it, an agent's sub-session is stored beside it.
    pub transcript: Option<PathBuf>,
    /// The tool context: root, limits, file tracker, cancel, ids.
    pub ctx: ToolContext,
    /// The model's id for the call.
    pub id: &'a str,
    /// The tool the model called.
    pub name: &'a str,
}

impl Call<'_> {
    /// Runs the call and answers its result (never fails: refusals are error outputs).
    pub(super) async fn run(mut self, input: Value) -> ToolOutput {
        let (session, host) = (self.session, self.host);
        // Plan mode refuses first: a call that never runs is no PreToolUse (a hook cannot turn
        // it into another tool, so its answer could not matter).
        if session
            .tools()
            .get(self.name)
            .is_some_and(|e| plan_refuses(session, e))
        {
            return super::plan::refused();
        }
        let pre = super::hooks::fire(
            session,
            host,
            self.transcript.clone(),
            EventData::PreToolUse {
                tool_name: self.name.to_string(),
                tool_input: input.clone(),
                tool_use_id: self.id.to_string(),
            },
            &self.ctx.cancel,
        )
        .await;
        if pre.cancelled {
            return interrupted();
        }
        if let Some(reason) = super::hooks::denied(&pre) {
            return ToolOutput::error(format!("Blocked by a hook: {reason}")).with_meta(ToolMeta {
                blocked_by_hook: true,
                ..Default::default()
            });
        }
        // The updated input replaces the call's before the policy looks at it.
        let input = pre.updated_input.clone().unwrap_or(input);
        let mut out = self.approved(input.clone(), pre.permission).await;
        if super::hooks::ran(&out) {
            let post = super::hooks::fire(
                session,
                host,
                self.transcript.clone(),
                EventData::PostToolUse {
                    tool_name: self.name.to_string(),
                    tool_input: input,
                    tool_response: serde_json::json!({"content": out.content, "isError": out.is_error}),
                    tool_use_id: self.id.to_string(),
                },
                &self.ctx.cancel,
            )
            .await;
            super::hooks::add_feedback(&mut out, &post);
        }
        out
    }

    /// The call once its hooks let it through: asked for where the decision says so, then
    /// run.
    async fn approved(&mut self, input: Value, hook: Option<PermissionDecision>) -> ToolOutput {
        let session = self.session;
        let tools = session.tools();
        let Some(entry) = tools.get(self.name) else {
            return ToolOutput::error(format!(
                "unknown tool {}; use one of the tools listed in the request",
                self.name
            ));
        };
        // The policy may have switched to plan mode while the PreToolUse hooks ran.
        if plan_refuses(session, entry) {
            return super::plan::refused();
        }
        // A call that asks to leave the sandbox always asks the person. Where commands run
        // unconfined anyway the flag changes nothing.
        let escape = session.setup.sandbox.confined() && entry.leaves_sandbox(&input);
        let approval = match self.approval(entry, &input, hook, escape).await {
            Ok(a) => a,
            Err(refusal) => return refusal,
        };
        // Only an approved call leaves the sandbox.
        if escape && approval.is_some() {
            self.ctx.outside_sandbox = true;
        }
        if !entry.works_on_session() {
            self.host.tool_running(&session.id, self.id);
        }
        let bench = HostBench {
            host: self.host,
            session,
            store: self.transcript.as_deref().and_then(Path::parent),
            entry,
            id: self.id,
            state: tokio::sync::Mutex::new(self.state.take()),
            // An editor terminal runs outside Garuda's sandbox, so commands go there only
            // when the session has no sandbox (and then they were asked for like any
            // unconfined command) or the user approved this call to leave it.
            terminal: session.setup.sandbox.unconfined.is_some() || self.ctx.outside_sandbox,
        };
        let mut out = tools::run_handler(&entry.handler, input, &self.ctx, &bench).await;
        // A session tool may say how its own question went (a plan's approval).
        if approval.is_some() {
            out.meta.approval = approval;
        }
        out
    }

    /// The approval of a call: `Ok` with how it was approved (`None`: nothing was asked or
    /// remembered), or `Err` with the result of a call that may not run.
    async fn approval(
        &self,
        entry: &ToolEntry,
        input: &Value,
        hook: Option<PermissionDecision>,
        escape: bool,
    ) -> Result<Option<Approval>, ToolOutput> {
        let session = self.session;
        // Risk follows the path an edit changes (links resolved), not the tool's name.
        let risk = entry.risk(input, &self.ctx.root);
        let edit_risk = risk.as_ref().map_or(tools::EditRisk::Plain, |(_, r, _)| *r);
        // "Allow always" on a risky edit allows that path, not every edit.
        let always_key = match &risk {
            Some((rel, _, _)) => format!("{}:{}", self.name, rel.display()),
            None => self.name.to_string(),
        };
        let decision = decide(&CallFacts {
            class: entry.class,
            works_on_session: entry.works_on_session(),
            edit_risk,
            escape,
            network_unasked: entry.handler.network_unasked(),
            hook,
            policy: session.policy(),
            sandbox: &session.setup.sandbox,
            always_allowed: session.is_always_allowed(&always_key),
        });
        let once_only = match decision {
            Decision::Run { remembered: false } => return Ok(None),
            Decision::Run { remembered: true } => return Ok(Some(Approval::AllowedAlways)),
            Decision::Ask { once_only } => once_only,
        };
        if let Some(refusal) = self.refused_anyway(entry, input).await {
            return Err(refusal);
        }
        let title = entry.approval_title(input, risk.as_ref().map(|(_, _, w)| w.as_str()));
        let notice = format!("Garuda needs your permission: {title}");
        let req = PermissionRequest {
            session_id: session.id.clone(),
            tool_call_id: self.id.to_string(),
            tool_name: self.name.to_string(),
            title,
            input: input.clone(),
            options: if once_only {
                PermissionRequest::once_options()
            } else {
                PermissionRequest::standard_options()
            },
            agent: None,
            plan: None,
        };
        let Some(answer) = ask_person(session, self.host, &self.ctx.cancel, req, notice).await
        else {
            return Err(interrupted());
        };
        match answer {
            PermissionAnswer::AllowOnce => Ok(Some(Approval::Allowed)),
            // Not offered for a call that leaves the sandbox; a client that answers it anyway
            // allows this one call.
            PermissionAnswer::AllowAlways if once_only => Ok(Some(Approval::Allowed)),
            PermissionAnswer::AllowAlways => {
                session.allow_always(&always_key);
                Ok(Some(Approval::AllowedAlways))
            }
            // A mode answers a plan's request only; offered none, it is no approval.
            PermissionAnswer::Reject | PermissionAnswer::Mode(_) => {
                Err(refused(DENIED.into(), Approval::Rejected))
            }
            PermissionAnswer::RejectWith(words) => {
                let text = format!("{DENIED}\nThe user said: {words}");
                Err(refused(text, Approval::Rejected))
            }
            PermissionAnswer::TimedOut => {
                let secs = session.setup.approval_timeout_secs.max(1);
                Err(refused(timed_out_text(secs), Approval::TimedOut))
            }
            PermissionAnswer::Failed => Err(refused(APPROVAL_FAILED.into(), Approval::Failed)),
            PermissionAnswer::Unavailable => Err(refused(UNASKED.into(), Approval::Unavailable)),
        }
    }

    /// What the call's tool would answer without running: an edit of a file the model has
    /// not read (or that changed since), or whose text is not there. Checked before the
    /// person is asked, so nobody approves a call that cannot run. Only tools that plan
    /// their change without making it have anything to say.
    async fn refused_anyway(&self, entry: &ToolEntry, input: &Value) -> Option<ToolOutput> {
        if !entry.needs_read {
            return None;
        }
        let (handler, input, ctx) = (entry.handler.clone(), input.clone(), self.ctx.clone());
        // Planning reads the file: off the async workers, as the tool's own run does.
        match tokio::task::spawn_blocking(move || handler.plan(&input, &ctx)).await {
            Ok(Some(Err(refusal))) => Some(refusal),
            _ => None,
        }
    }
}

/// True when plan mode refuses a call of `entry` without asking: plan mode is on and the
/// tool is not read-only, nor one that works on the session itself.
fn plan_refuses(session: &LiveSession, entry: &ToolEntry) -> bool {
    !entry.works_on_session() && tools::plan_refuses(session.policy(), entry.read_only)
}

/// A call that did not run because its approval did not allow it.
fn refused(text: String, approval: Approval) -> ToolOutput {
    ToolOutput::error(text).with_meta(ToolMeta {
        approval: Some(approval),
        ..Default::default()
    })
}

/// What the model reads when nobody answered: not a denial, so it may ask again later.
fn timed_out_text(secs: u64) -> String {
    format!(
        "Nobody answered the approval request for this tool call within {secs} s, so it was not run. \
         This is not a denial: the user may be away. Do not retry it in a loop; continue with what \
         does not need it, or end your turn saying what you need approved."
    )
}

/// What a call lends its handler: the client's buffers, edits, terminal and tools, the
/// session's own operations and its MCP servers.
struct HostBench<'a> {
    host: &'a dyn TurnHost,
    session: &'a Arc<LiveSession>,
    /// The transcript's folder (an agent's sub-session is stored there).
    store: Option<&'a Path>,
    entry: &'a ToolEntry,
    id: &'a str,
    /// Locked by the one session operation that runs at a time; `None` beside other calls.
    state: tokio::sync::Mutex<Option<&'a mut SessionState>>,
    /// Commands may run in the client's terminal.
    terminal: bool,
}

impl tools::Workbench for HostBench<'_> {
    fn read_text(&self, path: PathBuf) -> Option<BoxFuture<'static, Result<String, String>>> {
        self.host.read_text(path)
    }

    fn apply_edit(
        &self,
        path: PathBuf,
        old_text: Option<String>,
        new_text: String,
    ) -> Option<BoxFuture<'static, Result<(), String>>> {
        self.host.apply_edit(path, old_text, new_text)
    }

    fn run_command(&self, run: CommandRun) -> Option<BoxFuture<'static, tools::ClientToolResult>> {
        if !self.terminal {
            return None;
        }
        self.host.run_command(&self.session.id, run)
    }

    fn run_agent<'b>(
        &'b self,
        call: tools::AgentCall,
        ctx: &'b ToolContext,
    ) -> Option<BoxFuture<'b, ToolOutput>> {
        Some(Box::pin(super::agents::run_agent(
            self.session,
            self.host,
            ctx,
            self.store,
            call,
        )))
    }

    fn snip(&self, input: Value) -> Option<BoxFuture<'_, Result<String, String>>> {
        Some(Box::pin(async move {
            let mut state = self.state.lock().await;
            match state.as_deref_mut() {
                Some(state) => super::ops::snip_tool(self.session, state, &input),
                None => Err(self.beside_others()),
            }
        }))
    }

    fn leave_plan<'b>(
        &'b self,
        input: Value,
        ctx: &'b ToolContext,
    ) -> Option<BoxFuture<'b, ToolOutput>> {
        Some(Box::pin(async move {
            let mut state = self.state.lock().await;
            let Some(state) = state.as_deref_mut() else {
                return ToolOutput::error(self.beside_others());
            };
            let (session, host) = (self.session, self.host);
            super::plan::exit(session, state, host, ctx, self.id, self.entry, &input).await
        }))
    }

    fn client_symbols(
        &self,
        query: tools::SymbolQuery,
    ) -> Option<BoxFuture<'static, Result<tools::SymbolAnswer, String>>> {
        self.host.client_symbols(&self.session.id, query)
    }

    fn call_remote<'b>(
        &'b self,
        remote: tools::Remote,
        name: &'b str,
        input: Value,
        ctx: &'b ToolContext,
    ) -> Option<BoxFuture<'b, ToolOutput>> {
        match remote {
            tools::Remote::Client => Some(self.call_client(name, input, ctx)),
            tools::Remote::Mcp => self.call_mcp(name, input, ctx),
        }
    }
}

impl HostBench<'_> {
    /// What a session tool says when its call runs beside others (it has no state then).
    fn beside_others(&self) -> String {
        format!("{} cannot run beside other calls", self.entry.spec.name)
    }

    /// Calls the MCP tool `name` on the session's server (None: the session has none).
    fn call_mcp<'b>(
        &'b self,
        name: &'b str,
        input: Value,
        ctx: &'b ToolContext,
    ) -> Option<BoxFuture<'b, ToolOutput>> {
        let hub = self.session.setup.mcp.as_ref()?;
        Some(Box::pin(async move {
            let elicitor = super::host::HostElicitor {
                host: self.host,
                session_id: &self.session.id,
                tool_call_id: self.id,
            };
            match hub.call(name, input, &ctx.cancel, &elicitor).await {
                Ok(result) => {
                    let mut text = Vec::new();
                    let mut blocks = Vec::new();
                    for b in result.content {
                        match b {
                            Block::Text { text: t } => text.push(t),
                            other => blocks.push(other),
                        }
                    }
                    let text = text.join("\n");
                    let mut out = if result.is_error {
                        ToolOutput::error(text)
                    } else {
                        ToolOutput::ok(text)
                    };
                    out.blocks = blocks;
                    out
                }
                Err(crate::mcp::McpCallError::Cancelled) => interrupted(),
                Err(e) => ToolOutput::error(e.to_string()),
            }
        }))
    }

    /// Calls the client's tool `name`; the turn's cancel abandons it.
    fn call_client<'b>(
        &'b self,
        name: &'b str,
        input: Value,
        ctx: &'b ToolContext,
    ) -> BoxFuture<'b, ToolOutput> {
        Box::pin(async move {
            let r = tokio::select! {
                r = self.host.call_client_tool(&self.session.id, name, input, None) => r,
                _ = ctx.cancel.cancelled() => return interrupted(),
            };
            if r.is_error {
                ToolOutput::error(r.content)
            } else {
                ToolOutput::ok(r.content)
            }
        })
    }
}
