//! Hard requirements: does a pool's declared envelope satisfy a request?
//!
//! Why collect every reason instead of stopping at the first? An explanation should say
//! everything that keeps a pool out ("missing pty *and* cpu 4 > 2"), so an operator fixes
//! a registration once. The hot path (provision without an observer) asks only for a
//! yes/no and stops at the first failure, allocating nothing.

use crate::core::capabilities::{
    rank_of, Capabilities, Lifetime, Resources, DURABILITY_LEVELS, EGRESS_CLASSES, ISOLATION_LEVELS,
};
use crate::core::reasons::{Reason, Rejection};
use crate::core::request::Request;
use rustc_hash::{FxHashMap, FxHasher};
use std::fmt::{self, Write};
use std::hash::{Hash, Hasher};

/// Where rejections go: nowhere (fast yes/no), into a list of owned rejections (events,
/// errors, tests), or into an [`Interner`] (explanations: each distinct text is stored
/// once, so explaining 10,000 pools does not allocate two strings per reason).
pub struct Sink<'a> {
    out: Out<'a>,
    failed: bool,
}

enum Out<'a> {
    Verdict,
    Owned(&'a mut Vec<Rejection>),
    Interned(&'a mut Interner),
}

/// Rejections of many pools with their texts stored once: details and phrases are
/// interned into two tables and each reason refers to them by index. Reusable: [`clear`]
/// keeps every buffer (and the text buffers themselves), so a caller that keeps one
/// interner allocates only for texts longer than any it held before.
///
/// [`clear`]: Interner::clear
#[derive(Debug, Default)]
pub struct Interner {
    /// Every reason, pool after pool (a pool's reasons are a range of this list).
    pub reasons: Vec<InternedRejection>,
    /// Distinct details, by first use.
    pub details: Texts,
    /// Distinct summary phrases, by first use.
    pub phrases: Texts,
    detail: String,
    phrase: String,
    phrase_keys: FxHashMap<(Reason, u32), u32>,
    detail_keys: FxHashMap<(Reason, u32, u64), u32>,
}

/// Which texts of a rejection are the same as another's, within one request, without
/// writing them: an interner formats a text only the first time it meets its key.
///
/// Why? Formatting is most of the cost of explaining thousands of rejected pools, and most
/// of their texts repeat ("missing capability pty" for every pool without pty). Given the
/// request, a reason's phrase depends only on which of the request's items failed (the
/// `phrase` key: e.g. the index of the missing capability), and its detail, when `detail`
/// is `Some`, only on that and the pool's value behind the key (a level's rank, a number's
/// bits). `None` means the detail varies in ways no key holds (an image name, a region
/// list): it is written every time and interned by its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextKey {
    /// Which phrase of this reason, within the request.
    pub phrase: u32,
    /// Which detail, with the phrase key, within the request; `None` when only the text says.
    pub detail: Option<u64>,
}

/// A key for an optional level (`EGRESS_CLASSES`, …): its rank, or [`UNDECLARED`].
fn level_key(levels: &[&str], v: Option<&str>) -> u64 {
    v.map_or(UNDECLARED, |x| rank_of(levels, x) as u64)
}

/// The detail key of an undeclared value.
const UNDECLARED: u64 = u64::MAX;

/// A table of distinct texts, by first use.
#[derive(Debug, Default)]
pub struct Texts {
    texts: Vec<String>,
    len: usize,
    bytes: usize,
    ids: FxHashMap<u64, u32>,
}

impl Texts {
    /// The texts, in order of first use.
    pub fn as_slice(&self) -> &[String] {
        &self.texts[..self.len]
    }

    /// The text with index `id`.
    pub fn get(&self, id: u32) -> &str {
        &self.texts[id as usize]
    }

    /// How many texts.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held by the texts.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn clear(&mut self) {
        self.len = 0;
        self.bytes = 0;
        self.ids.clear();
    }

    /// The index of `text`, adding it when new.
    pub fn intern(&mut self, text: &str) -> u32 {
        let mut hasher = FxHasher::default();
        text.hash(&mut hasher);
        let h = hasher.finish();
        if let Some(&id) = self.ids.get(&h) {
            if self.texts[id as usize] == text {
                return id;
            }
            // A 64-bit collision: correct, if slow.
            if let Some(id) = self.as_slice().iter().position(|t| t == text) {
                return id as u32;
            }
        }
        let id = self.len;
        match self.texts.get_mut(id) {
            Some(slot) => {
                slot.clear();
                slot.push_str(text);
            }
            None => self.texts.push(text.to_string()),
        }
        self.len += 1;
        self.bytes += text.len();
        self.ids.entry(h).or_insert(id as u32);
        id as u32
    }
}

