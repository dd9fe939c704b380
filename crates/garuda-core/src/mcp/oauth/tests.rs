//! Sign-in against a mock authorization server: the happy path, refresh before expiry, and
//! each bad input ending in a clear error.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::*;

/// The authorization endpoint: redirects to the request's `redirect_uri` with a code, the
/// request's `state` (or `wrong_state`), and `iss`.
struct Authorize {
    iss: Option<String>,
    wrong_state: bool,
}

impl Respond for Authorize {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let q: std::collections::HashMap<String, String> =
            req.url.query_pairs().into_owned().collect();
        let mut back = url::Url::parse(&q["redirect_uri"]).unwrap();
        {
            let mut p = back.query_pairs_mut();
            p.append_pair("code", "the-code");
            if self.wrong_state {
                p.append_pair("state", "not-the-state");
            } else {
                p.append_pair("state", &q["state"]);
            }
            if let Some(iss) = &self.iss {
                p.append_pair("iss", iss);
            }
        }
        ResponseTemplate::new(302).insert_header("Location", back.as_str())
    }
}

/// A protected resource and its authorization server on one mock, ready but for `/token`.
async fn server(iss_ok: bool, issuer_override: Option<&str>) -> MockServer {
    server_with(iss_ok, issuer_override, false).await
}

/// [`server`], its authorization endpoint answering with another `state` when `wrong_state`.
async fn server_with(iss_ok: bool, issuer_override: Option<&str>, wrong_state: bool) -> MockServer {
    let s = MockServer::start().await;
    let base = s.uri();
    Mock::given(method("GET"))
        .and(path("/.well-known/oauth-protected-resource/mcp"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "resource": format!("{base}/mcp"), "authorization_servers": [base],
        })))
        .mount(&s)
        .await;
    Mock::given(method("GET"))
        .and(path("/.well-known/oauth-authorization-server"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "issuer": issuer_override.unwrap_or(&base),
            "authorization_endpoint": format!("{base}/authorize"),
            "token_endpoint": format!("{base}/token"),
            "registration_endpoint": format!("{base}/register"),
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "authorization_response_iss_parameter_supported": true,
        })))
        .mount(&s)
        .await;
    Mock::given(method("POST"))
        .and(path("/register"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"client_id": "c1"})))
        .mount(&s)
        .await;
    let iss = if iss_ok {
        Some(base.clone())
    } else {
        Some(format!("{base}/"))
    };
    Mock::given(method("GET"))
        .and(path("/authorize"))
        .respond_with(Authorize { iss, wrong_state })
        .mount(&s)
        .await;
    s
}

fn auth(s: &MockServer, door: Arc<dyn SignInDoor>, config: OAuthConfig) -> ServerAuth {
    let ctx = AuthContext {
        door,
        store: Arc::new(MemoryStore::default()),
        client_secret: None,
        assertion: None,
        client_key_pem: None,
    };
    ServerAuth::new("t", &format!("{}/mcp", s.uri()), config, ctx).unwrap()
}

fn browser() -> Arc<dyn SignInDoor> {
    Arc::new(FollowRedirects)
}

async fn token_answer(s: &MockServer, template: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path("/token"))
        .respond_with(template)
        .mount(s)
        .await;
}

#[tokio::test]
async fn signs_in_and_refreshes_before_expiry() {
    let s = server(true, None).await;
    Mock::given(method("POST"))
        .and(path("/token"))
        .and(body_string_contains("grant_type=refresh_token"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "access_token": "fresh", "token_type": "Bearer", "expires_in": 3600,
        })))
        .mount(&s)
        .await;
    // Expires within the refresh margin: the next use refreshes it.
    token_answer(
        &s,
        ResponseTemplate::new(200).set_body_json(json!({
            "access_token": "first", "token_type": "bearer", "expires_in": 10,
            "refresh_token": "r1",
        })),
    )
    .await;
    let a = auth(&s, browser(), OAuthConfig::default());
    a.sign_in().await.unwrap();
    assert_eq!(a.bearer().await.as_deref(), Some("fresh"));
    assert_eq!(a.bearer().await.as_deref(), Some("fresh"));
    let token_calls = s
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.url.path() == "/token")
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect::<Vec<_>>();
    assert_eq!(token_calls.len(), 2, "{token_calls:?}");
    assert!(token_calls[0].contains("code_verifier="));
    assert!(token_calls[0].contains("resource="));
    assert!(token_calls[1].contains("refresh_token=r1"));
}

