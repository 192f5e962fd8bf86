'use strict';
// @agent-relay/sandbox-router/local: the embedded local runtime.
//
// A `SandboxRuntime` (see the port in the router's docs) backed by real child processes
// and a private directory per sandbox, so the library works offline, in tests and in CI.
//
// ┌──────────────────────────────────────────────────────────────────────────────────────┐
// │ THIS IS NOT A SECURITY BOUNDARY. Commands run as the CURRENT USER, ON THE HOST, with │
// │ the host's network, with a plain working directory as their only "sandbox". They can │
// │ read and write anything that user can, open any connection, and escape their process │
// │ group (setsid) so that destroy() cannot find them. Path confinement in uploadBundle  │
// │ protects against caller mistakes, not against hostile code running in the sandbox.  │
// │ Declare it honestly: see LOCAL_CAPABILITIES (isolation 'none', egress 'open').       │
// └──────────────────────────────────────────────────────────────────────────────────────┘
//
// Design choices (also documented in index.d.ts):
// - runScript spawns `shell -c command` detached (its own session and process group),
//   resolves once stdout and stderr are closed (like child_process.exec), and returns
//   `output` = stdout followed by stderr (NOT interleaved: two pipes carry no ordering).
// - On timeout the whole process group gets SIGKILL and runScript RESOLVES with
//   `exitCode: null`, `timedOut: true`, and a `[LOCAL_TIMEOUT] ...` note appended to
//   stderr; it does not throw, so the caller still sees the partial output.
// - Background processes started by a command (`cmd >/dev/null 2>&1 &`) keep running
//   after runScript returns (longRunningProcesses). Their process group is remembered per
//   sandbox and killed by stop(), destroy() and close().
// - uploadBundle: a string `source` is the file CONTENT (UTF-8), never a path to read.
// - Every sandbox has a record file beside its directory (`<rootDir>/<id>.json`: id, name,
//   labels, createdAt), written atomically BEFORE the directory. With a caller-given
//   `rootDir`, lookups (getById, the label queries) and destroy also see sandboxes that
//   another process launched there, including one that was killed: that is what lets the
//   router's reconcile find a crashed process's stamped sandboxes. (A private temporary
//   root is this process's alone, so nothing else can look there.)

const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const fsp = require('node:fs/promises');
const os = require('node:os');
const path = require('node:path');
const { copyOptions } = require('../lib/guard.js');

/** Longest caller text (in UTF-16 units) that a message or field echoes; longer text is cut. */
const MAX_ECHO = 64;

/** `text` for a message: at most MAX_ECHO characters, the cut marked `…[+N chars]`. */
function shown(text) {
  if (typeof text !== 'string') return '(not a string)';
  return text.length <= MAX_ECHO ? text : `${text.slice(0, MAX_ECHO)}…[+${text.length - MAX_ECHO} chars]`;
}

const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_SHELL = '/bin/sh';
const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;
/** setTimeout clamps larger delays to 1 ms; refuse them instead. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** After a SIGKILL, how long to wait for the pipes to close before giving up on them. */
const KILL_GRACE_MS = 1_000;
const ROOT_PREFIX = 'sandbox-router-local-';
/** A sandbox record file: `local-` + 16 hex + `.json`. */
const RECORD_FILE = /^(local-[0-9a-f]{16})\.json$/;
const KNOWN_OPTIONS = ['rootDir', 'defaultTimeoutMs', 'shell', 'maxOutputBytes'];

/**
 * The honest capability declaration for a pool backed by this runtime, in the router's
 * vocabulary. NOT a security boundary: isolation is 'none' (host processes, current user)
 * and egress is 'open' (the host's network).
 */
const LOCAL_CAPABILITIES = deepFreeze({
  supported: ['syncExec', 'fileTransfer', 'longRunningProcesses'],
  isolation: 'none',
  egress: 'open',
  stateDurability: 'ephemeral',
  timeout: { semantics: ['command-lifetime'] },
});

/** Every `code` a LocalRuntimeError can carry. */
const LOCAL_ERROR_CODES = deepFreeze([
  'LOCAL_INVALID_OPTIONS',
  'LOCAL_INVALID_ARGUMENT',
  'LOCAL_SANDBOX_NOT_FOUND',
  'LOCAL_SANDBOX_STOPPED',
  'LOCAL_PATH_ESCAPE',
  'LOCAL_SPAWN_FAILED',
  'LOCAL_IO_ERROR',
  'LOCAL_CLOSED',
]);

/** Errors thrown by the local runtime; `code` is stable, the message is for humans. */
class LocalRuntimeError extends Error {
  /**
   * @param {string} message
   * @param {string} code
   * @param {{ cause?: unknown, sandboxId?: string, path?: string, field?: string }} [details]
   */
  constructor(message, code, details = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'LocalRuntimeError';
    this.code = code;
    if (details.sandboxId !== undefined) this.sandboxId = details.sandboxId;
    if (details.path !== undefined) this.path = details.path;
    if (details.field !== undefined) this.field = details.field;
  }
}

