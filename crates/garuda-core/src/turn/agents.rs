//! Agents' sub-sessions: an `agent` or `explore` call runs a session of its own, built from
//! the caller's (same workspace, sandbox, approval policy, hooks and provider, the model the
//! agent names or the caller's), with only the agent's tools and a prompt of the agent's
//! body, Garuda's base rules and the project's instructions. Its turn is a whole turn (the
//! context pipeline, compaction included, in its own window), bounded in steps, cancelled
//! with the caller's; its approvals reach the caller's client marked with the agent's name,
//! its usage is recorded in the caller's transcript, and its own transcript is stored with
//! a header naming the caller and the tool call.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

use super::events::{AgentMark, PermissionAnswer, PermissionRequest, TurnEvent};
use super::host::{ClientToolResult, CommandRun, Progress, TurnHost};
use super::live::{LiveSession, ModelBinding, SessionSetup, SessionStart};
use crate::agents::{AgentRole, EXPLORE, EXPLORE_PROMPT, MAX_DEPTH};
use crate::message::{Block, Role, StopReason, Usage};
use crate::session::records::ParentLink;
use crate::session::{Record, SessionHeader, SessionStore};
use crate::tools::{AgentCall, ToolContext, ToolMeta, ToolOutput, ToolRegistry};

/// What a sub-session is: the agent, its tools and the model it runs on.
struct Plan {
    prompt: String,
    tools: Vec<String>,
    model: Option<String>,
    nested: bool,
}

fn plan(parent: &LiveSession, call: &AgentCall, depth: u32) -> Result<Plan, String> {
    let settings = &parent.setup.agent_settings;
    if call.agent == EXPLORE {
        // Built-in tools only: a read-only MCP tool is read-only by the config's word and
        // may still reach the network, and explore's description promises reads and
        // searches of the workspace. An agent file can list MCP tools for that.
        // The code tools read too, over the workspace's index.
        let mut tools = ToolRegistry::read_only_names();
        tools.extend(parent.tools().code_tool_names());
        return Ok(Plan {
            prompt: EXPLORE_PROMPT.to_string(),
            tools,
            model: None,
            nested: false,
        });
    }
    let def = parent
        .setup
        .agents
        .get(&call.agent)
        .ok_or_else(|| format!("no agent is called {:?}", call.agent))?;
    // Without nesting the registry has no agent tools to give, whatever the file lists.
    let nested = settings.nested && depth < MAX_DEPTH;
    Ok(Plan {
        prompt: def.prompt.clone(),
        tools: def
            .tools
            .clone()
            .unwrap_or_else(|| parent.tools().agent_default_names()),
        model: def.model.clone(),
        nested,
    })
}

/// The tools of a sub-session of `parent` that runs `tools` (the agent tools only when
/// nesting is on, listing what fits the sub-session's window of `context_window` tokens;
/// client, MCP and skill tools from the caller's registry now).
fn child_tools(
    parent: &LiveSession,
    tools: &[String],
    nested: bool,
    context_window: u64,
) -> ToolRegistry {
    ToolRegistry::for_agent(
        tools,
        &parent.tools(),
        nested.then(|| parent.setup.agents.clone()),
        context_window,
    )
}

/// The sub-sessions whose agent call runs now, by id: loading one gives this copy, never a
/// second one on the same file.
static RUNNING: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<String, std::sync::Weak<LiveSession>>>,
> = std::sync::LazyLock::new(Default::default);

/// The sub-session `id` when its agent call is running in this process.
pub fn running_agent(id: &str) -> Option<Arc<LiveSession>> {
    RUNNING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(id)
        .and_then(std::sync::Weak::upgrade)
}

/// A sub-session listed in [`RUNNING`], and marked as run by its call, until the call ends.
struct Listed(Arc<LiveSession>);

impl Listed {
    fn new(child: &Arc<LiveSession>) -> Listed {
        RUNNING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(child.id.clone(), Arc::downgrade(child));
        child.set_agent_call(true);
        Listed(child.clone())
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        self.0.set_agent_call(false);
        RUNNING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.0.id);
    }
}

