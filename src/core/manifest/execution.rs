//! What the observations of a running manifest mean: a start, a readiness poll, the final
//! check, a teardown step; and the bounds of the scripts that make them.
//!
//! Why here and not beside the scripts? The scripts are I/O: the JS layer sends them
//! through `runScript` and parses their tagged output into the plain reports below (a pid,
//! an exit status, a word). What a report *means* is policy, and policy has one home: is
//! the process ready, did it fail, may it restart, has its window closed, did a teardown
//! complete. Each of those rules is one function here, sans-IO (the caller passes the
//! elapsed time), with its must-fire / must-not-fire tests beside it.

use super::{Manifest, Process, Restart, Signal};
use crate::core::facts::{Fact, Other};
use crate::core::json::join;
use crate::core::CoreError;
use serde_json::Value;
use std::collections::HashMap;

/// Bound of the short bookkeeping scripts (start, status), ms.
pub const SCRIPT_TIMEOUT_MS: u64 = 10_000;
/// A process without a readiness probe is ready once seen running; it must be seen running
/// within this many ms of its first start.
pub const UNPROBED_WINDOW_MS: u64 = 10_000;
/// How often a process without a readiness probe is polled, ms.
pub const UNPROBED_INTERVAL_MS: u64 = 50;
/// A poll script is bounded by what is left of its window, at least this many ms…
pub const MIN_POLL_TIMEOUT_MS: u64 = 1_000;
/// …plus this margin, ms (the probe itself may take a moment past the window).
pub const POLL_MARGIN_MS: u64 = 1_000;
/// A stop script is bounded by the step's `graceMs` plus this (the `SIGKILL` and its wait).
pub const STOP_MARGIN_MS: u64 = 15_000;
/// Default bound of one teardown flush command (`flushTimeoutMs`), ms.
pub const DEFAULT_FLUSH_TIMEOUT_MS: u64 = 30_000;
/// Default bound of one idle probe (`checkIdle`'s `timeoutMs`), ms.
pub const DEFAULT_IDLE_PROBE_TIMEOUT_MS: u64 = 30_000;
/// Bounds of the `flushTimeoutMs` and `timeoutMs` options, inclusive.
pub const OPTION_TIMEOUT_MS: (i64, i64) = (1, 3_600_000);
/// The lowest pid and process group a teardown accepts: 0 and 1 would signal the caller's
/// own group or every process (`kill -- -1`).
pub const MIN_STARTED_ID: i64 = 2;

/// Why a start failed; each reason has one meaning (the public `MANIFEST_START_REASONS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFailureReason {
    /// The readiness probe did not pass within `readiness.timeoutMs`.
    ReadinessTimeout,
    /// The process exited (or vanished) before the manifest became useful, restarts used up.
    ProcessExited,
    /// A port probe found no TCP client in the sandbox.
    ProbeUnavailable,
    /// The process could not be started, or did not get a process group of its own.
    StartFailed,
    /// The runtime port failed (a `runScript` call rejected).
    RuntimeError,
}

impl StartFailureReason {
    /// Every reason, in their documented order (`MANIFEST_START_REASONS`).
    pub const ALL: [StartFailureReason; 5] = [
        StartFailureReason::ReadinessTimeout,
        StartFailureReason::ProcessExited,
        StartFailureReason::ProbeUnavailable,
        StartFailureReason::StartFailed,
        StartFailureReason::RuntimeError,
    ];

    /// The reason of a code, if it is one.
    pub fn parse(code: &str) -> Option<StartFailureReason> {
        StartFailureReason::ALL.into_iter().find(|r| r.code() == code)
    }

    /// What happened to the process, as `MANIFEST_START_FAILED`'s message says it.
    pub fn text(self) -> &'static str {
        match self {
            StartFailureReason::ReadinessTimeout => "did not pass its readiness probe in time",
            StartFailureReason::ProcessExited => "exited before the manifest became useful",
            StartFailureReason::ProbeUnavailable => {
                "has a port probe but the sandbox has no TCP client (bash, nc, node or python3)"
            }
            StartFailureReason::StartFailed => "could not be started in a process group of its own",
            StartFailureReason::RuntimeError => "could not be managed: the runtime failed",
        }
    }

    /// The reason's code, e.g. `READINESS_TIMEOUT`.
    pub fn code(self) -> &'static str {
        match self {
            StartFailureReason::ReadinessTimeout => "READINESS_TIMEOUT",
            StartFailureReason::ProcessExited => "PROCESS_EXITED",
            StartFailureReason::ProbeUnavailable => "PROBE_UNAVAILABLE",
            StartFailureReason::StartFailed => "START_FAILED",
            StartFailureReason::RuntimeError => "RUNTIME_ERROR",
        }
    }
}

/// The code of a `ManifestStartError`.
pub const START_FAILED_CODE: &str = "MANIFEST_START_FAILED";

