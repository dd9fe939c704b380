//! Finding the authorization server: the `WWW-Authenticate` challenge, protected resource
//! metadata (RFC 9728) and authorization server metadata (RFC 8414, OpenID discovery, and the
//! 2025-03-26 spec's fallbacks).

use serde::Deserialize;
use url::Url;

use super::OAuthError;

/// Largest metadata document read.
const MAX_METADATA_BYTES: usize = 256 * 1024;

/// What a `Bearer` challenge says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the protected resource metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the request needs.
    pub scope: Option<String>,
    /// `error`, e.g. `invalid_token` or `insufficient_scope`.
    pub error: Option<String>,
}

/// Reads the `Bearer` challenge of a `WWW-Authenticate` value (auth-params, quoted or not);
/// None when no Bearer challenge is there.
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let start = header
        .char_indices()
        .find(|&(i, _)| {
            header[i..].len() >= 6
                && header[i..i + 6].eq_ignore_ascii_case("bearer")
                && (i == 0 || matches!(header.as_bytes()[i - 1], b' ' | b','))
                && header[i + 6..].chars().next().is_none_or(|c| c == ' ')
        })
        .map(|(i, _)| i + 6)?;
    let mut out = Challenge::default();
    let mut rest = header[start..].trim_start();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else { break };
        let key = rest[..eq].trim().trim_start_matches(',').trim();
        if key.contains(' ') {
            // The next challenge's scheme: this one's params are over.
            break;
        }
        rest = rest[eq + 1..].trim_start();
        let value;
        if let Some(q) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = q.char_indices();
            let mut end = q.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            v.push(n);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => v.push(c),
                }
            }
            value = v;
            rest = &q[end.min(q.len())..];
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            value = rest[..end].trim().to_string();
            rest = &rest[end..];
        }
        rest = rest.trim_start().trim_start_matches(',').trim_start();
        match key.to_ascii_lowercase().as_str() {
            "resource_metadata" => out.resource_metadata = Some(value),
            "scope" => out.scope = Some(value).filter(|s| !s.trim().is_empty()),
            "error" => out.error = Some(value),
            _ => {}
        }
    }
    Some(out)
}

/// Protected resource metadata (RFC 9728), the parts used.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct ResourceMetadata {
    pub(super) resource: String,
    #[serde(default)]
    pub(super) authorization_servers: Vec<String>,
    #[serde(default)]
    pub(super) scopes_supported: Option<Vec<String>>,
}

/// Authorization server metadata (RFC 8414), the parts used.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct ServerMetadata {
    pub(super) issuer: String,
    pub(super) authorization_endpoint: Option<String>,
    pub(super) token_endpoint: String,
    #[serde(default)]
    pub(super) registration_endpoint: Option<String>,
    #[serde(default)]
    pub(super) scopes_supported: Option<Vec<String>>,
    #[serde(default)]
    pub(super) grant_types_supported: Option<Vec<String>>,
    #[serde(default)]
    pub(super) token_endpoint_auth_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub(super) code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub(super) client_id_metadata_document_supported: Option<bool>,
    #[serde(default)]
    pub(super) authorization_response_iss_parameter_supported: Option<bool>,
}

/// Where the authorization server was found.
#[derive(Debug, Clone)]
pub(super) struct Discovered {
    /// The resource to name in requests (RFC 8707): as the metadata publishes it, or the
    /// server's URL when there is none.
    pub(super) resource: String,
    /// The issuer the metadata was looked up for.
    pub(super) issuer: String,
    pub(super) metadata: ServerMetadata,
    /// `scopes_supported` of the protected resource.
    pub(super) resource_scopes: Option<Vec<String>>,
    /// True when the issuer's metadata was checked against the issuer (not a 2025-03-26
    /// fallback with made-up endpoints).
    pub(super) has_metadata: bool,
}

