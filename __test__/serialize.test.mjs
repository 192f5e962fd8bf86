// lib/serialize.js reads a caller's value once, with JSON.stringify and a replacer that keeps
// the chain of holders: it must give exactly what the definitions below give (the text, the
// labels apart, or the refusal of a value JSON cannot carry at its path), read the caller's
// value exactly as often and in the same order, survive being called again from inside a
// getter or toJSON, and keep nothing of the caller's value once it returns.
import test from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import v8 from 'node:v8';
import vm from 'node:vm';
import { createRequire } from 'node:module';
import { jsonCalls } from './fixtures.mjs';

const require = createRequire(import.meta.url);
const { serialize, serializeLenient, serializeDefinition, serializeRequest, NotJson } = require('../lib/serialize.js');
const { binding } = require('../lib/binding.js');

const NO = Symbol('no hook');

function notJson(v) {
  const t = typeof v;
  return t === 'function' || t === 'symbol' || t === 'bigint' || (t === 'number' && !Number.isFinite(v));
}

function what(v) {
  if (typeof v === 'function') return 'a function';
  if (typeof v === 'symbol') return 'a symbol';
  if (typeof v === 'bigint') return 'a BigInt';
  return Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity';
}

class Refusal {
  constructor(segments, what) {
    this.segments = segments;
    this.what = what;
  }
}

/**
 * The definition of strict (and, under `lenientKey`, lenient) serialization: JSON.stringify
 * with a replacer that looks each holder's path up in a Map (one entry per object: the
 * obvious way, where lib/serialize.js keeps a chain of holders), and throws a Refusal at
 * the path of a value JSON cannot carry. `hook(path, value)` may answer for a value.
 */
function referenceText(value, { lenientKey = null, hook = null } = {}) {
  const paths = new Map();
  let first = true;
  return JSON.stringify(value, function (key, v) {
    let path;
    if (first) {
      first = false;
      path = [];
    } else {
      path = [...paths.get(this), Array.isArray(this) ? Number(key) : key];
    }
    if (hook !== null) {
      const answer = hook(path, v);
      if (answer !== NO) return answer;
    }
    if (notJson(v)) {
      if (lenientKey !== null && path[0] === lenientKey) return null;
      throw new Refusal(path, what(v));
    }
    if (v !== null && typeof v === 'object') paths.set(v, path);
    return v;
  });
}

/** What a serialization answered, comparable: the text, the refusal, or null (unreadable). */
function outcome(run) {
  try {
    const text = run();
    return typeof text === 'string' ? text : null;
  } catch (e) {
    if (e instanceof Refusal) return { segments: e.segments, what: e.what };
    return null;
  }
}

function serializeReference(value) {
  if (value === undefined || value === null) return '{}';
  return outcome(() => referenceText(value));
}

function addEntry(copy, k, v) {
  if (k === '__proto__') Object.defineProperty(copy, k, { value: v, writable: true, enumerable: true, configurable: true });
  else copy[k] = v;
}

/** serializeRequest's definition: the reference above, with `launch.labels` taken apart. */
function serializeRequestReference(request) {
  if (request === undefined || request === null) return { json: '{}', labels: undefined, copy: null };
  let labels;
  let copy = null;
  const hook = (path, v) => {
    if (path.length !== 2 || path[0] !== 'launch' || path[1] !== 'labels' || typeof v === 'string' || typeof v === 'boolean') return NO;
    if (v === undefined) return undefined;
    const out = {};
    try {
      labels =
        referenceText(v, {
          hook: (p, x) => {
            if (p.length === 1 && typeof x === 'string') addEntry(out, String(p[0]), x);
            return NO;
          },
        }) ?? 'null';
    } catch (e) {
      if (e instanceof Refusal) throw new Refusal(['launch', 'labels', ...e.segments], e.what);
      throw e;
    }
    copy = out;
    return undefined;
  };
  const r = outcome(() => referenceText(request, { hook }));
  return typeof r === 'string' ? { json: r, labels, copy } : r;
}

/** Comparable form of an answer of lib/serialize.js. */
function plain(r) {
  if (r === null || typeof r === 'string') return r;
  if (r instanceof NotJson) return { segments: r.segments, what: r.what };
  return { json: r.json, labels: r.labels, copy: r.copy === null ? null : Object.entries(r.copy) };
}

