//! Timestamps on the wire and in records: the RFC 3339 text chrono's serde writes
//! (`2026-12-01T14:13:18.123456Z`), written and read without chrono's formatter.
//!
//! chrono serialises through `collect_str`, which made serde_json escape every character
//! separately: a twelfth of the CPU of a turn went into writing timestamps. Use as
//! `#[serde(with = "crate::timestamp")]` (or [`option`] for `Option`s); the text is
//! byte for byte chrono's, and anything this fast path does not cover (years outside
//! 0000–9999, leap seconds, offsets other than `Z`) goes through chrono itself.

use chrono::{DateTime, Datelike, FixedOffset, NaiveDate, SecondsFormat, Timelike, Utc};
use serde::{de, Deserializer, Serializer};

/// Longest text [`write`] produces: `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`.
const MAX_LEN: usize = 30;

pub fn serialize<S: Serializer>(ts: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    let mut buf = [0u8; MAX_LEN];
    match write(ts, &mut buf) {
        // The buffer holds ASCII digits and separators only.
        Some(len) => serializer.serialize_str(std::str::from_utf8(&buf[..len]).unwrap_or("")),
        None => serializer.serialize_str(&ts.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<DateTime<Utc>, D::Error> {
    deserializer.deserialize_str(Visitor)
}

/// The same for `Option<DateTime<Utc>>` (`null` is `None`).
pub mod option {
    use super::*;

    pub fn serialize<S: Serializer>(
        ts: &Option<DateTime<Utc>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match ts {
            Some(ts) => super::serialize(ts, serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<DateTime<Utc>>, D::Error> {
        deserializer.deserialize_option(OptionVisitor)
    }

    struct OptionVisitor;

    impl<'de> de::Visitor<'de> for OptionVisitor {
        type Value = Option<DateTime<Utc>>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an RFC 3339 date and time, or null")
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            super::deserialize(d).map(Some)
        }
    }
}

struct Visitor;

impl de::Visitor<'_> for Visitor {
    type Value = DateTime<Utc>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an RFC 3339 formatted date and time string")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        if let Some(ts) = read(text) {
            return Ok(ts);
        }
        text.parse::<DateTime<FixedOffset>>()
            .map(|ts| ts.with_timezone(&Utc))
            .map_err(E::custom)
    }
}

/// Write `ts` as chrono does (`SecondsFormat::AutoSi`, `Z`); `None` where this fast path does
/// not apply.
fn write(ts: &DateTime<Utc>, buf: &mut [u8; MAX_LEN]) -> Option<usize> {
    let year = u32::try_from(ts.year()).ok().filter(|y| *y <= 9999)?;
    let nano = ts.nanosecond();
    if nano >= 1_000_000_000 {
        return None;
    }
    let mut out = Writer { buf, at: 0 };
    out.number(year, 4);
    out.byte(b'-');
    out.number(ts.month(), 2);
    out.byte(b'-');
    out.number(ts.day(), 2);
    out.byte(b'T');
    out.number(ts.hour(), 2);
    out.byte(b':');
    out.number(ts.minute(), 2);
    out.byte(b':');
    out.number(ts.second(), 2);
    let fraction = match nano {
        0 => None,
        n if n % 1_000_000 == 0 => Some((n / 1_000_000, 3)),
        n if n % 1_000 == 0 => Some((n / 1_000, 6)),
        n => Some((n, 9)),
    };
    if let Some((value, digits)) = fraction {
        out.byte(b'.');
        out.number(value, digits);
    }
    out.byte(b'Z');
    Some(out.at)
}

struct Writer<'a> {
    buf: &'a mut [u8; MAX_LEN],
    at: usize,
}

impl Writer<'_> {
    fn byte(&mut self, b: u8) {
        self.buf[self.at] = b;
        self.at += 1;
    }

    /// `value` in exactly `digits` decimal digits (it has no more).
    fn number(&mut self, value: u32, digits: u32) {
        for i in (0..digits).rev() {
            self.byte(b'0' + (value / 10u32.pow(i) % 10) as u8);
        }
    }
}

