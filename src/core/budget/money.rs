//! Costs in fixed point: millionths of the rules' currency unit.
//!
//! Why not `f64`? A budget adds and subtracts the same decimals over and over (an
//! estimate reserved, given back, replaced by `settleCost`'s actual cost). In binary
//! floating point `0.1 + 0.2` is `0.30000000000000004`, a million settlements of `0.2`
//! do not sum to `200000`, and a sum that is given back does not return to zero: a
//! ledger's totals drift, and a limit compared against a drifted sum needs a tolerance
//! that is itself a rule. In micro-units every amount is an integer, every sum is exact,
//! and `0.2` reads back as `0.2` (the division of two exact integers gives the nearest
//! double, which prints as the decimal). PostgreSQL keeps the same integers (`BIGINT`).
//!
//! The range: a cost (a pool's `estimatedCost`, `settleCost`'s actual cost) and a cost
//! limit are finite numbers from 0 to [`MAX_COST`] (a billion units), rounded to the
//! nearest micro-unit. Every such amount is below 2^53 micro-units, so it converts from a
//! JavaScript number exactly; sums saturate at `i64::MAX` micro-units (about 9.2e12
//! units: nine thousand charges at the maximum cost in one window), which admission can
//! never reach against a valid limit.

/// The largest cost and cost limit, in units.
pub const MAX_COST: f64 = 1e9;

/// Micro-units per unit.
pub const PER_UNIT: i64 = 1_000_000;

/// An amount in micro-units (millionths of the rules' currency unit), never negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Micros(pub i64);

impl Micros {
    /// Zero.
    pub const ZERO: Micros = Micros(0);
    /// [`MAX_COST`] in micro-units.
    pub const MAX: Micros = Micros(MAX_COST as i64 * PER_UNIT);

    /// `units` in micro-units (rounded to the nearest), or None outside 0..=[`MAX_COST`]
    /// (negative, NaN, infinite, or too large): the check of every cost a caller gives.
    pub fn of(units: f64) -> Option<Micros> {
        if units.is_finite() && (0.0..=MAX_COST).contains(&units) {
            Some(Micros((units * PER_UNIT as f64).round() as i64))
        } else {
            None
        }
    }

    /// [`Micros::of`] for a cost that was validated elsewhere (or not at all: a pool's
    /// resolved signals): a negative or NaN cost is 0, a cost above [`MAX_COST`] one
    /// micro-unit more than any limit can be, so it never fits a cost limit.
    pub fn saturating(units: f64) -> Micros {
        match Micros::of(units) {
            Some(m) => m,
            None if units > MAX_COST => Micros(Micros::MAX.0 + 1),
            None => Micros::ZERO,
        }
    }

    /// The amount in units (the nearest double: `Micros(200_000).units()` is `0.2`).
    pub fn units(self) -> f64 {
        self.0 as f64 / PER_UNIT as f64
    }

    /// `self + other`, saturating.
    pub fn plus(self, other: Micros) -> Micros {
        Micros(self.0.saturating_add(other.0))
    }

    /// `self - other`, never below zero.
    pub fn minus(self, other: Micros) -> Micros {
        Micros(self.0.saturating_sub(other.0).max(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn must_fire_a_cost_outside_the_range_is_refused() {
        for bad in [-0.000_001, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e308, MAX_COST + 1.0] {
            assert_eq!(Micros::of(bad), None, "{bad}");
        }
        assert!(Micros::saturating(1e308) > Micros::MAX, "a cost beyond the range never fits a limit");
        assert_eq!(Micros::saturating(f64::NAN), Micros::ZERO);
    }

    #[test]
    fn must_not_fire_costs_inside_the_range_read_back_as_their_decimals() {
        assert_eq!(Micros::of(0.2), Some(Micros(200_000)));
        assert_eq!(Micros::of(0.2).unwrap().units(), 0.2);
        assert_eq!(Micros::of(0.0), Some(Micros::ZERO));
        assert_eq!(Micros::of(MAX_COST), Some(Micros::MAX));
        assert_eq!(Micros::of(0.000_000_4), Some(Micros::ZERO), "below a micro-unit rounds to the nearest");
        // The sum floating point gets wrong.
        let sum = Micros::of(0.1).unwrap().plus(Micros::of(0.2).unwrap());
        assert_eq!(sum.units(), 0.3);
    }

    #[test]
    fn a_million_settlements_sum_exactly() {
        let mut total = Micros::ZERO;
        for _ in 0..1_000_000 {
            total = total.plus(Micros::of(0.2).unwrap());
        }
        assert_eq!(total.units(), 200_000.0);
        let mut f = 0.0f64;
        for _ in 0..1_000_000 {
            f += 0.2;
        }
        assert_ne!(f, 200_000.0, "the float sum this replaces drifts");
    }

    proptest! {
        /// Every micro-unit amount in the range round-trips through its units exactly, so a
        /// figure that crossed to JavaScript and back is the same amount.
        #[test]
        fn micros_round_trip_through_units(m in 0i64..=Micros::MAX.0) {
            prop_assert_eq!(Micros::of(Micros(m).units()), Some(Micros(m)));
        }

        /// Adding then subtracting the same amounts returns to the start exactly.
        #[test]
        fn sums_given_back_return_to_zero(xs in proptest::collection::vec(0i64..=Micros::MAX.0, 0..50)) {
            let total = xs.iter().fold(Micros::ZERO, |t, x| t.plus(Micros(*x)));
            let back = xs.iter().fold(total, |t, x| t.minus(Micros(*x)));
            prop_assert_eq!(back, Micros::ZERO);
        }
    }
}
