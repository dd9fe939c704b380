//! The headless front of `garuda exec`: turns printed as text or as JSON lines.
//!
//! Exit codes (documented in the README and `garuda exec --help`): [`EXIT_OK`],
//! [`EXIT_TURN_FAILED`], [`EXIT_USAGE`], [`EXIT_APPROVAL`], [`EXIT_SCHEMA`],
//! [`EXIT_MAX_TURNS`], [`EXIT_MAX_BUDGET`], [`EXIT_CANCELLED`], [`EXIT_TERMINATED`].

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use garuda_core::message::{StopReason, Usage};
use garuda_core::turn::{
    HookPhase, PermissionAnswer, PermissionRequest, TurnEvent, TurnFailure, TurnHost,
};

/// The turn ended normally.
pub const EXIT_OK: u8 = 0;
/// The turn failed: a provider error (after retries), a message too large for the window.
pub const EXIT_TURN_FAILED: u8 = 1;
/// A usage or configuration error; no turn ran.
pub const EXIT_USAGE: u8 = 2;
/// The turn stopped because a tool call needed approval and no one could be asked (no
/// terminal on stdin); `--policy auto-edit` or `full-auto` allows it.
pub const EXIT_APPROVAL: u8 = 3;
/// The final answer did not match `--output-schema`, after one repair request.
pub const EXIT_SCHEMA: u8 = 4;
/// The run reached its step limit (`--max-turns`, or the built-in 50 steps of a turn).
pub const EXIT_MAX_TURNS: u8 = 5;
/// The run's cost reached `--max-budget-usd`.
pub const EXIT_MAX_BUDGET: u8 = 6;
/// Cancelled with Ctrl-C (SIGINT).
pub const EXIT_CANCELLED: u8 = 130;
/// Ended by SIGTERM: the turn was cancelled, its commands ended, what it had written kept.
pub const EXIT_TERMINATED: u8 = 143;

/// The `error.kind` of the `finished` event when the turn stopped for an approval.
pub const APPROVAL_REQUIRED: &str = "approvalRequired";
/// The `error.kind` when the answer did not match `--output-schema`.
pub const SCHEMA_FAILED: &str = "schema";
/// The `error.kind` when the run stopped at `--max-turns` (or the built-in step limit).
pub const MAX_TURNS: &str = "maxTurns";
/// The `error.kind` when the run stopped at `--max-budget-usd`.
pub const MAX_BUDGET: &str = "maxBudget";

/// Prints a turn's events: answer text to stdout (or every event as a JSON line), the rest to
/// stderr. The core's `finished` is held back: the run ends with a `finished` of its own
/// (summed over a repair request, with the cost and the structured output).
pub struct ExecHost {
    /// One JSON object per line on stdout instead of plain text.
    json: bool,
    /// Answer text is not printed (`--output-schema` without `--json`: stdout carries only
    /// the parsed answer).
    quiet: bool,
    /// The turn's cancellation: fired once a call needed an approval no one could give.
    stop: CancellationToken,
    state: Mutex<HostState>,
}

#[derive(Default)]
struct HostState {
    /// Answer text is on stdout and its last line is not ended.
    mid_line: bool,
    /// A step began since the last answer text.
    new_step: bool,
    /// The call that needed an approval no one could give: its id and title.
    unasked: Option<(String, String)>,
    /// The answer text of the latest step (the final answer once the turn ends).
    step_text: String,
    /// Model requests since the host was made.
    steps: u32,
    /// The core's `finished` of the latest turn.
    finished: Option<(StopReason, Usage, Option<TurnFailure>)>,
}

/// How a run of one or more turns ended, for its own `finished` event and exit code.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Usage of every turn of the run (a repair request included).
    pub usage: Usage,
    /// What went wrong.
    pub error: Option<TurnFailure>,
    /// The cost of `usage`, when the model has prices.
    pub cost_usd: Option<f64>,
    /// The parsed answer, with `--output-schema`.
    pub structured_output: Option<Value>,
    /// Model requests made.
    pub steps: u32,
    /// Ended by a signal: its exit code (130, 143).
    pub signal: Option<u8>,
}

