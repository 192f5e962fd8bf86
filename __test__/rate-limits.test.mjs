// Pacing (issue 33, parts 1 and 2): a pool's declared create-rate limit (`rateLimit`, a token
// bucket) and the `Retry-After` cooldown a classifier asks for (`retryAfterMs`), in process.
// The router's clock is injected, so every time below is exact.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  createSandboxRouter,
  InMemoryProviderRegistry,
  SandboxRouter,
  ProviderCapacityExhaustedError,
  ProviderRegistryError,
  SandboxRouterConfigurationError,
} from '../index.mjs';
import { CANARY, definition, fakeRuntime, leaks, recorder, trapAll } from './fixtures.mjs';

const ONE_A_SECOND = { launchesPerSecond: 1 };

/** Two pools, `a` ranked first (cheaper); `a` declares `limit` (b: `limitB`). */
function setup({ limit = ONE_A_SECOND, limitB, classify, runtimeA = fakeRuntime(), maxAttempts } = {}) {
  const clock = { now: 1_000_000 };
  const rec = recorder();
  const defs = [
    definition('a', { runtime: runtimeA, signals: { estimatedCost: 0.01 }, ...(limit ? { rateLimit: limit } : {}) }),
    definition('b', { signals: { estimatedCost: 0.02 }, ...(limitB ? { rateLimit: limitB } : {}) }),
  ];
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry(defs),
    observer: rec.observer,
    clock: () => clock.now,
    ...(classify ? { classifyProviderFailure: classify } : {}),
  });
  const request = maxAttempts === undefined ? {} : { routing: { maxAcquisitionAttempts: maxAttempts } };
  return { router, rec, clock, request, runtimeA };
}

test('rate limit must-fire: a pool without a token is skipped for the next, consuming no attempt', async () => {
  const { router, rec, request } = setup({ maxAttempts: 1 });
  assert.equal((await router.provision(request)).providerId, 'a');
  // Same instant: a's one token is spent; b launches although one attempt is allowed.
  const second = await router.provision(request);
  assert.equal(second.providerId, 'b');
  const skipped = rec.events.filter((e) => e.type === 'capacity.skipped');
  assert.equal(skipped.length, 1);
  assert.equal(skipped[0].providerId, 'a');
  assert.equal(skipped[0].reason, 'RATE_LIMITED');
  const limited = rec.events.filter((e) => e.type === 'pool.rate.limited');
  assert.deepEqual(
    limited.map((e) => [e.providerId, e.sandboxId, e.retryAt]),
    [['a', second.id, new Date(1_000_000 + 1_000).toISOString()]],
  );
});

test('rate limit must-not-fire: a token comes back after 1 / launchesPerSecond, and a pool without a limit is never paced', async () => {
  const { router, rec, clock, request } = setup({ maxAttempts: 1 });
  assert.equal((await router.provision(request)).providerId, 'a');
  clock.now += 1_000;
  assert.equal((await router.provision(request)).providerId, 'a');
  const unlimited = setup({ limit: null });
  for (let i = 0; i < 20; i++) assert.equal((await unlimited.router.provision({})).providerId, 'a');
  assert.equal(rec.events.filter((e) => e.type === 'capacity.skipped').length, 0);
  assert.equal(unlimited.rec.events.filter((e) => e.type === 'capacity.skipped').length, 0);
});

test('rate limit: burst launches at once after a quiet spell, then one per token', async () => {
  const { router, clock } = setup({ limit: { launchesPerSecond: 5, burst: 3 } });
  const at = [];
  for (let i = 0; i < 5; i++) at.push((await router.provision({})).providerId);
  assert.deepEqual(at, ['a', 'a', 'a', 'b', 'b']);
  clock.now += 200; // one token (5 a second)
  assert.equal((await router.provision({})).providerId, 'a');
  assert.equal((await router.provision({})).providerId, 'b');
});

test('rate limit must-fire: every pool paced → a retryable LAUNCH_RATE_LIMITED with when to retry', async () => {
  const { router, clock } = setup({ limitB: { launchesPerSecond: 2 } });
  await router.provision({});
  await router.provision({});
  clock.now += 100;
  await assert.rejects(router.provision({}), (e) => {
    assert.ok(e instanceof ProviderCapacityExhaustedError);
    assert.equal(e.code, 'LAUNCH_RATE_LIMITED');
    assert.equal(e.retryable, true);
    // b's next token comes at 500 ms (2 a second), a's at 1 s: the first is 400 ms away.
    assert.equal(e.retryAfterMs, 400);
    assert.deepEqual(
      e.rejections.map((r) => [r.providerId, r.reason]),
      [
        ['a', 'RATE_LIMITED'],
        ['b', 'RATE_LIMITED'],
      ],
    );
    return true;
  });
  clock.now += 400;
  assert.equal((await router.provision({})).providerId, 'b');
});

