//! Pure conversions between Garuda's engine types and the ACP v1 types of
//! `agent-client-protocol-schema` (no IO: file previews come in as arguments).

use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

use garuda_core::engine::HistoryEntry;
use garuda_core::message::{Block, ImageSource, Role, StopReason};
use garuda_core::session::records::MessageMeta;
use garuda_core::tools::{
    EditPreview, Policy, TodoItem, TodoStatus, ToolClass, ToolKind, ToolRegistry,
};
use garuda_core::turn::{CompactionPhase, HookPhase, TurnEvent};

/// What the client said it can do (`initialize`), as far as Garuda uses it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCaps {
    /// `fs/read_text_file`.
    pub read: bool,
    /// `fs/write_text_file`: edits land in the editor's buffers.
    pub write: bool,
    /// `terminal/*`: commands run in the editor's terminals.
    pub terminal: bool,
    /// `session.compaction`: `compaction_update` instead of a thought chunk.
    pub compaction: bool,
    /// `session.notices`: warnings (no sandbox, an MCP server failed, a config problem) as
    /// `notice` updates; without it they only go to the log.
    pub notices: bool,
    /// `elicitation.form`: MCP servers' forms go to `elicitation/create`.
    pub elicitation_form: bool,
    /// `elicitation.url`: MCP servers' URL requests go to `elicitation/create`.
    pub elicitation_url: bool,
    /// `plan`: plans go as `plan_update` by id (the todo list, plan mode's plan) and leave
    /// as `plan_removed`; without it the todo list is the flat `plan` update.
    pub plans: bool,
    /// `subagents`: an agent's sub-session is a child session (`subagent_update`, its
    /// updates under its own id, the task and report as `session_message`s); without it
    /// the agent's run shows under its one tool call.
    pub subagents: bool,
}

impl ClientCaps {
    /// The capabilities of an `initialize` request.
    pub fn of(c: &acp::ClientCapabilities) -> ClientCaps {
        ClientCaps {
            read: c.fs.read_text_file,
            write: c.fs.write_text_file,
            terminal: c.terminal,
            compaction: c.session.as_ref().is_some_and(|s| s.compaction.is_some()),
            notices: c.session.as_ref().is_some_and(|s| s.notices.is_some()),
            elicitation_form: c.elicitation.as_ref().is_some_and(|e| e.form.is_some()),
            elicitation_url: c.elicitation.as_ref().is_some_and(|e| e.url.is_some()),
            plans: c.plan.is_some(),
            subagents: c.subagents.is_some(),
        }
    }
}

