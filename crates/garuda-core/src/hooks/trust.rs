//! Which workspaces the user trusts to run their own hooks.
//!
//! A workspace's hooks (its `.garuda/config.toml` `[hooks]`, its `.claude/settings*.json`) are
//! code from a repository that may have been cloned a minute ago, and hooks run outside the
//! command sandbox, so they run only in a workspace the user named: in the user's config
//! (`[hooks] trusted = [...]`, written by hand) or in `trusted.toml` beside it, which
//! `garuda trust DIR` maintains so it never rewrites the user's hand-written config.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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

/// The file's shape: `trusted = ["/abs/dir", ...]`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct TrustFile {
    trusted: Vec<PathBuf>,
}

/// The trusted workspace roots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustList {
    entries: Vec<PathBuf>,
}

impl TrustList {
    /// The trust file beside a config file.
    pub fn path_beside(config: &Path) -> PathBuf {
        config.with_file_name(TRUST_FILE)
    }

    /// A list of exactly these roots (tests, embedders).
    pub fn of(entries: impl IntoIterator<Item = PathBuf>) -> TrustList {
        let mut t = TrustList::default();
        for e in entries {
            t.push(e);
        }
        t
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
        Ok(TrustList::of(file.trusted))
    }

    /// The user's trust: the trust file beside their config (when it was loaded from one)
    /// and `[hooks] trusted`.
    pub fn for_settings(
        settings: &super::HooksSettings,
        home: Option<&Path>,
    ) -> Result<TrustList, TrustError> {
        let file = match &settings.trust_file {
            Some(p) => TrustList::load(p)?,
            None => TrustList::default(),
        };
        Ok(file.with_entries(&settings.trusted, home))
    }

    /// This list plus the user's config's `[hooks] trusted` entries (`~/` is the home folder).
    pub fn with_entries(mut self, extra: &[PathBuf], home: Option<&Path>) -> TrustList {
        for e in extra {
            let p = match (e.strip_prefix("~"), home) {
                (Ok(rest), Some(h)) => h.join(rest),
                _ => e.clone(),
            };
            self.push(p);
        }
        self
    }

    fn push(&mut self, p: PathBuf) {
        // Relative entries would depend on the server's working folder: never trusted.
        if p.is_absolute() && !self.entries.contains(&p) {
            self.entries.push(p);
        }
    }

    /// The roots, as written.
    pub fn entries(&self) -> &[PathBuf] {
        &self.entries
    }

    /// True when `root` (canonical) is one of the trusted roots. Exactly that folder: trusting
    /// `~/src` does not trust every repository cloned under it later.
    pub fn is_trusted(&self, root: &Path) -> bool {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        self.entries.iter().any(|e| {
            let e = e.canonicalize().unwrap_or_else(|_| e.clone());
            e == root
        })
    }

    /// Adds `dir` (made canonical) to the trust file at `path`, creating it; false when it was
    /// there already. The file is replaced by rename, so a crash leaves the old one.
    pub fn add(path: &Path, dir: &Path) -> Result<(PathBuf, bool), TrustError> {
        let io = |p: &Path| {
            let p = p.to_owned();
            move |source| TrustError::Io { path: p, source }
        };
        let canon = dir.canonicalize().map_err(io(dir))?;
        if !canon.is_dir() {
            return Err(TrustError::Io {
                path: canon,
                source: std::io::Error::other("not a folder"),
            });
        }
        let mut list = TrustList::load(path)?;
        if list.entries.contains(&canon) {
            return Ok((canon, false));
        }
        list.entries.push(canon.clone());
        let mut text = String::from(
            "# Workspaces whose own hooks (.garuda/config.toml, .claude/settings*.json) may run.\n\
             # Written by `garuda trust DIR`; one canonical folder per entry.\n",
        );
        let body = toml::to_string(&TrustFile {
            trusted: list.entries,
        })
        .map_err(|e| TrustError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        text.push_str(&body);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let tmp = path.with_extension(format!("toml.{}.tmp", std::process::id()));
        std::fs::write(&tmp, text).map_err(io(&tmp))?;
        std::fs::rename(&tmp, path).map_err(io(path))?;
        Ok((canon, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_is_idempotent_and_exact() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("cfg/garuda/trusted.toml");
        let ws = d.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let (canon, added) = TrustList::add(&file, &ws.join("sub/..")).unwrap();
        assert!(added);
        assert_eq!(canon, ws.canonicalize().unwrap());
        assert!(!TrustList::add(&file, &ws).unwrap().1);
        let list = TrustList::load(&file).unwrap();
        assert_eq!(list.entries().len(), 1);
        assert!(list.is_trusted(&ws));
        assert!(
            !list.is_trusted(&ws.join("sub")),
            "a subfolder is another workspace"
        );
        assert!(!list.is_trusted(d.path()));
        assert!(TrustList::add(&file, &d.path().join("missing")).is_err());
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
    fn config_entries_expand_home_and_ignore_relative_ones() {
        let t = TrustList::default().with_entries(
            &[
                PathBuf::from("~/p"),
                PathBuf::from("rel"),
                PathBuf::from("/abs"),
            ],
            Some(Path::new("/h")),
        );
        assert_eq!(t.entries(), [PathBuf::from("/h/p"), PathBuf::from("/abs")]);
    }
}
