//! Engine overhead of one step of a turn, excluding the provider's time: a session of 200
//! messages, a provider that answers instantly in-process, and everything else real (view
//! pipeline, request building, compaction check, transcript appends, events).
//!
//! Run with `cargo bench --bench turn_step`.
// Test and benchmark code: a panic is a failure with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use futures_util::future::BoxFuture;
use garuda_core::config::Config;
use garuda_core::engine::Engine;
use garuda_core::message::{Block, StopReason, Usage};
use garuda_core::provider::{
    EventSink, ModelInfo, ModelRequest, ModelResponse, Provider, ProviderError,
};
use garuda_core::session::SessionHeader;
use garuda_core::tools::Policy;
use garuda_core::turn::{LiveSession, NullHost, SessionSetup, SessionStart, run_turn};
use tokio_util::sync::CancellationToken;

/// Answers every request at once with one line of text.
struct Instant;

impl Provider for Instant {
    fn name(&self) -> &str {
        "instant"
    }

    fn complete(
        &self,
        _req: ModelRequest,
        _events: EventSink,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        Box::pin(async {
            Ok(ModelResponse {
                content: vec![Block::text("Done.")],
                stop_reason: StopReason::EndTurn,
                usage: Usage {
                    input_tokens: 1000,
                    output_tokens: 2,
                    ..Usage::default()
                },
                tool_errors: Vec::new(),
            })
        })
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let state = tempfile::tempdir().expect("state");
    let ws_dir = tempfile::tempdir().expect("ws");
    std::fs::write(ws_dir.path().join("AGENTS.md"), "Keep it short.\n").expect("write");
    let engine = Engine::new(
        Config::default(),
        state.path().to_path_buf(),
        Arc::new(|_| {}),
        false,
    );
    let ws = engine.open_workspace(ws_dir.path()).expect("workspace");
    let header = SessionHeader::new(ws.root.path().display().to_string(), "instant/model");
    let file = engine.store().create(&header).expect("create");
    let setup = || SessionSetup {
        workspace: ws.clone(),
        model_spec: "instant/model".into(),
        model_id: "model".into(),
        provider: Arc::new(Instant),
        model_info: ModelInfo {
            context_window: 1_000_000,
            max_output: 8192,
            known: true,
            prices: None,
            window_from: "config",
        },
        prompt_policy: Policy::FullAuto,
        approval_timeout_secs: 1,
        view_policy: Default::default(),
        compact: Default::default(),
        commands: None,
        sandbox: garuda_core::sandbox::session_runner(&Default::default(), ws_dir.path()).1,
        mcp: None,
        skill_dirs: None,
        hooks: Default::default(),
        agents: Default::default(),
        agent_settings: Default::default(),
        role: None,
        bind_model: None,
        tool_clearing: None,
    };
    let start = || SessionStart {
        tools: garuda_core::tools::ToolRegistry::for_session(Vec::new()).expect("no clash"),
        skills: Default::default(),
    };
    let live = Arc::new(LiveSession::new(
        header.clone(),
        setup(),
        start(),
        file,
        Vec::new(),
    ));
    let host: Arc<dyn garuda_core::turn::TurnHost> = Arc::new(NullHost);
    let turn = |live: Arc<LiveSession>, text: String| {
        let host = host.clone();
        async move {
            run_turn(
                &live,
                vec![Block::text(text)],
                host,
                CancellationToken::new(),
                1,
            )
            .await
            .expect("turn")
        }
    };
    // 100 turns: 200 messages.
    rt.block_on(async {
        for i in 0..100 {
            turn(
                live.clone(),
                format!("question {i} about the code base, with some words to weigh it"),
            )
            .await;
        }
    });
    // Each sample starts from the same 200 messages in a session brought to life afresh (a
    // new transcript, its view not yet built), so the figure is an upper bound: the view is
    // rebuilt whole instead of extended.
    let base = engine.store().load(live.id()).expect("load").records;
    c.bench_function("one step, 200-message session (view rebuilt)", |b| {
        b.iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            for _ in 0..iters {
                let header = SessionHeader::new(header.workspace_root.clone(), "instant/model");
                let file = engine.store().create(&header).expect("create");
                let fresh = Arc::new(LiveSession::new(
                    header,
                    setup(),
                    start(),
                    file,
                    base.clone(),
                ));
                let t = std::time::Instant::now();
                rt.block_on(turn(fresh, "one more question".to_string()));
                total += t.elapsed();
            }
            total
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
