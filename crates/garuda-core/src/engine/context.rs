//! Context operations: manual compaction, snip, collapse, the next request and the accounting.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Engine, EngineError};
use crate::prompt::PartKind;
use crate::provider::{self, ModelRequest};
use crate::session::records::now_ms;
use crate::session::records::{CompactTrigger, new_id};
use crate::session::tokens::ContextTracker;
use crate::session::tokens::{self, PartSizes};
use crate::session::view::{ReliefReport, build_view, relief_report, render_id_tags};
use crate::turn::{self, LiveSession, Progress, StepView, TurnHost};

/// The exact request the next step would send.
#[derive(Debug, Clone, PartialEq)]
pub struct NextRequest {
    /// The provider's wire body.
    pub request: serde_json::Value,
    /// Messages in it.
    pub message_count: u64,
    /// Cache markers in it.
    pub cache_markers: u64,
    /// The context size now.
    pub context_tokens: u64,
}

/// The context by part (`context/inspect`).
#[derive(Debug, Clone)]
pub struct ContextReport {
    /// Tokens by part, at the window in use (`tools` without the MCP definitions).
    pub parts: tokens::ContextParts,
    /// MCP tool definitions in the request (with `mcp_tool_search` when they are deferred).
    pub mcp_tools: u64,
    /// The configured window.
    pub configured_window: u64,
    /// The limit learned from the provider, if any.
    pub learned_limit: Option<u64>,
    /// Where the window in use comes from: `learned`, a server endpoint (`llama.cpp /props`,
    /// `ollama /api/show`, `lmstudio /api/v0/models`, `vllm /v1/models`), or the model's
    /// `config`, `table`, `default` or `environment`.
    pub window_source: &'static str,
    /// The window the model's local server reported, when it was asked and said.
    pub server_window: Option<u64>,
    /// The lean fixed part of a small window, when in force.
    pub lean: Option<crate::turn::LeanState>,
    /// The context size now.
    pub context_tokens: u64,
    /// True while auto-compaction is paused.
    pub paused: bool,
    /// What the session's commands run in.
    pub sandbox: crate::sandbox::CommandSandbox,
    /// Each command waits for the user's approval.
    pub commands_ask: bool,
    /// False when auto-compaction is off.
    pub auto_compact: bool,
    /// With auto-compaction off: the most tokens a request may carry.
    pub blocking_limit: Option<u64>,
    /// Tokens of the git state note in the view (0: none).
    pub git_state_tokens: u64,
    /// What the lighter reliefs did (nudges, collapses, media stripped).
    pub relief: ReliefReport,
    /// Every instruction source: the system prompt's, the nested files and rules in force,
    /// and the rules not in force yet.
    pub sources: Vec<crate::prompt::SourceReport>,
    /// What the session's prompt assembly reported: cut or skipped files, and feature
    /// switches that add no line because the session lacks their tool.
    pub prompt_warnings: Vec<String>,
    /// The newest compaction that installed a summary or handoff, if any.
    pub last_compaction: Option<LastCompaction>,
    /// The session's hooks: those in force and those skipped, with why.
    pub hooks: std::sync::Arc<crate::hooks::HookSet>,
    /// What the session's requests used and cost, per purpose (main loop first).
    pub usage: Vec<crate::session::usage::PurposeUsage>,
    /// How the main requests read the provider's cache, and the newest misses' causes.
    pub cache: crate::session::cache_miss::CacheReport,
    /// The session memory, when one was written.
    pub session_memory: Option<MemoryReport>,
    /// The provider clears old tool results itself (`[context] provider_clearing` where it
    /// can); the time-based microcompact is then off.
    pub tool_clearing: bool,
    /// The MCP servers' instructions the model has: the system prompt's, or the latest
    /// note's when the servers changed since.
    pub mcp_instructions: Vec<crate::prompt::mcp::McpInstructionsReport>,
}

/// The newest installed compaction, from its boundary record.
#[derive(Debug, Clone, PartialEq)]
pub struct LastCompaction {
    /// What started it.
    pub trigger: crate::session::records::CompactTrigger,
    /// The path that produced the summary (None in transcripts of earlier versions).
    pub summarizer: Option<crate::session::records::Summarizer>,
    /// What its summary requests used.
    pub usage: Option<crate::message::Usage>,
    /// Context tokens before and after.
    pub tokens_before: u64,
    /// Estimated context tokens after.
    pub tokens_after: u64,
}

/// The newest compaction boundary of a transcript, as a report.
fn last_compaction(records: &[crate::session::Record]) -> Option<LastCompaction> {
    crate::session::records::latest_boundary(records).map(|b| LastCompaction {
        trigger: b.trigger,
        summarizer: b.summarizer,
        usage: b.summary_usage,
        tokens_before: b.tokens_before,
        tokens_after: b.tokens_after,
    })
}

