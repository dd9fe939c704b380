//! The redirect listener: 127.0.0.1 on a port of its own, one path, waiting for the
//! authorization response whose `state` is ours (RFC 8252 section 7.3). A request with another
//! state, or any other request, gets an error page and the listener keeps waiting.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use url::Url;

/// The redirect path.
const CALLBACK_PATH: &str = "/callback";

/// Largest request head read from the browser.
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// A bound listener.
pub(super) struct Loopback {
    listener: TcpListener,
    port: u16,
}

/// What the authorization server sent back.
#[derive(Debug)]
pub(super) enum Callback {
    /// A code, with the `iss` parameter if any (RFC 9207).
    Code { code: String, iss: Option<String> },
    /// An OAuth error.
    Error {
        error: String,
        description: Option<String>,
    },
}

impl Loopback {
    /// Binds 127.0.0.1:`port` (0: a free one).
    pub(super) async fn bind(port: u16) -> std::io::Result<Loopback> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let port = listener.local_addr()?.port();
        Ok(Loopback { listener, port })
    }

    /// The redirect URI to register and send.
    pub(super) fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}{CALLBACK_PATH}", self.port)
    }

    /// The port bound.
    #[cfg(test)]
    pub(super) fn port(&self) -> u16 {
        self.port
    }

    /// Waits for the response carrying `state`; None when `deadline` passes first.
    pub(super) async fn wait(&self, state: &str, deadline: Duration) -> Option<Callback> {
        tokio::time::timeout(deadline, async {
            loop {
                let Ok((stream, _)) = self.listener.accept().await else {
                    continue;
                };
                if let Some(cb) = answer(stream, state).await {
                    return cb;
                }
            }
        })
        .await
        .ok()
    }
}

/// Reads one request and answers it; Some when it was the awaited response.
async fn answer(mut stream: TcpStream, state: &str) -> Option<Callback> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    // A browser that opens a connection and sends nothing must not hold the listener.
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_BYTES {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    if read.is_err() {
        return None;
    }
    let text = String::from_utf8_lossy(&head);
    let target = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("GET "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or("");
    let url = Url::parse(&format!("http://127.0.0.1{target}")).ok();
    let outcome = url
        .filter(|u| u.path() == CALLBACK_PATH)
        .map(|u| parse(&u, state));
    let (status, body, result) = match outcome {
        None => ("404 Not Found", "Not found.".to_string(), None),
        Some(Err(why)) => ("400 Bad Request", why, None),
        Some(Ok(cb @ Callback::Code { .. })) => (
            "200 OK",
            "Signed in. You can close this page and return to your editor.".to_string(),
            Some(cb),
        ),
        Some(Ok(cb @ Callback::Error { .. })) => (
            "200 OK",
            "Sign-in was refused; see your editor for the reason.".to_string(),
            Some(cb),
        ),
    };
    let page = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(page.as_bytes()).await;
    let _ = stream.shutdown().await;
    result
}

/// The callback's parameters, checked against `state`.
fn parse(url: &Url, state: &str) -> Result<Callback, String> {
    let get = |k: &str| {
        url.query_pairs()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.into_owned())
    };
    if get("state").as_deref() != Some(state) {
        return Err("This sign-in response does not belong to the sign-in Garuda started (wrong state); it was ignored.".into());
    }
    if let Some(error) = get("error") {
        return Ok(Callback::Error {
            error,
            description: get("error_description"),
        });
    }
    match get("code") {
        Some(code) if !code.is_empty() => Ok(Callback::Code {
            code,
            iss: get("iss"),
        }),
        _ => Err("The sign-in response has no code.".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(port: u16, path: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn only_our_state_is_taken() {
        let lb = Loopback::bind(0).await.unwrap();
        let port = lb.port();
        assert!(lb.redirect_uri().starts_with("http://127.0.0.1:"));
        let client = tokio::spawn(async move {
            let wrong = get(port, "/callback?code=c&state=other").await;
            assert!(wrong.starts_with("HTTP/1.1 400"), "{wrong}");
            let elsewhere = get(port, "/favicon.ico").await;
            assert!(elsewhere.starts_with("HTTP/1.1 404"), "{elsewhere}");
            let ok = get(port, "/callback?code=abc&state=s1&iss=https%3A%2F%2Fa").await;
            assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        });
        match lb.wait("s1", Duration::from_secs(60)).await {
            Some(Callback::Code { code, iss }) => {
                assert_eq!(code, "abc");
                assert_eq!(iss.as_deref(), Some("https://a"));
            }
            other => panic!("{other:?}"),
        }
        client.await.unwrap();
    }

    #[tokio::test]
    async fn errors_come_back() {
        let lb = Loopback::bind(0).await.unwrap();
        let port = lb.port();
        tokio::spawn(async move {
            get(port, "/callback?error=access_denied&state=s").await;
        });
        assert!(matches!(
            lb.wait("s", Duration::from_secs(60)).await,
            Some(Callback::Error { error, .. }) if error == "access_denied"
        ));
    }
}
