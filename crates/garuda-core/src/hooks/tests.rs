//! The runner with real shell scripts in a temporary folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::*;

struct Fx {
    _dir: tempfile::TempDir,
    root: PathBuf,
    bin: PathBuf,
}

fn fx() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws").canonicalize().unwrap_or_else(|_| {
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        dir.path().join("ws").canonicalize().unwrap()
    });
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    Fx {
        _dir: dir,
        root,
        bin,
    }
}

impl Fx {
    /// A script named `name` with `body` (sh), made executable; returns the command line.
    fn script(&self, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let p = self.bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        format!("'{}'", p.display())
    }

    fn set(&self, hooks: &[(HookEvent, Option<&str>, &str, f64)], origin: HookOrigin) -> HookSet {
        let mut events: BTreeMap<String, Vec<MatcherGroup>> = BTreeMap::new();
        for (event, matcher, command, timeout) in hooks {
            events
                .entry(event.name().into())
                .or_default()
                .push(MatcherGroup {
                    matcher: matcher.map(str::to_string),
                    hooks: vec![HandlerConfig {
                        kind: Some("command".into()),
                        command: Some(command.to_string()),
                        timeout: Some(*timeout),
                    }],
                });
        }
        HookSet::resolve(
            vec![HookSource { origin, events }],
            &ResolveOptions {
                enabled: true,
                default_timeout: 60.0,
                root: self.root.clone(),
                trust: crate::hooks::TrustStatus::Untrusted,
                claude_disabled_by: None,
            },
        )
    }

    fn input(&self, data: EventData) -> HookInput {
        HookInput {
            session_id: "sess-1".into(),
            transcript_path: None,
            cwd: self.root.clone(),
            permission_mode: None,
            data,
        }
    }

    fn bash_call(&self, command: &str) -> HookInput {
        self.input(EventData::PreToolUse {
            tool_name: "bash".into(),
            tool_input: json!({ "command": command }),
            tool_use_id: "call-1".into(),
        })
    }
}

async fn run(set: &HookSet, input: &HookInput) -> HookOutcome {
    set.run(input, &CancellationToken::new()).await
}

