//! The safe-repair walk: guided by a schema's `properties` (top level, nested objects and
//! array items, through local `$ref`s and `allOf`/`anyOf`/`oneOf` branches), rewrite only the
//! leaves the validator flagged, and only in these documented ways:
//!
//! - a number or integer sent as a string: `"3"` → `3`, `" 2.5 "` → `2.5` (the text must be a
//!   clean JSON number; an integer only when the value is integral; never lossy);
//! - a boolean sent as `"true"`/`"false"` in any case;
//! - an enum value in the wrong case matched to the one allowed value (`"Headphones"` →
//!   `"headphones"`); no match, or more than one, is left alone;
//! - a `format: "date"` / `"date-time"` value normalised (see [`super::dates`]);
//! - a string with surrounding whitespace trimmed.
//!
//! Nothing is ever added: a missing required field stays missing.

use std::collections::HashSet;

use serde_json::{Number, Value};

use super::dates::{normalise_date, normalise_date_time};

/// How many local `$ref` hops are followed before giving up (guards against cycles).
const MAX_REF_HOPS: usize = 16;
/// Longest digit run accepted when turning a string into a non-integer number (f64 precision).
const MAX_FLOAT_DIGITS: usize = 15;

/// Repair `arguments` in place; returns one human-readable line per correction.
///
/// `flagged` holds the JSON pointers (`/a/0/b`) of the values the validator reported.
pub(crate) fn repair(
    root: &Value,
    arguments: &mut Value,
    flagged: &HashSet<String>,
) -> Vec<String> {
    let mut walk = Walk {
        root,
        flagged,
        corrections: Vec::new(),
    };
    walk.visit(root, arguments, String::new(), 0);
    walk.corrections
}

struct Walk<'a> {
    root: &'a Value,
    flagged: &'a HashSet<String>,
    corrections: Vec<String>,
}

impl<'a> Walk<'a> {
    fn visit(&mut self, schema: &'a Value, value: &mut Value, path: String, depth: usize) {
        if depth > 64 {
            return;
        }
        let schema = resolve(self.root, schema);
        match value {
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    if let Some(sub) = property_schema(self.root, schema, key) {
                        let child_path = format!("{path}/{}", escape(key));
                        self.visit(sub, child, child_path, depth + 1);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(sub) = schema.get("items").filter(|s| s.is_object()) {
                    for (index, child) in items.iter_mut().enumerate() {
                        self.visit(sub, child, format!("{path}/{index}"), depth + 1);
                    }
                }
            }
            Value::String(_) if self.flagged.contains(&path) => {
                let facts = LeafFacts::gather(self.root, schema);
                if let Some((new, reason)) = facts.repair(value) {
                    let shown_path = if path.is_empty() { "/" } else { &path };
                    self.corrections
                        .push(format!("{shown_path}: {value} → {new} ({reason})"));
                    *value = new;
                }
            }
            _ => {}
        }
    }
}

/// Follow local `$ref`s (`#/...`) from `schema`; a remote or broken `$ref` stops the walk there.
fn resolve<'a>(root: &'a Value, mut schema: &'a Value) -> &'a Value {
    for _ in 0..MAX_REF_HOPS {
        let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
            break;
        };
        let target = match reference.strip_prefix('#') {
            Some("") => Some(root),
            Some(pointer) => root.pointer(pointer),
            None => None,
        };
        match target {
            Some(next) => schema = next,
            None => break,
        }
    }
    schema
}

/// The schema a property `key` of an object described by `schema` must match.
fn property_schema<'a>(root: &'a Value, schema: &'a Value, key: &str) -> Option<&'a Value> {
    if let Some(found) = schema.get("properties").and_then(|p| p.get(key)) {
        return Some(found);
    }
    for keyword in ["allOf", "anyOf", "oneOf"] {
        let branches = schema.get(keyword).and_then(Value::as_array);
        for branch in branches.into_iter().flatten() {
            let branch = resolve(root, branch);
            if let Some(found) = branch.get("properties").and_then(|p| p.get(key)) {
                return Some(found);
            }
        }
    }
    schema.get("additionalProperties").filter(|s| s.is_object())
}

