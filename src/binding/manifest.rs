//! napi glue for process manifests (`core::manifest`): a manifest (JSON text) in, typed
//! answers out; the reports `lib/manifest.js` parses from its scripts in, typed verdicts
//! out. Nothing is decided here.
//!
//! Caller data that must be validated crosses as JSON text: the manifest, the options, the
//! `started` processes a teardown is given back, the idle state. `None` for a text means the
//! caller's value had no JSON form, which the core refuses by name. Everything else crosses
//! typed, both ways.
//!
//! Why two classes? A start polls each process many times, and each poll's verdict depends
//! on the process's restart policy and readiness window: [`NativeManifest`] holds the
//! parsed manifest for one `startManifest`, so JS names a process instead of sending its
//! policy back. [`IdleObserver`] holds one `checkIdle`'s policy and previous state between
//! the probe it asks for (its token names the probe's files) and the verdict.
//!
//! The scripts a manifest runs are the core's too (`core::manifest::scripts`): JavaScript
//! sends each one through `runScript` and hands back what it resolved with, read once
//! ([`ScriptAnswerRecord`]), and the core reads the script's tagged lines.
//!
//! Key order: the documented plan and manifest objects have always had their keys in sorted
//! order (they were JSON objects the core serialized with sorted keys). napi sets optional
//! fields after the others, so `lib/manifest.js` builds the objects whose optional fields
//! sit in the middle (a process, a readiness probe, a manifest); the records that can be
//! passed through as they are declare their fields in that order.

use crate::binding::checks::ErrorTextRecord;
use crate::binding::error::{guard, internal, Failure};
use crate::core::facts::Fact;
use crate::core::manifest::execution::{
    self, FlushOutcome, PollVerdict, StartFailure, StartFailureReason, StopOutcome, StopStep, DEFAULT_FLUSH_TIMEOUT_MS,
    DEFAULT_IDLE_PROBE_TIMEOUT_MS,
};
use crate::core::manifest::idle::{self, EvidenceStatus, IdleCheck, IdleState, UnknownReason, STATE_VERSION};
use crate::core::manifest::scripts::{self, Answer};
use crate::core::manifest::{
    parse_manifest_text, plan_startup as core_plan_startup, plan_teardown as core_plan_teardown, Evidence, Idle,
    Manifest, Phase, Probe, Process, Restart, Signal, StartupPlan, TeardownPlan,
};
use crate::core::CoreError;
use napi::bindgen_prelude::{Either, Null};
use napi::Env;
use napi_derive::napi;
use serde_json::Value;

/// Bound of the short bookkeeping scripts (start, status), ms.
#[napi]
pub const SCRIPT_TIMEOUT_MS: u32 = execution::SCRIPT_TIMEOUT_MS as u32;

/// A ms value of a validated manifest (bounded far below `u32::MAX`) as JS receives it.
fn ms(x: u64) -> u32 {
    u32::try_from(x).unwrap_or(u32::MAX)
}

fn parse(manifest_json: Option<&str>) -> Result<Manifest, Failure> {
    Ok(parse_manifest_text(manifest_json)?)
}

// ---------------------------------------------------------------------------------------
// The manifest and its plans

/// A signal a teardown may send before `SIGKILL`.
#[napi(string_enum)]
pub enum ManifestSignal {
    /// `SIGTERM` (the default).
    #[napi(value = "SIGTERM")]
    Term,
    /// `SIGINT`.
    #[napi(value = "SIGINT")]
    Int,
    /// `SIGHUP`.
    #[napi(value = "SIGHUP")]
    Hup,
    /// `SIGQUIT`.
    #[napi(value = "SIGQUIT")]
    Quit,
}

impl From<Signal> for ManifestSignal {
    fn from(s: Signal) -> Self {
        match s {
            Signal::Term => ManifestSignal::Term,
            Signal::Int => ManifestSignal::Int,
            Signal::Hup => ManifestSignal::Hup,
            Signal::Quit => ManifestSignal::Quit,
        }
    }
}

/// A process's restart policy during startup.
#[napi(string_enum = "kebab-case")]
pub enum RestartPolicy {
    /// An early exit fails the start.
    Never,
    /// A failed exit restarts the process, at most `maxRestarts` times.
    OnFailure,
}

/// A source of idle evidence.
#[napi(string_enum = "kebab-case")]
pub enum EvidenceSource {
    /// No process in the working directory besides the manifest's own.
    NoRunningCommand,
    /// No process in the working directory holds a controlling terminal.
    NoOpenSession,
    /// Nothing under the working directory (outside `.relay/`) changed.
    NoFileChange,
    /// No manifest process's log grew.
    NoProcessOutput,
}

impl From<Evidence> for EvidenceSource {
    fn from(e: Evidence) -> Self {
        match e {
            Evidence::NoRunningCommand => EvidenceSource::NoRunningCommand,
            Evidence::NoOpenSession => EvidenceSource::NoOpenSession,
            Evidence::NoFileChange => EvidenceSource::NoFileChange,
            Evidence::NoProcessOutput => EvidenceSource::NoProcessOutput,
        }
    }
}

