//! Evidence-gated idle: what one probe's evidence says, and the observer that turns a
//! series of probes into a verdict.
//!
//! Why a state machine over observations, and not one probe? "Nothing happened" can only
//! be seen over time: a process list is a snapshot, and "no file changed" needs a previous
//! mark. So each source keeps a *streak*: when it was first seen quiet, when it was last
//! observed. A sandbox is idle only when every declared source is quiet now and has been at
//! every observation, with no gap longer than `quietMs`, for at least `quietMs`. Everything
//! that is not positively quiet (a first observation without a baseline, a missing log, an
//! unreadable `/proc`, a failing probe) is `unknown`, which is never quiet and breaks the
//! streak: the safe direction is "not idle".
//!
//! The caller (the JS layer) runs the probe script and parses its tagged lines into an
//! [`IdleProbe`]; it keeps the [`IdleState`] between calls as an opaque, JSON-serializable
//! value, which comes back as caller data and is validated here ([`resume`]).

use super::{Evidence, Idle, Manifest};
use crate::core::CoreError;
use serde::Serialize;
use serde_json::Value;

/// The version of the observer state; a state of another version is refused.
pub const STATE_VERSION: u32 = 1;
/// Hex digits of an observer token (it names the observer's files in the sandbox).
pub const TOKEN_HEX_DIGITS: usize = 16;

/// What one source says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvidenceStatus {
    /// Positively quiet.
    Quiet,
    /// Positively active.
    Active,
    /// Not known (see [`UnknownReason`]): never quiet.
    Unknown,
}

impl EvidenceStatus {
    /// The report's spelling.
    pub fn name(self) -> &'static str {
        match self {
            EvidenceStatus::Quiet => "quiet",
            EvidenceStatus::Active => "active",
            EvidenceStatus::Unknown => "unknown",
        }
    }
}

/// Why a source is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownReason {
    /// The probe's output for it was missing or malformed, or `/proc` could not be read.
    Unreadable,
    /// A first observation: nothing to compare with yet.
    NoBaseline,
    /// A manifest process's log is missing.
    Missing,
    /// The probe itself failed (rejected, non-zero exit, timed out).
    ProbeFailed,
}

impl UnknownReason {
    /// The report's spelling, e.g. `NO_BASELINE`.
    pub fn code(self) -> &'static str {
        match self {
            UnknownReason::Unreadable => "UNREADABLE",
            UnknownReason::NoBaseline => "NO_BASELINE",
            UnknownReason::Missing => "MISSING",
            UnknownReason::ProbeFailed => "PROBE_FAILED",
        }
    }
}

/// A process the probe saw in `/proc` with its working directory in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcSeen {
    /// Its pid.
    pub pid: i64,
    /// Its state letter (`R`, `S`, `Z`, …).
    pub state: String,
    /// Its process group.
    pub pgid: i64,
    /// Its controlling terminal (`tty_nr`; 0: none).
    pub tty: i64,
}

/// A manifest pid file the probe read: the process's name and group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PidFileSeen {
    /// The name in the file's name.
    pub name: String,
    /// The group it records.
    pub pgid: i64,
}

/// What the file-change check said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilesSeen {
    /// It set its first mark: no baseline yet.
    First,
    /// This many paths changed since the previous mark.
    Changed(u64),
}

/// What one idle probe reported, parsed from its tagged lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdleProbe {
    /// The `runScript` call resolved with an answer (false: it rejected, or answered nothing).
    pub answered: bool,
    /// The script's exit status, when it reported one.
    pub exit_code: Option<i64>,
    /// The script hit its bound.
    pub timed_out: bool,
    /// The script's last line (`@@end`) was seen.
    pub ended: bool,
    /// The probe's own pid (`@@self`, exactly one).
    pub self_pid: Option<i64>,
    /// The manifest's pid files (well-formed lines only).
    pub pid_files: Vec<PidFileSeen>,
    /// The processes in the sandbox; None when any `@@proc` line was malformed.
    pub procs: Option<Vec<ProcSeen>>,
    /// The file-change line (exactly one, well-formed), if any.
    pub files: Option<FilesSeen>,
    /// Log sizes by process name (lines with a size only), in output order.
    pub output_sizes: Vec<(String, u64)>,
}