impl ExecHost {
    /// A host for one run; `stop` must be the token its turns run with.
    pub fn new(json: bool, quiet: bool, stop: CancellationToken) -> Arc<ExecHost> {
        Arc::new(ExecHost {
            json,
            quiet,
            stop,
            state: Mutex::new(HostState::default()),
        })
    }

    /// The title of the call the turn stopped for (`bash: cargo test`), if it did.
    pub fn approval_needed(&self) -> Option<String> {
        self.lock().unasked.as_ref().map(|(_, title)| title.clone())
    }

    /// The answer text of the latest step.
    pub fn final_text(&self) -> String {
        self.lock().step_text.clone()
    }

    /// Model requests so far.
    pub fn steps(&self) -> u32 {
        self.lock().steps
    }

    /// The core's `finished` of the latest turn, taken.
    pub fn take_finished(&self) -> Option<(StopReason, Usage, Option<TurnFailure>)> {
        self.lock().finished.take()
    }

    /// The exit code for a run that ended so.
    pub fn exit_code(&self, end: &RunEnd) -> u8 {
        if let Some(code) = end.signal {
            return code;
        }
        match end.error.as_ref().map(|e| e.kind.as_str()) {
            Some(APPROVAL_REQUIRED) => return EXIT_APPROVAL,
            Some(SCHEMA_FAILED) => return EXIT_SCHEMA,
            _ => {}
        }
        match end.stop_reason {
            StopReason::Cancelled => EXIT_CANCELLED,
            StopReason::MaxTurns | StopReason::MaxSteps => EXIT_MAX_TURNS,
            StopReason::MaxBudget => EXIT_MAX_BUDGET,
            StopReason::Error => EXIT_TURN_FAILED,
            _ => EXIT_OK,
        }
    }

    /// The `error` a run that ended for `stop_reason` reports when the core gave none.
    pub fn failure_for(&self, stop_reason: StopReason, steps: u32) -> Option<TurnFailure> {
        if let Some(title) = self.approval_needed() {
            return Some(TurnFailure {
                kind: APPROVAL_REQUIRED.to_string(),
                message: unasked_message(&title),
            });
        }
        let message = match stop_reason {
            StopReason::MaxTurns | StopReason::MaxSteps => format!(
                "stopped after {steps} model requests, the step limit (--max-turns); every tool \
                 call has its result, and --continue carries the session on"
            ),
            StopReason::MaxBudget => "stopped: the run's cost reached --max-budget-usd; every \
                 tool call has its result, and --continue carries the session on"
                .to_string(),
            _ => return None,
        };
        let kind = if stop_reason == StopReason::MaxBudget {
            MAX_BUDGET
        } else {
            MAX_TURNS
        };
        Some(TurnFailure {
            kind: kind.to_string(),
            message,
        })
    }

    /// Prints a line of JSON on stdout.
    pub fn json_line(&self, session_id: &str, event: garuda_protocol::wire::TurnEvent) {
        let line = json!({"sessionId": session_id, "event": event});
        self.out(&format!("{line}\n"));
    }

    /// Prints the run's own `finished` (with `--json`).
    pub fn finish(&self, session_id: &str, end: &RunEnd) {
        if !self.json {
            return;
        }
        let event = garuda_protocol::wire::TurnEvent::Finished {
            stop_reason: super::wire::stop_out(end.stop_reason),
            usage: super::wire::usage_out(end.usage),
            error: end
                .error
                .clone()
                .map(|f| garuda_protocol::wire::TurnFailure {
                    kind: f.kind,
                    message: f.message,
                }),
            cost_usd: end.cost_usd,
            structured_output: end.structured_output.clone(),
            steps: Some(end.steps),
        };
        self.json_line(session_id, event);
    }

