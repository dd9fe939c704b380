//! How one session runs commands: confined by its policy when the machine has a sandbox and
//! the user left it on, unconfined (every command asks, see `tools::approval_needed`)
//! otherwise. Either way the environment is the allow-list and the tree dies with the call.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

use super::policy::SandboxPolicy;
use super::probe::{SandboxMode, SandboxState};
use super::spawn::SandboxCommand;
use super::{SandboxError, SandboxSettings};

/// Why a session's commands are not confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unconfined {
    /// The user's config says `[sandbox] enabled = false`.
    TurnedOff,
    /// The machine offers no sandbox; the reason.
    Unavailable(String),
}

/// What a session's commands run in, as the prompt, `context/inspect` and clients report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSandbox {
    /// `bubblewrap`, or `none`.
    pub mode: SandboxMode,
    /// Sandboxed commands reach the network.
    pub network: bool,
    /// Sandboxed commands run without asking under `auto-edit`.
    pub auto_run: bool,
    /// Sandboxed commands may write the package caches (`[sandbox] package_caches`).
    pub package_caches: bool,
    /// Why commands are not confined, when they are not.
    pub unconfined: Option<Unconfined>,
}

impl CommandSandbox {
    /// A sandbox as a test describes it: bubblewrap when `unconfined` is `None`, else none
    /// for that reason; no network, package caches writable.
    #[cfg(test)]
    pub(crate) fn for_tests(unconfined: Option<Unconfined>, auto_run: bool) -> CommandSandbox {
        CommandSandbox {
            mode: if unconfined.is_none() {
                SandboxMode::Bubblewrap
            } else {
                SandboxMode::None
            },
            network: false,
            auto_run,
            package_caches: true,
            unconfined,
        }
    }

    /// True when commands run confined.
    pub fn confined(&self) -> bool {
        self.unconfined.is_none()
    }

    /// One line for people: what confines commands, or why nothing does.
    pub fn describe(&self) -> String {
        match &self.unconfined {
            None => format!(
                "bubblewrap: writes only in the workspace root, a private /tmp{}, no secrets, \
                 {}",
                if self.package_caches {
                    " and the package caches"
                } else {
                    ""
                },
                if self.network {
                    "network allowed"
                } else {
                    "no network"
                }
            ),
            Some(Unconfined::TurnedOff) => {
                "none: turned off in the user's config ([sandbox] enabled = false)".into()
            }
            Some(Unconfined::Unavailable(why)) => {
                format!("none: {why}; every command asks for approval")
            }
        }
    }
}

/// The runner for a session in `root` on this machine (probed once per process), and what it
/// reports; no runner when the root cannot hold commands (the filesystem root).
pub fn session_runner(
    settings: &SandboxSettings,
    root: &Path,
) -> (Option<Arc<CommandRunner>>, CommandSandbox) {
    match CommandRunner::new(super::probe(), settings, root) {
        Ok(r) => {
            let report = r.report().clone();
            (Some(Arc::new(r)), report)
        }
        Err(e) => (
            None,
            CommandSandbox {
                mode: SandboxMode::None,
                network: false,
                auto_run: false,
                package_caches: false,
                unconfined: Some(Unconfined::Unavailable(e.to_string())),
            },
        ),
    }
}

/// Builds the commands of one session.
#[derive(Debug, Clone)]
pub struct CommandRunner {
    state: Option<SandboxState>,
    policy: SandboxPolicy,
    report: CommandSandbox,
}

impl CommandRunner {
    /// The runner for a session in `root`: confined when `settings.enabled` and `state` has a
    /// sandbox.
    pub fn new(
        state: &SandboxState,
        settings: &SandboxSettings,
        root: &Path,
    ) -> Result<Self, SandboxError> {
        let policy = settings.policy(root)?;
        let unconfined = if !settings.enabled {
            Some(Unconfined::TurnedOff)
        } else if !state.available() {
            Some(Unconfined::Unavailable(
                state
                    .reason
                    .clone()
                    .unwrap_or_else(|| "no sandbox was found".into()),
            ))
        } else {
            None
        };
        let confined = unconfined.is_none();
        Ok(CommandRunner {
            state: confined.then(|| state.clone()),
            report: CommandSandbox {
                mode: if confined {
                    state.mode
                } else {
                    SandboxMode::None
                },
                network: confined && policy.network,
                auto_run: confined && settings.auto_run,
                package_caches: confined && settings.package_caches,
                unconfined,
            },
            policy,
        })
    }

    /// Unconfined commands with the default environment allow-list (tests and embedders).
    pub fn unconfined(root: &Path) -> Result<Self, SandboxError> {
        let settings = SandboxSettings {
            enabled: false,
            ..SandboxSettings::default()
        };
        Self::new(&SandboxState::none("not probed"), &settings, root)
    }

    /// What the session's commands run in.
    pub fn report(&self) -> &CommandSandbox {
        &self.report
    }

    /// The policy commands get.
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// `program args` unconfined whatever the session's sandbox, with the same environment
    /// allow-list and process-group cleanup: for a call the user approved to run outside the
    /// sandbox.
    pub fn unconfined_command<S: AsRef<OsStr>>(
        &self,
        program: impl AsRef<OsStr>,
        args: &[S],
    ) -> Result<SandboxCommand, SandboxError> {
        SandboxCommand::unconfined(&self.policy, program, args)
    }

    /// `program args`, confined when the session's commands are.
    pub fn command<S: AsRef<OsStr>>(
        &self,
        program: impl AsRef<OsStr>,
        args: &[S],
    ) -> Result<SandboxCommand, SandboxError> {
        match &self.state {
            Some(state) => SandboxCommand::new(state, &self.policy, program, args),
            None => SandboxCommand::unconfined(&self.policy, program, args),
        }
    }
}