impl IdleProbe {
    /// A probe that ran: rejected, non-zero or timed out is a failed probe.
    fn failed(&self) -> bool {
        !self.answered || self.exit_code != Some(0) || self.timed_out
    }
}

/// What one source read from one probe; `sizes` only for `no-process-output` when every log
/// was measured (the next observation's baseline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// What it says.
    pub status: EvidenceStatus,
    /// Why it is unknown.
    pub reason: Option<UnknownReason>,
    /// The log sizes it measured, by process name in manifest order.
    pub sizes: Option<Vec<(String, u64)>>,
}

impl Reading {
    fn of(status: EvidenceStatus) -> Reading {
        Reading { status, reason: None, sizes: None }
    }

    fn unknown(reason: UnknownReason) -> Reading {
        Reading { status: EvidenceStatus::Unknown, reason: Some(reason), sizes: None }
    }

    fn quiet_unless(active: bool) -> Reading {
        Reading::of(if active { EvidenceStatus::Active } else { EvidenceStatus::Quiet })
    }
}

/// Reads every declared source from one probe, in `idle.evidence` order.
///
/// - A failed probe makes every source `PROBE_FAILED`; an incomplete one (no `@@end`, no
///   single `@@self`) makes every source `UNREADABLE`.
/// - `no-running-command` / `no-open-session`: the probe runs in the working directory, so
///   if it cannot see itself it sees nothing (`UNREADABLE`). Of the other live processes
///   (not the probe's own group, not zombies or dead), any outside the manifest's own groups
///   is a running command; any with a controlling terminal is an open session.
/// - `no-file-change`: a first mark is `NO_BASELINE`; a count, quiet at 0.
/// - `no-process-output`: a log of a manifest process without a size is `MISSING`; a first
///   measurement (no `previous` sizes) is `NO_BASELINE`; any size that differs is active.
pub fn read_evidence(m: &Manifest, idle: &Idle, probe: &IdleProbe, previous: Option<&[(String, u64)]>) -> Vec<Reading> {
    if probe.failed() {
        return idle.evidence.iter().map(|_| Reading::unknown(UnknownReason::ProbeFailed)).collect();
    }
    let self_pid = match probe.self_pid {
        Some(pid) if probe.ended => pid,
        _ => return idle.evidence.iter().map(|_| Reading::unknown(UnknownReason::Unreadable)).collect(),
    };
    // The live processes besides the probe's own group; None when /proc was not readable.
    let others: Option<Vec<&ProcSeen>> = probe
        .procs
        .as_ref()
        .filter(|procs| procs.iter().any(|p| p.pid == self_pid))
        .map(|procs| procs.iter().filter(|p| p.pgid != self_pid && p.state != "Z" && p.state != "X").collect());
    let managed =
        |pgid: i64| probe.pid_files.iter().any(|f| f.pgid == pgid && m.processes.iter().any(|p| p.name == f.name));
    idle.evidence
        .iter()
        .map(|source| match source {
            Evidence::NoRunningCommand => match &others {
                Some(o) => Reading::quiet_unless(o.iter().any(|p| !managed(p.pgid))),
                None => Reading::unknown(UnknownReason::Unreadable),
            },
            Evidence::NoOpenSession => match &others {
                Some(o) => Reading::quiet_unless(o.iter().any(|p| p.tty != 0)),
                None => Reading::unknown(UnknownReason::Unreadable),
            },
            Evidence::NoFileChange => match probe.files {
                Some(FilesSeen::First) => Reading::unknown(UnknownReason::NoBaseline),
                Some(FilesSeen::Changed(n)) => Reading::quiet_unless(n > 0),
                None => Reading::unknown(UnknownReason::Unreadable),
            },
            Evidence::NoProcessOutput => output_reading(m, probe, previous),
        })
        .collect()
}

