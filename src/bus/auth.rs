//! Who this process is to nats-server: the credential and TLS settings the NATS bus connects
//! with (applied in `nats/auth.rs`, the one place that knows async-nats' options).
//!
//! At most one credential: user and password, a token, an NKey seed, or a `.creds` file (a
//! user JWT with its NKey seed). TLS — a CA to trust, a client certificate and key, or TLS
//! required — combines with any of them. The environment fills what the configuration leaves
//! out (see [`NatsAuth::from_env`]); secrets are never printed, only what names them.
//!
//! An identity — the name this process has on the bus, usually its NATS user — may go with
//! the credential: its reply inboxes are then `_INBOX.<identity>.>` and the messages it sends
//! to sessions go to `hermes.in.<agent>.<session>.<identity>`, so a nats-server that grants
//! each user only its own inboxes and inbound subjects (config/nats/hermes.conf) knows who
//! sent what.

use std::path::PathBuf;

/// The credential to present.
#[derive(Clone, Default, PartialEq)]
pub enum NatsCredential {
    #[default]
    None,
    UserPassword {
        user: String,
        password: String,
    },
    Token(String),
    /// An NKey seed (`SU…`), read from `file`.
    NKey {
        seed: String,
        file: PathBuf,
    },
    /// A `.creds` file (JWT + seed).
    CredsFile(PathBuf),
}

impl std::fmt::Debug for NatsCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl NatsCredential {
    /// What names the credential, for messages: never the secret itself.
    pub fn describe(&self) -> String {
        match self {
            Self::None => "no credential".into(),
            Self::UserPassword { user, .. } => format!("user `{user}` with its password"),
            Self::Token(_) => "the token".into(),
            Self::NKey { file, .. } => format!("the NKey seed in {}", file.display()),
            Self::CredsFile(path) => format!("the credentials file {}", path.display()),
        }
    }

    /// Who connects with it, for messages about what the server let it do.
    pub fn who(&self) -> String {
        match self {
            Self::None => "this connection (no credential)".into(),
            Self::UserPassword { user, .. } => format!("user `{user}`"),
            Self::Token(_) => "the token's user".into(),
            Self::NKey { file, .. } => format!("the NKey user of {}", file.display()),
            Self::CredsFile(path) => format!("the user of {}", path.display()),
        }
    }
}

/// TLS towards nats-server.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NatsTls {
    /// A CA certificate (PEM) to trust besides the system's.
    pub ca_file: Option<PathBuf>,
    /// A client certificate and its key (PEM), for servers that verify clients.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Refuse to talk without TLS.
    pub required: bool,
}

impl NatsTls {
    pub fn is_set(&self) -> bool {
        self.required || self.ca_file.is_some() || self.cert_file.is_some()
    }
}

/// Credential and TLS for the NATS bus.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NatsAuth {
    pub credential: NatsCredential,
    pub tls: NatsTls,
    /// This process's name on the bus (see the module docs); none: `_INBOX.>` inboxes and
    /// `hermes.in.<agent>.<session>` subjects, as on a server without permissions.
    pub identity: Option<String>,
}

/// Environment variables read by [`NatsAuth::from_env`].
pub mod env {
    pub const USER: &str = "HERMES_NATS_USER";
    pub const PASSWORD: &str = "HERMES_NATS_PASSWORD";
    pub const TOKEN: &str = "HERMES_NATS_TOKEN";
    pub const NKEY_SEED_FILE: &str = "HERMES_NATS_NKEY_SEED_FILE";
    pub const CREDS_FILE: &str = "HERMES_NATS_CREDS_FILE";
    pub const TLS_CA_FILE: &str = "HERMES_NATS_TLS_CA_FILE";
    pub const TLS_CERT_FILE: &str = "HERMES_NATS_TLS_CERT_FILE";
    pub const TLS_KEY_FILE: &str = "HERMES_NATS_TLS_KEY_FILE";
    pub const IDENTITY: &str = "HERMES_NATS_IDENTITY";
}

