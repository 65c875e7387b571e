//! OAuth 2.1 for remote MCP servers, end to end against a local authorization server in front
//! of a real MCP server (tests/common/oauth_server.rs): `hermes mcp login` (the test plays the
//! browser), a turn that then calls the protected tool, refresh after the access token is
//! rejected, client credentials headless with scope step-up, and no token in the logs or the
//! audit.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use serde_json::json;

use crate::common::fake_http;
use crate::common::hermes_proc::{hermes, http_get};
use crate::common::oauth_server::{OAuthServer, ADMIN, READ};
use crate::common::scenario::*;

fn script() -> Scenario {
    Scenario::new("oauth")
        .rule(on_user(&["whoami"]).calls("remote__whoami", json!({})))
        .rule(after_tool("remote__whoami").says("The remote server answered."))
        .rule(on_user(&["admin"]).calls("remote__admin_report", json!({})))
        .rule(after_tool("remote__admin_report").says("The admin report is in."))
        .rule(on_user(&[]).says("ok"))
        .rule(
            on_user(&[])
                .role("extractor")
                .says("{\"memory_updates\": []}"),
        )
}

/// A config with replay models and the protected server as `remote`, `oauth` its table.
fn write_config(dir: &Path, server: &OAuthServer, oauth: &str) -> std::path::PathBuf {
    let scenario = dir.join("scenario.toml");
    std::fs::write(&scenario, script().to_toml()).unwrap();
    let models: String = ["planner", "extractor", "summariser"]
        .iter()
        .map(|role| {
            format!(
                "[models.{role}]\nprovider = \"replay\"\nscenario = {:?}\n",
                scenario.display().to_string()
            )
        })
        .collect();
    let config = format!(
        "{models}\n[engine]\ndata_dir = {:?}\n\n[[mcp.servers]]\nname = \"remote\"\nurl = {:?}\n\
         timeout_secs = 20\n{oauth}\n",
        dir.join("data").display().to_string(),
        server.mcp_url()
    );
    let path = dir.join("hermes.toml");
    std::fs::write(&path, config).unwrap();
    path
}

/// Everything a `hermes` run printed, stdout and stderr, at debug level.
struct Run {
    success: bool,
    stdout: String,
    stderr: String,
}

fn run(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = hermes()
        .env("HERMES_LOG", "debug")
        .env("RUST_LOG", "debug")
        .envs(env.iter().copied())
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("hermes runs");
    Run {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn send(config: &Path, text: &str, env: &[(&str, &str)]) -> Run {
    let sent = run(
        config,
        &[
            "send",
            "--session",
            "s1",
            "--user",
            "u1",
            "--text",
            text,
            "--timeout",
            "60",
        ],
        env,
    );
    assert!(
        sent.success,
        "hermes send failed:\n{}\n{}",
        sent.stdout, sent.stderr
    );
    sent
}

/// `hermes mcp login remote`, playing the browser: read the printed URL, GET it, follow the
/// redirect to the loopback listener. Returns the run (its stderr at debug level).
fn login(config: &Path, extra: &[&str]) -> Run {
    login_with(config, extra, &[])
}

/// [`login`] with environment variables set for `hermes mcp login`.
fn login_with(config: &Path, extra: &[&str], env: &[(&str, &str)]) -> Run {
    let mut child = hermes()
        .envs(env.iter().copied())
        .env("HERMES_LOG", "debug")
        .env("RUST_LOG", "debug")
        .arg("--config")
        .arg(config)
        .args(["mcp", "login", "remote"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hermes mcp login starts");
    let mut stderr = child.stderr.take().unwrap();
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    let url = loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "login printed no URL:\n{printed}\n{}",
            stderr_reader.join().unwrap()
        );
        printed.push_str(&line);
        if line.trim_start().starts_with("http") {
            break line.trim().to_owned();
        }
    };
    let (status, head, body) = browse(&url);
    assert_eq!(status, 302, "{head}\n{body}");
    let redirect = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("location: ")
                .or_else(|| l.strip_prefix("Location: "))
        })
        .expect("the authorization server redirects")
        .trim()
        .to_owned();
    assert!(redirect.starts_with("http://127.0.0.1:"), "{redirect}");
    let (landed, _, page) = browse(&redirect);
    assert_eq!(landed, 200, "{page}");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    printed.push_str(&rest);
    let status = child.wait().unwrap();
    Run {
        success: status.success(),
        stdout: printed,
        stderr: stderr_reader.join().unwrap(),
    }
}

/// The browser's GET of `url` (no redirects followed): (status, head, body).
fn browse(url: &str) -> (u16, String, String) {
    let parsed = url::Url::parse(url).unwrap();
    let addr = format!("{}:{}", parsed.host_str().unwrap(), parsed.port().unwrap());
    let target = match parsed.query() {
        Some(query) => format!("{}?{query}", parsed.path()),
        None => parsed.path().to_owned(),
    };
    http_get(&addr, &target)
}

/// No issued token or code appears in `text`.
fn assert_no_secret(text: &str, server: &OAuthServer, what: &str) {
    for secret in server.issued() {
        assert!(
            !text.contains(&secret),
            "{what} contains the issued `{secret}`"
        );
    }
}

