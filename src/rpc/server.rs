//! The serve loop: reads frames, dispatches to a [`Handler`], writes answers in order.
//!
//! One writer task owns the output and drains one ordered queue, so notifications and
//! responses reach the client in the order they were queued. Spawned requests run as tokio
//! tasks with a cancellation token, each in a lane (quick or long) with a running limit of
//! its own; beyond the limit a request waits in its lane's queue, in arrival order, and only
//! a full queue refuses. Server-to-client requests have their own id space.

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::error::{RpcError, codes};
use super::framing::{FrameEvent, FrameReader, Framing, header, trailer};
use super::message::{self, Id, Incoming, encode_notification, encode_request, encode_response};

/// How long `serve` waits for in-flight requests to answer after the input ends.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The application behind the transport (Garuda's native front implements it).
pub trait Handler: Send + Sync + 'static {
    /// Called on the read loop in arrival order. Quick work answers inline; slow work is spawned.
    fn request(&self, method: &str, params: Value, ctx: RequestCtx) -> Dispatch;
    /// Called on the read loop in arrival order.
    fn notification(&self, method: &str, params: Value, client: &Client) -> Flow;
}

/// How a request is answered.
pub enum Dispatch {
    /// Answer now.
    Reply(Result<Value, RpcError>),
    /// Run this future as a task and answer with its output: quick work (a disk read, a
    /// cache miss) under `max_in_flight`; beyond that it waits in the quick queue.
    Spawn(BoxFuture<'static, Result<Value, RpcError>>),
    /// Like [`Dispatch::Spawn`], for long work (a model turn, starting MCP servers) under
    /// `max_long_in_flight`, so long work never holds a slot quick work needs.
    Long(BoxFuture<'static, Result<Value, RpcError>>),
    /// Run this future (off the read loop's thread, e.g. on the blocking pool) and answer
    /// with its output before the next message is read: for a request later ones depend on,
    /// such as LSP `initialize`.
    Ordered(BoxFuture<'static, Result<Value, RpcError>>),
    /// Answer now, then run this on the read loop: notifications it queues reach the client
    /// after the answer (ACP's `available_commands_update` names the session the answer
    /// created).
    ReplyThen(Result<Value, RpcError>, Then),
    /// Run this future as a task, answer with its result, then run its follow-up: a spawned
    /// [`Dispatch::ReplyThen`], for an answer that needs IO before it (ACP `session/new`).
    SpawnThen(BoxFuture<'static, (Result<Value, RpcError>, Option<Then>)>),
    /// [`Dispatch::SpawnThen`] for long work (a session that may start MCP servers).
    LongThen(BoxFuture<'static, (Result<Value, RpcError>, Option<Then>)>),
}

/// Work run right after an answer is queued, so what it sends follows the answer.
pub type Then = Box<dyn FnOnce(&Client) + Send>;

/// Whether the read loop goes on after a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep serving.
    Continue,
    /// Stop serving (after draining, as at end of input) and report this exit code.
    Exit(i32),
}

/// What a request handler gets besides its params.
pub struct RequestCtx {
    /// The client's id for this request.
    pub id: Id,
    /// Cancelled by `$/cancelRequest` for this id and at end of input (spawned requests only;
    /// a request still waiting in its queue is dropped unpolled and answered -32800 instead).
    pub cancel: CancellationToken,
    /// The connection, for notifications and server-to-client requests.
    pub client: Client,
}

/// Transport limits.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest frame body accepted; larger frames are skipped and answered with -32600.
    pub max_frame_bytes: usize,
    /// Most quick spawned requests ([`Dispatch::Spawn`]) running at once; more wait.
    pub max_in_flight: usize,
    /// Most long spawned requests ([`Dispatch::Long`]) running at once; more wait.
    pub max_long_in_flight: usize,
    /// Most requests waiting for a running slot, both lanes together; one more is refused
    /// with `overloaded`.
    pub max_waiting: usize,
    /// Most frame bytes of the requests waiting, both lanes together; a request that would
    /// pass it is refused with `overloaded`.
    pub max_waiting_bytes: usize,
    /// The error answered when the wait queue is full (an application's own code;
    /// JSON-RPC's generic server error by default).
    pub overloaded: RpcError,
    /// Most bytes of output waiting to be written before the read loop stops reading input:
    /// a client that does not read its answers gets no more of its requests read.
    pub max_queued_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_frame_bytes: 64 * 1024 * 1024,
            max_in_flight: 64,
            max_long_in_flight: 32,
            max_waiting: 10_000,
            max_waiting_bytes: 64 * 1024 * 1024,
            overloaded: RpcError::new(-32000, "overloaded, retry"),
            max_queued_bytes: 8 * 1024 * 1024,
        }
    }
}

/// Why `serve` returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeEnd {
    /// The input ended (or could not be read).
    Eof,
    /// A notification handler asked to exit with this code.
    Exit(i32),
}

