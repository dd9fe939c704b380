//! Agents end to end: `explore` calls of one message run at once, a custom agent gets only
//! its listed tools and its approvals reach the client marked with its name, a cancel ends
//! a running agent, a sub-session's transcript loads and continues as that agent, agents
//! start agents only when the user lets them, a sub-session compacts in its own window, and
//! the calling session's system prompt stays the same bytes throughout.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::Garuda;
use crate::mock_model::*;
use crate::turns::{Mock, setup, strip_cache_control};

fn write(dir: &Path, rel: &str, body: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, body).expect("write");
}

fn session(g: &mut Garuda, wid: &str, policy: &str) -> String {
    let r = g.call("session/new", json!({"workspaceId": wid, "policy": policy}));
    r["sessionId"].as_str().expect("sessionId").to_string()
}

fn input(t: &str) -> Value {
    json!([{"type": "text", "text": t}])
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn system(body: &Value) -> String {
    let mut v = body["system"].clone();
    strip_cache_control(&mut v);
    v.to_string()
}

fn is_agent_request(body: &Value) -> bool {
    system(body).contains("# Agent: ")
}

fn answer(text: &str, input: u64, output: u64) -> String {
    anthropic_text(text, MockUsage::new(input, output))
}

#[test]
fn two_explores_in_one_message_run_at_once() {
    let delay = Duration::from_millis(1500);
    let mock = Mock::start(vec![
        MockReply::Sse(
            AnthropicSse::new(MockUsage::new(10, 10))
                .tool_use("t1", "explore", &[r#"{"task": "where is alpha?"}"#])
                .tool_use("t2", "explore", &[r#"{"task": "where is beta?"}"#])
                .finish("tool_use"),
        ),
        MockReply::Slow(answer("REPORT-ONE: a.txt line 1", 7, 3), delay),
        MockReply::Slow(answer("REPORT-TWO: a.txt line 2", 7, 3), delay),
        MockReply::Sse(answer("Both found.", 5, 1)),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, "");
    let sid = session(&mut g, &wid, "ask");
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": input("find alpha and beta")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    // The agents' usage is the caller's: 10 + 7 + 7 + 5 input tokens.
    assert_eq!(r["usage"]["inputTokens"], 29, "{r}");

    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 4);
    let arrived = mock.rec.arrivals();
    // Both sub-sessions asked before either could have had its answer.
    assert!(is_agent_request(&bodies[1]) && is_agent_request(&bodies[2]));
    assert!(
        arrived[2] < arrived[1] + delay,
        "the second explore's request came after the first one's answer: not concurrent"
    );
    for child in &bodies[1..3] {
        assert_eq!(
            tool_names(child),
            ["read_file", "list_files", "glob", "grep"],
            "read-only tools only"
        );
        assert!(system(child).contains("# Agent: explore"));
    }
    // The caller's request carries both reports in the calls' order. The mock answers in
    // arrival order, and which sub-session asks first is up to the scheduler: the report
    // of `t1` is the answer to the request that carried its task.
    let last = bodies[3].to_string();
    let (one, two) = (
        last.find("REPORT-ONE").expect("one"),
        last.find("REPORT-TWO").expect("two"),
    );
    let alpha_first = bodies[1].to_string().contains("where is alpha?");
    assert_eq!(one < two, alpha_first, "{last}");
    assert!(tool_names(&bodies[0]).contains(&"explore".to_string()));
    assert!(system(&bodies[0]).contains("call explore; several can run at once"));
    assert_eq!(
        system(&bodies[0]),
        system(&bodies[3]),
        "main prompt unchanged"
    );
    assert_eq!(bodies[0]["tools"], bodies[3]["tools"]);

    let events = g.turn_events();
    let children: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "toolCallFinished" && e["name"] == "explore")
        .map(|e| {
            e["meta"]["agentSessionId"]
                .as_str()
                .expect("agentSessionId")
                .to_string()
        })
        .collect();
    assert_eq!(children.len(), 2);
    let list = g.call("session/list", json!({"workspaceId": wid}));
    for child in &children {
        let entry = list["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .find(|s| s["sessionId"] == child.as_str())
            .expect("the sub-session is listed");
        assert_eq!(entry["parentSessionId"], sid.as_str());
        assert_eq!(entry["agent"], "explore");
    }
    let main = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|s| s["sessionId"] == sid.as_str())
        .expect("main");
    assert!(main.get("parentSessionId").is_none(), "{main}");
}

#[test]
fn an_agent_has_its_tools_asks_as_itself_and_loads_again() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t_agent",
            "agent",
            &[r#"{"name": "runner", "task": "run echo hi and report"}"#],
        )),
        MockReply::Sse(anthropic_tool_use(
            "t_bash",
            "bash",
            &[r#"{"command": "echo hi-from-agent"}"#],
        )),
        MockReply::Sse(answer("RAN: hi-from-agent", 4, 2)),
        MockReply::Sse(answer("The agent ran it.", 5, 1)),
        // The sub-session continued after a load.
        MockReply::Sse(answer("continued", 3, 1)),
    ]);
    let (mut g, _h, ws, wid) = setup(&mock, "");
    write(
        ws.path(),
        ".garuda/agents/runner.md",
        "---\nname: runner\ndescription: Runs commands and reports.\ntools: Read, Bash, Task\n---\nRUNNER-BODY: run what you are asked.\n",
    );
    write(
        ws.path(),
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews code.\ntools: Read, Grep\n---\nReview.\n",
    );
    let sid = session(&mut g, &wid, "ask");
    let mut asked = Vec::new();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": input("run echo")}),
        |m| {
            asked.push(m.clone());
            json!({"optionId": "allow_once"})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let asks: Vec<&Value> = asked
        .iter()
        .filter(|m| m["method"] == "permission/request")
        .collect();
    assert_eq!(asks.len(), 1, "{asked:?}");
    let p = &asks[0]["params"];
    assert!(
        p["title"]
            .as_str()
            .expect("title")
            .starts_with("[agent runner] bash: echo hi-from-agent"),
        "{p}"
    );
    assert_eq!(p["agent"], "runner");
    assert_eq!(
        p["sessionId"],
        sid.as_str(),
        "asked in the caller's session"
    );

    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 4);
    let agent_tool = bodies[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "agent")
        .expect("the agent tool")
        .clone();
    let d = agent_tool["description"].as_str().expect("description");
    let (rev, run) = (
        d.find("- reviewer: Reviews code.").expect("reviewer"),
        d.find("- runner: Runs commands").expect("runner"),
    );
    assert!(rev < run, "sorted: {d}");
    assert!(system(&bodies[0]).contains("Custom agents are listed in the agent tool"));
    // The sub-session: its listed tools only (no nested agents by default), its prompt with
    // the base rules and the project's instructions.
    assert_eq!(tool_names(&bodies[1]), ["read_file", "bash"]);
    let child_system = system(&bodies[1]);
    for needle in [
        "RUNNER-BODY",
        "# Agent: runner",
        "Be brief.",
        "The working root is",
    ] {
        assert!(child_system.contains(needle), "{needle}: {child_system}");
    }
    assert!(bodies[2].to_string().contains("hi-from-agent"));
    assert!(bodies[3].to_string().contains("RAN: hi-from-agent"));
    assert_eq!(
        system(&bodies[0]),
        system(&bodies[3]),
        "main prompt unchanged"
    );
    assert_eq!(bodies[0]["tools"], bodies[3]["tools"]);

    let child = g
        .turn_events()
        .iter()
        .find(|e| e["kind"] == "toolCallFinished" && e["name"] == "agent")
        .and_then(|e| e["meta"]["agentSessionId"].as_str().map(str::to_string))
        .expect("agentSessionId");
    // The sub-session's transcript opens, and it goes on as the same agent.
    g.call("session/load", json!({"sessionId": child}));
    let msgs = g.call("session/messages", json!({"sessionId": child}));
    let text = msgs.to_string();
    assert!(text.contains("run echo hi and report") && text.contains("RAN: hi-from-agent"));
    let r = g.call(
        "turn/run",
        json!({"sessionId": child, "input": input("and now?")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    assert_eq!(tool_names(&bodies[4]), ["read_file", "bash"]);
    assert_eq!(system(&bodies[4]), child_system);
    assert!(
        !g.backlog
            .iter()
            .any(|m| m["method"] == "turn/update" && m["params"].get("agent").is_some()),
        "a client that did not ask for agents' streams gets none"
    );
}

#[test]
fn cancelling_the_turn_ends_a_running_agent() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t_x",
            "explore",
            &[r#"{"task": "look around"}"#],
        )),
        MockReply::Hang(Duration::from_secs(30)),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, "");
    let sid = session(&mut g, &wid, "ask");
    let id = g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": input("explore")}),
    );
    // Wait until the sub-session's request is at the model.
    while mock.rec.count() < 2 {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(g.call("turn/cancel", json!({"sessionId": sid}))["ok"], true);
    let r = g.response(&json!(id));
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");
    let finished = g
        .turn_events()
        .into_iter()
        .find(|e| e["kind"] == "toolCallFinished")
        .expect("the explore call finished");
    assert_eq!(finished["isError"], true);
    assert_eq!(finished["meta"]["cancelled"], true, "{finished}");
    let child = finished["meta"]["agentSessionId"]
        .as_str()
        .expect("agentSessionId")
        .to_string();
    let msgs = g.call("session/messages", json!({"sessionId": sid}));
    let last = msgs["messages"]
        .as_array()
        .expect("messages")
        .last()
        .cloned()
        .expect("last");
    assert_eq!(last["content"][0]["type"], "tool_result", "{last}");
    assert!(last.to_string().contains("interrupted"), "{last}");
    let child_msgs = g.call("session/messages", json!({"sessionId": child}));
    assert!(child_msgs.to_string().contains("look around"));
    assert_eq!(mock.rec.count(), 2, "nothing was asked after the cancel");
}

#[test]
fn agents_start_agents_only_when_the_user_lets_them() {
    for (config, want) in [
        ("", vec!["read_file"]),
        ("[agents]\nnested = true\n", vec!["read_file", "agent"]),
    ] {
        let mock = Mock::start(vec![
            MockReply::Sse(anthropic_tool_use(
                "t_lead",
                "agent",
                &[r#"{"name": "lead", "task": "plan it"}"#],
            )),
            MockReply::Sse(answer("LEAD-REPORT", 3, 1)),
            MockReply::Sse(answer("done", 3, 1)),
        ]);
        let (mut g, _h, ws, wid) = setup(&mock, config);
        write(
            ws.path(),
            ".claude/agents/lead.md",
            "---\nname: lead\ndescription: Splits work.\ntools: Read, Task\n---\nLead.\n",
        );
        let sid = session(&mut g, &wid, "full-auto");
        let r = g.call("turn/run", json!({"sessionId": sid, "input": input("go")}));
        assert_eq!(r["stopReason"], "end_turn", "{r}");
        let bodies = mock.rec.bodies();
        assert_eq!(tool_names(&bodies[1]), want, "config {config:?}");
        assert!(bodies[2].to_string().contains("LEAD-REPORT"));
    }
}

#[test]
fn an_agent_compacts_in_its_own_window() {
    let read = |id: &str, input: u64| {
        MockReply::Sse(
            AnthropicSse::new(MockUsage::new(input, 5))
                .tool_use(id, "read_file", &[r#"{"path": "a.txt"}"#])
                .finish("tool_use"),
        )
    };
    let mut replies = vec![MockReply::Sse(anthropic_tool_use(
        "t_x",
        "explore",
        &[r#"{"task": "read a.txt five times"}"#],
    ))];
    for i in 1..=4 {
        replies.push(read(&format!("r{i}"), 100 * i));
    }
    // Past 80 % of the sub-session's 100 000-token window: its next step compacts first.
    replies.push(read("r5", 85_000));
    replies.push(MockReply::Sse(answer(
        "<summary>CHILD-SUMMARY</summary>",
        500,
        50,
    )));
    replies.push(MockReply::Sse(answer("CHILD-REPORT", 600, 5)));
    replies.push(MockReply::Sse(answer("parent done", 50, 5)));
    let mock = Mock::start(replies);
    let (mut g, _h, _w, wid) = setup(&mock, crate::context::WINDOW_100K);
    let sid = session(&mut g, &wid, "ask");
    let r = g.call("turn/run", json!({"sessionId": sid, "input": input("go")}));
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 9);
    let child_system = system(&bodies[1]);
    // The summary request shares the sub-session's prefix (its prompt, its tools).
    assert_eq!(system(&bodies[6]), child_system);
    assert!(
        bodies[7]["messages"][0]
            .to_string()
            .contains("CHILD-SUMMARY"),
        "the sub-session's view opens with its summary: {}",
        bodies[7]["messages"][0]
    );
    assert_eq!(
        system(&bodies[7]),
        child_system,
        "rebuilt as the same agent"
    );
    let parent = &bodies[8];
    assert_eq!(system(parent), system(&bodies[0]));
    let text = parent.to_string();
    assert!(text.contains("CHILD-REPORT") && !text.contains("CHILD-SUMMARY"));
}

#[test]
fn an_agent_runs_on_the_model_it_names() {
    let mock = Mock::start(vec![
        MockReply::Sse(
            AnthropicSse::new(MockUsage::new(10, 10))
                .tool_use(
                    "t1",
                    "agent",
                    &[r#"{"name": "fast", "task": "quick look"}"#],
                )
                .tool_use("t2", "agent", &[r#"{"name": "odd", "task": "anything"}"#])
                .finish("tool_use"),
        ),
        MockReply::Sse(answer("FAST-REPORT", 3, 1)),
        MockReply::Sse(answer("ODD-REPORT", 2, 1)),
        MockReply::Sse(answer("done", 3, 1)),
    ]);
    // Prices per million tokens: the agent's model is priced at its own, not the caller's.
    let prices = "[models.\"anthropic/claude-sonnet-4-5\"]\ninput_price = 3.0\noutput_price = 15.0\n\
                  [models.\"anthropic/claude-haiku-4-5\"]\ninput_price = 1.0\noutput_price = 5.0\n";
    let (mut g, _h, ws, wid) = setup(&mock, prices);
    write(
        ws.path(),
        ".garuda/agents/fast.md",
        "---\ndescription: Quick looks.\ntools: Read\nmodel: anthropic/claude-haiku-4-5\n---\nBe quick.\n",
    );
    write(
        ws.path(),
        ".garuda/agents/odd.md",
        "---\ndescription: Odd one.\nmodel: nowhere\n---\nBe odd.\n",
    );
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    // A model no config or table knows is refused at the start: the agent runs on the
    // caller's.
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains(".garuda/agents/odd.md: model \\\"nowhere\\\" is refused"),
        "{warnings}"
    );
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    let r = g.call("turn/run", json!({"sessionId": sid, "input": input("go")}));
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    assert_eq!(bodies.len(), 4);
    assert_eq!(bodies[0]["model"], "claude-sonnet-4-5");
    assert_eq!(bodies[1]["model"], "claude-haiku-4-5");
    assert_eq!(bodies[2]["model"], "claude-sonnet-4-5");
    let last = bodies[3].to_string();
    assert!(
        last.contains("FAST-REPORT") && last.contains("ODD-REPORT"),
        "{last}"
    );
    let cost = g
        .turn_events()
        .iter()
        .filter(|e| e["kind"] == "usage")
        .filter_map(|e| e["costUsd"].as_f64())
        .next_back()
        .expect("a cost");
    // The caller and the odd agent on its model: 10 + 2 + 3 input and 10 + 1 + 1 output
    // tokens at 3 and 15 dollars a million; the fast agent: 3 input and 1 output at 1 and 5.
    let want = (15.0 * 3.0 + 12.0 * 15.0 + 3.0 + 5.0) / 1e6;
    assert!((cost - want).abs() < 1e-9, "cost {cost}, want {want}");
}

#[test]
fn allow_always_in_an_agent_holds_for_its_caller() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t_a",
            "agent",
            &[r#"{"name": "runner", "task": "echo one"}"#],
        )),
        MockReply::Sse(anthropic_tool_use(
            "t_b1",
            "bash",
            &[r#"{"command": "echo one"}"#],
        )),
        MockReply::Sse(answer("ran one", 3, 1)),
        MockReply::Sse(anthropic_tool_use(
            "t_b2",
            "bash",
            &[r#"{"command": "echo two"}"#],
        )),
        MockReply::Sse(answer("done", 3, 1)),
    ]);
    let (mut g, _h, ws, wid) = setup(&mock, "");
    write(
        ws.path(),
        ".garuda/agents/runner.md",
        "---\ndescription: Runs commands.\ntools: Bash\n---\nRun.\n",
    );
    let sid = session(&mut g, &wid, "ask");
    let mut asked = 0;
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": input("go")}),
        |m| {
            if m["method"] == "permission/request" {
                asked += 1;
            }
            json!({"optionId": "allow_always"})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(
        asked, 1,
        "the caller's bash was allowed by the agent's answer"
    );
    assert!(mock.rec.bodies()[4].to_string().contains("two"));
}

fn agent_request_tools(bodies: &[Value]) -> Vec<String> {
    let child = bodies
        .iter()
        .find(|b| is_agent_request(b))
        .expect("a sub-session request");
    tool_names(child)
}

#[test]
fn an_agent_gets_the_client_tools_and_skills_its_file_lists() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t_agent",
            "agent",
            &[r#"{"name": "helper", "task": "look at the selection"}"#],
        )),
        MockReply::Sse(anthropic_tool_use("t_sel", "editor_selection", &["{}"])),
        MockReply::Sse(answer("SELECTION-IS: fn main", 4, 2)),
        MockReply::Sse(answer("done", 5, 1)),
    ]);
    let (mut g, _h, ws, wid) = setup(&mock, "");
    write(
        ws.path(),
        ".garuda/agents/helper.md",
        "---\nname: helper\ndescription: Helps.\ntools: Read, editor_selection, Skill, not_a_tool\n---\nHelp.\n",
    );
    write(
        ws.path(),
        ".garuda/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Ship a release.\n---\nDEPLOY-BODY\n",
    );
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto", "tools": [{"name": "editor_selection", "description": "The selected text", "inputSchema": {"type": "object"}}]}),
    );
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("helper.md: this session has no tool called not_a_tool"),
        "{r}"
    );
    assert!(!warnings.contains("editor_selection"), "{r}");
    let sid = r["sessionId"].as_str().expect("sid").to_string();
    let mut calls = Vec::new();
    let r = g.request_serving(
        "turn/run",
        json!({"sessionId": sid, "input": input("what is selected?")}),
        |req| {
            calls.push(req.clone());
            json!({"content": "fn main() {}"})
        },
    );
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(calls.len(), 1, "{calls:?}");
    let p = &calls[0]["params"];
    assert_eq!(calls[0]["method"], "tool/call");
    assert_eq!(
        p["sessionId"],
        sid.as_str(),
        "called in the caller's session"
    );
    assert_eq!(p["name"], "editor_selection");
    assert_eq!(p["agent"]["name"], "helper", "{p}");
    assert_eq!(p["agent"]["toolCallId"], "t_agent", "{p}");
    let child = p["agent"]["sessionId"]
        .as_str()
        .expect("child id")
        .to_string();
    assert_ne!(child, sid);

    let bodies = mock.rec.bodies();
    assert_eq!(
        agent_request_tools(&bodies),
        ["read_file", "skill", "editor_selection"]
    );
    let skill = bodies[1]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "skill")
        .expect("skill")
        .clone();
    assert!(
        skill["description"].to_string().contains("deploy"),
        "{skill}"
    );
    assert!(bodies[2].to_string().contains("fn main() {}"));
    assert!(bodies[3].to_string().contains("SELECTION-IS"));
}

