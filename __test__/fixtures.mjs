// Shared test fixtures: port-shaped fake runtimes and definitions, as a user would build them.

import { inspect } from 'node:util';

export const CANARY = 'canary-secret-7f3a9c1e';

/**
 * Whether `secret` appears anywhere a caller could see it in `value`: util.inspect (hidden
 * properties and getters included), JSON.stringify, and for errors their message, stack,
 * cause and every own property.
 */
export function leaks(value, secret = CANARY) {
  const deep = { depth: Infinity, showHidden: true };
  const texts = [inspect(value, { ...deep, getters: true })];
  try {
    texts.push(JSON.stringify(value));
  } catch {
    // not serializable: inspect covers it
  }
  if (value instanceof Error) {
    texts.push(value.message, String(value.stack), inspect(value.cause, deep));
    for (const key of Reflect.ownKeys(value)) texts.push(inspect(value[key], deep));
  }
  return texts.some((t) => typeof t === 'string' && t.includes(secret));
}

export function signals(overrides = {}) {
  return {
    estimatedCost: 0.1,
    coldStartLatencyMs: 200,
    readyLatencyMs: 1000,
    completionWithinBudgetRate: 0.99,
    available: true,
    ...overrides,
  };
}

/**
 * A fake runtime of the SandboxRuntime port. `behaviour.launch` may be a function
 * replacing launch; calls are recorded in `calls`.
 */
export function fakeRuntime(behaviour = {}) {
  let n = 0;
  const secret = behaviour.secret ?? CANARY;
  const live = new Map();
  const calls = [];
  const rt = {
    id: behaviour.kind ?? 'fake',
    calls,
    live,
    async launch(options) {
      calls.push({ op: 'launch', options });
      if (behaviour.launch) return behaviour.launch(options, secret);
      const handle = { id: `remote-${++n}`, state: 'started' };
      live.set(handle.id, { handle, labels: options?.labels ?? {} });
      return handle;
    },
    async runScript(handle, options) {
      calls.push({ op: 'runScript', handle, options });
      if (behaviour.runScript) return behaviour.runScript(handle, options, secret);
      return { output: `ran ${options.command}`, exitCode: 0 };
    },
    async uploadBundle(handle, bundle) {
      calls.push({ op: 'uploadBundle', handle, bundle });
    },
    async findAllByLabels(labels) {
      return [...live.values()]
        .filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))
        .map((s) => s.handle);
    },
    async findByLabels(labels) {
      return (await rt.findAllByLabels(labels))[0] ?? null;
    },
    async countByLabels(labels) {
      return (await rt.findAllByLabels(labels)).length;
    },
    async getById(id) {
      return live.get(id)?.handle ?? null;
    },
    async destroy(handle) {
      calls.push({ op: 'destroy', handle });
      if (behaviour.destroy) return behaviour.destroy(handle, secret);
      live.delete(handle.id);
    },
  };
  if (behaviour.detached) {
    rt.launchDetached = async (options) => {
      calls.push({ op: 'launchDetached', options });
      const handle = { id: `remote-d${++n}`, state: 'starting' };
      live.set(handle.id, { handle, labels: options?.labels ?? {} });
      return handle;
    };
  }
  return rt;
}

export function definition(id, { capabilities = {}, signals: s = {}, runtime = fakeRuntime(), ...rest } = {}) {
  return { id, runtime, capabilities, signals: signals(s), ...rest };
}

/** Collects events; optionally throws or rejects on each. */
export function recorder(mode = 'ok') {
  const events = [];
  const observer = (e) => {
    events.push(e);
    if (mode === 'throw') throw new Error(`observer ${CANARY}`);
    if (mode === 'reject') return Promise.reject(new Error(`observer ${CANARY}`));
    return undefined;
  };
  return { events, observer, types: () => events.map((e) => e.type) };
}

/** A Proxy whose every trap throws text with the canary. */
export function trapAll() {
  const boom = () => {
    throw new Error(`trap ${CANARY}`);
  };
  return new Proxy(
    {},
    {
      get: boom,
      has: boom,
      ownKeys: boom,
      getOwnPropertyDescriptor: boom,
      getPrototypeOf: boom,
      defineProperty: boom,
      set: boom,
      deleteProperty: boom,
      isExtensible: boom,
      preventExtensions: boom,
      setPrototypeOf: boom,
      apply: boom,
      construct: boom,
    },
  );
}

export function revoked() {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

/** Runs `fn` with `JSON[method]` counting its calls: `{ result, calls }`. */
export function jsonCalls(method, fn) {
  const original = JSON[method];
  let calls = 0;
  JSON[method] = function (...args) {
    calls++;
    return original.apply(this, args);
  };
  try {
    return { result: fn(), calls };
  } finally {
    JSON[method] = original;
  }
}
