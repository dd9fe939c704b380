//! The compaction worker's IO: a bounded side session against the session's model that
//! browses the older part through read-only tools and writes the summary. The decisions
//! (capture, overview, budgets, nominations) are `session::compact::worker`'s; this runs the
//! requests, reads files through the root, and stops on cancel, leaving the session as it
//! was (only usage records are written, as for every side request).

use std::path::Path;

use tokio_util::sync::CancellationToken;

use super::host::TurnHost;
use super::live::{LiveSession, SessionState};
use super::side::side_call;
use crate::message::{Block, CachePlan, Message, Role, Usage};
use crate::provider::{ModelRequest, ProviderError};
use crate::session::compact::{
    Budgets, Capture, TodoEntry, WORKER_SYSTEM, WorkerCall, WorkerOutcome, WorkerRun,
    fit_conversation, previous_summary, rewrite_for_summary, run_input, strip_analysis,
    worker_budgets, worker_tools,
};
use crate::session::records::UsagePurpose;
use crate::session::view::{ViewMessage, tag_messages};

/// Why a worker run ended without an outcome the caller can use.
#[derive(Debug)]
pub(crate) enum WorkerEnd {
    /// Cancelled: the caller stops too.
    Cancelled,
    /// No summary (the worker ended without write_summary, or a request failed): the
    /// caller falls back to the regular summary request.
    NoSummary(Option<ProviderError>),
}

/// What the worker summarizes and within what.
pub(crate) struct WorkerTask<'a> {
    /// The older part (before the split), as the view holds it.
    pub older: &'a [ViewMessage],
    /// The session's todo list.
    pub todo: &'a [TodoEntry],
    /// The "Compact Instructions" section of the instruction files.
    pub compact_instructions: Option<&'a str>,
    /// The manual focus text.
    pub focus: Option<&'a str>,
    /// The session's budgets (summary target, restoration).
    pub budgets: Budgets,
}

/// Runs the worker: its summary, nominations and references, or why there are none.
/// Usage of every request is recorded (`purpose: worker`) and added to `usage`.
pub(crate) async fn run_worker(
    session: &LiveSession,
    state: &mut SessionState,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
    task: WorkerTask<'_>,
    usage: &mut Usage,
) -> Result<WorkerOutcome, WorkerEnd> {
    let est = state.tracker.estimator;
    let cpt = est.chars_per_token();
    let b = worker_budgets(&task.budgets, session.model().info.max_output as u64, cpt);
    let registry = session.tools();
    let path_of = |name: &str, input: &serde_json::Value| {
        registry
            .get(name)
            .and_then(|e| e.path_in(input))
            .map(str::to_string)
    };
    // The worker reads the older part whole, not cut as the single request is: it decides
    // what to look at.
    let capture = Capture::new(&rewrite_for_summary(&tag_messages(task.older)), &path_of);
    let overview = capture.overview(b.overview_chars);
    let previous = previous_summary(task.older);
    let input = run_input(
        &overview,
        task.todo,
        previous.as_deref(),
        task.budgets.summary,
        &b,
        task.compact_instructions,
        task.focus,
    );
    let tools = worker_tools();
    let fixed_chars = WORKER_SYSTEM.chars().count() + crate::session::tokens::tool_chars(&tools);
    let limit_chars = ((b.request_tokens as f64 * cpt) as usize).saturating_sub(fixed_chars);
    let mut run = WorkerRun::new(b, task.budgets.summary);
    let mut conv = vec![Message::user_text(input)];
    while !run.spent() {
        if cancel.is_cancelled() {
            return Err(WorkerEnd::Cancelled);
        }
        // Old results go, in bulk, before a request would pass the window.
        if !fit_conversation(&mut conv, limit_chars, limit_chars * 2 / 3) {
            break;
        }
        let last = conv.len() - 1;
        let req = ModelRequest {
            model: session.model().id.clone(),
            system: WORKER_SYSTEM.to_string(),
            tools: tools.clone(),
            messages: conv.clone(),
            max_tokens: b.max_output as u32,
            // The tools, system prompt and run input are the same in every request of the
            // run, and each request repeats the one before: both are read from cache.
            cache: CachePlan {
                system: true,
                messages: if last > 0 { vec![0, last] } else { vec![0] },
            },
            thinking_budget: None,
            output_schema: None,
            no_tool_calls: false,
            tool_clearing: None,
        };
        let resp = match side_call(session, state, host, req, UsagePurpose::Worker, cancel).await {
            Ok(r) => r,
            Err(ProviderError::Cancelled { .. }) => return Err(WorkerEnd::Cancelled),
            Err(e) => return Err(WorkerEnd::NoSummary(Some(e))),
        };
        usage.add(&resp.usage);
        run.step_done(resp.usage.context_tokens() + resp.usage.output_tokens);
        let calls = crate::message::tool_calls(&resp.content);
        if calls.is_empty() {
            break;
        }
        let mut results = Vec::with_capacity(calls.len() + 1);
        let mut only_summary = true;
        for (id, name, input) in &calls {
            let call = WorkerCall::parse(name, input);
            only_summary &= matches!(call, Ok(WorkerCall::WriteSummary(_)));
            let answer = match call {
                Ok(c) => answer(session, &capture, &overview, &mut run, c, est),
                Err(e) => Err(e),
            };
            let (text, is_error) = match answer {
                Ok(t) => (t, false),
                Err(t) => (t, true),
            };
            results.push(Block::ToolResult {
                tool_use_id: id.clone(),
                content: vec![Block::text(text)],
                is_error,
            });
        }
        // A summary within its target that was the answer's only business ends the run
        // without another request.
        if only_summary && run.summary_fits() {
            break;
        }
        if let Some(note) = run.budget_note() {
            results.push(Block::text(note));
        }
        conv.push(Message {
            role: Role::Assistant,
            content: resp.content.clone(),
        });
        conv.push(Message {
            role: Role::User,
            content: results,
        });
    }
    if cancel.is_cancelled() {
        return Err(WorkerEnd::Cancelled);
    }
    let mut out = run.outcome().ok_or(WorkerEnd::NoSummary(None))?;
    out.summary = strip_analysis(&out.summary);
    Ok(out)
}