/// Read the shape [`write`] produces; `None` for anything else (chrono reads those).
fn read(text: &str) -> Option<DateTime<Utc>> {
    let b = text.as_bytes();
    if b.len() < 20 || b[b.len() - 1] != b'Z' {
        return None;
    }
    let num = |from: usize, n: usize| -> Option<u32> {
        b.get(from..from + n)?.iter().try_fold(0u32, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
        })
    };
    let seps = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if seps.iter().any(|&(i, c)| b[i] != c) {
        return None;
    }
    let nano = match b.len() - 20 {
        0 => 0,
        4 if b[19] == b'.' => num(20, 3)? * 1_000_000,
        7 if b[19] == b'.' => num(20, 6)? * 1_000,
        10 if b[19] == b'.' => num(20, 9)?,
        _ => return None,
    };
    let date = NaiveDate::from_ymd_opt(i32::try_from(num(0, 4)?).ok()?, num(5, 2)?, num(8, 2)?)?;
    let time = date.and_hms_nano_opt(num(11, 2)?, num(14, 2)?, num(17, 2)?, nano)?;
    Some(time.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Ours {
        #[serde(with = "super")]
        ts: DateTime<Utc>,
        #[serde(with = "super::option", default)]
        maybe: Option<DateTime<Utc>>,
    }

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Chronos {
        ts: DateTime<Utc>,
        maybe: Option<DateTime<Utc>>,
    }

    fn both(ts: DateTime<Utc>) -> (String, String) {
        let ours = serde_json::to_string(&Ours {
            ts,
            maybe: Some(ts),
        })
        .unwrap();
        let chronos = serde_json::to_string(&Chronos {
            ts,
            maybe: Some(ts),
        })
        .unwrap();
        (ours, chronos)
    }

    #[test]
    fn text_is_chronos_for_every_fraction_width_and_edge() {
        let base = Utc.with_ymd_and_hms(2026, 12, 1, 14, 3, 9).unwrap();
        for nanos in [
            0,
            5_000_000,
            123_000_000,
            1_000,
            123_456_000,
            1,
            123_456_789,
            999_999_999,
        ] {
            let ts = base + chrono::Duration::nanoseconds(nanos);
            let (ours, chronos) = both(ts);
            assert_eq!(ours, chronos);
            assert_eq!(serde_json::from_str::<Ours>(&ours).unwrap().ts, ts);
        }
        for ts in [
            Utc.with_ymd_and_hms(0, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap(),
            Utc.with_ymd_and_hms(10000, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(-5, 6, 7, 8, 9, 10).unwrap(),
        ] {
            let (ours, chronos) = both(ts);
            assert_eq!(ours, chronos);
            assert_eq!(serde_json::from_str::<Ours>(&ours).unwrap().ts, ts);
        }
    }

    #[test]
    fn other_rfc3339_forms_and_null_are_read_as_chrono_reads_them() {
        let json = r#"{"ts":"2026-12-01T15:03:09.5+01:00","maybe":null}"#;
        let ours: Ours = serde_json::from_str(json).unwrap();
        let chronos: Chronos = serde_json::from_str(json).unwrap();
        assert_eq!(ours.ts, chronos.ts);
        assert_eq!(ours.maybe, None);
        let missing: Ours = serde_json::from_str(r#"{"ts":"2026-12-01T14:03:09Z"}"#).unwrap();
        assert_eq!(missing.maybe, None);
        let bad = serde_json::from_str::<Ours>(r#"{"ts":"2026-13-01T14:03:09Z"}"#);
        assert!(bad.is_err());
    }

    proptest! {
        #[test]
        fn any_instant_round_trips_with_chronos_text(
            secs in -62_000_000_000i64..253_402_300_799i64,
            nanos in prop_oneof![Just(0u32), (0u32..1000).prop_map(|m| m * 1_000_000),
                                 (0u32..1_000_000).prop_map(|u| u * 1_000), 0u32..1_000_000_000],
        ) {
            let ts = Utc.timestamp_opt(secs, nanos).unwrap();
            let (ours, chronos) = both(ts);
            prop_assert_eq!(&ours, &chronos);
            prop_assert_eq!(serde_json::from_str::<Ours>(&ours).unwrap().ts, ts);
        }
    }
}
