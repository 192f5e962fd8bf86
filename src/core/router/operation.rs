//! Operations by id (`runScript`, `uploadBundle`, `stop`, `start`, `getSandbox`, `destroy`)
//! and the release of a sandbox reconcile reclaimed: jobs of the router, stepped like
//! provisions (`provision.rs`), in a slab of their own.
//!
//! An operation never reroutes: the sandbox's record in the caller's store names its pool,
//! and every call goes to that pool's runtime. What the router decides, and JavaScript only
//! performs: the id and argument checks, what the store's answer means (a record, none, or
//! not a mapping), whether the pool is registered and its runtime has the method, which
//! handle to use (the one kept from launch, one re-resolved with
//! `getById(providerSandboxId, { owned: true })`, or the provider id itself), what a thrown
//! value means ("not found" is the sandbox gone), every bound (the operation deadline, the
//! callback deadline, runScript's own `timeoutMs` plus [`RUN_SCRIPT_GRACE_MS`]), every error,
//! and what a destroyed sandbox gives back (its capacity hold and budget slot: events
//! `budget.released` and `sandbox.destroyed`).
//!
//! Why re-resolve as *owned*? The record proves this router made the sandbox: an adapter's
//! attached handle would make `destroy` forget the sandbox instead of deleting it, and would
//! downgrade the adapter's record for every other caller of the same adapter instance.

use super::slab::Slab;
use super::step::{Next, StepKind};
use super::{Now, Router};
use crate::core::error::{ErrorClass, Failure, Fault};
use crate::core::events::{Event, PoolId};
use crate::core::ids::SandboxKey;
use crate::core::json::{join, shown};
use serde_json::Value;

/// Most handles from launch a router keeps for operations by id (JavaScript holds them; past
/// this many it drops the oldest). A sandbox that ends without the router hearing of it (its
/// own timeout, a destroy elsewhere) would otherwise keep its handle, and whatever the
/// adapter hangs on it, for the life of the router; an operation on a sandbox whose handle
/// was dropped re-resolves it, as after a restart.
pub const HANDLE_LIMIT: u32 = 65_536;

/// Extra time a `runScript` gets over its own `timeoutMs` when that is longer than the
/// operation deadline (the command's own timeout, then the provider's reply).
pub const RUN_SCRIPT_GRACE_MS: u64 = 60_000;

/// The bit that marks an operation's job key (provision keys never reach it): one `end`
/// for every job.
pub const OPERATION_KEY: u32 = 1 << 31;

/// The step flags of operations (`step[4]`), above the provision flags (`step::flags`).
pub mod flags {
    /// `Call`: the handle is `{ id: providerSandboxId }` (a runtime without `getById`).
    pub const ID_HANDLE: u32 = 1 << 8;
    /// The handle kept from launch is to be dropped (the sandbox is gone or unmapped).
    pub const FORGET: u32 = 1 << 9;
}

/// An operation by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `runScript(id, options)`.
    RunScript,
    /// `uploadBundle(id, bundle)`.
    UploadBundle,
    /// `stop(id)`.
    Stop,
    /// `start(id)`.
    Start,
    /// `getSandbox(id)`: the record, once its pool is known to be registered.
    GetSandbox,
    /// `destroy(id)`.
    Destroy,
}

impl Operation {
    /// The runtime method it calls (None: it calls none).
    pub fn method(self) -> Option<&'static str> {
        match self {
            Operation::RunScript => Some("runScript"),
            Operation::UploadBundle => Some("uploadBundle"),
            Operation::Stop => Some("stop"),
            Operation::Start => Some("start"),
            Operation::Destroy => Some("destroy"),
            Operation::GetSandbox => None,
        }
    }
}

/// What an operation resolves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// What the runtime's method resolved to.
    Runtime,
    /// The sandbox's mapping record.
    Record,
    /// Nothing.
    Nothing,
}

impl Operation {
    /// What it resolves to.
    pub fn answer(self) -> Answer {
        match self {
            Operation::GetSandbox => Answer::Record,
            Operation::Destroy => Answer::Nothing,
            _ => Answer::Runtime,
        }
    }
}

/// What a caller's value is (its type; a number's value), as the glue saw it in our own
/// copy: nothing of the caller's runs to find out.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// `undefined`.
    Undefined,
    /// `null`.
    Null,
    /// A string.
    Str,
    /// A number.
    Num(f64),
    /// A typed array or a `DataView` (a `Buffer`, …).
    Bytes,
    /// Any other object (an array, a function excluded).
    Object,
    /// A boolean, a function, a symbol, a BigInt.
    Other,
}

/// A caller's argument object as JavaScript read it (once, inside a guard).
#[derive(Debug, Clone, PartialEq)]
pub enum Read<T> {
    /// It is not an object.
    NotObject,
    /// Reading it threw.
    Unreadable,
    /// What was read.
    Read(T),
}

/// `runScript`'s options, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptShape {
    /// `command`.
    pub command: Shape,
    /// `sessionId`.
    pub session_id: Shape,
    /// `timeoutMs`.
    pub timeout_ms: Shape,
    /// `env`: its entries when it is an object (copied), else what it is.
    pub env: Result<Vec<(String, Shape)>, Shape>,
}

/// One entry of a bundle's `files`, as read.
#[derive(Debug, Clone, PartialEq)]
pub enum FileShape {
    /// It is not an object.
    NotObject,
    /// Its `source` and `destination`.
    File {
        /// `source`.
        source: Shape,
        /// `destination`.
        destination: Shape,
    },
}

/// An operation's arguments, as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Args {
    /// None (`stop`, `start`, `getSandbox`, `destroy`).
    None,
    /// `runScript`'s options.
    Script(Read<ScriptShape>),
    /// `uploadBundle`'s bundle: its `files` when they are an array.
    Bundle(Read<Option<Vec<FileShape>>>),
}

/// A fact of a thrown value (one property, read on its own inside a guard).
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    /// `undefined` or `null`.
    Nullish,
    /// A number.
    Num(f64),
    /// A string.
    Str(String),
    /// Anything else.
    Other,
    /// Reading it threw.
    Unreadable,
}

/// What the router reads of a value a runtime call threw: its `status`, `statusCode`,
/// `response.status` and `code`. None: it is not an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Thrown {
    /// The router's own package error (`PROVIDER_PACKAGE_MISSING`, …): rethrown as it is.
    pub ours: bool,
    /// `[status, statusCode, response.status, code]`.
    pub facts: Option<[Fact; 4]>,
}

/// Whether a thrown value says the sandbox is gone: an HTTP 404 (`status`, else `statusCode`,
/// else `response.status`) or a `code` of `NOT_FOUND` / `ENOENT`. A fact that cannot be read
/// proves nothing.
pub fn is_not_found(thrown: &Thrown) -> bool {
    let Some([status, status_code, response_status, code]) = &thrown.facts else { return false };
    for fact in [status, status_code, response_status] {
        match fact {
            Fact::Unreadable => return false,
            Fact::Nullish => continue,
            Fact::Num(n) if *n == 404.0 => return true,
            _ => break,
        }
    }
    matches!(code, Fact::Str(c) if c == "NOT_FOUND" || c == "ENOENT")
}

/// What a runtime call (or `getById`) settled with.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It resolved to `null`.
    Null,
    /// It resolved to `undefined`.
    Undefined,
    /// It resolved to a value (JavaScript keeps it).
    Value,
    /// It threw or rejected.
    Threw(Thrown),
    /// It did not settle within the step's bound.
    TimedOut,
}

/// What the caller's store answered for the sandbox's record.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreAnswer {
    /// It threw, rejected or did not answer within the bound.
    Failed,
    /// Its answer's JSON text (`null` for `null` or `undefined`); None: it could not be
    /// serialized (a getter threw, a cycle, a function).
    Json(Option<String>),
}

/// A mapping record as `getSandbox` returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRecord {
    /// `sbx_…`, when the store gave one.
    pub id: Option<String>,
    /// Its pool.
    pub provider_id: String,
    /// The provider's id of the sandbox.
    pub provider_sandbox_id: String,
    /// Its labels.
    pub labels: Vec<(String, String)>,
    /// When it was made, when the store gave it.
    pub created_at: Option<String>,
    /// From `provisionDetached`.
    pub detached: bool,
}

/// A store's answer that is not a mapping record (`MAPPING_READ_FAILED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAMapping;

impl std::fmt::Display for NotAMapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the store's answer is not a mapping record")
    }
}

impl std::error::Error for NotAMapping {}