function plainReference(r) {
  if (r === null || typeof r === 'string' || 'segments' in r) return r;
  return { json: r.json, labels: r.labels, copy: r.copy === null ? null : Object.entries(r.copy) };
}

const anything = fc.anything({
  withBoxedValues: true,
  withNullPrototype: true,
  withBigInt: true,
  withDate: true,
  withSparseArray: true,
  withObjectString: true,
  withMap: true,
  withSet: true,
  withTypedArray: true,
  key: fc.oneof(fc.string(), fc.constantFrom('launch', 'labels', '__proto__', 'toJSON', '', 'name', 'signals')),
});
const special = fc.constantFrom(
  NaN,
  Infinity,
  -Infinity,
  -0,
  () => 1,
  Symbol('s'),
  10n,
  undefined,
  null,
  { toJSON: (k) => `key:${k}` },
  { toJSON: () => () => 1 },
  new Number(NaN),
  new String('s'),
  Object(Symbol('o')),
);
const value = fc.oneof(anything, special);
const nested = fc.oneof(value, fc.array(value, { maxLength: 4 }), fc.dictionary(fc.string(), value, { maxKeys: 4 }));
const labels = fc.oneof(fc.dictionary(fc.oneof(fc.string(), fc.constant('__proto__')), fc.oneof(fc.string(), value)), value);
const request = fc.oneof(
  fc.record({ launch: fc.record({ labels, name: value }, { requiredKeys: [] }), resources: nested }, { requiredKeys: [] }),
  fc.record({ launch: fc.oneof(value, fc.array(value)), x: nested }, { requiredKeys: [] }),
  nested,
);

test('serializeRequest equals its definition (text, labels apart, or the refusal at its path), over arbitrary values', () => {
  fc.assert(
    fc.property(request, (r) => {
      assert.deepStrictEqual(plain(serializeRequest(r)), plainReference(serializeRequestReference(r)));
    }),
    { numRuns: 3000 },
  );
});

test('serialize equals its definition, and serializeLenient writes null exactly where serialize refuses', () => {
  fc.assert(
    fc.property(nested, (v) => {
      const strict = serialize(v);
      assert.deepStrictEqual(plain(strict), serializeReference(v));
      const lenient = serializeLenient(v);
      if (strict === null) return;
      if (typeof strict === 'string') {
        assert.equal(lenient, strict);
        return;
      }
      // Where strict refused, the lenient text holds null (and is otherwise JSON).
      assert.equal(typeof lenient, 'string');
      let at = JSON.parse(/** @type {string} */ (lenient));
      for (const s of strict.segments) at = at[s];
      assert.equal(at, null);
    }),
    { numRuns: 3000 },
  );
});

test('serializeDefinition: id and capabilities strict, signals lenient (its definition, over arbitrary values)', () => {
  fc.assert(
    fc.property(value, nested, nested, (id, capabilities, signals) => {
      const ours = plain(serializeDefinition(id, capabilities, signals));
      const reference = outcome(() => referenceText({ id, capabilities, signals }, { lenientKey: 'signals' }));
      assert.deepStrictEqual(ours, reference);
    }),
    { numRuns: 2000 },
  );
});

/** `value` behind Proxies that log every trap, all the way down. */
function logged(value, log, path = '$') {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return value;
  return new Proxy(value, {
    get(t, k, r) {
      log.push(`get ${path}.${String(k)}`);
      return logged(Reflect.get(t, k, r), log, `${path}.${String(k)}`);
    },
    ownKeys(t) {
      log.push(`ownKeys ${path}`);
      return Reflect.ownKeys(t);
    },
    getOwnPropertyDescriptor(t, k) {
      log.push(`gopd ${path}.${String(k)}`);
      return Reflect.getOwnPropertyDescriptor(t, k);
    },
  });
}

test('serializeRequest reads a Proxy exactly as JSON.stringify does (same traps, same order)', () => {
  fc.assert(
    fc.property(request, (r) => {
      const a = [];
      const b = [];
      const ours = plain(serializeRequest(logged(r, a)));
      const reference = plainReference(serializeRequestReference(logged(r, b)));
      assert.deepStrictEqual(ours, reference);
      assert.deepStrictEqual(a, b);
    }),
    { numRuns: 1000 },
  );
});

