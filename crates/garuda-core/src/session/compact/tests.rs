use proptest::prelude::*;
use serde_json::json;

use std::collections::HashSet;

use super::*;
use crate::message::Message;
use crate::session::Record;
use crate::session::records::{CompactTrigger, MessageMeta};
use crate::session::view::tests::{
    msg, result_block, step, text, transcript, transcript_ids, use_block,
};
use crate::session::view::{View, ViewCache, ViewPolicy, build_view, check_pairing, message_chars};

fn policy() -> ViewPolicy {
    ViewPolicy {
        microcompact_after_ms: None,
        ..ViewPolicy::default()
    }
}

fn bash(id: &str, cmd: &str) -> Block {
    Block::ToolUse {
        id: id.into(),
        name: "bash".into(),
        input: json!({"command": cmd}),
    }
}

/// u0 then six rounds: assistant calls read_file, the user message holds a big result.
fn session() -> Vec<Record> {
    let mut recs = vec![text(
        "u0",
        Role::User,
        "Refactor the parser. Do not touch tests/.",
    )];
    for k in 0..6 {
        recs.push(msg(
            &format!("a{k}"),
            Role::Assistant,
            vec![
                Block::text(format!("step {k}")),
                use_block(&format!("t{k}"), "read_file"),
            ],
            k * 1000,
        ));
        recs.push(msg(
            &format!("r{k}"),
            Role::User,
            vec![result_block(
                &format!("t{k}"),
                &format!("{k}").repeat(3_000),
            )],
            k * 1000,
        ));
    }
    recs.push(text("a9", Role::Assistant, "All six files read."));
    recs
}

#[test]
fn thresholds() {
    let p = CompactPolicy::default();
    assert_eq!(threshold_tokens(200_000, 64_000, &p), 160_000);
    assert!(should_compact(160_001, 200_000, 64_000, &p));
    assert!(!should_compact(160_000, 200_000, 64_000, &p));
    assert_eq!(target_tokens(200_000, &p), 120_000);
    let r = CompactPolicy {
        use_reserved_formula: true,
        ..p
    };
    assert_eq!(threshold_tokens(200_000, 64_000, &r), 167_000);
    assert_eq!(threshold_tokens(200_000, 8_000, &r), 179_000);
    assert_eq!(threshold_tokens(10_000, 8_000, &r), 0);
}

#[test]
fn split_is_the_keep_steps_th_assistant_from_the_end() {
    let v = build_view(&session(), &policy(), 0);
    let i = split_index(&v.messages, 4).unwrap();
    assert_eq!(v.messages[i].id, "a3");
    assert_eq!(v.messages[i].message.role, Role::Assistant);
    assert_eq!(split_index(&v.messages, 7), Some(1));
    assert_eq!(split_index(&v.messages, 8), None);
    assert_eq!(
        split_index(&v.messages[1..], 7),
        None,
        "the oldest assistant at 0: nothing older"
    );
}

#[test]
fn stage1_trims_old_results_and_replays() {
    let recs = session();
    let v = build_view(&recs, &policy(), 0);
    let split = split_index(&v.messages, 4).unwrap();
    let p = CompactPolicy::default();
    let s = stage1(&v.messages, split, &p, 5);
    let rec = s.record.clone().unwrap();
    assert_eq!(rec.tool_use_ids, vec!["t0", "t1", "t2"]);
    assert_eq!(rec.keep_chars, 200);
    assert!(s.saved_chars > 3 * 2_700);
    assert_eq!(s.messages[split..], v.messages[split..]);
    let mut replay = recs.clone();
    replay.push(Record::Trim(rec));
    assert_eq!(build_view(&replay, &policy(), 0).messages, s.messages);
    // Nothing older than the split is long: nothing to do.
    let again = stage1(&s.messages, split, &p, 5);
    assert_eq!((again.saved_chars, again.record), (0, None));

    let e = TokenEstimator::default();
    assert!(stage1_enough(121_000, 8_000, 200_000, &e, &p));
    assert!(!stage1_enough(123_000, 8_000, 200_000, &e, &p));
    assert!(!stage1_enough(100_000, 0, 200_000, &e, &p));
}

