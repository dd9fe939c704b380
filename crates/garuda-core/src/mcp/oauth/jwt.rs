//! `private_key_jwt` client authentication (RFC 7523 section 2.2): an ES256 assertion signed
//! with the client's P-256 key, on ring (already in the tree through rustls).

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};

use super::OAuthError;

/// How long an assertion is valid.
const LIFETIME_SECS: u64 = 300;

/// The DER of the first `PRIVATE KEY` block of a PEM text.
fn pkcs8_der(pem: &str) -> Result<Vec<u8>, OAuthError> {
    let body = pem
        .split("-----BEGIN PRIVATE KEY-----")
        .nth(1)
        .and_then(|rest| rest.split("-----END PRIVATE KEY-----").next())
        .ok_or_else(|| {
            OAuthError::Config("the client key is not a PEM `PRIVATE KEY` (PKCS#8)".into())
        })?;
    let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    STANDARD
        .decode(b64)
        .map_err(|_| OAuthError::Config("the client key's PEM is not valid base64".into()))
}

/// A signed client assertion for `client_id` at the authorization server `audience`.
pub(super) fn client_assertion(
    pem: &str,
    client_id: &str,
    audience: &str,
    now: u64,
) -> Result<String, OAuthError> {
    let rng = SystemRandom::new();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8_der(pem)?, &rng)
        .map_err(|e| OAuthError::Config(format!("the client key is not a P-256 key: {e}")))?;
    let header = serde_json::json!({"alg": "ES256", "typ": "JWT"});
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + LIFETIME_SECS,
        "jti": uuid::Uuid::new_v4().to_string(),
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = key
        .sign(&rng, signing_input.as_bytes())
        .map_err(|_| OAuthError::Config("signing the client assertion failed".into()))?;
    Ok(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature.as_ref())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{ECDSA_P256_SHA256_FIXED, KeyPair, UnparsedPublicKey};

    #[test]
    fn assertions_verify_with_the_public_key() {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            STANDARD.encode(doc.as_ref())
        );
        let jwt = client_assertion(&pem, "c1", "https://as.example", 1000).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "c1");
        assert_eq!(claims["sub"], "c1");
        assert_eq!(claims["aud"], "https://as.example");
        assert_eq!(claims["exp"], 1300);
        let key =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, doc.as_ref(), &rng).unwrap();
        let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.public_key().as_ref());
        let sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        public
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
            .unwrap();
        assert!(client_assertion("not a key", "c1", "a", 0).is_err());
    }
}
