//! What a hook's exit code and output mean, as Claude Code documents them, and how the results
//! of one event's hooks merge into one outcome. Pure.
//!
//! - Exit 0: stdout that is a JSON object is read for its fields; plain text is context for
//!   SessionStart and UserPromptSubmit and summary instructions for PreCompact (ignored for
//!   other events). Stdout that starts like JSON (`{`) but does not parse is a warning and
//!   is not used at all: a half-written object must not become context.
//! - Exit 2: blocks (the event's own meaning), with stderr as the reason; stdout is ignored.
//!   For events that cannot block, stderr is a warning for the user.
//! - Any other exit, a timeout, a failed start: a warning for the user, never the model;
//!   the event goes on as if the hook were not there.

use serde_json::Value;

use super::HookEvent;

/// A hook's say on a tool call (PreToolUse).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PermissionDecision {
    /// Run it without asking for approval.
    Allow,
    /// Ask the user, whatever the policy.
    Ask,
    /// Do not run it; the model reads the reason.
    Deny,
}

/// How one hook's process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookExit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it (not one of ours).
    Signal(i32),
    /// It ran past its timeout; its process group was killed.
    TimedOut,
    /// The event was cancelled; its process group was killed.
    Cancelled,
    /// It could not be started.
    SpawnFailed(String),
}

/// What one hook left behind, before interpretation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRun {
    /// How it ended.
    pub exit: HookExit,
    /// Its stdout, lossily decoded, cut at the cap.
    pub stdout: String,
    /// Its stderr, lossily decoded, cut at the cap.
    pub stderr: String,
    /// True when stdout or stderr went past the cap (the rest was read and dropped).
    pub truncated: bool,
    /// How long it ran.
    pub elapsed: std::time::Duration,
}

/// One hook's result, interpreted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookResult {
    /// PreToolUse: its decision.
    pub permission: Option<PermissionDecision>,
    /// The reason given with the decision.
    pub permission_reason: Option<String>,
    /// It blocks the event, with this reason.
    pub block: Option<String>,
    /// Text for the model (or, for PreCompact, summary instructions).
    pub context: Option<String>,
    /// PreToolUse: the input the call runs with instead.
    pub updated_input: Option<Value>,
    /// `continue: false`: the turn stops, with this reason for the user.
    pub stop: Option<String>,
    /// `systemMessage`: for the user.
    pub system_message: Option<String>,
    /// `suppressOutput`.
    pub suppress_output: bool,
    /// Something for the user: the hook failed, timed out, printed bad JSON.
    pub warning: Option<String>,
}