test('a getter is read once (must-fire: its second answer would differ)', () => {
  let reads = 0;
  const request = {
    launch: {
      get labels() {
        reads++;
        return reads === 1 ? { team: 'a' } : { team: 'b', agent: 'x' };
      },
    },
  };
  const r = serializeRequest(request);
  assert.equal(reads, 1);
  assert.equal(r.labels, '{"team":"a"}');
  assert.deepEqual({ ...r.copy }, { team: 'a' });
});

test('a getter that serializes another request does not disturb the outer one (must-not-fire)', () => {
  const inner = { launch: { labels: { inner: 'yes' } }, region: { preferred: ['x'] } };
  let innerResult = null;
  const outer = {
    launch: {
      labels: {
        get team() {
          innerResult = serializeRequest(inner);
          return 'outer';
        },
      },
    },
  };
  const r = serializeRequest(outer);
  assert.deepEqual(plain(r), { json: '{"launch":{}}', labels: '{"team":"outer"}', copy: [['team', 'outer']] });
  assert.deepEqual(plain(innerResult), plainReference(serializeRequestReference(inner)));
});

test('reentrancy must-fire: a refusal inside a getter or toJSON, then one outside, each at its own path', () => {
  // A getter deep in the request serializes a value that is refused; the outer walk goes on
  // and is refused deeper than where the getter stood.
  let inner;
  const outer = {
    a: {
      b: {
        get c() {
          inner = serialize({ q: [1, { r: () => 1 }] });
          return 1;
        },
        d: [1, { e: NaN }],
      },
    },
  };
  assert.deepEqual(plain(serializeRequest(outer)), { segments: ['a', 'b', 'd', 1, 'e'], what: 'NaN' });
  assert.deepEqual(plain(inner), { segments: ['q', 1, 'r'], what: 'a function' });

  // toJSON serializes (and is refused) before its own answer is walked.
  let fromToJson;
  const viaToJson = {
    x: {
      toJSON() {
        fromToJson = serializeRequest({ launch: { labels: { k: 10n } } });
        return { y: [Symbol('s')] };
      },
    },
  };
  assert.deepEqual(plain(serialize(viaToJson)), { segments: ['x', 'y', 0], what: 'a symbol' });
  assert.deepEqual(plain(fromToJson), { segments: ['launch', 'labels', 'k'], what: 'a BigInt' });

  // Inside the labels' own walk (itself nested): a getter's refused request, then the outer
  // labels refused, then (had they passed) the rest of the request.
  let nestedLabels;
  const withLabels = {
    launch: {
      labels: {
        get team() {
          nestedLabels = serializeRequest({ launch: { labels: { deep: { x: Infinity } } } });
          return 'ok';
        },
        user: () => 1,
      },
    },
    resources: { cpu: NaN },
  };
  assert.deepEqual(plain(serializeRequest(withLabels)), { segments: ['launch', 'labels', 'user'], what: 'a function' });
  assert.deepEqual(plain(nestedLabels), { segments: ['launch', 'labels', 'deep', 'x'], what: 'Infinity' });
});

test('reentrancy must-not-fire: a getter whose serialization is refused leaves a clean outer walk clean', () => {
  let inner;
  const outer = {
    launch: { name: 'n', labels: { team: 't' } },
    resources: {
      get cpu() {
        inner = serializeRequest({ resources: { cpu: () => 1 } });
        return 2;
      },
    },
  };
  assert.deepEqual(plain(serializeRequest(outer)), { json: '{"launch":{"name":"n"},"resources":{"cpu":2}}', labels: '{"team":"t"}', copy: [['team', 't']] });
  assert.deepEqual(plain(inner), { segments: ['resources', 'cpu'], what: 'a function' });
});

test('cycles, boxed BigInts and throwing getters make the value unreadable (null), as JSON.stringify does', () => {
  const cyclic = { launch: {} };
  cyclic.launch.self = cyclic;
  const cyclicLabels = { launch: { labels: {} } };
  cyclicLabels.launch.labels.self = cyclicLabels.launch.labels;
  const throwing = {
    get region() {
      throw new Error('secret');
    },
  };
  for (const r of [cyclic, cyclicLabels, throwing, { x: Object(10n) }]) {
    assert.equal(serializeRequest(r), null);
    assert.equal(serialize(r), null);
    assert.equal(serializeLenient(r), null);
  }
  // must-not-fire: the same object twice (not a cycle) serializes
  const shared = { a: 1 };
  assert.equal(serializeRequest({ x: shared, y: shared }).json, '{"x":{"a":1},"y":{"a":1}}');
});