/// The record in `json` (a store's answer): Ok(None) when there is none (`null`); Err when
/// it is not a mapping (not an object, no string `providerId`, no non-empty string
/// `providerSandboxId`, labels that are not an object of strings).
pub fn record_of(json: &str) -> Result<Option<StoredRecord>, NotAMapping> {
    let v: Value = serde_json::from_str(json).map_err(|_| NotAMapping)?;
    let o = match v {
        Value::Null => return Ok(None),
        Value::Object(o) => o,
        _ => return Err(NotAMapping),
    };
    let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    let labels = match o.get("labels") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())).ok_or(NotAMapping))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(NotAMapping),
    };
    let (Some(provider_id), Some(provider_sandbox_id)) = (text("providerId"), text("providerSandboxId")) else {
        return Err(NotAMapping);
    };
    if provider_sandbox_id.is_empty() {
        return Err(NotAMapping);
    }
    Ok(Some(StoredRecord {
        id: text("id"),
        provider_id,
        provider_sandbox_id,
        labels,
        created_at: text("createdAt"),
        detached: o.get("detached") == Some(&Value::Bool(true)),
    }))
}

/// What JavaScript found of the record's pool in the caller's registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolFacts {
    /// The registry has the pool.
    pub registered: bool,
    /// Its runtime has the operation's method.
    pub method: bool,
    /// Its runtime has `getById`.
    pub get_by_id: bool,
    /// This process keeps the handle from the sandbox's launch.
    pub cached: bool,
}

/// What a step concerns: the pool, the provider's id of the sandbox, the runtime method.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The pool.
    pub provider_id: String,
    /// The provider's id of the sandbox (empty for a reclaim).
    pub provider_sandbox_id: String,
    /// The runtime method the `Call` step calls.
    pub method: Option<&'static str>,
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Ending {
    /// Failed: its error (None after a success).
    pub error: Option<Failure>,
    /// Failed because the runtime threw the router's own package error (rethrown as it is).
    pub package: bool,
    /// Succeeded: what it resolves to.
    pub answer: Answer,
    /// `getSandbox`: the record.
    pub record: Option<StoredRecord>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    ReadRecord,
    FindPool,
    /// Re-resolving the handle before the call.
    Resolve,
    Call,
    /// After a failed destroy: is the sandbox gone?
    Recheck,
    Unmap,
    Release,
    Succeeded,
    Failed,
}

struct Job {
    op: Operation,
    id: SandboxKey,
    stage: Stage,
    /// The bound of the `Call` step, ms.
    call_ms: u64,
    record: Option<StoredRecord>,
    /// The pool (the record's, or the reclaimed sandbox's).
    pool: String,
    get_by_id: bool,
    id_handle: bool,
    forget: bool,
    /// A budget slot was given back.
    given_back: bool,
    fault: Option<Failure>,
    package: bool,
    /// The record came from [`Written`], not from a read.
    unread: bool,
}

/// The operations in flight, by key (with [`OPERATION_KEY`] set).
#[derive(Default)]
pub(crate) struct Operations {
    items: Slab<Job>,
    /// What a destroy needs of the records this router wrote itself (below).
    pub(crate) written: Written,
}

/// The pool and provider id of each record this router wrote itself while the mapping store
/// is the coordinator (`combined`), so that a destroy of it reads nothing first: its one
/// statement (`forget`) says whether the record was still there, and a record gone meanwhile
/// (destroyed by another process) ends as `SANDBOX_NOT_FOUND`, as a read would have. At most
/// [`HANDLE_LIMIT`] (the oldest dropped first, as the handles kept from launch); an entry goes
/// when a destroy of it begins or an operation forgets its sandbox.
#[derive(Default)]
pub(crate) struct Written {
    items: hashlink::LinkedHashMap<SandboxKey, (String, String)>,
}

impl Written {
    pub(crate) fn insert(&mut self, id: SandboxKey, pool: String, provider_sandbox_id: String) {
        self.items.insert(id, (pool, provider_sandbox_id));
        while self.items.len() > HANDLE_LIMIT as usize {
            self.items.pop_front();
        }
    }

    pub(crate) fn take(&mut self, id: &SandboxKey) -> Option<(String, String)> {
        self.items.remove(id)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }
}

impl Operations {
    fn insert(&mut self, job: Job) -> u32 {
        self.items.insert(job) | OPERATION_KEY
    }

    fn get(&self, key: u32) -> Result<&Job, Failure> {
        self.items.get(key & !OPERATION_KEY).ok_or_else(|| Fault::internal("(an unknown operation key)"))
    }

    fn get_mut(&mut self, key: u32) -> Result<&mut Job, Failure> {
        self.items.get_mut(key & !OPERATION_KEY).ok_or_else(|| Fault::internal("(an unknown operation key)"))
    }

