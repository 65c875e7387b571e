//! The context window: real token counts, assembly of what the model sees under a budget,
//! folding older turns into a summary, calibration of counts for models tiktoken does not know,
//! and search over the full history (which stays in sled).

pub mod bpe;
pub mod budget;
pub mod calibrate;
pub mod compaction;
mod o200k_ascii;
pub mod search;
pub mod tokens;