#[test]
fn summary_source_is_small_and_the_instruction_names_the_target() {
    let thinking = Block::Thinking {
        thinking: "hmm".into(),
        signature: Some("sig".into()),
    };
    let img = Block::Image {
        source: crate::message::ImageSource::Url {
            url: "https://example.invalid/a.png".into(),
        },
    };
    let recs = vec![
        msg("u1", Role::User, vec![Block::text("look"), img], 0),
        msg(
            "a1",
            Role::Assistant,
            vec![thinking, Block::text("seen"), use_block("t1", "read_file")],
            0,
        ),
        msg(
            "r1",
            Role::User,
            vec![result_block("t1", &"x".repeat(5_000))],
            0,
        ),
    ];
    let v = build_view(&recs, &policy(), 0);
    let src = summary_source(&v.messages, 1_000, 200);
    assert_eq!(src[0].content[1], Block::text(IMAGE_MARKER));
    assert_eq!(src[1].content[0], Block::text("seen"));
    assert!(message_chars(&src[2]) < 400, "{}", message_chars(&src[2]));
    let instruction = summary_instruction(Some("Keep API names."), Some("the parser work"), 4_000);
    assert!(instruction.contains("under about 4000 tokens"));
    let msgs = chunk_messages(&src, None, &instruction);
    assert_eq!(
        msgs.last().and_then(|m| m.content.last()),
        Some(&Block::text(instruction.clone()))
    );
    check_pairing(&msgs).unwrap();
    insta::assert_snapshot!("summary_request", instruction);
}

#[test]
fn strip_analysis_cases() {
    assert_eq!(
        strip_analysis("<analysis>draft</analysis>\n<summary>\nS\n</summary>"),
        "S"
    );
    assert_eq!(strip_analysis("<analysis>x</analysis> plain"), "plain");
    assert_eq!(strip_analysis("no tags"), "no tags");
    assert_eq!(strip_analysis("<analysis>never closed"), "");
    assert_eq!(strip_analysis("<summary>open ended"), "open ended");
}

#[test]
fn chunks_keep_rounds_whole_and_the_head_first() {
    let v = build_view(&session(), &policy(), 0);
    let msgs = v.provider_messages();
    let groups = api_round_groups(&msgs);
    assert_eq!(groups.len(), 8);
    assert_eq!(groups[0], 0..1);
    assert_eq!(groups[1], 1..3);
    // Each round is about 3 000 characters: two per chunk of 7 000.
    let chunks = chunk_rounds(&msgs, 1, 7_000);
    assert!(chunks.len() >= 3, "{}", chunks.len());
    assert_eq!(chunks[0][0], msgs[0]);
    let mut so_far = None;
    for c in &chunks {
        assert!(c.iter().map(message_chars).sum::<usize>() <= 7_000);
        let req = chunk_messages(c, so_far, "summarize");
        assert_eq!(req[0].role, Role::User);
        check_pairing(&req).unwrap();
        so_far = Some("the summary so far");
    }
    let flat: Vec<Message> = chunks.concat();
    assert_eq!(flat, msgs, "nothing dropped when every round fits");
    // A round larger than a chunk keeps its head, with a marker.
    let tiny = chunk_rounds(&msgs, 1, 1_000);
    let text: String = tiny.concat().iter().map(Message::text).collect();
    assert!(tiny.concat().len() == msgs.len());
    for c in &tiny {
        assert!(
            c.iter().map(message_chars).sum::<usize>() <= 1_000 + 400,
            "{c:?}"
        );
    }
    assert!(text.contains("step 5"));
}

#[test]
fn extractive_handoff_collects_the_facts() {
    let recs = vec![
        text("u1", Role::User, "Fix the build.\nKeep it small."),
        msg(
            "a1",
            Role::Assistant,
            vec![bash("b1", "cargo build"), use_block("e1", "edit_file")],
            0,
        ),
        msg(
            "r1",
            Role::User,
            vec![
                result_block("b1", "error[E0425]\nexit code: 101"),
                result_block("e1", "ok"),
            ],
            0,
        ),
        msg("a2", Role::Assistant, vec![bash("b2", "cargo test")], 0),
        msg(
            "r2",
            Role::User,
            vec![result_block("b2", "ok\nexit code: 0")],
            0,
        ),
        text("a3", Role::Assistant, "Build fixed; tests pass."),
    ];
    let v = build_view(&recs, &policy(), 0);
    let todo = [TodoEntry {
        content: "add a test".into(),
        status: "pending".into(),
    }];
    let h = extractive_handoff(
        &v.messages,
        &todo,
        Some("<summary>\nEARLIER\n</summary>"),
        &|n| n == "bash",
    );
    assert!(h.starts_with(HANDOFF_LABEL));
    assert!(h.contains("EARLIER"));
    assert!(
        !h.contains("Fix the build."),
        "the user's words travel outside the handoff"
    );
    assert!(h.contains("- a.rs (edit_file)"));
    assert!(h.contains("`cargo build` — exit code 101"));
    assert!(h.contains("`cargo test` — exit code 0"));
    assert!(h.contains("Build fixed; tests pass."));
    assert!(h.contains("- [pending] add a test"));
    assert_eq!(exit_code("x\nExit code: 2"), Some(2));
    assert_eq!(exit_code("nothing"), None);
}