#[tokio::test]
async fn stdin_env_and_cwd_reach_the_hook() {
    let f = fx();
    let out = f.root.join("seen");
    let cmd = f.script(
        "see.sh",
        &format!(
            "cat > '{o}.json'; pwd > '{o}.pwd'; echo \"$GARUDA_PROJECT_DIR|${{CLAUDE_PROJECT_DIR:-none}}\" > '{o}.env'",
            o = out.display()
        ),
    );
    let set = f.set(
        &[(HookEvent::PreToolUse, Some("Bash"), &cmd, 10.0)],
        HookOrigin::UserConfig,
    );
    let o = run(&set, &f.bash_call("ls")).await;
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
    assert_eq!(o.permission, None);
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(out.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(seen["hook_event_name"], "PreToolUse");
    assert_eq!(seen["tool_name"], "bash");
    assert_eq!(seen["tool_input"]["command"], "ls");
    assert_eq!(seen["session_id"], "sess-1");
    let pwd = std::fs::read_to_string(out.with_extension("pwd")).unwrap();
    assert_eq!(Path::new(pwd.trim()), f.root);
    let env = std::fs::read_to_string(out.with_extension("env")).unwrap();
    assert_eq!(env.trim(), format!("{}|none", f.root.display()));

    // Imported from Claude Code: Claude Code's tool name and CLAUDE_PROJECT_DIR.
    let set = f.set(
        &[(HookEvent::PreToolUse, Some("Bash"), &cmd, 10.0)],
        HookOrigin::ClaudeUser("/h/.claude/settings.json".into()),
    );
    run(&set, &f.bash_call("ls")).await;
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(out.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(seen["tool_name"], "Bash");
    let env = std::fs::read_to_string(out.with_extension("env")).unwrap();
    assert_eq!(env.trim(), format!("{0}|{0}", f.root.display()));
}

#[tokio::test]
async fn a_claude_style_command_policy_blocks_with_exit_2() {
    let f = fx();
    let policy = f.script(
        "policy.sh",
        "input=$(cat)\ncase \"$input\" in *'rm -rf'*) echo 'rm -rf is not allowed here' >&2; exit 2;; esac\nexit 0",
    );
    let set = f.set(
        &[(HookEvent::PreToolUse, Some("Bash"), &policy, 10.0)],
        HookOrigin::ClaudeUser("/h/.claude/settings.json".into()),
    );
    let o = run(&set, &f.bash_call("rm -rf /")).await;
    assert_eq!(o.permission, Some(PermissionDecision::Deny));
    assert_eq!(o.block.as_deref(), Some("rm -rf is not allowed here"));
    assert_eq!(
        o.permission_reason.as_deref(),
        Some("rm -rf is not allowed here")
    );
    assert!(o.reports[0].blocked);
    let o = run(&set, &f.bash_call("ls")).await;
    assert_eq!((o.permission, o.block), (None, None));
    // The matcher holds: another tool does not run it.
    let read = f.input(EventData::PreToolUse {
        tool_name: "read_file".into(),
        tool_input: json!({"path": "rm -rf"}),
        tool_use_id: "c".into(),
    });
    assert!(run(&set, &read).await.reports.is_empty());
}

#[tokio::test]
async fn every_output_form() {
    let f = fx();
    let case = |name: &str, body: &str| f.script(name, body);
    let start = |s: &str| {
        f.input(EventData::SessionStart {
            source: match s {
                "compact" => SessionSource::Compact,
                _ => SessionSource::Startup,
            },
            model: None,
        })
    };
    // Plain text: context for SessionStart.
    let plain = case("plain.sh", "echo 'remember the API freeze'");
    let set = f.set(
        &[(HookEvent::SessionStart, Some("compact"), &plain, 10.0)],
        HookOrigin::UserConfig,
    );
    let o = run(&set, &start("compact")).await;
    assert_eq!(o.context, ["remember the API freeze"]);
    assert!(
        run(&set, &start("startup")).await.reports.is_empty(),
        "matcher over the source"
    );

    // JSON additionalContext.
    let ctx = case(
        "ctx.sh",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "from json"}}'"#,
    );
    let set = f.set(
        &[(HookEvent::SessionStart, None, &ctx, 10.0)],
        HookOrigin::UserConfig,
    );
    assert_eq!(run(&set, &start("startup")).await.context, ["from json"]);

    // PreToolUse: allow with updatedInput, continue false, systemMessage, suppressOutput.
    let allow = case(
        "allow.sh",
        r#"echo '{"continue": false, "stopReason": "done for today", "systemMessage": "checked", "suppressOutput": true,
 "hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
 "permissionDecisionReason": "safe", "updatedInput": {"command": "ls -la"}}}'"#,
    );
    let set = f.set(
        &[(HookEvent::PreToolUse, None, &allow, 10.0)],
        HookOrigin::UserConfig,
    );
    let o = run(&set, &f.bash_call("ls")).await;
    assert_eq!(o.permission, Some(PermissionDecision::Allow));
    assert_eq!(o.permission_reason.as_deref(), Some("safe"));
    assert_eq!(o.updated_input, Some(json!({"command": "ls -la"})));
    assert_eq!(o.stop.as_deref(), Some("done for today"));
    assert_eq!(o.system_messages, ["checked"]);
    assert!(o.suppress_output);

    // PostToolUse: decision block reaches the model as feedback; tool_response is on stdin.
    let lint = case(
        "lint.sh",
        r#"grep -q '"exit_code":1' && echo '{"decision": "block", "reason": "lint failed: fix a.rs"}'; exit 0"#,
    );
    let set = f.set(
        &[(HookEvent::PostToolUse, Some("Edit|Write"), &lint, 10.0)],
        HookOrigin::UserConfig,
    );
    let post = f.input(EventData::PostToolUse {
        tool_name: "write_file".into(),
        tool_input: json!({"path": "a.rs"}),
        tool_response: json!({"exit_code":1}),
        tool_use_id: "c".into(),
    });
    assert_eq!(
        run(&set, &post).await.block.as_deref(),
        Some("lint failed: fix a.rs")
    );

    // UserPromptSubmit: exit 2 blocks the prompt with stderr.
    let refuse = case("refuse.sh", "echo 'no secrets in prompts' >&2; exit 2");
    let set = f.set(
        &[(HookEvent::UserPromptSubmit, None, &refuse, 10.0)],
        HookOrigin::UserConfig,
    );
    let prompt = f.input(EventData::UserPromptSubmit {
        prompt: "my key is sk-1".into(),
    });
    assert_eq!(
        run(&set, &prompt).await.block.as_deref(),
        Some("no secrets in prompts")
    );

    // PreCompact: stdout is summary instructions; exit 2 blocks.
    let keep = case("keep.sh", "echo 'Keep the list of failing tests.'");
    let set = f.set(
        &[(HookEvent::PreCompact, Some("auto"), &keep, 10.0)],
        HookOrigin::UserConfig,
    );
    let pc = |t| {
        f.input(EventData::PreCompact {
            trigger: t,
            custom_instructions: String::new(),
        })
    };
    assert_eq!(
        run(&set, &pc(CompactTrigger::Auto)).await.context,
        ["Keep the list of failing tests."]
    );
    assert!(
        run(&set, &pc(CompactTrigger::Manual))
            .await
            .reports
            .is_empty()
    );

    // Stop: block with a reason continues the turn.
    let more = case(
        "more.sh",
        r#"grep -q '"stop_hook_active":false' && echo '{"decision": "block", "reason": "tests still fail"}'; exit 0"#,
    );
    let set = f.set(
        &[(HookEvent::Stop, None, &more, 10.0)],
        HookOrigin::UserConfig,
    );
    let stop = |active| {
        f.input(EventData::Stop {
            stop_hook_active: active,
            last_assistant_message: None,
        })
    };
    assert_eq!(
        run(&set, &stop(false)).await.block.as_deref(),
        Some("tests still fail")
    );
    assert_eq!(run(&set, &stop(true)).await.block, None);

    // Other exit codes: a warning for the user, no effect.
    let broken = case("broken.sh", "echo 'jq: not found' >&2; exit 127");
    let set = f.set(
        &[(HookEvent::PreToolUse, None, &broken, 10.0)],
        HookOrigin::UserConfig,
    );
    let o = run(&set, &f.bash_call("ls")).await;
    assert_eq!((o.permission, o.block.clone()), (None, None));
    assert_eq!(o.warnings.len(), 1);
    assert!(
        o.warnings[0].contains("127") && o.warnings[0].contains("jq: not found"),
        "{:?}",
        o.warnings
    );

    // Events that cannot block: exit 2 is a warning.
    let set = f.set(
        &[(HookEvent::SessionEnd, None, &refuse, 10.0)],
        HookOrigin::UserConfig,
    );
    let o = run(
        &set,
        &f.input(EventData::SessionEnd {
            reason: "close".into(),
        }),
    )
    .await;
    assert_eq!(o.block, None);
    assert!(o.warnings[0].contains("no secrets"), "{:?}", o.warnings);
}

