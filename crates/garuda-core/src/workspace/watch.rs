//! Watching a workspace's instruction files and `.garuda/`, one callback per burst: the
//! root's files, the rule folders, the subfolders whose nested files are in force (added as
//! sessions touch them) and the user-global file's folder; with the code index on, also its
//! languages' source files in the folders the index holds, to a callback of their own.
//!
//! notify-debouncer-full reports per-path events on every tick; we want exactly one
//! callback per burst of any relevant paths, so a small trailing-quiet debounce on a
//! tokio task is simpler than regrouping its output.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::prompt::sources::{COPILOT_FILE, FILE_NAMES, RULE_DIRS};

/// How changes are grouped into one notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Debounce {
    /// Quiet time that ends a burst.
    pub quiet: Duration,
    /// A burst never delays its notification longer than this, even under constant writes.
    pub max_burst: Duration,
}

/// The watcher's grouping: 100 ms of quiet ends a burst, a burst lasts at most one second.
pub const DEBOUNCE: Debounce = Debounce {
    quiet: Duration::from_millis(100),
    max_burst: Duration::from_secs(1),
};

/// Collects one burst: `first` and everything that arrives until `timing.quiet` passes
/// without an event or `timing.max_burst` passes in all (tokio time, so tests can pause it).
pub(crate) async fn burst<T: Ord>(
    rx: &mut mpsc::UnboundedReceiver<T>,
    first: T,
    timing: Debounce,
) -> BTreeSet<T> {
    let mut burst = BTreeSet::new();
    burst.insert(first);
    let deadline = tokio::time::Instant::now() + timing.max_burst;
    loop {
        tokio::select! {
            more = rx.recv() => match more {
                Some(p) => { burst.insert(p); }
                None => break,
            },
            _ = tokio::time::sleep(timing.quiet) => break,
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    burst
}
const GARUDA_DIR: &str = ".garuda";

/// One notify watcher (one inotify instance) for every workspace of the process, so the
/// per-user instance limit (128 by default) does not cap the number of watched workspaces:
/// each workspace costs only a watch or a few. Events are routed to the workspace whose root
/// holds the changed path, or whose user-global file it is.
struct Hub {
    watched: Mutex<Watched>,
    routes: Arc<Mutex<Routes>>,
}

/// The watcher and how many workspaces hold each folder it watches: two workspaces may share
/// a folder (the user-global one, or a root that is another's subfolder), and one letting go
/// must not end the other's watch.
struct Watched {
    watcher: RecommendedWatcher,
    holders: HashMap<PathBuf, usize>,
}

impl Watched {
    fn hold(&mut self, dir: &Path) -> notify::Result<()> {
        if let Some(n) = self.holders.get_mut(dir) {
            *n += 1;
            return Ok(());
        }
        self.watcher.watch(dir, RecursiveMode::NonRecursive)?;
        self.holders.insert(dir.to_path_buf(), 1);
        Ok(())
    }

    fn release(&mut self, dir: &Path) {
        let Some(n) = self.holders.get_mut(dir) else {
            return;
        };
        *n -= 1;
        if *n == 0 {
            self.holders.remove(dir);
            let _ = self.watcher.unwatch(dir);
        }
    }

    /// Watches `dir` again after it was replaced (its old watch went with the old folder).
    fn renew(&mut self, dir: &Path) -> notify::Result<()> {
        let _ = self.watcher.unwatch(dir);
        self.watcher.watch(dir, RecursiveMode::NonRecursive)
    }
}

/// Where one workspace's events go.
struct Route {
    id: u64,
    tx: mpsc::UnboundedSender<PathBuf>,
    /// Source files of the code index's languages are reported too.
    code: bool,
}

#[derive(Default)]
struct Routes {
    next: u64,
    by_root: HashMap<PathBuf, Vec<Route>>,
    by_global: HashMap<PathBuf, Vec<Route>>,
}

impl Routes {
    fn remove(map: &mut HashMap<PathBuf, Vec<Route>>, key: &Path, id: u64) {
        if let Some(v) = map.get_mut(key) {
            v.retain(|r| r.id != id);
            if v.is_empty() {
                map.remove(key);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The process's hub once made; a failure to make it is not remembered, so a later
/// workspace tries again (the instance limit may have room by then).
static HUB: Mutex<Option<&'static Hub>> = Mutex::new(None);

fn hub() -> Result<&'static Hub, notify::Error> {
    let mut slot = lock(&HUB);
    if let Some(hub) = *slot {
        return Ok(hub);
    }
    let routes: Arc<Mutex<Routes>> = Arc::default();
    let cb_routes = routes.clone();
    let watcher =
        notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
            // Opening a file to read it is reported too (inotify OPEN); our own reads after a
            // change would otherwise start the next burst, forever.
            Ok(ev) if matches!(ev.kind, notify::EventKind::Access(_)) => {}
            Ok(ev) => {
                let routes = lock(&cb_routes);
                for p in ev.paths {
                    for r in routes.by_global.get(&p).into_iter().flatten() {
                        let _ = r.tx.send(p.clone());
                    }
                    // Nested files and rules sit at any depth below their root.
                    for root in p.ancestors().skip(1) {
                        for r in routes.by_root.get(root).into_iter().flatten() {
                            if relevant(root, None, &p).is_some()
                                || (r.code && crate::code::Lang::of(&p).is_some())
                            {
                                let _ = r.tx.send(p.clone());
                            }
                        }
                    }
                }
            }
            Err(e) => tracing::warn!("watch error: {e}"),
        })?;
    // One per process, for the process's life.
    let hub: &'static Hub = Box::leak(Box::new(Hub {
        watched: Mutex::new(Watched {
            watcher,
            holders: HashMap::new(),
        }),
        routes,
    }));
    *slot = Some(hub);
    Ok(hub)
}

