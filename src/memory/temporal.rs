//! Time in memories and queries: [`event_time`] resolves a relative date in a memory's text
//! ("yesterday", "last week", "two years ago") against the memory's source time when it is
//! written, and [`query_range`] reads the period a recall query asks about ("in June",
//! "October 2023", "on 13 October, 2023", "in 2022") so recall can favour memories of that
//! period ([`super::recall`]).
//!
//! Both are English-only and deliberately small: they look for a fixed set of phrases, never
//! guess, and return `None` when nothing matches.

use chrono::{DateTime, Datelike, Duration, Months, NaiveDate, TimeZone, Utc};

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Words that make a bare month name a time ("in June"), not a verb ("may", "march").
const MONTH_PREFIXES: &[&str] = &[
    "in", "during", "of", "since", "early", "late", "mid", "last", "this", "next",
];

/// Relative phrases and how far back they point (days, or months when `months` is set).
const RELATIVE: &[(&str, i64, bool)] = &[
    ("yesterday", 1, false),
    ("last night", 1, false),
    ("the day before yesterday", 2, false),
    ("last weekend", 7, false),
    ("this past weekend", 7, false),
    ("last week", 7, false),
    ("a week ago", 7, false),
    ("two weeks ago", 14, false),
    ("a few days ago", 3, false),
    ("last month", 1, true),
    ("a month ago", 1, true),
    ("two months ago", 2, true),
    ("a few months ago", 3, true),
    ("last year", 12, true),
    ("a year ago", 12, true),
    ("two years ago", 24, true),
    ("a few years ago", 36, true),
];

/// When the event a memory's `text` tells of happened, if the text dates it relative to when
/// it was said (`said_at`): "I went there yesterday" said on 8 May → 7 May. The first phrase
/// found wins; `None` when there is none.
pub fn event_time(text: &str, said_at: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let lower = text.to_lowercase();
    let (_, back, months) = RELATIVE
        .iter()
        .filter_map(|entry| find_phrase(&lower, entry.0).map(|at| (at, entry)))
        .min_by_key(|(at, (phrase, _, _))| (*at, std::cmp::Reverse(phrase.len())))?
        .1;
    if *months {
        said_at.checked_sub_months(Months::new(u32::try_from(*back).ok()?))
    } else {
        said_at.checked_sub_signed(Duration::days(*back))
    }
}