/// JSON-pointer escaping of one path segment (RFC 6901).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// What a leaf's schema allows, collected from the schema and its `anyOf`/`oneOf` branches.
#[derive(Default)]
struct LeafFacts {
    types: Vec<String>,
    enum_strings: Vec<String>,
    format: Option<String>,
}

impl LeafFacts {
    fn gather(root: &Value, schema: &Value) -> Self {
        let mut facts = Self::default();
        facts.absorb(schema);
        for keyword in ["allOf", "anyOf", "oneOf"] {
            let branches = schema.get(keyword).and_then(Value::as_array);
            for branch in branches.into_iter().flatten() {
                facts.absorb(resolve(root, branch));
            }
        }
        facts
    }

    fn absorb(&mut self, schema: &Value) {
        match schema.get("type") {
            Some(Value::String(kind)) => self.types.push(kind.clone()),
            Some(Value::Array(kinds)) => self
                .types
                .extend(kinds.iter().filter_map(Value::as_str).map(str::to_string)),
            _ => {}
        }
        let allowed = schema.get("enum").and_then(Value::as_array).into_iter();
        let constant = schema.get("const").into_iter();
        self.enum_strings.extend(
            allowed
                .flatten()
                .chain(constant)
                .filter_map(Value::as_str)
                .map(str::to_string),
        );
        if self.format.is_none() {
            self.format = schema
                .get("format")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
    }

    fn allows(&self, kind: &str) -> bool {
        self.types.iter().any(|t| t == kind)
    }

    /// The repaired value and the reason, or `None` when no safe repair applies.
    fn repair(&self, value: &Value) -> Option<(Value, &'static str)> {
        let text = value.as_str()?;
        if self.types.is_empty() || self.allows("string") {
            return self
                .repair_string(text)
                .map(|(new, why)| (Value::String(new), why));
        }
        let trimmed = text.trim();
        if self.allows("integer") && !self.allows("number") {
            if let Some(n) = clean_integer(trimmed) {
                return Some((Value::Number(n), "integer sent as a string"));
            }
        }
        if self.allows("number") {
            if let Some(n) = clean_number(trimmed) {
                return Some((Value::Number(n), "number sent as a string"));
            }
        }
        if self.allows("boolean") {
            for (word, flag) in [("true", true), ("false", false)] {
                if trimmed.eq_ignore_ascii_case(word) {
                    return Some((Value::Bool(flag), "boolean sent as a string"));
                }
            }
        }
        None
    }

    fn repair_string(&self, text: &str) -> Option<(String, &'static str)> {
        let trimmed = text.trim();
        if !self.enum_strings.is_empty() {
            let lower = trimmed.to_lowercase();
            let mut matches = self
                .enum_strings
                .iter()
                .filter(|allowed| allowed.to_lowercase() == lower);
            let (Some(only), None) = (matches.next(), matches.next()) else {
                return None;
            };
            return match (only == text, only == trimmed) {
                (true, _) => None,
                (false, true) => Some((only.clone(), "surrounding whitespace trimmed")),
                (false, false) => Some((only.clone(), "enum value matched case-insensitively")),
            };
        }
        let normalised = match self.format.as_deref() {
            Some("date") => normalise_date(trimmed).map(|d| (d, "date normalised to ISO-8601")),
            Some("date-time") => {
                normalise_date_time(trimmed).map(|d| (d, "date-time normalised to RFC 3339"))
            }
            _ => None,
        };
        match normalised {
            Some((new, why)) if new != text => Some((new, why)),
            Some(_) => None,
            None if trimmed != text => {
                Some((trimmed.to_string(), "surrounding whitespace trimmed"))
            }
            None => None,
        }
    }
}

/// `text` as a JSON number, if it is exactly one (no `+`, no leading zeros, no junk).
fn parse_number(text: &str) -> Option<Number> {
    let starts_ok = text.starts_with(|c: char| c == '-' || c.is_ascii_digit());
    if !starts_ok {
        return None;
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Number(n)) => Some(n),
        _ => None,
    }
}

