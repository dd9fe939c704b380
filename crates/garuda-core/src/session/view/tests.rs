use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::session::records::{
    CollapseRecord, CompactBoundaryRecord, CompactTrigger, InstallAbortedRecord,
    MediaRefusedRecord, MessageMeta, MessageRecord, MicrocompactRecord, ParsedLine, SnipRecord,
    parse_line,
};

pub(crate) fn msg(id: &str, role: Role, content: Vec<Block>, time: u64) -> Record {
    Record::Message(MessageRecord {
        uuid: id.into(),
        parent_uuid: None,
        role,
        content,
        time,
        meta: None,
        is_virtual: false,
        copy_of: None,
    })
}

pub(crate) fn text(id: &str, role: Role, t: &str) -> Record {
    msg(id, role, vec![Block::text(t)], 0)
}

pub(crate) fn use_block(id: &str, name: &str) -> Block {
    Block::ToolUse {
        id: id.into(),
        name: name.into(),
        input: json!({"path": "a.rs"}),
    }
}

pub(crate) fn result_block(id: &str, t: &str) -> Block {
    Block::ToolResult {
        tool_use_id: id.into(),
        content: vec![Block::text(t)],
        is_error: false,
    }
}

fn ids(view: &View) -> Vec<&str> {
    view.messages.iter().map(|m| m.id.as_str()).collect()
}

fn no_mc() -> ViewPolicy {
    ViewPolicy {
        microcompact_after_ms: None,
        ..ViewPolicy::default()
    }
}

#[test]
fn slices_after_latest_boundary_skipping_aborted() {
    let boundary = |id: &str| {
        Record::CompactBoundary(CompactBoundaryRecord {
            uuid: id.into(),
            time: 0,
            trigger: CompactTrigger::Auto,
            tokens_before: 0,
            tokens_after: 0,
            kept_head_id: None,
            kept_tail_id: None,
            kept_anchor_id: None,
            extractive: false,
            install_count: 1,
            summarizer: None,
            summary_usage: None,
        })
    };
    let recs = vec![
        text("a", Role::User, "old"),
        boundary("b1"),
        text("s", Role::User, "summary"),
        boundary("b2"),
        text("half", Role::User, "torn install"),
        Record::InstallAborted(InstallAbortedRecord {
            uuid: "x".into(),
            time: 0,
            boundary_id: "b2".into(),
        }),
        text("c", Role::Assistant, "after"),
    ];
    let v = build_view(&recs, &no_mc(), 0);
    assert_eq!(ids(&v), vec!["s", "c"]);
    assert_eq!(v.slice_start, 2);
    assert_eq!(
        v.cache,
        CachePlan {
            system: true,
            messages: vec![1]
        }
    );
}

#[test]
fn oversized_result_becomes_preview_with_path() {
    let big = "x".repeat(60_000);
    let recs = vec![
        text("u", Role::User, "go"),
        msg("a", Role::Assistant, vec![use_block("t1", "bash")], 0),
        msg("r", Role::User, vec![result_block("t1", &big)], 0),
    ];
    let policy = ViewPolicy {
        tool_results_dir: "/state/tr/s1".into(),
        ..no_mc()
    };
    let side = oversized_results(&recs[2].as_message().unwrap().to_message(), &policy);
    assert_eq!(side.len(), 1);
    assert_eq!(
        side[0].path,
        std::path::PathBuf::from("/state/tr/s1/t1.txt")
    );
    assert_eq!(side[0].text.len(), 60_000);
    let v = build_view(&recs, &policy, 0);
    let Block::ToolResult { content, .. } = &v.messages[2].message.content[0] else {
        panic!()
    };
    let t = result_text(content);
    assert!(t.starts_with(&"x".repeat(2_000)));
    assert!(t.contains("/state/tr/s1/t1.txt"));
    assert!(t.len() < 3_000);
}

