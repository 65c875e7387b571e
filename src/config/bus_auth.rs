//! `[bus.auth]`: the credential and TLS settings Hermes connects to nats-server with (see
//! config/default.toml and `crate::bus::auth`). Secrets are named by environment variables,
//! not written in the file; `HERMES_NATS_*` variables override what the file sets.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::bus::auth::{check_identity, read_seed, AuthError, NatsAuth, NatsCredential, NatsTls};

/// `[bus.auth]` as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BusAuthConfig {
    /// User name, with its password in the variable `password_env`.
    pub user: Option<String>,
    pub password_env: Option<String>,
    /// The variable holding a token.
    pub token_env: Option<String>,
    /// A file holding an NKey seed (`SU…`).
    pub nkey_seed_file: Option<PathBuf>,
    /// A `.creds` file (user JWT and NKey seed).
    pub creds_file: Option<PathBuf>,
    pub tls_ca_file: Option<PathBuf>,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    pub tls_required: bool,
    /// This process's name on the bus (`HERMES_NATS_IDENTITY` overrides it): its reply
    /// inboxes are `_INBOX.<identity>.>` and the messages it sends to sessions go to
    /// `hermes.in.<agent>.<session>.<identity>` (see config/nats/hermes.conf).
    pub identity: Option<String>,
}

fn secret(what: &'static str, variable: &str) -> Result<String, AuthError> {
    std::env::var(variable)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| AuthError::SecretUnset {
            what,
            variable: variable.to_string(),
        })
}

impl BusAuthConfig {
    /// The credential and TLS settings to connect with: this section, then the environment's
    /// `HERMES_NATS_*` over it. More than one credential in the section is an error naming them.
    pub fn resolve(&self) -> Result<NatsAuth, AuthError> {
        let mut found = Vec::new();
        if let Some(user) = &self.user {
            let variable = self
                .password_env
                .as_deref()
                .unwrap_or(crate::bus::auth::env::PASSWORD);
            let password = secret("password_env", variable)?;
            found.push(NatsCredential::UserPassword {
                user: user.clone(),
                password,
            });
        }
        if let Some(variable) = &self.token_env {
            found.push(NatsCredential::Token(secret("token_env", variable)?));
        }
        if let Some(file) = &self.nkey_seed_file {
            found.push(read_seed(file.clone())?);
        }
        if let Some(file) = &self.creds_file {
            found.push(NatsCredential::CredsFile(file.clone()));
        }
        if found.len() > 1 {
            return Err(AuthError::SeveralCredentials {
                place: "[bus.auth]",
                found: found
                    .iter()
                    .map(NatsCredential::describe)
                    .collect::<Vec<_>>()
                    .join(", "),
                keep: "user, token_env, nkey_seed_file, creds_file",
            });
        }
        let configured = NatsAuth {
            credential: found.pop().unwrap_or_default(),
            tls: NatsTls {
                ca_file: self.tls_ca_file.clone(),
                cert_file: self.tls_cert_file.clone(),
                key_file: self.tls_key_file.clone(),
                required: self.tls_required,
            },
            identity: self
                .identity
                .clone()
                .map(|name| check_identity("[bus.auth] identity", name))
                .transpose()?,
        };
        Ok(configured.overridden_by(NatsAuth::from_env()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_credentials_in_the_section_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let seed = dir.path().join("h.nk");
        std::fs::write(&seed, "SUAEXAMPLE\n").unwrap();
        let both = BusAuthConfig {
            nkey_seed_file: Some(seed.clone()),
            creds_file: Some("/h.creds".into()),
            ..BusAuthConfig::default()
        };
        assert!(both
            .resolve()
            .unwrap_err()
            .to_string()
            .contains("more than one"));
        let one = BusAuthConfig {
            nkey_seed_file: Some(seed),
            ..BusAuthConfig::default()
        };
        match one.resolve().unwrap().credential {
            NatsCredential::NKey { seed, .. } => assert_eq!(seed, "SUAEXAMPLE"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_password_variable_that_is_not_set_is_named() {
        let config = BusAuthConfig {
            user: Some("hermes".into()),
            password_env: Some("HERMES_TEST_UNSET_PASSWORD_VAR".into()),
            ..BusAuthConfig::default()
        };
        let err = config.resolve().unwrap_err();
        assert!(
            err.to_string().contains("HERMES_TEST_UNSET_PASSWORD_VAR"),
            "{err}"
        );
    }
}
