//! Work a session runs beside its operations, and the slots that hold it: the session
//! memory's update (`memory.rs`), a collapse summary asked ahead of the collapse (`ops.rs`),
//! and the idle timer. A model answers into a slot while nothing holds the session; the next
//! operation writes what it brought. Plain containers, so `LiveSession` owns them without
//! importing the files that fill them.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::task::{AbortHandle, JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::message::Usage;
use crate::session::records::MemoryRecord;

/// A finished memory update, not yet in the transcript.
pub(super) struct PendingMemory {
    pub(super) record: MemoryRecord,
    pub(super) usage: Usage,
    pub(super) chars: usize,
}

/// A collapse summary asked ahead: the span it covers, the model's summary and its usage.
pub(super) struct PendingCollapse {
    pub(super) from: String,
    pub(super) to: String,
    pub(super) summary: String,
    pub(super) usage: Usage,
    pub(super) chars: usize,
}

/// One kind of background request: the one in flight and what it brought.
pub(super) struct Slot<T> {
    pub(super) task: Mutex<Option<JoinHandle<()>>>,
    pub(super) pending: Arc<Mutex<Option<T>>>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot {
            task: Mutex::new(None),
            pending: Arc::new(Mutex::new(None)),
        }
    }
}

impl<T> Slot<T> {
    /// A request of this kind is in flight.
    pub(super) fn running(&self) -> bool {
        lock(&self.task).as_ref().is_some_and(|t| !t.is_finished())
    }

    /// The last request ended and brought nothing (cleared, so it counts once).
    pub(super) fn finished_empty(&self) -> bool {
        let mut task = lock(&self.task);
        let done = task.as_ref().is_some_and(|t| t.is_finished());
        if done && lock(&self.pending).is_none() {
            *task = None;
            return true;
        }
        false
    }

    /// What a finished request brought, taken (its task with it, so it is not mistaken for
    /// one that brought nothing).
    pub(super) fn take(&self) -> Option<T> {
        let v = lock(&self.pending).take();
        if v.is_some() {
            let mut task = lock(&self.task);
            if task.as_ref().is_some_and(|t| t.is_finished()) {
                *task = None;
            }
        }
        v
    }

    /// Waits for the request in flight, if any.
    pub(super) async fn settle(&self) {
        let task = lock(&self.task).take();
        if let Some(t) = task {
            let _ = t.await;
        }
    }
}

/// A session's background work.
#[derive(Default)]
pub(super) struct Background {
    pub(super) memory: Slot<PendingMemory>,
    pub(super) collapse: Slot<PendingCollapse>,
    pub(super) idle: Mutex<Option<AbortHandle>>,
    pub(super) cancel: CancellationToken,
}

impl Background {
    /// Stops every request and the timer (the session leaves memory).
    pub(super) fn stop(&self) {
        self.cancel.cancel();
        if let Some(t) = lock(&self.idle).take() {
            t.abort();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A poisoned lock still holds usable data: a panicked request left nothing half-written.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
