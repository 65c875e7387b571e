//! The context window: real token counts and assembly of what the model sees under a budget.

pub mod budget;
pub mod compaction;
pub mod tokens;
