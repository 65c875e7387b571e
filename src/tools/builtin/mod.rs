//! Built-in tools, written in Rust and served by the tool-executor: `add`, `current_time`,
//! `order_lookup`, the async demos `generate_report` and `track_parcel` ([`builtin`] builds one by name over
//! the shared [`BuiltinData`]), and `job_status` and `tool_raw_get`, which read the
//! executor's own stores ([`with_stores`]). Config's `tools.builtin` lists which are served.

mod add;
mod current_time;
mod data;
mod generate_report;
mod job_status;
mod order_lookup;
mod raw_get;
mod track_parcel;

use std::sync::Arc;

pub use add::Add;
pub use current_time::CurrentTime;
pub use data::{BuiltinData, BuiltinDataError, Order, CATEGORIES};
pub use generate_report::GenerateReport;
pub use job_status::JobStatusTool;
pub use job_status::NAME as JOB_STATUS;
pub use order_lookup::OrderLookup;
pub use raw_get::{RawGet, NAME as RAW_GET};
pub use track_parcel::TrackParcel;

use super::stores::ToolStores;
use super::Tool;

const NAMES: [&str; 5] = [
    add::NAME,
    current_time::NAME,
    generate_report::NAME,
    order_lookup::NAME,
    track_parcel::NAME,
];
const STORE_NAMES: [&str; 2] = [job_status::NAME, raw_get::NAME];

/// The names of every built-in tool [`builtin`] builds, sorted.
pub fn all_names() -> &'static [&'static str] {
    &NAMES
}

/// The names of the built-ins over the executor's stores ([`with_stores`]), sorted.
pub fn store_names() -> &'static [&'static str] {
    &STORE_NAMES
}

/// The built-in tool called `name` over `data`, or `None` when there is no such built-in.
pub fn builtin(name: &str, data: &BuiltinData) -> Option<Arc<dyn Tool>> {
    match name {
        add::NAME => Some(Arc::new(Add)),
        current_time::NAME => Some(Arc::new(CurrentTime)),
        generate_report::NAME => Some(Arc::new(GenerateReport)),
        order_lookup::NAME => Some(Arc::new(OrderLookup::new(data.orders.clone()))),
        track_parcel::NAME => Some(Arc::new(TrackParcel::new(data.orders.clone()))),
        _ => None,
    }
}

/// The store-backed built-in called `name`, or `None` when there is no such built-in.
pub fn with_stores(name: &str, stores: &ToolStores) -> Option<Arc<dyn Tool>> {
    match name {
        job_status::NAME => Some(Arc::new(JobStatusTool::new(stores.jobs.clone()))),
        raw_get::NAME => Some(Arc::new(RawGet::new(stores.raw.clone()))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::registry::ToolRegistry;

    #[test]
    fn every_listed_name_builds_a_tool_with_that_name() {
        let data = BuiltinData::default();
        for name in all_names() {
            let tool = builtin(name, &data).unwrap();
            assert_eq!(tool.spec().name, *name);
        }
        assert!(builtin("rm_rf", &data).is_none());
        let mut sorted = all_names().to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, all_names());
    }

    #[test]
    fn every_builtin_registers_with_a_compiling_schema() {
        let registry = ToolRegistry::new();
        let data = BuiltinData::demo().unwrap();
        for name in all_names() {
            registry.register(builtin(name, &data).unwrap()).unwrap();
        }
        assert_eq!(registry.names(), all_names());
        let stores = ToolStores::temporary().unwrap();
        for name in store_names() {
            let tool = with_stores(name, &stores).unwrap();
            assert_eq!(tool.spec().name, *name);
            registry.register(tool).unwrap();
        }
    }
}