#[test]
fn restoration_budgets() {
    let v = build_view(&session(), &policy(), 0);
    let split = split_index(&v.messages, 4).unwrap();
    let e = TokenEstimator::default();
    let p = CompactPolicy::default();
    let f = |path: &str, chars: usize| FileSnapshot {
        path: path.into(),
        content: "x".repeat(chars),
    };
    let files = vec![
        f("a.rs", 100),      // in the kept part (read_file input path): skipped
        f("big.rs", 20_004), // 5 001 tokens: path only
        f("one.rs", 19_996), // 4 999
        f("one.rs", 10),     // duplicate: skipped
        f("two.rs", 19_996),
        f("three.rs", 19_996),
        f("four.rs", 19_996), // would pass 50 000 in all? 4 × 4 999 = 19 996: fits
        f("five.rs", 4),      // the sixth candidate: over the count
    ];
    let b = budgets(200_000, 32_000, &p);
    assert_eq!((b.restore_file, b.restore_total), (5_000, 50_000));
    let r = select_restored_files(
        &files,
        &v.messages[split..],
        &e,
        b.restore_files,
        b.restore_file,
        b.restore_total,
    );
    let got: Vec<(&str, bool)> = r
        .iter()
        .map(|r| (r.path.as_str(), r.content.is_some()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("big.rs", false),
            ("one.rs", true),
            ("two.rs", true),
            ("three.rs", true),
            ("four.rs", true)
        ]
    );
    let r = select_restored_files(&files[2..], &[], &e, 5, 5_000, 6_000);
    assert!(r[0].content.is_some());
    assert_eq!(r[1].path, "two.rs");
    assert!(r[1].content.is_none());
    assert!(restored_file_text(&r[1]).contains("too large"));
}

fn shape(v: &crate::session::view::View) -> String {
    let mut s = String::new();
    for m in &v.messages {
        s.push_str(&format!("{:?} meta={:?}\n", m.message.role, m.meta));
        for b in &m.message.content {
            let line = match b {
                Block::Text { text } => format!("  text: {}", text.replace('\n', "\n        ")),
                Block::ToolUse { id, name, .. } => format!("  tool_use {id} {name}"),
                Block::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } => {
                    let t: String = crate::session::view::result_text(content)
                        .chars()
                        .take(60)
                        .collect();
                    format!("  tool_result {tool_use_id}: {t}")
                }
                other => format!("  {other:?}"),
            };
            s.push_str(&line);
            s.push('\n');
        }
    }
    s
}

/// Plans an installation of `v` at `split` with a plain model summary and default budgets.
fn install(
    v: &View,
    recs: &[Record],
    kept: &KeptPlan,
    summary: SummaryText,
    files: &[FileSnapshot],
    todo: &[TodoEntry],
    window: u64,
) -> Installation {
    let e = TokenEstimator::default();
    let p = CompactPolicy::default();
    let b = budgets(window, 8_000, &p);
    let words = user_messages(recs);
    let origin = origins(recs);
    let present: HashSet<String> = v.messages[kept.split..]
        .iter()
        .flat_map(|m| m.source_ids.iter())
        .map(|id| origin.get(id).cloned().unwrap_or_else(|| id.clone()))
        .collect();
    let pinned = pin(&words, &present, (b.user_words * 4) as usize);
    plan_installation(&InstallInput {
        messages: &v.messages,
        kept,
        summary,
        pinned: &pinned,
        trigger: CompactTrigger::Auto,
        tokens_before: u64::MAX,
        fixed_tokens: 3_000,
        transcript_path: "/state/s1.jsonl",
        files,
        todo,
        git_state: None,
        instructions: None,
        budgets: &b,
        trim_to: p.trim_to,
        estimator: &e,
        now_ms: 99,
        summarizer: crate::session::records::Summarizer::Fork,
        summary_usage: None,
        references: &[],
        edited: &[],
        skills: &[],
        plan: None,
    })
}

