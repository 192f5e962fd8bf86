//! The native half of `@agent-relay/sandbox-router`.
//!
//! - [`core`]: the routing core, plain sans-IO Rust (no napi, no I/O): every decision.
//! - [`stores`]: the durable mapping stores (SQLite; PostgreSQL on tokio), the I/O the core
//!   does not do.
//! - [`readers`]: the builtin capacity readers and stamp finders (HTTP on tokio).
//! - [`binding`]: the napi glue.
pub mod binding;
pub mod core;
pub mod readers;
pub mod stores;
