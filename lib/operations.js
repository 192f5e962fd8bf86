'use strict';
// Operations by id: resolve the sandbox's original pool through the mapping, never
// reroute. Every runtime call is bounded by the operation deadline; every failure becomes
// a sanitized ProviderRuntimeError. Everything read from the caller (the id, options, the
// store's record) is read once, inside a guard (guard.js).

const { binding } = require('./binding.js');
const {
  SandboxRequestValidationError,
  ProviderRuntimeError,
  MappingPersistenceError,
  SandboxNotFoundError,
  ProviderRegistryError,
  ProviderPackageMissingError,
  callNative,
  isRouterError,
} = require('./errors.js');
const { entryOf } = require('./registry.js');
const { guarded, copyOptions, shown } = require('./guard.js');
const { within, TIMED_OUT } = require('./within.js');
const { hasMethods } = require('./options.js');
const { emit } = require('./events.js');
const { released } = require('./budgets.js');

/** Extra time a runScript gets over its own `timeoutMs` when that is longer than the operation deadline. */
const RUN_SCRIPT_GRACE_MS = 60_000;

/**
 * Most handles from launch a router keeps for operations by id. A sandbox that ends without
 * the router hearing of it (its own timeout, a destroy elsewhere) would otherwise keep its
 * handle, and whatever the adapter hangs on it, for the life of the router. Past the limit
 * the oldest is dropped; an operation on its sandbox re-resolves it with
 * `getById(providerSandboxId, { owned: true })`, as after a restart (`handleFor`).
 */
const HANDLE_LIMIT = 65_536;

/** Keeps `handle` for sandbox `id` (see HANDLE_LIMIT). */
function keepHandle(handles, id, handle) {
  handles.set(id, handle);
  if (handles.size > HANDLE_LIMIT) handles.delete(handles.keys().next().value);
}

/** Our own package error (missing or failing optional package): safe to surface as is. */
function isPackageError(error) {
  return isRouterError(error) && error instanceof ProviderPackageMissingError;
}

function isNotFound(error) {
  if (!error || typeof error !== 'object') return false;
  try {
    const status = error.status ?? error.statusCode ?? error.response?.status;
    return status === 404 || error.code === 'NOT_FOUND' || error.code === 'ENOENT';
  } catch {
    // A provider error whose getters throw proves nothing.
    return false;
  }
}

/**
 * A mapping store's answer, read once inside a guard into a record of our own; null when
 * the store has no record. Throws when the answer cannot be read or is not a mapping: the
 * caller reports MAPPING_READ_FAILED.
 */
function readRecord(raw) {
  if (raw === null || raw === undefined) return null;
  if (raw === TIMED_OUT || typeof raw !== 'object') throw new Error('not a mapping');
  const record = guarded(() => {
    const labels = raw.labels;
    const copy = {};
    if (labels !== undefined && labels !== null) {
      if (typeof labels !== 'object') throw new Error('labels');
      for (const key of Object.keys(labels)) {
        const v = labels[key];
        if (typeof v !== 'string') throw new Error('label');
        copy[key] = v;
      }
    }
    return {
      id: raw.id,
      providerId: raw.providerId,
      providerSandboxId: raw.providerSandboxId,
      labels: copy,
      createdAt: raw.createdAt,
      detached: raw.detached,
    };
  });
  if (typeof record.providerId !== 'string' || typeof record.providerSandboxId !== 'string' || record.providerSandboxId === '') {
    throw new Error('not a mapping');
  }
  if (typeof record.id !== 'string') delete record.id;
  if (typeof record.createdAt !== 'string') delete record.createdAt;
  record.detached = record.detached === true;
  return record;
}

/** runScript options, read once inside a guard into the port's fields. Throws a typed error. */
function readScriptOptions(options) {
  const invalid = (field, what) => new SandboxRequestValidationError(`invalid runScript options: ${field} ${what}`, 'INVALID_REQUEST', { field });
  if (options === null || typeof options !== 'object') throw invalid('command', 'must be a string');
  let o;
  try {
    o = guarded(() => ({ command: options.command, sessionId: options.sessionId, timeoutMs: options.timeoutMs, env: copyOptions(options.env, 1) }));
  } catch {
    throw invalid('options', 'could not be read (a property access threw)');
  }
  if (typeof o.command !== 'string') throw invalid('command', 'must be a string');
  if (o.sessionId !== undefined && typeof o.sessionId !== 'string') throw invalid('sessionId', 'must be a string');
  if (o.timeoutMs !== undefined && (typeof o.timeoutMs !== 'number' || !(o.timeoutMs > 0))) throw invalid('timeoutMs', 'must be a number > 0');
  if (o.env !== undefined) {
    if (o.env === null || typeof o.env !== 'object') throw invalid('env', 'must be an object of strings');
    for (const k of Object.keys(o.env)) if (typeof o.env[k] !== 'string') throw invalid(`env.${shown(k)}`, 'must be a string');
  }
  const out = { command: o.command };
  if (o.sessionId !== undefined) out.sessionId = o.sessionId;
  if (o.timeoutMs !== undefined) out.timeoutMs = o.timeoutMs;
  if (o.env !== undefined) out.env = o.env;
  return out;
}

