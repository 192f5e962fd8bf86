'use strict';
// Process manifests, executed through the runtime port only.
//
// Why only `router.runScript`? A manifest must work on every provider without a change to
// the runtime port: no agent inside the sandbox, no provider-specific process API. So every
// action is one POSIX `sh` script sent through `runScript` (lib/manifest-scripts.js writes
// them and parses their tagged output into plain reports).
//
// Who decides what? The native core (src/core/manifest.rs and src/core/manifest/) validates
// the manifest, orders the work, and judges every report: whether a process started in a
// group of its own, is ready, may restart, has run out of time; whether a teardown step
// completed; what each idle source says and whether the sandbox is idle. This module
// performs the work: it reads the caller's values once, runs the scripts, awaits, sleeps,
// feeds the reports back, and builds the documented result objects and errors.

const { binding } = require('./binding.js');
const { SandboxRouterError, SandboxRequestValidationError, SandboxNotFoundError, callNative, isRouterError } = require('./errors.js');
const { guarded, copyOptions } = require('./guard.js');
const { serialize, NotJson } = require('./serialize.js');
/** The scripts, their parsers, and the reports of scripts that never answered. */
const scripts = require('./manifest-scripts.js');

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
// What crosses to the core

/** `value` as JSON text for the core (null: unreadable); a value JSON cannot carry is INVALID_INPUT at its field. */
function textOf(value, prefix, root = prefix) {
  const text = serialize(value);
  if (text instanceof NotJson) throw optionError(text.segments.length === 0 ? root : text.field(prefix), text.expectation);
  return text;
}

/** The manifest as JSON text, or null when it has none or cannot be read (the core refuses that by name, `manifest`). */
function manifestText(manifest) {
  if (manifest === undefined) return null;
  return manifest === null ? 'null' : textOf(manifest, '', 'manifest');
}

function optionError(field, expectation) {
  return new SandboxRequestValidationError(`invalid input: ${field} ${expectation}`, 'INVALID_INPUT', { field });
}

/**
 * The caller's options, read once, as JSON text for the core's check (keys, default,
 * range). A key set to `undefined` crosses as `null` (JSON would drop it, and an unknown
 * key must still be refused).
 */
function optionsText(input) {
  const options = readArg(input, 'options', 2);
  if (options === undefined || options === null) return '{}';
  if (typeof options !== 'object') throw optionError('options', 'must be an object');
  // An array crosses as the object of its indices (as the core reads one: `options.0`).
  const entries = Object.entries(options).map(([k, v]) => [k, v === undefined ? null : v]);
  return textOf(Object.fromEntries(entries), 'options') ?? '';
}

const flushTimeoutOf = (options) => callNative(() => binding.flushTimeoutMs(optionsText(options)));

/** The idle state, read once, as JSON text (null: none; '' when it has no JSON form). */
function stateText(state) {
  return state === undefined || state === null ? null : (textOf(state, 'state') ?? '');
}

/**
 * A native answer as the documented object. The manifest and plan objects have always had
 * their keys in sorted order (the core used to answer with sorted-key JSON); napi sets a
 * record's optional fields after the others, so the keys are put back in that order here.
 */
function documented(value) {
  if (Array.isArray(value)) return value.map(documented);
  if (value === null || typeof value !== 'object') return value;
  const out = {};
  for (const key of Object.keys(value).sort()) out[key] = documented(value[key]);
  return out;
}

/** Validates a manifest; returns it normalized (defaults filled in). Throws `INVALID_INPUT`. */
function validateManifest(manifest) {
  const text = manifestText(manifest);
  return documented(callNative(() => binding.validateManifest(text)));
}

/** The startup plan: `{ waves: [{ wave, processes }], order }`. Throws `INVALID_INPUT`. */
function planStartup(manifest) {
  const text = manifestText(manifest);
  return documented(callNative(() => binding.planStartup(text)));
}

/** The teardown plan: `{ waves: [{ wave, steps: [{ name, phases }] }], order }`. Throws `INVALID_INPUT`. */
function planTeardown(manifest) {
  const text = manifestText(manifest);
  return documented(callNative(() => binding.planTeardown(text)));
}

