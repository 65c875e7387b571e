//! The data behind the built-in tools: an order dataset loaded from JSON (`{"orders": [...]}`
//! or a bare array),
//! checked at load time, with an embedded demo set (`config/demo-orders.json`).

use std::collections::HashSet;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The order categories `order_lookup` knows (its `category` enum).
pub const CATEGORIES: [&str; 4] = ["headphones", "phone", "laptop", "accessory"];

const DEMO_ORDERS: &str = include_str!("../../../config/demo-orders.json");

/// One order of one user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Order {
    pub order_id: String,
    /// Whose order it is; only this user's calls see it.
    pub user: String,
    /// Order date, `YYYY-MM-DD`.
    pub date: String,
    /// One of [`CATEGORIES`].
    pub category: String,
    pub brand: String,
    pub product: String,
    pub amount_yuan: f64,
    /// e.g. `processing`, `in_transit`, `delivered`, `returned`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carrier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracking: Option<String>,
    /// The latest logistics event, time first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update: Option<String>,
}

/// Everything the built-in tools read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltinData {
    #[serde(default)]
    pub orders: Vec<Order>,
}

/// A dataset that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BuiltinDataError {
    #[error("the order dataset is not valid JSON of the form {{\"orders\": [...]}} or [...]: {0}; fix the file")]
    Parse(#[from] serde_json::Error),
    #[error("order `{order_id}` in the dataset is invalid: {problem}; fix that order")]
    InvalidOrder { order_id: String, problem: String },
}

impl BuiltinData {
    /// Parse and check a dataset, `{"orders": [...]}` or a bare array of orders: dates are
    /// `YYYY-MM-DD`, categories known, ids unique.
    pub fn from_json(text: &str) -> Result<Self, BuiltinDataError> {
        let data: Self = match serde_json::from_str::<Value>(text)? {
            Value::Array(orders) => Self {
                orders: serde_json::from_value(Value::Array(orders))?,
            },
            other => serde_json::from_value(other)?,
        };
        let mut seen = HashSet::new();
        for order in &data.orders {
            let invalid = |problem: String| BuiltinDataError::InvalidOrder {
                order_id: order.order_id.clone(),
                problem,
            };
            if NaiveDate::parse_from_str(&order.date, "%Y-%m-%d").is_err() || order.date.len() != 10
            {
                return Err(invalid(format!("date `{}` is not YYYY-MM-DD", order.date)));
            }
            if !CATEGORIES.contains(&order.category.as_str()) {
                return Err(invalid(format!(
                    "category `{}` is not one of {}",
                    order.category,
                    CATEGORIES.join(", ")
                )));
            }
            if order.user.is_empty() {
                return Err(invalid("the user is empty".to_string()));
            }
            if !seen.insert(order.order_id.as_str()) {
                return Err(invalid("the order id appears twice".to_string()));
            }
        }
        Ok(data)
    }

    /// The embedded demo dataset (users `u-1001` and `u-2002`).
    pub fn demo() -> Result<Self, BuiltinDataError> {
        Self::from_json(DEMO_ORDERS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_dataset_loads_with_the_singles_day_headphones_order() {
        let data = BuiltinData::demo().unwrap();
        assert!(data.orders.len() >= 8);
        let sony = data
            .orders
            .iter()
            .find(|o| o.user == "u-1001" && o.date == "2025-11-11" && o.category == "headphones")
            .unwrap();
        assert!(sony.product.contains("WH-1000XM5"));
        assert_eq!(sony.status, "in_transit");
        assert!(sony.carrier.is_some() && sony.tracking.is_some() && sony.last_update.is_some());
        assert!(data.orders.iter().any(|o| o.user == "u-2002"));
    }

    #[test]
    fn dataset_with_a_bad_date_or_category_is_rejected() {
        let order = |date: &str, category: &str| {
            format!(
                r#"{{"orders": [{{"order_id": "X", "user": "u", "date": "{date}", "category": "{category}",
                "brand": "b", "product": "p", "amount_yuan": 1.0, "status": "delivered"}}]}}"#
            )
        };
        assert!(BuiltinData::from_json(&order("2025-11-11", "phone")).is_ok());
        let bad_date = BuiltinData::from_json(&order("2025/11/11", "phone")).unwrap_err();
        assert!(bad_date.to_string().contains("YYYY-MM-DD"), "{bad_date}");
        let bad_category = BuiltinData::from_json(&order("2025-11-11", "tv")).unwrap_err();
        assert!(matches!(
            bad_category,
            BuiltinDataError::InvalidOrder { .. }
        ));
        for garbage in ["not json", r#"{"orders": 5}"#, r#"{"order": []}"#, "7"] {
            assert!(matches!(
                BuiltinData::from_json(garbage),
                Err(BuiltinDataError::Parse(_))
            ));
        }
        let bare = format!(
            "[{}]",
            order("2025-11-11", "phone")
                .trim_start_matches(r#"{"orders": ["#)
                .trim_end_matches("]}")
        );
        assert_eq!(BuiltinData::from_json(&bare).unwrap().orders.len(), 1);
    }

    #[test]
    fn duplicate_order_ids_are_rejected() {
        let one = r#"{"order_id": "X", "user": "u", "date": "2025-11-11", "category": "phone",
            "brand": "b", "product": "p", "amount_yuan": 1.0, "status": "delivered"}"#;
        let text = format!(r#"{{"orders": [{one}, {one}]}}"#);
        assert!(BuiltinData::from_json(&text).is_err());
    }
}
