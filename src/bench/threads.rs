//! Where a process's CPU goes, by kind of thread: the actors' arbiters, the NATS I/O runtime,
//! the flusher, the write-behind thread (the session cache on NATS), the main thread (the
//! bench's client runs there), sled's own threads. Read
//! from `/proc/self/task` (Linux; elsewhere nothing is reported).
//!
//! Each thread's time on the CPU comes from its `schedstat` (nanoseconds), the part of it in
//! the kernel from its `stat` (clock ticks, 10 ms each: good to a few µs per turn over a
//! thousand turns), and its voluntary context switches (times it went to sleep waiting to be
//! woken) from its `status`. A thread that exits between two readings drops out, so the
//! kinds can sum to less than the process's CPU time (`cpu_us_per_turn` stays the total).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

/// What one kind of thread has spent so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    pub on_cpu: Duration,
    pub in_kernel: Duration,
    pub sleeps: u64,
}

/// Every kind of thread of this process and what it has spent so far.
pub type ByKind = BTreeMap<&'static str, Spent>;

/// The kind of thread a name (`comm`, at most 15 bytes) says it is.
pub fn kind_of(name: &str) -> &'static str {
    match name {
        n if n.starts_with("actix") => "actors",
        "hermes-io" => "io",
        "hermes-flush" => "flush",
        "hermes-cache" => "cache",
        "hermes" => "main",
        n if n.starts_with("sled") || n == "log flusher" => "sled",
        _ => "other",
    }
}

/// What this process's threads have spent so far, by kind; `None` without procfs.
pub fn now() -> Option<ByKind> {
    let tick = clock_tick()?;
    let mut kinds = ByKind::new();
    let main = std::process::id().to_string();
    for entry in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = entry.path();
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).ok();
        let (Some(name), Some(schedstat), Some(stat), Some(status)) = (
            read("comm"),
            read("schedstat"),
            read("stat"),
            read("status"),
        ) else {
            continue; // exited meanwhile
        };
        // The main thread is named after the binary, which may have been renamed.
        let kind = if entry.file_name().to_str() == Some(main.as_str()) {
            "main"
        } else {
            kind_of(name.trim())
        };
        let spent = kinds.entry(kind).or_default();
        spent.on_cpu += Duration::from_nanos(on_cpu_ns(&schedstat).unwrap_or(0));
        spent.in_kernel += tick * kernel_ticks(&stat).unwrap_or(0);
        spent.sleeps += voluntary_switches(&status).unwrap_or(0);
    }
    Some(kinds)
}

/// `{kind: {cpu_us, kernel_us, sleeps}}` per turn between two readings.
pub fn per_turn(start: &ByKind, end: &ByKind, turns: f64) -> Value {
    let rows: serde_json::Map<String, Value> = end
        .iter()
        .map(|(kind, b)| {
            let a = start.get(kind).copied().unwrap_or_default();
            let us = |d: Duration| (d.as_secs_f64() * 1e6 / turns * 10.0).round() / 10.0;
            let row = json!({
                "cpu_us": us(b.on_cpu.saturating_sub(a.on_cpu)),
                "kernel_us": us(b.in_kernel.saturating_sub(a.in_kernel)),
                "sleeps": ((b.sleeps.saturating_sub(a.sleeps)) as f64 / turns * 100.0).round() / 100.0,
            });
            ((*kind).to_owned(), row)
        })
        .collect();
    Value::Object(rows)
}

/// Clock ticks per second, the unit of `stat`'s times.
pub(super) fn ticks_per_sec() -> Option<u64> {
    // SAFETY: sysconf reads a constant.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|t| *t > 0)
}

fn clock_tick() -> Option<Duration> {
    let per_sec = u32::try_from(ticks_per_sec()?).ok()?;
    Some(Duration::from_secs(1) / per_sec)
}

/// The first field of `schedstat`: nanoseconds on the CPU.
fn on_cpu_ns(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().next()?.parse().ok()
}

/// `utime` and `stime` of a `stat` (a process's or a thread's), in clock ticks: the 12th
/// and 13th fields after the parenthesised name.
pub(super) fn stat_ticks(stat: &str) -> Option<(u64, u64)> {
    let rest = stat.rsplit_once(") ")?.1;
    let mut fields = rest.split_whitespace().skip(11);
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

/// `stime` of `stat`.
fn kernel_ticks(stat: &str) -> Option<u32> {
    u32::try_from(stat_ticks(stat)?.1).ok()
}

fn voluntary_switches(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_sorted_into_kinds_by_name() {
        assert_eq!(kind_of("actix-rt|system"), "actors");
        assert_eq!(kind_of("hermes-io"), "io");
        assert_eq!(kind_of("hermes-flush"), "flush");
        assert_eq!(kind_of("hermes-cache"), "cache");
        assert_eq!(kind_of("hermes"), "main");
        assert_eq!(kind_of("sled-io-3"), "sled");
        assert_eq!(kind_of("tokio-rt-worker"), "other");
    }

    #[test]
    fn procfs_fields_are_read_where_the_kernel_puts_them() {
        let stat = "21300 (actix-rt|system) S 1 2 3 0 -1 4194368 9 0 0 0 260 140 0 0 20 0 14";
        assert_eq!(kernel_ticks(stat), Some(140));
        assert_eq!(stat_ticks(stat), Some((260, 140)));
        assert_eq!(on_cpu_ns("663539169 178631552 1657\n"), Some(663_539_169));
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t1354\nnonvoluntary_ctxt_switches:\t303\n";
        assert_eq!(voluntary_switches(status), Some(1354));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_busy_thread_shows_in_its_kind() {
        fn own_cpu() -> Duration {
            // SAFETY: clock_gettime only writes into the struct we pass.
            let mut t: libc::timespec = unsafe { std::mem::zeroed() };
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
            Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
        }
        let before = now().expect("procfs");
        let (spun, done) = std::sync::mpsc::channel();
        let (exit, exited) = std::sync::mpsc::channel::<()>();
        let spinner = std::thread::Builder::new()
            .name("hermes-flush".into())
            .spawn(move || {
                let mut n = 0_u64;
                while own_cpu() < Duration::from_millis(30) {
                    n = std::hint::black_box(n + 1);
                }
                spun.send(()).unwrap();
                let _ = exited.recv(); // stay alive while it is read
            })
            .unwrap();
        done.recv().unwrap();
        let during = now().unwrap();
        exit.send(()).unwrap();
        spinner.join().unwrap();
        let earlier = before.get("flush").map_or(Duration::ZERO, |s| s.on_cpu);
        let flush = during["flush"].on_cpu - earlier;
        assert!(flush >= Duration::from_millis(30), "{flush:?}");
        let row = per_turn(&before, &during, 1.0);
        assert!(
            row["flush"]["cpu_us"].as_f64().unwrap() >= 30_000.0,
            "{row}"
        );
    }
}