fn output_reading(m: &Manifest, probe: &IdleProbe, previous: Option<&[(String, u64)]>) -> Reading {
    // The last line of a name wins.
    let size_of = |sizes: &[(String, u64)], name: &str| sizes.iter().rev().find(|(n, _)| n == name).map(|(_, s)| *s);
    let mut sizes = Vec::with_capacity(m.processes.len());
    for p in &m.processes {
        match size_of(&probe.output_sizes, &p.name) {
            Some(s) => sizes.push((p.name.clone(), s)),
            None => return Reading::unknown(UnknownReason::Missing),
        }
    }
    let mut reading = match previous {
        None => Reading::unknown(UnknownReason::NoBaseline),
        Some(prev) => Reading::quiet_unless(sizes.iter().any(|(name, s)| size_of(prev, name) != Some(*s))),
    };
    reading.sizes = Some(sizes);
    reading
}

/// One source's streak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Streak {
    /// When it was first seen quiet in the current streak (ms); None: not quiet now.
    pub quiet_since: Option<i64>,
    /// When it was last observed (ms).
    pub last_at: Option<i64>,
}

/// The observer's memory between two checks: what the caller passes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleState {
    /// Names this observer's bookkeeping files in the sandbox (16 lowercase hex digits).
    pub token: String,
    /// The policy the observations were made under ([`state_key`]).
    pub key: String,
    /// Each observed source's streak, by source name.
    pub sources: Vec<(String, Streak)>,
    /// The last complete log measurement (the `no-process-output` baseline).
    pub output_sizes: Option<Vec<(String, u64)>>,
}

/// The fingerprint of what observations depend on: `quietMs`, the sources and the process
/// names. A state made under another policy proves nothing about this one. Its text is
/// `{"quietMs":…,"evidence":[…],"names":[…]}`, as states of earlier versions wrote it.
pub fn state_key(m: &Manifest, idle: &Idle) -> String {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Key<'a> {
        quiet_ms: u64,
        evidence: Vec<&'static str>,
        names: Vec<&'a str>,
    }
    let key = Key {
        quiet_ms: idle.quiet_ms,
        evidence: idle.evidence.iter().map(|e| e.name()).collect(),
        names: m.processes.iter().map(|p| p.name.as_str()).collect(),
    };
    serde_json::to_string(&key).unwrap_or_default()
}

fn is_token(s: &str) -> bool {
    s.len() == TOKEN_HEX_DIGITS && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn sizes_of(v: Option<&Value>) -> Option<Vec<(String, u64)>> {
    let map = v?.as_object()?;
    Some(map.iter().filter_map(|(k, v)| Some((k.clone(), v.as_u64()?))).collect())
}

/// The state to observe from: `state` (the caller's, JSON) when it was made under this
/// policy, else a fresh one with a token from `fresh_token` (None or `null`: a first call).
/// Streak fields that are not integers count as absent (no streak to continue).
///
/// # Errors
/// `INVALID_INPUT` naming `state` when it is not a state a previous check returned: not
/// an object, another version, a malformed token, no key, no `sources` object. Any error of
/// `fresh_token`.
pub fn resume(
    m: &Manifest,
    idle: &Idle,
    state: Option<&Value>,
    fresh_token: impl FnOnce() -> Result<String, CoreError>,
) -> Result<IdleState, CoreError> {
    let key = state_key(m, idle);
    let Some(v) = state.filter(|v| !v.is_null()) else {
        return Ok(IdleState { token: fresh_token()?, key, sources: Vec::new(), output_sizes: None });
    };
    let invalid = || CoreError::InvalidInput {
        field: "state".into(),
        expectation: "must be the state returned by a previous checkIdle".into(),
    };
    let o = v.as_object().ok_or_else(invalid)?;
    let token = o.get("token").and_then(Value::as_str).filter(|t| is_token(t)).ok_or_else(invalid)?;
    let old_key = o.get("key").and_then(Value::as_str).ok_or_else(invalid)?;
    let sources = match o.get("sources") {
        Some(Value::Object(s)) => s
            .iter()
            .map(|(name, streak)| {
                let int = |k: &str| streak.get(k).and_then(Value::as_i64);
                (name.clone(), Streak { quiet_since: int("quietSince"), last_at: int("lastAt") })
            })
            .collect(),
        // An array passes as an object (JavaScript's `typeof`), with no streaks by name.
        Some(Value::Array(_)) => Vec::new(),
        _ => return Err(invalid()),
    };
    if o.get("v").and_then(Value::as_u64) != Some(u64::from(STATE_VERSION)) {
        return Err(invalid());
    }
    // A changed idle policy or process list starts over: old observations prove nothing.
    if old_key != key {
        return Ok(IdleState { token: fresh_token()?, key, sources: Vec::new(), output_sizes: None });
    }
    Ok(IdleState { token: token.to_string(), key, sources, output_sizes: sizes_of(o.get("outputSizes")) })
}

/// One source in a check's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceReport {
    /// The source.
    pub source: Evidence,
    /// What it said this time.
    pub status: EvidenceStatus,
    /// How long it has been quiet without interruption (0 unless quiet), ms.
    pub quiet_for_ms: i64,
    /// Why it is unknown.
    pub reason: Option<UnknownReason>,
}