#[test]
fn an_agent_gets_the_mcp_tools_its_file_lists_and_explore_gets_none() {
    let Some(cfg) = crate::mcp::everything_config("everything", "") else {
        return;
    };
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t_agent",
            "agent",
            &[r#"{"name": "echoer", "task": "echo hello"}"#],
        )),
        MockReply::Sse(anthropic_tool_use(
            "t_echo",
            "mcp__everything__echo",
            &[r#"{"message": "HELLO-FROM-MCP"}"#],
        )),
        MockReply::Sse(answer("ECHOED", 4, 2)),
        MockReply::Sse(anthropic_tool_use(
            "t_x",
            "explore",
            &[r#"{"task": "anything?"}"#],
        )),
        MockReply::Sse(answer("nothing", 4, 2)),
        MockReply::Sse(answer("done", 5, 1)),
    ]);
    let (mut g, _h, ws, wid) = setup(&mock, &cfg);
    write(
        ws.path(),
        ".garuda/agents/echoer.md",
        "---\nname: echoer\ndescription: Echoes.\ntools: Read, mcp__everything__echo\n---\nEcho.\n",
    );
    let sid = session(&mut g, &wid, "full-auto");
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": input("echo")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let bodies = mock.rec.bodies();
    assert!(
        tool_names(&bodies[0]).len() > 5,
        "the caller has every MCP tool"
    );
    assert_eq!(
        tool_names(&bodies[1]),
        ["read_file", "mcp__everything__echo"]
    );
    assert!(
        bodies[2].to_string().contains("HELLO-FROM-MCP"),
        "ran on the shared server"
    );
    assert_eq!(
        tool_names(&bodies[4]),
        ["read_file", "list_files", "glob", "grep"],
        "explore stays with the built-in reads"
    );
}