#[test]
fn loaded_skills_come_back_within_their_budgets_most_recent_first() {
    let e = TokenEstimator::default();
    let b = budgets(200_000, 8_000, &CompactPolicy::default());
    assert_eq!((b.restore_skill, b.restore_skills_total), (5_000, 25_000));
    let small = budgets(40_000, 8_000, &CompactPolicy::default());
    assert_eq!(
        (small.restore_skill, small.restore_skills_total),
        (1_000, 5_000)
    );
    let skill = |name: &str, chars: usize| SkillSnapshot {
        name: name.into(),
        text: format!("<skill name=\"{name}\">{}</skill>", "s".repeat(chars)),
    };
    let skills = [
        skill("recent", 100),
        skill("huge", 100_000),
        skill("old", 100),
    ];
    let out = select_restored_skills(&skills, &[], &e, &b);
    assert_eq!(out.len(), 3);
    assert!(out[0].starts_with("<restored_skill name=\"recent\">"));
    // One skill over its budget is cut to it, with a note to load it again.
    assert!(out[1].contains("load it again") && e.estimate(out[1].chars().count()) <= 5_000);
    assert!(out[2].contains("name=\"old\""));
    // Six large skills stop at the total.
    let many: Vec<SkillSnapshot> = (0..8).map(|i| skill(&format!("s{i}"), 30_000)).collect();
    let out = select_restored_skills(&many, &[], &e, &b);
    let total: u64 = out.iter().map(|t| e.estimate(t.chars().count())).sum();
    assert!(total <= 25_000 && out.len() < 8, "{total} {}", out.len());
}

#[test]
fn the_approved_plan_comes_back_within_its_budget_unless_kept() {
    let e = TokenEstimator::default();
    let b = budgets(200_000, 8_000, &CompactPolicy::default());
    assert_eq!(b.restore_plan, 5_000);
    assert_eq!(restored_plan(None, &[], &e, &b), None);
    let out = restored_plan(Some("1. Fix the parser"), &[], &e, &b).unwrap();
    assert!(out.starts_with("<restored_plan>\nThe user approved this plan"));
    assert!(out.contains("\n1. Fix the parser\n</restored_plan>"));
    let long = "p".repeat(100_000);
    let cut = restored_plan(Some(&long), &[], &e, &b).unwrap();
    assert!(cut.contains("cut here") && e.estimate(cut.chars().count()) <= 5_000);
    // The call that presented it is still in the kept part: nothing to restore.
    let mut recs = session();
    recs.push(msg(
        "a9",
        Role::Assistant,
        vec![Block::ToolUse {
            id: "p1".into(),
            name: "exit_plan_mode".into(),
            input: json!({"plan": "1. Fix the parser"}),
        }],
        0,
    ));
    let v = build_view(&recs, &policy(), 0);
    assert_eq!(
        restored_plan(Some("1. Fix the parser"), &v.messages, &e, &b),
        None
    );
}

fn kept_at(v: &View, steps: usize) -> KeptPlan {
    plan_kept(&v.messages, steps, 200, usize::MAX).unwrap()
}

#[test]
fn installation_order_and_post_compact_view() {
    let mut recs = session();
    recs.push(text("u9", Role::User, "Now write the new parser."));
    let v = build_view(&recs, &policy(), 0);
    let kept = kept_at(&v, 4);
    assert_eq!(v.messages[kept.split].id, "a3");
    let files = [FileSnapshot {
        path: "src/parser.rs".into(),
        content: "fn parse() {}".into(),
    }];
    let todo = [TodoEntry {
        content: "write parser".into(),
        status: "in_progress".into(),
    }];
    let summary = SummaryText::Model(strip_analysis(
        "<analysis>a</analysis><summary>Completed Tasks\n• read files</summary>",
    ));
    let inst = install(&v, &recs, &kept, summary, &files, &todo, 200_000);
    let plan = &inst.records;
    let Record::CompactBoundary(b) = &plan[0] else {
        panic!()
    };
    assert_eq!(b.install_count as usize, plan.len() - 1);
    assert_eq!(b.kept_head_id.as_deref(), Some("a3"));
    assert_eq!(b.kept_tail_id.as_deref(), Some("u9"));
    // The anchor is the installed message the kept suffix hangs from: the summary here.
    assert_eq!(b.kept_anchor_id.as_deref(), Some(plan[1].uuid()));
    assert_eq!(b.tokens_after, inst.tokens_after);
    assert!(worth_installing(170_000, inst.tokens_after));
    let metas: Vec<Option<MessageMeta>> = plan[1..]
        .iter()
        .map(|r| r.as_message().unwrap().meta)
        .collect();
    assert_eq!(metas[0], Some(MessageMeta::Summary));
    assert_eq!(
        metas[metas.len() - 2..],
        [Some(MessageMeta::RestoredFile), Some(MessageMeta::Todo)]
    );
    // The first request travels verbatim in the summary message, outside the summary.
    let first = plan[1].as_message().unwrap().to_message().text();
    assert!(first.contains(
        "<first_user_request>\nRefactor the parser. Do not touch tests/.\n</first_user_request>"
    ));
    assert!(first.ends_with("</summary>"));
    // Re-parented chain.
    for w in plan[1..].windows(2) {
        assert_eq!(
            w[1].as_message().unwrap().parent_uuid.as_deref(),
            Some(w[0].uuid())
        );
    }
    assert_eq!(plan[2].as_message().unwrap().copy_of.as_deref(), Some("a3"));
    assert_eq!(inst.restored.len(), 1);

    recs.extend(plan.iter().cloned());
    let post = build_view(&recs, &policy(), 0);
    check_pairing(&post.provider_messages()).unwrap();
    assert!(post.chars() < v.chars());
    insta::assert_snapshot!("post_compact_view", shape(&post));
}

