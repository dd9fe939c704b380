//! Open workspaces: canonical roots, their merged config, cached prompt assembly, watchers.

mod date;
mod git;
mod git_config;
pub mod watch;

pub use date::{civil_date, local_date, restate_date, start_note, today};
pub use git::{GitSandbox, GitState, git_note, read_git_state};

pub use watch::{DEBOUNCE, WatchHandle};

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use sha2::{Digest, Sha256};

use crate::config::{Config, ConfigError};
use crate::fsroot::{FsError, Root};
use crate::prompt::{self, Assembled, GatherSpec, Gathered, Limits, PromptOptions, SourceFile};

/// Why a workspace could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The root is missing, not a folder, or unreadable.
    #[error(transparent)]
    Root(#[from] FsError),
    /// The workspace's `.garuda/config.toml` is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No open workspace has this id.
    #[error("workspace {0} is not open")]
    NotOpen(String),
}

/// The most folders the watcher holds for the code index (one inotify watch each).
const MAX_CODE_FOLDERS: usize = 4096;

/// Where the workspace's own config lives, relative to the root.
pub const WORKSPACE_CONFIG: &str = ".garuda/config.toml";

/// One open workspace.
pub struct Workspace {
    /// Stable id derived from the canonical root.
    pub id: String,
    /// The root, opened as a capability.
    pub root: Arc<Root>,
    /// User config merged with the workspace's harmless options.
    pub config: Config,
    /// Problems found while opening.
    pub warnings: Vec<String>,
    /// What commands of a new session here run in (the machine's sandbox, probed once).
    pub sandbox: crate::sandbox::CommandSandbox,
    /// What a new session with the configured policy and the built-in tools has, for the
    /// prompt a client previews.
    pub facts: prompt::SessionFacts,
    cache: Mutex<Cache>,
    /// Shared with the code index's builder, which adds its folders when it is done.
    watcher: Arc<Mutex<Option<WatchHandle>>>,
    /// The code index, started by the first to ask while `[features] code_index` is on.
    code: std::sync::OnceLock<Arc<crate::code::CodeIndex>>,
    /// Why the workspace could not be watched, when it could not.
    watch_error: Mutex<Option<String>>,
    /// Bumped by every invalidation: sessions re-check their nested instructions when it moved.
    generation: AtomicU64,
    /// The workspaces of the same root this one replaced after a config reload, as long as
    /// live sessions hold them: their watchers are gone, so this one's changes invalidate
    /// them too, and those sessions go on seeing changes on disk.
    predecessors: Mutex<Vec<std::sync::Weak<Workspace>>>,
}

/// Gathering reads files and is keyed by limits; assembly is pure and keyed by all options;
/// nested instruction files are read per folder, on demand.
#[derive(Default)]
struct Cache {
    gathered: HashMap<String, Arc<Gathered>>,
    assembled: HashMap<String, Arc<Assembled>>,
    nested: HashMap<String, Arc<Vec<SourceFile>>>,
}

