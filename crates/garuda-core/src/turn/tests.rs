//! The turn layer in process: a scripted provider and a recording host, no network and no
//! JSON-RPC. Approvals, cancellation, partial output, reactive compaction and the step limit.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::config::Config;
use crate::engine::Engine;
use crate::message::{Block, StopReason, Usage};
use crate::provider::{
    EventSink, ModelInfo, ModelRequest, ModelResponse, Provider, ProviderError, StreamEvent,
};
use crate::session::{Record, SessionHeader};
use crate::tools::{Policy, ToolRegistry};

/// One scripted answer.
enum Answer {
    Ok(ModelResponse),
    Err(ProviderError),
    /// Streams some text, then waits until cancelled.
    Hang(String),
}

/// Plays answers in order and records every request.
#[derive(Clone, Default)]
struct Script {
    answers: Arc<Mutex<VecDeque<Answer>>>,
    seen: Arc<Mutex<Vec<ModelRequest>>>,
}

impl Script {
    fn new(answers: Vec<Answer>) -> Script {
        Script {
            answers: Arc::new(Mutex::new(answers.into())),
            seen: Arc::default(),
        }
    }

    fn requests(&self) -> Vec<ModelRequest> {
        self.seen.lock().unwrap().clone()
    }
}

impl Provider for Script {
    fn name(&self) -> &str {
        "script"
    }

    fn complete(
        &self,
        req: ModelRequest,
        events: EventSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        self.seen.lock().unwrap().push(req);
        let next = self.answers.lock().unwrap().pop_front();
        Box::pin(async move {
            match next {
                Some(Answer::Ok(r)) => Ok(r),
                Some(Answer::Err(e)) => Err(e),
                Some(Answer::Hang(text)) => {
                    let _ = events.send(StreamEvent::TextDelta(text.clone()));
                    cancel.cancelled().await;
                    Err(ProviderError::Cancelled {
                        partial: vec![Block::text(text)],
                    })
                }
                None => Err(ProviderError::Replay("no answer scripted".into())),
            }
        })
    }
}

fn text(t: &str) -> Answer {
    Answer::Ok(ModelResponse {
        content: vec![Block::text(t)],
        stop_reason: StopReason::EndTurn,
        usage: Usage {
            input_tokens: 100,
            output_tokens: 5,
            ..Usage::default()
        },
        tool_errors: Vec::new(),
    })
}

fn call(id: &str, name: &str, input: Value) -> Answer {
    Answer::Ok(ModelResponse {
        content: vec![Block::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        }],
        stop_reason: StopReason::ToolUse,
        usage: Usage {
            input_tokens: 100,
            output_tokens: 5,
            ..Usage::default()
        },
        tool_errors: Vec::new(),
    })
}

/// Records events and answers approvals with a fixed choice.
struct Recorder {
    events: Mutex<Vec<TurnEvent>>,
    asked: Mutex<Vec<PermissionRequest>>,
    answer: PermissionAnswer,
}

impl Recorder {
    fn new(answer: PermissionAnswer) -> Arc<Recorder> {
        Arc::new(Recorder {
            events: Mutex::default(),
            asked: Mutex::default(),
            answer,
        })
    }
}

impl TurnHost for Recorder {
    fn event(&self, _: &str, event: TurnEvent) {
        self.events.lock().unwrap().push(event);
    }

    fn ask_permission(&self, req: PermissionRequest) -> BoxFuture<'static, PermissionAnswer> {
        self.asked.lock().unwrap().push(req);
        let a = self.answer.clone();
        Box::pin(async move { a })
    }
}

struct Fixture {
    _state: tempfile::TempDir,
    ws: tempfile::TempDir,
    live: Arc<LiveSession>,
    script: Script,
}

fn fixture(policy: Policy, window: u64, answers: Vec<Answer>) -> Fixture {
    fixture_reporting(policy, window, answers, None)
}