/// A readiness probe: exactly one of `command`, `port`, `logLine`.
#[napi(object, object_from_js = false)]
pub struct ReadinessRecord {
    /// Exits 0 once ready.
    pub command: Option<String>,
    /// Accepts TCP connections on the loopback interface once ready.
    pub port: Option<u32>,
    /// A fixed string in the process's output once ready.
    pub log_line: Option<String>,
    /// Give up this many ms after the first start.
    pub timeout_ms: u32,
    /// Poll every this many ms.
    pub interval_ms: u32,
}

/// How a process is stopped.
#[napi(object, object_from_js = false)]
pub struct ProcessTeardownRecord {
    /// Runs to completion before the signal, when declared.
    pub flush_command: Option<String>,
    /// The polite signal.
    pub signal: ManifestSignal,
    /// How long the group may take to exit after the signal, ms.
    pub grace_ms: u32,
}

/// A process with every default filled in.
#[napi(object, object_from_js = false)]
pub struct ProcessRecord {
    /// Its unique name.
    pub name: String,
    /// Its command (`sh -c`).
    pub command: String,
    /// What must be ready before it starts (input order).
    pub depends_on: Vec<String>,
    /// Its readiness probe; absent: ready once started and running.
    pub readiness: Option<ReadinessRecord>,
    /// Its restart policy.
    pub restart: RestartPolicy,
    /// Present only with `on-failure`.
    pub max_restarts: Option<u32>,
    /// How it is stopped.
    pub teardown: ProcessTeardownRecord,
}

impl From<&Process> for ProcessRecord {
    fn from(p: &Process) -> Self {
        let readiness = p.readiness.as_ref().map(|r| {
            let (mut command, mut port, mut log_line) = (None, None, None);
            match &r.probe {
                Probe::Command(c) => command = Some(c.clone()),
                Probe::Port(n) => port = Some(u32::from(*n)),
                Probe::LogLine(l) => log_line = Some(l.clone()),
            }
            ReadinessRecord { command, port, log_line, timeout_ms: ms(r.timeout_ms), interval_ms: ms(r.interval_ms) }
        });
        let (restart, max_restarts) = match p.restart {
            Restart::Never => (RestartPolicy::Never, None),
            Restart::OnFailure { max_restarts } => (RestartPolicy::OnFailure, Some(max_restarts)),
        };
        ProcessRecord {
            name: p.name.clone(),
            command: p.command.clone(),
            depends_on: p.depends_on.clone(),
            readiness,
            restart,
            max_restarts,
            teardown: ProcessTeardownRecord {
                flush_command: p.teardown.flush_command.clone(),
                signal: p.teardown.signal.into(),
                grace_ms: ms(p.teardown.grace_ms),
            },
        }
    }
}

/// The idle policy.
#[napi(object, object_from_js = false)]
pub struct IdleRecord {
    /// How long every source must agree, ms.
    pub quiet_ms: u32,
    /// The sources, in declaration order.
    pub evidence: Vec<EvidenceSource>,
}

impl From<&Idle> for IdleRecord {
    fn from(i: &Idle) -> Self {
        IdleRecord { quiet_ms: ms(i.quiet_ms), evidence: i.evidence.iter().map(|e| (*e).into()).collect() }
    }
}

/// A validated manifest, normalized: processes in input order, defaults filled in.
#[napi(object, object_from_js = false)]
pub struct ManifestRecord {
    /// The processes.
    pub processes: Vec<ProcessRecord>,
    /// The idle policy, when declared.
    pub idle: Option<IdleRecord>,
}

impl From<&Manifest> for ManifestRecord {
    fn from(m: &Manifest) -> Self {
        ManifestRecord {
            processes: m.processes.iter().map(ProcessRecord::from).collect(),
            idle: m.idle.as_ref().map(IdleRecord::from),
        }
    }
}

/// One startup wave.
#[napi(object, object_from_js = false)]
pub struct StartupWaveRecord {
    /// Its processes, by name.
    pub processes: Vec<ProcessRecord>,
    /// Its index.
    pub wave: u32,
}

/// The startup plan (fields in the documented key order).
#[napi(object, object_from_js = false)]
pub struct StartupPlanRecord {
    /// Every name, wave by wave.
    pub order: Vec<String>,
    /// Topological levels, ordered by name within a wave.
    pub waves: Vec<StartupWaveRecord>,
}

impl From<&StartupPlan> for StartupPlanRecord {
    fn from(plan: &StartupPlan) -> Self {
        StartupPlanRecord {
            order: plan.order().into_iter().map(str::to_string).collect(),
            waves: plan
                .waves
                .iter()
                .enumerate()
                .map(|(i, w)| StartupWaveRecord {
                    processes: w.iter().map(ProcessRecord::from).collect(),
                    wave: i as u32,
                })
                .collect(),
        }
    }
}

