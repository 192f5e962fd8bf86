//! napi glue for process manifests (being written).
