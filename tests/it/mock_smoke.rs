//! The mock model kit itself works, and speaks what the providers parse.

use crate::mock_model::*;

#[tokio::test]
async fn mock_model_serves_replies_in_order_and_records() {
    let (server, rec) = start_anthropic(vec![
        MockReply::rate_limited(0),
        MockReply::Sse(anthropic_text("Hello there", MockUsage::new(10, 3))),
        MockReply::Sse(anthropic_tool_use(
            "toolu_1",
            "read_file",
            &["{\"pa", "th\": \"a.rs\"}"],
        )),
        MockReply::Sse(AnthropicSse::new(MockUsage::new(1, 1)).text("half").cut()),
    ])
    .await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/messages", server.uri());
    let mut statuses = Vec::new();
    let mut bodies = Vec::new();
    for i in 0..5 {
        let r = client
            .post(&url)
            .body(format!("{{\"n\":{i}}}"))
            .send()
            .await
            .unwrap();
        statuses.push(r.status().as_u16());
        bodies.push(r.text().await.unwrap());
    }
    assert_eq!(statuses, [429, 200, 200, 200, 400]);
    assert!(
        bodies[1].contains("\"text\":\"Hel")
            && bodies[1].ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
    );
    assert!(
        bodies[2].contains("input_json_delta")
            && bodies[2].contains("\"stop_reason\":\"tool_use\"")
    );
    assert!(!bodies[3].contains("message_stop"));
    assert_eq!(rec.count(), 5);
    assert_eq!(rec.bodies()[2], serde_json::json!({"n": 2}));

    let (server, rec) = start_openai(vec![
        MockReply::Sse(openai_text(
            "hi",
            MockUsage {
                input: 5,
                output: 1,
                cache_read: 3,
                ..Default::default()
            },
        )),
        MockReply::prompt_too_long_openai(),
    ])
    .await;
    let url = format!("{}/v1/chat/completions", server.uri());
    let r = client.post(&url).body("{}").send().await.unwrap();
    let text = r.text().await.unwrap();
    assert!(text.contains("\"cached_tokens\":3") && text.ends_with("data: [DONE]\n\n"));
    let r = client.post(&url).body("{}").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(rec.count(), 2);
    assert!(
        openai_tool_call(
            "c1",
            "grep",
            &json_pieces("{\"pattern\":\"x\"}", 3)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
        )
        .contains("tool_calls")
    );
}

/// The kit's bodies parse with Garuda's own providers (so the kit is a faithful wire mock).
#[tokio::test]
async fn mock_model_speaks_what_the_providers_parse() {
    use garuda_core::message::{Block, Message, StopReason};
    use garuda_core::provider::{
        Endpoint, ModelRequest, ProviderError, ProviderKind, build_endpoint, retry::RetryPolicy,
    };
    use std::time::Duration;

    let ep = |kind, base: String| Endpoint {
        name: "mock".into(),
        kind,
        base_url: base,
        api_key: Some("k".into()),
        max_tokens_field: "max_tokens".into(),
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(1),
        retry: RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(20),
        },
        structured_output: true,
        context_editing: false,
        max_in_flight: 16,
    };
    let req = || ModelRequest {
        model: "m".into(),
        system: "s".into(),
        messages: vec![Message::user_text("hi")],
        max_tokens: 100,
        ..Default::default()
    };
    let call = |p: std::sync::Arc<dyn garuda_core::provider::Provider>| async move {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        p.complete(req(), tx, Default::default()).await
    };

    let body = AnthropicSse::new(MockUsage {
        input: 3,
        output: 4,
        cache_creation: 5,
        cache_read: 6,
    })
    .thinking("hmm", "sig")
    .text("Reading.")
    .tool_use("toolu_1", "read_file", &["{\"path\"", ": \"a.rs\"}"])
    .finish("tool_use");
    let (server, rec) = start_anthropic(vec![
        MockReply::overloaded(),
        MockReply::Sse(body),
        MockReply::Sse(AnthropicSse::new(MockUsage::new(1, 1)).text("half").cut()),
        MockReply::Hang(Duration::from_secs(30)),
        MockReply::prompt_too_long_anthropic(),
    ])
    .await;
    let p = build_endpoint(ep(ProviderKind::Anthropic, server.uri())).unwrap();
    let r = call(p.clone()).await.unwrap();
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.content.len(), 3);
    assert_eq!(r.usage.cache_read_input_tokens, 6);
    let cut = call(p.clone()).await.unwrap_err();
    assert_eq!(cut.partial(), &[Block::text("half")]);
    assert!(matches!(
        call(p.clone()).await,
        Err(ProviderError::Timeout(_))
    ));
    assert!(call(p.clone()).await.unwrap_err().is_prompt_too_long());
    assert_eq!(rec.count(), 5);
    assert_eq!(rec.raw()[0], rec.raw()[1]);
    assert!(
        rec.headers()[0]
            .iter()
            .any(|(k, v)| k == "x-api-key" && v == "k")
    );

    let body = OpenAiSse::new()
        .text("ok")
        .tool_call("call_1", "grep", &["{\"pattern\"", ":\"x\"}"])
        .finish(
            "tool_calls",
            MockUsage {
                input: 2,
                output: 1,
                cache_read: 8,
                ..Default::default()
            },
        );
    let (server, _rec) =
        start_openai(vec![MockReply::rate_limited_ms(5), MockReply::Sse(body)]).await;
    let p = build_endpoint(ep(ProviderKind::Openai, format!("{}/v1", server.uri()))).unwrap();
    let r = call(p).await.unwrap();
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(
        (r.usage.input_tokens, r.usage.cache_read_input_tokens),
        (2, 8)
    );
    assert_eq!(r.content.len(), 2);
}
