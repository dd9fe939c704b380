use serde_json::{Value, json};

use super::*;
use crate::message::{Block, Message, Role};
use crate::session::compact::{CompactPolicy, budgets};

fn path_of(_: &str, input: &Value) -> Option<String> {
    input
        .get("path")
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn older() -> Vec<Message> {
    vec![
        Message::user_text("Please fix the parser in src/parser.rs"),
        Message {
            role: Role::Assistant,
            content: vec![
                Block::text("Reading it."),
                Block::ToolUse {
                    id: "t1".into(),
                    name: "read_file".into(),
                    input: json!({"path": "src/parser.rs"}),
                },
            ],
        },
        Message {
            role: Role::User,
            content: vec![Block::ToolResult {
                tool_use_id: "t1".into(),
                content: vec![Block::text("fn parse() { todo!() }\n".repeat(50))],
                is_error: false,
            }],
        },
        Message {
            role: Role::Assistant,
            content: vec![Block::text("The parser needs a tokenizer first.")],
        },
    ]
}

fn run_budgets() -> WorkerBudgets {
    let b = budgets(40_000, 8_000, &CompactPolicy::default());
    worker_budgets(&b, 8_000, 4.0)
}

#[test]
fn the_capture_has_one_entry_per_text_and_per_call_with_its_result() {
    let c = Capture::new(&older(), &path_of);
    let refs: Vec<&str> = c.entries.iter().map(|e| e.reference.as_str()).collect();
    assert_eq!(refs, ["E1", "E2", "E3", "E4"]);
    assert_eq!(c.entries[0].role, Role::User);
    assert_eq!(c.entries[2].tool.as_deref(), Some("read_file"));
    assert_eq!(c.entries[2].paths, ["src/parser.rs"]);
    assert!(c.entries[2].text.contains("result:\nfn parse()"));
    let o = c.overview(10_000);
    assert!(o.contains("4 entries"), "{o}");
    assert!(
        o.lines()
            .any(|l| l.starts_with("E3 tool read_file [src/parser.rs] ") && l.contains("chars")),
        "{o}"
    );
    assert!(o.contains("E1 user 38 chars: Please fix the parser"), "{o}");
}

#[test]
fn a_large_overview_shortens_previews_then_leaves_out_the_middle() {
    let msgs: Vec<Message> = (0..400)
        .map(|i| Message::user_text(format!("message {i} {}", "word ".repeat(40))))
        .collect();
    let c = Capture::new(&msgs, &path_of);
    let o = c.overview(6_000);
    assert!(o.chars().count() <= 6_000, "{}", o.len());
    assert!(o.contains("E1 user"), "the first entries stay");
    assert!(o.contains("E400 user"), "the last entries stay");
    assert!(o.contains("left out of this overview"), "{o}");
}

#[test]
fn search_finds_phrases_and_words_and_reads_are_bounded() {
    let c = Capture::new(&older(), &path_of);
    let s = c.search("tokenizer", 2_000);
    assert!(
        s.contains("1 entries match") && s.contains("E4 assistant"),
        "{s}"
    );
    let s = c.search("parser first", 2_000);
    assert!(s.contains("E4"), "every word: {s}");
    assert!(c.search("nothing like this", 2_000).starts_with("No entry"));
    let r = c.read("e3", 300).expect("read");
    assert!(r.starts_with("E3 tool read_file"), "{r}");
    assert!(r.chars().count() < 500, "bounded: {}", r.len());
    assert!(c.read("E9", 300).unwrap_err().contains("E1 to E4"));
}

#[test]
fn the_tools_are_exactly_the_seven_read_only_ones() {
    let names: Vec<String> = worker_tools().into_iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [
            "show_overview",
            "search_entries",
            "read_entry",
            "read_file",
            "mark_read_required",
            "add_reference",
            "write_summary"
        ]
    );
    assert_eq!(
        WorkerCall::parse("add_reference", &json!({"path": "a", "note": "b"})),
        Ok(WorkerCall::AddReference("a".into(), "b".into()))
    );
    assert!(WorkerCall::parse("edit_file", &json!({})).is_err());
    assert!(WorkerCall::parse("read_entry", &json!({})).is_err());
}

#[test]
fn budgets_scale_with_the_window() {
    let at = |w: u64| {
        let b = budgets(w, 8_000, &CompactPolicy::default());
        worker_budgets(&b, 8_000, 4.0)
    };
    assert_eq!(at(16_000).steps, 8);
    assert_eq!(at(40_000).steps, 10);
    assert_eq!(at(200_000).steps, 26);
    assert_eq!(at(40_000).tokens, 160_000);
    let b = at(16_000);
    assert!(b.request_tokens + b.max_output <= 16_000);
}

#[test]
fn warnings_come_once_then_the_order_to_write_now_then_the_end() {
    let mut run = WorkerRun::new(run_budgets(), 1_000);
    let steps = run.budgets.steps;
    let mut notes = Vec::new();
    while !run.spent() {
        run.step_done(100);
        if let Some(n) = run.budget_note() {
            notes.push((run.spent_so_far().0, n));
        }
    }
    assert_eq!(run.spent_so_far().0, steps);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert_eq!(notes[0].0, steps - 3);
    assert!(notes[1].1.contains("call write_summary now"));
    assert_eq!(notes[1].0, steps - 1);
    assert!(run.outcome().is_none(), "no write_summary, no outcome");
}

