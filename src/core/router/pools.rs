//! A registry's pools as the router decides over them, and the one conversion every
//! routing decision shares ([`Question`] → [`RouteOptions`]).
//!
//! A registry's definitions are parsed once (`binding/registry.rs` hands each definition's
//! text here); their runtimes stay in JavaScript. A router holds the registry it was made
//! with; a provision keeps the one it routed on for its whole life.

use crate::core::error::{CoreError, ErrorClass, Failure, Fault, PoolRejection, Rejected};
use crate::core::events::{PoolId, ReasonFact};
use crate::core::explain::summary;
use crate::core::health::{Block, Health, Observed};
use crate::core::json::{field_path, Segment};
use crate::core::pacing::RateLimit;
use crate::core::pool::Pool;
use crate::core::ranking::Slim;
use crate::core::registry::{
    requirement_survivors, route, route_interned, route_order_into, Decision, InternedDecision, Registry, RouteOptions,
    Workspace,
};
use crate::core::request::Request;
use crate::core::requirements::Interner;
use crate::core::signals::{signal_state, unresolved, SignalState};
use serde_json::Value;
use std::cell::OnceCell;
use std::collections::HashMap;
use std::rc::Rc;

/// The pools of one registry, parsed once, with what decisions over them reuse.
#[derive(Default)]
pub struct Pools {
    /// The pools.
    pub registry: Registry,
    /// Per pool: whether its definition has a capacity reader.
    pub readers: Vec<bool>,
    scratch: Vec<Slim>,
    /// The health slot of each pool, for the router health (by its id) they were taken from.
    health_slots: Option<(u64, Rc<[usize]>)>,
    /// Per pool: whether it keeps a warm pool (`warm` option); None when none does. Made on
    /// first use after a change (`warm()`), so registering n pools stays O(n).
    warm: OnceCell<Option<Rc<[bool]>>>,
    /// Per pool: its declared rate limit (`rateLimit` option); None when none declares one
    /// (`rate_limits()`, made like `warm`).
    rate_limits: OnceCell<Option<Rc<[Option<RateLimit>]>>>,
    /// Each pool's registered `estimatedCost` (budgets), made on first use.
    registered_costs: Option<Rc<[f64]>>,
    /// The pools' ids, shared by the events of every provision on this registry.
    ids: Option<Rc<[PoolId]>>,
}

/// Per-request routing inputs from the caller's callbacks: credential readiness and the
/// signal resolver's answers.
#[derive(Debug, Default, Clone)]
pub struct Extras {
    /// Pool indices whose credential readiness answered false.
    pub credentials_unavailable: Option<Vec<usize>>,
    /// The resolver's answer for each pool it was asked about.
    pub signals: Option<Vec<SignalAnswer>>,
}

/// The signal resolver's answer for one pool.
#[derive(Debug, Clone)]
pub struct SignalAnswer {
    /// Pool index.
    pub pool: usize,
    /// The answer's JSON text (None: null or undefined).
    pub json: Option<String>,
    /// Why there is no answer: the pool is excluded with `SIGNALS_UNRESOLVED`.
    pub failed: Option<ResolverFailure>,
}

/// Why the signal resolver gave no answer for a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolverFailure {
    /// It did not answer within `callbackTimeoutMs`.
    TimedOut,
    /// It threw or rejected.
    Threw,
    /// Its answer could not be read (a cycle, a throwing getter or toJSON).
    Unreadable,
}

impl ResolverFailure {
    /// The detail `SIGNALS_UNRESOLVED` carries.
    pub fn detail(self) -> &'static str {
        match self {
            ResolverFailure::TimedOut => "resolver timed out",
            ResolverFailure::Threw => "resolver threw",
            ResolverFailure::Unreadable => "resolver answered an unreadable value",
        }
    }
}

/// A pool's credential readiness answer (`provisioning.hasAvailableCredentials`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// `false`: the pool is rejected (`CREDENTIALS_UNAVAILABLE`).
    Unavailable,
    /// `true`.
    Available,
    /// It threw, rejected or timed out.
    Failed,
    /// It answered something that is not a boolean.
    NotBoolean,
}

