//! `hermes memory ls|show|search|forget|sweep`: look at and tidy the memory store.
//!
//! These commands open the data directory's sled database directly, so the `hermes serve` (or
//! `hermes chat`) using that directory must be stopped first: sled allows one process per
//! directory, and a locked directory is reported as such. Over a running service, use the bus
//! subjects `hermes.memory.recall|write|forget` instead (the MCP server does).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};

use hermes::config::Config;
use hermes::memory::{MemoryKind, MemoryRecord, MemoryService, RecallFilter, RecallQuery};
use hermes::store::durability::{Durable, Mode};

use super::runtime::io_runtime;

#[derive(Args)]
pub struct MemoryArgs {
    /// Data directory (overrides [engine].data_dir). Stop the serve process using it first.
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: MemoryCommand,
}

#[derive(Subcommand)]
enum MemoryCommand {
    /// List a user's memories, newest first (expired and demoted ones with --all).
    Ls {
        #[arg(long)]
        user: String,
        /// Include expired and demoted records.
        #[arg(long)]
        all: bool,
    },
    /// Show one memory with its history and source, by id or by --key.
    Show {
        #[arg(long)]
        user: String,
        /// Record id (a unique prefix of it is enough).
        #[arg(required_unless_present = "key")]
        id: Option<String>,
        /// The memory's key instead of its id (e.g. `headphone_budget`).
        #[arg(long, conflicts_with = "id")]
        key: Option<String>,
        #[arg(long, default_value = "default")]
        namespace: String,
    },
    /// Recall as a turn would: filter, BM25 (+ vectors with an embedder), rerank, threshold.
    Search {
        #[arg(long)]
        user: String,
        query: String,
        #[arg(long)]
        namespace: Option<String>,
        /// Only these kinds (preference, fact, constraint, event); repeatable.
        #[arg(long = "kind")]
        kinds: Vec<String>,
        /// Only records with one of these topics; repeatable.
        #[arg(long = "topic")]
        topics: Vec<String>,
        #[arg(long, default_value_t = 5)]
        limit: usize,
        /// Show every match, ignoring memory.min_score.
        #[arg(long)]
        no_threshold: bool,
    },
    /// Delete a memory by id (or unique id prefix), or by --key in --namespace.
    Forget {
        #[arg(long)]
        user: String,
        id: Option<String>,
        #[arg(long, conflicts_with = "id")]
        key: Option<String>,
        #[arg(long, default_value = "default")]
        namespace: String,
    },
    /// Run the forgetting sweep once: demote expired records, remove ones demoted before.
    Sweep,
}

