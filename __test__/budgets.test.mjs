// Budgets and quotas per tenant (issue 25), in one process: the rule kinds and windows
// driven by the router's `clock`, a calendar day across a DST change in a non-UTC zone,
// the skip to a cheaper pool, reserve-then-settle under 1,000 concurrent provisions,
// settlement, destroy and reclaim giving back the slot and the capacity hold, a SQLite
// store keeping spend across a restart, and canaries. Pairs are named must-fire /
// must-not-fire. The shared ledger (PostgreSQL, 4 processes) is budgets-fleet.test.mjs.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  InMemoryProviderRegistry,
  SandboxRouter,
  SqliteMappingStore,
  BudgetExhaustedError,
  ProviderCapacityExhaustedError,
  SandboxRouterConfigurationError,
  SandboxRequestValidationError,
} from '../index.mjs';
import { CANARY, definition, fakeRuntime, leaks, recorder } from './fixtures.mjs';

const tenant = (value) => ({ launch: { labels: { tenant: value } } });
const spend = (limit, window = { slidingMs: 3_600_000 }) => ({ id: 'spend', key: { label: 'tenant' }, limit: { cost: limit }, window });

/** A router over pools `{ id: cost }` with `budgets` and a settable clock. */
function setup(costs, budgets, extra = {}) {
  const rec = recorder();
  const clock = { now: Date.parse('2026-06-01T12:00:00Z') };
  const runtimes = {};
  const defs = Object.entries(costs).map(([id, estimatedCost]) => {
    runtimes[id] = extra.runtime?.(id) ?? fakeRuntime();
    return definition(id, { signals: { estimatedCost }, runtime: runtimes[id], ...(extra.def?.(id) ?? {}) });
  });
  const { runtime: _r, def: _d, ...options } = extra;
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry(defs), observer: rec.observer, clock: () => clock.now, budgets, ...options });
  return { router, rec, clock, runtimes };
}

const refusal = async (p) => {
  try {
    await p;
  } catch (e) {
    return e;
  }
  assert.fail('expected a refusal');
};

// --- rules ---------------------------------------------------------------------------

test('rules must-fire: an invalid rule is INVALID_CONFIGURATION naming its field (never its value)', () => {
  const cases = [
    [{ id: 'x', key: { label: 'tenant' }, limit: { cost: -1 }, window: { slidingMs: 1000 } }, 'budgets[0].limit.cost'],
    [{ id: 'x', key: { label: 'tenant' }, limit: { cost: 1 }, window: { every: 'day', timeZone: `Mars/${CANARY}` } }, 'budgets[0].window.timeZone'],
    [{ id: 'x', key: { label: 'tenant' }, limit: { cost: 1 } }, 'budgets[0].window'],
    [{ id: 'x', key: { label: 'tenant' }, limit: { launches: () => 1 }, window: { slidingMs: 1000 } }, 'budgets[0].limit.launches'],
  ];
  for (const [rule, field] of cases) {
    assert.throws(() => setup({ a: 1 }, [rule]), (e) => e instanceof SandboxRouterConfigurationError && e.code === 'INVALID_CONFIGURATION' && e.field === field && !leaks(e), field);
  }
});

test('rules must-not-fire: every rule kind and window is accepted; no `budgets` means no budget (status [])', async () => {
  const { router } = setup({ a: 1 }, [
    spend(10, { every: 'month', timeZone: 'America/New_York' }),
    { id: 'burst', key: { label: 'tenant' }, limit: { launches: 5 }, window: { slidingMs: 60_000 }, missing: 'allow' },
    { id: 'live', key: { label: 'team' }, limit: { concurrent: 2 }, missing: 'allow', onStoreDown: 'allow' },
  ]);
  await router.provision(tenant('acme'));
  assert.equal((await router.budgetStatus()).length, 2, 'the team rule has no key yet');
  const plain = setup({ a: 1 }, undefined).router;
  await plain.provision(tenant('acme'));
  assert.deepEqual(await plain.budgetStatus(), []);
});

