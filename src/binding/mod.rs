//! The napi glue: JavaScript values into core types and back, and nothing else.
//!
//! The files depend one way (an arrow is "uses"):
//!
//! ```text
//! leaves:  values, records, clock, id_source, telemetry
//! error ← request ← registry ← router ← acquisition ← operation, reconcile, warm, capacity
//! error ← mapping, sqlite ← router;  sqlite ← pg;  router ← ids, explain
//! error ← checks ← factory, manifest;  capacity ← factory;  clock ← daytona_summary
//! ```
//!
//! - `error`: the one error protocol (a typed `NativeError`, returned or thrown) and the
//!   panic guard every entry point runs in;
//! - `request`, `ids`, `id_source`: a request's text compiled once; id rules; fresh ids;
//! - `registry`: pools parsed once; the conversion every routing decision shares;
//! - `router`: one router's native state (fleet, health, ledger, default store) and the
//!   decisions that read it;
//! - `acquisition`: the machines of the provisions in flight, by integer key;
//! - `operation`: operations by id (and a reclaimed sandbox's release), as jobs of the router;
//! - `warm`: warm pools: the inventory, the refill machines, the claims' answers;
//! - `explain`: explanations written into typed arrays JavaScript lends;
//! - `mapping`, `sqlite`, `pg`: the mapping stores' native halves;
//! - `capacity`: the builtin capacity readers and finders (HTTP on tokio); `daytona_summary`:
//!   the Daytona display helpers' typed answers; `manifest`: process manifests;
//! - `factory`: the factory's plan, the builtin providers' catalogue, package errors;
//!   `checks`: the checks of caller records and options read as facts, the error class
//!   names;
//! - `decisions`: the router's decision records, as the JSON objects they are;
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
pub mod decisions;
pub mod error;
pub mod explain;
pub mod factory;
pub mod id_source;
pub mod ids;
pub mod manifest;
pub mod mapping;
pub mod operation;
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