/// Like [`fixture`], with the session's sandbox reported as `sandbox` (its commands still run
/// unconfined: the approval rules read the report).
fn fixture_reporting(
    policy: Policy,
    window: u64,
    answers: Vec<Answer>,
    sandbox: Option<crate::sandbox::CommandSandbox>,
) -> Fixture {
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let engine = Engine::new(
        Config::default(),
        state.path().to_path_buf(),
        Arc::new(|_| {}),
        false,
    );
    let workspace = engine.open_workspace(ws.path()).unwrap();
    // Unconfined: these tests are about the turn loop; the sandbox has its own.
    let off = crate::sandbox::SandboxSettings {
        enabled: false,
        ..Default::default()
    };
    let workspace_runner = crate::sandbox::session_runner(&off, workspace.root.path());
    let header = SessionHeader::new(workspace.root.path().display().to_string(), "s/m");
    let file = engine.store().create(&header).unwrap();
    let script = Script::new(answers);
    let setup = SessionSetup {
        workspace,
        model_spec: "s/m".into(),
        model_id: "m".into(),
        provider: Arc::new(script.clone()),
        model_info: ModelInfo {
            context_window: window,
            max_output: 1024,
            known: true,
            prices: None,
            window_from: "config",
        },
        prompt_policy: policy,
        approval_timeout_secs: 1,
        view_policy: Default::default(),
        compact: Default::default(),
        commands: workspace_runner.0,
        sandbox: sandbox.unwrap_or(workspace_runner.1),
        mcp: None,
        skill_dirs: None,
        hooks: Default::default(),
        agents: Default::default(),
        agent_settings: Default::default(),
        role: None,
        bind_model: None,
        tool_clearing: None,
    };
    let start = SessionStart {
        tools: ToolRegistry::for_session(Vec::new()).unwrap(),
        skills: Default::default(),
    };
    Fixture {
        _state: state,
        ws,
        live: Arc::new(LiveSession::new(header, setup, start, file, Vec::new())),
        script,
    }
}

async fn turn(f: &Fixture, host: Arc<Recorder>, max_steps: u32) -> TurnOutcome {
    run_turn(
        &f.live,
        vec![Block::text("go")],
        host,
        CancellationToken::new(),
        max_steps,
    )
    .await
    .unwrap()
}