test('rate limit must-not-fire: a failed launch spends its token, a skipped one does not exist', async () => {
  let fail = true;
  const runtimeA = fakeRuntime({
    launch: () => {
      if (fail) throw new Error(`429 ${CANARY}`);
      return { id: 'ok' };
    },
  });
  const { router } = setup({ runtimeA, classify: () => ({ code: 'PRE_ALLOCATION', retryable: true }) });
  // a fails retryably (its token spent), b launches.
  assert.equal((await router.provision({})).providerId, 'b');
  fail = false;
  // Same instant: a has no token, so b again; a launch was not attempted on a.
  const calls = runtimeA.calls.length;
  assert.equal((await router.provision({})).providerId, 'b');
  assert.equal(runtimeA.calls.length, calls);
});

test('cooldown must-fire: a classifier answering retryAfterMs cools the pool for that long (COOLING_DOWN)', async () => {
  let fail = true;
  const runtimeA = fakeRuntime({
    launch: () => {
      if (fail) throw Object.assign(new Error(`Too Many Requests ${CANARY}`), { status: 429, headers: { 'retry-after': '5' } });
      return { id: 'ok' };
    },
  });
  const classify = (error) =>
    error.status === 429 ? { code: 'PROVIDER_RATE_LIMITED_429', retryable: true, retryAfterMs: Number(error.headers['retry-after']) * 1000 } : { code: 'X', retryable: false };
  const { router, rec, clock } = setup({ limit: null, runtimeA, classify });
  assert.equal((await router.provision({})).providerId, 'b');
  fail = false;
  clock.now += 4_999;
  const before = runtimeA.calls.length;
  assert.equal((await router.provision({})).providerId, 'b');
  assert.equal(runtimeA.calls.length, before, 'a is not called while it cools down');
  const skip = rec.events.filter((e) => e.type === 'capacity.skipped').pop();
  assert.equal(skip.providerId, 'a');
  assert.equal(skip.reason, 'COOLING_DOWN');
  // The cooldown began right after the failed attempt that asked for it.
  const types = rec.events.map((e) => e.type);
  const started = rec.events.find((e) => e.type === 'pool.cooldown.started');
  assert.deepEqual([started.providerId, started.retryAfterMs, started.until], ['a', 5_000, new Date(1_000_000 + 5_000).toISOString()]);
  assert.ok(types.indexOf('attempt.failed') < types.indexOf('pool.cooldown.started'));
  assert.equal(rec.events.filter((e) => e.type === 'pool.rate.limited').length, 0, 'a cooldown is not a rate-limit skip');
  clock.now += 1;
  assert.equal((await router.provision({})).providerId, 'a');
  // A cooldown is not a health failure: no circuit event was emitted.
  assert.equal(rec.events.filter((e) => e.type.startsWith('health.circuit')).length, 0);
  assert.ok(!JSON.stringify(rec.events).includes(CANARY));
});

test('cooldown must-not-fire: no retryAfterMs (or one that is not a positive number) → no cooldown', async () => {
  for (const retryAfterMs of [undefined, 0, -5, NaN, '5000', Infinity]) {
    let fail = true;
    const runtimeA = fakeRuntime({
      launch: () => {
        if (fail) throw new Error('429');
        return { id: 'ok' };
      },
    });
    const { router } = setup({ limit: null, runtimeA, classify: () => ({ code: 'PRE', retryable: true, retryAfterMs }) });
    assert.equal((await router.provision({})).providerId, 'b');
    fail = false;
    assert.equal((await router.provision({})).providerId, 'a', `retryAfterMs ${String(retryAfterMs)}`);
  }
});

test('rateLimit is validated strictly, naming the field (registry and factory)', async () => {
  const bad = [
    [{ launchesPerSecond: 0 }, 'rateLimit.launchesPerSecond'],
    [{ launchesPerSecond: -1 }, 'rateLimit.launchesPerSecond'],
    [{ launchesPerSecond: NaN }, 'rateLimit.launchesPerSecond'],
    [{}, 'rateLimit.launchesPerSecond'],
    [{ launchesPerSecond: 5, burst: 0 }, 'rateLimit.burst'],
    [{ launchesPerSecond: 5, burst: 2.5 }, 'rateLimit.burst'],
    [{ launchesPerSecond: 5, bursts: 2 }, 'rateLimit.bursts'],
    ['5/s', 'rateLimit'],
  ];
  for (const [rateLimit, field] of bad) {
    assert.throws(
      () => new InMemoryProviderRegistry([definition('a', { rateLimit })]),
      (e) => e instanceof ProviderRegistryError && e.code === 'INVALID_PROVIDER_DEFINITION' && e.field === field,
      JSON.stringify(rateLimit),
    );
    assert.throws(
      () => createSandboxRouter({ providers: { local: { rateLimit } } }),
      (e) => e instanceof SandboxRouterConfigurationError && e.field === `providers.local.${field}`,
      JSON.stringify(rateLimit),
    );
  }
  // must-not-fire: a valid one is taken.
  new InMemoryProviderRegistry([definition('a', { rateLimit: { launchesPerSecond: 0.5, burst: 10 } })]);
  await createSandboxRouter({ providers: { local: { rateLimit: { launchesPerSecond: 5 } } } }).close?.();
});