#[tokio::test]
async fn malformed_json_is_a_warning_not_context() {
    let f = fx();
    let bad = f.script(
        "bad.sh",
        r#"printf '{"hookSpecificOutput": {"additionalContext": "half'"#,
    );
    let set = f.set(
        &[(HookEvent::UserPromptSubmit, None, &bad, 10.0)],
        HookOrigin::UserConfig,
    );
    let o = run(
        &set,
        &f.input(EventData::UserPromptSubmit {
            prompt: "hi".into(),
        }),
    )
    .await;
    assert!(o.context.is_empty(), "{:?}", o.context);
    assert_eq!(o.warnings.len(), 1);
    assert!(o.warnings[0].contains("malformed JSON"), "{:?}", o.warnings);
}

#[tokio::test]
async fn concurrent_hooks_merge_deny_over_ask_over_allow_in_config_order() {
    let f = fx();
    // Each hook waits for the other's mark: they finish only when run at the same time.
    let a_mark = f.root.join("a.mark");
    let b_mark = f.root.join("b.mark");
    let wait_for = |me: &Path, other: &Path| {
        format!(
            "touch '{}'; i=0; while [ ! -f '{}' ]; do i=$((i+1)); [ $i -gt 200 ] && exit 9; sleep 0.05; done",
            me.display(),
            other.display()
        )
    };
    let allow = f.script(
        "allow.sh",
        &format!(
            "{}\necho '{{\"hookSpecificOutput\": {{\"permissionDecision\": \"allow\", \"updatedInput\": {{\"command\": \"ls -1\"}}, \"additionalContext\": \"first\"}}}}'",
            wait_for(&a_mark, &b_mark)
        ),
    );
    let ask = f.script(
        "ask.sh",
        &format!(
            "{}\necho '{{\"hookSpecificOutput\": {{\"permissionDecision\": \"ask\", \"permissionDecisionReason\": \"a person should look\", \"updatedInput\": {{\"command\": \"ls -2\"}}, \"additionalContext\": \"second\"}}}}'",
            wait_for(&b_mark, &a_mark)
        ),
    );
    let deny = f.script(
        "deny.sh",
        r#"echo '{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "not on Fridays"}}'"#,
    );
    let set = f.set(
        &[
            (HookEvent::PreToolUse, None, &allow, 20.0),
            (HookEvent::PreToolUse, None, &ask, 20.0),
        ],
        HookOrigin::UserConfig,
    );
    let o = run(&set, &f.bash_call("ls")).await;
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
    assert_eq!(o.permission, Some(PermissionDecision::Ask));
    assert_eq!(o.permission_reason.as_deref(), Some("a person should look"));
    assert_eq!(o.context, ["first", "second"]);
    assert_eq!(o.updated_input, Some(json!({"command": "ls -1"})));
    assert_eq!(o.reports.len(), 2);

    std::fs::remove_file(&a_mark).unwrap();
    std::fs::remove_file(&b_mark).unwrap();
    let set = f.set(
        &[
            (HookEvent::PreToolUse, None, &allow, 20.0),
            (HookEvent::PreToolUse, None, &deny, 20.0),
            (HookEvent::PreToolUse, None, &ask, 20.0),
        ],
        HookOrigin::UserConfig,
    );
    let o = run(&set, &f.bash_call("ls")).await;
    assert_eq!(o.permission, Some(PermissionDecision::Deny));
    assert_eq!(o.block.as_deref(), Some("not on Fridays"));
    assert_eq!(
        o.reports.iter().map(|r| r.blocked).collect::<Vec<_>>(),
        [false, true, false]
    );
}

