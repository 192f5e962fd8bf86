pub mod binding;
pub mod binding_capacity;
pub mod core;
pub mod readers;
pub mod binding_manifest;
