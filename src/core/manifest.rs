//! Process manifests: strict validation and deterministic startup and teardown plans.
//!
//! Why plans in the core? A sandbox is only *useful* once the processes an agent needs
//! (a dev server, a database, a language server) are up and answering, and a sandbox may
//! only be torn down once what those processes hold in memory has been flushed. Both are
//! ordering problems over a dependency graph, and both must come out the same for the same
//! manifest, whatever order its processes were written in, so that a failed start can be
//! reproduced and a teardown log can be compared with the plan. The core decides the order
//! (sans-IO, like the rest of the core); the JS layer performs it through the runtime port
//! (`runScript`), so no provider needs to change.
//!
//! The same holds while it runs: the JS layer parses what its scripts print into plain
//! reports, and the core says what they mean ([`execution`]: ready, restart, failed,
//! complete; [`idle`]: quiet, active or unknown, and whether the sandbox is idle).
//!
//! - **Startup** runs in *waves*: wave `n` holds every process whose longest dependency
//!   chain has length `n` (topological levels). A wave starts only when every readiness
//!   probe of the previous wave passed. Within a wave, processes are ordered by name.
//! - **Teardown** is startup run backwards: the waves in reverse order, so every dependent
//!   stops before anything it depends on. Each step is history-safe: the declared flush
//!   command completes, then the signal is sent, then the grace period runs, then whatever
//!   is left of the process group is killed.
//!
//! Validation errors name the exact path (`processes[2].dependsOn[0]`) and never echo a
//! caller value, except process names in a cycle report: names are restricted to
//! `[a-z0-9][a-z0-9_-]*`, so they carry no secret and no markup.

pub mod execution;
pub mod idle;
pub mod scripts;

use crate::core::json::{object, one_of, FieldError, Obj};
use crate::core::CoreError;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// At most this many processes per manifest.
pub const MAX_PROCESSES: usize = 256;
/// At most this many bytes per process name.
pub const MAX_NAME_BYTES: usize = 64;
/// At most this many bytes per command (process, readiness or flush command).
pub const MAX_COMMAND_BYTES: usize = 65_536;
/// At most this many bytes per readiness log line.
pub const MAX_LOG_LINE_BYTES: usize = 1_024;
/// Readiness `timeoutMs` bounds, inclusive.
pub const READINESS_TIMEOUT_MS: (i64, i64) = (10, 600_000);
/// Readiness `intervalMs` lower bound; the upper bound is the probe's `timeoutMs`.
pub const MIN_INTERVAL_MS: i64 = 10;
/// Teardown `graceMs` bounds, inclusive.
pub const GRACE_MS: (i64, i64) = (0, 300_000);
/// Grace period when a process declares no `teardown`.
pub const DEFAULT_GRACE_MS: u64 = 10_000;
/// Idle `quietMs` bounds, inclusive.
pub const QUIET_MS: (i64, i64) = (1_000, 86_400_000);
/// `maxRestarts` bounds, inclusive.
pub const MAX_RESTARTS: (i64, i64) = (0, 10);
/// `maxRestarts` when `restart` is `on-failure` and no bound is given.
pub const DEFAULT_MAX_RESTARTS: u32 = 3;

const ROOT_KEYS: &[&str] = &["processes", "idle"];
const PROCESS_KEYS: &[&str] = &["name", "command", "dependsOn", "readiness", "restart", "maxRestarts", "teardown"];
const READINESS_KEYS: &[&str] = &["command", "port", "logLine", "timeoutMs", "intervalMs"];
const TEARDOWN_KEYS: &[&str] = &["flushCommand", "signal", "graceMs"];
const IDLE_KEYS: &[&str] = &["quietMs", "evidence"];
const RESTARTS: &[&str] = &["never", "on-failure"];
const SIGNALS: &[&str] = &["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"];
const EVIDENCE: &[&str] = &["no-running-command", "no-open-session", "no-file-change", "no-process-output"];

/// A validated process manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The processes, in input order.
    pub processes: Vec<Process>,
    /// The idle policy, if declared.
    pub idle: Option<Idle>,
}

/// One long-running process of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Unique name, `[a-z0-9][a-z0-9_-]*`, at most 64 bytes.
    pub name: String,
    /// Shell command (run as `sh -c command`).
    pub command: String,
    /// Names of the processes that must be ready before this one starts (input order).
    pub depends_on: Vec<String>,
    /// How to tell that the process is ready; absent = ready once started and running.
    pub readiness: Option<Readiness>,
    /// What to do when the process exits before it is ready. Default `Never`.
    pub restart: Restart,
    /// How to stop the process. Default: no flush, `SIGTERM`, 10 000 ms grace.
    pub teardown: Teardown,
}

/// A readiness probe and its polling bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// The one probe.
    pub probe: Probe,
    /// Give up after this many ms from the process's start (10..=600 000).
    pub timeout_ms: u64,
    /// Poll every this many ms (10..=`timeout_ms`).
    pub interval_ms: u64,
}

/// The three kinds of readiness probe; a manifest declares exactly one per process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// A shell command that exits 0 once the process is ready.
    Command(String),
    /// A TCP port on the loopback interface that accepts connections once ready.
    Port(u16),
    /// A line fragment that appears in the process's own output once ready.
    LogLine(String),
}

/// Restart policy during startup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// An early exit fails the start.
    Never,
    /// An exit with a non-zero status restarts the process, at most `max_restarts` times.
    OnFailure {
        /// 0..=10; default 3.
        max_restarts: u32,
    },
}

/// How one process is stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Teardown {
    /// Run to completion before the signal (e.g. persist in-memory state).
    pub flush_command: Option<String>,
    /// The polite signal. Default `SIGTERM`.
    pub signal: Signal,
    /// How long the process group may take to exit after the signal (0..=300 000 ms).
    pub grace_ms: u64,
}

/// Signals a teardown may send before `SIGKILL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// `SIGTERM` (the default).
    Term,
    /// `SIGINT`.
    Int,
    /// `SIGHUP`.
    Hup,
    /// `SIGQUIT`.
    Quit,
}

impl Signal {
    /// The signal's name, e.g. `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Term => "SIGTERM",
            Signal::Int => "SIGINT",
            Signal::Hup => "SIGHUP",
            Signal::Quit => "SIGQUIT",
        }
    }

    fn from_name(name: &str) -> Signal {
        match name {
            "SIGINT" => Signal::Int,
            "SIGHUP" => Signal::Hup,
            "SIGQUIT" => Signal::Quit,
            _ => Signal::Term,
        }
    }
}