/// Why the NATS credential or TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    #[error("{user} is set but {password} is not: set both")]
    UserWithoutPassword {
        user: &'static str,
        password: &'static str,
    },
    #[error("more than one NATS credential in {place} ({found}); keep one of {keep}")]
    SeveralCredentials {
        place: &'static str,
        found: String,
        keep: &'static str,
    },
    #[error("{place}: {error}")]
    Identity {
        place: &'static str,
        #[source]
        error: crate::protocol::subjects::IdError,
    },
    #[error("cannot read the NKey seed file {}: {error}; check the path and its permissions", file.display())]
    SeedUnreadable {
        file: PathBuf,
        #[source]
        error: std::io::Error,
    },
    #[error("the NKey seed file {} is empty; it holds one seed line (nsc, or nk -gen user)", file.display())]
    SeedEmpty { file: PathBuf },
    #[error("[bus.auth] {what} names the variable {variable}, which is not set: export it")]
    SecretUnset {
        what: &'static str,
        variable: String,
    },
    #[error("cannot use the credentials file {}: {error}; it must hold a user JWT and its NKey seed (nsc generate creds)", path.display())]
    CredsFile {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    #[error("a TLS client certificate needs both its certificate and its key file: set both, or neither")]
    HalfClientCertificate,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl NatsAuth {
    /// What the environment says: `HERMES_NATS_USER` + `HERMES_NATS_PASSWORD`,
    /// `HERMES_NATS_TOKEN`, `HERMES_NATS_NKEY_SEED_FILE`, `HERMES_NATS_CREDS_FILE`, and
    /// `HERMES_NATS_TLS_CA_FILE` / `_CERT_FILE` / `_KEY_FILE`, and `HERMES_NATS_IDENTITY`.
    /// More than one credential, a user without a password, or an identity that cannot be a
    /// subject token is an error naming the variables.
    pub fn from_env() -> Result<Self, AuthError> {
        Self::from_lookup(var)
    }

    /// [`Self::from_env`] over any lookup (tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, AuthError> {
        let mut found = Vec::new();
        if let Some(user) = lookup(env::USER) {
            let password = lookup(env::PASSWORD).ok_or(AuthError::UserWithoutPassword {
                user: env::USER,
                password: env::PASSWORD,
            })?;
            found.push(NatsCredential::UserPassword { user, password });
        }
        if let Some(token) = lookup(env::TOKEN) {
            found.push(NatsCredential::Token(token));
        }
        if let Some(file) = lookup(env::NKEY_SEED_FILE) {
            found.push(read_seed(PathBuf::from(file))?);
        }
        if let Some(file) = lookup(env::CREDS_FILE) {
            found.push(NatsCredential::CredsFile(PathBuf::from(file)));
        }
        if found.len() > 1 {
            return Err(AuthError::SeveralCredentials {
                place: "the environment",
                found: found
                    .iter()
                    .map(NatsCredential::describe)
                    .collect::<Vec<_>>()
                    .join(", "),
                keep: "HERMES_NATS_USER, HERMES_NATS_TOKEN, HERMES_NATS_NKEY_SEED_FILE, \
                       HERMES_NATS_CREDS_FILE",
            });
        }
        let identity = lookup(env::IDENTITY)
            .map(|name| check_identity(env::IDENTITY, name))
            .transpose()?;
        Ok(Self {
            credential: found.pop().unwrap_or_default(),
            tls: NatsTls {
                ca_file: lookup(env::TLS_CA_FILE).map(PathBuf::from),
                cert_file: lookup(env::TLS_CERT_FILE).map(PathBuf::from),
                key_file: lookup(env::TLS_KEY_FILE).map(PathBuf::from),
                required: false,
            },
            identity,
        })
    }

    /// `self`, with what `other` sets taking precedence (the environment over the config).
    pub fn overridden_by(self, other: NatsAuth) -> NatsAuth {
        NatsAuth {
            credential: match other.credential {
                NatsCredential::None => self.credential,
                set => set,
            },
            tls: NatsTls {
                ca_file: other.tls.ca_file.or(self.tls.ca_file),
                cert_file: other.tls.cert_file.or(self.tls.cert_file),
                key_file: other.tls.key_file.or(self.tls.key_file),
                required: self.tls.required || other.tls.required,
            },
            identity: other.identity.or(self.identity),
        }
    }

    /// The prefix of this process's reply inboxes: `_INBOX.<identity>`, or none for the
    /// client's default (`_INBOX`).
    pub fn inbox_prefix(&self) -> Option<String> {
        self.identity.as_ref().map(|name| format!("_INBOX.{name}"))
    }
}

