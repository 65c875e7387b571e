//! `hermes sessions ls|show|search`: read the conversation layer — of a running deployment
//! over the bus, or of a data directory (see [`super::reach`] for which, picked by itself).
//!
//! Every way sends `hermes.sessions.list|show|search` and prints the replies
//! ([`super::sessions_print`]); a stopped data directory is answered by the same session
//! services, run here. Long lists and long sessions come in pages and are printed whole.

use clap::{Args, Subcommand};

use hermes::actors::session_query::SessionQueries;
use hermes::config::Config;
use hermes::protocol::{
    SessionListRequest, SessionSearchRequest, SessionShowReply, SessionShowRequest, SessionSummary,
};
use hermes::store::session_reader::SessionReader;
use hermes::store::sessions::SessionStore;

use super::reach::{self, Asker, ReachArgs, Way};
use super::runtime::io_runtime;
use super::sessions_print as print;

#[derive(Args)]
#[command(after_long_help = "\
Where the answers come from:
  --bus nats://HOST:4222   a running deployment (any session process answers for every session)
  --data-dir DIR           a data directory: through the `hermes serve` holding it, or read here
  neither                  [bus] url when it is NATS, else [engine] data_dir as above

Examples:
  hermes sessions ls --user u-1001
  hermes sessions show s1 --json > s1.json
  hermes sessions search --user u-1001 \"耳机 订单\" --bus nats://127.0.0.1:4222")]
pub struct SessionsArgs {
    #[command(flatten)]
    reach: ReachArgs,
    /// Print JSON instead of a table: one object per line for `ls` and `search`, one object
    /// (`{session, messages}`) for `show`.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: SessionsCommand,
}

#[derive(Subcommand)]
enum SessionsCommand {
    /// List sessions, newest first, with their last turn's state.
    Ls {
        /// Only this user's sessions.
        #[arg(long)]
        user: Option<String>,
        /// Only this agent's sessions.
        #[arg(long)]
        agent: Option<String>,
        /// Most sessions to list (0: all of them).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Print a session's messages, its pinned goal, summary, handoffs and turn state.
    Show {
        /// The session id.
        session: String,
        /// The agent whose session it is.
        #[arg(long, default_value = "assistant")]
        agent: String,
    },
    /// Search all of a user's past messages (BM25; Chinese and English).
    Search {
        /// Whose messages.
        #[arg(long)]
        user: String,
        /// Words to look for (Chinese is matched by character pairs).
        query: String,
        /// Most hits (at most 20).
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
}

/// Sessions asked for per page (a page may hold fewer when they do not fit one reply).
const PAGE: usize = 200;

pub fn run(mut config: Config, args: SessionsArgs) -> anyhow::Result<()> {
    args.reach.apply(&mut config);
    io_runtime()?.block_on(async move {
        let asker = asker(&config).await?;
        match args.command {
            SessionsCommand::Ls { user, agent, limit } => {
                let (sessions, total) = list(&asker, user, agent, limit).await?;
                print::list(&sessions, total, args.json);
            }
            SessionsCommand::Show { session, agent } => {
                let shown = show(&asker, agent, session).await?;
                print::show(&shown, args.json)?;
            }
            SessionsCommand::Search { user, query, limit } => {
                let reply = asker
                    .ask(SessionSearchRequest { user, query, limit })
                    .await?;
                print::search(&reply.hits, args.json);
            }
        }
        Ok(())
    })
}

/// Ask the deployment or the serve holding the directory; or serve the directory here.
async fn asker(config: &Config) -> anyhow::Result<Asker> {
    let way = reach::pick(config).await;
    if let Some(asker) = Asker::remote(config, &way).await? {
        return Ok(asker);
    }
    let Way::Directory(dir) = way else {
        anyhow::bail!("no way to reach the sessions");
    };
    let db = reach::open_directory(&dir).await?;
    let store = SessionStore::open(&db)?;
    let bus = hermes::bus::connect("embedded", Some(db)).await?;
    let serving = SessionQueries::serve(
        SessionReader::Local(store),
        &bus,
        config.engine.max_envelope_bytes,
    )
    .await?;
    Ok(Asker::local(bus, config, &dir, serving))
}

/// Up to `limit` sessions (0: all), newest first, page by page; and how many match in all.
async fn list(
    asker: &Asker,
    user: Option<String>,
    agent: Option<String>,
    limit: usize,
) -> anyhow::Result<(Vec<SessionSummary>, usize)> {
    let want = if limit == 0 { usize::MAX } else { limit };
    let mut sessions = Vec::new();
    let mut offset = 0;
    loop {
        let page = asker
            .ask(SessionListRequest {
                user: user.clone(),
                agent: agent.clone(),
                offset,
                limit: (want - sessions.len()).min(PAGE),
            })
            .await?;
        sessions.extend(page.sessions);
        match page.next_offset {
            Some(next) if sessions.len() < want => offset = next,
            _ => return Ok((sessions, page.total)),
        }
    }
}

/// The session with all its messages, page by page.
async fn show(asker: &Asker, agent: String, session: String) -> anyhow::Result<SessionShowReply> {
    let mut request = SessionShowRequest {
        agent,
        session,
        from_seq: 0,
        limit: 0,
    };
    let mut whole = asker.ask(request.clone()).await?;
    while let Some(next) = whole.next_seq.take() {
        request.from_seq = next;
        let page = asker.ask(request.clone()).await?;
        whole.messages.extend(page.messages);
        whole.next_seq = page.next_seq;
    }
    Ok(whole)
}
