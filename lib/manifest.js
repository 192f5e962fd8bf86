'use strict';
// Process manifests, executed through the runtime port only: every action is one POSIX `sh`
// script the core wrote, sent through `router.runScript`, so a manifest works on every
// provider unchanged (docs/process-manifests.md). The core (src/core/manifest.rs,
// src/core/manifest/) validates, plans and judges every answer; this module reads the
// caller's values once, runs the scripts, awaits, sleeps, and builds the documented results.

const { binding } = require('./binding.js');
const { ManifestStartError, SandboxRequestValidationError, SandboxNotFoundError, callNative, fromNative, isRouterError, refuse } = require('./errors.js');
const { guarded, copyOptions, readOr } = require('./guard.js');
const { readFacts } = require('./facts.js');
const { serialize, NotJson } = require('./serialize.js');

/** A caller's argument, read once inside a guard: a throwing getter or trap is INVALID_INPUT naming `field`. */
function readArg(value, field, depth = 6) {
  try {
    return copyOptions(value, depth);
  } catch {
    throw fromNative(binding.unreadableInput(field));
  }
}

/** Why a start failed, each constant with one meaning (the core's `StartFailureReason`). */
const MANIFEST_START_REASONS = Object.freeze(Object.fromEntries(binding.manifestStartReasons().map((r) => [r, r])));

// ---------------------------------------------------------------------------------------
// What crosses to the core

/** `value` as JSON text for the core (null: unreadable); a value JSON cannot carry is INVALID_INPUT at its field. */
function textOf(value, prefix, root = prefix) {
  const text = serialize(value);
  if (text instanceof NotJson) refuse(() => binding.notJsonError('input', text.segments, text.what, text.segments.length === 0 ? root : prefix));
  return text;
}

/** The manifest as JSON text, or null when it has none or cannot be read (the core refuses that by name, `manifest`). */
function manifestText(manifest) {
  if (manifest === undefined) return null;
  return manifest === null ? 'null' : textOf(manifest, '', 'manifest');
}

/**
 * The caller's options, read once, as JSON text for the core's check. A key set to
 * `undefined` crosses as `null` (JSON would drop it, and an unknown key must still be refused).
 */
function optionsText(input) {
  const options = readArg(input, 'options', 2);
  if (options === undefined || options === null) return '{}';
  if (typeof options !== 'object') return textOf(options, 'options') ?? '';
  // An array crosses as the object of its indices (as the core reads one: `options.0`).
  const entries = Object.entries(options).map(([k, v]) => [k, v === undefined ? null : v]);
  return textOf(Object.fromEntries(entries), 'options') ?? '';
}

const flushTimeoutOf = (options) => callNative(() => binding.flushTimeoutMs(optionsText(options)));

/** The idle state, read once, as JSON text (null: none; '' when it has no JSON form). */
function stateText(state) {
  return state === undefined || state === null ? null : (textOf(state, 'state') ?? '');
}

/** A native answer as the documented object: keys sorted, as they always were (napi sets optional fields last). */
function documented(value) {
  if (Array.isArray(value)) return value.map(documented);
  if (value === null || typeof value !== 'object') return value;
  const out = {};
  for (const key of Object.keys(value).sort()) out[key] = documented(value[key]);
  return out;
}

/** Validates a manifest; returns it normalized (defaults filled in). Throws `INVALID_INPUT`. */
function validateManifest(manifest) {
  return documented(callNative(() => binding.validateManifest(manifestText(manifest))));
}

/** The startup plan: `{ waves: [{ wave, processes }], order }`. Throws `INVALID_INPUT`. */
function planStartup(manifest) {
  return documented(callNative(() => binding.planStartup(manifestText(manifest))));
}

/** The teardown plan: `{ waves: [{ wave, steps: [{ name, phases }] }], order }`. Throws `INVALID_INPUT`. */
function planTeardown(manifest) {
  return documented(callNative(() => binding.planTeardown(manifestText(manifest))));
}

