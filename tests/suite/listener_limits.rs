//! Hermes' listeners under a shortage of file descriptors: a `hermes serve --http` child whose
//! `RLIMIT_NOFILE` is low gets more connections than it has descriptors. Its accept loop must
//! wait (1 s doubling) instead of spinning, must not die, and must serve again once the
//! connections close.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::hermes_proc::{free_port, hermes, http_get};

/// The child's descriptor limit: enough to start, few enough to run out quickly.
const NOFILE: u64 = 256;
/// How long the child's CPU time is watched while it is out of descriptors.
const WINDOW: Duration = Duration::from_secs(4);

/// `hermes serve --bus embedded --http ADDR` with `RLIMIT_NOFILE` at [`NOFILE`]; its stderr
/// goes to `log`.
fn serve_with_few_descriptors(dir: &std::path::Path, addr: &str, log: &std::path::Path) -> Child {
    let config = dir.join("hermes.toml");
    std::fs::write(
        &config,
        format!(
            "[engine]\ndata_dir = {:?}\n[http]\nmax_connections = 100000\n",
            dir.join("data").display().to_string()
        ),
    )
    .unwrap();
    let mut cmd = hermes();
    cmd.args(["--config", config.to_str().unwrap(), "serve"])
        .args(["--bus", "embedded", "--http", addr])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap());
    // SAFETY: setrlimit and prctl are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: NOFILE,
                rlim_max: NOFILE,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("hermes serve starts");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.trim() == "ready" {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(Duration::from_secs(120)).is_err() {
        let _ = child.kill();
        panic!(
            "hermes serve did not become ready with {NOFILE} descriptors:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
    child
}

/// The child's user + system CPU time so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (in parentheses, may hold spaces): utime is the 12th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / per_second)
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| dir.count())
        .unwrap_or(0)
}

fn accept_failures(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .matches("could not accept a connection")
        .count()
}

#[test]
fn listener_survives_descriptor_exhaustion_without_spinning() {
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let log = dir.path().join("serve.log");
    let mut child = serve_with_few_descriptors(dir.path(), &addr, &log);
    let pid = child.id();
    let (status, _, _) = http_get(&addr, "/metrics");
    assert_eq!(status, 200, "serves before the shortage");

    // More connections than the child has descriptors: those it cannot accept wait in the
    // kernel's backlog, and its accept fails with EMFILE.
    let socket: SocketAddr = addr.parse().unwrap();
    let mut clients = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while accept_failures(&log) == 0 {
        assert!(
            Instant::now() < deadline,
            "the child never ran out of descriptors ({} open, {} connections):\n{}",
            open_descriptors(pid),
            clients.len(),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        for _ in 0..32 {
            if let Ok(stream) = TcpStream::connect_timeout(&socket, Duration::from_secs(1)) {
                clients.push(stream);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let exhausted_with = open_descriptors(pid);

    let failures_before = accept_failures(&log);
    let cpu_before = cpu_time(pid);
    std::thread::sleep(WINDOW);
    let used = cpu_time(pid) - cpu_before;
    let failures = accept_failures(&log) - failures_before;
    eprintln!(
        "out of descriptors ({exhausted_with} open of {NOFILE}, {} connections): \
         {used:?} of CPU in {WINDOW:?}, {failures} failed accepts logged",
        clients.len()
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "the listener's process died when out of descriptors:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // A loop that retries at once burns a whole core and logs thousands of failures; one
    // that backs off (1 s, 2 s, 4 s…) sleeps through the window.
    assert!(
        used < WINDOW / 5,
        "the listener spun while out of descriptors: {used:?} of CPU in {WINDOW:?}"
    );
    assert!(
        failures <= 5,
        "the listener retried {failures} times in {WINDOW:?} instead of backing off"
    );

    // Descriptors free up: it serves again (after its current pause, at most 64 s).
    drop(clients);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let served = TcpStream::connect_timeout(&socket, Duration::from_secs(1))
            .ok()
            .and_then(|mut stream| {
                use std::io::Write;
                stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
                write!(
                    stream,
                    "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
                )
                .ok()?;
                let mut raw = String::new();
                stream.read_to_string(&mut raw).ok()?;
                Some(raw.starts_with("HTTP/1.1 200"))
            })
            .unwrap_or(false);
        if served {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the listener did not serve again once descriptors were free:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(child.try_wait().unwrap().is_none(), "still running");
    let _ = child.kill();
    let _ = child.wait();
}
