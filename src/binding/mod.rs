//! The napi glue: JavaScript values into core types and back, and nothing else.
//!
//! The files depend one way (an arrow is "uses"):
//!
//! ```text
//! error ← ids, request, mapping, registry, capacity, daytona_summary, manifest, sqlite
//! error ← checks ← factory, manifest;  capacity ← factory
//! registry ← router ← acquisition ← warm, explain      sqlite ← pg → acquisition, warm
//! sqlite ← budget ← router, error (records), pg
//! clock ← mapping, router, acquisition, daytona_summary
//! telemetry ← acquisition
//! ```
//!
//! - `error`: the one error protocol (a typed `NativeError`, returned or thrown) and the
//!   panic guard every entry point runs in;
//! - `request`, `ids`: a request's text compiled once; id rules and fresh ids;
//! - `registry`: pools parsed once; the conversion every routing decision shares;
//! - `router`: one router's native state (fleet, health, ledger, default store) and the
//!   decisions that read it;
//! - `acquisition`: the machines of the provisions in flight, by integer key;
//! - `warm`: warm pools: the inventory, the refill machines, the claims' answers;
//! - `budget`: a router's budget rules and in-process ledger, their typed records;
//! - `explain`: explanations written into typed arrays JavaScript lends;
//! - `mapping`, `sqlite`, `pg`: the mapping stores' native halves;
//! - `capacity`: the builtin capacity readers and finders (HTTP on tokio); `daytona_summary`:
//!   the Daytona display helpers' typed answers; `manifest`: process manifests;
//! - `factory`: the factory's plan, the builtin providers' catalogue, package errors;
//!   `checks`: the checks of caller records and options read as facts, the error class
//!   names;
//! - `clock`: the wall-clock readings the core is given;
//! - `telemetry`: the names and boundaries the OpenTelemetry instruments are built with.
//!
//! What crosses: caller data that must be validated crosses once as JSON text (a request,
//! a definition, a reader's measurement, a resolver's answer); everything the core answers
//! crosses typed (`#[napi(object)]` values, string enums, typed arrays, arrays of strings).

pub mod acquisition;
pub mod capacity;
pub mod checks;
pub mod clock;
pub mod daytona_summary;
pub mod error;
pub mod explain;
pub mod factory;
pub mod ids;
pub mod manifest;
pub mod mapping;
pub mod pg;
pub mod reconcile;
pub mod records;
pub mod registry;
pub mod request;
pub mod router;
pub mod sqlite;
pub mod telemetry;
pub mod values;
pub mod warm;
