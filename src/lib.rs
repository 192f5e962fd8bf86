pub mod binding;
pub mod binding_acquisition;
pub mod binding_capacity;
pub mod binding_explain;
pub mod binding_manifest;
pub mod binding_sqlite;
pub mod core;
pub mod readers;
