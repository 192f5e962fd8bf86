//! Fresh sandbox ids, drawn from the operating system's CSPRNG (I/O, so not the core's:
//! `core::ids` holds the id rules).

use crate::core::ids::{SandboxKey, ID_BYTES};
use crate::core::CoreError;

/// A source of sandbox ids that draws from the OS CSPRNG in batches.
///
/// Drawing 16 bytes per id from the kernel costs a syscall each; a 4 KiB buffer amortizes
/// it to one syscall per 256 ids without weakening the ids (each byte is still used once).
#[derive(Debug)]
pub struct SandboxIdSource {
    buf: Vec<u8>,
    pos: usize,
}

const BATCH: usize = 4096;

impl Default for SandboxIdSource {
    fn default() -> Self {
        SandboxIdSource { buf: vec![0; BATCH], pos: BATCH }
    }
}

impl SandboxIdSource {
    /// Returns the key of a fresh `sbx_` id (128 random bits).
    pub fn next_key(&mut self) -> Result<SandboxKey, CoreError> {
        if self.pos + ID_BYTES > self.buf.len() {
            getrandom::fill(&mut self.buf).map_err(|_| CoreError::RandomUnavailable)?;
            self.pos = 0;
        }
        let mut bytes = [0u8; ID_BYTES];
        bytes.copy_from_slice(&self.buf[self.pos..self.pos + ID_BYTES]);
        // Overwrite the used bytes so they cannot be read back from the buffer.
        self.buf[self.pos..self.pos + ID_BYTES].fill(0);
        self.pos += ID_BYTES;
        Ok(SandboxKey::from_bytes(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::is_sandbox_id;
    use std::collections::HashSet;

    #[test]
    fn sandbox_ids_are_well_formed_unique_and_round_trip() {
        let mut src = SandboxIdSource::default();
        let mut seen = HashSet::new();
        for _ in 0..2000 {
            let id = src.next_key().unwrap().to_string();
            assert!(is_sandbox_id(&id), "{id}");
            assert_eq!(SandboxKey::parse(&id).unwrap().to_string(), id);
            assert!(seen.insert(id));
        }
    }
}
