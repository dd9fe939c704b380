//! Compaction of a live session: `compactIfNeeded` at the top of every step, the manual
//! `/compact`, and the reactive one after a prompt-too-long. The decisions are the pure
//! functions of `session::compact`; this module does the IO (model calls, file reads, the one
//! batch append) and reports progress.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::budget::{budgets, context_tokens, fixed_chars, learn_limit};
use super::events::{CompactionPhase, TurnEvent};
use super::host::TurnHost;
use super::live::{LiveSession, SessionState, TurnError};
use super::side::{request_chars, response_text, side_call};
use super::view::{current_view, forget_reads_out_of_view, view_anchors};
use crate::fsroot::FileStamp;
use crate::message::{Block, Message, Usage};
use crate::prompt::PartKind;
use crate::provider::{ModelRequest, ProviderError};
use crate::session::Record;
use crate::session::compact::blocking_limit;
use crate::session::compact::{
    self, FileSnapshot, InstallInput, Pressure, Relief, SUMMARY_SYSTEM, SummaryText, WorkerOutcome,
    choose_relief, chunk_messages, chunk_rounds, cut_with_marker, extractive_handoff, fork_with,
    last_progress_poor, origins, pin, plan_kept, previous_summary, shrink_instruction, split_index,
    stage1, steps_since_compaction, strip_analysis, summary_instruction, summary_source,
    user_messages, without_regenerated,
};
use crate::session::records::{CompactTrigger, Summarizer, UsagePurpose, now_ms};
use crate::session::tokens;
use crate::session::view::{ViewMessage, prefix_end};
use crate::tools::{Anchor, ReadMark, ToolClass};

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactOutcome {
    /// True when something was installed.
    pub compacted: bool,
    /// Estimated context tokens before.
    pub tokens_before: u64,
    /// Estimated context tokens after (= before when nothing was installed).
    pub tokens_after: u64,
    /// `summary`, `handoff`, `reinstall` or `trim` when installed.
    pub kind: Option<String>,
    /// Why nothing was installed, when nothing was.
    pub message: Option<String>,
    /// True when it was cancelled (the session is unchanged).
    pub cancelled: bool,
    /// Tokens the summary requests used (added to the turn's usage).
    pub usage: Usage,
}

impl CompactOutcome {
    fn nothing(tokens: u64, message: impl Into<String>) -> Self {
        CompactOutcome {
            compacted: false,
            tokens_before: tokens,
            tokens_after: tokens,
            kind: None,
            message: Some(message.into()),
            cancelled: false,
            usage: Usage::default(),
        }
    }
}

/// What asked for a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactRequest<'a> {
    /// Auto, manual or reactive.
    pub trigger: CompactTrigger,
    /// The manual focus text.
    pub focus: Option<&'a str>,
    /// For a reactive compaction: the refused request's size, when the provider said.
    pub refused_tokens: Option<u64>,
    /// The relief to take instead of choosing one (the steps that make a request fit).
    pub relief: Option<Relief>,
}

impl CompactRequest<'_> {
    /// A request with no focus and no refusal.
    pub fn new(trigger: CompactTrigger) -> Self {
        CompactRequest {
            trigger,
            focus: None,
            refused_tokens: None,
            relief: None,
        }
    }
}

/// Receives compaction progress besides the turn events (the `$/progress` of `session/compact`).
pub type ProgressFn<'a> = &'a (dyn Fn(CompactionPhase, Option<u64>, Option<u64>) + Send + Sync);

/// Between the collapse threshold and the threshold, collapses an older span (the cheaper
/// relief); over the threshold, compacts unless auto-compaction is paused.
pub(crate) async fn compact_if_needed(
    session: &Arc<LiveSession>,
    state: &mut SessionState,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
) -> Result<Option<CompactOutcome>, TurnError> {
    if !session.setup.compact.auto_compact {
        return Ok(None);
    }
    let collapse_usage = super::ops::auto_collapse(session, state, host, cancel).await?;
    let tokens = context_tokens(session, state)?;
    if tokens <= budgets(session, state).threshold || state.failures.paused(&session.setup.compact)
    {
        return Ok(
            (collapse_usage != Usage::default()).then(|| CompactOutcome {
                usage: collapse_usage,
                ..CompactOutcome::nothing(tokens, "collapsed")
            }),
        );
    }
    compact_session(
        session,
        state,
        host,
        cancel,
        CompactRequest::new(CompactTrigger::Auto),
        &|_, _, _| {},
    )
    .await
    .map(Some)
}

/// The session-start context note (date, git state), if any (the first one in the transcript).
fn git_note(records: &[Record]) -> Option<String> {
    records.iter().find_map(|r| match r.as_message() {
        Some(m) if m.meta == Some(crate::session::records::MessageMeta::GitState) => {
            m.content.iter().find_map(|b| match b {
                Block::Text { text } => Some(text.clone()),
                _ => None,
            })
        }
        _ => None,
    })
}