/// `MANIFEST_START_FAILED`'s message: the process and what happened to it (a `reason` that
/// is no reason's code: that it failed).
pub fn start_error_message(process: &str, reason: &str) -> String {
    let text = StartFailureReason::parse(reason).map_or("failed", StartFailureReason::text);
    format!("manifest start failed: process {process} {text} ({reason})")
}

/// The `router` a manifest runs through must have `runScript` (`has_run_script`).
pub fn check_router(has_run_script: bool) -> Result<(), CoreError> {
    if has_run_script {
        Ok(())
    } else {
        Err(CoreError::InvalidInput {
            field: "router".into(),
            expectation: "must be a SandboxRouter (an object with runScript)".into(),
        })
    }
}

/// The `started` value a teardown is given back (None: it could not be read) must be what
/// `startManifest` resolved with: an object with a `processes` array and a `manifest`.
pub fn check_started(started: Option<&Fact>) -> Result<(), CoreError> {
    let shaped = started.is_some_and(|s| {
        s.is_object() && matches!(s.get("processes"), Some(Fact::List(_))) && s.get("manifest").is_some_and(truthy)
    });
    if shaped {
        Ok(())
    } else {
        Err(CoreError::InvalidInput {
            field: "started".into(),
            expectation: "must be the value startManifest resolved with ({ manifest, processes })".into(),
        })
    }
}

/// Whether JavaScript reads the value as true.
fn truthy(v: &Fact) -> bool {
    match v {
        Fact::Null | Fact::Bool(false) | Fact::Other(Other::Undefined | Other::NaN) => false,
        Fact::Number(n) => *n != 0.0,
        Fact::Text(s) => !s.is_empty(),
        _ => true,
    }
}

/// A failure of one process, with the one detail its reason carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFailure {
    /// `READINESS_TIMEOUT`, with the probe's `timeoutMs`.
    ReadinessTimeout {
        /// The probe's `timeoutMs`.
        timeout_ms: u64,
    },
    /// `PROCESS_EXITED`, with the exit status when known (None: killed, vanished, unreadable).
    ProcessExited {
        /// The exit status, if known.
        exit_code: Option<i64>,
    },
    /// `PROBE_UNAVAILABLE`.
    ProbeUnavailable,
    /// `START_FAILED`.
    StartFailed,
    /// `RUNTIME_ERROR`.
    RuntimeError,
}

impl StartFailure {
    /// The reason.
    pub fn reason(self) -> StartFailureReason {
        match self {
            StartFailure::ReadinessTimeout { .. } => StartFailureReason::ReadinessTimeout,
            StartFailure::ProcessExited { .. } => StartFailureReason::ProcessExited,
            StartFailure::ProbeUnavailable => StartFailureReason::ProbeUnavailable,
            StartFailure::StartFailed => StartFailureReason::StartFailed,
            StartFailure::RuntimeError => StartFailureReason::RuntimeError,
        }
    }
}

/// What the start script reported (`@@started <pid> <shell pid> <pgid>`), parsed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StartReport {
    /// The `runScript` call rejected.
    pub rejected: bool,
    /// The script's exit status, when it reported one.
    pub exit_code: Option<i64>,
    /// The background process's pid.
    pub pid: Option<u32>,
    /// The pid of the shell that ran the start script.
    pub shell: Option<u32>,
    /// The background process's process group.
    pub pgid: Option<u32>,
}

/// Judges a start: the process is started, and managed, only when the script exited 0,
/// reported a pid and a group, and that group is the start script's own (the script leads
/// it). Then a signal to the group reaches the command and its children and nothing else;
/// a shared group is never signalled, so such a process is not managed at all.
pub fn judge_start(r: &StartReport) -> Result<(u32, u32), StartFailure> {
    if r.rejected {
        return Err(StartFailure::RuntimeError);
    }
    match (r.exit_code, r.pid, r.shell, r.pgid) {
        (Some(0), Some(pid), Some(shell), Some(pgid)) if shell == pgid => Ok((pid, pgid)),
        _ => Err(StartFailure::StartFailed),
    }
}

/// What a status line reported about one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessStatus {
    /// Alive and not a zombie.
    Running,
    /// Exited; its status, when the exit file held one.
    Exited(Option<i64>),
    /// Neither running nor with an exit file: killed, or vanished.
    Gone,
}

impl ProcessStatus {
    /// An exit that restart on-failure restarts: anything but a clean exit 0.
    pub fn is_failure(self) -> bool {
        match self {
            ProcessStatus::Running => false,
            ProcessStatus::Exited(code) => code != Some(0),
            ProcessStatus::Gone => true,
        }
    }
}

/// What a readiness probe reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeReport {
    /// The probe's exit status (0: passed).
    Exit(i64),
    /// A port probe found no TCP client.
    Unavailable,
}