#[test]
fn snip_drops_ids_relinks_and_protects_pairs() {
    let recs = vec![
        text("u1", Role::User, "task"),
        msg("a1", Role::Assistant, vec![use_block("t1", "read_file")], 0),
        msg("r1", Role::User, vec![result_block("t1", "content")], 0),
        text("a2", Role::Assistant, "noted"),
        text("u2", Role::User, "next"),
        text("a3", Role::Assistant, "done"),
        // a1 is snipped alone: protected, since r1 stays. a2 and u2 go.
        Record::Snip(SnipRecord {
            uuid: "s".into(),
            time: 0,
            removed_ids: vec!["a1".into(), "a2".into(), "u2".into()],
            failed_turn: false,
        }),
    ];
    let v = build_view(&recs, &no_mc(), 0);
    assert_eq!(ids(&v), vec!["u1", "a1", "r1", "a3"]);
    assert_eq!(v.protected, vec!["a1"]);
    assert_eq!(v.snipped, vec!["a2", "u2"]);
    assert_eq!(v.messages[3].parent.as_deref(), Some("r1"));
    check_pairing(&v.provider_messages()).unwrap();
    // Both sides snipped: the pair goes.
    let mut recs2 = recs.clone();
    recs2.push(Record::Snip(SnipRecord {
        uuid: "s2".into(),
        time: 0,
        removed_ids: vec!["r1".into()],
        failed_turn: false,
    }));
    let v = build_view(&recs2, &no_mc(), 0);
    assert_eq!(ids(&v), vec!["u1", "a3"]);
}

#[test]
fn snip_never_removes_the_first_request() {
    let mut note = MessageRecord::new(Role::User, vec![Block::text("<garuda_note>n")], None);
    note.uuid = "n0".into();
    note.meta = Some(MessageMeta::InstructionNote);
    let recs = vec![
        Record::Message(note),
        text("u1", Role::User, "the task and its acceptance criteria"),
        text("a1", Role::Assistant, "ok"),
        text("u2", Role::User, "more"),
        text("a2", Role::Assistant, "done"),
        Record::Snip(SnipRecord {
            uuid: "s".into(),
            time: 0,
            removed_ids: vec!["n0".into(), "u1".into(), "a1".into(), "u2".into()],
            failed_turn: false,
        }),
    ];
    let v = build_view(&recs, &no_mc(), 0);
    assert_eq!(v.first_request.as_deref(), Some("u1"));
    assert_eq!(ids(&v), vec!["u1", "a2"]);
    assert_eq!(v.protected, vec!["u1"]);
    assert_eq!(v.snipped, vec!["n0", "a1", "u2"]);
    let mut cache = ViewCache::new();
    assert_eq!(cache.view(&recs, &no_mc(), 0), &v);
    // After a compaction the summary message quotes the first request: it stays too.
    let boundary = Record::CompactBoundary(CompactBoundaryRecord {
        uuid: "b".into(),
        time: 0,
        trigger: CompactTrigger::Auto,
        tokens_before: 0,
        tokens_after: 0,
        kept_head_id: None,
        kept_tail_id: None,
        kept_anchor_id: None,
        extractive: false,
        install_count: 1,
        summarizer: None,
        summary_usage: None,
    });
    let mut summary = MessageRecord::new(Role::User, vec![Block::text("<summary>")], None);
    summary.uuid = "sum".into();
    summary.meta = Some(MessageMeta::Summary);
    let recs = vec![
        boundary,
        Record::Message(summary),
        text("a3", Role::Assistant, "next"),
        text("u4", Role::User, "go on"),
        Record::Snip(SnipRecord {
            uuid: "s2".into(),
            time: 0,
            removed_ids: vec!["sum".into(), "u4".into()],
            failed_turn: false,
        }),
    ];
    let v = build_view(&recs, &no_mc(), 0);
    assert_eq!(ids(&v), vec!["sum", "a3"]);
    assert_eq!(v.protected, vec!["sum"]);
}

