//! Conversions between the engine's types (`garuda_core`) and the wire's (`garuda_protocol`).
//! Every field is named on both sides, so a change to either is a compile error here rather
//! than a silent change of the protocol.

use garuda_core::engine::{
    ContextChange, ContextReport, HistoryEntry, HistoryPage, NextRequest, WorkspaceSummary,
};
use garuda_core::message as core;
use garuda_core::prompt::{
    Assembled, CodeIndex, Features, Limits, Placement, SectionReport, SourceKind, SourceReport,
};
use garuda_core::session::records::CompactTrigger;
use garuda_core::session::store::SessionSummary;
use garuda_core::session::view::Removal;
use garuda_core::session::{MessageMeta, SessionOrigin};
use garuda_core::tools::{Approval, Policy, TodoItem, TodoStatus, ToolMeta};
use garuda_core::turn::{
    CollapseOutcome, CompactOutcome, PermissionOption, PermissionRequest, SnipOutcome, TurnEvent,
};
use garuda_protocol as w;

/// Which agent's sub-session a relayed event or client tool call comes from, for the wire.
pub fn agent_out(a: garuda_core::turn::AgentMark) -> w::AgentOrigin {
    w::AgentOrigin {
        name: a.name,
        session_id: a.session_id,
        tool_call_id: a.tool_call_id,
        parent_session_id: a.parent_session_id,
    }
}

/// A wire block as the engine's.
pub fn block_in(b: w::Block) -> core::Block {
    match b {
        w::Block::Text { text } => core::Block::Text { text },
        w::Block::Image { source } => core::Block::Image {
            source: match source {
                w::ImageSource::Base64 { media_type, data } => {
                    core::ImageSource::Base64 { media_type, data }
                }
                w::ImageSource::Url { url } => core::ImageSource::Url { url },
            },
        },
        w::Block::Thinking {
            thinking,
            signature,
        } => core::Block::Thinking {
            thinking,
            signature,
        },
        w::Block::ToolUse { id, name, input } => core::Block::ToolUse { id, name, input },
        w::Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => core::Block::ToolResult {
            tool_use_id,
            content: content.into_iter().map(block_in).collect(),
            is_error,
        },
        w::Block::Provider { raw } => core::Block::Provider { raw },
    }
}

/// An engine block for the wire.
pub fn block_out(b: core::Block) -> w::Block {
    match b {
        core::Block::Text { text } => w::Block::Text { text },
        core::Block::Image { source } => w::Block::Image {
            source: match source {
                core::ImageSource::Base64 { media_type, data } => {
                    w::ImageSource::Base64 { media_type, data }
                }
                core::ImageSource::Url { url } => w::ImageSource::Url { url },
            },
        },
        core::Block::Thinking {
            thinking,
            signature,
        } => w::Block::Thinking {
            thinking,
            signature,
        },
        core::Block::ToolUse { id, name, input } => w::Block::ToolUse { id, name, input },
        core::Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => w::Block::ToolResult {
            tool_use_id,
            content: content.into_iter().map(block_out).collect(),
            is_error,
        },
        core::Block::Provider { raw } => w::Block::Provider { raw },
    }
}

/// The role for the wire.
pub fn role_out(r: core::Role) -> w::Role {
    match r {
        core::Role::User => w::Role::User,
        core::Role::Assistant => w::Role::Assistant,
    }
}

/// A cache miss's cause on the wire: its name, its fact, and a line for people.
pub fn cache_miss_out(m: &garuda_core::session::cache_miss::CacheMiss) -> w::CacheMiss {
    use garuda_core::session::cache_miss::CacheMiss as M;
    let value = serde_json::to_value(m).unwrap_or_default();
    w::CacheMiss {
        cause: value["cause"].as_str().unwrap_or("unknown").to_string(),
        index: match m {
            M::MessageChanged { index } => Some(*index as u64),
            _ => None,
        },
        idle_secs: match m {
            M::Expired { idle_secs } => Some(*idle_secs),
            _ => None,
        },
        message: m.describe(),
    }
}

/// Usage for the wire.
pub fn usage_out(u: core::Usage) -> w::Usage {
    w::Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_creation_input_tokens: u.cache_creation_input_tokens,
        cache_read_input_tokens: u.cache_read_input_tokens,
        cleared_input_tokens: u.cleared_input_tokens,
    }
}

