//! Date and date-time normalisation for the safe-repair step: common human and regional
//! formats are rewritten to ISO-8601 dates (`YYYY-MM-DD`) and RFC 3339 date-times, but only when
//! the reading is unambiguous.
//!
//! Accepted dates: `2025-11-11` (already fine), `2025-1-5`, `2025/11/11`, `2025.11.11`,
//! `2025年11月11日` (also `号` or no suffix), `20251111`, and `A/B/YYYY` (also with `-` or `.`)
//! **only when it reads the same in day/month and month/day order**: one of A, B is greater
//! than 12 (`25/12/2025`, `12/25/2025`) or A equals B (`11/11/2025`). `03/04/2025` is
//! ambiguous (3 April or 4 March) and is never guessed.
//!
//! Accepted date-times: an RFC 3339 value with a space instead of `T`, an offset without a
//! colon (`+0800`), a missing seconds field, or any accepted date form before the time. A
//! date-time with no offset or `Z` is ambiguous (which time zone?) and is never guessed.

use chrono::{DateTime, FixedOffset, NaiveDate, SecondsFormat};

/// The ISO-8601 form of `input` if it is an unambiguous date, else `None`.
pub(crate) fn normalise_date(input: &str) -> Option<String> {
    let (year, month, day) = split_date(input.trim())?;
    let date = NaiveDate::from_ymd_opt(year, month, day)?;
    Some(date.format("%Y-%m-%d").to_string())
}

/// The RFC 3339 form of `input` if it is an unambiguous date-time, else `None`.
pub(crate) fn normalise_date_time(input: &str) -> Option<String> {
    let input = input.trim();
    let split_at = input.find(['T', 't', ' '])?;
    let (date_part, time_part) = (&input[..split_at], input[split_at + 1..].trim_start());
    let date = normalise_date(date_part)?;
    let time = normalise_offset(time_part)?;
    let candidate = format!("{date}T{time}");
    let parsed = parse_with_offset(&candidate)?;
    Some(parsed.to_rfc3339_opts(SecondsFormat::AutoSi, true))
}

/// Split a date string into (year, month, day) following the rules in the module doc.
fn split_date(s: &str) -> Option<(i32, u32, u32)> {
    if let Some(parts) = split_cjk(s) {
        return Some(parts);
    }
    if s.len() == 8 && s.bytes().all(|b| b.is_ascii_digit()) {
        return Some((
            s[..4].parse().ok()?,
            s[4..6].parse().ok()?,
            s[6..].parse().ok()?,
        ));
    }
    let separator = ['-', '/', '.'].into_iter().find(|c| s.contains(*c))?;
    let parts: Vec<&str> = s.split(separator).collect();
    let [a, b, c] = parts.as_slice() else {
        return None;
    };
    if !parts
        .iter()
        .all(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    if a.len() == 4 && b.len() <= 2 && c.len() <= 2 {
        return Some((a.parse().ok()?, b.parse().ok()?, c.parse().ok()?));
    }
    if c.len() == 4 && a.len() <= 2 && b.len() <= 2 {
        let (first, second): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
        let year = c.parse().ok()?;
        return match (first > 12, second > 12) {
            (true, false) => Some((year, second, first)),
            (false, true) => Some((year, first, second)),
            (false, false) if first == second => Some((year, first, second)),
            _ => None,
        };
    }
    None
}

/// `2025年11月11日` / `2025年11月11号` / `2025年11月11`.
fn split_cjk(s: &str) -> Option<(i32, u32, u32)> {
    let (year, rest) = s.split_once('年')?;
    let (month, rest) = rest.split_once('月')?;
    let day = rest
        .strip_suffix('日')
        .or_else(|| rest.strip_suffix('号'))
        .unwrap_or(rest);
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if !(digits(year.trim()) && digits(month.trim()) && digits(day.trim())) {
        return None;
    }
    Some((
        year.trim().parse().ok()?,
        month.trim().parse().ok()?,
        day.trim().parse().ok()?,
    ))
}

/// Make the time part's offset RFC 3339 shaped (`Z`, `+08:00`); `None` when there is none.
fn normalise_offset(time: &str) -> Option<String> {
    if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        return Some(format!("{}Z", clock.trim_end()));
    }
    let sign_at = time.rfind(['+', '-'])?;
    let (clock, offset) = (time[..sign_at].trim_end(), &time[sign_at..]);
    let digits: String = offset[1..].chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(format!(
        "{clock}{}{}:{}",
        &offset[..1],
        &digits[..2],
        &digits[2..]
    ))
}

/// Parse a `YYYY-MM-DDThh:mm[:ss[.f]](Z|±hh:mm)` string.
fn parse_with_offset(candidate: &str) -> Option<DateTime<FixedOffset>> {
    if let Ok(parsed) = DateTime::parse_from_rfc3339(candidate) {
        return Some(parsed);
    }
    let with_offset = match candidate.strip_suffix('Z') {
        Some(rest) => format!("{rest}+00:00"),
        None => candidate.to_string(),
    };
    DateTime::parse_from_str(&with_offset, "%Y-%m-%dT%H:%M%:z").ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_date_forms_become_iso_8601() {
        for input in [
            "2025-11-11",
            "2025/11/11",
            "2025.11.11",
            "2025-11-11 ",
            "2025年11月11日",
            "2025年11月11号",
            "20251111",
            "11/11/2025",
        ] {
            assert_eq!(
                normalise_date(input).as_deref(),
                Some("2025-11-11"),
                "{input}"
            );
        }
        assert_eq!(normalise_date("2025/1/5").as_deref(), Some("2025-01-05"));
        assert_eq!(
            normalise_date("2025年1月5日").as_deref(),
            Some("2025-01-05")
        );
    }

    #[test]
    fn day_month_order_is_used_only_when_unambiguous() {
        assert_eq!(normalise_date("25/12/2025").as_deref(), Some("2025-12-25"));
        assert_eq!(normalise_date("12/25/2025").as_deref(), Some("2025-12-25"));
        assert_eq!(normalise_date("03/04/2025"), None);
    }

    #[test]
    fn impossible_or_garbled_dates_are_not_normalised() {
        for input in [
            "2025/13/01",
            "2025/02/30",
            "yesterday",
            "Nov 11",
            "2025-11",
            "2025/11/11/1",
            "99999999x",
            "2025年十一月11日",
            "",
        ] {
            assert_eq!(normalise_date(input), None, "{input}");
        }
    }

    #[test]
    fn date_times_with_an_offset_become_rfc_3339() {
        let cases = [
            ("2025-11-11 10:30:00Z", "2025-11-11T10:30:00Z"),
            ("2025-11-11T10:30:00+0800", "2025-11-11T10:30:00+08:00"),
            ("2025/11/11 10:30+08:00", "2025-11-11T10:30:00+08:00"),
            ("2025-11-11T10:30:00.5z", "2025-11-11T10:30:00.500Z"),
        ];
        for (input, expected) in cases {
            assert_eq!(
                normalise_date_time(input).as_deref(),
                Some(expected),
                "{input}"
            );
        }
    }

    #[test]
    fn date_times_without_an_offset_are_not_guessed() {
        assert_eq!(normalise_date_time("2025-11-11 10:30:00"), None);
        assert_eq!(normalise_date_time("2025-11-11"), None);
        assert_eq!(normalise_date_time("1731290000"), None);
    }
}
