//! One configured server and what is known about it: its state, its connection, its
//! process, its last tool listing; shared by the hub, the starts and the calls.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::model::Tool;
use rmcp::service::RunningService;
use rmcp::{Peer, RoleClient};

use super::child::{Child, StderrTail};
use super::event::McpEvent;
use super::handler::Handler;
use crate::mcp::config::{McpServerConfig, McpTransport};

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpServerState {
    /// Configured with `enabled = false`; never started.
    Disabled,
    /// Starting: spawned or connecting, not yet listed its tools.
    Starting,
    /// Running; its tools are in the session.
    Ready,
    /// Did not start (bad config, bad command, error, timeout).
    Failed {
        /// Why, for the person.
        reason: String,
    },
    /// Was ready, then stopped (process exit or lost connection).
    Exited {
        /// Why, for the person.
        reason: String,
    },
}

/// A running connection to a server.
pub(super) type Service = RunningService<RoleClient, Handler>;

/// One configured server and everything known about it.
pub(super) struct Server {
    pub(super) name: String,
    pub(super) config: McpServerConfig,
    pub(super) transport: Result<McpTransport, String>,
    pub(super) state: Mutex<McpServerState>,
    pub(super) startup_ms: Mutex<Option<u64>>,
    /// Shared with the calls in flight, which drive `input_required` rounds through it.
    pub(super) service: Mutex<Option<Arc<Service>>>,
    pub(super) peer: Mutex<Option<Peer<RoleClient>>>,
    pub(super) child: Mutex<Option<Child>>,
    pub(super) listed: Mutex<Vec<Tool>>,
    /// When the last listing goes stale, from the server's cache hint (`ttlMs`); None: no
    /// hint, the listing holds until `tools/list_changed`.
    pub(super) expires: Mutex<Option<Instant>>,
    pub(super) dirty: Arc<AtomicBool>,
    pub(super) reported: AtomicBool,
    pub(super) stderr: StderrTail,
    /// Its sign-in, once an HTTP server's connection made one.
    pub(super) auth: std::sync::OnceLock<Arc<crate::mcp::oauth::ServerAuth>>,
}

/// Locks a mutex, taking the data even if a panicking thread poisoned it (the data here is
/// plain state that stays consistent between statements).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Server {
    /// A server not started yet: `Starting` when enabled, `Disabled` when not, `Failed` when
    /// its entry cannot be used.
    pub(super) fn new(name: String, config: McpServerConfig) -> Server {
        let transport = config.transport(&name).map_err(|e| e.to_string());
        let state = match (&transport, config.enabled) {
            (Err(e), _) => McpServerState::Failed { reason: e.clone() },
            (Ok(_), false) => McpServerState::Disabled,
            (Ok(_), true) => McpServerState::Starting,
        };
        Server {
            name,
            config,
            transport,
            state: Mutex::new(state),
            startup_ms: Mutex::new(None),
            service: Mutex::new(None),
            peer: Mutex::new(None),
            child: Mutex::new(None),
            listed: Mutex::new(Vec::new()),
            expires: Mutex::new(None),
            dirty: Arc::new(AtomicBool::new(false)),
            reported: AtomicBool::new(false),
            stderr: StderrTail::new(),
            auth: std::sync::OnceLock::new(),
        }
    }

    pub(super) fn state(&self) -> McpServerState {
        lock(&self.state).clone()
    }

    /// True while its sign-in waits for the person.
    pub(super) fn waiting_for_person(&self) -> bool {
        self.auth.get().is_some_and(|a| a.waiting_for_person())
    }

    pub(super) fn peer(&self) -> Option<Peer<RoleClient>> {
        lock(&self.peer).clone()
    }

    /// Reports a failed start, once per server.
    pub(super) fn report_failed(&self, reason: String, events: &Mutex<Vec<McpEvent>>) {
        if !self.reported.swap(true, Ordering::SeqCst) {
            lock(events).push(McpEvent::ServerFailed {
                server: self.name.clone(),
                reason,
            });
        }
    }

    /// Moves a ready server to `Exited` and reports it once.
    pub(super) fn mark_exited(&self, reason: String, events: &Mutex<Vec<McpEvent>>) {
        {
            let mut st = lock(&self.state);
            if *st != McpServerState::Ready {
                return;
            }
            *st = McpServerState::Exited {
                reason: reason.clone(),
            };
        }
        tracing::warn!(target: "garuda::mcp", server = %self.name, "stopped: {reason}");
        lock(&self.peer).take();
        if !self.reported.swap(true, Ordering::SeqCst) {
            lock(events).push(McpEvent::ServerExited {
                server: self.name.clone(),
                reason,
            });
        }
    }
}

/// When a listing with cache hint `ttl_ms` goes stale (None: no hint).
pub(super) fn expiry(ttl_ms: Option<u64>) -> Option<Instant> {
    ttl_ms.map(|ms| {
        let now = Instant::now();
        now.checked_add(Duration::from_millis(ms)).unwrap_or(now)
    })
}