/// True when `pid` is gone (or a zombie nobody reaped yet: it runs no more).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

#[tokio::test]
async fn a_hook_that_hangs_is_killed_with_its_background_child() {
    let f = fx();
    let pidfile = f.root.join("child.pid");
    let hang = f.script(
        "hang.sh",
        &format!(
            "sleep 1000 &\necho $! > '{}'\nsleep 1000",
            pidfile.display()
        ),
    );
    let set = f.set(
        &[(HookEvent::PreToolUse, None, &hang, 2.0)],
        HookOrigin::UserConfig,
    );
    let o = run(&set, &f.bash_call("ls")).await;
    assert_eq!(o.reports[0].exit, HookExit::TimedOut);
    assert_eq!(
        (o.permission, o.block.clone()),
        (None, None),
        "a timeout does not block"
    );
    assert!(o.warnings[0].contains("timed out"), "{:?}", o.warnings);
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut tries = 0;
    while !gone(pid) && tries < 100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        tries += 1;
    }
    assert!(gone(pid), "the background child {pid} outlived the hook");
}

#[tokio::test]
async fn a_background_child_holding_stdout_does_not_hold_the_event() {
    let f = fx();
    let pidfile = f.root.join("bg.pid");
    // Exits at once but leaves a child with its stdout open.
    let leave = f.script(
        "leave.sh",
        &format!(
            "sleep 1000 &\necho $! > '{}'\necho 'context before leaving'",
            pidfile.display()
        ),
    );
    let set = f.set(
        &[(HookEvent::SessionStart, None, &leave, 30.0)],
        HookOrigin::UserConfig,
    );
    let o = run(
        &set,
        &f.input(EventData::SessionStart {
            source: SessionSource::Startup,
            model: None,
        }),
    )
    .await;
    assert_eq!(o.reports[0].exit, HookExit::Code(0));
    assert_eq!(o.context, ["context before leaving"]);
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut tries = 0;
    while !gone(pid) && tries < 100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        tries += 1;
    }
    assert!(gone(pid), "the hook's group ends with it");
}

