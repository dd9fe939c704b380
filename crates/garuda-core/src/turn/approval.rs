//! Whether a tool call runs or asks the person, and what the person is offered: one pure
//! decision over the call's facts (its class, the risk of the path it edits, whether it leaves
//! the sandbox, whether the user's config lets a network call through under `full-auto`, a
//! PreToolUse hook's answer, the policy, the session's sandbox, an earlier "allow always"). The turn only gathers the facts and asks; a `deny` from a hook is decided
//! before this (the call never gets here).

use crate::hooks::PermissionDecision;
use crate::sandbox::CommandSandbox;
use crate::tools::{self, EditRisk, Policy, ToolClass};

/// What the decision weighs about one call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallFacts<'a> {
    /// What the tool does.
    pub class: ToolClass,
    /// The tool works on the session itself (`snip`, `exit_plan_mode`, `mcp_tool_search`).
    pub works_on_session: bool,
    /// How much the path an edit changes matters (links resolved).
    pub edit_risk: EditRisk,
    /// The call asks to leave the sandbox of a session whose commands are confined.
    pub escape: bool,
    /// A network call the user's config lets run unasked under `full-auto`
    /// (`[web] fetch_without_asking`; a workspace's config cannot set it).
    pub network_unasked: bool,
    /// A PreToolUse hook's answer, if one gave any.
    pub hook: Option<PermissionDecision>,
    /// The session's approval policy.
    pub policy: Policy,
    /// What the session's commands run in.
    pub sandbox: &'a CommandSandbox,
    /// The person answered "allow always" for this call's key earlier.
    pub always_allowed: bool,
}

/// What happens to the call before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// It runs without asking; `remembered` when an earlier "allow always" is the reason.
    Run {
        /// An earlier "allow always" let it through (the record says so).
        remembered: bool,
    },
    /// The person is asked; `once_only` offers no "allow always" and ignores one given.
    Ask {
        /// Leaving the sandbox and editing what runs outside it are asked every time.
        once_only: bool,
    },
}