enum Out {
    Message(Vec<u8>),
    Close,
}

type Reply = oneshot::Sender<Result<Value, RpcError>>;

/// Bytes queued for the writer, so the read loop can wait for the client to read.
#[derive(Default)]
struct Backlog {
    bytes: AtomicUsize,
    drained: Notify,
}

impl Backlog {
    fn add(&self, n: usize) {
        self.bytes.fetch_add(n, Ordering::AcqRel);
    }

    fn written(&self, n: usize) {
        self.bytes.fetch_sub(n, Ordering::AcqRel);
        self.drained.notify_waiters();
    }

    /// Waits until at most `max` bytes are queued.
    async fn below(&self, max: usize) {
        loop {
            let drained = self.drained.notified();
            if self.bytes.load(Ordering::Acquire) <= max {
                return;
            }
            drained.await;
        }
    }
}

struct ClientInner {
    tx: mpsc::UnboundedSender<Out>,
    backlog: Arc<Backlog>,
    /// `None` once the connection is closing: new requests fail at once.
    pending: Mutex<Option<HashMap<Id, Reply>>>,
    next_id: AtomicI64,
}

/// The connection to the client: notifications and server-to-client requests.
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pending = lock(&self.inner.pending).as_ref().map(HashMap::len);
        f.debug_struct("Client")
            .field("pending_requests", &pending)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves the map consistent; keep going.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn closed_error() -> RpcError {
    RpcError::internal("connection closed")
}

/// Tells the client that a request it was sent is abandoned, unless it was answered.
struct TellCancel<'a> {
    client: &'a Client,
    /// The request still waiting; `None` once answered.
    id: Option<Id>,
    method: &'static str,
}

impl Drop for TellCancel<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.client.notify(self.method, json!({ "requestId": id }));
        }
    }
}

/// Removes a pending server-to-client request when its future is dropped early.
struct PendingGuard<'a> {
    inner: &'a ClientInner,
    id: Id,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if let Some(map) = lock(&self.inner.pending).as_mut() {
            map.remove(&self.id);
        }
    }
}

/// A request to the client got no answer in time (it was then cancelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut;

impl Client {
    fn new(tx: mpsc::UnboundedSender<Out>, backlog: Arc<Backlog>) -> Self {
        Self {
            inner: Arc::new(ClientInner {
                tx,
                backlog,
                pending: Mutex::new(Some(HashMap::new())),
                next_id: AtomicI64::new(1),
            }),
        }
    }

    fn send(&self, body: Vec<u8>) -> bool {
        let n = body.len();
        self.inner.backlog.add(n);
        let sent = self.inner.tx.send(Out::Message(body)).is_ok();
        if !sent {
            self.inner.backlog.written(n);
        }
        sent
    }

    fn respond(&self, id: Option<&Id>, result: &Result<Value, RpcError>) {
        if !self.send(encode_response(id, result)) {
            tracing::debug!("dropping a response: connection closed");
        }
    }

    /// Queues a notification; notifications and responses are written in queue order.
    pub fn notify(&self, method: &str, params: Value) {
        if !self.send(encode_notification(method, &params)) {
            tracing::debug!("dropping notification {method}: connection closed");
        }
    }