impl Engine {
    /// The manual `/compact [focus]`: stage 1 on the older part, then the summary, whatever
    /// the size. Progress goes out as turn events and `$/progress`.
    pub async fn compact(
        &self,
        id: &str,
        focus: Option<String>,
        host: Arc<dyn TurnHost>,
        cancel: CancellationToken,
    ) -> Result<turn::CompactOutcome, EngineError> {
        let live = self.session(id)?;
        let mut state = live.begin(&cancel).await?;
        turn::write_memory(&live, &mut state);
        let token = format!("garuda/compact/{}", new_id());
        host.progress(
            &token,
            Progress::Begin {
                title: "Compacting the session".into(),
                cancellable: true,
            },
        );
        let report = {
            let host = host.clone();
            let token = token.clone();
            move |phase: turn::CompactionPhase, before: Option<u64>, after: Option<u64>| {
                let phase = phase.name();
                let message = match (before, after) {
                    (Some(b), Some(a)) => format!("{phase}: {b} → {a} tokens"),
                    (Some(b), None) => format!("{phase}: {b} tokens"),
                    _ => phase.to_string(),
                };
                host.progress(&token, Progress::Report { message });
            }
        };
        let out = turn::compact_session(
            &live,
            &mut state,
            host.as_ref(),
            &cancel,
            turn::CompactRequest {
                trigger: CompactTrigger::Manual,
                focus: focus.as_deref(),
                refused_tokens: None,
                relief: None,
            },
            &report,
        )
        .await;
        drop(state);
        let end = match &out {
            Ok(o) if o.compacted => format!(
                "compacted ({}): {} → {} tokens",
                o.kind.as_deref().unwrap_or("summary"),
                o.tokens_before,
                o.tokens_after
            ),
            Ok(o) => o.message.clone().unwrap_or_else(|| "nothing to do".into()),
            Err(e) => format!("failed: {e}"),
        };
        host.progress(&token, Progress::End { message: end });
        Ok(out?)
    }

    /// Drops messages from the model's view (tool pairs stay whole).
    pub fn snip(
        &self,
        id: &str,
        message_ids: Vec<String>,
    ) -> Result<turn::SnipOutcome, EngineError> {
        let live = self.session(id)?;
        let mut state = live.try_begin(&CancellationToken::new())?;
        Ok(turn::snip_ids(&live, &mut state, message_ids)?)
    }

    /// Replaces a span of the view with a summary (the model's when none is given).
    pub async fn collapse(
        &self,
        id: &str,
        from: &str,
        to: &str,
        summary: Option<String>,
        cancel: CancellationToken,
    ) -> Result<turn::CollapseOutcome, EngineError> {
        let live = self.session(id)?;
        let mut state = live.begin(&cancel).await?;
        Ok(turn::collapse(&live, &mut state, from, to, summary, &cancel).await?)
    }

    /// The view, the tracker and the learned limit while a turn holds the session: rebuilt
    /// from the transcript on disk (everything acknowledged so far).
    fn view_on_disk(
        &self,
        live: &LiveSession,
    ) -> Result<(StepView, ContextTracker, Option<u64>), EngineError> {
        let records = self.store().load(&live.id)?.records;
        let v = build_view(&records, &live.setup.view_policy, now_ms());
        let tracker = ContextTracker::replay(&records);
        let sv = StepView {
            messages: render_id_tags(&v),
            cache: v.cache.clone(),
            view_chars: v.chars(),
        };
        Ok((sv, tracker, tokens::learned_limit(&records)))
    }

    /// The request the next step would send, with its cache markers.
    pub fn next_request(&self, id: &str) -> Result<NextRequest, EngineError> {
        let live = self.session(id)?;
        let (sv, context_tokens) = match live.try_state().ok_or(()) {
            Ok(mut state) => {
                let sv = turn::step_view(&mut state, &live.setup.view_policy)?;
                let t = turn::context_tokens(&live, &mut state)?;
                (sv, t)
            }
            Err(_) => {
                let (sv, tracker, _) = self.view_on_disk(&live)?;
                let t = tracker.context_tokens(sv.view_chars, turn::fixed_chars(&live));
                (sv, t)
            }
        };
        let request = ModelRequest {
            model: live.model().id.clone(),
            system: live.system(),
            tools: live.tool_specs(),
            messages: sv.messages,
            max_tokens: live.model().info.max_output,
            cache: sv.cache,
            thinking_budget: None,
            output_schema: None,
            no_tool_calls: false,
            tool_clearing: live.setup.tool_clearing.clone(),
        };
        let message_count = request.messages.len() as u64;
        let cache_markers = request.cache.messages.len() as u64 + u64::from(request.cache.system);
        let body =
            provider::request_preview(&live.model().spec, &self.provider_config()?, &request)?;
        Ok(NextRequest {
            request: body,
            message_count,
            cache_markers,
            context_tokens,
        })
    }