/// Runs `call` in a new sub-session of `parent`; `store` is the folder of the caller's
/// transcript (the sub-session's goes beside it). Never fails: problems are error outputs.
pub(crate) async fn run_agent(
    parent: &Arc<LiveSession>,
    host: &dyn TurnHost,
    ctx: &ToolContext,
    store: Option<&Path>,
    call: AgentCall,
) -> ToolOutput {
    let Some(store) = store else {
        return ToolOutput::error("agents cannot run here: the session has no transcript folder");
    };
    let depth = parent.setup.role.as_ref().map_or(0, |r| r.depth) + 1;
    let plan = match plan(parent, &call, depth) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    let binding = match &plan.model {
        None => parent.model(),
        Some(m) => match parent.setup.bind_model.as_ref().map(|bind| bind(m)) {
            Some(Ok(b)) => Arc::new(b),
            Some(Err(e)) => {
                return ToolOutput::error(format!(
                    "the agent {} names the model {m}, which cannot be used: {e}",
                    call.agent
                ));
            }
            None => parent.model(),
        },
    };
    let child = match open_child(parent, ctx, store, &call, plan, depth, &binding) {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(format!("the agent could not start: {e}")),
    };
    let _listed = Listed::new(&child);
    let agent_host = AgentHost {
        parent: host,
        parent_id: parent.id.clone(),
        mark: AgentMark {
            // The mark is only shown (approval titles `[agent NAME]`, relayed events): a
            // name with a bidi override must not turn the title after it around.
            name: crate::text::escape_format_chars(&call.agent).into_owned(),
            session_id: child.id.clone(),
            tool_call_id: ctx.call_id.clone().unwrap_or_default(),
            parent_session_id: parent.id.clone(),
        },
        text: std::sync::Mutex::new(Coalesce::default()),
    };
    host.agent_started(&parent.id, &agent_host.mark, &call.task);
    let cancel = ctx.cancel.child_token();
    let max_steps = parent.setup.agent_settings.max_steps.max(1);
    let input = vec![Block::text(call.task.clone())];
    let result = super::run::run_child(&child, input, &agent_host, &cancel, max_steps).await;
    agent_host.flush();
    let (text, usage) = report_of(&child);
    // On a model of its own the agent is priced at that model's prices, not the caller's.
    let cost_usd = (child.model_spec() != parent.model_spec())
        .then(|| child.model().info.prices.map(|p| p.cost(&usage)))
        .flatten();
    let meta = ToolMeta {
        agent: Some(Box::new(crate::tools::AgentRan {
            session_id: child.id.clone(),
            usage,
            cost_usd,
        })),
        ..ToolMeta::default()
    };
    let name = &call.agent;
    let mut out = match result {
        Ok(o) if o.stop_reason == StopReason::Cancelled => {
            let mut out = ToolOutput::error(format!(
                "[interrupted: the turn was cancelled while the agent {name} was working]"
            ));
            out.meta.cancelled = true;
            out
        }
        Ok(o) if matches!(o.stop_reason, StopReason::MaxSteps | StopReason::MaxTurns) => {
            ToolOutput::ok(format!(
                "[the agent {name} stopped after {max_steps} steps without finishing; its last \
                 message follows]\n{text}"
            ))
        }
        Ok(_) if text.trim().is_empty() => {
            ToolOutput::error(format!("the agent {name} ended without a report"))
        }
        Ok(_) => ToolOutput::ok(text),
        Err(e) => ToolOutput::error(format!("the agent {name} failed: {e}")),
    };
    let (content, cut) = crate::tools::cap_text(&out.content, ctx.limits.output_max_chars);
    out.content = content;
    out.meta = ToolMeta {
        cancelled: out.meta.cancelled,
        truncated: cut,
        ..meta
    };
    host.agent_finished(&parent.id, &agent_host.mark, &out.content, out.is_error);
    out
}

