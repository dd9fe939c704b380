//! Watching a workspace's instruction files and `.garuda/`, one callback per burst.
//!
//! notify-debouncer-full reports per-path events on every tick; we want exactly one
//! callback per burst of any relevant paths, so a small trailing-quiet debounce on a
//! tokio task is simpler than regrouping its output.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::prompt::INSTRUCTION_FILES;

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
/// each workspace costs only a watch or two. Events are routed to the workspace whose root
/// (or whose root's `.garuda`) holds the changed path.
struct Hub {
    watcher: Mutex<RecommendedWatcher>,
    routes: Arc<Mutex<Routes>>,
}

#[derive(Default)]
struct Routes {
    next: u64,
    by_root: HashMap<PathBuf, Vec<(u64, mpsc::UnboundedSender<PathBuf>)>>,
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
                    // The root is the parent (AGENTS.md, .garuda) or the grandparent
                    // (.garuda/memory.md) of a relevant path.
                    for root in p.ancestors().skip(1).take(2) {
                        for (_, tx) in routes.by_root.get(root).into_iter().flatten() {
                            if relevant(root, &p).is_some() {
                                let _ = tx.send(p.clone());
                            }
                        }
                    }
                }
            }
            Err(e) => tracing::warn!("watch error: {e}"),
        })?;
    // One per process, for the process's life.
    let hub: &'static Hub = Box::leak(Box::new(Hub {
        watcher: Mutex::new(watcher),
        routes,
    }));
    *slot = Some(hub);
    Ok(hub)
}

/// A running watch; dropping it stops the watching and the debounce task.
pub struct WatchHandle {
    root: PathBuf,
    id: u64,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.task.abort();
        let Some(hub) = *lock(&HUB) else { return };
        let last = {
            let mut routes = lock(&hub.routes);
            let left = routes.by_root.get_mut(&self.root).map(|v| {
                v.retain(|(id, _)| *id != self.id);
                v.len()
            });
            if left == Some(0) {
                routes.by_root.remove(&self.root);
            }
            left == Some(0)
        };
        if last {
            let mut w = lock(&hub.watcher);
            let _ = w.unwatch(&self.root.join(GARUDA_DIR));
            let _ = w.unwatch(&self.root);
        }
    }
}

/// The root-relative name of `path` when it is one Garuda watches, else `None`.
fn relevant(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Vec<_> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.as_slice() {
        [name] if INSTRUCTION_FILES.contains(&name.as_str()) || name == GARUDA_DIR => {
            Some(name.clone())
        }
        [dir, name] if dir == GARUDA_DIR => Some(format!("{GARUDA_DIR}/{name}")),
        _ => None,
    }
}

/// `.garuda` is watched only when it is a real folder inside the root, so a link to a
/// folder elsewhere cannot make Garuda observe (or report on) files outside the workspace.
fn watch_garuda_dir(root: &Path, w: &mut RecommendedWatcher) {
    let dir = root.join(GARUDA_DIR);
    let inside = std::fs::symlink_metadata(&dir)
        .map(|m| m.is_dir())
        .unwrap_or(false);
    if inside && let Err(e) = w.watch(&dir, RecursiveMode::NonRecursive) {
        tracing::warn!("cannot watch {}: {e}", dir.display());
    }
}

/// Starts watching `root` (a canonical path); `on_burst` gets the sorted root-relative
/// paths that changed, once per burst grouped by `timing`. Must be called inside a tokio
/// runtime. Fails when the process's one watcher cannot be made or cannot add `root` (the
/// caller reports it: the workspace is then not watched).
pub fn watch(
    root: PathBuf,
    timing: Debounce,
    on_burst: impl Fn(Vec<String>) + Send + Sync + 'static,
) -> notify::Result<WatchHandle> {
    let hub = hub()?;
    let (tx, mut rx) = mpsc::unbounded_channel::<PathBuf>();
    {
        let mut w = lock(&hub.watcher);
        w.watch(&root, RecursiveMode::NonRecursive)?;
        watch_garuda_dir(&root, &mut w);
    }
    let id = {
        let mut routes = lock(&hub.routes);
        routes.next += 1;
        let id = routes.next;
        routes
            .by_root
            .entry(root.clone())
            .or_default()
            .push((id, tx));
        id
    };
    let task_root = root.clone();
    let task = tokio::spawn(async move {
        let root = task_root;
        while let Some(first) = rx.recv().await {
            let burst = burst(&mut rx, first, timing).await;
            let names: BTreeSet<String> = burst.iter().filter_map(|p| relevant(&root, p)).collect();
            if names.contains(GARUDA_DIR) {
                // The folder appeared (or was replaced): watch its contents from now on.
                let mut w = lock(&hub.watcher);
                let _ = w.unwatch(&root.join(GARUDA_DIR));
                watch_garuda_dir(&root, &mut w);
            }
            on_burst(names.into_iter().collect());
        }
    });
    Ok(WatchHandle { root, id, task })
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
        assert_eq!(
            relevant(root, Path::new("/r/AGENTS.md")).as_deref(),
            Some("AGENTS.md")
        );
        assert_eq!(
            relevant(root, Path::new("/r/.garuda/memory.md")).as_deref(),
            Some(".garuda/memory.md")
        );
        assert_eq!(relevant(root, Path::new("/r/src/main.rs")), None);
        assert_eq!(relevant(root, Path::new("/r/AGENTS.md.tmp")), None);
        assert_eq!(relevant(root, Path::new("/elsewhere/AGENTS.md")), None);
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
                watch(root, timing, move |names| {
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
}
