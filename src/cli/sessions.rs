//! `hermes sessions ls|show|search`: read the conversation layer of a data directory.
//!
//! These open the sled directory directly, so the `hermes serve` that owns it must be stopped
//! first (sled allows one process per directory; the error says so). Agents can search a
//! running service with the `session_search` tool instead.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use hermes::config::Config;
use hermes::context::search;
use hermes::llm::Role;
use hermes::store::durability::{Durable, Mode};
use hermes::store::sessions::SessionStore;

#[derive(Args)]
pub struct SessionsArgs {
    /// Data directory (overrides [engine].data_dir).
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: SessionsCommand,
}

#[derive(Subcommand)]
enum SessionsCommand {
    /// List sessions, newest first.
    Ls {
        /// Only this user's sessions.
        #[arg(long)]
        user: Option<String>,
    },
    /// Print a session's messages, its pinned goal, summary and turn state.
    Show {
        session: String,
        #[arg(long, default_value = "assistant")]
        agent: String,
    },
    /// Search all of a user's past messages (BM25; Chinese and English).
    Search {
        #[arg(long)]
        user: String,
        query: String,
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
}

fn short(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        format!("{}…", one_line.chars().take(max).collect::<String>())
    }
}

pub fn run(config: Config, args: SessionsArgs) -> anyhow::Result<()> {
    let dir = args.data_dir.unwrap_or(config.engine.data_dir);
    let db = hermes::store::open(&dir).with_context(|| {
        format!(
            "opening {} (stop the hermes serve that uses it first)",
            dir.display()
        )
    })?;
    let store = SessionStore::open(&Durable::new(db, Mode::Sync))?;
    match args.command {
        SessionsCommand::Ls { user } => {
            let list = store.list(user.as_deref())?;
            println!(
                "{:<14} {:<28} {:<12} {:>8}  UPDATED",
                "AGENT", "SESSION", "USER", "MESSAGES"
            );
            for m in &list {
                println!(
                    "{:<14} {:<28} {:<12} {:>8}  {}",
                    m.agent,
                    m.session,
                    m.user,
                    m.next_seq,
                    m.updated_at.format("%Y-%m-%d %H:%M:%S")
                );
            }
            println!("{} sessions", list.len());
        }
        SessionsCommand::Show { session, agent } => {
            let meta = store.meta(&agent, &session)?.with_context(|| {
                format!("no session `{session}` of agent `{agent}`; see `hermes sessions ls`")
            })?;
            let task = store.task(&agent, &session)?;
            println!(
                "session {} (agent {}, user {})",
                meta.session, meta.agent, meta.user
            );
            if let Some(goal) = &task.goal {
                println!("goal     {}", short(goal, 100));
            }
            if !task.summary.is_empty() {
                println!(
                    "summary  (messages before #{}) {}",
                    task.summary_upto,
                    short(&task.summary, 200)
                );
            }
            for h in &meta.handoffs {
                println!(
                    "handoff  {} → {} at {} (turn {}){}",
                    h.from,
                    h.to,
                    h.at.format("%Y-%m-%d %H:%M:%S"),
                    h.turn_id,
                    if h.reason.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", h.reason)
                    }
                );
            }
            if !meta.handoffs.is_empty() {
                println!("answers  agent {} now", meta.active_agent());
            }
            if let Some(t) = &task.turn {
                println!("turn     {} {:?} step {}", t.turn_id, t.phase, t.step);
                if let Some(p) = &t.parent {
                    println!(
                        "parent   delegated by {} (session {}, turn {}; chain {})",
                        p.agent,
                        p.session,
                        p.turn_id,
                        p.chain.join(" → ")
                    );
                }
                for job in &t.jobs {
                    let state = if job.result.is_some() {
                        "done"
                    } else {
                        "waiting"
                    };
                    match &job.child {
                        Some(c) => println!(
                            "child    {} session {} ({state}, deadline {})",
                            c.agent,
                            c.session,
                            c.deadline.format("%H:%M:%S")
                        ),
                        None => println!("job      {} of {} ({state})", job.job_id, job.tool),
                    }
                }
                if t.tokens_used > 0 {
                    println!(
                        "tokens   {} used by this task (its delegated agents included)",
                        t.tokens_used
                    );
                }
            }
            for m in store.messages(&agent, &session)? {
                let role = match m.message.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                    Role::Tool => "tool",
                    Role::System => "system",
                };
                let calls: Vec<_> = m
                    .message
                    .tool_calls
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect();
                let text = if calls.is_empty() {
                    short(&m.message.content, 110)
                } else {
                    format!("→ {} {}", calls.join(", "), short(&m.message.content, 60))
                };
                println!("#{:<4} {:<9} {:>5} tok  {}", m.seq, role, m.tokens, text);
            }
        }
        SessionsCommand::Search { user, query, limit } => {
            let hits = search::search(&store, &user, &query, limit)?;
            println!("{:>6}  {:<24} {:>5}  TEXT", "SCORE", "SESSION", "#");
            for h in &hits {
                println!(
                    "{:>6.2}  {:<24} {:>5}  {}",
                    h.score,
                    h.session,
                    h.seq,
                    short(&h.text, 90)
                );
            }
            println!("{} hits", hits.len());
        }
    }
    Ok(())
}