test('fields are named as the native readers name them: dotted keys, [i] for elements, (root), keys cut like json::shown', () => {
  // The core names the field (src/core/router/options.rs field_path) from what serialize found.
  const refusal = (v, prefix = '') => {
    const j = /** @type {any} */ (serialize(v));
    try {
      binding.notJsonError('router', j.segments, j.what, prefix);
    } catch (e) {
      return e;
    }
    throw new Error('not refused');
  };
  const field = (v, prefix) => refusal(v, prefix).field;
  assert.equal(field({ resources: { gpu: NaN } }), 'resources.gpu');
  assert.equal(field({ capabilities: { supported: ['pty', 'ssh', () => 1] } }), 'capabilities.supported[2]');
  assert.equal(field({ processes: [{ dependsOn: [[Symbol('x')]] }] }), 'processes[0].dependsOn[0][0]');
  assert.equal(field(() => 1), '(root)');
  assert.equal(field(() => 1, 'health'), 'health');
  assert.equal(field({ timeoutMs: NaN }, 'options'), 'options.timeoutMs');
  assert.equal(field([{ pid: NaN }], 'started.processes'), 'started.processes[0].pid');
  // A key longer than 64 characters: its first 64 characters, then the rest's UTF-8 length.
  const key = `${'é'.repeat(64)}${'x'.repeat(1_000_000)}`;
  assert.equal(field({ [key]: 1n }), `${'é'.repeat(64)}…[+1000000 bytes]`);
  assert.equal(field({ ['k'.repeat(64)]: 1n }), 'k'.repeat(64));
  assert.equal(field({ ['😀'.repeat(65)]: 1n }), `${'😀'.repeat(64)}…[+4 bytes]`);
  assert.equal(refusal({ a: -Infinity }).message, 'invalid router options: a must be JSON data (-Infinity is not)');
});

test('no tag of ours is ever written: a value JSON cannot carry is refused (strict) or null (lenient), never an object', () => {
  for (const bad of [() => 1, Symbol('s'), 10n, NaN, Infinity, -Infinity]) {
    assert.ok(serialize({ a: { b: bad } }) instanceof NotJson);
    assert.equal(serializeLenient({ a: { b: bad } }), '{"a":{"b":null}}');
    assert.equal(serializeLenient([bad]), '[null]');
    assert.equal(serializeDefinition('a', {}, { estimatedCost: bad }), '{"id":"a","capabilities":{},"signals":{"estimatedCost":null}}');
    assert.equal(serializeDefinition('a', {}, bad), '{"id":"a","capabilities":{},"signals":null}');
    assert.deepEqual(plain(serializeDefinition('a', { timeout: { maxSandboxLifetimeMs: bad } }, {})), {
      segments: ['capabilities', 'timeout', 'maxSandboxLifetimeMs'],
      what: what(bad),
    });
  }
});

test('nothing of the caller is kept once a serialization returns (its frames are cleared)', async () => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc');
  let refs = [];
  (() => {
    const values = [{ a: { b: { c: {} } } }, { launch: { labels: { team: 'x' } }, deep: { er: { est: {} } } }, { a: { b: NaN } }];
    refs = values.map((v) => new WeakRef(v));
    serialize(values[0]);
    serializeRequest(values[1]);
    serialize(values[2]);
  })();
  await new Promise((resolve) => setImmediate(resolve));
  gc();
  assert.deepEqual(
    refs.map((r) => r.deref() === undefined),
    [true, true, true],
  );
});

// Labels that are an ordinary object are read by their own keys, without a replacer call per
// entry (lib/serialize.js `takeLabels`); anything else is walked strictly. Both give what
// JSON.stringify gives, each value read once.
test('labels fast path must-not-fire: an ordinary object of strings (a getter among them) is read once per key, text and copy as JSON.stringify gives', () => {
  let reads = 0;
  const labels = { team: 'a', ['__proto__']: 'p' };
  Object.defineProperty(labels, 'agent', { enumerable: true, get: () => `x${++reads}` });
  const r = serializeRequest({ launch: { labels } });
  assert.equal(reads, 1);
  assert.equal(r.labels, '{"team":"a","__proto__":"p","agent":"x1"}');
  assert.deepEqual(Object.entries(r.copy), [['team', 'a'], ['__proto__', 'p'], ['agent', 'x1']]);
});

