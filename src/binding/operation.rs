//! napi glue for operations by id (`core::router::operation`): the caller's values turned
//! into the core's facts, the steps written into the lent buffer, the answers typed.
//! Nothing is decided here.
//!
//! What crosses from JavaScript: its own copies of what it read from the caller (once,
//! inside a guard), whose values are only looked at for their type here (nothing of the
//! caller's runs: a primitive's type and value, a typed array's kind, our copy's own
//! properties), the JSON text of a store's answer, and what the awaited call settled with.

use crate::binding::acquisition::{write_step, ReadOutcome};
use crate::binding::clock::now_of;
use crate::binding::error::{error_object, guard, Failure};
use crate::binding::router::RouterState;
use crate::core::router::operation::{
    self, Args, Fact, FileShape, Operation, Outcome, PoolFacts, Read, ScriptShape, Shape, StoreAnswer, Thrown,
};
use crate::core::router::step::Next;
use crate::core::router::Router;
use napi::bindgen_prelude::{External, FromNapiValue, JsObjectValue, Object, Uint32ArraySlice, Unknown};
use napi::{Env, JsValue, ValueType};
use napi_derive::napi;
use std::collections::BTreeMap;

/// Most handles from launch a router keeps for operations by id (`core::router::operation`).
#[napi]
pub const HANDLE_LIMIT: u32 = operation::HANDLE_LIMIT;

/// An operation by id.
#[napi]
pub enum OperationKind {
    /// `runScript(id, options)`.
    RunScript = 0,
    /// `uploadBundle(id, bundle)`.
    UploadBundle = 1,
    /// `stop(id)`.
    Stop = 2,
    /// `start(id)`.
    Start = 3,
    /// `getSandbox(id)`.
    GetSandbox = 4,
    /// `destroy(id)`.
    Destroy = 5,
}

impl From<OperationKind> for Operation {
    fn from(k: OperationKind) -> Self {
        match k {
            OperationKind::RunScript => Operation::RunScript,
            OperationKind::UploadBundle => Operation::UploadBundle,
            OperationKind::Stop => Operation::Stop,
            OperationKind::Start => Operation::Start,
            OperationKind::GetSandbox => Operation::GetSandbox,
            OperationKind::Destroy => Operation::Destroy,
        }
    }
}

/// The step flags of operations (`step[4]`), as `core::router::operation::flags` defines them.
#[napi(object)]
pub struct OperationFlags {
    /// `Call`: the handle is `{ id: providerSandboxId }`.
    pub id_handle: u32,
    /// Drop the handle kept from launch.
    pub forget: u32,
}

/// The operation step flags' values.
#[napi]
pub fn operation_flags() -> OperationFlags {
    OperationFlags { id_handle: operation::flags::ID_HANDLE, forget: operation::flags::FORGET }
}

/// What `v` is (see `core::router::operation::Shape`).
fn shape(v: &Unknown<'_>) -> napi::Result<Shape> {
    Ok(match v.get_type()? {
        ValueType::Undefined => Shape::Undefined,
        ValueType::Null => Shape::Null,
        ValueType::String => Shape::Str,
        ValueType::Number => Shape::Num(f64::from_unknown(*v)?),
        ValueType::Object if v.is_typedarray()? || v.is_dataview()? => Shape::Bytes,
        ValueType::Object => Shape::Object,
        _ => Shape::Other,
    })
}

