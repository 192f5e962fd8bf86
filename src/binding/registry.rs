//! napi glue for registries (`core::router::pools`): the pools' declarations, parsed once.
//!
//! A definition crosses once, as JSON text (`lib/registry.js` reads the caller's object
//! once); its runtime stays in JavaScript. A registry is an `ExternalObject` JavaScript
//! holds, as a router is.

use crate::binding::error::guard;
use crate::binding::request::CompiledRequest;
use crate::core::router::pools::{
    definition_value, Extras, Pools, Question, ResolverFailure as CoreFailure, SignalAnswer,
};
use napi::bindgen_prelude::External;
use napi::Env;
use napi_derive::napi;
use std::cell::RefCell;
use std::rc::Rc;

/// The registered pools of one registry (`ExternalObject<Registry>`).
pub struct Registry {
    pub(crate) pools: Rc<RefCell<Pools>>,
}

/// An empty registry.
#[napi]
pub fn create_registry() -> External<Registry> {
    External::new(Registry { pools: Rc::new(RefCell::new(Pools::default())) })
}

/// Adds a pool from its `{ id, capabilities, signals, warm? }` JSON text; returns its index.
/// Throws the typed `INVALID_PROVIDER_DEFINITION` / `DUPLICATE_PROVIDER` error.
#[napi]
pub fn registry_add_pool(
    env: Env,
    registry: &External<Registry>,
    definition_json: String,
    has_launch_detached: bool,
    has_capacity_reader: bool,
) -> napi::Result<u32> {
    guard(&env, || {
        let v = definition_value(&definition_json)?;
        Ok(registry.pools.borrow_mut().add(&v, has_launch_detached, has_capacity_reader)? as u32)
    })
}

/// Number of pools.
#[napi]
pub fn registry_size(registry: &External<Registry>) -> u32 {
    registry.pools.borrow().registry.pools().len() as u32
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
    /// Why there is no answer: the pool is excluded with `SIGNALS_UNRESOLVED`.
    pub failed: Option<ResolverFailure>,
}

/// Why the signal resolver gave no answer for a pool.
#[napi]
#[derive(Clone, Copy)]
pub enum ResolverFailure {
    /// It did not answer within `callbackTimeoutMs`.
    TimedOut,
    /// It threw or rejected.
    Threw,
    /// Its answer could not be read.
    Unreadable,
}

impl From<&RouteExtras> for Extras {
    fn from(e: &RouteExtras) -> Self {
        Extras {
            credentials_unavailable: e
                .credentials_unavailable
                .as_ref()
                .map(|v| v.iter().map(|&i| i as usize).collect()),
            signals: e.signals.as_ref().map(|s| {
                s.iter()
                    .map(|a| SignalAnswer {
                        pool: a.pool as usize,
                        json: a.signals_json.clone(),
                        failed: a.failed.map(|f| match f {
                            ResolverFailure::TimedOut => CoreFailure::TimedOut,
                            ResolverFailure::Threw => CoreFailure::Threw,
                            ResolverFailure::Unreadable => CoreFailure::Unreadable,
                        }),
                    })
                    .collect()
            }),
        }
    }
}

/// Indices of the pools of `registry` that pass compiled request `request`'s hard
/// requirements and credential readiness (`credentials_unavailable`): the pools a signal
/// resolver is asked about.
#[napi]
pub fn registry_survivors(
    registry: &External<Registry>,
    request: &External<CompiledRequest>,
    detached: bool,
    credentials_unavailable: Option<Vec<u32>>,
) -> Vec<u32> {
    let extras = Extras {
        credentials_unavailable: credentials_unavailable.map(|v| v.into_iter().map(|i| i as usize).collect()),
        signals: None,
    };
    let pools = registry.pools.borrow();
    let q = Question {
        req: &request.req,
        detached,
        extras: Some(&extras),
        provider_order: None,
        health: None,
        over_budget: &[],
        paced: &[],
    };
    pools.survivors(&q).into_iter().map(|i| i as u32).collect()
}

/// Every refusal of a registry or a definition by name (`core::router::pools::Refusal`), the
/// numbers `registryRefused` takes.
#[napi]
pub fn registry_refusals() -> std::collections::HashMap<String, u32> {
    crate::core::router::pools::Refusal::ALL
        .iter()
        .enumerate()
        .map(|(i, (_, name))| (name.to_string(), i as u32))
        .collect()
}

/// Throws the core's typed error of refusal `what` (its number in `registryRefusals`; `position`: the definition's place in its
/// list; `providerId`: its id, when read).
#[napi]
pub fn registry_refused(env: Env, what: u32, position: Option<u32>, provider_id: Option<String>) -> napi::Result<()> {
    use crate::core::router::pools::{refusal, Refusal};
    guard(&env, || match Refusal::ALL.get(what as usize) {
        Some((what, _)) => Err(refusal(*what, position.unwrap_or(0), provider_id.as_deref())),
        None => Err(crate::core::error::Fault::internal("in a registry refusal")),
    })
}

/// Throws the typed error of a definition (`providerId`'s) holding a value JSON cannot
/// carry at `segments` (keys and indices); `what` says what it is.
#[napi]
pub fn definition_not_json(
    env: Env,
    provider_id: String,
    segments: Vec<napi::bindgen_prelude::Either<String, f64>>,
    what: String,
) -> napi::Result<()> {
    guard(&env, || {
        let segments = crate::binding::values::segments_of(segments);
        Err(crate::core::router::pools::not_json_definition(&provider_id, &segments, &what))
    })
}

/// Refuses `id` when `registry` already has a pool of that id (`DUPLICATE_PROVIDER`).
#[napi]
pub fn registry_check_new(env: Env, registry: &External<Registry>, id: String) -> napi::Result<()> {
    guard(&env, || registry.pools.borrow().check_new(&id))
}