    /// Sends a request to the client and waits for its answer; fails when the connection closes.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let (id, rx) = self.start(method, &params)?;
        let _guard = PendingGuard {
            inner: &self.inner,
            id,
        };
        rx.await.unwrap_or_else(|_| Err(closed_error()))
    }

    /// Like [`Client::request`], but gives up after `t`: sends `$/cancelRequest` to the client
    /// and answers -32800.
    pub async fn request_timeout(
        &self,
        method: &str,
        params: Value,
        t: Duration,
    ) -> Result<Value, RpcError> {
        self.request_within(method, params, t)
            .await
            .unwrap_or_else(|TimedOut| {
                Err(RpcError::new(
                    codes::REQUEST_CANCELLED,
                    format!("client did not answer {method} within {t:?}"),
                ))
            })
    }

    /// Like [`Client::request_timeout`], but keeps a timeout apart from the client's answers
    /// (an error answer is the client's; [`TimedOut`] means nobody answered).
    pub async fn request_within(
        &self,
        method: &str,
        params: Value,
        t: Duration,
    ) -> Result<Result<Value, RpcError>, TimedOut> {
        let (id, rx) = match self.start(method, &params) {
            Ok(started) => started,
            Err(e) => return Ok(Err(e)),
        };
        let guard = PendingGuard {
            inner: &self.inner,
            id,
        };
        match tokio::time::timeout(t, rx).await {
            Ok(r) => Ok(r.unwrap_or_else(|_| Err(closed_error()))),
            Err(_) => {
                let id = guard.id.clone();
                drop(guard);
                self.notify("$/cancelRequest", json!({ "id": id }));
                Err(TimedOut)
            }
        }
    }

    /// Like [`Client::request`], but when the caller gives up first (the future is dropped,
    /// e.g. its turn was cancelled) the client is told with `cancel_method` `{requestId}`
    /// (ACP's `$/cancel_request`), so it can close the prompt it shows.
    pub async fn request_or_cancel(
        &self,
        method: &str,
        params: Value,
        cancel_method: &'static str,
    ) -> Result<Value, RpcError> {
        let (id, rx) = self.start(method, &params)?;
        let mut tell = TellCancel {
            client: self,
            id: Some(id.clone()),
            method: cancel_method,
        };
        let _guard = PendingGuard {
            inner: &self.inner,
            id,
        };
        let r = rx.await.unwrap_or_else(|_| Err(closed_error()));
        tell.id = None;
        r
    }

    fn start(
        &self,
        method: &str,
        params: &Value,
    ) -> Result<(Id, oneshot::Receiver<Result<Value, RpcError>>), RpcError> {
        let id = Id::Number(self.inner.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        let mut pending = lock(&self.inner.pending);
        let map = pending.as_mut().ok_or_else(closed_error)?;
        map.insert(id.clone(), tx);
        // Sent under the lock so that `close` cannot slip between registering and sending.
        if !self.send(encode_request(&id, method, params)) {
            map.remove(&id);
            return Err(closed_error());
        }
        Ok((id, rx))
    }

    fn route(&self, id: Id, result: Result<Value, RpcError>) {
        let reply = lock(&self.inner.pending)
            .as_mut()
            .and_then(|m| m.remove(&id));
        match reply {
            Some(reply) => {
                // The requester may have given up; nothing to do then.
                let _ = reply.send(result);
            }
            None => tracing::warn!("response for unknown request id {id} ignored"),
        }
    }

    /// Fails every pending server-to-client request and refuses new ones.
    fn close(&self) {
        let pending = lock(&self.inner.pending).take();
        for (_, reply) in pending.into_iter().flatten() {
            let _ = reply.send(Err(closed_error()));
        }
    }
}

/// Runs `fut`, answering -32800 if `cancel` fires first (the future is then dropped).
pub async fn cancellable<F>(cancel: CancellationToken, fut: F) -> Result<Value, RpcError>
where
    F: Future<Output = Result<Value, RpcError>>,
{
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(RpcError::request_cancelled()),
        r = fut => r,
    }
}

