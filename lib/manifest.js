'use strict';
// Process manifests, executed through the runtime port only.
//
// Why only `router.runScript`? A manifest must work on every provider without a change to
// the runtime port: no agent inside the sandbox, no provider-specific process API. So every
// action here is one POSIX `sh` script sent through `runScript`, and every observation is
// parsed from that script's stdout (tagged `@@` lines; a command's own output never reaches
// us: it goes to a log file inside the sandbox). The native core validates the manifest and
// orders the work; this module performs it.
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
// so a teardown signals the whole group: the command and everything it spawned.

const { randomBytes } = require('node:crypto');
const { binding } = require('./binding.js');
const {
  SandboxRouterError,
  SandboxRequestValidationError,
  SandboxNotFoundError,
  callNative,
  isRouterError,
} = require('./errors.js');
const { guarded, copyOptions, shown } = require('./guard.js');

/**
 * A caller's argument, read once inside a guard (lib/guard.js): a throwing getter or Proxy
 * trap is INVALID_INPUT naming the argument.
 */
function readArg(value, field, depth = 6) {
  try {
    return copyOptions(value, depth);
  } catch {
    throw optionError(field, 'could not be read (a property access threw)');
  }
}

/** Directory, relative to the sandbox's working directory, that holds logs and bookkeeping. */
const STATE_DIR = '.relay';
/** Default bound of one teardown flush command. */
const DEFAULT_FLUSH_TIMEOUT_MS = 30_000;
/** Default bound of one idle probe. */
const DEFAULT_IDLE_PROBE_TIMEOUT_MS = 30_000;
/** Bound of the short bookkeeping scripts (start, status). */
const SCRIPT_TIMEOUT_MS = 10_000;

/** Why a start failed: each constant has one meaning. */
const MANIFEST_START_REASONS = Object.freeze({
  /** The readiness probe did not pass within `readiness.timeoutMs`. */
  READINESS_TIMEOUT: 'READINESS_TIMEOUT',
  /** The process exited (or vanished) before the manifest became useful, restarts used up. */
  PROCESS_EXITED: 'PROCESS_EXITED',
  /** A port probe found no TCP client in the sandbox (bash, nc, node or python3). */
  PROBE_UNAVAILABLE: 'PROBE_UNAVAILABLE',
  /** The process could not be started, or did not get a process group of its own. */
  START_FAILED: 'START_FAILED',
  /** The runtime port failed (a `runScript` call rejected). */
  RUNTIME_ERROR: 'RUNTIME_ERROR',
});

const REASON_TEXT = {
  READINESS_TIMEOUT: 'did not pass its readiness probe in time',
  PROCESS_EXITED: 'exited before the manifest became useful',
  PROBE_UNAVAILABLE: 'has a port probe but the sandbox has no TCP client (bash, nc, node or python3)',
  START_FAILED: 'could not be started in a process group of its own',
  RUNTIME_ERROR: 'could not be managed: the runtime failed',
};

/**
 * A manifest could not be made useful. `process` names the failing process, `reason` is
 * one of `MANIFEST_START_REASONS`; what was started has been torn down (`teardown` is the
 * report). Never carries command output.
 */
class ManifestStartError extends SandboxRouterError {
  constructor(processName, reason, details = {}) {
    super(`manifest start failed: process ${processName} ${REASON_TEXT[reason] || 'failed'} (${reason})`, 'MANIFEST_START_FAILED', {
      process: processName,
      reason,
      ...details,
    });
  }
}

// ---------------------------------------------------------------------------------------
// Native wrappers

function manifestJson(manifest) {
  let text;
  try {
    text = JSON.stringify(manifest);
  } catch {
    text = undefined;
  }
  if (typeof text !== 'string') {
    throw new SandboxRequestValidationError('invalid input: manifest must be a JSON-serializable object', 'INVALID_INPUT', {
      field: 'manifest',
    });
  }
  return text;
}

/** Validates a manifest; returns it normalized (defaults filled in). Throws `INVALID_INPUT`. */
function validateManifest(manifest) {
  const text = manifestJson(manifest);
  return JSON.parse(callNative(() => binding.validateManifest(text)));
}

/** The startup plan: `{ waves: [{ wave, processes }], order }`. Throws `INVALID_INPUT`. */
function planStartup(manifest) {
  const text = manifestJson(manifest);
  return JSON.parse(callNative(() => binding.planStartup(text)));
}