/// A stop reason for the wire.
pub fn stop_out(s: core::StopReason) -> w::StopReason {
    use core::StopReason as S;
    match s {
        S::EndTurn => w::StopReason::EndTurn,
        S::ToolUse => w::StopReason::ToolUse,
        S::MaxTokens => w::StopReason::MaxTokens,
        S::StopSequence => w::StopReason::StopSequence,
        S::Refusal => w::StopReason::Refusal,
        // The loop continues a paused turn; only a step limit could end one there.
        S::PauseTurn => w::StopReason::EndTurn,
        S::Cancelled => w::StopReason::Cancelled,
        S::MaxSteps => w::StopReason::MaxSteps,
        S::MaxTurns => w::StopReason::MaxTurns,
        S::MaxBudget => w::StopReason::MaxBudget,
        S::Error => w::StopReason::Error,
    }
}

/// A client tool's spec as the engine's.
pub fn tool_spec_in(t: w::ToolSpec) -> core::ToolSpec {
    core::ToolSpec {
        name: t.name,
        description: t.description,
        input_schema: t.input_schema,
    }
}

/// An approval policy as the engine's.
pub fn policy_in(p: w::Policy) -> Policy {
    match p {
        w::Policy::Ask => Policy::Ask,
        w::Policy::AutoEdit => Policy::AutoEdit,
        w::Policy::FullAuto => Policy::FullAuto,
        w::Policy::Plan => Policy::Plan,
    }
}

/// An approval policy as the wire's.
pub fn policy_out(p: Policy) -> w::Policy {
    match p {
        Policy::Ask => w::Policy::Ask,
        Policy::AutoEdit => w::Policy::AutoEdit,
        Policy::FullAuto => w::Policy::FullAuto,
        Policy::Plan => w::Policy::Plan,
    }
}

/// Prompt features as the engine's.
pub fn features_in(f: w::Features) -> Features {
    Features {
        code_index: f.code_index.map(|c| match c {
            w::CodeIndex::Lookup => CodeIndex::Lookup,
            w::CodeIndex::All => CodeIndex::All,
        }),
        sandboxed: f.sandboxed,
        web: f.web,
        mcp: f.mcp,
        hooks: f.hooks,
        explore: f.explore,
        todo: f.todo,
        search: f.search,
        agents: f.agents,
        skills: f.skills,
    }
}

/// Prompt limits as the engine's.
pub fn limits_in(l: w::Limits) -> Limits {
    Limits {
        instructions_chars: l.instructions_chars,
        memory_chars: l.memory_chars,
    }
}

fn section_out(s: &SectionReport) -> w::SectionReport {
    w::SectionReport {
        kind: s.kind.clone(),
        source: s.source.clone(),
        bytes: s.bytes,
        tokens: s.tokens,
        cut: s.cut,
        missing_chars: s.missing_chars,
        skipped: s.skipped.clone(),
    }
}

/// An instruction source for the wire.
pub fn source_out(s: &SourceReport) -> w::InstructionSource {
    w::InstructionSource {
        path: s.path.clone(),
        kind: match s.kind {
            SourceKind::Root => w::InstructionSourceKind::Root,
            SourceKind::Global => w::InstructionSourceKind::Global,
            SourceKind::Nested => w::InstructionSourceKind::Nested,
            SourceKind::Rule => w::InstructionSourceKind::Rule,
        },
        scope: s.scope.clone(),
        placement: placement_out(s.placement),
        in_force: s.in_force,
        chars: s.chars,
        tokens: s.tokens,
        cut: s.cut,
        missing_chars: s.missing_chars,
        skipped: s.skipped.clone(),
    }
}

/// An assembled prompt for `prompt/assemble`.
pub fn assemble_out(a: &Assembled) -> w::AssembleResult {
    w::AssembleResult {
        system: a.system.clone(),
        sha256: a.sha256.clone(),
        sections: a.sections.iter().map(section_out).collect(),
        warnings: a.warnings.clone(),
        sources: a.sources.iter().map(source_out).collect(),
    }
}

/// A workspace for the wire.
pub fn workspace_out(ws: WorkspaceSummary) -> w::WorkspaceInfo {
    w::WorkspaceInfo {
        workspace_id: ws.workspace_id,
        root: ws.root,
        context_files: ws.context_files,
        warnings: ws.warnings,
    }
}

/// A context change for `workspace/contextChanged`.
pub fn context_changed_out(c: ContextChange) -> w::ContextChanged {
    w::ContextChanged {
        workspace_id: c.workspace_id,
        changed: c.changed,
        sha256: c.sha256,
    }
}

