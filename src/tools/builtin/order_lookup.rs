//! `order_lookup`: finds the calling user's orders in the order dataset by id, date or
//! category. The user is never a model argument: the engine injects `_user` after validation
//! (see [`crate::tools::registry`]), and the tool refuses to run without it, so a call only
//! ever sees the caller's own orders.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::data::{Order, CATEGORIES};
use crate::llm::ToolSpec;
use crate::tools::registry::USER_ARG;
use crate::tools::{Tool, ToolError, ToolErrorCode};

pub const NAME: &str = "order_lookup";
/// Orders returned when the call sets no `limit`.
const DEFAULT_LIMIT: usize = 10;
const MAX_LIMIT: usize = 20;
const NO_MATCH_NOTE: &str = "no orders match; check the date or ask the user";

const DESCRIPTION: &str = "Look up the current user's own orders: product, brand, amount, \
status and logistics (carrier, tracking number, latest update). \
Use it for any question about the user's purchases, deliveries or returns (\"where is the \
headphones I bought on Singles' Day?\"); do not use it for product advice or other users' \
orders, and never answer order questions from memory. \
Parameters (give at least one of order_id, order_date, category): \
`order_id` string, the exact order id (e.g. \"JD-20251111-0042\"); \
`order_date` string, the day the order was placed as YYYY-MM-DD (Singles' Day / 双十一 is \
YYYY-11-11; call current_time first if you need the year); \
`category` one of \"headphones\", \"phone\", \"laptop\", \"accessory\"; \
`limit` integer 1–20, most orders to return (default 10). Filters combine with AND. \
Returns {\"orders\": [{order_id, date, category, brand, product, amount_yuan, status, carrier, \
tracking, last_update}], \"count\": n}, newest first; with no match, count is 0 and a `note` \
says so — then check the date or ask the user instead of guessing. \
Errors: invalid_arguments when no filter is given or a value has the wrong format.";

/// The `order_lookup` tool over a shared order dataset.
#[derive(Debug, Clone)]
pub struct OrderLookup {
    orders: Arc<Vec<Order>>,
}

impl OrderLookup {
    pub fn new(orders: Vec<Order>) -> Self {
        Self {
            orders: Arc::new(orders),
        }
    }
}

#[async_trait]
impl Tool for OrderLookup {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: DESCRIPTION.to_string(),
            input_schema: input_schema(),
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(10)
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let user = arguments
            .get(USER_ARG)
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                ToolError::new(
                    ToolErrorCode::ExecutionFailed,
                    "order_lookup needs the caller's user id (`_user`), which the engine injects; \
                     this call did not carry one",
                )
                .with_hint("run the call through the tool-executor, which adds the user")
            })?;
        let text = |key: &str| arguments.get(key).and_then(Value::as_str);
        let (order_id, date, category) = (text("order_id"), text("order_date"), text("category"));
        let limit = arguments
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_LIMIT, |n| usize::try_from(n).unwrap_or(MAX_LIMIT))
            .clamp(1, MAX_LIMIT);
        let mut matches: Vec<&Order> = self
            .orders
            .iter()
            .filter(|o| o.user == user)
            .filter(|o| order_id.is_none_or(|id| o.order_id == id))
            .filter(|o| date.is_none_or(|d| o.date == d))
            .filter(|o| category.is_none_or(|c| o.category == c))
            .collect();
        matches.sort_by(|x, y| {
            y.date
                .cmp(&x.date)
                .then_with(|| x.order_id.cmp(&y.order_id))
        });
        Ok(render(&matches, limit))
    }
}

fn render(matches: &[&Order], limit: usize) -> Value {
    if matches.is_empty() {
        return json!({"orders": [], "count": 0, "note": NO_MATCH_NOTE});
    }
    let shown: Vec<Value> = matches.iter().take(limit).map(|o| view(o)).collect();
    let count = shown.len();
    let mut out = json!({"orders": shown, "count": count});
    if matches.len() > count {
        out["note"] = json!(format!(
            "{} more orders match; raise `limit` (at most {MAX_LIMIT}) or narrow the filters",
            matches.len() - count
        ));
    }
    out
}