/// Answers one worker tool call: the text for the model, or why it is refused.
fn answer(
    session: &LiveSession,
    capture: &Capture,
    overview: &str,
    run: &mut WorkerRun,
    call: WorkerCall,
    est: crate::session::tokens::TokenEstimator,
) -> Result<String, String> {
    let b = run.budgets;
    match call {
        WorkerCall::ShowOverview => Ok(overview.to_string()),
        WorkerCall::SearchEntries(q) => Ok(capture.search(&q, b.result_chars)),
        WorkerCall::ReadEntry(r) => capture.read(&r, b.result_chars),
        WorkerCall::ReadFile(p) => {
            let (text, more) = read(session, &p, b.result_chars)?;
            Ok(if more {
                format!("{text}\n[{p} continues past this point; only its start is shown]")
            } else {
                text
            })
        }
        WorkerCall::MarkReadRequired(p) => {
            // Read a little over the per-file cap, so a larger file is seen as too large.
            let max = ((b.restore_file as f64 * est.chars_per_token()) as usize).saturating_add(64);
            let (text, more) = read(session, &p, max)?;
            let tokens = if more {
                b.restore_file + 1
            } else {
                est.estimate(text.chars().count())
            };
            run.nominate(&p, tokens)
        }
        WorkerCall::AddReference(p, note) => Ok(run.add_reference(&p, &note)),
        WorkerCall::WriteSummary(s) => {
            let t = est.estimate(s.chars().count());
            run.write_summary(&s, t)
        }
    }
}

/// Reads a workspace file through the session's root (confined like every read): its text
/// and whether it holds more than `max_chars`.
fn read(session: &LiveSession, path: &str, max_chars: usize) -> Result<(String, bool), String> {
    let root = &session.setup.workspace.root;
    let rel = Path::new(path)
        .strip_prefix(root.path())
        .unwrap_or(Path::new(path));
    root.read_text(rel, max_chars)
        .map(|t| (t.text, t.truncated))
        .map_err(|e| format!("cannot read {path}: {e}"))
}