#[test]
fn time_based_microcompact_clears_old_results_and_replays() {
    let mut recs = vec![text("u", Role::User, "go")];
    for k in 0..8 {
        let name = if k == 0 { "edit_file" } else { "read_file" };
        recs.push(msg(
            &format!("a{k}"),
            Role::Assistant,
            vec![use_block(&format!("t{k}"), name)],
            1_000,
        ));
        recs.push(msg(
            &format!("r{k}"),
            Role::User,
            vec![result_block(&format!("t{k}"), "body")],
            1_000,
        ));
    }
    let policy = ViewPolicy {
        compactable_tools: crate::tools::ToolRegistry::for_session(Vec::new())
            .unwrap()
            .compactable(),
        ..ViewPolicy::default()
    };
    let early = build_view(&recs, &policy, 1_000 + 60 * 60 * 1000);
    assert!(early.microcompact_due.is_empty());
    let now = 1_000 + 60 * 60 * 1000 + 1;
    let v = build_view(&recs, &policy, now);
    assert_eq!(v.microcompact_due, vec!["t1", "t2"]);
    let cleared = |v: &View, k: usize| {
        let Block::ToolResult { content, .. } = &v.messages[2 + 2 * k].message.content[0] else {
            panic!()
        };
        result_text(content) == CLEARED_TEXT
    };
    assert!(!cleared(&v, 0), "edit_file is not compactable");
    assert!(cleared(&v, 1) && cleared(&v, 2) && !cleared(&v, 3));
    recs.push(Record::Microcompact(MicrocompactRecord {
        uuid: "mc".into(),
        time: now,
        cleared_tool_use_ids: v.microcompact_due.clone(),
    }));
    let replay = build_view(&recs, &policy, now);
    assert!(replay.microcompact_due.is_empty());
    assert_eq!(replay.messages, v.messages);
    // On resume much later the same record gives the same view.
    assert_eq!(build_view(&recs, &no_mc(), 0).messages, v.messages);
}

#[test]
fn collapse_substitutes_summary_and_span_respects_pairs() {
    let recs = vec![
        text("u1", Role::User, "task"),
        msg("a1", Role::Assistant, vec![use_block("t1", "grep")], 0),
        msg("r1", Role::User, vec![result_block("t1", "hits")], 0),
        text("a2", Role::Assistant, "found"),
        text("u2", Role::User, "more"),
        text("a3", Role::Assistant, "ok"),
    ];
    let v = build_view(&recs, &no_mc(), 0);
    // a1..a1 widens to include its result r1.
    assert_eq!(collapse_span(&v, "a1", "a1").unwrap(), vec!["a1", "r1"]);
    assert_eq!(
        collapse_span(&v, "r1", "a2").unwrap(),
        vec!["a1", "r1", "a2"]
    );
    assert_eq!(collapse_span(&v, "a2", "a1"), Err(SpanError::Reversed));
    let span = collapse_span(&v, "a1", "a2").unwrap();
    let mut recs2 = recs.clone();
    recs2.push(Record::Collapse(CollapseRecord {
        uuid: "c1".into(),
        time: 0,
        from_id: "a1".into(),
        to_id: "a2".into(),
        span_ids: span,
        summary: "grep found hits".into(),
        auto: false,
    }));
    let v = build_view(&recs2, &no_mc(), 0);
    // The summary (user) merges with u1 before it and u2 after it.
    assert_eq!(v.messages.len(), 2);
    assert_eq!(v.messages[0].source_ids, vec!["u1", "c1", "u2"]);
    assert!(v.messages[0].message.text().contains("grep found hits"));
    assert_eq!(v.collapsed, vec!["a1", "r1", "a2"]);
    check_pairing(&v.provider_messages()).unwrap();
    // A span starting inside that merged message leaves what comes before it (the first
    // request, the earlier summary) out.
    assert_eq!(collapse_span(&v, "u2", "u2").unwrap(), vec!["u2"]);
    assert_eq!(collapse_span(&v, "c1", "u2").unwrap(), vec!["c1", "u2"]);
}

