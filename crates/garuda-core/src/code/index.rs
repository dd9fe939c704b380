//! A workspace's code index: built on a thread of its own when the workspace opens, kept
//! current file by file from the watcher, read by the code tools of every session there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use super::lang::Lang;
use super::parse::{FileSymbols, parse};
use crate::fsroot::Root;

/// What the index holds at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexCaps {
    /// Files indexed; the walk stops counting past this.
    pub max_files: usize,
    /// Definitions and references over all files; files past it are left out.
    pub max_symbols: usize,
    /// Bytes of one file; larger files are skipped.
    pub max_file_bytes: u64,
}

impl Default for IndexCaps {
    fn default() -> Self {
        IndexCaps {
            max_files: 20_000,
            max_symbols: 2_000_000,
            max_file_bytes: 1024 * 1024,
        }
    }
}

/// How far the index is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// Files indexed so far (skipped ones included: they were looked at).
    pub indexed: usize,
    /// Files found to index.
    pub total: usize,
    /// The first build has finished.
    pub done: bool,
}

/// What the index holds now: files by root-relative path.
#[derive(Debug, Default)]
pub struct IndexState {
    /// Each indexed file's symbols, by root-relative path (`/`-separated).
    pub files: BTreeMap<String, FileSymbols>,
    symbols: usize,
    progress: Progress,
    /// Files left out and why (too large, generated, binary, over the symbol cap).
    skipped: usize,
}

impl IndexState {
    /// How far the index is.
    pub fn progress(&self) -> Progress {
        self.progress
    }

    /// Files left out (too large, generated, binary, over the cap).
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// Definitions and references held.
    pub fn symbols(&self) -> usize {
        self.symbols
    }

    /// Puts `file` in place of what `rel` held; false when the symbol cap leaves it out.
    pub(crate) fn put(&mut self, rel: String, file: FileSymbols, caps: &IndexCaps) -> bool {
        let old = self.files.get(&rel).map_or(0, FileSymbols::len);
        if self.symbols - old + file.len() > caps.max_symbols {
            self.remove(&rel);
            return false;
        }
        self.symbols = self.symbols - old + file.len();
        self.files.insert(rel, file);
        true
    }

    fn remove(&mut self, rel: &str) {
        if let Some(f) = self.files.remove(rel) {
            self.symbols -= f.len();
        }
    }
}

/// One workspace's index, shared by its sessions.
#[derive(Debug)]
pub struct CodeIndex {
    root: Arc<Root>,
    caps: IndexCaps,
    state: RwLock<IndexState>,
    stop: AtomicBool,
}

/// Why a file is not indexed.
#[derive(Debug, PartialEq, Eq)]
enum Skip {
    /// Not one of the languages.
    Language,
    /// Gone, unreadable, a link out of the root, not a regular file.
    Unreadable,
    /// Too large, binary or generated (minified).
    Unsuitable,
}

impl CodeIndex {
    /// An empty index over `root`.
    pub fn new(root: Arc<Root>, caps: IndexCaps) -> CodeIndex {
        CodeIndex {
            root,
            caps,
            state: RwLock::default(),
            stop: AtomicBool::new(false),
        }
    }

    /// An index over `root` built on a thread of its own (the caller never waits for it);
    /// `built` gets the folders holding indexed files when the build is done (to watch them).
    pub fn start(
        root: Arc<Root>,
        caps: IndexCaps,
        built: Box<dyn FnOnce(Vec<String>) + Send>,
    ) -> Arc<CodeIndex> {
        let index = Arc::new(CodeIndex::new(root, caps));
        let worker = index.clone();
        let spawned = std::thread::Builder::new()
            .name("code-index".into())
            .spawn(move || {
                let started = std::time::Instant::now();
                worker.build();
                if worker.stop.load(Ordering::Relaxed) {
                    return;
                }
                built(worker.folders());
                // Logged once its folders are watched: from here on an edit reaches it.
                let st = worker.read();
                tracing::info!(target: "garuda::code",
                    "code index of {}: {} files indexed, {} left out, {} symbols, in {} ms",
                    worker.root.path().display(), st.files.len(), st.skipped, st.symbols,
                    started.elapsed().as_millis());
            });
        if let Err(e) = spawned {
            tracing::warn!("the code index cannot start: {e}");
        }
        index
    }