    /// Whether `id` is the call the turn stops for.
    fn is_unasked(&self, id: &str) -> bool {
        self.lock().unasked.as_ref().is_some_and(|(u, _)| u == id)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HostState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes to stdout now: a consumer of the JSON lines acts on each as it arrives.
    pub fn out(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    /// Ends the answer's current line on stdout, so that what follows (a line on stderr, the
    /// next step's text) starts on a line of its own.
    fn end_line(&self, state: &mut HostState) {
        if state.mid_line && !self.json {
            self.out("\n");
            state.mid_line = false;
        }
    }

    /// A line on stderr, after the answer's current line is ended.
    fn note(&self, line: &str) {
        let mut state = self.lock();
        self.end_line(&mut state);
        eprintln!("{line}");
    }

    fn text(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut state = self.lock();
        state.step_text.push_str(text);
        if self.quiet {
            return;
        }
        if state.new_step {
            // Steps are separated by a newline: "Writing." then "Wrote it." are two lines.
            self.end_line(&mut state);
            state.new_step = false;
        }
        self.out(text);
        state.mid_line = !text.ends_with('\n');
    }
}

fn unasked_message(title: &str) -> String {
    format!(
        "{title} needs approval and there is no terminal to ask, so the turn stopped; \
         --policy full-auto allows every call (--policy auto-edit allows edits, not commands), \
         as does approval.policy in config.toml; --continue carries the session on"
    )
}

impl TurnHost for ExecHost {
    fn elicit(
        &self,
        _session_id: &str,
        _request: garuda_core::mcp::ElicitationRequest,
    ) -> futures_util::future::BoxFuture<'static, garuda_core::mcp::ElicitationAnswer> {
        Box::pin(async {
            garuda_core::mcp::ElicitationAnswer::Unavailable(
                "garuda exec runs without a client, so nobody can answer the request".into(),
            )
        })
    }

    fn agent_event(
        &self,
        session_id: &str,
        agent: &garuda_core::turn::AgentMark,
        event: TurnEvent,
    ) {
        // With --json, every relayed event as a line marked with its agent; on a terminal, the
        // agent's tool calls on stderr, as the session's own are (its text is its report).
        if self.json {
            let line = json!({
                "sessionId": session_id,
                "agent": super::wire::agent_out(agent.clone()),
                "event": super::wire::event_out(event),
            });
            self.out(&format!("{line}\n"));
        } else if let TurnEvent::ToolCallStarted { name, input, .. } = event {
            self.note(&format!(
                "[agent {}] [tool] {}",
                agent.name,
                garuda_core::tools::describe_call(&name, &input)
            ));
        }
    }

    fn event(&self, session_id: &str, event: TurnEvent) {
        match &event {
            TurnEvent::ToolCallFinished { id, .. } if self.is_unasked(id) => {
                // The call it stopped for has its result: end the turn here.
                self.stop.cancel();
            }
            TurnEvent::TextDelta { text } if self.json => self.lock().step_text.push_str(text),
            TurnEvent::StepStarted { .. } => {
                let mut state = self.lock();
                state.steps += 1;
                state.step_text.clear();
                state.new_step = true;
            }
            TurnEvent::Finished {
                stop_reason,
                usage,
                error,
            } => {
                let mut state = self.lock();
                self.end_line(&mut state);
                state.finished = Some((*stop_reason, *usage, error.clone()));
                return;
            }
            _ => {}
        }
        if self.json {
            self.json_line(session_id, super::wire::event_out(event));
            return;
        }
        match event {
            TurnEvent::TextDelta { text } => self.text(&text),
            TurnEvent::ToolCallStarted { name, input, .. } => self.note(&format!(
                "[tool] {}",
                garuda_core::tools::describe_call(&name, &input)
            )),
            // The provider ran it: its results are worth a line, as nothing else shows them.
            TurnEvent::ToolCallFinished {
                is_error: false,
                output,
                meta,
                ..
            } if meta.server_side => {
                let n = output.lines().count();
                self.note(&format!(
                    "[tool on the provider] {n} result{}",
                    if n == 1 { "" } else { "s" }
                ))
            }
            TurnEvent::ToolCallFinished {
                id,
                is_error: true,
                output,
                ..
            } if !self.is_unasked(&id) => self.note(&format!(
                "[tool error] {}",
                output.lines().next().unwrap_or("")
            )),
            TurnEvent::Retry {
                attempt,
                delay_ms,
                reason,
            } => self.note(&format!("[retry {attempt} in {delay_ms} ms] {reason}")),
            TurnEvent::Compaction {
                phase,
                trigger,
                tokens_before,
                tokens_after,
                message,
            } => {
                // An idle compaction is not the turn's doing: say why it came.
                let mut line = match trigger {
                    garuda_core::session::records::CompactTrigger::Idle => format!(
                        "[compaction {}, idle: the provider's cache expired]",
                        phase.name()
                    ),
                    _ => format!("[compaction {}]", phase.name()),
                };
                if let (Some(b), Some(a)) = (tokens_before, tokens_after) {
                    line.push_str(&format!(" {b} → {a} tokens"));
                }
                if let Some(m) = message.filter(|m| !m.is_empty()) {
                    line.push_str(&format!(" {m}"));
                }
                self.note(&line);
            }
            TurnEvent::Hook {
                event,
                phase,
                subject,
                message,
            } if matches!(phase, HookPhase::Blocked | HookPhase::Failed) => {
                let subject = subject.map(|s| format!(" {s}")).unwrap_or_default();
                self.note(&format!(
                    "[hook {event}{subject} {}] {}",
                    phase.name(),
                    message.unwrap_or_default()
                ));
            }
            _ => {}
        }
    }

    fn ask_permission(&self, req: PermissionRequest) -> BoxFuture<'static, PermissionAnswer> {
        if !std::io::stdin().is_terminal() {
            self.note(&format!(
                "[approval needed] {}",
                unasked_message(&req.title)
            ));
            // The turn stops after the first such call; later calls of the same step are
            // refused the same way and do not change which call is reported.
            self.lock()
                .unasked
                .get_or_insert_with(|| (req.tool_call_id.clone(), req.title.clone()));
            return Box::pin(async { PermissionAnswer::Unavailable });
        }
        {
            let mut state = self.lock();
            self.end_line(&mut state);
        }
        // A call that leaves the sandbox is asked for every time: no "always".
        let always = req.options.iter().any(|o| o.option_id == "allow_always");
        Box::pin(async move {
            let answer = tokio::task::spawn_blocking(move || {
                if let Some(plan) = &req.plan {
                    return ask_plan(plan, &req.options);
                }
                let choices = if always {
                    "[y]es / [a]lways / [N]o"
                } else {
                    "[y]es / [N]o"
                };
                eprint!("Allow {}? {choices}: ", req.title);
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
                match line.trim() {
                    "y" | "Y" | "yes" => PermissionAnswer::AllowOnce,
                    "a" | "A" | "always" if always => PermissionAnswer::AllowAlways,
                    _ => PermissionAnswer::Reject,
                }
            })
            .await;
            // The prompt thread failed: nobody said no.
            answer.unwrap_or(PermissionAnswer::Failed)
        })
    }
}