#[test]
fn normalization_repairs_pairs_and_media() {
    let img = Block::Image {
        source: crate::message::ImageSource::Base64 {
            media_type: "image/png".into(),
            data: "AA".into(),
        },
    };
    let mut virt = MessageRecord::new(Role::User, vec![Block::text("display only")], None);
    virt.uuid = "v".into();
    virt.is_virtual = true;
    let recs = vec![
        text("a0", Role::Assistant, "leading assistant"),
        msg("u1", Role::User, vec![Block::text("look"), img], 0),
        Record::Message(virt),
        text("u2", Role::User, "and this"),
        msg(
            "a1",
            Role::Assistant,
            vec![use_block("t1", "bash"), use_block("t2", "bash")],
            0,
        ),
        // Orphan result for an unknown call, and a result for t2 only.
        msg(
            "r",
            Role::User,
            vec![
                Block::text("note"),
                result_block("zz", "?"),
                result_block("t2", "ok"),
            ],
            0,
        ),
        msg("a2", Role::Assistant, vec![use_block("t3", "bash")], 0),
    ];
    let mut recs = recs;
    recs.push(Record::MediaRefused(MediaRefusedRecord {
        uuid: "m".into(),
        time: 0,
        message_ids: vec!["u1".into(), "a2".into()],
        reason: "image exceeds 5 MB maximum".into(),
    }));
    let v = build_view(&recs, &no_mc(), 0);
    assert_eq!(v.media_stripped, vec!["u1"]);
    let mut cache = ViewCache::new();
    assert_eq!(cache.view(&recs, &no_mc(), 0), &v);
    let msgs = v.provider_messages();
    check_pairing(&msgs).unwrap();
    assert_eq!(v.messages[0].id, "synthetic-start");
    assert_eq!(v.messages[2].source_ids, vec!["u1", "u2"]);
    assert!(v.messages[2].message.text().contains("image removed"));
    let Block::ToolResult {
        tool_use_id,
        content,
        is_error,
    } = &msgs[4].content[0]
    else {
        panic!()
    };
    assert_eq!((tool_use_id.as_str(), *is_error), ("t1", true));
    assert_eq!(result_text(content), INTERRUPTED_TEXT);
    assert!(
        matches!(&msgs[4].content[1], Block::ToolResult { tool_use_id, .. } if tool_use_id == "t2")
    );
    assert!(matches!(&msgs[4].content[2], Block::Text { text } if text == "note"));
    // The trailing unanswered call gets a synthesized result.
    assert_eq!(v.messages.last().unwrap().id, "synthetic-results-t3");
}

#[test]
fn id_tags_round_trip() {
    let recs = vec![
        text("u1", Role::User, "a"),
        text("a1", Role::Assistant, "b"),
        text("u2", Role::User, "c"),
    ];
    let v = build_view(&recs, &no_mc(), 0);
    let tagged = render_id_tags(&v);
    let tag = format!("[id:{}]", short_id("u2"));
    assert_eq!(tagged[2].content.last(), Some(&Block::text(tag.clone())));
    assert_eq!(tagged[1].content.len(), 1);
    assert_eq!(resolve_short_id(&v, &tag), Some(vec!["u2".to_string()]));
    assert_eq!(
        resolve_short_id(&v, &short_id("u1")),
        Some(vec!["u1".to_string()])
    );
    assert_eq!(resolve_short_id(&v, "nothing"), None);
    assert_eq!(
        resolve_id_range(&v, &short_id("u2"), &short_id("u1")),
        Some(vec!["u1".to_string(), "a1".to_string(), "u2".to_string()])
    );
    assert_eq!(short_id("u2"), short_id("u2"));
    assert_eq!(short_id("u2").len(), 8);
}

#[test]
fn cache_markers_follow_the_stable_prefixes() {
    let mut summary = text("s", Role::User, "summary");
    if let Record::Message(m) = &mut summary {
        m.meta = Some(crate::session::records::MessageMeta::Summary);
    }
    let mut recs = vec![summary];
    for k in 0..8 {
        let long = if k == 2 { 5_000 } else { 10 };
        recs.push(msg(
            &format!("a{k}"),
            Role::Assistant,
            vec![use_block(&format!("t{k}"), "read_file")],
            0,
        ));
        recs.push(msg(
            &format!("r{k}"),
            Role::User,
            vec![result_block(&format!("t{k}"), &"x".repeat(long))],
            0,
        ));
    }
    let v = build_view(&recs, &no_mc(), 0);
    // System, the summary, the message before the long result (a2 at 5, r2 at 6), the last.
    let last = v.messages.len() - 1;
    assert_eq!(
        v.cache,
        CachePlan {
            system: true,
            messages: vec![0, 5, last]
        }
    );
    assert!(v.cache.count() <= MAX_CACHE_MARKERS);
    // The incremental view places them the same way.
    let mut cache = ViewCache::new();
    cache.view(&recs[..10], &no_mc(), 0);
    assert_eq!(cache.view(&recs, &no_mc(), 0).cache, v.cache);
    // While the long result is the newest step's there is no third marker.
    let short = build_view(&recs[..7], &no_mc(), 0);
    assert_eq!(short.cache.messages, vec![0, short.messages.len() - 1]);
}