/// The pools (by index) whose readiness answered false, or the typed
/// `PROVISIONING_AVAILABILITY_FAILED` error of the first pool (in `answers`' order, one per
/// pool) whose readiness failed or answered a non-boolean.
pub fn readiness(pools: &Pools, answers: &[Readiness]) -> Result<Vec<usize>, Failure> {
    let mut unavailable = Vec::new();
    for (i, a) in answers.iter().enumerate() {
        let what = match a {
            Readiness::Available => continue,
            Readiness::Unavailable => {
                unavailable.push(i);
                continue;
            }
            Readiness::Failed => "failed or timed out",
            Readiness::NotBoolean => "answered a non-boolean",
        };
        let id = pools.registry.pools().get(i).map_or("(unknown)", |p| p.id.as_str());
        let mut e = Fault::new(
            ErrorClass::ProvisioningAvailability,
            "PROVISIONING_AVAILABILITY_FAILED",
            format!("credential readiness for {id} {what}"),
        );
        e.provider_id = Some(id.to_string());
        return Err(e);
    }
    Ok(unavailable)
}

/// What routing needs of a router's health for one decision.
pub struct HealthView<'a> {
    /// The router's health.
    pub health: &'a Health,
    /// Health slot of each pool of the registry, by pool index.
    pub slots: Rc<[usize]>,
    /// The instant the decision is made at (ms).
    pub now: i64,
}

impl HealthView<'_> {
    /// Pools excluded now, with why (empty, without a scan, when every circuit is closed).
    fn circuit(&self) -> Vec<(usize, Block)> {
        if !self.health.any_not_closed() {
            return Vec::new();
        }
        self.slots.iter().enumerate().filter_map(|(i, &s)| self.health.block(s, self.now).map(|b| (i, b))).collect()
    }

    /// Observed signals by pool index (None when ranking does not blend them in).
    fn observed(&self) -> Option<Vec<Option<Observed>>> {
        self.health.config().observed_signals.then(|| self.slots.iter().map(|&s| self.health.observed(s)).collect())
    }
}

/// One routing question: the request and everything else that feeds the decision.
pub struct Question<'a> {
    /// The request.
    pub req: &'a Request,
    /// `provisionDetached`.
    pub detached: bool,
    /// Readiness and resolver answers.
    pub extras: Option<&'a Extras>,
    /// Capacity routing: the router's explicit provider order.
    pub provider_order: Option<&'a [String]>,
    /// Live health.
    pub health: Option<&'a HealthView<'a>>,
    /// Explanations only: pools a budget rule has no room for.
    pub over_budget: &'a [usize],
    /// Explanations only: pools pacing holds back now, with until when.
    pub paced: &'a [(usize, crate::core::pacing::Blocked)],
}

impl Question<'_> {
    /// Runs `f` with the [`RouteOptions`] of this question and `limit` / `detail`: the one
    /// conversion every decision path shares.
    pub fn with_options<T>(&self, limit: Option<usize>, detail: bool, f: impl FnOnce(&RouteOptions<'_>) -> T) -> T {
        let circuit = self.health.map(HealthView::circuit).unwrap_or_default();
        let observed = self.health.and_then(HealthView::observed);
        let unavailable: Vec<usize> = self.extras.and_then(|e| e.credentials_unavailable.clone()).unwrap_or_default();
        let overrides = self.extras.and_then(|e| e.signals.as_deref()).map(signal_overrides);
        f(&RouteOptions {
            detached: self.detached,
            credentials_unavailable: &unavailable,
            signals: overrides.as_ref(),
            provider_order: self.provider_order,
            limit,
            detail,
            circuit: &circuit,
            observed: observed.as_deref(),
            over_budget: self.over_budget,
            paced: self.paced,
        })
    }
}

/// The resolver's answers as the core reads them: an answer that is not JSON counts as
/// unreadable, like an answer JavaScript could not read.
fn signal_overrides(answers: &[SignalAnswer]) -> HashMap<usize, SignalState> {
    answers
        .iter()
        .map(|a| {
            let state = match (&a.failed, &a.json) {
                (Some(why), _) => unresolved(why.detail()),
                (None, None) => signal_state(&Value::Null),
                (None, Some(text)) => match serde_json::from_str::<Value>(text) {
                    Ok(v) => signal_state(&v),
                    Err(_) => unresolved(ResolverFailure::Unreadable.detail()),
                },
            };
            (a.pool, state)
        })
        .collect()
}