#[test]
fn an_agents_stream_reaches_the_client_marked_with_the_agent() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t_x",
            "explore",
            &[r#"{"task": "what is in a.txt?"}"#],
        )),
        MockReply::Sse(
            AnthropicSse::new(MockUsage::new(10, 10))
                .text("Looking at the file now.")
                .tool_use("t_read", "read_file", &[r#"{"path": "a.txt"}"#])
                .finish("tool_use"),
        ),
        MockReply::Sse(answer("CHILD-REPORT: alpha and beta", 7, 3)),
        MockReply::Sse(answer("done", 5, 1)),
    ]);
    let home = tempfile::tempdir().expect("home");
    crate::turns::write_config(home.path(), "");
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("a.txt"), "alpha\nbeta\n").expect("write");
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(crate::client::Framing::Lsp, home.path(), &[], &env);
    g.call(
        "initialize",
        json!({"capabilities": {"experimental": {"garuda": {"agentEvents": true}}}}),
    );
    let wid = g.open(ws.path());
    let sid = session(&mut g, &wid, "ask");
    let r = g.call(
        "turn/run",
        json!({"sessionId": sid, "input": input("what is in a.txt?")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let updates: Vec<&Value> = g
        .backlog
        .iter()
        .filter(|m| m["method"] == "turn/update")
        .map(|m| &m["params"])
        .collect();
    let child: Vec<&Value> = updates
        .iter()
        .copied()
        .filter(|p| p.get("agent").is_some())
        .collect();
    assert!(!child.is_empty(), "{updates:?}");
    for p in &child {
        assert_eq!(p["sessionId"], sid.as_str(), "in the caller's turn: {p}");
        assert_eq!(p["agent"]["name"], "explore", "{p}");
        assert_eq!(p["agent"]["toolCallId"], "t_x", "{p}");
        assert_eq!(p["agent"]["parentSessionId"], sid.as_str(), "{p}");
        let kind = p["event"]["kind"].as_str().expect("kind");
        assert!(
            ["textDelta", "toolCallStarted", "toolCallFinished"].contains(&kind),
            "only text and tool calls here: {p}"
        );
    }
    let child_sid = child[0]["agent"]["sessionId"].as_str().expect("child");
    assert_ne!(child_sid, sid);
    let kinds: Vec<&str> = child
        .iter()
        .map(|p| p["event"]["kind"].as_str().unwrap_or("?"))
        .collect();
    let text: String = child
        .iter()
        .filter(|p| p["event"]["kind"] == "textDelta")
        .map(|p| p["event"]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(text, "Looking at the file now.CHILD-REPORT: alpha and beta");
    // Gathered: fewer events than the streamed pieces (three each).
    assert!(
        kinds.iter().filter(|k| **k == "textDelta").count() < 6,
        "{kinds:?}"
    );
    let started = child
        .iter()
        .position(|p| p["event"]["kind"] == "toolCallStarted")
        .expect("started");
    assert_eq!(child[started]["event"]["name"], "read_file");
    assert_eq!(child[started]["event"]["id"], "t_read");
    let finished = child
        .iter()
        .position(|p| p["event"]["kind"] == "toolCallFinished")
        .expect("finished");
    assert!(started < finished);
    assert!(
        child[finished]["event"]["output"]
            .to_string()
            .contains("alpha")
    );
    // All between the caller's own start and finish of the explore call.
    let own = |kind: &str| {
        updates
            .iter()
            .position(|p| {
                p.get("agent").is_none() && p["event"]["kind"] == kind && p["event"]["id"] == "t_x"
            })
            .expect(kind)
    };
    let first = updates
        .iter()
        .position(|p| p.get("agent").is_some())
        .expect("first");
    let last = updates
        .iter()
        .rposition(|p| p.get("agent").is_some())
        .expect("last");
    assert!(own("toolCallStarted") < first && last < own("toolCallFinished"));
}

#[test]
fn a_running_agents_session_opens_as_that_copy_and_takes_no_turn_until_its_call_ends() {
    let mock = Mock::start(vec![
        MockReply::Sse(anthropic_tool_use(
            "t_x",
            "explore",
            &[r#"{"task": "look around"}"#],
        )),
        MockReply::Slow(answer("CHILD-REPORT", 7, 3), Duration::from_millis(1500)),
        MockReply::Sse(answer("done", 5, 1)),
        MockReply::Sse(answer("continued", 3, 1)),
    ]);
    let (mut g, _h, _w, wid) = setup(&mock, "");
    let sid = session(&mut g, &wid, "ask");
    let id = g.send_request(
        "turn/run",
        json!({"sessionId": sid, "input": input("explore")}),
    );
    while mock.rec.count() < 2 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let list = g.call("session/list", json!({"workspaceId": wid}));
    let child = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|s| s["parentSessionId"] == sid.as_str())
        .and_then(|s| s["sessionId"].as_str())
        .expect("the running sub-session is listed")
        .to_string();
    // Loading it gives the running copy: readable, but no turn while its call runs.
    g.call("session/load", json!({"sessionId": child}));
    let msgs = g.call("session/messages", json!({"sessionId": child}));
    assert!(msgs.to_string().contains("look around"), "{msgs}");
    let busy = g.request(
        "turn/run",
        json!({"sessionId": child, "input": input("hello?")}),
    );
    let err = &busy["error"];
    assert_eq!(err["code"], -32056, "{busy}");
    assert_eq!(err["data"]["kind"], "agentRunning", "{busy}");
    assert_eq!(err["data"]["parentSessionId"], sid.as_str());
    assert_eq!(err["data"]["parentToolCallId"], "t_x");
    assert!(
        err["message"]
            .as_str()
            .expect("message")
            .contains("still running"),
        "{busy}"
    );
    let r = g.response(&json!(id));
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(mock.rec.count(), 3, "the refused turn asked nothing");
    // Once the call has ended, the same session goes on as the agent.
    let r = g.call(
        "turn/run",
        json!({"sessionId": child, "input": input("and now?")}),
    );
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    let msgs = g.call("session/messages", json!({"sessionId": child}));
    let text = msgs.to_string();
    assert_eq!(text.matches("look around").count(), 1, "{text}");
    assert!(text.contains("CHILD-REPORT") && text.contains("continued"));
}
