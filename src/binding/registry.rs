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
    };
    pools.survivors(&q).into_iter().map(|i| i as u32).collect()
}
