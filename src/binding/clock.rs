//! The glue's clock: the wall-clock readings the core is given.
//!
//! Why here and not in the core? The core is sans-IO: it is told the time (`Health` takes
//! `now`, records take their creation instant). Where JavaScript passes no reading (the
//! default clock), the glue reads the wall clock here, once per call.

use crate::core::router::Now;
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now. (Seconds and sub-second millis rather than
/// `as_millis`, whose u128 division showed in the provision path's profile: health reads
/// the clock twice per provision.)
pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| (d.as_secs() as i64).saturating_mul(1000).saturating_add(i64::from(d.subsec_millis())))
}

/// The readings a call is made at: the health clock (`health`), the router's (`clock`);
/// each omitted (the default clock): the wall clock, read here once for both.
pub fn now_of(health: Option<f64>, clock: Option<f64>) -> Now {
    match (health, clock) {
        (Some(h), Some(c)) => Now { health: h as i64, router: c as i64 },
        _ => now_and_wall(health, clock).0,
    }
}

/// [`now_of`] and the wall clock's reading, for a call that also stamps a record with it
/// (one reading serves all three where the clocks are omitted).
pub fn now_and_wall(health: Option<f64>, clock: Option<f64>) -> (Now, i64) {
    let wall = now_millis();
    (Now { health: health.map_or(wall, |h| h as i64), router: clock.map_or(wall, |c| c as i64) }, wall)
}
