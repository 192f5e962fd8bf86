//! The routing core: plain Rust, no napi.
//!
//! Why a separate core? The router's decisions (which pools may serve a request, in what
//! order, when a failure may fall back, whether capacity admits a launch) are pure
//! functions of declarations and outcomes. Keeping them free of napi lets `cargo test`
//! and the property tests exercise every rule without Node, and keeps the JS glue a thin
//! translation layer. The core is a synchronous state machine (sans-IO): it decides, the
//! caller performs the I/O (a provider launch, a mapping write) and feeds the outcome back.
#![forbid(unsafe_code)]

pub mod acquisition;
pub mod budget;
pub mod capabilities;
pub mod capacity;
pub mod clock;
pub mod decision;
pub mod error;
pub mod events;
pub mod explain;
pub mod factory;
pub mod facts;
pub mod failure;
pub mod fallback;
pub mod health;
pub mod ids;
pub mod json;
pub mod labels;
pub mod manifest;
pub mod mapping;
pub mod pacing;
pub mod packages;
pub mod pool;
pub mod profile;
pub mod providers;
pub mod queue;
pub mod ranking;
pub mod reasons;
pub mod reconcile;
pub mod records;
pub mod registry;
pub mod request;
pub mod requirements;
pub mod router;
pub mod shared_ledger;
pub mod signals;
pub mod store_options;
pub mod telemetry;
pub mod telemetry_option;
pub mod warm;

pub use error::CoreError;