/// Asks on the terminal to approve a plan: a number picks an option; other words reject it
/// and go to the model as the person's feedback.
fn ask_plan(plan: &str, options: &[garuda_core::turn::PermissionOption]) -> PermissionAnswer {
    eprintln!("\nThe plan:\n{plan}\n");
    for (i, o) in options.iter().enumerate() {
        eprintln!("  [{}] {}", i + 1, o.name);
    }
    eprint!("Choose 1-{} (or type what to change): ", options.len());
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    let line = line.trim();
    match line
        .parse::<usize>()
        .ok()
        .and_then(|n| options.get(n.wrapping_sub(1)))
    {
        Some(o) => PermissionAnswer::of_option(Some(&o.option_id), None),
        None => PermissionAnswer::of_option(None, Some(line)),
    }
}

/// A compiled `--output-schema`: the schema sent to the model and the validator of its answer
/// (boon: draft 2020-12 and earlier drafts, no network; `$ref`s to local files resolve).
pub struct OutputSchema {
    schema: Value,
    schemas: boon::Schemas,
    index: boon::SchemaIndex,
}

impl OutputSchema {
    /// Reads and compiles the schema in `path`.
    pub fn load(path: &Path) -> Result<OutputSchema, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--output-schema {}: {e}", path.display()))?;
        let schema: Value = serde_json::from_str(&text)
            .map_err(|e| format!("--output-schema {}: not JSON: {e}", path.display()))?;
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        OutputSchema::compile(schema, &format!("file://{}", abs.display()))
            .map_err(|e| format!("--output-schema {}: {e}", path.display()))
    }

    /// Compiles `schema`, named `url` for its relative `$ref`s.
    pub fn compile(schema: Value, url: &str) -> Result<OutputSchema, String> {
        let mut compiler = boon::Compiler::new();
        // Without `$schema`, draft 2020-12 (boon's default moves with its releases).
        compiler.set_default_draft(boon::Draft::V2020_12);
        compiler
            .add_resource(url, schema.clone())
            .map_err(|e| format!("not a usable JSON Schema: {e}"))?;
        let mut schemas = boon::Schemas::new();
        let index = compiler
            .compile(url, &mut schemas)
            .map_err(|e| format!("not a usable JSON Schema: {e}"))?;
        Ok(OutputSchema {
            schema,
            schemas,
            index,
        })
    }

    /// The schema, as sent to the provider.
    pub fn json(&self) -> &Value {
        &self.schema
    }

    /// The answer parsed and valid, or what is wrong with it (for the repair request and the
    /// error).
    pub fn check(&self, answer: &str) -> Result<Value, String> {
        let value = parse_answer(answer)?;
        match self.schemas.validate(&value, self.index) {
            Ok(()) => Ok(value),
            Err(e) => Err(format!("the answer does not match the schema: {e:#}")),
        }
    }
}