test('labels fast path must-fire: a value that is not a string goes to the strict walk, at its path, with each value read once', () => {
  let reads = 0;
  const labels = { team: 'a' };
  Object.defineProperty(labels, 'agent', { enumerable: true, get: () => `x${++reads}` });
  labels.count = NaN;
  labels.after = 'z';
  const refused = serializeRequest({ launch: { labels } });
  assert.ok(refused instanceof NotJson);
  assert.deepEqual(refused.segments, ['launch', 'labels', 'count']);
  assert.equal(refused.what, 'NaN');
  assert.equal(reads, 1);
  // A nested object is carried to the strict walk as read: its text is JSON.stringify's.
  const nested = serializeRequest({ launch: { labels: { team: 'a', deep: { k: 1 } } } });
  assert.equal(nested.labels, '{"team":"a","deep":{"k":1}}');
  assert.deepEqual({ ...nested.copy }, { team: 'a' });
});

test('labels fast path must-fire: an own toJSON, a class instance and an array are walked as JSON.stringify walks them', () => {
  const withToJson = { team: 'a', toJSON: () => ({ team: 'b' }) };
  assert.equal(serializeRequest({ launch: { labels: withToJson } }).labels, JSON.stringify({ team: 'b' }));
  class Labels {
    constructor() {
      this.team = 'c';
    }
  }
  const instance = serializeRequest({ launch: { labels: new Labels() } });
  assert.equal(instance.labels, '{"team":"c"}');
  assert.deepEqual({ ...instance.copy }, { team: 'c' });
  assert.equal(serializeRequest({ launch: { labels: ['a'] } }).labels, '["a"]');
});

test('labels fast path must-fire, each part of its guard: a Proxy is not asked for its prototype, a boxed string, a nested toJSON and an inherited toJSON are walked as JSON.stringify walks them', () => {
  // A Proxy: JSON.stringify never asks getPrototypeOf; neither may the guard.
  let protoAsks = 0;
  const proxied = new Proxy({ team: 'a' }, { getPrototypeOf: (t) => (protoAsks++, Reflect.getPrototypeOf(t)) });
  assert.equal(serializeRequest({ launch: { labels: proxied } }).labels, '{"team":"a"}');
  assert.equal(protoAsks, 0);
  // A boxed string is written as the string (never as its indices).
  assert.equal(serializeRequest({ launch: { labels: new String('ab') } }).labels, '"ab"');
  // A toJSON on the labels the request's walk handed over is called on them (not on a copy).
  let self = null;
  const inner = {
    team: 'a',
    toJSON() {
      self = this;
      return { team: 'b' };
    },
  };
  assert.equal(serializeRequest({ launch: { labels: { toJSON: () => inner } } }).labels, '{"team":"b"}');
  assert.equal(self, inner);
  // An inherited toJSON (Object.prototype's) applies to the labels' copy as to any object.
  Object.defineProperty(Object.prototype, 'toJSON', {
    configurable: true,
    writable: true,
    value: function () {
      return typeof this.team === 'string' ? { team: `P${this.team}` } : this;
    },
  });
  let inherited;
  try {
    inherited = serializeRequest({ launch: { labels: { team: 'a' } } });
  } finally {
    delete Object.prototype.toJSON;
  }
  // The copy JS stamps and launches with is what the text the core validated says.
  assert.deepEqual({ ...inherited.copy }, JSON.parse(inherited.labels));
});

// The walk writes the text itself; JSON.stringify is called only to escape a string that needs
// it. Its answers must be the definitions' above, read for read.

const anyString = fc.string({ unit: 'binary' });
const plainData = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, anyString, fc.double(), fc.integer(), fc.boolean(), fc.constant(null), fc.constant(undefined), tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.dictionary(fc.oneof(anyString, fc.constantFrom('__proto__', 'launch', 'labels')), tie('value'), { maxKeys: 4 }),
}));

test('serializeRequest writes any string (quotes, control characters, lone surrogates, pairs) and any number as JSON.stringify does', () => {
  fc.assert(
    fc.property(plainData.object, fc.dictionary(anyString, anyString), plainData.value, (rest, labels, name) => {
      for (const r of [rest, { ...rest, launch: { labels, name } }, { launch: { name, labels: { ...labels, x: name } } }]) {
        assert.deepStrictEqual(plain(serializeRequest(r)), plainReference(serializeRequestReference(r)));
      }
    }),
    { numRuns: 3000 },
  );
});

