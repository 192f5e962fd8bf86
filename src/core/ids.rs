//! Provider ids and `sbx_…` sandbox ids.
//!
//! Why allocate sandbox ids from the OS CSPRNG rather than a counter? The id is handed to
//! callers and stamped into provider labels before launch; it must not be guessable, must
//! not collide across processes, and must never reveal the provider's own sandbox id.

use crate::core::CoreError;

/// Longest provider id accepted, in bytes.
pub const MAX_PROVIDER_ID_LEN: usize = 64;

/// Validates a provider id: non-empty, at most 64 bytes, `[a-z0-9][a-z0-9._-]*`.
pub fn validate_provider_id(id: &str) -> Result<(), CoreError> {
    let bytes = id.as_bytes();
    if bytes.is_empty() {
        return Err(CoreError::InvalidProviderId { reason: "must not be empty" });
    }
    if bytes.len() > MAX_PROVIDER_ID_LEN {
        return Err(CoreError::InvalidProviderId { reason: "must be at most 64 characters" });
    }
    if !matches!(bytes[0], b'a'..=b'z' | b'0'..=b'9') {
        return Err(CoreError::InvalidProviderId { reason: "must start with a lowercase letter or a digit" });
    }
    if !bytes[1..].iter().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-')) {
        return Err(CoreError::InvalidProviderId {
            reason: "may contain only lowercase letters, digits, '.', '_' and '-'",
        });
    }
    Ok(())
}

/// Prefix of every router sandbox id.
pub const SANDBOX_ID_PREFIX: &str = "sbx_";

/// Random bytes in a sandbox id (128 bits, written as 32 hex digits).
pub const ID_BYTES: usize = 16;

/// True when `id` is `sbx_` followed by exactly 32 lowercase hex digits.
pub fn is_sandbox_id(id: &str) -> bool {
    id.len() == SANDBOX_ID_PREFIX.len() + 2 * ID_BYTES
        && id.starts_with(SANDBOX_ID_PREFIX)
        && id.as_bytes()[SANDBOX_ID_PREFIX.len()..].iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Validates a sandbox id, with a typed error.
pub fn validate_sandbox_id(id: &str) -> Result<(), CoreError> {
    if is_sandbox_id(id) {
        Ok(())
    } else {
        Err(CoreError::InvalidSandboxId)
    }
}

/// A router sandbox id held as its 128-bit value: 16 bytes, no heap, cheap to hash.
/// Its text form (`Display`) is the `sbx_` id it was parsed from; the order of keys is the
/// order of their texts (fixed-width lowercase hex).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SandboxKey(u128);

impl SandboxKey {
    /// The key of a well-formed `sbx_` id; `None` for anything else.
    pub fn parse(id: &str) -> Option<SandboxKey> {
        // One pass: validation and decoding together (the provision path parses every id).
        let hex = id.strip_prefix(SANDBOX_ID_PREFIX)?.as_bytes();
        if hex.len() != 2 * ID_BYTES {
            return None;
        }
        let mut value = 0u128;
        for &b in hex {
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                _ => return None,
            };
            value = (value << 4) | u128::from(digit);
        }
        Some(SandboxKey(value))
    }

    /// The key of 16 random bytes (a fresh id).
    pub fn from_bytes(bytes: [u8; ID_BYTES]) -> SandboxKey {
        SandboxKey(u128::from_be_bytes(bytes))
    }

    /// Like [`SandboxKey::parse`], with the typed error.
    pub fn parse_checked(id: &str) -> Result<SandboxKey, CoreError> {
        SandboxKey::parse(id).ok_or(CoreError::InvalidSandboxId)
    }
}

impl std::fmt::Display for SandboxKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // By hand: every provision writes its id, and `{:032x}` of a u128 costs ~4x this.
        const HEX: &[u8; 16] = b"0123456789abcdef";
        // One write of the whole id (`to_string` then allocates once).
        const P: usize = SANDBOX_ID_PREFIX.len();
        let mut out = [0u8; P + 2 * ID_BYTES];
        out[..P].copy_from_slice(SANDBOX_ID_PREFIX.as_bytes());
        for (i, b) in self.0.to_be_bytes().iter().enumerate() {
            out[P + 2 * i] = HEX[usize::from(b >> 4)];
            out[P + 2 * i + 1] = HEX[usize::from(b & 0xf)];
        }
        // Every byte is ASCII (the prefix, hex digits).
        f.write_str(std::str::from_utf8(&out).map_err(|_| std::fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_key_round_trips_and_refuses_malformed_ids() {
        for id in ["sbx_0123456789abcdef0123456789abcdef", "sbx_ffffffffffffffffffffffffffffffff"] {
            assert_eq!(SandboxKey::parse(id).unwrap().to_string(), id);
        }
        let zero = format!("sbx_{}", "0".repeat(32));
        assert_eq!(SandboxKey::parse(&zero).unwrap().to_string(), zero);
        for bad in [
            "",
            "sbx_",
            "sbx_ABCDEF00000000000000000000000000",
            "sbx_+bcdef00000000000000000000000000",
            "xbx_00000000000000000000000000000000",
        ] {
            assert!(SandboxKey::parse(bad).is_none(), "{bad}");
            assert!(SandboxKey::parse_checked(bad).is_err(), "{bad}");
        }
        let (a, b) = (
            SandboxKey::parse(&format!("sbx_{}1", "0".repeat(31))).unwrap(),
            SandboxKey::parse(&format!("sbx_1{}", "0".repeat(31))).unwrap(),
        );
        assert!(a < b && a.to_string() < b.to_string());
    }

    #[test]
    fn provider_id_accepts_lowercase_with_separators() {
        for ok in ["a", "primary-eu", "e2b", "pool.1_x", "0abc"] {
            assert!(validate_provider_id(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn provider_id_rejects_bad_forms() {
        let long = "a".repeat(65);
        for bad in ["", "Primary", "-a", ".a", "a b", "a/b", "é", long.as_str()] {
            let err = validate_provider_id(bad).unwrap_err();
            assert_eq!(err.code(), "INVALID_PROVIDER_ID", "{bad}");
        }
        assert!(validate_provider_id(&"a".repeat(64)).is_ok());
    }

    #[test]
    fn sandbox_id_validation_rejects_near_misses() {
        assert!(validate_sandbox_id("sbx_0123456789abcdef0123456789abcdef").is_ok());
        for bad in [
            "sbx_0123456789ABCDEF0123456789abcdef",
            "sbx_0123456789abcdef0123456789abcde",
            "sbx-0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef",
            "sbx_0123456789abcdef0123456789abcdeg",
        ] {
            assert_eq!(validate_sandbox_id(bad).unwrap_err().code(), "INVALID_SANDBOX_ID");
        }
    }
}