/// A stored session for `session/list`.
pub fn session_info_out(s: SessionSummary) -> w::SessionInfo {
    w::SessionInfo {
        session_id: s.id,
        created: s.created,
        model: s.model,
        message_count: s.message_count as u64,
        title: s.title,
        forked_from: s.forked_from,
        damaged: s.damaged,
        origin: match s.origin {
            // A newer Garuda's front reads as an editor session.
            SessionOrigin::Serve | SessionOrigin::Unknown => w::SessionOrigin::Serve,
            SessionOrigin::Acp => w::SessionOrigin::Acp,
            SessionOrigin::Exec => w::SessionOrigin::Exec,
        },
        updated: s.updated,
        parent_session_id: s.parent.as_ref().map(|p| p.session_id.clone()),
        parent_tool_call_id: s.parent.as_ref().map(|p| p.tool_call_id.clone()),
        // Shown in session lists: a bidi override in an agent's name shows escaped.
        agent: s
            .parent
            .map(|p| garuda_core::text::escape_format_chars(&p.agent).into_owned()),
    }
}

/// The wire name of a message's meta: its transcript spelling.
pub fn meta_name(m: MessageMeta) -> &'static str {
    match m {
        MessageMeta::Summary => "summary",
        MessageMeta::RestoredFile => "restored_file",
        MessageMeta::InstructionNote => "instruction_note",
        MessageMeta::Handoff => "handoff",
        MessageMeta::TruncatedMarker => "truncated_marker",
        MessageMeta::Todo => "todo",
        MessageMeta::Display => "display",
        MessageMeta::ModelNote => "model_note",
        MessageMeta::GitState => "git_state",
        MessageMeta::Nudge => "nudge",
        MessageMeta::RestoredSkill => "restored_skill",
        MessageMeta::SkillNote => "skill_note",
        MessageMeta::HookContext => "hook_context",
        MessageMeta::Plan => "plan",
        MessageMeta::PlanNote => "plan_note",
        MessageMeta::RestoredPlan => "restored_plan",
        MessageMeta::Unknown => "unknown",
    }
}

fn removal_name(r: Removal) -> &'static str {
    match r {
        Removal::Compacted => "compacted",
        Removal::Snipped => "snip",
        Removal::Collapsed => "collapsed",
    }
}

fn history_out(e: HistoryEntry) -> w::HistoryMessage {
    let m = e.message;
    w::HistoryMessage {
        id: m.uuid,
        parent_id: m.parent_uuid,
        role: role_out(m.role),
        content: m.content.into_iter().map(block_out).collect(),
        time: m.time,
        meta: m.meta.map(|k| meta_name(k).to_string()),
        removed: e.removed.map(|r| removal_name(r).to_string()),
        copy_of: e.copy_of,
    }
}

/// A page of history for `session/messages`.
pub fn history_page_out(p: HistoryPage) -> w::MessagesPage {
    w::MessagesPage {
        messages: p.messages.into_iter().map(history_out).collect(),
        next_cursor: p.next_cursor,
        total: p.total,
    }
}

/// A compaction's outcome for `session/compact`.
pub fn compact_out(o: CompactOutcome) -> w::CompactResult {
    w::CompactResult {
        compacted: o.compacted,
        tokens_before: o.tokens_before,
        tokens_after: o.tokens_after,
        kind: o.kind,
        message: o.message,
    }
}

/// A snip's outcome.
pub fn snip_out(o: SnipOutcome) -> w::SnipResult {
    w::SnipResult {
        removed: o.removed,
        protected: o.protected,
    }
}

/// A collapse's outcome.
pub fn collapse_out(o: CollapseOutcome) -> w::CollapseResult {
    w::CollapseResult {
        collapse_id: o.collapse_id,
        span_ids: o.span_ids,
        summary: o.summary,
    }
}

/// The next request for `session/view`.
pub fn view_out(v: NextRequest) -> w::ViewResult {
    w::ViewResult {
        request: v.request,
        message_count: v.message_count,
        cache_markers: v.cache_markers,
        context_tokens: v.context_tokens,
    }
}