/// The idle policy: idle only when every evidence source agrees for `quiet_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idle {
    /// How long every source must agree without interruption (1 000..=86 400 000 ms).
    pub quiet_ms: u64,
    /// The sources, in input order, without repeats; at least one.
    pub evidence: Vec<Evidence>,
}

/// One source of idle evidence, each read through the runtime port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Evidence {
    /// No process in the sandbox's working directory other than the manifest's own.
    NoRunningCommand,
    /// No process in the sandbox's working directory holds a controlling terminal.
    NoOpenSession,
    /// No file under the working directory (outside `.relay/`) changed.
    NoFileChange,
    /// No manifest process wrote to its log.
    NoProcessOutput,
}

impl Evidence {
    /// The manifest spelling, e.g. `no-file-change`.
    pub fn name(self) -> &'static str {
        match self {
            Evidence::NoRunningCommand => "no-running-command",
            Evidence::NoOpenSession => "no-open-session",
            Evidence::NoFileChange => "no-file-change",
            Evidence::NoProcessOutput => "no-process-output",
        }
    }

    fn from_name(name: &str) -> Option<Evidence> {
        match name {
            "no-running-command" => Some(Evidence::NoRunningCommand),
            "no-open-session" => Some(Evidence::NoOpenSession),
            "no-file-change" => Some(Evidence::NoFileChange),
            "no-process-output" => Some(Evidence::NoProcessOutput),
            _ => None,
        }
    }
}

fn invalid(e: FieldError) -> CoreError {
    CoreError::InvalidInput { field: e.field, expectation: e.expectation }
}

fn required<T>(o: &Obj<'_>, key: &str, v: Option<T>) -> Result<T, FieldError> {
    v.ok_or_else(|| FieldError::new(o.field(key), "is required"))
}

/// True for `[a-z0-9][a-z0-9_-]*` of at most 64 bytes.
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME_BYTES
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

/// A shell command: present, not blank, no NUL byte, bounded.
fn command(o: &Obj<'_>, key: &str) -> Result<Option<String>, FieldError> {
    let Some(s) = o.string(key)? else { return Ok(None) };
    if s.trim().is_empty() {
        return Err(FieldError::new(o.field(key), "must not be blank"));
    }
    if s.contains('\0') {
        return Err(FieldError::new(o.field(key), "must not contain a NUL character"));
    }
    if s.len() > MAX_COMMAND_BYTES {
        return Err(FieldError::new(o.field(key), format!("must be at most {MAX_COMMAND_BYTES} bytes")));
    }
    Ok(Some(s.to_string()))
}

fn integer(o: &Obj<'_>, key: &str, (min, max): (i64, i64)) -> Result<u64, FieldError> {
    let v = o.integer_in(key, min, max)?;
    Ok(required(o, key, v)? as u64)
}

/// Parses and validates a manifest given as JSON text.
pub fn parse_manifest_str(text: &str) -> Result<Manifest, CoreError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|_| CoreError::InvalidInput { field: "manifest".into(), expectation: "must be valid JSON".into() })?;
    parse_manifest(&v)
}

/// Like [`parse_manifest_str`], for the caller's value as the JS layer serialized it: None
/// when the value has no JSON form (a BigInt, a cycle, `undefined`), refused naming
/// `manifest`.
pub fn parse_manifest_text(text: Option<&str>) -> Result<Manifest, CoreError> {
    match text {
        Some(t) => parse_manifest_str(t),
        None => Err(CoreError::InvalidInput {
            field: "manifest".into(),
            expectation: "must be a JSON-serializable object".into(),
        }),
    }
}

impl Manifest {
    /// The process named `name`.
    pub fn process(&self, name: &str) -> Option<&Process> {
        self.processes.iter().find(|p| p.name == name)
    }

    /// The idle policy, which `checkIdle` requires.
    ///
    /// # Errors
    /// `INVALID_INPUT` naming `idle` when the manifest declares none.
    pub fn idle_policy(&self) -> Result<&Idle, CoreError> {
        self.idle.as_ref().ok_or_else(|| CoreError::InvalidInput {
            field: "idle".into(),
            expectation: "is required by checkIdle".into(),
        })
    }
}

/// Parses and validates a manifest.
///
/// # Errors
/// `CoreError::InvalidInput` (code `INVALID_INPUT`) whose `field` names the offending
/// path: unknown keys, wrong types, out-of-range bounds, a bad or repeated name, an unknown
/// or self dependency, a repeated readiness port, or a dependency cycle (the expectation
/// names the cycle, e.g. `forms a dependency cycle a → b → a`).
pub fn parse_manifest(v: &Value) -> Result<Manifest, CoreError> {
    let root = object(v, "", ROOT_KEYS).map_err(invalid)?;
    let items = match root.get("processes") {
        None => return Err(invalid(FieldError::new("processes", "is required"))),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(invalid(FieldError::new("processes", "must be an array"))),
    };
    if items.is_empty() || items.len() > MAX_PROCESSES {
        return Err(invalid(FieldError::new("processes", format!("must hold from 1 to {MAX_PROCESSES} processes"))));
    }
    let mut processes = Vec::with_capacity(items.len());
    let mut first_by_name: HashMap<String, usize> = HashMap::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let p = parse_process(item, &format!("processes[{i}]")).map_err(invalid)?;
        if let Some(first) = first_by_name.get(&p.name) {
            return Err(invalid(FieldError::new(
                format!("processes[{i}].name"),
                format!("must be unique (processes[{first}] has the same name)"),
            )));
        }
        first_by_name.insert(p.name.clone(), i);
        processes.push(p);
    }
    for (i, p) in processes.iter().enumerate() {
        for (j, dep) in p.depends_on.iter().enumerate() {
            let field = || format!("processes[{i}].dependsOn[{j}]");
            if *dep == p.name {
                return Err(invalid(FieldError::new(field(), "must not name the process itself")));
            }
            if !first_by_name.contains_key(dep) {
                return Err(invalid(FieldError::new(field(), "must name a process of this manifest")));
            }
        }
    }
    let mut port_owner: HashMap<u16, usize> = HashMap::new();
    for (i, p) in processes.iter().enumerate() {
        if let Some(Readiness { probe: Probe::Port(port), .. }) = &p.readiness {
            if let Some(first) = port_owner.get(port) {
                return Err(invalid(FieldError::new(
                    format!("processes[{i}].readiness.port"),
                    format!("must differ from processes[{first}].readiness.port (two processes cannot own one port)"),
                )));
            }
            port_owner.insert(*port, i);
        }
    }
    if let Some((i, j, cycle)) = find_cycle(&processes) {
        return Err(invalid(FieldError::new(
            format!("processes[{i}].dependsOn[{j}]"),
            format!("forms a dependency cycle {}", cycle.join(" → ")),
        )));
    }
    let idle = match root.object("idle", IDLE_KEYS).map_err(invalid)? {
        None => None,
        Some(o) => Some(parse_idle(&o).map_err(invalid)?),
    };
    Ok(Manifest { processes, idle })
}

