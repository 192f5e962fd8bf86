// Budgets across a fleet (issue 25): four router processes (fixtures/budget-worker.mjs)
// on one PostgreSQL, one provider (an HTTP server here that counts live sandboxes).
//  1. 4 × 250 concurrent provisions of one tenant against a cost budget admitting 100:
//     exactly 100 succeed; with pre-allocation failures, repeated bursts still end at 100.
//  2. A process killed with SIGKILL mid-launch: its reservations refuse the others until
//     its lease lapses, then they are admitted (the lease rule).
//  3. Item 6 in the shared ledger: destroy (by another process) gives back the concurrent
//     slot and the capacity hold; sandboxes gone behind the routers' back keep theirs.
//  4. A database that cannot be asked: fail closed (BUDGET_STORE_UNAVAILABLE) vs
//     `onStoreDown: 'allow'`; no credential in the refusal.
//  5. Fleet warm claims under the shared ledger: a claim is charged like a launch and the
//     charge follows the member's id; a claimed member found gone gives the charge back to
//     the provision's cold launch.
import test, { after, before } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startWorker as spawnWorker } from './fleet-workers.mjs';
import { startPostgres } from './postgres-server.mjs';
import { InMemoryProviderRegistry, PostgresMappingStore, SandboxRouter, BudgetExhaustedError } from '../index.mjs';
import { CANARY, definition, fakeRuntime, leaks, recorder } from './fixtures.mjs';

/** @type {Awaited<ReturnType<typeof startPostgres>>} */
let pg;
/** @type {http.Server} */
let server;
let base = '';
const workers = [];

const provider = {
  limit: { a: 100_000, flaky: 100_000, hang: 100_000, cap1: 10, cap2: 10 },
  live: new Map(),
  launched: { a: 0, flaky: 0, hang: 0, cap1: 0, cap2: 0 },
  flakyCalls: 0,
  hang: false,
  hanging: [],
  next: 0,
};
const liveIn = (pool) => [...provider.live.values()].filter((s) => s.pool === pool).length;

function handle(req, res) {
  const u = new URL(req.url, 'http://x');
  const pool = u.searchParams.get('pool') ?? '';
  const json = (v, status = 200) => {
    res.statusCode = status;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(v));
  };
  switch (u.pathname) {
    case '/launch':
      if (pool === 'hang' && provider.hang) {
        provider.hanging.push(res);
        return;
      }
      if (pool === 'flaky' && ++provider.flakyCalls % 3 === 0) return void setTimeout(() => json({ error: 'busy' }, 429), 2);
      setTimeout(() => {
        const id = `remote-${++provider.next}`;
        provider.launched[pool]++;
        provider.live.set(id, { pool });
        json({ id, state: 'started' });
      }, 3);
      return;
    case '/capacity': {
      // The `cap` pools' reader reports an empty account throughout (it lags the launches):
      // no read ever reflects a hold, so holds alone bound them.
      const used = pool.startsWith('cap') ? 0 : liveIn(pool);
      const limit = provider.limit[pool];
      return json({ status: 'known', resources: [{ resource: 'sandboxes', used, limit, unit: 'sandboxes', headroom: limit - used, required: 1 }] });
    }
    case '/get': {
      const id = u.searchParams.get('id');
      return json({ handle: provider.live.has(id) ? { id, state: 'started' } : null });
    }
    case '/destroy':
      provider.live.delete(u.searchParams.get('id'));
      return json({});
    default:
      res.statusCode = 404;
      res.end();
  }
}

/** Starts a worker; resolves once its routers are built. */
function startWorker(url) {
  return spawnWorker('budget-worker.mjs', [url, base], workers);
}

