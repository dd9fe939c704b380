//! Which workspaces the user trusts to run their own hooks, and with which hooks.
//!
//! A workspace's hooks (its `.garuda/config.toml` `[hooks]`, its `.claude/settings*.json`) are
//! code from a repository that may have been cloned a minute ago, and hooks run outside the
//! command sandbox, so they run only as the user last looked at them: `garuda trust DIR`
//! records in `trusted.toml` (beside the user's config, so it never rewrites the hand-written
//! one) the folder's canonical path, its identity (device and inode) and the hooks it defines
//! ([`WorkspaceHooks`], with a digest). A session's workspace hooks run only when all three
//! still match:
//!
//! - another folder at the trusted path (the folder replaced, or a link put there) is another
//!   identity, so trust does not move to it; a link elsewhere that leads to the trusted folder
//!   is that folder, and is trusted;
//! - a hook added, removed or edited (or a script it names rewritten) waits for
//!   `garuda trust` again, and the session's warnings say which hooks changed.
//!
//! Entries without an identity and a digest (a `trusted.toml` from before, and the user
//! config's hand-written `[hooks] trusted`, which cannot hold a digest) no longer let hooks
//! run; they only make the warning say to run `garuda trust DIR` again.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::digest::{HookChanges, TrustedHook, WorkspaceHooks};
use crate::fsroot::Root;

/// The trust file's name, beside the user's `config.toml`.
pub const TRUST_FILE: &str = "trusted.toml";

/// The trust file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not what `garuda trust` writes.
    #[error("invalid trust file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
}

/// The file's shape: `[[workspace]]` tables, and `trusted = [...]` paths from before
/// identities and digests (read so the warning can name them; they grant nothing).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct TrustFile {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    trusted: Vec<PathBuf>,
    workspace: Vec<TrustEntry>,
}

/// One trusted workspace as `garuda trust` recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustEntry {
    /// The canonical folder.
    pub path: PathBuf,
    /// Its device number when trusted.
    pub dev: u64,
    /// Its inode number when trusted.
    pub ino: u64,
    /// [`WorkspaceHooks::digest`] of its hooks when trusted.
    pub digest: String,
    /// Its hooks when trusted (to say which changed).
    #[serde(default)]
    pub hooks: Vec<TrustedHook>,
}

/// What the trust list says about one workspace as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustStatus {
    /// Trusted, with exactly these hooks.
    Trusted,
    /// Never trusted.
    Untrusted,
    /// Named by an entry without an identity or a digest (a `trusted.toml` from before, or
    /// the user config's `[hooks] trusted`).
    Outdated {
        /// The file holding the old entry.
        source: String,
    },
    /// The folder at the trusted path is not the folder trusted (replaced, or a link).
    Replaced,
    /// Its hooks are not the ones trusted.
    Changed(HookChanges),
}

impl TrustStatus {
    /// True when the workspace's hooks may run.
    pub fn is_trusted(&self) -> bool {
        matches!(self, TrustStatus::Trusted)
    }

    /// Why the workspace's hooks do not run, for people; `None` when they do.
    pub fn explain(&self, root: &Path) -> Option<String> {
        let again = format!("run `garuda trust {}`", root.display());
        Some(match self {
            TrustStatus::Trusted => return None,
            TrustStatus::Untrusted => {
                format!("the workspace is not trusted; {again} to let its hooks run")
            }
            TrustStatus::Outdated { source } => format!(
                "the workspace is trusted by an entry in {source} that records no hooks; \
                 {again} to record the hooks it may run"
            ),
            TrustStatus::Replaced => format!(
                "{} is not the folder that was trusted (it was replaced or is a link now); \
                 {again} if this folder's hooks are yours",
                root.display()
            ),
            TrustStatus::Changed(c) => format!(
                "the workspace's hooks changed since it was trusted ({c}); none of its hooks \
                 run until you {again} again"
            ),
        })
    }
}

/// The trusted workspaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustList {
    entries: Vec<TrustEntry>,
    /// Paths from entries that record no identity nor hooks, with the file naming them.
    outdated: Vec<(PathBuf, String)>,
}