fn parse_process(item: &Value, path: &str) -> Result<Process, FieldError> {
    let o = object(item, path, PROCESS_KEYS)?;
    let name = required(&o, "name", o.string("name")?)?;
    if !valid_name(name) {
        return Err(FieldError::new(
            o.field("name"),
            format!("must match [a-z0-9][a-z0-9_-]* and be at most {MAX_NAME_BYTES} bytes"),
        ));
    }
    let cmd = required(&o, "command", command(&o, "command")?)?;
    let depends_on = match o.get("dependsOn") {
        None => Vec::new(),
        Some(Value::Array(deps)) => {
            if deps.len() > MAX_PROCESSES {
                return Err(FieldError::new(o.field("dependsOn"), format!("must hold at most {MAX_PROCESSES} names")));
            }
            let mut out: Vec<String> = Vec::with_capacity(deps.len());
            for (j, d) in deps.iter().enumerate() {
                let field = format!("{}[{j}]", o.field("dependsOn"));
                match d {
                    Value::String(s) if !s.is_empty() => {
                        if let Some(k) = out.iter().position(|x| x == s) {
                            return Err(FieldError::new(field, format!("must not repeat dependsOn[{k}]")));
                        }
                        out.push(s.clone());
                    }
                    _ => return Err(FieldError::new(field, "must be a process name")),
                }
            }
            out
        }
        Some(_) => return Err(FieldError::new(o.field("dependsOn"), "must be an array of process names")),
    };
    let readiness = match o.object("readiness", READINESS_KEYS)? {
        None => None,
        Some(r) => Some(parse_readiness(&r)?),
    };
    let restart = match o.choice("restart", RESTARTS)?.unwrap_or("never") {
        "on-failure" => {
            let max = o.integer_in("maxRestarts", MAX_RESTARTS.0, MAX_RESTARTS.1)?;
            Restart::OnFailure { max_restarts: max.map_or(DEFAULT_MAX_RESTARTS, |m| m as u32) }
        }
        _ => {
            if o.get("maxRestarts").is_some() {
                return Err(FieldError::new(o.field("maxRestarts"), "is allowed only with restart on-failure"));
            }
            Restart::Never
        }
    };
    let teardown = match o.object("teardown", TEARDOWN_KEYS)? {
        None => Teardown { flush_command: None, signal: Signal::Term, grace_ms: DEFAULT_GRACE_MS },
        Some(t) => Teardown {
            flush_command: command(&t, "flushCommand")?,
            signal: Signal::from_name(t.choice("signal", SIGNALS)?.unwrap_or("SIGTERM")),
            grace_ms: integer(&t, "graceMs", GRACE_MS)?,
        },
    };
    Ok(Process { name: name.to_string(), command: cmd, depends_on, readiness, restart, teardown })
}

fn parse_readiness(r: &Obj<'_>) -> Result<Readiness, FieldError> {
    let declared: Vec<&str> = ["command", "port", "logLine"].into_iter().filter(|k| r.get(k).is_some()).collect();
    if declared.len() != 1 {
        return Err(FieldError::new(r.path(), "must declare exactly one of command, port, logLine"));
    }
    let probe = match declared[0] {
        "command" => Probe::Command(required(r, "command", command(r, "command")?)?),
        "port" => Probe::Port(required(r, "port", r.integer_in("port", 1, 65_535)?)? as u16),
        _ => {
            let line = required(r, "logLine", r.string("logLine")?)?;
            if line.contains(['\n', '\r', '\0']) {
                return Err(FieldError::new(r.field("logLine"), "must be a single line (no CR, LF or NUL)"));
            }
            if line.len() > MAX_LOG_LINE_BYTES {
                return Err(FieldError::new(r.field("logLine"), format!("must be at most {MAX_LOG_LINE_BYTES} bytes")));
            }
            Probe::LogLine(line.to_string())
        }
    };
    let timeout_ms = integer(r, "timeoutMs", READINESS_TIMEOUT_MS)?;
    let interval_ms = integer(r, "intervalMs", (MIN_INTERVAL_MS, READINESS_TIMEOUT_MS.1))?;
    if interval_ms > timeout_ms {
        return Err(FieldError::new(r.field("intervalMs"), "must not exceed timeoutMs"));
    }
    Ok(Readiness { probe, timeout_ms, interval_ms })
}

fn parse_idle(o: &Obj<'_>) -> Result<Idle, FieldError> {
    let quiet_ms = integer(o, "quietMs", QUIET_MS)?;
    let evidence = match o.get("evidence") {
        None => return Err(FieldError::new(o.field("evidence"), "is required")),
        Some(Value::Array(items)) if !items.is_empty() => {
            let mut out: Vec<Evidence> = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let field = format!("{}[{i}]", o.field("evidence"));
                let e = item
                    .as_str()
                    .and_then(Evidence::from_name)
                    .ok_or_else(|| FieldError::new(&field, one_of(EVIDENCE)))?;
                if let Some(k) = out.iter().position(|x| *x == e) {
                    return Err(FieldError::new(field, format!("must not repeat evidence[{k}]")));
                }
                out.push(e);
            }
            out
        }
        Some(_) => {
            return Err(FieldError::new(
                o.field("evidence"),
                format!("must be a non-empty array of evidence sources ({})", EVIDENCE.join(", ")),
            ))
        }
    };
    Ok(Idle { quiet_ms, evidence })
}