before(async () => {
  pg = await startPostgres();
  await pg.createDatabase('budgets');
  await pg.createDatabase('budgets_down');
  server = http.createServer(handle);
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}`;
});

after(async () => {
  for (const w of workers) w.child.kill('SIGKILL');
  for (const res of provider.hanging) res.destroy();
  server?.closeAllConnections?.();
  server?.close();
  pg?.stop();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const burst = async (fleet, msg, each) => (await Promise.all(fleet.map((w) => w.ask({ cmd: 'burst', n: each, ...msg })))).flat();

test('budgets fleet: four processes, one PostgreSQL, one budget', async (t) => {
  const fleet = await Promise.all([0, 1, 2, 3].map(() => startWorker(pg.url('budgets'))));

  await t.test('no overspend must-fire: 4 × 250 concurrent provisions of one tenant against a budget admitting 100: exactly 100 succeed, the rest BUDGET_EXHAUSTED', async () => {
    const answers = await burst(fleet, { pool: 'a', tenant: 'acme' }, 250);
    const ok = answers.filter((a) => a.ok);
    assert.equal(answers.length, 1000);
    assert.equal(ok.length, 100);
    assert.equal(provider.launched.a, 100);
    for (const a of answers.filter((x) => !x.ok)) assert.equal(a.code, 'BUDGET_EXHAUSTED', JSON.stringify(a));
    const status = await fleet[2].ask({ cmd: 'status' });
    const row = status.value.find((r) => r.rule === 'spend' && r.key.value === 'acme');
    assert.deepEqual([row.used.cost, row.used.launches, row.reserved.cost], [25, 100, 0], 'every process sees the same spend');
  });

  await t.test('no overspend must-not-fire: pre-allocation failures give their budget back: repeated bursts across the fleet end at exactly 100 successes', async () => {
    let ok = 0;
    for (let i = 0; i < 30 && ok < 100; i++) {
      const answers = await burst(fleet, { pool: 'flaky', tenant: 'initech' }, 250);
      ok += answers.filter((a) => a.ok).length;
      await sleep(50); // settlements are written without waiting
    }
    assert.equal(ok, 100);
    assert.equal(provider.launched.flaky, 100);
    assert.ok(provider.flakyCalls > 100, `failed launches were retried against the budget (${provider.flakyCalls} launches)`);
    const refused = (await fleet[0].ask({ cmd: 'burst', pool: 'flaky', tenant: 'initech', n: 1 }))[0];
    assert.deepEqual([refused.code, refused.retryable], ['BUDGET_EXHAUSTED', false]);
  });

  await t.test('lease must-fire / must-not-fire: a process killed mid-launch holds its reservations until its lease lapses, then the others are admitted', async () => {
    provider.hang = true;
    const victim = fleet[3];
    await victim.ask({ cmd: 'start', pool: 'hang', team: 'blue', n: 3 });
    for (let i = 0; i < 100 && provider.hanging.length < 3; i++) await sleep(20);
    assert.equal(provider.hanging.length, 3, 'the victim has 3 launches in flight');
    provider.hang = false;
    // must-fire: the victim's 3 reservations fill the team's 3 slots while it lives
    const [refused] = await fleet[0].ask({ cmd: 'burst', pool: 'hang', team: 'blue', n: 1 });
    assert.deepEqual([refused.code, refused.retryable], ['BUDGET_EXHAUSTED', true], JSON.stringify(refused));
    victim.child.kill('SIGKILL');
    await new Promise((r) => victim.child.once('exit', r));
    const killedAt = Date.now();
    // must-not-fire: once its lease (1 s) lapsed, its reservations count for nothing
    let admitted = null;
    while (Date.now() - killedAt < 10_000) {
      const [a] = await fleet[1].ask({ cmd: 'burst', pool: 'hang', team: 'blue', n: 1 });
      if (a.ok) {
        admitted = a;
        break;
      }
      assert.equal(a.code, 'BUDGET_EXHAUSTED');
      await sleep(200);
    }
    assert.ok(admitted, 'admitted after the lease lapsed');
    assert.ok(Date.now() - killedAt < 5_000, `freed within the lease and a renewal period (${Date.now() - killedAt} ms)`);
  });

  const live = fleet.slice(0, 3);

  await t.test('item 6 slot must-fire / must-not-fire: 3 live sandboxes of a team refuse a 4th everywhere; a destroy by another process gives its slot back', async () => {
    const answers = await burst(live, { pool: 'a', team: 'red' }, 1);
    const made = answers.filter((a) => a.ok);
    assert.equal(made.length, 3, JSON.stringify(answers));
    await sleep(100); // their settlements are written without waiting (until then: retryable)
    const [refused] = await live[1].ask({ cmd: 'burst', pool: 'a', team: 'red', n: 1 });
    assert.deepEqual([refused.code, refused.retryable], ['BUDGET_EXHAUSTED', false], JSON.stringify(refused));
    const gone = await live[2].ask({ cmd: 'destroy', pool: 'a', id: made[0].value.id });
    assert.ok(gone.ok, JSON.stringify(gone));
    const [again] = await live[0].ask({ cmd: 'burst', pool: 'a', team: 'red', n: 1 });
    assert.ok(again.ok, JSON.stringify(again));
  });

  await t.test('item 6 hold must-fire: 10 sandboxes of 10 slots gone behind the routers\' back keep their shared holds: an accurate read of an empty account is refused', async () => {
    const made = (await burst(live, { pool: 'cap1' }, 4)).filter((a) => a.ok);
    assert.equal(made.length, 10, 'the holds admit exactly the 10 slots');
    for (const [id, s] of provider.live) if (s.pool === 'cap1') provider.live.delete(id);
    assert.equal(liveIn('cap1'), 0);
    const [refused] = await live[0].ask({ cmd: 'burst', pool: 'cap1', n: 1 });
    assert.equal(refused.code, 'PROVIDER_CAPACITY_EXHAUSTED', JSON.stringify(refused));
  });

  await t.test('item 6 hold must-not-fire: 10 sandboxes created and destroyed (by other processes) give their shared holds back: the next is admitted at once', async () => {
    const made = (await burst(live, { pool: 'cap2' }, 4)).filter((a) => a.ok);
    assert.equal(made.length, 10, 'the holds admit exactly the 10 slots');
    await Promise.all(made.map((a, i) => live[(i + 1) % 3].ask({ cmd: 'destroy', pool: 'cap2', id: a.value.id })));
    assert.equal(liveIn('cap2'), 0);
    const [admitted] = await live[0].ask({ cmd: 'burst', pool: 'cap2', n: 1 });
    assert.ok(admitted.ok, JSON.stringify(admitted));
  });

  for (const w of live) w.child.send({ cmd: 'exit', seq: 0 });
});

test('store down must-fire: a shared ledger that cannot be asked refuses (BUDGET_STORE_UNAVAILABLE), typed, without the credential', async () => {
  const dead = new PostgresMappingStore({ connection: `postgres://u:${CANARY}@127.0.0.1:1/db`, timeoutMs: 300 });
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a')]),
    capacity: { providerOrder: ['a'], coordinator: dead },
    budgets: [{ id: 'spend', key: { label: 'tenant' }, limit: { cost: 5 }, window: { slidingMs: 60_000 } }],
  });
  const e = await router.provision({ launch: { labels: { tenant: 'acme' } } }).catch((x) => x);
  assert.ok(e instanceof BudgetExhaustedError, String(e));
  assert.equal(e.code, 'BUDGET_STORE_UNAVAILABLE');
  assert.equal(e.rule, 'spend');
  assert.ok(!leaks(e));
  // Reading the shared status is a store call: its typed store error, without the credential.
  await assert.rejects(router.budgetStatus(), (x) => x.code === 'COORDINATOR_UNAVAILABLE' && !leaks(x));
});