    /// The context by part, with the threshold.
    pub fn inspect(&self, id: &str) -> Result<ContextReport, EngineError> {
        let live = self.session(id)?;
        let prices = live.model().info.prices;
        let by_purpose = |records: &[crate::session::Record]| {
            (
                crate::session::usage::by_purpose(records, prices.as_ref()),
                crate::session::cache_miss::report(records),
            )
        };
        let (
            context_tokens,
            message_chars,
            tracker,
            paused,
            learned,
            relief,
            scoped,
            last,
            usage,
            session_memory,
        ) = match live.try_state().ok_or(()) {
            Ok(mut state) => {
                let t = turn::context_tokens(&live, &mut state)?;
                let scoped = turn::scoped_sources(&live, state.scope_mut());
                // `context_tokens` brought the view up to date (a due microcompact appended).
                let view = state.view(&live.setup.view_policy, now_ms()).clone();
                let relief = relief_report(state.records(), &view);
                (
                    t,
                    state.message_chars(),
                    state.tracker(),
                    state.compaction_paused(&live.setup.compact),
                    state.learned_limit(),
                    relief,
                    scoped,
                    last_compaction(state.records()),
                    by_purpose(state.records()),
                    memory_in_view(state.records(), &view.messages),
                )
            }
            Err(_) => {
                let records = self.store().load(&live.id)?.records;
                let mut scope =
                    turn::ScopeState::replay(&records, &live.tools(), &live.setup.workspace.root);
                let scoped = turn::scoped_sources(&live, &mut scope);
                let v = build_view(&records, &live.setup.view_policy, now_ms());
                let tracker = ContextTracker::replay(&records);
                let t = tracker.context_tokens(v.chars(), turn::fixed_chars(&live));
                let relief = relief_report(&records, &v);
                let learned = tokens::learned_limit(&records);
                let last = last_compaction(&records);
                let usage = by_purpose(&records);
                let memory = memory_in_view(&records, &v.messages);
                (
                    t,
                    v.chars(),
                    tracker,
                    false,
                    learned,
                    relief,
                    scoped,
                    last,
                    usage,
                    memory,
                )
            }
        };
        // The session's own prompt (frozen at its start or last compaction), by typed part.
        let prompt = live.prompt();
        let chars = |k: PartKind| prompt.part(k).chars().count();
        let (instr, mem) = (
            chars(PartKind::Instructions) + chars(PartKind::Global),
            chars(PartKind::Memory),
        );
        // The system prompt's sources, then the scoped ones in force, then the rules that
        // are not (yet).
        let mut sources: Vec<crate::prompt::SourceReport> = prompt
            .sources
            .iter()
            .filter(|s| s.placement == crate::prompt::Placement::System)
            .cloned()
            .collect();
        let known: std::collections::HashSet<String> =
            scoped.iter().map(|s| s.path.clone()).collect();
        sources.extend(scoped);
        sources.extend(
            prompt
                .sources
                .iter()
                .filter(|s| {
                    s.placement == crate::prompt::Placement::Note && !known.contains(&s.path)
                })
                .cloned(),
        );
        let sizes = PartSizes {
            system_chars: prompt.system.chars().count().saturating_sub(instr + mem),
            instructions_chars: instr,
            memory_chars: mem,
            tool_chars: tokens::tool_chars(&live.tool_specs()),
            message_chars,
        };
        let model = live.model();
        let info = &model.info;
        let server = live.server_window();
        let (window, window_source) = crate::session::tokens::planned_window(info, server, learned);
        let threshold = crate::session::compact::threshold_tokens(
            window,
            info.max_output as u64,
            &live.setup.compact,
        );
        let mut p = tokens::inspect(&sizes, &tracker, window, info.max_output as u64, threshold);
        // MCP definitions are a part of their own: what servers add is what a user trims.
        let mcp_tools = tracker
            .estimator
            .estimate(tokens::tool_chars(&live.tools().mcp_specs()))
            .min(p.tools);
        p.tools -= mcp_tools;
        let auto_compact = live.setup.compact.auto_compact;
        let mcp_instructions = match live.setup.mcp.as_ref().filter(|_| !live.is_agent()) {
            Some(hub) if hub.heard_instructions() != hub.prompt_instructions() => {
                let mut r = crate::prompt::mcp::render(&hub.heard_instructions()).reports;
                for e in &mut r {
                    e.placement = crate::prompt::Placement::Note;
                }
                r
            }
            _ => prompt.mcp_instructions.clone(),
        };
        Ok(ContextReport {
            parts: p,
            mcp_tools,
            configured_window: info.context_window,
            learned_limit: learned,
            window_source,
            server_window: server.map(|s| s.tokens),
            lean: live.lean(),
            context_tokens,
            paused,
            sandbox: live.setup.sandbox.clone(),
            commands_ask: crate::tools::approval_needed(
                live.policy(),
                crate::tools::ToolClass::Exec,
                &live.setup.sandbox,
                crate::tools::EditRisk::Plain,
            ),
            auto_compact,
            blocking_limit: (!auto_compact)
                .then(|| crate::session::compact::blocking_limit(window)),
            git_state_tokens: tracker.estimator.estimate(relief.git_state_chars),
            relief,
            sources,
            prompt_warnings: prompt.warnings.clone(),
            last_compaction: last,
            hooks: live.setup.hooks.clone(),
            usage: usage.0,
            cache: usage.1,
            tool_clearing: live.setup.tool_clearing.is_some(),
            mcp_instructions,
            session_memory,
        })
    }