/// Creates the sub-session's transcript and brings it to life.
fn open_child(
    parent: &Arc<LiveSession>,
    ctx: &ToolContext,
    store: &Path,
    call: &AgentCall,
    plan: Plan,
    depth: u32,
    binding: &ModelBinding,
) -> Result<Arc<LiveSession>, crate::session::StoreError> {
    let p = &parent.setup;
    let tools = child_tools(
        parent,
        &plan.tools,
        plan.nested,
        binding.info.context_window,
    );
    let store = SessionStore::new(store);
    let mut header = SessionHeader::new(
        p.workspace.root.path().display().to_string(),
        binding.spec.clone(),
    );
    let policy = parent.policy();
    header.policy = Some(policy.name().to_string());
    header.origin = parent.header.origin;
    header.parent = Some(ParentLink {
        session_id: parent.id.clone(),
        tool_call_id: ctx.call_id.clone().unwrap_or_default(),
        agent: call.agent.clone(),
        tools: tools
            .entries()
            .iter()
            .map(|e| e.spec.name.clone())
            .collect(),
        prompt: plan.prompt.clone(),
        depth,
    });
    let file = store.create(&header)?;
    let mut view_policy = p.view_policy.clone();
    view_policy.tool_results_dir = store.tool_results_dir(&header.session_id);
    view_policy.compactable_tools = tools.compactable();
    // The caller's servers, shared: the sub-session's MCP list is fixed at its start (its
    // compactions leave the servers' changes to the caller).
    let mcp = tools.has_mcp().then(|| p.mcp.clone()).flatten();
    let setup = SessionSetup {
        workspace: p.workspace.clone(),
        model_spec: binding.spec.clone(),
        model_id: binding.id.clone(),
        provider: binding.provider.clone(),
        model_info: binding.info,
        prompt_policy: policy,
        approval_timeout_secs: p.approval_timeout_secs,
        view_policy,
        compact: p.compact.clone(),
        commands: p.commands.clone(),
        sandbox: p.sandbox.clone(),
        mcp,
        skill_dirs: None,
        hooks: p.hooks.clone(),
        agents: p.agents.clone(),
        agent_settings: p.agent_settings.clone(),
        role: Some(AgentRole {
            name: call.agent.clone(),
            prompt: plan.prompt,
            depth,
        }),
        bind_model: p.bind_model.clone(),
        // The caller's clearing holds for its own model only; an agent on another model keeps
        // the caller's view settings, microcompact included.
        tool_clearing: (binding.spec == p.model_spec)
            .then(|| p.tool_clearing.clone())
            .flatten(),
    };
    let start = SessionStart {
        tools,
        // The caller's list as its `skill` tool shows it; changes on disk are the caller's.
        skills: parent.skills(),
    };
    let child = LiveSession::new(header, setup, start, file, Vec::new()).child_of(parent);
    Ok(Arc::new(child))
}

/// The sub-session's final message (its last assistant text) and what all its requests
/// used.
fn report_of(child: &LiveSession) -> (String, Usage) {
    let Some(state) = child.try_state() else {
        return (String::new(), Usage::default());
    };
    let mut usage = Usage::default();
    for r in state.records() {
        if let Record::Usage(u) = r {
            usage.add(&u.usage);
        }
    }
    let text = state
        .records()
        .iter()
        .rev()
        .filter_map(Record::as_message)
        .filter(|m| m.role == Role::Assistant)
        .find_map(|m| {
            let t: Vec<&str> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::Text { text } if !text.trim().is_empty() => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            (!t.is_empty()).then(|| t.join("\n"))
        })
        .unwrap_or_default();
    (text, usage)
}

/// Most characters of relayed text gathered before they go out.
const RELAY_CHARS: usize = 400;
/// Longest wait before gathered text goes out (checked when more arrives).
const RELAY_EVERY: Duration = Duration::from_millis(250);
/// Most characters of a relayed tool call's output.
pub(crate) const RELAY_OUTPUT_CHARS: usize = 2_000;

