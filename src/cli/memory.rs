//! `hermes memory ls|show|search|forget|sweep`: look at and tidy a user's memories — of a
//! running deployment over the bus, or of a data directory (see [`super::reach`] for which,
//! picked by itself).
//!
//! Every way sends `hermes.memory.list|recall|forget` for one `--user` — the memory service
//! reads and changes that user's records only — and prints the replies
//! ([`super::memory_print`]); a stopped data directory is answered by the same memory service,
//! run here. `sweep` runs on a stopped data directory only: a running memory-extractor sweeps
//! by itself every `memory.sweep_interval_secs`.

use clap::{Args, Subcommand};

use hermes::actors::memory_service::MemoryRequests;
use hermes::config::Config;
use hermes::memory::{MemoryKind, MemoryService};
use hermes::protocol::{Memory, MemoryForgetRequest, MemoryListRequest, RecallRequest};

use super::memory_print as print;
use super::reach::{self, Asker, ReachArgs, Way};
use super::runtime::io_runtime;

#[derive(Args)]
#[command(after_long_help = "\
Where the answers come from:
  --bus nats://HOST:4222   a running deployment (any memory-extractor answers for every user)
  --data-dir DIR           a data directory: through the `hermes serve` holding it, or read here
  neither                  [bus] url when it is NATS, else [engine] data_dir as above

Every command but `sweep` names one --user and sees only that user's memories.

Examples:
  hermes memory ls --user u-1001 --all
  hermes memory show --user u-1001 --key headphone_budget
  hermes memory search --user u-1001 \"我的预算\" --kind preference --bus nats://127.0.0.1:4222
  hermes memory forget --user u-1001 --key headphone_brand")]
pub struct MemoryArgs {
    #[command(flatten)]
    reach: ReachArgs,
    /// Print JSON instead of a table: one record (or hit) per line.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: MemoryCommand,
}

#[derive(Subcommand)]
enum MemoryCommand {
    /// List a user's memories, newest first (expired and demoted ones with --all).
    Ls {
        /// Whose memories: a command sees one user's only.
        #[arg(long)]
        user: String,
        /// Include expired and demoted records.
        #[arg(long)]
        all: bool,
        /// Only this namespace.
        #[arg(long)]
        namespace: Option<String>,
    },
    /// Show one memory with its history and source, by id or by --key.
    Show {
        /// Whose memories: a command sees one user's only.
        #[arg(long)]
        user: String,
        /// Record id (a unique prefix of it is enough).
        #[arg(required_unless_present = "key")]
        id: Option<String>,
        /// The memory's key instead of its id (e.g. `headphone_budget`).
        #[arg(long, conflicts_with = "id")]
        key: Option<String>,
        /// The namespace of the --key.
        #[arg(long, default_value = "default")]
        namespace: String,
    },
    /// Recall as a turn would: filter, BM25 (+ vectors with an embedder), rerank, threshold.
    Search {
        /// Whose memories: a command sees one user's only.
        #[arg(long)]
        user: String,
        /// What to recall, as a turn's message would say it.
        query: String,
        /// Only this namespace.
        #[arg(long)]
        namespace: Option<String>,
        /// Only these kinds (preference, fact, constraint, event); repeatable.
        #[arg(long = "kind")]
        kinds: Vec<String>,
        /// Only records with one of these topics; repeatable.
        #[arg(long = "topic")]
        topics: Vec<String>,
        /// Most hits (at most 50).
        #[arg(long, default_value_t = 5)]
        limit: usize,
        /// Show every match, ignoring memory.min_score.
        #[arg(long)]
        no_threshold: bool,
    },
    /// Delete a memory by id (or unique id prefix), or by --key in --namespace.
    Forget {
        /// Whose memories: a command sees one user's only.
        #[arg(long)]
        user: String,
        /// Record id (a unique prefix of it is enough).
        #[arg(required_unless_present = "key")]
        id: Option<String>,
        /// The memory's key instead of its id.
        #[arg(long, conflicts_with = "id")]
        key: Option<String>,
        /// The namespace of the --key.
        #[arg(long, default_value = "default")]
        namespace: String,
    },
    /// Run the forgetting sweep once on a stopped data directory: demote expired records,
    /// remove ones demoted before.
    Sweep,
}