test('missing label must-fire: a request without the rule\'s label is refused (BUDGET_KEY_MISSING, field launch.labels.tenant)', async () => {
  const { router, runtimes } = setup({ a: 1 }, [spend(10)]);
  const e = await refusal(router.provision({}));
  assert.ok(e instanceof SandboxRequestValidationError);
  assert.equal(e.code, 'BUDGET_KEY_MISSING');
  assert.equal(e.field, 'launch.labels.tenant');
  assert.equal(runtimes.a.calls.length, 0);
});

test("missing label must-not-fire: with missing: 'allow' the request passes that rule", async () => {
  const { router } = setup({ a: 1 }, [{ ...spend(10), missing: 'allow' }]);
  assert.equal((await router.provision({})).providerId, 'a');
  assert.deepEqual(await router.budgetStatus(), []);
});

// --- cost ------------------------------------------------------------------------------

test('cost must-fire: the launch that would pass the limit is refused, typed, with the rule, key, figures and retryable false', async () => {
  const { router, rec, runtimes } = setup({ a: 1 }, [spend(2)]);
  await router.provision(tenant('acme'));
  await router.provision(tenant('acme'));
  const e = await refusal(router.provision(tenant('acme')));
  assert.ok(e instanceof BudgetExhaustedError);
  assert.equal(e.code, 'BUDGET_EXHAUSTED');
  assert.equal(e.rule, 'spend');
  assert.deepEqual(e.key, { label: 'tenant', value: 'acme' });
  assert.equal(e.dimension, 'cost');
  assert.equal(e.limit, 2);
  assert.equal(e.used, 2);
  assert.equal(e.reserved, 0);
  assert.equal(e.retryable, false, 'nothing in flight: waiting does not help until the window frees it');
  assert.equal(e.resetsAt, new Date(Date.parse('2026-06-01T12:00:00Z') + 3_600_000).toISOString());
  assert.deepEqual(e.rejections, [{ providerId: 'a', status: 'EXHAUSTED', reason: 'BUDGET_EXCEEDED' }]);
  assert.equal(runtimes.a.calls.length, 2, 'never launched');
  const refused = rec.events.filter((x) => x.type === 'budget.refused');
  assert.equal(refused.length, 1);
  assert.equal(refused[0].reason, 'BUDGET_EXCEEDED');
  assert.equal(refused[0].rule, 'spend');
});

test('cost must-not-fire: under the limit, and another tenant\'s key, are admitted', async () => {
  const { router } = setup({ a: 1 }, [spend(2)]);
  await router.provision(tenant('acme'));
  await router.provision(tenant('acme'));
  assert.equal((await router.provision(tenant('globex'))).providerId, 'a');
});

test('skip must-fire: a pool whose cost does not fit is skipped (BUDGET_EXCEEDED) and a cheaper pool serves; the skip uses no attempt', async () => {
  const { router, runtimes } = setup({ dear: 0.5, cheap: 0.9 }, [spend(1)], {});
  // Strategy cost ranks `dear` (0.5) first; after two of it 0.0 is left... use one first.
  await router.provision({ ...tenant('acme'), providerId: 'dear' });
  // 0.5 used: `dear` (0.5) still fits, `cheap` (0.9) does not: order by cost: dear first.
  const s = await router.provision({ ...tenant('acme'), routing: { strategy: 'cost', maxAcquisitionAttempts: 1 } });
  assert.equal(s.providerId, 'dear');
  // Now 1.0 used: nothing fits.
  const e = await refusal(router.provision({ ...tenant('acme'), routing: { strategy: 'cost', maxAcquisitionAttempts: 1 } }));
  assert.equal(e.code, 'BUDGET_EXHAUSTED');
  assert.deepEqual(e.rejections.map((r) => r.reason), ['BUDGET_EXCEEDED', 'BUDGET_EXCEEDED']);
  assert.equal(runtimes.cheap.calls.length, 0);
});