// ---------------------------------------------------------------------------------------
// Startup

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** Internal: a failure of one process (the core's verdict), turned into a ManifestStartError after teardown. */
class Failure {
  constructor(name, failure) {
    this.name = name;
    this.reason = failure.reason;
    this.details = {};
    if (failure.exitCode !== undefined) this.details.exitCode = failure.exitCode;
    if (failure.timeoutMs !== undefined) this.details.timeoutMs = failure.timeoutMs;
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
  let report;
  try {
    const res = await ctx.router.runScript(ctx.sandboxId, { command: scripts.startScript(p, previousPgid), timeoutMs: binding.SCRIPT_TIMEOUT_MS });
    report = scripts.readStart(res);
  } catch {
    report = scripts.REJECTED_START;
  }
  const failure = callNative(() => binding.judgeStart(report));
  if (failure) throw new Failure(p.name, failure);
  return { pid: report.pid, pgid: report.pgid, startedAt: Date.now() };
}

/** Polls `entry` until the core says it is ready (resolves its readyAfterMs) or failed (throws). */
async function awaitReady(ctx, entry) {
  const { p } = entry;
  for (;;) {
    if (ctx.failed) throw ABORTED;
    const timeoutMs = callNative(() => ctx.native.pollTimeoutMs(p.name, Date.now() - entry.startedAt));
    let res;
    let rejected = false;
    try {
      res = await ctx.router.runScript(ctx.sandboxId, { command: scripts.pollScript(p, entry.pid), timeoutMs });
    } catch {
      rejected = true;
    }
    if (!rejected && ctx.failed) throw ABORTED;
    const elapsedMs = Date.now() - entry.startedAt;
    const report = rejected ? scripts.REJECTED_POLL : scripts.readPoll(res, p.name);
    const verdict = callNative(() => ctx.native.judgePoll(p.name, entry.restarts, elapsedMs, report));
    if (verdict.action === 'ready') return elapsedMs;
    if (verdict.action === 'fail') throw new Failure(p.name, verdict.failure);
    if (verdict.action === 'restart') {
      // The readiness window still counts from the first start.
      const next = await startOne(ctx, p, entry.pgid);
      entry.pid = next.pid;
      entry.pgid = next.pgid;
      entry.restarts += 1;
    } else {
      await sleep(verdict.waitMs);
    }
  }
}

/** Final check: every started process still runs; returns the first failure, or null. */
async function stillRunning(ctx, order) {
  const entries = order.map((n) => ctx.started.get(n));
  let rejected = false;
  let statuses = order.map((name) => ({ name, status: null }));
  try {
    const res = await ctx.router.runScript(ctx.sandboxId, {
      command: scripts.statusScript(entries.map((e) => ({ name: e.p.name, pid: e.pid }))),
      timeoutMs: binding.SCRIPT_TIMEOUT_MS,
    });
    statuses = scripts.readStatuses(res, order);
  } catch {
    rejected = true;
  }
  const gone = callNative(() => binding.judgeStillRunning(rejected, statuses));
  return gone ? new Failure(gone.process, gone.failure) : null;
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
  const flushTimeoutMs = flushTimeoutOf(options);
  const native = callNative(() => new binding.NativeManifest(manifestText(manifest)));
  const normalized = documented(callNative(() => native.normalized()));
  const plan = callNative(() => native.startupPlan());
  // Unknown or malformed sandbox ids reject here, typed, before anything runs.
  if (typeof router.getSandbox === 'function') await router.getSandbox(sandboxId);

  const ctx = { router, sandboxId, native, started: new Map(), failed: false };
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
    // Anything but a judged failure is ours or the runtime's: the runtime failed.
    failure = isFailure(error) ? error : new Failure(plan.order[0], { reason: MANIFEST_START_REASONS.RUNTIME_ERROR });
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

/** The core's stop plan for a `started` value (read once): waves of `{ name, pgid, flushCommand?, signal, graceMs, timeoutMs }`. */
function stopPlanOf(started) {
  if (!started || typeof started !== 'object' || !Array.isArray(started.processes) || !started.manifest) {
    throw optionError('started', 'must be the value startManifest resolved with ({ manifest, processes })');
  }
  // Only what a teardown reads crosses: the rest of an entry may hold anything.
  const processes = started.processes.map((p) => (p !== null && typeof p === 'object' ? { name: p.name, pid: p.pid, pgid: p.pgid } : p));
  const processesText = textOf(processes, 'started.processes') ?? '';
  return callNative(() => binding.stopPlan(processesText, manifestText(started.manifest)));
}

async function stopOne(router, sandboxId, step, flushTimeoutMs) {
  let flush = null;
  if (step.flushCommand !== undefined) {
    try {
      const res = await router.runScript(sandboxId, { command: scripts.flushScript(step.name, step.pgid, step.flushCommand), timeoutMs: flushTimeoutMs });
      flush = scripts.readFlush(res);
    } catch (error) {
      if (isCallerError(error)) throw error;
      flush = scripts.REJECTED_FLUSH;
    }
  }
  let stop;
  try {
    const res = await router.runScript(sandboxId, {
      command: `${scripts.stopScript(step.pgid, step.signal, step.graceMs)}\nrm -f ${scripts.STATE_DIR}/${step.name}.pid`,
      timeoutMs: step.timeoutMs,
    });
    stop = scripts.readStop(res);
  } catch (error) {
    if (isCallerError(error)) throw error;
    stop = scripts.REJECTED_STOP;
  }
  return { name: step.name, flush: binding.judgeFlush(flush), outcome: binding.judgeStop(stop) };
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
  const flushTimeoutMs = flushTimeoutOf(options);
  const plan = stopPlanOf(started);
  const steps = [];
  for (const wave of plan) {
    steps.push(...(await Promise.all(wave.map((s) => stopOne(router, sandboxId, s, flushTimeoutMs)))));
  }
  const complete = binding.teardownComplete(steps.map((s) => s.outcome));
  return { complete, steps };
}

// ---------------------------------------------------------------------------------------
// Evidence-gated idle

/** The opaque, JSON-serializable `state` of a check, from the core's typed one. */
function stateObject(s) {
  return {
    v: s.v,
    token: s.token,
    key: s.key,
    sources: Object.fromEntries(s.sources.map((x) => [x.source, { quietSince: x.quietSince, lastAt: x.lastAt }])),
    outputSizes: s.outputSizes === undefined ? null : Object.fromEntries(s.outputSizes.map((o) => [o.name, o.size])),
  };
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
  const timeoutMs = callNative(() => binding.idleProbeTimeoutMs(optionsText(options)));
  const observer = callNative(() => new binding.IdleObserver(manifestText(manifest), stateText(state)));

  let probe;
  try {
    const res = await router.runScript(sandboxId, { command: scripts.idleScript(observer.token, observer.processNames, observer.evidence), timeoutMs });
    probe = scripts.readIdleProbe(res);
  } catch (error) {
    if (isCallerError(error)) throw error;
    probe = scripts.UNANSWERED_IDLE_PROBE;
  }
  const check = callNative(() => observer.conclude(probe, Date.now()));
  return { idle: check.idle, quietMs: check.quietMs, quietForMs: check.quietForMs, evidence: check.evidence, state: stateObject(check.state) };
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
  STATE_DIR: scripts.STATE_DIR,
};