/// One MCP server's status for `mcp/servers`.
pub fn mcp_server_out(s: garuda_core::mcp::McpServerStatus) -> w::McpServerInfo {
    use garuda_core::mcp::McpServerState as S;
    let (state, reason) = match s.state {
        S::Disabled => (w::McpServerState::Disabled, None),
        S::Starting => (w::McpServerState::Starting, None),
        S::Ready => (w::McpServerState::Ready, None),
        S::Failed { reason } => (w::McpServerState::Failed, Some(reason)),
        S::Exited { reason } => (w::McpServerState::Exited, Some(reason)),
    };
    w::McpServerInfo {
        name: s.name,
        transport: s.transport,
        state,
        reason,
        tool_count: s.tool_count as u64,
        startup_ms: s.startup_ms,
    }
}

/// The accounting for `context/inspect`.
pub fn inspect_out(r: ContextReport) -> w::InspectResult {
    let p = r.parts;
    w::InspectResult {
        system: p.system,
        tools: p.tools,
        mcp_tools: r.mcp_tools,
        instructions: p.instructions,
        memory: p.memory,
        messages: p.messages,
        free: p.free,
        reserved: p.reserved,
        window: p.window,
        window_source: r.window_source.to_string(),
        configured_window: r.configured_window,
        server_window: r.server_window,
        learned_limit: r.learned_limit,
        lean: r.lean.map(|l| w::LeanFixedPart {
            budget_tokens: l.budget_tokens,
            dropped: l.dropped,
            deferred_tools: l.deferred_tools,
        }),
        threshold: p.threshold,
        context_tokens: r.context_tokens,
        paused: r.paused,
        sandbox: w::SandboxReport {
            mode: r.sandbox.mode.name().to_string(),
            confined: r.sandbox.confined(),
            network: r.sandbox.network,
            commands_ask: r.commands_ask,
            description: r.sandbox.describe(),
        },
        auto_compact: r.auto_compact,
        blocking_limit: r.blocking_limit,
        git_state_tokens: r.git_state_tokens,
        nudges: r.relief.nudges,
        collapses: r.relief.collapses,
        auto_collapses: r.relief.auto_collapses,
        media_stripped: r.relief.media_stripped,
        sources: r.sources.iter().map(source_out).collect(),
        prompt_warnings: r.prompt_warnings,
        last_compaction: r.last_compaction.map(|c| w::LastCompaction {
            trigger: trigger_name(c.trigger).to_string(),
            summarizer: c.summarizer.map(|s| s.name().to_string()),
            usage: c.usage.map(usage_out),
            tokens_before: c.tokens_before,
            tokens_after: c.tokens_after,
        }),
        hooks: r
            .hooks
            .hooks()
            .iter()
            .map(|h| w::HookInForce {
                event: h.event.name().to_string(),
                matcher: h.matcher_text.clone(),
                command: h.command.clone(),
                timeout_secs: h.timeout.as_secs_f64(),
                origin: h.origin.to_string(),
            })
            .collect(),
        hooks_skipped: r
            .hooks
            .skipped()
            .iter()
            .map(|h| w::HookSkipped {
                event: h.event.clone(),
                matcher: h.matcher.clone(),
                command: h.command.clone(),
                origin: h.origin.to_string(),
                reason: h.reason.to_string(),
            })
            .collect(),
        usage_by_purpose: r
            .usage
            .iter()
            .map(|u| w::PurposeUsage {
                purpose: u.purpose.map_or("main", |p| p.name()).to_string(),
                requests: u.requests,
                usage: usage_out(u.usage),
                cost_usd: u.cost_usd,
            })
            .collect(),
        tool_clearing: r.tool_clearing,
        cache: w::CacheInspect {
            last_hit_ratio: r.cache.last_hit_ratio,
            session_hit_ratio: r.cache.session_hit_ratio,
            misses: r
                .cache
                .misses
                .iter()
                .map(|(time, m)| w::CacheMissAt {
                    time: *time,
                    miss: cache_miss_out(m),
                })
                .collect(),
        },
        mcp_instructions: r
            .mcp_instructions
            .iter()
            .map(|m| w::McpInstructionsInfo {
                server: m.server.clone(),
                placement: placement_out(m.placement),
                original_chars: m.original_chars,
                chars: m.chars,
                tokens: m.tokens,
                cut: m.cut,
                skipped: m.skipped.clone(),
            })
            .collect(),
        session_memory: r.session_memory.as_ref().map(memory_out),
    }
}

fn placement_out(p: Placement) -> w::InstructionPlacement {
    match p {
        Placement::System => w::InstructionPlacement::System,
        Placement::Note => w::InstructionPlacement::Note,
    }
}