/// The queue a spawned request waits in and the limit it runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    Quick,
    Long,
}

type Work = BoxFuture<'static, (Result<Value, RpcError>, Option<Then>)>;

/// A spawned request without a follow-up.
fn plain(fut: BoxFuture<'static, Result<Value, RpcError>>) -> Work {
    Box::pin(async move { (fut.await, None) })
}

/// A spawned request the client may still cancel: waiting for a slot, or running.
struct Entry {
    cancel: CancellationToken,
    lane: Lane,
    /// Set once the request runs.
    abort: Option<AbortHandle>,
}

/// A request waiting for a running slot in its lane.
struct Waiting {
    id: Id,
    work: Work,
    /// Its frame's size, counted against `max_waiting_bytes`.
    bytes: usize,
}

/// One lane's running count and queue.
struct LaneState {
    running: usize,
    limit: usize,
    queue: VecDeque<Waiting>,
}

impl LaneState {
    fn new(limit: usize) -> Self {
        Self {
            running: 0,
            // A zero limit would park every request forever.
            limit: limit.max(1),
            queue: VecDeque::new(),
        }
    }
}

struct SchedState {
    /// Every spawned request not yet answered, by id (the duplicate-id check reads it too).
    entries: HashMap<Id, Entry>,
    quick: LaneState,
    long: LaneState,
    waiting_bytes: usize,
}

impl SchedState {
    fn lane(&mut self, lane: Lane) -> &mut LaneState {
        match lane {
            Lane::Quick => &mut self.quick,
            Lane::Long => &mut self.long,
        }
    }

    fn waiting(&self) -> usize {
        self.quick.queue.len() + self.long.queue.len()
    }
}

/// Runs spawned requests under their lane's limit and queues the rest.
struct Sched {
    state: Mutex<SchedState>,
    client: Client,
    tracker: TaskTracker,
    max_waiting: usize,
    max_waiting_bytes: usize,
    overloaded: RpcError,
}

impl Sched {
    fn new(config: &ServerConfig, client: Client) -> Self {
        Self {
            state: Mutex::new(SchedState {
                entries: HashMap::new(),
                quick: LaneState::new(config.max_in_flight),
                long: LaneState::new(config.max_long_in_flight),
                waiting_bytes: 0,
            }),
            client,
            tracker: TaskTracker::new(),
            max_waiting: config.max_waiting,
            max_waiting_bytes: config.max_waiting_bytes,
            overloaded: config.overloaded.clone(),
        }
    }

    fn contains(&self, id: &Id) -> bool {
        lock(&self.state).entries.contains_key(id)
    }

    /// Runs the request now if its lane has a free slot, else queues it; refuses it only
    /// when the queue is full.
    fn admit(
        self: &Arc<Self>,
        id: Id,
        cancel: CancellationToken,
        lane: Lane,
        work: Work,
        bytes: usize,
    ) {
        let mut state = lock(&self.state);
        let entry = Entry {
            cancel,
            lane,
            abort: None,
        };
        if state.lane(lane).running < state.lane(lane).limit {
            state.lane(lane).running += 1;
            state.entries.insert(id.clone(), entry);
            self.run(&mut state, id, work);
            return;
        }
        let (waiting, waiting_bytes) = (state.waiting(), state.waiting_bytes);
        if waiting >= self.max_waiting
            || waiting_bytes.saturating_add(bytes) > self.max_waiting_bytes
        {
            drop(state);
            tracing::warn!(
                "request {id} refused: {waiting} requests ({waiting_bytes} bytes) already waiting"
            );
            self.client
                .respond(Some(&id), &Err(self.overloaded.clone()));
            return;
        }
        state.waiting_bytes += bytes;
        state.entries.insert(id.clone(), entry);
        state
            .lane(lane)
            .queue
            .push_back(Waiting { id, work, bytes });
    }

