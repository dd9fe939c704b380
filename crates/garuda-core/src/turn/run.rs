//! The step loop of one turn.

use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::ask::{INTERRUPTED, interrupted};
use super::budget::learn_limit;
use super::call::Call;
use super::compact::{CompactRequest, compact_if_needed, compact_session};
use super::events::{TurnEvent, TurnFailure};
use super::host::TurnHost;
use super::live::{LiveSession, SessionState, TurnError};
use super::side::request_chars;
use super::view::forget_reads_out_of_view;
use super::view::step_view;
use crate::message::{Block, Role, StopReason, Usage};
use crate::provider::{ModelRequest, ModelResponse, ProviderError, StreamEvent};
use crate::session::cache_miss::{self, CacheMiss, RequestPrint};
use crate::session::compact::{nudge_due, nudge_text, result_budget_chars};
use crate::session::records::CompactTrigger;
use crate::session::records::{
    MediaRefusedRecord, MessageMeta, UsagePurpose, UsageRecord, latest_boundary, new_id, now_ms,
};
use crate::session::view::{media_refusal_targets, message_chars, oversized_results};
use crate::session::{MessageRecord, Record};
use crate::tools::{ToolClass, ToolContext, ToolLimits, ToolOutput};

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Usage summed over its steps.
    pub usage: Usage,
    /// Ids of the messages it appended, in order.
    pub message_ids: Vec<String>,
    /// The provider error that ended it, if any (the transcript is consistent anyway).
    pub error: Option<String>,
}

use crate::session::compact::{blocking_limit, output_floor};

/// What a caller may bound or ask of one turn beyond the defaults (`garuda exec`'s
/// `--max-turns`, `--max-budget-usd`, `--output-schema`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnOptions {
    /// Most model requests in this turn, replacing the built-in limit; reaching it stops
    /// with [`StopReason::MaxTurns`].
    pub max_turns: Option<u32>,
    /// No further request once this turn's cost (its usage at the model's configured
    /// prices) reaches this many US dollars: it stops with [`StopReason::MaxBudget`].
    /// Refused as invalid when the model has no prices.
    pub max_cost_usd: Option<f64>,
    /// A JSON Schema the final answer should follow, sent as the provider's structured
    /// output where it has one (the caller validates; the core does not).
    pub output_schema: Option<Value>,
}

/// Runs one user turn to its end: steps until the model stops, the step limit, an error or
/// cancellation. Every message is persisted as it happens.
pub async fn run_turn(
    session: &Arc<LiveSession>,
    input: Vec<Block>,
    host: Arc<dyn TurnHost>,
    cancel: CancellationToken,
    max_steps: u32,
) -> Result<TurnOutcome, TurnError> {
    run_turn_with(
        session,
        input,
        host,
        cancel,
        max_steps,
        TurnOptions::default(),
    )
    .await
}

/// [`run_turn`] with a caller's limits and output schema.
pub async fn run_turn_with(
    session: &Arc<LiveSession>,
    input: Vec<Block>,
    host: Arc<dyn TurnHost>,
    cancel: CancellationToken,
    max_steps: u32,
    opts: TurnOptions,
) -> Result<TurnOutcome, TurnError> {
    if input.is_empty() {
        return Err(TurnError::Invalid("turn input is empty".into()));
    }
    if opts.max_cost_usd.is_some() && session.model().info.prices.is_none() {
        return Err(TurnError::Invalid(format!(
            "a cost limit needs the prices of {} (prices in its [models] table of config.toml)",
            session.model_spec()
        )));
    }
    let mut state = session.begin(&cancel).await?;
    // A large session whose provider cache expired since its last request starts from its
    // memory: the prefix the first request must write anew is then a small one.
    let mut at_start = 0;
    let mut result =
        match super::memory::compact_if_idle(session, &mut state, host.as_ref(), &cancel).await {
            Ok(_) => {
                at_start = super::budget::context_tokens(session, &mut state).unwrap_or(0);
                run_locked(
                    session,
                    &mut state,
                    input,
                    host.as_ref(),
                    &cancel,
                    max_steps,
                    &opts,
                )
                .await
            }
            Err(e) => Err(e),
        };
    // A natural pause: the memory is brought up to date, and a collapse the next steps will
    // need is asked for, behind the answer.
    if result.is_ok() {
        if let Err(e) = super::memory::after_turn(session, &mut state, host.clone()) {
            tracing::warn!("the session memory was not updated: {e}");
        }
        let grown = super::budget::context_tokens(session, &mut state)
            .unwrap_or(0)
            .saturating_sub(at_start);
        if !session.is_agent()
            && let Err(e) = super::ops::collapse_ahead(session, &mut state, grown)
        {
            tracing::warn!("no collapse summary was asked ahead: {e}");
        }
    }
    if let Err(e) = &result
        && let Err(store) = super::fit::drop_unanswered(&mut state, e)
    {
        result = Err(store);
    }
    drop(state);
    // Clients wait for `finished` to end their spinner, whatever the outcome.
    let (stop_reason, usage, error) = match &result {
        Ok(out) => (out.stop_reason, out.usage, None),
        Err(e) => (
            StopReason::Error,
            Usage::default(),
            Some(TurnFailure {
                kind: e.kind().to_string(),
                message: e.to_string(),
            }),
        ),
    };
    host.event(
        &session.id,
        TurnEvent::Finished {
            stop_reason,
            usage,
            error,
        },
    );
    result
}