#[test]
fn the_older_part_never_ends_on_the_persons_request() {
    // "please read X" answered by a read: the older part used to end on that request, and the
    // summary instruction appended to it read as the person asking for a read.
    let mut recs = vec![
        text("u0", Role::User, "Hello."),
        text("a0", Role::Assistant, "Hi."),
        text("u1", Role::User, "please READ: big4.txt"),
    ];
    recs.push(msg(
        "a1",
        Role::Assistant,
        vec![use_block("t1", "read_file")],
        0,
    ));
    recs.push(msg("r1", Role::User, vec![result_block("t1", "big")], 0));
    recs.push(text("a2", Role::Assistant, "Read it."));
    let v = build_view(&recs, &policy(), 0);
    let kept = kept_at(&v, 2);
    assert_eq!(v.messages[kept.split].id, "u1");
    assert_eq!(v.messages[kept.split - 1].id, "a0");
    // Nothing older than the request: the split stays at its answer.
    let v = build_view(&recs[2..], &policy(), 0);
    assert_eq!(v.messages[kept_at(&v, 2).split].id, "a1");
    // A split after tool results stays: the older part ends on the results it called for.
    let v = build_view(&recs, &policy(), 0);
    assert_eq!(v.messages[kept_at(&v, 1).split].id, "a2");
}

#[test]
fn budgets_scale_with_the_window() {
    let p = CompactPolicy::default();
    let big = budgets(200_000, 32_000, &p);
    assert_eq!(
        (big.threshold, big.target, big.summary, big.user_words),
        (160_000, 120_000, 20_000, 20_000)
    );
    assert_eq!((big.restore_file, big.restore_total), (5_000, 50_000));
    let small = budgets(40_000, 8_000, &p);
    assert_eq!((small.summary, small.user_words), (4_000, 4_000));
    assert_eq!((small.restore_file, small.restore_total), (1_000, 10_000));
    let huge = budgets(1_000_000, 32_000, &p);
    assert_eq!((huge.restore_file, huge.restore_total), (5_000, 50_000));
    assert_eq!(huge.summary, SHARE_CAP);
}

#[test]
fn kept_steps_shrink_until_they_fit() {
    let recs = session();
    let v = build_view(&recs, &policy(), 0);
    let all = kept_at(&v, 4);
    assert_eq!((all.steps, all.trimmed.len()), (4, 0));
    // Less room: the results before the newest step are cut first.
    let p = plan_kept(&v.messages, 4, 200, 4_000).unwrap();
    assert_eq!(p.steps, 4);
    assert_eq!(p.trimmed.len(), 3, "{p:?}");
    assert!(p.chars <= 4_000);
    // Even less: fewer steps.
    let p = plan_kept(&v.messages, 4, 200, 600).unwrap();
    assert_eq!((p.steps, p.trimmed.len()), (2, 1), "{p:?}");
    assert!(p.chars <= 600);
    // Nothing fits: one step, every result cut.
    let p = plan_kept(&v.messages, 4, 200, 10).unwrap();
    assert_eq!(p.steps, 1);
    assert!(p.chars < 400);
    // A view without an assistant message has nothing older.
    let one = build_view(&recs[..1], &policy(), 0);
    assert_eq!(plan_kept(&one.messages, 4, 200, 10), None);
}