#[tokio::test]
async fn an_erroring_token_endpoint_is_a_clear_error() {
    let s = server(true, None).await;
    token_answer(&s, ResponseTemplate::new(500).set_body_string("boom")).await;
    let e = auth(&s, browser(), OAuthConfig::default())
        .sign_in()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("answered HTTP 500"), "{e}");

    let s = server(true, None).await;
    token_answer(
        &s,
        ResponseTemplate::new(400)
            .set_body_json(json!({"error": "invalid_grant", "error_description": "code used"})),
    )
    .await;
    let e = auth(&s, browser(), OAuthConfig::default())
        .sign_in()
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "the authorization server answered `invalid_grant`: code used"
    );

    // A token answer that is not JSON never quotes its body (it may hold a token).
    let s = server(true, None).await;
    token_answer(
        &s,
        ResponseTemplate::new(200).set_body_string("access_token=leaky&x"),
    )
    .await;
    let e = auth(&s, browser(), OAuthConfig::default())
        .sign_in()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("is not usable"), "{e}");
    assert!(!e.to_string().contains("leaky"), "{e}");
}

#[tokio::test]
async fn malformed_or_foreign_metadata_is_refused() {
    let s = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/.well-known/oauth-protected-resource/mcp"))
        .respond_with(ResponseTemplate::new(200).set_body_string("{not json"))
        .mount(&s)
        .await;
    let e = auth(&s, browser(), OAuthConfig::default())
        .sign_in()
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("protected resource metadata")
            && e.to_string().contains("not usable"),
        "{e}"
    );

    let s = server(true, Some("https://attacker.example")).await;
    let e = auth(&s, browser(), OAuthConfig::default())
        .sign_in()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("names another issuer"), "{e}");
}

#[tokio::test]
async fn a_wrong_issuer_in_the_response_is_refused() {
    let s = server(false, None).await;
    token_answer(
        &s,
        ResponseTemplate::new(200)
            .set_body_json(json!({"access_token": "x", "token_type": "Bearer"})),
    )
    .await;
    let e = auth(&s, browser(), OAuthConfig::default())
        .sign_in()
        .await
        .unwrap_err();
    assert!(matches!(e, OAuthError::Response(_)), "{e}");
    let tokens = s
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/token")
        .count();
    assert_eq!(tokens, 0, "no code is exchanged after a wrong iss");
}

/// A door whose person never finishes.
struct Gone;

impl SignInDoor for Gone {
    fn open(&self, _r: SignInRequest) -> BoxFuture<'static, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test]
async fn no_person_and_no_answer_are_clear() {
    let s = server(true, None).await;
    let a = auth(&s, Arc::new(NoPerson), OAuthConfig::default());
    let e = a.sign_in().await.unwrap_err();
    assert!(matches!(e, OAuthError::NeedsPerson { .. }), "{e}");
    assert!(e.to_string().contains("garuda mcp login t"), "{e}");
    let registered = s
        .received_requests()
        .await
        .unwrap()
        .iter()
        .any(|r| r.url.path() == "/register");
    assert!(
        !registered,
        "no client is registered when no one can sign in"
    );

    let config = OAuthConfig {
        sign_in_timeout_secs: Some(1),
        ..OAuthConfig::default()
    };
    let a = auth(&s, Arc::new(Gone), config);
    let e = a.sign_in().await.unwrap_err();
    assert!(matches!(e, OAuthError::TimedOut { .. }), "{e}");
    assert!(!a.waiting_for_person());
    assert_eq!(a.last_error(), Some(e));

    // A response with another `state` is not taken: the sign-in waits on, then times out.
    let s = server_with(true, None, true).await;
    let config = OAuthConfig {
        sign_in_timeout_secs: Some(1),
        ..OAuthConfig::default()
    };
    let e = auth(&s, browser(), config).sign_in().await.unwrap_err();
    assert!(matches!(e, OAuthError::TimedOut { .. }), "{e}");
}

#[tokio::test]
async fn a_hanging_authorization_server_is_a_clear_error() {
    let s = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(30)))
        .mount(&s)
        .await;
    let e = auth(&s, browser(), OAuthConfig::default())
        .sign_in()
        .await
        .unwrap_err();
    assert!(
        matches!(&e, OAuthError::Http(m) if m.contains("cannot fetch the protected resource metadata")),
        "{e}"
    );
}

#[tokio::test]
async fn scope_step_up_is_bounded_and_asks_for_the_union() {
    let s = server(true, None).await;
    token_answer(
        &s,
        ResponseTemplate::new(200)
            .set_body_json(json!({"access_token": "x", "token_type": "Bearer"})),
    )
    .await;
    let a = auth(&s, browser(), OAuthConfig::default());
    let challenge = |scope: &str| {
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
            s.uri()
        )
    };
    a.handle_challenge(401, &challenge("read"), None, 0)
        .await
        .unwrap();
    let sent = a.bearer().await;
    a.handle_challenge(403, &challenge("write"), sent.as_deref(), 1)
        .await
        .unwrap();
    let scopes: Vec<String> = s
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/authorize")
        .filter_map(|r| {
            r.url
                .query_pairs()
                .find(|(k, _)| k == "scope")
                .map(|(_, v)| v.into_owned())
        })
        .collect();
    assert_eq!(scopes, ["read", "read write"]);
    let e = a
        .handle_challenge(
            403,
            &challenge("admin"),
            sent.as_deref(),
            MAX_AUTHORIZATIONS,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, OAuthError::TooManyAttempts(_)), "{e}");
}
