//! [`NatsAuth`] as async-nats connect options, and connect errors that say which credential
//! or TLS setting failed.

use async_nats::{ConnectError, ConnectErrorKind, ConnectOptions};

use crate::bus::auth::{AuthError, NatsAuth, NatsCredential};

/// `options` with `auth`'s credential and TLS settings.
pub async fn apply(options: ConnectOptions, auth: &NatsAuth) -> Result<ConnectOptions, AuthError> {
    let mut options = match &auth.credential {
        NatsCredential::None => options,
        NatsCredential::UserPassword { user, password } => {
            options.user_and_password(user.clone(), password.clone())
        }
        NatsCredential::Token(token) => options.token(token.clone()),
        NatsCredential::NKey { seed, .. } => options.nkey(seed.clone()),
        NatsCredential::CredsFile(path) => {
            options
                .credentials_file(path)
                .await
                .map_err(|error| AuthError::CredsFile {
                    path: path.clone(),
                    error,
                })?
        }
    };
    if let Some(prefix) = auth.inbox_prefix() {
        options = options.custom_inbox_prefix(prefix);
    }
    if let Some(ca) = &auth.tls.ca_file {
        options = options.add_root_certificates(ca.clone());
    }
    match (&auth.tls.cert_file, &auth.tls.key_file) {
        (Some(cert), Some(key)) => {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        (None, None) => {}
        _ => return Err(AuthError::HalfClientCertificate),
    }
    if auth.tls.is_set() {
        install_crypto_provider();
        options = options.require_tls(true);
    }
    Ok(options)
}

/// rustls needs one process-wide crypto provider, and this build links two (ring for
/// async-nats, aws-lc-rs for the HTTP client), so none is chosen by default and the first TLS
/// handshake would panic: choose ring before the first. Losing a race to another installer
/// is fine.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Whether a connect failed in the TLS handshake (the client reports an untrusted server
/// certificate as an I/O error): retrying will not help.
pub fn is_tls_failure(err: &ConnectError, auth: &NatsAuth) -> bool {
    let text = err.to_string().to_ascii_lowercase();
    err.kind() == ConnectErrorKind::Tls
        || (auth.tls.is_set() && (text.contains("certificate") || text.contains("tls")))
}

/// Why a connect failed, naming the credential or TLS setting when that is the cause.
pub fn explain(err: &ConnectError, auth: &NatsAuth) -> String {
    if is_tls_failure(err, auth) {
        return format!(
            "TLS with nats-server failed ({err}); check {}",
            tls_settings(auth)
        );
    }
    match err.kind() {
        ConnectErrorKind::AuthorizationViolation => match auth.credential {
            NatsCredential::None => format!(
                "nats-server requires a credential and none was given ({err}); set [bus.auth] in \
                 the config or HERMES_NATS_USER/HERMES_NATS_PASSWORD, HERMES_NATS_TOKEN, \
                 HERMES_NATS_NKEY_SEED_FILE or HERMES_NATS_CREDS_FILE"
            ),
            ref credential => format!(
                "nats-server refused {} ({err}); check that credential against the server's \
                 accounts",
                credential.describe()
            ),
        },
        _ => err.to_string(),
    }
}

fn tls_settings(auth: &NatsAuth) -> String {
    let mut parts = Vec::new();
    if let Some(ca) = &auth.tls.ca_file {
        parts.push(format!("the CA file {}", ca.display()));
    }
    if let Some(cert) = &auth.tls.cert_file {
        parts.push(format!("the client certificate {}", cert.display()));
    }
    if parts.is_empty() {
        "that the server speaks TLS and its certificate is trusted (tls_ca_file)".into()
    } else {
        parts.join(" and ")
    }
}