/// The JSON value an answer holds: the whole text, or the inside of a code fence around it.
fn parse_answer(answer: &str) -> Result<Value, String> {
    let text = answer.trim();
    if text.is_empty() {
        return Err("the answer is empty, not JSON".into());
    }
    let unfenced = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.strip_suffix("```"))
        .map(str::trim);
    serde_json::from_str(unfenced.unwrap_or(text))
        .map_err(|e| format!("the answer is not JSON ({e})"))
}

/// What the user message says when an output schema is asked for (also where the provider
/// enforces it: a model that cannot see the schema in its request cannot aim for it).
pub fn schema_instruction(schema: &Value) -> String {
    format!(
        "\n\n<output_format>\nWhen you are done, give your final answer as a single JSON value \
         that matches this JSON Schema, with nothing before or after it (no prose, no code \
         fence):\n{schema}\n</output_format>"
    )
}

/// The one repair request after an answer that did not match.
pub fn repair_prompt(problem: &str, schema: &Value) -> String {
    format!(
        "Your final answer cannot be used: {problem}. Reply again with only the JSON value that \
         matches this JSON Schema, nothing else:\n{schema}"
    )
}

/// One user message of `--input-format stream-json`: `{"type":"user","message":{"role":
/// "user","content":"…" | [{"type":"text","text":"…"}, …]}}` (the shape `claude -p` reads),
/// or the short `{"text":"…"}`. Blank lines are skipped (`Ok(None)`).
pub fn stream_json_message(line: &str) -> Result<Option<String>, String> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    if let Some(t) = v.get("text").and_then(Value::as_str) {
        return non_empty(t.to_string());
    }
    if v.get("type").and_then(Value::as_str) != Some("user") {
        return Err("expected {\"type\":\"user\",\"message\":{...}} or {\"text\":\"...\"}".into());
    }
    let content = &v["message"]["content"];
    let text = match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return Err("message.content must be a string or an array of text blocks".into()),
    };
    non_empty(text)
}

fn non_empty(text: String) -> Result<Option<String>, String> {
    if text.trim().is_empty() {
        Err("the message has no text".into())
    } else {
        Ok(Some(text))
    }
}

/// The user messages of a run: the one prompt, or JSON lines on stdin.
pub struct Inputs {
    rx: tokio::sync::mpsc::UnboundedReceiver<Result<String, String>>,
}

impl Inputs {
    /// The one prompt of a plain run.
    pub fn one(prompt: String) -> Inputs {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let _ = tx.send(Ok(prompt));
        Inputs { rx }
    }