/// The `SIGKILL` that ends every teardown step.
#[napi(string_enum)]
pub enum KillSignal {
    /// `SIGKILL`.
    #[napi(value = "SIGKILL")]
    Kill,
}

/// One phase of a history-safe teardown step, performed in order.
#[napi(discriminant = "action", discriminant_case = "lowercase", object_from_js = false)]
pub enum TeardownPhaseRecord {
    /// Run the flush command to completion.
    Flush {
        /// The flush command.
        command: String,
    },
    /// Send the polite signal to the process group.
    Signal {
        /// The signal.
        signal: ManifestSignal,
    },
    /// Wait up to `ms` for the group to exit.
    Wait {
        /// The grace period, ms.
        ms: u32,
    },
    /// `SIGKILL` whatever is left of the group.
    Kill {
        /// Always `SIGKILL`.
        signal: KillSignal,
    },
}

impl From<&Phase> for TeardownPhaseRecord {
    fn from(p: &Phase) -> Self {
        match p {
            Phase::Flush { command } => TeardownPhaseRecord::Flush { command: command.clone() },
            Phase::Signal { signal } => TeardownPhaseRecord::Signal { signal: (*signal).into() },
            Phase::Wait { ms: grace } => TeardownPhaseRecord::Wait { ms: ms(*grace) },
            Phase::Kill => TeardownPhaseRecord::Kill { signal: KillSignal::Kill },
        }
    }
}

/// How to stop one process.
#[napi(object, object_from_js = false)]
pub struct TeardownStepRecord {
    /// The process.
    pub name: String,
    /// Flush (if declared), signal, wait, kill.
    pub phases: Vec<TeardownPhaseRecord>,
}

/// One teardown wave (fields in the documented key order).
#[napi(object, object_from_js = false)]
pub struct TeardownWaveRecord {
    /// Its steps, by name.
    pub steps: Vec<TeardownStepRecord>,
    /// Its index.
    pub wave: u32,
}

/// The teardown plan (fields in the documented key order).
#[napi(object, object_from_js = false)]
pub struct TeardownPlanRecord {
    /// Every name, wave by wave.
    pub order: Vec<String>,
    /// The startup waves, reversed.
    pub waves: Vec<TeardownWaveRecord>,
}

impl From<&TeardownPlan> for TeardownPlanRecord {
    fn from(plan: &TeardownPlan) -> Self {
        TeardownPlanRecord {
            order: plan.order().into_iter().map(str::to_string).collect(),
            waves: plan
                .waves
                .iter()
                .enumerate()
                .map(|(i, w)| TeardownWaveRecord {
                    steps: w
                        .iter()
                        .map(|s| TeardownStepRecord {
                            name: s.name.clone(),
                            phases: s.phases.iter().map(TeardownPhaseRecord::from).collect(),
                        })
                        .collect(),
                    wave: i as u32,
                })
                .collect(),
        }
    }
}

/// Validates a process manifest (JSON text; null: the value has no JSON form) and returns
/// it normalized: defaults filled in (`dependsOn: []`, `restart: "never"`, `maxRestarts: 3`
/// with `on-failure`, `teardown: { signal: "SIGTERM", graceMs: 10000 }`), processes in
/// input order. Throws the typed `INVALID_INPUT` error whose `field` names the offending path.
#[napi]
pub fn validate_manifest(env: Env, manifest_json: Option<String>) -> napi::Result<ManifestRecord> {
    guard(&env, || Ok(ManifestRecord::from(&parse(manifest_json.as_deref())?)))
}

/// The startup plan of a manifest: topological levels, ordered by name within a wave.
/// Throws like `validateManifest`.
#[napi]
pub fn plan_startup(env: Env, manifest_json: Option<String>) -> napi::Result<StartupPlanRecord> {
    guard(&env, || Ok(StartupPlanRecord::from(&core_plan_startup(&parse(manifest_json.as_deref())?))))
}

/// The teardown plan of a manifest: the startup waves reversed; each step's phases are
/// flush (if declared), signal, wait `graceMs`, kill. Throws like `validateManifest`.
#[napi]
pub fn plan_teardown(env: Env, manifest_json: Option<String>) -> napi::Result<TeardownPlanRecord> {
    guard(&env, || Ok(TeardownPlanRecord::from(&core_plan_teardown(&parse(manifest_json.as_deref())?))))
}

/// The options of `startManifest` / `teardownManifest` (JSON text; `{}` when absent):
/// `flushTimeoutMs`, default 30000, 1..=3600000. Throws the typed `INVALID_INPUT` error
/// naming the option.
#[napi]
pub fn flush_timeout_ms(env: Env, options_json: String) -> napi::Result<u32> {
    guard(&env, || {
        let v = options_value(&options_json);
        Ok(ms(execution::timeout_option(&v, "flushTimeoutMs", DEFAULT_FLUSH_TIMEOUT_MS)?))
    })
}