    /// The session memory (`session/memory`); with `text`, the user's notes replace it first
    /// (they cover the conversation so far, and the next update carries them forward). An
    /// empty text clears it.
    pub fn session_memory(
        &self,
        id: &str,
        text: Option<String>,
    ) -> Result<Option<MemoryReport>, EngineError> {
        let live = self.session(id)?;
        let Some(text) = text else {
            return Ok(match live.try_state() {
                Some(mut state) => {
                    turn::write_memory(&live, &mut state);
                    memory_of_state(&live, &mut state)
                }
                None => {
                    let records = self.store().load(&live.id)?.records;
                    let v = build_view(&records, &live.setup.view_policy, now_ms());
                    memory_in_view(&records, &v.messages)
                }
            });
        };
        if text.chars().count() > MEMORY_MAX_CHARS {
            return Err(EngineError::Invalid(format!(
                "the session memory is {} characters; at most {MEMORY_MAX_CHARS} are kept",
                text.chars().count()
            )));
        }
        let mut state = live.try_begin(&CancellationToken::new())?;
        turn::set_memory(&live, &mut state, text)?;
        Ok(memory_of_state(&live, &mut state))
    }
}

/// The most characters of a session memory the user may set.
pub const MEMORY_MAX_CHARS: usize = 100_000;

/// The session memory as `context/inspect` and `session/memory` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryReport {
    /// The notes.
    pub text: String,
    /// The last message they cover.
    pub through_id: String,
    /// When they were written (unix ms).
    pub time: u64,
    /// `model` or `user`.
    pub source: crate::session::records::MemorySource,
    /// The context's size when they were asked for.
    pub tokens_at: u64,
    /// They cover the newest message: a compaction now installs them as they are.
    pub current: bool,
    /// Their last message is in the model's view: a compaction can install them.
    pub in_view: bool,
}

/// The newest session memory of a live session's state, without copying its view.
fn memory_of_state(
    live: &crate::turn::LiveSession,
    state: &mut crate::turn::SessionState,
) -> Option<MemoryReport> {
    let through = crate::session::compact::latest_memory(state.records())?
        .through_id
        .clone();
    let view = state.view(&live.setup.view_policy, now_ms());
    let in_view = crate::session::compact::memory_end(&view.messages, &through).is_some();
    memory_report(state.records(), in_view)
}

/// The newest session memory of a session's records and view.
fn memory_in_view(
    records: &[crate::session::Record],
    view: &[crate::session::view::ViewMessage],
) -> Option<MemoryReport> {
    let m = crate::session::compact::latest_memory(records)?;
    memory_report(
        records,
        crate::session::compact::memory_end(view, &m.through_id).is_some(),
    )
}

/// The newest session memory; `in_view` when its last message is in the model's view.
fn memory_report(records: &[crate::session::Record], in_view: bool) -> Option<MemoryReport> {
    let m = crate::session::compact::latest_memory(records)?;
    let last = records
        .iter()
        .rev()
        .find_map(|r| r.as_message().map(|m| m.uuid.as_str()));
    Some(MemoryReport {
        text: m.text.clone(),
        through_id: m.through_id.clone(),
        time: m.time,
        source: m.source,
        tokens_at: m.tokens_at,
        current: last == Some(m.through_id.as_str()),
        in_view,
    })
}