/** A bundle's files, read once inside a guard: `[{ source, destination }]`. Throws a typed error. */
function readBundle(bundle) {
  const invalid = (field, what) => new SandboxRequestValidationError(`invalid bundle: ${field} ${what}`, 'INVALID_REQUEST', { field });
  if (bundle === null || typeof bundle !== 'object') throw invalid('files', 'must be an array');
  let files;
  try {
    files = guarded(() => {
      const list = bundle.files;
      if (!Array.isArray(list)) return null;
      return Array.from(list, (f) => (f !== null && typeof f === 'object' ? { source: f.source, destination: f.destination } : null));
    });
  } catch {
    throw invalid('files', 'could not be read (a property access threw)');
  }
  if (files === null) throw invalid('files', 'must be an array');
  files.forEach((f, i) => {
    if (f === null) throw invalid(`files[${i}]`, 'must be an object');
    if (typeof f.destination !== 'string') throw invalid(`files[${i}].destination`, 'must be a string');
    if (typeof f.source !== 'string' && !ArrayBuffer.isView(f.source)) throw invalid(`files[${i}].source`, 'must be a string or a Buffer');
  });
  return files;
}

/** The mapping record and pool of sandbox `id`. Throws the typed errors. */
async function lookup(ctx, id) {
  if (typeof id !== 'string') {
    throw new SandboxRequestValidationError('invalid sandbox id: must be a string', 'INVALID_SANDBOX_ID', { field: 'id' });
  }
  callNative(() => binding.checkSandboxId(id));
  let record;
  try {
    record = readRecord(await within(ctx.mappings.get(id), ctx.callbackTimeoutMs));
  } catch {
    // The store threw, rejected, timed out, or answered a record that could not be read
    // or is not a mapping.
    throw new MappingPersistenceError(`mapping store failed to read ${id}`, 'MAPPING_READ_FAILED', { sandboxId: id });
  }
  if (record === null) {
    ctx.handles.delete(id);
    throw new SandboxNotFoundError(`no sandbox ${id}`, 'SANDBOX_NOT_FOUND', { sandboxId: id });
  }
  const def = entryOf(ctx.registry, record.providerId);
  if (!def) {
    throw new ProviderRegistryError(`sandbox ${id} belongs to provider ${record.providerId}, which is not registered`, 'PROVIDER_NOT_REGISTERED', {
      sandboxId: id,
      providerId: record.providerId,
    });
  }
  return { record, def };
}

/**
 * One runtime call for an operation by id: its result, or a sanitized ProviderRuntimeError
 * (a failure, or OPERATION_TIMEOUT when it has not settled within `ms`: outcome unknown).
 * With `notFoundIsNull`, a "not found" rejection resolves to null instead.
 */
async function bounded(call, def, operation, ms, notFoundIsNull = false) {
  let r;
  try {
    r = await within(call(), ms);
  } catch (error) {
    if (isPackageError(error)) throw error;
    if (notFoundIsNull && isNotFound(error)) return null;
    throw new ProviderRuntimeError(def.id, operation);
  }
  if (r === TIMED_OUT) throw new ProviderRuntimeError(def.id, operation, ms);
  return r;
}

/**
 * The handle for an operation by id: this router's own from launch, or re-resolved with
 * `getById(providerSandboxId, { owned: true })`. Owned, because the mapping proves this
 * router made the sandbox: an adapter's attached handle (no `owned`) would make `destroy`
 * forget the sandbox instead of deleting it, and would downgrade the adapter's record for
 * every other caller of the same adapter instance.
 */
async function handleFor(ctx, id, record, def, operation) {
  const cached = ctx.handles.get(id);
  if (cached) return cached;
  const rt = def.runtime;
  if (!hasMethods(rt, ['getById'])) return { id: record.providerSandboxId };
  // An adapter may report "not found" by rejecting: the sandbox is gone (null) either way.
  const handle = await bounded(() => rt.getById(record.providerSandboxId, { owned: true }), def, `${operation}: getById`, ctx.operationTimeoutMs, true);
  return handle ?? null;
}

