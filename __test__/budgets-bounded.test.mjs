// Issue 34, in one process: what the router keeps is bounded by what must be remembered,
// what a caller sends is bounded, and costs are exact. Label limits, the cost range, exact
// sums, budgetStatus pages / filters / count, keys freed when their windows are over, and
// the settle horizon. Pairs are named must-fire / must-not-fire. The shared ledger's side is
// budgets-totals.test.mjs; the memory figures are `npm run bench -- --only=soak`.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  InMemoryProviderRegistry,
  SandboxRouter,
  SandboxRequestValidationError,
  SandboxRouterConfigurationError,
} from '../index.mjs';
import { CANARY, definition, fakeRuntime, leaks } from './fixtures.mjs';

const DAY = 86_400_000;
const tenant = (value, extra = {}) => ({ launch: { labels: { tenant: value, ...extra } } });

/** A router over one pool of cost `cost`, an injected clock, and these options. */
function setup(options = {}, cost = 1) {
  const clock = { now: Date.parse('2026-06-01T12:00:00Z') };
  const runtime = fakeRuntime();
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { runtime, signals: { estimatedCost: cost } })]),
    clock: () => clock.now,
    health: false,
    ...options,
  });
  return { router, clock, runtime };
}

const spend = (limit, window = { every: 'day', timeZone: 'UTC' }) => ({ id: 'spend', key: { label: 'tenant' }, limit: { cost: limit }, window });

// --- what a caller sends ---------------------------------------------------------------

test('label limits must-fire: a 1 MiB tenant value, a key over 256 bytes, 65 labels are INVALID_REQUEST naming the label (never its value)', async () => {
  const { router, runtime } = setup({ budgets: [spend(100)] });
  const huge = `${CANARY}${'x'.repeat(1024 * 1024)}`;
  const cases = [
    [tenant(huge), 'launch.labels.tenant'],
    [tenant('acme', { ['k'.repeat(257)]: 'v' }), `launch.labels.${'k'.repeat(64)}`],
    [{ launch: { labels: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`l${i}`, 'v'])) } }, 'launch.labels'],
  ];
  for (const [request, field] of cases) {
    const e = await router.provision(request).catch((x) => x);
    assert.ok(e instanceof SandboxRequestValidationError, String(e));
    assert.equal(e.code, 'INVALID_REQUEST');
    assert.ok(e.field.startsWith(field), `${e.field} names ${field}`);
    assert.ok(!leaks(e), 'the value is not echoed');
  }
  // route and explain read the same limits
  assert.throws(() => router.route(tenant(huge)), (e) => e.code === 'INVALID_REQUEST' && e.field === 'launch.labels.tenant');
  assert.equal(runtime.calls.length, 0, 'nothing launched');
  assert.deepEqual(await router.budgetStatus(), [], 'and no budget key kept');
});

test('label limits must-not-fire: labels at the limits pass; a router may raise or lower them (option limits)', async () => {
  const { router } = setup({ budgets: [spend(100)] });
  const at = { launch: { labels: Object.fromEntries([['tenant', 'v'.repeat(1024)], ...Array.from({ length: 63 }, (_, i) => [`${'k'.repeat(250)}${i}`, 'v'])]) } };
  assert.equal((await router.provision(at)).providerId, 'a');
  const wide = setup({ limits: { labels: 200, labelKeyBytes: 4096, labelValueBytes: 65_536 } }).router;
  assert.equal((await wide.provision(tenant('v'.repeat(65_536)))).providerId, 'a');
  const narrow = setup({ limits: { labelValueBytes: 8 } }).router;
  await assert.rejects(narrow.provision(tenant('nine-char')), (e) => e.code === 'INVALID_REQUEST' && e.field === 'launch.labels.tenant');
  assert.throws(() => narrow.route(tenant('nine-char')), (e) => e.code === 'INVALID_REQUEST');
  assert.equal((await narrow.provision(tenant('8-chars!'))).providerId, 'a');
});