/// The `elicitation/create` params for an MCP server's request, checked against ACP's types
/// (a schema ACP cannot carry is an error, and the server gets a decline with it).
pub fn elicitation_params(
    session_id: &str,
    request: &garuda_core::mcp::ElicitationRequest,
) -> Result<Value, String> {
    use garuda_core::mcp::ElicitationMode;
    let mut v = match &request.mode {
        ElicitationMode::Form { schema } => serde_json::json!({
            "mode": "form", "sessionId": session_id, "requestedSchema": schema,
        }),
        ElicitationMode::Url {
            url,
            elicitation_id,
        } => serde_json::json!({
            "mode": "url", "sessionId": session_id, "url": url,
            "elicitationId": if elicitation_id.is_empty() { uuid::Uuid::new_v4().to_string() } else { elicitation_id.clone() },
        }),
    };
    v["message"] = Value::String(format!(
        "{} (MCP server `{}`)",
        request.message, request.server
    ));
    // The session scope names the tool call the server asked during.
    if let Some(id) = &request.tool_call_id {
        v["toolCallId"] = Value::String(id.clone());
    }
    let typed: acp::CreateElicitationRequest = serde_json::from_value(v)
        .map_err(|e| format!("the request does not fit ACP's elicitation/create: {e}"))?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

/// The engine's answer from an `elicitation/create` response.
pub fn elicitation_answer(v: Value) -> garuda_core::mcp::ElicitationAnswer {
    use garuda_core::mcp::ElicitationAnswer as A;
    match serde_json::from_value::<acp::CreateElicitationResponse>(v) {
        Ok(r) => match r.action {
            acp::ElicitationAction::Accept(a) => {
                let content = a
                    .content
                    .and_then(|c| serde_json::to_value(c).ok())
                    .and_then(|c| c.as_object().cloned())
                    .unwrap_or_default();
                A::Accept(content)
            }
            acp::ElicitationAction::Decline => A::Decline,
            _ => A::Cancel,
        },
        Err(e) => A::Unavailable(format!(
            "the editor answered elicitation/create wrongly: {e}"
        )),
    }
}

/// A `notice` update: `title` stands alone, `description` adds detail.
pub fn notice(
    severity: acp::NoticeSeverity,
    title: &str,
    description: Option<String>,
) -> acp::SessionUpdate {
    acp::SessionUpdate::Notice(acp::Notice::new(severity, title).description(description))
}

/// The ACP tool kind of a session's tool, for the editor's icon.
pub fn tool_kind(tools: &ToolRegistry, name: &str) -> acp::ToolKind {
    match tools.get(name).map(|e| e.kind) {
        Some(ToolKind::Read) => acp::ToolKind::Read,
        Some(ToolKind::Search) => acp::ToolKind::Search,
        Some(ToolKind::Edit) => acp::ToolKind::Edit,
        Some(ToolKind::Execute) => acp::ToolKind::Execute,
        Some(ToolKind::Think) => acp::ToolKind::Think,
        Some(ToolKind::SwitchMode) => acp::ToolKind::SwitchMode,
        Some(ToolKind::Fetch) => acp::ToolKind::Fetch,
        Some(ToolKind::Other) | None => acp::ToolKind::Other,
    }
}

/// Where a call works, for the editor's "follow the agent": the file it names (absolute) and
/// the line, from the edit preview or the read's offset.
pub fn locations(
    tools: &ToolRegistry,
    root: &Path,
    name: &str,
    input: &Value,
    preview: Option<&EditPreview>,
) -> Vec<acp::ToolCallLocation> {
    if let Some(p) = preview {
        return vec![acp::ToolCallLocation::new(root.join(&p.rel_path)).line(p.line)];
    }
    let Some(entry) = tools.get(name) else {
        return Vec::new();
    };
    let Some(path) = entry.path_in(input) else {
        return Vec::new();
    };
    let line = entry.line(input);
    vec![acp::ToolCallLocation::new(root.join(path.trim())).line(line)]
}

/// The diff an edit would make (old and new text of the whole file, format characters
/// already escaped by the engine's preview).
pub fn diff(root: &Path, p: &EditPreview) -> acp::ToolCallContent {
    // The diff's path heads what the person approves: a bidi override in a file name shows
    // escaped there (the call's locations keep the exact path, to open the file).
    let path = root.join(&p.rel_path);
    let shown = match path.to_str() {
        Some(s) => PathBuf::from(garuda_core::text::escape_format_chars(s).into_owned()),
        None => path,
    };
    acp::ToolCallContent::Diff(
        acp::Diff::new(shown, p.new_text.clone()).old_text(p.old_text.clone()),
    )
}

/// The `tool_call` announcing a call (`pending` until it is approved and runs).
pub fn tool_call(
    tools: &ToolRegistry,
    root: &Path,
    id: &str,
    name: &str,
    input: &Value,
    preview: Option<&EditPreview>,
    status: acp::ToolCallStatus,
) -> acp::ToolCall {
    acp::ToolCall::new(id.to_string(), tools.describe(name, input))
        .kind(tool_kind(tools, name))
        .status(status)
        .locations(locations(tools, root, name, input, preview))
        .content(preview.map(|p| diff(root, p)).into_iter().collect())
        .raw_input(input.clone())
}

/// The same call as the `toolCall` of a permission request.
pub fn tool_call_fields(call: acp::ToolCall) -> acp::ToolCallUpdate {
    let fields = acp::ToolCallUpdateFields::new()
        .kind(call.kind)
        .status(call.status)
        .title(call.title)
        .locations((!call.locations.is_empty()).then_some(call.locations))
        .content((!call.content.is_empty()).then_some(call.content))
        .raw_input(call.raw_input);
    acp::ToolCallUpdate::new(call.tool_call_id, fields)
}

/// A status change of a call.
pub fn tool_status(id: &str, status: acp::ToolCallStatus) -> acp::SessionUpdate {
    acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(
        id.to_string(),
        acp::ToolCallUpdateFields::new().status(status),
    ))
}