/// Our own copy (an object JavaScript made), or None when `v` is not an object.
fn ours<'env>(v: &Unknown<'env>) -> napi::Result<Option<Object<'env>>> {
    match v.get_type()? {
        ValueType::Object => Ok(Some(Object::<'env>::from_unknown(*v)?)),
        _ => Ok(None),
    }
}

fn field(o: &Object<'_>, name: &str) -> napi::Result<Shape> {
    shape(&o.get_named_property_unchecked::<Unknown>(name)?)
}

/// `runScript`'s options as JavaScript read them: `{ port: { command, sessionId,
/// timeoutMs, env }, entries }` (`entries`: `env`'s `[key, value]` pairs when it is an
/// object), or undefined when the options are not an object.
fn script_of(args: &Unknown<'_>) -> napi::Result<Read<ScriptShape>> {
    let Some(o) = ours(args)? else { return Ok(Read::NotObject) };
    let script: Object = o.get_named_property_unchecked("port")?;
    let entries: Option<Vec<Vec<Unknown>>> = o.get_named_property_unchecked("entries")?;
    let env = match entries {
        Some(entries) => Ok(entries
            .iter()
            .map(|pair| match pair.as_slice() {
                [k, v] if k.get_type()? == ValueType::String => Ok((String::from_unknown(*k)?, shape(v)?)),
                _ => Ok((String::new(), Shape::Other)),
            })
            .collect::<napi::Result<_>>()?),
        None => Err(field(&script, "env")?),
    };
    Ok(Read::Read(ScriptShape {
        command: field(&script, "command")?,
        session_id: field(&script, "sessionId")?,
        timeout_ms: field(&script, "timeoutMs")?,
        env,
    }))
}

/// A bundle as JavaScript read it: `{ port: { files } }`, its files copied (each object
/// entry as `{ source, destination }`) when they are an array, else undefined.
fn bundle_of(args: &Unknown<'_>) -> napi::Result<Read<Option<Vec<FileShape>>>> {
    let Some(o) = ours(args)? else { return Ok(Read::NotObject) };
    let port: Object = o.get_named_property_unchecked("port")?;
    let files: Unknown = port.get_named_property_unchecked("files")?;
    let Some(list) = ours(&files)? else { return Ok(Read::Read(None)) };
    let mut out = Vec::new();
    for i in 0..list.get_array_length()? {
        let entry: Unknown = list.get_element(i)?;
        out.push(match ours(&entry)? {
            Some(f) => FileShape::File { source: field(&f, "source")?, destination: field(&f, "destination")? },
            None => FileShape::NotObject,
        });
    }
    Ok(Read::Read(Some(out)))
}

fn args_of(kind: Operation, args: &Unknown<'_>, readable: bool) -> napi::Result<Args> {
    Ok(match kind {
        Operation::RunScript if !readable => Args::Script(Read::Unreadable),
        Operation::RunScript => Args::Script(script_of(args)?),
        Operation::UploadBundle if !readable => Args::Bundle(Read::Unreadable),
        Operation::UploadBundle => Args::Bundle(bundle_of(args)?),
        _ => Args::None,
    })
}

/// Runs `f` on the router and writes the step it answers for operation `key`.
fn stepping(
    env: &Env,
    router: &External<RouterState>,
    key: u32,
    step: Uint32ArraySlice<'_>,
    f: impl FnOnce(&mut Router) -> Result<Next, Failure>,
) -> napi::Result<()> {
    guard(env, || {
        let next = f(&mut router.router.borrow_mut())?;
        write_step(step, key, next)
    })
}

/// Begins operation `kind` on sandbox `id` (any value: a string is checked) with `args`
/// (JavaScript's copy of the caller's arguments; `readable`: false when reading them threw)
/// and writes its first step into `step`. Returns the sandbox id. Throws the typed
/// `INVALID_REQUEST` / `INVALID_SANDBOX_ID` error.
#[napi]
#[allow(clippy::too_many_arguments, reason = "a napi entry point: flat typed arguments")]
pub fn begin_operation(
    env: Env,
    router: &External<RouterState>,
    kind: OperationKind,
    id: Unknown<'_>,
    args: Unknown<'_>,
    readable: bool,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<String> {
    let op = Operation::from(kind);
    let args = args_of(op, &args, readable)?;
    let id: Option<String> = if id.get_type()? == ValueType::String { Some(String::from_unknown(id)?) } else { None };
    guard(&env, || {
        let (key, next) =
            router.router.borrow_mut().begin_operation(op, id.as_deref(), &args, now_of(None, clock_now))?;
        write_step(step, key, next)?;
        Ok(id.unwrap_or_default())
    })
}

/// The store's answer for the record (`read`: how the read ended; `json`: the answer's JSON
/// text when it answered, `null` for none, absent when it could not be serialized).
#[napi]
pub fn operation_read(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    json: Option<String>,
    read: ReadOutcome,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    let answer = match read {
        ReadOutcome::Answered => StoreAnswer::Json(json),
        ReadOutcome::Threw | ReadOutcome::TimedOut => StoreAnswer::Failed,
    };
    stepping(&env, router, key, step, |r| r.operation_read(key, &answer, now_of(None, clock_now)))
}

/// What the registry has of the record's pool: whether it is `registered`, its runtime has
/// the operation's `method` and `getById`, and this process holds the handle (`cached`).
#[napi]
#[allow(clippy::too_many_arguments, reason = "a napi entry point: flat typed arguments")]
pub fn operation_found(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    registered: bool,
    method: bool,
    get_by_id: bool,
    cached: bool,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    let facts = PoolFacts { registered, method, get_by_id, cached };
    stepping(&env, router, key, step, |r| r.operation_found(key, facts, now_of(None, clock_now)))
}

/// The awaited call resolved to `value` (only its type is looked at: `null`, `undefined` or
/// another value, which JavaScript keeps).
#[napi]
pub fn operation_answered(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    value: Unknown<'_>,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    let outcome = match value.get_type()? {
        ValueType::Null => Outcome::Null,
        ValueType::Undefined => Outcome::Undefined,
        _ => Outcome::Value,
    };
    stepping(&env, router, key, step, |r| r.operation_settled(key, &outcome, now_of(None, clock_now)))
}

fn fact(v: &Unknown<'_>) -> napi::Result<Fact> {
    Ok(match v.get_type()? {
        ValueType::Undefined | ValueType::Null => Fact::Nullish,
        ValueType::Number => Fact::Num(f64::from_unknown(*v)?),
        ValueType::String => Fact::Str(String::from_unknown(*v)?),
        _ => Fact::Other,
    })
}

pub(crate) fn thrown_of(ours: bool, facts: Option<Vec<Unknown<'_>>>, unreadable: u32) -> napi::Result<Thrown> {
    let facts = match facts {
        Some(values) if values.len() == 4 => {
            let mut out = [Fact::Nullish, Fact::Nullish, Fact::Nullish, Fact::Nullish];
            for (i, v) in values.iter().enumerate() {
                out[i] = if unreadable & (1 << i) != 0 { Fact::Unreadable } else { fact(v)? };
            }
            Some(out)
        }
        _ => None,
    };
    Ok(Thrown { ours, facts })
}

/// The awaited call threw: `ours` (the router's own package error), and, when the thrown
/// value is an object, its `[status, statusCode, response.status, code]` as read one by one
/// (`unreadable`: bit i set when reading fact i threw).
#[napi]
#[allow(clippy::too_many_arguments, reason = "a napi entry point: flat typed arguments")]
pub fn operation_threw(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    ours: bool,
    facts: Option<Vec<Unknown<'_>>>,
    unreadable: u32,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    let outcome = Outcome::Threw(thrown_of(ours, facts, unreadable)?);
    stepping(&env, router, key, step, |r| r.operation_settled(key, &outcome, now_of(None, clock_now)))
}

/// The awaited call did not settle within the step's bound.
#[napi]
pub fn operation_timed_out(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.operation_settled(key, &Outcome::TimedOut, now_of(None, clock_now)))
}

