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
    let rt = crate::common::runtime::multi_thread(1);
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

#[test]
fn the_bus_connects_with_an_nkey_seed_file_and_names_a_refused_one() {
    let allowed = nkeys::KeyPair::new_user();
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("nkeys.conf");
    std::fs::write(
        &conf,
        format!(
            "authorization {{ users = [ {{ nkey: {} }} ] }}\n",
            allowed.public_key()
        ),
    )
    .unwrap();
    let server = NatsServer::start_with(&["-c", conf.to_str().unwrap()]);
    let seed_file = |name: &str, pair: &nkeys::KeyPair| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("{}\n", pair.seed().unwrap())).unwrap();
        path
    };
    let rt = crate::common::runtime::multi_thread(1);
    let good = BusAuthConfig {
        nkey_seed_file: Some(seed_file("hermes.nk", &allowed)),
        ..BusAuthConfig::default()
    }
    .resolve()
    .unwrap();
    rt.block_on(async {
        let bus = bus::connect_with(&server.url(), None, ClusterOptions::default(), &good)
            .await
            .expect("the allowed NKey connects");
        bus.flush().await.unwrap();
    });
    let stranger = seed_file("stranger.nk", &nkeys::KeyPair::new_user());
    let NatsCredential::NKey { seed, file } = hermes::bus::auth::read_seed(stranger).unwrap()
    else {
        panic!("a seed file reads as an NKey");
    };
    let reason = connect_error(&server.url(), NatsCredential::NKey { seed, file });
    assert!(reason.contains("refused the NKey seed in"), "{reason}");
    assert!(reason.contains("stranger.nk"), "{reason}");
}

/// A CA, and server and client certificates it signed, as PEM files in `dir`.
fn certificates(dir: &std::path::Path, name: &str) -> [std::path::PathBuf; 5] {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf = |names: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server, server_key) = leaf(vec!["127.0.0.1".into(), "localhost".into()]);
    let (client, client_key) = leaf(vec!["hermes".into()]);
    let files = [
        ("ca.pem", ca.pem()),
        ("server.pem", server),
        ("server-key.pem", server_key),
        ("client.pem", client),
        ("client-key.pem", client_key),
    ];
    files.map(|(file, pem)| {
        let path = dir.join(format!("{name}-{file}"));
        std::fs::write(&path, pem).unwrap();
        path
    })
}

#[test]
fn the_bus_connects_over_tls_with_a_client_certificate_and_names_an_untrusted_server() {
    let dir = tempfile::tempdir().unwrap();
    let [ca, server_cert, server_key, client_cert, client_key] = certificates(dir.path(), "real");
    let path = |p: &std::path::PathBuf| p.to_str().unwrap().to_string();
    let server = NatsServer::start_with(&[
        "--tls",
        "--tlscert",
        &path(&server_cert),
        "--tlskey",
        &path(&server_key),
        "--tlsverify",
        "--tlscacert",
        &path(&ca),
    ]);
    let rt = crate::common::runtime::multi_thread(1);
    let tls = BusAuthConfig {
        tls_ca_file: Some(ca),
        tls_cert_file: Some(client_cert.clone()),
        tls_key_file: Some(client_key.clone()),
        ..BusAuthConfig::default()
    }
    .resolve()
    .unwrap();
    rt.block_on(async {
        let bus = bus::connect_with(&server.url(), None, ClusterOptions::default(), &tls)
            .await
            .expect("TLS with the client certificate connects");
        bus.flush().await.unwrap();
    });
    // A CA that did not sign the server's certificate: the server is not trusted.
    let [other_ca, ..] = certificates(dir.path(), "other");
    let untrusting = BusAuthConfig {
        tls_ca_file: Some(other_ca),
        tls_cert_file: Some(client_cert),
        tls_key_file: Some(client_key),
        ..BusAuthConfig::default()
    }
    .resolve()
    .unwrap();
    let reason = rt.block_on(async {
        match bus::connect_with(&server.url(), None, ClusterOptions::default(), &untrusting).await {
            Err(BusError::Connect { reason, .. }) => reason,
            Err(other) => panic!("expected a connect error, got {other}"),
            Ok(_) => panic!("a server signed by another CA was trusted"),
        }
    });
    assert!(reason.contains("TLS with nats-server failed"), "{reason}");
    assert!(
        reason.contains("other-ca.pem"),
        "the CA file is named: {reason}"
    );
}