function deepFreeze(value) {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

function isPlainObject(v) {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function invalid(message, field) {
  return new LocalRuntimeError(message, 'LOCAL_INVALID_ARGUMENT', { field });
}

function checkTimerMs(value, field, code) {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_TIMER_MS) {
    const msg = `${field} must be a finite number of milliseconds in (0, ${MAX_TIMER_MS}], got ${describe(value)}`;
    return new LocalRuntimeError(msg, code, { field });
  }
  return null;
}

/**
 * Every argument of a public method, read once inside a guard into plain copies (see
 * lib/guard.js): a Proxy that throws, a revoked Proxy or a throwing getter becomes a typed
 * LOCAL_INVALID_ARGUMENT, and nothing below reads the caller's objects again.
 */
function readArgs(method, args) {
  try {
    return args.map((a) => copyOptions(a, 4));
  } catch {
    throw invalid(`${method}: an argument could not be read (a property access threw)`, 'arguments');
  }
}

// Values are described by kind, never echoed: a value may be a secret (an env entry, a token
// passed by mistake).
function describe(v) {
  if (typeof v === 'string') return `a string of ${v.length} characters`;
  if (typeof v === 'number' || typeof v === 'boolean' || v === null || v === undefined) return String(v);
  return Array.isArray(v) ? 'an array' : `a ${typeof v}`;
}

/** Validates a string→string map (env or labels). `undefined` → {}. */
function checkStringMap(value, field, { envKeys = false } = {}) {
  if (value === undefined) return {};
  if (!isPlainObject(value)) throw invalid(`${field} must be a plain object of string values, got ${describe(value)}`, field);
  const out = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw invalid(`${field}.${shown(k)} must be a string, got ${describe(v)}`, `${field}.${shown(k)}`);
    if (envKeys && (k === '' || k.includes('=') || k.includes('\0'))) {
      throw invalid(`${field} key ${JSON.stringify(shown(k))} is not a valid environment variable name`, field);
    }
    if (v.includes('\0')) throw invalid(`${field}.${shown(k)} must not contain NUL bytes`, `${field}.${shown(k)}`);
    out[k] = v;
  }
  return out;
}

function checkOptions(input) {
  let options;
  try {
    options = copyOptions(input, 2);
  } catch {
    throw new LocalRuntimeError('local runtime options could not be read (a property access threw)', 'LOCAL_INVALID_OPTIONS');
  }
  if (options === undefined || options === null) options = {};
  if (!isPlainObject(options)) {
    throw new LocalRuntimeError(`local runtime options must be a plain object, got ${describe(options)}`, 'LOCAL_INVALID_OPTIONS');
  }
  for (const key of Object.keys(options)) {
    if (!KNOWN_OPTIONS.includes(key)) {
      throw new LocalRuntimeError(
        `unknown local runtime option ${JSON.stringify(shown(key))} (known: ${KNOWN_OPTIONS.join(', ')})`,
        'LOCAL_INVALID_OPTIONS',
        { field: shown(key) },
      );
    }
  }
  const { rootDir, defaultTimeoutMs, shell, maxOutputBytes } = options;
  if (rootDir !== undefined && (typeof rootDir !== 'string' || rootDir === '' || rootDir.includes('\0'))) {
    throw new LocalRuntimeError(`rootDir must be a non-empty path string, got ${describe(rootDir)}`, 'LOCAL_INVALID_OPTIONS', {
      field: 'rootDir',
    });
  }
  if (defaultTimeoutMs !== undefined) {
    const err = checkTimerMs(defaultTimeoutMs, 'defaultTimeoutMs', 'LOCAL_INVALID_OPTIONS');
    if (err) throw err;
  }
  if (shell !== undefined && (typeof shell !== 'string' || shell === '' || shell.includes('\0'))) {
    throw new LocalRuntimeError(`shell must be a non-empty string, got ${describe(shell)}`, 'LOCAL_INVALID_OPTIONS', { field: 'shell' });
  }
  if (maxOutputBytes !== undefined && (!Number.isSafeInteger(maxOutputBytes) || maxOutputBytes < 0)) {
    throw new LocalRuntimeError(`maxOutputBytes must be a non-negative integer, got ${describe(maxOutputBytes)}`, 'LOCAL_INVALID_OPTIONS', {
      field: 'maxOutputBytes',
    });
  }
  return {
    rootDir: rootDir === undefined ? null : path.resolve(rootDir),
    defaultTimeoutMs: defaultTimeoutMs ?? DEFAULT_TIMEOUT_MS,
    shell: shell ?? DEFAULT_SHELL,
    maxOutputBytes: maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES,
  };
}

/** True when `child` is `parent` or inside it (both absolute, normalized). */
function isInside(parent, child) {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith(`..${path.sep}`) && rel !== '..' && !path.isAbsolute(rel));
}