#[test]
fn login_then_a_turn_calls_the_protected_tool_refreshes_and_leaks_no_token() {
    let io = fake_http::runtime();
    let server = io.block_on(OAuthServer::start());
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &server,
        &format!("[mcp.servers.oauth]\nscopes = [{READ:?}]\n"),
    );
    let mut logs = String::new();

    let before = run(&config, &["mcp", "status"], &[]);
    assert!(!before.success, "{}", before.stdout);
    assert!(
        before.stdout.contains("needs `hermes mcp login`"),
        "{}",
        before.stdout
    );
    assert!(
        before.stdout.contains("hermes mcp login remote"),
        "{}",
        before.stdout
    );

    let logged_in = login(&config, &[]);
    assert!(
        logged_in.success,
        "{}\n{}",
        logged_in.stdout, logged_in.stderr
    );
    assert!(
        logged_in.stdout.contains("Logged in to `remote`"),
        "{}",
        logged_in.stdout
    );
    logs.push_str(&logged_in.stdout);
    logs.push_str(&logged_in.stderr);
    let token_file = dir.path().join("data/mcp-oauth/remote.json");
    let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the token file is owner-only");
    assert!(
        server
            .grants()
            .iter()
            .any(|g| g.starts_with("authorization_code")),
        "{:?}",
        server.grants()
    );

    let answered = send(&config, "whoami, remote?", &[]);
    assert!(
        answered.stdout.contains("The remote server answered."),
        "{}",
        answered.stdout
    );
    assert_eq!(server.calls().last().unwrap().0, "whoami");
    logs.push_str(&answered.stdout);
    logs.push_str(&answered.stderr);

    // The server no longer accepts the access token: Hermes refreshes and calls again.
    let saved_before = std::fs::read_to_string(&token_file).unwrap();
    server.expire_access_tokens();
    let calls_before = server.calls().len();
    let refreshed = send(&config, "whoami again?", &[]);
    assert!(
        refreshed.stdout.contains("The remote server answered."),
        "{}",
        refreshed.stdout
    );
    assert_eq!(
        server.calls().len(),
        calls_before + 1,
        "the tool was called again"
    );
    assert!(
        server
            .grants()
            .iter()
            .any(|g| g.starts_with("refresh_token")),
        "{:?}",
        server.grants()
    );
    assert_ne!(
        std::fs::read_to_string(&token_file).unwrap(),
        saved_before,
        "the rotated tokens are saved"
    );
    logs.push_str(&refreshed.stdout);
    logs.push_str(&refreshed.stderr);

    // A wider scope cannot be granted by Hermes itself after a login: the user is told how.
    let narrow = send(&config, "admin report please", &[]);
    logs.push_str(&narrow.stdout);
    logs.push_str(&narrow.stderr);
    assert!(!server
        .calls()
        .iter()
        .any(|(tool, _)| tool == "admin_report"));

    let status = run(&config, &["mcp", "status"], &[]);
    assert!(status.success, "{}\n{}", status.stdout, status.stderr);
    assert!(
        status.stdout.contains("oauth logged in"),
        "{}",
        status.stdout
    );
    logs.push_str(&status.stdout);
    logs.push_str(&status.stderr);

    let audit = run(&config, &["mcp", "audit", "--json", "--limit", "50"], &[]);
    assert!(audit.success, "{}", audit.stderr);
    assert!(audit.stdout.contains("whoami"), "{}", audit.stdout);
    assert!(
        audit.stdout.contains("hermes mcp login remote --scope"),
        "the refused call names the fix: {}",
        audit.stdout
    );
    assert_no_secret(&audit.stdout, &server, "the audit");
    assert!(logs.contains("DEBUG"), "the runs logged at debug level");
    assert_no_secret(&logs, &server, "the logs");

    // Logging in again with the wider scope makes the admin tool reachable.
    let wider = login(&config, &["--scope", ADMIN]);
    assert!(wider.success, "{}\n{}", wider.stdout, wider.stderr);
    let admin = send(&config, "admin report please", &[]);
    assert!(
        admin.stdout.contains("The admin report is in."),
        "{}",
        admin.stdout
    );
    assert!(server
        .calls()
        .iter()
        .any(|(tool, _)| tool == "admin_report"));
    drop(io);
}

