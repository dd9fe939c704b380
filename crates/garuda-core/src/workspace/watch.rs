//! Watching a workspace's instruction files and `.garuda/`, one callback per burst.
//!
//! notify-debouncer-full reports per-path events on every tick; we want exactly one
//! callback per burst of any relevant paths, so a small trailing-quiet debounce on a
//! tokio task is simpler than regrouping its output.

use std::collections::BTreeSet;
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

/// A running watcher; dropping it stops the watching and the debounce task.
pub struct WatchHandle {
    _watcher: Arc<Mutex<RecommendedWatcher>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.task.abort();
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
/// runtime.
pub fn watch(
    root: PathBuf,
    timing: Debounce,
    on_burst: impl Fn(Vec<String>) + Send + Sync + 'static,
) -> notify::Result<WatchHandle> {
    let (tx, mut rx) = mpsc::unbounded_channel::<PathBuf>();
    let cb_root = root.clone();
    let watcher =
        notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
            // Opening a file to read it is reported too (inotify OPEN); our own reads after
            // a change would otherwise start the next burst, forever.
            Ok(ev) if matches!(ev.kind, notify::EventKind::Access(_)) => {}
            Ok(ev) => {
                for p in ev.paths {
                    if relevant(&cb_root, &p).is_some() {
                        let _ = tx.send(p);
                    }
                }
            }
            Err(e) => tracing::warn!("watch error: {e}"),
        })?;
    let watcher = Arc::new(Mutex::new(watcher));
    {
        let mut w = watcher.lock().unwrap_or_else(|p| p.into_inner());
        w.watch(&root, RecursiveMode::NonRecursive)?;
        watch_garuda_dir(&root, &mut w);
    }
    let task_watcher = watcher.clone();
    let task = tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let burst = burst(&mut rx, first, timing).await;
            let names: BTreeSet<String> = burst.iter().filter_map(|p| relevant(&root, p)).collect();
            if names.contains(GARUDA_DIR) {
                // The folder appeared (or was replaced): watch its contents from now on.
                let mut w = task_watcher.lock().unwrap_or_else(|p| p.into_inner());
                let _ = w.unwatch(&root.join(GARUDA_DIR));
                watch_garuda_dir(&root, &mut w);
            }
            on_burst(names.into_iter().collect());
        }
    });
    Ok(WatchHandle {
        _watcher: watcher,
        task,
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
}