/** SIGKILL a process group; returns false when the group no longer exists. */
function killGroup(pgid) {
  try {
    process.kill(-pgid, 'SIGKILL');
    return true;
  } catch (err) {
    return err && err.code !== 'ESRCH';
  }
}

/** True while some process still has process group `pgid`. */
function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return err && err.code === 'EPERM';
  }
}

/**
 * The subset of `pgids` that still has a running (non-zombie) member. Killed orphans are
 * reparented to init, which may reap them late, and a zombie still counts for kill(-pgid, 0);
 * on Linux /proc tells them apart. Elsewhere, falls back to kill(-pgid, 0).
 */
function groupsWithRunningMembers(pgids) {
  const wanted = new Set(pgids);
  const live = new Set();
  if (wanted.size === 0) return live;
  let entries = null;
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    /* no procfs */
  }
  if (!entries) {
    for (const g of wanted) if (groupAlive(g)) live.add(g);
    return live;
  }
  for (const name of entries) {
    if (!/^[0-9]+$/.test(name)) continue;
    let stat;
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // pid (comm) state ppid pgrp ...: comm may contain spaces and parentheses
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const pgrp = Number(fields[2]);
    if (wanted.has(pgrp) && fields[0] !== 'Z' && fields[0] !== 'X') live.add(pgrp);
  }
  return live;
}

// One shared, best-effort 'exit' hook for every open runtime, installed only while at least
// one runtime holds sandboxes or a temp root, removed as soon as none does.
const liveRuntimes = new Set();
function onProcessExit() {
  for (const rt of liveRuntimes) rt._cleanupSync();
}
function trackLive(rt, live) {
  if (live) liveRuntimes.add(rt);
  else liveRuntimes.delete(rt);
  const installed = process.listeners('exit').includes(onProcessExit);
  if (liveRuntimes.size > 0 && !installed) process.on('exit', onProcessExit);
  else if (liveRuntimes.size === 0 && installed) process.removeListener('exit', onProcessExit);
}

/**
 * A SandboxRuntime backed by host child processes. NOT a security boundary.
 */
class LocalSandboxRuntime {
  /** Adapter kind. */
  get id() {
    return 'local';
  }

  /** Provider-declared lifecycle facts (see the port): no warm lease, real stop/start. */
  get declaredCapabilities() {
    return { warmLease: false, lifecycle: true };
  }

  #opts;
  /** @type {string | null} */
  #root = null;
  #ownsRoot = false;
  #closed = false;
  /** @type {Map<string, object>} */
  #sandboxes = new Map();

  /** @param {object} [options] */
  constructor(options) {
    this.#opts = checkOptions(options);
  }

  /** The root directory, or null until the first launch creates it (and after close). */
  get rootDir() {
    return this.#root;
  }

  /** True once close() was called. */
  get closed() {
    return this.#closed;
  }

  // ── acquisition ────────────────────────────────────────────────────────────────────

  async launch(options) {
    [options] = readArgs('launch', [options]);
    this.#assertOpen();
    if (options === undefined || options === null) options = {};
    if (!isPlainObject(options)) throw invalid(`launch options must be a plain object, got ${describe(options)}`, 'options');
    const { name, env, labels, createTimeoutSeconds } = options;
    if (name !== undefined && typeof name !== 'string') throw invalid(`name must be a string, got ${describe(name)}`, 'name');
    const launchEnv = checkStringMap(env, 'env', { envKeys: true });
    const launchLabels = checkStringMap(labels, 'labels');
    if (
      createTimeoutSeconds !== undefined &&
      (typeof createTimeoutSeconds !== 'number' || !Number.isFinite(createTimeoutSeconds) || createTimeoutSeconds <= 0)
    ) {
      throw invalid(`createTimeoutSeconds must be a positive number, got ${describe(createTimeoutSeconds)}`, 'createTimeoutSeconds');
    }
    // createTimeoutSeconds is accepted and ignored: creating a directory does not boot.

    const root = this.#ensureRoot();
    const createdAt = new Date().toISOString();
    let id;
    let dir;
    for (;;) {
      id = `local-${crypto.randomBytes(8).toString('hex')}`;
      dir = path.join(root, id);
      // The record first, atomically and exclusively (link fails on an existing name): a
      // process killed at any point leaves either no record or a whole one, and a whole one
      // is a sandbox that lookups find (its directory may still be missing).
      try {
        writeRecord(root, id, { id, name: name ?? null, labels: launchLabels, createdAt });
        break;
      } catch (err) {
        if (err.code === 'EEXIST') continue; // 64 random bits: practically never
        throw new LocalRuntimeError(`cannot record sandbox ${id} in ${root}: ${err.message}`, 'LOCAL_IO_ERROR', { cause: err, path: root });
      }
    }
    try {
      fs.mkdirSync(dir, { mode: 0o700 });
    } catch (err) {
      removeRecord(root, id);
      throw new LocalRuntimeError(`cannot create sandbox directory ${dir}: ${err.message}`, 'LOCAL_IO_ERROR', { cause: err, path: dir });
    }
    try {
      fs.chmodSync(dir, 0o700); // the umask may have narrowed it; never widened
      dir = fs.realpathSync(dir); // canonical, so absolute upload destinations compare exactly
    } catch (err) {
      fs.rmSync(dir, { recursive: true, force: true });
      removeRecord(root, id);
      throw new LocalRuntimeError(`cannot prepare sandbox directory ${dir}: ${err.message}`, 'LOCAL_IO_ERROR', { cause: err, path: dir });
    }
    const sb = {
      id,
      name: name ?? null,
      dir,
      labels: launchLabels,
      env: launchEnv,
      state: 'started',
      createdAt,
      root,
      homeDir: dir,
      workdir: dir,
      /** pgid → true, for every command whose group may still have live members */
      groups: new Set(),
      /** pid → Promise resolved when that runScript settles */
      running: new Map(),
    };
    this.#sandboxes.set(id, sb);
    trackLive(this, true);
    return toHandle(sb);
  }