/// The verdict of one check, and the state for the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleCheck {
    /// Every source is quiet and has been for at least `quiet_ms`.
    pub idle: bool,
    /// The policy's `quietMs`.
    pub quiet_ms: u64,
    /// The smallest `quiet_for_ms` over the sources.
    pub quiet_for_ms: i64,
    /// Each declared source, in declaration order.
    pub evidence: Vec<SourceReport>,
    /// What to pass to the next check.
    pub state: IdleState,
}

/// Folds one probe, made at `now` (ms), into the streaks of `prev`:
///
/// - a quiet source continues its streak only when it was quiet at the previous observation
///   and that observation is at most `quietMs` old; otherwise its streak starts now;
/// - any other status ends its streak;
/// - idle only when every source is quiet and the shortest streak is at least `quietMs`.
pub fn conclude(m: &Manifest, idle: &Idle, prev: &IdleState, probe: &IdleProbe, now: i64) -> IdleCheck {
    let quiet_ms = i64::try_from(idle.quiet_ms).unwrap_or(i64::MAX);
    let readings = read_evidence(m, idle, probe, prev.output_sizes.as_deref());
    let mut sources = Vec::with_capacity(readings.len());
    let mut output_sizes = prev.output_sizes.clone();
    let mut evidence = Vec::with_capacity(readings.len());
    for (source, r) in idle.evidence.iter().zip(readings) {
        let before = prev.sources.iter().find(|(name, _)| name == source.name()).map(|(_, s)| *s);
        let quiet_since = (r.status == EvidenceStatus::Quiet).then(|| match before {
            Some(Streak { quiet_since: Some(since), last_at: Some(last) }) if now.saturating_sub(last) <= quiet_ms => {
                since
            }
            _ => now,
        });
        sources.push((source.name().to_string(), Streak { quiet_since, last_at: Some(now) }));
        if *source == Evidence::NoProcessOutput {
            output_sizes = r.sizes;
        }
        let quiet_for_ms = quiet_since.map_or(0, |since| now.saturating_sub(since));
        evidence.push(SourceReport { source: *source, status: r.status, quiet_for_ms, reason: r.reason });
    }
    let quiet_for_ms = evidence.iter().map(|e| e.quiet_for_ms).min().unwrap_or(0);
    let all_quiet = evidence.iter().all(|e| e.status == EvidenceStatus::Quiet);
    IdleCheck {
        idle: all_quiet && quiet_for_ms >= quiet_ms,
        quiet_ms: idle.quiet_ms,
        quiet_for_ms,
        evidence,
        state: IdleState { token: prev.token.clone(), key: prev.key.clone(), sources, output_sizes },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::manifest::parse_manifest;
    use serde_json::json;

    const ALL: [&str; 4] = ["no-running-command", "no-open-session", "no-file-change", "no-process-output"];

    fn manifest(evidence: &[&str]) -> (Manifest, Idle) {
        let m = parse_manifest(&json!({
            "processes": [{"name": "svc", "command": "x"}, {"name": "db", "command": "y"}],
            "idle": {"quietMs": 1000, "evidence": evidence}
        }))
        .unwrap();
        let idle = m.idle.clone().unwrap();
        (m, idle)
    }

    fn proc(pid: i64, state: &str, pgid: i64, tty: i64) -> ProcSeen {
        ProcSeen { pid, state: state.into(), pgid, tty }
    }

    /// A complete, quiet probe: the probe (pid 100, its own group), the two manifest
    /// groups, nothing changed, both logs measured.
    fn quiet_probe() -> IdleProbe {
        IdleProbe {
            answered: true,
            exit_code: Some(0),
            timed_out: false,
            ended: true,
            self_pid: Some(100),
            pid_files: vec![PidFileSeen { name: "svc".into(), pgid: 10 }, PidFileSeen { name: "db".into(), pgid: 20 }],
            procs: Some(vec![
                proc(100, "R", 100, 0),
                proc(101, "S", 100, 0),
                proc(10, "S", 10, 0),
                proc(20, "S", 20, 0),
            ]),
            files: Some(FilesSeen::Changed(0)),
            output_sizes: vec![("svc".into(), 5), ("db".into(), 7)],
        }
    }

    fn sizes() -> Vec<(String, u64)> {
        vec![("svc".into(), 5), ("db".into(), 7)]
    }

    fn statuses(r: &[Reading]) -> Vec<(EvidenceStatus, Option<UnknownReason>)> {
        r.iter().map(|r| (r.status, r.reason)).collect()
    }

    fn read(evidence: &[&str], probe: &IdleProbe, previous: Option<&[(String, u64)]>) -> Vec<Reading> {
        let (m, idle) = manifest(evidence);
        read_evidence(&m, &idle, probe, previous)
    }

    const QUIET: (EvidenceStatus, Option<UnknownReason>) = (EvidenceStatus::Quiet, None);
    const ACTIVE: (EvidenceStatus, Option<UnknownReason>) = (EvidenceStatus::Active, None);
    const fn unknown(r: UnknownReason) -> (EvidenceStatus, Option<UnknownReason>) {
        (EvidenceStatus::Unknown, Some(r))
    }

    #[test]
    fn quiet_evidence_must_not_fire() {
        let r = read(&ALL, &quiet_probe(), Some(&sizes()));
        assert_eq!(statuses(&r), vec![QUIET; 4]);
        assert_eq!(r[3].sizes, Some(sizes()));
    }

    #[test]
    fn failed_probe_must_fire_for_every_source() {
        for probe in [
            IdleProbe { answered: false, ..quiet_probe() },
            IdleProbe { exit_code: Some(1), ..quiet_probe() },
            IdleProbe { exit_code: None, ..quiet_probe() },
            IdleProbe { timed_out: true, ..quiet_probe() },
        ] {
            assert_eq!(statuses(&read(&ALL, &probe, Some(&sizes()))), vec![unknown(UnknownReason::ProbeFailed); 4]);
        }
    }

    #[test]
    fn incomplete_probe_must_fire_as_unreadable() {
        for probe in [IdleProbe { ended: false, ..quiet_probe() }, IdleProbe { self_pid: None, ..quiet_probe() }] {
            assert_eq!(statuses(&read(&ALL, &probe, Some(&sizes()))), vec![unknown(UnknownReason::Unreadable); 4]);
        }
    }

    #[test]
    fn running_command_must_fire_outside_the_manifest_groups() {
        let mut probe = quiet_probe();
        probe.procs.as_mut().unwrap().push(proc(300, "S", 300, 0));
        let r = read(&["no-running-command", "no-open-session"], &probe, None);
        assert_eq!(statuses(&r), vec![ACTIVE, QUIET]);
        // A pid file of a name the manifest does not have manages nothing.
        probe.pid_files.push(PidFileSeen { name: "other".into(), pgid: 300 });
        assert_eq!(statuses(&read(&["no-running-command"], &probe, None)), vec![ACTIVE]);
    }

    #[test]
    fn running_command_must_not_fire_for_zombies_the_probe_and_manifest_groups() {
        let mut probe = quiet_probe();
        probe.procs.as_mut().unwrap().extend([proc(300, "Z", 300, 0), proc(301, "X", 301, 0), proc(102, "S", 100, 0)]);
        assert_eq!(statuses(&read(&["no-running-command"], &probe, None)), vec![QUIET]);
    }

    #[test]
    fn open_session_must_fire_on_a_terminal_even_in_a_manifest_group() {
        let mut probe = quiet_probe();
        probe.procs.as_mut().unwrap().push(proc(11, "S", 10, 34816));
        assert_eq!(statuses(&read(&["no-open-session", "no-running-command"], &probe, None)), vec![ACTIVE, QUIET]);
    }

    #[test]
    fn open_session_must_not_fire_for_the_probes_own_terminal() {
        let mut probe = quiet_probe();
        probe.procs.as_mut().unwrap().push(proc(103, "S", 100, 34816));
        assert_eq!(statuses(&read(&["no-open-session"], &probe, None)), vec![QUIET]);
    }

    #[test]
    fn unreadable_proc_must_fire_when_malformed_or_the_probe_is_not_seen() {
        let malformed = IdleProbe { procs: None, ..quiet_probe() };
        let blind = IdleProbe { procs: Some(vec![proc(10, "S", 10, 0)]), ..quiet_probe() };
        let empty = IdleProbe { procs: Some(vec![]), ..quiet_probe() };
        for probe in [malformed, blind, empty] {
            let r = read(&["no-running-command", "no-open-session", "no-file-change"], &probe, None);
            assert_eq!(
                statuses(&r),
                vec![unknown(UnknownReason::Unreadable), unknown(UnknownReason::Unreadable), QUIET]
            );
        }
    }

    #[test]
    fn file_change_must_fire_on_a_count_and_without_baseline_or_line() {
        let changed = IdleProbe { files: Some(FilesSeen::Changed(3)), ..quiet_probe() };
        assert_eq!(statuses(&read(&["no-file-change"], &changed, None)), vec![ACTIVE]);
        let first = IdleProbe { files: Some(FilesSeen::First), ..quiet_probe() };
        assert_eq!(statuses(&read(&["no-file-change"], &first, None)), vec![unknown(UnknownReason::NoBaseline)]);
        let none = IdleProbe { files: None, ..quiet_probe() };
        assert_eq!(statuses(&read(&["no-file-change"], &none, None)), vec![unknown(UnknownReason::Unreadable)]);
    }

    #[test]
    fn process_output_must_fire_on_growth_missing_log_or_first_measure() {
        let grown = IdleProbe { output_sizes: vec![("svc".into(), 6), ("db".into(), 7)], ..quiet_probe() };
        assert_eq!(statuses(&read(&["no-process-output"], &grown, Some(&sizes()))), vec![ACTIVE]);
        let missing = IdleProbe { output_sizes: vec![("svc".into(), 5)], ..quiet_probe() };
        let r = read(&["no-process-output"], &missing, Some(&sizes()));
        assert_eq!((statuses(&r), r[0].sizes.clone()), (vec![unknown(UnknownReason::Missing)], None));
        let r = read(&["no-process-output"], &quiet_probe(), None);
        assert_eq!((statuses(&r), r[0].sizes.clone()), (vec![unknown(UnknownReason::NoBaseline)], Some(sizes())));
        // A baseline that lacks a process is a change, not a match.
        let partial = vec![("svc".to_string(), 5)];
        assert_eq!(statuses(&read(&["no-process-output"], &quiet_probe(), Some(&partial))), vec![ACTIVE]);
    }

    #[test]
    fn process_output_must_not_fire_when_sizes_match_last_line_wins() {
        let repeated = IdleProbe {
            output_sizes: vec![("svc".into(), 1), ("db".into(), 7), ("svc".into(), 5), ("ghost".into(), 9)],
            ..quiet_probe()
        };
        let r = read(&["no-process-output"], &repeated, Some(&sizes()));
        assert_eq!((statuses(&r), r[0].sizes.clone()), (vec![QUIET], Some(sizes())));
    }

    fn token() -> Result<String, CoreError> {
        Ok("0123456789abcdef".into())
    }

    fn fresh(m: &Manifest, idle: &Idle) -> IdleState {
        resume(m, idle, None, token).unwrap()
    }

    /// Observes `probe` at each of `times`, threading the state; returns every check.
    fn observe(evidence: &[&str], times: &[i64], probe: impl Fn(usize) -> IdleProbe) -> Vec<IdleCheck> {
        let (m, idle) = manifest(evidence);
        let mut state = fresh(&m, &idle);
        let mut out = Vec::new();
        for (i, t) in times.iter().enumerate() {
            let c = conclude(&m, &idle, &state, &probe(i), *t);
            state = c.state.clone();
            out.push(c);
        }
        out
    }

    #[test]
    fn idle_must_fire_once_every_source_agreed_for_quiet_ms() {
        let checks = observe(&ALL, &[0, 400, 800, 1200, 1400], |_| quiet_probe());
        assert_eq!(checks.iter().map(|c| c.idle).collect::<Vec<_>>(), vec![false, false, false, false, true]);
        // The first check has no output baseline: that source's streak starts at the second.
        assert_eq!(checks[3].quiet_for_ms, 800);
        assert_eq!(checks[3].evidence[0].quiet_for_ms, 1200);
        assert_eq!(checks[4].quiet_for_ms, 1000);
        assert!(checks[4].evidence.iter().all(|e| e.status == EvidenceStatus::Quiet && e.quiet_for_ms >= 1000));
    }

    #[test]
    fn idle_must_not_fire_before_quiet_ms_or_after_a_gap() {
        let early = observe(&["no-running-command"], &[0, 999], |_| quiet_probe());
        assert!(!early[1].idle);
        assert_eq!(early[1].quiet_for_ms, 999);
        // A gap longer than quietMs restarts the streak.
        let gap = observe(&["no-running-command"], &[0, 1001, 1500], |_| quiet_probe());
        assert_eq!(gap.iter().map(|c| c.quiet_for_ms).collect::<Vec<_>>(), vec![0, 0, 499]);
        assert!(gap.iter().all(|c| !c.idle));
        let at_gap_bound = observe(&["no-running-command"], &[0, 1000], |_| quiet_probe());
        assert!(at_gap_bound[1].idle, "a gap of exactly quietMs keeps the streak");
    }

    #[test]
    fn idle_must_not_fire_after_an_unknown_breaks_the_streak() {
        let checks = observe(&["no-running-command"], &[0, 500, 1000, 1500, 2100], |i| {
            if i == 2 {
                IdleProbe { answered: false, ..quiet_probe() }
            } else {
                quiet_probe()
            }
        });
        assert_eq!(checks[2].evidence[0].reason, Some(UnknownReason::ProbeFailed));
        assert_eq!(checks.iter().map(|c| c.quiet_for_ms).collect::<Vec<_>>(), vec![0, 500, 0, 0, 600]);
        assert!(checks.iter().all(|c| !c.idle));
    }

    #[test]
    fn idle_must_not_fire_while_one_source_is_active() {
        let busy = |_| IdleProbe { files: Some(FilesSeen::Changed(1)), ..quiet_probe() };
        let checks = observe(&["no-running-command", "no-file-change"], &[0, 1000, 2000, 3000], busy);
        assert!(checks.iter().all(|c| !c.idle && c.quiet_for_ms == 0));
        assert_eq!(checks[3].evidence[0].quiet_for_ms, 3000, "the quiet source kept its own streak");
    }

    #[test]
    fn output_baseline_is_kept_in_the_state() {
        let checks = observe(&["no-process-output"], &[0, 100], |_| quiet_probe());
        assert_eq!(checks[0].state.output_sizes, Some(sizes()));
        assert_eq!(checks[1].evidence[0].status, EvidenceStatus::Quiet);
        let failed = observe(&["no-process-output"], &[0, 100], |i| IdleProbe { answered: i == 0, ..quiet_probe() });
        assert_eq!(failed[1].state.output_sizes, None, "a failed probe drops the baseline");
    }

    #[test]
    fn state_key_is_the_text_earlier_versions_wrote() {
        let (m, idle) = manifest(&["no-file-change", "no-running-command"]);
        assert_eq!(
            state_key(&m, &idle),
            r#"{"quietMs":1000,"evidence":["no-file-change","no-running-command"],"names":["svc","db"]}"#
        );
    }

    fn state_json(s: &IdleState) -> Value {
        let sources: serde_json::Map<String, Value> = s
            .sources
            .iter()
            .map(|(n, st)| (n.clone(), json!({"quietSince": st.quiet_since, "lastAt": st.last_at})))
            .collect();
        let sizes = s
            .output_sizes
            .as_ref()
            .map(|v| v.iter().map(|(n, x)| (n.clone(), json!(x))).collect::<serde_json::Map<_, _>>());
        json!({"v": 1, "token": s.token, "key": s.key, "sources": sources, "outputSizes": sizes})
    }

    #[test]
    fn resume_must_not_fire_on_a_state_it_returned() {
        let (m, idle) = manifest(&ALL);
        let c = conclude(&m, &idle, &fresh(&m, &idle), &quiet_probe(), 5);
        let mut back = resume(&m, &idle, Some(&state_json(&c.state)), || panic!("no fresh token needed")).unwrap();
        // The same streaks and sizes, by name (JSON objects carry no order here).
        let mut expected = c.state.clone();
        for s in [&mut back, &mut expected] {
            s.sources.sort();
            s.output_sizes.as_mut().unwrap().sort();
        }
        assert_eq!(back, expected);
        assert_eq!(resume(&m, &idle, Some(&json!(null)), token).unwrap(), fresh(&m, &idle));
    }

    #[test]
    fn resume_must_fire_on_what_no_check_returned() {
        let (m, idle) = manifest(&ALL);
        let good = state_json(&fresh(&m, &idle));
        let mut bad = vec![json!(5), json!("x"), json!([]), json!({})];
        for (k, v) in
            [("v", json!(2)), ("token", json!("0123")), ("token", json!("0123456789ABCDEF")), ("key", json!(1))]
        {
            let mut s = good.clone();
            s[k] = v;
            bad.push(s);
        }
        for k in ["v", "token", "key", "sources"] {
            let mut s = good.clone();
            s.as_object_mut().unwrap().remove(k);
            bad.push(s);
        }
        let mut s = good.clone();
        s["sources"] = json!(null);
        bad.push(s);
        for s in bad {
            match resume(&m, &idle, Some(&s), token) {
                Err(CoreError::InvalidInput { field, .. }) => assert_eq!(field, "state", "{s}"),
                other => panic!("{s}: {other:?}"),
            }
        }
    }

    #[test]
    fn changed_policy_must_fire_a_fresh_start() {
        let (m, idle) = manifest(&ALL);
        let c = conclude(&m, &idle, &fresh(&m, &idle), &quiet_probe(), 5);
        let (m2, idle2) = manifest(&["no-file-change"]);
        let other = || Ok("fedcba9876543210".to_string());
        let s = resume(&m2, &idle2, Some(&state_json(&c.state)), other).unwrap();
        assert_eq!((s.token.as_str(), s.sources.len(), s.output_sizes), ("fedcba9876543210", 0, None));
        assert_eq!(s.key, state_key(&m2, &idle2));
    }

    #[test]
    fn forged_streaks_never_continue() {
        let (m, idle) = manifest(&["no-running-command"]);
        let mut s = state_json(&fresh(&m, &idle));
        s["sources"] = json!({"no-running-command": {"quietSince": "long ago", "lastAt": 999}});
        let prev = resume(&m, &idle, Some(&s), token).unwrap();
        let c = conclude(&m, &idle, &prev, &quiet_probe(), 1000);
        assert_eq!(c.quiet_for_ms, 0);
    }
}
