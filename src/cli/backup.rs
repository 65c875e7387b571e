//! `hermes backup` and `hermes restore`: a deployment's state into one file and back
//! ([`hermes::backup`]), for the bus it runs on — picked like `hermes sessions` picks
//! ([`super::reach`]): a NATS deployment's streams and buckets, the `hermes serve` holding a
//! data directory (asked through its control socket, so the backup is taken while it serves),
//! or a data directory nobody holds.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use hermes::backup::service::{BackupReply, BackupRequest};
use hermes::backup::{nats_streams, sled_snapshot, Manifest, Progress};
use hermes::bus::Bus;
use hermes::config::Config;
use hermes::store::durability::Mode;

use super::reach::{self, ReachArgs, Way};
use super::runtime::io_runtime;

const WHERE: &str = "\
Where the state is:
  --bus nats://HOST:4222   a NATS deployment: every JetStream stream and key-value bucket
                           Hermes owns (session, memory and audit logs, queues, jobs, tool
                           state, A2A records). Data directories are caches of those.
  --data-dir DIR           an embedded deployment's data directory (every sled tree):
                           through the `hermes serve` holding it, or read here
  neither                  [bus] url when it is NATS, else [engine] data_dir as above";

#[derive(Args)]
#[command(after_long_help = format!("{WHERE}

