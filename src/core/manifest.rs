//! Process manifests (being written).