    /// `--input-format stream-json`: stdin's lines, read on a thread of their own so a turn
    /// runs while the next message arrives.
    pub fn stdin_lines() -> Inputs {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let spawned = std::thread::Builder::new()
            .name("garuda-exec-stdin".into())
            .spawn(move || {
                use std::io::BufRead;
                for (n, line) in std::io::stdin().lock().lines().enumerate() {
                    let item = match line {
                        Ok(l) => match stream_json_message(&l) {
                            Ok(None) => continue,
                            Ok(Some(text)) => Ok(text),
                            Err(e) => Err(format!("stdin line {}: {e}", n + 1)),
                        },
                        Err(e) => Err(format!("cannot read stdin: {e}")),
                    };
                    if tx.send(item).is_err() {
                        break;
                    }
                }
            });
        if let Err(e) = spawned {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let _ = tx.send(Err(format!("cannot read stdin: {e}")));
            return Inputs { rx };
        }
        Inputs { rx }
    }
}

/// One `garuda exec` run over a live session: its turns, the output schema's check and
/// repair, the limits across turns, signals, and its events.
pub struct ExecRun<'a> {
    /// The engine the session lives in.
    pub engine: &'a garuda_core::engine::Engine,
    /// The session.
    pub live: &'a Arc<garuda_core::turn::LiveSession>,
    /// JSON lines instead of text.
    pub json: bool,
    /// `--output-schema`.
    pub schema: Option<&'a OutputSchema>,
    /// `--max-turns`: model requests in the whole run.
    pub max_turns: Option<u32>,
    /// `--max-budget-usd`: dollars in the whole run.
    pub max_budget_usd: Option<f64>,
    /// `--fork`: the session this one copies.
    pub forked_from: Option<String>,
    /// The session was stored before this run.
    pub resumed: bool,
}

