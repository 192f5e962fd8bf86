// serializeRequest (lib/serialize.js) reads a request once, with JSON.stringify and a replacer
// that takes the labels apart: it must give exactly what the definition below gives (how
// 0.7 read requests), read the caller's value exactly as often and in the same order, and
// survive being called again from inside a getter.
import test from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { serializeRequest, replacer } = require('../lib/serialize.js');

/**
 * The definition: JSON.stringify with a replacer that marks and takes the labels out. (0.7's
 * own copy of this recognized the root by reading `this['']`, one read of the caller's value
 * more than JSON.stringify makes; the root is simply the replacer's first call.)
 */
function serializeRequestReference(request) {
  if (request === undefined || request === null) return { json: '{}', labels: undefined, copy: null };
  let root;
  let launch;
  let labels;
  let copy = null;
  function captureLabels(value) {
    let top;
    let first = true;
    const out = {};
    labels =
      JSON.stringify(value, function (k, v) {
        const isRoot = first;
        first = false;
        if (isRoot) top = v;
        else if (this === top && typeof v === 'string') {
          if (k === '__proto__') Object.defineProperty(out, k, { value: v, writable: true, enumerable: true, configurable: true });
          else out[k] = v;
        }
        return replacer(k, v);
      }) ?? 'null';
    copy = out;
  }
  let first = true;
  function capture(key, value) {
    const isRoot = first;
    first = false;
    switch (typeof value) {
      case 'object':
        if (isRoot) root = value;
        else if (key === 'launch' && this === root) launch = value;
        else if (key === 'labels' && launch !== undefined && this === launch) {
          captureLabels(value);
          return undefined;
        }
        return value;
      case 'string':
      case 'boolean':
        return value;
      default:
        if (key === 'labels' && launch !== undefined && this === launch) {
          if (value !== undefined) captureLabels(value);
          return undefined;
        }
        return replacer(key, value);
    }
  }
  try {
    const json = JSON.stringify(request, capture);
    return typeof json === 'string' ? { json, labels, copy } : null;
  } catch {
    return null;
  }
}

/** Comparable form: the copy's own entries (with `__proto__` as data), not its prototype. */
function plain(r) {
  if (r === null) return null;
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
  key: fc.oneof(fc.string(), fc.constantFrom('launch', 'labels', '__proto__', 'toJSON', '', 'name')),
});
const special = fc.constantFrom(NaN, Infinity, -0, () => 1, Symbol('s'), 10n, undefined, null, { toJSON: (k) => `key:${k}` }, new Number(NaN), new String('s'), Object(Symbol('o')));
const value = fc.oneof(anything, special);
const labels = fc.oneof(fc.dictionary(fc.oneof(fc.string(), fc.constant('__proto__')), fc.oneof(fc.string(), value)), value);
const request = fc.oneof(
  fc.record({ launch: fc.record({ labels, name: value }, { requiredKeys: [] }), resources: value }, { requiredKeys: [] }),
  fc.record({ launch: fc.oneof(value, fc.array(value)), x: value }, { requiredKeys: [] }),
  value,
);

test('serializeRequest equals JSON.stringify with the replacer, over arbitrary values', () => {
  fc.assert(
    fc.property(request, (r) => {
      assert.deepStrictEqual(plain(serializeRequest(r)), plain(serializeRequestReference(r)));
    }),
    { numRuns: 3000 },
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
      const reference = plain(serializeRequestReference(logged(r, b)));
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
  assert.deepEqual(plain(innerResult), plain(serializeRequestReference(inner)));
});

test('cycles, BigInts and throwing getters make the request unreadable (null), as JSON.stringify does', () => {
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
    assert.equal(serializeRequestReference(r), null);
  }
  // must-not-fire: the same object twice (not a cycle) serializes
  const shared = { a: 1 };
  assert.equal(serializeRequest({ x: shared, y: shared }).json, '{"x":{"a":1},"y":{"a":1}}');
});