test('skip must-not-fire: the first-ranked pool over budget does not consume the one attempt; the next pool that fits serves', async () => {
  const { router, runtimes } = setup({ big: 0.8, small: 0.3 }, [spend(1)]);
  await router.provision({ ...tenant('acme'), providerId: 'small' });
  // 0.3 used: `big` (0.8 + 0.3 > 1) is skipped even though ranked first by latency; `small` serves.
  const s = await router.provision({ ...tenant('acme'), providerId: undefined, routing: { strategy: 'balanced', maxAcquisitionAttempts: 1, acquisitionFallback: 'allowed' } });
  assert.equal(s.providerId, 'small');
  assert.equal(runtimes.big.calls.length, 0);
});

// --- launches (sliding window) and the clock ---------------------------------------------

test('launches sliding must-fire: the 4th launch within the window is refused; resetsAt is the oldest charge plus the window', async () => {
  const { router, clock } = setup({ a: 0 }, [{ id: 'burst', key: { label: 'tenant' }, limit: { launches: 3 }, window: { slidingMs: 60_000 } }]);
  const t0 = clock.now;
  for (let i = 0; i < 3; i++) {
    await router.provision(tenant('acme'));
    clock.now += 10_000;
  }
  clock.now = t0 + 59_999;
  const e = await refusal(router.provision(tenant('acme')));
  assert.equal(e.code, 'BUDGET_EXHAUSTED');
  assert.equal(e.dimension, 'launches');
  assert.equal(e.resetsAt, new Date(t0 + 60_000).toISOString());
});

test('launches sliding must-not-fire: once the oldest launch leaves the window (router clock), one more is admitted', async () => {
  const { router, clock } = setup({ a: 0 }, [{ id: 'burst', key: { label: 'tenant' }, limit: { launches: 3 }, window: { slidingMs: 60_000 } }]);
  const t0 = clock.now;
  for (let i = 0; i < 3; i++) {
    await router.provision(tenant('acme'));
    clock.now += 10_000;
  }
  clock.now = t0 + 60_000;
  assert.equal((await router.provision(tenant('acme'))).providerId, 'a');
  await assert.rejects(router.provision(tenant('acme')), { code: 'BUDGET_EXHAUSTED' });
});

// --- calendar windows across a DST change (Europe/Berlin) -------------------------------

// 2026-03-29 in Berlin is 23 hours long: it starts at 2026-03-28T23:00Z (CET) and ends at
// 2026-03-29T22:00Z (CEST). A 24-hour window from its start would end at 23:00Z.
const berlinDay = () => [spend(1, { every: 'day', timeZone: 'Europe/Berlin' })];

test('calendar DST must-fire: spend at 00:30 Berlin time on the short day still counts at 23:59 CEST (21:59Z); resetsAt is 22:00Z', async () => {
  const { router, clock } = setup({ a: 1 }, berlinDay());
  clock.now = Date.parse('2026-03-28T23:30:00Z');
  await router.provision(tenant('acme'));
  clock.now = Date.parse('2026-03-29T21:59:59Z');
  const e = await refusal(router.provision(tenant('acme')));
  assert.equal(e.code, 'BUDGET_EXHAUSTED');
  assert.equal(e.resetsAt, '2026-03-29T22:00:00.000Z');
  const [row] = await router.budgetStatus();
  assert.equal(row.resetsAt, '2026-03-29T22:00:00.000Z');
  assert.equal(row.used.cost, 1);
});

test('calendar DST must-not-fire: at local midnight after the 23-hour day (22:00Z, an hour before a 24-hour window would end) it is admitted', async () => {
  const { router, clock } = setup({ a: 1 }, berlinDay());
  clock.now = Date.parse('2026-03-28T23:30:00Z');
  await router.provision(tenant('acme'));
  clock.now = Date.parse('2026-03-29T22:00:00Z');
  assert.equal((await router.provision(tenant('acme'))).providerId, 'a');
  // And the autumn day (2026-10-25) is 25 hours: 22:00Z on the 24th to 23:00Z on the 25th.
  clock.now = Date.parse('2026-10-24T22:30:00Z');
  await router.provision(tenant('acme'));
  clock.now = Date.parse('2026-10-25T22:30:00Z');
  await assert.rejects(router.provision(tenant('acme')), { code: 'BUDGET_EXHAUSTED', resetsAt: '2026-10-25T23:00:00.000Z' });
  clock.now = Date.parse('2026-10-25T23:00:00Z');
  assert.equal((await router.provision(tenant('acme'))).providerId, 'a');
});

