//! napi glue for registries: the pools' declarations, parsed once, and the one conversion
//! every routing decision shares ([`Question`] → `core::registry::RouteOptions`).
//!
//! A definition crosses once, as JSON text (`lib/registry.js` reads the caller's object
//! once); its runtime stays in JavaScript. Decisions cross back typed: pool indices written
//! into a lent `Uint32Array`, or the typed `NO_ELIGIBLE_PROVIDER` error with its summary and
//! every rejection.

use crate::binding::error::{guard, Failure, NativeError, ReasonRecord, RejectionRecord};
use crate::binding::handles::Handles;
use crate::core::error::ErrorClass;
use crate::core::explain::summary;
use crate::core::health::{Block, Health, Observed};
use crate::core::pool::Pool;
use crate::core::ranking::Slim;
use crate::core::registry::{
    requirement_survivors, route, route_interned, route_order_into, Decision, InternedDecision, Registry, RouteOptions,
};
use crate::core::request::Request;
use crate::core::requirements::Interner;
use crate::core::signals::{signal_state, unresolved, SignalState};
use napi::Env;
use napi_derive::napi;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// The registered pools of one registry, parsed once.
#[napi]
pub struct NativeRegistry {
    pub(crate) inner: Rc<RefCell<RegistryInner>>,
    handle: u32,
}

thread_local! {
    static REGISTRIES: RefCell<Handles<Rc<RefCell<RegistryInner>>>> = const { RefCell::new(Handles::new()) };
}

/// The registry behind `handle`.
pub(crate) fn registry_of(handle: u32) -> Result<Rc<RefCell<RegistryInner>>, Failure> {
    REGISTRIES.with(|r| r.borrow().get(handle, "registry"))
}

impl Drop for NativeRegistry {
    fn drop(&mut self) {
        let _ = REGISTRIES.try_with(|r| r.borrow_mut().remove(self.handle));
    }
}

/// What a registry holds.
pub(crate) struct RegistryInner {
    pub(crate) registry: Registry,
    /// Per pool: whether its definition has a capacity reader.
    pub(crate) readers: Vec<bool>,
    scratch: Vec<Slim>,
    /// The health slot of each pool, for the router health (by its id) they were taken from.
    health_slots: Option<(u64, Rc<[usize]>)>,
    /// Per pool: whether it keeps a warm pool (`warm` option); None when none does.
    pub(crate) warm: Option<Rc<[bool]>>,
    /// Each pool's registered `estimatedCost` (budgets), made on first use; a registration
    /// drops it.
    registered_costs: Option<Rc<[f64]>>,
}

impl Default for NativeRegistry {
    fn default() -> Self {
        Self::new()
    }
}

#[napi]
impl NativeRegistry {
    /// An empty registry.
    #[napi(constructor)]
    pub fn new() -> Self {
        let inner = Rc::new(RefCell::new(RegistryInner {
            registry: Registry::default(),
            readers: Vec::new(),
            scratch: Vec::new(),
            health_slots: None,
            warm: None,
            registered_costs: None,
        }));
        let handle = REGISTRIES.with(|r| r.borrow_mut().insert(inner.clone()));
        NativeRegistry { inner, handle }
    }

    /// Its handle for the provision path (`beginAcquisition`, `order`).
    #[napi(getter)]
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// Adds a pool from its `{ id, capabilities, signals, warm? }` JSON text; returns its index.
    /// Throws the typed `INVALID_PROVIDER_DEFINITION` / `DUPLICATE_PROVIDER` error.
    #[napi]
    pub fn add_pool(
        &self,
        env: Env,
        definition_json: String,
        has_launch_detached: bool,
        has_capacity_reader: bool,
    ) -> napi::Result<u32> {
        guard(&env, || {
            let v = serde_json::from_str::<Value>(&definition_json).map_err(|_| {
                NativeError::new(
                    ErrorClass::ProviderRegistry,
                    "INVALID_PROVIDER_DEFINITION",
                    "provider definition is not serializable",
                )
            })?;
            let pool = Pool::from_json(&v, has_launch_detached)?;
            let mut inner = self.inner.borrow_mut();
            let index = inner.registry.add(pool)?;
            inner.readers.push(has_capacity_reader);
            let pools = inner.registry.pools();
            inner.warm =
                pools.iter().any(|p| p.warm.is_some()).then(|| pools.iter().map(|p| p.warm.is_some()).collect());
            inner.registered_costs = None;
            Ok(index as u32)
        })
    }

    /// Number of pools.
    #[napi(getter)]
    pub fn size(&self) -> u32 {
        self.inner.borrow().registry.pools().len() as u32
    }
}

/// Indices of the pools of registry `registry` that pass compiled request `request`'s hard
/// requirements and credential readiness (`credentials_unavailable`): the pools a signal
/// resolver is asked about.
#[napi]
pub fn registry_survivors(
    env: Env,
    registry: u32,
    request: u32,
    detached: bool,
    credentials_unavailable: Option<Vec<u32>>,
) -> napi::Result<Vec<u32>> {
    guard(&env, || {
        let (registry, req) = (registry_of(registry)?, crate::binding::request::request_of(request)?);
        let extras = RouteExtras { credentials_unavailable, signals: None };
        let inner = registry.borrow();
        let q = Question {
            req: &req,
            detached,
            extras: Some(&extras),
            provider_order: None,
            health: None,
            over_budget: &[],
        };
        Ok(inner.survivors(&q).into_iter().map(|i| i as u32).collect())
    })
}

/// Per-request routing inputs: credential readiness and the signal resolver's answers.
#[napi(object)]
pub struct RouteExtras {
    /// Pool indices whose credential readiness answered false.
    pub credentials_unavailable: Option<Vec<u32>>,
    /// The resolver's answer for each pool it was asked about.
    pub signals: Option<Vec<PoolSignals>>,
}