  /** Same as launch: a local sandbox is ready as soon as its directory exists. */
  launchDetached(options) {
    return this.launch(options);
  }

  // ── lookup ──────────────────────────────────────────────────────────────────────────

  async getById(id, options) {
    [id, options] = readArgs('getById', [id, options]);
    if (typeof id !== 'string') throw invalid(`id must be a string, got ${describe(id)}`, 'id');
    const states = checkStates(options);
    const sb = this.#sandboxes.get(id) ?? this.#adopt(id);
    if (!sb || (states && !states.includes(sb.state))) return null;
    return toHandle(sb);
  }

  async findByLabels(labels, options) {
    [labels, options] = readArgs('findByLabels', [labels, options]);
    const [first] = this.#match(labels, options, 1);
    return first ? toHandle(first) : null;
  }

  async findAllByLabels(labels, options) {
    [labels, options] = readArgs('findAllByLabels', [labels, options]);
    const limit = options?.limit;
    if (limit !== undefined && limit !== null && (!Number.isSafeInteger(limit) || limit < 0)) {
      throw invalid(`limit must be a non-negative integer, got ${describe(limit)}`, 'limit');
    }
    return this.#match(labels, options, limit ?? Infinity).map(toHandle);
  }

  async countByLabels(labels, options) {
    [labels, options] = readArgs('countByLabels', [labels, options]);
    const maxCount = options?.maxCount;
    if (maxCount !== undefined && maxCount !== null && (!Number.isSafeInteger(maxCount) || maxCount < 0)) {
      throw invalid(`maxCount must be a non-negative integer, got ${describe(maxCount)}`, 'maxCount');
    }
    return this.#match(labels, options, maxCount ?? Infinity).length;
  }

  #match(labels, options, limit) {
    const wanted = Object.entries(checkStringMap(labels ?? undefined, 'labels'));
    const states = checkStates(options);
    const exclude = options?.excludeIds;
    if (exclude !== undefined && exclude !== null && (!Array.isArray(exclude) || exclude.some((x) => typeof x !== 'string'))) {
      throw invalid('excludeIds must be an array of strings', 'excludeIds');
    }
    const excluded = new Set(exclude ?? []);
    const out = [];
    if (limit <= 0) return out;
    for (const sb of [...this.#sandboxes.values(), ...this.#onDisk()]) {
      if (excluded.has(sb.id)) continue;
      if (states && !states.includes(sb.state)) continue;
      if (!wanted.every(([k, v]) => Object.prototype.hasOwnProperty.call(sb.labels, k) && sb.labels[k] === v)) continue;
      out.push(sb);
      if (out.length >= limit) break;
    }
    return out;
  }

  // ── exec ────────────────────────────────────────────────────────────────────────────

  async runScript(handle, options) {
    [handle, options] = readArgs('runScript', [handle, options]);
    const sb = this.#require(handle);
    if (!isPlainObject(options)) throw invalid(`runScript options must be a plain object, got ${describe(options)}`, 'options');
    const { command, timeoutMs, env, sessionId } = options;
    if (typeof command !== 'string' || command.includes('\0')) {
      throw invalid(`command must be a string without NUL bytes, got ${describe(command)}`, 'command');
    }
    if (timeoutMs !== undefined) {
      const err = checkTimerMs(timeoutMs, 'timeoutMs', 'LOCAL_INVALID_ARGUMENT');
      if (err) throw err;
    }
    if (sessionId !== undefined && typeof sessionId !== 'string') {
      throw invalid(`sessionId must be a string, got ${describe(sessionId)}`, 'sessionId');
    }
    // sessionId is accepted and ignored: every command runs in a fresh shell.
    const cmdEnv = checkStringMap(env, 'env', { envKeys: true });
    this.#assertStarted(sb);
    if (!fs.existsSync(sb.dir)) {
      throw new LocalRuntimeError(`sandbox ${sb.id}: its directory ${sb.dir} no longer exists`, 'LOCAL_SANDBOX_NOT_FOUND', {
        sandboxId: sb.id,
      });
    }
    this.#prune(sb);
    return this.#exec(sb, command, timeoutMs ?? this.#opts.defaultTimeoutMs, cmdEnv);
  }

