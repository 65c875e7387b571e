//! Authenticated NATS: against a real nats-server that requires a credential, the bus
//! connects with a user and password or a token (from `[bus.auth]` or the environment), the
//! whole engine runs on it, and a wrong or missing credential is refused with an error that
//! names it.

use std::sync::Arc;
use std::time::Duration;

use hermes::bus::auth::{NatsAuth, NatsCredential};
use hermes::bus::cluster::ClusterOptions;
use hermes::bus::{self, BusError};
use hermes::client::SessionClient;
use hermes::config::bus_auth::BusAuthConfig;

use crate::common::engine::{test_config, with_engine};
use crate::common::nats_server::NatsServer;
use crate::common::scenario::*;

const T: Duration = Duration::from_secs(20);

fn connect_error(url: &str, credential: NatsCredential) -> String {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let auth = NatsAuth {
        credential,
        ..NatsAuth::default()
    };
    rt.block_on(async {
        match bus::connect_with(url, None, ClusterOptions::default(), &auth).await {
            Err(BusError::Connect { reason, .. }) => reason,
            Err(other) => panic!("expected a connect error, got {other}"),
            Ok(_) => panic!("connected with a credential the server should refuse"),
        }
    })
}

#[test]
fn a_refused_or_missing_credential_is_named_in_the_connect_error() {
    let server = NatsServer::start_with(&["--user", "hermes", "--pass", "right-password"]);
    let wrong = NatsCredential::UserPassword {
        user: "hermes".into(),
        password: "wrong-password".into(),
    };
    let reason = connect_error(&server.url(), wrong);
    assert!(reason.contains("refused user `hermes`"), "{reason}");
    assert!(
        !reason.contains("wrong-password"),
        "the secret is never printed: {reason}"
    );
    let reason = connect_error(&server.url(), NatsCredential::None);
    assert!(reason.contains("requires a credential"), "{reason}");
    assert!(
        reason.contains("HERMES_NATS_TOKEN"),
        "the fix is named: {reason}"
    );
    let tokens = NatsServer::start_with(&["--auth", "the-token"]);
    let reason = connect_error(&tokens.url(), NatsCredential::Token("not-it".into()));
    assert!(reason.contains("refused the token"), "{reason}");
}

#[test]
fn the_engine_runs_a_turn_on_a_server_that_requires_a_password() {
    let server = NatsServer::start_with(&["--user", "hermes", "--pass", "s3cret-pass"]);
    // A variable of this test alone: the password is named in the config, never written there.
    std::env::set_var("HERMES_TEST_AUTH_PASSWORD", "s3cret-pass");
    let dir = tempfile::tempdir().unwrap();
    let scenario = Scenario::new("auth").rule(on_user(&[]).says("authenticated"));
    let mut config = test_config(dir.path(), &scenario);
    config.bus.url = server.url();
    config.bus.auth = BusAuthConfig {
        user: Some("hermes".into()),
        password_env: Some("HERMES_TEST_AUTH_PASSWORD".into()),
        ..BusAuthConfig::default()
    };
    with_engine(config, |engine| async move {
        let bus = Arc::clone(&engine.bus);
        let mut client = SessionClient::open(bus, "assistant", "auth1", "u")
            .await
            .unwrap();
        let trace = client.turn("hello", T, |_| {}).await.unwrap();
        assert_eq!(trace.answer.as_deref(), Some("authenticated"));
    });
}