#[tokio::test]
async fn megabytes_of_output_are_capped() {
    let f = fx();
    let flood = f.script(
        "flood.sh",
        "head -c 5000000 /dev/zero | tr '\\0' a\nhead -c 3000000 /dev/zero | tr '\\0' b >&2\nexit 0",
    );
    let set = f.set(
        &[(HookEvent::SessionStart, None, &flood, 30.0)],
        HookOrigin::UserConfig,
    );
    let o = run(
        &set,
        &f.input(EventData::SessionStart {
            source: SessionSource::Startup,
            model: None,
        }),
    )
    .await;
    assert_eq!(o.reports[0].exit, HookExit::Code(0));
    assert_eq!(o.context.len(), 1);
    assert_eq!(o.context[0].len(), OUTPUT_CAP_BYTES);
    assert!(o.warnings[0].contains("cap"), "{:?}", o.warnings);
    // Cut JSON is not used.
    let json_flood = f.script(
        "jflood.sh",
        "printf '{\"hookSpecificOutput\": {\"additionalContext\": \"'\nhead -c 2000000 /dev/zero | tr '\\0' a\nprintf '\"}}'",
    );
    let set = f.set(
        &[(HookEvent::SessionStart, None, &json_flood, 30.0)],
        HookOrigin::UserConfig,
    );
    let o = run(
        &set,
        &f.input(EventData::SessionStart {
            source: SessionSource::Startup,
            model: None,
        }),
    )
    .await;
    assert!(o.context.is_empty());
    assert!(o.warnings[0].contains("cap"), "{:?}", o.warnings);
}

#[tokio::test]
async fn a_hook_that_ignores_stdin_gets_a_large_input_without_hanging() {
    let f = fx();
    let ignore = f.script("ignore.sh", "echo ok");
    let set = f.set(
        &[(HookEvent::PostToolUse, None, &ignore, 10.0)],
        HookOrigin::UserConfig,
    );
    let big = "x".repeat(4 << 20);
    let post = f.input(EventData::PostToolUse {
        tool_name: "read_file".into(),
        tool_input: json!({"path": "a"}),
        tool_response: json!(big),
        tool_use_id: "c".into(),
    });
    let o = run(&set, &post).await;
    assert_eq!(o.reports[0].exit, HookExit::Code(0));
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
}

#[tokio::test]
async fn cancelling_kills_running_hooks() {
    let f = fx();
    let slow = f.script("slow.sh", "sleep 1000");
    let set = f.set(
        &[(HookEvent::Stop, None, &slow, 600.0)],
        HookOrigin::UserConfig,
    );
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.cancel();
    });
    let o = set
        .run(
            &f.input(EventData::Stop {
                stop_hook_active: false,
                last_assistant_message: None,
            }),
            &cancel,
        )
        .await;
    assert!(o.cancelled);
    assert_eq!(o.reports[0].exit, HookExit::Cancelled);
    assert!(o.warnings.is_empty() && o.block.is_none());
}