/// Runs an agent's sub-session's turn on `host` (the caller's, wrapped): like [`run_turn`]
/// without the `finished` event (the caller's tool call reports the end).
pub(crate) async fn run_child(
    session: &Arc<LiveSession>,
    input: Vec<Block>,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
    max_steps: u32,
) -> Result<TurnOutcome, TurnError> {
    let mut state = session.begin(cancel).await?;
    let opts = TurnOptions::default();
    let result = run_locked(session, &mut state, input, host, cancel, max_steps, &opts).await;
    if let Err(e) = &result {
        super::fit::drop_unanswered(&mut state, e)?;
    }
    result
}

const MODEL_NOTE_HEAD: &str = "<garuda_note>The model was switched: from here on the model is ";

/// The note telling the model it was switched to `spec` (the system prompt still names the
/// model the session started with, so its bytes and the provider's cache stay).
pub fn model_note(spec: &str) -> String {
    format!(
        "{MODEL_NOTE_HEAD}{}. Where the system prompt names another model, this note wins.</garuda_note>",
        crate::prompt::visible(spec)
    )
}

/// The model a [`model_note`] names (a session loaded again restores the switch).
pub fn model_in_note(text: &str) -> Option<&str> {
    let rest = text.strip_prefix(MODEL_NOTE_HEAD)?;
    rest.split_once(". Where the system prompt").map(|(m, _)| m)
}

/// What the MCP servers reported since the model last heard (a failed start, a server that
/// died, a changed tool list, the servers' instructions when the set of servers changed):
/// one note before the user's message, each event once.
async fn mcp_note(session: &LiveSession, state: &SessionState) -> Option<MessageRecord> {
    // A sub-session's servers are its caller's, whose model hears their events.
    let hub = session.setup.mcp.as_ref().filter(|_| !session.is_agent())?;
    let events = hub.take_events().await;
    let mut lines: Vec<String> = events.iter().map(crate::mcp::McpEvent::note).collect();
    // The servers' instructions follow the set of servers: a difference is a note.
    if let Some(list) = hub.take_instruction_change() {
        lines.push(crate::prompt::mcp::change_note(&list));
    }
    if lines.is_empty() {
        return None;
    }
    let note = format!("<garuda_note>{}</garuda_note>", lines.join("\n"));
    let mut message =
        MessageRecord::new(Role::User, vec![Block::text(note)], state.last_message_id());
    message.meta = Some(MessageMeta::InstructionNote);
    Some(message)
}

/// Refuses a user message that cannot fit the window whatever is compacted.
fn check_fits(
    session: &LiveSession,
    state: &mut SessionState,
    input: &[Block],
) -> Result<(), TurnError> {
    let b = super::budget::budgets(session, state);
    let est = state.tracker.estimator;
    let message_tokens = est.estimate(input.iter().map(Block::char_len).sum());
    let fixed_tokens = est.estimate(super::budget::fixed_chars(session));
    let floor = output_floor(b.window);
    if fixed_tokens < b.window && fixed_tokens + message_tokens > b.window {
        return Err(TurnError::TooLarge {
            message_tokens,
            fixed_tokens,
            window_tokens: b.window,
        });
    }
    // Whatever is compacted, the fixed part, the message and the least answer room must
    // fit: a window smaller than that is refused here, with the sizes, never sent.
    if fixed_tokens + message_tokens + floor > b.window {
        return Err(TurnError::DoesNotFit {
            fixed_tokens,
            history_tokens: 0,
            message_tokens,
            output_tokens: floor,
            window_tokens: b.window,
        });
    }
    if !session.setup.compact.auto_compact {
        let now = super::budget::context_tokens(session, state)?;
        check_blocking(session, state, now + message_tokens)?;
    }
    Ok(())
}