The file is one archive: a manifest (format version, bus, trees or streams with their
record counts, the body's sha256) and the records. `hermes restore --check FILE` prints the
manifest and verifies the file without restoring it.

Examples:
  hermes backup --out hermes-$(date +%F).hermes-backup                 # [engine] data_dir
  hermes backup --out nats.hermes-backup --bus nats://127.0.0.1:4222"))]
pub struct BackupArgs {
    /// The file to write (replaced only once the backup is complete).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    #[command(flatten)]
    reach: ReachArgs,
    /// Print the manifest as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
#[command(after_long_help = format!("{WHERE}

Restore into a fresh deployment: an empty (or new) data directory that no `hermes serve`
holds, or a nats-server whose Hermes streams are empty, before Hermes starts on it. A target
that already holds data is refused unless --force, which replaces it. The whole file is
verified against its manifest before anything is written. Then start Hermes as before: every
session continues with its history, memories recall, jobs and audit records are listed.

Examples:
  hermes restore backup.hermes-backup --data-dir /var/lib/hermes-new
  hermes restore nats.hermes-backup --bus nats://new-cluster:4222
  hermes restore nats.hermes-backup --bus nats://127.0.0.1:4222 --replicas 1
  hermes restore --check backup.hermes-backup"))]
pub struct RestoreArgs {
    /// The backup file (`hermes backup --out`).
    file: PathBuf,
    #[command(flatten)]
    reach: ReachArgs,
    /// Replace what the target holds (its data directory trees or Hermes' streams).
    #[arg(long)]
    force: bool,
    /// NATS: store every stream with this many replicas instead of the backed-up count
    /// (e.g. 1 when a 3-node cluster's backup goes onto a single server).
    #[arg(long, value_name = "N")]
    replicas: Option<usize>,
    /// Only print the manifest and verify the file; restore nothing.
    #[arg(long)]
    check: bool,
    /// Print the manifest as JSON.
    #[arg(long)]
    json: bool,
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
struct Bar(ProgressBar);

impl Bar {
    fn new() -> Arc<Self> {
        Arc::new(Self(ProgressBar::hidden()))
    }
}

impl Progress for Bar {
    fn start(&self, what: &str, total: Option<u64>) {
        let bar = &self.0;
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        match total {
            Some(total) => {
                bar.set_length(total);
                bar.set_position(0);
                if let Ok(style) = ProgressStyle::with_template(
                    "{msg:>28} [{bar:30}] {pos}/{len} ({per_sec}, {eta} left)",
                ) {
                    bar.set_style(style.progress_chars("=> "));
                }
            }
            None => bar.enable_steady_tick(Duration::from_millis(120)),
        }
        bar.set_message(what.to_string());
    }

    fn advance(&self, n: u64) {
        self.0.inc(n);
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

pub fn backup(mut config: Config, args: BackupArgs) -> anyhow::Result<()> {
    args.reach.apply(&mut config);
    let out = absolute(&args.out)?;
    io_runtime()?.block_on(async move {
        let bar = Bar::new();
        let manifest = match reach::pick(&config).await {
            Way::Nats(url) => {
                let bus = reach::connect_nats(&config, &url).await?;
                let snapshots = bus
                    .snapshots()
                    .context("this bus keeps no JetStream streams to back up")?;
                nats_streams::backup(snapshots.as_ref(), &out, &url, bar.as_ref()).await?
            }
            Way::Socket(dir, socket) => {
                bar.start(
                    &format!("the hermes serve holding {} writes it", dir.display()),
                    None,
                );
                through_serve(socket.as_ref(), &out).await?
            }
            Way::Directory(dir) => {
                let db = reach::open_directory(&dir).await?;
                let source = dir.display().to_string();
                let progress = bar.clone();
                let out = out.clone();
                tokio::task::spawn_blocking(move || {
                    sled_snapshot::backup(db.db(), &out, &source, progress.as_ref())
                })
                .await??
            }
        };
        drop(bar);
        report("backed up", &out, &manifest, args.json)
    })
}

/// Ask the serve holding the directory to write the backup (it has the database open).
async fn through_serve(socket: &dyn Bus, out: &Path) -> anyhow::Result<Manifest> {
    let request = serde_json::to_vec(&BackupRequest {
        out: out.to_path_buf(),
    })?;
    // A large directory takes a while; the serve writes while it serves.
    let reply = socket
        .request(
            hermes::protocol::subjects::BACKUP,
            request.into(),
            Duration::from_secs(3600),
        )
        .await
        .context(
            "the hermes serve holding the data directory did not write the backup (an older \
             hermes that does not take backups? restart it with this one)",
        )?;
    match serde_json::from_slice::<BackupReply>(&reply)? {
        BackupReply::Written(manifest) => Ok(*manifest),
        BackupReply::Failed(why) => anyhow::bail!("the hermes serve could not back up: {why}"),
    }
}

pub fn restore(mut config: Config, args: RestoreArgs) -> anyhow::Result<()> {
    args.reach.apply(&mut config);
    let file = args.file.clone();
    if args.check {
        let manifest = hermes::backup::archive::read_manifest(&file)?;
        let records = hermes::backup::archive::ArchiveReader::verify(&file)?;
        anyhow::ensure!(
            records == manifest.records,
            "{} holds {records} records, its manifest says {}: the file is damaged",
            file.display(),
            manifest.records
        );
        return report("verified", &file, &manifest, args.json);
    }
    io_runtime()?.block_on(async move {
        let bar = Bar::new();
        let manifest = match reach::pick(&config).await {
            Way::Nats(url) => {
                let bus = reach::connect_nats(&config, &url).await?;
                let snapshots = bus
                    .snapshots()
                    .context("this bus keeps no JetStream streams to restore into")?;
                nats_streams::restore(
                    snapshots.as_ref(),
                    &file,
                    args.force,
                    args.replicas,
                    bar.as_ref(),
                )
                .await?
            }
            Way::Socket(dir, _) => anyhow::bail!(
                "a hermes serve holds {}: stop it first — a restore writes into a data \
                 directory nobody uses (or pick a new one with --data-dir)",
                dir.display()
            ),
            Way::Directory(dir) => {
                let opened = {
                    let dir = dir.clone();
                    tokio::task::spawn_blocking(move || {
                        hermes::store::open_durable(&dir, Mode::Sync)
                    })
                    .await?
                };
                let db = opened.with_context(|| {
                    format!(
                        "cannot open the data directory {} to restore into: is a hermes \
                         process using it? Stop it, or restore into a new directory",
                        dir.display()
                    )
                })?;
                let (progress, file, force) = (bar.clone(), file.clone(), args.force);
                tokio::task::spawn_blocking(move || {
                    sled_snapshot::restore(db.db(), &file, force, progress.as_ref())
                })
                .await??
            }
        };
        drop(bar);
        report("restored", &file, &manifest, args.json)
    })
}

/// `path` from the current directory (the serve writing it runs elsewhere).
fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))
}

fn report(done: &str, file: &Path, manifest: &Manifest, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(manifest)?);
        return Ok(());
    }
    println!(
        "{done} {} ({} bus, {} records, from {} at {}; format {} v{})",
        file.display(),
        manifest.bus,
        manifest.records,
        manifest.source,
        manifest.created_at,
        manifest.format,
        manifest.version
    );
    for (name, count) in manifest.trees.iter().chain(manifest.streams.iter()) {
        println!("  {name:<44} {count}");
    }
    Ok(())
}