fn meta_out(m: ToolMeta) -> w::ToolMeta {
    w::ToolMeta {
        exit_code: m.exit_code,
        path: m.path,
        wrote: m.wrote,
        todos_changed: m.todos_changed,
        truncated: m.truncated,
        timed_out: m.timed_out,
        cancelled: m.cancelled,
        approval: m.approval.map(approval_out),
        blocked_by_hook: m.blocked_by_hook,
        agent_session_id: m.agent.map(|a| a.session_id),
        blocked_by_plan_mode: m.blocked_by_plan_mode,
        server_side: m.server_side,
    }
}

fn approval_out(a: Approval) -> w::Approval {
    match a {
        Approval::Allowed => w::Approval::Allowed,
        Approval::AllowedAlways => w::Approval::AllowedAlways,
        Approval::Rejected => w::Approval::Rejected,
        Approval::TimedOut => w::Approval::TimedOut,
        Approval::Failed => w::Approval::Failed,
        Approval::Unavailable => w::Approval::Unavailable,
    }
}

/// A todo item for the wire.
pub fn todo_out(t: TodoItem) -> w::TodoItem {
    w::TodoItem {
        content: t.content,
        status: match t.status {
            TodoStatus::Pending => w::TodoStatus::Pending,
            TodoStatus::InProgress => w::TodoStatus::InProgress,
            TodoStatus::Completed => w::TodoStatus::Completed,
        },
    }
}

/// A turn event for `turn/update` (and `exec --json`).
pub fn event_out(e: TurnEvent) -> w::TurnEvent {
    match e {
        TurnEvent::StepStarted { step } => w::TurnEvent::StepStarted { step },
        TurnEvent::TextDelta { text } => w::TurnEvent::TextDelta { text },
        TurnEvent::ThinkingDelta { text } => w::TurnEvent::ThinkingDelta { text },
        TurnEvent::ToolCallStarted { id, name, input } => {
            w::TurnEvent::ToolCallStarted { id, name, input }
        }
        TurnEvent::ToolCallFinished {
            id,
            name,
            output,
            is_error,
            meta,
        } => w::TurnEvent::ToolCallFinished {
            id,
            name,
            output,
            is_error,
            meta: meta_out(meta),
        },
        TurnEvent::Usage {
            usage,
            context_tokens,
            cost_usd,
            cache_hit_ratio,
            session_cache_hit_ratio,
            cache_miss,
        } => w::TurnEvent::Usage {
            usage: usage_out(usage),
            context_tokens,
            cost_usd,
            cache_hit_ratio,
            session_cache_hit_ratio,
            cache_miss: cache_miss.as_ref().map(cache_miss_out),
        },
        TurnEvent::Retry {
            attempt,
            delay_ms,
            reason,
        } => w::TurnEvent::Retry {
            attempt,
            delay_ms,
            reason,
        },
        TurnEvent::Hook {
            event,
            phase,
            subject,
            message,
        } => w::TurnEvent::Hook {
            event,
            phase: phase.name().to_string(),
            subject,
            message,
        },
        TurnEvent::Todos { todos } => w::TurnEvent::Todos {
            todos: todos.into_iter().map(todo_out).collect(),
        },
        TurnEvent::Compaction {
            phase,
            trigger,
            tokens_before,
            tokens_after,
            message,
        } => w::TurnEvent::Compaction {
            phase: phase.name().to_string(),
            trigger: trigger_name(trigger).to_string(),
            tokens_before,
            tokens_after,
            message,
        },
        TurnEvent::ModeChanged { policy } => w::TurnEvent::ModeChanged {
            policy: policy_out(policy),
        },
        TurnEvent::Finished {
            stop_reason,
            usage,
            error,
        } => w::TurnEvent::Finished {
            stop_reason: stop_out(stop_reason),
            usage: usage_out(usage),
            error: error.map(|f| w::TurnFailure {
                kind: f.kind,
                message: f.message,
            }),
            cost_usd: None,
            structured_output: None,
            steps: None,
        },
    }
}

/// The session memory on the wire.
pub fn memory_out(m: &garuda_core::engine::MemoryReport) -> w::SessionMemory {
    use garuda_core::session::records::MemorySource;
    w::SessionMemory {
        text: m.text.clone(),
        through_id: m.through_id.clone(),
        time: m.time,
        source: match m.source {
            MemorySource::Model => "model",
            MemorySource::User => "user",
            MemorySource::Unknown => "unknown",
        }
        .into(),
        tokens_at: m.tokens_at,
        current: m.current,
        in_view: m.in_view,
    }
}