/// With auto-compaction off, refuses a request over the blocking limit before it is sent.
fn check_blocking(
    session: &LiveSession,
    state: &SessionState,
    context_tokens: u64,
) -> Result<(), TurnError> {
    let window = super::budget::window(session, state);
    let limit = blocking_limit(window);
    if !session.setup.compact.auto_compact && context_tokens > limit {
        return Err(TurnError::OverLimit {
            context_tokens,
            limit_tokens: limit,
            window_tokens: window,
        });
    }
    Ok(())
}

/// One turn while it runs: what its phases share, so none of them takes the session, its
/// state, the host and the cancel token one by one.
struct Turn<'a> {
    session: &'a Arc<LiveSession>,
    state: &'a mut SessionState,
    host: &'a dyn TurnHost,
    cancel: &'a CancellationToken,
    outcome: TurnOutcome,
    /// What the tools of this turn run with.
    ctx: ToolContext,
    /// Reactive compactions left for this step: the first teaches the limit; a second one
    /// covers an estimate that was still off.
    reactive_left: u32,
    /// Media refusals left for this turn: each strips what the provider named and runs the
    /// step again.
    media_left: u32,
    /// The caller's schema for the final answer, sent with every main request.
    output_schema: Option<Value>,
}

/// What the accounting of a sent request needs.
struct Sent {
    request_chars: u64,
    view_chars: usize,
    /// What the request sent, in hashes, to explain a cache miss.
    print: RequestPrint,
}

/// How a failed model call ends the step.
enum Answer {
    /// A relief ran (media stripped, a reactive compaction): run the step again.
    Again,
    /// The turn ends here (cancelled).
    Stop,
}

async fn run_locked(
    session: &Arc<LiveSession>,
    state: &mut SessionState,
    input: Vec<Block>,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
    max_steps: u32,
    opts: &TurnOptions,
) -> Result<TurnOutcome, TurnError> {
    // A local server says what window it was started with before the first request.
    session.ask_server_window().await;
    let mut t = Turn::open(session, state, input, host, cancel).await?;
    t.output_schema = opts.output_schema.clone();
    let (limit, at_limit) = match opts.max_turns {
        Some(n) => (n, StopReason::MaxTurns),
        None => (max_steps, StopReason::MaxSteps),
    };
    let mut stop_continuations = 0;
    for step in 1..=limit {
        if t.cancel.is_cancelled() {
            return Ok(t.end(StopReason::Cancelled));
        }
        t.host.event(&t.session.id, TurnEvent::StepStarted { step });
        if !t.relieve().await? {
            return Ok(t.end(StopReason::Cancelled));
        }
        let (request, sent) = t.request()?;
        let response = match t.call(request).await {
            Ok(r) => r,
            Err(e) => match t.failed(e, &sent).await? {
                Answer::Again => continue,
                Answer::Stop => return Ok(t.outcome),
            },
        };
        let calls = t.record(&response, &sent)?;
        // The provider paused its own tool work: the answer so far, recorded, is the next
        // request's last message, and the model goes on from it.
        if calls.is_empty() && response.stop_reason == StopReason::PauseTurn {
            continue;
        }
        if calls.is_empty() {
            // A Stop hook may send the model back to work, a bounded number of times.
            if response.stop_reason == StopReason::EndTurn
                && stop_continuations < crate::hooks::STOP_CONTINUATIONS_MAX
                && super::hooks::stop_blocks(
                    t.session,
                    t.state,
                    t.host,
                    t.cancel,
                    &response,
                    stop_continuations > 0,
                )
                .await?
            {
                stop_continuations += 1;
                continue;
            }
            return Ok(t.end(response.stop_reason));
        }
        t.run_calls(calls, &response).await?;
        if t.cancel.is_cancelled() {
            return Ok(t.end(StopReason::Cancelled));
        }
        // Checked once the step's calls have their results, so the transcript ends
        // consistent and the session can be continued.
        if let (Some(max), Some(prices)) = (opts.max_cost_usd, session.model().info.prices)
            && prices.cost(&t.outcome.usage) >= max
        {
            return Ok(t.end(StopReason::MaxBudget));
        }
    }
    Ok(t.end(at_limit))
}