// ---------- property tests ----------

#[derive(Debug, Clone)]
pub(crate) enum Step {
    UserText,
    AssistantText,
    /// n tool calls; the mask says which get a result.
    Tools(u8, u8),
    Snip(Vec<prop::sample::Index>),
    Collapse(prop::sample::Index, prop::sample::Index),
    ClearOld,
}

pub(crate) fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::UserText),
        2 => Just(Step::AssistantText),
        4 => (1u8..4, any::<u8>()).prop_map(|(n, m)| Step::Tools(n, m)),
        1 => prop::collection::vec(any::<prop::sample::Index>(), 1..4).prop_map(Step::Snip),
        1 => (any::<prop::sample::Index>(), any::<prop::sample::Index>()).prop_map(|(a, b)| Step::Collapse(a, b)),
        1 => Just(Step::ClearOld),
    ]
}

/// Builds a transcript from steps; the time advances one minute per message.
pub(crate) fn transcript(steps: &[Step]) -> Vec<Record> {
    transcript_ids(steps, "m")
}

/// Like `transcript`, with message and tool ids starting with `tag`.
pub(crate) fn transcript_ids(steps: &[Step], tag: &str) -> Vec<Record> {
    let mut recs = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    let mut tool_ids: Vec<String> = Vec::new();
    let mut n = 0u64;
    let mut push = |recs: &mut Vec<Record>, ids: &mut Vec<String>, role, content| {
        n += 1;
        let id = format!("{tag}{n}");
        recs.push(msg(&id, role, content, n * 60_000));
        ids.push(id);
    };
    for (k, s) in steps.iter().enumerate() {
        match s {
            Step::UserText => push(
                &mut recs,
                &mut ids,
                Role::User,
                vec![Block::text(format!("user {k}"))],
            ),
            Step::AssistantText => push(
                &mut recs,
                &mut ids,
                Role::Assistant,
                vec![Block::text(format!("assistant {k}"))],
            ),
            Step::Tools(count, mask) => {
                let uses: Vec<String> = (0..*count).map(|j| format!("{tag}tu{k}_{j}")).collect();
                let content = uses.iter().map(|u| use_block(u, "read_file")).collect();
                push(&mut recs, &mut ids, Role::Assistant, content);
                let results: Vec<Block> = uses
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| mask & (1 << j) != 0)
                    .map(|(_, u)| result_block(u, &"r".repeat(1 + (k * 37) % 300)))
                    .collect();
                tool_ids.extend(uses);
                if !results.is_empty() {
                    push(&mut recs, &mut ids, Role::User, results);
                }
            }
            Step::Snip(pick) if !ids.is_empty() => recs.push(Record::Snip(SnipRecord {
                uuid: format!("{tag}op{k}"),
                time: 0,
                removed_ids: pick.iter().map(|i| i.get(&ids).clone()).collect(),
                failed_turn: false,
            })),
            Step::Collapse(a, b) if !ids.is_empty() => {
                let (a, b) = (a.index(ids.len()), b.index(ids.len()));
                let (a, b) = (a.min(b), a.max(b));
                recs.push(Record::Collapse(CollapseRecord {
                    uuid: format!("{tag}op{k}"),
                    time: 0,
                    from_id: ids[a].clone(),
                    to_id: ids[b].clone(),
                    span_ids: ids[a..=b].to_vec(),
                    summary: format!("collapsed {a}..{b}"),
                    auto: false,
                }))
            }
            Step::ClearOld if !tool_ids.is_empty() => {
                recs.push(Record::Microcompact(MicrocompactRecord {
                    uuid: format!("{tag}op{k}"),
                    time: 0,
                    cleared_tool_use_ids: tool_ids[..tool_ids.len() / 2].to_vec(),
                }))
            }
            _ => {}
        }
    }
    recs
}