/// A running watch; dropping it stops the watching and the debounce task.
pub struct WatchHandle {
    root: PathBuf,
    id: u64,
    global: Option<PathBuf>,
    task: tokio::task::JoinHandle<()>,
    /// The folders this workspace holds in the hub (the root, `.garuda`, rule folders, the
    /// subfolders of nested files in force, the user-global file's folder).
    held: Arc<Mutex<HashSet<PathBuf>>>,
}

impl WatchHandle {
    /// Watches the subfolder `rel` (root-relative) too, when it is a real folder inside the
    /// root (no link on the way, so nothing outside the root is ever observed).
    pub fn watch_dir(&self, rel: &str) {
        let Some(hub) = *lock(&HUB) else { return };
        hold_inside(hub, &self.held, &self.root, rel);
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.task.abort();
        let Some(hub) = *lock(&HUB) else { return };
        {
            let mut routes = lock(&hub.routes);
            Routes::remove(&mut routes.by_root, &self.root, self.id);
            if let Some(g) = &self.global {
                Routes::remove(&mut routes.by_global, g, self.id);
            }
        }
        let mut w = lock(&hub.watched);
        for dir in lock(&self.held).drain() {
            w.release(&dir);
        }
    }
}

/// Holds `root/rel` in the hub when it is a folder reached without following a link.
fn hold_inside(hub: &Hub, held: &Mutex<HashSet<PathBuf>>, root: &Path, rel: &str) -> bool {
    let dir = root.join(rel);
    let mut held = lock(held);
    if held.contains(&dir) {
        return true;
    }
    let real = std::fs::canonicalize(&dir).is_ok_and(|c| c == dir)
        && std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
    if !real {
        return false;
    }
    match lock(&hub.watched).hold(&dir) {
        Ok(()) => {
            held.insert(dir);
            true
        }
        Err(e) => {
            tracing::warn!("cannot watch {}: {e}", dir.display());
            false
        }
    }
}

/// The root-relative name of `path` when it is one Garuda watches (the user-global file:
/// its absolute path), else `None`.
fn relevant(root: &Path, global: Option<&Path>, path: &Path) -> Option<String> {
    if global.is_some_and(|g| g == path) {
        return Some(path.display().to_string());
    }
    let rel = path.strip_prefix(root).ok()?;
    let parts: Vec<_> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let joined = parts.join("/");
    let in_rules = |dir: &str| joined.strip_prefix(dir).is_some_and(|r| r.starts_with('/'));
    match parts.as_slice() {
        [name] if name == GARUDA_DIR => Some(name.clone()),
        [dir, _] if dir == GARUDA_DIR => Some(joined),
        [.., name] if FILE_NAMES.contains(&name.as_str()) => Some(joined),
        _ if joined == COPILOT_FILE => Some(joined),
        _ if [".cursor/rules", ".github/instructions", ".claude/rules"]
            .into_iter()
            .any(in_rules) =>
        {
            Some(joined)
        }
        _ => None,
    }
}

