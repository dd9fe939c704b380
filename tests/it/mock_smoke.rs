//! The mock model kit itself works.

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