fn has_collapse(recs: &[Record]) -> bool {
    recs.iter().any(|r| matches!(r, Record::Collapse(_)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn view_is_valid_deterministic_and_replayable(steps in prop::collection::vec(step(), 0..40), late in any::<bool>()) {
        let recs = transcript(&steps);
        let policy = ViewPolicy::default();
        let now = if late { 10_000 * 60_000 } else { 0 };
        let v = build_view(&recs, &policy, now);
        let msgs = v.provider_messages();
        prop_assert!(check_pairing(&msgs).is_ok(), "{:?}", check_pairing(&msgs));
        prop_assert_eq!(&build_view(&recs, &policy, now), &v);

        // Replay from the serialized form (a fresh load) gives the same view.
        let lines: Vec<String> = recs.iter().map(|r| serde_json::to_string(r).unwrap()).collect();
        let loaded: Vec<Record> = lines.iter().map(|l| match parse_line(l) {
            ParsedLine::Record(r) => *r,
            other => panic!("{other:?}"),
        }).collect();
        prop_assert_eq!(&build_view(&loaded, &policy, now), &v);

        // Recording the microcompact decision keeps the view and settles it.
        if !v.microcompact_due.is_empty() {
            let mut recs2 = recs.clone();
            recs2.push(Record::Microcompact(MicrocompactRecord {
                uuid: "mc".into(), time: now, cleared_tool_use_ids: v.microcompact_due.clone(),
            }));
            let v2 = build_view(&recs2, &policy, now);
            prop_assert!(v2.microcompact_due.is_empty());
            prop_assert_eq!(&v2.messages, &v.messages);
        }

        // Without collapses, a real result is never replaced by a synthesized one: snip never
        // splits a pair.
        if !has_collapse(&recs) {
            let real: std::collections::HashSet<String> = recs.iter().filter_map(Record::as_message)
                .flat_map(|m| m.content.iter()).filter_map(|b| match b {
                    Block::ToolResult { tool_use_id, .. } => Some(tool_use_id.clone()),
                    _ => None,
                }).collect();
            for m in &msgs {
                for b in &m.content {
                    if let Block::ToolResult { tool_use_id, content, .. } = b {
                        prop_assert!(!(real.contains(tool_use_id) && result_text(content) == INTERRUPTED_TEXT));
                    }
                }
            }
        }
    }

    #[test]
    fn snips_never_grow_the_view(steps in prop::collection::vec(step(), 0..30), extra in prop::collection::vec(any::<prop::sample::Index>(), 1..5)) {
        let recs = transcript(&steps);
        let policy = ViewPolicy::default();
        let before = build_view(&recs, &policy, 0);
        let ids: Vec<String> = recs.iter().filter_map(Record::as_message).map(|m| m.uuid.clone()).collect();
        prop_assume!(!ids.is_empty());
        let mut recs2 = recs.clone();
        recs2.push(Record::Snip(SnipRecord { uuid: "x".into(), time: 0, removed_ids: extra.iter().map(|i| i.get(&ids).clone()).collect(), failed_turn: false }));
        let after = build_view(&recs2, &policy, 0);
        prop_assert!(check_pairing(&after.provider_messages()).is_ok());
        // Synthesized openers and interrupted results are not transcript content.
        let real = |v: &View| -> usize { v.messages.iter().filter(|m| !m.source_ids.is_empty()).map(|m| message_chars(&m.message)).sum() };
        prop_assert!(real(&after) <= real(&before));
    }
}

#[test]
fn removal_marks_name_the_reason() {
    let boundary = Record::CompactBoundary(CompactBoundaryRecord {
        uuid: "b".into(),
        time: 0,
        trigger: CompactTrigger::Manual,
        tokens_before: 0,
        tokens_after: 0,
        kept_head_id: None,
        kept_tail_id: None,
        kept_anchor_id: None,
        extractive: false,
        install_count: 0,
        summarizer: None,
        summary_usage: None,
    });
    let recs = vec![
        text("old", Role::User, "x"),
        boundary,
        text("u1", Role::User, "a"),
        text("a1", Role::Assistant, "b"),
        text("u2", Role::User, "c"),
        text("a2", Role::Assistant, "d"),
        Record::Snip(SnipRecord {
            uuid: "s".into(),
            time: 0,
            removed_ids: vec!["a1".into()],
            failed_turn: false,
        }),
        Record::Collapse(CollapseRecord {
            uuid: "c".into(),
            time: 0,
            from_id: "a2".into(),
            to_id: "a2".into(),
            span_ids: vec!["a2".into()],
            summary: "s".into(),
            auto: false,
        }),
    ];
    let v = build_view(&recs, &no_mc(), 0);
    let marks = removal_marks(&recs, &v);
    assert_eq!(marks.len(), 3);
    assert_eq!(marks["old"], Removal::Compacted);
    assert_eq!(marks["a1"], Removal::Snipped);
    assert_eq!(marks["a2"], Removal::Collapsed);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn incremental_view_equals_full_build(
        steps in prop::collection::vec(step(), 0..40),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 1..6),
        late in any::<bool>(),
    ) {
        let recs = transcript(&steps);
        let policy = ViewPolicy::default();
        let mut cache = ViewCache::new();
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(recs.len() + 1)).collect();
        points.sort_unstable();
        points.push(recs.len());
        for (k, &n) in points.iter().enumerate() {
            let now = if late && k % 2 == 1 { 1_000_000 * 60_000 } else { 0 };
            let full = build_view(&recs[..n], &policy, now);
            let inc = cache.view(&recs[..n], &policy, now).clone();
            prop_assert_eq!(cache.chars(), full.chars());
            prop_assert_eq!(inc, full);
        }
    }
}