#[test]
fn regenerated_material_is_left_out() {
    let mut recs = session();
    let restored = Record::Message(crate::session::records::MessageRecord {
        uuid: "rf".into(),
        parent_uuid: None,
        role: Role::User,
        content: vec![Block::text(
            "<restored_file path=\"a.rs\">old</restored_file>",
        )],
        time: 0,
        meta: Some(MessageMeta::RestoredFile),
        is_virtual: false,
        copy_of: None,
    });
    recs.insert(recs.len() - 1, restored);
    recs.push(text("u9", Role::User, "next"));
    let v = build_view(&recs, &policy(), 0);
    let merged = v
        .messages
        .iter()
        .find(|m| m.source_ids.iter().any(|s| s == "rf"))
        .unwrap();
    assert!(merged.message.content.len() > 1, "merged with the results");
    let clean = without_regenerated(&v.messages, &recs);
    assert_eq!(clean.len(), v.messages.len());
    assert!(
        !clean
            .iter()
            .any(|m| m.message.text().contains("restored_file"))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn compaction_never_grows_the_view(steps in prop::collection::vec(step(), 0..50), keep in 1usize..5) {
        let recs = transcript(&steps);
        let v = build_view(&recs, &policy(), 0);
        let Some(split) = split_index(&v.messages, keep) else { return Ok(()) };
        let p = CompactPolicy { keep_steps: keep, ..CompactPolicy::default() };
        let e = TokenEstimator::default();

        let s1 = stage1(&v.messages, split, &p, 0);
        let s1_chars: usize = s1.messages.iter().map(|m| message_chars(&m.message)).sum();
        prop_assert_eq!(v.chars() - s1.saved_chars, s1_chars);
        if let Some(rec) = s1.record.clone() {
            let mut r = recs.clone();
            r.push(Record::Trim(rec));
            prop_assert_eq!(&build_view(&r, &policy(), 0).messages, &s1.messages);
        }

        let view = View { messages: s1.messages.clone(), ..v.clone() };
        let kept = plan_kept(&view.messages, keep, p.trim_to, usize::MAX).unwrap();
        let split = with_its_request(&view.messages, split);
        prop_assert_eq!(kept.split, split);
        let handoff = extractive_handoff(&view.messages[..split], &[], None, &|n| n == "bash");
        let inst = install(&view, &recs, &kept, SummaryText::Extractive(handoff), &[], &[], 200_000);
        let mut r = recs.clone();
        r.extend(inst.records);
        let post = build_view(&r, &policy(), 0);
        prop_assert!(check_pairing(&post.provider_messages()).is_ok());
        if worth_installing(e.estimate(v.chars()) + 3_000, inst.tokens_after) {
            prop_assert!(e.estimate(post.chars()) <= e.estimate(v.chars()) + 3_000);
        }
        // The kept steps come back verbatim after the summary; a kept request of the person's
        // joins the summary's user message, its blocks unchanged at its end.
        let mut kept_msgs: Vec<&Message> = view.messages[split..].iter().map(|m| &m.message).collect();
        if kept_msgs.first().is_some_and(|m| m.role == Role::User) {
            let head = kept_msgs.remove(0);
            prop_assert!(post.messages[0].message.content.ends_with(&head.content));
        }
        let post_kept: Vec<&Message> = post.messages[1..1 + kept_msgs.len().min(post.messages.len() - 1)].iter().map(|m| &m.message).collect();
        prop_assert_eq!(&post_kept[..kept_msgs.len().saturating_sub(1)], &kept_msgs[..kept_msgs.len().saturating_sub(1)]);
    }
}

#[test]
fn installed_compaction_survives_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::session::store::SessionStore::new(dir.path());
    let header = crate::session::records::SessionHeader::new("/ws", "replay:x");
    let mut f = store.create(&header).unwrap();
    let mut recs = session();
    f.append_batch(&recs).unwrap();
    let vp = store.view_policy(&header.session_id);
    let v = build_view(&recs, &vp, 0);
    // Little room: kept results are cut by a trim record in the same batch.
    let kept = plan_kept(&v.messages, 2, 200, 2_000).unwrap();
    assert!(!kept.trimmed.is_empty());
    let handoff = extractive_handoff(&v.messages[..kept.split], &[], None, &|n| n == "bash");
    let inst = install(
        &v,
        &recs,
        &kept,
        SummaryText::Extractive(handoff),
        &[],
        &[],
        40_000,
    );
    assert!(matches!(inst.records.last(), Some(Record::Trim(_))));
    f.append_batch(&inst.records).unwrap();
    recs.extend(inst.records);
    let live = build_view(&recs, &vp, 0);
    let loaded = store.load(&header.session_id).unwrap();
    assert_eq!(loaded.records, recs);
    assert_eq!(build_view(&loaded.records, &vp, 0), live);
    assert_eq!(live.messages[0].meta, Some(MessageMeta::Handoff));
    assert!(live.messages[0].message.text().contains(HANDOFF_LABEL));
    assert!(
        !live.altered.is_empty(),
        "the cut kept results are not whole"
    );
    check_pairing(&live.provider_messages()).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    #[test]
    fn sessions_stay_valid_and_keep_the_users_words_across_compactions(
        rounds in prop::collection::vec(prop::collection::vec(step(), 0..25), 1..4),
        keep in 1usize..4,
    ) {
        let policy = policy();
        let mut recs: Vec<Record> = Vec::new();
        let mut cache = ViewCache::new();
        for (r, steps) in rounds.iter().enumerate() {
            recs.extend(transcript_ids(steps, &format!("r{r}m")));
            let v = build_view(&recs, &policy, 0);
            prop_assert_eq!(cache.view(&recs, &policy, 0), &v);
            prop_assert!(check_pairing(&v.provider_messages()).is_ok());
            let Some(kept) = plan_kept(&v.messages, keep, 200, usize::MAX) else { continue };
            // A summary that forgets everything the user said.
            let inst = install(&v, &recs, &kept, SummaryText::Model(format!("summary {r}")), &[], &[], 1_000_000);
            recs.extend(inst.records);
            let post = build_view(&recs, &policy, 0);
            prop_assert_eq!(cache.view(&recs, &policy, 0), &post);
            prop_assert!(check_pairing(&post.provider_messages()).is_ok());
            prop_assert_eq!(post.messages[0].meta, Some(MessageMeta::Summary));
            // Every message the user wrote is still in the view, verbatim (the budget at
            // this window holds them all).
            let all: String = post.messages.iter().map(|m| m.message.text()).collect();
            for w in user_messages(&recs) {
                prop_assert!(all.contains(&w.text), "lost {:?}", w.text);
            }
        }
    }
}

