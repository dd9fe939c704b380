//! One guarded GET: every URL (the first and each redirect) checked by the guard, every name
//! resolved by [`GuardedResolver`] so the address judged is the address connected to (no
//! window for a name to change its answer in between), no proxy (a proxy would resolve the
//! name instead), redirects followed by hand up to [`super::MAX_REDIRECTS`], the body read
//! up to a byte cap and the whole under one deadline and the turn's cancellation.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use tokio_util::sync::CancellationToken;
use url::Url;

use super::guard::{AllowList, check_url, internal_ip};
use super::{MAX_REDIRECTS, Web, WebError};

/// A body as it arrived.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The URL that answered (after redirects).
    pub url: Url,
    /// Its HTTP status.
    pub status: u16,
    /// Its `Content-Type`, if it sent one.
    pub content_type: Option<String>,
    /// The body, at most `max_bytes`.
    pub body: Vec<u8>,
    /// The body was longer than the cap and the rest was not read.
    pub cut: bool,
}

/// Resolves names with the system's resolver and refuses a name any of whose addresses is
/// internal, unless the user allowed the name.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    allow: AllowList,
    hosts: Arc<BTreeMap<String, IpAddr>>,
}

impl GuardedResolver {
    /// A resolver that lets `allow`'s names resolve to anything and answers `hosts` itself
    /// (as `/etc/hosts` would: judged like any answer).
    pub fn new(allow: AllowList, hosts: Arc<BTreeMap<String, IpAddr>>) -> GuardedResolver {
        GuardedResolver { allow, hosts }
    }