  #exec(sb, command, timeoutMs, cmdEnv) {
    const limit = this.#opts.maxOutputBytes;
    return new Promise((resolve, reject) => {
      let child;
      try {
        child = spawn(this.#opts.shell, ['-c', command], {
          cwd: sb.dir,
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: sb.dir, ...sb.env, ...cmdEnv },
          detached: true, // own session + process group: the group can be killed as a whole
          stdio: ['ignore', 'pipe', 'pipe'],
        });
      } catch (err) {
        reject(new LocalRuntimeError(`cannot spawn ${this.#opts.shell}: ${err.message}`, 'LOCAL_SPAWN_FAILED', { cause: err, sandboxId: sb.id }));
        return;
      }
      const out = collector(limit);
      const errs = collector(limit);
      child.stdout.on('data', out.push);
      child.stderr.on('data', errs.push);

      let settled = false;
      let timedOut = false;
      let killReason = null;
      let exitCode = null;
      let signal = null;
      let timer = null;
      let graceTimer = null;
      let finishRunning;
      const done = new Promise((r) => (finishRunning = r));

      // After we kill the group, do not wait forever for pipes still held by a process
      // that escaped it (setsid): give up on the pipes after a short grace period.
      const killNow = () => {
        killGroup(child.pid);
        if (graceTimer !== null || settled) return;
        graceTimer = setTimeout(() => {
          child.stdout.destroy();
          child.stderr.destroy();
          finish();
        }, KILL_GRACE_MS);
        graceTimer.unref();
      };

      const finish = (error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        clearTimeout(graceTimer);
        if (child.pid !== undefined) {
          sb.running.delete(child.pid);
          if (!groupAlive(child.pid)) sb.groups.delete(child.pid);
        }
        finishRunning();
        if (error) {
          reject(error);
          return;
        }
        const stdout = out.text();
        let stderr = errs.text();
        const notes = [];
        if (out.dropped) notes.push(`[LOCAL_OUTPUT_TRUNCATED] stdout truncated at ${limit} bytes (${out.dropped} bytes dropped)`);
        if (errs.dropped) notes.push(`[LOCAL_OUTPUT_TRUNCATED] stderr truncated at ${limit} bytes (${errs.dropped} bytes dropped)`);
        if (timedOut) notes.push(`[LOCAL_TIMEOUT] command timed out after ${timeoutMs} ms; its process group was killed (SIGKILL)`);
        else if (killReason) notes.push(`[LOCAL_KILLED] command killed because the sandbox was ${killReason}`);
        if (notes.length) stderr += `${stderr === '' || stderr.endsWith('\n') ? '' : '\n'}${notes.join('\n')}\n`;
        resolve({
          output: stdout + stderr,
          stdout,
          stderr,
          exitCode: timedOut || killReason ? null : exitCode,
          signal,
          timedOut,
          truncated: out.dropped > 0 || errs.dropped > 0,
        });
      };

      child.on('error', (err) => {
        // spawn failures (ENOENT shell, EACCES, ...) arrive here without a pid
        finish(new LocalRuntimeError(`cannot run ${this.#opts.shell}: ${err.message}`, 'LOCAL_SPAWN_FAILED', { cause: err, sandboxId: sb.id }));
      });
      child.on('exit', (code, sig) => {
        exitCode = code;
        signal = sig;
      });
      child.on('close', (code, sig) => {
        if (code !== null || sig !== null) {
          exitCode = code;
          signal = sig;
        }
        finish();
      });
      if (child.pid === undefined) return; // 'error' follows