#[test]
fn auto_collapse_takes_the_middle_and_keeps_the_task_and_the_kept_steps() {
    // One long turn: it is running, so it stays whole.
    let single = build_view(&session(), &policy(), 0);
    assert_eq!(auto_collapse_span(&single, 4, 0), None);
    let mut recs = session();
    recs.push(text("u9", Role::User, "Now the lexer."));
    recs.push(text("a10", Role::Assistant, "On it."));
    let v = build_view(&recs, &policy(), 0);
    // Kept: the last 4 steps (from a4); the span runs from a0 (after the task u0) to r3.
    let (from, to) = auto_collapse_span(&v, 4, 0).unwrap();
    assert_eq!((from.as_str(), to.as_str()), ("a0", "r3"));
    // Too small a gain: no collapse.
    assert_eq!(auto_collapse_span(&v, 4, usize::MAX), None);
    // Nothing between the task and the kept steps: no collapse.
    assert_eq!(auto_collapse_span(&v, 8, 0), None);
    // After a collapse, the next span starts after its summary.
    let mut recs2 = recs.clone();
    recs2.push(Record::Collapse(crate::session::records::CollapseRecord {
        uuid: "c1".into(),
        time: 0,
        from_id: "a0".into(),
        to_id: "r1".into(),
        span_ids: vec!["a0".into(), "r0".into(), "a1".into(), "r1".into()],
        summary: "done".into(),
        auto: true,
    }));
    let v2 = build_view(&recs2, &policy(), 0);
    assert_eq!(v2.collapses, vec!["c1"]);
    let (from, to) = auto_collapse_span(&v2, 4, 0).unwrap();
    assert_eq!((from.as_str(), to.as_str()), ("a2", "r3"));
    assert_eq!(auto_collapse_span(&v2, 6, 0), None);
    let r = crate::session::view::relief_report(&recs2, &v2);
    assert_eq!((r.collapses, r.auto_collapses), (1, 1));
    // The user's words of a span, verbatim, for the collapse summary.
    let words = span_user_words(&recs, &["u9".to_string()], 10_000).unwrap();
    assert!(
        words.contains("<message>\nNow the lexer.\n</message>"),
        "{words}"
    );
    assert_eq!(span_user_words(&recs, &["a0".to_string()], 10_000), None);
}

