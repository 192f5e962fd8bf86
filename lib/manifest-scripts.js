'use strict';
// The POSIX `sh` scripts that process manifests run through `runScript`, and the parsers
// that turn their tagged output into plain reports.
//
// Why a file of its own? These scripts are the manifest's only I/O: every action is one
// script sent through the runtime port (no agent in the sandbox, no provider-specific API),
// and every observation is a `@@tag rest` line on its stdout (a command's own output never
// reaches us: it goes to a log file in the sandbox). Parsing is syntax only: a line becomes
// numbers and words, or null when it is malformed. What a report *means* (ready, failed,
// quiet) is the native core's (`src/core/manifest/`); lib/manifest.js feeds it these reports.
//
// Layout inside the sandbox (relative to the working directory of `runScript`):
//   .relay/<name>.log       the process's stdout+stderr (the previous run's in .log.prev)
//   .relay/<name>.pid       "<pid> <pgid>" while the process is managed
//   .relay/<name>.exit      the process's exit status, once it has exited
//   .relay/<name>.flush.log output of the teardown flush command
//   .relay/idle-<token>.*   bookkeeping of one idle observer
//
// Each process runs in the process group of the `runScript` that started it (the local
// runtime makes every runScript its own group leader and kills those groups on destroy),
// so a teardown signals the whole group: the command and everything it spawned. Process
// names are validated (`[a-z0-9][a-z0-9_-]*`): safe in a path and a shell word; every other
// caller text is single-quoted (`q`).

/** Directory, relative to the sandbox's working directory, that holds logs and bookkeeping. */
const STATE_DIR = '.relay';