/** The teardown plan: `{ waves: [{ wave, steps: [{ name, phases }] }], order }`. Throws `INVALID_INPUT`. */
function planTeardown(manifest) {
  const text = manifestJson(manifest);
  return JSON.parse(callNative(() => binding.planTeardown(text)));
}

// ---------------------------------------------------------------------------------------
// Small helpers

/** POSIX single-quoting: the only safe way to put arbitrary text into a shell word. */
function q(text) {
  return `'${String(text).replace(/'/g, `'\\''`)}'`;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

function optionError(field, expectation) {
  return new SandboxRequestValidationError(`invalid input: ${field} ${expectation}`, 'INVALID_INPUT', { field });
}

function intOption(options, key, def, min, max) {
  const v = options[key] ?? def;
  if (!Number.isInteger(v) || v < min || v > max) throw optionError(`options.${key}`, `must be an integer from ${min} to ${max}`);
  return v;
}

function optionsOf(input, allowed) {
  const options = readArg(input, 'options', 2);
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object') throw optionError('options', 'must be an object');
  for (const k of Object.keys(options)) if (!allowed.includes(k)) throw optionError(`options.${shown(k)}`, 'is not a known option');
  return options;
}

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

function one(tags, tag) {
  const v = tags.get(tag);
  return v && v.length === 1 ? v[0] : undefined;
}

const INT = /^\d+$/;

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

function statusLines(name, pid) {
  const d = STATE_DIR;
  return [
    `if [ -f ${d}/${name}.exit ]; then echo "@@status ${name} exited $(cat ${d}/${name}.exit 2>/dev/null)"`,
    `elif alive ${pid}; then echo "@@status ${name} running"`,
    `else echo "@@status ${name} gone"; fi`,
  ].join('\n');
}

/** `{ state: 'running'|'exited'|'gone', exitCode }` from a status line, or undefined. */
function parseStatus(line, name) {
  if (typeof line !== 'string') return undefined;
  const parts = line.split(/\s+/);
  if (parts[0] !== name) return undefined;
  if (parts[1] === 'running' || parts[1] === 'gone') return { state: parts[1], exitCode: null };
  if (parts[1] === 'exited') return { state: 'exited', exitCode: INT.test(parts[2] || '') ? Number(parts[2]) : null };
  return undefined;
}

function pollScript(entry) {
  const { p, pid } = entry;
  return [SH_PID_ALIVE, statusLines(p.name, pid), `[ -f ${STATE_DIR}/${p.name}.exit ] && exit 0`, `alive ${pid} || exit 0`, probeScript(p)].join('\n');
}

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

function flushScript(name, pgid, command) {
  return [
    SH_GROUP_RUNNING,
    `if ! running ${pgid}; then echo "@@flush skipped"; exit 0; fi`,
    `sh -c ${q(command)} >>${STATE_DIR}/${name}.flush.log 2>&1 </dev/null`,
    `echo "@@flush $?"`,
  ].join('\n');
}

// ---------------------------------------------------------------------------------------
// Startup

/** Internal: a failure of one process, turned into a ManifestStartError after teardown. */
class Failure {
  constructor(name, reason, details) {
    this.name = name;
    this.reason = reason;
    this.details = details || {};
  }
}
const ABORTED = Symbol('aborted');
/** Whether `e` is one of our Failures (guarded: a thrown value may be a hostile Proxy). */
function isFailure(e) {
  try {
    return e instanceof Failure;
  } catch {
    return false;
  }
}

function checkRouter(router) {
  let ok = false;
  try {
    ok = guarded(() => Boolean(router) && typeof router.runScript === 'function');
  } catch {
    ok = false;
  }
  if (!ok) {
    throw optionError('router', 'must be a SandboxRouter (an object with runScript)');
  }
}

function isCallerError(error) {
  return isRouterError(error) && (error instanceof SandboxNotFoundError || error instanceof SandboxRequestValidationError);
}

/** Starts `p` in the background; resolves `{ pid, pgid, startedAt }`. */
async function startOne(ctx, p, previousPgid) {
  let res;
  try {
    res = await ctx.router.runScript(ctx.sandboxId, { command: startScript(p, previousPgid), timeoutMs: SCRIPT_TIMEOUT_MS });
  } catch {
    throw new Failure(p.name, 'RUNTIME_ERROR');
  }
  const line = one(tagged(res), 'started');
  const [pid, shell, pgid] = (line || '').split(/\s+/);
  if (res?.exitCode !== 0 || !INT.test(pid || '') || !INT.test(pgid || '')) throw new Failure(p.name, 'START_FAILED');
  // The group must be the start script's own (the script leads it): then a signal to the
  // group reaches the command and its children and nothing else. A shared group is never
  // signalled, so such a process is not managed at all.
  if (shell !== pgid) throw new Failure(p.name, 'START_FAILED');
  return { pid: Number(pid), pgid: Number(pgid), startedAt: Date.now() };
}

async function awaitReady(ctx, entry) {
  const r = entry.p.readiness;
  const firstStart = entry.startedAt;
  const deadline = firstStart + (r ? r.timeoutMs : SCRIPT_TIMEOUT_MS);
  for (;;) {
    if (ctx.failed) throw ABORTED;
    const remaining = deadline - Date.now();
    let res;
    try {
      res = await ctx.router.runScript(ctx.sandboxId, {
        command: pollScript(entry),
        timeoutMs: Math.max(1_000, remaining) + 1_000,
      });
    } catch {
      throw new Failure(entry.p.name, 'RUNTIME_ERROR');
    }
    if (ctx.failed) throw ABORTED;
    const tags = tagged(res);
    const status = parseStatus(one(tags, 'status'), entry.p.name);
    if (status && status.state !== 'running') {
      const p = entry.p;
      const failed = status.state === 'gone' || status.exitCode !== 0;
      if (p.restart === 'on-failure' && failed && entry.restarts < p.maxRestarts) {
        const next = await startOne(ctx, p, entry.pgid);
        entry.pid = next.pid;
        entry.pgid = next.pgid;
        entry.restarts += 1;
        continue;
      }
      throw new Failure(p.name, 'PROCESS_EXITED', { exitCode: status.exitCode });
    }
    if (status) {
      if (!r) return Date.now() - firstStart;
      const probe = one(tags, 'probe');
      if (probe === 'unavailable') throw new Failure(entry.p.name, 'PROBE_UNAVAILABLE');
      if (probe === '0') return Date.now() - firstStart;
    }
    const now = Date.now();
    if (now >= deadline) {
      throw new Failure(entry.p.name, r ? 'READINESS_TIMEOUT' : 'START_FAILED', r ? { timeoutMs: r.timeoutMs } : {});
    }
    await sleep(Math.min(r ? r.intervalMs : 50, deadline - now));
  }
}

/** Final check: every started process still runs; returns the first that does not. */
async function stillRunning(ctx, order) {
  const entries = order.map((n) => ctx.started.get(n));
  let res;
  try {
    res = await ctx.router.runScript(ctx.sandboxId, {
      command: [SH_PID_ALIVE, ...entries.map((e) => statusLines(e.p.name, e.pid))].join('\n'),
      timeoutMs: SCRIPT_TIMEOUT_MS,
    });
  } catch {
    return new Failure(entries[0].p.name, 'RUNTIME_ERROR');
  }
  const lines = tagged(res).get('status') || [];
  for (const e of entries) {
    const status = parseStatus(
      lines.find((l) => l.split(/\s+/)[0] === e.p.name),
      e.p.name,
    );
    if (!status) return new Failure(e.p.name, 'RUNTIME_ERROR');
    if (status.state !== 'running') return new Failure(e.p.name, 'PROCESS_EXITED', { exitCode: status.exitCode });
  }
  return null;
}

/**
 * Starts a manifest inside a provisioned sandbox, wave by wave, through `router.runScript`
 * only, and resolves once every readiness probe passed (the sandbox is *useful*). On a
 * failure, tears down what was started (history-safe, in teardown order) and rejects with
 * a `ManifestStartError` naming the process and the reason.
 *
 * @param {{ runScript: Function, getSandbox?: Function }} router
 * @param {string} sandboxId `sbx_…`
 * @param {object} manifest
 * @param {{ flushTimeoutMs?: number }} [options]
 */
async function startManifest(router, sandboxId, manifest, options) {
  checkRouter(router);
  const opts = optionsOf(options, ['flushTimeoutMs']);
  const flushTimeoutMs = intOption(opts, 'flushTimeoutMs', DEFAULT_FLUSH_TIMEOUT_MS, 1, 3_600_000);
  const normalized = validateManifest(manifest);
  const plan = planStartup(normalized);
  // Unknown or malformed sandbox ids reject here, typed, before anything runs.
  if (typeof router.getSandbox === 'function') await router.getSandbox(sandboxId);

  const ctx = { router, sandboxId, started: new Map(), failed: false };
  const ready = new Map();
  let failure = null;
  try {
    for (const wave of plan.waves) {
      const settled = await Promise.allSettled(
        wave.processes.map(async (p) => {
          try {
            const entry = { p, restarts: 0, ...(await startOne(ctx, p)) };
            ctx.started.set(p.name, entry);
            ready.set(p.name, await awaitReady(ctx, entry));
          } catch (error) {
            ctx.failed = true;
            throw error;
          }
        }),
      );
      // Report the first failure in wave (name) order: deterministic for a given outcome.
      const failures = settled.filter((s) => s.status === 'rejected').map((s) => s.reason);
      const first = failures.find((f) => isFailure(f)) ?? failures.find((f) => f !== ABORTED);
      if (first !== undefined) throw first;
    }
    const gone = await stillRunning(ctx, plan.order);
    if (gone) throw gone;
  } catch (error) {
    failure = isFailure(error) ? error : new Failure(plan.order[0], 'RUNTIME_ERROR');
  }

  if (failure) {
    const started = { manifest: normalized, processes: [...ctx.started.values()].map((e) => ({ name: e.p.name, pid: e.pid, pgid: e.pgid })) };
    let teardown;
    try {
      teardown = await teardownManifest(router, sandboxId, started, { flushTimeoutMs });
    } catch (error) {
      if (isCallerError(error)) throw error;
      teardown = { complete: false, steps: [] };
    }
    throw new ManifestStartError(failure.name, failure.reason, { sandboxId, ...failure.details, teardown });
  }

  return {
    useful: true,
    sandboxId,
    manifest: normalized,
    processes: plan.order.map((name) => {
      const e = ctx.started.get(name);
      return { name, pid: e.pid, pgid: e.pgid, readyAfterMs: ready.get(name), restarts: e.restarts };
    }),
  };
}

// ---------------------------------------------------------------------------------------
// Teardown

function startedOf(started) {
  if (!started || typeof started !== 'object' || !Array.isArray(started.processes) || !started.manifest) {
    throw optionError('started', 'must be the value startManifest resolved with ({ manifest, processes })');
  }
  const byName = new Map();
  started.processes.forEach((p, i) => {
    if (!p || typeof p.name !== 'string' || !Number.isInteger(p.pgid) || p.pgid < 2 || !Number.isInteger(p.pid) || p.pid < 2) {
      throw optionError(`started.processes[${i}]`, 'must be { name, pid, pgid } with integer ids');
    }
    byName.set(p.name, p);
  });
  return byName;
}

async function stopOne(router, sandboxId, step, proc, flushTimeoutMs) {
  const report = { name: step.name, flush: 'none', outcome: 'error' };
  for (const phase of step.phases) {
    if (phase.action === 'flush') {
      try {
        const res = await router.runScript(sandboxId, {
          command: flushScript(step.name, proc.pgid, phase.command),
          timeoutMs: flushTimeoutMs,
        });
        const v = one(tagged(res), 'flush');
        report.flush = res?.timedOut ? 'timed-out' : v === 'skipped' ? 'skipped' : v === '0' ? 'ok' : 'failed';
      } catch (error) {
        if (isCallerError(error)) throw error;
        report.flush = 'failed';
      }
    }
  }
  const signal = step.phases.find((ph) => ph.action === 'signal')?.signal ?? 'SIGTERM';
  const graceMs = step.phases.find((ph) => ph.action === 'wait')?.ms ?? 0;
  try {
    const res = await router.runScript(sandboxId, {
      command: `${stopScript(proc.pgid, signal, graceMs)}\nrm -f ${STATE_DIR}/${step.name}.pid`,
      timeoutMs: graceMs + 15_000,
    });
    const v = one(tagged(res), 'stop');
    report.outcome = ['exited', 'killed', 'already-exited', 'survived'].includes(v) ? v : 'error';
  } catch (error) {
    if (isCallerError(error)) throw error;
    report.outcome = 'error';
  }
  return report;
}

/**
 * Tears a started manifest down in teardown order (dependents first), each process
 * history-safe: its flush command runs to completion (while it still runs), then its
 * signal goes to its process group, then up to `graceMs` pass, then `SIGKILL`. Processes
 * of one wave stop concurrently. Resolves with a report; `complete` is false when some
 * step could not be performed or a group survived `SIGKILL`.
 *
 * @param {{ runScript: Function }} router
 * @param {string} sandboxId
 * @param {{ manifest: object, processes: { name: string, pid: number, pgid: number }[] }} input what startManifest resolved with (`started`)
 * @param {{ flushTimeoutMs?: number }} [options]
 */
async function teardownManifest(router, sandboxId, input, options) {
  checkRouter(router);
  const started = readArg(input, 'started');
  const opts = optionsOf(options, ['flushTimeoutMs']);
  const flushTimeoutMs = intOption(opts, 'flushTimeoutMs', DEFAULT_FLUSH_TIMEOUT_MS, 1, 3_600_000);
  const byName = startedOf(started);
  const plan = planTeardown(started.manifest);
  const steps = [];
  for (const wave of plan.waves) {
    const todo = wave.steps.filter((s) => byName.has(s.name));
    steps.push(...(await Promise.all(todo.map((s) => stopOne(router, sandboxId, s, byName.get(s.name), flushTimeoutMs)))));
  }
  const complete = steps.every((s) => s.outcome === 'exited' || s.outcome === 'killed' || s.outcome === 'already-exited');
  return { complete, steps };
}

// ---------------------------------------------------------------------------------------
// Evidence-gated idle

const EVIDENCE_STATUS = Object.freeze({ QUIET: 'quiet', ACTIVE: 'active', UNKNOWN: 'unknown' });

function idleScript(token, manifest, evidence) {
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
    for (const p of manifest.processes) {
      lines.push(`if [ -f ${d}/${p.name}.log ]; then echo "@@out ${p.name} $(wc -c < ${d}/${p.name}.log)"; else echo "@@out ${p.name} missing"; fi`);
    }
  }
  lines.push(`echo "@@end"`);
  return lines.join('\n');
}

/** Reads each declared source from one probe's output: `{ source: { status, reason?, sizes? } }`. */
function readEvidence(tags, manifest, evidence, previousSizes) {
  const out = {};
  const unknown = (reason) => ({ status: EVIDENCE_STATUS.UNKNOWN, reason });
  const self = one(tags, 'self');
  const complete = tags.has('end') && self !== undefined && INT.test(self);
  for (const src of evidence) out[src] = unknown('UNREADABLE');
  if (!complete) return out;

  if (evidence.includes('no-running-command') || evidence.includes('no-open-session')) {
    const names = new Set(manifest.processes.map((p) => p.name));
    const managed = new Set();
    for (const line of tags.get('pidfile') || []) {
      const [name, , pgid] = line.split(/\s+/);
      if (names.has(name) && INT.test(pgid || '')) managed.add(pgid);
    }
    const procs = (tags.get('proc') || []).map((l) => l.split(/\s+/));
    const wellFormed = procs.every((f) => f.length === 4 && INT.test(f[0]) && INT.test(f[2]) && /^-?\d+$/.test(f[3]));
    // The probe runs in the working directory: if it cannot see itself, it sees nothing.
    const sawSelf = wellFormed && procs.some((f) => f[0] === self);
    const others = sawSelf ? procs.filter((f) => f[2] !== self && f[1] !== 'Z' && f[1] !== 'X') : null;
    if (evidence.includes('no-running-command')) {
      out['no-running-command'] = others
        ? { status: others.some((f) => !managed.has(f[2])) ? EVIDENCE_STATUS.ACTIVE : EVIDENCE_STATUS.QUIET }
        : unknown('UNREADABLE');
    }
    if (evidence.includes('no-open-session')) {
      out['no-open-session'] = others
        ? { status: others.some((f) => f[3] !== '0') ? EVIDENCE_STATUS.ACTIVE : EVIDENCE_STATUS.QUIET }
        : unknown('UNREADABLE');
    }
  }
  if (evidence.includes('no-file-change')) {
    const v = one(tags, 'files');
    if (v === 'first') out['no-file-change'] = unknown('NO_BASELINE');
    else if (v !== undefined && INT.test(v)) out['no-file-change'] = { status: Number(v) > 0 ? EVIDENCE_STATUS.ACTIVE : EVIDENCE_STATUS.QUIET };
  }
  if (evidence.includes('no-process-output')) {
    const sizes = {};
    let readable = true;
    for (const line of tags.get('out') || []) {
      const [name, size] = line.split(/\s+/);
      if (INT.test(size || '')) sizes[name] = Number(size);
    }
    for (const p of manifest.processes) if (sizes[p.name] === undefined) readable = false;
    if (!readable) out['no-process-output'] = unknown('MISSING');
    else if (!previousSizes) out['no-process-output'] = { ...unknown('NO_BASELINE'), sizes };
    else {
      const changed = manifest.processes.some((p) => previousSizes[p.name] !== sizes[p.name]);
      out['no-process-output'] = { status: changed ? EVIDENCE_STATUS.ACTIVE : EVIDENCE_STATUS.QUIET, sizes };
    }
  }
  return out;
}

function stateKey(manifest) {
  return JSON.stringify({ quietMs: manifest.idle.quietMs, evidence: manifest.idle.evidence, names: manifest.processes.map((p) => p.name) });
}

function freshState(key) {
  return { v: 1, token: randomBytes(8).toString('hex'), key, sources: {}, outputSizes: null };
}

function stateOf(state, key) {
  if (state === undefined || state === null) return freshState(key);
  const ok =
    typeof state === 'object' &&
    state.v === 1 &&
    typeof state.token === 'string' &&
    /^[0-9a-f]{16}$/.test(state.token) &&
    typeof state.key === 'string' &&
    state.sources &&
    typeof state.sources === 'object';
  if (!ok) throw optionError('state', 'must be the state returned by a previous checkIdle');
  // A changed idle policy or process list starts over: old observations prove nothing.
  return state.key === key ? state : freshState(key);
}

/**
 * Evidence-gated idle: probes every declared evidence source through `router.runScript`
 * (one script per call) and answers idle only when every source has agreed, at every
 * observation and without a gap longer than `quietMs` between observations, for at least
 * `quietMs`. Missing, unreadable or first-time (no baseline) evidence is never quiet. Pass
 * the returned `state` to the next call.
 *
 * @param {{ runScript: Function }} router
 * @param {string} sandboxId
 * @param {object} manifest a manifest with `idle`
 * @param {object} [input] the `state` of the previous result
 * @param {{ timeoutMs?: number }} [options]
 */
async function checkIdle(router, sandboxId, manifest, input, options) {
  checkRouter(router);
  const state = readArg(input, 'state');
  const opts = optionsOf(options, ['timeoutMs']);
  const timeoutMs = intOption(opts, 'timeoutMs', DEFAULT_IDLE_PROBE_TIMEOUT_MS, 1, 3_600_000);
  const normalized = validateManifest(manifest);
  if (!normalized.idle) throw optionError('idle', 'is required by checkIdle');
  const { quietMs, evidence } = normalized.idle;
  const prev = stateOf(state, stateKey(normalized));

  let tags = new Map();
  let probeFailed = false;
  try {
    const res = await router.runScript(sandboxId, { command: idleScript(prev.token, normalized, evidence), timeoutMs });
    if (!res || res.exitCode !== 0 || res.timedOut) probeFailed = true;
    else tags = tagged(res);
  } catch (error) {
    if (isCallerError(error)) throw error;
    probeFailed = true;
  }
  const at = Date.now();
  const read = probeFailed
    ? Object.fromEntries(evidence.map((s) => [s, { status: EVIDENCE_STATUS.UNKNOWN, reason: 'PROBE_FAILED' }]))
    : readEvidence(tags, normalized, evidence, prev.outputSizes);

  const next = { v: 1, token: prev.token, key: prev.key, sources: {}, outputSizes: prev.outputSizes };
  const report = [];
  for (const source of evidence) {
    const r = read[source];
    const before = prev.sources[source];
    let quietSince = null;
    if (r.status === EVIDENCE_STATUS.QUIET) {
      const continuous = before && before.quietSince !== null && typeof before.lastAt === 'number' && at - before.lastAt <= quietMs;
      quietSince = continuous ? before.quietSince : at;
    }
    next.sources[source] = { quietSince, lastAt: at };
    if (source === 'no-process-output') next.outputSizes = r.sizes ?? null;
    const entry = { source, status: r.status, quietForMs: quietSince === null ? 0 : at - quietSince };
    if (r.reason) entry.reason = r.reason;
    report.push(entry);
  }
  const quietForMs = Math.min(...report.map((e) => e.quietForMs));
  const idle = report.every((e) => e.status === EVIDENCE_STATUS.QUIET) && quietForMs >= quietMs;
  return { idle, quietMs, quietForMs, evidence: report, state: next };
}

module.exports = {
  validateManifest,
  planStartup,
  planTeardown,
  startManifest,
  teardownManifest,
  checkIdle,
  ManifestStartError,
  MANIFEST_START_REASONS,
  EVIDENCE_STATUS,
  STATE_DIR,
};