impl ExecRun<'_> {
    /// Runs every input as a turn; resolves to the exit code. `signal` resolves with the exit
    /// code of a signal that ends the run (the turn is cancelled and its commands ended; what
    /// it wrote stays in the transcript).
    pub async fn run(
        &self,
        mut inputs: Inputs,
        signal: impl std::future::Future<Output = i32> + Send + 'static,
    ) -> u8 {
        let id = self.live.id().to_string();
        let cancel = CancellationToken::new();
        let signalled = Arc::new(std::sync::atomic::AtomicU8::new(0));
        {
            let (cancel, signalled) = (cancel.clone(), signalled.clone());
            tokio::spawn(async move {
                let code = signal.await.clamp(0, 255) as u8;
                signalled.store(code, std::sync::atomic::Ordering::SeqCst);
                cancel.cancel();
                // A turn that does not wind down in time still must not outlive the signal.
                tokio::time::sleep(std::time::Duration::from_secs(3)).await;
                garuda_core::sandbox::kill_all();
                std::process::exit(i32::from(code));
            });
        }
        let host = ExecHost::new(
            self.json,
            self.schema.is_some() && !self.json,
            cancel.clone(),
        );
        if self.json {
            host.json_line(&id, self.init_event());
        } else {
            match &self.forked_from {
                Some(from) => eprintln!("[session {id}, forked from {from}]"),
                None => eprintln!("[session {id}]"),
            }
        }
        let prices = self.live.model().info.prices;
        let mut spent = Usage::default();
        let mut code = EXIT_OK;
        while let Some(input) = inputs.rx.recv().await {
            let prompt = match input {
                Ok(p) => p,
                Err(m) => {
                    eprintln!("garuda exec: {m}");
                    code = EXIT_USAGE;
                    continue;
                }
            };
            let mut end = self.one(&host, &cancel, prompt, &mut spent).await;
            end.cost_usd = prices.map(|p| p.cost(&end.usage));
            let signal = signalled.load(std::sync::atomic::Ordering::SeqCst);
            if signal != 0 {
                end.signal = Some(signal);
            }
            host.finish(&id, &end);
            code = host.exit_code(&end);
            if !self.json {
                if let Some(v) = &end.structured_output {
                    host.out(&format!("{v}\n"));
                }
                if let Some(e) = end.error.as_ref().filter(|e| e.kind != APPROVAL_REQUIRED) {
                    eprintln!("garuda exec: {}", e.message);
                }
            }
            // The run's limits and signals end the run, not only this message's turn.
            if end.signal.is_some()
                || matches!(
                    end.stop_reason,
                    StopReason::MaxTurns | StopReason::MaxBudget | StopReason::Cancelled
                )
            {
                break;
            }
        }
        code
    }

    /// The first JSON line: what the run is.
    fn init_event(&self) -> garuda_protocol::wire::TurnEvent {
        let setup = self.live.setup();
        let sandbox = &setup.sandbox;
        garuda_protocol::wire::TurnEvent::Init {
            session_id: self.live.id().to_string(),
            workspace: self.live.workspace().root.path().display().to_string(),
            model: self.live.model_spec(),
            tools: self.live.tool_specs().into_iter().map(|t| t.name).collect(),
            sandbox: garuda_protocol::SandboxReport {
                mode: sandbox.mode.name().to_string(),
                confined: sandbox.confined(),
                network: sandbox.network,
                commands_ask: garuda_core::tools::approval_needed(
                    self.live.policy(),
                    garuda_core::tools::ToolClass::Exec,
                    sandbox,
                    garuda_core::tools::EditRisk::Plain,
                ),
                description: sandbox.describe(),
            },
            approval_policy: self.live.policy().name().to_string(),
            forked_from: self.forked_from.clone(),
            resumed: self.resumed,
        }
    }

    /// One user message: its turn, and with an output schema the check and at most one
    /// repair turn. `spent` is the run's usage so far, for the limits.
    async fn one(
        &self,
        host: &Arc<ExecHost>,
        cancel: &CancellationToken,
        prompt: String,
        spent: &mut Usage,
    ) -> RunEnd {
        let prices = self.live.model().info.prices;
        let mut end = RunEnd {
            stop_reason: StopReason::EndTurn,
            usage: Usage::default(),
            error: None,
            cost_usd: None,
            structured_output: None,
            steps: 0,
            signal: None,
        };
        let first_step = host.steps();
        let mut input = match self.schema {
            Some(s) => format!("{prompt}{}", schema_instruction(s.json())),
            None => prompt,
        };
        let mut repaired = false;
        loop {
            let used = host.steps();
            let max_turns = self.max_turns.map(|m| m.saturating_sub(used));
            if max_turns == Some(0) {
                // The run's steps are spent (an earlier message used them): no request.
                end.stop_reason = StopReason::MaxTurns;
                break;
            }
            let max_cost_usd = match (self.max_budget_usd, prices) {
                (Some(b), Some(p)) => Some(b - p.cost(spent)),
                _ => None,
            };
            if max_cost_usd.is_some_and(|left| left <= 0.0) {
                end.stop_reason = StopReason::MaxBudget;
                break;
            }
            let opts = garuda_core::turn::TurnOptions {
                max_turns,
                max_cost_usd,
                output_schema: self.schema.map(|s| s.json().clone()),
            };
            let result = self
                .engine
                .run_turn_with(
                    self.live.id(),
                    vec![garuda_core::message::Block::text(input.clone())],
                    host.clone(),
                    cancel.clone(),
                    opts,
                )
                .await;
            let finished = host.take_finished();
            if let Some((_, usage, _)) = &finished {
                end.usage.add(usage);
                spent.add(usage);
            }
            match (result, finished) {
                (Err(e), finished) => {
                    end.stop_reason = StopReason::Error;
                    end.error = finished.and_then(|(_, _, f)| f).or(Some(TurnFailure {
                        kind: "invalid".into(),
                        message: e.to_string(),
                    }));
                    break;
                }
                (Ok(out), _) => end.stop_reason = out.stop_reason,
            }
            let Some(schema) = self.schema else { break };
            if end.stop_reason != StopReason::EndTurn || host.approval_needed().is_some() {
                break;
            }
            match schema.check(&host.final_text()) {
                Ok(v) => {
                    end.structured_output = Some(v);
                    break;
                }
                Err(problem) if !repaired => {
                    repaired = true;
                    eprintln!("[schema] {problem}; asking once more");
                    input = repair_prompt(&problem, schema.json());
                }
                Err(problem) => {
                    end.error = Some(TurnFailure {
                        kind: SCHEMA_FAILED.into(),
                        message: format!("{problem} (after one repair request)"),
                    });
                    break;
                }
            }
        }
        end.steps = host.steps() - first_step;
        if end.error.is_none() {
            end.error = host.failure_for(end.stop_reason, end.steps);
        }
        end
    }
}