/// The options of `checkIdle` (JSON text; `{}` when absent): `timeoutMs`, default 30000,
/// 1..=3600000. Throws the typed `INVALID_INPUT` error naming the option.
#[napi]
pub fn idle_probe_timeout_ms(env: Env, options_json: String) -> napi::Result<u32> {
    guard(&env, || {
        let v = options_value(&options_json);
        Ok(ms(execution::timeout_option(&v, "timeoutMs", DEFAULT_IDLE_PROBE_TIMEOUT_MS)?))
    })
}

/// Options text without a JSON form (a cycle) reads as no object at all.
fn options_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Bool(false))
}

// ---------------------------------------------------------------------------------------
// Startup

/// Why a start failed (the public `MANIFEST_START_REASONS`).
#[napi(string_enum = "UPPER_SNAKE")]
pub enum StartFailureReasonName {
    /// The readiness probe did not pass in time.
    ReadinessTimeout,
    /// The process exited before the manifest became useful.
    ProcessExited,
    /// A port probe found no TCP client.
    ProbeUnavailable,
    /// The process could not be started in a process group of its own.
    StartFailed,
    /// The runtime port failed.
    RuntimeError,
}

/// Every reason a start fails for, in their documented order (`MANIFEST_START_REASONS`).
#[napi]
pub fn manifest_start_reasons(env: Env) -> napi::Result<Vec<&'static str>> {
    guard(&env, || Ok(StartFailureReason::ALL.iter().map(|r| r.code()).collect()))
}

/// The code and message of a `ManifestStartError` of `process`, failed for `reason` (one
/// of `MANIFEST_START_REASONS`).
#[napi]
pub fn manifest_start_error(env: Env, process: String, reason: String) -> napi::Result<ErrorTextRecord> {
    guard(&env, || {
        Ok(ErrorTextRecord {
            code: execution::START_FAILED_CODE,
            message: execution::start_error_message(&process, &reason),
        })
    })
}

/// Throws the typed `INVALID_INPUT` error naming `router` unless it has `runScript`.
#[napi]
pub fn check_manifest_router(env: Env, has_run_script: bool) -> napi::Result<()> {
    guard(&env, || Ok(execution::check_router(has_run_script)?))
}

/// Throws the typed `INVALID_INPUT` error naming `started` unless its facts (`lib/facts.js`;
/// null: it could not be read) are what `startManifest` resolved with.
#[napi]
pub fn check_started(env: Env, facts_json: Option<String>) -> napi::Result<()> {
    guard(&env, || {
        let facts = facts_json.as_deref().and_then(Fact::parse);
        Ok(execution::check_started(facts.as_ref())?)
    })
}

/// A failure of one process, with the detail its reason carries.
#[napi(object, object_from_js = false)]
pub struct StartFailureRecord {
    /// The reason.
    pub reason: StartFailureReasonName,
    /// `PROCESS_EXITED` only: the exit status, or null when unknown.
    pub exit_code: Option<Either<i64, Null>>,
    /// `READINESS_TIMEOUT` only: the probe's `timeoutMs`.
    pub timeout_ms: Option<u32>,
}

impl From<StartFailure> for StartFailureRecord {
    fn from(f: StartFailure) -> Self {
        let reason = match f.reason() {
            StartFailureReason::ReadinessTimeout => StartFailureReasonName::ReadinessTimeout,
            StartFailureReason::ProcessExited => StartFailureReasonName::ProcessExited,
            StartFailureReason::ProbeUnavailable => StartFailureReasonName::ProbeUnavailable,
            StartFailureReason::StartFailed => StartFailureReasonName::StartFailed,
            StartFailureReason::RuntimeError => StartFailureReasonName::RuntimeError,
        };
        let (exit_code, timeout_ms) = match f {
            StartFailure::ProcessExited { exit_code } => (Some(exit_code.map_or(Either::B(Null), Either::A)), None),
            StartFailure::ReadinessTimeout { timeout_ms } => (None, Some(ms(timeout_ms))),
            _ => (None, None),
        };
        StartFailureRecord { reason, exit_code, timeout_ms }
    }
}

/// What a script's `runScript` resolved with, as `lib/manifest.js` read it once (each field
/// null where the value was not of the port's type). A call that rejected has no answer
/// (null).
#[napi(object, object_to_js = false, use_nullable = true)]
pub struct ScriptAnswerRecord {
    /// The result was a value (not null or undefined).
    pub answered: bool,
    /// Its `stdout`, when a string.
    pub stdout: Option<String>,
    /// Its `output`, when a string (the adapters' name for it).
    pub output: Option<String>,
    /// Its `exitCode`, when a number.
    pub exit_code: Option<f64>,
    /// Its `timedOut` was truthy.
    pub timed_out: bool,
}