impl<'a> Turn<'a> {
    /// Opens the turn: refuses a message that cannot fit, appends the notes the model has
    /// not heard (instruction files, a model switch, MCP events, nested instructions) and
    /// the user's message.
    async fn open(
        session: &'a Arc<LiveSession>,
        state: &'a mut SessionState,
        input: Vec<Block>,
        host: &'a dyn TurnHost,
        cancel: &'a CancellationToken,
    ) -> Result<Turn<'a>, TurnError> {
        let mut outcome = TurnOutcome {
            stop_reason: StopReason::EndTurn,
            usage: Usage::default(),
            message_ids: Vec::new(),
            error: None,
        };
        session.settle_mcp(cancel).await;
        // A small window gets the lean fixed part before its first request.
        session.settle_lean(super::budget::window(session, state));
        check_fits(session, state, &input)?;
        let input = super::hooks::before_prompt(session, state, host, cancel, input).await?;
        let note = super::instructions::current_note(session, state)?;
        state.append(note)?;
        if let Some(spec) = session.take_model_note() {
            let mut note = MessageRecord::new(
                Role::User,
                vec![Block::text(model_note(&spec))],
                state.last_message_id(),
            );
            note.meta = Some(MessageMeta::ModelNote);
            state.append(vec![Record::Message(note)])?;
        }
        if let Some(note) = mcp_note(session, state).await {
            state.append(vec![Record::Message(note)])?;
        }
        // Nested instructions changed on disk since the last turn.
        let scoped = super::scoped::scoped_note(session, state)?;
        state.append(scoped.records)?;
        super::hooks::scoped_loaded(session, &scoped.loaded);
        super::skills::change_note(session, state)?;
        let user = MessageRecord::new(Role::User, input, state.last_message_id());
        outcome.message_ids.push(user.uuid.clone());
        state.append(vec![Record::Message(user)])?;
        session.heard_user();
        let ctx = ToolContext {
            root: session.setup.workspace.root.clone(),
            files: session.files.clone(),
            todos: session.todos.clone(),
            limits: ToolLimits::default().within(result_budget_chars(
                super::budget::window(session, state),
                session.setup.compact.result_share,
            )),
            cancel: cancel.clone(),
            state_dir: Some(session.setup.view_policy.tool_results_dir.clone()),
            call_id: None,
            commands: session.setup.commands.clone(),
            readable: session.readable.clone(),
            outside_sandbox: false,
        };
        Ok(Turn {
            session,
            state,
            host,
            cancel,
            outcome,
            ctx,
            reactive_left: 2,
            media_left: 4,
            output_schema: None,
        })
    }

    /// The outcome, with how the turn stopped.
    fn end(mut self, stop: StopReason) -> TurnOutcome {
        self.outcome.stop_reason = stop;
        self.outcome
    }

    /// Before a request: the relief the context needs, then the notes every request must
    /// carry, the blocking limit and the snip nudge. False when the turn was cancelled.
    async fn relieve(&mut self) -> Result<bool, TurnError> {
        let (session, host, cancel) = (self.session, self.host, self.cancel);
        let state = &mut *self.state;
        // Notes that arrived since the turn began are what a compaction here installs.
        super::memory::write_pending(session, state);
        if let Some(c) = compact_if_needed(session, state, host, cancel).await? {
            self.outcome.usage.add(&c.usage);
        }
        if cancel.is_cancelled() {
            return Ok(false);
        }
        // Whatever relief ran (or a file changed mid-turn), the request carries the
        // instruction files' current text and the todo list.
        let note = super::instructions::current_note(session, state)?;
        state.append(note)?;
        let todo = super::todo::kept_in_view(session, state)?;
        state.append(todo)?;
        super::plan::mode_note(session, state)?;
        let before = super::budget::context_tokens(session, state)?;
        check_blocking(session, state, before)?;
        if session.setup.compact.auto_compact {
            let used = super::fit::make_room(session, state, host, cancel).await?;
            self.outcome.usage.add(&used);
            if cancel.is_cancelled() {
                return Ok(false);
            }
        }
        nudge_if_due(session, state)?;
        Ok(true)
    }

    /// The step's request: the view, the session's system prompt and tools, and no more
    /// output than the window has left (providers count it into the window; the reliefs
    /// left at least the output floor).
    fn request(&mut self) -> Result<(ModelRequest, Sent), TurnError> {
        let session = self.session;
        let state = &mut *self.state;
        let tokens = super::budget::context_tokens(session, state)?;
        let window = super::budget::window(session, state);
        let room = window.saturating_sub(tokens);
        let floor = if session.setup.compact.auto_compact {
            1
        } else {
            output_floor(window)
        };
        let max_tokens = (session.model().info.max_output as u64).min(room.max(floor));
        let sv = step_view(state, &session.setup.view_policy)?;
        let request = ModelRequest {
            model: session.model().id.clone(),
            system: session.system(),
            // Fixed between compactions; one may have installed a changed MCP list above.
            tools: session.tool_specs(),
            messages: sv.messages,
            max_tokens: max_tokens as u32,
            cache: sv.cache,
            thinking_budget: None,
            output_schema: self.output_schema.clone(),
            no_tool_calls: false,
            tool_clearing: session.setup.tool_clearing.clone(),
        };
        let boundary = latest_boundary(state.records()).map(|b| b.uuid.clone());
        let print = RequestPrint::new(
            &request.model,
            &request.system,
            &serde_json::to_string(&request.tools).unwrap_or_default(),
            &request.messages,
            now_ms(),
            boundary,
        );
        let sent = Sent {
            request_chars: request_chars(&request) as u64,
            view_chars: sv.view_chars,
            print,
        };
        Ok((request, sent))
    }

    /// Streams the model's answer, forwarding its events to the client.
    async fn call(&self, request: ModelRequest) -> Result<ModelResponse, ProviderError> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<StreamEvent>();
        let call = self
            .session
            .model()
            .provider
            .complete(request, tx, self.cancel.clone());
        let forward = async {
            while let Some(ev) = rx.recv().await {
                forward_event(self.host, &self.session.id, ev);
            }
        };
        let (result, ()) = tokio::join!(call, forward);
        result
    }

    /// A failed call: what arrived is kept; a cancel ends the turn; a media refusal or a
    /// prompt-too-long gets its relief and the step runs again; anything else fails the turn.
    async fn failed(&mut self, e: ProviderError, sent: &Sent) -> Result<Answer, TurnError> {
        let (session, host, cancel) = (self.session, self.host, self.cancel);
        let state = &mut *self.state;
        let cancelled = matches!(e, ProviderError::Cancelled { .. });
        let partial = e.partial().to_vec();
        let had_partial = !partial.is_empty();
        if had_partial {
            let ids = append_assistant_and_close(state, partial, INTERRUPTED)?;
            self.outcome.message_ids.extend(ids);
        }
        if cancelled {
            self.outcome.stop_reason = StopReason::Cancelled;
            return Ok(Answer::Stop);
        }
        if e.is_media_refused()
            && !had_partial
            && self.media_left > 0
            && refuse_media(session, state, &e)?
        {
            self.media_left -= 1;
            return Ok(Answer::Again);
        }
        let auto_compact = session.setup.compact.auto_compact;
        let chars = Some(sent.request_chars as usize);
        if e.is_prompt_too_long() && !auto_compact {
            // Nothing compacts by itself: keep the limit, so the next request is refused
            // before it is sent, and report the refusal.
            learn_limit(session, state, &e, chars, Some(sent.view_chars))?;
        }
        if e.is_prompt_too_long() && auto_compact && !had_partial && self.reactive_left > 0 {
            // The provider counted more than its limit: learn the limit, compact under it,
            // and run the step again.
            self.reactive_left -= 1;
            let refused = learn_limit(session, state, &e, chars, Some(sent.view_chars))?;
            let done = compact_session(
                session,
                state,
                host,
                cancel,
                CompactRequest {
                    trigger: CompactTrigger::Reactive,
                    focus: None,
                    refused_tokens: refused,
                    relief: None,
                },
                &|_, _, _| {},
            )
            .await?;
            self.outcome.usage.add(&done.usage);
            // Compacted or not, the step runs again: its reliefs now count with the size the
            // provider named, and take the further steps (or refuse) before sending again.
            return Ok(Answer::Again);
        }
        Err(TurnError::Provider(e))
    }

    /// Records the answer and its usage (the client hears the usage and the cost); returns
    /// the tool calls to run.
    fn record(
        &mut self,
        response: &ModelResponse,
        sent: &Sent,
    ) -> Result<Vec<(String, String, Value)>, TurnError> {
        let session = self.session;
        let state = &mut *self.state;
        self.outcome.usage.add(&response.usage);
        state.last_usage = Some(response.usage);
        let cache_miss = explain_miss(state, &sent.print, &response.usage);
        state.cache_print = Some((sent.print.clone(), response.usage));
        self.host.event(
            &session.id,
            TurnEvent::Usage {
                usage: response.usage,
                context_tokens: response.usage.context_tokens(),
                cost_usd: session_cost(session, state, &response.usage),
                cache_hit_ratio: cache_miss::hit_ratio(&response.usage),
                session_cache_hit_ratio: cache_miss::session_hit_ratio(
                    state.records(),
                    &response.usage,
                ),
                cache_miss: cache_miss.clone(),
            },
        );
        let assistant = MessageRecord::new(
            Role::Assistant,
            response.content.clone(),
            state.last_message_id(),
        );
        let assistant_id = assistant.uuid.clone();
        self.outcome.message_ids.push(assistant_id.clone());
        let view_chars = sent.view_chars + message_chars(&assistant.to_message());
        state.append(vec![
            Record::Message(assistant),
            Record::Usage(UsageRecord {
                uuid: new_id(),
                time: now_ms(),
                message_id: assistant_id,
                request_chars: Some(sent.request_chars),
                view_chars: Some(view_chars as u64),
                usage: response.usage,
                purpose: None,
                cost_usd: None,
                cache_miss,
            }),
        ])?;
        state.tracker.on_usage(
            &response.usage,
            Some(sent.request_chars as usize),
            view_chars,
        );
        Ok(crate::message::tool_calls(&response.content))
    }

    /// Runs the step's tool calls in order (asking where policy says so) and appends their
    /// results, with the instructions of the folders they worked in. Calls that may run at
    /// once (`explore`) and follow one another run together, at most `[agents] concurrency`
    /// at a time; their results keep the calls' order.
    async fn run_calls(
        &mut self,
        calls: Vec<(String, String, Value)>,
        response: &ModelResponse,
    ) -> Result<(), TurnError> {
        let (session, host, cancel) = (self.session, self.host, self.cancel);
        let tools = session.tools();
        let reads = |name: &str| {
            tools
                .get(name)
                .is_some_and(|e| e.class == ToolClass::Read && e.path_arg.is_some())
        };
        if calls.iter().any(|(_, name, _)| reads(name)) {
            // A read may answer "unchanged" only while the earlier content is in the view.
            forget_reads_out_of_view(session, self.state)?;
        }
        let refused = |id: &str| response.tool_errors.iter().find(|e| e.id == id);
        let together = |id: &str, name: &str| {
            refused(id).is_none() && tools.get(name).is_some_and(|e| e.handler.concurrent())
        };
        let transcript = Some(self.state.file.path().to_path_buf());
        let mut results = Vec::with_capacity(calls.len());
        let mut i = 0;
        while i < calls.len() {
            let mut end = i + 1;
            if together(&calls[i].0, &calls[i].1) {
                while end < calls.len() && together(&calls[end].0, &calls[end].1) {
                    end += 1;
                }
            }
            if end - i > 1 && !cancel.is_cancelled() {
                let group = &calls[i..end];
                for (id, name, input) in group {
                    host.event(
                        &session.id,
                        TurnEvent::ToolCallStarted {
                            id: id.clone(),
                            name: name.clone(),
                            input: input.clone(),
                        },
                    );
                }
                // Boxed one by one (no closure over borrowed calls): the future of a turn
                // that runs agents' turns must stay nameable as `Send`.
                let mut runs: Vec<futures_util::future::BoxFuture<'_, _>> = Vec::new();
                for (k, (id, name, input)) in group.iter().enumerate() {
                    let call = Call {
                        session,
                        host,
                        state: None,
                        transcript: transcript.clone(),
                        ctx: self.ctx.for_call(id),
                        id,
                        name,
                    };
                    runs.push(Box::pin(async move { (k, call.run(input.clone()).await) }));
                }
                let limit = session.setup.agent_settings.concurrency.max(1);
                let mut done: Vec<Option<ToolOutput>> = vec![None; group.len()];
                let mut stream = futures_util::stream::iter(runs).buffer_unordered(limit);
                while let Some((k, out)) = stream.next().await {
                    done[k] = Some(out);
                }
                drop(stream);
                for ((id, name, input), out) in group.iter().zip(done) {
                    let out = out.unwrap_or_else(interrupted);
                    let block = self.finish_call(id, name, input, out)?;
                    results.push(block);
                }
                i = end;
                continue;
            }
            let (id, name, input) = calls[i].clone();
            i += 1;
            let out = if cancel.is_cancelled() {
                interrupted()
            } else {
                host.event(
                    &session.id,
                    TurnEvent::ToolCallStarted {
                        id: id.clone(),
                        name: name.clone(),
                        input: input.clone(),
                    },
                );
                match refused(&id) {
                    // Bad arguments: the model hears why, nothing runs, nothing is asked.
                    Some(e) => ToolOutput::error(e.message.clone()),
                    None => {
                        let call = Call {
                            session,
                            host,
                            state: Some(&mut *self.state),
                            transcript: transcript.clone(),
                            ctx: self.ctx.for_call(&id),
                            id: &id,
                            name: &name,
                        };
                        call.run(input.clone()).await
                    }
                }
            };
            let block = self.finish_call(&id, &name, &input, out)?;
            results.push(block);
        }
        let state = &mut *self.state;
        let user = MessageRecord::new(Role::User, results, state.last_message_id());
        // Oversized results are kept whole in side files; the view shows a preview and the path.
        for side in oversized_results(&user.to_message(), &session.setup.view_policy) {
            if let Some(dir) = side.path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let Err(e) = std::fs::write(&side.path, &side.text) {
                tracing::warn!("cannot write {}: {e}", side.path.display());
            }
        }
        self.outcome.message_ids.push(user.uuid.clone());
        state.append(vec![Record::Message(user)])?;
        super::plan::record_approved(state)?;
        // Instructions of the folders the tools just worked in join the results' message.
        let scoped = super::scoped::scoped_note(session, state)?;
        state.append(scoped.records)?;
        super::hooks::scoped_loaded(session, &scoped.loaded);
        Ok(())
    }

    /// After a call: where it worked, the todo list, an agent's usage (recorded here, so the
    /// session's cost covers it), the `toolCallFinished` event; answers its result block.
    fn finish_call(
        &mut self,
        id: &str,
        name: &str,
        input: &Value,
        mut out: ToolOutput,
    ) -> Result<Block, TurnError> {
        let (session, host) = (self.session, self.host);
        let state = &mut *self.state;
        touched(session, state, name, input, &out);
        if out.meta.todos_changed {
            let todos = session
                .todos
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            host.event(&session.id, TurnEvent::Todos { todos });
        }
        if let Some(usage) = out.meta.agent.as_ref().map(|a| a.usage) {
            self.outcome.usage.add(&usage);
            state.append(vec![Record::Usage(UsageRecord {
                uuid: new_id(),
                time: now_ms(),
                message_id: state.last_message_id().unwrap_or_default(),
                usage,
                request_chars: None,
                view_chars: None,
                purpose: Some(UsagePurpose::Agent),
                cost_usd: out.meta.agent.as_ref().and_then(|a| a.cost_usd),
                cache_miss: None,
            })])?;
        }
        host.event(
            &session.id,
            TurnEvent::ToolCallFinished {
                id: id.to_string(),
                name: name.to_string(),
                output: out.content.clone(),
                is_error: out.is_error,
                meta: out.meta.clone(),
            },
        );
        let mut content = vec![Block::text(out.content)];
        content.append(&mut out.blocks);
        Ok(Block::ToolResult {
            tool_use_id: id.to_string(),
            content,
            is_error: out.is_error,
        })
    }
}

