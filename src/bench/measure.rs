//! Measurements shared by the workloads: latency statistics, process CPU time, peak RSS, host.

use std::time::Duration;

use serde_json::{json, Value};

/// Process CPU time (user + system) so far.
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Context switches of this process so far, voluntary + involuntary (`getrusage`, summed
/// over all threads).
pub fn context_switches() -> u64 {
    // SAFETY: as above.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return 0;
    }
    u64::try_from(usage.ru_nvcsw).unwrap_or(0) + u64::try_from(usage.ru_nivcsw).unwrap_or(0)
}

/// Other processes whose CPU time counts too (a deployment the bench drives over NATS).
static DEPLOYMENT: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();

/// Count the CPU time of these processes in every row (`deployment_cpu_us_per_turn`).
pub fn count_cpu_of(pids: Vec<u32>) {
    let _ = DEPLOYMENT.set(pids);
}

/// CPU time (user + system, all threads) of the deployment's processes so far, from
/// `/proc/<pid>/stat`; a process that is gone counts zero.
fn deployment_cpu() -> Option<Duration> {
    let pids = DEPLOYMENT.get()?;
    let ticks_per_sec = super::threads::ticks_per_sec()?;
    let ticks: u64 = pids
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .filter_map(|stat| super::threads::stat_ticks(&stat).map(|(user, sys)| user + sys))
        .sum();
    Some(Duration::from_micros(ticks * 1_000_000 / ticks_per_sec))
}

/// Where the process stood at one moment: CPU, wall clock, context switches, flushes.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub cpu: Duration,
    pub wall: std::time::Instant,
    pub switches: u64,
    pub flushes: u64,
    /// Time the database's flusher spent flushing so far.
    pub flushing: Duration,
    /// CPU of the deployment's other processes, when counted.
    pub deployment: Option<Duration>,
    /// Messages this process exchanged over a networked bus so far.
    pub traffic: Option<crate::bus::Traffic>,
    /// What each kind of thread spent so far.
    pub threads: Option<super::threads::ByKind>,
}

impl Snapshot {
    /// Now, counting the flushes of `engine`'s database.
    pub fn take(engine: &crate::engine::Engine) -> Self {
        Self {
            cpu: cpu_time(),
            wall: std::time::Instant::now(),
            switches: context_switches(),
            flushes: engine.db.as_ref().map_or(0, |d| d.flushes()),
            flushing: engine
                .db
                .as_ref()
                .map_or(Duration::ZERO, |d| d.flush_time()),
            deployment: deployment_cpu(),
            traffic: engine.bus.traffic(),
            threads: super::threads::now(),
        }
    }
}

/// The per-turn figures of one timed run from `start` to now.
pub fn per_turn_row(
    name: &str,
    stats: &Stats,
    start: Snapshot,
    engine: &crate::engine::Engine,
    turns: u64,
) -> Value {
    let end = Snapshot::take(engine);
    let n = turns.max(1) as f64;
    let mut row = json!({
        "workload": name,
        "turns": turns,
        "turns_per_s": turns as f64 / (end.wall - start.wall).as_secs_f64(),
        "p50_us": stats.percentile(50.0),
        "p99_us": stats.percentile(99.0),
        "cpu_us_per_turn": (end.cpu - start.cpu).as_secs_f64() * 1e6 / n,
        "context_switches_per_turn": (end.switches - start.switches) as f64 / n,
        "flushes_per_turn": (end.flushes - start.flushes) as f64 / n,
        "flush_us_per_turn": (end.flushing - start.flushing).as_secs_f64() * 1e6 / n,
        "peak_rss_mb": peak_rss_mb(),
    });
    if let (Some(a), Some(b), Some(obj)) = (start.traffic, end.traffic, row.as_object_mut()) {
        let messages = b.sent.saturating_sub(a.sent) + b.received.saturating_sub(a.received);
        obj.insert("bus_msgs_per_turn".into(), json!(messages as f64 / n));
    }
    if let (Some(a), Some(b), Some(obj)) = (&start.threads, &end.threads, row.as_object_mut()) {
        obj.insert("by_thread".into(), super::threads::per_turn(a, b, n));
    }
    if let (Some(a), Some(b), Some(obj)) = (start.deployment, end.deployment, row.as_object_mut()) {
        let cpu = (end.cpu - start.cpu) + b.saturating_sub(a);
        obj.insert(
            "deployment_cpu_us_per_turn".into(),
            json!(cpu.as_secs_f64() * 1e6 / n),
        );
    }
    row
}

/// Peak resident set size of this process, MiB (`ru_maxrss`).
pub fn peak_rss_mb() -> f64 {
    // SAFETY: as above.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return 0.0;
    }
    usage.ru_maxrss as f64 / 1024.0
}

/// Resident set size of this process now, MiB (`VmRSS` of `/proc/self/status`; 0 where
/// there is no procfs).
pub fn current_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// `nproc` and the load average.
pub fn host_info() -> Value {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    json!({"nproc": nproc, "loadavg": load})
}

/// Latency samples (µs) with percentiles.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    samples: Vec<f64>,
}

impl Stats {
    pub fn push(&mut self, d: Duration) {
        self.samples.push(d.as_secs_f64() * 1e6);
    }

    pub fn samples(&self) -> &[f64] {
        &self.samples
    }

    /// The `p`th percentile (0–100), nearest rank.
    pub fn percentile(&self, p: f64) -> f64 {
        percentile(&self.samples, p)
    }
}

pub fn percentile(samples: &[f64], p: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Least-squares slope of `ys` against 1, 2, 3, ….
pub fn slope(ys: &[f64]) -> f64 {
    let n = ys.len() as f64;
    if ys.len() < 2 {
        return 0.0;
    }
    let mean_x = (n + 1.0) / 2.0;
    let mean_y = ys.iter().sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        let dx = (i + 1) as f64 - mean_x;
        num += dx * (y - mean_y);
        den += dx * dx;
    }
    num / den
}

/// A progress bar on stderr (hidden when `show` is false or stderr is not a terminal).
pub fn progress(len: u64, label: &str, show: bool) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{prefix:>14} [{bar:30}] {pos}/{len} {per_sec} eta {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(label.to_string());
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line_is_its_gradient() {
        let ys: Vec<f64> = (1..=10).map(|x| 3.0 * x as f64 + 7.0).collect();
        assert!((slope(&ys) - 3.0).abs() < 1e-9);
        assert!(slope(&[5.0; 20]).abs() < 1e-9);
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }
}