/// A sub-session's text deltas, gathered so a client gets a few relayed events a second
/// rather than one per streamed token.
#[derive(Debug, Default)]
struct Coalesce {
    text: String,
    since: Option<Instant>,
}

impl Coalesce {
    /// Adds `text` (arrived at `now`); answers what is due to go out.
    fn push(&mut self, text: &str, now: Instant) -> Option<String> {
        let since = *self.since.get_or_insert(now);
        self.text.push_str(text);
        let due = self.text.len() >= RELAY_CHARS || now.duration_since(since) >= RELAY_EVERY;
        if due { self.take() } else { None }
    }

    /// What is gathered, if anything.
    fn take(&mut self) -> Option<String> {
        self.since = None;
        (!self.text.is_empty()).then(|| std::mem::take(&mut self.text))
    }
}

/// What of a sub-session's stream reaches the client: its text (gathered), its tool calls
/// (a finished call's output cut to [`RELAY_OUTPUT_CHARS`]), hooks that blocked or failed,
/// compaction and retries. Its steps, reasoning, usage (the caller's call reports it), todo
/// list and mode changes stay in its transcript.
fn relayed(event: TurnEvent) -> Option<TurnEvent> {
    match event {
        TurnEvent::ToolCallFinished {
            id,
            name,
            output,
            is_error,
            mut meta,
        } => {
            let (output, cut) = crate::tools::cap_text(&output, RELAY_OUTPUT_CHARS);
            meta.truncated |= cut;
            Some(TurnEvent::ToolCallFinished {
                id,
                name,
                output,
                is_error,
                meta,
            })
        }
        e @ (TurnEvent::TextDelta { .. }
        | TurnEvent::ToolCallStarted { .. }
        | TurnEvent::Compaction { .. }
        | TurnEvent::Retry { .. }) => Some(e),
        e @ TurnEvent::Hook {
            phase: super::events::HookPhase::Blocked | super::events::HookPhase::Failed,
            ..
        } => Some(e),
        _ => None,
    }
}

/// The sub-session's host: its approvals, client tools, edits, buffers and terminals go to
/// the caller's client as the caller's would, approvals and client tool calls marked with
/// the agent; its stream is relayed into the caller's turn marked with the agent (see
/// [`relayed`]).
struct AgentHost<'a> {
    parent: &'a dyn TurnHost,
    parent_id: String,
    mark: AgentMark,
    text: std::sync::Mutex<Coalesce>,
}

impl AgentHost<'_> {
    /// Sends the text gathered so far.
    fn flush(&self) {
        let text = self.text.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(text) = text {
            self.parent
                .agent_event(&self.parent_id, &self.mark, TurnEvent::TextDelta { text });
        }
    }
}