// --- concurrent --------------------------------------------------------------------------

test('concurrent must-fire: a third live sandbox of the key is refused (dimension concurrent, no reset)', async () => {
  const { router } = setup({ a: 1 }, [{ id: 'live', key: { label: 'tenant' }, limit: { concurrent: 2 } }]);
  await router.provision(tenant('acme'));
  await router.provision(tenant('acme'));
  const e = await refusal(router.provision(tenant('acme')));
  assert.equal(e.dimension, 'concurrent');
  assert.equal(e.resetsAt, null);
  assert.equal(e.retryable, false);
});

test('concurrent must-not-fire: router.destroy gives the slot back (budget.released, reason DESTROYED)', async () => {
  const { router, rec } = setup({ a: 1 }, [{ id: 'live', key: { label: 'tenant' }, limit: { concurrent: 2 } }]);
  const s = await router.provision(tenant('acme'));
  await router.provision(tenant('acme'));
  await router.destroy(s.id);
  assert.equal((await router.provision(tenant('acme'))).providerId, 'a');
  const released = rec.events.filter((e) => e.type === 'budget.released');
  assert.deepEqual(released.map((e) => [e.sandboxId, e.reason]), [[s.id, 'DESTROYED']]);
});

test('events must-fire: budget.reserved names every applying rule, in rule order, with the pool and its cost', async () => {
  const rules = [spend(100), { id: 'live', key: { label: 'tenant' }, limit: { concurrent: 5 } }];
  const { router, rec } = setup({ a: 3 }, rules);
  const s = await router.provision(tenant('acme'));
  const reserved = rec.events.filter((e) => e.type === 'budget.reserved');
  assert.deepEqual(reserved.map((e) => [e.sandboxId, e.providerId, e.cost, e.rules]), [[s.id, 'a', 3, ['spend', 'live']]]);
});

test('events must-not-fire: a rule the request is not keyed by (missing: allow) is not named in budget.reserved', async () => {
  const rules = [{ id: 'team', key: { label: 'team' }, missing: 'allow', limit: { launches: 5 }, window: { slidingMs: 60_000 } }, spend(100)];
  const { router, rec } = setup({ a: 3 }, rules);
  await router.provision(tenant('acme'));
  assert.deepEqual(rec.events.filter((e) => e.type === 'budget.reserved').map((e) => e.rules), [['spend']]);
});

// --- reserve, then settle ----------------------------------------------------------------

test('in flight must-fire: reservations count before the launch returns (retryable: true while they are in flight)', async () => {
  let release;
  const gate = new Promise((r) => (release = r));
  const { router } = setup({ a: 1 }, [spend(2)], { runtime: () => fakeRuntime({ launch: async () => (await gate, { id: `r-${Math.random()}` }) }) });
  const first = [router.provision(tenant('acme')), router.provision(tenant('acme'))];
  await new Promise((r) => setTimeout(r, 20));
  const e = await refusal(router.provision(tenant('acme')));
  assert.equal(e.code, 'BUDGET_EXHAUSTED');
  assert.equal(e.reserved, 2);
  assert.equal(e.used, 0);
  assert.equal(e.retryable, true, 'releasing the in-flight reservations could make room');
  release();
  await Promise.all(first);
});

