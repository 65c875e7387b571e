//! OAuth tokens of MCP servers on disk: one JSON file per server in `<data_dir>/mcp-oauth/`,
//! the directory owner-only (0700), each file owner-only (0600), written whole and renamed
//! into place. Nothing here logs a token, and [`StoredTokens`]' `Debug` hides them.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::OAuthError;

/// The directory of token files inside a data directory.
pub fn store_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("mcp-oauth")
}

/// How the tokens were obtained.
pub const BY_LOGIN: &str = "authorization_code";
pub const BY_CLIENT_CREDENTIALS: &str = "client_credentials";

/// What Hermes keeps for one server: the tokens and what is needed to renew them.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct StoredTokens {
    pub access_token: String,
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    /// The granted scope (space-separated).
    #[serde(default)]
    pub scope: String,
    pub token_endpoint: String,
    pub client_id: String,
    /// A secret issued by dynamic client registration (configured secrets stay in the env).
    #[serde(default)]
    pub client_secret: Option<String>,
    /// The canonical resource (RFC 8707) the tokens are for.
    pub resource: String,
    /// [`BY_LOGIN`] or [`BY_CLIENT_CREDENTIALS`].
    pub obtained_by: String,
}

impl std::fmt::Debug for StoredTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredTokens")
            .field("access_token", &"<redacted>")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .field("client_id", &self.client_id)
            .field("resource", &self.resource)
            .field("obtained_by", &self.obtained_by)
            .finish_non_exhaustive()
    }
}

impl StoredTokens {
    /// Expired, or expiring within `margin`.
    pub fn expired(&self, margin: chrono::Duration) -> bool {
        self.expires_at.is_some_and(|at| at - margin <= Utc::now())
    }
}

/// The token files of one data directory.
#[derive(Debug, Clone)]
pub struct TokenStore {
    dir: PathBuf,
}

impl TokenStore {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub fn path(&self, server: &str) -> PathBuf {
        self.dir.join(format!("{server}.json"))
    }

    fn failed(&self, server: &str, reason: impl std::fmt::Display) -> OAuthError {
        OAuthError::Store {
            path: self.path(server).display().to_string(),
            reason: reason.to_string(),
        }
    }

    /// The server's tokens, if any were saved.
    pub fn load(&self, server: &str) -> Result<Option<StoredTokens>, OAuthError> {
        let text = match std::fs::read_to_string(self.path(server)) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.failed(server, e)),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            self.failed(
                server,
                format!("unreadable ({e}); run `hermes mcp login {server}` again"),
            )
        })
    }

    /// Save (replace) the server's tokens, owner-only.
    pub fn save(&self, server: &str, tokens: &StoredTokens) -> Result<(), OAuthError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| self.failed(server, e))?;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| self.failed(server, e))?;
        let json = serde_json::to_vec_pretty(tokens).map_err(|e| self.failed(server, e))?;
        let temporary = self
            .dir
            .join(format!(".{server}.json.{}", uuid::Uuid::new_v4()));
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temporary)?;
            file.write_all(&json)?;
            file.sync_all()?;
            std::fs::rename(&temporary, self.path(server))
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&temporary);
            self.failed(server, e)
        })
    }

    /// Forget the server's tokens.
    pub fn remove(&self, server: &str) -> Result<(), OAuthError> {
        match std::fs::remove_file(self.path(server)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(self.failed(server, e)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> StoredTokens {
        StoredTokens {
            access_token: "at-secret".into(),
            refresh_token: Some("rt-secret".into()),
            expires_at: Some(Utc::now() + chrono::Duration::seconds(60)),
            scope: "mcp:read".into(),
            token_endpoint: "http://as/token".into(),
            client_id: "c".into(),
            client_secret: None,
            resource: "http://mcp/mcp".into(),
            obtained_by: BY_LOGIN.into(),
        }
    }

    #[test]
    fn saved_tokens_come_back_from_an_owner_only_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(store_dir(dir.path()));
        assert_eq!(store.load("remote").unwrap(), None);
        let saved = tokens();
        store.save("remote", &saved).unwrap();
        assert_eq!(store.load("remote").unwrap(), Some(saved));
        let mode = std::fs::metadata(store.path("remote"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(store_dir(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        store.remove("remote").unwrap();
        assert_eq!(store.load("remote").unwrap(), None);
    }

    #[test]
    fn debug_output_hides_the_tokens() {
        let text = format!("{:?}", tokens());
        assert!(
            !text.contains("at-secret") && !text.contains("rt-secret"),
            "{text}"
        );
    }

    #[test]
    fn expiry_counts_the_margin() {
        let mut t = tokens();
        assert!(!t.expired(chrono::Duration::seconds(10)));
        assert!(t.expired(chrono::Duration::seconds(120)));
        t.expires_at = None;
        assert!(!t.expired(chrono::Duration::seconds(120)));
    }
}