impl TurnHost for AgentHost<'_> {
    fn event(&self, _session_id: &str, event: TurnEvent) {
        let Some(event) = relayed(event) else { return };
        if let TurnEvent::TextDelta { text } = &event {
            let due = self
                .text
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(text, Instant::now());
            if let Some(text) = due {
                self.parent
                    .agent_event(&self.parent_id, &self.mark, TurnEvent::TextDelta { text });
            }
            return;
        }
        // Text before the event goes out first, so the order holds.
        self.flush();
        self.parent.agent_event(&self.parent_id, &self.mark, event);
    }

    fn agent_event(&self, _session_id: &str, agent: &AgentMark, event: TurnEvent) {
        // A nested agent's event keeps its own mark on its way up.
        self.flush();
        self.parent.agent_event(&self.parent_id, agent, event);
    }

    fn agent_started(&self, _session_id: &str, agent: &AgentMark, task: &str) {
        self.flush();
        self.parent.agent_started(&self.parent_id, agent, task);
    }

    fn agent_finished(&self, _session_id: &str, agent: &AgentMark, report: &str, failed: bool) {
        self.parent
            .agent_finished(&self.parent_id, agent, report, failed);
    }

    fn ask_permission(&self, mut req: PermissionRequest) -> BoxFuture<'static, PermissionAnswer> {
        // A nested agent's request passes here already marked with its own name.
        if req.agent.is_none() {
            req.title = format!("[agent {}] {}", self.mark.name, req.title);
            req.agent = Some(self.mark.name.clone());
        }
        req.session_id = self.parent_id.clone();
        self.parent.ask_permission(req)
    }

    fn call_client_tool(
        &self,
        _session_id: &str,
        name: &str,
        input: serde_json::Value,
        agent: Option<AgentMark>,
    ) -> BoxFuture<'static, ClientToolResult> {
        let agent = agent.unwrap_or_else(|| self.mark.clone());
        self.parent
            .call_client_tool(&self.parent_id, name, input, Some(agent))
    }

    fn tool_running(&self, _session_id: &str, tool_call_id: &str) {
        // The agent's call was relayed (ACP shows it as a card of its own, pending until
        // now); its ids are the sub-session's model's, unique like the caller's.
        self.parent.tool_running(&self.parent_id, tool_call_id);
    }

    fn apply_edit(
        &self,
        path: std::path::PathBuf,
        old_text: Option<String>,
        new_text: String,
    ) -> Option<BoxFuture<'static, Result<(), String>>> {
        self.parent.apply_edit(path, old_text, new_text)
    }

    fn read_text(
        &self,
        path: std::path::PathBuf,
    ) -> Option<BoxFuture<'static, Result<String, String>>> {
        self.parent.read_text(path)
    }

    fn run_command(
        &self,
        _session_id: &str,
        run: CommandRun,
    ) -> Option<BoxFuture<'static, ClientToolResult>> {
        self.parent.run_command(&self.parent_id, run)
    }

    fn progress(&self, token: &str, progress: Progress) {
        self.parent.progress(token, progress);
    }

    fn client_symbols(
        &self,
        _session_id: &str,
        query: crate::tools::SymbolQuery,
    ) -> Option<BoxFuture<'static, Result<crate::tools::SymbolAnswer, String>>> {
        self.parent.client_symbols(&self.parent_id, query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_gathered_until_enough_or_a_while() {
        let t0 = Instant::now();
        let mut c = Coalesce::default();
        assert_eq!(c.push("a", t0), None);
        assert_eq!(c.push("b", t0 + Duration::from_millis(10)), None);
        assert_eq!(
            c.push("c", t0 + RELAY_EVERY).as_deref(),
            Some("abc"),
            "a while after the first"
        );
        assert_eq!(c.take(), None);
        let long = "x".repeat(RELAY_CHARS);
        assert_eq!(c.push(&long, t0 + RELAY_EVERY * 3), Some(long));
        assert_eq!(c.push("tail", t0), None);
        assert_eq!(c.take().as_deref(), Some("tail"));
    }

    #[test]
    fn only_part_of_the_stream_is_relayed_and_outputs_are_cut() {
        assert!(relayed(TurnEvent::StepStarted { step: 1 }).is_none());
        assert!(relayed(TurnEvent::ThinkingDelta { text: "t".into() }).is_none());
        let hook = |phase| TurnEvent::Hook {
            event: "PreToolUse".into(),
            phase,
            subject: None,
            message: None,
        };
        assert!(relayed(hook(super::super::events::HookPhase::Started)).is_none());
        assert!(relayed(hook(super::super::events::HookPhase::Failed)).is_some());
        let finished = TurnEvent::ToolCallFinished {
            id: "c".into(),
            name: "read_file".into(),
            output: "y".repeat(RELAY_OUTPUT_CHARS * 2),
            is_error: false,
            meta: Default::default(),
        };
        match relayed(finished) {
            Some(TurnEvent::ToolCallFinished { output, meta, .. }) => {
                assert!(output.chars().count() < RELAY_OUTPUT_CHARS + 200);
                assert!(meta.truncated);
            }
            other => panic!("{other:?}"),
        }
    }
}