    /// Starts a request whose slot is already counted.
    fn run(self: &Arc<Self>, state: &mut SchedState, id: Id, work: Work) {
        // An inner task so that a panic becomes an error answer instead of a silent loss.
        let task = tokio::spawn(work);
        if let Some(entry) = state.entries.get_mut(&id) {
            entry.abort = Some(task.abort_handle());
        }
        let sched = self.clone();
        self.tracker.spawn(async move {
            let (result, then) = match task.await {
                Ok(answer) => answer,
                Err(e) if e.is_panic() => {
                    tracing::error!("request {id} panicked");
                    (Err(RpcError::internal("handler panicked")), None)
                }
                Err(_) => return, // aborted at shutdown
            };
            sched.finished(&id);
            sched.client.respond(Some(&id), &result);
            if let Some(then) = then {
                then(&sched.client);
            }
        });
    }

    /// Frees a finished request's slot and starts the next waiting request of its lane.
    /// Done before answering, so the client may reuse the id once it has the answer.
    fn finished(self: &Arc<Self>, id: &Id) {
        let mut state = lock(&self.state);
        let Some(entry) = state.entries.remove(id) else {
            return;
        };
        let lane = state.lane(entry.lane);
        lane.running = lane.running.saturating_sub(1);
        self.start_waiting(&mut state, entry.lane);
    }

    /// Starts waiting requests of `lane`, oldest first, while it has free slots.
    fn start_waiting(self: &Arc<Self>, state: &mut SchedState, lane: Lane) {
        loop {
            let l = state.lane(lane);
            if l.running >= l.limit {
                return;
            }
            let Some(next) = l.queue.pop_front() else {
                return;
            };
            l.running += 1;
            state.waiting_bytes = state.waiting_bytes.saturating_sub(next.bytes);
            self.run(state, next.id, next.work);
        }
    }

    /// `$/cancelRequest`: a waiting request leaves its queue unrun and is answered -32800;
    /// a running one has its token cancelled and answers itself.
    fn cancel(&self, id: &Id) {
        let mut state = lock(&self.state);
        let Some(entry) = state.entries.get(id) else {
            tracing::debug!("$/cancelRequest for {id}, which is not in flight");
            return;
        };
        if entry.abort.is_some() {
            entry.cancel.cancel();
            return;
        }
        let lane = entry.lane;
        let queue = &mut state.lane(lane).queue;
        let Some(at) = queue.iter().position(|w| &w.id == id) else {
            return;
        };
        let waiting = queue.remove(at);
        state.entries.remove(id);
        if let Some(w) = waiting {
            state.waiting_bytes = state.waiting_bytes.saturating_sub(w.bytes);
        }
        drop(state);
        self.client
            .respond(Some(id), &Err(RpcError::request_cancelled()));
    }

    /// End of input: waiting requests are answered -32800 unrun, running ones cancelled.
    fn cancel_all(&self) {
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        let waiting: Vec<Waiting> = state
            .quick
            .queue
            .drain(..)
            .chain(state.long.queue.drain(..))
            .collect();
        for w in &waiting {
            state.entries.remove(&w.id);
        }
        state.waiting_bytes = 0;
        for entry in state.entries.values() {
            entry.cancel.cancel();
        }
        drop(guard);
        for w in waiting {
            self.client
                .respond(Some(&w.id), &Err(RpcError::request_cancelled()));
        }
    }

    /// Aborts what still runs after the drain timeout; answers how many there were.
    fn abort_all(&self) -> usize {
        let left: Vec<Entry> = lock(&self.state).entries.drain().map(|(_, e)| e).collect();
        for entry in &left {
            if let Some(abort) = &entry.abort {
                abort.abort();
            }
        }
        left.len()
    }
}