/// The signal resolver's answer for one pool.
#[napi(object)]
pub struct PoolSignals {
    /// Pool index.
    pub pool: u32,
    /// The answer, serialized once by `lib/serialize.js` (null: it was null or undefined).
    pub signals_json: Option<String>,
    /// Why there is no answer (`resolver timed out`, `resolver threw`, …): the pool is
    /// excluded with `SIGNALS_UNRESOLVED`.
    pub unresolved: Option<String>,
}

/// What routing needs of a router's health for one decision.
pub(crate) struct HealthView<'a> {
    pub(crate) health: &'a Health,
    /// Health slot of each pool of the registry, by pool index (shared: an acquisition
    /// keeps them).
    pub(crate) slots: Rc<[usize]>,
    /// The instant the decision is made at (ms).
    pub(crate) now: i64,
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
pub(crate) struct Question<'a> {
    pub(crate) req: &'a Request,
    pub(crate) detached: bool,
    pub(crate) extras: Option<&'a RouteExtras>,
    /// Capacity routing: the router's explicit provider order.
    pub(crate) provider_order: Option<&'a [String]>,
    pub(crate) health: Option<&'a HealthView<'a>>,
    /// Explanations only: pools a budget rule has no room for (see `BudgetCore::over_budget`).
    pub(crate) over_budget: &'a [usize],
}

impl Question<'_> {
    /// Runs `f` with the [`RouteOptions`] of this question and `limit` / `detail`: the one
    /// conversion every decision path shares.
    fn with_options<T>(&self, limit: Option<usize>, detail: bool, f: impl FnOnce(&RouteOptions<'_>) -> T) -> T {
        let circuit = self.health.map(HealthView::circuit).unwrap_or_default();
        let observed = self.health.and_then(HealthView::observed);
        let unavailable: Vec<usize> = self
            .extras
            .and_then(|e| e.credentials_unavailable.as_ref())
            .map(|v| v.iter().map(|i| *i as usize).collect())
            .unwrap_or_default();
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
        })
    }
}

/// The resolver's answers as the core reads them: an answer that is not JSON (which
/// `lib/serialize.js` never sends) counts as unreadable, like an answer it could not read.
fn signal_overrides(answers: &[PoolSignals]) -> HashMap<usize, SignalState> {
    answers
        .iter()
        .map(|a| {
            let state = match (&a.unresolved, &a.signals_json) {
                (Some(what), _) => unresolved(what),
                (None, None) => signal_state(&Value::Null),
                (None, Some(text)) => match serde_json::from_str::<Value>(text) {
                    Ok(v) => signal_state(&v),
                    Err(_) => unresolved("resolver answered an unreadable value"),
                },
            };
            (a.pool as usize, state)
        })
        .collect()
}

impl RegistryInner {
    /// The id of pool `index`.
    pub(crate) fn pool_id(&self, index: usize) -> &str {
        &self.registry.pools()[index].id
    }

    /// The health slot of each pool (cached per health, by `health_id`; a registry only
    /// grows).
    pub(crate) fn health_slots(&mut self, health: &mut Health, health_id: u64) -> Rc<[usize]> {
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
    /// typed `NO_ELIGIBLE_PROVIDER` error.
    pub(crate) fn candidates(&mut self, q: &Question<'_>, limit: Option<usize>) -> Result<Vec<usize>, Failure> {
        let mut order = Vec::new();
        let (registry, scratch) = (&self.registry, &mut self.scratch);
        q.with_options(limit, false, |opts| route_order_into(registry, q.req, opts, scratch, &mut order));
        if order.is_empty() {
            return Err(self.no_eligible(q));
        }
        Ok(order)
    }

    /// Each pool's `estimatedCost` for one request (by pool index): the resolver's answer
    /// when it gave a valid one, else the registered signals (0 without valid signals: such
    /// a pool is never a candidate).
    pub(crate) fn costs(&mut self, extras: Option<&RouteExtras>) -> Rc<[f64]> {
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
    pub(crate) fn survivors(&self, q: &Question<'_>) -> Vec<usize> {
        q.with_options(None, false, |opts| requirement_survivors(self.registry.pools(), q.req, opts))
    }

    /// Every pool's verdict with every reason, texts interned (explanations).
    pub(crate) fn decide_interned(&self, q: &Question<'_>, interner: &mut Interner) -> InternedDecision<'_> {
        q.with_options(None, true, |opts| route_interned(self.registry.pools(), q.req, opts, interner))
    }

    fn decide(&self, q: &Question<'_>) -> Decision<'_> {
        q.with_options(None, true, |opts| route(self.registry.pools(), q.req, opts))
    }

    /// `NO_ELIGIBLE_PROVIDER` for `q`: the summary and every rejected pool with its reasons.
    fn no_eligible(&self, q: &Question<'_>) -> Failure {
        let d = self.decide(q);
        let pools = self.registry.pools();
        let line = summary(0, d.total, &d.rejected);
        let rejections = d
            .rejected
            .iter()
            .map(|r| RejectionRecord {
                provider_id: pools[r.index].id.clone(),
                reasons: r
                    .reasons
                    .iter()
                    .map(|x| ReasonRecord { code: x.reason.code().to_string(), detail: x.detail.clone() })
                    .collect(),
            })
            .collect();
        let mut e = NativeError::new(ErrorClass::NoEligibleProvider, "NO_ELIGIBLE_PROVIDER", line.clone());
        e.summary = Some(line);
        e.rejections = Some(napi::bindgen_prelude::Either::A(rejections));
        e
    }
}