fn answer_of(r: Option<ScriptAnswerRecord>) -> Option<Answer> {
    r.map(|r| Answer {
        answered: r.answered,
        stdout: r.stdout,
        output: r.output,
        exit_code: r.exit_code,
        timed_out: r.timed_out,
    })
}

/// How a start went: the process's pid and group, or why it failed.
#[napi(object, object_from_js = false)]
pub struct StartJudgedRecord {
    /// Why the start failed; absent when the process started.
    pub failure: Option<StartFailureRecord>,
    /// The process's pid, when it started.
    pub pid: Option<u32>,
    /// Its process group (the one its start script leads), when it started.
    pub pgid: Option<u32>,
}

/// Judges a start from its script's answer (null: the call rejected): the process started
/// in a process group of its own (the one its start script leads), else why not
/// (`START_FAILED`, or `RUNTIME_ERROR` when the call rejected).
#[napi]
pub fn judge_start(env: Env, answer: Option<ScriptAnswerRecord>) -> napi::Result<StartJudgedRecord> {
    guard(&env, || {
        let r = scripts::start_report(answer_of(answer).as_ref());
        Ok(match execution::judge_start(&r) {
            Ok((pid, pgid)) => StartJudgedRecord { failure: None, pid: Some(pid), pgid: Some(pgid) },
            Err(f) => StartJudgedRecord { failure: Some(f.into()), pid: None, pgid: None },
        })
    })
}

/// What to do after a poll.
#[napi(discriminant = "action", discriminant_case = "lowercase", object_from_js = false)]
pub enum PollVerdictRecord {
    /// The process is ready.
    Ready,
    /// Start it again.
    Restart,
    /// Poll again after `waitMs`.
    Wait {
        /// How long to wait, ms.
        wait_ms: u32,
    },
    /// The start failed.
    Fail {
        /// How.
        failure: StartFailureRecord,
    },
}

/// The first process the final check found not running.
#[napi(object, object_from_js = false)]
pub struct RunningFailureRecord {
    /// The process.
    pub process: String,
    /// How.
    pub failure: StartFailureRecord,
}

/// A started process, by name and pid.
#[napi(object, object_to_js = false)]
pub struct StartedEntryRecord {
    /// The process.
    pub name: String,
    /// Its pid.
    pub pid: u32,
}

/// The final check of a start: the status line of every started process, in order.
#[napi]
pub fn status_script(env: Env, entries: Vec<StartedEntryRecord>) -> napi::Result<String> {
    guard(&env, || {
        let entries: Vec<(&str, u32)> = entries.iter().map(|e| (e.name.as_str(), e.pid)).collect();
        Ok(scripts::status_script(&entries))
    })
}

/// Judges the final check of a start from its script's answer (null: the call rejected,
/// and the first process fails with `RUNTIME_ERROR`): every process of `names` (in startup
/// order) must still run. Null when the manifest is useful.
#[napi]
pub fn judge_still_running(
    env: Env,
    answer: Option<ScriptAnswerRecord>,
    names: Vec<String>,
) -> napi::Result<Option<RunningFailureRecord>> {
    guard(&env, || {
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let statuses = scripts::statuses(answer_of(answer).as_ref(), &refs);
        let (rejected, parsed) = match statuses {
            Some(s) => (false, s),
            None => (true, Vec::new()),
        };
        Ok(execution::judge_still_running(rejected, &parsed).and_then(|(i, failure)| {
            Some(RunningFailureRecord { process: names.get(i)?.clone(), failure: failure.into() })
        }))
    })
}

/// One manifest, parsed once for one `startManifest`: its normalized form, its startup
/// plan, and the verdicts on its processes' polls.
#[napi]
pub struct NativeManifest {
    manifest: Manifest,
}

#[napi]
impl NativeManifest {
    /// Validates the manifest (JSON text; null: the value has no JSON form). Throws like
    /// `validateManifest`.
    #[napi(constructor)]
    pub fn new(env: Env, manifest_json: Option<String>) -> napi::Result<Self> {
        guard(&env, || Ok(NativeManifest { manifest: parse(manifest_json.as_deref())? }))
    }

    /// The normalized manifest.
    #[napi]
    pub fn normalized(&self, env: Env) -> napi::Result<ManifestRecord> {
        guard(&env, || Ok(ManifestRecord::from(&self.manifest)))
    }

    /// The startup plan.
    #[napi]
    pub fn startup_plan(&self, env: Env) -> napi::Result<StartupPlanRecord> {
        guard(&env, || Ok(StartupPlanRecord::from(&core_plan_startup(&self.manifest))))
    }

    /// The failure a start that ended for any other cause than a judged one is reported
    /// as: the runtime failed (`RUNTIME_ERROR`), at the first process of the plan.
    #[napi]
    pub fn runtime_failure(&self, env: Env) -> napi::Result<RunningFailureRecord> {
        guard(&env, || {
            let plan = core_plan_startup(&self.manifest);
            let process = plan.order().first().map(|p| p.to_string()).unwrap_or_default();
            Ok(RunningFailureRecord { process, failure: StartFailure::RuntimeError.into() })
        })
    }

