//! The `[sandbox]` table of the user's config (never a workspace's: a cloned repository must
//! not widen its own sandbox).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::SandboxError;
use super::env::EnvPolicy;
use super::policy::SandboxPolicy;

/// Sandbox settings, e.g. `[sandbox] network = true`, `env = ["CC"]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "snake_case")]
pub struct SandboxSettings {
    /// Run commands sandboxed when the machine can. Off, commands run unconfined and follow
    /// the approval policy as they are (the user's explicit choice).
    pub enabled: bool,
    /// Let sandboxed commands use the network.
    pub network: bool,
    /// Under `auto-edit`, run sandboxed commands without asking.
    pub auto_run: bool,
    /// Variables passed to commands besides PATH, HOME, LANG and TERM.
    pub env: Vec<String>,
    /// Let commands write the package caches that exist (cargo's registry and git folders,
    /// `~/.npm`, `~/.cache/pip`, …; see [`super::policy::HOME_CACHES`]).
    pub package_caches: bool,
    /// More writable folders (absolute or `~/…`).
    pub writable: Vec<String>,
    /// More paths commands cannot read (absolute or `~/…`).
    pub deny_read: Vec<String>,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            enabled: true,
            network: false,
            auto_run: false,
            package_caches: true,
            env: Vec::new(),
            writable: Vec::new(),
            deny_read: Vec::new(),
        }
    }
}

impl SandboxSettings {
    /// The policy for `root`: the defaults of [`SandboxPolicy::for_root`] plus these settings.
    pub fn policy(&self, root: &Path) -> Result<SandboxPolicy, SandboxError> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut p = SandboxPolicy::for_root(root)?;
        p.network = self.network;
        p.env = EnvPolicy::with_extra(&self.env);
        if !self.package_caches {
            p.writable.clear();
        }
        for w in &self.writable {
            p.writable.push(expand(w, home.as_deref())?);
        }
        for d in &self.deny_read {
            p.deny_read.push(expand(d, home.as_deref())?);
        }
        Ok(p)
    }
}

/// `~/x` under the home folder; anything else must be absolute.
fn expand(p: &str, home: Option<&Path>) -> Result<PathBuf, SandboxError> {
    let path = match (p.strip_prefix("~/"), home) {
        (Some(rest), Some(h)) => h.join(rest),
        _ => PathBuf::from(p),
    };
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(SandboxError::RelativePath(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_expands() {
        let s: SandboxSettings =
            toml::from_str("network = true\nenv = [\"CC\"]\nwritable = [\"~/.cache/x\"]").unwrap();
        assert!(s.enabled && s.network);
        assert_eq!(
            expand("~/.cache/x", Some(Path::new("/h"))).unwrap(),
            PathBuf::from("/h/.cache/x")
        );
        assert!(expand("rel/x", Some(Path::new("/h"))).is_err());
        assert!(toml::from_str::<SandboxSettings>("nope = 1").is_err());
    }
}