test("store down must-not-fire: with onStoreDown: 'allow', a ledger that cannot be asked (its table locked past the timeout) admits unreserved; fail-closed beside it refuses", async () => {
  const store = new PostgresMappingStore({ connection: pg.url('budgets_down'), timeoutMs: 500 });
  await store.open();
  const make = (onStoreDown) =>
    new SandboxRouter({
      registry: new InMemoryProviderRegistry([definition('a', { capacity: { getCapacity: async () => ({ status: 'known', resources: [{ resource: 'sandboxes', used: 0, limit: 100, unit: 'sandboxes', headroom: 100, required: 1 }] }) } })]),
      capacity: { providerOrder: ['a'], coordinator: store },
      budgets: [{ id: 'spend', key: { label: 'tenant' }, limit: { cost: 5 }, window: { slidingMs: 60_000 }, ...(onStoreDown ? { onStoreDown } : {}) }],
    });
  const closed = make(undefined);
  const open = make('allow');
  const req = { launch: { labels: { tenant: 'acme' } } };
  assert.equal((await closed.provision(req)).providerId, 'a', 'with the ledger up, both admit');
  const lock = await pg.hold('LOCK TABLE sandbox_router_budget_keys IN ACCESS EXCLUSIVE MODE', 'budgets_down');
  try {
    await assert.rejects(closed.provision(req), { code: 'BUDGET_STORE_UNAVAILABLE' });
    assert.equal((await open.provision(req)).providerId, 'a');
  } finally {
    await lock.release();
    await store.close();
  }
});