/// The "Compact Instructions" section of the instruction files (their text, from the
/// prompt's instructions part), if any.
pub(super) fn compact_section(instructions: &str) -> Option<String> {
    let mut out: Option<(usize, String)> = None;
    for line in instructions.lines() {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if let Some((level, text)) = out.as_mut() {
            if hashes > 0 && hashes <= *level {
                break;
            }
            text.push_str(line);
            text.push('\n');
        } else if hashes > 0
            && line[hashes..]
                .trim()
                .eq_ignore_ascii_case("compact instructions")
        {
            out = Some((hashes, String::new()));
        }
    }
    out.map(|(_, t)| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// Every file the session's edit tools changed, in the order first changed (root-relative as
/// the model named them).
fn edited_paths(session: &LiveSession, records: &[Record]) -> Vec<String> {
    let tools = session.tools();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for m in records.iter().filter_map(Record::as_message) {
        for b in &m.content {
            if let Block::ToolUse { name, input, .. } = b
                && let Some(p) = tools
                    .get(name)
                    .filter(|e| e.class == ToolClass::Edit)
                    .and_then(|e| e.path_in(input))
                && seen.insert(p.to_string())
            {
                out.push(p.to_string());
            }
        }
    }
    out
}

/// A file re-read for restoration, with the stamp it had before the read.
struct Snapshot {
    file: FileSnapshot,
    rel: PathBuf,
    stamp: FileStamp,
}

/// Files read or edited in the session, most recent first, re-read through the root. The
/// transcript keeps every call, so files restored by an earlier compaction come back too.
fn snapshots(session: &LiveSession, records: &[Record]) -> Vec<Snapshot> {
    let policy = &session.setup.compact;
    let tools = session.tools();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    'records: for r in records.iter().rev() {
        let Some(m) = r.as_message() else { continue };
        for b in m.content.iter().rev() {
            let Block::ToolUse { name, input, .. } = b else {
                continue;
            };
            let Some(p) = tools
                .get(name)
                .filter(|e| matches!(e.class, ToolClass::Read | ToolClass::Edit))
                .and_then(|e| e.path_in(input))
            else {
                continue;
            };
            if !seen.insert(p.to_string()) {
                continue;
            }
            out.extend(snapshot(session, p));
            if out.len() >= policy.restore_files * 2 {
                break 'records;
            }
        }
    }
    out
}

/// One file re-read through the root for restoration, with its stamp.
fn snapshot(session: &LiveSession, p: &str) -> Option<Snapshot> {
    let root = &session.setup.workspace.root;
    // Read a little over the per-file cap, so a larger file is seen as too large.
    let max_chars = (session.setup.compact.restore_file_tokens as usize).saturating_mul(6) + 16;
    let rel = Path::new(p)
        .strip_prefix(root.path())
        .unwrap_or(Path::new(p))
        .to_path_buf();
    let stamp = root.stamp(&rel).ok()?;
    let t = root.read_text(&rel, max_chars).ok()?;
    Some(Snapshot {
        file: FileSnapshot {
            path: p.to_string(),
            content: t.text,
        },
        rel,
        stamp,
    })
}

/// The older part a summary covers, twice: as the main request shows it (notes and restored
/// files included, so the fork repeats the cached prefix byte for byte) and without what a
/// compaction writes afresh (for the regular request, which shares no cache).
#[derive(Clone, Copy)]
struct Older<'a> {
    plain: &'a [ViewMessage],
    as_viewed: &'a [ViewMessage],
}

/// Why no summary came back.
enum SummaryError {
    Cancelled,
    Failed(ProviderError),
    /// The summary ended on the output limit, also when asked for less.
    Cut,
}