test('in flight must-not-fire: a classified pre-allocation failure gives its reservation back (budget.released), an unclassified one is charged', async () => {
  let fail = true;
  const { router, rec } = setup({ a: 1 }, [spend(1)], {
    runtime: () => fakeRuntime({ launch: async () => {
      if (fail) throw Object.assign(new Error(`429 ${CANARY}`), { status: 429 });
      return { id: `r-${Math.random()}` };
    } }),
    classifyProviderFailure: (e) => (e?.status === 429 ? { code: 'RATE_LIMITED', retryable: true } : { code: 'UNKNOWN', retryable: false }),
  });
  await assert.rejects(router.provision(tenant('acme')));
  assert.equal(rec.events.filter((e) => e.type === 'budget.released').length, 1);
  // Nothing used or reserved: the key holds nothing, and is not listed (issue 34).
  assert.deepEqual(await router.budgetStatus(), []);
  fail = false;
  assert.equal((await router.provision(tenant('acme'))).providerId, 'a', 'the budget was given back');
  // must-fire half: an unclassified failure (outcome unknown) is charged like a success.
  const unknown = setup({ a: 1 }, [spend(1)], { runtime: () => fakeRuntime({ launch: async () => Promise.reject(new Error('boom')) }) }).router;
  await assert.rejects(unknown.provision(tenant('acme')));
  await assert.rejects(unknown.provision(tenant('acme')), { code: 'BUDGET_EXHAUSTED' });
});

test('no overspend must-fire: 1,000 concurrent provisions of one tenant against a cost budget admitting 100: exactly 100 succeed, the rest BUDGET_EXHAUSTED', async () => {
  const { router, runtimes } = setup({ a: 0.25 }, [spend(25)], { runtime: () => fakeRuntime({ launch: async () => (await new Promise((r) => setImmediate(r)), { id: `r-${Math.random()}` }) }) });
  const out = await Promise.all(Array.from({ length: 1000 }, () => router.provision(tenant('acme')).then(() => 'ok', (e) => e.code)));
  assert.equal(out.filter((x) => x === 'ok').length, 100);
  assert.equal(out.filter((x) => x === 'BUDGET_EXHAUSTED').length, 900);
  assert.equal(runtimes.a.calls.length, 100);
  const [row] = await router.budgetStatus();
  assert.equal(row.used.cost, 25);
});

test('no overspend must-not-fire: with pre-allocation failures among them, their budget comes back: repeated bursts of 1,000 end at exactly 100 successes', async () => {
  let n = 0;
  const { router } = setup({ a: 0.25 }, [spend(25)], {
    runtime: () => fakeRuntime({ launch: async () => {
      await new Promise((r) => setImmediate(r));
      if (++n % 3 === 0) throw Object.assign(new Error('busy'), { status: 429 });
      return { id: `r-${n}` };
    } }),
    classifyProviderFailure: (e) => (e?.status === 429 ? { code: 'RATE_LIMITED', retryable: true } : { code: 'UNKNOWN', retryable: false }),
  });
  let ok = 0;
  let last = [];
  for (let burst = 0; burst < 30 && ok < 100; burst++) {
    last = await Promise.all(Array.from({ length: 1000 }, () => router.provision(tenant('acme')).then(() => 'ok', (e) => e.code)));
    ok += last.filter((x) => x === 'ok').length;
    const [row] = await router.budgetStatus();
    // Between bursts nothing is reserved, and only successes are used: failures gave theirs back.
    assert.deepEqual([row.used.cost, row.reserved.cost, row.used.launches], [ok * 0.25, 0, ok]);
  }
  assert.equal(ok, 100);
  assert.ok(n > 100, `failed launches were retried against the budget (${n} launches)`);
  const e = await refusal(router.provision(tenant('acme')));
  assert.deepEqual([e.code, e.retryable], ['BUDGET_EXHAUSTED', false]);
});

test('settleCost must-fire: the actual cost replaces the estimate in its window, making room', async () => {
  const { router } = setup({ a: 1 }, [spend(1.5)]);
  const s = await router.provision(tenant('acme'));
  await assert.rejects(router.provision(tenant('acme')), { code: 'BUDGET_EXHAUSTED' });
  assert.equal(await router.settleCost(s.id, 0.25), true);
  assert.equal((await router.budgetStatus())[0].used.cost, 0.25);
  assert.equal((await router.provision(tenant('acme'))).providerId, 'a');
});