/// Records asked for per page (a page may hold fewer when they do not fit one reply).
const PAGE: usize = 200;

pub fn run(mut config: Config, args: MemoryArgs) -> anyhow::Result<()> {
    args.reach.apply(&mut config);
    let json = args.json;
    io_runtime()?.block_on(async move {
        let way = reach::pick(&config).await;
        match args.command {
            MemoryCommand::Sweep => sweep(&config, way).await,
            command => {
                let needs_embedder = matches!(command, MemoryCommand::Search { .. });
                let asker = asker(&config, way, needs_embedder).await?;
                ask(&asker, command, json).await
            }
        }
    })
}

/// Run `command` by asking `asker`.
async fn ask(asker: &Asker, command: MemoryCommand, json: bool) -> anyhow::Result<()> {
    match command {
        MemoryCommand::Ls {
            user,
            all,
            namespace,
        } => {
            let records = list(asker, &user, namespace, all).await?;
            print::list(&user, &records, all, json);
        }
        MemoryCommand::Show {
            user,
            id,
            key,
            namespace,
        } => {
            let record = match (id, key) {
                (Some(id), _) => find(asker, &user, &id).await?,
                (None, Some(key)) => find_key(asker, &user, &namespace, &key)
                    .await?
                    .ok_or_else(|| no_key(&user, &namespace, &key))?,
                (None, None) => anyhow::bail!("give a memory id or --key"),
            };
            print::show(&record, json);
        }
        MemoryCommand::Search {
            user,
            query,
            namespace,
            kinds,
            topics,
            limit,
            no_threshold,
        } => {
            let kinds = kinds
                .iter()
                .map(|k| parse_kind(k))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let reply = asker
                .ask(RecallRequest {
                    user: user.clone(),
                    query,
                    limit,
                    namespace,
                    kinds,
                    topics,
                    min_score: no_threshold.then_some(0.0),
                    ..RecallRequest::default()
                })
                .await?;
            print::search(&user, &reply.hits, reply.embedder.as_deref(), json);
        }
        MemoryCommand::Forget {
            user,
            id,
            key,
            namespace,
        } => {
            let record = match (id, key) {
                (Some(id), _) => Some(find(asker, &user, &id).await?),
                (None, Some(key)) => find_key(asker, &user, &namespace, &key).await?,
                (None, None) => anyhow::bail!("give a record id or --key KEY"),
            };
            let forgotten = match record {
                Some(record) => forget(asker, record).await?,
                None => None,
            };
            print::forgot(forgotten.as_ref(), json);
        }
        MemoryCommand::Sweep => {
            anyhow::bail!("`hermes memory sweep` does not ask a service; it runs here")
        }
    }
    Ok(())
}

/// Ask the deployment or the serve holding the directory; or serve the directory's memory
/// here (with the embedder when the command recalls).
async fn asker(config: &Config, way: Way, with_embedder: bool) -> anyhow::Result<Asker> {
    if let Some(asker) = Asker::remote(config, &way).await? {
        return Ok(asker);
    }
    let Way::Directory(dir) = way else {
        anyhow::bail!("no way to reach the memory");
    };
    let service = open_service(config, &dir, with_embedder).await?;
    let bus = hermes::bus::connect("embedded", Some(service.1)).await?;
    let serving =
        MemoryRequests::serve(service.0, std::sync::Arc::new(config.clone()), &bus).await?;
    Ok(Asker::local(bus, config, &dir, serving))
}

/// The memory service of a data directory nobody holds, and its database.
async fn open_service(
    config: &Config,
    dir: &std::path::Path,
    with_embedder: bool,
) -> anyhow::Result<(MemoryService, hermes::store::durability::Durable)> {
    let db = reach::open_directory(dir).await?;
    let embedder = if with_embedder {
        let embedder_config = config.memory.embedder.clone();
        tokio::task::spawn_blocking(move || hermes::memory::embed::from_config(&embedder_config))
            .await??
    } else {
        None
    };
    Ok((MemoryService::open(&db, &config.memory, embedder)?, db))
}