/// Byte offset of `phrase` in `text` as whole words.
fn find_phrase(text: &str, phrase: &str) -> Option<usize> {
    text.match_indices(phrase).map(|(i, _)| i).find(|&i| {
        let before = text[..i].chars().next_back();
        let after = text[i + phrase.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// A period a query asks about: `[start, end)`, or a month of any year.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeRange {
    Between(DateTime<Utc>, DateTime<Utc>),
    /// A month (1–12) without a year: that month of every year.
    MonthOfAnyYear(u32),
}

impl TimeRange {
    /// Whether `at` falls in the period.
    pub fn contains(&self, at: DateTime<Utc>) -> bool {
        match self {
            Self::Between(start, end) => *start <= at && at < *end,
            Self::MonthOfAnyYear(month) => at.month() == *month,
        }
    }
}

/// The period `query` names, most precise first: a day ("13 October 2023", "October 13,
/// 2023"), a month of a year ("July 2023"), a year ("in 2022"), a month ("in June").
/// Years outside 1900–2199 are not read as years.
pub fn query_range(query: &str) -> Option<TimeRange> {
    let words: Vec<String> = query
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    let month_at = |i: usize| {
        words
            .get(i)
            .and_then(|w| MONTHS.iter().position(|m| m == w))
            .map(|m| m as u32 + 1)
    };
    let number_at = |i: usize| words.get(i).and_then(|w| w.parse::<i32>().ok());
    let year_at = |i: usize| number_at(i).filter(|y| (1900..2200).contains(y));
    let day_at = |i: usize| {
        number_at(i)
            .filter(|d| (1..=31).contains(d))
            .map(|d| d as u32)
    };
    for i in 0..words.len() {
        let Some(month) = month_at(i) else { continue };
        let day = i.checked_sub(1).and_then(day_at);
        let (day, year) = match (day, day_at(i + 1), year_at(i + 1), year_at(i + 2)) {
            (Some(d), _, Some(y), _) => (Some(d), Some(y)),
            (None, Some(d), _, Some(y)) => (Some(d), Some(y)),
            (None, _, Some(y), _) => (None, Some(y)),
            (d, _, _, _) => (d, None),
        };
        let range = match (day, year) {
            (Some(d), Some(y)) => day_range(y, month, d),
            (None, Some(y)) => month_range(y, month),
            (Some(_), None) => None,
            _ if i > 0 && MONTH_PREFIXES.contains(&words[i - 1].as_str()) => {
                Some(TimeRange::MonthOfAnyYear(month))
            }
            _ => None,
        };
        if range.is_some() {
            return range;
        }
    }
    (0..words.len()).find_map(|i| {
        let year = year_at(i)?;
        let prefixed = i > 0 && matches!(words[i - 1].as_str(), "in" | "during" | "of" | "since");
        prefixed.then(|| year_range(year)).flatten()
    })
}

fn at_midnight(date: NaiveDate) -> Option<DateTime<Utc>> {
    Utc.from_local_datetime(&date.and_hms_opt(0, 0, 0)?)
        .single()
}

fn day_range(year: i32, month: u32, day: u32) -> Option<TimeRange> {
    let start = NaiveDate::from_ymd_opt(year, month, day)?;
    let end = start.succ_opt()?;
    Some(TimeRange::Between(at_midnight(start)?, at_midnight(end)?))
}

fn month_range(year: i32, month: u32) -> Option<TimeRange> {
    let start = NaiveDate::from_ymd_opt(year, month, 1)?;
    let end = start.checked_add_months(Months::new(1))?;
    Some(TimeRange::Between(at_midnight(start)?, at_midnight(end)?))
}

fn year_range(year: i32) -> Option<TimeRange> {
    let start = NaiveDate::from_ymd_opt(year, 1, 1)?;
    let end = NaiveDate::from_ymd_opt(year + 1, 1, 1)?;
    Some(TimeRange::Between(at_midnight(start)?, at_midnight(end)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i32, m: u32, d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, 12, 0, 0).unwrap()
    }

    #[test]
    fn relative_dates_resolve_against_the_time_they_were_said() {
        let said = at(2023, 5, 8);
        assert_eq!(
            event_time("I went to a support group yesterday!", said),
            Some(at(2023, 5, 7))
        );
        assert_eq!(
            event_time("We painted that LAST YEAR.", said),
            Some(at(2022, 5, 8))
        );
        assert_eq!(event_time("met up last week", said), Some(at(2023, 5, 1)));
        assert_eq!(
            event_time("two months ago I moved", said),
            Some(at(2023, 3, 8))
        );
        assert_eq!(event_time("nothing dated here", said), None);
        assert_eq!(
            event_time("the yesterdays of old", said),
            None,
            "whole words only"
        );
        assert_eq!(
            event_time("the day before yesterday, and last year too", said),
            Some(at(2023, 5, 6)),
            "the first and longest phrase wins"
        );
    }

    #[test]
    fn query_periods_from_most_to_least_precise() {
        let day = query_range("What did Caroline share on October 13, 2023?").unwrap();
        assert!(day.contains(at(2023, 10, 13)) && !day.contains(at(2023, 10, 14)));
        let day = query_range("What did Gina find on 1 February, 2023?").unwrap();
        assert!(day.contains(at(2023, 2, 1)) && !day.contains(at(2023, 1, 31)));
        let month = query_range("What did Mel paint in July 2023?").unwrap();
        assert!(month.contains(at(2023, 7, 30)) && !month.contains(at(2023, 8, 1)));
        assert_eq!(
            query_range("camping in June"),
            Some(TimeRange::MonthOfAnyYear(6))
        );
        let year = query_range("How many times at the beach in 2023?").unwrap();
        assert!(year.contains(at(2023, 1, 1)) && !year.contains(at(2022, 12, 31)));
        assert_eq!(
            query_range("What may Caroline do next?"),
            None,
            "`may` is not a month"
        );
        assert_eq!(
            query_range("They march on 2 May, 2024"),
            query_range("2 May 2024")
        );
        assert_eq!(query_range("Which 5000 yuan headphones?"), None);
        assert_eq!(query_range("What is my budget?"), None);
    }
}
