pub mod binding;
pub mod core;
pub mod readers;