/// An integral clean number (`"3"`, `"-7"`, `"3.0"`), exactly representable.
fn clean_integer(text: &str) -> Option<Number> {
    let n = parse_number(text)?;
    if n.is_i64() || n.is_u64() {
        return Some(n);
    }
    let f = n.as_f64()?;
    let exact = f.is_finite() && f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0;
    // The range check above makes the cast exact.
    exact.then(|| Number::from(f as i64))
}

/// A clean number that survives the conversion without losing digits.
fn clean_number(text: &str) -> Option<Number> {
    let n = parse_number(text)?;
    if n.is_i64() || n.is_u64() {
        return Some(n);
    }
    let mantissa = text.split(['e', 'E']).next().unwrap_or(text);
    let digits = mantissa
        .trim_start_matches('-')
        .trim_start_matches(['0', '.'])
        .chars()
        .filter(char::is_ascii_digit)
        .count();
    (digits <= MAX_FLOAT_DIGITS).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flagged(paths: &[&str]) -> HashSet<String> {
        paths.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn only_flagged_leaves_are_touched() {
        let schema = json!({"properties": {"a": {"type": "string"}, "b": {"type": "string"}}});
        let mut args = json!({"a": " x ", "b": " y "});
        let corrections = repair(&schema, &mut args, &flagged(&["/a"]));
        assert_eq!(args, json!({"a": "x", "b": " y "}));
        assert_eq!(
            corrections,
            vec![r#"/a: " x " → "x" (surrounding whitespace trimmed)"#]
        );
    }

    #[test]
    fn nested_objects_arrays_and_local_refs_are_followed() {
        let schema = json!({
            "$defs": {"item": {"type": "object", "properties": {"qty": {"type": "integer"}}}},
            "properties": {
                "cart": {"type": "object", "properties": {
                    "items": {"type": "array", "items": {"$ref": "#/$defs/item"}}
                }}
            }
        });
        let mut args = json!({"cart": {"items": [{"qty": "2"}, {"qty": 3}]}});
        let corrections = repair(&schema, &mut args, &flagged(&["/cart/items/0/qty"]));
        assert_eq!(args, json!({"cart": {"items": [{"qty": 2}, {"qty": 3}]}}));
        assert_eq!(corrections.len(), 1);
    }

    #[test]
    fn nullable_integer_via_any_of_is_repaired() {
        let schema =
            json!({"properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}});
        let mut args = json!({"n": "4"});
        repair(&schema, &mut args, &flagged(&["/n"]));
        assert_eq!(args, json!({"n": 4}));
    }

    #[test]
    fn numbers_must_be_clean_and_integers_integral() {
        assert_eq!(clean_integer("3"), Some(Number::from(3)));
        assert_eq!(clean_integer("3.0"), Some(Number::from(3)));
        assert_eq!(clean_integer("2.5"), None);
        assert_eq!(clean_integer("1e400"), None);
        for junk in ["3 apples", "+3", "007", "0x10", "NaN", "", "three", "3,000"] {
            assert_eq!(clean_integer(junk), None, "{junk}");
            assert_eq!(clean_number(junk), None, "{junk}");
        }
        assert_eq!(clean_number("2.5").and_then(|n| n.as_f64()), Some(2.5));
        assert_eq!(clean_number("0.1234567890123456789"), None);
        assert_eq!(clean_integer("123456789012345678901234"), None);
    }

    #[test]
    fn ambiguous_enum_case_is_not_guessed() {
        let facts = LeafFacts {
            types: vec!["string".into()],
            enum_strings: vec!["Red".into(), "red".into()],
            format: None,
        };
        assert_eq!(facts.repair(&json!("RED")), None);
        assert_eq!(facts.repair(&json!("blue")), None);
    }
}