impl TrustList {
    /// The trust file beside a config file.
    pub fn path_beside(config: &Path) -> PathBuf {
        config.with_file_name(TRUST_FILE)
    }

    /// A list trusting `root` as it is now with `hooks` (tests, embedders).
    pub fn trusting(root: &Root, hooks: &WorkspaceHooks) -> Result<TrustList, TrustError> {
        let mut t = TrustList::default();
        t.entries.push(entry_for(root, hooks)?);
        Ok(t)
    }

    /// Reads the trust file; a missing file is an empty list.
    pub fn load(path: &Path) -> Result<TrustList, TrustError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TrustList::default()),
            Err(source) => {
                return Err(TrustError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        let file: TrustFile = toml::from_str(&text).map_err(|e| TrustError::Parse {
            path: path.to_owned(),
            message: e.message().replace('\n', " "),
        })?;
        let source = path.display().to_string();
        Ok(TrustList {
            entries: file
                .workspace
                .into_iter()
                .filter(|e| e.path.is_absolute())
                .collect(),
            outdated: file
                .trusted
                .into_iter()
                .filter(|p| p.is_absolute())
                .map(|p| (p, source.clone()))
                .collect(),
        })
    }

    /// The user's trust: the trust file beside their config (when it was loaded from one),
    /// and `[hooks] trusted` as outdated entries.
    pub fn for_settings(
        settings: &super::HooksSettings,
        home: Option<&Path>,
    ) -> Result<TrustList, TrustError> {
        let file = match &settings.trust_file {
            Some(p) => TrustList::load(p)?,
            None => TrustList::default(),
        };
        Ok(file.with_hand_written(&settings.trusted, home, "the user config's [hooks] trusted"))
    }

    /// This list plus hand-written entries (`~/` is the home folder). They cannot record
    /// hooks, so they count as outdated: the warning tells the user to run `garuda trust`.
    pub fn with_hand_written(
        mut self,
        extra: &[PathBuf],
        home: Option<&Path>,
        source: &str,
    ) -> TrustList {
        for e in extra {
            let p = match (e.strip_prefix("~"), home) {
                (Ok(rest), Some(h)) => h.join(rest),
                _ => e.clone(),
            };
            // Relative entries would depend on the server's working folder: never used.
            if p.is_absolute() {
                self.outdated.push((p, source.to_string()));
            }
        }
        self
    }

    /// The recorded workspaces.
    pub fn entries(&self) -> &[TrustEntry] {
        &self.entries
    }

    /// Folders named by entries that record no hooks, with the file naming each.
    pub fn outdated(&self) -> &[(PathBuf, String)] {
        &self.outdated
    }

    /// What the list says about `root` (opened, so canonical) whose hooks are `hooks` now.
    /// Exactly that folder: trusting `~/src` does not trust every repository cloned under
    /// it later, and the recorded path is compared as written (never resolved again), so a
    /// link put at a trusted path does not carry the trust to its target.
    pub fn status(&self, root: &Root, hooks: &WorkspaceHooks) -> TrustStatus {
        if let Some(e) = self.entries.iter().find(|e| e.path == root.path()) {
            if root.identity().ok() != Some((e.dev, e.ino)) {
                return TrustStatus::Replaced;
            }
            if e.digest == hooks.digest() {
                return TrustStatus::Trusted;
            }
            return TrustStatus::Changed(hooks.changes_from(&WorkspaceHooks::of(e.hooks.clone())));
        }
        // Old entries only decide the warning's wording, so resolving them is harmless here.
        let outdated = self
            .outdated
            .iter()
            .find(|(p, _)| p == root.path() || p.canonicalize().is_ok_and(|c| c == root.path()));
        match outdated {
            Some((_, source)) => TrustStatus::Outdated {
                source: source.clone(),
            },
            None => TrustStatus::Untrusted,
        }
    }

    /// Records `root` with its identity and `hooks` in the trust file at `path`, creating
    /// it and replacing an entry for the same folder; false when the same was recorded
    /// already. The file is replaced by rename, so a crash leaves the old one.
    pub fn add(path: &Path, root: &Root, hooks: &WorkspaceHooks) -> Result<bool, TrustError> {
        let io = |p: &Path| {
            let p = p.to_owned();
            move |source| TrustError::Io { path: p, source }
        };
        let new = entry_for(root, hooks)?;
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => return Err(io(path)(source)),
        };
        let mut file: TrustFile = toml::from_str(&text).map_err(|e| TrustError::Parse {
            path: path.to_owned(),
            message: e.message().replace('\n', " "),
        })?;
        if file.workspace.contains(&new) {
            return Ok(false);
        }
        file.trusted.retain(|p| p != &new.path);
        file.workspace.retain(|e| e.path != new.path);
        file.workspace.push(new);
        let mut text = String::from(
            "# Workspaces whose own hooks (.garuda/config.toml, .claude/settings*.json) may run.\n\
             # Written by `garuda trust DIR`: the canonical folder, its device and inode, and the\n\
             # hooks trusted; a folder whose hooks differ waits for `garuda trust` again.\n",
        );
        let body = toml::to_string(&file).map_err(|e| TrustError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        text.push_str(&body);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let tmp = path.with_extension(format!("toml.{}.tmp", std::process::id()));
        std::fs::write(&tmp, text).map_err(io(&tmp))?;
        std::fs::rename(&tmp, path).map_err(io(path))?;
        Ok(true)
    }
}