/// What one readiness poll reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollReport {
    /// The `runScript` call rejected.
    pub rejected: bool,
    /// The process's status line, if one was readable.
    pub status: Option<ProcessStatus>,
    /// The probe's line, if one was readable (a poll probes only a running process).
    pub probe: Option<ProbeReport>,
}

/// What to do after a poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollVerdict {
    /// The process is ready.
    Ready,
    /// Start it again (the readiness window still counts from the first start).
    Restart,
    /// The start failed.
    Failed(StartFailure),
    /// Poll again after `ms`.
    Wait {
        /// How long to wait, ms.
        ms: u64,
    },
}

/// The readiness window of `p`, ms from its first start, and its poll interval.
fn window(p: &Process) -> (u64, u64) {
    match &p.readiness {
        Some(r) => (r.timeout_ms, r.interval_ms),
        None => (UNPROBED_WINDOW_MS, UNPROBED_INTERVAL_MS),
    }
}

/// The bound of the next poll script of `p`, `elapsed_ms` after its first start: what is
/// left of its window (at least [`MIN_POLL_TIMEOUT_MS`]) plus [`POLL_MARGIN_MS`].
pub fn poll_timeout_ms(p: &Process, elapsed_ms: u64) -> u64 {
    let (window_ms, _) = window(p);
    window_ms.saturating_sub(elapsed_ms).max(MIN_POLL_TIMEOUT_MS) + POLL_MARGIN_MS
}

/// Judges one readiness poll of `p`, `elapsed_ms` after its first start, with `restarts`
/// restarts used:
///
/// - a rejected poll is `RUNTIME_ERROR`;
/// - an exit (or a vanished process) restarts only under `on-failure`, only when it failed
///   (anything but exit 0; see [`ProcessStatus::is_failure`]) and only while restarts are
///   left; otherwise it is `PROCESS_EXITED`;
/// - a running process is ready without a probe, or when its probe exited 0; a port probe
///   without a TCP client is `PROBE_UNAVAILABLE`;
/// - otherwise, once the window has closed: `READINESS_TIMEOUT` (or `START_FAILED` without
///   a probe: never seen running); before: wait one interval, or what is left of the window.
pub fn judge_poll(p: &Process, restarts: u32, elapsed_ms: u64, r: &PollReport) -> PollVerdict {
    if r.rejected {
        return PollVerdict::Failed(StartFailure::RuntimeError);
    }
    match r.status {
        Some(ProcessStatus::Running) => match (&p.readiness, r.probe) {
            (None, _) | (Some(_), Some(ProbeReport::Exit(0))) => return PollVerdict::Ready,
            (Some(_), Some(ProbeReport::Unavailable)) => return PollVerdict::Failed(StartFailure::ProbeUnavailable),
            _ => {}
        },
        Some(status) => {
            let restart_left = match p.restart {
                Restart::OnFailure { max_restarts } => restarts < max_restarts,
                Restart::Never => false,
            };
            if status.is_failure() && restart_left {
                return PollVerdict::Restart;
            }
            let exit_code = match status {
                ProcessStatus::Exited(code) => code,
                _ => None,
            };
            return PollVerdict::Failed(StartFailure::ProcessExited { exit_code });
        }
        None => {}
    }
    let (window_ms, interval_ms) = window(p);
    if elapsed_ms >= window_ms {
        return PollVerdict::Failed(match &p.readiness {
            Some(r) => StartFailure::ReadinessTimeout { timeout_ms: r.timeout_ms },
            None => StartFailure::StartFailed,
        });
    }
    PollVerdict::Wait { ms: interval_ms.min(window_ms - elapsed_ms) }
}

/// Judges the final check (every started process, in startup order, must still run): the
/// first process whose status is unreadable (`RUNTIME_ERROR`) or not running
/// (`PROCESS_EXITED`), by index; a rejected check fails the first process. None: useful.
pub fn judge_still_running(rejected: bool, statuses: &[Option<ProcessStatus>]) -> Option<(usize, StartFailure)> {
    if rejected {
        return Some((0, StartFailure::RuntimeError));
    }
    statuses.iter().enumerate().find_map(|(i, s)| match s {
        None => Some((i, StartFailure::RuntimeError)),
        Some(ProcessStatus::Running) => None,
        Some(ProcessStatus::Exited(code)) => Some((i, StartFailure::ProcessExited { exit_code: *code })),
        Some(ProcessStatus::Gone) => Some((i, StartFailure::ProcessExited { exit_code: None })),
    })
}

/// A process `startManifest` reported started, as a teardown receives it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedProcess {
    /// The process's name.
    pub name: String,
    /// Its supervising shell.
    pub pid: u32,
    /// The process group a teardown signals.
    pub pgid: u32,
}