/// The wire name of what started a compaction.
pub fn trigger_name(t: CompactTrigger) -> &'static str {
    match t {
        CompactTrigger::Manual => "manual",
        CompactTrigger::Auto => "auto",
        CompactTrigger::Reactive => "reactive",
        CompactTrigger::Idle => "idle",
    }
}

fn option_out(o: PermissionOption) -> w::PermissionOption {
    w::PermissionOption {
        option_id: o.option_id,
        name: o.name,
    }
}

/// A permission request for `permission/request`.
pub fn permission_out(r: PermissionRequest) -> w::PermissionRequest {
    w::PermissionRequest {
        session_id: r.session_id,
        tool_call_id: r.tool_call_id,
        tool_name: r.tool_name,
        title: r.title,
        input: r.input,
        options: r.options.into_iter().map(option_out).collect(),
        agent: r.agent,
        plan: r.plan,
    }
}

/// A config file problem as the wire carries it.
pub fn config_problem_out(p: garuda_core::config::ConfigProblem) -> w::ConfigProblem {
    use garuda_core::config::Severity;
    w::ConfigProblem {
        severity: match p.severity {
            Severity::Warning => w::ConfigSeverity::Warning,
            Severity::Error => w::ConfigSeverity::Error,
        },
        file: p.path.display().to_string(),
        line: p.line.map(|l| l as u32),
        column: p.column.map(|c| c as u32),
        key: p.key,
        message: p.message,
    }
}

/// The `window/showMessage` of one config problem (LSP: 1 error, 2 warning).
pub fn show_problem(p: garuda_core::config::ConfigProblem) -> w::ShowMessageParams {
    let kind = match p.severity {
        garuda_core::config::Severity::Error => 1,
        garuda_core::config::Severity::Warning => 2,
    };
    w::ShowMessageParams {
        kind,
        message: format!("Garuda config: {p}"),
        config_problem: Some(config_problem_out(p)),
    }
}

/// A symbol query for the client: its method and params (`code/findSymbol`,
/// `code/findReferences`).
pub fn symbol_query_out(
    session_id: &str,
    q: garuda_core::tools::SymbolQuery,
) -> (&'static str, serde_json::Value) {
    use garuda_core::tools::SymbolQuery as Q;
    use garuda_protocol::methods::{ClientMethod, client};
    let limit = |l: usize| u32::try_from(l).unwrap_or(u32::MAX);
    match q {
        Q::Definitions {
            name,
            kind,
            limit: l,
        } => (
            client::FindSymbol::NAME,
            serde_json::to_value(w::FindSymbolParams {
                session_id: session_id.to_string(),
                name,
                kind,
                limit: limit(l),
            })
            .unwrap_or_default(),
        ),
        Q::References {
            name,
            path,
            line,
            limit: l,
        } => (
            client::FindReferences::NAME,
            serde_json::to_value(w::FindReferencesParams {
                session_id: session_id.to_string(),
                name,
                path,
                line,
                limit: limit(l),
            })
            .unwrap_or_default(),
        ),
    }
}

/// The client's answer to a symbol query of `method`; `Err` for `null` or a wrong shape.
pub fn symbol_answer_in(
    method: &str,
    v: serde_json::Value,
) -> Result<garuda_core::tools::SymbolAnswer, String> {
    use garuda_core::tools::{SymbolAnswer, SymbolSite};
    use garuda_protocol::methods::{ClientMethod, client};
    if v.is_null() {
        return Err("no language server answers it".into());
    }
    let wrong = |e: serde_json::Error| format!("the client answered {method} wrongly: {e}");
    if method == client::FindSymbol::NAME {
        let r: w::FindSymbolResult = serde_json::from_value(v).map_err(wrong)?;
        Ok(SymbolAnswer {
            source: r.source,
            items: r
                .items
                .into_iter()
                .map(|i| SymbolSite {
                    name: Some(i.name),
                    kind: Some(i.kind),
                    container: i.container,
                    path: i.path,
                    line: i.line,
                    end_line: i.end_line,
                    text: i.signature,
                })
                .collect(),
        })
    } else {
        let r: w::FindReferencesResult = serde_json::from_value(v).map_err(wrong)?;
        Ok(SymbolAnswer {
            source: r.source,
            items: r
                .items
                .into_iter()
                .map(|i| SymbolSite {
                    path: i.path,
                    line: i.line,
                    text: i.text,
                    ..SymbolSite::default()
                })
                .collect(),
        })
    }
}