impl Pools {
    /// Adds a pool from its definition's JSON value; returns its index. A duplicate id or a
    /// malformed definition is the typed registry error.
    /// Refuses `id` when a pool of this registry already has it (`DUPLICATE_PROVIDER`, with
    /// `providerId`): asked before a definition is read further, so a duplicate is refused
    /// as one whatever else is wrong with it.
    pub fn check_new(&self, id: &str) -> Result<(), Failure> {
        match self.registry.position(id) {
            Some(_) => Err(CoreError::DuplicateProvider(id.to_string()).into()),
            None => Ok(()),
        }
    }

    /// Adds a pool from its parsed definition; returns its index.
    pub fn add(
        &mut self,
        definition: &Value,
        has_launch_detached: bool,
        has_capacity_reader: bool,
    ) -> Result<usize, Failure> {
        let pool = Pool::from_json(definition, has_launch_detached)?;
        let index = self.registry.add(pool).map_err(Failure::from)?;
        self.readers.push(has_capacity_reader);
        self.warm = OnceCell::new();
        self.rate_limits = OnceCell::new();
        self.registered_costs = None;
        self.ids = None;
        Ok(index)
    }

    /// Per pool: whether it keeps a warm pool (`warm` option); None when none does.
    pub fn warm(&self) -> Option<&Rc<[bool]>> {
        self.warm
            .get_or_init(|| {
                let pools = self.registry.pools();
                pools.iter().any(|p| p.warm.is_some()).then(|| pools.iter().map(|p| p.warm.is_some()).collect())
            })
            .as_ref()
    }

    /// Per pool: its declared rate limit (`rateLimit` option); None when none declares one.
    pub fn rate_limits(&self) -> Option<&Rc<[Option<RateLimit>]>> {
        self.rate_limits
            .get_or_init(|| {
                let pools = self.registry.pools();
                pools.iter().any(|p| p.rate_limit.is_some()).then(|| pools.iter().map(|p| p.rate_limit).collect())
            })
            .as_ref()
    }

    /// The id of pool `index`.
    pub fn pool_id(&self, index: usize) -> &str {
        &self.registry.pools()[index].id
    }

    /// Every pool's id, by index (shared).
    pub fn ids(&mut self) -> Rc<[PoolId]> {
        if let Some(ids) = &self.ids {
            return ids.clone();
        }
        let ids: Rc<[PoolId]> = self.registry.pools().iter().map(|p| PoolId::from(p.id.as_str())).collect();
        self.ids = Some(ids.clone());
        ids
    }

    /// The health slot of each pool (cached per health, by `health_id`; a registry only grows).
    pub fn health_slots(&mut self, health: &mut Health, health_id: u64) -> Rc<[usize]> {
        match &self.health_slots {
            Some((id, slots)) if *id == health_id && slots.len() == self.registry.pools().len() => slots.clone(),
            _ => {
                let slots: Rc<[usize]> = self.registry.pools().iter().map(|p| health.slot(&p.id)).collect();
                self.health_slots = Some((health_id, slots.clone()));
                slots
            }
        }
    }

    /// The candidates of one provision or route, best first (at most `limit`), or the
    /// typed `NO_ELIGIBLE_PROVIDER` failure.
    pub fn candidates(&mut self, q: &Question<'_>, limit: Option<usize>) -> Result<Vec<usize>, Failure> {
        let mut order = Vec::new();
        let (registry, scratch) = (&self.registry, &mut self.scratch);
        q.with_options(limit, false, |opts| route_order_into(registry, q.req, opts, scratch, &mut order));
        if order.is_empty() {
            return Err(self.no_eligible(q));
        }
        Ok(order)
    }