    fn process(&self, name: &str) -> Result<&Process, Failure> {
        self.manifest.process(name).ok_or_else(|| internal("(a poll of a process the manifest does not have)"))
    }

    /// The bound of the next poll script of process `name`, `elapsedMs` after its first
    /// start: what is left of its readiness window (at least 1000 ms) plus 1000 ms.
    #[napi]
    pub fn poll_timeout_ms(&self, env: Env, name: String, elapsed_ms: i64) -> napi::Result<u32> {
        guard(&env, || Ok(ms(execution::poll_timeout_ms(self.process(&name)?, elapsed(elapsed_ms)))))
    }

    /// The start script of process `name` (on a restart, `previousPgid`: the group of its
    /// previous run, killed first).
    #[napi]
    pub fn start_script(&self, env: Env, name: String, previous_pgid: Option<u32>) -> napi::Result<String> {
        guard(&env, || Ok(scripts::start_script(self.process(&name)?, previous_pgid)))
    }

    /// One readiness poll script of process `name`, supervised by `pid`.
    #[napi]
    pub fn poll_script(&self, env: Env, name: String, pid: u32) -> napi::Result<String> {
        guard(&env, || Ok(scripts::poll_script(self.process(&name)?, pid)))
    }

    /// Judges one readiness poll of process `name` from its script's answer (null: the call
    /// rejected), `elapsedMs` after its first start, with `restarts` restarts used: ready,
    /// restart, wait `waitMs`, or fail.
    #[napi]
    pub fn judge_poll(
        &self,
        env: Env,
        name: String,
        restarts: u32,
        elapsed_ms: i64,
        answer: Option<ScriptAnswerRecord>,
    ) -> napi::Result<PollVerdictRecord> {
        guard(&env, || {
            let r = scripts::poll_report(answer_of(answer).as_ref(), &name);
            Ok(match execution::judge_poll(self.process(&name)?, restarts, elapsed(elapsed_ms), &r) {
                PollVerdict::Ready => PollVerdictRecord::Ready,
                PollVerdict::Restart => PollVerdictRecord::Restart,
                PollVerdict::Wait { ms: wait } => PollVerdictRecord::Wait { wait_ms: ms(wait) },
                PollVerdict::Failed(f) => PollVerdictRecord::Fail { failure: f.into() },
            })
        })
    }
}