/// The first dependency cycle in name order, as `(process index, dependsOn index, names)`.
///
/// The search visits processes and their dependencies in name order, so the same graph
/// always yields the same cycle whatever the input order; the cycle is rotated to start at
/// its smallest name and closes on itself (`a → b → a`). The indices locate the edge from
/// the first to the second name, which is the field the error names.
fn find_cycle(processes: &[Process]) -> Option<(usize, usize, Vec<String>)> {
    let index: HashMap<&str, usize> = processes.iter().enumerate().map(|(i, p)| (p.name.as_str(), i)).collect();
    let sorted_deps: Vec<Vec<usize>> = processes
        .iter()
        .map(|p| {
            let mut d: Vec<usize> = p.depends_on.iter().filter_map(|n| index.get(n.as_str()).copied()).collect();
            d.sort_by(|a, b| processes[*a].name.cmp(&processes[*b].name));
            d
        })
        .collect();
    let mut order: Vec<usize> = (0..processes.len()).collect();
    order.sort_by(|a, b| processes[*a].name.cmp(&processes[*b].name));
    // 0 = unvisited, 1 = on the current path, 2 = done.
    let mut color = vec![0u8; processes.len()];
    for &root in &order {
        if color[root] != 0 {
            continue;
        }
        // Iterative DFS: (node, next dependency to look at).
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        color[root] = 1;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&dep) = sorted_deps[node].get(*next) {
                *next += 1;
                match color[dep] {
                    0 => {
                        color[dep] = 1;
                        stack.push((dep, 0));
                    }
                    1 => {
                        let start = stack.iter().position(|(n, _)| *n == dep).unwrap_or(0);
                        let mut cycle: Vec<usize> = stack[start..].iter().map(|(n, _)| *n).collect();
                        let smallest = (0..cycle.len())
                            .min_by(|a, b| processes[cycle[*a]].name.cmp(&processes[cycle[*b]].name))
                            .unwrap_or(0);
                        cycle.rotate_left(smallest);
                        let from = cycle[0];
                        let to = &processes[cycle[1 % cycle.len()]].name;
                        let j = processes[from].depends_on.iter().position(|d| d == to).unwrap_or(0);
                        let mut names: Vec<String> = cycle.iter().map(|n| processes[*n].name.clone()).collect();
                        names.push(processes[from].name.clone());
                        return Some((from, j, names));
                    }
                    _ => {}
                }
            } else {
                color[node] = 2;
                stack.pop();
            }
        }
    }
    None
}

/// The startup level of every process (0 = no dependencies), by process index (Kahn's
/// algorithm, so no recursion). A `Manifest` built by hand with a cycle (one from
/// [`parse_manifest`] never has one) gets its unresolvable processes in a last level.
fn levels(m: &Manifest) -> Vec<usize> {
    let n = m.processes.len();
    let index: HashMap<&str, usize> = m.processes.iter().enumerate().map(|(i, p)| (p.name.as_str(), i)).collect();
    let mut pending = vec![0usize; n];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, p) in m.processes.iter().enumerate() {
        for d in p.depends_on.iter().filter_map(|d| index.get(d.as_str()).copied()) {
            pending[i] += 1;
            dependents[d].push(i);
        }
    }
    let mut level: Vec<Option<usize>> = vec![None; n];
    let mut ready: Vec<usize> = (0..n).filter(|i| pending[*i] == 0).collect();
    for i in &ready {
        level[*i] = Some(0);
    }
    while let Some(i) = ready.pop() {
        let next = level[i].unwrap_or(0) + 1;
        for &d in &dependents[i] {
            level[d] = Some(level[d].map_or(next, |l| l.max(next)));
            pending[d] -= 1;
            if pending[d] == 0 {
                ready.push(d);
            }
        }
    }
    let last = level.iter().flatten().max().map_or(0, |l| l + 1);
    (0..n).map(|i| if pending[i] == 0 { level[i].unwrap_or(0) } else { last }).collect()
}

/// Processes grouped by level, each group ordered by name.
fn waves(m: &Manifest) -> Vec<Vec<&Process>> {
    let mut by_level: BTreeMap<usize, Vec<&Process>> = BTreeMap::new();
    for (p, l) in m.processes.iter().zip(levels(m)) {
        by_level.entry(l).or_default().push(p);
    }
    by_level
        .into_values()
        .map(|mut w| {
            w.sort_by(|a, b| a.name.cmp(&b.name));
            w
        })
        .collect()
}

/// The startup plan: waves of processes, each wave ordered by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupPlan {
    /// Wave `n` holds the processes whose longest dependency chain has length `n`.
    pub waves: Vec<Vec<Process>>,
}

impl StartupPlan {
    /// Every process name, wave by wave.
    pub fn order(&self) -> Vec<&str> {
        self.waves.iter().flatten().map(|p| p.name.as_str()).collect()
    }
}

/// Plans startup: topological levels, ordered by name within a level. The same manifest
/// yields the same plan whatever the order of its `processes` array.
pub fn plan_startup(m: &Manifest) -> StartupPlan {
    StartupPlan { waves: waves(m).into_iter().map(|w| w.into_iter().cloned().collect()).collect() }
}

/// One phase of a history-safe teardown step, performed in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Run the flush command to completion (only while the process still runs).
    Flush {
        /// The declared `teardown.flushCommand`.
        command: String,
    },
    /// Send the polite signal to the process group.
    Signal {
        /// The declared `teardown.signal`.
        signal: Signal,
    },
    /// Wait up to `ms` for the process group to exit.
    Wait {
        /// The declared `teardown.graceMs`.
        ms: u64,
    },
    /// `SIGKILL` whatever is left of the process group.
    Kill,
}

/// How to stop one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeardownStep {
    /// The process.
    pub name: String,
    /// Flush (if declared), signal, wait, kill, in this order.
    pub phases: Vec<Phase>,
}

/// The teardown plan: the startup waves in reverse order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeardownPlan {
    /// Wave 0 holds the processes nothing else depends on at the deepest level; the last
    /// wave holds the processes with no dependencies. Ordered by name within a wave.
    pub waves: Vec<Vec<TeardownStep>>,
}

impl TeardownPlan {
    /// Every process name, wave by wave.
    pub fn order(&self) -> Vec<&str> {
        self.waves.iter().flatten().map(|s| s.name.as_str()).collect()
    }
}