/// Asks the model for a summary of `older` (the part before the split). The fork is tried
/// first: it shares the session's system prompt and tools, so the provider reads them from
/// cache. When it does not fit, fails (anything but a cancel), gives no text or answers with a
/// tool call, the regular request follows: the summary system prompt, thinking off, media as
/// markers, only the file-reading tool's schema; when even that is too large, the older part
/// is summarized in chunks, each with the summary so far. A prompt-too-long answer teaches the
/// limit and the work is split again, smaller. A summary over its size target is asked once
/// to shrink. Returns the text and the path that produced it.
async fn summarize(
    c: &mut Compaction<'_>,
    older: Older<'_>,
    focus: Option<&str>,
    usage: &mut Usage,
    worker: &mut Option<WorkerOutcome>,
) -> Result<(String, Summarizer), SummaryError> {
    let (session, host, cancel, trigger) = (c.session, c.host, c.cancel, c.trigger);
    let state = &mut *c.state;
    let Older {
        plain: older,
        as_viewed,
    } = older;
    let policy = session.setup.compact.clone();
    let prompt = session.prompt();
    let system = prompt.system.clone();
    let section = compact_section(prompt.part(PartKind::Instructions));
    let source = summary_source(older, policy.trim_over, policy.trim_to);
    // The fork sends the older part exactly as the main request carries it (thinking,
    // media, long results and all), so the provider reads all of it from cache; only the
    // regular request rewrites it.
    let fork_chars: usize = as_viewed
        .iter()
        .map(|m| crate::session::view::message_chars(&m.message))
        .sum();
    let head = usize::from(prefix_end(older).is_some());
    let max_output = session.model().info.max_output;
    let mut attempts = 0u32;
    // A summary cut by the output limit is asked again once, for half the size.
    let mut cut_retried = false;
    let mut fork_ok = true;
    let mut tried_worker = false;
    let regular_tools = session.tools().summary_tools();
    let (summary, path) = 'outer: loop {
        let b = budgets(session, state);
        let est = state.tracker.estimator;
        let target = if cut_retried {
            b.summary / 2
        } else {
            b.summary
        };
        let instruction = summary_instruction(section.as_deref(), focus, target);
        let margin = b.window / 20;
        let instruction_t = est.estimate(instruction.chars().count());
        let fork_t = est.estimate(fixed_chars(session) + fork_chars) + instruction_t;
        let regular_in = est.estimate(SUMMARY_SYSTEM.len()) + instruction_t + target * 3 / 2;
        // The summary's own output budget: its target and room for the analysis, within
        // what the window leaves beside the smallest request that can carry it.
        let max_tokens = crate::session::compact::summary_max_tokens(
            max_output as u64,
            target,
            b.window.saturating_sub(regular_in + margin),
        );
        let base = |system: String, tools, cache| ModelRequest {
            model: session.model().id.clone(),
            system,
            tools,
            messages: Vec::new(),
            max_tokens: max_tokens as u32,
            cache,
            thinking_budget: None,
            output_schema: None,
            no_tool_calls: false,
            tool_clearing: None,
        };
        // The fork shares the session's system prompt and tools (read from cache); it is
        // tried first, while nothing says it is too large and it has not failed.
        let forking = fork_ok && attempts == 0 && fork_t + max_tokens + margin <= b.window;
        let (request, chunks) = if forking {
            let fork = fork_with(as_viewed, instruction.clone());
            let mut req = base(system.clone(), session.tool_specs(), fork.cache);
            req.messages = fork.messages;
            // One request, its messages already whole.
            (req, vec![Vec::new()])
        } else {
            // Each refusal shrinks the chunks by a quarter; the summary so far rides along
            // with every later chunk.
            let room = b.window.saturating_sub(regular_in + max_tokens + margin);
            let room = (room as f64 * 0.75f64.powi(attempts as i32)) as u64;
            let chars = (room.max(256) as f64 * est.chars_per_token()) as usize;
            // The file reader's schema stays for the request's shape, but the model may not
            // call it: a pending "please read X" in the older part must not get a read.
            let mut regular = base(
                SUMMARY_SYSTEM.to_string(),
                regular_tools.clone(),
                Default::default(),
            );
            regular.no_tool_calls = true;
            (regular, chunk_rounds(&source, head, chars))
        };
        // The worker summarizes what one request cannot hold (or everything, when asked);
        // without its summary the request above runs.
        if worker.is_none() && !tried_worker && policy.summarizer.uses_worker(chunks.len()) {
            tried_worker = true;
            let task = super::worker::WorkerTask {
                older,
                todo: &super::todo::entries(session),
                compact_instructions: section.as_deref(),
                focus,
                budgets: b,
            };
            match super::worker::run_worker(session, state, host, cancel, task, usage).await {
                Ok(done) => {
                    let text = done.summary.clone();
                    *worker = Some(done);
                    break 'outer (text, Summarizer::Worker);
                }
                Err(super::worker::WorkerEnd::Cancelled) => return Err(SummaryError::Cancelled),
                Err(super::worker::WorkerEnd::NoSummary(e)) => {
                    tracing::info!("the compaction worker wrote no summary ({e:?}); one request");
                }
            }
        }
        let mut so_far: Option<String> = None;
        let n = chunks.len();
        for (k, chunk) in chunks.iter().enumerate() {
            if n > 1 {
                summary_event(session, host, trigger, format!("part {} of {n}", k + 1));
            }
            let mut req = request.clone();
            if !forking {
                req.messages = chunk_messages(chunk, so_far.as_deref(), &instruction);
            }
            let chars = request_chars(&req);
            match side_call(session, state, host, req, UsagePurpose::Summary, cancel).await {
                Ok(resp) => {
                    usage.add(&resp.usage);
                    let text = strip_analysis(&response_text(&resp));
                    let called = resp
                        .content
                        .iter()
                        .any(|b| matches!(b, Block::ToolUse { .. }));
                    if forking && (called || text.trim().is_empty()) {
                        let why = if called {
                            "the fork answered with a tool call"
                        } else {
                            "the fork gave no text"
                        };
                        fork_ok = false;
                        summary_event(session, host, trigger, fallback(why));
                        continue 'outer;
                    }
                    if resp.stop_reason == crate::message::StopReason::MaxTokens {
                        if cut_retried {
                            return Err(SummaryError::Cut);
                        }
                        cut_retried = true;
                        summary_event(
                            session,
                            host,
                            trigger,
                            "the summary ended on the output limit; asking for a shorter one"
                                .into(),
                        );
                        continue 'outer;
                    }
                    if !text.trim().is_empty() {
                        so_far = Some(text);
                    }
                }
                Err(ProviderError::Cancelled { .. }) => return Err(SummaryError::Cancelled),
                Err(e) if e.is_prompt_too_long() => {
                    attempts += 1;
                    if attempts > policy.max_ptl_retries {
                        return Err(SummaryError::Failed(e));
                    }
                    learn_limit(session, state, &e, Some(chars), None)
                        .map_err(|e| SummaryError::Failed(ProviderError::Http(e.to_string())))?;
                    continue 'outer;
                }
                Err(e) if forking => {
                    fork_ok = false;
                    let why = format!("the fork failed: {e}");
                    summary_event(session, host, trigger, fallback(&why));
                    continue 'outer;
                }
                Err(e) => return Err(SummaryError::Failed(e)),
            }
        }
        let path = match (forking, n) {
            (true, _) => Summarizer::Fork,
            (false, 1) => Summarizer::Regular,
            _ => Summarizer::Chunked,
        };
        break (so_far.unwrap_or_default(), path);
    };
    if cancel.is_cancelled() {
        return Err(SummaryError::Cancelled);
    }
    let text = shrink(session, state, host, cancel, summary, usage).await?;
    Ok((text, path))
}

/// Why the summary goes on by the regular request, for the client.
fn fallback(why: &str) -> String {
    format!("{why}; asking again with the summary prompt")
}

/// A progress line of the summary phase (a chunk, a fallback).
fn summary_event(
    session: &LiveSession,
    host: &dyn TurnHost,
    trigger: CompactTrigger,
    message: String,
) {
    host.event(
        &session.id,
        TurnEvent::Compaction {
            phase: CompactionPhase::Summary,
            trigger,
            tokens_before: None,
            tokens_after: None,
            message: Some(message),
        },
    );
}

/// One shrink request when the summary came back well over its target.
async fn shrink(
    session: &LiveSession,
    state: &mut SessionState,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
    summary: String,
    usage: &mut Usage,
) -> Result<String, SummaryError> {
    let b = budgets(session, state);
    let est = state.tracker.estimator;
    let tokens = est.estimate(summary.chars().count());
    if summary.trim().is_empty() || tokens <= b.summary + b.summary / 4 {
        return Ok(summary);
    }
    let req = ModelRequest {
        model: session.model().id.clone(),
        system: SUMMARY_SYSTEM.to_string(),
        tools: Vec::new(),
        messages: vec![Message::user_text(shrink_instruction(
            &summary, tokens, b.summary,
        ))],
        // The summary's own budget, as for the summary itself, beside this request.
        max_tokens: crate::session::compact::summary_max_tokens(
            session.model().info.max_output as u64,
            b.summary,
            b.window.saturating_sub(tokens + b.window / 20),
        ) as u32,
        cache: crate::provider::CachePlan::default(),
        thinking_budget: None,
        output_schema: None,
        no_tool_calls: false,
        tool_clearing: None,
    };
    match side_call(session, state, host, req, UsagePurpose::Summary, cancel).await {
        Ok(resp) => {
            usage.add(&resp.usage);
            let shorter = strip_analysis(&response_text(&resp));
            if !shorter.trim().is_empty() && shorter.chars().count() < summary.chars().count() {
                Ok(shorter)
            } else {
                Ok(summary)
            }
        }
        Err(ProviderError::Cancelled { .. }) => Err(SummaryError::Cancelled),
        // The longer summary is still a summary.
        Err(_) => Ok(summary),
    }
}