#[test]
fn incremental_view_redoes_only_the_tail() {
    let mut recs = vec![text("u0", Role::User, "go")];
    let policy = ViewPolicy {
        microcompact_after_ms: None,
        ..ViewPolicy::default()
    };
    let mut cache = ViewCache::new();
    for k in 0..50 {
        recs.push(msg(
            &format!("a{k}"),
            Role::Assistant,
            vec![use_block(&format!("t{k}"), "bash")],
            0,
        ));
        let v = cache.view(&recs, &policy, 0).clone();
        assert_eq!(v, build_view(&recs, &policy, 0));
        recs.push(msg(
            &format!("r{k}"),
            Role::User,
            vec![result_block(&format!("t{k}"), "ok")],
            0,
        ));
        let v = cache.view(&recs, &policy, 0).clone();
        assert_eq!(v, build_view(&recs, &policy, 0));
    }
    assert_eq!(cache.full_builds(), 1);
    assert_eq!(cache.incremental_builds(), 99);
    recs.push(Record::Snip(SnipRecord {
        uuid: "s".into(),
        time: 0,
        removed_ids: vec!["a3".into(), "r3".into()],
        failed_turn: false,
    }));
    let v = cache.view(&recs, &policy, 0).clone();
    assert_eq!(v, build_view(&recs, &policy, 0));
    assert_eq!(cache.full_builds(), 2);
}