#[test]
fn client_credentials_reach_the_tool_headless_and_step_up_on_insufficient_scope() {
    let io = fake_http::runtime();
    let server = io.block_on(OAuthServer::start());
    server.add_client("hermes-ci", Some("ci-secret-value"));
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &server,
        &format!(
            "[mcp.servers.oauth]\nclient_id = \"hermes-ci\"\n\
             client_secret_env = \"REMOTE_MCP_SECRET\"\nscopes = [{READ:?}]\n"
        ),
    );
    let env = [("REMOTE_MCP_SECRET", "ci-secret-value")];

    let answered = send(&config, "whoami, remote?", &env);
    assert!(
        answered.stdout.contains("The remote server answered."),
        "{}",
        answered.stdout
    );
    assert_eq!(server.calls()[0], ("whoami".to_owned(), READ.to_owned()));

    let admin = send(&config, "admin report please", &env);
    assert!(
        admin.stdout.contains("The admin report is in."),
        "{}",
        admin.stdout
    );
    let wider = format!("{READ} {ADMIN}");
    assert!(
        server
            .calls()
            .contains(&("admin_report".to_owned(), wider.clone())),
        "{:?}",
        server.calls()
    );
    assert!(
        server
            .grants()
            .contains(&format!("client_credentials ({wider})")),
        "{:?}",
        server.grants()
    );
    assert!(
        !dir.path().join("data/mcp-oauth/remote.json").exists(),
        "client credentials tokens are not written to disk"
    );

    let status = run(&config, &["mcp", "status"], &env);
    assert!(
        status.stdout.contains("oauth client credentials"),
        "{}",
        status.stdout
    );
    let audit = run(&config, &["mcp", "audit", "--json", "--limit", "50"], &env);
    let logs = [&answered, &admin, &status, &audit]
        .iter()
        .map(|r| format!("{}{}", r.stdout, r.stderr))
        .collect::<String>();
    assert!(
        !logs.contains("ci-secret-value"),
        "the client secret leaked"
    );
    assert_no_secret(&logs, &server, "the logs and audit");

    let missing = run(&config, &["mcp", "status"], &[]);
    assert!(
        missing.stdout.contains("REMOTE_MCP_SECRET") && missing.stdout.contains("not set"),
        "{}",
        missing.stdout
    );
    drop(io);
}

#[test]
fn an_unconfigured_server_names_the_login_and_a_registered_client_refreshes_before_expiry() {
    let io = fake_http::runtime();
    let server = io.block_on(OAuthServer::start());
    server.add_client("hermes-desktop", None);
    let dir = tempfile::tempdir().unwrap();

    // No [mcp.servers.oauth]: the server's 401 is reported with the command that fixes it.
    let config = write_config(dir.path(), &server, "");
    let status = run(&config, &["mcp", "status"], &[]);
    assert!(!status.success, "{}", status.stdout);
    assert!(
        status
            .stdout
            .contains("requires an OAuth login: run `hermes mcp login remote`"),
        "{}",
        status.stdout
    );

    // A client registered ahead (no dynamic registration), whose access tokens live 10 s:
    // less than the renewal margin, so each use refreshes first instead of meeting a 401.
    let config = write_config(
        dir.path(),
        &server,
        "[mcp.servers.oauth]\nclient_id = \"hermes-desktop\"\n",
    );
    server.set_expires_in(10);
    let logged_in = login(&config, &[]);
    assert!(
        logged_in.success,
        "{}\n{}",
        logged_in.stdout, logged_in.stderr
    );
    let saved: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("data/mcp-oauth/remote.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(saved["client_id"], "hermes-desktop");
    assert_eq!(
        saved["scope"], READ,
        "the scope the server's challenge named"
    );
    let rejected_before = server.rejected();
    let answered = send(&config, "whoami, remote?", &[]);
    assert!(
        answered.stdout.contains("The remote server answered."),
        "{}",
        answered.stdout
    );
    assert!(
        server
            .grants()
            .iter()
            .any(|g| g.starts_with("refresh_token")),
        "{:?}",
        server.grants()
    );
    assert_eq!(
        server.rejected(),
        rejected_before,
        "refreshed before the token expired"
    );
    drop(io);
}

#[test]
fn a_confidential_client_logs_in_with_its_secret_and_refreshes_with_it() {
    let io = fake_http::runtime();
    let server = io.block_on(OAuthServer::start());
    let secret = "web-secret-value-7f3a";
    server.add_client("hermes-web", Some(secret));
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &server,
        "[mcp.servers.oauth]\nclient_id = \"hermes-web\"\n\
         client_secret_env = \"REMOTE_MCP_SECRET\"\ngrant = \"login\"\n",
    );
    let env = [("REMOTE_MCP_SECRET", secret)];

    // Without the secret in the environment the login stops before the browser, naming it.
    let refused = run(&config, &["mcp", "login", "remote"], &[]);
    assert!(!refused.success, "{}", refused.stdout);
    assert!(
        refused.stderr.contains("REMOTE_MCP_SECRET"),
        "names the variable to set: {}",
        refused.stderr
    );

    server.set_expires_in(10);
    let logged_in = login_with(&config, &[], &env);
    assert!(
        logged_in.success,
        "{}\n{}",
        logged_in.stdout, logged_in.stderr
    );
    let answered = send(&config, "whoami, remote?", &env);
    assert!(
        answered.stdout.contains("The remote server answered."),
        "{}",
        answered.stdout
    );
    let grants = server.grants();
    assert!(
        grants[0].starts_with("authorization_code")
            && grants.iter().any(|g| g.starts_with("refresh_token")),
        "a login, then a refresh authenticated with the secret: {grants:?}"
    );
    for (run, what) in [(&logged_in, "the login"), (&answered, "the turn")] {
        for text in [&run.stdout, &run.stderr] {
            assert!(!text.contains(secret), "{what} printed the client secret");
            assert_no_secret(text, &server, what);
        }
    }
    drop(io);
}