/// `hermes memory sweep`: here on a data directory nobody holds; a running deployment sweeps
/// by itself.
async fn sweep(config: &Config, way: Way) -> anyhow::Result<()> {
    let dir = match way {
        Way::Directory(dir) => dir,
        Way::Nats(url) => anyhow::bail!(
            "the memory-extractors at {url} sweep by themselves every {} s \
             (memory.sweep_interval_secs); `hermes memory sweep` runs one on a stopped data \
             directory (--data-dir DIR)",
            config.memory.sweep_interval_secs
        ),
        Way::Socket(dir, _) => anyhow::bail!(
            "the hermes serve holding {} sweeps by itself every {} s \
             (memory.sweep_interval_secs); stop it to run a sweep now",
            dir.display(),
            config.memory.sweep_interval_secs
        ),
    };
    let (service, _db) = open_service(config, &dir, false).await?;
    let report = service.sweep(chrono::Utc::now()).await?;
    println!(
        "swept {} records: {} demoted, {} removed, {} kept (referenced by open tasks)",
        report.scanned,
        report.demoted,
        report.removed.len(),
        report.kept_referenced
    );
    for (user, id) in &report.removed {
        println!("  removed {user} {id}");
    }
    Ok(())
}

/// Every record of `user` (of `namespace`; expired and demoted ones too with `all`), newest
/// first, page by page.
async fn list(
    asker: &Asker,
    user: &str,
    namespace: Option<String>,
    all: bool,
) -> anyhow::Result<Vec<Memory>> {
    let mut records = Vec::new();
    let mut offset = 0;
    loop {
        let page = asker
            .ask(MemoryListRequest {
                user: user.to_owned(),
                namespace: namespace.clone(),
                include_inactive: all,
                offset,
                limit: Some(PAGE),
                ..MemoryListRequest::default()
            })
            .await?;
        records.extend(page.records);
        match page.next_offset {
            Some(next) => offset = next,
            None => return Ok(records),
        }
    }
}

/// The record of `user` whose id is `id` or starts with it (must be unique).
async fn find(asker: &Asker, user: &str, id: &str) -> anyhow::Result<Memory> {
    let exact = asker
        .ask(MemoryListRequest {
            user: user.to_owned(),
            id: Some(id.to_owned()),
            include_inactive: true,
            ..MemoryListRequest::default()
        })
        .await?;
    if let Some(record) = exact.records.into_iter().next() {
        return Ok(record);
    }
    let mut matches: Vec<Memory> = list(asker, user, None, true)
        .await?
        .into_iter()
        .filter(|r| r.id.starts_with(id))
        .collect();
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => anyhow::bail!(
            "user `{user}` has no memory with id `{id}`; see `hermes memory ls --user {user} --all`"
        ),
        n => anyhow::bail!("`{id}` matches {n} memories of `{user}`; give more of the id"),
    }
}

/// The record of `user` in slot `key` of `namespace`, if there is one.
async fn find_key(
    asker: &Asker,
    user: &str,
    namespace: &str,
    key: &str,
) -> anyhow::Result<Option<Memory>> {
    Ok(list(asker, user, Some(namespace.to_owned()), true)
        .await?
        .into_iter()
        .find(|r| r.key == key))
}

fn no_key(user: &str, namespace: &str, key: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "user `{user}` has no memory with key `{key}` in namespace `{namespace}`; see \
         `hermes memory ls --user {user} --all`"
    )
}

/// Forget `record` by its id; the record when the service removed it.
async fn forget(asker: &Asker, record: Memory) -> anyhow::Result<Option<Memory>> {
    let reply = asker
        .ask(MemoryForgetRequest {
            user: record.user.clone(),
            namespace: record.namespace.clone(),
            id: Some(record.id.clone()),
            key: None,
        })
        .await?;
    Ok((!reply.changes.is_empty()).then_some(record))
}

fn parse_kind(text: &str) -> anyhow::Result<MemoryKind> {
    MemoryKind::parse(text).ok_or_else(|| {
        anyhow::anyhow!("unknown kind `{text}`; use preference, fact, constraint or event")
    })
}
