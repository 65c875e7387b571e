//! Built-in tools, written in Rust and served by the tool-executor: `add`, `current_time`
//! and `order_lookup`. [`builtin`] builds one by name (the names config's `tools.builtin`
//! lists) over the shared [`BuiltinData`].

mod add;
mod current_time;
mod data;
mod order_lookup;

use std::sync::Arc;

pub use add::Add;
pub use current_time::CurrentTime;
pub use data::{BuiltinData, BuiltinDataError, Order, CATEGORIES};
pub use order_lookup::OrderLookup;

use super::Tool;

const NAMES: [&str; 3] = [add::NAME, current_time::NAME, order_lookup::NAME];

/// The names of every built-in tool, sorted.
pub fn all_names() -> &'static [&'static str] {
    &NAMES
}

/// The built-in tool called `name` over `data`, or `None` when there is no such built-in.
pub fn builtin(name: &str, data: &BuiltinData) -> Option<Arc<dyn Tool>> {
    match name {
        add::NAME => Some(Arc::new(Add)),
        current_time::NAME => Some(Arc::new(CurrentTime)),
        order_lookup::NAME => Some(Arc::new(OrderLookup::new(data.orders.clone()))),
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
    }
}