test('limits option must-fire: out of range or unknown is INVALID_CONFIGURATION naming the field', () => {
  const cases = [
    [{ labels: 0 }, 'limits.labels'],
    [{ labelValueBytes: 65_537 }, 'limits.labelValueBytes'],
    [{ settleHorizonMs: -1 }, 'limits.settleHorizonMs'],
    [{ settleHorizonMs: 86_400_001 }, 'limits.settleHorizonMs'],
    [{ labelz: 1 }, 'limits.labelz'],
  ];
  for (const [limits, field] of cases) {
    assert.throws(() => setup({ limits }), (e) => e instanceof SandboxRouterConfigurationError && e.code === 'INVALID_CONFIGURATION' && e.field === field, field);
  }
});

test('cost range must-fire: settleCost(id, 1e308), a negative or NaN cost, and a cost limit over 1e9 are refused, typed', async () => {
  const { router } = setup({ budgets: [spend(100)] });
  const s = await router.provision(tenant('acme'));
  for (const bad of [1e308, 1e9 + 1, -0.01, NaN, Infinity]) {
    await assert.rejects(router.settleCost(s.id, bad), (e) => e instanceof SandboxRequestValidationError && e.code === 'INVALID_INPUT' && e.field === 'actualCost', String(bad));
  }
  assert.throws(() => setup({ budgets: [spend(1e10)] }), (e) => e.code === 'INVALID_CONFIGURATION' && e.field === 'budgets[0].limit.cost');
  assert.equal((await router.budgetStatus())[0].used.cost, 1, 'nothing changed');
});

test('cost range must-not-fire: costs from 0 to 1e9 are accepted, and settleCost(id, 0.2) reads 0.2', async () => {
  const { router } = setup({ budgets: [spend(1e9)] });
  const s = await router.provision(tenant('acme'));
  assert.equal(await router.settleCost(s.id, 1e9), true);
  assert.equal(await router.settleCost(s.id, 0), true);
  assert.equal(await router.settleCost(s.id, 0.2), true);
  assert.equal((await router.budgetStatus())[0].used.cost, 0.2, 'not 0.19999999999999996');
});

test('exact sums: 1,000 settlements of 0.1 read 100 exactly, and giving them all back reads 0', async () => {
  const { router } = setup({ budgets: [spend(1e6)] }, 0.3);
  const ids = [];
  for (let i = 0; i < 1000; i++) {
    const s = await router.provision(tenant('acme'));
    await router.settleCost(s.id, 0.1);
    ids.push(s.id);
  }
  assert.equal((await router.budgetStatus())[0].used.cost, 100);
  for (const id of ids) await router.settleCost(id, 0);
  assert.equal((await router.budgetStatus())[0].used.cost, 0);
});

// --- budgetStatus that scales ------------------------------------------------------------

test('status pages must-fire: limit, cursor, rule and key filters, and a count without rows', async () => {
  const { router } = setup({
    budgets: [spend(100), { id: 'live', key: { label: 'tenant' }, limit: { concurrent: 100 } }],
  });
  for (const t of ['m', 'c', 'x', 'a']) await router.provision(tenant(t));
  const names = (rows) => rows.map((r) => `${r.rule}:${r.key.value}`);
  const first = await router.budgetStatus({ limit: 3 });
  assert.deepEqual(names(first), ['spend:a', 'spend:c', 'spend:m']);
  const last = first.at(-1);
  const next = await router.budgetStatus({ limit: 3, cursor: { rule: last.rule, key: last.key.value } });
  assert.deepEqual(names(next), ['spend:x', 'live:a', 'live:c']);
  assert.deepEqual(names(await router.budgetStatus({ rule: 'live', key: 'x' })), ['live:x']);
  assert.deepEqual(names(await router.budgetStatus({ key: 'c' })), ['spend:c', 'live:c']);
  assert.equal(await router.budgetCount(), 8);
  assert.equal(await router.budgetCount({ rule: 'spend' }), 4);
  assert.equal(await router.budgetCount({ rule: 'live', key: 'm' }), 1);
  assert.equal((await router.budgetStatus()).length, 8, 'the default page holds them all');
});