      sb.groups.add(child.pid);
      sb.running.set(child.pid, {
        done,
        kill: (reason) => {
          if (settled) return;
          killReason ??= reason;
          killNow();
        },
      });
      timer = setTimeout(() => {
        if (!killReason) timedOut = true;
        killNow();
      }, timeoutMs);
    });
  }

  // ── files ───────────────────────────────────────────────────────────────────────────

  async uploadBundle(handle, bundle) {
    [handle, bundle] = readArgs('uploadBundle', [handle, bundle]);
    const sb = this.#require(handle);
    if (!isPlainObject(bundle) || !Array.isArray(bundle.files)) {
      throw invalid('uploadBundle expects { files: Array<{ source, destination }> }', 'files');
    }
    this.#assertStarted(sb);
    // Validate every entry lexically before writing anything.
    const plan = bundle.files.map((file, i) => {
      if (!isPlainObject(file)) throw invalid(`files[${i}] must be an object { source, destination }`, `files[${i}]`);
      const { source, destination } = file;
      let data;
      if (typeof source === 'string') data = Buffer.from(source, 'utf8');
      else if (Buffer.isBuffer(source)) data = source;
      else if (source instanceof Uint8Array) data = Buffer.from(source.buffer, source.byteOffset, source.byteLength);
      else throw invalid(`files[${i}].source must be a string (file content) or a Buffer, got ${describe(source)}`, `files[${i}].source`);
      return { data, target: resolveDestination(sb, destination, i) };
    });
    for (const { data, target } of plan) await writeConfined(sb, target, data);
  }

  // ── lifecycle ───────────────────────────────────────────────────────────────────────

  async stop(handle) {
    [handle] = readArgs('stop', [handle]);
    const sb = this.#require(handle);
    sb.state = 'stopped';
    await this.#killAll(sb, 'stopped');
  }

  async start(handle) {
    [handle] = readArgs('start', [handle]);
    const sb = this.#require(handle);
    sb.state = 'started';
    return toHandle(sb);
  }

  async destroy(handle) {
    [handle] = readArgs('destroy', [handle]);
    const id = handle && typeof handle === 'object' ? handle.id : handle;
    if (typeof id !== 'string') return;
    const sb = this.#sandboxes.get(id) ?? this.#adopt(id);
    if (!sb) return; // unknown or already destroyed: tolerated, like the remote adapters
    this.#sandboxes.delete(id); // invisible to lookups from now on
    sb.state = 'destroyed';
    try {
      await this.#killAll(sb, 'destroyed');
      await fsp.rm(sb.dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 20 });
      removeRecord(sb.root, sb.id);
    } finally {
      if (this.#sandboxes.size === 0 && !this.#ownsRoot) trackLive(this, false);
    }
  }

  /** Destroys every sandbox; keeps the runtime usable. */
  async destroyAll() {
    const all = [...this.#sandboxes.values()];
    const results = await Promise.allSettled(all.map((sb) => this.destroy(sb)));
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /**
   * Destroys every sandbox, removes rootDir if this runtime created it, and removes the
   * exit hook. Idempotent. Afterwards launch() rejects with LOCAL_CLOSED.
   */
  async close() {
    this.#closed = true;
    try {
      await this.destroyAll();
      if (this.#ownsRoot && this.#root) {
        await fsp.rm(this.#root, { recursive: true, force: true, maxRetries: 5, retryDelay: 20 });
        this.#root = null;
        this.#ownsRoot = false;
      }
    } finally {
      if (this.#sandboxes.size === 0 && !this.#ownsRoot) trackLive(this, false);
    }
  }

  /** @internal best-effort synchronous cleanup for process 'exit'. */
  _cleanupSync() {
    for (const sb of this.#sandboxes.values()) {
      for (const pgid of sb.groups) killGroup(pgid);
      try {
        fs.rmSync(sb.dir, { recursive: true, force: true });
        removeRecord(sb.root, sb.id);
      } catch {
        /* best effort */
      }
    }
    this.#sandboxes.clear();
    if (this.#ownsRoot && this.#root) {
      try {
        fs.rmSync(this.#root, { recursive: true, force: true });
      } catch {
        /* best effort */
      }
    }
  }

  // ── internals ───────────────────────────────────────────────────────────────────────

  #assertOpen() {
    if (this.#closed) throw new LocalRuntimeError('local runtime is closed', 'LOCAL_CLOSED');
  }

  #assertStarted(sb) {
    if (sb.state !== 'started') {
      throw new LocalRuntimeError(`sandbox ${sb.id} is ${sb.state}; start() it first`, 'LOCAL_SANDBOX_STOPPED', { sandboxId: sb.id });
    }
  }

  #require(handle) {
    const id = handle && typeof handle === 'object' ? handle.id : undefined;
    if (typeof id !== 'string') throw invalid(`expected a RuntimeHandle with a string id, got ${describe(handle)}`, 'handle');
    const sb = this.#sandboxes.get(id);
    if (!sb) throw new LocalRuntimeError(`no local sandbox ${id} (destroyed or never launched here)`, 'LOCAL_SANDBOX_NOT_FOUND', { sandboxId: id });
    return sb;
  }

  #ensureRoot() {
    if (this.#root) return this.#root;
    if (this.#opts.rootDir) {
      try {
        fs.mkdirSync(this.#opts.rootDir, { recursive: true, mode: 0o700 });
        if (!fs.statSync(this.#opts.rootDir).isDirectory()) throw new Error('not a directory');
      } catch (err) {
        throw new LocalRuntimeError(`rootDir ${this.#opts.rootDir} is not a usable directory: ${err.message}`, 'LOCAL_IO_ERROR', {
          cause: err,
          path: this.#opts.rootDir,
        });
      }
      this.#root = this.#opts.rootDir; // caller's directory: never removed by close()
    } else {
      try {
        this.#root = fs.mkdtempSync(path.join(os.tmpdir(), ROOT_PREFIX));
      } catch (err) {
        throw new LocalRuntimeError(`cannot create a temporary root directory: ${err.message}`, 'LOCAL_IO_ERROR', { cause: err });
      }
      this.#ownsRoot = true;
      trackLive(this, true);
    }
    return this.#root;
  }

  /**
   * Sandboxes recorded in a caller-given rootDir that this runtime does not hold (another
   * process launched them; it may be dead). Read on each label query: the directory is the
   * truth, shared between processes.
   */
  #onDisk() {
    if (!this.#opts.rootDir || this.#ownsRoot) return [];
    let names;
    try {
      names = fs.readdirSync(this.#opts.rootDir);
    } catch {
      return [];
    }
    const out = [];
    for (const name of names) {
      const m = RECORD_FILE.exec(name);
      if (!m || this.#sandboxes.has(m[1])) continue;
      const sb = readRecord(this.#opts.rootDir, m[1]);
      if (sb) out.push(sb);
    }
    return out;
  }

  /** Takes over a sandbox recorded on disk by another process (getById, destroy). */
  #adopt(id) {
    if (!this.#opts.rootDir || this.#ownsRoot || !/^local-[0-9a-f]{16}$/.test(id)) return null;
    const sb = readRecord(this.#opts.rootDir, id);
    if (!sb) return null;
    this.#root ??= this.#opts.rootDir;
    this.#sandboxes.set(id, sb);
    trackLive(this, true);
    return sb;
  }

  /** Forgets process groups that no longer have members. */
  #prune(sb) {
    for (const pgid of sb.groups) if (!sb.running.has(pgid) && !groupAlive(pgid)) sb.groups.delete(pgid);
  }

  async #killAll(sb, reason) {
    const running = [...sb.running.values()];
    for (const r of running) r.kill(reason);
    for (const pgid of sb.groups) killGroup(pgid);
    await Promise.all(running.map((r) => r.done));
    // Give SIGKILLed background groups a moment to disappear before the caller removes files.
    for (let i = 0; i < 50 && groupsWithRunningMembers(sb.groups).size > 0; i++) await new Promise((r) => setTimeout(r, 10));
    sb.groups.clear();
  }
}

function toHandle(sb) {
  return { id: sb.id, state: sb.state, createdAt: sb.createdAt, homeDir: sb.homeDir, workdir: sb.workdir, labels: { ...sb.labels } };
}

/** Writes `<root>/<id>.json` atomically and exclusively (EEXIST when the name is taken). */
function writeRecord(root, id, record) {
  const tmp = path.join(root, `.${id}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`);
  fs.writeFileSync(tmp, JSON.stringify(record), { mode: 0o600, flag: 'wx' });
  try {
    fs.linkSync(tmp, path.join(root, `${id}.json`));
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

function removeRecord(root, id) {
  try {
    fs.rmSync(path.join(root, `${id}.json`), { force: true });
  } catch {
    /* best effort: a leftover record without a directory is destroyed again by the next destroy */
  }
}

/** A sandbox from its record file, or null when there is none (or it cannot be read). */
function readRecord(root, id) {
  let rec;
  try {
    rec = JSON.parse(fs.readFileSync(path.join(root, `${id}.json`), 'utf8'));
  } catch {
    return null;
  }
  if (rec === null || typeof rec !== 'object' || rec.id !== id || !isPlainObject(rec.labels)) return null;
  const labels = {};
  for (const [k, v] of Object.entries(rec.labels)) if (typeof v === 'string') labels[k] = v;
  let dir = path.join(root, id);
  try {
    dir = fs.realpathSync(dir);
  } catch {
    /* the process died before making it: destroy removes the record alone */
  }
  return {
    id,
    name: typeof rec.name === 'string' ? rec.name : null,
    dir,
    labels,
    env: {},
    state: 'started',
    createdAt: typeof rec.createdAt === 'string' ? rec.createdAt : new Date(0).toISOString(),
    root,
    homeDir: dir,
    workdir: dir,
    groups: new Set(),
    running: new Map(),
  };
}

function checkStates(options) {
  if (options !== undefined && options !== null && !isPlainObject(options)) throw invalid('options must be a plain object', 'options');
  const states = options?.states;
  if (states === undefined || states === null) return null;
  if (!Array.isArray(states) || states.some((s) => typeof s !== 'string')) throw invalid('states must be an array of strings or null', 'states');
  return states;
}

/** Bounded byte collector for one stream. */
function collector(limit) {
  const chunks = [];
  let kept = 0;
  const c = {
    dropped: 0,
    push: (chunk) => {
      const room = limit - kept;
      if (room >= chunk.length) {
        chunks.push(chunk);
        kept += chunk.length;
      } else {
        if (room > 0) {
          chunks.push(chunk.subarray(0, room));
          kept += room;
        }
        c.dropped += chunk.length - Math.max(room, 0);
      }
    },
    text: () => Buffer.concat(chunks).toString('utf8'),
  };
  return c;
}

/** Lexical confinement: the absolute target inside the sandbox dir, or LOCAL_PATH_ESCAPE. */
function resolveDestination(sb, destination, i) {
  if (typeof destination !== 'string' || destination === '' || destination.includes('\0')) {
    throw invalid(`files[${i}].destination must be a non-empty path string, got ${describe(destination)}`, `files[${i}].destination`);
  }
  const target = path.isAbsolute(destination) ? path.resolve(destination) : path.resolve(sb.dir, destination);
  if (!isInside(sb.dir, target) || target === sb.dir) {
    throw new LocalRuntimeError(
      `files[${i}].destination ${JSON.stringify(destination)} resolves to ${target}, outside sandbox ${sb.id} (${sb.dir})`,
      'LOCAL_PATH_ESCAPE',
      { sandboxId: sb.id, path: destination },
    );
  }
  return target;
}

function escapeError(sb, target, detail) {
  return new LocalRuntimeError(`refusing to write ${target}: ${detail}, outside sandbox ${sb.id} (${sb.dir})`, 'LOCAL_PATH_ESCAPE', {
    sandboxId: sb.id,
    path: target,
  });
}

/**
 * Writes `data` at `target` without ever leaving the sandbox dir through a symlink:
 * - parent directories are created one component at a time; an existing component that is
 *   a symlink is followed only if its real path is inside the sandbox, so `mkdir -p` never
 *   creates anything outside;
 * - the parent's real path is checked again right before writing;
 * - the file is written to a fresh temp file (O_EXCL) and renamed over the destination, so
 *   a symlink at the final component is REPLACED by a regular file, never written through.
 */
async function writeConfined(sb, target, data) {
  const parts = path.relative(sb.dir, target).split(path.sep);
  const base = parts.pop();
  let current = sb.dir;
  for (const part of parts) {
    const next = path.join(current, part);
    let st;
    try {
      st = await fsp.lstat(next);
    } catch (err) {
      if (err.code !== 'ENOENT') throw ioError(sb, next, err);
      try {
        await fsp.mkdir(next);
      } catch (mkErr) {
        if (mkErr.code !== 'EEXIST') throw ioError(sb, next, mkErr);
      }
      st = await fsp.lstat(next).catch((e) => {
        throw ioError(sb, next, e);
      });
    }
    if (st.isSymbolicLink()) {
      let real;
      try {
        real = await fsp.realpath(next);
      } catch (err) {
        throw escapeError(sb, target, `${next} is a dangling or unreadable symlink (${err.code})`);
      }
      if (!isInside(sb.dir, real)) throw escapeError(sb, target, `${next} is a symlink to ${real}`);
      st = await fsp.stat(real).catch((e) => {
        throw ioError(sb, next, e);
      });
      current = real;
    } else {
      current = next;
    }
    if (!st.isDirectory()) {
      throw new LocalRuntimeError(`cannot write ${target}: ${current} is not a directory`, 'LOCAL_IO_ERROR', { sandboxId: sb.id, path: target });
    }
  }
  const realParent = await fsp.realpath(current).catch((e) => {
    throw ioError(sb, current, e);
  });
  if (!isInside(sb.dir, realParent)) throw escapeError(sb, target, `its parent resolves to ${realParent}`);

  const finalPath = path.join(realParent, base);
  // Replacing an existing regular file keeps its permission bits (e.g. an executable script).
  const existing = await fsp.lstat(finalPath).catch(() => null);
  if (existing && existing.isDirectory()) {
    throw new LocalRuntimeError(`cannot write ${target}: it is a directory`, 'LOCAL_IO_ERROR', { sandboxId: sb.id, path: target });
  }
  const mode = existing && existing.isFile() ? existing.mode & 0o7777 : 0o644;
  const tmp = path.join(realParent, `.${base}.upload-${crypto.randomBytes(6).toString('hex')}`);
  try {
    await fsp.writeFile(tmp, data, { flag: 'wx', mode });
    if (existing && existing.isFile()) await fsp.chmod(tmp, mode); // writeFile's mode is umask-filtered
    await fsp.rename(tmp, finalPath);
  } catch (err) {
    await fsp.rm(tmp, { force: true }).catch(() => {});
    throw ioError(sb, target, err);
  }
}

function ioError(sb, p, err) {
  if (err instanceof LocalRuntimeError) return err;
  return new LocalRuntimeError(`cannot write ${p} in sandbox ${sb.id}: ${err.message}`, 'LOCAL_IO_ERROR', { cause: err, sandboxId: sb.id, path: p });
}

/**
 * Creates a local runtime. NOT a security boundary: commands run as the current user on
 * the host.
 * @param {object} [options]
 */
function createLocalRuntime(options) {
  return new LocalSandboxRuntime(options);
}

module.exports = {
  createLocalRuntime,
  LocalSandboxRuntime,
  LocalRuntimeError,
  LOCAL_CAPABILITIES,
  LOCAL_ERROR_CODES,
};