/// The store removed the record (`ok`) or not (it failed or timed out).
#[napi]
pub fn operation_unmapped(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    ok: bool,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.operation_unmapped(key, ok, now_of(None, clock_now)))
}

/// `Unmap` with the `combined` flag: the destroy's one statement (`forget`) was made (`ok`;
/// `mapped`: the record was still there; `givenBack`: a budget slot came back), or not.
#[napi]
#[allow(clippy::too_many_arguments, reason = "a report: flat typed arguments")]
pub fn operation_forgotten(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    ok: bool,
    mapped: bool,
    given_back: bool,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.operation_forgotten(key, ok, mapped, given_back, now_of(None, clock_now)))
}

/// The shared ledger's release answered (`givenBack`: it held a budget slot; false when it
/// failed).
#[napi]
pub fn operation_released(
    env: Env,
    router: &External<RouterState>,
    key: u32,
    given_back: bool,
    step: Uint32ArraySlice<'_>,
    clock_now: Option<f64>,
) -> napi::Result<()> {
    stepping(&env, router, key, step, |r| r.operation_released(key, given_back, now_of(None, clock_now)))
}

/// What an operation's steps concern.
#[napi(object)]
pub struct OperationTarget {
    /// The pool (the record's).
    pub provider_id: String,
    /// The provider's id of the sandbox.
    pub provider_sandbox_id: String,
    /// The runtime method the `Call` step calls.
    pub method: Option<String>,
}