pub fn run(mut config: Config, args: MemoryArgs) -> anyhow::Result<()> {
    if let Some(dir) = args.data_dir {
        config.engine.data_dir = dir;
    }
    let rt = io_runtime()?;
    rt.block_on(async move {
        let needs_embedder = matches!(args.command, MemoryCommand::Search { .. });
        let service = open_service(&config, needs_embedder).await?;
        match args.command {
            MemoryCommand::Ls { user, all } => ls(&service, &user, all),
            MemoryCommand::Show {
                user,
                id,
                key,
                namespace,
            } => {
                let record = match (id, key) {
                    (Some(id), _) => find(&service, &user, &id)?,
                    (None, Some(key)) => find_key(&service, &user, &namespace, &key)?,
                    (None, None) => anyhow::bail!("give a memory id or --key"),
                };
                show(&record);
                Ok(())
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
                let query = RecallQuery {
                    user,
                    text: query,
                    filter: RecallFilter {
                        namespace,
                        kinds,
                        topics,
                        ..RecallFilter::default()
                    },
                    limit,
                    min_score: if no_threshold {
                        0.0
                    } else {
                        config.memory.min_score
                    },
                    weights: None,
                    now: chrono::Utc::now(),
                };
                search(&service, query).await
            }
            MemoryCommand::Forget {
                user,
                id,
                key,
                namespace,
            } => forget(&service, &user, id, key, &namespace).await,
            MemoryCommand::Sweep => {
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
        }
    })
}

/// Open the data directory (a clear error when a serve process holds it) and the service.
async fn open_service(config: &Config, with_embedder: bool) -> anyhow::Result<MemoryService> {
    let dir = config.engine.data_dir.clone();
    let db = open_db(&dir).await?;
    let embedder = if with_embedder {
        let embedder_config = config.memory.embedder.clone();
        tokio::task::spawn_blocking(move || hermes::memory::embed::from_config(&embedder_config))
            .await??
    } else {
        None
    };
    Ok(MemoryService::open(&db, &config.memory, embedder)?)
}

async fn open_db(dir: &Path) -> anyhow::Result<Durable> {
    if !dir.exists() {
        anyhow::bail!(
            "data directory {} does not exist; pass --data-dir or --config with [engine].data_dir",
            dir.display()
        );
    }
    let owned = dir.to_path_buf();
    let opened =
        tokio::task::spawn_blocking(move || hermes::store::open_durable(&owned, Mode::Sync))
            .await?;
    opened.with_context(|| {
        format!(
            "the data directory {} is locked or unreadable — stop the `hermes serve`/`hermes chat` \
             using it (sled allows one process per directory) and retry",
            dir.display()
        )
    })
}

fn parse_kind(text: &str) -> anyhow::Result<MemoryKind> {
    MemoryKind::parse(text).ok_or_else(|| {
        anyhow::anyhow!("unknown kind `{text}`; use preference, fact, constraint or event")
    })
}

/// `text` on one line, cut to at most `width` terminal columns and padded to exactly that
/// (Chinese characters take two columns).
fn cell(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let one_line = text.replace('\n', " ");
    let mut out = String::new();
    let mut used = 0;
    let total: usize = one_line.chars().map(|c| c.width().unwrap_or(0)).sum();
    for c in one_line.chars() {
        let w = c.width().unwrap_or(0);
        if total > width && used + w + 1 > width {
            out.push('…');
            used += 1;
            break;
        }
        out.push(c);
        used += w;
    }
    out.push_str(&" ".repeat(width.saturating_sub(used)));
    out
}

fn kind_name(kind: MemoryKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn state(record: &MemoryRecord, now: chrono::DateTime<chrono::Utc>) -> &'static str {
    if record.demoted_at.is_some() {
        "demoted"
    } else if record.expires_at.is_some_and(|at| at <= now) {
        "expired"
    } else {
        "live"
    }
}

fn ls(service: &MemoryService, user: &str, all: bool) -> anyhow::Result<()> {
    let now = chrono::Utc::now();
    let records: Vec<MemoryRecord> = service
        .store()
        .list(user)?
        .into_iter()
        .filter(|r| all || state(r, now) == "live")
        .collect();
    if records.is_empty() {
        println!(
            "no memories for user `{user}`{}",
            if all { "" } else { " (try --all)" }
        );
        return Ok(());
    }
    println!(
        "{:<36} {:<10} {} {} {:>4} {:>4} {:<16} STATE",
        "ID",
        "KIND",
        cell("KEY", 22),
        cell("CONTENT", 44),
        "IMP",
        "CONF",
        "UPDATED"
    );
    for r in &records {
        println!(
            "{:<36} {:<10} {} {} {:>4.1} {:>4.1} {:<16} {}",
            r.id,
            kind_name(r.kind),
            cell(&r.key, 22),
            cell(&r.content, 44),
            r.importance,
            r.confidence,
            r.updated_at.format("%Y-%m-%d %H:%M"),
            state(r, now)
        );
    }
    println!("{} memories", records.len());
    Ok(())
}

/// The record of `user` whose id is `id` or starts with it (must be unique).
fn find(service: &MemoryService, user: &str, id: &str) -> anyhow::Result<MemoryRecord> {
    if let Some(r) = service.store().get(user, id)? {
        return Ok(r);
    }
    let matches: Vec<MemoryRecord> = service
        .store()
        .list(user)?
        .into_iter()
        .filter(|r| r.id.starts_with(id))
        .collect();
    match matches.len() {
        1 => Ok(matches.into_iter().next().context("one match")?),
        0 => anyhow::bail!(
            "user `{user}` has no memory with id `{id}`; see `hermes memory ls --user {user}`"
        ),
        n => anyhow::bail!("`{id}` matches {n} memories of `{user}`; give more of the id"),
    }
}

fn find_key(
    service: &MemoryService,
    user: &str,
    namespace: &str,
    key: &str,
) -> anyhow::Result<MemoryRecord> {
    service
        .store()
        .list(user)?
        .into_iter()
        .find(|r| r.namespace == namespace && r.key == key)
        .with_context(|| {
            format!(
                "user `{user}` has no memory with key `{key}` in namespace `{namespace}`; see \
                 `hermes memory ls --user {user}`"
            )
        })
}

fn show(r: &MemoryRecord) {
    let now = chrono::Utc::now();
    println!("id          {}", r.id);
    println!("user        {} (namespace {})", r.user, r.namespace);
    println!("kind / key  {} / {}", kind_name(r.kind), r.key);
    println!("content     {}", r.content);
    println!(
        "importance  {:.2}   confidence {:.2}   version {}",
        r.importance, r.confidence, r.version
    );
    println!("topics      {}", r.topics.join(", "));
    println!("created     {}   updated {}", r.created_at, r.updated_at);
    let expires = r.expires_at.map_or("never".to_string(), |t| t.to_string());
    println!("expires     {expires}   state {}", state(r, now));
    println!(
        "source      session {} message {} at {}",
        r.source.session, r.source.message_id, r.source.source_time
    );
    for (i, old) in r.history.iter().enumerate() {
        println!("history {:>2}  {old}", i + 1);
    }
}

async fn search(service: &MemoryService, query: RecallQuery) -> anyhow::Result<()> {
    let user = query.user.clone();
    let hits = service.recall(query).await?;
    if hits.is_empty() {
        println!("nothing recalled for `{user}`");
        return Ok(());
    }
    let by = service.embedder_id().unwrap_or("bm25 only");
    println!("{:>6}  {:<36} {} CONTENT", "SCORE", "ID", cell("KEY", 22));
    for h in &hits {
        println!(
            "{:>6.3}  {:<36} {} {}",
            h.score,
            h.record.id,
            cell(&h.record.key, 22),
            cell(&h.record.content, 60).trim_end()
        );
    }
    println!("{} recalled ({by})", hits.len());
    Ok(())
}

async fn forget(
    service: &MemoryService,
    user: &str,
    id: Option<String>,
    key: Option<String>,
    namespace: &str,
) -> anyhow::Result<()> {
    let removed = match (id, key) {
        (Some(id), _) => {
            let record = find(service, user, &id)?;
            service
                .forget(user, namespace, Some(&record.id), None)
                .await?
        }
        (None, Some(key)) => service.forget(user, namespace, None, Some(&key)).await?,
        (None, None) => anyhow::bail!("give a record id or --key KEY"),
    };
    match removed {
        Some(r) => println!("forgot {} `{}`: {}", r.id, r.key, r.content),
        None => println!("nothing to forget"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::cell;

    #[test]
    fn cells_pad_and_cut_by_terminal_columns_counting_chinese_as_two() {
        assert_eq!(cell("abc", 5), "abc  ");
        assert_eq!(cell("预算", 5), "预算 ");
        assert_eq!(cell("abcdefgh", 5), "abcd…");
        assert_eq!(cell("用户买耳机的预算", 7), "用户买…");
        assert_eq!(cell("a\nb", 4), "a b ");
    }
}
