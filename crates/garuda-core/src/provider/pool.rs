//! What every session on one provider shares: the HTTP client, so its connection pool (and
//! TLS sessions) are reused across sessions instead of each session opening its own, and the
//! slots that bound that provider's requests in flight, so many sessions at once queue here
//! instead of hammering the provider's rate limit.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Semaphore;

use super::{Endpoint, ProviderError};

/// One provider's client and request slots.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The HTTP client (a handle to one connection pool).
    pub client: reqwest::Client,
    /// One permit per request in flight (the send and the whole streamed answer).
    pub slots: Arc<Semaphore>,
}

/// Endpoints that may share: the same server and the same client settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    name: String,
    base_url: String,
    connect_timeout: Duration,
    max_in_flight: usize,
}

/// Weak, so a provider no session uses any more lets its connections go; a process that
/// configures its providers once has at most one entry per provider.
static POOL: LazyLock<Mutex<HashMap<Key, Weak<Shared>>>> = LazyLock::new(Mutex::default);

/// The client and slots for `ep`, shared with every live provider of the same endpoint.
pub(crate) fn shared(ep: &Endpoint) -> Result<Arc<Shared>, ProviderError> {
    let key = Key {
        name: ep.name.clone(),
        base_url: ep.base_url.clone(),
        connect_timeout: ep.connect_timeout,
        max_in_flight: ep.max_in_flight,
    };
    // A panic while holding the lock leaves the map consistent; keep going.
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = pool.get(&key).and_then(Weak::upgrade) {
        return Ok(s);
    }
    pool.retain(|_, w| w.strong_count() > 0);
    let s = Arc::new(Shared {
        client: http_client(ep)?,
        // Zero would park every request forever.
        slots: Arc::new(Semaphore::new(ep.max_in_flight.max(1))),
    });
    pool.insert(key, Arc::downgrade(&s));
    Ok(s)
}

/// An HTTP client with the endpoint's connect timeout.
fn http_client(ep: &Endpoint) -> Result<reqwest::Client, ProviderError> {
    reqwest::Client::builder()
        .connect_timeout(ep.connect_timeout)
        .user_agent(concat!("garuda/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ProviderError::Config(format!("cannot build the HTTP client: {e}")))
}