/// The decision for one call (pure).
pub(crate) fn decide(f: &CallFacts<'_>) -> Decision {
    // Changing the session's own view or mode touches nothing of the person's: never asked
    // (leaving plan mode asks its own question, with the plan).
    if f.works_on_session {
        return Decision::Run { remembered: false };
    }
    let network_through =
        f.class == ToolClass::Network && f.policy == Policy::FullAuto && f.network_unasked;
    let policy_needs =
        tools::approval_needed(f.policy, f.class, f.sandbox, f.edit_risk) && !network_through;
    // Leaving the sandbox, or editing what runs outside it later (git's config, hooks, agent
    // and skill files), asks each time: no policy, "allow always" or hook `allow` skips it.
    let every_time = f.escape || f.edit_risk == EditRisk::Protected;
    let needs = match f.hook {
        _ if every_time => true,
        // `ask` asks even under full-auto; `allow` skips what the policy would ask, but not
        // the rule that an unsandboxed machine asks for every command.
        Some(PermissionDecision::Ask) => true,
        // A network call is asked for by the policy alone, which the hook's `allow` answers.
        Some(PermissionDecision::Allow) => {
            policy_needs
                && f.class != ToolClass::Network
                && tools::approval_needed(Policy::FullAuto, f.class, f.sandbox, EditRisk::Plain)
        }
        _ => policy_needs,
    };
    if !needs {
        return Decision::Run { remembered: false };
    }
    let hook_asks = f.hook == Some(PermissionDecision::Ask);
    if f.always_allowed && !hook_asks && !every_time {
        return Decision::Run { remembered: true };
    }
    Decision::Ask {
        once_only: every_time,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Unconfined;

    fn sandbox(unconfined: Option<Unconfined>) -> CommandSandbox {
        CommandSandbox::for_tests(unconfined, false)
    }

    const RUN: Decision = Decision::Run { remembered: false };
    const REMEMBERED: Decision = Decision::Run { remembered: true };
    const ASK: Decision = Decision::Ask { once_only: false };
    const ONCE: Decision = Decision::Ask { once_only: true };

    #[test]
    fn the_ladder_as_a_table() {
        use EditRisk::*;
        use Policy::*;
        use ToolClass::*;
        let boxed = sandbox(None);
        let no_box = sandbox(Some(Unconfined::Unavailable("none".into())));
        let off = sandbox(Some(Unconfined::TurnedOff));
        let allow = Some(PermissionDecision::Allow);
        let ask = Some(PermissionDecision::Ask);
        // (policy, class, risk, escape, hook, sandbox, always allowed) → decision; the user's
        // `[web] fetch_without_asking` is off here (its rows are `network_as_a_table`).
        let rows: &[(
            Policy,
            ToolClass,
            EditRisk,
            bool,
            _,
            &CommandSandbox,
            bool,
            Decision,
        )] = &[
            // Reads never ask.
            (Ask, Read, Plain, false, None, &boxed, false, RUN),
            // Edits follow the policy and the path's risk.
            (Ask, Edit, Plain, false, None, &boxed, false, ASK),
            (AutoEdit, Edit, Plain, false, None, &boxed, false, RUN),
            (AutoEdit, Edit, Risky, false, None, &boxed, false, ASK),
            (FullAuto, Edit, Risky, false, None, &boxed, false, RUN),
            // A protected edit asks under every policy, once only, past "always" and `allow`.
            (FullAuto, Edit, Protected, false, None, &boxed, false, ONCE),
            (FullAuto, Edit, Protected, false, allow, &boxed, true, ONCE),
            (AutoEdit, Edit, Protected, false, None, &off, true, ONCE),
            // "Allow always" covers what the policy asks, unless a hook asks.
            (Ask, Edit, Plain, false, None, &boxed, true, REMEMBERED),
            (Ask, Edit, Plain, false, ask, &boxed, true, ASK),
            (AutoEdit, Edit, Risky, false, None, &boxed, true, REMEMBERED),
            // Commands: confined ones run under full-auto; without a sandbox they ask.
            (FullAuto, Exec, Plain, false, None, &boxed, false, RUN),
            (FullAuto, Exec, Plain, false, None, &no_box, false, ASK),
            (FullAuto, Exec, Plain, false, None, &off, false, RUN),
            (AutoEdit, Exec, Plain, false, None, &boxed, false, ASK),
            // A hook's `allow` skips the policy, not a machine without a sandbox.
            (AutoEdit, Exec, Plain, false, allow, &boxed, false, RUN),
            (Ask, Exec, Plain, false, allow, &no_box, false, ASK),
            // A hook's `ask` asks under full-auto.
            (FullAuto, Exec, Plain, false, ask, &boxed, false, ASK),
            // Leaving the sandbox asks every time, once only.
            (FullAuto, Exec, Plain, true, None, &boxed, false, ONCE),
            (FullAuto, Exec, Plain, true, allow, &boxed, true, ONCE),
            // Memory writes ask under `ask` only.
            (Ask, Memory, Plain, false, None, &boxed, false, ASK),
            (AutoEdit, Memory, Plain, false, None, &boxed, false, RUN),
            // Work on the session itself is never asked, not even at a hook's `ask`.
            (Ask, Session, Plain, false, ask, &no_box, false, RUN),
            (Ask, ToolClass::Plan, Plain, false, ask, &no_box, false, RUN),
            // A network call asks under every policy, plan mode's too; "allow always" and a
            // hook's `allow` answer it, a hook's `ask` asks.
            (Ask, Network, Plain, false, None, &boxed, false, ASK),
            (AutoEdit, Network, Plain, false, None, &boxed, false, ASK),
            (FullAuto, Network, Plain, false, None, &boxed, false, ASK),
            (FullAuto, Network, Plain, false, None, &off, false, ASK),
            (
                Policy::Plan,
                Network,
                Plain,
                false,
                None,
                &boxed,
                false,
                ASK,
            ),
            (
                FullAuto, Network, Plain, false, None, &boxed, true, REMEMBERED,
            ),
            (AutoEdit, Network, Plain, false, allow, &no_box, false, RUN),
            (FullAuto, Network, Plain, false, ask, &boxed, true, ASK),
        ];
        for (i, (policy, class, risk, escape, hook, sb, always, want)) in rows.iter().enumerate() {
            let got = decide(&CallFacts {
                class: *class,
                works_on_session: matches!(class, Session | ToolClass::Plan),
                edit_risk: *risk,
                escape: *escape,
                network_unasked: false,
                hook: *hook,
                policy: *policy,
                sandbox: sb,
                always_allowed: *always,
            });
            assert_eq!(
                got, *want,
                "row {i}: {policy:?} {class:?} {risk:?} {hook:?}"
            );
        }
    }

    #[test]
    fn network_as_a_table() {
        use Policy::*;
        let boxed = sandbox(None);
        let no_box = sandbox(Some(Unconfined::Unavailable("none".into())));
        let ask = Some(PermissionDecision::Ask);
        // (policy, user's `fetch_without_asking`, hook) → decision
        let rows: &[(
            Policy,
            bool,
            Option<PermissionDecision>,
            &CommandSandbox,
            Decision,
        )] = &[
            // Only full-auto with the user's switch runs unasked, sandbox or none.
            (FullAuto, true, None, &boxed, RUN),
            (FullAuto, true, None, &no_box, RUN),
            (FullAuto, false, None, &boxed, ASK),
            // The switch is for full-auto alone: the other policies still ask.
            (Ask, true, None, &boxed, ASK),
            (AutoEdit, true, None, &boxed, ASK),
            (Policy::Plan, true, None, &boxed, ASK),
            // A hook's `ask` asks whatever the switch says.
            (FullAuto, true, ask, &boxed, ASK),
        ];
        for (i, (policy, unasked, hook, sb, want)) in rows.iter().enumerate() {
            let got = decide(&CallFacts {
                class: ToolClass::Network,
                works_on_session: false,
                edit_risk: EditRisk::Plain,
                escape: false,
                network_unasked: *unasked,
                hook: *hook,
                policy: *policy,
                sandbox: sb,
                always_allowed: false,
            });
            assert_eq!(got, *want, "row {i}: {policy:?} {unasked} {hook:?}");
        }
    }
}
