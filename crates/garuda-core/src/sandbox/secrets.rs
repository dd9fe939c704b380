//! Keeping the server's secrets away from commands, in layers:
//!
//! 1. Commands get an environment by allow-list ([`super::EnvPolicy`]), never the server's.
//! 2. The server takes provider keys out of its own environment at start ([`take_secrets`]):
//!    out of the variables, and out of the initial environment block that
//!    `/proc/PID/environ` shows (the kernel keeps pointing at it after `unsetenv`).
//! 3. The server is not dumpable ([`harden_process`]): processes of the same user outside the
//!    sandbox (a command the user let run unsandboxed) cannot ptrace it nor open its
//!    `/proc/PID/{environ,mem,fd}`.
//! 4. Sandboxed commands run in their own PID namespace: the server has no `/proc` entry there,
//!    which holds even when everything runs as root (root ignores 3).
//! 5. The initial environment block keeps only the allow-list's names ([`take_secrets`] moves
//!    every other variable to the heap first, so the server still reads them): a process that
//!    can open `/proc/<server>/environ` despite 3 (one running as root, as the server does in
//!    a container) finds no `GITHUB_PAT` or `DATABASE_URL` there.
//!
//! What no layer covers: a process of the same user that bypasses 3 (root, or `CAP_SYS_PTRACE`)
//! and runs outside the sandbox (a hook, an approved `outside_sandbox` command, any command
//! with `[sandbox] enabled = false`) can still read the server's memory through
//! `/proc/<server>/mem` or ptrace, provider keys included. Only 4 holds against root.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;

/// Parts of variable names that mark credentials (API keys, tokens, passwords).
const SECRET_NAME_MARKS: &[&str] = &[
    "API_KEY",
    "APIKEY",
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "PRIVATE_KEY",
    "ACCESS_KEY",
];

/// True for environment variable names that look like credentials.
pub fn looks_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    SECRET_NAME_MARKS.iter().any(|m| n.contains(m))
}

/// Secret values taken out of the environment; `Debug` shows names only.
#[derive(Clone, Default)]
pub struct SecretEnv(BTreeMap<String, String>);

impl std::fmt::Debug for SecretEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl SecretEnv {
    /// The value a variable had at start, if it was taken.
    pub fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }

    /// The names taken.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// Takes every variable that [`looks_secret`] or whose name is in `also` out of the process
/// environment and the `/proc/self/environ` block, and returns their values; every other
/// variable off the allow-list stays in the environment but leaves the block too (provider
/// lookups read them from here: `provider::build_with_env(spec, cfg, &|v| secrets.get(v)
/// .or_else(|| std::env::var(v).ok()))`). Non-UTF-8 values are removed and not returned.
///
/// # Safety
///
/// Changes the process environment: no other thread may read or write it meanwhile. Call it
/// first thing in `main`, before the tokio runtime or any other thread starts.
pub unsafe fn take_secrets(also: &[&str]) -> SecretEnv {
    let mut taken = BTreeMap::new();
    let mut names = Vec::new();
    for (k, v) in std::env::vars_os() {
        let Some(name) = k.to_str() else { continue };
        if looks_secret(name) || also.contains(&name) {
            if let Ok(v) = v.into_string() {
                taken.insert(name.to_string(), v);
            }
            names.push(name.to_string());
        }
    }
    for n in &names {
        // SAFETY: the caller guarantees no other thread touches the environment.
        unsafe { std::env::remove_var(n) };
    }
    // Every other variable the block shows and commands do not get is copied to the heap (set
    // again: libc then points at its own copy) so its entry in the block can go too, whatever
    // its name. Loader and libc settings stay: the loader keeps pointers into the block.
    for (k, v) in std::env::vars_os() {
        let Some(name) = k.to_str() else { continue };
        if !keeps_block_entry(name) {
            // SAFETY: the caller guarantees no other thread touches the environment.
            unsafe { std::env::set_var(&k, &v) };
            names.push(name.to_string());
        }
    }
    // Best effort: a kernel without /proc or a locked-down /proc/self/mem leaves the copy in
    // the block; the PID namespace still hides it from commands.
    if let Err(e) = scrub_environ_block(&names) {
        tracing::debug!("could not scrub the initial environment block: {e}");
    }
    SecretEnv(taken)
}