/// What operation `key`'s steps concern (once its record is read).
#[napi]
pub fn operation_target(env: Env, router: &External<RouterState>, key: u32) -> napi::Result<OperationTarget> {
    guard(&env, || {
        let t = router.router.borrow().operation_target(key)?;
        Ok(OperationTarget {
            provider_id: t.provider_id,
            provider_sandbox_id: t.provider_sandbox_id,
            method: t.method.map(str::to_string),
        })
    })
}

/// A sandbox's mapping record, as `router.getSandbox()` returns it (`id` and `createdAt`
/// absent when the store gave none).
#[napi(object, object_from_js = false)]
pub struct SandboxRecord {
    /// `sbx_…`.
    pub id: Option<String>,
    /// Its pool.
    pub provider_id: String,
    /// The provider's id of the sandbox.
    pub provider_sandbox_id: String,
    /// Its labels (in key order).
    pub labels: BTreeMap<String, String>,
    /// ISO 8601.
    pub created_at: Option<String>,
    /// From `provisionDetached`.
    pub detached: bool,
}

/// What an operation resolves to.
#[napi]
pub enum OperationAnswer {
    /// What the runtime's method resolved to (`runScript`, `uploadBundle`, `stop`, `start`).
    Runtime = 0,
    /// The mapping record (`getSandbox`).
    Record = 1,
    /// Nothing (`destroy`).
    Nothing = 2,
}

/// How an operation ended.
#[napi(object, object_from_js = false)]
pub struct OperationEnding<'env> {
    /// Failed: the typed error (`lib/errors.js` `fromNative` builds its instance).
    #[napi(ts_type = "Error | undefined")]
    pub error: Option<Object<'env>>,
    /// Failed: the runtime threw the router's own package error: rethrow that error as it is.
    pub package: bool,
    /// Succeeded: what it resolves to.
    pub answer: OperationAnswer,
    /// `getSandbox`: the record.
    pub record: Option<SandboxRecord>,
}

/// How operation `key` ended (at its `Succeeded` or `Done` step); the job is ended with it.
#[napi]
pub fn operation_end<'env>(
    env: &'env Env,
    router: &External<RouterState>,
    key: u32,
) -> napi::Result<OperationEnding<'env>> {
    let e = guard(env, || {
        let mut r = router.router.borrow_mut();
        let ending = r.operation_ending(key);
        r.end(key);
        ending
    })?;
    Ok(OperationEnding {
        package: e.package,
        error: e.error.map(|f| error_object(env, &f)).transpose()?,
        answer: match e.answer {
            operation::Answer::Runtime => OperationAnswer::Runtime,
            operation::Answer::Record => OperationAnswer::Record,
            operation::Answer::Nothing => OperationAnswer::Nothing,
        },
        record: e.record.map(|r| SandboxRecord {
            id: r.id,
            provider_id: r.provider_id,
            provider_sandbox_id: r.provider_sandbox_id,
            labels: r.labels.into_iter().collect(),
            created_at: r.created_at,
            detached: r.detached,
        }),
    })
}