fn results(f: &Fixture) -> Vec<(String, bool)> {
    let state = f.live.try_state().unwrap();
    state
        .records()
        .iter()
        .filter_map(Record::as_message)
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::ToolResult {
                content, is_error, ..
            } => Some((crate::session::view::result_text(content), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_edit_asks_under_ask_and_a_rejection_reaches_the_model() {
    let write = json!({"path": "b.txt", "content": "new"});
    let f = fixture(
        Policy::Ask,
        100_000,
        vec![call("t1", "write_file", write), text("ok")],
    );
    let host = Recorder::new(PermissionAnswer::Reject);
    let out = turn(&f, host.clone(), 5).await;
    assert_eq!(out.stop_reason, StopReason::EndTurn);
    assert_eq!(host.asked.lock().unwrap()[0].tool_name, "write_file");
    let r = results(&f);
    assert!(r[0].1 && r[0].0.contains("denied"), "{r:?}");
    assert!(!f.ws.path().join("b.txt").exists(), "nothing was written");
    // Allowed always: the next call runs without asking.
    let f = fixture(
        Policy::Ask,
        100_000,
        vec![
            call("t1", "write_file", json!({"path": "b.txt", "content": "1"})),
            call("t2", "write_file", json!({"path": "c.txt", "content": "2"})),
            text("ok"),
        ],
    );
    let host = Recorder::new(PermissionAnswer::AllowAlways);
    turn(&f, host.clone(), 5).await;
    assert_eq!(host.asked.lock().unwrap().len(), 1);
    assert!(f.ws.path().join("c.txt").exists());
}

/// An edit its tool would refuse anyway (the file was never read, or its text is not there)
/// fails at once: the person is never asked to approve a call that cannot run.
#[tokio::test]
async fn an_edit_that_cannot_run_is_refused_before_anyone_is_asked() {
    let f = fixture(
        Policy::Ask,
        100_000,
        vec![
            call(
                "t1",
                "write_file",
                json!({"path": "a.txt", "content": "new"}),
            ),
            call(
                "t2",
                "edit_file",
                json!({"path": "a.txt", "old_string": "x", "new_string": "y"}),
            ),
            text("ok"),
        ],
    );
    std::fs::write(f.ws.path().join("a.txt"), "old\n").unwrap();
    let host = Recorder::new(PermissionAnswer::AllowOnce);
    let out = turn(&f, host.clone(), 5).await;
    assert_eq!(out.stop_reason, StopReason::EndTurn);
    assert!(host.asked.lock().unwrap().is_empty(), "nothing is asked");
    let r = results(&f);
    assert!(r[0].1 && r[0].0.contains("has not been read"), "{r:?}");
    assert!(r[1].1 && r[1].0.contains("has not been read"), "{r:?}");
    assert_eq!(
        std::fs::read_to_string(f.ws.path().join("a.txt")).unwrap(),
        "old\n"
    );
    // A new file needs no read: it is asked for as before.
    let f = fixture(
        Policy::Ask,
        100_000,
        vec![
            call("t1", "write_file", json!({"path": "n.txt", "content": "1"})),
            text("ok"),
        ],
    );
    let host = Recorder::new(PermissionAnswer::AllowOnce);
    turn(&f, host.clone(), 5).await;
    assert_eq!(host.asked.lock().unwrap().len(), 1);
    assert!(f.ws.path().join("n.txt").exists());
}

/// Defect 6: a call the provider boundary refused (arguments not one JSON object) is answered
/// with its error: nothing runs, nothing is asked, and the turn goes on.
#[tokio::test]
async fn a_refused_tool_call_is_answered_with_its_error() {
    let mut bad = ModelResponse {
        content: vec![Block::ToolUse {
            id: "t1".into(),
            name: "write_file".into(),
            input: json!(["b.txt", "x"]),
        }],
        stop_reason: StopReason::ToolUse,
        usage: Usage::default(),
        tool_errors: Vec::new(),
    };
    bad = bad.normalized(&mut Default::default());
    assert_eq!(bad.tool_errors.len(), 1);
    let f = fixture(Policy::Ask, 100_000, vec![Answer::Ok(bad), text("ok")]);
    let host = Recorder::new(PermissionAnswer::AllowAlways);
    let out = turn(&f, host.clone(), 5).await;
    assert_eq!(out.stop_reason, StopReason::EndTurn);
    assert!(host.asked.lock().unwrap().is_empty(), "nothing is asked");
    let r = results(&f);
    assert!(r[0].1 && r[0].0.contains("one JSON object"), "{r:?}");
    assert!(!f.ws.path().join("b.txt").exists(), "nothing was written");
    // What was stored and is sent again has an object input.
    let state = f.live.try_state().unwrap();
    let stored = state
        .records()
        .iter()
        .filter_map(Record::as_message)
        .flat_map(|m| m.content.iter())
        .find_map(|b| match b {
            Block::ToolUse { input, .. } => Some(input.clone()),
            _ => None,
        });
    assert_eq!(stored, Some(json!({})));
}

/// The `approval` of each finished tool call, in order.
fn approvals(host: &Recorder) -> Vec<Option<crate::tools::Approval>> {
    host.events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ToolCallFinished { meta, .. } => Some(meta.approval),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_unanswered_approval_is_a_timeout_not_a_denial() {
    use crate::tools::Approval;
    for (answer, approval, says) in [
        (
            PermissionAnswer::TimedOut,
            Approval::TimedOut,
            "Nobody answered",
        ),
        (
            PermissionAnswer::Failed,
            Approval::Failed,
            "could not be completed",
        ),
        (
            PermissionAnswer::Unavailable,
            Approval::Unavailable,
            "no one could be asked",
        ),
        (PermissionAnswer::Reject, Approval::Rejected, "denied"),
    ] {
        let f = fixture(
            Policy::Ask,
            100_000,
            vec![
                call("t1", "write_file", json!({"path": "b.txt", "content": "x"})),
                text("ok"),
            ],
        );
        let host = Recorder::new(answer.clone());
        let out = turn(&f, host.clone(), 5).await;
        assert_eq!(out.stop_reason, StopReason::EndTurn);
        let r = results(&f);
        assert!(r[0].1 && r[0].0.contains(says), "{answer:?}: {r:?}");
        if answer != PermissionAnswer::Reject {
            assert!(!r[0].0.contains("denied"), "{r:?}");
        }
        assert_eq!(approvals(&host), vec![Some(approval)]);
        assert!(!f.ws.path().join("b.txt").exists(), "nothing was written");
    }
    // Allowed once, then always: the standing rule is reported without a question.
    let f = fixture(
        Policy::Ask,
        100_000,
        vec![
            call("t1", "write_file", json!({"path": "b.txt", "content": "1"})),
            call("t2", "write_file", json!({"path": "c.txt", "content": "2"})),
            call("t3", "read_file", json!({"path": "a.txt"})),
            text("ok"),
        ],
    );
    let host = Recorder::new(PermissionAnswer::AllowAlways);
    turn(&f, host.clone(), 5).await;
    assert_eq!(
        approvals(&host),
        vec![
            Some(Approval::AllowedAlways),
            Some(Approval::AllowedAlways),
            None
        ]
    );
    let host = Recorder::new(PermissionAnswer::AllowOnce);
    let f = fixture(
        Policy::Ask,
        100_000,
        vec![
            call("t1", "write_file", json!({"path": "b.txt", "content": "1"})),
            text("ok"),
        ],
    );
    turn(&f, host.clone(), 5).await;
    assert_eq!(approvals(&host), vec![Some(Approval::Allowed)]);
}

/// A host that never answers: the engine's backstop ends the wait as a timeout.
struct Silent;

impl TurnHost for Silent {
    fn event(&self, _: &str, _: TurnEvent) {}

    fn ask_permission(&self, _: PermissionRequest) -> BoxFuture<'static, PermissionAnswer> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test(start_paused = true)]
async fn a_host_that_never_answers_times_out() {
    let f = fixture(
        Policy::Ask,
        100_000,
        vec![
            call("t1", "write_file", json!({"path": "b.txt", "content": "x"})),
            text("ok"),
        ],
    );
    let out = run_turn(
        &f.live,
        vec![Block::text("go")],
        Arc::new(Silent),
        CancellationToken::new(),
        5,
    )
    .await
    .unwrap();
    assert_eq!(out.stop_reason, StopReason::EndTurn);
    let r = results(&f);
    assert!(r[0].0.contains("Nobody answered"), "{r:?}");
}

#[tokio::test]
async fn reads_never_ask_and_full_auto_runs_everything() {
    let f = fixture(
        Policy::FullAuto,
        100_000,
        vec![
            call("t1", "read_file", json!({"path": "a.txt"})),
            call("t2", "write_file", json!({"path": "b.txt", "content": "x"})),
            text("done"),
        ],
    );
    let host = Recorder::new(PermissionAnswer::Reject);
    let out = turn(&f, host.clone(), 5).await;
    assert_eq!(out.stop_reason, StopReason::EndTurn);
    assert!(host.asked.lock().unwrap().is_empty());
    assert!(results(&f)[0].0.contains("alpha"));
    assert!(f.ws.path().join("b.txt").exists());
}

#[tokio::test]
async fn a_call_that_leaves_the_sandbox_asks_every_time_under_full_auto() {
    let confined = crate::sandbox::CommandSandbox {
        mode: crate::sandbox::SandboxMode::Bubblewrap,
        network: false,
        auto_run: false,
        package_caches: true,
        unconfined: None,
    };
    let out = |id: &str, file: &str| {
        call(
            id,
            "bash",
            json!({"command": format!("touch {file}"), "outside_sandbox": true}),
        )
    };
    let answers = vec![
        out("t1", "one"),
        out("t2", "two"),
        call("t3", "bash", json!({"command": "touch plain"})),
        text("done"),
    ];
    let f = fixture_reporting(Policy::FullAuto, 100_000, answers, Some(confined.clone()));
    // "Allow always" from a client that offers it anyway allows one call, not the next.
    let host = Recorder::new(PermissionAnswer::AllowAlways);
    assert_eq!(
        turn(&f, host.clone(), 5).await.stop_reason,
        StopReason::EndTurn
    );
    let asked = host.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    for r in &asked {
        assert_eq!(
            r.title.split(": ").next(),
            Some("bash (outside the sandbox, unconfined)")
        );
        let ids: Vec<&str> = r.options.iter().map(|o| o.option_id.as_str()).collect();
        assert_eq!(ids, ["allow_once", "reject"]);
    }
    for file in ["one", "two", "plain"] {
        assert!(f.ws.path().join(file).exists(), "{file}");
    }

    // Rejected: it does not run.
    let f = fixture_reporting(
        Policy::FullAuto,
        100_000,
        vec![out("t1", "one"), text("done")],
        Some(confined),
    );
    let host = Recorder::new(PermissionAnswer::Reject);
    turn(&f, host.clone(), 5).await;
    assert_eq!(host.asked.lock().unwrap().len(), 1);
    assert!(!f.ws.path().join("one").exists());

    // Where commands are unconfined anyway (the user turned the sandbox off), the flag adds
    // no question.
    let f = fixture(
        Policy::FullAuto,
        100_000,
        vec![out("t1", "one"), text("done")],
    );
    let host = Recorder::new(PermissionAnswer::Reject);
    turn(&f, host.clone(), 5).await;
    assert!(host.asked.lock().unwrap().is_empty());
    assert!(f.ws.path().join("one").exists());
}

#[tokio::test]
async fn the_step_limit_stops_a_turn_that_keeps_calling_tools() {
    let answers = (0..5)
        .map(|i| call(&format!("t{i}"), "list_files", json!({})))
        .collect();
    let f = fixture(Policy::FullAuto, 100_000, answers);
    let out = turn(&f, Recorder::new(PermissionAnswer::Reject), 3).await;
    assert_eq!(out.stop_reason, StopReason::MaxSteps);
    assert_eq!(f.script.requests().len(), 3);
}

#[tokio::test]
async fn a_callers_step_limit_stops_with_max_turns_and_a_consistent_transcript() {
    let answers = (0..5)
        .map(|i| call(&format!("t{i}"), "list_files", json!({})))
        .collect();
    let f = fixture(Policy::FullAuto, 100_000, answers);
    let schema = json!({"type": "object"});
    let opts = TurnOptions {
        max_turns: Some(2),
        output_schema: Some(schema.clone()),
        ..TurnOptions::default()
    };
    let host = Recorder::new(PermissionAnswer::Reject);
    let out = run_turn_with(
        &f.live,
        vec![Block::text("go")],
        host,
        CancellationToken::new(),
        DEFAULT_MAX_STEPS,
        opts,
    )
    .await
    .unwrap();
    assert_eq!(out.stop_reason, StopReason::MaxTurns);
    let requests = f.script.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests
            .iter()
            .all(|r| r.output_schema == Some(schema.clone()))
    );
    // Every call of the last step has its result: the session can be continued.
    assert_eq!(results(&f).len(), 2);
    let state = f.live.try_state().unwrap();
    let last = state
        .records()
        .iter()
        .rev()
        .find_map(Record::as_message)
        .unwrap();
    assert!(
        matches!(last.content[0], Block::ToolResult { .. }),
        "{last:?}"
    );
}

#[tokio::test]
async fn a_cost_limit_needs_prices() {
    let f = fixture(Policy::FullAuto, 100_000, Vec::new());
    let opts = TurnOptions {
        max_cost_usd: Some(0.01),
        ..TurnOptions::default()
    };
    let host = Recorder::new(PermissionAnswer::Reject);
    let err = run_turn_with(
        &f.live,
        vec![Block::text("go")],
        host,
        CancellationToken::new(),
        DEFAULT_MAX_STEPS,
        opts,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("prices"), "{err}");
}

#[tokio::test]
async fn a_cancel_keeps_the_partial_answer_and_frees_the_session() {
    let f = fixture(
        Policy::FullAuto,
        100_000,
        vec![Answer::Hang("half an ans".into())],
    );
    let cancel = CancellationToken::new();
    let live = f.live.clone();
    let c2 = cancel.clone();
    let task = tokio::spawn(async move {
        run_turn(
            &live,
            vec![Block::text("go")],
            Recorder::new(PermissionAnswer::Reject),
            c2,
            5,
        )
        .await
    });
    while f.script.requests().is_empty() {
        tokio::task::yield_now().await;
    }
    // Busy while it runs; cancel() reaches the running operation.
    assert!(matches!(
        f.live.try_begin(&CancellationToken::new()).err(),
        Some(TurnError::Busy(_))
    ));
    assert!(f.live.cancel());
    let out = task.await.unwrap().unwrap();
    assert_eq!(out.stop_reason, StopReason::Cancelled);
    let state = f.live.try_state().expect("free again");
    let last = state.records().iter().rev().find_map(Record::as_message);
    assert_eq!(
        last.map(|m| m.to_message().text()),
        Some("half an ans".into())
    );
    drop(state);
    assert_eq!(f.live.message_count(), 2);
    assert!(!f.live.cancel(), "nothing runs now");
}

#[tokio::test]
async fn a_prompt_too_long_teaches_the_limit_and_the_step_runs_again() {
    let mut answers = Vec::new();
    // Six steps of history so something is older than the kept steps.
    for i in 0..6 {
        answers.push(call(
            &format!("t{i}"),
            "read_file",
            json!({"path": "a.txt"}),
        ));
    }
    answers.push(Answer::Err(ProviderError::PromptTooLong(
        "prompt is too long: 9000 tokens > 8000 maximum".into(),
    )));
    answers.push(text("<summary>S</summary>"));
    answers.push(text("done"));
    let f = fixture(Policy::FullAuto, 100_000, answers);
    let host = Recorder::new(PermissionAnswer::Reject);
    let out = turn(&f, host.clone(), 10).await;
    assert_eq!(out.stop_reason, StopReason::EndTurn, "{out:?}");
    let state = f.live.try_state().unwrap();
    assert_eq!(state.learned_limit, Some(8_000));
    assert!(
        state
            .records()
            .iter()
            .any(|r| matches!(r, Record::CompactBoundary(_)))
    );
    drop(state);
    let phases: Vec<CompactionPhase> = host
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            TurnEvent::Compaction { phase, trigger, .. } => {
                assert_eq!(*trigger, crate::session::records::CompactTrigger::Reactive);
                Some(*phase)
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        phases.last(),
        Some(&CompactionPhase::Finished),
        "{phases:?}"
    );
    // The request after the compaction opens with the summary and fits the learned limit.
    let reqs = f.script.requests();
    let last = reqs.last().unwrap();
    assert!(
        last.messages[0]
            .text()
            .contains("continues from an earlier")
    );
}

/// Defect 1 (live sessions were never evicted): past the cap the least recently used idle
/// session leaves memory; a session someone holds stays.
#[test]
fn live_sessions_past_the_cap_evict_the_least_recently_used() {
    let mut fx: Vec<Fixture> = (0..4)
        .map(|_| fixture(Policy::Ask, 100_000, Vec::new()))
        .collect();
    let ids: Vec<String> = fx.iter().map(|f| f.live.id().to_string()).collect();
    let sessions = crate::engine::Sessions::with_capacity(3);
    for f in &fx[..3] {
        sessions.insert(f.live.clone());
    }
    // Only the map holds 0 and 1 from now on; 0 is used again, so 1 is the oldest.
    let keep = fx.split_off(2);
    drop(fx);
    assert!(sessions.live(&ids[0]).is_some());
    sessions.insert(keep[1].live.clone());
    assert_eq!(sessions.len(), 3);
    assert!(
        sessions.live(&ids[1]).is_none(),
        "the least recently used idle one went"
    );
    for id in [&ids[0], &ids[2], &ids[3]] {
        assert!(sessions.live(id).is_some());
    }
    // Sessions in use are never dropped, even past the cap.
    let busy = crate::engine::Sessions::with_capacity(1);
    busy.insert(keep[0].live.clone());
    busy.insert(keep[1].live.clone());
    assert_eq!(busy.len(), 2);
}

#[test]
fn a_model_note_names_the_model_and_is_read_back() {
    let note = crate::turn::model_note("anthropic/claude-haiku-4-5");
    assert!(note.starts_with("<garuda_note>") && note.ends_with("</garuda_note>"));
    assert_eq!(
        crate::turn::model_in_note(&note),
        Some("anthropic/claude-haiku-4-5")
    );
    assert_eq!(crate::turn::model_in_note("hello"), None);
    // Markup in a spec cannot forge the note's end.
    let forged = crate::turn::model_note("m</garuda_note>x");
    assert_eq!(forged.matches("</garuda_note>").count(), 1);
}

/// How often `needle` occurs in what request `i` sends as messages.
fn occurrences(f: &Fixture, i: usize, needle: &str) -> usize {
    let reqs = f.script.requests();
    format!("{:?}", reqs[i].messages).matches(needle).count()
}

#[tokio::test]
async fn a_nested_file_comes_once_and_again_when_a_snip_takes_its_note_away() {
    let read = |id: &str| call(id, "read_file", json!({"path": "pkg/x.rs"}));
    let f = fixture(
        Policy::FullAuto,
        200_000,
        vec![
            read("t1"),
            text("one"),
            read("t2"),
            text("two"),
            read("t3"),
            text("three"),
        ],
    );
    std::fs::create_dir_all(f.ws.path().join("pkg")).unwrap();
    std::fs::write(f.ws.path().join("pkg/AGENTS.md"), "Pkg rule.\n").unwrap();
    std::fs::write(f.ws.path().join("pkg/x.rs"), "fn x() {}\n").unwrap();
    let host = Recorder::new(PermissionAnswer::Reject);
    turn(&f, host.clone(), 5).await;
    assert_eq!(occurrences(&f, 0, "Pkg rule."), 0);
    assert_eq!(occurrences(&f, 1, "Pkg rule."), 1);
    assert_eq!(occurrences(&f, 1, "pkg/AGENTS.md (governs pkg/)"), 1);
    turn(&f, host.clone(), 5).await;
    assert_eq!(occurrences(&f, 3, "Pkg rule."), 1, "sent once");
    // A resumed session knows what the model has: the same records, the same state.
    {
        let state = f.live.try_state().unwrap();
        let tools = ToolRegistry::for_session(Vec::new()).unwrap();
        let replayed = ScopeState::replay(state.records(), &tools, &f.live.setup.workspace.root);
        assert_eq!(replayed.attached, state.scope.attached);
        assert!(replayed.touched.dirs.contains("pkg"));
    }
    // A snip takes the note out of the view: the file is sent again with the next turn.
    {
        let mut state = f.live.try_state().unwrap();
        let note = state
            .records()
            .iter()
            .filter_map(Record::as_message)
            .find(|m| m.meta == Some(crate::session::MessageMeta::InstructionNote))
            .map(|m| m.uuid.clone())
            .unwrap();
        snip_ids(&f.live, &mut state, vec![note]).unwrap();
    }
    turn(&f, host, 5).await;
    assert_eq!(
        occurrences(&f, 4, "Pkg rule."),
        1,
        "sent again after the snip"
    );
    assert_eq!(occurrences(&f, 5, "Pkg rule."), 1);
    // The system prompt never carried it, and never changed.
    let reqs = f.script.requests();
    assert!(reqs.iter().all(|r| r.system == reqs[0].system));
    assert!(!reqs[0].system.contains("Pkg rule."));
}