#[tokio::test]
async fn an_untrusted_workspace_hook_never_runs() {
    let f = fx();
    let ran = f.root.join("ran");
    let config = crate::config::Config::default();
    let (config, _) = config
        .with_workspace(
            &format!(
                "[[hooks.PreToolUse]]\nhooks = [{{ command = \"touch '{}'\" }}]\n",
                ran.display()
            ),
            &f.root.join(".garuda/config.toml"),
        )
        .unwrap();
    let root = crate::fsroot::Root::open(&f.root).unwrap();
    let set = HookSet::load(config.hook_config(), &root, &TrustList::default(), None);
    assert!(!set.any());
    assert!(matches!(
        set.skipped()[0].reason,
        SkipReason::Untrusted { .. }
    ));
    let o = run(&set, &f.bash_call("ls")).await;
    assert!(o.reports.is_empty());
    assert!(!ran.exists());
    assert_eq!(
        set.trust_notice(),
        None,
        "never trusted: no warning, as before"
    );
    // A bare path (an old trust file, or `[hooks] trusted`) grants nothing and says so.
    let old =
        TrustList::default().with_hand_written(std::slice::from_ref(&f.root), None, "config.toml");
    let set = HookSet::load(config.hook_config(), &root, &old, None);
    assert!(!set.any());
    let notice = set.trust_notice().unwrap();
    assert!(
        notice.contains("records no hooks") && notice.contains("garuda trust"),
        "{notice}"
    );
    // Trusted, it runs.
    let trust = TrustList::trusting(&root, set.workspace_hooks()).unwrap();
    let set = HookSet::load(config.hook_config(), &root, &trust, None);
    run(&set, &f.bash_call("ls")).await;
    assert!(ran.exists());
}

#[tokio::test]
async fn every_event_reaches_its_hooks_with_its_fields() {
    let f = fx();
    let log = f.root.join("log");
    let record = f.script(
        "record.sh",
        &format!("cat >> '{}'; echo >> '{}'", log.display(), log.display()),
    );
    let hooks: Vec<(HookEvent, Option<&str>, &str, f64)> = HookEvent::ALL
        .iter()
        .map(|e| (*e, None, record.as_str(), 10.0))
        .collect();
    let set = f.set(&hooks, HookOrigin::UserConfig);
    let trigger = CompactTrigger::Manual;
    let events = vec![
        (
            EventData::SessionStart {
                source: SessionSource::Resume,
                model: Some("a/b".into()),
            },
            "source",
            json!("resume"),
        ),
        (
            EventData::UserPromptSubmit {
                prompt: "fix it".into(),
            },
            "prompt",
            json!("fix it"),
        ),
        (
            EventData::PreToolUse {
                tool_name: "grep".into(),
                tool_input: json!({"pattern": "x"}),
                tool_use_id: "1".into(),
            },
            "tool_use_id",
            json!("1"),
        ),
        (
            EventData::PostToolUse {
                tool_name: "grep".into(),
                tool_input: json!({}),
                tool_response: json!("3 matches"),
                tool_use_id: "1".into(),
            },
            "tool_response",
            json!("3 matches"),
        ),
        (
            EventData::PreCompact {
                trigger,
                custom_instructions: "keep tests".into(),
            },
            "custom_instructions",
            json!("keep tests"),
        ),
        (
            EventData::PostCompact {
                trigger,
                compact_summary: "we fixed x".into(),
            },
            "compact_summary",
            json!("we fixed x"),
        ),
        (
            EventData::Stop {
                stop_hook_active: false,
                last_assistant_message: Some("done".into()),
            },
            "last_assistant_message",
            json!("done"),
        ),
        (
            EventData::SessionEnd {
                reason: "close".into(),
            },
            "reason",
            json!("close"),
        ),
        (
            EventData::Notification {
                message: "approve bash?".into(),
                notification_type: "permission_prompt".into(),
            },
            "notification_type",
            json!("permission_prompt"),
        ),
        (
            EventData::InstructionsLoaded {
                file_path: f.root.join("AGENTS.md"),
                memory_type: "Project".into(),
                load_reason: "session_start".into(),
            },
            "load_reason",
            json!("session_start"),
        ),
        (
            EventData::SubagentStart {
                agent_type: "explore".into(),
                agent_id: "child".into(),
                parent_session_id: "s1".into(),
            },
            "agent_type",
            json!("explore"),
        ),
        (
            EventData::SubagentStop {
                stop_hook_active: false,
                agent_type: "explore".into(),
                agent_id: "child".into(),
                parent_session_id: "s1".into(),
                agent_transcript_path: Some(f.root.join("child.jsonl")),
                last_assistant_message: Some("report".into()),
            },
            "last_assistant_message",
            json!("report"),
        ),
    ];
    assert_eq!(events.len(), HookEvent::ALL.len());
    for (data, field, value) in events {
        let event = data.event();
        std::fs::write(&log, "").unwrap();
        let o = run(&set, &f.input(data)).await;
        assert_eq!(o.reports.len(), 1, "{event}");
        assert_eq!(o.reports[0].exit, HookExit::Code(0), "{event}");
        let seen: Value =
            serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
        assert_eq!(seen["hook_event_name"], event.name());
        assert_eq!(seen[field], value, "{event}: {seen}");
    }
}