/// The id of a workspace: a short hash of its canonical root, so it is the same across
/// restarts and the same root opened twice gives the same workspace.
pub fn workspace_id(root: &Path) -> String {
    let digest = Sha256::digest(root.as_os_str().as_encoded_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("ws-{hex}")
}

impl Workspace {
    /// Opens `path` with the user's config and the workspace's own `.garuda/config.toml`.
    pub fn open(path: &Path, user: &Config) -> Result<Workspace, WorkspaceError> {
        let root = Arc::new(Root::open(path)?);
        let mut warnings = Vec::new();
        let config = match root.read_text(Path::new(WORKSPACE_CONFIG), 256 * 1024) {
            Ok(read) => {
                let file = root.path().join(WORKSPACE_CONFIG);
                let (cfg, w) = user.with_workspace(&read.text, &file)?;
                warnings.extend(w);
                cfg
            }
            Err(FsError::NotFound(_)) => user.clone(),
            Err(e) => {
                warnings.push(format!("{WORKSPACE_CONFIG} not used: {e}"));
                user.clone()
            }
        };
        let (_, sandbox) = crate::sandbox::session_runner(&config.sandbox, root.path());
        // The tools of a session without client tools, skills or custom agents.
        let mut tools = crate::tools::ToolRegistry::for_session(Vec::new())
            .unwrap_or_default()
            .with_agents(
                Default::default(),
                config.agents.explore,
                crate::provider::models::DEFAULT_CONTEXT_WINDOW,
            )
            .0
            .with_web(
                config.web(),
                config.features.web,
                config.model.as_deref().is_some_and(|m| {
                    config
                        .provider_config()
                        .is_ok_and(|cfg| crate::provider::speaks_anthropic(m, &cfg))
                }),
            )
            .0;
        // The code tools' prompt line, for the prompt a client previews; an index that is
        // never built stands in for the one a session gets.
        if let Some(ci) = config.features.code_index {
            let idle = crate::code::CodeIndex::new(root.clone(), crate::code::IndexCaps::default());
            let map = ci == crate::prompt::CodeIndex::All;
            tools = tools.with_code_index(Arc::new(idle), map).0;
        }
        let facts = crate::tools::session_facts(config.approval.policy, &sandbox, &tools);
        Ok(Workspace {
            id: workspace_id(root.path()),
            root,
            config,
            warnings,
            sandbox,
            facts,
            cache: Mutex::new(Cache::default()),
            watcher: Arc::new(Mutex::new(None)),
            code: std::sync::OnceLock::new(),
            watch_error: Mutex::new(None),
            generation: AtomicU64::new(0),
            predecessors: Mutex::new(Vec::new()),
        })
    }

    /// The workspace's code index when `[features] code_index` is on: the first call starts
    /// its build on a thread of its own and returns at once; later calls share it.
    pub fn code_index(&self) -> Option<Arc<crate::code::CodeIndex>> {
        self.config.features.code_index?;
        let index = self.code.get_or_init(|| {
            let watcher = self.watcher.clone();
            crate::code::CodeIndex::start(
                self.root.clone(),
                crate::code::IndexCaps::default(),
                Box::new(move |folders| {
                    let w = watcher.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(w) = w.as_ref() {
                        for d in folders.iter().take(MAX_CODE_FOLDERS) {
                            w.watch_dir(d);
                        }
                    }
                }),
            )
        });
        Some(index.clone())
    }

    /// Source files changed on disk: the index reads them again, off the caller's thread.
    pub fn code_changed(&self, paths: Vec<String>) {
        let Some(index) = self.code.get().cloned() else {
            return;
        };
        let work = move || index.update(&paths);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn_blocking(work);
            }
            Err(_) => work(),
        }
    }

    /// What gathering reads besides the limits.
    pub fn gather_spec(&self) -> GatherSpec {
        GatherSpec {
            settings: self.config.instructions.clone(),
            global: self.config.global_instructions.clone(),
        }
    }

    /// How many times the files read were forgotten (a change on disk, a compaction).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// The nested instruction files of the subfolder `dir` (root-relative), from cache when
    /// nothing changed since. Reading problems (a link out of the root, a FIFO) are logged once
    /// per read, not at every look-up.
    pub fn nested(&self, dir: &str) -> Arc<Vec<SourceFile>> {
        if let Some(v) = self.lock_cache().nested.get(dir) {
            return v.clone();
        }
        let settings = &self.config.instructions;
        let (files, warnings) = prompt::gather_dir(
            &self.root,
            dir,
            &settings.file_names(),
            settings.nested_chars,
        );
        for w in warnings {
            tracing::warn!("{w}");
        }
        let v = Arc::new(files);
        self.lock_cache().nested.insert(dir.to_string(), v.clone());
        v
    }

    /// Watches these subfolders (root-relative) for instruction files, when a watcher runs.
    pub fn watch_dirs<'a>(&self, dirs: impl IntoIterator<Item = &'a String>) {
        let w = self.watcher.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = w.as_ref() {
            for d in dirs {
                w.watch_dir(d);
            }
        }
    }

    /// The prompt options this workspace uses when the caller gives none.
    pub fn default_options(&self, model: Option<&str>) -> PromptOptions {
        PromptOptions {
            model: model
                .or(self.config.model.as_deref())
                .unwrap_or("none")
                .to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            features: self.config.features.clone(),
            facts: self.facts.clone(),
            limits: self.config.limits,
            agent: None,
            mcp_instructions: Vec::new(),
            cache_breaker: Some(self.config.context.cache_breaker.clone())
                .filter(|b| !b.is_empty()),
        }
    }

    /// The files read for `limits`, from cache when nothing changed since.
    pub fn gathered(&self, limits: &Limits) -> Arc<Gathered> {
        let key = serde_json::to_string(limits).unwrap_or_default();
        if let Some(g) = self.lock_cache().gathered.get(&key) {
            return g.clone();
        }
        let g = Arc::new(prompt::gather_with(&self.root, limits, &self.gather_spec()));
        self.lock_cache().gathered.insert(key, g.clone());
        g
    }

    /// The assembled prompt for `opts` when it is cached, without any IO.
    pub fn cached(&self, opts: &PromptOptions) -> Option<Arc<Assembled>> {
        let key = serde_json::to_string(opts).unwrap_or_default();
        self.lock_cache().assembled.get(&key).cloned()
    }

    /// The assembled prompt for `opts`; a warm call does no file IO.
    pub fn assemble(&self, opts: &PromptOptions) -> Arc<Assembled> {
        if let Some(a) = self.cached(opts) {
            return a;
        }
        let key = serde_json::to_string(opts).unwrap_or_default();
        let g = self.gathered(&opts.limits);
        let a = Arc::new(prompt::assemble(&g, opts));
        self.lock_cache().assembled.insert(key, a.clone());
        a
    }

    /// Forgets everything read from disk, after a change; the same for the workspaces this
    /// one replaced that sessions still hold.
    pub fn invalidate(&self) {
        self.forget();
        let mut preds = self.predecessors.lock().unwrap_or_else(|p| p.into_inner());
        preds.retain(|w| match w.upgrade() {
            Some(old) => {
                old.forget();
                true
            }
            None => false,
        });
    }

    fn forget(&self) {
        let mut c = self.lock_cache();
        c.gathered.clear();
        c.assembled.clear();
        c.nested.clear();
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes over from `old` (the same root, opened again on a changed config): `old` and
    /// what it replaced are invalidated with this one from now on, and at once, since a
    /// change its watcher had not reported yet is lost with the watcher.
    pub fn succeed(&self, old: &Arc<Workspace>) {
        let mut preds: Vec<std::sync::Weak<Workspace>> = old
            .predecessors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        preds.push(Arc::downgrade(old));
        *self.predecessors.lock().unwrap_or_else(|p| p.into_inner()) = preds;
        old.invalidate();
    }

    /// Instruction and memory files present now in the root (the enabled names).
    pub fn context_files(&self) -> Vec<String> {
        let mut files: Vec<String> = self
            .config
            .instructions
            .file_names()
            .into_iter()
            .chain(std::iter::once(prompt::MEMORY_FILE))
            .filter(|f| matches!(self.root.kind(Path::new(f)), Ok(Some(_))))
            .map(|f| f.to_string())
            .collect();
        files.dedup();
        files
    }

    /// A warning when the workspace's files are not watched (changes to its instruction
    /// files then reach sessions only when the workspace is opened again).
    pub fn watch_warning(&self) -> Option<String> {
        self.watch_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Installs (or removes) the watcher; dropping the old one stops it.
    pub fn set_watcher(&self, w: Option<WatchHandle>) {
        *self.watcher.lock().unwrap_or_else(|p| p.into_inner()) = w;
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        // A panic while holding the cache leaves at worst a missing entry; keep serving.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        // A build under way has nobody left to answer.
        if let Some(index) = self.code.get() {
            index.stop();
        }
    }
}

/// All open workspaces of one server.
#[derive(Default)]
pub struct Workspaces {
    open: RwLock<BTreeMap<String, Arc<Workspace>>>,
}

impl Workspaces {
    /// Opens `path`, or returns the already open workspace with the same canonical root.
    /// `new` is true when it was opened now.
    pub fn open(
        &self,
        path: &Path,
        user: &Config,
    ) -> Result<(Arc<Workspace>, bool), WorkspaceError> {
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path));
        let id = workspace_id(&canonical);
        if let Some(ws) = self.get(&id) {
            return Ok((ws, false));
        }
        let ws = Arc::new(Workspace::open(path, user)?);
        let mut open = self.open.write().unwrap_or_else(|p| p.into_inner());
        // Two concurrent opens of one root: the first one in wins.
        let entry = open.entry(ws.id.clone()).or_insert_with(|| ws.clone());
        let is_new = Arc::ptr_eq(entry, &ws);
        Ok((entry.clone(), is_new))
    }

    /// Puts `ws` in place of the open workspace with its id (opened again on a new config).
    pub fn replace(&self, ws: Arc<Workspace>) {
        let mut open = self.open.write().unwrap_or_else(|p| p.into_inner());
        open.insert(ws.id.clone(), ws);
    }

    /// The open workspace with this id.
    pub fn get(&self, id: &str) -> Option<Arc<Workspace>> {
        self.open
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    /// The open workspace with this id, or `NotOpen`.
    pub fn require(&self, id: &str) -> Result<Arc<Workspace>, WorkspaceError> {
        self.get(id)
            .ok_or_else(|| WorkspaceError::NotOpen(id.to_string()))
    }

    /// Closes a workspace and stops its watcher; false when it was not open.
    pub fn close(&self, id: &str) -> bool {
        let ws = self
            .open
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        match ws {
            Some(ws) => {
                ws.set_watcher(None);
                true
            }
            None => false,
        }
    }

    /// Open workspaces ordered by id.
    pub fn list(&self) -> Vec<Arc<Workspace>> {
        self.open
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }
}