/// Reads the `processes` of a started manifest (the caller's copy of what `startManifest`
/// resolved with): each `{ name, pid, pgid }` with a string name and integer ids from
/// [`MIN_STARTED_ID`]; other keys are allowed (`readyAfterMs`, `restarts`).
///
/// # Errors
/// `INVALID_INPUT` naming `started.processes` or `started.processes[i]`.
pub fn parse_started_processes(v: &Value) -> Result<Vec<StartedProcess>, CoreError> {
    let entry_error = |i: usize| CoreError::InvalidInput {
        field: format!("started.processes[{i}]"),
        expectation: "must be { name, pid, pgid } with integer ids".into(),
    };
    let Value::Array(items) = v else {
        return Err(CoreError::InvalidInput {
            field: "started".into(),
            expectation: "must be the value startManifest resolved with ({ manifest, processes })".into(),
        });
    };
    let id = |x: Option<&Value>| {
        x.and_then(Value::as_f64)
            .filter(|f| f.fract() == 0.0 && *f >= MIN_STARTED_ID as f64 && *f <= f64::from(i32::MAX))
            .map(|f| f as u32)
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let name = item.get("name").and_then(Value::as_str);
            match (name, id(item.get("pid")), id(item.get("pgid"))) {
                (Some(name), Some(pid), Some(pgid)) => Ok(StartedProcess { name: name.to_string(), pid, pgid }),
                _ => Err(entry_error(i)),
            }
        })
        .collect()
}

/// How to stop one started process: its group, and its step of the teardown plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopStep {
    /// The process.
    pub name: String,
    /// Its process group.
    pub pgid: u32,
    /// The flush command to run first (while the process still runs), if declared.
    pub flush_command: Option<String>,
    /// The polite signal.
    pub signal: Signal,
    /// How long the group may take to exit after the signal, ms.
    pub grace_ms: u64,
    /// The bound of the stop script: `grace_ms` + [`STOP_MARGIN_MS`].
    pub timeout_ms: u64,
}

/// The teardown of what was started: the teardown plan's waves, each holding only the
/// processes in `started` (the last entry of a name wins); empty waves are left out.
pub fn stop_plan(m: &Manifest, started: &[StartedProcess]) -> Vec<Vec<StopStep>> {
    let by_name: HashMap<&str, u32> = started.iter().map(|s| (s.name.as_str(), s.pgid)).collect();
    let process: HashMap<&str, &Process> = m.processes.iter().map(|p| (p.name.as_str(), p)).collect();
    super::plan_teardown(m)
        .waves
        .into_iter()
        .map(|wave| {
            wave.into_iter()
                .filter_map(|step| {
                    let pgid = *by_name.get(step.name.as_str())?;
                    let t = &process.get(step.name.as_str())?.teardown;
                    Some(StopStep {
                        pgid,
                        flush_command: t.flush_command.clone(),
                        signal: t.signal,
                        grace_ms: t.grace_ms,
                        timeout_ms: t.grace_ms + STOP_MARGIN_MS,
                        name: step.name,
                    })
                })
                .collect::<Vec<_>>()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// How a flush went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushOutcome {
    /// No flush command declared.
    None,
    /// It exited 0.
    Ok,
    /// It exited non-zero, its answer was unreadable, or the runtime failed.
    Failed,
    /// It did not finish within `flushTimeoutMs`.
    TimedOut,
    /// The process had already exited: nothing to flush.
    Skipped,
}

impl FlushOutcome {
    /// The report's spelling, e.g. `timed-out`.
    pub fn name(self) -> &'static str {
        match self {
            FlushOutcome::None => "none",
            FlushOutcome::Ok => "ok",
            FlushOutcome::Failed => "failed",
            FlushOutcome::TimedOut => "timed-out",
            FlushOutcome::Skipped => "skipped",
        }
    }
}

/// What the flush script reported (`@@flush <status>` or `@@flush skipped`), parsed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushReport {
    /// The `runScript` call rejected.
    pub rejected: bool,
    /// The script hit its bound.
    pub timed_out: bool,
    /// The script said `skipped`.
    pub skipped: bool,
    /// The flush command's exit status, when the script reported one.
    pub exit_code: Option<i64>,
}

/// Judges a flush (None: no flush command was declared, so none ran): a timeout first
/// (whatever was printed), then `skipped`, then exit 0.
pub fn judge_flush(r: Option<&FlushReport>) -> FlushOutcome {
    let Some(r) = r else { return FlushOutcome::None };
    if r.rejected {
        FlushOutcome::Failed
    } else if r.timed_out {
        FlushOutcome::TimedOut
    } else if r.skipped {
        FlushOutcome::Skipped
    } else if r.exit_code == Some(0) {
        FlushOutcome::Ok
    } else {
        FlushOutcome::Failed
    }
}

/// How a stop went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopOutcome {
    /// The group exited within `graceMs`.
    Exited,
    /// It was killed after `graceMs`.
    Killed,
    /// It had exited before the signal.
    AlreadyExited,
    /// It survived `SIGKILL`.
    Survived,
    /// The step could not be performed, or its answer was unreadable.
    Error,
}