    /// The addresses `name` may be connected to.
    pub async fn lookup(&self, name: &str) -> Result<Vec<SocketAddr>, WebError> {
        let addrs: Vec<SocketAddr> = match self.hosts.get(&name.to_ascii_lowercase()) {
            Some(ip) => vec![SocketAddr::new(*ip, 0)],
            None => tokio::net::lookup_host((name, 0))
                .await
                .map_err(|e| WebError::Http(format!("cannot resolve {name}: {e}")))?
                .collect(),
        };
        if self.allow.allows(name) {
            return Ok(addrs);
        }
        // One internal address refuses the name: connecting to the others would leave the
        // choice to the order of the answer.
        if let Some((addr, why)) = addrs
            .iter()
            .find_map(|a| internal_ip(a.ip()).map(|w| (a.ip(), w)))
        {
            return Err(WebError::Resolved {
                host: name.to_string(),
                addr: addr.to_string(),
                why,
            });
        }
        Ok(addrs)
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let me = self.clone();
        Box::pin(async move {
            let addrs = me.lookup(name.as_str()).await?;
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

impl Web {
    fn client(&self) -> Result<&reqwest::Client, WebError> {
        let built = self.client.get_or_init(|| {
            reqwest::Client::builder()
                .dns_resolver(Arc::new(GuardedResolver::new(
                    self.allow().clone(),
                    self.hosts.clone(),
                )))
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .referer(false)
                .connect_timeout(Duration::from_millis(self.settings.connect_timeout_ms))
                .user_agent(concat!("garuda/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| e.to_string())
        });
        built.as_ref().map_err(|e| WebError::Http(e.clone()))
    }

    /// GETs `url` under the guard, the deadline and `cancel`.
    pub async fn get(
        &self,
        url: &str,
        accept: &str,
        cancel: &CancellationToken,
    ) -> Result<Fetched, WebError> {
        let url =
            Url::parse(url.trim()).map_err(|e| WebError::BadUrl(url.to_string(), e.to_string()))?;
        let ms = self.settings.timeout_ms;
        let got = AtomicU64::new(0);
        let work = self.follow(url, accept, &got);
        tokio::select! {
            r = tokio::time::timeout(Duration::from_millis(ms), work) => match r {
                Ok(r) => r,
                Err(_) => Err(WebError::Timeout { ms, got: got.load(Ordering::Relaxed) }),
            },
            _ = cancel.cancelled() => Err(WebError::Cancelled),
        }
    }

    async fn follow(
        &self,
        mut url: Url,
        accept: &str,
        got: &AtomicU64,
    ) -> Result<Fetched, WebError> {
        let client = self.client()?;
        for _ in 0..=MAX_REDIRECTS {
            check_url(&url, self.allow(), self.secrets())?;
            let resp = client
                .get(url.clone())
                .header(reqwest::header::ACCEPT, accept)
                .send()
                .await
                .map_err(|e| transport(&e))?;
            let status = resp.status();
            if status.is_redirection() && status != reqwest::StatusCode::NOT_MODIFIED {
                let next = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| url.join(l).ok())
                    .ok_or(WebError::BadRedirect(status.as_u16()))?;
                url = next;
                continue;
            }
            let content_type = resp
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            return self
                .body(url, status.as_u16(), content_type, resp, got)
                .await;
        }
        Err(WebError::Redirects(MAX_REDIRECTS))
    }

    async fn body(
        &self,
        url: Url,
        status: u16,
        content_type: Option<String>,
        mut resp: reqwest::Response,
        got: &AtomicU64,
    ) -> Result<Fetched, WebError> {
        // A type the tools do not read is refused before its body is downloaded.
        if let Some(t) = &content_type {
            super::page::Kind::of(t)?;
        }
        let cap = usize::try_from(self.settings.max_bytes).unwrap_or(usize::MAX);
        let mut body: Vec<u8> = Vec::new();
        let mut cut = false;
        while let Some(chunk) = resp.chunk().await.map_err(|e| transport(&e))? {
            got.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            let room = cap.saturating_sub(body.len());
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if chunk.len() > room {
                cut = true;
                break;
            }
        }
        Ok(Fetched {
            url,
            status,
            content_type,
            body,
            cut,
        })
    }
}

/// A transport error as one line: the guard's own refusal when the resolver gave one, else
/// reqwest's text with its causes (its top-level text hides them).
fn transport(e: &reqwest::Error) -> WebError {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut text = String::new();
    while let Some(s) = src {
        if let Some(w) = s.downcast_ref::<WebError>() {
            return w.clone();
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&s.to_string());
        src = s.source();
    }
    WebError::Http(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn names_of_the_machine_itself_are_refused_after_resolution() {
        let r = GuardedResolver::new(AllowList::default(), Default::default());
        let err = r.lookup("localhost").await.unwrap_err();
        assert!(
            matches!(&err, WebError::Resolved { host, why, .. } if host == "localhost" && why.contains("loopback")),
            "{err:?}"
        );
        let allowed = GuardedResolver::new(
            AllowList::new(&["localhost".to_string()]),
            Default::default(),
        );
        assert!(!allowed.lookup("localhost").await.unwrap().is_empty());
    }

    /// A server on 127.0.0.1 answering every connection with `page`; the count of
    /// connections it took.
    fn serve(page: &'static str) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = hits.clone();
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                seen.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                    page.len()
                );
            }
        });
        (port, hits)
    }

    fn web_with(allow: &[&str], hosts: &[(&str, &str)]) -> Arc<Web> {
        let settings = crate::web::WebSettings {
            allow_hosts: allow.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let hosts = hosts
            .iter()
            .map(|(n, ip)| (n.to_string(), ip.parse().unwrap()))
            .collect();
        Web::with_hosts(settings, Default::default(), hosts)
    }

    #[tokio::test]
    async fn the_address_judged_is_the_address_connected_to() {
        let (port, hits) = serve("inside");
        let cancel = CancellationToken::new();
        // A public-looking name whose answer points inside is refused before any connection.
        let web = web_with(&[], &[("docs.example", "127.0.0.1")]);
        let err = web
            .get(&format!("http://docs.example:{port}/"), "*/*", &cancel)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, WebError::Resolved { host, addr, .. } if host == "docs.example" && addr == "127.0.0.1"),
            "{err:?}"
        );
        assert_eq!(hits.load(Ordering::SeqCst), 0);
        // Allowed, the same name connects to the address the resolver gave.
        let web = web_with(&["docs.example"], &[("docs.example", "127.0.0.1")]);
        let got = web
            .get(&format!("http://docs.example:{port}/"), "*/*", &cancel)
            .await
            .unwrap();
        assert_eq!(got.body, b"inside");
        assert_eq!(hits.load(Ordering::SeqCst), 1);
    }
}
