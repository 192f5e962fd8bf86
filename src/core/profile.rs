//! Compact pool profiles: the hot path's view of a registration.
//!
//! Why a second representation? A decision over 10,000 pools is a scan, and a scan is as
//! fast as the memory it touches. A `Pool` keeps its declaration as strings in separate
//! heap allocations (regions, capabilities, levels); comparing those per pool chases
//! pointers. A `Profile` holds the same facts as bits, small integers and floats in one
//! contiguous ~120-byte record: capabilities and regions as masks, ordered levels as
//! ranks, resources and signals inline. [`admits`] is exactly `requirements::check` for a
//! request whose requirements are all representable this way; requests naming images,
//! binaries, restrictions or custom capabilities also run the full check (property tests
//! prove the two paths agree).

use crate::core::capabilities::{
    rank_of, Lifetime, DURABILITY_LEVELS, EGRESS_CLASSES, ISOLATION_LEVELS, TIMEOUT_SEMANTICS,
};
use crate::core::pool::Pool;
use crate::core::request::Request;
use crate::core::signals::Signals;
use std::collections::HashMap;

/// One pool, compactly.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Known named capabilities.
    pub mask: u64,
    /// Regions as interned bits.
    pub regions: u64,
    /// Every region of the pool has a bit (fewer than 64 distinct regions registered).
    pub regions_exact: bool,
    /// 0 = undeclared, else 1 + rank.
    pub egress: u8,
    /// 0 = undeclared, else 1 + rank.
    pub durability: u8,
    /// 0 = undeclared, else 1 + rank.
    pub isolation: u8,
    /// Timeout semantics bits.
    pub semantics: u8,
    /// Timeout granularity, NaN when undeclared (never satisfies a bound).
    pub granularity: f64,
    /// Longest life: -1 unknown, +inf unbounded, else the cap.
    pub lifetime: f64,
    /// cpu, memoryMb, diskMb, gpu.
    pub resources: [f64; 4],
    /// Registered signals, when valid.
    pub signals: Option<Signals>,
    /// Runtime has `launchDetached`.
    pub has_launch_detached: bool,
}

fn level(levels: &[&str], v: Option<&str>) -> u8 {
    v.map_or(0, |x| rank_of(levels, x) as u8 + 1)
}

fn semantics_bits(names: &[&str]) -> u8 {
    names.iter().map(|n| 1u8 << rank_of(TIMEOUT_SEMANTICS, n)).fold(0, |a, b| a | b)
}

/// Interns region names to bits, registry-wide.
#[derive(Debug, Clone, Default)]
pub struct RegionTable {
    ids: HashMap<String, u8>,
}

impl RegionTable {
    /// Bits for `regions`, interning new names; `None` when a name has no bit (64 used).
    pub fn intern(&mut self, regions: &[String]) -> Option<u64> {
        let mut mask = 0u64;
        let mut exact = true;
        for r in regions {
            let next = self.ids.len();
            let id = match self.ids.get(r) {
                Some(id) => Some(*id),
                None if next < 64 => {
                    self.ids.insert(r.clone(), next as u8);
                    Some(next as u8)
                }
                None => None,
            };
            match id {
                Some(b) => mask |= 1u64 << b,
                None => exact = false,
            }
        }
        exact.then_some(mask)
    }

    /// The bit of a region, if interned.
    pub fn bit(&self, region: &str) -> Option<u8> {
        self.ids.get(region).copied()
    }
}

impl Profile {
    /// The profile of a pool whose regions interned to `regions` (None: not all did).
    pub fn of(pool: &Pool, regions: Option<u64>) -> Profile {
        let c = &pool.capabilities;
        Profile {
            mask: c.mask,
            regions: regions.unwrap_or(0),
            regions_exact: regions.is_some(),
            egress: level(EGRESS_CLASSES, c.egress),
            durability: level(DURABILITY_LEVELS, c.durability),
            isolation: level(ISOLATION_LEVELS, c.isolation),
            semantics: semantics_bits(&c.timeout_semantics),
            granularity: c.timeout_granularity_ms.unwrap_or(f64::NAN),
            lifetime: match c.max_lifetime {
                Lifetime::Unknown => -1.0,
                Lifetime::Unbounded => f64::INFINITY,
                Lifetime::Capped(ms) => ms,
            },
            resources: [c.resources.cpu, c.resources.memory_mb, c.resources.disk_mb, c.resources.gpu],
            signals: pool.signals.as_ref().ok().copied(),
            has_launch_detached: pool.has_launch_detached,
        }
    }
}

/// A request's requirements in profile form, for one registry.
#[derive(Debug, Clone)]
pub struct RequestProfile {
    /// Requirements that need the full (string) check after [`admits`].
    pub needs_full_check: bool,
    /// Only this pool index may serve (exact `providerId`); `Some(None)` = no pool has it.
    pub only: Option<Option<usize>>,
    /// Detached request.
    pub detached: bool,
    /// Required capability bits.
    pub required: u64,
    /// Forbidden capability bits.
    pub forbidden: u64,
    /// Acceptable egress ranks as bits (0 = any).
    pub egress: u8,
    /// Required semantics bits.
    pub semantics: u8,
    /// Coarsest granularity accepted.
    pub granularity: Option<f64>,
    /// Required lifetime.
    pub lifetime: Option<f64>,
    /// Minimum durability (0 = none).
    pub durability: u8,
    /// Minimum isolation (0 = none).
    pub isolation: u8,
    /// Region required.
    pub region_required: bool,
    /// Bits of preferred regions, in preference order (None: no pool declares it).
    pub preferred: Vec<Option<u8>>,
    /// Union of the preferred bits.
    pub preferred_mask: u64,
    /// Resource needs.
    pub resources: [f64; 4],
    /// Only the capability bits, isolation and resources constrain this request (no exact
    /// provider, detached launch, egress, semantics, granularity, lifetime, durability or
    /// required region): [`admits`] reduces to [`admits_simple`].
    pub simple: bool,
    /// The resource needs above zero, `(dimension, need)`; the first `n_needs` count.
    pub needs: [(u8, f64); 4],
    /// How many of `needs` are set.
    pub n_needs: usize,
}