/// Starts watching `root` (a canonical path), its rule folders when `rules`, and the folder
/// of the user-global file `global`; `on_burst` gets the sorted root-relative paths that
/// changed (the global file: its absolute path), once per burst grouped by `timing`. Must be
/// called inside a tokio runtime. Fails when the process's one watcher cannot be made or
/// cannot add `root` (the caller reports it: the workspace is then not watched).
pub fn watch(
    root: PathBuf,
    timing: Debounce,
    global: Option<PathBuf>,
    rules: bool,
    on_burst: impl Fn(Vec<String>) + Send + Sync + 'static,
) -> notify::Result<WatchHandle> {
    watch_code(root, timing, global, rules, on_burst, None)
}

/// What a burst of changes to source files goes to: their root-relative paths.
pub type OnCode = Box<dyn Fn(Vec<String>) + Send + Sync>;

/// [`watch`], and when `on_code` is given, source files of the code index's languages in
/// the folders watched (the index adds its folders with [`WatchHandle::watch_dir`]) go to it,
/// once per burst; a burst of source files alone does not call `on_burst`.
pub fn watch_code(
    root: PathBuf,
    timing: Debounce,
    global: Option<PathBuf>,
    rules: bool,
    on_burst: impl Fn(Vec<String>) + Send + Sync + 'static,
    on_code: Option<OnCode>,
) -> notify::Result<WatchHandle> {
    let code = on_code.is_some();
    let hub = hub()?;
    let (tx, mut rx) = mpsc::unbounded_channel::<PathBuf>();
    let held: Arc<Mutex<HashSet<PathBuf>>> = Arc::default();
    lock(&hub.watched).hold(&root)?;
    lock(&held).insert(root.clone());
    hold_inside(hub, &held, &root, GARUDA_DIR);
    if rules {
        for d in RULE_DIRS {
            hold_inside(hub, &held, &root, d);
        }
    }
    // The user's own folder, outside the workspace: only its AGENTS.md is reported.
    if let Some(dir) = global.as_deref().and_then(Path::parent)
        && dir.is_dir()
    {
        match lock(&hub.watched).hold(dir) {
            Ok(()) => {
                lock(&held).insert(dir.to_path_buf());
            }
            Err(e) => tracing::warn!("cannot watch {}: {e}", dir.display()),
        }
    }
    let id = {
        let mut routes = lock(&hub.routes);
        routes.next += 1;
        let id = routes.next;
        routes.by_root.entry(root.clone()).or_default().push(Route {
            id,
            tx: tx.clone(),
            code,
        });
        if let Some(g) = &global {
            routes.by_global.entry(g.clone()).or_default().push(Route {
                id,
                tx,
                code: false,
            });
        }
        id
    };
    let task_root = root.clone();
    let task_global = global.clone();
    let task_held = held.clone();
    let task = tokio::spawn(async move {
        let root = task_root;
        while let Some(first) = rx.recv().await {
            let burst = burst(&mut rx, first, timing).await;
            let names: BTreeSet<String> = burst
                .iter()
                .filter_map(|p| relevant(&root, task_global.as_deref(), p))
                .collect();
            if let Some(on_code) = &on_code {
                let sources: Vec<String> = burst
                    .iter()
                    .filter(|p| crate::code::Lang::of(p).is_some())
                    .filter_map(|p| p.strip_prefix(&root).ok())
                    .map(|r| r.to_string_lossy().into_owned())
                    .collect();
                if !sources.is_empty() {
                    on_code(sources);
                }
                if names.is_empty() {
                    continue;
                }
            }
            if names.contains(GARUDA_DIR) {
                // The folder appeared (or was replaced): watch its contents from now on.
                let dir = root.join(GARUDA_DIR);
                if lock(&task_held).contains(&dir) {
                    let mut w = lock(&hub.watched);
                    if let Err(e) = w.renew(&dir) {
                        tracing::warn!("cannot watch {}: {e}", dir.display());
                    }
                } else {
                    hold_inside(hub, &task_held, &root, GARUDA_DIR);
                }
            }
            on_burst(names.into_iter().collect());
        }
    });
    Ok(WatchHandle {
        root,
        id,
        global,
        task,
        held,
    })
}