/// The context_efficiency nudge: when the context grew by `nudge_share` of the window since
/// the last snip (or nudge, or shrink) and the model has the snip tool, a note suggesting it
/// joins the next user message.
/// Why a main request read less from the cache than the previous one left: against the
/// previous request's print, or after a load against the last main request's time alone.
fn explain_miss(state: &SessionState, print: &RequestPrint, usage: &Usage) -> Option<CacheMiss> {
    if let Some((p, u)) = &state.cache_print {
        return cache_miss::explain(Some((p, u)), print, usage);
    }
    let last = state.records().iter().rev().find_map(|r| match r {
        Record::Usage(u) if u.purpose.is_none() => Some((u.usage, u.time)),
        _ => None,
    });
    match last {
        Some((u, time)) => cache_miss::explain_after_load((&u, time), print, usage),
        None => cache_miss::explain(None, print, usage),
    }
}

fn nudge_if_due(session: &LiveSession, state: &mut SessionState) -> Result<(), TurnError> {
    let share = session.setup.compact.nudge_share;
    if share <= 0.0 || !session.tools().offers_snip() {
        return Ok(());
    }
    let tokens = super::budget::context_tokens(session, state)?;
    let since = match state.nudge_since {
        Some(s) if s <= tokens => s,
        // First look, or the context shrank (compaction, collapse): count from here.
        _ => {
            state.nudge_since = Some(tokens);
            return Ok(());
        }
    };
    let window = super::budget::window(session, state);
    if !nudge_due(tokens, since, window, share) {
        return Ok(());
    }
    let text = nudge_text(tokens - since, tokens, window);
    let mut note = MessageRecord::new(Role::User, vec![Block::text(text)], state.last_message_id());
    note.meta = Some(MessageMeta::Nudge);
    state.append(vec![Record::Message(note)])?;
    state.nudge_since = Some(super::budget::context_tokens(session, state)?);
    Ok(())
}