test('status pages must-not-fire: bad queries are INVALID_INPUT naming the field; a router without budgets lists and counts nothing', async () => {
  const { router } = setup({ budgets: [spend(100)] });
  const cases = [
    [{ limit: 0 }, 'limit'],
    [{ limit: 10_001 }, 'limit'],
    [{ rule: 'nope' }, 'rule'],
    [{ cursor: { rule: 'nope', key: 'a' } }, 'cursor.rule'],
    [{ cursor: 'a' }, 'cursor'],
    [{ extra: 1 }, 'extra'],
  ];
  for (const [q, field] of cases) {
    await assert.rejects(router.budgetStatus(q), (e) => e instanceof SandboxRequestValidationError && e.code === 'INVALID_INPUT' && e.field === field, field);
  }
  const plain = setup().router;
  await plain.provision(tenant('acme'));
  assert.deepEqual(await plain.budgetStatus({ limit: 5 }), []);
  assert.equal(await plain.budgetCount(), 0);
});

// --- what the router keeps, and for how long ---------------------------------------------

test('freeing must-fire: keys of yesterday are not listed today, and a new tenant per request leaves one key per tenant of the current window only', async () => {
  const { router, clock } = setup({ budgets: [spend(100)] });
  for (let i = 0; i < 200; i++) {
    const s = await router.provision(tenant(`t${i}`));
    await router.destroy(s.id);
  }
  assert.equal(await router.budgetCount(), 200, 'every tenant active today is remembered');
  clock.now += DAY;
  assert.equal(await router.budgetCount(), 0, 'the day is over: nothing is held');
  for (let i = 0; i < 50; i++) {
    const s = await router.provision(tenant(`u${i}`));
    await router.destroy(s.id);
  }
  assert.equal(await router.budgetCount(), 50);
});

test('freeing must-not-fire: a key with a live sandbox is kept past its window (its slot is held), and keeps refusing', async () => {
  const { router, clock } = setup({ budgets: [{ id: 'live', key: { label: 'tenant' }, limit: { concurrent: 1 } }] });
  await router.provision(tenant('acme'));
  for (let i = 0; i < 50; i++) {
    const s = await router.provision(tenant(`t${i}`));
    await router.destroy(s.id);
  }
  clock.now += DAY;
  assert.deepEqual((await router.budgetStatus()).map((r) => [r.key.value, r.used.concurrent]), [['acme', 1]]);
  await assert.rejects(router.provision(tenant('acme')), { code: 'BUDGET_EXHAUSTED' });
});

test('settle horizon must-fire: settleCost after the horizon past a destroy answers false and changes nothing', async () => {
  const { router, clock } = setup({ budgets: [spend(100)], limits: { settleHorizonMs: 60_000 } });
  const s = await router.provision(tenant('acme'));
  await router.destroy(s.id);
  clock.now += 60_000;
  await router.budgetStatus(); // the router's clock moved: what it ends is applied
  assert.equal(await router.settleCost(s.id, 5), false);
  assert.equal((await router.budgetStatus())[0].used.cost, 1, 'the estimate stays charged today');
});

test('settle horizon must-not-fire: within the horizon, and while the sandbox lives, settleCost replaces the cost', async () => {
  const { router, clock } = setup({ budgets: [spend(100)], limits: { settleHorizonMs: 60_000 } });
  const s = await router.provision(tenant('acme'));
  await router.destroy(s.id);
  clock.now += 59_999;
  await router.budgetStatus();
  assert.equal(await router.settleCost(s.id, 5), true);
  const live = await router.provision(tenant('acme'));
  clock.now += 3_600_000;
  await router.budgetStatus();
  assert.equal(await router.settleCost(live.id, 2), true, 'a live sandbox has no horizon');
  assert.equal((await router.budgetStatus())[0].used.cost, 7);
});