#[tokio::test]
async fn a_claude_hook_rewrites_a_file_path_in_claude_terms() {
    let f = fx();
    let redirect = f.script(
        "redirect.sh",
        &format!(
            r#"echo '{{"hookSpecificOutput": {{"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {{"file_path": "{}/src/b.rs", "content": "x"}}}}}}'"#,
            f.root.display()
        ),
    );
    let set = f.set(
        &[(HookEvent::PreToolUse, Some("Write"), &redirect, 10.0)],
        HookOrigin::ClaudeUser("/h/.claude/settings.json".into()),
    );
    let write = f.input(EventData::PreToolUse {
        tool_name: "write_file".into(),
        tool_input: json!({"path": "src/a.rs", "content": "x"}),
        tool_use_id: "c".into(),
    });
    let o = run(&set, &write).await;
    assert_eq!(
        o.updated_input,
        Some(json!({"path": "src/b.rs", "content": "x"}))
    );
}

#[tokio::test]
async fn a_workspace_script_rewritten_during_the_session_does_not_run() {
    let f = fx();
    std::fs::create_dir_all(f.root.join(".garuda")).unwrap();
    std::fs::write(f.root.join(".garuda/h.sh"), "echo ok >> ran\n").unwrap();
    let config = crate::config::Config::default();
    let (config, _) = config
        .with_workspace(
            "[[hooks.PreToolUse]]\nhooks = [{ command = \"bash .garuda/h.sh\" }]\n",
            &f.root.join(".garuda/config.toml"),
        )
        .unwrap();
    let root = crate::fsroot::Root::open(&f.root).unwrap();
    let untrusted = HookSet::load(config.hook_config(), &root, &TrustList::default(), None);
    let trust = TrustList::trusting(&root, untrusted.workspace_hooks()).unwrap();
    let set = HookSet::load(config.hook_config(), &root, &trust, None);
    run(&set, &f.bash_call("ls")).await;
    run(&set, &f.bash_call("ls")).await;
    let ran = f.root.join("ran");
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap(),
        "ok\nok\n",
        "what the hook writes is not part of its digest"
    );
    // Rewritten mid-session (a command the model ran): refused before it runs.
    std::fs::write(f.root.join(".garuda/h.sh"), "echo evil >> ran\n").unwrap();
    let o = run(&set, &f.bash_call("ls")).await;
    assert!(
        matches!(&o.reports[0].exit, HookExit::SpawnFailed(e) if e.contains("changed")),
        "{:?}",
        o.reports
    );
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ok\nok\n");
    // And the next session start sees a changed hook set.
    let next = HookSet::load(config.hook_config(), &root, &trust, None);
    assert!(!next.any());
    assert!(next.trust_notice().unwrap().contains("changed PreToolUse"));
}