/// After a media refusal: records which messages lose their media (the view shows a marker
/// from now on, also after a resume). False when no media is left to strip.
fn refuse_media(
    session: &LiveSession,
    state: &mut SessionState,
    err: &ProviderError,
) -> Result<bool, TurnError> {
    let view = super::view::current_view(state, &session.setup.view_policy)?;
    let ids = media_refusal_targets(view, &err.to_string());
    if ids.is_empty() {
        return Ok(false);
    }
    tracing::info!(
        "the provider refused media; stripping it from {} message(s)",
        ids.len()
    );
    state.append(vec![Record::MediaRefused(MediaRefusedRecord {
        uuid: new_id(),
        time: now_ms(),
        message_ids: ids,
        reason: err.to_string(),
    })])?;
    Ok(true)
}

/// Records where a call worked (for nested instructions and rules); an instruction file
/// written by a tool is read again.
fn touched(
    session: &LiveSession,
    state: &mut SessionState,
    name: &str,
    input: &Value,
    out: &ToolOutput,
) {
    let ws = &session.setup.workspace;
    if let Some(place) = session.tools().get(name).and_then(|e| e.touched(input)) {
        state.scope.touch(&ws.root, place);
    }
    let instruction_file = |p: &str| {
        let name = p.rsplit('/').next().unwrap_or(p);
        crate::prompt::sources::FILE_NAMES.contains(&name)
            || p == crate::prompt::sources::COPILOT_FILE
            || [".cursor/rules/", ".github/instructions/", ".claude/rules/"]
                .iter()
                .any(|d| p.starts_with(d))
    };
    if out.meta.wrote && out.meta.path.as_deref().is_some_and(instruction_file) {
        ws.invalidate();
    }
}