test('warm claims under shared budgets: two routers on one PostgreSQL, one refilling, one claiming', async (t) => {
  await pg.createDatabase('budgets_warm');
  const rt = fakeRuntime();
  const budgets = [{ id: 'tenant', key: { label: 'tenant' }, limit: { concurrent: 1, launches: 10 }, window: { slidingMs: 60_000 } }];
  const roomy = async () => ({ status: 'known', resources: [{ resource: 'sandboxes', used: 0, limit: 100, unit: 'sandboxes', headroom: 100, required: 1 }] });
  const stores = [];
  const make = (observer) => {
    const store = new PostgresMappingStore({ connection: pg.url('budgets_warm'), timeoutMs: 5_000 });
    stores.push(store);
    return new SandboxRouter({
      registry: new InMemoryProviderRegistry([definition('w', { runtime: rt, signals: { estimatedCost: 0.25 }, warm: { size: 1 }, capacity: { getCapacity: roomy } })]),
      mappings: store,
      capacity: { providerOrder: ['w'], coordinator: store },
      budgets,
      observer,
    });
  };
  // The refiller holds its members' handles; the claimer has none, so it re-resolves each
  // member it claims with getById (as another process of the fleet would).
  const refiller = make(undefined);
  const rec = recorder();
  const claimer = make(rec.observer);
  await refiller.warmUp();
  await claimer.warmUp();
  const launches = () => rt.calls.filter((c) => c.op === 'launch').length;
  const waitIdle = async () => {
    for (let i = 0; i < 1_000 && (await claimer.warmStatus())[0].idle < 1; i++) await sleep(10);
    assert.equal((await claimer.warmStatus())[0].idle, 1, 'the pool was refilled');
  };
  const acme = { launch: { labels: { tenant: 'acme' } } };
  const row = async () => (await claimer.budgetStatus()).find((r) => r.key.value === 'acme');
  /** The row once the settlements in flight have landed (they are written without waiting). */
  const settledRow = async () => {
    for (let i = 0; i < 500; i++) {
      const r = await row();
      if (r.reserved.launches === 0) return r;
      await sleep(10);
    }
    return row();
  };

  await t.test('must-fire: a claim is charged like a launch, and destroy(member id) gives its slot back', async () => {
    await waitIdle();
    const before = launches();
    const claimed = await claimer.provision(acme);
    assert.ok(rec.events.some((e) => e.type === 'warm.claimed' && e.sandboxId === claimed.id), 'served warm');
    assert.ok(!rec.events.some((e) => e.type === 'attempt.started' && e.sandboxId === claimed.id), 'no cold launch (refills have their own ids)');
    const r = await row();
    assert.deepEqual([r.used.launches, r.used.concurrent, r.used.cost, r.reserved.concurrent], [1, 1, 0.25, 0], 'charged once, settled');
    await assert.rejects(claimer.provision(acme), (e) => e.code === 'BUDGET_EXHAUSTED' && e.dimension === 'concurrent');
    await claimer.destroy(claimed.id);
    assert.equal((await row()).used.concurrent, 0, 'the charge followed the member id');
    assert.ok(launches() >= before, 'refills only');
  });

  await t.test('must-not-fire: a claimed member found gone does not keep the charge; the cold launch holds it', async () => {
    await waitIdle();
    // A third router of the fleet, holding no member's handle (the claimer refilled after its
    // claim and holds that one's); every sandbox is gone behind the routers' back.
    const third = make(rec.observer);
    await third.warmUp();
    for (const id of [...rt.live.keys()]) rt.live.delete(id);
    const cold = await third.provision(acme);
    assert.ok(rec.events.some((e) => e.type === 'warm.member.lost'), 'the claimed member was gone');
    assert.ok(rec.events.some((e) => e.type === 'attempt.started' && e.sandboxId === cold.id), 'served by a cold launch');
    const r = await settledRow();
    assert.deepEqual([r.used.launches, r.used.concurrent, r.reserved.launches], [2, 1, 0], 'one more launch charged, settled');
    await third.destroy(cold.id);
    assert.equal((await row()).used.concurrent, 0, 'the cold launch held the charge');
    await third.close();
  });

  await refiller.close();
  await claimer.close();
  for (const s of stores) await s.close();
});