/// The `tool_call_update` closing a call with its output; a diff already shown stays.
pub fn tool_result(
    id: &str,
    output: &str,
    is_error: bool,
    keep: Vec<acp::ToolCallContent>,
) -> acp::ToolCallUpdate {
    let status = if is_error {
        acp::ToolCallStatus::Failed
    } else {
        acp::ToolCallStatus::Completed
    };
    let mut content = keep;
    content.push(acp::ToolCallContent::from(text(output)));
    acp::ToolCallUpdate::new(
        id.to_string(),
        acp::ToolCallUpdateFields::new()
            .status(status)
            .content(content),
    )
}

/// A text content block.
pub fn text(t: impl Into<String>) -> acp::ContentBlock {
    acp::ContentBlock::Text(acp::TextContent::new(t))
}

/// The ACP plan of a todo list.
pub fn plan(todos: &[TodoItem]) -> acp::SessionUpdate {
    acp::SessionUpdate::Plan(acp::Plan::new(plan_entries(todos)))
}

/// The plan id of the session's todo list.
pub const TODOS_PLAN: &str = "todos";
/// The plan id of the plan plan mode presents for approval.
pub const PLAN_MODE_PLAN: &str = "plan";

/// The todo list as the client shows it: by id to a client with the `plan` capability (an
/// emptied list removes it), else the flat `plan` update.
pub fn todos_update(todos: &[TodoItem], caps: ClientCaps) -> acp::SessionUpdate {
    if !caps.plans {
        return plan(todos);
    }
    if todos.is_empty() {
        return acp::SessionUpdate::PlanRemoved(acp::PlanRemoved::new(TODOS_PLAN));
    }
    let items = acp::PlanItems::new(TODOS_PLAN, plan_entries(todos));
    acp::SessionUpdate::PlanUpdate(acp::PlanUpdate::new(acp::PlanUpdateContent::Items(items)))
}

/// Plan mode's plan, in Markdown, by its id (for a client with the `plan` capability).
pub fn plan_mode_update(markdown: &str) -> acp::SessionUpdate {
    let plan = acp::PlanMarkdown::new(PLAN_MODE_PLAN, markdown.to_string());
    acp::SessionUpdate::PlanUpdate(acp::PlanUpdate::new(acp::PlanUpdateContent::Markdown(plan)))
}

fn plan_entries(todos: &[TodoItem]) -> Vec<acp::PlanEntry> {
    todos
        .iter()
        .map(|t| {
            acp::PlanEntry::new(
                t.content.clone(),
                acp::PlanEntryPriority::Medium,
                match t.status {
                    TodoStatus::Pending => acp::PlanEntryStatus::Pending,
                    TodoStatus::InProgress => acp::PlanEntryStatus::InProgress,
                    TodoStatus::Completed => acp::PlanEntryStatus::Completed,
                },
            )
        })
        .collect()
}

/// A chunk of agent text.
pub fn agent_text(t: impl Into<String>) -> acp::SessionUpdate {
    acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(text(t)))
}

/// A chunk of agent reasoning.
pub fn thought(t: impl Into<String>) -> acp::SessionUpdate {
    acp::SessionUpdate::AgentThoughtChunk(acp::ContentChunk::new(text(t)))
}