// ---------------------------------------------------------------------------------------
// Startup

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** Internal: a failure of one process (the core's verdict), turned into a ManifestStartError after teardown. */
class Failure {
  constructor(name, failure) {
    this.name = name;
    this.reason = failure.reason;
    // An undefined field is no field of the error (SandboxRouterError skips it).
    this.details = { exitCode: failure.exitCode, timeoutMs: failure.timeoutMs };
  }
}
const ABORTED = Symbol('aborted');
/** Whether `e` is one of our Failures (guarded: a thrown value may be a hostile Proxy). */
const isFailure = (e) => readOr(() => e instanceof Failure, false);

function checkRouter(router) {
  const ok = readOr(() => Boolean(router) && typeof router.runScript === 'function', false);
  callNative(() => binding.checkManifestRouter(ok));
}

function isCallerError(error) {
  return isRouterError(error) && (error instanceof SandboxNotFoundError || error instanceof SandboxRequestValidationError);
}

/** What a script's `runScript` resolved with, read once inside a guard (`ScriptAnswerRecord`). */
function answerOf(result) {
  const text = (v) => (typeof v === 'string' ? v : null);
  return guarded(() => ({
    answered: Boolean(result),
    stdout: text(result?.stdout),
    output: text(result?.output),
    exitCode: typeof result?.exitCode === 'number' ? result.exitCode : null,
    timedOut: Boolean(result?.timedOut),
  }));
}

/**
 * Runs a core script through the router: its answer, or null on a rejection or an unreadable
 * answer. With `callerErrors`, a caller's error (an unknown or malformed sandbox id) rethrows.
 */
async function run(router, sandboxId, command, timeoutMs, callerErrors = false) {
  try {
    return answerOf(await router.runScript(sandboxId, { command, timeoutMs }));
  } catch (error) {
    if (callerErrors && isCallerError(error)) throw error;
    return null;
  }
}

/** Starts `p` in the background; resolves `{ pid, pgid, startedAt }`. */
async function startOne(ctx, p, previousPgid) {
  const command = callNative(() => ctx.native.startScript(p.name, previousPgid));
  const answer = await run(ctx.router, ctx.sandboxId, command, binding.SCRIPT_TIMEOUT_MS);
  const started = callNative(() => binding.judgeStart(answer));
  if (started.failure) throw new Failure(p.name, started.failure);
  return { pid: started.pid, pgid: started.pgid, startedAt: Date.now() };
}

/** Polls `entry` until the core says it is ready (resolves its readyAfterMs) or failed (throws). */
async function awaitReady(ctx, entry) {
  const { p } = entry;
  for (;;) {
    if (ctx.failed) throw ABORTED;
    const timeoutMs = callNative(() => ctx.native.pollTimeoutMs(p.name, Date.now() - entry.startedAt));
    const command = callNative(() => ctx.native.pollScript(p.name, entry.pid));
    const answer = await run(ctx.router, ctx.sandboxId, command, timeoutMs);
    if (answer !== null && ctx.failed) throw ABORTED;
    const elapsedMs = Date.now() - entry.startedAt;
    const verdict = callNative(() => ctx.native.judgePoll(p.name, entry.restarts, elapsedMs, answer));
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
  const command = callNative(() => binding.statusScript(order.map((name) => ({ name, pid: ctx.started.get(name).pid }))));
  const answer = await run(ctx.router, ctx.sandboxId, command, binding.SCRIPT_TIMEOUT_MS);
  const gone = callNative(() => binding.judgeStillRunning(answer, order));
  return gone ? new Failure(gone.process, gone.failure) : null;
}

/**
 * Starts a manifest wave by wave and resolves once every readiness probe passed (the sandbox
 * is *useful*); on a failure, tears down what was started and rejects with a ManifestStartError.
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
  try {
    for (const wave of plan.waves) {
      const settled = await Promise.allSettled(
        wave.processes.map(async (p) => {
          try {
            const entry = { p, restarts: 0, readyAfterMs: null, ...(await startOne(ctx, p)) };
            ctx.started.set(p.name, entry);
            entry.readyAfterMs = await awaitReady(ctx, entry);
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
    // Anything but a judged failure is ours or the runtime's: the core's verdict on that.
    const unjudged = isFailure(error) ? null : callNative(() => native.runtimeFailure());
    const failure = unjudged === null ? error : new Failure(unjudged.process, unjudged.failure);
    const started = [...ctx.started.values()].map((e) => ({ name: e.p.name, pid: e.pid, pgid: e.pgid }));
    let teardown;
    try {
      teardown = await teardownManifest(router, sandboxId, { manifest: normalized, processes: started }, { flushTimeoutMs });
    } catch (teardownError) {
      if (isCallerError(teardownError)) throw teardownError;
      teardown = { complete: false, steps: [] };
    }
    throw new ManifestStartError(failure.name, failure.reason, { sandboxId, ...failure.details, teardown });
  }
  const processes = plan.order.map((name) => {
    const { pid, pgid, readyAfterMs, restarts } = ctx.started.get(name);
    return { name, pid, pgid, readyAfterMs, restarts };
  });
  return { useful: true, sandboxId, manifest: normalized, processes };
}

// ---------------------------------------------------------------------------------------
// Teardown

/** The core's stop plan for a `started` value (read once): waves of `{ name, pgid, flushCommand?, signal, graceMs, timeoutMs }`. */
function stopPlanOf(input) {
  const { copy: started, facts } = readFacts(input, 6);
  if (facts === null) throw fromNative(binding.unreadableInput('started'));
  callNative(() => binding.checkStarted(facts));
  // Only what a teardown reads crosses: the rest of an entry may hold anything.
  const processes = started.processes.map((p) => (p !== null && typeof p === 'object' ? { name: p.name, pid: p.pid, pgid: p.pgid } : p));
  const processesText = textOf(processes, 'started.processes') ?? '';
  return callNative(() => binding.stopPlan(processesText, manifestText(started.manifest)));
}

/** Stops one step of the core's plan: its flush script (when it has one), then its stop script. */
async function stopOne(router, sandboxId, step, flushTimeoutMs) {
  const declared = step.flushScript !== undefined;
  const flushed = declared ? await run(router, sandboxId, step.flushScript, flushTimeoutMs, true) : null;
  const stopped = await run(router, sandboxId, step.script, step.timeoutMs, true);
  return { name: step.name, flush: binding.judgeFlush(declared, flushed), outcome: binding.judgeStop(stopped) };
}

/**
 * Tears a started manifest (what startManifest resolved with) down in teardown order, each
 * process history-safe (flush, signal, `graceMs`, `SIGKILL`), a wave's processes concurrently.
 * Resolves with a report: `complete` is false when a step failed or a group survived `SIGKILL`.
 */
async function teardownManifest(router, sandboxId, input, options) {
  checkRouter(router);
  const flushTimeoutMs = flushTimeoutOf(options);
  const plan = stopPlanOf(input);
  const steps = [];
  for (const wave of plan) {
    steps.push(...(await Promise.all(wave.map((s) => stopOne(router, sandboxId, s, flushTimeoutMs)))));
  }
  return { complete: binding.teardownComplete(steps.map((s) => s.outcome)), steps };
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
 * Evidence-gated idle: probes every evidence source of `manifest.idle` in one script; idle only
 * when every source agreed for at least `quietMs` (the core's verdict). `input`: the previous
 * result's `state`.
 */
async function checkIdle(router, sandboxId, manifest, input, options) {
  checkRouter(router);
  const state = readArg(input, 'state');
  const timeoutMs = callNative(() => binding.idleProbeTimeoutMs(optionsText(options)));
  const observer = callNative(() => new binding.IdleObserver(manifestText(manifest), stateText(state)));

  const answer = await run(router, sandboxId, callNative(() => observer.script()), timeoutMs, true);
  const check = callNative(() => observer.conclude(answer, Date.now()));
  return { idle: check.idle, quietMs: check.quietMs, quietForMs: check.quietForMs, evidence: check.evidence, state: stateObject(check.state) };
}

module.exports = { validateManifest, planStartup, planTeardown, startManifest, teardownManifest, checkIdle, ManifestStartError, MANIFEST_START_REASONS };