/// One interned rejection reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InternedRejection {
    /// The reason constant.
    pub reason: Reason,
    /// Index in [`Interner::details`].
    pub detail: u32,
    /// Index in [`Interner::phrases`].
    pub phrase: u32,
}

impl Interner {
    /// Forgets every reason and text, keeping the buffers.
    pub fn clear(&mut self) {
        self.clear_request();
        self.details.clear();
    }

    /// Forgets the reasons, phrases and keys of the last request (the keys of [`TextKey`]
    /// name texts within one request only) but keeps the details table, so detail indices
    /// stay valid across requests: a caller that mirrors the table elsewhere (the JS side
    /// of an explanation) receives only the texts it has not seen.
    pub fn clear_request(&mut self) {
        self.reasons.clear();
        self.phrases.clear();
        self.phrase_keys.clear();
        self.detail_keys.clear();
    }

    fn push(
        &mut self,
        reason: Reason,
        key: TextKey,
        detail: impl FnOnce(&mut String),
        phrase: impl FnOnce(&mut String),
    ) {
        let phrase = match self.phrase_keys.get(&(reason, key.phrase)) {
            Some(&id) => id,
            None => {
                self.phrase.clear();
                phrase(&mut self.phrase);
                let id = self.phrases.intern(&self.phrase);
                self.phrase_keys.insert((reason, key.phrase), id);
                id
            }
        };
        let known = key.detail.and_then(|k| self.detail_keys.get(&(reason, key.phrase, k)).copied());
        let detail = match known {
            Some(id) => id,
            None => {
                self.detail.clear();
                detail(&mut self.detail);
                let id = self.details.intern(&self.detail);
                if let Some(k) = key.detail {
                    self.detail_keys.insert((reason, key.phrase, k), id);
                }
                id
            }
        };
        self.reasons.push(InternedRejection { reason, detail, phrase });
    }
}

impl<'a> Sink<'a> {
    /// A sink that only records whether anything failed.
    pub fn verdict() -> Sink<'static> {
        Sink { out: Out::Verdict, failed: false }
    }

    /// A sink that collects every rejection.
    pub fn collect(out: &'a mut Vec<Rejection>) -> Sink<'a> {
        Sink { out: Out::Owned(out), failed: false }
    }

    /// A sink that collects every rejection into `interner` (appending to its `reasons`).
    pub fn interned(interner: &'a mut Interner) -> Sink<'a> {
        Sink { out: Out::Interned(interner), failed: false }
    }

    /// Records a rejection whose detail and phrase the two closures write (called only
    /// when texts are collected, and by an interner only for texts it has not seen under
    /// the same key); returns `true` if checking should continue.
    pub fn reject(
        &mut self,
        reason: Reason,
        key: TextKey,
        detail: impl FnOnce(&mut String),
        phrase: impl FnOnce(&mut String),
    ) -> bool {
        self.failed = true;
        match &mut self.out {
            Out::Verdict => false,
            Out::Owned(out) => {
                let (mut d, mut p) = (String::new(), String::new());
                detail(&mut d);
                phrase(&mut p);
                out.push(Rejection { reason, detail: d, phrase: p });
                true
            }
            Out::Interned(interner) => {
                interner.push(reason, key, detail, phrase);
                true
            }
        }
    }

    /// Whether any rejection was recorded.
    pub fn failed(&self) -> bool {
        self.failed
    }
}

/// `reject!(sink, reason, [phrase key, detail key], (detail format…), (phrase format…))`:
/// records a rejection and returns from the check unless the sink collects texts. The keys
/// say which texts are the same within one request (see [`TextKey`]).
macro_rules! reject {
    ($sink:expr, $reason:expr, [$pk:expr, $dk:expr], ($($detail:tt)*), ($($phrase:tt)*)) => {
        if !$sink.reject(
            $reason,
            TextKey { phrase: $pk, detail: $dk },
            |d| {
                let _ = write!(d, $($detail)*);
            },
            |p| {
                let _ = write!(p, $($phrase)*);
            },
        ) {
            return;
        }
    };
}

/// `[a, b]`, written without an intermediate string.
struct List<'a, T: AsRef<str>>(&'a [T]);