    /// Forgets operation `key` (an unknown key does nothing), and what was written of its
    /// sandbox if it forgot the sandbox.
    pub(crate) fn remove(&mut self, key: u32) {
        if let Some(job) = self.items.remove(key & !OPERATION_KEY) {
            if job.forget {
                self.written.take(&job.id);
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }
}

/// `provider P failed during OPERATION` (`PROVIDER_RUNTIME_ERROR`): only the pool and the
/// operation, never what the provider said.
pub fn runtime_error(provider_id: &str, operation: &str) -> Failure {
    let mut e = Fault::new(
        ErrorClass::ProviderRuntime,
        "PROVIDER_RUNTIME_ERROR",
        format!("provider {provider_id} failed during {operation}"),
    );
    e.provider_id = Some(provider_id.to_string());
    e.operation = Some(operation.to_string());
    e
}

/// `OPERATION_TIMEOUT`: the call did not settle within `ms`; its outcome is unknown.
pub fn timeout_error(provider_id: &str, operation: &str, ms: u64) -> Failure {
    let mut e = Fault::new(
        ErrorClass::ProviderRuntime,
        "OPERATION_TIMEOUT",
        format!("provider {provider_id} did not settle {operation} within {ms} ms; outcome unknown"),
    );
    e.provider_id = Some(provider_id.to_string());
    e.operation = Some(operation.to_string());
    e.timeout_ms = Some(ms as f64);
    e
}

fn not_found(id: SandboxKey, at: Option<&str>) -> Failure {
    let message = match at {
        None => format!("no sandbox {id}"),
        Some(p) => format!("sandbox {id} no longer exists at {p}"),
    };
    let mut e = Fault::new(ErrorClass::SandboxNotFound, "SANDBOX_NOT_FOUND", message);
    e.sandbox_id = Some(id.to_string());
    e.provider_id = at.map(str::to_string);
    e
}

fn invalid_request(what: &str, field: &str, expectation: &str) -> Failure {
    Fault::invalid(
        ErrorClass::RequestValidation,
        "INVALID_REQUEST",
        format!("invalid {what}: {field} {expectation}"),
        field,
    )
}

/// `INVALID_SANDBOX_ID` for an id that is not a string (`field: id`).
pub fn id_not_a_string() -> Failure {
    Fault::invalid(ErrorClass::RequestValidation, "INVALID_SANDBOX_ID", "invalid sandbox id: must be a string", "id")
}

/// The id of an operation: a string of the `sbx_` form (`INVALID_SANDBOX_ID` otherwise).
pub fn sandbox_key(id: Option<&str>) -> Result<SandboxKey, Failure> {
    Ok(SandboxKey::parse_checked(id.ok_or_else(id_not_a_string)?)?)
}

/// Validates `runScript`'s options; the bound of its call: the operation deadline, or, for
/// a command whose own `timeoutMs` is longer, that plus [`RUN_SCRIPT_GRACE_MS`].
pub fn script_bound(options: &Read<ScriptShape>, operation_timeout_ms: u64) -> Result<u64, Failure> {
    let invalid = |field: &str, expectation: &str| invalid_request("runScript options", field, expectation);
    let o = match options {
        Read::NotObject => return Err(invalid("command", "must be a string")),
        Read::Unreadable => return Err(invalid("options", "could not be read (a property access threw)")),
        Read::Read(o) => o,
    };
    if o.command != Shape::Str {
        return Err(invalid("command", "must be a string"));
    }
    if !matches!(o.session_id, Shape::Undefined | Shape::Str) {
        return Err(invalid("sessionId", "must be a string"));
    }
    let own = match o.timeout_ms {
        Shape::Undefined => None,
        Shape::Num(n) if n > 0.0 => Some(n),
        _ => return Err(invalid("timeoutMs", "must be a number > 0")),
    };
    match &o.env {
        Err(Shape::Undefined) => {}
        Err(_) => return Err(invalid("env", "must be an object of strings")),
        Ok(entries) => {
            if let Some((k, _)) = entries.iter().find(|(_, v)| *v != Shape::Str) {
                return Err(invalid(&join("env", k), "must be a string"));
            }
        }
    }
    Ok(match own {
        Some(t) if t.is_finite() && t > operation_timeout_ms as f64 => {
            (t.ceil() as u64).saturating_add(RUN_SCRIPT_GRACE_MS)
        }
        _ => operation_timeout_ms,
    })
}

/// Validates a bundle: `files`, an array of `{ source, destination }` with a string
/// `destination` and a string or `Buffer` (any typed array or `DataView`) `source`.
pub fn check_bundle(bundle: &Read<Option<Vec<FileShape>>>) -> Result<(), Failure> {
    let invalid = |field: &str, expectation: &str| invalid_request("bundle", field, expectation);
    let files = match bundle {
        Read::NotObject | Read::Read(None) => return Err(invalid("files", "must be an array")),
        Read::Unreadable => return Err(invalid("files", "could not be read (a property access threw)")),
        Read::Read(Some(files)) => files,
    };
    for (i, f) in files.iter().enumerate() {
        match f {
            FileShape::NotObject => return Err(invalid(&format!("files[{i}]"), "must be an object")),
            FileShape::File { destination, .. } if *destination != Shape::Str => {
                return Err(invalid(&format!("files[{i}].destination"), "must be a string"));
            }
            FileShape::File { source, .. } if !matches!(source, Shape::Str | Shape::Bytes) => {
                return Err(invalid(&format!("files[{i}].source"), "must be a string or a Buffer"));
            }
            FileShape::File { .. } => {}
        }
    }
    Ok(())
}

impl Router {
    /// Begins operation `op` on sandbox `id` (None: not a string) with `args`: the arguments
    /// are checked first (`INVALID_REQUEST` naming the field), then the id
    /// (`INVALID_SANDBOX_ID`). Returns the job's key and its first step (read the record).
    pub fn begin_operation(
        &mut self,
        op: Operation,
        id: Option<&str>,
        args: &Args,
        now: Now,
    ) -> Result<(u32, Next), Failure> {
        self.clock = now.router;
        let call_ms = match args {
            Args::Script(options) => script_bound(options, self.operation_timeout_ms)?,
            Args::Bundle(bundle) => {
                check_bundle(bundle)?;
                self.operation_timeout_ms
            }
            Args::None => self.operation_timeout_ms,
        };
        let id = sandbox_key(id)?;
        let written = match op {
            Operation::Destroy if self.combined => self.operations.written.take(&id),
            _ => None,
        };
        let unread = written.is_some();
        let (stage, pool, record) = match written {
            Some((pool, provider_sandbox_id)) => {
                let record = StoredRecord {
                    id: Some(id.to_string()),
                    provider_id: pool.clone(),
                    provider_sandbox_id,
                    labels: Vec::new(),
                    created_at: None,
                    detached: false,
                };
                (Stage::FindPool, pool, Some(record))
            }
            None => (Stage::ReadRecord, String::new(), None),
        };
        let key = self.operations.insert(Job {
            op,
            id,
            stage,
            call_ms,
            record,
            pool,
            get_by_id: false,
            id_handle: false,
            forget: false,
            given_back: false,
            fault: None,
            package: false,
            unread,
        });
        Ok((key, self.operation_step(key)?))
    }

    /// Operation `key`'s current step.
    pub fn operation_step(&self, key: u32) -> Result<Next, Failure> {
        let job = self.operations.get(key)?;
        let at = |kind: StepKind, bound_ms: u64| Next { kind, pool: 0, bound_ms, flags: 0 };
        let mut next = match job.stage {
            Stage::ReadRecord => at(StepKind::ReadRecord, self.callback_timeout_ms),
            Stage::FindPool => at(StepKind::FindPool, 0),
            Stage::Resolve | Stage::Recheck => at(StepKind::Resolve, self.operation_timeout_ms),
            Stage::Call => {
                let mut n = at(StepKind::Call, job.call_ms);
                if job.id_handle {
                    n.flags |= flags::ID_HANDLE;
                }
                n
            }
            Stage::Unmap => {
                let mut n = at(StepKind::Unmap, self.callback_timeout_ms);
                if self.combined {
                    n.flags |= super::step::flags::COMBINED;
                }
                n
            }
            // The coordinator bounds its own calls (its `timeoutMs`).
            Stage::Release => at(StepKind::Release, 0),
            Stage::Succeeded => at(StepKind::Succeeded, 0),
            Stage::Failed => at(StepKind::Done, 0),
        };
        if job.forget {
            next.flags |= flags::FORGET;
        }
        if !self.wakes.is_empty() {
            next.flags |= super::step::flags::WAKE;
        }
        Ok(next)
    }

    fn stage_of(&mut self, key: u32, expected: &[Stage]) -> Result<&mut Job, Failure> {
        let job = self.operations.get_mut(key)?;
        if !expected.contains(&job.stage) {
            return Err(Fault::internal("(an operation report out of turn)"));
        }
        Ok(job)
    }

    /// The caller's store answered for the record: none is `SANDBOX_NOT_FOUND` (and the
    /// handle kept from launch is dropped), a failure or an answer that is not a mapping is
    /// `MAPPING_READ_FAILED`; a record names the pool to find next.
    pub fn operation_read(&mut self, key: u32, answer: &StoreAnswer, now: Now) -> Result<Next, Failure> {
        self.clock = now.router;
        let job = self.stage_of(key, &[Stage::ReadRecord])?;
        let record = match answer {
            StoreAnswer::Json(Some(text)) => record_of(text),
            StoreAnswer::Json(None) | StoreAnswer::Failed => Err(NotAMapping),
        };
        match record {
            Err(NotAMapping) => {
                let mut e = Fault::new(
                    ErrorClass::MappingPersistence,
                    "MAPPING_READ_FAILED",
                    format!("mapping store failed to read {}", job.id),
                );
                e.sandbox_id = Some(job.id.to_string());
                job.fault = Some(e);
                job.stage = Stage::Failed;
            }
            Ok(None) => {
                job.fault = Some(not_found(job.id, None));
                job.forget = true;
                job.stage = Stage::Failed;
            }
            Ok(Some(r)) => {
                job.pool = r.provider_id.clone();
                job.record = Some(r);
                job.stage = Stage::FindPool;
            }
        }
        self.operation_step(key)
    }

    /// What the record's pool is in the caller's registry: unregistered is
    /// `PROVIDER_NOT_REGISTERED`; a runtime without the operation's method is
    /// `PROVIDER_RUNTIME_ERROR`; then the handle: the one kept from launch, else re-resolved
    /// (`getById`), else (no `getById`) the provider's id as the handle.
    pub fn operation_found(&mut self, key: u32, pool: PoolFacts, now: Now) -> Result<Next, Failure> {
        self.clock = now.router;
        let job = self.stage_of(key, &[Stage::FindPool])?;
        if !pool.registered {
            let mut e = Fault::new(
                ErrorClass::ProviderRegistry,
                "PROVIDER_NOT_REGISTERED",
                format!("sandbox {} belongs to provider {}, which is not registered", job.id, shown(&job.pool)),
            );
            e.sandbox_id = Some(job.id.to_string());
            e.provider_id = Some(job.pool.clone());
            job.fault = Some(e);
            job.stage = Stage::Failed;
            return self.operation_step(key);
        }
        job.get_by_id = pool.get_by_id;
        job.stage = match (job.op, job.op.method()) {
            (Operation::GetSandbox, _) => Stage::Succeeded,
            (Operation::Destroy, _) | (_, None) => Stage::Call,
            (_, Some(method)) if !pool.method => {
                job.fault = Some(runtime_error(&job.pool, method));
                Stage::Failed
            }
            _ => Stage::Call,
        };
        if job.stage == Stage::Call && !pool.cached {
            if pool.get_by_id {
                job.stage = Stage::Resolve;
            } else {
                job.id_handle = true;
            }
        }
        self.operation_step(key)
    }

    /// A runtime call settled: `getById` re-resolving the handle (`Resolve`), the operation
    /// itself (`Call`), or `getById` after a failed destroy (`Recheck`).
    pub fn operation_settled(&mut self, key: u32, outcome: &Outcome, now: Now) -> Result<Next, Failure> {
        self.clock = now.router;
        let operation_ms = self.operation_timeout_ms;
        let job = self.stage_of(key, &[Stage::Resolve, Stage::Call, Stage::Recheck])?;
        let method = job.op.method().unwrap_or("destroy");
        let destroy = job.op == Operation::Destroy;
        let fail = |job: &mut Job, e: Failure| {
            job.fault = Some(e);
            Stage::Failed
        };
        job.stage = match (job.stage, outcome) {
            (_, Outcome::Threw(t)) if t.ours && job.stage != Stage::Recheck => {
                job.package = true;
                Stage::Failed
            }
            // Re-resolving: "not found" (an answer of null or undefined, or a thrown 404) is
            // the sandbox gone; a destroy then has nothing left to destroy.
            (Stage::Resolve, Outcome::Null | Outcome::Undefined) => {
                if destroy {
                    Stage::Unmap
                } else {
                    let e = not_found(job.id, Some(&job.pool));
                    fail(job, e)
                }
            }
            (Stage::Resolve, Outcome::Threw(t)) if is_not_found(t) => {
                if destroy {
                    Stage::Unmap
                } else {
                    let e = not_found(job.id, Some(&job.pool));
                    fail(job, e)
                }
            }
            (Stage::Resolve, Outcome::Value) => Stage::Call,
            (Stage::Resolve, Outcome::Threw(_)) => {
                let e = runtime_error(&job.pool, &format!("{method}: getById"));
                fail(job, e)
            }
            (Stage::Resolve, Outcome::TimedOut) => {
                let e = timeout_error(&job.pool, &format!("{method}: getById"), operation_ms);
                fail(job, e)
            }
            // The operation: outcome unknown after its bound (a destroy keeps the mapping, so
            // the call can be retried).
            (Stage::Call, Outcome::TimedOut) => {
                let e = timeout_error(&job.pool, method, job.call_ms);
                fail(job, e)
            }
            (Stage::Call, Outcome::Threw(t)) if destroy => {
                if is_not_found(t) {
                    Stage::Unmap
                } else if job.get_by_id {
                    Stage::Recheck
                } else {
                    let e = runtime_error(&job.pool, method);
                    fail(job, e)
                }
            }
            (Stage::Call, Outcome::Threw(_)) => {
                let e = runtime_error(&job.pool, method);
                fail(job, e)
            }
            (Stage::Call, _) if destroy => Stage::Unmap,
            (Stage::Call, _) => Stage::Succeeded,
            // After a failed destroy, only `null` says the sandbox is gone.
            (Stage::Recheck, Outcome::Null) => Stage::Unmap,
            (_, _) => {
                let e = runtime_error(&job.pool, method);
                fail(job, e)
            }
        };
        self.operation_step(key)
    }

    /// The store removed the record (`ok`), or did not (`MAPPING_PERSISTENCE_FAILED`: the
    /// sandbox is destroyed, its mapping stays). Removed: what it held is given back.
    pub fn operation_unmapped(&mut self, key: u32, ok: bool, now: Now) -> Result<Next, Failure> {
        self.clock = now.router;
        let job = self.stage_of(key, &[Stage::Unmap])?;
        if !ok {
            let mut e = Fault::new(
                ErrorClass::MappingPersistence,
                "MAPPING_PERSISTENCE_FAILED",
                format!("sandbox {} was destroyed but its mapping could not be removed", job.id),
            );
            e.sandbox_id = Some(job.id.to_string());
            e.provider_id = Some(job.pool.clone());
            e.cleanup = Some("destroyed");
            job.fault = Some(e);
            job.stage = Stage::Failed;
            return self.operation_step(key);
        }
        job.forget = true;
        job.stage = Stage::Release;
        self.release(key, now)?;
        self.operation_step(key)
    }

    /// `Unmap` with `COMBINED`: the destroy's writes in one statement (the record, the holds,
    /// the budget slot) were made (`ok`; `given_back`: a budget slot came back), or not (as
    /// [`Router::operation_unmapped`] with `ok` false). No `Release` step follows.
    /// `mapped`: the record was still there; a destroy that did not read it first
    /// ([`Written`]) of a record gone meanwhile ends as `SANDBOX_NOT_FOUND`.
    pub fn operation_forgotten(
        &mut self,
        key: u32,
        ok: bool,
        mapped: bool,
        given_back: bool,
        now: Now,
    ) -> Result<Next, Failure> {
        let job = self.stage_of(key, &[Stage::Unmap])?;
        if ok && !mapped && job.unread {
            job.fault = Some(not_found(job.id, None));
            job.forget = true;
            job.stage = Stage::Failed;
            return self.operation_step(key);
        }
        let next = self.operation_unmapped(key, ok, now)?;
        if next.kind == StepKind::Release {
            return self.operation_released(key, given_back, now);
        }
        Ok(next)
    }

    /// The shared ledger's release answered (`given_back`: it held a budget slot; false
    /// when it could not be written: its charges then expire on their own).
    pub fn operation_released(&mut self, key: u32, given_back: bool, now: Now) -> Result<Next, Failure> {
        self.clock = now.router;
        let job = self.stage_of(key, &[Stage::Release])?;
        job.given_back |= given_back;
        self.given_back(key, now)?;
        self.operation_step(key)
    }

    /// The sandbox is gone: its in-process hold and slot are given back now; under a shared
    /// coordinator the job asks it next (`Release`), else it is over.
    fn release(&mut self, key: u32, now: Now) -> Result<(), Failure> {
        let id = self.operations.get(key)?.id;
        let (_, budget) = self.released(id);
        let coordinated = self.capacity.as_ref().is_some_and(|c| c.coordinated);
        let job = self.operations.get_mut(key)?;
        job.given_back = budget;
        if !coordinated {
            self.given_back(key, now)?;
        }
        Ok(())
    }

    /// The job's release is over: its events, and the job succeeds.
    fn given_back(&mut self, key: u32, now: Now) -> Result<(), Failure> {
        let budgets = self.budgets.is_some();
        let job = self.operations.get_mut(key)?;
        job.stage = Stage::Succeeded;
        let (id, op, given_back) = (job.id, job.op, job.given_back);
        let pool = PoolId::from(job.pool.as_str());
        if given_back && budgets {
            self.emit(
                now.router,
                Some(id),
                Event::BudgetReleased { pool: pool.clone(), reason: "DESTROYED", cost: None, rules: None },
            );
        }
        if op == Operation::Destroy {
            self.emit(now.router, Some(id), Event::SandboxDestroyed { pool });
        }
        Ok(())
    }

    /// What operation `key`'s steps concern.
    pub fn operation_target(&self, key: u32) -> Result<Target, Failure> {
        let job = self.operations.get(key)?;
        Ok(Target {
            provider_id: job.pool.clone(),
            provider_sandbox_id: job.record.as_ref().map(|r| r.provider_sandbox_id.clone()).unwrap_or_default(),
            method: job.op.method(),
        })
    }

    /// How operation `key` ended, once at its `Succeeded` or `Done` step (an internal error
    /// while it runs): its error, or what it resolves to.
    pub fn operation_ending(&self, key: u32) -> Result<Ending, Failure> {
        let job = self.operations.get(key)?;
        let answer = job.op.answer();
        match job.stage {
            Stage::Succeeded => Ok(Ending {
                error: None,
                package: false,
                answer,
                record: if answer == Answer::Record { job.record.clone() } else { None },
            }),
            Stage::Failed => Ok(Ending {
                error: Some(job.fault.clone().unwrap_or_else(|| Fault::internal("(a package error)"))),
                package: job.package,
                answer,
                record: None,
            }),
            _ => Err(Fault::internal("(an operation ended before its end)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::router::pools::Pools;
    use crate::core::router::{CapacitySettings, Owner, Settings};
    use std::cell::RefCell;
    use std::rc::Rc;

    const ID: &str = "sbx_0123456789abcdef0123456789abcdef";
    const NOW: Now = Now { health: 1_000, router: 1_000 };

    fn settings() -> Settings {
        Settings {
            fleet: "default".into(),
            health: None,
            capacity: None,
            callback_timeout_ms: 10,
            operation_timeout_ms: 200,
            capacity_timeout_ms: 5,
            intents: false,
            classifier: false,
            observe: true,
            owner: Owner { host: "h".into(), pid: 1.0, session: "s".into() },
            budgets: Vec::new(),
            limits: Default::default(),
            combined: false,
            queue: None,
            decisions: None,
            decision_key: [0; 32],
        }
    }

    fn router_with(s: Settings) -> Router {
        Router::new(s, Rc::new(RefCell::new(Pools::default())), None, None, 0).expect("router")
    }

    fn router() -> Router {
        router_with(settings())
    }

    const RECORD: &str = r#"{"id":"sbx_0123456789abcdef0123456789abcdef","providerId":"a","providerSandboxId":"p-1","labels":{"team":"t"},"createdAt":"2024-01-01T00:00:00.000Z","detached":false}"#;

    fn facts(cached: bool, get_by_id: bool) -> PoolFacts {
        PoolFacts { registered: true, method: true, get_by_id, cached }
    }

    /// Begins `op` and reads RECORD: the FindPool step's key.
    fn found(r: &mut Router, op: Operation, args: &Args) -> u32 {
        let (key, next) = r.begin_operation(op, Some(ID), args, NOW).expect("begun");
        assert_eq!((next.kind, next.bound_ms), (StepKind::ReadRecord, 10));
        let next = r.operation_read(key, &StoreAnswer::Json(Some(RECORD.into())), NOW).unwrap();
        assert_eq!(next.kind, StepKind::FindPool);
        key
    }

    fn code(r: &Router, key: u32) -> String {
        r.operation_ending(key).unwrap().error.expect("failed").code
    }

    fn thrown(status: Fact, code: Fact) -> Outcome {
        Outcome::Threw(Thrown { ours: false, facts: Some([status, Fact::Nullish, Fact::Nullish, code]) })
    }

    fn script(timeout_ms: Shape) -> Args {
        Args::Script(Read::Read(ScriptShape {
            command: Shape::Str,
            session_id: Shape::Undefined,
            timeout_ms,
            env: Err(Shape::Undefined),
        }))
    }

    #[test]
    fn step_kinds_of_operations_are_20_to_29_and_flags_do_not_overlap_provisions() {
        for kind in [
            StepKind::ReadRecord,
            StepKind::FindPool,
            StepKind::Resolve,
            StepKind::Call,
            StepKind::Unmap,
            StepKind::Release,
        ] {
            assert!((20..30).contains(&(kind as u32)), "{kind:?}");
            assert!(StepKind::ALL.iter().any(|(k, _)| *k == kind), "{kind:?} is in ALL");
        }
        let provision = super::super::step::flags::EVENTS
            | super::super::step::flags::WRITES
            | super::super::step::flags::ENDED
            | super::super::step::flags::FAILED_INTENT;
        assert_eq!(provision & (flags::ID_HANDLE | flags::FORGET), 0);
    }

    #[test]
    fn id_must_fire_not_a_string_or_not_an_sbx_id_is_invalid_sandbox_id() {
        let mut r = router();
        let e = r.begin_operation(Operation::Stop, None, &Args::None, NOW).unwrap_err();
        assert_eq!((e.code.as_str(), e.field.as_deref()), ("INVALID_SANDBOX_ID", Some("id")));
        let e = r.begin_operation(Operation::Stop, Some("sbx_x"), &Args::None, NOW).unwrap_err();
        assert_eq!(e.code, "INVALID_SANDBOX_ID");
        assert_eq!(r.operations.len(), 0, "nothing begun");
    }

    #[test]
    fn id_must_not_fire_an_sbx_id_begins_by_reading_the_record() {
        let mut r = router();
        let (key, next) = r.begin_operation(Operation::Stop, Some(ID), &Args::None, NOW).unwrap();
        assert_eq!(next.kind, StepKind::ReadRecord);
        assert_ne!(key & OPERATION_KEY, 0);
    }

    #[test]
    fn arguments_are_checked_before_the_id() {
        let mut r = router();
        let e = r.begin_operation(Operation::RunScript, None, &Args::Script(Read::NotObject), NOW).unwrap_err();
        assert_eq!((e.code.as_str(), e.field.as_deref()), ("INVALID_REQUEST", Some("command")));
    }

    #[test]
    fn record_must_fire_a_failed_or_unreadable_answer_is_mapping_read_failed() {
        for answer in [
            StoreAnswer::Failed,
            StoreAnswer::Json(None),
            StoreAnswer::Json(Some("5".into())),
            StoreAnswer::Json(Some(r#"{"providerId":"a"}"#.into())),
            StoreAnswer::Json(Some(r#"{"providerId":"a","providerSandboxId":""}"#.into())),
            StoreAnswer::Json(Some(r#"{"providerId":"a","providerSandboxId":"p","labels":{"x":1}}"#.into())),
            StoreAnswer::Json(Some(r#"{"providerId":"a","providerSandboxId":"p","labels":"x"}"#.into())),
        ] {
            let mut r = router();
            let (key, _) = r.begin_operation(Operation::GetSandbox, Some(ID), &Args::None, NOW).unwrap();
            let next = r.operation_read(key, &answer, NOW).unwrap();
            assert_eq!(next.kind, StepKind::Done, "{answer:?}");
            let e = r.operation_ending(key).unwrap().error.unwrap();
            assert_eq!(
                (e.code.as_str(), e.class.name(), e.sandbox_id.as_deref()),
                ("MAPPING_READ_FAILED", "MappingPersistenceError", Some(ID))
            );
            assert_eq!(next.flags & flags::FORGET, 0, "must-not-fire: the handle is kept");
        }
    }

    #[test]
    fn record_must_fire_none_is_sandbox_not_found_and_drops_the_handle() {
        let mut r = router();
        let (key, _) = r.begin_operation(Operation::GetSandbox, Some(ID), &Args::None, NOW).unwrap();
        let next = r.operation_read(key, &StoreAnswer::Json(Some("null".into())), NOW).unwrap();
        assert_eq!(next.kind, StepKind::Done);
        assert_ne!(next.flags & flags::FORGET, 0);
        let e = r.operation_ending(key).unwrap().error.unwrap();
        assert_eq!(
            (e.code.as_str(), e.class.name(), e.message.as_str()),
            ("SANDBOX_NOT_FOUND", "SandboxNotFoundError", format!("no sandbox {ID}").as_str())
        );
    }

    #[test]
    fn record_must_not_fire_a_mapping_is_read_with_what_it_has() {
        let r = record_of(r#"{"providerId":"a","providerSandboxId":"p","id":5,"detached":"yes"}"#).unwrap().unwrap();
        assert_eq!((r.id, r.created_at, r.detached, r.labels.len()), (None, None, false, 0));
        let r = record_of(RECORD).unwrap().unwrap();
        assert_eq!(r.id.as_deref(), Some(ID));
        assert_eq!(r.labels, vec![("team".to_string(), "t".to_string())]);
    }

    #[test]
    fn pool_must_fire_unregistered_is_provider_not_registered() {
        let mut r = router();
        let key = found(&mut r, Operation::GetSandbox, &Args::None);
        let next = r.operation_found(key, PoolFacts { registered: false, ..facts(true, true) }, NOW).unwrap();
        assert_eq!(next.kind, StepKind::Done);
        let e = r.operation_ending(key).unwrap().error.unwrap();
        assert_eq!((e.code.as_str(), e.provider_id.as_deref()), ("PROVIDER_NOT_REGISTERED", Some("a")));
    }

    #[test]
    fn pool_must_not_fire_get_sandbox_of_a_registered_pool_answers_the_record() {
        let mut r = router();
        let key = found(&mut r, Operation::GetSandbox, &Args::None);
        let next =
            r.operation_found(key, PoolFacts { method: false, get_by_id: false, ..facts(false, false) }, NOW).unwrap();
        assert_eq!(next.kind, StepKind::Succeeded);
        assert_eq!(r.operation_ending(key).unwrap().record.unwrap().provider_sandbox_id, "p-1");
    }

    #[test]
    fn method_must_fire_a_runtime_without_it_is_provider_runtime_error() {
        let mut r = router();
        let key = found(&mut r, Operation::Stop, &Args::None);
        r.operation_found(key, PoolFacts { method: false, ..facts(true, true) }, NOW).unwrap();
        let e = r.operation_ending(key).unwrap().error.unwrap();
        assert_eq!(
            (e.code.as_str(), e.class.name(), e.operation.as_deref()),
            ("PROVIDER_RUNTIME_ERROR", "ProviderRuntimeError", Some("stop"))
        );
        assert_eq!(e.message, "provider a failed during stop");
    }

    #[test]
    fn method_must_not_fire_destroy_needs_no_method_check() {
        let mut r = router();
        let key = found(&mut r, Operation::Destroy, &Args::None);
        let next = r.operation_found(key, PoolFacts { method: false, ..facts(true, true) }, NOW).unwrap();
        assert_eq!(next.kind, StepKind::Call);
    }

    #[test]
    fn handle_must_fire_without_a_kept_handle_it_is_re_resolved_or_the_provider_id() {
        let mut r = router();
        let key = found(&mut r, Operation::Stop, &Args::None);
        let next = r.operation_found(key, facts(false, true), NOW).unwrap();
        assert_eq!((next.kind, next.bound_ms), (StepKind::Resolve, 200));
        let next = r.operation_settled(key, &Outcome::Value, NOW).unwrap();
        assert_eq!((next.kind, next.flags & flags::ID_HANDLE), (StepKind::Call, 0));
        let key = found(&mut r, Operation::Stop, &Args::None);
        let next = r.operation_found(key, facts(false, false), NOW).unwrap();
        assert_eq!(next.kind, StepKind::Call);
        assert_ne!(next.flags & flags::ID_HANDLE, 0, "no getById: the provider id is the handle");
        assert_eq!(r.operation_target(key).unwrap().provider_sandbox_id, "p-1");
    }

    #[test]
    fn handle_must_not_fire_a_kept_handle_is_used_as_it_is() {
        let mut r = router();
        let key = found(&mut r, Operation::Stop, &Args::None);
        let next = r.operation_found(key, facts(true, true), NOW).unwrap();
        assert_eq!((next.kind, next.flags & flags::ID_HANDLE), (StepKind::Call, 0));
    }

    #[test]
    fn resolve_must_fire_gone_is_sandbox_not_found_naming_the_pool() {
        for outcome in [Outcome::Null, Outcome::Undefined, thrown(Fact::Num(404.0), Fact::Nullish)] {
            let mut r = router();
            let key = found(&mut r, Operation::RunScript, &script(Shape::Undefined));
            r.operation_found(key, facts(false, true), NOW).unwrap();
            r.operation_settled(key, &outcome, NOW).unwrap();
            let e = r.operation_ending(key).unwrap().error.unwrap();
            assert_eq!((e.code.as_str(), e.provider_id.as_deref()), ("SANDBOX_NOT_FOUND", Some("a")), "{outcome:?}");
            assert_eq!(e.message, format!("sandbox {ID} no longer exists at a"));
        }
    }

    #[test]
    fn resolve_must_fire_a_failure_or_timeout_names_get_by_id() {
        let mut r = router();
        let key = found(&mut r, Operation::RunScript, &script(Shape::Undefined));
        r.operation_found(key, facts(false, true), NOW).unwrap();
        r.operation_settled(key, &thrown(Fact::Num(500.0), Fact::Nullish), NOW).unwrap();
        let e = r.operation_ending(key).unwrap().error.unwrap();
        assert_eq!((e.code.as_str(), e.operation.as_deref()), ("PROVIDER_RUNTIME_ERROR", Some("runScript: getById")));
        let key = found(&mut r, Operation::Destroy, &Args::None);
        r.operation_found(key, facts(false, true), NOW).unwrap();
        r.operation_settled(key, &Outcome::TimedOut, NOW).unwrap();
        let e = r.operation_ending(key).unwrap().error.unwrap();
        assert_eq!(
            (e.code.as_str(), e.operation.as_deref(), e.timeout_ms),
            ("OPERATION_TIMEOUT", Some("destroy: getById"), Some(200.0))
        );
    }

    #[test]
    fn resolve_must_not_fire_a_destroy_of_a_gone_sandbox_goes_on_to_unmap() {
        let mut r = router();
        let key = found(&mut r, Operation::Destroy, &Args::None);
        r.operation_found(key, facts(false, true), NOW).unwrap();
        let next = r.operation_settled(key, &Outcome::Null, NOW).unwrap();
        assert_eq!((next.kind, next.bound_ms), (StepKind::Unmap, 10));
    }

    #[test]
    fn not_found_must_fire_on_404_and_the_two_codes() {
        let one = |f: [Fact; 4]| is_not_found(&Thrown { ours: false, facts: Some(f) });
        use Fact::{Nullish as N, Num, Str};
        assert!(one([Num(404.0), N, N, N]));
        assert!(one([N, Num(404.0), N, N]));
        assert!(one([N, N, Num(404.0), N]));
        assert!(one([N, N, N, Str("NOT_FOUND".into())]));
        assert!(one([Num(500.0), N, N, Str("ENOENT".into())]));
        assert!(one([Num(404.0), Fact::Unreadable, N, Fact::Unreadable]), "status answers first");
    }

    #[test]
    fn not_found_must_not_fire_on_other_statuses_codes_or_unreadable_facts() {
        let one = |f: [Fact; 4]| is_not_found(&Thrown { ours: false, facts: Some(f) });
        use Fact::{Nullish as N, Num, Str};
        assert!(!one([Num(500.0), Num(404.0), N, N]), "the first status that is set decides");
        assert!(!one([Str("404".into()), N, N, N]));
        assert!(!one([N, Fact::Unreadable, Num(404.0), Str("ENOENT".into())]));
        assert!(!one([N, N, N, Str("not_found".into())]));
        assert!(!one([N, N, N, Fact::Unreadable]));
        assert!(!is_not_found(&Thrown { ours: false, facts: None }), "a thrown non-object");
    }

    #[test]
    fn call_must_fire_timeout_and_failure_are_typed_and_name_the_operation() {
        let mut r = router();
        let key = found(&mut r, Operation::UploadBundle, &Args::Bundle(Read::Read(Some(Vec::new()))));
        r.operation_found(key, facts(true, true), NOW).unwrap();
        r.operation_settled(key, &Outcome::TimedOut, NOW).unwrap();
        let e = r.operation_ending(key).unwrap().error.unwrap();
        assert_eq!(
            (e.code.as_str(), e.operation.as_deref(), e.timeout_ms),
            ("OPERATION_TIMEOUT", Some("uploadBundle"), Some(200.0))
        );
        assert_eq!(e.message, "provider a did not settle uploadBundle within 200 ms; outcome unknown");
        let key = found(&mut r, Operation::Start, &Args::None);
        r.operation_found(key, facts(true, true), NOW).unwrap();
        r.operation_settled(key, &thrown(Fact::Num(404.0), Fact::Nullish), NOW).unwrap();
        assert_eq!(code(&r, key), "PROVIDER_RUNTIME_ERROR", "a 404 of the operation itself is a failure");
    }

    #[test]
    fn call_must_fire_the_routers_own_package_error_is_rethrown() {
        let mut r = router();
        let key = found(&mut r, Operation::Stop, &Args::None);
        r.operation_found(key, facts(true, true), NOW).unwrap();
        r.operation_settled(key, &Outcome::Threw(Thrown { ours: true, facts: None }), NOW).unwrap();
        assert!(r.operation_ending(key).unwrap().package);
    }

    #[test]
    fn call_must_not_fire_an_answer_succeeds() {
        let mut r = router();
        let key = found(&mut r, Operation::Stop, &Args::None);
        r.operation_found(key, facts(true, true), NOW).unwrap();
        let next = r.operation_settled(key, &Outcome::Undefined, NOW).unwrap();
        assert_eq!(next.kind, StepKind::Succeeded);
        assert!(r.operation_ending(key).unwrap().error.is_none());
        assert!(r.take_events().is_empty(), "an operation other than destroy emits nothing");
    }

    #[test]
    fn run_script_bound_must_fire_a_longer_own_timeout_gets_the_grace() {
        let mut r = router();
        let key = found(&mut r, Operation::RunScript, &script(Shape::Num(1_000.4)));
        let next = r.operation_found(key, facts(true, true), NOW).unwrap();
        assert_eq!(next.bound_ms, 1_001 + RUN_SCRIPT_GRACE_MS);
    }

    #[test]
    fn run_script_bound_must_not_fire_a_shorter_or_infinite_own_timeout_keeps_the_deadline() {
        for t in [Shape::Num(100.0), Shape::Num(f64::INFINITY), Shape::Undefined] {
            let mut r = router();
            let key = found(&mut r, Operation::RunScript, &script(t.clone()));
            let next = r.operation_found(key, facts(true, true), NOW).unwrap();
            assert_eq!(next.bound_ms, 200, "{t:?}");
        }
    }

    #[test]
    fn script_options_must_fire_naming_the_field() {
        let base = ScriptShape {
            command: Shape::Str,
            session_id: Shape::Undefined,
            timeout_ms: Shape::Undefined,
            env: Err(Shape::Undefined),
        };
        let cases: Vec<(Read<ScriptShape>, &str)> = vec![
            (Read::NotObject, "command"),
            (Read::Unreadable, "options"),
            (Read::Read(ScriptShape { command: Shape::Num(1.0), ..base.clone() }), "command"),
            (Read::Read(ScriptShape { session_id: Shape::Null, ..base.clone() }), "sessionId"),
            (Read::Read(ScriptShape { timeout_ms: Shape::Num(0.0), ..base.clone() }), "timeoutMs"),
            (Read::Read(ScriptShape { timeout_ms: Shape::Num(f64::NAN), ..base.clone() }), "timeoutMs"),
            (Read::Read(ScriptShape { timeout_ms: Shape::Str, ..base.clone() }), "timeoutMs"),
            (Read::Read(ScriptShape { env: Err(Shape::Null), ..base.clone() }), "env"),
            (
                Read::Read(ScriptShape {
                    env: Ok(vec![("A".into(), Shape::Str), ("B".into(), Shape::Num(1.0))]),
                    ..base.clone()
                }),
                "env.B",
            ),
        ];
        for (options, field) in cases {
            let e = script_bound(&options, 10).unwrap_err();
            assert_eq!((e.code.as_str(), e.field.as_deref()), ("INVALID_REQUEST", Some(field)), "{options:?}");
            assert!(e.message.starts_with("invalid runScript options: "), "{}", e.message);
        }
        let long = "k".repeat(100);
        let e = script_bound(&Read::Read(ScriptShape { env: Ok(vec![(long, Shape::Other)]), ..base }), 10).unwrap_err();
        assert!(e.field.unwrap().ends_with("…[+36 bytes]"), "a long key is cut");
    }

    #[test]
    fn script_options_must_not_fire_on_good_options() {
        let o = ScriptShape {
            command: Shape::Str,
            session_id: Shape::Str,
            timeout_ms: Shape::Num(5.0),
            env: Ok(vec![("A".into(), Shape::Str)]),
        };
        assert_eq!(script_bound(&Read::Read(o), 10).unwrap(), 10);
    }

    #[test]
    fn bundle_must_fire_naming_the_field() {
        let file = |source, destination| FileShape::File { source, destination };
        let cases: Vec<(Read<Option<Vec<FileShape>>>, &str)> = vec![
            (Read::NotObject, "files"),
            (Read::Read(None), "files"),
            (Read::Unreadable, "files"),
            (Read::Read(Some(vec![FileShape::NotObject])), "files[0]"),
            (
                Read::Read(Some(vec![file(Shape::Str, Shape::Str), file(Shape::Str, Shape::Undefined)])),
                "files[1].destination",
            ),
            (Read::Read(Some(vec![file(Shape::Object, Shape::Str)])), "files[0].source"),
        ];
        for (bundle, field) in cases {
            let e = check_bundle(&bundle).unwrap_err();
            assert_eq!((e.code.as_str(), e.field.as_deref()), ("INVALID_REQUEST", Some(field)), "{bundle:?}");
        }
    }

    #[test]
    fn bundle_must_not_fire_on_strings_and_buffers() {
        let files = vec![
            FileShape::File { source: Shape::Str, destination: Shape::Str },
            FileShape::File { source: Shape::Bytes, destination: Shape::Str },
        ];
        assert!(check_bundle(&Read::Read(Some(files))).is_ok());
        assert!(check_bundle(&Read::Read(Some(Vec::new()))).is_ok());
    }

    fn destroyed(r: &mut Router, get_by_id: bool, outcome: Outcome) -> (u32, Next) {
        let key = found(r, Operation::Destroy, &Args::None);
        r.operation_found(key, facts(true, get_by_id), NOW).unwrap();
        let next = r.operation_settled(key, &outcome, NOW).unwrap();
        (key, next)
    }

    #[test]
    fn destroy_gone_must_fire_a_thrown_not_found_or_a_recheck_of_null_unmaps() {
        let mut r = router();
        let (_, next) = destroyed(&mut r, true, thrown(Fact::Nullish, Fact::Str("ENOENT".into())));
        assert_eq!(next.kind, StepKind::Unmap);
        let (key, next) = destroyed(&mut r, true, thrown(Fact::Num(500.0), Fact::Nullish));
        assert_eq!((next.kind, next.bound_ms), (StepKind::Resolve, 200), "re-checked");
        assert_eq!(r.operation_settled(key, &Outcome::Null, NOW).unwrap().kind, StepKind::Unmap);
    }

    #[test]
    fn destroy_gone_must_not_fire_a_recheck_that_answers_a_handle_or_fails_keeps_the_mapping() {
        for recheck in [Outcome::Value, Outcome::Undefined, Outcome::TimedOut, thrown(Fact::Num(404.0), Fact::Nullish)]
        {
            let mut r = router();
            let (key, _) = destroyed(&mut r, true, thrown(Fact::Num(500.0), Fact::Nullish));
            assert_eq!(r.operation_settled(key, &recheck, NOW).unwrap().kind, StepKind::Done, "{recheck:?}");
            assert_eq!(code(&r, key), "PROVIDER_RUNTIME_ERROR");
        }
        let mut r = router();
        let (key, next) = destroyed(&mut r, false, thrown(Fact::Num(500.0), Fact::Nullish));
        assert_eq!(next.kind, StepKind::Done, "no getById: nothing to re-check with");
        assert_eq!(code(&r, key), "PROVIDER_RUNTIME_ERROR");
        let (key, _) = destroyed(&mut r, true, Outcome::TimedOut);
        assert_eq!(code(&r, key), "OPERATION_TIMEOUT");
    }

    #[test]
    fn unmap_must_fire_a_failed_removal_is_mapping_persistence_failed_destroyed() {
        let mut r = router();
        let (key, _) = destroyed(&mut r, true, Outcome::Undefined);
        let next = r.operation_unmapped(key, false, NOW).unwrap();
        assert_eq!((next.kind, next.flags & flags::FORGET), (StepKind::Done, 0));
        let e = r.operation_ending(key).unwrap().error.unwrap();
        assert_eq!(
            (e.code.as_str(), e.cleanup, e.provider_id.as_deref()),
            ("MAPPING_PERSISTENCE_FAILED", Some("destroyed"), Some("a"))
        );
        assert!(r.take_events().is_empty(), "no sandbox.destroyed");
    }

    #[test]
    fn unmap_must_not_fire_a_removal_succeeds_with_sandbox_destroyed() {
        let mut r = router();
        let (key, _) = destroyed(&mut r, true, Outcome::Undefined);
        let next = r.operation_unmapped(key, true, NOW).unwrap();
        assert_eq!(next.kind, StepKind::Succeeded);
        assert_ne!(next.flags & flags::FORGET, 0);
        let events = r.take_events();
        assert_eq!(
            events.iter().map(|e| e.event.type_name()).collect::<Vec<_>>(),
            ["sandbox.destroyed"],
            "no budgets: no budget.released"
        );
        assert_eq!((events[0].at, events[0].sandbox.map(|s| s.to_string())), (1_000, Some(ID.to_string())));
    }

    fn budgeted(coordinated: bool) -> Router {
        let rules = crate::core::budget::rules_of_option(
            &serde_json::json!([{ "id": "c", "key": { "label": "t" }, "limit": { "concurrent": 2 } }]),
        )
        .unwrap();
        let capacity = coordinated.then(|| CapacitySettings {
            provider_order: vec!["a".into()],
            reservation_ttl_ms: 1,
            coordinated: true,
        });
        router_with(Settings { budgets: rules, capacity, ..settings() })
    }

    fn charge(r: &mut Router) {
        let key = crate::core::budget::Key { rule: 0, value: "x".into() };
        let b = r.budgets.as_mut().unwrap();
        let id = SandboxKey::parse(ID).unwrap();
        b.ledger.reserve(id, &[key], 1.0, 0).unwrap();
        b.ledger.settle(id, crate::core::budget::Settle::Allocated);
    }

    fn types(r: &mut Router) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for e in r.take_events() {
            let mut p = crate::core::events::tests::Pairs::default();
            e.event.write_fields(&mut p);
            let reason = p.0.iter().find(|(k, _)| k == "reason").map(|(_, v)| v.clone()).unwrap_or_default();
            out.push((e.event.type_name(), reason));
        }
        out
    }

    #[test]
    fn released_must_fire_a_destroyed_sandbox_gives_its_slot_back_destroyed() {
        let mut r = budgeted(false);
        charge(&mut r);
        let (key, _) = destroyed(&mut r, true, Outcome::Undefined);
        r.operation_unmapped(key, true, NOW).unwrap();
        assert_eq!(types(&mut r), [("budget.released", "DESTROYED".to_string()), ("sandbox.destroyed", String::new())]);
    }

    fn combined(on: bool) -> Router {
        let rules = crate::core::budget::rules_of_option(
            &serde_json::json!([{ "id": "c", "key": { "label": "t" }, "limit": { "concurrent": 2 } }]),
        )
        .unwrap();
        let capacity =
            Some(CapacitySettings { provider_order: vec!["a".into()], reservation_ttl_ms: 1, coordinated: true });
        router_with(Settings { budgets: rules, capacity, combined: on, ..settings() })
    }

    #[test]
    fn combined_must_fire_a_destroy_through_the_coordinator_store_is_one_statement_and_no_release_follows() {
        let mut r = combined(true);
        let (key, next) = destroyed(&mut r, true, Outcome::Undefined);
        assert_eq!(next.kind, StepKind::Unmap);
        assert_ne!(next.flags & super::super::step::flags::COMBINED, 0);
        let next = r.operation_forgotten(key, true, true, true, NOW).unwrap();
        assert_eq!(next.kind, StepKind::Succeeded, "no Release step: the statement gave the slot back");
        assert_eq!(types(&mut r), [("budget.released", "DESTROYED".to_string()), ("sandbox.destroyed", String::new())]);
        // A statement that failed is the unmap's failure: the mapping stays.
        let (key, _) = destroyed(&mut r, true, Outcome::Undefined);
        let next = r.operation_forgotten(key, false, false, false, NOW).unwrap();
        assert_eq!(next.kind, StepKind::Done);
        assert_eq!(r.operation_ending(key).unwrap().error.expect("an error").code, "MAPPING_PERSISTENCE_FAILED");
    }

    #[test]
    fn combined_must_not_fire_a_store_apart_from_the_coordinator_unmaps_then_releases() {
        let mut r = combined(false);
        let (key, next) = destroyed(&mut r, true, Outcome::Undefined);
        assert_eq!((next.kind, next.flags & super::super::step::flags::COMBINED), (StepKind::Unmap, 0));
        assert_eq!(r.operation_unmapped(key, true, NOW).unwrap().kind, StepKind::Release);
    }

    /// Router `r` wrote the record of ID itself (pool `a`, provider id `p-1`).
    fn wrote(r: &mut Router) {
        r.operations.written.insert(SandboxKey::parse(ID).unwrap(), "a".into(), "p-1".into());
    }

    #[test]
    fn written_must_fire_a_destroy_of_a_record_this_router_wrote_reads_nothing_first() {
        let mut r = combined(true);
        wrote(&mut r);
        let (key, next) = r.begin_operation(Operation::Destroy, Some(ID), &Args::None, NOW).unwrap();
        assert_eq!(next.kind, StepKind::FindPool, "no ReadRecord step");
        assert_eq!(r.operation_target(key).unwrap().provider_sandbox_id, "p-1");
        assert_eq!(r.operations.written.len(), 0, "taken by the destroy");
        r.operation_found(key, facts(true, true), NOW).unwrap();
        assert_eq!(r.operation_settled(key, &Outcome::Undefined, NOW).unwrap().kind, StepKind::Unmap);
        assert_eq!(r.operation_forgotten(key, true, true, false, NOW).unwrap().kind, StepKind::Succeeded);
        assert_eq!(types(&mut r), [("sandbox.destroyed", String::new())]);
        // A record gone meanwhile (destroyed by another process): not found, as a read says.
        wrote(&mut r);
        let (key, _) = r.begin_operation(Operation::Destroy, Some(ID), &Args::None, NOW).unwrap();
        r.operation_found(key, facts(true, true), NOW).unwrap();
        r.operation_settled(key, &Outcome::Undefined, NOW).unwrap();
        assert_eq!(r.operation_forgotten(key, true, false, false, NOW).unwrap().kind, StepKind::Done);
        assert_eq!(code(&r, key), "SANDBOX_NOT_FOUND");
        assert!(r.take_events().iter().all(|e| e.event.type_name() != "sandbox.destroyed"));
    }

    #[test]
    fn written_must_not_fire_a_store_apart_another_operation_or_a_record_not_written_here_is_read() {
        let begin = |r: &mut Router, op| r.begin_operation(op, Some(ID), &Args::None, NOW).unwrap().1.kind;
        let mut r = combined(false);
        wrote(&mut r);
        assert_eq!(begin(&mut r, Operation::Destroy), StepKind::ReadRecord, "not the coordinator's store");
        let mut r = combined(true);
        wrote(&mut r);
        assert_eq!(begin(&mut r, Operation::GetSandbox), StepKind::ReadRecord, "only a destroy");
        assert_eq!(r.operations.written.len(), 1);
        let mut r = combined(true);
        assert_eq!(begin(&mut r, Operation::Destroy), StepKind::ReadRecord, "not written here");
        // A read destroy of a record gone meanwhile keeps today's answer: destroyed.
        let (key, _) = destroyed(&mut r, true, Outcome::Undefined);
        assert_eq!(r.operation_forgotten(key, true, false, false, NOW).unwrap().kind, StepKind::Succeeded);
    }

    #[test]
    fn written_must_fire_past_the_handle_limit_the_oldest_is_dropped() {
        let mut w = Written::default();
        let key = |n: u32| SandboxKey::parse(&format!("sbx_{n:032x}")).unwrap();
        for n in 0..=HANDLE_LIMIT {
            w.insert(key(n), "a".into(), n.to_string());
        }
        assert_eq!(w.len(), HANDLE_LIMIT as usize);
        assert_eq!(w.take(&key(0)), None, "the oldest went");
        assert_eq!(w.take(&key(1)), Some(("a".into(), "1".into())));
    }

    #[test]
    fn written_must_not_fire_an_operation_that_forgets_its_sandbox_drops_its_entry() {
        let mut r = combined(true);
        wrote(&mut r);
        let (key, _) = r.begin_operation(Operation::GetSandbox, Some(ID), &Args::None, NOW).unwrap();
        r.operation_read(key, &StoreAnswer::Json(Some("null".into())), NOW).unwrap();
        r.end(key);
        assert_eq!(r.operations.written.len(), 0, "not found: forgotten");
    }

    #[test]
    fn released_must_not_fire_without_a_slot_held() {
        let mut r = budgeted(false);
        let (key, _) = destroyed(&mut r, true, Outcome::Undefined);
        r.operation_unmapped(key, true, NOW).unwrap();
        assert_eq!(types(&mut r), [("sandbox.destroyed", String::new())]);
    }

    #[test]
    fn released_under_a_coordinator_must_fire_when_the_shared_ledger_gave_a_slot_back() {
        let mut r = budgeted(true);
        let (key, _) = destroyed(&mut r, true, Outcome::Undefined);
        let next = r.operation_unmapped(key, true, NOW).unwrap();
        assert_eq!((next.kind, next.bound_ms), (StepKind::Release, 0));
        assert!(r.take_events().is_empty(), "nothing before the coordinator answered");
        assert_eq!(r.operation_released(key, true, NOW).unwrap().kind, StepKind::Succeeded);
        assert_eq!(types(&mut r), [("budget.released", "DESTROYED".to_string()), ("sandbox.destroyed", String::new())]);
    }

    #[test]
    fn released_under_a_coordinator_must_not_fire_when_it_held_none() {
        let mut r = budgeted(true);
        let (key, _) = destroyed(&mut r, true, Outcome::Undefined);
        r.operation_unmapped(key, true, NOW).unwrap();
        r.operation_released(key, false, NOW).unwrap();
        assert_eq!(types(&mut r), [("sandbox.destroyed", String::new())]);
    }

    #[test]
    fn settle_cost_must_fire_on_an_id_or_cost_of_the_wrong_type_or_range() {
        let mut r = budgeted(false);
        let e = r.settle_cost_of(None, Some(1.0)).unwrap_err();
        assert_eq!((e.code.as_str(), e.field.as_deref()), ("INVALID_SANDBOX_ID", Some("id")));
        let e = r.settle_cost_of(Some("bad"), None).unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.field.as_deref()),
            ("INVALID_INPUT", Some("actualCost")),
            "the cost's type is checked before the id's form"
        );
        assert_eq!(r.settle_cost_of(Some("bad"), Some(1.0)).unwrap_err().code, "INVALID_SANDBOX_ID");
        for cost in [-1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(r.settle_cost_of(Some(ID), Some(cost)).unwrap_err().code, "INVALID_INPUT", "{cost}");
        }
    }

    #[test]
    fn settle_cost_must_not_fire_on_a_good_call_and_says_whose_answer_counts() {
        let mut r = budgeted(false);
        assert_eq!(r.settle_cost_of(Some(ID), Some(0.0)).unwrap(), (false, false), "no charge");
        charge(&mut r);
        assert_eq!(r.settle_cost_of(Some(ID), Some(2.5)).unwrap(), (true, false));
        let mut r = budgeted(true);
        assert_eq!(r.settle_cost_of(Some(ID), Some(2.5)).unwrap(), (false, true), "shared: the coordinator answers");
        assert_eq!(router().settle_cost_of(Some(ID), Some(1.0)).unwrap(), (false, false), "no budgets");
    }

    #[test]
    fn reports_out_of_turn_are_internal_errors() {
        let mut r = router();
        let (key, _) = r.begin_operation(Operation::Stop, Some(ID), &Args::None, NOW).unwrap();
        assert_eq!(r.operation_unmapped(key, true, NOW).unwrap_err().code, "INTERNAL_ERROR");
        assert_eq!(r.operation_settled(key, &Outcome::Value, NOW).unwrap_err().code, "INTERNAL_ERROR");
        r.end(key);
        assert_eq!(r.operation_step(key).unwrap_err().code, "INTERNAL_ERROR", "ended: the key is gone");
    }
}