/// A compaction as the client can show it: a `compaction_update` when it opted into them,
/// else a one-line thought. `None` for phases without news.
pub fn compaction(
    caps: ClientCaps,
    compaction_id: &str,
    phase: CompactionPhase,
    message: Option<String>,
) -> Option<acp::SessionUpdate> {
    if caps.compaction {
        let status = match phase {
            CompactionPhase::Started => acp::CompactionStatus::InProgress,
            CompactionPhase::Finished => acp::CompactionStatus::Completed,
            CompactionPhase::Failed => acp::CompactionStatus::Failed,
            _ => return None,
        };
        let mut u = acp::CompactionUpdate::new(compaction_id.to_string(), status);
        if phase == CompactionPhase::Failed
            && let Some(m) = message
        {
            u = u.error(m);
        }
        return Some(acp::SessionUpdate::CompactionUpdate(u));
    }
    match (phase, message) {
        (CompactionPhase::Finished | CompactionPhase::Failed, Some(m)) => {
            Some(thought(format!("[compaction {}: {m}]", phase.name())))
        }
        _ => None,
    }
}

/// The session update for one turn event that needs no IO; `None` for events ACP has no
/// place for. Tool calls, compaction, the todo list and mode changes are the host's: it
/// knows the client's capabilities and the session's models they depend on.
pub fn event_update(event: TurnEvent, context_window: u64) -> Option<acp::SessionUpdate> {
    Some(match event {
        TurnEvent::TextDelta { text } => agent_text(text),
        TurnEvent::ThinkingDelta { text } => thought(text),
        TurnEvent::Usage {
            context_tokens,
            cost_usd,
            cache_hit_ratio,
            session_cache_hit_ratio,
            cache_miss,
            ..
        } => {
            // The cache's share and a miss's cause have no ACP field: Garuda's own, under
            // _meta, for clients that show them.
            let mut meta = acp::Meta::new();
            let mut garuda = serde_json::json!({
                "cacheHitRatio": cache_hit_ratio,
                "sessionCacheHitRatio": session_cache_hit_ratio,
            });
            if let Some(m) = cache_miss.as_ref() {
                garuda["cacheMiss"] =
                    serde_json::to_value(crate::front::wire::cache_miss_out(m)).unwrap_or_default();
            }
            meta.insert("garuda".into(), garuda);
            acp::SessionUpdate::UsageUpdate(
                acp::UsageUpdate::new(context_tokens, context_window)
                    .cost(cost_usd.map(|c| acp::Cost::new(c, "USD")))
                    .meta(meta),
            )
        }
        // What a hook blocked or why one failed reaches the user as a thought line; started
        // and finished hooks leave no trace.
        TurnEvent::Hook {
            event,
            phase: HookPhase::Blocked | HookPhase::Failed,
            subject,
            message,
            ..
        } => thought(hook_line(&event, subject.as_deref(), message.as_deref())),
        _ => return None,
    })
}

/// One line about a hook that blocked or failed: `[hook PreToolUse bash] blocked: reason`.
pub fn hook_line(event: &str, subject: Option<&str>, message: Option<&str>) -> String {
    let subject = subject.map(|s| format!(" {s}")).unwrap_or_default();
    format!("\n[hook {event}{subject}] {}\n", message.unwrap_or(""))
}

/// The ACP stop reason of a Garuda turn (`None`: the turn failed).
pub fn stop_reason(r: StopReason) -> Option<acp::StopReason> {
    Some(match r {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse => {
            acp::StopReason::EndTurn
        }
        StopReason::MaxTokens => acp::StopReason::MaxTokens,
        // ACP has no budget stop; both are limits the turn ran into.
        StopReason::MaxSteps | StopReason::MaxTurns | StopReason::MaxBudget => {
            acp::StopReason::MaxTurnRequests
        }
        StopReason::Refusal => acp::StopReason::Refusal,
        StopReason::PauseTurn => acp::StopReason::EndTurn,
        StopReason::Cancelled => acp::StopReason::Cancelled,
        StopReason::Error => return None,
    })
}

