//! The native half of `@agent-relay/sandbox-router`.
//!
//! - [`core`]: the routing core, plain sans-IO Rust (no napi, no I/O): every decision.
//! - [`readers`]: the builtin capacity readers and stamp finders (HTTP on tokio).
//! - [`binding`]: the napi glue.
pub mod binding;
pub mod core;
pub mod readers;