/// `name`, when it can be one subject token (it goes into inbox and inbound subjects);
/// `source` names where it came from.
pub fn check_identity(place: &'static str, name: String) -> Result<String, AuthError> {
    crate::protocol::subjects::check_id("identity", &name)
        .map(|()| name)
        .map_err(|error| AuthError::Identity { place, error })
}

/// The NKey seed in `file` (its first non-empty line).
pub fn read_seed(file: PathBuf) -> Result<NatsCredential, AuthError> {
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(error) => return Err(AuthError::SeedUnreadable { file, error }),
    };
    let Some(seed) = text.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return Err(AuthError::SeedEmpty { file });
    };
    let seed = seed.to_string();
    Ok(NatsCredential::NKey { seed, file })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn the_environment_names_one_credential_and_errors_name_the_variables() {
        let auth = NatsAuth::from_lookup(lookup(&[(env::TOKEN, "s3cret")])).unwrap();
        assert_eq!(auth.credential, NatsCredential::Token("s3cret".into()));
        assert!(
            !format!("{auth:?}").contains("s3cret"),
            "secrets never print"
        );
        let err = NatsAuth::from_lookup(lookup(&[(env::USER, "u")])).unwrap_err();
        assert!(err.to_string().contains(env::PASSWORD), "{err}");
        let err = NatsAuth::from_lookup(lookup(&[(env::TOKEN, "t"), (env::CREDS_FILE, "/x")]))
            .unwrap_err();
        assert!(err.to_string().contains("more than one"), "{err}");
        assert_eq!(
            NatsAuth::from_lookup(lookup(&[])).unwrap(),
            NatsAuth::default()
        );
    }

    #[test]
    fn the_environment_overrides_the_configured_credential() {
        let config = NatsAuth {
            credential: NatsCredential::Token("from-config".into()),
            tls: NatsTls {
                ca_file: Some("/ca.pem".into()),
                ..NatsTls::default()
            },
            identity: Some("hermes-session".into()),
        };
        let env = NatsAuth {
            credential: NatsCredential::CredsFile("/h.creds".into()),
            ..NatsAuth::default()
        };
        let merged = config.clone().overridden_by(env);
        assert_eq!(
            merged.credential,
            NatsCredential::CredsFile("/h.creds".into())
        );
        assert_eq!(merged.tls.ca_file, Some("/ca.pem".into()));
        assert_eq!(merged.identity.as_deref(), Some("hermes-session"));
        assert_eq!(config.clone().overridden_by(NatsAuth::default()), config);
    }

    #[test]
    fn an_identity_names_the_reply_inboxes_and_must_be_one_token() {
        let auth = NatsAuth::from_lookup(lookup(&[(env::IDENTITY, "hermes-planner")])).unwrap();
        assert_eq!(auth.identity.as_deref(), Some("hermes-planner"));
        assert_eq!(
            auth.inbox_prefix().as_deref(),
            Some("_INBOX.hermes-planner")
        );
        assert_eq!(NatsAuth::default().inbox_prefix(), None);
        let err = NatsAuth::from_lookup(lookup(&[(env::IDENTITY, "a.b")])).unwrap_err();
        assert!(err.to_string().contains(env::IDENTITY), "{err}");
    }
}
