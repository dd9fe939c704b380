//! Skills end to end: found in the workspace's three folders and the user's, listed in the
//! `skill` tool, loaded only when called, restored after compaction, a change on disk noted,
//! and the system prompt byte-identical throughout.

use std::path::Path;

use serde_json::{Value, json};

use crate::client::{Framing, Garuda};
use crate::context::{WINDOW_100K, text, turn};
use crate::mock_model::*;
use crate::turns::{Mock, write_config};

fn write(dir: &Path, rel: &str, body: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, body).expect("write");
}

fn skill(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")
}

fn call(id: &str, tool: &str, input: Value) -> MockReply {
    let j = input.to_string();
    MockReply::Sse(anthropic_tool_use(id, tool, &[j.as_str()]))
}

fn tool_named<'a>(body: &'a Value, name: &str) -> Option<&'a Value> {
    body["tools"].as_array()?.iter().find(|t| t["name"] == name)
}

#[test]
fn skills_load_on_demand_survive_compaction_and_keep_the_prompt_bytes() {
    let home_notes = "MINE-NOTES";
    let home = tempfile::tempdir().expect("home");
    write_config(home.path(), WINDOW_100K);
    let user_skill = home.path().join("config/garuda/skills/mine");
    write(
        &user_skill,
        "SKILL.md",
        &skill("mine", "My own way of working.", "MINE-BODY"),
    );
    write(&user_skill, "notes.md", home_notes);
    let notes = user_skill.join("notes.md");
    let mut replies = vec![
        call("toolu_s1", "skill", json!({"name": "review"})),
        text("loaded review", 100),
        call("toolu_s2", "skill", json!({"name": "mine"})),
        call(
            "toolu_r2",
            "read_file",
            json!({"path": notes.display().to_string()}),
        ),
        text("read the notes", 100),
    ];
    for i in 2..=5 {
        replies.push(text(&format!("answer {i}"), 20_000));
    }
    replies.push(text("<summary>SKILLED</summary>", 50));
    replies.push(text("after", 100));
    let mock = Mock::start(replies);
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("AGENTS.md"), "Be brief.\n").expect("write");
    let env = mock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Garuda::spawn_at(Framing::Lsp, home.path(), &[], &env);
    g.call("initialize", json!({"capabilities": {}}));
    let wid = g.open(ws.path());
    let w = ws.path();
    write(
        w,
        ".garuda/skills/deploy/SKILL.md",
        &skill("deploy", "Ship a release.", "DEPLOY-BODY"),
    );
    write(
        w,
        ".claude/skills/review/SKILL.md",
        &skill("review", "Review a change.", "REVIEW-BODY"),
    );
    write(w, ".claude/skills/review/checklist.md", "check");
    write(
        w,
        ".agents/skills/style/SKILL.md",
        &skill("style", "House style.", "STYLE-BODY"),
    );
    write(
        w,
        ".agents/skills/broken/SKILL.md",
        "---\nname: broken\n---\nno description\n",
    );
    let r = g.call(
        "session/new",
        json!({"workspaceId": wid, "policy": "full-auto"}),
    );
    let sid = r["sessionId"].as_str().expect("sid").to_string();
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains(".agents/skills/broken/SKILL.md: line 2"),
        "{warnings}"
    );

    let r = turn(&mut g, &sid, "review my change");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    // The user's folder is readable once its skill is loaded.
    let r = turn(&mut g, &sid, "use my skill");
    assert_eq!(r["stopReason"], "end_turn", "{r}");
    // A skill added now is a note; the list stays until the next compaction.
    write(
        w,
        ".garuda/skills/added/SKILL.md",
        &skill("added", "New one.", "ADDED-BODY"),
    );
    for i in 2..=5 {
        let r = turn(&mut g, &sid, &format!("question {i}"));
        assert_eq!(r["stopReason"], "end_turn", "{r}");
    }
    let r = g.call("session/compact", json!({"sessionId": sid}));
    assert_eq!(r["compacted"], true, "{r}");
    let r = turn(&mut g, &sid, "go on");
    assert_eq!(r["stopReason"], "end_turn", "{r}");

    let bodies = mock.rec.bodies();
    let first = &bodies[0];
    let tool = tool_named(first, "skill").expect("the skill tool");
    let d = tool["description"].as_str().expect("description");
    let order: Vec<usize> = [
        "- deploy: Ship",
        "- mine: My own",
        "- review: Review",
        "- style: House",
    ]
    .iter()
    .map(|n| d.find(n).unwrap_or_else(|| panic!("{n} in {d}")))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "sorted: {d}");
    assert!(
        !first.to_string().contains("REVIEW-BODY"),
        "bodies load only when called"
    );
    let system = first["system"].to_string();
    assert!(
        system.contains("Skills are listed in the skill tool"),
        "{system}"
    );
    // The skill's body reaches the model as its result; the user's notes file is readable.
    let after_review = bodies[1].to_string();
    assert!(after_review.contains("REVIEW-BODY") && after_review.contains("checklist.md"));
    let after_read = bodies[4].to_string();
    assert!(after_read.contains(home_notes), "{after_read}");
    // The change on disk is a note in the next request, not a new tool list.
    let noted = &bodies[5];
    assert!(
        noted.to_string().contains("The skills on disk changed"),
        "{noted}"
    );
    assert!(
        !tool_named(noted, "skill").expect("skill")["description"]
            .to_string()
            .contains("added")
    );
    // After the compaction: the loaded skills are restored, the new list is in, the system
    // prompt is the same bytes.
    let last = bodies.last().expect("last");
    let text = last.to_string();
    assert!(
        text.contains("<restored_skill name=\\\"review\\\""),
        "{text}"
    );
    assert!(
        text.contains("REVIEW-BODY") && text.contains("MINE-BODY"),
        "{text}"
    );
    assert!(!text.contains("The skills on disk changed"), "{text}");
    assert!(
        tool_named(last, "skill").expect("skill")["description"]
            .to_string()
            .contains("- added: New one.")
    );
    for b in &bodies {
        assert_eq!(
            b["system"], first["system"],
            "the system prompt never changes"
        );
    }
    drop(home);
}