    /// Each pool's `estimatedCost` for one request (by pool index): the resolver's answer
    /// when it gave a valid one, else the registered signals (0 without valid signals).
    pub fn costs(&mut self, extras: Option<&Extras>) -> Rc<[f64]> {
        let overrides = extras.and_then(|e| e.signals.as_deref()).map(signal_overrides);
        if overrides.is_none() {
            if let Some(c) = &self.registered_costs {
                return c.clone();
            }
        }
        let costs: Rc<[f64]> = self
            .registry
            .pools()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let state = overrides.as_ref().and_then(|m| m.get(&i)).unwrap_or(&p.signals);
                state.as_ref().map_or(0.0, |s| s.estimated_cost)
            })
            .collect();
        if overrides.is_none() {
            self.registered_costs = Some(costs.clone());
        }
        costs
    }

    /// Pools that pass the hard requirements and credential readiness (the pools a signal
    /// resolver is asked about).
    pub fn survivors(&self, q: &Question<'_>) -> Vec<usize> {
        q.with_options(None, false, |opts| requirement_survivors(self.registry.pools(), q.req, opts))
    }

    /// Every pool's verdict with every reason, texts interned (explanations).
    pub fn decide_interned<'w>(
        &self,
        q: &Question<'_>,
        interner: &mut Interner,
        work: &'w mut Workspace,
    ) -> InternedDecision<'w> {
        q.with_options(None, true, |opts| route_interned(&self.registry, q.req, opts, interner, work))
    }

    /// Every pool's verdict with every reason.
    pub fn decide(&self, q: &Question<'_>) -> Decision {
        q.with_options(None, true, |opts| route(self.registry.pools(), q.req, opts))
    }

    /// The rejected pools of `d`, with their reasons, as events and errors carry them.
    pub fn rejections(&self, d: &Decision) -> Vec<PoolRejection> {
        let pools = self.registry.pools();
        d.rejected
            .iter()
            .map(|r| PoolRejection {
                provider_id: pools[r.index].id.clone(),
                reasons: r
                    .reasons
                    .iter()
                    .map(|x| ReasonFact { code: x.reason.code(), detail: x.detail.clone() })
                    .collect(),
            })
            .collect()
    }

    /// `NO_ELIGIBLE_PROVIDER` for `q`: the summary and every rejected pool with its reasons.
    fn no_eligible(&self, q: &Question<'_>) -> Failure {
        let d = self.decide(q);
        let line = summary(0, d.total, &d.rejected);
        let mut e = Fault::new(ErrorClass::NoEligibleProvider, "NO_ELIGIBLE_PROVIDER", line.clone());
        e.summary = Some(line);
        e.rejections = Some(Rejected::Pools(self.rejections(&d)));
        e
    }
}

/// What JavaScript saw reading a registry or a definition once (`lib/registry.js`,
/// `lib/route-providers.js`), where it cannot go on: [`refusal`] makes the typed error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `new InMemoryProviderRegistry(x)`: `x` is not an array.
    NotAList,
    /// `routeProviders(request, x)`: `x` is not an array.
    NotAProviderList,
    /// `routeProviders`: a definition could not be read or serialized.
    ProvidersUnreadable,
    /// The definition at a position could not be read (a property access threw).
    Unreadable,
    /// The definition at a position is not an object.
    NotAnObject,
    /// A definition's id is not a string.
    IdNotAString,
    /// A definition's runtime lacks `launch` or `destroy`.
    NoRuntime,
    /// A definition's `capacity` is not a capacity reader.
    NoCapacityReader,
    /// A definition JSON cannot carry as a whole.
    NotSerializable,
    /// The registry could not be read (its prototype trap threw).
    RegistryUnreadable,
    /// A caller registry's `list()` threw.
    ListThrew,
    /// A caller registry's `list()` answered something other than an array.
    ListNotAnArray,
    /// A caller registry's `get(id)` threw.
    GetThrew,
}

