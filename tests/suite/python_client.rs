//! The Python client (`clients/python`, `hermes_client`): its pytest suite against a live
//! `hermes serve` on a real nats-server, every envelope checked against `schema/`.

use std::process::Command;

use crate::common::nats_server::find_binary as nats_server_binary;
use crate::common::python_worker::find_python;

#[test]
fn the_python_clients_own_tests_pass_against_a_live_hermes_on_nats() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = find_python();
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(repo.join("clients/python/tests"))
        .env("HERMES_BIN", env!("CARGO_BIN_EXE_hermes"))
        .env("HERMES_NATS_SERVER", nats_server_binary())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(repo.join("clients/python"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let text = format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "pytest clients/python failed (is the client installed? bash scripts/setup-test-deps.sh):\n{text}"
    );
    assert!(text.contains(" passed"), "{text}");
    assert!(!text.contains("skipped"), "no test may skip: {text}");
}