    /// Stops a build under way (the workspace closed).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// The state to read (held briefly: the builder writes one file at a time).
    pub fn read(&self) -> RwLockReadGuard<'_, IndexState> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The root it indexes.
    pub fn root(&self) -> &Arc<Root> {
        &self.root
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, IndexState> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Walks the root (gitignore-aware, links not followed, entries checked to lie in the
    /// root) and indexes every file of a known language, up to the caps. Blocking.
    pub fn build(&self) {
        let files = self.candidates(self.root.path());
        self.write().progress.total = files.len();
        for rel in files {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let read = self.read_file(&rel);
            let mut st = self.write();
            match read {
                Ok(file) => {
                    if !st.put(rel, file, &self.caps) {
                        st.skipped += 1;
                    }
                }
                Err(_) => st.skipped += 1,
            }
            st.progress.indexed += 1;
        }
        self.write().progress.done = true;
    }

    /// The files of known languages beneath `base` that a walk keeps, root-relative, sorted,
    /// at most the file cap.
    fn candidates(&self, base: &Path) -> Vec<String> {
        let mut out = BTreeSet::new();
        let mut within = self.root.within();
        for item in crate::fsroot::walker(base, None).build() {
            if self.stop.load(Ordering::Relaxed) || out.len() >= self.caps.max_files {
                break;
            }
            let Ok(entry) = item else { continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) || Lang::of(entry.path()).is_none() {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(self.root.path()) else {
                continue;
            };
            if within.contains(rel) {
                out.insert(show(rel));
            }
        }
        out.into_iter().collect()
    }

    /// Reads and parses one root-relative file.
    fn read_file(&self, rel: &str) -> Result<FileSymbols, Skip> {
        let lang = Lang::of(Path::new(rel)).ok_or(Skip::Language)?;
        let max = self.caps.max_file_bytes;
        let (bytes, total) = self
            .root
            .read_bytes(Path::new(rel), max + 1)
            .map_err(|_| Skip::Unreadable)?;
        if total > max || !looks_like_source(&bytes) {
            return Err(Skip::Unsuitable);
        }
        let text = String::from_utf8_lossy(&bytes);
        Ok(parse(lang, &text))
    }

    /// Re-reads the files named (root-relative, as the watcher reports them): a changed file
    /// is parsed again alone, a removed one is dropped, a new one is added unless ignored.
    /// Blocking.
    pub fn update(&self, changed: &[String]) {
        tracing::info!(target: "garuda::code", "code index: {} changed files read again", changed.len());
        for rel in changed {
            let path = Path::new(rel);
            if Lang::of(path).is_none() {
                continue;
            }
            let known = self.read().files.contains_key(rel);
            if !known && !self.kept_by_walk(path) {
                continue;
            }
            match self.read_file(rel) {
                Ok(file) => {
                    let mut st = self.write();
                    if !st.put(rel.clone(), file, &self.caps) {
                        st.skipped += 1;
                    }
                }
                Err(Skip::Unreadable) => self.write().remove(rel),
                Err(_) => {
                    let mut st = self.write();
                    st.remove(rel);
                    st.skipped += 1;
                }
            }
        }
    }

    /// True when a walk of the root would index `rel` (a new file: not ignored, under the
    /// file cap, in the root through real folders).
    fn kept_by_walk(&self, rel: &Path) -> bool {
        if self.read().files.len() >= self.caps.max_files {
            return false;
        }
        // Each step down is one a walk from the root takes: a depth-1 walk of the folder
        // above reads the ignore files of every folder above it, and an ignored folder is
        // never entered (a walk inside it would not know it is ignored).
        let steps: Vec<&Path> = rel
            .ancestors()
            .filter(|a| !a.as_os_str().is_empty())
            .collect();
        for step in steps.iter().rev() {
            let parent = step.parent().unwrap_or(Path::new(""));
            let want_file = step == &rel;
            let found = crate::fsroot::walker(&self.root.path().join(parent), Some(1))
                .build()
                .filter_map(Result::ok)
                .any(|e| {
                    let kind_ok = e
                        .file_type()
                        .is_some_and(|t| if want_file { t.is_file() } else { t.is_dir() });
                    kind_ok && e.path().strip_prefix(self.root.path()).ok() == Some(*step)
                });
            if !found {
                return false;
            }
        }
        self.root.within().contains(rel)
    }

    /// The folders holding indexed files (root-relative, the root left out), for the watcher.
    pub fn folders(&self) -> Vec<String> {
        let st = self.read();
        let mut dirs: BTreeSet<String> = BTreeSet::new();
        for f in st.files.keys() {
            // The root itself is always watched.
            if let Some(d) = Path::new(f).parent().map(show).filter(|d| !d.is_empty()) {
                dirs.insert(d);
            }
        }
        dirs.into_iter().collect()
    }
}

/// Not binary (no NUL in the first 8 KiB) and not minified or generated one-liners (lines
/// average under 400 bytes).
fn looks_like_source(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(8192)];
    if head.contains(&0) {
        return false;
    }
    let lines = bytes.iter().filter(|b| **b == b'\n').count() + 1;
    bytes.len() / lines < 400
}

fn show(rel: &Path) -> String {
    rel.to_string_lossy().replace('\\', "/")
}