async function call(ctx, id, operation, args, timeoutMs) {
  const { record, def } = await lookup(ctx, id);
  const rt = def.runtime;
  if (!hasMethods(rt, [operation])) throw new ProviderRuntimeError(def.id, operation);
  const handle = await handleFor(ctx, id, record, def, operation);
  if (handle === null) throw new SandboxNotFoundError(`sandbox ${id} no longer exists at ${def.id}`, 'SANDBOX_NOT_FOUND', { sandboxId: id, providerId: def.id });
  return bounded(() => rt[operation](handle, ...args), def, operation, timeoutMs ?? ctx.operationTimeoutMs);
}

function runScript(ctx, id, options) {
  const script = readScriptOptions(options);
  // The operation deadline bounds the call; a command whose own timeoutMs is longer than
  // that deadline gets its timeoutMs plus RUN_SCRIPT_GRACE_MS instead.
  const own = script.timeoutMs;
  const bound = Number.isFinite(own) && own > ctx.operationTimeoutMs ? Math.ceil(own) + RUN_SCRIPT_GRACE_MS : undefined;
  return call(ctx, id, 'runScript', [script], bound);
}

function uploadBundle(ctx, id, bundle) {
  return call(ctx, id, 'uploadBundle', [{ files: readBundle(bundle) }]);
}

async function getSandbox(ctx, id) {
  const { record } = await lookup(ctx, id);
  return { ...record, labels: { ...record.labels } };
}

/** Whether the provider says the sandbox is gone (after a failed destroy). */
async function gone(ctx, rt, record, error) {
  if (isNotFound(error)) return true;
  if (!hasMethods(rt, ['getById'])) return false;
  try {
    return (await within(rt.getById(record.providerSandboxId, { owned: true }), ctx.operationTimeoutMs)) === null;
  } catch {
    return false;
  }
}

/**
 * Destroys the sandbox and removes its mapping. An already-deleted provider sandbox is
 * not an error; any other failure keeps the mapping so the call can be retried.
 */
async function destroy(ctx, id) {
  const { record, def } = await lookup(ctx, id);
  const rt = def.runtime;
  const handle = await handleFor(ctx, id, record, def, 'destroy');
  if (handle !== null) {
    let r;
    try {
      r = await within(rt.destroy(handle), ctx.operationTimeoutMs);
    } catch (error) {
      if (isPackageError(error)) throw error;
      if (!(await gone(ctx, rt, record, error))) throw new ProviderRuntimeError(def.id, 'destroy');
    }
    // Outcome unknown: the mapping stays, so the call can be retried.
    if (r === TIMED_OUT) throw new ProviderRuntimeError(def.id, 'destroy', ctx.operationTimeoutMs);
  }
  try {
    if ((await within(ctx.mappings.delete(id), ctx.callbackTimeoutMs)) === TIMED_OUT) throw new Error('timed out');
  } catch {
    throw new MappingPersistenceError(`sandbox ${id} was destroyed but its mapping could not be removed`, 'MAPPING_PERSISTENCE_FAILED', {
      sandboxId: id,
      providerId: def.id,
      cleanup: 'destroyed',
    });
  }
  ctx.handles.delete(id);
  // The sandbox is gone: what it held (its capacity hold, its budgets' concurrent slot)
  // is given back.
  await released(ctx, id, def.id, 'DESTROYED');
  emit(ctx.observer, 'sandbox.destroyed', { sandboxId: id, providerId: def.id });
}

// With telemetry (lib/telemetry.js), each operation by id runs inside its span and is
// counted and timed by outcome; without it, the function itself is called.

module.exports = {
  runScript: (ctx, id, options) => (ctx.telemetry === null ? runScript(ctx, id, options) : ctx.telemetry.operation('runScript', () => runScript(ctx, id, options))),
  uploadBundle: (ctx, id, bundle) => (ctx.telemetry === null ? uploadBundle(ctx, id, bundle) : ctx.telemetry.operation('uploadBundle', () => uploadBundle(ctx, id, bundle))),
  call: (ctx, id, operation, args) => (ctx.telemetry === null ? call(ctx, id, operation, args) : ctx.telemetry.operation(operation, () => call(ctx, id, operation, args))),
  getSandbox: (ctx, id) => (ctx.telemetry === null ? getSandbox(ctx, id) : ctx.telemetry.operation('getSandbox', () => getSandbox(ctx, id))),
  destroy: (ctx, id) => (ctx.telemetry === null ? destroy(ctx, id) : ctx.telemetry.operation('destroy', () => destroy(ctx, id))),
  isPackageError,
  isNotFound,
  keepHandle,
  HANDLE_LIMIT,
};