/// The user message of an exec run: the prompt argument (`None` or `-`: the prompt is stdin),
/// with stdin appended as context when both are given, as other agent CLIs do.
pub fn compose_prompt(arg: Option<&str>, stdin: Option<&str>) -> Result<String, String> {
    let stdin = stdin
        .map(|s| s.trim_end_matches(['\n', '\r']))
        .filter(|s| !s.trim().is_empty());
    match arg {
        None | Some("-") => stdin.map(str::to_string).ok_or_else(|| {
            "no prompt: give it as an argument, or pass `-` (or no PROMPT) and pipe it on stdin"
                .to_string()
        }),
        Some(p) if p.trim().is_empty() => Err("the prompt is empty".to_string()),
        Some(p) => Ok(match stdin {
            Some(s) => format!("{p}\n\n<stdin>\n{s}\n</stdin>"),
            None => p.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_against_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
            "additionalProperties": false,
        });
        let s = OutputSchema::compile(schema, "file:///s.json").unwrap();
        assert_eq!(s.check(r#"{"ok": true}"#).unwrap(), json!({"ok": true}));
        assert_eq!(
            s.check("```json\n{\"ok\": false}\n```").unwrap(),
            json!({"ok": false})
        );
        assert!(
            s.check("Sure! {\"ok\": true}")
                .unwrap_err()
                .contains("not JSON")
        );
        let e = s.check(r#"{"ok": "yes"}"#).unwrap_err();
        assert!(e.contains("does not match"), "{e}");
        // Draft 2020-12 keywords work without `$schema`.
        let s = OutputSchema::compile(
            json!({"type": "array", "prefixItems": [{"type": "integer"}], "items": false}),
            "file:///t.json",
        )
        .unwrap();
        assert!(s.check("[1]").is_ok());
        assert!(s.check("[1, 2]").is_err());
        assert!(OutputSchema::compile(json!({"type": 5}), "file:///u.json").is_err());
    }

    #[test]
    fn stream_json_lines() {
        assert_eq!(
            stream_json_message(r#"{"type":"user","message":{"role":"user","content":"hi"}}"#),
            Ok(Some("hi".into()))
        );
        assert_eq!(
            stream_json_message(
                r#"{"type":"user","message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}"#
            ),
            Ok(Some("a\nb".into()))
        );
        assert_eq!(stream_json_message(r#"{"text":"x"}"#), Ok(Some("x".into())));
        assert_eq!(stream_json_message("  "), Ok(None));
        assert!(stream_json_message("nope").is_err());
        assert!(stream_json_message(r#"{"type":"assistant"}"#).is_err());
    }

    #[test]
    fn prompt_from_argument_and_stdin() {
        assert_eq!(compose_prompt(Some("hi"), None).unwrap(), "hi");
        assert_eq!(
            compose_prompt(Some("-"), Some("from stdin\n")).unwrap(),
            "from stdin"
        );
        assert_eq!(compose_prompt(None, Some("piped")).unwrap(), "piped");
        assert_eq!(
            compose_prompt(Some("explain"), Some("a log\n")).unwrap(),
            "explain\n\n<stdin>\na log\n</stdin>"
        );
        assert_eq!(compose_prompt(Some("hi"), Some(" \n")).unwrap(), "hi");
        assert!(compose_prompt(Some("-"), Some("")).is_err());
        assert!(compose_prompt(None, None).is_err());
        assert!(compose_prompt(Some("  "), None).is_err());
    }
}