#[test]
fn collapse_band_and_nudge_growth() {
    let p = CompactPolicy::default();
    assert_eq!(collapse_start(100_000, 80_000, &p), Some(60_000));
    // Past 100 000 the cap decides: what an old span costs grows with its size.
    assert_eq!(collapse_start(200_000, 160_000, &p), Some(60_000));
    assert_eq!(collapse_start(1_000_000, 800_000, &p), Some(60_000));
    let uncapped = CompactPolicy {
        collapse_max_tokens: 0,
        ..CompactPolicy::default()
    };
    assert_eq!(collapse_start(200_000, 160_000, &uncapped), Some(120_000));
    // A threshold lowered under the collapse threshold leaves no band.
    assert_eq!(collapse_start(100_000, 50_000, &p), None);
    let off = CompactPolicy {
        auto_collapse: false,
        ..CompactPolicy::default()
    };
    assert_eq!(collapse_start(100_000, 80_000, &off), None);
    let manual = CompactPolicy {
        auto_compact: false,
        ..CompactPolicy::default()
    };
    assert_eq!(collapse_start(100_000, 80_000, &manual), None);
    assert!(!nudge_due(19_999, 10_000, 100_000, 0.1));
    assert!(nudge_due(20_000, 10_000, 100_000, 0.1));
    assert!(!nudge_due(90_000, 0, 100_000, 0.0), "0 turns it off");
    let t = nudge_text(10_000, 20_000, 100_000);
    assert!(t.starts_with("<garuda_note>context_efficiency"));
    assert!(t.contains("snip tool") && t.contains("10000 tokens"));
}

#[test]
fn small_windows_keep_answer_room_and_summary_budgets_fit() {
    assert_eq!(output_floor(200_000), MIN_OUTPUT);
    assert_eq!(output_floor(4_096), 512);
    assert_eq!(output_floor(2_048), 256);
    assert_eq!(blocking_limit(4_096), 3_584);
    // The session's own output limit (200, for answers) does not cut the summary short.
    assert_eq!(summary_max_tokens(200, 409, 3_000), 409 * 2 + 512);
    // What the window leaves caps it.
    assert_eq!(summary_max_tokens(200, 409, 600), 600);
    // A model's real ceiling still caps a large window's summary.
    assert_eq!(summary_max_tokens(8_192, 20_000, 150_000), 8_192);
}

#[test]
fn a_fresh_start_keeps_only_the_current_request_after_a_note() {
    let recs = session();
    let v = build_view(&recs, &policy(), 0);
    let from = current_request(&v.messages).expect("a request");
    let est = crate::session::tokens::TokenEstimator::default();
    let note = fresh_start_note("/t.jsonl");
    let inst = plan_fresh_start(&FreshStart {
        messages: &v.messages,
        from,
        note: &note,
        trigger: CompactTrigger::Auto,
        tokens_before: 100_000,
        fixed_tokens: 1_000,
        estimator: &est,
        now_ms: 7,
    });
    let mut all = recs.clone();
    all.extend(inst.records.clone());
    let after = build_view(&all, &policy(), 0);
    assert!(all_text_of(&after.messages[0].message).contains("/t.jsonl"));
    let kept: Vec<&str> = after.messages.iter().map(|m| m.id.as_str()).collect();
    // The note merges into the request's user message.
    assert_eq!(after.messages.len(), v.messages.len() - from, "{kept:?}");
    assert_eq!(
        after.messages[1..]
            .iter()
            .map(|m| &m.message)
            .collect::<Vec<_>>(),
        v.messages[from + 1..]
            .iter()
            .map(|m| &m.message)
            .collect::<Vec<_>>()
    );
    assert!(
        check_pairing(&after.provider_messages()).is_ok(),
        "{kept:?}"
    );
    assert!(inst.tokens_after < 100_000);
}

fn all_text_of(m: &Message) -> String {
    m.content
        .iter()
        .filter_map(|b| match b {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_plain_summary_request_sees_a_provider_search_as_one_marker() {
    let [call, result] = crate::session::view::tests::server_search("srvtoolu_1", "serde derive");
    let msgs = vec![
        Message::user_text("search"),
        Message {
            role: crate::message::Role::Assistant,
            content: vec![Block::text("Looking."), call, result, Block::text("Found.")],
        },
    ];
    let rewritten = rewrite_for_summary(&msgs);
    assert_eq!(
        rewritten[1].content,
        [
            Block::text("Looking."),
            Block::text("[web search: serde derive → 1 result]"),
            Block::text("Found."),
        ]
    );
}