fn trimmed(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

fn first_line(s: &str) -> &str {
    s.trim().lines().next().unwrap_or("")
}

/// Interprets one hook's run for `event`; `label` names the hook in warnings.
pub fn interpret(event: HookEvent, run: &HookRun, label: &str) -> HookResult {
    let mut r = HookResult::default();
    match &run.exit {
        HookExit::Code(0) => {}
        HookExit::Code(2) => {
            let reason = trimmed(&run.stderr)
                .unwrap_or_else(|| format!("blocked by hook `{label}` (exit code 2)"));
            if event.can_block() {
                if event == HookEvent::PreToolUse {
                    r.permission = Some(PermissionDecision::Deny);
                    r.permission_reason = Some(reason.clone());
                }
                r.block = Some(reason);
            } else {
                r.warning = Some(format!("hook `{label}` exited with 2: {reason}"));
            }
            return r;
        }
        HookExit::Code(c) => {
            let why = first_line(&run.stderr);
            r.warning = Some(if why.is_empty() {
                format!("hook `{label}` exited with {c}")
            } else {
                format!("hook `{label}` exited with {c}: {why}")
            });
            return r;
        }
        HookExit::Signal(s) => {
            r.warning = Some(format!("hook `{label}` was killed by signal {s}"));
            return r;
        }
        HookExit::TimedOut => {
            r.warning = Some(format!(
                "hook `{label}` timed out after {:.1} s; its processes were killed",
                run.elapsed.as_secs_f64()
            ));
            return r;
        }
        HookExit::Cancelled => return r,
        HookExit::SpawnFailed(e) => {
            r.warning = Some(format!("hook `{label}` could not start: {e}"));
            return r;
        }
    }
    let out = run.stdout.trim();
    if out.is_empty() {
        return r;
    }
    if !out.starts_with('{') {
        if event.plain_stdout_is_context() {
            r.context = Some(out.to_string());
            if run.truncated {
                r.warning = Some(format!(
                    "hook `{label}` printed more than the output cap; the rest was dropped"
                ));
            }
        }
        return r;
    }
    let json: serde_json::Map<String, Value> = match serde_json::from_str(out) {
        Ok(Value::Object(m)) => m,
        Ok(_) | Err(_) => {
            let why = match serde_json::from_str::<Value>(out) {
                Err(e) => e.to_string(),
                Ok(_) => "not an object".into(),
            };
            r.warning = Some(if run.truncated {
                format!(
                    "hook `{label}` printed more than the output cap; its JSON was cut and is not used"
                )
            } else {
                format!("hook `{label}` printed malformed JSON ({why}); its output is not used")
            });
            return r;
        }
    };
    apply_json(event, &json, label, &mut r);
    r
}

fn apply_json(
    event: HookEvent,
    json: &serde_json::Map<String, Value>,
    label: &str,
    r: &mut HookResult,
) {
    let s = |v: Option<&Value>| v.and_then(Value::as_str).and_then(trimmed);
    if json.get("continue").and_then(Value::as_bool) == Some(false) {
        r.stop =
            Some(s(json.get("stopReason")).unwrap_or_else(|| format!("stopped by hook `{label}`")));
    }
    r.system_message = s(json.get("systemMessage"));
    r.suppress_output = json.get("suppressOutput").and_then(Value::as_bool) == Some(true);
    let reason = s(json.get("reason"));
    match json.get("decision").and_then(Value::as_str) {
        Some("block") if event.can_block() => {
            let why = reason
                .clone()
                .unwrap_or_else(|| format!("blocked by hook `{label}`"));
            if event == HookEvent::PreToolUse {
                r.permission = Some(PermissionDecision::Deny);
                r.permission_reason = Some(why.clone());
            }
            r.block = Some(why);
        }
        // The older PreToolUse spelling of allow.
        Some("approve") if event == HookEvent::PreToolUse => {
            r.permission = Some(PermissionDecision::Allow);
            r.permission_reason = reason;
        }
        _ => {}
    }
    let Some(specific) = json.get("hookSpecificOutput").and_then(Value::as_object) else {
        return;
    };
    if let Some(name) = specific.get("hookEventName").and_then(Value::as_str)
        && name != event.name()
    {
        r.warning = Some(format!(
            "hook `{label}` answered hookSpecificOutput for {name} to a {} event; it is ignored",
            event.name()
        ));
        return;
    }
    if let Some(c) = s(specific.get("additionalContext")) {
        r.context = Some(c);
    }
    if event == HookEvent::PreToolUse {
        let decision = match specific.get("permissionDecision").and_then(Value::as_str) {
            Some("allow") => Some(PermissionDecision::Allow),
            Some("ask") => Some(PermissionDecision::Ask),
            Some("deny") => Some(PermissionDecision::Deny),
            Some(other) => {
                r.warning = Some(format!(
                    "hook `{label}` gave permissionDecision {other:?} (allow, ask or deny); it is ignored"
                ));
                None
            }
            None => None,
        };
        if let Some(d) = decision {
            // hookSpecificOutput is the current form and wins over the older `decision`.
            r.permission = Some(d);
            r.permission_reason = s(specific.get("permissionDecisionReason"));
            r.block = (d == PermissionDecision::Deny).then(|| {
                r.permission_reason
                    .clone()
                    .unwrap_or_else(|| format!("denied by hook `{label}`"))
            });
        }
        if let Some(u) = specific.get("updatedInput").filter(|u| u.is_object()) {
            r.updated_input = Some(u.clone());
        }
    }
}

/// One hook's part in an outcome, for events and `context/inspect`.
#[derive(Debug, Clone, PartialEq)]
pub struct HookReport {
    /// The command.
    pub command: String,
    /// Where it was defined.
    pub origin: super::HookOrigin,
    /// How it ended.
    pub exit: HookExit,
    /// How long it ran.
    pub elapsed: std::time::Duration,
    /// It blocked (or denied) the event.
    pub blocked: bool,
}

/// The merged result of one event's hooks.
#[derive(Debug, Clone, PartialEq)]
pub struct HookOutcome {
    /// The event.
    pub event: HookEvent,
    /// PreToolUse: the strongest decision given (deny over ask over allow); None when no hook
    /// decided.
    pub permission: Option<PermissionDecision>,
    /// The reasons of the hooks that gave that decision, in config order, one per line.
    pub permission_reason: Option<String>,
    /// The event is blocked, with the reasons of every blocking hook in config order, one per
    /// paragraph. PreToolUse: the call does not run (the same as a deny). UserPromptSubmit:
    /// the prompt is refused. PostToolUse: the reason reaches the model as feedback. Stop:
    /// the turn continues with it. PreCompact: the compaction does not run.
    pub block: Option<String>,
    /// Context from every hook, in config order (PreCompact: summary instructions).
    pub context: Vec<String>,
    /// PreToolUse: the first `updatedInput` in config order.
    pub updated_input: Option<Value>,
    /// `continue: false` from some hook: the turn stops with the first reason (for the user).
    pub stop: Option<String>,
    /// `systemMessage`s, for the user.
    pub system_messages: Vec<String>,
    /// Some hook asked that its output not be shown.
    pub suppress_output: bool,
    /// Failures and problems, for the user and not the model.
    pub warnings: Vec<String>,
    /// The event was cancelled before every hook finished.
    pub cancelled: bool,
    /// Every hook that ran, in config order.
    pub reports: Vec<HookReport>,
}

impl HookOutcome {
    /// The outcome of an event no hook matched.
    pub fn none(event: HookEvent) -> HookOutcome {
        HookOutcome {
            event,
            permission: None,
            permission_reason: None,
            block: None,
            context: Vec::new(),
            updated_input: None,
            stop: None,
            system_messages: Vec::new(),
            suppress_output: false,
            warnings: Vec::new(),
            cancelled: false,
            reports: Vec::new(),
        }
    }

    /// The context joined into one text (blank line between hooks), None when there is none.
    pub fn context_text(&self) -> Option<String> {
        (!self.context.is_empty()).then(|| self.context.join("\n\n"))
    }

    /// Merges per-hook results given in config order.
    pub fn merge(event: HookEvent, results: Vec<(HookResult, HookReport)>) -> HookOutcome {
        let mut o = HookOutcome::none(event);
        let mut blocks: Vec<String> = Vec::new();
        let mut decided: Vec<(PermissionDecision, Option<String>)> = Vec::new();
        for (r, mut report) in results {
            report.blocked = r.block.is_some();
            if let Some(d) = r.permission {
                decided.push((d, r.permission_reason.clone()));
            }
            if let Some(b) = r.block {
                blocks.push(b);
            }
            o.context.extend(r.context);
            if o.updated_input.is_none() {
                o.updated_input = r.updated_input;
            }
            if o.stop.is_none() {
                o.stop = r.stop;
            }
            o.system_messages.extend(r.system_message);
            o.suppress_output |= r.suppress_output;
            o.warnings.extend(r.warning);
            o.reports.push(report);
        }
        if let Some(best) = decided.iter().map(|(d, _)| *d).max() {
            o.permission = Some(best);
            let reasons: Vec<String> = decided
                .into_iter()
                .filter(|(d, _)| *d == best)
                .filter_map(|(_, r)| r)
                .collect();
            o.permission_reason = (!reasons.is_empty()).then(|| reasons.join("\n"));
        }
        o.block = (!blocks.is_empty()).then(|| blocks.join("\n\n"));
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn run(code: i32, stdout: &str, stderr: &str) -> HookRun {
        HookRun {
            exit: HookExit::Code(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            truncated: false,
            elapsed: Duration::from_millis(5),
        }
    }

    fn report() -> HookReport {
        HookReport {
            command: "x".into(),
            origin: super::super::HookOrigin::UserConfig,
            exit: HookExit::Code(0),
            elapsed: Duration::ZERO,
            blocked: false,
        }
    }

    #[test]
    fn exit_codes() {
        let r = interpret(
            HookEvent::PreToolUse,
            &run(2, "{\"decision\":\"approve\"}", "rm is forbidden\n"),
            "p",
        );
        assert_eq!(r.permission, Some(PermissionDecision::Deny));
        assert_eq!(r.block.as_deref(), Some("rm is forbidden"));
        let r = interpret(HookEvent::SessionStart, &run(2, "", "nope"), "p");
        assert_eq!(r.block, None);
        assert!(r.warning.unwrap().contains("nope"));
        let r = interpret(HookEvent::Stop, &run(2, "", ""), "p");
        assert!(r.block.unwrap().contains("exit code 2"));
        let r = interpret(
            HookEvent::PreToolUse,
            &run(1, "{\"decision\":\"block\"}", "boom\nmore"),
            "p",
        );
        assert_eq!((r.block, r.permission), (None, None));
        assert_eq!(r.warning.as_deref(), Some("hook `p` exited with 1: boom"));
    }

    #[test]
    fn plain_text_is_context_only_for_context_events() {
        for e in [
            HookEvent::SessionStart,
            HookEvent::UserPromptSubmit,
            HookEvent::PreCompact,
        ] {
            assert_eq!(
                interpret(e, &run(0, " hello\n", ""), "p")
                    .context
                    .as_deref(),
                Some("hello")
            );
        }
        for e in [
            HookEvent::PreToolUse,
            HookEvent::PostToolUse,
            HookEvent::Stop,
        ] {
            assert_eq!(
                interpret(e, &run(0, "hello", ""), "p"),
                HookResult::default()
            );
        }
    }

    #[test]
    fn malformed_json_is_a_warning_and_unused() {
        let r = interpret(
            HookEvent::SessionStart,
            &run(0, "{\"hookSpecificOutput\": ", ""),
            "p",
        );
        assert_eq!(r.context, None);
        assert!(r.warning.unwrap().contains("malformed JSON"));
        let mut cut = run(0, "{\"a\": \"xxxx", "");
        cut.truncated = true;
        assert!(
            interpret(HookEvent::SessionStart, &cut, "p")
                .warning
                .unwrap()
                .contains("cap")
        );
    }

    #[test]
    fn json_fields() {
        let r = interpret(
            HookEvent::PreToolUse,
            &run(
                0,
                r#"{"continue": false, "stopReason": "enough", "suppressOutput": true, "systemMessage": "note",
                "hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask",
                "permissionDecisionReason": "check it", "updatedInput": {"command": "ls -l"}, "additionalContext": "ctx"}}"#,
                "",
            ),
            "p",
        );
        assert_eq!(r.stop.as_deref(), Some("enough"));
        assert!(r.suppress_output);
        assert_eq!(r.system_message.as_deref(), Some("note"));
        assert_eq!(r.permission, Some(PermissionDecision::Ask));
        assert_eq!(r.permission_reason.as_deref(), Some("check it"));
        assert_eq!(
            r.updated_input,
            Some(serde_json::json!({"command": "ls -l"}))
        );
        assert_eq!(r.context.as_deref(), Some("ctx"));
        assert_eq!(r.block, None);

        let r = interpret(
            HookEvent::PostToolUse,
            &run(0, r#"{"decision": "block", "reason": "lint failed"}"#, ""),
            "p",
        );
        assert_eq!(r.block.as_deref(), Some("lint failed"));
        let r = interpret(
            HookEvent::UserPromptSubmit,
            &run(
                0,
                r#"{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "time: now"}}"#,
                "",
            ),
            "p",
        );
        assert_eq!(r.context.as_deref(), Some("time: now"));
        let r = interpret(
            HookEvent::SessionStart,
            &run(
                0,
                r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "x"}}"#,
                "",
            ),
            "p",
        );
        assert_eq!(r.context, None);
        assert!(r.warning.unwrap().contains("ignored"));
        let r = interpret(
            HookEvent::SessionEnd,
            &run(0, r#"{"decision": "block", "reason": "x"}"#, ""),
            "p",
        );
        assert_eq!(r.block, None, "SessionEnd cannot block");
        let r = interpret(
            HookEvent::PreToolUse,
            &run(
                0,
                r#"{"hookSpecificOutput": {"permissionDecision": "deny"}}"#,
                "",
            ),
            "p",
        );
        assert_eq!(r.permission, Some(PermissionDecision::Deny));
        assert!(r.block.unwrap().contains("denied by hook"));
    }

    #[test]
    fn deny_wins_over_ask_over_allow_and_config_order_holds() {
        let mk =
            |d: PermissionDecision, why: &str, ctx: Option<&str>, upd: Option<Value>| HookResult {
                permission: Some(d),
                permission_reason: Some(why.into()),
                block: (d == PermissionDecision::Deny).then(|| why.to_string()),
                context: ctx.map(str::to_string),
                updated_input: upd,
                ..HookResult::default()
            };
        let o = HookOutcome::merge(
            HookEvent::PreToolUse,
            vec![
                (
                    mk(
                        PermissionDecision::Allow,
                        "fine",
                        Some("one"),
                        Some(serde_json::json!({"a": 1})),
                    ),
                    report(),
                ),
                (
                    mk(
                        PermissionDecision::Ask,
                        "hmm",
                        Some("two"),
                        Some(serde_json::json!({"a": 2})),
                    ),
                    report(),
                ),
            ],
        );
        assert_eq!(o.permission, Some(PermissionDecision::Ask));
        assert_eq!(o.permission_reason.as_deref(), Some("hmm"));
        assert_eq!(o.context, ["one", "two"]);
        assert_eq!(o.context_text().as_deref(), Some("one\n\ntwo"));
        assert_eq!(o.updated_input, Some(serde_json::json!({"a": 1})));
        assert_eq!(o.block, None);
        let o = HookOutcome::merge(
            HookEvent::PreToolUse,
            vec![
                (mk(PermissionDecision::Deny, "no rm", None, None), report()),
                (mk(PermissionDecision::Allow, "fine", None, None), report()),
                (
                    mk(PermissionDecision::Deny, "no sudo", None, None),
                    report(),
                ),
                (
                    HookResult {
                        warning: Some("w".into()),
                        ..HookResult::default()
                    },
                    report(),
                ),
            ],
        );
        assert_eq!(o.permission, Some(PermissionDecision::Deny));
        assert_eq!(o.permission_reason.as_deref(), Some("no rm\nno sudo"));
        assert_eq!(o.block.as_deref(), Some("no rm\n\nno sudo"));
        assert_eq!(o.warnings, ["w"]);
        assert_eq!(
            o.reports.iter().map(|r| r.blocked).collect::<Vec<_>>(),
            [true, false, true, false]
        );
        assert_eq!(
            HookOutcome::merge(HookEvent::Stop, vec![]),
            HookOutcome::none(HookEvent::Stop)
        );
    }
}