/// GETs a JSON document: `Ok(None)` for a 4xx (not there), `Err` for anything else that is
/// not a JSON object of the expected shape.
async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
    what: &str,
) -> Result<Option<T>, OAuthError> {
    let response = http
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .header("MCP-Protocol-Version", "2025-11-25")
        .send()
        .await
        .map_err(|e| OAuthError::Http(format!("cannot fetch the {what} at {url}: {e}")))?;
    let status = response.status();
    if status.is_client_error() {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(OAuthError::Metadata(format!(
            "the {what} at {url} answered HTTP {status}"
        )));
    }
    let body = read_limited(response, MAX_METADATA_BYTES)
        .await
        .map_err(|e| OAuthError::Metadata(format!("cannot read the {what} at {url}: {e}")))?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| OAuthError::Metadata(format!("the {what} at {url} is not usable: {e}")))
}

/// Reads a body of at most `max` bytes.
pub(super) async fn read_limited(
    mut response: reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > max {
            return Err(format!("larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The origin of a URL (`scheme://host[:port]`).
fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// The path of a URL without its trailing `/` (empty for the root).
fn path_of(url: &Url) -> String {
    url.path().trim_end_matches('/').to_string()
}

/// True when the metadata's `resource` may stand for `server`: same origin, and the server's
/// path at or under the resource's path (RFC 9728 section 3.3, as the MCP SDKs apply it).
pub(super) fn resource_covers(resource: &str, server: &str) -> bool {
    let (Ok(r), Ok(s)) = (Url::parse(resource), Url::parse(server)) else {
        return false;
    };
    if origin(&r) != origin(&s) {
        return false;
    }
    let (rp, sp) = (path_of(&r), path_of(&s));
    rp.is_empty() || sp == rp || sp.starts_with(&format!("{rp}/"))
}

/// The server's URL as the resource when no metadata names one: no fragment.
pub(super) fn canonical_resource(server: &str) -> String {
    match Url::parse(server) {
        Ok(mut u) => {
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => server.to_string(),
    }
}

/// The metadata URLs to try for `issuer`, in the spec's order.
fn server_metadata_urls(issuer: &Url) -> Vec<String> {
    let (o, p) = (origin(issuer), path_of(issuer));
    if p.is_empty() {
        vec![
            format!("{o}/.well-known/oauth-authorization-server"),
            format!("{o}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{o}/.well-known/oauth-authorization-server{p}"),
            format!("{o}/.well-known/openid-configuration{p}"),
            format!("{o}{p}/.well-known/openid-configuration"),
        ]
    }
}

/// Trailing `/` aside, the same issuer (RFC 8414 section 3.3).
fn same_issuer(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// Finds the authorization server of `server_url`, starting from a challenge if there is one.
pub(super) async fn discover(
    http: &reqwest::Client,
    server_url: &str,
    challenge: Option<&Challenge>,
) -> Result<Discovered, OAuthError> {
    let server = Url::parse(server_url)
        .map_err(|e| OAuthError::Config(format!("the server URL is not valid: {e}")))?;
    let (o, p) = (origin(&server), path_of(&server));
    let mut candidates = Vec::new();
    if let Some(url) = challenge.and_then(|c| c.resource_metadata.clone()) {
        candidates.push(url);
    }
    if !p.is_empty() {
        candidates.push(format!("{o}/.well-known/oauth-protected-resource{p}"));
    }
    candidates.push(format!("{o}/.well-known/oauth-protected-resource"));
    let mut prm: Option<ResourceMetadata> = None;
    for url in &candidates {
        if let Some(found) =
            get_json::<ResourceMetadata>(http, url, "protected resource metadata").await?
        {
            prm = Some(found);
            break;
        }
    }
    let Some(prm) = prm else {
        return legacy(http, server_url, &server).await;
    };
    if !resource_covers(&prm.resource, server_url) {
        return Err(OAuthError::Metadata(format!(
            "the protected resource metadata names resource `{}`, which is not this server ({server_url}); refusing to sign in",
            prm.resource
        )));
    }
    let issuer = prm.authorization_servers.first().cloned().ok_or_else(|| {
        OAuthError::Metadata("the protected resource metadata names no authorization server".into())
    })?;
    let issuer_url = Url::parse(&issuer).map_err(|e| {
        OAuthError::Metadata(format!(
            "the authorization server `{issuer}` is not a URL: {e}"
        ))
    })?;
    let mut metadata = None;
    for url in server_metadata_urls(&issuer_url) {
        if let Some(m) =
            get_json::<ServerMetadata>(http, &url, "authorization server metadata").await?
        {
            metadata = Some(m);
            break;
        }
    }
    let metadata = metadata.ok_or_else(|| {
        OAuthError::Metadata(format!(
            "no authorization server metadata found for `{issuer}`"
        ))
    })?;
    if !same_issuer(&metadata.issuer, &issuer) {
        return Err(OAuthError::Metadata(format!(
            "the authorization server metadata for `{issuer}` names another issuer (`{}`); refusing to use it",
            metadata.issuer
        )));
    }
    Ok(Discovered {
        resource: prm.resource,
        issuer,
        metadata,
        resource_scopes: prm.scopes_supported,
        has_metadata: true,
    })
}

/// The 2025-03-26 spec: no protected resource metadata, the authorization server is the MCP
/// server's origin; its metadata at the root, else `/authorize`, `/token` and `/register`.
async fn legacy(
    http: &reqwest::Client,
    server_url: &str,
    server: &Url,
) -> Result<Discovered, OAuthError> {
    let o = origin(server);
    let url = format!("{o}/.well-known/oauth-authorization-server");
    let found = get_json::<ServerMetadata>(http, &url, "authorization server metadata").await?;
    let (metadata, has_metadata) = match found {
        Some(m) => {
            if !same_issuer(&m.issuer, &o) {
                return Err(OAuthError::Metadata(format!(
                    "the authorization server metadata at {url} names another issuer (`{}`); refusing to use it",
                    m.issuer
                )));
            }
            (m, true)
        }
        None => (
            ServerMetadata {
                issuer: o.clone(),
                authorization_endpoint: Some(format!("{o}/authorize")),
                token_endpoint: format!("{o}/token"),
                registration_endpoint: Some(format!("{o}/register")),
                scopes_supported: None,
                grant_types_supported: None,
                token_endpoint_auth_methods_supported: None,
                code_challenge_methods_supported: None,
                client_id_metadata_document_supported: None,
                authorization_response_iss_parameter_supported: None,
            },
            false,
        ),
    };
    Ok(Discovered {
        resource: canonical_resource(server_url),
        issuer: o,
        metadata,
        resource_scopes: None,
        has_metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges() {
        let c = parse_challenge(
            r#"Bearer error="invalid_token", error_description="Missing \"x\", y", scope="a b", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp""#,
        )
        .unwrap();
        assert_eq!(c.scope.as_deref(), Some("a b"));
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://h/.well-known/oauth-protected-resource/mcp")
        );
        let c = parse_challenge("Basic realm=\"x\", Bearer error=insufficient_scope").unwrap();
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(parse_challenge("Basic realm=\"x\""), None);
        assert_eq!(parse_challenge("Bearer"), Some(Challenge::default()));
        // Malformed values end the parse without a panic.
        assert!(parse_challenge("Bearer scope=\"unterminated").is_some());
        assert!(parse_challenge("Bearer ===,,\"").is_some());
    }

    #[test]
    fn resources() {
        assert!(resource_covers("http://h:1/mcp", "http://h:1/mcp"));
        assert!(resource_covers("http://h:1", "http://h:1/mcp"));
        assert!(resource_covers("http://h:1/", "http://h:1/mcp"));
        assert!(!resource_covers(
            "https://evil.example.com/mcp",
            "http://h:1/mcp"
        ));
        assert!(!resource_covers("http://h:1/mc", "http://h:1/mcp"));
        assert!(!resource_covers("not a url", "http://h:1/mcp"));
    }

    #[test]
    fn metadata_urls() {
        let u = Url::parse("https://a.example/tenant1").unwrap();
        assert_eq!(
            server_metadata_urls(&u),
            [
                "https://a.example/.well-known/oauth-authorization-server/tenant1",
                "https://a.example/.well-known/openid-configuration/tenant1",
                "https://a.example/tenant1/.well-known/openid-configuration"
            ]
        );
        let u = Url::parse("https://a.example/").unwrap();
        assert_eq!(server_metadata_urls(&u).len(), 2);
    }
}
