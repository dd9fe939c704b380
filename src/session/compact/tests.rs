use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::session::view::tests::{
    msg, result_block, step, text, transcript, transcript_ids, use_block,
};
use crate::session::view::{ViewCache, ViewPolicy, build_view, check_pairing, message_chars};

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
fn summary_request_shares_prefix_and_snapshot() {
    let thinking = Block::Thinking {
        thinking: "hmm".into(),
        signature: Some("sig".into()),
    };
    let img = Block::Image {
        source: crate::message::ImageSource::Url {
            url: "https://example.invalid/a.png".into(),
        },
    };
    let prefix = vec![
        Message {
            role: Role::User,
            content: vec![Block::text("look"), img],
        },
        Message {
            role: Role::Assistant,
            content: vec![thinking, Block::text("seen")],
        },
    ];
    let shared = summary_request(
        &prefix,
        Some("Keep API names."),
        Some("the parser work"),
        true,
    );
    assert_eq!(shared.messages[..2], prefix[..]);
    assert_eq!(
        shared.cache,
        CachePlan {
            system: true,
            messages: vec![1]
        }
    );
    assert_eq!(shared.messages[2].text(), shared.instruction);
    let rewritten = summary_request(&prefix, None, None, false);
    assert_eq!(rewritten.messages[0].content[1], Block::text(IMAGE_MARKER));
    assert_eq!(rewritten.messages[1].content, vec![Block::text("seen")]);
    assert!(!rewritten.instruction.contains("compact instructions"));
    assert_eq!(
        rewritten.cache,
        CachePlan {
            system: true,
            messages: vec![]
        }
    );
    let ends_with_user = summary_request(&prefix[..1], None, None, false);
    assert_eq!(ends_with_user.messages.len(), 1);
    assert_eq!(
        ends_with_user.messages[0].content.last(),
        Some(&Block::text(ends_with_user.instruction.clone()))
    );
    insta::assert_snapshot!("summary_request", shared.instruction);
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
fn ptl_truncation_drops_oldest_rounds() {
    let v = build_view(&session(), &policy(), 0);
    let msgs = v.provider_messages();
    let groups = api_round_groups(&msgs);
    assert_eq!(groups.len(), 8);
    assert_eq!(groups[0], 0..1);
    assert_eq!(groups[1], 1..3);
    let t = truncate_head_for_ptl(&msgs).unwrap();
    assert_eq!(t[0].text(), TRUNCATED_MARKER);
    assert_eq!(t.len(), msgs.len());
    check_pairing(&t).unwrap();
    let mut cur = msgs.clone();
    let mut rounds = 0;
    while let Some(next) = truncate_head_for_ptl(&cur) {
        assert!(next.len() < cur.len() + 1);
        cur = next;
        rounds += 1;
        assert!(rounds < 20);
    }
    assert!(truncate_head_for_ptl(&[Message::user_text("x")]).is_none());
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
    let h = extractive_handoff(&v.messages, &todo);
    assert!(h.starts_with(HANDOFF_LABEL));
    assert!(h.contains("> Fix the build.\n> Keep it small."));
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
    let r = select_restored_files(&files, &v.messages[split..], &e, &p);
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
    let tight = CompactPolicy {
        restore_total_tokens: 6_000,
        ..p
    };
    let r = select_restored_files(&files[2..], &[], &e, &tight);
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

#[test]
fn installation_order_and_post_compact_view() {
    let mut recs = session();
    recs.push(text("u9", Role::User, "Now write the new parser."));
    let v = build_view(&recs, &policy(), 0);
    let split = split_index(&v.messages, 4).unwrap();
    let e = TokenEstimator::default();
    let p = CompactPolicy::default();
    let files = [FileSnapshot {
        path: "src/parser.rs".into(),
        content: "fn parse() {}".into(),
    }];
    let todo = [TodoEntry {
        content: "write parser".into(),
        status: "in_progress".into(),
    }];
    let input = InstallInput {
        view: &v,
        split,
        summary: SummaryText::Model(strip_analysis(
            "<analysis>a</analysis><summary>Completed Tasks\n• read files</summary>",
        )),
        trigger: CompactTrigger::Auto,
        tokens_before: 170_000,
        fixed_tokens: 3_000,
        transcript_path: "/state/s1.jsonl",
        files: &files,
        todo: &todo,
        instructions_note: Some("<garuda_note>Instructions re-read: AGENTS.md</garuda_note>"),
        estimator: &e,
        policy: &p,
        now_ms: 99,
    };
    let plan = plan_installation(&input);
    let Record::CompactBoundary(b) = &plan[0] else {
        panic!()
    };
    assert_eq!(b.install_count as usize, plan.len() - 1);
    assert_eq!(b.kept_head_id.as_deref(), Some("a3"));
    assert_eq!(b.kept_tail_id.as_deref(), Some("u9"));
    let after = planned_tokens_after(&plan).unwrap();
    assert!(worth_installing(170_000, after));
    assert!(!worth_installing(after, after));
    let metas: Vec<Option<MessageMeta>> = plan[1..]
        .iter()
        .map(|r| r.as_message().unwrap().meta)
        .collect();
    assert_eq!(metas[0], Some(MessageMeta::Summary));
    assert_eq!(
        metas[metas.len() - 3..],
        [
            Some(MessageMeta::RestoredFile),
            Some(MessageMeta::Todo),
            Some(MessageMeta::InstructionNote)
        ]
    );
    // Re-parented chain.
    for w in plan[1..].windows(2) {
        assert_eq!(
            w[1].as_message().unwrap().parent_uuid.as_deref(),
            Some(w[0].uuid())
        );
    }
    assert_eq!(plan[2].as_message().unwrap().copy_of.as_deref(), Some("a3"));

    recs.extend(plan);
    let post = build_view(&recs, &policy(), 0);
    check_pairing(&post.provider_messages()).unwrap();
    assert!(post.chars() < v.chars());
    insta::assert_snapshot!("post_compact_view", shape(&post));
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

        let view = crate::session::view::View { messages: s1.messages.clone(), ..v.clone() };
        let handoff = extractive_handoff(&view.messages[..split], &[]);
        let input = InstallInput {
            view: &view, split, summary: SummaryText::Extractive(handoff), trigger: CompactTrigger::Manual,
            tokens_before: e.estimate(v.chars()), fixed_tokens: 0, transcript_path: "/t.jsonl",
            files: &[], todo: &[], instructions_note: None, estimator: &e, policy: &p, now_ms: 0,
        };
        let plan = plan_installation(&input);
        let after = planned_tokens_after(&plan).unwrap();
        let mut r = recs.clone();
        r.extend(plan);
        let post = build_view(&r, &policy(), 0);
        prop_assert!(check_pairing(&post.provider_messages()).is_ok());
        if worth_installing(e.estimate(v.chars()), after) {
            prop_assert!(e.estimate(post.chars()) <= e.estimate(v.chars()));
        }
        // The kept steps come back verbatim after the summary.
        let kept: Vec<&Message> = view.messages[split..].iter().map(|m| &m.message).collect();
        let post_kept: Vec<&Message> = post.messages[1..1 + kept.len().min(post.messages.len() - 1)].iter().map(|m| &m.message).collect();
        prop_assert_eq!(&post_kept[..kept.len().saturating_sub(1)], &kept[..kept.len().saturating_sub(1)]);
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
    let split = split_index(&v.messages, 2).unwrap();
    let e = TokenEstimator::default();
    let p = CompactPolicy::default();
    let handoff = extractive_handoff(&v.messages[..split], &[]);
    let plan = plan_installation(&InstallInput {
        view: &v,
        split,
        summary: SummaryText::Extractive(handoff),
        trigger: CompactTrigger::Reactive,
        tokens_before: 9_000,
        fixed_tokens: 0,
        transcript_path: &f.path().display().to_string(),
        files: &[],
        todo: &[],
        instructions_note: None,
        estimator: &e,
        policy: &p,
        now_ms: 1,
    });
    f.append_batch(&plan).unwrap();
    recs.extend(plan);
    let live = build_view(&recs, &vp, 0);
    let loaded = store.load(&header.session_id).unwrap();
    assert_eq!(loaded.records, recs);
    assert_eq!(build_view(&loaded.records, &vp, 0), live);
    assert_eq!(live.messages[0].meta, Some(MessageMeta::Handoff));
    assert!(live.messages[0].message.text().contains(HANDOFF_LABEL));
    check_pairing(&live.provider_messages()).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    #[test]
    fn sessions_stay_valid_across_compactions(
        rounds in prop::collection::vec(prop::collection::vec(step(), 0..25), 1..4),
        keep in 1usize..4,
    ) {
        let policy = policy();
        let p = CompactPolicy { keep_steps: keep, ..CompactPolicy::default() };
        let e = TokenEstimator::default();
        let mut recs: Vec<Record> = Vec::new();
        let mut cache = ViewCache::new();
        for (r, steps) in rounds.iter().enumerate() {
            recs.extend(transcript_ids(steps, &format!("r{r}m")));
            let v = build_view(&recs, &policy, 0);
            prop_assert_eq!(cache.view(&recs, &policy, 0), &v);
            prop_assert!(check_pairing(&v.provider_messages()).is_ok());
            let Some(split) = split_index(&v.messages, keep) else { continue };
            let plan = plan_installation(&InstallInput {
                view: &v, split, summary: SummaryText::Model(format!("summary {r}")),
                trigger: CompactTrigger::Auto, tokens_before: u64::MAX, fixed_tokens: 0,
                transcript_path: "/t.jsonl", files: &[], todo: &[], instructions_note: None,
                estimator: &e, policy: &p, now_ms: 0,
            });
            recs.extend(plan);
            let post = build_view(&recs, &policy, 0);
            prop_assert_eq!(cache.view(&recs, &policy, 0), &post);
            prop_assert!(check_pairing(&post.provider_messages()).is_ok());
            prop_assert_eq!(post.messages[0].meta, Some(MessageMeta::Summary));
        }
    }
}