/// Serves one connection until end of input or [`Flow::Exit`], then cancels in-flight requests,
/// waits up to [`DRAIN_TIMEOUT`] for their answers, flushes the output and returns.
pub async fn serve<R, W>(
    input: R,
    output: W,
    handler: Arc<dyn Handler>,
    config: ServerConfig,
) -> ServeEnd
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let framing = Arc::new(OnceLock::new());
    let (tx, rx) = mpsc::unbounded_channel();
    let backlog = Arc::new(Backlog::default());
    let writer = tokio::spawn(write_loop(output, rx, framing.clone(), backlog.clone()));
    let mut reader = FrameReader::new(input, config.max_frame_bytes);
    let max_queued = config.max_queued_bytes;
    let client = Client::new(tx.clone(), backlog.clone());
    let conn = Conn {
        handler,
        sched: Arc::new(Sched::new(&config, client.clone())),
        config,
        client,
        ordered: Mutex::new(None),
    };

    let end = loop {
        // Backpressure: what the client has not read yet bounds what is read from it.
        backlog.below(max_queued).await;
        let Some(event) = reader.next().await else {
            break ServeEnd::Eof;
        };
        if let Some(f) = reader.framing() {
            let _ = framing.set(f);
        }
        if let Some(code) = conn.on_event(event) {
            break ServeEnd::Exit(code);
        }
        let ordered = lock(&conn.ordered).take();
        if let Some((id, fut)) = ordered {
            let result = fut.await;
            conn.client.respond(Some(&id), &result);
        }
    };

    conn.drain().await;
    let _ = tx.send(Out::Close);
    if let Err(e) = writer.await {
        tracing::error!("writer task failed: {e}");
    }
    end
}