test('settleCost must-not-fire: an unknown id answers false and changes nothing; a bad cost is typed', async () => {
  const { router } = setup({ a: 1 }, [spend(1.5)]);
  await router.provision(tenant('acme'));
  assert.equal(await router.settleCost(`sbx_${'0'.repeat(32)}`, 0), false);
  assert.equal((await router.budgetStatus())[0].used.cost, 1);
  await assert.rejects(router.settleCost(`sbx_${'0'.repeat(32)}`, -1), { code: 'INVALID_INPUT' });
  await assert.rejects(router.settleCost(`sbx_${'0'.repeat(32)}`, NaN), { code: 'INVALID_INPUT' });
});

// --- item 6: destroy and reclaim give back the capacity hold too (in-process ledger) -----

const slots = (used, limit) => ({ status: 'known', resources: [{ resource: 'sandboxes', used, limit, unit: 'sandboxes', headroom: limit - used, required: 1 }] });

/** 10 slots; the reader reports an empty account throughout (it lags): only holds bound the pool. */
function capacitySetup() {
  const rt = fakeRuntime();
  const rec = recorder();
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { runtime: rt, capacity: { getCapacity: async () => slots(0, 10) } })]),
    observer: rec.observer,
    capacity: { providerOrder: ['a'], reservationTtlMs: 60_000 },
  });
  return { router, rt, rec };
}

test('capacity hold must-fire: 10 sandboxes gone behind the router\'s back keep their holds: an accurate read of an empty account is refused', async () => {
  const { router, rt } = capacitySetup();
  await Promise.all(Array.from({ length: 10 }, () => router.provision({})));
  rt.live.clear();
  await assert.rejects(router.provision({}), ProviderCapacityExhaustedError);
});

test('capacity hold must-not-fire: 10 sandboxes created and destroyed through the router give their holds back: the next is admitted at once', async () => {
  const { router } = capacitySetup();
  const made = await Promise.all(Array.from({ length: 10 }, () => router.provision({})));
  for (const s of made) await router.destroy(s.id);
  assert.equal((await router.provision({})).providerId, 'a');
});

test('reclaim must-fire: reconcile\'s reclaim of an orphan gives back its slot and its capacity hold (budget.released, reason RECLAIMED)', async () => {
  const rt = fakeRuntime();
  rt.findAllByLabels = async (labels) =>
    [...rt.live.values()].filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v)).map((s) => ({ ...s.handle, labels: s.labels, createdAt: new Date(0).toISOString() }));
  rt.getById = async (id) => rt.live.get(id)?.handle ?? null;
  const rec = recorder();
  const mappings = { records: new Map(), async put(r) { this.records.set(r.id, r); }, async get(id) { return this.records.get(id) ?? null; }, async delete(id) { return this.records.delete(id); }, async list() { return [...this.records.values()]; } };
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { runtime: rt, capacity: { getCapacity: async () => slots(rt.live.size, 1) } })]),
    observer: rec.observer,
    mappings,
    capacity: { providerOrder: ['a'] },
    budgets: [{ id: 'live', key: { label: 'tenant' }, limit: { concurrent: 1 } }],
  });
  const s = await router.provision(tenant('acme'));
  mappings.records.clear(); // its mapping is lost: an orphan
  await assert.rejects(router.provision(tenant('acme')), { code: 'BUDGET_EXHAUSTED' });
  const r = await router.reconcile({ graceMs: 0, reclaim: true });
  assert.equal(r.pools.a.counts.orphan, 1);
  assert.deepEqual(rec.events.filter((e) => e.type === 'budget.released').map((e) => [e.sandboxId, e.reason]), [[s.id, 'RECLAIMED']]);
  assert.equal((await router.provision(tenant('acme'))).providerId, 'a', 'slot and capacity hold both given back');
});

test('reclaim must-not-fire: a dry-run reconcile gives nothing back', async () => {
  const { router } = setup({ a: 1 }, [{ id: 'live', key: { label: 'tenant' }, limit: { concurrent: 1 } }]);
  await router.provision(tenant('acme'));
  await router.reconcile({ graceMs: 0 });
  await assert.rejects(router.provision(tenant('acme')), { code: 'BUDGET_EXHAUSTED' });
});