impl StopOutcome {
    /// The report's spelling, e.g. `already-exited`.
    pub fn name(self) -> &'static str {
        match self {
            StopOutcome::Exited => "exited",
            StopOutcome::Killed => "killed",
            StopOutcome::AlreadyExited => "already-exited",
            StopOutcome::Survived => "survived",
            StopOutcome::Error => "error",
        }
    }
}

/// Judges a stop from the word its script printed (`@@stop <word>`); a rejected call, no
/// word or an unknown one is `Error`.
pub fn judge_stop(rejected: bool, word: Option<&str>) -> StopOutcome {
    match word {
        _ if rejected => StopOutcome::Error,
        Some("exited") => StopOutcome::Exited,
        Some("killed") => StopOutcome::Killed,
        Some("already-exited") => StopOutcome::AlreadyExited,
        Some("survived") => StopOutcome::Survived,
        _ => StopOutcome::Error,
    }
}

/// A teardown is complete when every step ended with its group gone: exited, killed, or
/// already exited. A survivor or an error makes it incomplete.
pub fn teardown_complete(outcomes: &[StopOutcome]) -> bool {
    outcomes.iter().all(|o| matches!(o, StopOutcome::Exited | StopOutcome::Killed | StopOutcome::AlreadyExited))
}

/// Reads one timeout option (`flushTimeoutMs` of `startManifest` / `teardownManifest`,
/// `timeoutMs` of `checkIdle`) from the caller's options object (JSON; `null` or absent
/// options are `{}`): `key` is the only known key; absent or `null` is `default_ms`;
/// otherwise an integer within [`OPTION_TIMEOUT_MS`].
///
/// # Errors
/// `INVALID_INPUT` naming `options`, an unknown `options.<key>`, or `options.<key>`.
pub fn timeout_option(options: &Value, key: &str, default_ms: u64) -> Result<u64, CoreError> {
    let invalid = |field: String, expectation: String| CoreError::InvalidInput { field, expectation };
    let value = match options {
        Value::Null => None,
        Value::Object(map) => {
            if let Some(k) = map.keys().find(|k| k.as_str() != key) {
                return Err(invalid(join("options", k), "is not a known option".into()));
            }
            map.get(key).filter(|v| !v.is_null())
        }
        // An array is an object whose keys are its indices (as JavaScript sees it).
        Value::Array(items) if items.is_empty() => None,
        Value::Array(_) => return Err(invalid("options.0".into(), "is not a known option".into())),
        _ => return Err(invalid("options".into(), "must be an object".into())),
    };
    let (min, max) = OPTION_TIMEOUT_MS;
    match value {
        None => Ok(default_ms),
        Some(v) => v
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= min as f64 && *f <= max as f64)
            .map(|f| f as u64)
            .ok_or_else(|| invalid(format!("options.{key}"), format!("must be an integer from {min} to {max}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::manifest::parse_manifest;
    use serde_json::json;

    #[test]
    fn must_fire_a_router_without_run_script_and_must_not_fire_with_one() {
        assert_eq!(check_router(false).unwrap_err().field(), Some("router"));
        assert_eq!(check_router(true), Ok(()));
    }

    #[test]
    fn must_fire_a_started_value_of_another_shape_and_must_not_fire_for_a_start_result() {
        let started = |text: &str| check_started(Some(&Fact::parse(text).unwrap()));
        assert_eq!(started(r#"{"o":[["manifest",{"o":[]}],["processes",[]]]}"#), Ok(()));
        for bad in [
            r#"{"o":[["processes",[]]]}"#,
            r#"{"o":[["manifest",0],["processes",[]]]}"#,
            r#"{"o":[["manifest",{"o":[]}],["processes",{"o":[]}]]}"#,
            "null",
        ] {
            assert_eq!(started(bad).unwrap_err().field(), Some("started"), "{bad}");
        }
        assert!(check_started(None).is_err());
    }

    #[test]
    fn start_errors_say_what_happened_and_must_not_fire_a_text_for_an_unknown_reason() {
        assert_eq!(
            start_error_message("web", "READINESS_TIMEOUT"),
            "manifest start failed: process web did not pass its readiness probe in time (READINESS_TIMEOUT)"
        );
        assert_eq!(start_error_message("web", "OTHER"), "manifest start failed: process web failed (OTHER)");
        assert!(StartFailureReason::ALL.iter().all(|r| StartFailureReason::parse(r.code()) == Some(*r)));
    }

    fn process(extra: Value) -> Process {
        let mut p = json!({"name": "p", "command": "x"});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        parse_manifest(&json!({ "processes": [p] })).unwrap().processes.remove(0)
    }

    fn probed() -> Process {
        process(json!({"readiness": {"logLine": "up", "timeoutMs": 1000, "intervalMs": 100}}))
    }

    fn flaky(max: u32) -> Process {
        process(json!({"restart": "on-failure", "maxRestarts": max}))
    }

    const RUNNING: Option<ProcessStatus> = Some(ProcessStatus::Running);

    fn poll(status: Option<ProcessStatus>, probe: Option<ProbeReport>) -> PollReport {
        PollReport { rejected: false, status, probe }
    }

    #[test]
    fn start_in_its_own_group_must_not_fire() {
        let r = StartReport { rejected: false, exit_code: Some(0), pid: Some(41), shell: Some(40), pgid: Some(40) };
        assert_eq!(judge_start(&r), Ok((41, 40)));
    }

    #[test]
    fn start_in_a_shared_group_or_unreadable_must_fire() {
        let ok = StartReport { rejected: false, exit_code: Some(0), pid: Some(41), shell: Some(40), pgid: Some(40) };
        for bad in [
            StartReport { pgid: Some(7), ..ok },
            StartReport { shell: None, ..ok },
            StartReport { pid: None, ..ok },
            StartReport { pgid: None, ..ok },
            StartReport { exit_code: Some(90), ..ok },
            StartReport { exit_code: None, ..ok },
        ] {
            assert_eq!(judge_start(&bad), Err(StartFailure::StartFailed), "{bad:?}");
        }
        assert_eq!(judge_start(&StartReport { rejected: true, ..ok }), Err(StartFailure::RuntimeError));
    }

    #[test]
    fn restart_on_failure_with_restarts_left_must_fire() {
        let p = flaky(2);
        for status in [ProcessStatus::Exited(Some(1)), ProcessStatus::Exited(None), ProcessStatus::Gone] {
            assert_eq!(judge_poll(&p, 0, 5, &poll(Some(status), None)), PollVerdict::Restart, "{status:?}");
            assert_eq!(judge_poll(&p, 1, 5, &poll(Some(status), None)), PollVerdict::Restart, "{status:?}");
        }
    }

    #[test]
    fn restart_must_not_fire_when_used_up_never_or_a_clean_exit() {
        let exited = |code| PollVerdict::Failed(StartFailure::ProcessExited { exit_code: code });
        assert_eq!(judge_poll(&flaky(2), 2, 5, &poll(Some(ProcessStatus::Exited(Some(1))), None)), exited(Some(1)));
        assert_eq!(judge_poll(&flaky(0), 0, 5, &poll(Some(ProcessStatus::Gone), None)), exited(None));
        assert_eq!(judge_poll(&flaky(3), 0, 5, &poll(Some(ProcessStatus::Exited(Some(0))), None)), exited(Some(0)));
        let never = process(json!({}));
        assert_eq!(judge_poll(&never, 0, 5, &poll(Some(ProcessStatus::Exited(Some(3))), None)), exited(Some(3)));
        assert_eq!(judge_poll(&never, 0, 5, &poll(Some(ProcessStatus::Exited(None)), None)), exited(None));
    }

    #[test]
    fn ready_must_fire_when_running_and_the_probe_passed_or_there_is_none() {
        assert_eq!(judge_poll(&probed(), 0, 5, &poll(RUNNING, Some(ProbeReport::Exit(0)))), PollVerdict::Ready);
        assert_eq!(judge_poll(&process(json!({})), 0, 5, &poll(RUNNING, None)), PollVerdict::Ready);
    }

    #[test]
    fn ready_must_not_fire_on_a_failing_missing_or_unowned_probe() {
        let wait = PollVerdict::Wait { ms: 100 };
        assert_eq!(judge_poll(&probed(), 0, 5, &poll(RUNNING, Some(ProbeReport::Exit(1)))), wait);
        assert_eq!(judge_poll(&probed(), 0, 5, &poll(RUNNING, None)), wait);
        // A passing probe says nothing when the status line is unreadable.
        assert_eq!(judge_poll(&probed(), 0, 5, &poll(None, Some(ProbeReport::Exit(0)))), wait);
    }

    #[test]
    fn probe_unavailable_must_fire_only_for_a_running_probed_process() {
        let unavailable = poll(RUNNING, Some(ProbeReport::Unavailable));
        assert_eq!(judge_poll(&probed(), 0, 5, &unavailable), PollVerdict::Failed(StartFailure::ProbeUnavailable));
        assert_eq!(judge_poll(&process(json!({})), 0, 5, &unavailable), PollVerdict::Ready);
    }

    #[test]
    fn window_closed_must_fire_as_timeout_or_start_failed() {
        let t = PollVerdict::Failed(StartFailure::ReadinessTimeout { timeout_ms: 1000 });
        assert_eq!(judge_poll(&probed(), 0, 1000, &poll(RUNNING, Some(ProbeReport::Exit(1)))), t);
        assert_eq!(judge_poll(&probed(), 0, 5000, &poll(None, None)), t);
        let unprobed = process(json!({}));
        let never_seen = judge_poll(&unprobed, 0, UNPROBED_WINDOW_MS, &poll(None, None));
        assert_eq!(never_seen, PollVerdict::Failed(StartFailure::StartFailed));
    }

    #[test]
    fn window_open_must_not_fire_and_waits_at_most_what_is_left() {
        assert_eq!(judge_poll(&probed(), 0, 999, &poll(None, None)), PollVerdict::Wait { ms: 1 });
        assert_eq!(judge_poll(&probed(), 0, 0, &poll(None, None)), PollVerdict::Wait { ms: 100 });
        let unprobed = process(json!({}));
        assert_eq!(judge_poll(&unprobed, 0, 0, &poll(None, None)), PollVerdict::Wait { ms: UNPROBED_INTERVAL_MS });
    }

    #[test]
    fn rejected_poll_must_fire_as_runtime_error_whatever_else() {
        let r = PollReport { rejected: true, status: RUNNING, probe: Some(ProbeReport::Exit(0)) };
        assert_eq!(judge_poll(&probed(), 0, 5, &r), PollVerdict::Failed(StartFailure::RuntimeError));
    }

    #[test]
    fn poll_timeout_is_what_is_left_with_a_floor_and_a_margin() {
        let p = process(json!({"readiness": {"port": 80, "timeoutMs": 5000, "intervalMs": 100}}));
        assert_eq!(poll_timeout_ms(&p, 0), 6000);
        assert_eq!(poll_timeout_ms(&p, 4500), MIN_POLL_TIMEOUT_MS + POLL_MARGIN_MS);
        assert_eq!(poll_timeout_ms(&p, 9000), MIN_POLL_TIMEOUT_MS + POLL_MARGIN_MS);
        assert_eq!(poll_timeout_ms(&process(json!({})), 0), UNPROBED_WINDOW_MS + POLL_MARGIN_MS);
    }

    #[test]
    fn still_running_must_fire_on_the_first_exit_or_unreadable_status() {
        let s = [RUNNING, Some(ProcessStatus::Exited(Some(2))), None];
        assert_eq!(judge_still_running(false, &s), Some((1, StartFailure::ProcessExited { exit_code: Some(2) })));
        assert_eq!(judge_still_running(false, &[RUNNING, None]), Some((1, StartFailure::RuntimeError)));
        let gone = judge_still_running(false, &[Some(ProcessStatus::Gone)]);
        assert_eq!(gone, Some((0, StartFailure::ProcessExited { exit_code: None })));
        assert_eq!(judge_still_running(true, &[RUNNING, RUNNING]), Some((0, StartFailure::RuntimeError)));
    }

    #[test]
    fn still_running_must_not_fire_when_everything_runs() {
        assert_eq!(judge_still_running(false, &[RUNNING, RUNNING]), None);
    }

    #[test]
    fn started_entries_must_fire_on_bad_ids_or_names() {
        for bad in [
            json!([{"name": "a", "pid": 1, "pgid": 40}]),
            json!([{"name": "a", "pid": 41, "pgid": 0}]),
            json!([{"name": "a", "pid": 41.5, "pgid": 40}]),
            json!([{"name": "a", "pid": "41", "pgid": 40}]),
            json!([{"pid": 41, "pgid": 40}]),
            json!([{"name": 7, "pid": 41, "pgid": 40}]),
            json!([{"name": "a", "pid": 41, "pgid": 4_294_967_296_u64}]),
            json!([null]),
        ] {
            match parse_started_processes(&bad) {
                Err(CoreError::InvalidInput { field, .. }) => assert_eq!(field, "started.processes[0]", "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert!(
            matches!(parse_started_processes(&json!({})), Err(CoreError::InvalidInput { field, .. }) if field == "started")
        );
    }

    #[test]
    fn started_entries_must_not_fire_with_extra_keys() {
        let v = json!([{"name": "a", "pid": 2, "pgid": 2, "readyAfterMs": 5, "restarts": 0}]);
        assert_eq!(parse_started_processes(&v).unwrap(), vec![StartedProcess { name: "a".into(), pid: 2, pgid: 2 }]);
    }

    #[test]
    fn stop_plan_keeps_only_what_started_in_teardown_order() {
        let m = parse_manifest(&json!({"processes": [
            {"name": "db", "command": "x", "teardown": {"flushCommand": "save", "signal": "SIGINT", "graceMs": 250}},
            {"name": "api", "command": "x", "dependsOn": ["db"]},
            {"name": "web", "command": "x", "dependsOn": ["api"]}
        ]}))
        .unwrap();
        let started = [
            StartedProcess { name: "db".into(), pid: 10, pgid: 10 },
            StartedProcess { name: "api".into(), pid: 20, pgid: 20 },
            StartedProcess { name: "api".into(), pid: 30, pgid: 30 },
            StartedProcess { name: "ghost".into(), pid: 40, pgid: 40 },
        ];
        let plan = stop_plan(&m, &started);
        let names: Vec<Vec<(&str, u32)>> =
            plan.iter().map(|w| w.iter().map(|s| (s.name.as_str(), s.pgid)).collect()).collect();
        assert_eq!(names, vec![vec![("api", 30)], vec![("db", 10)]], "web never started; the last api entry wins");
        let db = &plan[1][0];
        assert_eq!(db.flush_command.as_deref(), Some("save"));
        assert_eq!((db.signal, db.grace_ms, db.timeout_ms), (Signal::Int, 250, 250 + STOP_MARGIN_MS));
    }

    #[test]
    fn flush_outcomes_must_fire_in_order_timeout_skipped_ok() {
        let base = FlushReport { rejected: false, timed_out: false, skipped: false, exit_code: Some(0) };
        assert_eq!(judge_flush(Some(&base)), FlushOutcome::Ok);
        assert_eq!(judge_flush(Some(&FlushReport { timed_out: true, ..base })), FlushOutcome::TimedOut);
        assert_eq!(judge_flush(Some(&FlushReport { skipped: true, exit_code: None, ..base })), FlushOutcome::Skipped);
        assert_eq!(judge_flush(Some(&FlushReport { exit_code: Some(1), ..base })), FlushOutcome::Failed);
        assert_eq!(judge_flush(Some(&FlushReport { exit_code: None, ..base })), FlushOutcome::Failed);
        assert_eq!(judge_flush(Some(&FlushReport { rejected: true, ..base })), FlushOutcome::Failed);
        assert_eq!(judge_flush(None), FlushOutcome::None);
    }

    #[test]
    fn stop_words_must_fire_and_anything_else_is_an_error() {
        for o in [StopOutcome::Exited, StopOutcome::Killed, StopOutcome::AlreadyExited, StopOutcome::Survived] {
            assert_eq!(judge_stop(false, Some(o.name())), o);
            assert_eq!(judge_stop(true, Some(o.name())), StopOutcome::Error);
        }
        assert_eq!(judge_stop(false, Some("error")), StopOutcome::Error);
        assert_eq!(judge_stop(false, Some("EXITED")), StopOutcome::Error);
        assert_eq!(judge_stop(false, None), StopOutcome::Error);
    }

    #[test]
    fn teardown_incomplete_must_fire_on_a_survivor_or_an_error() {
        assert!(!teardown_complete(&[StopOutcome::Exited, StopOutcome::Survived]));
        assert!(!teardown_complete(&[StopOutcome::Error]));
    }

    #[test]
    fn teardown_complete_must_not_fire_when_every_group_is_gone() {
        assert!(teardown_complete(&[StopOutcome::Exited, StopOutcome::Killed, StopOutcome::AlreadyExited]));
        assert!(teardown_complete(&[]));
    }

    #[test]
    fn timeout_option_must_fire_on_unknown_keys_types_and_bounds() {
        let field = |v: Value| match timeout_option(&v, "timeoutMs", 30_000) {
            Err(CoreError::InvalidInput { field, .. }) => field,
            other => panic!("{v}: {other:?}"),
        };
        assert_eq!(field(json!({"flushTimeoutMs": 5})), "options.flushTimeoutMs");
        assert_eq!(field(json!({"timeoutMs": 0})), "options.timeoutMs");
        assert_eq!(field(json!({"timeoutMs": 3_600_001})), "options.timeoutMs");
        assert_eq!(field(json!({"timeoutMs": 1.5})), "options.timeoutMs");
        assert_eq!(field(json!({"timeoutMs": "5"})), "options.timeoutMs");
        assert_eq!(field(json!({"timeoutMs": {}})), "options.timeoutMs");
        assert_eq!(field(json!([1])), "options.0");
        assert_eq!(field(json!("x")), "options");
    }

    #[test]
    fn timeout_option_must_not_fire_on_defaults_and_bounds() {
        assert_eq!(timeout_option(&json!(null), "timeoutMs", 30_000).unwrap(), 30_000);
        assert_eq!(timeout_option(&json!({}), "timeoutMs", 30_000).unwrap(), 30_000);
        assert_eq!(timeout_option(&json!([]), "timeoutMs", 30_000).unwrap(), 30_000);
        assert_eq!(timeout_option(&json!({"timeoutMs": null}), "timeoutMs", 30_000).unwrap(), 30_000);
        assert_eq!(timeout_option(&json!({"timeoutMs": 1}), "timeoutMs", 30_000).unwrap(), 1);
        assert_eq!(timeout_option(&json!({"timeoutMs": 3_600_000}), "timeoutMs", 30_000).unwrap(), 3_600_000);
    }
}
