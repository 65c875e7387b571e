#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The one integration-test binary: shared helpers in `common`, one module per area in `suite`.

mod common;
mod suite;