/// Garuda input blocks for an ACP prompt; embedded resources become tagged text.
pub fn prompt_blocks(prompt: Vec<acp::ContentBlock>) -> Vec<Block> {
    prompt
        .into_iter()
        .map(|b| match b {
            acp::ContentBlock::Text(t) => Block::text(t.text),
            acp::ContentBlock::Image(i) => Block::Image {
                source: ImageSource::Base64 {
                    media_type: i.mime_type,
                    data: i.data,
                },
            },
            acp::ContentBlock::ResourceLink(l) => {
                Block::text(format!("[resource: {} <{}>]", l.name, l.uri))
            }
            acp::ContentBlock::Resource(r) => match r.resource {
                acp::EmbeddedResourceResource::TextResourceContents(t) => Block::text(format!(
                    "<context uri=\"{}\">\n{}\n</context>",
                    t.uri, t.text
                )),
                acp::EmbeddedResourceResource::BlobResourceContents(b) => {
                    Block::text(format!("[binary resource {} omitted]", b.uri))
                }
                _ => Block::text("[a resource of a kind Garuda does not know was omitted]"),
            },
            acp::ContentBlock::Audio(_) => Block::text("[audio input is not supported]"),
            _ => Block::text("[content of a kind Garuda does not know was omitted]"),
        })
        .collect()
}