/// Elapsed ms as JS measured them; a clock that went back counts as no time.
fn elapsed(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

// ---------------------------------------------------------------------------------------
// Teardown

/// How to stop one started process: its flush script (when it declares a flush command),
/// then its stop script (signal, wait `graceMs`, `SIGKILL`).
#[napi(object, object_from_js = false)]
pub struct StopStepRecord {
    /// The process.
    pub name: String,
    /// The flush script, bounded by `flushTimeoutMs`, when a flush command is declared.
    pub flush_script: Option<String>,
    /// The stop script.
    pub script: String,
    /// The bound of the stop script, ms.
    pub timeout_ms: u32,
}

impl From<StopStep> for StopStepRecord {
    fn from(s: StopStep) -> Self {
        StopStepRecord {
            flush_script: s.flush_command.as_deref().map(|c| scripts::flush_script(&s.name, s.pgid, c)),
            script: scripts::stop_script(&s.name, s.pgid, s.signal, s.grace_ms),
            timeout_ms: ms(s.timeout_ms),
            name: s.name,
        }
    }
}

/// The teardown of what was started, wave by wave: `processesJson` is the caller's
/// `started.processes` (JSON text of `{ name, pid, pgid }` entries), checked first;
/// `manifestJson` its `started.manifest` (null: no JSON form). Only started processes are
/// stopped. Throws the typed `INVALID_INPUT` error naming `started.processes[i]` or the
/// manifest's field.
#[napi]
pub fn stop_plan(
    env: Env,
    processes_json: String,
    manifest_json: Option<String>,
) -> napi::Result<Vec<Vec<StopStepRecord>>> {
    guard(&env, || {
        let v: Value = serde_json::from_str(&processes_json).unwrap_or(Value::Null);
        let started = execution::parse_started_processes(&v)?;
        let m = parse(manifest_json.as_deref())?;
        Ok(execution::stop_plan(&m, &started)
            .into_iter()
            .map(|w| w.into_iter().map(StopStepRecord::from).collect())
            .collect())
    })
}

/// How a flush went.
#[napi(string_enum = "kebab-case")]
pub enum FlushOutcomeName {
    /// No flush command declared.
    None,
    /// It exited 0.
    Ok,
    /// It failed, or could not be run.
    Failed,
    /// It did not finish within `flushTimeoutMs`.
    TimedOut,
    /// The process had already exited.
    Skipped,
}

/// Judges a flush from its script's answer (null: the call rejected); `declared`: false
/// when the process declares no flush command (none ran).
#[napi]
pub fn judge_flush(env: Env, declared: bool, answer: Option<ScriptAnswerRecord>) -> napi::Result<FlushOutcomeName> {
    guard(&env, || {
        let r = declared.then(|| scripts::flush_report(answer_of(answer).as_ref()));
        Ok(match execution::judge_flush(r.as_ref()) {
            FlushOutcome::None => FlushOutcomeName::None,
            FlushOutcome::Ok => FlushOutcomeName::Ok,
            FlushOutcome::Failed => FlushOutcomeName::Failed,
            FlushOutcome::TimedOut => FlushOutcomeName::TimedOut,
            FlushOutcome::Skipped => FlushOutcomeName::Skipped,
        })
    })
}

/// How a stop went.
#[napi(string_enum = "kebab-case")]
pub enum StopOutcomeName {
    /// The group exited within `graceMs`.
    Exited,
    /// It was killed after `graceMs`.
    Killed,
    /// It had exited before the signal.
    AlreadyExited,
    /// It survived `SIGKILL`.
    Survived,
    /// The step could not be performed.
    Error,
}

impl From<StopOutcome> for StopOutcomeName {
    fn from(o: StopOutcome) -> Self {
        match o {
            StopOutcome::Exited => StopOutcomeName::Exited,
            StopOutcome::Killed => StopOutcomeName::Killed,
            StopOutcome::AlreadyExited => StopOutcomeName::AlreadyExited,
            StopOutcome::Survived => StopOutcomeName::Survived,
            StopOutcome::Error => StopOutcomeName::Error,
        }
    }
}

impl From<&StopOutcomeName> for StopOutcome {
    fn from(o: &StopOutcomeName) -> Self {
        match o {
            StopOutcomeName::Exited => StopOutcome::Exited,
            StopOutcomeName::Killed => StopOutcome::Killed,
            StopOutcomeName::AlreadyExited => StopOutcome::AlreadyExited,
            StopOutcomeName::Survived => StopOutcome::Survived,
            StopOutcomeName::Error => StopOutcome::Error,
        }
    }
}

/// Judges a stop from its script's answer (null: the call rejected).
#[napi]
pub fn judge_stop(env: Env, answer: Option<ScriptAnswerRecord>) -> napi::Result<StopOutcomeName> {
    guard(&env, || {
        let answer = answer_of(answer);
        let word = answer.as_ref().and_then(scripts::stop_word);
        Ok(execution::judge_stop(answer.is_none(), word.as_deref()).into())
    })
}

/// Whether a teardown with these step outcomes is complete: every group exited, was killed
/// or had already exited.
#[napi]
pub fn teardown_complete(outcomes: Vec<StopOutcomeName>) -> bool {
    execution::teardown_complete(&outcomes.iter().map(StopOutcome::from).collect::<Vec<_>>())
}

// ---------------------------------------------------------------------------------------
// Evidence-gated idle

/// A log size, by process name.
#[napi(object)]
pub struct OutputSizeRecord {
    /// The process.
    pub name: String,
    /// Its log's size, bytes.
    pub size: i64,
}

/// What one source says.
#[napi(string_enum = "lowercase")]
pub enum EvidenceStatusName {
    /// Positively quiet.
    Quiet,
    /// Positively active.
    Active,
    /// Not known: never quiet.
    Unknown,
}

/// Why a source is unknown.
#[napi(string_enum = "UPPER_SNAKE")]
pub enum UnknownReasonName {
    /// Its evidence was missing or malformed.
    Unreadable,
    /// A first observation.
    NoBaseline,
    /// A manifest process's log is missing.
    Missing,
    /// The probe failed.
    ProbeFailed,
}

/// One source in a check's report.
#[napi(object, object_from_js = false)]
pub struct EvidenceRecord {
    /// The source.
    pub source: EvidenceSource,
    /// What it said.
    pub status: EvidenceStatusName,
    /// How long it has been quiet without interruption (0 unless quiet), ms.
    pub quiet_for_ms: i64,
    /// Why it is unknown.
    pub reason: Option<UnknownReasonName>,
}

/// One source's streak in the observer state.
#[napi(object, object_from_js = false)]
pub struct StreakRecord {
    /// The source.
    pub source: String,
    /// When the current quiet streak began (ms), or null.
    pub quiet_since: Either<i64, Null>,
    /// When it was last observed (ms).
    pub last_at: i64,
}

/// The observer state to pass to the next check (`lib/manifest.js` builds the opaque
/// `{ v, token, key, sources, outputSizes }` object from it).
#[napi(object, object_from_js = false)]
pub struct IdleStateRecord {
    /// The state's version.
    pub v: u32,
    /// Names the observer's files in the sandbox.
    pub token: String,
    /// The policy fingerprint.
    pub key: String,
    /// Each source's streak, in declaration order.
    pub sources: Vec<StreakRecord>,
    /// The output baseline, when there is one.
    pub output_sizes: Option<Vec<OutputSizeRecord>>,
}

impl From<IdleState> for IdleStateRecord {
    fn from(s: IdleState) -> Self {
        let size =
            |(name, size): (String, u64)| OutputSizeRecord { name, size: i64::try_from(size).unwrap_or(i64::MAX) };
        IdleStateRecord {
            v: STATE_VERSION,
            token: s.token,
            key: s.key,
            sources: s
                .sources
                .into_iter()
                .map(|(source, st)| StreakRecord {
                    source,
                    quiet_since: st.quiet_since.map_or(Either::B(Null), Either::A),
                    last_at: st.last_at.unwrap_or(0),
                })
                .collect(),
            output_sizes: s.output_sizes.map(|v| v.into_iter().map(size).collect()),
        }
    }
}

/// The verdict of one idle check.
#[napi(object, object_from_js = false)]
pub struct IdleCheckRecord {
    /// Every source is quiet and has been for at least `quietMs`.
    pub idle: bool,
    /// The policy's `quietMs`.
    pub quiet_ms: u32,
    /// The smallest `quietForMs` over the sources.
    pub quiet_for_ms: i64,
    /// Each declared source.
    pub evidence: Vec<EvidenceRecord>,
    /// What to pass to the next check.
    pub state: IdleStateRecord,
}

impl From<IdleCheck> for IdleCheckRecord {
    fn from(c: IdleCheck) -> Self {
        let status = |s: EvidenceStatus| match s {
            EvidenceStatus::Quiet => EvidenceStatusName::Quiet,
            EvidenceStatus::Active => EvidenceStatusName::Active,
            EvidenceStatus::Unknown => EvidenceStatusName::Unknown,
        };
        let reason = |r: UnknownReason| match r {
            UnknownReason::Unreadable => UnknownReasonName::Unreadable,
            UnknownReason::NoBaseline => UnknownReasonName::NoBaseline,
            UnknownReason::Missing => UnknownReasonName::Missing,
            UnknownReason::ProbeFailed => UnknownReasonName::ProbeFailed,
        };
        IdleCheckRecord {
            idle: c.idle,
            quiet_ms: ms(c.quiet_ms),
            quiet_for_ms: c.quiet_for_ms,
            evidence: c
                .evidence
                .into_iter()
                .map(|e| EvidenceRecord {
                    source: e.source.into(),
                    status: status(e.status),
                    quiet_for_ms: e.quiet_for_ms,
                    reason: e.reason.map(reason),
                })
                .collect(),
            state: c.state.into(),
        }
    }
}

/// A fresh observer token: 16 lowercase hex digits from the OS CSPRNG.
fn fresh_token() -> Result<String, CoreError> {
    let mut b = [0u8; idle::TOKEN_HEX_DIGITS / 2];
    getrandom::fill(&mut b).map_err(|_| CoreError::RandomUnavailable)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// One `checkIdle`: the policy and the state it resumes from, then the verdict on the
/// probe it asked for.
#[napi]
pub struct IdleObserver {
    manifest: Manifest,
    idle: Idle,
    state: IdleState,
}

#[napi]
impl IdleObserver {
    /// Validates the manifest (JSON text; null: no JSON form) and its idle policy, then the
    /// previous state (JSON text; null or absent: a first check; text that is not JSON is
    /// not a state): a state made under another policy starts over. Throws the typed
    /// `INVALID_INPUT` error naming the manifest's field, `idle` or `state`.
    #[napi(constructor)]
    pub fn new(env: Env, manifest_json: Option<String>, state_json: Option<String>) -> napi::Result<Self> {
        guard(&env, || {
            let manifest = parse(manifest_json.as_deref())?;
            let idle = manifest.idle_policy()?.clone();
            let state = state_json.map(|text| serde_json::from_str::<Value>(&text).unwrap_or(Value::Bool(false)));
            let state = idle::resume(&manifest, &idle, state.as_ref(), fresh_token)?;
            Ok(IdleObserver { manifest, idle, state })
        })
    }

    /// The probe script: this observer's token names its files in the sandbox; it probes
    /// the declared sources, and measures the logs of the manifest's processes.
    #[napi]
    pub fn script(&self, env: Env) -> napi::Result<String> {
        guard(&env, || {
            let names: Vec<&str> = self.manifest.processes.iter().map(|p| p.name.as_str()).collect();
            Ok(scripts::idle_script(&self.state.token, &names, &self.idle.evidence))
        })
    }

    /// The verdict on the probe's answer (null: the call rejected), made at `now` (ms), and
    /// the state for the next check.
    #[napi]
    pub fn conclude(&self, env: Env, answer: Option<ScriptAnswerRecord>, now: i64) -> napi::Result<IdleCheckRecord> {
        guard(&env, || {
            let probe = scripts::idle_probe(answer_of(answer).as_ref());
            Ok(idle::conclude(&self.manifest, &self.idle, &self.state, &probe, now).into())
        })
    }
}
