#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The one integration test binary: `suite/` holds the tests, `common/` the helpers.

mod common;
mod suite;