/// The plain text of a prompt (for slash commands).
pub fn prompt_text(prompt: &[acp::ContentBlock]) -> String {
    prompt
        .iter()
        .filter_map(|b| match b {
            acp::ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("")
}

/// The summary a compaction installed, without its prompt framing: the text of the
/// `<summary>` block (or of the last block, for an extractive handoff).
fn summary_text(content: &[Block]) -> String {
    let last = content.iter().rev().find_map(|b| match b {
        Block::Text { text } => Some(text.as_str()),
        _ => None,
    });
    let t = last.unwrap_or("").trim();
    let t = t.strip_prefix("<summary>").unwrap_or(t);
    let t = t.strip_suffix("</summary>").unwrap_or(t);
    t.trim().to_string()
}

/// Replays the visible history (for `session/load`): user and agent messages, tool calls
/// with their results, each compaction at its place as what it is. Copies a compaction
/// re-installed and Garuda's own notes are left out: the client saw them once.
pub fn history(
    entries: &[HistoryEntry],
    tools: &ToolRegistry,
    root: &Path,
    caps: ClientCaps,
) -> Vec<acp::SessionUpdate> {
    let mut out = Vec::new();
    let mut compactions = 0u32;
    // The plan a client shows is the last list the history set.
    let mut last_plan: Option<Vec<TodoItem>> = None;
    for e in entries {
        let m = &e.message;
        if m.copy_of.is_some() {
            continue;
        }
        match m.meta {
            None | Some(MessageMeta::Unknown) => {}
            Some(MessageMeta::Summary | MessageMeta::Handoff) => {
                compactions += 1;
                let summary = summary_text(&m.content);
                let id = format!("{}-{compactions}", m.uuid);
                out.push(if caps.compaction {
                    acp::SessionUpdate::CompactionUpdate(
                        acp::CompactionUpdate::new(id, acp::CompactionStatus::Completed)
                            .summary(vec![text(summary)]),
                    )
                } else {
                    thought(format!(
                        "[compacted; summary of the earlier part]\n{summary}"
                    ))
                });
                continue;
            }
            Some(MessageMeta::Display) => {
                out.extend(m.content.iter().filter_map(|b| match b {
                    Block::Text { text } => Some(agent_text(text.clone())),
                    _ => None,
                }));
                continue;
            }
            Some(_) => continue,
        }
        // A client joins the chunks of one message as they come: the blocks of a message the
        // user sent in parts (words, then an attached file) get a blank line between them.
        let mut user_texts = 0;
        for b in &m.content {
            match (m.role, b) {
                (Role::User, Block::Text { text: t }) => {
                    user_texts += 1;
                    let t = if user_texts > 1 {
                        format!("\n\n{t}")
                    } else {
                        t.clone()
                    };
                    out.push(acp::SessionUpdate::UserMessageChunk(
                        acp::ContentChunk::new(text(t)),
                    ))
                }
                (
                    Role::User,
                    Block::Image {
                        source: ImageSource::Base64 { media_type, data },
                    },
                ) => out.push(acp::SessionUpdate::UserMessageChunk(
                    acp::ContentChunk::new(acp::ContentBlock::Image(acp::ImageContent::new(
                        data.clone(),
                        media_type.clone(),
                    ))),
                )),
                (
                    _,
                    Block::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    },
                ) => {
                    let t = content
                        .iter()
                        .filter_map(|c| match c {
                            Block::Text { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                        .join("\n");
                    out.push(acp::SessionUpdate::ToolCallUpdate(tool_result(
                        tool_use_id,
                        &t,
                        *is_error,
                        Vec::new(),
                    )));
                }
                (Role::Assistant, Block::Text { text }) => out.push(agent_text(text.clone())),
                (Role::Assistant, Block::Thinking { thinking, .. }) => {
                    out.push(thought(thinking.clone()))
                }
                (Role::Assistant, Block::ToolUse { id, name, input }) => {
                    if tools.get(name).is_some_and(|e| e.class == ToolClass::Todo)
                        && let Some(t) = garuda_core::tools::todos_in(input)
                    {
                        last_plan = Some(t);
                    }
                    out.push(acp::SessionUpdate::ToolCall(tool_call(
                        tools,
                        root,
                        id,
                        name,
                        input,
                        None,
                        acp::ToolCallStatus::Pending,
                    )))
                }
                // A search the provider ran: its call, then its result, as they were shown.
                (Role::Assistant, b @ Block::Provider { raw }) => {
                    if let Some(id) = b.server_call_id() {
                        let name = raw["name"].as_str().unwrap_or("");
                        out.push(acp::SessionUpdate::ToolCall(tool_call(
                            tools,
                            root,
                            id,
                            name,
                            &raw["input"],
                            None,
                            acp::ToolCallStatus::InProgress,
                        )));
                    } else if let Some(id) = b.server_result_for()
                        && let Some(Block::Provider { raw: call }) =
                            m.content.iter().find(|c| c.server_call_id() == Some(id))
                    {
                        let found = garuda_core::message::ServerSearch::of(call, raw);
                        out.push(acp::SessionUpdate::ToolCallUpdate(tool_result(
                            id,
                            &found.listing(),
                            found.error.is_some(),
                            Vec::new(),
                        )));
                    }
                }
                _ => {}
            }
        }
    }
    if let Some(todos) = last_plan {
        out.push(todos_update(&todos, caps));
    }
    out
}

/// The slash commands Garuda advertises, in order with the session's creation.
pub fn commands() -> acp::SessionUpdate {
    acp::SessionUpdate::AvailableCommandsUpdate(acp::AvailableCommandsUpdate::new(vec![
        acp::AvailableCommand::new(
            "compact",
            "Summarise older turns to free context (optional focus)",
        )
        .input(acp::AvailableCommandInput::Unstructured(
            acp::UnstructuredCommandInput::new("what the summary should keep"),
        )),
        acp::AvailableCommand::new("context", "Show how the context window is used"),
    ]))
}

/// The approval policies as session modes, described for a person.
pub fn modes(current: Policy) -> acp::SessionModeState {
    let mode = |p: Policy, name: &str, description: &str| {
        acp::SessionMode::new(p.name(), name).description(description.to_string())
    };
    acp::SessionModeState::new(
        current.name(),
        vec![
            mode(
                Policy::Ask,
                "Ask",
                "Asks before every edit, command and memory change",
            ),
            mode(
                Policy::AutoEdit,
                "Auto-edit",
                "Edits files without asking; asks before commands",
            ),
            mode(
                Policy::FullAuto,
                "Full auto",
                "Edits and runs commands without asking",
            ),
            mode(
                Policy::Plan,
                "Plan",
                "Reads and plans only; changes nothing until you approve its plan",
            ),
        ],
    )
}

/// The id of the model selector among the session's config options.
pub const MODEL_OPTION: &str = "model";
/// The id of the approval selector among the session's config options.
pub const MODE_OPTION: &str = "mode";

/// The session's config options: the model (category `model`) over the known models, and
/// the approval policy (category `mode`, the same choice as the modes).
pub fn config_options(
    current_model: &str,
    models: &[String],
    policy: Policy,
) -> Vec<acp::SessionConfigOption> {
    let mut choices: Vec<acp::SessionConfigSelectOption> = Vec::new();
    if !models.iter().any(|m| m == current_model) {
        choices.push(acp::SessionConfigSelectOption::new(
            current_model.to_string(),
            current_model.to_string(),
        ));
    }
    choices.extend(
        models
            .iter()
            .map(|m| acp::SessionConfigSelectOption::new(m.clone(), m.clone())),
    );
    let modes = modes(policy);
    let mode_choices: Vec<acp::SessionConfigSelectOption> = modes
        .available_modes
        .into_iter()
        .map(|m| {
            acp::SessionConfigSelectOption::new(m.id.0.to_string(), m.name)
                .description(m.description)
        })
        .collect();
    vec![
        acp::SessionConfigOption::select(MODEL_OPTION, "Model", current_model.to_string(), choices)
            .category(acp::SessionConfigOptionCategory::Model)
            .description(
                "The model from the next request on; the conversation is kept".to_string(),
            ),
        acp::SessionConfigOption::select(MODE_OPTION, "Approvals", policy.name(), mode_choices)
            .category(acp::SessionConfigOptionCategory::Mode)
            .description("What Garuda may do without asking".to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn j<T: serde::Serialize>(v: T) -> Value {
        serde_json::to_value(v).unwrap()
    }

    fn tools() -> ToolRegistry {
        ToolRegistry::for_session(Vec::new()).unwrap()
    }

    #[test]
    fn events_map_to_updates() {
        let u = event_update(TurnEvent::TextDelta { text: "hi".into() }, 100).unwrap();
        assert_eq!(
            j(u),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}})
        );
        let v = j(acp::SessionUpdate::ToolCall(tool_call(
            &tools(),
            Path::new("/ws"),
            "t1",
            "bash",
            &json!({"command": "ls"}),
            None,
            acp::ToolCallStatus::Pending,
        )));
        assert_eq!(v["sessionUpdate"], "tool_call");
        assert_eq!(v["toolCallId"], "t1");
        assert_eq!(v["kind"], "execute");
        // `pending` is the default and left out.
        assert!(v.get("status").is_none_or(|s| s == "pending"));
        assert_eq!(v["rawInput"], json!({"command": "ls"}));
        let v = j(tool_result("t1", "boom", true, Vec::new()));
        assert_eq!(v["status"], "failed");
        assert_eq!(v["content"][0]["content"]["text"], "boom");
        let v = j(event_update(
            TurnEvent::Usage {
                usage: Default::default(),
                context_tokens: 7,
                cost_usd: None,
                cache_hit_ratio: 0.5,
                session_cache_hit_ratio: 0.75,
                cache_miss: Some(garuda_core::session::cache_miss::CacheMiss::Expired {
                    idle_secs: 400,
                }),
            },
            100,
        )
        .unwrap());
        assert_eq!(
            v,
            json!({"sessionUpdate": "usage_update", "used": 7, "size": 100, "_meta": {"garuda": {
                "cacheHitRatio": 0.5, "sessionCacheHitRatio": 0.75,
                "cacheMiss": {"cause": "expired", "idleSecs": 400,
                    "message": "the cache expired: 400 s since the previous request"}}}})
        );
        assert!(event_update(TurnEvent::StepStarted { step: 1 }, 1).is_none());
    }

    #[test]
    fn edits_carry_locations_and_diffs() {
        let preview = EditPreview {
            rel_path: "src/a.rs".into(),
            old_text: Some("fn a() {}\n".into()),
            new_text: "fn a() -> u8 { 1 }\n".into(),
            line: 1,
        };
        let input = json!({"path": "src/a.rs", "old_string": "fn a() {}", "new_string": "fn a() -> u8 { 1 }"});
        let v = j(tool_call(
            &tools(),
            Path::new("/ws"),
            "t",
            "edit_file",
            &input,
            Some(&preview),
            acp::ToolCallStatus::Pending,
        ));
        assert_eq!(v["kind"], "edit");
        assert_eq!(v["locations"], json!([{"path": "/ws/src/a.rs", "line": 1}]));
        assert_eq!(v["content"][0]["type"], "diff");
        assert_eq!(v["content"][0]["path"], "/ws/src/a.rs");
        assert_eq!(v["content"][0]["oldText"], "fn a() {}\n");
        assert_eq!(v["content"][0]["newText"], "fn a() -> u8 { 1 }\n");
        let read = json!({"path": "b.rs", "offset": 40});
        let v = j(locations(
            &tools(),
            Path::new("/ws"),
            "read_file",
            &read,
            None,
        ));
        assert_eq!(v, json!([{"path": "/ws/b.rs", "line": 40}]));
    }

    #[test]
    fn stop_reasons_and_prompts() {
        assert_eq!(
            stop_reason(StopReason::MaxSteps),
            Some(acp::StopReason::MaxTurnRequests)
        );
        assert_eq!(stop_reason(StopReason::Error), None);
        let prompt: Vec<acp::ContentBlock> = serde_json::from_value(json!([
            {"type": "text", "text": "/compact "},
            {"type": "text", "text": "tests"},
            {"type": "resource", "resource": {"uri": "file:///a.rs", "text": "fn a() {}"}},
        ]))
        .unwrap();
        assert_eq!(prompt_text(&prompt), "/compact tests");
        let blocks = prompt_blocks(prompt);
        assert_eq!(blocks.len(), 3);
        assert!(matches!(&blocks[2], Block::Text { text } if text.contains("fn a() {}")));
    }

    #[test]
    fn compaction_is_an_update_only_for_clients_that_asked() {
        let with = ClientCaps {
            compaction: true,
            ..Default::default()
        };
        let v = j(compaction(with, "c1", CompactionPhase::Started, None).unwrap());
        assert_eq!(v["sessionUpdate"], "compaction_update");
        assert_eq!(v["status"], "in_progress");
        assert!(compaction(with, "c1", CompactionPhase::Summary, None).is_none());
        let v = j(compaction(
            ClientCaps::default(),
            "c1",
            CompactionPhase::Finished,
            Some("summary".into()),
        )
        .unwrap());
        assert_eq!(v["sessionUpdate"], "agent_thought_chunk");
    }

    #[test]
    fn modes_and_options() {
        let v = j(modes(Policy::AutoEdit));
        assert_eq!(v["currentModeId"], "auto-edit");
        assert_eq!(v["availableModes"].as_array().unwrap().len(), 4);
        assert_eq!(v["availableModes"][3]["id"], "plan");
        let opts = j(config_options(
            "replay:/x",
            &["anthropic/claude-sonnet-4-5".to_string()],
            Policy::Ask,
        ));
        assert_eq!(opts[0]["id"], "model");
        assert_eq!(opts[0]["category"], "model");
        assert_eq!(opts[0]["type"], "select");
        assert_eq!(opts[0]["currentValue"], "replay:/x");
        assert_eq!(opts[0]["options"][0]["value"], "replay:/x");
        assert_eq!(opts[1]["currentValue"], "ask");
        let v = j(commands());
        let names: Vec<&str> = v["availableCommands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["compact", "context"]);
    }
}