impl<T: AsRef<str>> fmt::Display for List<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, x) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(x.as_ref())?;
        }
        f.write_str("]")
    }
}

/// A number as the explanations print it: integers without a fraction.
struct Num(f64);

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = self.0;
        if x.fract() == 0.0 && x.abs() < 1e15 {
            write!(f, "{}", x as i64)
        } else {
            write!(f, "{x}")
        }
    }
}

/// Context of a check beyond the request itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckContext {
    /// The request is `provisionDetached`.
    pub detached: bool,
    /// The pool's runtime has `launchDetached`.
    pub has_launch_detached: bool,
}

/// Checks every hard requirement of `req` against pool `id` with declaration `caps`.
pub fn check(id: &str, caps: &Capabilities, req: &Request, ctx: CheckContext, sink: &mut Sink<'_>) {
    if let Some(want) = &req.provider_id {
        if want != id {
            reject!(sink, Reason::ProviderIdMismatch, [0, Some(0)], ("request names {want}"), ("not provider {want}"));
        }
    }
    if ctx.detached && !ctx.has_launch_detached {
        reject!(
            sink,
            Reason::DetachedUnsupported,
            [0, Some(0)],
            ("runtime has no launchDetached"),
            ("no detached launch")
        );
    }
    // One AND decides for known names; the per-name loop runs only to report, or for
    // custom names the mask cannot hold.
    if caps.mask & req.required_mask != req.required_mask || req.required_custom {
        for (k, cap) in req.required_capabilities.iter().enumerate() {
            if !caps.has(cap) {
                reject!(
                    sink,
                    Reason::RequiredCapabilityMissing,
                    [k as u32, Some(0)],
                    ("{cap}"),
                    ("missing capability {cap}")
                );
            }
        }
    }
    if caps.mask & req.forbidden_mask != 0 || req.forbidden_custom {
        for (k, cap) in req.forbidden_capabilities.iter().enumerate() {
            if caps.has(cap) {
                reject!(
                    sink,
                    Reason::ForbiddenCapabilityPresent,
                    [k as u32, Some(0)],
                    ("{cap}"),
                    ("forbidden capability {cap}")
                );
            }
        }
    }
    if let Some(want) = &req.image_identity {
        if caps.image_identity.as_deref() != Some(want.as_str()) {
            let have = caps.image_identity.as_deref().unwrap_or("undeclared");
            reject!(sink, Reason::ImageMismatch, [0, None], ("{have} != {want}"), ("image not {want}"));
        }
    }
    for (k, bin) in req.required_binaries.iter().enumerate() {
        if !caps.binaries.iter().any(|b| b == bin) {
            reject!(sink, Reason::RequiredBinaryMissing, [k as u32, Some(0)], ("{bin}"), ("missing binary {bin}"));
        }
    }
    if !req.egress.is_empty() && !caps.egress.is_some_and(|e| req.egress.contains(&e)) {
        let have = caps.egress.unwrap_or("undeclared");
        reject!(
            sink,
            Reason::EgressMismatch,
            [0, Some(level_key(EGRESS_CLASSES, caps.egress))],
            ("{have} not in {}", List(&req.egress)),
            ("egress not in {}", List(&req.egress))
        );
    }
    for (k, sem) in req.timeout_semantics.iter().enumerate() {
        if !caps.timeout_semantics.contains(sem) {
            reject!(
                sink,
                Reason::TimeoutSemanticsMissing,
                [k as u32, Some(0)],
                ("{sem}"),
                ("missing timeout semantics {sem}")
            );
        }
    }
    if let Some(max) = req.timeout_granularity_ms {
        match caps.timeout_granularity_ms {
            Some(g) if g <= max => {}
            Some(g) => reject!(
                sink,
                Reason::TimeoutGranularity,
                [0, Some(g.to_bits())],
                ("{} ms > {} ms", Num(g), Num(max)),
                ("timeout granularity coarser than {} ms", Num(max))
            ),
            None => reject!(
                sink,
                Reason::TimeoutGranularity,
                [0, Some(UNDECLARED)],
                ("undeclared"),
                ("timeout granularity coarser than {} ms", Num(max))
            ),
        }
    }
    if let Some(need) = req.required_lifetime_ms {
        match caps.max_lifetime {
            Lifetime::Unbounded => {}
            Lifetime::Capped(cap) if cap >= need => {}
            Lifetime::Capped(cap) => reject!(
                sink,
                Reason::SandboxLifetime,
                [0, Some(cap.to_bits())],
                ("{} ms < {} ms", Num(cap), Num(need)),
                ("sandbox lifetime under {} ms", Num(need))
            ),
            Lifetime::Unknown => {
                reject!(sink, Reason::SandboxLifetime, [1, Some(0)], ("unknown"), ("sandbox lifetime unknown"))
            }
        }
    }
    if let Some(min) = req.durability {
        if caps.durability.is_none_or(|d| rank_of(DURABILITY_LEVELS, d) < rank_of(DURABILITY_LEVELS, min)) {
            let have = caps.durability.unwrap_or("undeclared");
            reject!(
                sink,
                Reason::StateDurability,
                [0, Some(level_key(DURABILITY_LEVELS, caps.durability))],
                ("{have} < {min}"),
                ("state durability below {min}")
            );
        }
    }
    for (k, r) in req.restrictions.iter().enumerate() {
        if !caps.restrictions.iter().any(|c| c == r) {
            reject!(sink, Reason::RestrictionMissing, [k as u32, Some(0)], ("{r}"), ("missing restriction {r}"));
        }
    }
    if req.region_required && !caps.regions.iter().any(|r| req.region_preferred.contains(r)) {
        reject!(
            sink,
            Reason::RegionMismatch,
            [0, None],
            ("{} not in {}", List(&caps.regions), List(&req.region_preferred)),
            ("region not in {}", List(&req.region_preferred))
        );
    }
    for (k, (name, get)) in Resources::DIMENSIONS.into_iter().enumerate() {
        let (need, have) = (get(&req.resources), get(&caps.resources));
        if need > 0.0 && need > have {
            reject!(
                sink,
                Reason::ResourcesInsufficient,
                [k as u32, Some(have.to_bits())],
                ("{name} {} > {}", Num(need), Num(have)),
                ("insufficient {name}")
            );
        }
    }
    if let Some(min) = req.isolation {
        if caps.isolation.is_none_or(|i| rank_of(ISOLATION_LEVELS, i) < rank_of(ISOLATION_LEVELS, min)) {
            let have = caps.isolation.unwrap_or("undeclared");
            reject!(
                sink,
                Reason::IsolationInsufficient,
                [0, Some(level_key(ISOLATION_LEVELS, caps.isolation))],
                ("{have} < {min}"),
                ("isolation below {min}")
            );
        }
    }
}