impl RequestProfile {
    /// Builds the profile of `req` against a registry's region table and id index.
    pub fn new(req: &Request, regions: &RegionTable, position: impl Fn(&str) -> Option<usize>, detached: bool) -> Self {
        let preferred: Vec<Option<u8>> = req.region_preferred.iter().map(|r| regions.bit(r)).collect();
        RequestProfile {
            needs_full_check: req.image_identity.is_some()
                || !req.required_binaries.is_empty()
                || !req.restrictions.is_empty()
                || req.required_custom
                || req.forbidden_custom,
            only: req.provider_id.as_deref().map(&position),
            detached,
            required: req.required_mask,
            forbidden: req.forbidden_mask,
            egress: req.egress.iter().map(|e| 1u8 << rank_of(EGRESS_CLASSES, e)).fold(0, |a, b| a | b),
            semantics: semantics_bits(&req.timeout_semantics),
            granularity: req.timeout_granularity_ms,
            lifetime: req.required_lifetime_ms,
            durability: level(DURABILITY_LEVELS, req.durability),
            isolation: level(ISOLATION_LEVELS, req.isolation),
            region_required: req.region_required,
            preferred_mask: preferred.iter().flatten().fold(0u64, |m, b| m | (1u64 << b)),
            preferred,
            resources: [req.resources.cpu, req.resources.memory_mb, req.resources.disk_mb, req.resources.gpu],
            simple: false,
            needs: [(0, 0.0); 4],
            n_needs: 0,
        }
        .finish()
    }

    /// Derives `simple` and `needs` from the fields above.
    fn finish(mut self) -> Self {
        self.simple = self.only.is_none()
            && !self.detached
            && self.egress == 0
            && self.semantics == 0
            && self.granularity.is_none()
            && self.lifetime.is_none()
            && self.durability == 0
            && !self.region_required;
        for (d, &need) in self.resources.iter().enumerate() {
            if need > 0.0 {
                self.needs[self.n_needs] = (d as u8, need);
                self.n_needs += 1;
            }
        }
        self
    }
}

/// [`admits`] for a request whose profile is `simple`: the capability bits, the isolation
/// floor and the resources it needs. The same answer, with the checks a simple request
/// cannot fail left out (the route's inner loop runs it for every pool).
#[inline]
pub fn admits_simple(p: &Profile, q: &RequestProfile) -> bool {
    p.mask & q.required == q.required
        && p.mask & q.forbidden == 0
        && (q.isolation == 0 || p.isolation >= q.isolation)
        && !q.needs[..q.n_needs].iter().any(|&(d, need)| need > p.resources[d as usize])
}

/// Whether pool `index` with profile `p` meets every requirement of `q` (with `regions`
/// the pool's region names, for pools whose regions are not all interned).
#[inline]
pub fn admits(index: usize, p: &Profile, q: &RequestProfile, req: &Request, regions: &[String]) -> bool {
    if let Some(only) = q.only {
        if only != Some(index) {
            return false;
        }
    }
    if q.detached && !p.has_launch_detached {
        return false;
    }
    if p.mask & q.required != q.required || p.mask & q.forbidden != 0 {
        return false;
    }
    if q.egress != 0 && (p.egress == 0 || q.egress & (1 << (p.egress - 1)) == 0) {
        return false;
    }
    if p.semantics & q.semantics != q.semantics {
        return false;
    }
    if let Some(g) = q.granularity {
        if p.granularity.is_nan() || p.granularity > g {
            return false;
        }
    }
    if let Some(l) = q.lifetime {
        if p.lifetime < 0.0 || p.lifetime < l {
            return false;
        }
    }
    if q.durability != 0 && p.durability < q.durability {
        return false;
    }
    if q.region_required {
        let inside = if p.regions_exact {
            p.regions & q.preferred_mask != 0
        } else {
            regions.iter().any(|r| req.region_preferred.contains(r))
        };
        if !inside {
            return false;
        }
    }
    for d in 0..4 {
        let need = q.resources[d];
        if need > 0.0 && need > p.resources[d] {
            return false;
        }
    }
    q.isolation == 0 || p.isolation >= q.isolation
}

/// Region tier of a pool (0 best; `preferred.len()` when in none).
#[inline]
pub fn tier(p: &Profile, q: &RequestProfile, req: &Request, regions: &[String]) -> u32 {
    if q.preferred.is_empty() {
        return 0;
    }
    if p.regions_exact {
        for (j, b) in q.preferred.iter().enumerate() {
            if let Some(b) = b {
                if p.regions & (1u64 << b) != 0 {
                    return j as u32;
                }
            }
        }
        return q.preferred.len() as u32;
    }
    crate::core::ranking::tier_of(regions, &req.region_preferred)
}