/// One compaction while it runs: what its phases share, so none of them takes the session,
/// its state, the host and the cancel token one by one.
struct Compaction<'a> {
    session: &'a Arc<LiveSession>,
    state: &'a mut SessionState,
    host: &'a dyn TurnHost,
    cancel: &'a CancellationToken,
    trigger: CompactTrigger,
    progress: ProgressFn<'a>,
    policy: compact::CompactPolicy,
    budgets: compact::Budgets,
    /// The context before, as the decision counts it.
    tokens_before: u64,
    now: u64,
}

/// How a phase ended: go on with its product, or stop with the outcome to answer.
enum Phase<T> {
    Go(T),
    Done(CompactOutcome),
}

/// What an installation holds besides its summary, planned before the model is asked.
struct Prepared {
    relief: Relief,
    /// The view when the compaction started (the fork repeats its prefix).
    view: crate::session::view::View,
    /// The system prompt rebuilt from disk, and the tools that come with it.
    assembled: Arc<crate::prompt::Assembled>,
    next_tools: super::live::NextTools,
    /// Tokens of that prompt and those tools.
    fixed: u64,
    /// The view's messages without what an installation writes afresh.
    messages: Vec<ViewMessage>,
    todo: Vec<compact::TodoEntry>,
    reattach: Option<super::scoped::Reattachment>,
    kept: compact::KeptPlan,
    pinned: compact::Pinned,
    /// The session memory and what it keeps, when a summary relief can install it.
    memory: Option<MemoryPlan>,
}

/// A session memory ready to install: its notes, and the kept part after what they cover.
struct MemoryPlan {
    text: String,
    kept: compact::KeptPlan,
    pinned: compact::Pinned,
}

impl Prepared {
    /// The part the summary covers.
    fn older(&self) -> &[ViewMessage] {
        &self.messages[..self.kept.split]
    }
}

/// The summary to install and the path that wrote it.
struct Written {
    summary: SummaryText,
    summarizer: Summarizer,
    worker: Option<WorkerOutcome>,
}

/// Compacts the session now. `Auto` and `Reactive` pick the cheapest relief that works
/// (trim, summary, or a reinstall without the model right after a compaction); `Manual`
/// always summarizes. Nothing changes unless the installation is written whole. A manual
/// compaction that fails or is cancelled answers an error; automatic ones never leave the
/// session stuck (an extractive handoff stands in when the model cannot summarize).
pub(crate) async fn compact_session(
    session: &Arc<LiveSession>,
    state: &mut SessionState,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
    req: CompactRequest<'_>,
    progress: ProgressFn<'_>,
) -> Result<CompactOutcome, TurnError> {
    let mut c = Compaction::start(session, state, host, cancel, &req, progress)?;
    let relief = match req.relief {
        Some(Relief::FreshStart) => return c.fresh_start(),
        Some(r) => r,
        None => match c.choose()? {
            Phase::Go(r) => r,
            Phase::Done(out) => return Ok(out),
        },
    };
    let mut prep = match c.prepare(relief)? {
        Phase::Go(p) => p,
        Phase::Done(out) => return Ok(out),
    };
    // An idle compaction never waits for a model, and without notes it has nothing to
    // install: no hook hears of a compaction that will not happen.
    if prep.memory.is_none() && req.trigger == CompactTrigger::Idle {
        return Ok(no_notes(c.tokens_before));
    }
    // PreCompact hooks run before a summary: they may refuse it, and what they print joins
    // the summary instructions after the user's own.
    let mut focus = req.focus.map(str::to_string);
    if prep.relief == Relief::Summary {
        match c.pre_compact(req.focus).await? {
            Phase::Go(extra) => {
                if let Some(extra) = extra {
                    focus = Some(match focus {
                        Some(f) if !f.trim().is_empty() => format!("{f}\n\n{extra}"),
                        _ => extra,
                    });
                }
            }
            Phase::Done(out) => return Ok(out),
        }
    }
    let memory = match prep.memory.take() {
        // An instruction (the user's focus, a hook's) asks the model for a summary.
        Some(m) if focus.as_deref().is_none_or(|f| f.trim().is_empty()) => Some(m),
        _ => None,
    };
    // A hook's instructions put the notes aside: an idle compaction then leaves the session.
    if memory.is_none() && req.trigger == CompactTrigger::Idle {
        return Ok(no_notes(c.tokens_before));
    }
    c.event(CompactionPhase::Started, None, None);
    let mut usage = Usage::default();
    let written = match memory {
        Some(m) => {
            prep.kept = m.kept;
            prep.pinned = m.pinned;
            c.event(
                CompactionPhase::Summary,
                None,
                Some("from the session memory: no model call".into()),
            );
            Written {
                summary: SummaryText::Model(m.text),
                summarizer: Summarizer::Memory,
                worker: None,
            }
        }
        None => match c.write(&prep, focus.as_deref(), &mut usage).await? {
            Phase::Go(w) => w,
            Phase::Done(out) => return Ok(out),
        },
    };
    let summary = written.summary.text().to_string();
    let trigger = hook_trigger(req.trigger);
    let out = c.install(prep, written, usage)?;
    if out.compacted {
        after_compaction(session, state, host, cancel, trigger, summary).await?;
    }
    Ok(out)
}

/// What an idle compaction answers when it has no notes to install.
fn no_notes(tokens: u64) -> CompactOutcome {
    CompactOutcome::nothing(tokens, "no session memory covers the conversation")
}

/// The hooks' word for a trigger (a reactive compaction is an automatic one).
fn hook_trigger(t: CompactTrigger) -> crate::hooks::CompactTrigger {
    match t {
        CompactTrigger::Manual => crate::hooks::CompactTrigger::Manual,
        CompactTrigger::Auto | CompactTrigger::Reactive | CompactTrigger::Idle => {
            crate::hooks::CompactTrigger::Auto
        }
    }
}

