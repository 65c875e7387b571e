#![allow(dead_code)]
pub mod fake_openai;
