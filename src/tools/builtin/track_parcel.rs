//! `track_parcel`: the team demo's async carrier-tracking job. It "asks the carrier" for a
//! parcel's latest scans for a few seconds, reporting progress, then returns where the parcel
//! is — the kind of slow lookup a logistics agent starts and waits on without blocking anyone.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::data::Order;
use crate::llm::ToolSpec;
use crate::tools::definition::{ToolDefinition, ToolEffect, ToolMode};
use crate::tools::{Progress, Tool, ToolError, ToolErrorCode};

pub const NAME: &str = "track_parcel";
/// Longest allowed run, seconds.
const MAX_SECONDS: u64 = 120;

const DESCRIPTION: &str = "Ask the carrier where a parcel is; runs in the background. \
Use it when someone needs a shipment's current location or delivery estimate; do not use it \
for order details (order_lookup). \
Parameters: `tracking_number` string (e.g. \"SF1428837610295\"), required; `seconds` integer \
1–120, how long the carrier query may take (default 2). \
Returns at once {\"job_id\", \"status\": \"submitted\"}; when done {\"tracking_number\", \
\"carrier\", \"status\", \"last_scan\", \"eta\"}. \
Errors: execution_failed when the carrier knows no such tracking number.";

/// The `track_parcel` tool over the built-in orders.
#[derive(Debug, Clone)]
pub struct TrackParcel {
    orders: Vec<Order>,
}

impl TrackParcel {
    pub fn new(orders: Vec<Order>) -> Self {
        Self { orders }
    }
}

#[async_trait]
impl Tool for TrackParcel {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: DESCRIPTION.to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "tracking_number": {"type": "string", "minLength": 4, "description": "the carrier's tracking number"},
                    "seconds": {"type": "integer", "minimum": 1, "maximum": MAX_SECONDS, "description": "how long the carrier query may take, seconds (default 2)"}
                },
                "required": ["tracking_number"],
                "additionalProperties": false
            }),
        }
    }

    fn definition(&self) -> ToolDefinition {
        let mut def = ToolDefinition::from_spec(self.spec(), self.timeout());
        def.mode = ToolMode::Async;
        def.effect = ToolEffect::Read;
        def
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(MAX_SECONDS + 30)
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        self.call_with_progress(arguments, Progress::none()).await
    }

    async fn call_with_progress(
        &self,
        arguments: Value,
        progress: Progress,
    ) -> Result<Value, ToolError> {
        let number = arguments["tracking_number"]
            .as_str()
            .unwrap_or("")
            .trim()
            .to_uppercase();
        let seconds = arguments["seconds"].as_u64().unwrap_or(2);
        let step = Duration::from_secs(seconds.clamp(1, MAX_SECONDS)) / 2;
        tokio::time::sleep(step).await;
        progress.report(0.5, "the carrier answered; reading the scans".to_string());
        tokio::time::sleep(step).await;
        let order = self
            .orders
            .iter()
            .find(|o| {
                o.tracking
                    .as_deref()
                    .is_some_and(|t| t.eq_ignore_ascii_case(&number))
            })
            .ok_or_else(|| {
                ToolError::new(
                    ToolErrorCode::ExecutionFailed,
                    format!("no carrier knows tracking number {number}"),
                )
                .with_hint("check the number with order_lookup; do not guess one")
            })?;
        let eta = match order.status.as_str() {
            "delivered" => "delivered",
            "in_transit" => "within 1–2 days",
            _ => "not shipped yet",
        };
        Ok(json!({
            "tracking_number": number,
            "carrier": order.carrier,
            "status": order.status,
            "last_scan": order.last_update,
            "eta": eta,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::builtin::BuiltinData;

    #[tokio::test(start_paused = true)]
    async fn a_known_parcel_is_located_and_an_unknown_one_explained() {
        let data = BuiltinData::demo().unwrap();
        let tool = TrackParcel::new(data.orders.clone());
        let out = tool
            .call(json!({"tracking_number": "sf1428837610295"}))
            .await
            .unwrap();
        assert_eq!(out["carrier"], "SF Express");
        assert!(out["last_scan"].as_str().unwrap().contains("Shanghai"));
        let err = tool
            .call(json!({"tracking_number": "XX0000"}))
            .await
            .unwrap_err();
        assert!(err.message.contains("XX0000"));
        assert_eq!(tool.definition().mode, ToolMode::Async);
    }
}
