//! How `hermes sessions` prints what it was answered: tables and lines for a person, JSON for
//! programs. Works on the wire types only, so every way of reaching the sessions prints the
//! same.

use hermes::llm::Role;
use hermes::protocol::{SessionHit, SessionShowReply, SessionSummary, TurnPhase, TurnView};

/// `text` on one line, cut to `max` characters.
fn short(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        format!("{}…", one_line.chars().take(max).collect::<String>())
    }
}

fn json_line<T: serde::Serialize>(value: &T) {
    match serde_json::to_string(value) {
        Ok(line) => println!("{line}"),
        Err(e) => eprintln!("hermes: a record could not be printed as JSON: {e}"),
    }
}

/// `hermes sessions ls`: `shown` of `total` matching sessions.
pub fn list(sessions: &[SessionSummary], total: usize, json: bool) {
    if json {
        sessions.iter().for_each(json_line);
        return;
    }
    println!(
        "{:<14} {:<28} {:<12} {:>8}  {:<14} UPDATED",
        "AGENT", "SESSION", "USER", "MESSAGES", "STATE"
    );
    for s in sessions {
        println!(
            "{:<14} {:<28} {:<12} {:>8}  {:<14} {}",
            s.agent,
            s.session,
            s.user,
            s.messages,
            s.phase.map_or("-", TurnPhase::as_str),
            s.updated_at.format("%Y-%m-%d %H:%M:%S")
        );
    }
    if sessions.len() < total {
        println!(
            "{} of {total} sessions (newest first; --limit 0 lists all)",
            sessions.len()
        );
    } else {
        println!("{total} sessions");
    }
}

/// `hermes sessions show`.
pub fn show(shown: &SessionShowReply, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(shown)?);
        return Ok(());
    }
    let s = &shown.session;
    println!(
        "session {} (agent {}, user {})",
        s.summary.session, s.summary.agent, s.summary.user
    );
    if let Some(goal) = &s.goal {
        println!("goal     {}", short(goal, 100));
    }
    if !s.history_summary.is_empty() {
        println!(
            "summary  (messages before #{}) {}",
            s.summary_upto,
            short(&s.history_summary, 200)
        );
    }
    for h in &s.handoffs {
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
    if !s.handoffs.is_empty() {
        println!("answers  agent {} now", s.summary.active_agent);
    }
    for a in &s.set_aside {
        let seqs = match (a.first_seq, a.last_seq) {
            (Some(first), Some(last)) => format!(" (#{first}–#{last})"),
            _ => String::new(),
        };
        println!(
            "aside    {} local message(s){seqs} set aside at {}: the replicated log disagreed and won; kept in {}",
            a.messages,
            a.at.format("%Y-%m-%d %H:%M:%S"),
            a.kept_in
        );
    }
    if let Some(t) = &s.turn {
        turn("turn    ", t);
    }
    for t in &s.parked {
        turn("parked  ", t);
    }
    for m in &shown.messages {
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
    Ok(())
}

/// A turn's state and what it waits on; `label` is `turn    ` or `parked  `.
fn turn(label: &str, t: &TurnView) {
    println!("{label} {} {} step {}", t.turn_id, t.phase, t.step);
    if let Some(error) = &t.error {
        println!("error    {}", short(error, 110));
    }
    if let Some(p) = &t.parent {
        println!(
            "parent   delegated by {} (session {}, turn {}; chain {})",
            p.agent,
            p.session,
            p.turn_id,
            p.chain.join(" → ")
        );
    }
    for c in &t.confirmations {
        println!(
            "confirm  {} ({}): {}",
            c.tool,
            c.call_id,
            c.decision.as_deref().unwrap_or("waiting for the user")
        );
    }
    for job in &t.jobs {
        let state = if job.done { "done" } else { "waiting" };
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

/// `hermes sessions search`.
pub fn search(hits: &[SessionHit], json: bool) {
    if json {
        hits.iter().for_each(json_line);
        return;
    }
    println!("{:>6}  {:<24} {:>5}  TEXT", "SCORE", "SESSION", "#");
    for h in hits {
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