/// Plans teardown: the startup waves reversed, so every dependent stops before what it
/// depends on. Each step flushes (if declared), signals, waits `graceMs`, then kills.
pub fn plan_teardown(m: &Manifest) -> TeardownPlan {
    let mut w = waves(m);
    w.reverse();
    TeardownPlan {
        waves: w
            .into_iter()
            .map(|wave| {
                wave.into_iter()
                    .map(|p| {
                        let mut phases = Vec::with_capacity(4);
                        if let Some(c) = &p.teardown.flush_command {
                            phases.push(Phase::Flush { command: c.clone() });
                        }
                        phases.push(Phase::Signal { signal: p.teardown.signal });
                        phases.push(Phase::Wait { ms: p.teardown.grace_ms });
                        phases.push(Phase::Kill);
                        TeardownStep { name: p.name.clone(), phases }
                    })
                    .collect()
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The normalized JSON form `validateManifest` documents (defaults filled in, absent
    /// optional blocks left out), as the JS layer builds it from the typed answer.
    fn normalized(m: &Manifest) -> Value {
        let process = |p: &Process| {
            let mut v = json!({"name": p.name, "command": p.command, "dependsOn": p.depends_on});
            if let Some(r) = &p.readiness {
                let mut rj = json!({"timeoutMs": r.timeout_ms, "intervalMs": r.interval_ms});
                match &r.probe {
                    Probe::Command(c) => rj["command"] = json!(c),
                    Probe::Port(p) => rj["port"] = json!(p),
                    Probe::LogLine(l) => rj["logLine"] = json!(l),
                }
                v["readiness"] = rj;
            }
            match p.restart {
                Restart::Never => v["restart"] = json!("never"),
                Restart::OnFailure { max_restarts } => {
                    v["restart"] = json!("on-failure");
                    v["maxRestarts"] = json!(max_restarts);
                }
            }
            let mut t = json!({"signal": p.teardown.signal.name(), "graceMs": p.teardown.grace_ms});
            if let Some(f) = &p.teardown.flush_command {
                t["flushCommand"] = json!(f);
            }
            v["teardown"] = t;
            v
        };
        let mut v = json!({"processes": m.processes.iter().map(process).collect::<Vec<_>>()});
        if let Some(idle) = &m.idle {
            v["idle"] = json!({
                "quietMs": idle.quiet_ms,
                "evidence": idle.evidence.iter().map(|e| e.name()).collect::<Vec<_>>(),
            });
        }
        v
    }

    fn base() -> Value {
        json!({
            "processes": [
                {"name": "db", "command": "run-db", "readiness": {"port": 5432, "timeoutMs": 5000, "intervalMs": 100}},
                {"name": "api", "command": "run-api", "dependsOn": ["db"],
                 "readiness": {"logLine": "listening", "timeoutMs": 5000, "intervalMs": 100}},
                {"name": "web", "command": "run-web", "dependsOn": ["api"],
                 "readiness": {"command": "test -f ready", "timeoutMs": 5000, "intervalMs": 100}}
            ],
            "idle": {"quietMs": 60000, "evidence": ["no-running-command", "no-file-change"]}
        })
    }

    fn err(v: &Value) -> (String, String) {
        match parse_manifest(v) {
            Err(CoreError::InvalidInput { field, expectation }) => (field, expectation),
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    fn field_of(v: &Value) -> String {
        err(v).0
    }

    fn with(mut v: Value, path: &[&str], x: Value) -> Value {
        let mut cur = &mut v;
        for (n, k) in path.iter().enumerate() {
            let last = n + 1 == path.len();
            cur = match k.parse::<usize>() {
                Ok(i) => &mut cur[i],
                Err(_) if last => {
                    cur[*k] = x;
                    return v;
                }
                Err(_) => &mut cur[*k],
            };
        }
        *cur = x;
        v
    }

    fn without(mut v: Value, path: &[&str], key: &str) -> Value {
        let mut cur = &mut v;
        for k in path {
            cur = match k.parse::<usize>() {
                Ok(i) => &mut cur[i],
                Err(_) => &mut cur[*k],
            };
        }
        cur.as_object_mut().unwrap().remove(key);
        v
    }

    #[test]
    fn base_manifest_is_valid_must_not_fire() {
        let m = parse_manifest(&base()).unwrap();
        assert_eq!(m.processes.len(), 3);
        assert_eq!(m.processes[1].depends_on, vec!["db"]);
        assert_eq!(m.idle.as_ref().unwrap().evidence, vec![Evidence::NoRunningCommand, Evidence::NoFileChange]);
    }

    #[test]
    fn unknown_keys_must_fire_at_every_level() {
        assert_eq!(field_of(&with(base(), &["extra"], json!(1))), "extra");
        assert_eq!(field_of(&with(base(), &["processes", "1", "dependson"], json!([]))), "processes[1].dependson");
        let (f, e) = err(&with(base(), &["processes", "0", "readiness", "timeoutMS"], json!(1)));
        assert_eq!(f, "processes[0].readiness.timeoutMS");
        assert!(e.contains("did you mean timeoutMs"), "{e}");
        assert_eq!(
            field_of(&with(base(), &["processes", "0", "teardown"], json!({"graceMs": 1, "sig": "SIGTERM"}))),
            "processes[0].teardown.sig"
        );
        assert_eq!(field_of(&with(base(), &["idle", "quiet"], json!(1))), "idle.quiet");
    }

    #[test]
    fn processes_must_be_a_non_empty_array_must_fire() {
        assert_eq!(field_of(&json!({})), "processes");
        assert_eq!(field_of(&json!({"processes": []})), "processes");
        assert_eq!(field_of(&json!({"processes": {}})), "processes");
        assert_eq!(field_of(&json!([])), "(root)");
        let many: Vec<Value> = (0..=MAX_PROCESSES).map(|i| json!({"name": format!("p{i}"), "command": "x"})).collect();
        assert_eq!(field_of(&json!({ "processes": many })), "processes");
    }

    #[test]
    fn process_count_at_the_bound_must_not_fire() {
        let many: Vec<Value> = (0..MAX_PROCESSES).map(|i| json!({"name": format!("p{i}"), "command": "x"})).collect();
        assert!(parse_manifest(&json!({ "processes": many })).is_ok());
    }

    #[test]
    fn name_charset_and_length_must_fire() {
        for bad in ["", "Api", "-api", "_api", "a.b", "a b", "ä"] {
            assert_eq!(
                field_of(&with(base(), &["processes", "0", "name"], json!(bad))),
                "processes[0].name",
                "{bad:?}"
            );
        }
        let long = "a".repeat(MAX_NAME_BYTES + 1);
        assert_eq!(field_of(&with(base(), &["processes", "0", "name"], json!(long))), "processes[0].name");
        assert_eq!(field_of(&with(base(), &["processes", "0", "name"], json!(7))), "processes[0].name");
        assert_eq!(field_of(&without(base(), &["processes", "0"], "name")), "processes[0].name");
    }

    #[test]
    fn name_charset_and_length_must_not_fire() {
        for good in ["0", "a", "a-b_c9", "9lives"] {
            let v = json!({"processes": [{"name": good, "command": "x"}]});
            assert!(parse_manifest(&v).is_ok(), "{good}");
        }
        let v = json!({"processes": [{"name": "a".repeat(MAX_NAME_BYTES), "command": "x"}]});
        assert!(parse_manifest(&v).is_ok());
    }

    #[test]
    fn duplicate_names_must_fire() {
        let v = json!({"processes": [{"name": "a", "command": "x"}, {"name": "b", "command": "x"}, {"name": "a", "command": "y"}]});
        let (f, e) = err(&v);
        assert_eq!(f, "processes[2].name");
        assert!(e.contains("processes[0]"), "{e}");
    }

    #[test]
    fn distinct_names_must_not_fire() {
        let v = json!({"processes": [{"name": "a", "command": "x"}, {"name": "a-1", "command": "x"}]});
        assert!(parse_manifest(&v).is_ok());
    }

    #[test]
    fn empty_or_blank_commands_must_fire() {
        for bad in [json!(""), json!("   "), json!(null), json!(["ls"]), json!("a\0b")] {
            assert_eq!(
                field_of(&with(base(), &["processes", "1", "command"], bad.clone())),
                "processes[1].command",
                "{bad}"
            );
        }
        assert_eq!(field_of(&without(base(), &["processes", "1"], "command")), "processes[1].command");
        assert_eq!(
            field_of(&with(base(), &["processes", "2", "readiness", "command"], json!(" "))),
            "processes[2].readiness.command"
        );
        assert_eq!(
            field_of(&with(base(), &["processes", "0", "teardown"], json!({"flushCommand": "", "graceMs": 0}))),
            "processes[0].teardown.flushCommand"
        );
        let huge = "x".repeat(MAX_COMMAND_BYTES + 1);
        assert_eq!(field_of(&with(base(), &["processes", "1", "command"], json!(huge))), "processes[1].command");
    }

    #[test]
    fn non_blank_commands_must_not_fire() {
        let v = with(base(), &["processes", "1", "command"], json!(" sleep 1 # with 'quotes' and \"more\" "));
        let v = with(v, &["processes", "0", "teardown"], json!({"flushCommand": "sync", "graceMs": 0}));
        assert!(parse_manifest(&v).is_ok());
    }

    #[test]
    fn unknown_dependency_must_fire() {
        let v = with(base(), &["processes", "2", "dependsOn"], json!(["api", "cache"]));
        let (f, e) = err(&v);
        assert_eq!(f, "processes[2].dependsOn[1]");
        assert!(!e.contains("cache"), "values are never echoed: {e}");
    }

    #[test]
    fn known_dependency_must_not_fire() {
        let v = with(base(), &["processes", "2", "dependsOn"], json!(["api", "db"]));
        assert!(parse_manifest(&v).is_ok());
    }

    #[test]
    fn self_dependency_must_fire() {
        let v = with(base(), &["processes", "1", "dependsOn"], json!(["db", "api"]));
        let (f, e) = err(&v);
        assert_eq!(f, "processes[1].dependsOn[1]");
        assert!(e.contains("itself"), "{e}");
    }

    #[test]
    fn malformed_or_repeated_dependencies_must_fire() {
        assert_eq!(field_of(&with(base(), &["processes", "1", "dependsOn"], json!("db"))), "processes[1].dependsOn");
        assert_eq!(field_of(&with(base(), &["processes", "1", "dependsOn"], json!([""]))), "processes[1].dependsOn[0]");
        assert_eq!(
            field_of(&with(base(), &["processes", "1", "dependsOn"], json!([null]))),
            "processes[1].dependsOn[0]"
        );
        assert_eq!(
            field_of(&with(base(), &["processes", "2", "dependsOn"], json!(["db", "db"]))),
            "processes[2].dependsOn[1]"
        );
    }

    #[test]
    fn cycle_must_fire_and_name_the_cycle() {
        let v = json!({"processes": [
            {"name": "a", "command": "x", "dependsOn": ["b"]},
            {"name": "b", "command": "x", "dependsOn": ["a"]}
        ]});
        let (f, e) = err(&v);
        assert_eq!(f, "processes[0].dependsOn[0]");
        assert!(e.contains("cycle a → b → a"), "{e}");
        let msg = parse_manifest(&v).unwrap_err().to_string();
        assert!(msg.contains("cycle a → b → a"), "{msg}");
    }

    #[test]
    fn cycle_report_is_canonical_whatever_the_input_order() {
        let v = json!({"processes": [
            {"name": "root", "command": "x"},
            {"name": "z", "command": "x", "dependsOn": ["m", "root"]},
            {"name": "m", "command": "x", "dependsOn": ["k"]},
            {"name": "k", "command": "x", "dependsOn": ["z"]}
        ]});
        let (f, e) = err(&v);
        assert!(e.ends_with("cycle k → z → m → k"), "{e}");
        assert_eq!(f, "processes[3].dependsOn[0]");
        let mut items = v["processes"].as_array().unwrap().clone();
        items.reverse();
        let (f2, e2) = err(&json!({ "processes": items }));
        assert_eq!(e, e2);
        assert_eq!(f2, "processes[0].dependsOn[0]");
    }

    #[test]
    fn diamond_is_not_a_cycle_must_not_fire() {
        let v = json!({"processes": [
            {"name": "top", "command": "x", "dependsOn": ["l", "r"]},
            {"name": "l", "command": "x", "dependsOn": ["base"]},
            {"name": "r", "command": "x", "dependsOn": ["base"]},
            {"name": "base", "command": "x"}
        ]});
        assert!(parse_manifest(&v).is_ok());
    }

    #[test]
    fn readiness_needs_exactly_one_probe_must_fire() {
        let none = json!({"timeoutMs": 100, "intervalMs": 10});
        assert_eq!(field_of(&with(base(), &["processes", "0", "readiness"], none)), "processes[0].readiness");
        let two = json!({"port": 1, "logLine": "x", "timeoutMs": 100, "intervalMs": 10});
        assert_eq!(field_of(&with(base(), &["processes", "0", "readiness"], two)), "processes[0].readiness");
    }

    #[test]
    fn readiness_with_one_probe_must_not_fire() {
        for probe in [json!({"port": 1}), json!({"logLine": "up"}), json!({"command": "true"})] {
            let mut r = probe.clone();
            r["timeoutMs"] = json!(100);
            r["intervalMs"] = json!(10);
            assert!(parse_manifest(&with(base(), &["processes", "0", "readiness"], r)).is_ok(), "{probe}");
        }
    }

    #[test]
    fn readiness_bounds_must_fire() {
        let r = |t: Value, i: Value| {
            with(base(), &["processes", "0", "readiness"], json!({"port": 80, "timeoutMs": t, "intervalMs": i}))
        };
        assert_eq!(field_of(&r(json!(9), json!(10))), "processes[0].readiness.timeoutMs");
        assert_eq!(field_of(&r(json!(600_001), json!(10))), "processes[0].readiness.timeoutMs");
        assert_eq!(field_of(&r(json!(1.5), json!(10))), "processes[0].readiness.timeoutMs");
        assert_eq!(field_of(&r(json!(null), json!(10))), "processes[0].readiness.timeoutMs");
        assert_eq!(field_of(&r(json!(100), json!(9))), "processes[0].readiness.intervalMs");
        assert_eq!(field_of(&r(json!(100), json!(101))), "processes[0].readiness.intervalMs");
        let no_timeout = without(base(), &["processes", "0", "readiness"], "timeoutMs");
        assert_eq!(field_of(&no_timeout), "processes[0].readiness.timeoutMs");
        let no_interval = without(base(), &["processes", "0", "readiness"], "intervalMs");
        assert_eq!(field_of(&no_interval), "processes[0].readiness.intervalMs");
        for port in [json!(0), json!(65_536), json!("80")] {
            let v = with(base(), &["processes", "0", "readiness", "port"], port);
            assert_eq!(field_of(&v), "processes[0].readiness.port");
        }
        for line in [json!("a\nb"), json!("a\r"), json!(""), json!("x".repeat(MAX_LOG_LINE_BYTES + 1))] {
            let v = with(base(), &["processes", "1", "readiness", "logLine"], line);
            assert_eq!(field_of(&v), "processes[1].readiness.logLine");
        }
    }

    #[test]
    fn readiness_bounds_must_not_fire() {
        let r = |t: i64, i: i64| {
            with(base(), &["processes", "0", "readiness"], json!({"port": 65_535, "timeoutMs": t, "intervalMs": i}))
        };
        assert!(parse_manifest(&r(10, 10)).is_ok());
        assert!(parse_manifest(&r(600_000, 600_000)).is_ok());
        assert!(parse_manifest(&r(600_000, 10)).is_ok());
    }

    #[test]
    fn shared_port_must_fire() {
        let v =
            with(base(), &["processes", "2", "readiness"], json!({"port": 5432, "timeoutMs": 100, "intervalMs": 10}));
        let (f, e) = err(&v);
        assert_eq!(f, "processes[2].readiness.port");
        assert!(e.contains("processes[0].readiness.port"), "{e}");
    }

    #[test]
    fn distinct_ports_must_not_fire() {
        let v =
            with(base(), &["processes", "2", "readiness"], json!({"port": 5433, "timeoutMs": 100, "intervalMs": 10}));
        assert!(parse_manifest(&v).is_ok());
    }

    #[test]
    fn restart_policy_must_fire() {
        assert_eq!(field_of(&with(base(), &["processes", "0", "restart"], json!("always"))), "processes[0].restart");
        assert_eq!(field_of(&with(base(), &["processes", "0", "maxRestarts"], json!(2))), "processes[0].maxRestarts");
        let v = with(base(), &["processes", "0", "restart"], json!("never"));
        assert_eq!(field_of(&with(v, &["processes", "0", "maxRestarts"], json!(0))), "processes[0].maxRestarts");
        let v = with(base(), &["processes", "0", "restart"], json!("on-failure"));
        assert_eq!(
            field_of(&with(v.clone(), &["processes", "0", "maxRestarts"], json!(11))),
            "processes[0].maxRestarts"
        );
        assert_eq!(field_of(&with(v, &["processes", "0", "maxRestarts"], json!(-1))), "processes[0].maxRestarts");
    }

    #[test]
    fn restart_policy_must_not_fire() {
        let v = with(base(), &["processes", "0", "restart"], json!("on-failure"));
        assert_eq!(
            parse_manifest(&v).unwrap().processes[0].restart,
            Restart::OnFailure { max_restarts: DEFAULT_MAX_RESTARTS }
        );
        for n in [0, 10] {
            let v = with(v.clone(), &["processes", "0", "maxRestarts"], json!(n));
            assert_eq!(parse_manifest(&v).unwrap().processes[0].restart, Restart::OnFailure { max_restarts: n });
        }
        let v = with(base(), &["processes", "0", "restart"], json!("never"));
        assert_eq!(parse_manifest(&v).unwrap().processes[0].restart, Restart::Never);
    }

    #[test]
    fn teardown_bounds_must_fire() {
        let t = |x: Value| with(base(), &["processes", "0", "teardown"], x);
        assert_eq!(field_of(&t(json!({"graceMs": -1}))), "processes[0].teardown.graceMs");
        assert_eq!(field_of(&t(json!({"graceMs": 300_001}))), "processes[0].teardown.graceMs");
        assert_eq!(field_of(&t(json!({"signal": "SIGTERM"}))), "processes[0].teardown.graceMs");
        assert_eq!(field_of(&t(json!({"signal": "SIGKILL", "graceMs": 1}))), "processes[0].teardown.signal");
        assert_eq!(field_of(&t(json!({"signal": "TERM", "graceMs": 1}))), "processes[0].teardown.signal");
    }

    #[test]
    fn teardown_bounds_must_not_fire() {
        for (s, g) in [("SIGTERM", 0), ("SIGINT", 1), ("SIGHUP", 300_000), ("SIGQUIT", 5)] {
            let v = with(base(), &["processes", "0", "teardown"], json!({"signal": s, "graceMs": g}));
            let m = parse_manifest(&v).unwrap();
            assert_eq!(m.processes[0].teardown.signal.name(), s);
            assert_eq!(m.processes[0].teardown.grace_ms, g);
        }
        let m = parse_manifest(&base()).unwrap();
        assert_eq!(
            m.processes[0].teardown,
            Teardown { flush_command: None, signal: Signal::Term, grace_ms: DEFAULT_GRACE_MS }
        );
    }

    #[test]
    fn idle_bounds_must_fire() {
        let i = |x: Value| with(base(), &["idle"], x);
        assert_eq!(field_of(&i(json!({"quietMs": 999, "evidence": ["no-file-change"]}))), "idle.quietMs");
        assert_eq!(field_of(&i(json!({"quietMs": 86_400_001, "evidence": ["no-file-change"]}))), "idle.quietMs");
        assert_eq!(field_of(&i(json!({"evidence": ["no-file-change"]}))), "idle.quietMs");
        assert_eq!(field_of(&i(json!({"quietMs": 1000}))), "idle.evidence");
        assert_eq!(field_of(&i(json!({"quietMs": 1000, "evidence": []}))), "idle.evidence");
        assert_eq!(field_of(&i(json!({"quietMs": 1000, "evidence": ["no-cpu"]}))), "idle.evidence[0]");
        assert_eq!(
            field_of(&i(json!({"quietMs": 1000, "evidence": ["no-file-change", "no-file-change"]}))),
            "idle.evidence[1]"
        );
        assert_eq!(field_of(&i(json!(null))), "idle");
    }

    #[test]
    fn idle_bounds_must_not_fire() {
        let all = json!(["no-running-command", "no-open-session", "no-file-change", "no-process-output"]);
        for q in [1000, 86_400_000] {
            let v = with(base(), &["idle"], json!({"quietMs": q, "evidence": all}));
            let m = parse_manifest(&v).unwrap();
            assert_eq!(m.idle.unwrap().evidence.len(), 4);
        }
        assert!(parse_manifest(&without(base(), &[], "idle")).unwrap().idle.is_none());
    }

    #[test]
    fn normalized_manifest_is_a_fixed_point() {
        let v = with(base(), &["processes", "0", "restart"], json!("on-failure"));
        let m = parse_manifest(&v).unwrap();
        let n = normalized(&m);
        assert_eq!(n["processes"][0]["maxRestarts"], json!(DEFAULT_MAX_RESTARTS));
        assert_eq!(n["processes"][1]["teardown"], json!({"signal": "SIGTERM", "graceMs": DEFAULT_GRACE_MS}));
        assert_eq!(n["processes"][0]["dependsOn"], json!([]));
        assert!(n["processes"][1].get("maxRestarts").is_none());
        assert_eq!(parse_manifest(&n).unwrap(), m);
    }

    #[test]
    fn invalid_json_text_must_fire() {
        assert!(
            matches!(parse_manifest_str("{"), Err(CoreError::InvalidInput { ref field, .. }) if field == "manifest")
        );
        assert!(parse_manifest_str(&base().to_string()).is_ok());
    }

    #[test]
    fn startup_waves_are_levels_sorted_by_name() {
        let v = json!({"processes": [
            {"name": "web", "command": "x", "dependsOn": ["api", "assets"]},
            {"name": "assets", "command": "x"},
            {"name": "api", "command": "x", "dependsOn": ["db", "cache"]},
            {"name": "db", "command": "x"},
            {"name": "cache", "command": "x"},
            {"name": "worker", "command": "x", "dependsOn": ["db"]}
        ]});
        let m = parse_manifest(&v).unwrap();
        let plan = plan_startup(&m);
        let names: Vec<Vec<&str>> = plan.waves.iter().map(|w| w.iter().map(|p| p.name.as_str()).collect()).collect();
        assert_eq!(names, vec![vec!["assets", "cache", "db"], vec!["api", "worker"], vec!["web"]]);
        let t = plan_teardown(&m);
        assert_eq!(t.order(), vec!["web", "api", "worker", "assets", "cache", "db"]);
        // Identical output for identical input, and for a permuted input.
        assert_eq!(plan_startup(&m), plan);
        let mut items = v["processes"].as_array().unwrap().clone();
        items.rotate_left(2);
        items.swap(0, 3);
        let m2 = parse_manifest(&json!({ "processes": items })).unwrap();
        assert_eq!(plan_startup(&m2), plan);
        assert_eq!(plan_teardown(&m2), t);
    }

    #[test]
    fn teardown_step_is_flush_signal_wait_kill() {
        let v = json!({"processes": [
            {"name": "db", "command": "x", "teardown": {"flushCommand": "save", "signal": "SIGINT", "graceMs": 250}},
            {"name": "api", "command": "x", "dependsOn": ["db"]}
        ]});
        let t = plan_teardown(&parse_manifest(&v).unwrap());
        assert_eq!(t.order(), vec!["api", "db"]);
        let db = &t.waves[1][0];
        assert_eq!(
            db.phases,
            vec![
                Phase::Flush { command: "save".into() },
                Phase::Signal { signal: Signal::Int },
                Phase::Wait { ms: 250 },
                Phase::Kill
            ]
        );
        let api = &t.waves[0][0];
        assert_eq!(
            api.phases,
            vec![Phase::Signal { signal: Signal::Term }, Phase::Wait { ms: DEFAULT_GRACE_MS }, Phase::Kill]
        );
    }

    #[test]
    fn long_chain_plans_without_deep_recursion() {
        let n = MAX_PROCESSES;
        let items: Vec<Value> = (0..n)
            .map(|i| {
                let deps = if i == 0 { json!([]) } else { json!([format!("p{}", i - 1)]) };
                json!({"name": format!("p{i}"), "command": "x", "dependsOn": deps})
            })
            .rev()
            .collect();
        let m = parse_manifest(&json!({ "processes": items })).unwrap();
        assert_eq!(plan_startup(&m).waves.len(), n);
        assert_eq!(plan_teardown(&m).order()[0], format!("p{}", n - 1));
    }
}