// The config builds what the hook set loads; this joins them, here above both.
#[test]
fn load_reads_claude_settings_and_confines_workspace_hooks() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("home");
    let ws = d.path().join("ws");
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::fs::create_dir_all(ws.join(".claude")).unwrap();
    std::fs::write(
        home.join(".claude/settings.json"),
        include_str!("fixtures/claude-settings.json"),
    )
    .unwrap();
    std::fs::write(
        ws.join(".claude/settings.local.json"),
        r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "ws.sh"}]}]}}"#,
    )
    .unwrap();
    std::fs::write(ws.join(".claude/settings.json"), "{ not json").unwrap();
    let mut config = crate::config::Config::parse(
        "[hooks]\nimport = [\"claude\"]\n[[hooks.Stop]]\nhooks = [{ command = \"mine.sh\" }]\n",
        Path::new("c.toml"),
    )
    .unwrap();
    let (merged, warnings) = config
        .with_workspace(
            "[[hooks.PostToolUse]]\nhooks = [{ command = \"wsconf.sh\" }]\n[hooks]\ntrusted = [\"/\"]\n",
            &ws.join(".garuda/config.toml"),
        )
        .unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("hooks.trusted"), "{warnings:?}");
    config = merged;
    let root = crate::fsroot::Root::open(&ws).unwrap();
    let set = HookSet::load(
        config.hook_config(),
        &root,
        &TrustList::default(),
        Some(&home),
    );
    let run: Vec<&str> = set.hooks().iter().map(|h| h.command.as_str()).collect();
    assert_eq!(run[0], "mine.sh");
    assert!(run.iter().any(|c| c.contains("bash-command-log")));
    assert!(!run.contains(&"ws.sh") && !run.contains(&"wsconf.sh"));
    let untrusted: Vec<&str> = set
        .skipped()
        .iter()
        .filter(|s| matches!(s.reason, SkipReason::Untrusted { .. }))
        .filter_map(|s| s.command.as_deref())
        .collect();
    assert_eq!(untrusted, ["wsconf.sh", "ws.sh"]);
    assert_eq!(set.problems().len(), 1, "{:?}", set.problems());
    assert!(
        run.contains(&"echo subagent done"),
        "SubagentStop is imported"
    );
    assert!(
        set.hooks()
            .iter()
            .all(|h| h.origin.is_claude() || h.command == "mine.sh")
    );

    assert_eq!(
        set.trust_notice(),
        None,
        "never trusted: listed as skipped only"
    );
    let trust = TrustList::trusting(&root, set.workspace_hooks()).unwrap();
    let set = HookSet::load(config.hook_config(), &root, &trust, Some(&home));
    assert_eq!(set.trust_notice(), None);
    let run: Vec<&str> = set.hooks().iter().map(|h| h.command.as_str()).collect();
    assert!(
        run.contains(&"ws.sh") && run.contains(&"wsconf.sh"),
        "{run:?}"
    );

    // Without the import, Claude Code's files are not read at all; the hook set is another
    // one then, so the workspace's remaining hook waits for trust again.
    config.hooks.import.clear();
    let set = HookSet::load(config.hook_config(), &root, &trust, Some(&home));
    assert!(set.hooks().iter().all(|h| !h.origin.is_claude()));
    assert!(set.problems().is_empty());
    let notice = set.trust_notice().unwrap();
    assert!(
        notice.contains("removed PreToolUse [Bash] `ws.sh` (.claude/settings.local.json)"),
        "{notice}"
    );
}