/// Convenience: every rejection of a pool.
pub fn rejections(id: &str, caps: &Capabilities, req: &Request, ctx: CheckContext) -> Vec<Rejection> {
    let mut out = Vec::new();
    check(id, caps, req, ctx, &mut Sink::collect(&mut out));
    out
}

/// Convenience: whether the pool passes every requirement.
pub fn satisfies(id: &str, caps: &Capabilities, req: &Request, ctx: CheckContext) -> bool {
    let mut sink = Sink::verdict();
    check(id, caps, req, ctx, &mut sink);
    !sink.failed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::request::parse_request;
    use serde_json::json;

    fn caps(v: serde_json::Value) -> Capabilities {
        Capabilities::read(&v, "c").unwrap()
    }

    fn codes(c: &Capabilities, req: serde_json::Value) -> Vec<&'static str> {
        let r = parse_request(&req).unwrap();
        rejections("p", c, &r, CheckContext::default()).iter().map(|x| x.reason.code()).collect()
    }

    #[test]
    fn required_capability_fires_when_missing_and_not_when_declared() {
        let req = json!({"requires": {"requiredCapabilities": ["pty"]}});
        assert_eq!(codes(&caps(json!({})), req.clone()), ["REQUIRED_CAPABILITY_MISSING"]);
        assert!(codes(&caps(json!({"supported": ["pty"]})), req).is_empty());
    }

    #[test]
    fn forbidden_capability_fires_when_declared_and_not_when_absent() {
        let req = json!({"requires": {"forbiddenCapabilities": ["nestedUserNamespaces"]}});
        assert_eq!(
            codes(&caps(json!({"supported": ["nestedUserNamespaces"]})), req.clone()),
            ["FORBIDDEN_CAPABILITY_PRESENT"]
        );
        assert!(codes(&caps(json!({})), req).is_empty());
    }

    #[test]
    fn lifetime_unknown_and_short_fire_and_inclusive_cap_and_unbounded_pass() {
        let req = json!({"requires": {"timeout": {"requiredSandboxLifetimeMs": 1000}}});
        assert_eq!(codes(&caps(json!({})), req.clone()), ["SANDBOX_LIFETIME"]);
        assert_eq!(codes(&caps(json!({"timeout": {"maxSandboxLifetimeMs": 999}})), req.clone()), ["SANDBOX_LIFETIME"]);
        assert!(codes(&caps(json!({"timeout": {"maxSandboxLifetimeMs": 1000}})), req.clone()).is_empty());
        assert!(codes(&caps(json!({"timeout": {"maxSandboxLifetimeMs": null}})), req).is_empty());
    }

    #[test]
    fn resources_fire_above_limit_and_not_at_limit() {
        let c = caps(json!({"resources": {"cpu": 2, "memoryMb": 4096}}));
        let r = parse_request(&json!({"resources": {"cpu": 4}})).unwrap();
        let rej = rejections("p", &c, &r, CheckContext::default());
        assert_eq!(rej[0].detail, "cpu 4 > 2");
        assert!(codes(&c, json!({"resources": {"cpu": 2, "memoryMb": 4096}})).is_empty());
        assert_eq!(codes(&c, json!({"resources": {"gpu": 1}})), ["RESOURCES_INSUFFICIENT"]);
    }

    #[test]
    fn undeclared_properties_are_never_yes() {
        let req = json!({"requires": {
            "image": {"identity": "agent-v4", "requiredBinaries": ["node"]},
            "egress": "open", "timeout": {"semantics": ["idle"], "granularityMs": 1000},
            "stateDurability": "ephemeral", "restrictions": ["read-only-root"], "isolation": "none"},
            "region": {"preferred": ["eu-west"], "required": true}});
        let got = codes(&caps(json!({})), req);
        for code in [
            "IMAGE_MISMATCH",
            "REQUIRED_BINARY_MISSING",
            "EGRESS_MISMATCH",
            "TIMEOUT_SEMANTICS_MISSING",
            "TIMEOUT_GRANULARITY",
            "STATE_DURABILITY",
            "RESTRICTION_MISSING",
            "REGION_MISMATCH",
            "ISOLATION_INSUFFICIENT",
        ] {
            assert!(got.contains(&code), "{code} in {got:?}");
        }
    }

    #[test]
    fn fully_declared_pool_satisfies_the_same_request() {
        let req = json!({"requires": {
            "image": {"identity": "agent-v4", "requiredBinaries": ["node"]},
            "egress": ["none", "open"], "timeout": {"semantics": ["idle"], "granularityMs": 1000},
            "stateDurability": "session", "restrictions": ["read-only-root"], "isolation": "container"},
            "region": {"preferred": ["eu-west"], "required": true}});
        let c = caps(json!({"image": {"identity": "agent-v4", "binaries": ["node", "git"]}, "egress": "open",
            "timeout": {"semantics": ["idle"], "granularityMs": 500}, "stateDurability": "persistent",
            "restrictions": ["read-only-root"], "isolation": "microvm", "regions": ["eu-west", "us-east"]}));
        assert!(codes(&c, req).is_empty());
    }

    #[test]
    fn ordered_levels_fire_below_and_not_at_or_above() {
        let req = json!({"requires": {"isolation": "container", "stateDurability": "session"}});
        assert_eq!(
            codes(&caps(json!({"isolation": "process", "stateDurability": "ephemeral"})), req.clone()),
            ["STATE_DURABILITY", "ISOLATION_INSUFFICIENT"]
        );
        assert!(codes(&caps(json!({"isolation": "container", "stateDurability": "session"})), req).is_empty());
    }

    #[test]
    fn detached_needs_launch_detached() {
        let r = parse_request(&json!({})).unwrap();
        let c = Capabilities::default();
        let no = CheckContext { detached: true, has_launch_detached: false };
        let yes = CheckContext { detached: true, has_launch_detached: true };
        assert!(!satisfies("p", &c, &r, no));
        assert!(satisfies("p", &c, &r, yes));
    }

    #[test]
    fn verdict_mode_agrees_with_collect_mode() {
        let c = caps(json!({"supported": ["pty"]}));
        let r = parse_request(&json!({"requires": {"requiredCapabilities": ["pty", "ssh"]}})).unwrap();
        assert!(!satisfies("p", &c, &r, CheckContext::default()));
        assert_eq!(rejections("p", &c, &r, CheckContext::default()).len(), 1);
    }
}
