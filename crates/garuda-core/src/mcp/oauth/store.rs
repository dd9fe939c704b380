//! Where tokens and registered clients live: one JSON file per server URL, mode 0600, in a
//! folder of mode 0700 under the user's state folder; or memory only (`garuda mcp-probe`).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The client Garuda is known as to one authorization server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredClient {
    /// The authorization server's issuer this client belongs to: a client is never shown to
    /// another one.
    pub issuer: String,
    /// Its client ID.
    pub client_id: String,
    /// Its secret, when registration gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The redirect URI it was registered with (dynamic registration only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    /// The token endpoint auth method registration settled on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_method: Option<String>,
    /// True when the client came from dynamic registration (and may be registered again).
    #[serde(default)]
    pub registered: bool,
    /// The token endpoint, for refreshing without discovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
}

/// Tokens for one server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredTokens {
    /// The access token.
    pub access_token: String,
    /// The refresh token, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Unix seconds when the access token expires, when the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The scopes asked for (space-separated), the base of a step-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// Everything kept for one server URL.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAuth {
    /// The MCP server's URL.
    pub server_url: String,
    /// The resource named in token requests (RFC 8707).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The client, when one was settled on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<StoredClient>,
    /// The tokens, when signed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<StoredTokens>,
}

// Hand-written so a debug print never shows a token or a secret.
impl std::fmt::Debug for StoredAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredAuth")
            .field("server_url", &self.server_url)
            .field("client_id", &self.client.as_ref().map(|c| &c.client_id))
            .field("signed_in", &self.tokens.is_some())
            .finish()
    }
}

/// Keeps [`StoredAuth`] per server URL.
pub trait TokenStore: Send + Sync {
    /// What is kept for `server_url`, if anything.
    fn load(&self, server_url: &str) -> Option<StoredAuth>;
    /// Keeps `auth` (for `auth.server_url`).
    fn save(&self, auth: &StoredAuth) -> std::io::Result<()>;
    /// Forgets `server_url`; true when something was kept.
    fn remove(&self, server_url: &str) -> std::io::Result<bool>;
}

/// Files in a folder: `<sha256 of the URL, 32 hex>.json`.
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
}

impl FileStore {
    /// A store in `dir` (created with mode 0700 on first save).
    pub fn new(dir: impl Into<PathBuf>) -> FileStore {
        FileStore { dir: dir.into() }
    }

    /// The store in the user's state folder: `$XDG_STATE_HOME/garuda/mcp-auth`.
    pub fn in_state_dir() -> FileStore {
        FileStore::new(crate::dirs::state_dir().join("mcp-auth"))
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file kept for `server_url`.
    pub fn path(&self, server_url: &str) -> PathBuf {
        let digest = Sha256::digest(server_url.as_bytes());
        let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{hex}.json"))
    }
}

impl TokenStore for FileStore {
    fn load(&self, server_url: &str) -> Option<StoredAuth> {
        let text = std::fs::read_to_string(self.path(server_url)).ok()?;
        let auth: StoredAuth = serde_json::from_str(&text).ok()?;
        (auth.server_url == server_url).then_some(auth)
    }

    fn save(&self, auth: &StoredAuth) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let path = self.path(&auth.server_url);
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let text = serde_json::to_vec_pretty(auth).map_err(std::io::Error::other)?;
        {
            // Created 0600 from the start, so no other user can open it between create and chmod.
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
            f.write_all(&text)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &path)
    }

    fn remove(&self, server_url: &str) -> std::io::Result<bool> {
        match std::fs::remove_file(self.path(server_url)) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Memory only: forgotten when the process ends.
#[derive(Debug, Default)]
pub struct MemoryStore(Mutex<HashMap<String, StoredAuth>>);

impl TokenStore for MemoryStore {
    fn load(&self, server_url: &str) -> Option<StoredAuth> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(server_url)
            .cloned()
    }

    fn save(&self, auth: &StoredAuth) -> std::io::Result<()> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(auth.server_url.clone(), auth.clone());
        Ok(())
    }

    fn remove(&self, server_url: &str) -> std::io::Result<bool> {
        Ok(self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(server_url)
            .is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_are_private_and_per_url() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path().join("mcp-auth"));
        let auth = StoredAuth {
            server_url: "https://a.example/mcp".into(),
            resource: None,
            client: None,
            tokens: Some(StoredTokens {
                access_token: "secret-token".into(),
                refresh_token: None,
                expires_at: None,
                scope: None,
            }),
        };
        store.save(&auth).unwrap();
        let path = store.path(&auth.server_url);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dmode = std::fs::metadata(store.dir()).unwrap().permissions().mode();
        assert_eq!(dmode & 0o777, 0o700);
        assert_eq!(store.load(&auth.server_url), Some(auth.clone()));
        assert_eq!(store.load("https://b.example/mcp"), None);
        assert!(!format!("{auth:?}").contains("secret-token"));
        assert!(store.remove(&auth.server_url).unwrap());
        assert!(!store.remove(&auth.server_url).unwrap());
        assert_eq!(store.load(&auth.server_url), None);
    }
}