/** POSIX single-quoting: the only safe way to put arbitrary text into a shell word. */
function q(text) {
  return `'${String(text).replace(/'/g, `'\\''`)}'`;
}

/** A shell function: true while process group $1 has a member that is not a zombie. */
const SH_GROUP_RUNNING = `
running() {
  kill -s 0 -- "-$1" 2>/dev/null || return 1
  [ -r /proc/self/stat ] || return 0
  for d in /proc/[0-9]*; do
    { read -r l < "$d/stat"; } 2>/dev/null || continue
    r=\${l##*) }
    set -- "$1" $r
    [ "$4" = "$1" ] && [ "$2" != Z ] && return 0
  done
  return 1
}`;

/** A shell function: true while pid $1 exists and is not a zombie. */
const SH_PID_ALIVE = `
alive() {
  kill -s 0 "$1" 2>/dev/null || return 1
  if { read -r l < "/proc/$1/stat"; } 2>/dev/null; then r=\${l##*) }; [ "\${r%% *}" != Z ]; fi
}`;

// ---------------------------------------------------------------------------------------
// Scripts

/** Starts `p` in the background (first killing the group of its previous run, on a restart). */
function startScript(p, previousPgid) {
  const d = STATE_DIR;
  const n = p.name; // validated: [a-z0-9][a-z0-9_-]*, safe in a path and a shell word
  return [
    previousPgid ? `kill -s KILL -- -${previousPgid} 2>/dev/null` : ':',
    `mkdir -p ${d} || exit 90`,
    `L=${d}/${n}.log`,
    `if [ -e "$L" ]; then mv -f "$L" "$L.prev" || exit 90; fi`,
    `: > "$L" || exit 90`,
    `rm -f ${d}/${n}.exit ${d}/${n}.exit.tmp ${d}/${n}.pid || exit 90`,
    // Background jobs of a non-interactive shell ignore SIGINT/SIGQUIT (POSIX), and a shell
    // cannot un-ignore them; GNU env can, so a SIGINT teardown reaches shell scripts too.
    `if env --default-signal=INT,QUIT true >/dev/null 2>&1; then E='env --default-signal=INT,QUIT'; else E=; fi`,
    `{ $E sh -c ${q(p.command)}; echo $? > ${d}/${n}.exit.tmp && mv -f ${d}/${n}.exit.tmp ${d}/${n}.exit; } >>"$L" 2>&1 </dev/null &`,
    `pid=$!`,
    `pg=`,
    `if { read -r l < "/proc/$pid/stat"; } 2>/dev/null; then r=\${l##*) }; set -- $r; pg=$3; fi`,
    `[ -n "$pg" ] || pg=$(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ')`,
    `echo "$pid $pg" > ${d}/${n}.pid`,
    `echo "@@started $pid $$ $pg"`,
  ].join('\n');
}

const NODE_CONNECT =
  "const s=require('net').connect({host:process.argv[1],port:+process.argv[2]});" +
  "s.on('connect',()=>process.exit(0));s.on('error',()=>process.exit(1));setTimeout(()=>process.exit(1),2000)";
const PY_CONNECT = 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close()';

/** The readiness probe of `p` (empty without one); prints `@@probe <status>` or `@@probe unavailable`. */
function probeScript(p) {
  const r = p.readiness;
  if (!r) return '';
  if (r.command !== undefined) {
    return `sh -c ${q(r.command)} >/dev/null 2>&1 </dev/null; echo "@@probe $?"`;
  }
  if (r.logLine !== undefined) {
    return `grep -F -q -e ${q(r.logLine)} ${STATE_DIR}/${p.name}.log 2>/dev/null; echo "@@probe $?"`;
  }
  // Port: the first TCP client found, on IPv4 then IPv6 loopback.
  const port = Number(r.port);
  return [
    `if command -v bash >/dev/null 2>&1; then t=bash`,
    `elif command -v nc >/dev/null 2>&1; then t=nc`,
    `elif command -v node >/dev/null 2>&1; then t=node`,
    `elif command -v python3 >/dev/null 2>&1; then t=python3`,
    `else echo "@@probe unavailable"; exit 0; fi`,
    `rc=1`,
    `for h in 127.0.0.1 ::1; do`,
    `  case $t in`,
    `    bash) bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$h" ${port} ;;`,
    `    nc) nc -z -w 2 "$h" ${port} ;;`,
    `    node) node -e ${q(NODE_CONNECT)} "$h" ${port} ;;`,
    `    python3) python3 -c ${q(PY_CONNECT)} "$h" ${port} ;;`,
    `  esac >/dev/null 2>&1 </dev/null && { rc=0; break; }`,
    `done`,
    `echo "@@probe $rc"`,
  ].join('\n');
}

/** Prints `@@status <name> exited <status>`, `running` or `gone`. */
function statusLines(name, pid) {
  const d = STATE_DIR;
  return [
    `if [ -f ${d}/${name}.exit ]; then echo "@@status ${name} exited $(cat ${d}/${name}.exit 2>/dev/null)"`,
    `elif alive ${pid}; then echo "@@status ${name} running"`,
    `else echo "@@status ${name} gone"; fi`,
  ].join('\n');
}

/** One readiness poll of `p` (supervised by `pid`): its status line, then (while it runs) its probe. */
function pollScript(p, pid) {
  return [SH_PID_ALIVE, statusLines(p.name, pid), `[ -f ${STATE_DIR}/${p.name}.exit ] && exit 0`, `alive ${pid} || exit 0`, probeScript(p)].join('\n');
}

/** The status line of every `{ name, pid }`, in order (the final check of a start). */
function statusScript(entries) {
  return [SH_PID_ALIVE, ...entries.map((e) => statusLines(e.name, e.pid))].join('\n');
}

/** Signals group `pgid`, waits up to `graceMs` for it to exit, then SIGKILLs what is left. */
function stopScript(pgid, signal, graceMs) {
  const sig = String(signal).replace(/^SIG/, '');
  return [
    SH_GROUP_RUNNING,
    `tick() { T=; if { read -r u _ < /proc/uptime; } 2>/dev/null; then s=\${u%.*}; f=\${u#*.}; case $f in [0-9][0-9]) T=$((s * 100 + 1$f - 100));; esac; fi; }`,
    `if ! running ${pgid}; then echo "@@stop already-exited"; exit 0; fi`,
    `kill -s ${sig} -- -${pgid} 2>/dev/null`,
    `tick; start=$T; n=0`,
    `while running ${pgid}; do`,
    `  if [ -n "$start" ]; then tick; [ -n "$T" ] && [ $((T - start)) -ge ${Math.ceil(graceMs / 10)} ] && break`,
    `  else [ $n -ge ${Math.ceil(graceMs / 20)} ] && break; n=$((n + 1)); fi`,
    `  sleep 0.02 2>/dev/null || sleep 1`,
    `done`,
    `if running ${pgid}; then`,
    `  kill -s KILL -- -${pgid} 2>/dev/null; i=0`,
    `  while running ${pgid} && [ $i -lt 250 ]; do sleep 0.02 2>/dev/null || sleep 1; i=$((i + 1)); done`,
    `  if running ${pgid}; then echo "@@stop survived"; else echo "@@stop killed"; fi`,
    `else echo "@@stop exited"; fi`,
  ].join('\n');
}

/** Runs the flush `command` of `name` to completion, only while its group still runs. */
function flushScript(name, pgid, command) {
  return [
    SH_GROUP_RUNNING,
    `if ! running ${pgid}; then echo "@@flush skipped"; exit 0; fi`,
    `sh -c ${q(command)} >>${STATE_DIR}/${name}.flush.log 2>&1 </dev/null`,
    `echo "@@flush $?"`,
  ].join('\n');
}

// ---------------------------------------------------------------------------------------
// The idle probe

/**
 * The idle probe of one observer (`token`): its own pid, the manifest's pid files and the
 * sandbox's processes (for the process-based sources), the file-change mark, the log sizes.
 */
function idleScript(token, names, evidence) {
  const d = STATE_DIR;
  const M = `${d}/idle-${token}`;
  const lines = [`mkdir -p ${d} || exit 90`, `echo "@@self $$"`, `P=$(pwd -P 2>/dev/null) || P=`];
  if (evidence.includes('no-running-command') || evidence.includes('no-open-session')) {
    lines.push(
      `for f in ${d}/*.pid; do [ -f "$f" ] || continue; { read -r a b < "$f"; } 2>/dev/null || continue; n=\${f#${d}/}; echo "@@pidfile \${n%.pid} $a $b"; done`,
      `if [ -r /proc/self/stat ] && [ -n "$P" ]; then`,
      `  find /proc/[0-9]*/cwd -maxdepth 0 \\( -lname "$P" -o -lname "$P/*" \\) -print 2>/dev/null > ${M}.procs`,
      `  while read -r c; do p=\${c%/cwd}; { read -r l < "$p/stat"; } 2>/dev/null || continue; r=\${l##*) }; set -- $r; echo "@@proc \${p#/proc/} $1 $3 $5"; done < ${M}.procs`,
      `fi`,
    );
  }
  if (evidence.includes('no-file-change')) {
    // Marks are floored to the second (POSIX touch -t), in UTC: a change is reported at
    // least once, possibly twice (conservative), never missed at a timestamp tie.
    lines.push(
      `if T=$(TZ=UTC0 date +%Y%m%d%H%M.%S) && TZ=UTC0 touch -t "$T" ${M}.new; then`,
      `  if [ -f ${M}.mark ]; then`,
      `    if find . -path ./${d} -prune -o -newer ${M}.mark -print > ${M}.list 2>/dev/null; then echo "@@files $(wc -l < ${M}.list)"; else echo "@@files error"; fi`,
      `  else echo "@@files first"; fi`,
      `  mv -f ${M}.new ${M}.mark || echo "@@files error"`,
      `else echo "@@files error"; fi`,
    );
  }
  if (evidence.includes('no-process-output')) {
    for (const n of names) {
      lines.push(`if [ -f ${d}/${n}.log ]; then echo "@@out ${n} $(wc -c < ${d}/${n}.log)"; else echo "@@out ${n} missing"; fi`);
    }
  }
  lines.push(`echo "@@end"`);
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------
// Parsers: tagged lines → plain reports (numbers, words, null when malformed)

/** `@@tag rest` lines of a script's stdout, by tag. */
function tagged(result) {
  const out = new Map();
  const stdout = result && typeof result.stdout === 'string' ? result.stdout : typeof result?.output === 'string' ? result.output : '';
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('@@')) continue;
    const sp = line.indexOf(' ');
    const tag = sp < 0 ? line.slice(2) : line.slice(2, sp);
    const rest = sp < 0 ? '' : line.slice(sp + 1).trim();
    if (!out.has(tag)) out.set(tag, []);
    out.get(tag).push(rest);
  }
  return out;
}

/** The one line of `tag`; undefined when there is none or more than one. */
function one(tags, tag) {
  const v = tags.get(tag);
  return v && v.length === 1 ? v[0] : undefined;
}

/** A run of decimal digits as a number (at most 15, so it is exact), else null. */
function digits(text) {
  return typeof text === 'string' && /^\d{1,15}$/.test(text) ? Number(text) : null;
}

/** Like `digits`, with an optional minus sign. */
function signed(text) {
  return typeof text === 'string' && /^-?\d{1,15}$/.test(text) ? Number(text) : null;
}

/** A result's exit status, when it is an integer. */
function exitCodeOf(result) {
  const code = result?.exitCode;
  return Number.isSafeInteger(code) ? code : null;
}

/** `{ state: 'running'|'exited'|'gone', exitCode }` from the status line of `name`, or null. */
function parseStatus(line, name) {
  if (typeof line !== 'string') return null;
  const parts = line.split(/\s+/);
  if (parts[0] !== name) return null;
  if (parts[1] === 'running' || parts[1] === 'gone') return { state: parts[1], exitCode: null };
  if (parts[1] === 'exited') return { state: 'exited', exitCode: digits(parts[2]) };
  return null;
}

/** The start script's report: its exit status and `@@started <pid> <shell> <pgid>`. */
function readStart(result) {
  const [pid, shell, pgid] = (one(tagged(result), 'started') || '').split(/\s+/);
  return { rejected: false, exitCode: exitCodeOf(result), pid: digits(pid), shell: digits(shell), pgid: digits(pgid) };
}

/** A poll's report: the status line of `name`, and the probe's line. */
function readPoll(result, name) {
  const tags = tagged(result);
  const probe = one(tags, 'probe');
  return { rejected: false, status: parseStatus(one(tags, 'status'), name), probeExit: digits(probe), probeUnavailable: probe === 'unavailable' };
}

/** The final check's report: the status line of each name, in order (null when unreadable). */
function readStatuses(result, names) {
  const lines = tagged(result).get('status') || [];
  return names.map((name) => ({ name, status: parseStatus(lines.find((l) => l.split(/\s+/)[0] === name), name) }));
}

/** A flush's report: `@@flush <status>` or `@@flush skipped`, and whether it timed out. */
function readFlush(result) {
  const v = one(tagged(result), 'flush');
  return { rejected: false, timedOut: Boolean(result?.timedOut), skipped: v === 'skipped', exitCode: digits(v) };
}

/** A stop's report: the word of `@@stop <word>`. */
function readStop(result) {
  return { rejected: false, word: one(tagged(result), 'stop') ?? null };
}

// The reports of scripts whose `runScript` call rejected.
/** @type {import('../binding').StartReportRecord} */
const REJECTED_START = Object.freeze({ rejected: true, exitCode: null, pid: null, shell: null, pgid: null });
/** @type {import('../binding').PollReportRecord} */
const REJECTED_POLL = Object.freeze({ rejected: true, status: null, probeExit: null, probeUnavailable: false });
/** @type {import('../binding').FlushReportRecord} */
const REJECTED_FLUSH = Object.freeze({ rejected: true, timedOut: false, skipped: false, exitCode: null });
/** @type {import('../binding').StopReportRecord} */
const REJECTED_STOP = Object.freeze({ rejected: true, word: null });

/** The report of an idle probe that never answered (its `runScript` rejected). @type {import('../binding').IdleProbeRecord} */
const UNANSWERED_IDLE_PROBE = Object.freeze({
  answered: false,
  exitCode: null,
  timedOut: false,
  ended: false,
  selfPid: null,
  pidFiles: [],
  procs: null,
  filesFirst: false,
  filesChanged: null,
  outputSizes: [],
});

/** An idle probe's report, line by line; `procs` is null when any `@@proc` line is malformed. */
function readIdleProbe(result) {
  const tags = tagged(result);
  const fields = (tag) => (tags.get(tag) || []).map((l) => l.split(/\s+/));
  const procs = fields('proc');
  const wellFormed = procs.every((f) => f.length === 4 && digits(f[0]) !== null && digits(f[2]) !== null && signed(f[3]) !== null);
  const files = one(tags, 'files');
  return {
    answered: Boolean(result),
    exitCode: exitCodeOf(result),
    timedOut: Boolean(result?.timedOut),
    ended: tags.has('end'),
    selfPid: digits(one(tags, 'self')),
    pidFiles: fields('pidfile')
      .filter((f) => digits(f[2]) !== null)
      .map((f) => ({ name: f[0], pgid: digits(f[2]) })),
    procs: wellFormed ? procs.map((f) => ({ pid: digits(f[0]), state: f[1], pgid: digits(f[2]), tty: signed(f[3]) })) : null,
    filesFirst: files === 'first',
    filesChanged: digits(files),
    outputSizes: fields('out')
      .filter((f) => digits(f[1]) !== null)
      .map((f) => ({ name: f[0], size: digits(f[1]) })),
  };
}

module.exports = {
  STATE_DIR,
  startScript,
  pollScript,
  statusScript,
  stopScript,
  flushScript,
  idleScript,
  tagged,
  one,
  readStart,
  readPoll,
  readStatuses,
  readFlush,
  readStop,
  readIdleProbe,
  REJECTED_START,
  REJECTED_POLL,
  REJECTED_FLUSH,
  REJECTED_STOP,
  UNANSWERED_IDLE_PROBE,
};
