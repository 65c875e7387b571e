//! How `hermes memory` prints memories: tables and records for a person, JSON for programs.
//! Works on the wire form ([`Memory`]), so every way of reaching the memory prints the same.

use chrono::{DateTime, Utc};

use hermes::memory::MemoryKind;
use hermes::protocol::{Memory, RecallHit};

/// `text` on one line, cut to at most `width` terminal columns and padded to exactly that
/// (Chinese characters take two columns).
pub fn cell(text: &str, width: usize) -> String {
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

/// `live`, `expired` or `demoted` at `now`.
pub fn state(record: &Memory, now: DateTime<Utc>) -> &'static str {
    if record.demoted_at.is_some() {
        "demoted"
    } else if record.expires_at.is_some_and(|at| at <= now) {
        "expired"
    } else {
        "live"
    }
}

fn json_line<T: serde::Serialize>(value: &T) {
    match serde_json::to_string(value) {
        Ok(line) => println!("{line}"),
        Err(e) => eprintln!("hermes: a record could not be printed as JSON: {e}"),
    }
}

/// `hermes memory ls`.
pub fn list(user: &str, records: &[Memory], all: bool, json: bool) {
    if json {
        records.iter().for_each(json_line);
        return;
    }
    if records.is_empty() {
        println!(
            "no memories for user `{user}`{}",
            if all { "" } else { " (try --all)" }
        );
        return;
    }
    let now = Utc::now();
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
    for r in records {
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
}

/// `hermes memory show`.
pub fn show(r: &Memory, json: bool) {
    if json {
        json_line(r);
        return;
    }
    let now = Utc::now();
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

/// `hermes memory search`: the hits, and what scored them (`embedder`; none: BM25 alone).
pub fn search(user: &str, hits: &[RecallHit], embedder: Option<&str>, json: bool) {
    if json {
        hits.iter().for_each(json_line);
        return;
    }
    if hits.is_empty() {
        println!("nothing recalled for `{user}`");
        return;
    }
    println!("{:>6}  {:<36} {} CONTENT", "SCORE", "ID", cell("KEY", 22));
    for h in hits {
        println!(
            "{:>6.3}  {:<36} {} {}",
            h.score,
            h.record.id,
            cell(&h.record.key, 22),
            cell(&h.record.content, 60).trim_end()
        );
    }
    println!(
        "{} recalled ({})",
        hits.len(),
        embedder.unwrap_or("bm25 only")
    );
}

/// `hermes memory forget`: the record forgotten, or none.
pub fn forgot(record: Option<&Memory>, json: bool) {
    match (record, json) {
        (record, true) => json_line(&serde_json::json!({ "forgot": record })),
        (Some(r), false) => println!("forgot {} `{}`: {}", r.id, r.key, r.content),
        (None, false) => println!("nothing to forget"),
    }
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