/// The entry for `root` as it is now.
fn entry_for(root: &Root, hooks: &WorkspaceHooks) -> Result<TrustEntry, TrustError> {
    let (dev, ino) = root.identity().map_err(|e| TrustError::Io {
        path: root.path().to_owned(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(TrustEntry {
        path: root.path().to_owned(),
        dev,
        ino,
        digest: hooks.digest(),
        hooks: hooks.hooks().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(command: &str) -> TrustedHook {
        TrustedHook {
            file: ".garuda/config.toml".into(),
            event: "Stop".into(),
            matcher: None,
            command: command.into(),
            digest: "d".into(),
        }
    }

    #[test]
    fn add_records_identity_and_hooks_and_is_idempotent() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("cfg/garuda/trusted.toml");
        let ws = d.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let root = Root::open(&ws.join("sub/..")).unwrap();
        let hooks = WorkspaceHooks::of(vec![hook("a.sh")]);
        assert!(TrustList::add(&file, &root, &hooks).unwrap());
        assert!(!TrustList::add(&file, &root, &hooks).unwrap());
        let list = TrustList::load(&file).unwrap();
        assert_eq!(list.entries().len(), 1);
        let e = &list.entries()[0];
        assert_eq!(e.path, ws.canonicalize().unwrap());
        assert_eq!((e.dev, e.ino), root.identity().unwrap());
        assert_eq!(e.hooks, hooks.hooks());
        assert_eq!(list.status(&root, &hooks), TrustStatus::Trusted);
        let sub = Root::open(&ws.join("sub")).unwrap();
        assert_eq!(
            list.status(&sub, &hooks),
            TrustStatus::Untrusted,
            "a subfolder is another workspace"
        );

        // Trusting again with other hooks replaces the entry.
        let more = WorkspaceHooks::of(vec![hook("a.sh"), hook("b.sh")]);
        assert!(matches!(
            list.status(&root, &more),
            TrustStatus::Changed(ref c) if c.added == [hook("b.sh")]
        ));
        assert!(TrustList::add(&file, &root, &more).unwrap());
        let list = TrustList::load(&file).unwrap();
        assert_eq!(list.entries().len(), 1);
        assert_eq!(list.status(&root, &more), TrustStatus::Trusted);

        assert_eq!(
            TrustList::load(&d.path().join("none")).unwrap(),
            TrustList::default()
        );
        std::fs::write(&file, "trusted = 1\n").unwrap();
        assert!(matches!(
            TrustList::load(&file),
            Err(TrustError::Parse { .. })
        ));
    }

    #[test]
    fn the_file_format_round_trips_and_rejects_unknown_keys() {
        let text = "trusted = [\"/old\"]\n\n[[workspace]]\npath = \"/w\"\ndev = 1\nino = 2\n\
                    digest = \"sha256:x\"\n\n[[workspace.hooks]]\nfile = \".claude/settings.json\"\n\
                    event = \"Stop\"\ncommand = \"a.sh\"\ndigest = \"d\"\n";
        let f: TrustFile = toml::from_str(text).unwrap();
        assert_eq!(f.trusted, [PathBuf::from("/old")]);
        assert_eq!(f.workspace[0].path, PathBuf::from("/w"));
        assert_eq!((f.workspace[0].dev, f.workspace[0].ino), (1, 2));
        assert_eq!(f.workspace[0].hooks[0].matcher, None);
        let again: TrustFile = toml::from_str(&toml::to_string(&f).unwrap()).unwrap();
        assert_eq!(again.workspace, f.workspace);
        assert!(toml::from_str::<TrustFile>("[[workspace]]\npath = \"/w\"\n").is_err());
        assert!(
            toml::from_str::<TrustFile>(
                "[[workspace]]\npath = \"/w\"\ndev = 1\nino = 2\ndigest = \"x\"\nextra = 1\n"
            )
            .is_err()
        );
    }

    #[test]
    fn a_bare_path_entry_is_outdated_and_grants_nothing() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let canon = ws.canonicalize().unwrap();
        let file = d.path().join("trusted.toml");
        std::fs::write(&file, format!("trusted = [{:?}]\n", canon.display())).unwrap();
        let root = Root::open(&ws).unwrap();
        let hooks = WorkspaceHooks::of(vec![hook("a.sh")]);
        let list = TrustList::load(&file).unwrap();
        let st = list.status(&root, &hooks);
        assert!(
            matches!(st, TrustStatus::Outdated { ref source } if source.contains("trusted.toml"))
        );
        assert!(!st.is_trusted());
        assert!(st.explain(&canon).unwrap().contains("garuda trust"));
        // `garuda trust` turns the bare entry into a recorded one.
        assert!(TrustList::add(&file, &root, &hooks).unwrap());
        let list = TrustList::load(&file).unwrap();
        assert!(list.outdated().is_empty());
        assert!(list.status(&root, &hooks).is_trusted());
    }

    #[test]
    fn hand_written_entries_expand_home_ignore_relative_ones_and_grant_nothing() {
        let t = TrustList::default().with_hand_written(
            &[
                PathBuf::from("~/p"),
                PathBuf::from("rel"),
                PathBuf::from("/abs"),
            ],
            Some(Path::new("/h")),
            "config.toml",
        );
        let paths: Vec<&Path> = t.outdated().iter().map(|(p, _)| p.as_path()).collect();
        assert_eq!(paths, [Path::new("/h/p"), Path::new("/abs")]);
        assert!(t.entries().is_empty());
    }

    #[test]
    fn a_folder_replaced_at_the_trusted_path_is_not_trusted_but_a_link_to_it_is() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        let other = d.path().join("other");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let hooks = WorkspaceHooks::of(vec![hook("a.sh")]);
        let list = TrustList::trusting(&Root::open(&ws).unwrap(), &hooks).unwrap();

        // Another path leading to the trusted folder: the same folder, trusted.
        let link_elsewhere = d.path().join("via-link");
        std::os::unix::fs::symlink(&ws, &link_elsewhere).unwrap();
        assert!(
            list.status(&Root::open(&link_elsewhere).unwrap(), &hooks)
                .is_trusted()
        );

        // The trusted path made a link to another folder: that folder is not trusted.
        std::fs::rename(&ws, d.path().join("ws.old")).unwrap();
        std::os::unix::fs::symlink(&other, &ws).unwrap();
        let swapped = Root::open(&ws).unwrap();
        assert_eq!(list.status(&swapped, &hooks), TrustStatus::Untrusted);

        // A new folder at the trusted path: same path, another identity.
        std::fs::remove_file(&ws).unwrap();
        std::fs::create_dir(&ws).unwrap();
        let replaced = Root::open(&ws).unwrap();
        assert_eq!(list.status(&replaced, &hooks), TrustStatus::Replaced);
        assert!(
            TrustStatus::Replaced
                .explain(replaced.path())
                .unwrap()
                .contains("not the folder that was trusted")
        );
    }
}
