//! The glue's clock: the wall-clock readings the core is given.
//!
//! Why here and not in the core? The core is sans-IO: it is told the time (`Health` takes
//! `now`, records take their creation instant). Where JavaScript passes no reading (the
//! default clock), the glue reads the wall clock here, once per call.
//!
//! One clock read is still the core's: the capacity ledger's monotonic `Instant::now()` in
//! `Ledger::admit` and `Ledger::settle` (the assumption TTL), which the acquisition machine
//! calls. Its `_at` variants take the instant; handing it in from here means the machine's
//! outcome calls take it too (`binding/acquisition.rs`), a change of their signatures.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now. (Seconds and sub-second millis rather than
/// `as_millis`, whose u128 division showed in the provision path's profile: health reads
/// the clock twice per provision.)
pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| (d.as_secs() as i64).saturating_mul(1000).saturating_add(i64::from(d.subsec_millis())))
}