test('explain must-fire: a pool without a token or cooling down is shown rejected with until when', async () => {
  const { router, clock } = setup({ limit: { launchesPerSecond: 4 } });
  await router.provision({});
  const e = await router.explain({});
  const a = e.rejected.find((r) => r.providerId === 'a');
  assert.ok(a, JSON.stringify(e));
  assert.equal(a.reasons[0].code, 'RATE_LIMITED');
  assert.equal(a.reasons[0].detail, `no launch token until ${new Date(clock.now + 250).toISOString()}`);
  assert.deepEqual(e.eligible.map((p) => p.providerId), ['b']);
});

test('explain must-not-fire: with a token (or no limit) the pool is eligible as before', async () => {
  const { router, clock } = setup({ limit: { launchesPerSecond: 4 } });
  assert.deepEqual((await router.explain({})).eligible.map((p) => p.providerId), ['a', 'b']);
  await router.provision({});
  clock.now += 250;
  assert.deepEqual((await router.explain({})).eligible.map((p) => p.providerId), ['a', 'b']);
});

test('explain: a pool cooling down names COOLING_DOWN', async () => {
  let fail = true;
  const runtimeA = fakeRuntime({
    launch: () => {
      if (fail) throw new Error('429');
      return { id: 'ok' };
    },
  });
  const { router, clock } = setup({ limit: null, runtimeA, classify: () => ({ code: 'PRE', retryable: true, retryAfterMs: 2_000 }) });
  await router.provision({});
  fail = false;
  const a = (await router.explain({})).rejected.find((r) => r.providerId === 'a');
  assert.equal(a.reasons[0].code, 'COOLING_DOWN');
  assert.equal(a.reasons[0].detail, `cooling down after Retry-After until ${new Date(clock.now + 2_000).toISOString()}`);
});

// Values are never echoed (a key is, cut at 64 characters, as for every option: src/core/json.rs).
test('hostile rateLimit values are typed errors that echo nothing (must-fire), a plain one is taken (must-not-fire)', () => {
  const hostile = [
    ['a Proxy that throws on every trap', trapAll()],
    ['a throwing getter', { get launchesPerSecond() { throw new Error(CANARY); } }],
    ['a cycle', (() => { const o = { launchesPerSecond: 1 }; o.self = o; return o; })()],
    ['a BigInt', { launchesPerSecond: 5n }],
    ['Infinity', { launchesPerSecond: Infinity }],
    ['a huge burst', { launchesPerSecond: 1, burst: 1e300 }],
  ];
  for (const [name, rateLimit] of hostile) {
    assert.throws(
      () => new InMemoryProviderRegistry([definition('a', { rateLimit })]),
      (e) => e instanceof ProviderRegistryError && !leaks(e) && !leaks(e.message) && typeof e.code === 'string',
      name,
    );
  }
  assert.doesNotThrow(() => new InMemoryProviderRegistry([definition('a', { rateLimit: { launchesPerSecond: 1, burst: 1 } })]));
});