#[test]
fn spent_tokens_allow_one_last_request() {
    let mut run = WorkerRun::new(run_budgets(), 1_000);
    run.step_done(run.budgets.tokens);
    assert!(!run.spent());
    assert!(
        run.budget_note()
            .expect("note")
            .contains("write_summary now")
    );
    run.step_done(10);
    assert!(run.spent());
}

#[test]
fn nominations_stop_at_the_restoration_budget_with_a_clear_message() {
    let mut run = WorkerRun::new(run_budgets(), 1_000);
    let (file, total) = (run.budgets.restore_file, run.budgets.restore_total);
    assert!(
        run.nominate("big.rs", file + 1)
            .unwrap_err()
            .contains("add_reference")
    );
    let mut n = 0;
    let mut last = Ok(String::new());
    while last.is_ok() && n < 50 {
        last = run.nominate(&format!("f{n}.rs"), file);
        n += 1;
    }
    let e = last.unwrap_err();
    assert!(e.starts_with("refused:"), "{e}");
    assert!(e.contains("add_reference"), "{e}");
    assert!(run.nominate("f0.rs", file).is_ok(), "already nominated");
    run.add_reference("docs/a.md", "the design");
    run.add_reference("docs/a.md", "the design, revised");
    assert!(run.write_summary("   ", 0).is_err());
    let ok = run.write_summary("first", 2_000).expect("ok");
    assert!(ok.contains("shorter"), "{ok}");
    run.write_summary("second", 100).expect("ok");
    let out = run.outcome().expect("outcome");
    assert_eq!(out.summary, "second", "the last call wins");
    let used: u64 = out.nominated.len() as u64 * file;
    assert!(used <= total);
    assert_eq!(
        out.references,
        [("docs/a.md".into(), "the design, revised".into())]
    );
}

#[test]
fn fitting_clears_the_oldest_results_but_never_the_run_input() {
    let result = |id: &str, n: usize| Message {
        role: Role::User,
        content: vec![Block::ToolResult {
            tool_use_id: id.into(),
            content: vec![Block::text("x".repeat(n))],
            is_error: false,
        }],
    };
    let mut msgs = vec![
        Message::user_text("y".repeat(1_000)),
        result("a", 5_000),
        result("b", 5_000),
        result("c", 5_000),
    ];
    assert!(fit_conversation(&mut msgs, 12_000, 8_000));
    let text = |m: &Message| match &m.content[0] {
        Block::ToolResult { content, .. } => content[0].char_len(),
        Block::Text { text } => text.len(),
        _ => 0,
    };
    assert_eq!(text(&msgs[0]), 1_000);
    assert_eq!(text(&msgs[1]), CLEARED.len());
    assert_eq!(text(&msgs[2]), CLEARED.len());
    assert_eq!(text(&msgs[3]), 5_000);
    let mut small = vec![Message::user_text("y".repeat(1_000))];
    assert!(!fit_conversation(&mut small, 10, 5));
}

#[test]
fn the_run_input_states_the_budgets_todo_and_overview() {
    let c = Capture::new(&older(), &path_of);
    let b = run_budgets();
    let todo = vec![crate::session::compact::TodoEntry {
        content: "write the tokenizer".into(),
        status: "in_progress".into(),
    }];
    let s = run_input(
        &c.overview(b.overview_chars),
        &todo,
        None,
        4_000,
        &b,
        Some("Keep names."),
        Some("the parser"),
    );
    assert!(s.contains("Summary target: about 4000 tokens"), "{s}");
    assert!(s.contains("write the tokenizer"), "{s}");
    assert!(s.contains("Keep names.") && s.contains("the parser"), "{s}");
    assert!(s.contains("E3 tool read_file"), "{s}");
    assert_eq!(Summarizer::default(), Summarizer::Auto);
    assert!(Summarizer::Auto.uses_worker(2) && !Summarizer::Auto.uses_worker(1));
    assert!(Summarizer::Worker.uses_worker(1) && !Summarizer::Single.uses_worker(9));
}

#[test]
fn references_follow_the_summary_in_its_block_without_content() {
    use crate::session::compact::{REFERENCES_OPEN, SummaryText, with_references};
    let s = SummaryText::Model("Completed Tasks".into());
    assert_eq!(with_references(s.block(), &[]), s.block());
    let b = with_references(
        s.block(),
        &[
            ("docs/design.md".into(), "the plan".into()),
            ("b.rs".into(), String::new()),
        ],
    );
    let Block::Text { text } = b else { panic!() };
    assert!(
        text.starts_with("<summary>\nCompleted Tasks\n</summary>\n"),
        "{text}"
    );
    assert!(text.contains(REFERENCES_OPEN), "{text}");
    assert!(
        text.contains("- docs/design.md: the plan\n- b.rs\n</references>"),
        "{text}"
    );
}