impl Refusal {
    /// Every refusal with its name (JavaScript names them by it: `registryRefusals`).
    pub const ALL: [(Refusal, &'static str); 13] = [
        (Refusal::NotAList, "NotAList"),
        (Refusal::NotAProviderList, "NotAProviderList"),
        (Refusal::ProvidersUnreadable, "ProvidersUnreadable"),
        (Refusal::Unreadable, "Unreadable"),
        (Refusal::NotAnObject, "NotAnObject"),
        (Refusal::IdNotAString, "IdNotAString"),
        (Refusal::NoRuntime, "NoRuntime"),
        (Refusal::NoCapacityReader, "NoCapacityReader"),
        (Refusal::NotSerializable, "NotSerializable"),
        (Refusal::RegistryUnreadable, "RegistryUnreadable"),
        (Refusal::ListThrew, "ListThrew"),
        (Refusal::ListNotAnArray, "ListNotAnArray"),
        (Refusal::GetThrew, "GetThrew"),
    ];
}

/// The typed error of `what`: `position` is the definition's place in its list, `provider`
/// its id when it was read (or the id asked for, `GetThrew`).
pub fn refusal(what: Refusal, position: u32, provider: Option<&str>) -> Failure {
    use Refusal as R;
    const DEFINITION: &str = "INVALID_PROVIDER_DEFINITION";
    let class = ErrorClass::ProviderRegistry;
    let item = format!("providers[{position}]");
    let of = |field: &str, expectation: &str| {
        let who = provider.map_or_else(|| format!("at position {position}"), str::to_string);
        let mut e = Fault::invalid(
            class,
            DEFINITION,
            format!("invalid provider definition {who}: {field} {expectation}"),
            field,
        );
        e.provider_id = provider.map(str::to_string);
        e
    };
    let mut e = match what {
        R::NotAList => {
            Fault::new(class, DEFINITION, "InMemoryProviderRegistry expects an array of provider definitions")
        }
        R::NotAProviderList => {
            Fault::invalid(class, DEFINITION, "routeProviders expects an array of provider definitions", "providers")
        }
        R::ProvidersUnreadable => {
            Fault::invalid(class, DEFINITION, "provider definitions must be readable and serializable", "providers")
        }
        R::Unreadable => return of(&item, "could not be read (a property access threw)"),
        R::NotAnObject => Fault::invalid(
            class,
            DEFINITION,
            format!("provider definition at position {position} must be an object"),
            item,
        ),
        R::IdNotAString => Fault::new(class, "INVALID_PROVIDER_ID", "invalid provider id: must be a string"),
        R::NoRuntime => return of("runtime", "must be a SandboxRuntime (an object with launch and destroy methods)"),
        R::NoCapacityReader => return of("capacity", "must be a CapacityReader (an object with getCapacity)"),
        R::NotSerializable => return of("(definition)", "is not serializable"),
        R::RegistryUnreadable => Fault::new(class, "REGISTRY_READ_FAILED", "the registry could not be read"),
        R::ListThrew => Fault::new(class, "REGISTRY_READ_FAILED", "registry.list() threw"),
        R::ListNotAnArray => Fault::new(class, DEFINITION, "registry.list() must return an array"),
        R::GetThrew => Fault::new(class, "REGISTRY_READ_FAILED", "registry.get() threw"),
    };
    if what == R::GetThrew {
        e.provider_id = provider.map(str::to_string);
    }
    e
}

/// A definition (`provider`'s) holding a value JSON cannot carry, at `segments`: refused
/// at that field, as the native parse refuses a field (no `providerId`: the message names it).
pub fn not_json_definition(provider: &str, segments: &[Segment], what: &str) -> Failure {
    let field = field_path("", segments);
    Fault::invalid(
        ErrorClass::ProviderRegistry,
        "INVALID_PROVIDER_DEFINITION",
        format!("invalid provider definition {provider}: {field} must be JSON data ({what} is not)"),
        field,
    )
}

/// A definition's text as JSON, or the typed registry error.
pub fn definition_value(text: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|_| {
        Fault::new(
            ErrorClass::ProviderRegistry,
            "INVALID_PROVIDER_DEFINITION",
            "provider definition is not serializable",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn must_fire_a_duplicate_id_is_refused_with_its_provider_id() {
        let mut pools = Pools::default();
        let def: Value = serde_json::json!({ "id": "a", "capabilities": {} });
        assert!(pools.check_new("a").is_ok(), "must not fire on an empty registry");
        pools.add(&def, false, false).unwrap();
        let e = pools.check_new("a").unwrap_err();
        assert_eq!((e.code.as_str(), e.provider_id.as_deref()), ("DUPLICATE_PROVIDER", Some("a")));
        assert_eq!(e.message, "duplicate provider id: a");
        assert_eq!(pools.add(&def, false, false).unwrap_err(), e, "add refuses it the same way");
    }

    #[test]
    fn warm_and_rate_limit_lists_must_fire_once_a_pool_declares_one_and_follow_later_additions() {
        let mut pools = Pools::default();
        pools.add(&serde_json::json!({ "id": "a", "capabilities": {} }), false, false).unwrap();
        assert!(pools.warm().is_none() && pools.rate_limits().is_none());
        let warm = serde_json::json!({ "id": "b", "capabilities": {}, "warm": { "size": 1 } });
        pools.add(&warm, false, false).unwrap();
        assert_eq!(pools.warm().map(|w| w.to_vec()), Some(vec![false, true]));
        let paced = serde_json::json!({ "id": "c", "capabilities": {}, "rateLimit": { "launchesPerSecond": 1 } });
        pools.add(&paced, false, false).unwrap();
        // Both lists were read before this addition: each is made again, one entry longer.
        assert_eq!(pools.warm().map(|w| w.to_vec()), Some(vec![false, true, false]));
        let limits = pools.rate_limits().expect("c declares a rate limit");
        assert_eq!(limits.iter().map(Option::is_some).collect::<Vec<_>>(), [false, false, true]);
    }

    #[test]
    fn warm_and_rate_limit_lists_must_not_fire_while_no_pool_declares_one() {
        let mut pools = Pools::default();
        for id in ["a", "b", "c"] {
            pools.add(&serde_json::json!({ "id": id, "capabilities": {} }), false, false).unwrap();
            assert!(pools.warm().is_none(), "no warm pool: no list");
            assert!(pools.rate_limits().is_none(), "no rate limit: no list");
        }
    }

    #[test]
    fn must_not_fire_a_new_id_is_not_refused() {
        let mut pools = Pools::default();
        pools.add(&serde_json::json!({ "id": "a", "capabilities": {} }), false, false).unwrap();
        assert!(pools.check_new("b").is_ok());
    }

    #[test]
    fn must_fire_a_definition_refusal_names_its_position_or_provider_and_field() {
        let e = refusal(Refusal::Unreadable, 3, None);
        assert_eq!(e.code, "INVALID_PROVIDER_DEFINITION");
        assert_eq!(e.class, ErrorClass::ProviderRegistry);
        assert_eq!(
            e.message,
            "invalid provider definition at position 3: providers[3] could not be read (a property access threw)"
        );
        assert_eq!((e.field.as_deref(), e.provider_id.as_deref()), (Some("providers[3]"), None));
        let e = refusal(Refusal::NoRuntime, 0, Some("p"));
        assert_eq!(e.message, "invalid provider definition p: runtime must be a SandboxRuntime (an object with launch and destroy methods)");
        assert_eq!((e.field.as_deref(), e.provider_id.as_deref()), (Some("runtime"), Some("p")));
        let e = refusal(Refusal::NotAnObject, 1, None);
        assert_eq!(
            (e.message.as_str(), e.field.as_deref()),
            ("provider definition at position 1 must be an object", Some("providers[1]"))
        );
    }

    #[test]
    fn must_fire_a_registry_read_refusal_carries_no_field_and_only_get_names_its_provider() {
        for what in [Refusal::RegistryUnreadable, Refusal::ListThrew] {
            let e = refusal(what, 0, Some("x"));
            assert_eq!(
                (e.code.as_str(), e.field.as_deref(), e.provider_id.as_deref()),
                ("REGISTRY_READ_FAILED", None, None)
            );
        }
        let e = refusal(Refusal::GetThrew, 0, Some("x"));
        assert_eq!((e.message.as_str(), e.provider_id.as_deref()), ("registry.get() threw", Some("x")));
        let e = refusal(Refusal::IdNotAString, 0, None);
        assert_eq!(
            (e.code.as_str(), e.message.as_str()),
            ("INVALID_PROVIDER_ID", "invalid provider id: must be a string")
        );
        let e = refusal(Refusal::ListNotAnArray, 0, None);
        assert_eq!((e.code.as_str(), e.field.as_deref()), ("INVALID_PROVIDER_DEFINITION", None));
    }

    #[test]
    fn must_fire_a_value_json_cannot_carry_is_refused_at_its_field_without_provider_id() {
        let segments = [Segment::Key("capabilities".into()), Segment::Key("regions".into()), Segment::Index(0)];
        let e = not_json_definition("p", &segments, "NaN");
        assert_eq!(e.message, "invalid provider definition p: capabilities.regions[0] must be JSON data (NaN is not)");
        assert_eq!((e.field.as_deref(), e.provider_id.as_deref()), (Some("capabilities.regions[0]"), None));
    }

    #[test]
    fn every_refusal_is_listed_once_under_its_own_name() {
        let mut names: Vec<&str> = Refusal::ALL.iter().map(|(_, n)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Refusal::ALL.len());
        for (r, name) in Refusal::ALL {
            assert_eq!(format!("{r:?}"), name);
        }
    }

    #[test]
    fn must_not_fire_a_list_refusal_names_no_position() {
        let e = refusal(Refusal::NotAProviderList, 7, None);
        assert_eq!((e.field.as_deref(), e.message.contains('7')), (Some("providers"), false));
        let e = refusal(Refusal::NotAList, 7, None);
        assert_eq!((e.field.as_deref(), e.message.contains('7')), (None, false));
    }
}