test('plain-data walk must-not-fire: plain data without a character to escape is written without a JSON.stringify call', () => {
  const request = { launch: { name: 'n', labels: { team: 'a', agent: 'b' } }, resources: { cpu: 2, gpu: false, disks: [1.5, null, 'x'] } };
  const { result, calls } = jsonCalls('stringify', () => serializeRequest(request));
  assert.equal(calls, 0);
  assert.deepEqual(plain(result), plainReference(serializeRequestReference(request)));
});

test('plain-data walk must-fire: each string (key or value) with a character to escape is written by JSON.stringify, once', () => {
  const request = { launch: { name: 'say "hi"\n', labels: { 'a\tb': 'ok', team: 'x\\y' } }, resources: { plain: 'p' } };
  const { result, calls } = jsonCalls('stringify', () => serializeRequest(request));
  assert.equal(calls, 3);
  assert.deepEqual(plain(result), plainReference(serializeRequestReference(request)));
});

test('a Date, a class instance, a Map, boxed values and a sparse array are written as JSON.stringify writes them, each value read once', () => {
  class Spec {
    constructor() {
      this.cpu = 1;
    }
  }
  let reads = 0;
  const resources = { when: new Date(0), spec: new Spec(), map: new Map([[1, 2]]), boxed: [new Number(2), new String('s'), new Boolean(false)], sparse: [1, , 3] };
  Object.defineProperty(resources, 'read', { enumerable: true, get: () => (reads++, 1) });
  const request = { launch: { name: 'n' }, resources };
  const ours = plain(serializeRequest(request));
  assert.equal(reads, 1);
  assert.deepEqual(ours, plainReference(serializeRequestReference(request)));
  assert.equal(ours.json, '{"launch":{"name":"n"},"resources":{"when":"1970-01-01T00:00:00.000Z","spec":{"cpu":1},"map":{},"boxed":[2,"s",false],"sparse":[1,null,3],"read":1}}');
});

test('plain-data walk must-fire: a toJSON anywhere is called with its own key (an index as a string), and may answer nothing', () => {
  const keyOf = { toJSON: (k) => `key:${k}` };
  const request = { a: { b: keyOf }, list: [keyOf, { c: keyOf }] };
  assert.equal(serializeRequest(request).json, '{"a":{"b":"key:b"},"list":["key:0",{"c":"key:c"}]}');
  // Answering undefined: the key is left out of an object (even `__proto__`), null in an array.
  const nothing = { toJSON: () => undefined };
  const withProto = JSON.parse('{"__proto__": 1, "x": 2}');
  Object.defineProperty(withProto, '__proto__', { value: nothing, enumerable: true });
  assert.equal(serializeRequest({ p: withProto, list: [nothing] }).json, '{"p":{"x":2},"list":[null]}');
  assert.deepEqual(plain(serializeRequest({ p: withProto })), plainReference(serializeRequestReference({ p: withProto })));
});

test('plain-data walk must-fire: a getter that gives Object.prototype a toJSON mid-walk: what follows is written as JSON.stringify would', () => {
  const request = {
    get first() {
      Object.defineProperty(Object.prototype, 'toJSON', { configurable: true, writable: true, value: () => 'patched' });
      return 1;
    },
    second: { x: 1 },
  };
  let ours;
  let reference;
  try {
    ours = plain(serializeRequest(request));
  } finally {
    delete Object.prototype.toJSON;
  }
  try {
    reference = plainReference(serializeRequestReference(request));
  } finally {
    delete Object.prototype.toJSON;
  }
  assert.deepEqual(ours, reference);
  assert.equal(ours.json, '{"first":1,"second":"patched"}');
});

test('plain-data walk: a cycle through plain objects or arrays is unreadable (null); a value met twice on different branches is not a cycle', () => {
  const a = { launch: { name: 'n' } };
  a.launch.list = [a];
  assert.equal(serializeRequest(a), null);
  const list = [];
  list.push({ list });
  assert.equal(serializeRequest({ x: list }), null);
  const shared = [1];
  assert.equal(serializeRequest({ x: shared, y: [shared, shared] }).json, '{"x":[1],"y":[[1],[1]]}');
});