/// Watches one file (the user's config): its folder is held in the hub and `on_burst` runs
/// once per burst of changes to that path (written, replaced by a rename, created, removed).
/// Must be called inside a tokio runtime; fails when the folder cannot be watched.
pub fn watch_file(
    path: PathBuf,
    timing: Debounce,
    on_burst: impl Fn() + Send + Sync + 'static,
) -> notify::Result<WatchHandle> {
    let hub = hub()?;
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(notify::Error::generic("not a file path"));
    };
    // Events name the canonical folder; a path through a link would never match.
    let dir = std::fs::canonicalize(dir).map_err(notify::Error::io)?;
    let path = dir.join(name);
    lock(&hub.watched).hold(&dir)?;
    let held = Arc::new(Mutex::new(HashSet::from([dir.clone()])));
    let (tx, mut rx) = mpsc::unbounded_channel::<PathBuf>();
    let id = {
        let mut routes = lock(&hub.routes);
        routes.next += 1;
        let id = routes.next;
        routes
            .by_global
            .entry(path.clone())
            .or_default()
            .push(Route {
                id,
                tx,
                code: false,
            });
        id
    };
    let task = tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            burst(&mut rx, first, timing).await;
            on_burst();
        }
    });
    Ok(WatchHandle {
        root: dir,
        id,
        global: Some(path),
        task,
        held,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_ends_after_quiet_time_or_at_its_limit() {
        use tokio::time::{Duration, sleep};
        let timing = Debounce {
            quiet: Duration::from_millis(100),
            max_burst: Duration::from_millis(1_000),
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<u32>();
        // Three events 50 ms apart are one burst; one 150 ms later starts the next.
        let feeder = tokio::spawn({
            let tx = tx.clone();
            async move {
                for i in 2..=3 {
                    sleep(Duration::from_millis(50)).await;
                    tx.send(i).unwrap();
                }
                sleep(Duration::from_millis(150)).await;
                tx.send(9).unwrap();
            }
        });
        let first = burst(&mut rx, 1, timing).await;
        assert_eq!(first.into_iter().collect::<Vec<_>>(), vec![1, 2, 3]);
        feeder.await.unwrap();
        let head = rx.recv().await.unwrap();
        let next = burst(&mut rx, head, timing).await;
        assert_eq!(next.into_iter().collect::<Vec<_>>(), vec![9]);
        // Constant writes: the burst still ends at its limit.
        let flood = tokio::spawn(async move {
            for i in 0..100u32 {
                sleep(Duration::from_millis(50)).await;
                if tx.send(i).is_err() {
                    return;
                }
            }
        });
        let long = burst(&mut rx, 0, timing).await;
        assert!(long.len() < 100, "{}", long.len());
        flood.abort();
    }

    #[test]
    fn relevant_names() {
        let root = Path::new("/r");
        let g = Some(Path::new("/home/u/.config/garuda/AGENTS.md"));
        let rel = |p: &str| relevant(root, g, Path::new(p));
        assert_eq!(rel("/r/AGENTS.md").as_deref(), Some("AGENTS.md"));
        assert_eq!(
            rel("/r/.garuda/memory.md").as_deref(),
            Some(".garuda/memory.md")
        );
        assert_eq!(rel("/r/src/main.rs"), None);
        assert_eq!(rel("/r/AGENTS.md.tmp"), None);
        assert_eq!(rel("/elsewhere/AGENTS.md"), None);
        assert_eq!(
            rel("/r/packages/a/CLAUDE.md").as_deref(),
            Some("packages/a/CLAUDE.md")
        );
        assert_eq!(
            rel("/r/.cursor/rules/a.mdc").as_deref(),
            Some(".cursor/rules/a.mdc")
        );
        assert_eq!(
            rel("/r/.github/copilot-instructions.md").as_deref(),
            Some(".github/copilot-instructions.md")
        );
        assert_eq!(rel("/r/.github/workflows/ci.yml"), None);
        assert_eq!(
            rel("/home/u/.config/garuda/AGENTS.md").as_deref(),
            Some("/home/u/.config/garuda/AGENTS.md")
        );
        assert_eq!(rel("/home/u/.config/garuda/config.toml"), None);
    }

    /// Defect: every workspace had its own inotify instance, so past the per-user limit
    /// (128) workspaces silently had no watcher. Now one watcher serves them all.
    #[tokio::test]
    async fn two_hundred_workspaces_are_all_watched() {
        let dirs: Vec<tempfile::TempDir> = (0..200).map(|_| tempfile::tempdir().unwrap()).collect();
        let (tx, mut rx) = mpsc::unbounded_channel::<(usize, Vec<String>)>();
        let timing = Debounce {
            quiet: Duration::from_millis(20),
            max_burst: Duration::from_millis(200),
        };
        let handles: Vec<WatchHandle> = dirs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let tx = tx.clone();
                let root = d.path().canonicalize().unwrap();
                watch(root, timing, None, false, move |names| {
                    let _ = tx.send((i, names));
                })
                .unwrap_or_else(|e| panic!("workspace {i} not watched: {e}"))
            })
            .collect();
        for i in [0, 199] {
            std::fs::write(dirs[i].path().join("AGENTS.md"), "x").unwrap();
            let (who, names) = tokio::time::timeout(Duration::from_secs(20), rx.recv())
                .await
                .expect("a change notification")
                .unwrap();
            assert_eq!((who, names), (i, vec!["AGENTS.md".to_string()]));
        }
        // A dropped watch stops its notifications; the others go on.
        drop(handles);
    }

    /// Source files go to the code index's callback alone (from the folders it added), and
    /// instruction files to `on_burst` as before.
    #[tokio::test]
    async fn source_files_reach_the_code_callback_and_instructions_the_burst_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        let timing = Debounce {
            quiet: Duration::from_millis(20),
            max_burst: Duration::from_millis(200),
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<(&str, Vec<String>)>();
        let code_tx = tx.clone();
        let on_code: OnCode = Box::new(move |paths| {
            let _ = code_tx.send(("code", paths));
        });
        let w = watch_code(
            root.clone(),
            timing,
            None,
            false,
            move |names| {
                let _ = tx.send(("burst", names));
            },
            Some(on_code),
        )
        .unwrap();
        w.watch_dir("src");
        async fn next<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
            tokio::time::timeout(Duration::from_secs(20), rx.recv())
                .await
                .expect("a change notification")
                .unwrap()
        }
        std::fs::write(root.join("src/a.ts"), "x").unwrap();
        assert_eq!(next(&mut rx).await, ("code", vec!["src/a.ts".to_string()]));
        std::fs::write(root.join("AGENTS.md"), "x").unwrap();
        assert_eq!(
            next(&mut rx).await,
            ("burst", vec!["AGENTS.md".to_string()])
        );
        // A file of no indexed language in a source folder is reported to nobody.
        std::fs::write(root.join("src/notes.txt"), "x").unwrap();
        std::fs::write(root.join("src/b.py"), "x").unwrap();
        assert_eq!(next(&mut rx).await, ("code", vec!["src/b.py".to_string()]));
        drop(w);
    }

    /// Two workspaces share a folder (one's nested folder is the other's root): the one that
    /// lets go does not end the other's watch.
    #[tokio::test]
    async fn a_shared_folder_stays_watched_for_the_workspace_still_open() {
        let dir = tempfile::tempdir().unwrap();
        let outer = dir.path().canonicalize().unwrap();
        let inner = outer.join("pkg");
        std::fs::create_dir(&inner).unwrap();
        let timing = Debounce {
            quiet: Duration::from_millis(20),
            max_burst: Duration::from_millis(200),
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<String>>();
        let a = watch(outer.clone(), timing, None, false, |_| {}).unwrap();
        a.watch_dir("pkg");
        let b = watch(inner.clone(), timing, None, false, move |names| {
            let _ = tx.send(names);
        })
        .unwrap();
        drop(a);
        std::fs::write(inner.join("AGENTS.md"), "x").unwrap();
        let names = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("a change notification")
            .unwrap();
        assert_eq!(names, vec!["AGENTS.md".to_string()]);
        drop(b);
    }
}
