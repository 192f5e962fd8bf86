//! The POSIX `sh` scripts a manifest runs through `runScript`, and the reading of what
//! they print.
//!
//! Why scripts? A manifest must work on every provider without a change to the runtime
//! port: no agent in the sandbox, no provider-specific process API. So every action is one
//! script (the core writes it; `lib/manifest.js` sends it and hands back the answer), and
//! every observation is a `@@tag rest` line on its stdout (a command's own output never
//! reaches the router: it goes to a log file in the sandbox). Reading is syntax only: a
//! line becomes numbers and words, or nothing when it is malformed; what a report *means*
//! is `execution`'s and `idle`'s.
//!
//! Layout inside the sandbox (relative to the working directory of `runScript`):
//!
//! ```text
//! .relay/<name>.log       the process's stdout+stderr (the previous run's in .log.prev)
//! .relay/<name>.pid       "<pid> <pgid>" while the process is managed
//! .relay/<name>.exit      the process's exit status, once it has exited
//! .relay/<name>.flush.log output of the teardown flush command
//! .relay/idle-<token>.*   bookkeeping of one idle observer
//! ```
//!
//! Each process runs in the process group of the `runScript` that started it (the local
//! runtime makes every runScript its own group leader and kills those groups on destroy),
//! so a teardown signals the whole group: the command and everything it spawned. Process
//! names are validated (`[a-z0-9][a-z0-9_-]*`): safe in a path and a shell word; every other
//! caller text is single-quoted ([`quoted`]).

use super::execution::{FlushReport, PollReport, ProbeReport, ProcessStatus, StartReport};
use super::idle::{FilesSeen, IdleProbe, PidFileSeen, ProcSeen};
use super::{Evidence, Probe, Process, Signal};
use std::collections::HashMap;

/// Directory, relative to the sandbox's working directory, that holds logs and bookkeeping.
pub const STATE_DIR: &str = ".relay";