/// Starts watching `ws` and keeps the watcher inside it (closing the workspace stops it).
pub fn watch_workspace(
    ws: &Arc<Workspace>,
    on_burst: impl Fn(Vec<String>) + Send + Sync + 'static,
) -> notify::Result<()> {
    let global = ws.config.global_instructions.clone();
    let rules = ws.config.instructions.scoped();
    // Source files reach the code index only when it is on.
    let on_code: Option<watch::OnCode> = ws.config.features.code_index.map(|_| {
        let weak = Arc::downgrade(ws);
        Box::new(move |paths: Vec<String>| {
            if let Some(ws) = weak.upgrade() {
                ws.code_changed(paths);
            }
        }) as watch::OnCode
    });
    match watch::watch_code(
        ws.root.path().to_path_buf(),
        watch::DEBOUNCE,
        global,
        rules,
        on_burst,
        on_code,
    ) {
        Ok(handle) => {
            ws.set_watcher(Some(handle));
            Ok(())
        }
        Err(e) => {
            *ws.watch_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!(
                "{} is not watched ({e}): changes to its instruction and memory files are not noticed until it is opened again",
                ws.root.path().display()
            ));
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Defect: a workspace that could not be watched said nothing. Now its summary warns.
    #[tokio::test]
    async fn a_workspace_that_cannot_be_watched_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("w");
        std::fs::create_dir(&root).unwrap();
        let ws = Arc::new(Workspace::open(&root, &Config::default()).unwrap());
        assert_eq!(ws.watch_warning(), None);
        // The folder is gone by the time it is watched: watching fails.
        std::fs::remove_dir(&root).unwrap();
        assert!(watch_workspace(&ws, |_| {}).is_err());
        let w = ws.watch_warning().expect("a warning");
        assert!(w.contains("not watched"), "{w}");
    }

    /// With `[features] code_index` the previewed prompt has the code tools' line (the
    /// session's tools are Garuda's own now) and no warning; without it, no line. Opening
    /// builds no index: the engine starts it, or the first session asks.
    #[test]
    fn the_code_index_switch_gives_the_prompt_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = Config::default();
        cfg.features.code_index = Some(crate::prompt::CodeIndex::All);
        let ws = Workspace::open(dir.path(), &cfg).unwrap();
        let a = ws.assemble(&ws.default_options(None));
        assert!(
            a.system.contains("use find_symbol and find_references")
                && a.system.contains("repo_map"),
            "{}",
            a.system
        );
        assert!(
            !a.warnings.iter().any(|w| w.contains("code_index")),
            "{:?}",
            a.warnings
        );
        assert!(ws.code.get().is_none());
        assert!(ws.code_index().is_some() && ws.code.get().is_some());
        let plain = Workspace::open(dir.path(), &Config::default()).unwrap();
        assert!(
            !plain
                .assemble(&plain.default_options(None))
                .system
                .contains("find_symbol")
        );
        assert!(plain.code_index().is_none());
    }

    /// Defect: after a config reload that changed the config, sessions kept the workspace
    /// they started on, whose watcher was dropped: later instruction changes never reached
    /// them. Now the new workspace's invalidations reach the ones it replaced.
    #[test]
    fn a_replaced_workspace_still_sees_changes_through_its_successor() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "RULE-ONE\n").unwrap();
        let first = Arc::new(Workspace::open(dir.path(), &Config::default()).unwrap());
        let text = |ws: &Workspace| ws.assemble(&ws.default_options(None)).system.clone();
        assert!(text(&first).contains("RULE-ONE"));
        let second = Arc::new(Workspace::open(dir.path(), &Config::default()).unwrap());
        second.succeed(&first);
        let third = Arc::new(Workspace::open(dir.path(), &Config::default()).unwrap());
        third.succeed(&second);
        std::fs::write(dir.path().join("AGENTS.md"), "RULE-TWO\n").unwrap();
        // Only the newest one is watched; its invalidation reaches both before it.
        third.invalidate();
        for ws in [&first, &second, &third] {
            assert!(text(ws).contains("RULE-TWO"), "{}", text(ws));
        }
        // A predecessor no session holds any more is let go.
        drop(first);
        third.invalidate();
        assert_eq!(third.predecessors.lock().unwrap().len(), 1);
    }
}