/// Appends a partial assistant message and answers each of its tool calls with `note`,
/// so the transcript never holds a tool_use without its tool_result.
fn append_assistant_and_close(
    state: &mut SessionState,
    partial: Vec<Block>,
    note: &str,
) -> Result<Vec<String>, TurnError> {
    let uses: Vec<String> = partial
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    let assistant = MessageRecord::new(Role::Assistant, partial, state.last_message_id());
    let mut ids = vec![assistant.uuid.clone()];
    let mut records = vec![Record::Message(assistant.clone())];
    if !uses.is_empty() {
        let results = uses
            .into_iter()
            .map(|id| Block::ToolResult {
                tool_use_id: id,
                content: vec![Block::text(note)],
                is_error: true,
            })
            .collect();
        let user = MessageRecord::new(Role::User, results, Some(assistant.uuid.clone()));
        ids.push(user.uuid.clone());
        records.push(Record::Message(user));
    }
    state.append(records)?;
    Ok(ids)
}

fn forward_event(host: &dyn TurnHost, session_id: &str, ev: StreamEvent) {
    let ev = match ev {
        StreamEvent::TextDelta(text) => TurnEvent::TextDelta { text },
        StreamEvent::ThinkingDelta(text) => TurnEvent::ThinkingDelta { text },
        StreamEvent::Retry {
            attempt,
            delay_ms,
            reason,
        } => TurnEvent::Retry {
            attempt,
            delay_ms,
            reason,
        },
        // The provider ran these itself: nothing was asked, nothing runs here.
        StreamEvent::ServerToolUse { id, name, input } => {
            TurnEvent::ToolCallStarted { id, name, input }
        }
        StreamEvent::ServerToolResult {
            id,
            name,
            output,
            is_error,
        } => TurnEvent::ToolCallFinished {
            id,
            name,
            output,
            is_error,
            meta: crate::tools::ToolMeta {
                server_side: true,
                ..Default::default()
            },
        },
        // Tool calls are reported whole when they run; usage when the step ends.
        StreamEvent::ToolUseStart { .. }
        | StreamEvent::ToolUseInputDelta { .. }
        | StreamEvent::Usage(_) => return,
    };
    host.event(session_id, ev);
}

/// The session's cost so far in US dollars, `latest` included (not yet recorded); `None`
/// when the config names no prices for the session's model.
fn session_cost(session: &LiveSession, state: &SessionState, latest: &Usage) -> Option<f64> {
    let prices = session.model().info.prices?;
    Some(crate::session::usage::session_cost(
        state.records(),
        &prices,
        latest,
    ))
}