/// An order as the model sees it: everything but the owner (always the caller).
fn view(order: &Order) -> Value {
    let mut value = serde_json::to_value(order).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.remove("user");
    }
    value
}

fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "order_id": {
                "type": "string", "minLength": 1,
                "description": "exact order id, e.g. \"JD-20251111-0042\""
            },
            "order_date": {
                "type": "string", "format": "date",
                "description": "day the order was placed, YYYY-MM-DD"
            },
            "category": {
                "type": "string", "enum": CATEGORIES,
                "description": "product category"
            },
            "limit": {
                "type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                "description": "most orders to return, default 10"
            },
            USER_ARG: {
                "type": "string",
                "description": "injected by the engine: the calling user's id; never sent by the model"
            }
        },
        "anyOf": [
            {"required": ["order_id"]},
            {"required": ["order_date"]},
            {"required": ["category"]}
        ],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::builtin::BuiltinData;

    fn tool() -> OrderLookup {
        OrderLookup::new(BuiltinData::demo().unwrap().orders)
    }

    fn ids(out: &Value) -> Vec<&str> {
        out["orders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["order_id"].as_str().unwrap())
            .collect()
    }

    #[tokio::test]
    async fn date_and_category_filters_find_the_singles_day_headphones() {
        let args = json!({"order_date": "2025-11-11", "category": "headphones", "_user": "u-1001"});
        let out = tool().call(args).await.unwrap();
        assert_eq!(out["count"], json!(1));
        assert_eq!(out["orders"][0]["brand"], json!("Sony"));
        assert_eq!(out["orders"][0]["status"], json!("in_transit"));
        assert!(out["orders"][0].get("user").is_none());
    }

    #[tokio::test]
    async fn results_are_newest_first_and_limited() {
        let args = json!({"category": "headphones", "_user": "u-1001"});
        let out = tool().call(args).await.unwrap();
        assert_eq!(ids(&out), vec!["JD-20251111-0042", "TM-20250618-3320"]);
        let limited = json!({"category": "headphones", "limit": 1, "_user": "u-1001"});
        let out = tool().call(limited).await.unwrap();
        assert_eq!(ids(&out), vec!["JD-20251111-0042"]);
        assert!(out["note"].as_str().unwrap().contains("1 more"));
    }

    #[tokio::test]
    async fn order_id_filter_is_exact() {
        let args = json!({"order_id": "TM-20251002-7781", "_user": "u-1001"});
        assert_eq!(
            ids(&tool().call(args).await.unwrap()),
            vec!["TM-20251002-7781"]
        );
    }

    #[tokio::test]
    async fn another_users_orders_are_invisible() {
        let args = json!({"order_id": "JD-20251111-0042", "_user": "u-2002"});
        let out = tool().call(args).await.unwrap();
        assert_eq!(
            out,
            json!({"orders": [], "count": 0, "note": NO_MATCH_NOTE})
        );
        let own = json!({"order_date": "2025-11-11", "_user": "u-2002"});
        assert_eq!(
            ids(&tool().call(own).await.unwrap()),
            vec!["JD-20251111-0517"]
        );
    }

    #[tokio::test]
    async fn no_match_returns_an_empty_list_with_a_note() {
        let args = json!({"order_date": "2024-11-11", "_user": "u-1001"});
        let out = tool().call(args).await.unwrap();
        assert_eq!(out["count"], json!(0));
        assert_eq!(out["note"], json!(NO_MATCH_NOTE));
    }

    #[tokio::test]
    async fn refuses_to_run_without_an_injected_user() {
        let err = tool().call(json!({"category": "phone"})).await.unwrap_err();
        assert_eq!(err.code, ToolErrorCode::ExecutionFailed);
        assert!(err.message.contains("_user"));
    }
}