/// Variables whose `NAME=value` stays visible in `/proc/<server>/environ`: the allow-list
/// every command gets anyway, and what the loader and libc read at start and may point into.
fn keeps_block_entry(name: &str) -> bool {
    super::ENV_ALLOW_LIST.contains(&name)
        || name.starts_with("LD_")
        || name.starts_with("MALLOC_")
        || name == "GLIBC_TUNABLES"
}

static SECRETS: std::sync::OnceLock<SecretEnv> = std::sync::OnceLock::new();

/// Keeps the secrets [`take_secrets`] took for [`secret_var`]; the first call wins.
pub fn install_secrets(secrets: SecretEnv) {
    let _ = SECRETS.set(secrets);
}

/// Every secret value of the server's environment with its variable's name: those
/// [`take_secrets`] took at start, and any variable still set whose name [`looks_secret`]
/// (a library caller that took none). The web tools refuse URLs carrying one.
pub fn secret_values() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = SECRETS
        .get()
        .map(|s| s.0.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    for (k, v) in std::env::vars() {
        if looks_secret(&k) && !out.iter().any(|(n, _)| *n == k) {
            out.push((k, v));
        }
    }
    out
}

/// A variable as the server started with it: from the installed secrets, else the
/// environment. Provider keys are read through this.
pub fn secret_var(name: &str) -> Option<String> {
    SECRETS
        .get()
        .and_then(|s| s.get(name))
        .or_else(|| std::env::var(name).ok())
}

/// Marks the server non-dumpable (see the module notes). Call once at start.
pub fn harden_process() -> io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    Ok(())
}

/// Overwrites `NAME=value` entries for `names` in the environment block the kernel shows as
/// `/proc/self/environ`, through `/proc/self/mem` (no raw pointers into the stack).
fn scrub_environ_block(names: &[String]) -> io::Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    let (start, end) = environ_range()?;
    let len = usize::try_from(end.saturating_sub(start)).map_err(io::Error::other)?;
    let mem: File = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/proc/self/mem")?;
    let mut block = vec![0u8; len];
    mem.read_exact_at(&mut block, start)?;
    let mut changed = false;
    let mut at = 0usize;
    for entry in block.clone().split(|b| *b == 0) {
        let name = entry.split(|b| *b == b'=').next().unwrap_or_default();
        if entry.contains(&b'=') && names.iter().any(|n| n.as_bytes() == name) {
            block[at..at + entry.len()].fill(0);
            changed = true;
        }
        at += entry.len() + 1;
    }
    if changed {
        mem.write_all_at(&block, start)?;
    }
    Ok(())
}

/// `env_start` and `env_end` from `/proc/self/stat` (fields 50 and 51).
fn environ_range() -> io::Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The command name (field 2) may hold spaces and parentheses; fields after the last `)`
    // start at field 3.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| io::Error::other("unexpected /proc/self/stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> io::Result<u64> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| io::Error::other("no environment range in /proc/self/stat"))
    };
    Ok((field(50)?, field(51)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        assert!(looks_secret("ANTHROPIC_API_KEY"));
        assert!(looks_secret("github_token"));
        assert!(!looks_secret("PATH"));
    }

    #[test]
    fn debug_hides_values() {
        let s = SecretEnv(BTreeMap::from([(
            "K_TOKEN".to_string(),
            "v4lue".to_string(),
        )]));
        assert_eq!(format!("{s:?}"), "{\"K_TOKEN\"}");
    }

    #[test]
    fn the_block_keeps_only_the_allow_list_and_loader_settings() {
        assert!(keeps_block_entry("PATH") && keeps_block_entry("LD_LIBRARY_PATH"));
        assert!(!keeps_block_entry("GITHUB_PAT"));
        assert!(!keeps_block_entry("DATABASE_URL"));
    }

    #[test]
    fn environ_range_is_readable() {
        let (a, b) = environ_range().unwrap();
        assert!(a > 0 && b > a);
    }
}