test('hostile classifier answers: a throwing retryAfterMs getter or a huge value never crash (must-fire: bounded), a readable one cools (must-not-fire)', async () => {
  const answers = [
    ['a throwing getter', () => ({ code: 'PRE', retryable: true, get retryAfterMs() { throw new Error(CANARY); } }), 'a'],
    ['1e308 ms: cut to a day', () => ({ code: 'PRE', retryable: true, retryAfterMs: 1e308 }), 'b'],
    ['a readable 1 s', () => ({ code: 'PRE', retryable: true, retryAfterMs: 1_000 }), 'b'],
  ];
  for (const [name, classify, next] of answers) {
    let fail = true;
    const runtimeA = fakeRuntime({
      launch: () => {
        if (fail) throw new Error('429');
        return { id: 'ok' };
      },
    });
    const { router, clock } = setup({ limit: null, runtimeA, classify });
    // A throwing getter makes the whole answer unreadable: an unclassified failure, final.
    const first = await router.provision({}).then((s) => s.providerId, (e) => e.code);
    fail = false;
    if (name === 'a throwing getter') {
      assert.equal(first, 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN', name);
    } else {
      assert.equal(first, 'b', name);
    }
    assert.equal((await router.provision({})).providerId, next, name);
    if (name.startsWith('1e308')) {
      clock.now += 86_400_000;
      assert.equal((await router.provision({})).providerId, 'a', 'the day passed');
    }
  }
});

/**
 * A loopback account with E2B Hobby's shape: at most one create a second; above it the answer
 * is 429 with `Retry-After: 1`. Records when each create arrived and how it was answered.
 */
async function hobbyAccount() {
  const { createServer } = await import('node:http');
  const seen = [];
  let lastAccepted = -Infinity;
  const server = createServer((req, res) => {
    const at = Date.now();
    if (req.method === 'POST' && req.url === '/sandboxes') {
      if (at - lastAccepted < 1_000) {
        seen.push({ at, status: 429 });
        res.writeHead(429, { 'retry-after': '1', 'content-type': 'application/json' }).end(`{"message":"rate limit ${CANARY}"}`);
        return;
      }
      lastAccepted = at;
      seen.push({ at, status: 201 });
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ sandboxID: `sbx-${seen.length}` }));
      return;
    }
    res.writeHead(204).end();
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  // Adapter-shaped: the SDK's error carries the HTTP status and headers.
  const runtime = {
    id: 'e2b-like',
    async launch() {
      const r = await fetch(`${base}/sandboxes`, { method: 'POST', headers: { authorization: `Bearer ${CANARY}` } });
      const body = await r.json();
      if (r.status === 429) throw Object.assign(new Error(body.message), { status: 429, headers: { 'retry-after': r.headers.get('retry-after') } });
      return { id: body.sandboxID };
    },
    async destroy() {},
  };
  return { seen, runtime, close: () => new Promise((resolve) => server.close(resolve)) };
}

const retryAfterClassifier = (withRetryAfter) => (error) =>
  error?.status === 429
    ? { code: 'PROVIDER_RATE_LIMITED', retryable: true, ...(withRetryAfter ? { retryAfterMs: Number(error.headers['retry-after']) * 1000 } : {}) }
    : null;

async function burst(withRetryAfter, rateLimit) {
  const account = await hobbyAccount();
  try {
    const router = new SandboxRouter({
      registry: new InMemoryProviderRegistry([
        definition('e2b', { runtime: account.runtime, signals: { estimatedCost: 0.01 }, ...(rateLimit ? { rateLimit } : {}) }),
        definition('spare', { signals: { estimatedCost: 0.02 } }),
      ]),
      classifyProviderFailure: retryAfterClassifier(withRetryAfter),
      health: false,
    });
    const served = [];
    const t0 = Date.now();
    while (Date.now() - t0 < 2_500) {
      served.push((await router.provision({})).providerId);
      await new Promise((r) => setTimeout(r, 25));
    }
    return { seen: account.seen, served };
  } finally {
    await account.close();
  }
}

test('Retry-After must-fire: after a 429 the pool is left alone for its Retry-After: at most one create per window reaches the account', async () => {
  const { seen, served } = await burst(true);
  const refused = seen.filter((s) => s.status === 429);
  assert.ok(refused.length >= 1, 'the account refused at least once');
  for (const r of refused) {
    const within = seen.filter((s) => s.at > r.at && s.at < r.at + 1_000);
    assert.deepEqual(within, [], `a create reached the account within the Retry-After of the 429 at ${r.at}`);
  }
  assert.ok(served.includes('spare') && served.includes('e2b'), served.join());
});

test('Retry-After must-not-fire: without retryAfterMs the router keeps asking the account (what the cooldown prevents)', async () => {
  const { seen } = await burst(false);
  const refused = seen.filter((s) => s.status === 429).length;
  assert.ok(refused >= 10, `${refused} refusals: the account is hammered without a cooldown`);
});

// Declared a little under the account's rate: the account times arrivals, the router its
// sends, and a first request's connection set-up makes one gap look shorter than it was.
test('rate limit must-fire: a declared limit just under the account\'s rate keeps every create under it (0 refusals)', async () => {
  const { seen, served } = await burst(false, { launchesPerSecond: 0.9 });
  assert.equal(seen.filter((s) => s.status === 429).length, 0);
  assert.ok(seen.length >= 2, `${seen.length} creates reached the account`);
  assert.ok(served.filter((p) => p === 'e2b').length === seen.length);
});
