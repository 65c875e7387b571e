//! Integration test modules, one per area.

mod bus_contract;
