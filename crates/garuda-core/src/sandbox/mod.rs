//! The sandbox for commands Garuda runs (the `bash` tool today; hooks and stdio MCP servers
//! later): writes only in the workspace root, a private temp directory and the package caches
//! that exist, no reads of other users' homes or the user's secrets, no network unless allowed,
//! `.git/hooks`, `.git/config` and `.garuda/` read-only, no view of the server's process, an
//! environment by allow-list, and a process tree that ends with the call, a cancel, or the
//! server's death. A `bash` call the user approved with `outside_sandbox` runs unconfined
//! ([`CommandRunner::unconfined_command`]).
//!
//! The mechanism is bubblewrap (`bwrap`): a user, mount, PID, network, IPC and UTS namespace
//! per command. `docs/sandbox.md` says why (and what the Landlock alternative cannot do), what
//! each command costs, and what happens when the kernel offers no sandbox: [`probe`] reports
//! [`SandboxMode::None`] with the reason and [`SandboxCommand::new`] refuses to build a
//! command, so the caller falls back to asking the user; it never runs a command unconfined
//! behind the user's back.
//!
//! Use: [`probe`] once (cached), a [`SandboxPolicy`] per workspace, then for each command
//! [`SandboxCommand::new`] and [`SandboxCommand::spawn`]; the [`SandboxedChild`] it returns
//! kills the whole tree when killed or dropped. The binary calls [`take_secrets`] at start so
//! provider keys leave its environment before any command can run.

mod bwrap;
mod config;
mod env;
mod policy;
mod probe;
mod runner;
mod secrets;
mod spawn;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

pub use bwrap::BwrapInfo;
pub use config::SandboxSettings;
pub use env::{ENV_ALLOW_LIST, EnvPolicy};
pub use policy::{
    CARGO_CACHES, HOME_CACHES, HOME_SECRETS, PROTECTED_IN_ROOT, SYSTEM_SECRETS, SandboxPolicy,
    XDG_CACHES, default_denied_reads, package_caches,
};
pub use probe::{BWRAP_ENV, SandboxMode, SandboxState, probe, probe_uncached};
pub use runner::{CommandRunner, CommandSandbox, Unconfined, session_runner};
pub use secrets::{
    SecretEnv, harden_process, install_secrets, looks_secret, secret_values, secret_var,
    take_secrets,
};
pub use spawn::{SandboxCommand, SandboxedChild, kill_all};

/// Why the sandbox could not confine or start a command.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel or the machine offers no sandbox; the caller must ask the user instead.
    #[error("no sandbox available: {reason}")]
    Unavailable {
        /// What is missing (bubblewrap not installed, user namespaces blocked, …).
        reason: String,
    },
    /// The workspace root cannot be sandboxed (missing, not a folder, or `/`).
    #[error("cannot sandbox with root {path}: {message}")]
    BadRoot {
        /// The root as given.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A path in the policy is not absolute.
    #[error("sandbox path must be absolute: {0}")]
    RelativePath(PathBuf),
    /// The process could not be started.
    #[error("could not start the sandboxed command: {0}")]
    Spawn(#[source] std::io::Error),
}