/// A request the read loop finishes before it reads on.
type Ordered = Option<(Id, BoxFuture<'static, Result<Value, RpcError>>)>;

/// The state of one connection's read loop.
struct Conn {
    handler: Arc<dyn Handler>,
    config: ServerConfig,
    client: Client,
    sched: Arc<Sched>,
    ordered: Mutex<Ordered>,
}

impl Conn {
    /// Handles one event from the reader; `Some(code)` asks to stop serving.
    fn on_event(&self, event: FrameEvent) -> Option<i32> {
        let frame = match event {
            FrameEvent::Frame(frame) => frame,
            FrameEvent::Oversize { declared, prefix } => {
                let size = declared.map_or_else(|| "a line".to_owned(), |n| format!("{n} bytes"));
                let msg = format!(
                    "message too large ({size}, limit {} bytes); skipped",
                    self.config.max_frame_bytes
                );
                self.reject_frame(message::extract_id(&prefix), msg);
                return None;
            }
            FrameEvent::BadHeader { reason, prefix } => {
                self.reject_frame(message::extract_id(&prefix), reason);
                return None;
            }
            FrameEvent::Truncated { received } => {
                tracing::warn!("input ended inside a message ({received} bytes received)");
                return None;
            }
        };
        match message::parse(&frame) {
            Err(bad) => {
                let id = bad
                    .id
                    .as_ref()
                    .map_or_else(|| "null".to_owned(), Id::to_string);
                tracing::warn!("bad message (id {id}): {}", bad.error.message);
                if bad.reply {
                    self.client.respond(bad.id.as_ref(), &Err(*bad.error));
                }
                None
            }
            Ok(Incoming::Response { id, result }) => {
                self.client.route(id, result);
                None
            }
            Ok(Incoming::Notification { method, params }) => self.on_notification(&method, params),
            Ok(Incoming::Request { id, method, params }) => {
                self.on_request(id, &method, params, frame.len());
                None
            }
        }
    }

    fn on_notification(&self, method: &str, params: Value) -> Option<i32> {
        if method == "$/cancelRequest" {
            self.cancel_request(&params);
            return None;
        }
        let flow = std::panic::catch_unwind(AssertUnwindSafe(|| {
            self.handler.notification(method, params, &self.client)
        }));
        match flow {
            Ok(Flow::Continue) => None,
            Ok(Flow::Exit(code)) => Some(code),
            Err(_) => {
                tracing::error!("notification handler for {method} panicked");
                None
            }
        }
    }

    /// `bytes` is the request's frame size, what it costs while it waits.
    fn on_request(&self, id: Id, method: &str, params: Value, bytes: usize) {
        if self.sched.contains(&id) {
            let msg = format!("request id {id} is already in flight");
            self.client
                .respond(Some(&id), &Err(RpcError::invalid_request(msg)));
            return;
        }
        let cancel = CancellationToken::new();
        let ctx = RequestCtx {
            id: id.clone(),
            cancel: cancel.clone(),
            client: self.client.clone(),
        };
        let dispatch = std::panic::catch_unwind(AssertUnwindSafe(|| {
            self.handler.request(method, params, ctx)
        }));
        match dispatch {
            Ok(Dispatch::Reply(result)) => self.client.respond(Some(&id), &result),
            Ok(Dispatch::ReplyThen(result, then)) => {
                self.client.respond(Some(&id), &result);
                then(&self.client);
            }
            Ok(Dispatch::Spawn(fut)) => {
                self.sched.admit(id, cancel, Lane::Quick, plain(fut), bytes)
            }
            Ok(Dispatch::Long(fut)) => self.sched.admit(id, cancel, Lane::Long, plain(fut), bytes),
            Ok(Dispatch::SpawnThen(fut)) => self.sched.admit(id, cancel, Lane::Quick, fut, bytes),
            Ok(Dispatch::LongThen(fut)) => self.sched.admit(id, cancel, Lane::Long, fut, bytes),
            Ok(Dispatch::Ordered(fut)) => *lock(&self.ordered) = Some((id, fut)),
            Err(_) => {
                tracing::error!("request handler for {method} panicked");
                self.client
                    .respond(Some(&id), &Err(RpcError::internal("handler panicked")));
            }
        }
    }

    fn reject_frame(&self, id: Option<Id>, reason: String) {
        match id {
            Some(id) => {
                tracing::warn!("skipped message (id {id}): {reason}");
                self.client
                    .respond(Some(&id), &Err(RpcError::invalid_request(reason)));
            }
            None => tracing::warn!("skipped message (no id): {reason}"),
        }
    }

    fn cancel_request(&self, params: &Value) {
        let id = params
            .get("id")
            .cloned()
            .and_then(|v| serde_json::from_value::<Id>(v).ok());
        let Some(id) = id else {
            tracing::warn!("$/cancelRequest without a valid id");
            return;
        };
        self.sched.cancel(&id);
    }

    /// Fails pending client requests, cancels in-flight requests and waits for their answers.
    async fn drain(&self) {
        self.client.close();
        self.sched.cancel_all();
        let tracker = &self.sched.tracker;
        tracker.close();
        if tokio::time::timeout(DRAIN_TIMEOUT, tracker.wait())
            .await
            .is_err()
        {
            let left = self.sched.abort_all();
            tracing::warn!("{left} request(s) did not finish after cancellation; dropped");
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    output: W,
    mut rx: mpsc::UnboundedReceiver<Out>,
    framing: Arc<OnceLock<Framing>>,
    backlog: Arc<Backlog>,
) {
    let mut out = BufWriter::new(output);
    let mut healthy = true;
    while let Some(msg) = rx.recv().await {
        let Out::Message(body) = msg else { break };
        // Counted as written once taken: a failed output drops messages, it must not stall
        // the read loop behind them.
        let _written = Written(&backlog, body.len());
        if !healthy {
            continue;
        }
        let framing = framing.get().copied().unwrap_or(Framing::ContentLength);
        let mut result = write_frame(&mut out, framing, &body).await;
        if result.is_ok() && rx.is_empty() {
            result = out.flush().await;
        }
        if let Err(e) = result {
            tracing::warn!("writing output failed, dropping further messages: {e}");
            healthy = false;
        }
    }
    if healthy && let Err(e) = out.flush().await {
        tracing::warn!("flushing output failed: {e}");
    }
}

/// Marks a message's bytes as no longer queued when the writer is done with it.
struct Written<'a>(&'a Backlog, usize);

impl Drop for Written<'_> {
    fn drop(&mut self) {
        self.0.written(self.1);
    }
}

async fn write_frame<W: AsyncWrite + Unpin>(
    out: &mut W,
    framing: Framing,
    body: &[u8],
) -> std::io::Result<()> {
    out.write_all(&header(framing, body.len())).await?;
    out.write_all(body).await?;
    out.write_all(trailer(framing)).await
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