/// POSIX single-quoting: the only safe way to put arbitrary text into a shell word.
pub fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// A shell function: true while process group $1 has a member that is not a zombie.
const SH_GROUP_RUNNING: &str = r#"
running() {
  kill -s 0 -- "-$1" 2>/dev/null || return 1
  [ -r /proc/self/stat ] || return 0
  for d in /proc/[0-9]*; do
    { read -r l < "$d/stat"; } 2>/dev/null || continue
    r=${l##*) }
    set -- "$1" $r
    [ "$4" = "$1" ] && [ "$2" != Z ] && return 0
  done
  return 1
}"#;

/// A shell function: true while pid $1 exists and is not a zombie.
const SH_PID_ALIVE: &str = r#"
alive() {
  kill -s 0 "$1" 2>/dev/null || return 1
  if { read -r l < "/proc/$1/stat"; } 2>/dev/null; then r=${l##*) }; [ "${r%% *}" != Z ]; fi
}"#;

/// Connects to `argv[1]:argv[2]` and exits 0, or 1 on an error or after 2 s.
const NODE_CONNECT: &str = "const s=require('net').connect({host:process.argv[1],port:+process.argv[2]});\
s.on('connect',()=>process.exit(0));s.on('error',()=>process.exit(1));setTimeout(()=>process.exit(1),2000)";
/// Connects to `argv[1]:argv[2]` within 2 s.
const PY_CONNECT: &str = "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close()";

/// How long the stop script waits for a killed group to be gone: 250 rounds of 20 ms.
const KILL_WAIT_ROUNDS: u32 = 250;

// ---------------------------------------------------------------------------------------
// Scripts

/// Starts `p` in the background (first killing the group of its previous run, on a
/// restart); prints `@@started <pid> <shell pid> <pgid>`.
pub fn start_script(p: &Process, previous_pgid: Option<u32>) -> String {
    let (d, n) = (STATE_DIR, &p.name);
    [
        previous_pgid.filter(|g| *g > 0).map_or(":".to_string(), |g| format!("kill -s KILL -- -{g} 2>/dev/null")),
        format!("mkdir -p {d} || exit 90"),
        format!("L={d}/{n}.log"),
        r#"if [ -e "$L" ]; then mv -f "$L" "$L.prev" || exit 90; fi"#.to_string(),
        r#": > "$L" || exit 90"#.to_string(),
        format!("rm -f {d}/{n}.exit {d}/{n}.exit.tmp {d}/{n}.pid || exit 90"),
        // Background jobs of a non-interactive shell ignore SIGINT/SIGQUIT (POSIX), and a
        // shell cannot un-ignore them; GNU env can, so a SIGINT teardown reaches shell
        // scripts too.
        "if env --default-signal=INT,QUIT true >/dev/null 2>&1; then E='env --default-signal=INT,QUIT'; else E=; fi"
            .to_string(),
        format!(
            r#"{{ $E sh -c {}; echo $? > {d}/{n}.exit.tmp && mv -f {d}/{n}.exit.tmp {d}/{n}.exit; }} >>"$L" 2>&1 </dev/null &"#,
            quoted(&p.command)
        ),
        "pid=$!".to_string(),
        "pg=".to_string(),
        r#"if { read -r l < "/proc/$pid/stat"; } 2>/dev/null; then r=${l##*) }; set -- $r; pg=$3; fi"#.to_string(),
        r#"[ -n "$pg" ] || pg=$(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ')"#.to_string(),
        format!(r#"echo "$pid $pg" > {d}/{n}.pid"#),
        r#"echo "@@started $pid $$ $pg""#.to_string(),
    ]
    .join("\n")
}

/// The readiness probe of `p` (empty without one); prints `@@probe <status>` or
/// `@@probe unavailable`.
fn probe_script(p: &Process) -> String {
    let Some(r) = &p.readiness else { return String::new() };
    match &r.probe {
        Probe::Command(command) => {
            format!(r#"sh -c {} >/dev/null 2>&1 </dev/null; echo "@@probe $?""#, quoted(command))
        }
        Probe::LogLine(line) => {
            format!(r#"grep -F -q -e {} {STATE_DIR}/{}.log 2>/dev/null; echo "@@probe $?""#, quoted(line), p.name)
        }
        // The first TCP client found, on IPv4 then IPv6 loopback.
        Probe::Port(port) => [
            "if command -v bash >/dev/null 2>&1; then t=bash".to_string(),
            "elif command -v nc >/dev/null 2>&1; then t=nc".to_string(),
            "elif command -v node >/dev/null 2>&1; then t=node".to_string(),
            "elif command -v python3 >/dev/null 2>&1; then t=python3".to_string(),
            r#"else echo "@@probe unavailable"; exit 0; fi"#.to_string(),
            "rc=1".to_string(),
            "for h in 127.0.0.1 ::1; do".to_string(),
            "  case $t in".to_string(),
            format!(r#"    bash) bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$h" {port} ;;"#),
            format!(r#"    nc) nc -z -w 2 "$h" {port} ;;"#),
            format!(r#"    node) node -e {} "$h" {port} ;;"#, quoted(NODE_CONNECT)),
            format!(r#"    python3) python3 -c {} "$h" {port} ;;"#, quoted(PY_CONNECT)),
            "  esac >/dev/null 2>&1 </dev/null && { rc=0; break; }".to_string(),
            "done".to_string(),
            r#"echo "@@probe $rc""#.to_string(),
        ]
        .join("\n"),
    }
}

/// Prints `@@status <name> exited <status>`, `running` or `gone`.
fn status_lines(name: &str, pid: u32) -> String {
    let d = STATE_DIR;
    [
        format!(r#"if [ -f {d}/{name}.exit ]; then echo "@@status {name} exited $(cat {d}/{name}.exit 2>/dev/null)""#),
        format!(r#"elif alive {pid}; then echo "@@status {name} running""#),
        format!(r#"else echo "@@status {name} gone"; fi"#),
    ]
    .join("\n")
}

/// One readiness poll of `p` (supervised by `pid`): its status line, then (while it runs)
/// its probe.
pub fn poll_script(p: &Process, pid: u32) -> String {
    [
        SH_PID_ALIVE.to_string(),
        status_lines(&p.name, pid),
        format!("[ -f {STATE_DIR}/{}.exit ] && exit 0", p.name),
        format!("alive {pid} || exit 0"),
        probe_script(p),
    ]
    .join("\n")
}

/// The status line of every `(name, pid)`, in order (the final check of a start).
pub fn status_script(entries: &[(&str, u32)]) -> String {
    let mut lines = vec![SH_PID_ALIVE.to_string()];
    lines.extend(entries.iter().map(|(name, pid)| status_lines(name, *pid)));
    lines.join("\n")
}

/// Signals group `pgid` of process `name`, waits up to `grace_ms` for it to exit, then
/// SIGKILLs what is left; prints `@@stop <word>`, then forgets the process's pid file.
pub fn stop_script(name: &str, pgid: u32, signal: Signal, grace_ms: u64) -> String {
    let sig = signal.name().trim_start_matches("SIG");
    let (ticks, rounds) = (grace_ms.div_ceil(10), grace_ms.div_ceil(20));
    [
        SH_GROUP_RUNNING.to_string(),
        "tick() { T=; if { read -r u _ < /proc/uptime; } 2>/dev/null; then s=${u%.*}; f=${u#*.}; case $f in [0-9][0-9]) T=$((s * 100 + 1$f - 100));; esac; fi; }".to_string(),
        format!(r#"if ! running {pgid}; then echo "@@stop already-exited"; exit 0; fi"#),
        format!("kill -s {sig} -- -{pgid} 2>/dev/null"),
        "tick; start=$T; n=0".to_string(),
        format!("while running {pgid}; do"),
        format!(r#"  if [ -n "$start" ]; then tick; [ -n "$T" ] && [ $((T - start)) -ge {ticks} ] && break"#),
        format!("  else [ $n -ge {rounds} ] && break; n=$((n + 1)); fi"),
        "  sleep 0.02 2>/dev/null || sleep 1".to_string(),
        "done".to_string(),
        format!("if running {pgid}; then"),
        format!("  kill -s KILL -- -{pgid} 2>/dev/null; i=0"),
        format!(
            "  while running {pgid} && [ $i -lt {KILL_WAIT_ROUNDS} ]; do sleep 0.02 2>/dev/null || sleep 1; i=$((i + 1)); done"
        ),
        format!(r#"  if running {pgid}; then echo "@@stop survived"; else echo "@@stop killed"; fi"#),
        r#"else echo "@@stop exited"; fi"#.to_string(),
        format!("rm -f {STATE_DIR}/{name}.pid"),
    ]
    .join("\n")
}

/// Runs the flush `command` of `name` to completion, only while its group still runs;
/// prints `@@flush <status>` or `@@flush skipped`.
pub fn flush_script(name: &str, pgid: u32, command: &str) -> String {
    [
        SH_GROUP_RUNNING.to_string(),
        format!(r#"if ! running {pgid}; then echo "@@flush skipped"; exit 0; fi"#),
        format!("sh -c {} >>{STATE_DIR}/{name}.flush.log 2>&1 </dev/null", quoted(command)),
        r#"echo "@@flush $?""#.to_string(),
    ]
    .join("\n")
}

/// The idle probe of one observer (`token`): its own pid, the manifest's pid files and the
/// sandbox's processes (for the process-based sources), the file-change mark, the log sizes
/// of the processes `names`.
pub fn idle_script(token: &str, names: &[&str], evidence: &[Evidence]) -> String {
    let d = STATE_DIR;
    let m = format!("{d}/idle-{token}");
    let mut lines = vec![
        format!("mkdir -p {d} || exit 90"),
        r#"echo "@@self $$""#.to_string(),
        "P=$(pwd -P 2>/dev/null) || P=".to_string(),
    ];
    if evidence.contains(&Evidence::NoRunningCommand) || evidence.contains(&Evidence::NoOpenSession) {
        lines.extend([
            format!(
                r#"for f in {d}/*.pid; do [ -f "$f" ] || continue; {{ read -r a b < "$f"; }} 2>/dev/null || continue; n=${{f#{d}/}}; echo "@@pidfile ${{n%.pid}} $a $b"; done"#
            ),
            r#"if [ -r /proc/self/stat ] && [ -n "$P" ]; then"#.to_string(),
            format!(r#"  find /proc/[0-9]*/cwd -maxdepth 0 \( -lname "$P" -o -lname "$P/*" \) -print 2>/dev/null > {m}.procs"#),
            format!(
                r#"  while read -r c; do p=${{c%/cwd}}; {{ read -r l < "$p/stat"; }} 2>/dev/null || continue; r=${{l##*) }}; set -- $r; echo "@@proc ${{p#/proc/}} $1 $3 $5"; done < {m}.procs"#
            ),
            "fi".to_string(),
        ]);
    }
    if evidence.contains(&Evidence::NoFileChange) {
        // Marks are floored to the second (POSIX touch -t), in UTC: a change is reported at
        // least once, possibly twice (conservative), never missed at a timestamp tie.
        lines.extend([
            format!(r#"if T=$(TZ=UTC0 date +%Y%m%d%H%M.%S) && TZ=UTC0 touch -t "$T" {m}.new; then"#),
            format!("  if [ -f {m}.mark ]; then"),
            format!(
                r#"    if find . -path ./{d} -prune -o -newer {m}.mark -print > {m}.list 2>/dev/null; then echo "@@files $(wc -l < {m}.list)"; else echo "@@files error"; fi"#
            ),
            r#"  else echo "@@files first"; fi"#.to_string(),
            format!(r#"  mv -f {m}.new {m}.mark || echo "@@files error""#),
            r#"else echo "@@files error"; fi"#.to_string(),
        ]);
    }
    if evidence.contains(&Evidence::NoProcessOutput) {
        for n in names {
            lines.push(format!(
                r#"if [ -f {d}/{n}.log ]; then echo "@@out {n} $(wc -c < {d}/{n}.log)"; else echo "@@out {n} missing"; fi"#
            ));
        }
    }
    lines.push(r#"echo "@@end""#.to_string());
    lines.join("\n")
}

// ---------------------------------------------------------------------------------------
// Answers: tagged lines → reports (numbers, words, nothing when malformed)

/// What a script's `runScript` resolved with, as JavaScript read it (None where it was
/// not of the port's type). A call that rejected has no answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// The result was a value (not null or undefined).
    pub answered: bool,
    /// Its `stdout`, when it was a string.
    pub stdout: Option<String>,
    /// Its `output`, when it was a string (the adapters' name for it).
    pub output: Option<String>,
    /// Its `exitCode`, when it was a number.
    pub exit_code: Option<f64>,
    /// Its `timedOut` was truthy.
    pub timed_out: bool,
}

/// Largest integer a JavaScript number holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

impl Answer {
    fn text(&self) -> &str {
        self.stdout.as_deref().or(self.output.as_deref()).unwrap_or("")
    }

    /// The script's exit status, when it is an integer.
    fn exit_code(&self) -> Option<i64> {
        self.exit_code.filter(|c| c.fract() == 0.0 && c.abs() <= MAX_SAFE_INTEGER).map(|c| c as i64)
    }
}

/// The `@@tag rest` lines of a script's output, by tag, each rest trimmed.
struct Tagged<'a>(HashMap<&'a str, Vec<&'a str>>);

impl<'a> Tagged<'a> {
    fn of(answer: &'a Answer) -> Tagged<'a> {
        let mut out: HashMap<&str, Vec<&str>> = HashMap::new();
        for line in answer.text().split('\n') {
            let Some(line) = line.strip_prefix("@@") else { continue };
            let (tag, rest) = line.split_once(' ').map_or((line, ""), |(t, r)| (t, r.trim()));
            out.entry(tag).or_default().push(rest);
        }
        Tagged(out)
    }

    /// The one line of `tag`; None when there is none or more than one.
    fn one(&self, tag: &str) -> Option<&'a str> {
        match self.0.get(tag).map(Vec::as_slice) {
            Some([line]) => Some(line),
            _ => None,
        }
    }

    fn all(&self, tag: &str) -> &[&'a str] {
        self.0.get(tag).map_or(&[], Vec::as_slice)
    }
}

/// A run of 1 to 15 decimal digits (so it is exact) as a number.
fn digits(text: Option<&str>) -> Option<i64> {
    let t = text?;
    (!t.is_empty() && t.len() <= 15 && t.bytes().all(|b| b.is_ascii_digit())).then(|| t.parse().ok()).flatten()
}

/// Like [`digits`], with an optional minus sign.
fn signed(text: Option<&str>) -> Option<i64> {
    let t = text?;
    match t.strip_prefix('-') {
        Some(rest) => digits(Some(rest)).map(|n| -n),
        None => digits(Some(t)),
    }
}

/// A pid or group as a script printed it, if it fits.
fn id(text: Option<&str>) -> Option<u32> {
    digits(text).and_then(|n| u32::try_from(n).ok())
}

/// The status of `name` from its status line: `running`, `gone`, `exited <status>`.
fn status(line: Option<&str>, name: &str) -> Option<ProcessStatus> {
    let mut parts = line?.split_whitespace();
    if parts.next() != Some(name) {
        return None;
    }
    match parts.next() {
        Some("running") => Some(ProcessStatus::Running),
        Some("gone") => Some(ProcessStatus::Gone),
        Some("exited") => Some(ProcessStatus::Exited(digits(parts.next()))),
        _ => None,
    }
}

/// The start script's report: its exit status and `@@started <pid> <shell> <pgid>`.
pub fn start_report(answer: Option<&Answer>) -> StartReport {
    let Some(a) = answer else { return StartReport { rejected: true, ..StartReport::default() } };
    let tags = Tagged::of(a);
    let mut words = tags.one("started").unwrap_or("").split_whitespace();
    let (pid, shell, pgid) = (id(words.next()), id(words.next()), id(words.next()));
    StartReport { rejected: false, exit_code: a.exit_code(), pid, shell, pgid }
}

/// A poll's report: the status line of `name`, and the probe's line.
pub fn poll_report(answer: Option<&Answer>, name: &str) -> PollReport {
    let Some(a) = answer else { return PollReport { rejected: true, ..PollReport::default() } };
    let tags = Tagged::of(a);
    let probe = match tags.one("probe") {
        Some("unavailable") => Some(ProbeReport::Unavailable),
        line => digits(line).map(ProbeReport::Exit),
    };
    PollReport { rejected: false, status: status(tags.one("status"), name), probe }
}

/// The final check's report: the status of each of `names`, in order (None when its line
/// is missing or unreadable); None for a check whose call rejected.
pub fn statuses(answer: Option<&Answer>, names: &[&str]) -> Option<Vec<Option<ProcessStatus>>> {
    let tags = Tagged::of(answer?);
    let lines = tags.all("status");
    Some(
        names
            .iter()
            .map(|name| status(lines.iter().copied().find(|l| l.split_whitespace().next() == Some(name)), name))
            .collect(),
    )
}

/// A flush's report: `@@flush <status>` or `@@flush skipped`, and whether it timed out.
pub fn flush_report(answer: Option<&Answer>) -> FlushReport {
    let Some(a) = answer else {
        return FlushReport { rejected: true, timed_out: false, skipped: false, exit_code: None };
    };
    let line = Tagged::of(a).one("flush");
    FlushReport { rejected: false, timed_out: a.timed_out, skipped: line == Some("skipped"), exit_code: digits(line) }
}

/// A stop's report: the word of `@@stop <word>`; None for a stop whose call rejected.
pub fn stop_word(answer: &Answer) -> Option<String> {
    Tagged::of(answer).one("stop").map(str::to_string)
}

/// An idle probe's report, line by line; `procs` is None when any `@@proc` line is
/// malformed. A probe whose call rejected answered nothing.
pub fn idle_probe(answer: Option<&Answer>) -> IdleProbe {
    let Some(a) = answer else { return IdleProbe::default() };
    let tags = Tagged::of(a);
    let fields =
        |tag: &str| -> Vec<Vec<&str>> { tags.all(tag).iter().map(|l| l.split_whitespace().collect()).collect() };
    let procs: Option<Vec<ProcSeen>> = fields("proc")
        .iter()
        .map(|f| match f.as_slice() {
            [pid, state, pgid, tty] => Some(ProcSeen {
                pid: digits(Some(pid))?,
                state: state.to_string(),
                pgid: digits(Some(pgid))?,
                tty: signed(Some(tty))?,
            }),
            _ => None,
        })
        .collect();
    let files = match tags.one("files") {
        Some("first") => Some(FilesSeen::First),
        line => digits(line).and_then(|n| u64::try_from(n).ok()).map(FilesSeen::Changed),
    };
    IdleProbe {
        answered: a.answered,
        exit_code: a.exit_code(),
        timed_out: a.timed_out,
        ended: tags.0.contains_key("end"),
        self_pid: digits(tags.one("self")),
        pid_files: fields("pidfile")
            .iter()
            .filter_map(|f| Some(PidFileSeen { name: f.first()?.to_string(), pgid: digits(f.get(2).copied())? }))
            .collect(),
        procs,
        files,
        output_sizes: fields("out")
            .iter()
            .filter_map(|f| Some((f.first()?.to_string(), u64::try_from(digits(f.get(1).copied())?).ok()?)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::manifest::parse_manifest;
    use serde_json::json;

    fn answer(stdout: &str) -> Answer {
        Answer { answered: true, stdout: Some(stdout.to_string()), exit_code: Some(0.0), ..Answer::default() }
    }

    fn process(mut readiness: serde_json::Value) -> Process {
        readiness["timeoutMs"] = json!(1000);
        readiness["intervalMs"] = json!(100);
        let m = parse_manifest(
            &json!({ "processes": [{ "name": "web", "command": "echo it's up", "readiness": readiness }] }),
        )
        .unwrap();
        m.processes[0].clone()
    }

    #[test]
    fn caller_text_is_single_quoted_and_must_not_fire_on_plain_text() {
        assert_eq!(quoted("it's"), r"'it'\''s'");
        assert_eq!(quoted("plain"), "'plain'");
        let p = process(json!({ "logLine": "ready's" }));
        assert!(start_script(&p, None).contains(r"sh -c 'echo it'\''s up'"));
        assert!(start_script(&p, None).starts_with(":\n"));
        assert!(start_script(&p, Some(42)).starts_with("kill -s KILL -- -42 2>/dev/null\n"));
        assert!(
            poll_script(&p, 7).ends_with(r#"grep -F -q -e 'ready'\''s' .relay/web.log 2>/dev/null; echo "@@probe $?""#)
        );
    }

    #[test]
    fn a_port_probe_tries_each_tcp_client_and_says_when_there_is_none() {
        let s = poll_script(&process(json!({ "port": 8080 })), 7);
        for client in ["t=bash", "t=nc", "t=node", "t=python3", r#"echo "@@probe unavailable""#, r#""$h" 8080"#] {
            assert!(s.contains(client), "{client}");
        }
    }

    #[test]
    fn the_stop_script_waits_its_grace_in_ticks_then_kills_and_forgets_the_pid_file() {
        let s = stop_script("web", 4242, Signal::Int, 1005);
        assert!(s.contains("kill -s INT -- -4242 2>/dev/null"));
        assert!(s.contains("-ge 101 ] && break"), "ceil(1005 / 10) ticks");
        assert!(s.contains("[ $n -ge 51 ] && break"), "ceil(1005 / 20) rounds");
        assert!(s.ends_with("rm -f .relay/web.pid"));
    }

    #[test]
    fn the_idle_script_probes_only_the_declared_sources() {
        let s = idle_script("ab12", &["web"], &[Evidence::NoProcessOutput]);
        assert!(s.contains(r#"echo "@@out web $(wc -c < .relay/web.log)""#));
        assert!(!s.contains("@@pidfile") && !s.contains("@@files"));
        let s = idle_script("ab12", &["web"], &[Evidence::NoOpenSession, Evidence::NoFileChange]);
        assert!(s.contains("@@pidfile") && s.contains(".relay/idle-ab12.mark") && !s.contains("@@out"));
        assert!(s.ends_with(r#"echo "@@end""#));
    }

    #[test]
    fn must_fire_well_formed_lines_are_read() {
        let r = start_report(Some(&answer("noise\n@@started 12 10 12\n")));
        assert_eq!((r.rejected, r.exit_code, r.pid, r.shell, r.pgid), (false, Some(0), Some(12), Some(10), Some(12)));
        let p = poll_report(Some(&answer("@@status web exited 3\n@@probe 0")), "web");
        assert_eq!((p.status, p.probe), (Some(ProcessStatus::Exited(Some(3))), Some(ProbeReport::Exit(0))));
        let p = poll_report(Some(&answer("@@status web running\n@@probe unavailable")), "web");
        assert_eq!((p.status, p.probe), (Some(ProcessStatus::Running), Some(ProbeReport::Unavailable)));
        let s = statuses(Some(&answer("@@status b gone\n@@status a running")), &["a", "b", "c"]).unwrap();
        assert_eq!(s, [Some(ProcessStatus::Running), Some(ProcessStatus::Gone), None]);
        let mut timed_out = answer("@@flush skipped");
        timed_out.timed_out = true;
        let f = flush_report(Some(&timed_out));
        assert!(f.timed_out && f.skipped && f.exit_code.is_none());
        assert_eq!(stop_word(&answer("@@stop killed")).as_deref(), Some("killed"));
        let output = Answer { answered: true, output: Some("@@started 1 2 3".into()), ..Answer::default() };
        assert_eq!(start_report(Some(&output)).pid, Some(1), "an adapter's `output` is read like stdout");
    }

    #[test]
    fn must_not_fire_malformed_repeated_or_missing_lines_read_as_nothing() {
        let r = start_report(Some(&answer("@@started 12 x\n")));
        assert_eq!((r.pid, r.shell, r.pgid), (Some(12), None, None));
        let twice = start_report(Some(&answer("@@started 1 1 1\n@@started 2 2 2")));
        assert_eq!(twice.pid, None, "a tag printed twice is not believed");
        assert_eq!(poll_report(Some(&answer("@@status other running")), "web").status, None);
        assert_eq!(digits(Some("1234567890123456")), None, "more than 15 digits");
        assert_eq!(signed(Some("-3")), Some(-3));
        let a = Answer { exit_code: Some(1.5), ..answer("") };
        assert_eq!(start_report(Some(&a)).exit_code, None);
        assert!(start_report(None).rejected && poll_report(None, "web").rejected && flush_report(None).rejected);
        assert_eq!(statuses(None, &["a"]), None);
    }

    #[test]
    fn an_idle_probe_is_read_line_by_line_and_a_malformed_proc_line_drops_them_all() {
        let text = "@@self 5\n@@pidfile web 7 8\n@@pidfile bad 7\n@@proc 9 S 8 0\n@@files first\n@@out web 120\n@@out db missing\n@@end";
        let p = idle_probe(Some(&answer(text)));
        assert!(p.answered && p.ended && p.files == Some(FilesSeen::First));
        assert_eq!(p.self_pid, Some(5));
        assert_eq!(p.pid_files, [PidFileSeen { name: "web".into(), pgid: 8 }]);
        assert_eq!(p.procs.unwrap().len(), 1);
        assert_eq!(p.output_sizes, [("web".to_string(), 120)]);
        let p = idle_probe(Some(&answer("@@proc 9 S 8 0\n@@proc 9 S")));
        assert_eq!(p.procs, None);
        assert_eq!(idle_probe(None), IdleProbe::default());
    }
}