// --- persistence ------------------------------------------------------------------------

test('restart must-fire: with a SqliteMappingStore, a new router on the same file sees the spend', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'budgets-'));
  const file = path.join(dir, 'm.db');
  const first = new SqliteMappingStore({ path: file });
  const a = setup({ a: 1 }, [spend(2)], { mappings: first }).router;
  await a.provision(tenant('acme'));
  await a.provision(tenant('acme'));
  first.close();
  const second = new SqliteMappingStore({ path: file });
  const b = setup({ a: 1 }, [spend(2)], { mappings: second }).router;
  await assert.rejects(b.provision(tenant('acme')), { code: 'BUDGET_EXHAUSTED' });
  second.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('restart must-not-fire: with the in-memory store, state is per process (a new router starts empty)', async () => {
  const a = setup({ a: 1 }, [spend(2)]).router;
  await a.provision(tenant('acme'));
  await a.provision(tenant('acme'));
  const b = setup({ a: 1 }, [spend(2)]).router;
  assert.equal((await b.provision(tenant('acme'))).providerId, 'a');
});

// --- canaries -----------------------------------------------------------------------------

test('canary must-not-fire: no credential or provider text in any budget error or event', async () => {
  const rec = recorder();
  const rt = fakeRuntime({ launch: async () => Promise.reject(Object.assign(new Error(`denied ${CANARY}`), { status: 429, token: CANARY })) });
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { runtime: rt, signals: { estimatedCost: 1 } }), definition('b', { signals: { estimatedCost: 1 } })]),
    observer: rec.observer,
    classifyProviderFailure: () => ({ code: 'RATE_LIMITED', retryable: true }),
    budgets: [spend(1), { id: 'live', key: { label: 'tenant' }, limit: { concurrent: 5 } }],
  });
  await router.provision(tenant('acme'));
  const e = await refusal(router.provision(tenant('acme')));
  assert.equal(e.code, 'BUDGET_EXHAUSTED');
  assert.ok(!leaks(e), 'the error');
  const budgetEvents = rec.events.filter((x) => x.type.startsWith('budget.'));
  assert.ok(budgetEvents.some((x) => x.type === 'budget.released') && budgetEvents.some((x) => x.type === 'budget.refused'));
  for (const ev of budgetEvents) assert.ok(!leaks(ev), ev.type);
  assert.ok(!leaks(await router.budgetStatus()));
});

test('canary must-fire: the leak detector sees a canary in a budget-shaped value (the check is live)', () => {
  assert.ok(leaks({ type: 'budget.refused', rule: CANARY }));
});

// --- explain ------------------------------------------------------------------------------

test('explain must-fire: a pool whose cost a rule has no room for now is rejected BUDGET_EXCEEDED (nothing reserved)', async () => {
  const { router } = setup({ dear: 0.8, cheap: 0.3 }, [spend(1)]);
  await router.provision({ ...tenant('acme'), providerId: 'cheap' });
  const e = await router.explain(tenant('acme'));
  assert.deepEqual(e.eligible.map((p) => p.providerId), ['cheap']);
  const dear = e.rejected.find((r) => r.providerId === 'dear');
  assert.deepEqual(dear.reasons.map((r) => r.code), ['BUDGET_EXCEEDED']);
  assert.match(e.summary, /over budget/);
  assert.equal((await router.budgetStatus())[0].reserved.cost, 0, 'explain reserves nothing');
});

test('explain must-not-fire: another tenant, and a router without budgets, see every pool eligible', async () => {
  const { router } = setup({ dear: 0.8, cheap: 0.3 }, [spend(1)]);
  await router.provision({ ...tenant('acme'), providerId: 'cheap' });
  assert.equal((await router.explain(tenant('globex'))).eligible.length, 2);
  const plain = setup({ dear: 0.8, cheap: 0.3 }, undefined).router;
  await plain.provision({ ...tenant('acme'), providerId: 'cheap' });
  assert.equal((await plain.explain(tenant('acme'))).eligible.length, 2);
});