/// Microcompact and stage-1 trims cut tool results only: a note between them (an instruction
/// note) stays in the view, so it is not sent again.
#[test]
fn microcompact_and_trims_leave_notes_in_the_view() {
    let mut recs = vec![text("u", Role::User, "go")];
    for k in 0..8 {
        recs.push(msg(
            &format!("a{k}"),
            Role::Assistant,
            vec![use_block(&format!("t{k}"), "read_file")],
            1_000,
        ));
        recs.push(msg(
            &format!("r{k}"),
            Role::User,
            vec![result_block(&format!("t{k}"), &"body ".repeat(400))],
            1_000,
        ));
        if k == 1 {
            let mut note = MessageRecord::new(
                Role::User,
                vec![Block::text(
                    "<garuda_note>The project's instruction files changed</garuda_note>",
                )],
                Some("r1".into()),
            );
            note.uuid = "note".into();
            note.meta = Some(MessageMeta::InstructionNote);
            recs.push(Record::Message(note));
        }
    }
    recs.push(Record::Microcompact(MicrocompactRecord {
        uuid: "mc".into(),
        time: 2_000,
        cleared_tool_use_ids: vec!["t0".into(), "t1".into(), "t2".into()],
    }));
    recs.push(Record::Trim(crate::session::records::TrimRecord {
        uuid: "trim".into(),
        time: 2_000,
        tool_use_ids: vec!["t3".into(), "t4".into()],
        keep_chars: 10,
    }));
    let whole = build_view(&recs[..recs.len() - 2], &no_mc(), 3_000);
    let v = build_view(&recs, &no_mc(), 3_000);
    assert!(v.holds("note"), "{:?}", ids(&v));
    assert!(v.chars() + 8_000 < whole.chars(), "five results were cut");
}

#[test]
fn a_failed_turn_s_message_leaves_the_view_even_as_the_first_request() {
    let mut recs = vec![
        text("u1", Role::User, "a request the window could not hold"),
        Record::Snip(SnipRecord {
            uuid: "s".into(),
            time: 0,
            removed_ids: vec!["u1".into()],
            failed_turn: true,
        }),
        text("u2", Role::User, "a shorter one"),
        text("a2", Role::Assistant, "done"),
    ];
    let v = build_view(&recs, &no_mc(), 0);
    assert_eq!(ids(&v), vec!["u2", "a2"]);
    assert_eq!(v.first_request.as_deref(), Some("u2"));
    assert_eq!(v.snipped, vec!["u1"]);
    // The incremental view keeps it out when a later tail is recomputed.
    let mut cache = ViewCache::new();
    cache.view(&recs, &no_mc(), 0);
    recs.push(text("u3", Role::User, "next"));
    recs.push(text("a3", Role::Assistant, "ok"));
    let full = build_view(&recs, &no_mc(), 0);
    assert_eq!(cache.view(&recs, &no_mc(), 0), &full);
    assert!(!full.holds("u1"));
}

/// A provider-side search's two blocks (`server_tool_use`, `web_search_tool_result`).
pub(crate) fn server_search(id: &str, query: &str) -> [Block; 2] {
    [
        Block::Provider {
            raw: json!({"type": "server_tool_use", "id": id, "name": "web_search",
                        "input": {"query": query}}),
        },
        Block::Provider {
            raw: json!({"type": "web_search_tool_result", "tool_use_id": id, "content": [
                {"type": "web_search_result", "url": "https://a.example/", "title": "A",
                 "encrypted_content": "Eq+/=", "page_age": null}]}),
        },
    ]
}

#[test]
fn provider_blocks_pass_whole_and_a_lone_one_is_dropped() {
    let [call, result] = server_search("srvtoolu_1", "serde");
    let [lone, _] = server_search("srvtoolu_2", "cut");
    let recs = vec![
        text("u1", Role::User, "search"),
        msg(
            "a1",
            Role::Assistant,
            vec![
                Block::text("Looking."),
                call.clone(),
                result.clone(),
                lone,
                Block::text("Found."),
            ],
            0,
        ),
        // Only the model's messages carry them.
        msg(
            "u2",
            Role::User,
            vec![Block::text("next"), result.clone()],
            0,
        ),
    ];
    let v = build_view(&recs, &no_mc(), 0);
    let msgs: Vec<Message> = v.messages.iter().map(|m| m.message.clone()).collect();
    assert_eq!(
        msgs[1].content,
        [Block::text("Looking."), call, result, Block::text("Found.")]
    );
    assert_eq!(msgs[2].content, [Block::text("next")]);
    assert_eq!(check_pairing(&msgs), Ok(()));
    // They count in the estimate, encrypted content and all.
    assert!(message_chars(&msgs[1]) > "Looking.Found.".len() + 100);
}