/// After an installation, in the seed's order: the SessionStart(compact) hooks' context is
/// installed last, after the attachments; then PostCompact gets the summary (its output is
/// for the user); and the instruction files, nested files and rules the view carries again
/// are announced to InstructionsLoaded.
async fn after_compaction(
    session: &Arc<LiveSession>,
    state: &mut SessionState,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
    trigger: crate::hooks::CompactTrigger,
    summary: String,
) -> Result<(), TurnError> {
    use crate::hooks::{EventData, HookEvent, SessionSource};
    let transcript = Some(state.file.path().to_path_buf());
    let data = EventData::SessionStart {
        source: SessionSource::Compact,
        model: Some(session.model_spec()),
    };
    let out = super::hooks::fire(session, host, transcript.clone(), data, cancel).await;
    if let Some(text) = out.context_text() {
        super::hooks::append_context(state, HookEvent::SessionStart, &text)?;
    }
    let data = EventData::PostCompact {
        trigger,
        compact_summary: summary,
    };
    let _ = super::hooks::fire(session, host, transcript, data, cancel).await;
    let scoped: Vec<String> = state.scope.attached.keys().cloned().collect();
    super::hooks::instructions_loaded(session, "compact", &scoped);
    Ok(())
}

impl<'a> Compaction<'a> {
    /// Measures the context the decision counts (a reactive one: at least what the
    /// provider refused).
    fn start(
        session: &'a Arc<LiveSession>,
        state: &'a mut SessionState,
        host: &'a dyn TurnHost,
        cancel: &'a CancellationToken,
        req: &CompactRequest<'_>,
        progress: ProgressFn<'a>,
    ) -> Result<Compaction<'a>, TurnError> {
        let b = budgets(session, state);
        let mut tokens_before = context_tokens(session, state)?;
        if req.trigger == CompactTrigger::Reactive {
            // The provider counted more than its limit, whatever our estimate says.
            tokens_before = tokens_before
                .max(req.refused_tokens.unwrap_or(0))
                .max(b.window + 1);
        }
        Ok(Compaction {
            session,
            state,
            host,
            cancel,
            trigger: req.trigger,
            progress,
            policy: session.setup.compact.clone(),
            budgets: b,
            tokens_before,
            now: now_ms(),
        })
    }

    /// The PreCompact hooks: their instructions for the summary, or the compaction refused.
    /// A manual one answers the reason as an error; an automatic one is skipped while the
    /// request still fits, and runs anyway (saying why) once it would not.
    async fn pre_compact(
        &mut self,
        focus: Option<&str>,
    ) -> Result<Phase<Option<String>>, TurnError> {
        let data = crate::hooks::EventData::PreCompact {
            trigger: hook_trigger(self.trigger),
            custom_instructions: focus.unwrap_or("").to_string(),
        };
        let transcript = Some(self.state.file.path().to_path_buf());
        let out = super::hooks::fire(self.session, self.host, transcript, data, self.cancel).await;
        if out.cancelled {
            return self.cancelled(Usage::default());
        }
        let Some(reason) = out.block.clone() else {
            return Ok(Phase::Go(out.context_text()));
        };
        let fits = self.tokens_before < blocking_limit(self.budgets.window);
        match self.trigger {
            CompactTrigger::Manual => Err(TurnError::Blocked(reason)),
            CompactTrigger::Auto if fits => Ok(Phase::Done(CompactOutcome::nothing(
                self.tokens_before,
                format!("a PreCompact hook blocked the compaction: {reason}"),
            ))),
            _ => {
                let why = format!(
                    "compacting although a PreCompact hook blocked it, since the request would \
                     no longer fit the window: {reason}"
                );
                self.event(CompactionPhase::Summary, None, Some(why));
                Ok(Phase::Go(out.context_text()))
            }
        }
    }

    /// Reports one phase to the client (turn events and `$/progress`).
    fn event(&self, phase: CompactionPhase, after: Option<u64>, detail: Option<String>) {
        (self.progress)(phase, Some(self.tokens_before), after);
        self.host.event(
            &self.session.id,
            TurnEvent::Compaction {
                phase,
                trigger: self.trigger,
                tokens_before: Some(self.tokens_before),
                tokens_after: after,
                message: detail,
            },
        );
    }

    /// After repeated failures, auto-compaction pauses (a prompt-too-long still compacts
    /// reactively, so nothing is ever stuck); the client hears of it.
    fn count_failure(&mut self) {
        if self.trigger == CompactTrigger::Auto && self.state.failures.failed(&self.policy) {
            self.event(
                CompactionPhase::Paused,
                None,
                Some(format!(
                    "auto-compaction paused after {} consecutive failures; run session/compact to retry",
                    self.policy.max_failures
                )),
            );
        }
    }

    /// A cancel: the session is unchanged; a manual compaction answers an error.
    fn cancelled<T>(&self, usage: Usage) -> Result<Phase<T>, TurnError> {
        self.event(CompactionPhase::Failed, None, Some("cancelled".into()));
        if self.trigger == CompactTrigger::Manual {
            return Err(TurnError::Cancelled);
        }
        Ok(Phase::Done(CompactOutcome {
            usage,
            ..cancelled(self.tokens_before)
        }))
    }

    /// The relief: a manual compaction summarizes; the others take the cheapest that works,
    /// and a trim is installed here and then.
    fn choose(&mut self) -> Result<Phase<Relief>, TurnError> {
        if self.trigger == CompactTrigger::Manual {
            return Ok(Phase::Go(Relief::Summary));
        }
        let (policy, b, now) = (&self.policy, self.budgets, self.now);
        let est = self.state.tracker.estimator;
        let view = current_view(self.state, &self.session.setup.view_policy)?;
        let s1 = split_index(&view.messages, policy.keep_steps)
            .map(|s| stage1(&view.messages, s, policy, now));
        let deep = split_index(&view.messages, 1).map(|s| stage1(&view.messages, s, policy, now));
        let saves =
            |s: &Option<compact::Stage1>| s.as_ref().map_or(0, |s| est.estimate(s.saved_chars));
        let pressure = Pressure {
            tokens: self.tokens_before,
            threshold: b.threshold,
            target: b.target,
            stage1_saves: saves(&s1),
            deep_saves: saves(&deep),
            steps_since: steps_since_compaction(self.state.records()),
            last_poor: last_progress_poor(self.state.records(), b.threshold),
        };
        let record = match choose_relief(&pressure, policy.min_summary_gap) {
            None => {
                return Ok(Phase::Done(CompactOutcome::nothing(
                    self.tokens_before,
                    "below the threshold",
                )));
            }
            Some(Relief::Trim { deep: d }) => {
                let s = if d { deep.or(s1) } else { s1 };
                match s.and_then(|s| s.record) {
                    Some(record) => record,
                    None => return Ok(Phase::Go(Relief::Reinstall)),
                }
            }
            Some(r) => return Ok(Phase::Go(r)),
        };
        self.event(CompactionPhase::Started, None, None);
        if self.cancel.is_cancelled() {
            self.event(CompactionPhase::Failed, None, Some("cancelled".into()));
            return Ok(Phase::Done(cancelled(self.tokens_before)));
        }
        self.state.append(vec![Record::Trim(record)])?;
        let after = context_tokens(self.session, self.state)?;
        self.state.failures.succeeded();
        forget_reads_out_of_view(self.session, self.state)?;
        self.event(CompactionPhase::Stage1, Some(after), None);
        self.event(CompactionPhase::Finished, Some(after), Some("trim".into()));
        Ok(Phase::Done(CompactOutcome {
            compacted: true,
            tokens_before: self.tokens_before,
            tokens_after: after,
            kind: Some("trim".into()),
            message: None,
            cancelled: false,
            usage: Usage::default(),
        }))
    }

    /// Everything but the summary: the prompt rebuilt from disk, the kept steps that fit the
    /// room the target leaves, the user's words to carry, the instructions to re-attach.
    fn prepare(&mut self, relief: Relief) -> Result<Phase<Prepared>, TurnError> {
        let (session, b) = (self.session, self.budgets);
        let policy = &self.policy;
        let view = current_view(self.state, &session.setup.view_policy)?.clone();
        let est = self.state.tracker.estimator;
        // The instructions come back as they are on disk now: the system prompt is rebuilt.
        let ws = &session.setup.workspace;
        ws.invalidate();
        // A changed MCP tool list comes in with the rebuilt prompt, never mid-phase.
        let next_tools = session.next_tools();
        let mut opts = session
            .setup
            .prompt_options(&session.header.model, &next_tools.registry);
        if let Some(list) = &next_tools.mcp_instructions {
            opts.mcp_instructions = list.clone();
        }
        let assembled = session.fit_prompt(ws.assemble(&opts));
        let fixed = est.estimate(
            assembled.system.chars().count() + tokens::tool_chars(&next_tools.registry.specs()),
        );
        let messages = without_regenerated(&view.messages, self.state.records());
        let todo = super::todo::entries(session);
        let todo_t = est.estimate(compact::render_todo(&todo).len() + 64);
        // Nested instructions and rules in force come back, re-read from disk, within a
        // quarter of the target.
        let cpt = est.chars_per_token();
        let reattach =
            super::scoped::reattach(session, self.state, ((b.target / 4) as f64 * cpt) as usize);
        let instr_t = reattach
            .as_ref()
            .map_or(0, |r| est.estimate(r.plan.text.chars().count()));
        let keep_steps = match relief {
            Relief::Reinstall => (policy.keep_steps / 2).max(1),
            Relief::Handoff => 1,
            _ => policy.keep_steps,
        };
        // Over the threshold, `/compact` always does something: fewer kept steps, or the
        // view restarted from the current request.
        let over = self.tokens_before > b.threshold;
        let nothing = |why: String| {
            Ok(Phase::Done(CompactOutcome::nothing(
                self.tokens_before,
                why,
            )))
        };
        if self.trigger == CompactTrigger::Manual
            && !over
            && split_index(&messages, policy.keep_steps).is_none()
        {
            return nothing(format!(
                "nothing to compact: the session has at most {} assistant turns",
                policy.keep_steps
            ));
        }
        let room = b
            .target
            .saturating_sub(fixed + b.summary + b.user_words + todo_t + instr_t);
        let Some(kept) = plan_kept(
            &messages,
            keep_steps,
            policy.trim_to,
            (room as f64 * cpt) as usize,
        ) else {
            if over || relief == Relief::Handoff {
                return self.fresh_start().map(Phase::Done);
            }
            return nothing("nothing to compact: the session has a single assistant turn".into());
        };
        let origin = origins(self.state.records());
        let words = user_messages(self.state.records());
        let pin_after = |split: usize| {
            let present: HashSet<String> = messages[split..]
                .iter()
                .flat_map(|m| m.source_ids.iter())
                .map(|id| origin.get(id).cloned().unwrap_or_else(|| id.clone()))
                .collect();
            pin(&words, &present, (b.user_words as f64 * cpt) as usize)
        };
        let pinned = pin_after(kept.split);
        // The session memory stands in for the summary when it covers the older part, or
        // when what came after it fits the room as the kept part.
        let memory = (relief == Relief::Summary && policy.session_memory)
            .then(|| compact::latest_memory(self.state.records()))
            .flatten()
            .filter(|m| !m.text.trim().is_empty())
            .and_then(|m| {
                let end = compact::memory_end(&messages, &m.through_id)?;
                let kept = if end + 1 >= kept.split {
                    kept.clone()
                } else {
                    compact::kept_from(
                        &messages,
                        end + 1,
                        policy.trim_to,
                        (room as f64 * cpt) as usize,
                    )?
                };
                Some(MemoryPlan {
                    text: m.text.clone(),
                    pinned: pin_after(kept.split),
                    kept,
                })
            });
        Ok(Phase::Go(Prepared {
            relief,
            view,
            assembled,
            next_tools,
            fixed,
            messages,
            todo,
            reattach,
            kept,
            pinned,
            memory,
        }))
    }

    /// The last resort: the view restarts from the current request after a one-line note
    /// (no model, nothing restored). Nothing is installed when that would not be smaller.
    fn fresh_start(&mut self) -> Result<CompactOutcome, TurnError> {
        let session = self.session;
        let view = current_view(self.state, &session.setup.view_policy)?.clone();
        let messages = without_regenerated(&view.messages, self.state.records());
        let Some(from) = compact::current_request(&messages) else {
            return Ok(CompactOutcome::nothing(
                self.tokens_before,
                "nothing to compact: no request to start from",
            ));
        };
        let est = self.state.tracker.estimator;
        let transcript = self.state.file.path().display().to_string();
        let note = compact::fresh_start_note(&transcript);
        let inst = compact::plan_fresh_start(&compact::FreshStart {
            messages: &messages,
            from,
            note: &note,
            trigger: self.trigger,
            tokens_before: self.tokens_before,
            fixed_tokens: est.estimate(fixed_chars(session)),
            estimator: &est,
            now_ms: self.now,
        });
        if !compact::worth_installing(self.tokens_before, inst.tokens_after) {
            let why = "the compaction would not reduce the context";
            self.event(CompactionPhase::Failed, None, Some(why.into()));
            return Ok(CompactOutcome::nothing(self.tokens_before, why));
        }
        self.event(CompactionPhase::Started, None, None);
        let state = &mut *self.state;
        state.append_batch(inst.records)?;
        state.view_cache.clear();
        state.tracker.reset();
        state.failures.succeeded();
        forget_reads_out_of_view(session, state)?;
        self.event(
            CompactionPhase::Finished,
            Some(inst.tokens_after),
            Some("fresh".into()),
        );
        Ok(CompactOutcome {
            compacted: true,
            tokens_before: self.tokens_before,
            tokens_after: inst.tokens_after,
            kind: Some("fresh".into()),
            message: None,
            cancelled: false,
            usage: Usage::default(),
        })
    }

    /// The extractive handoff of the older part: no model, the facts from the transcript.
    fn handoff(&self, prep: &Prepared) -> SummaryText {
        let older = prep.older();
        let rest = &older[usize::from(prefix_end(older).is_some())..];
        let tools = self.session.tools();
        let runs_commands =
            |name: &str| tools.get(name).is_some_and(|e| e.class == ToolClass::Exec);
        SummaryText::Extractive(extractive_handoff(
            rest,
            &prep.todo,
            previous_summary(older).as_deref(),
            &runs_commands,
        ))
    }

    /// The summary: asked of the model for a summary relief (every path in turn), the
    /// extractive handoff otherwise or when an automatic one cannot get one.
    async fn write(
        &mut self,
        prep: &Prepared,
        focus: Option<&str>,
        usage: &mut Usage,
    ) -> Result<Phase<Written>, TurnError> {
        let mut worker: Option<WorkerOutcome> = None;
        let extractive = |summary| Written {
            summary,
            summarizer: Summarizer::Extractive,
            worker: None,
        };
        let est = self.state.tracker.estimator;
        let pinned_chars: usize = prep.pinned.blocks().iter().map(Block::char_len).sum();
        // Before any model call: a summary at its size target beside what the installation
        // keeps must leave the context smaller, or the model's time is spent for nothing.
        // The user's own `/compact` asks the model whatever the odds.
        let at_best =
            prep.fixed + self.budgets.summary / 4 + est.estimate(prep.kept.chars + pinned_chars);
        let worth = self.trigger == CompactTrigger::Manual
            || compact::worth_installing(self.tokens_before, at_best);
        if prep.relief == Relief::Summary && !worth {
            self.event(
                CompactionPhase::Summary,
                None,
                Some(format!(
                    "a summary would not reduce the context (about {at_best} tokens at best, \
                     {} now): the extractive handoff instead, without a model call",
                    self.tokens_before
                )),
            );
        }
        let written = if prep.relief == Relief::Summary && worth {
            self.event(CompactionPhase::Summary, None, None);
            let older = prep.older();
            // The same span of the view, as the main request carries it.
            let as_viewed = older
                .last()
                .and_then(|last| prep.view.messages.iter().position(|m| m.id == last.id))
                .map_or(older, |i| &prep.view.messages[..=i]);
            let parts = Older {
                plain: older,
                as_viewed,
            };
            match summarize(self, parts, focus, usage, &mut worker).await {
                Ok((t, path)) if !t.trim().is_empty() => Written {
                    summary: SummaryText::Model(t),
                    summarizer: path,
                    worker,
                },
                Ok(_) if self.trigger == CompactTrigger::Manual => {
                    let why = "every summary path failed: the model gave no summary";
                    self.event(CompactionPhase::Failed, None, Some(why.into()));
                    return Err(TurnError::NoSummary(format!(
                        "{why}; the session is unchanged"
                    )));
                }
                Ok(_) => extractive(self.handoff(prep)),
                Err(SummaryError::Cancelled) => return self.cancelled(*usage),
                // A summary cut by the output limit is never installed as the whole.
                Err(SummaryError::Cut) => {
                    self.event(
                        CompactionPhase::Summary,
                        None,
                        Some(
                            "the summary ended on the output limit twice: the extractive \
                             handoff instead"
                                .into(),
                        ),
                    );
                    extractive(self.handoff(prep))
                }
                Err(SummaryError::Failed(e)) => {
                    self.event(CompactionPhase::Failed, None, Some(e.to_string()));
                    match self.trigger {
                        CompactTrigger::Manual => return Err(TurnError::Provider(e)),
                        // Nothing changes; failures are counted.
                        CompactTrigger::Auto | CompactTrigger::Idle => {
                            self.count_failure();
                            return Ok(Phase::Done(CompactOutcome {
                                usage: *usage,
                                ..CompactOutcome::nothing(self.tokens_before, e.to_string())
                            }));
                        }
                        // Reactive: the extractive handoff stands in.
                        CompactTrigger::Reactive => extractive(self.handoff(prep)),
                    }
                }
            }
        } else {
            extractive(self.handoff(prep))
        };
        if self.cancel.is_cancelled() {
            return self.cancelled(*usage);
        }
        Ok(Phase::Go(written))
    }

    /// Plans the installation (the summary cut to fit when it would leave the context over
    /// the threshold), writes it in one batch, and brings the live session in line: the
    /// rebuilt prompt and tools, the counters, the reads whose content survived.
    fn install(
        mut self,
        prep: Prepared,
        written: Written,
        usage: Usage,
    ) -> Result<CompactOutcome, TurnError> {
        let (session, b) = (self.session, self.budgets);
        let est = self.state.tracker.estimator;
        let cpt = est.chars_per_token();
        let worker = written.worker.as_ref();
        // The worker's nominations replace the choice by recency.
        let snaps = match worker.filter(|w| !w.nominated.is_empty()) {
            Some(w) => w
                .nominated
                .iter()
                .filter_map(|p| snapshot(session, p))
                .collect(),
            None => snapshots(session, self.state.records()),
        };
        let references = worker.map_or(&[][..], |w| &w.references[..]);
        let files: Vec<FileSnapshot> = snaps.iter().map(|s| s.file.clone()).collect();
        let transcript = self.state.file.path().display().to_string();
        let edited = edited_paths(session, self.state.records());
        let skills = super::skills::snapshots(session, self.state.records());
        let approved_plan = super::plan::current(
            self.state.records(),
            &session.tools(),
            session.policy() == crate::tools::Policy::Plan,
        );
        // The start note comes back with today's date when the day changed.
        let git = git_note(self.state.records())
            .map(|n| crate::workspace::restate_date(&n, &crate::workspace::today()));
        let plan = |summary: SummaryText, summarizer: Summarizer| {
            compact::plan_installation(&InstallInput {
                messages: &prep.messages,
                kept: &prep.kept,
                summary,
                pinned: &prep.pinned,
                trigger: self.trigger,
                tokens_before: self.tokens_before,
                fixed_tokens: prep.fixed,
                transcript_path: &transcript,
                files: &files,
                todo: &prep.todo,
                git_state: git.as_deref(),
                instructions: prep.reattach.as_ref().map(|r| &r.plan),
                budgets: &b,
                trim_to: self.policy.trim_to,
                estimator: &est,
                now_ms: self.now,
                summarizer,
                summary_usage: (usage != Usage::default()).then_some(usage),
                references,
                edited: &edited,
                skills: &skills,
                plan: approved_plan.as_deref(),
            })
        };
        let mut summary = written.summary.clone();
        let mut summarizer = written.summarizer;
        let mut inst = plan(summary.clone(), summarizer);
        if inst.tokens_after > b.threshold && matches!(summary, SummaryText::Model(_)) {
            // A model summary is installed whole or not at all: one far over its target
            // gives way to the extractive handoff, which may be cut.
            summary = self.handoff(&prep);
            summarizer = Summarizer::Extractive;
            inst = plan(summary.clone(), summarizer);
        }
        if inst.tokens_after > b.threshold {
            // An extractive handoff over the threshold is cut, visibly, to what fits.
            let over = inst.tokens_after - b.threshold;
            let text = summary.text();
            let keep_t = est
                .estimate(text.chars().count())
                .saturating_sub(over + b.window / 20);
            let cut = cut_with_marker(text, (keep_t as f64 * cpt) as usize);
            summary = SummaryText::Extractive(cut);
            inst = plan(summary.clone(), summarizer);
        }
        let summary = &summary;
        if !compact::worth_installing(self.tokens_before, inst.tokens_after) {
            if prep.relief == Relief::Handoff {
                // The handoff freed nothing: the view restarts from the current request.
                return self.fresh_start();
            }
            let why = "the compaction would not reduce the context";
            self.event(CompactionPhase::Failed, None, Some(why.into()));
            self.count_failure();
            return Ok(CompactOutcome {
                usage,
                ..CompactOutcome::nothing(self.tokens_before, why)
            });
        }
        let state = &mut *self.state;
        state.append_batch(inst.records)?;
        super::scoped::installed(state, prep.reattach, inst.instructions_id.as_deref());
        state.view_cache.clear();
        state.tracker.reset();
        state.failures.succeeded();
        // The rebuilt prompt carries the instruction files as they are now; earlier notes went.
        state.root_note = None;
        session.set_prompt(prep.assembled.clone());
        session.renew_model_note();
        session.renew_plan_note();
        session.install_tools(prep.next_tools);
        // Reads survive where their content does: kept steps and restored files.
        let restored_at: std::collections::HashMap<&str, &str> = inst
            .restored
            .iter()
            .map(|(p, id)| (p.as_str(), id.as_str()))
            .collect();
        {
            let view = current_view(state, &session.setup.view_policy)?;
            let anchors = view_anchors(view);
            let mut files = session.files.lock().unwrap_or_else(|p| p.into_inner());
            files.keep_in(&anchors);
            for s in &snaps {
                if let Some(id) = restored_at.get(s.file.path.as_str()) {
                    files.record_read(
                        &s.rel,
                        ReadMark {
                            offset: None,
                            limit: None,
                            whole: true,
                            stamp: s.stamp,
                            anchor: Anchor::Message(id.to_string()),
                        },
                    );
                }
            }
        }
        // The figure the boundary records, so the answer, the event and `context/inspect`
        // report the same one.
        let tokens_after = inst.tokens_after;
        let kind = match (summary, prep.relief) {
            (SummaryText::Model(_), _) => "summary",
            (SummaryText::Extractive(_), Relief::Reinstall) => "reinstall",
            (SummaryText::Extractive(_), _) => "handoff",
        };
        self.event(
            CompactionPhase::Finished,
            Some(tokens_after),
            Some(kind.into()),
        );
        Ok(CompactOutcome {
            compacted: true,
            tokens_before: self.tokens_before,
            tokens_after,
            kind: Some(kind.into()),
            message: None,
            cancelled: false,
            usage,
        })
    }
}

fn cancelled(tokens: u64) -> CompactOutcome {
    CompactOutcome {
        cancelled: true,
        ..CompactOutcome::nothing(tokens, "cancelled")
    }
}

#[cfg(test)]
mod tests {
    use super::compact_section;

    #[test]
    fn compact_section_is_the_heading_body_up_to_a_sibling_heading() {
        let system = "# Project instructions\n## AGENTS.md\nBe brief.\n### Compact Instructions\nKeep names.\n#### Detail\nAnd paths.\n### Next\nNo.\n";
        assert_eq!(
            compact_section(system).as_deref(),
            Some("Keep names.\n#### Detail\nAnd paths.")
        );
        assert_eq!(compact_section("# A\ntext\n"), None);
        assert_eq!(compact_section("## Compact instructions\n\n## B\n"), None);
    }
}
