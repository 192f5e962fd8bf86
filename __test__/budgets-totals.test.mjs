// Issue 34, in PostgreSQL (the tests' private server, __test__/postgres-server.mjs): the
// shared budget ledger's running totals. A property test holds the totals to the summing
// query they replaced after any sequence of reservations, settlements, destroys,
// settleCost and the router clock moving (calendar days rolling over, a sliding window
// leaving charges behind); the v4 → v5 migration builds the totals from existing rows; a
// process whose lease lapsed has its late settlement charged (and reported), a live one is
// charged once; a provision with capacity and a budget rule costs 3 transactions and its
// destroy 1. The fleet chaos and budget fleet suites cover correctness under four processes.
import test, { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import fc from 'fast-check';
import { startPostgres } from './postgres-server.mjs';
import { InMemoryProviderRegistry, PostgresMappingStore, SandboxRouter } from '../index.mjs';
import { definition, fakeRuntime, recorder } from './fixtures.mjs';

const require = createRequire(import.meta.url);
const { coordinatorOf } = require('../lib/postgres.js');
const { binding } = require('../lib/binding.js');

/** @type {Awaited<ReturnType<typeof startPostgres>>} */
let pg;
let dbs = 0;
const stores = [];
const freshDb = async () => {
  const name = `totals${++dbs}`;
  await pg.createDatabase(name);
  return name;
};
const storeOf = (db, options = {}) => {
  const s = new PostgresMappingStore({ connection: pg.url(db), timeoutMs: 10_000, ...options });
  stores.push(s);
  return s;
};

before(async () => {
  pg = await startPostgres();
});
after(async () => {
  for (const s of stores) await s.close().catch(() => {});
  pg?.stop();
});

const DAY = 86_400_000;
const MIN = 60_000;
const T0 = Date.parse('2026-06-01T23:50:00Z');
const id = (n) => `sbx_${n.toString(16).padStart(32, '0')}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The three rules of the property: a UTC day's cost, a minute's sliding launches, live slots. */
function rulesAt(now) {
  const start = Math.floor(now / DAY) * DAY;
  return [
    { ruleId: 'cal', label: 'tenant', cost: 1e6, launches: undefined, concurrent: undefined, since: start, windowEnd: start + DAY, slidingMs: undefined },
    { ruleId: 'sli', label: 'tenant', cost: undefined, launches: 1e6, concurrent: undefined, since: now - MIN + 1, windowEnd: undefined, slidingMs: MIN },
    { ruleId: 'live', label: 'tenant', cost: undefined, launches: undefined, concurrent: 1e6, since: undefined, windowEnd: undefined, slidingMs: undefined },
  ];
}

function demand(sandboxId, tenant, cost, now) {
  return {
    sandboxId,
    cost,
    holdMs: 600_000,
    at: now,
    keys: rulesAt(now).map((r, rule) => ({ rule, ruleId: r.ruleId, value: tenant, cost: r.cost, launches: r.launches, concurrent: r.concurrent, since: r.since, windowEnd: r.windowEnd, slidingMs: r.slidingMs })),
  };
}

/**
 * The summing query the totals replaced (v4's USAGE, on v5's columns): every figure of
 * every key summed from its charges, at the windows of `now`.
 */
async function summed(db, now) {
  const values = rulesAt(now)
    .flatMap((r) => ['a', 'b'].map((k) => `('${r.ruleId}', '${k}', ${r.since ?? '9223372036854775807'}::bigint)`))
    .join(', ');
  const rows = await pg.psql(
    `SELECT t.r, t.k,
       coalesce(sum(c.cost) FILTER (WHERE c.state = 1 AND c.at_ms >= t.since), 0),
       coalesce(sum(c.cost) FILTER (WHERE c.state = 0 AND c.at_ms >= t.since), 0),
       count(c.id) FILTER (WHERE c.state = 1 AND c.at_ms >= t.since),
       count(c.id) FILTER (WHERE c.state = 0 AND c.at_ms >= t.since),
       count(c.id) FILTER (WHERE c.state = 1 AND c.live AND (c.live_until IS NULL OR c.live_until > now())),
       count(c.id) FILTER (WHERE c.state = 0)
     FROM (VALUES ${values}) AS t(r, k, since)
     LEFT JOIN sandbox_router_budget_charges c ON c.rule = t.r AND c.key = t.k
     GROUP BY t.r, t.k ORDER BY t.r, t.k`,
    db,
  );
  const out = {};
  for (const line of rows.split('\n')) {
    const [r, k, uc, rc, ul, rl, lv, fl] = line.split('|');
    const figures = [Number(uc) / 1e6, Number(rc) / 1e6, Number(ul), Number(rl), Number(lv), Number(fl)];
    if (figures.some((x) => x !== 0)) out[`${r}:${k}`] = figures;
  }
  return out;
}

/** The same figures as the shared ledger's totals give them (budgetStatus, every key). */
async function totals(native, now) {
  const rows = await native.budgetStatus(rulesAt(now), { limit: 10_000 });
  const out = {};
  for (const r of rows) out[`${r.rule}:${r.key.value}`] = [r.used.cost, r.reserved.cost, r.used.launches, r.reserved.launches, r.used.concurrent, r.reserved.concurrent];
  return out;
}

const op = fc.oneof(
  fc.record({ kind: fc.constant('reserve'), tenant: fc.constantFrom('a', 'b'), cost: fc.integer({ min: 0, max: 8 }) }),
  fc.record({ kind: fc.constant('settle'), which: fc.nat(), how: fc.constantFrom('allocated', 'nothing', 'unknown') }),
  fc.record({ kind: fc.constant('release'), which: fc.nat() }),
  fc.record({ kind: fc.constant('cost'), which: fc.nat(), cost: fc.integer({ min: 0, max: 9 }) }),
  fc.record({ kind: fc.constant('wait'), ms: fc.constantFrom(1_000, 20_000, 45_000, 5 * MIN, 30 * MIN) }),
);

test('property: after any sequence, the running totals equal the summing query they replaced (calendar roll-over, sliding expiry, settlements, destroys, settleCost)', async () => {
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 30 }), async (ops) => {
      const db = await freshDb();
      const store = storeOf(db);
      const native = coordinatorOf(store);
      let now = T0;
      let n = 0;
      const made = [];
      for (const o of ops) {
        if (o.kind === 'reserve') {
          const sid = id(++n + runs * 1000);
          const v = await native.reserveBudget(demand(sid, o.tenant, o.cost * 0.125, now));
          assert.equal(v.reserved, true, JSON.stringify(v));
          made.push(sid);
        } else if (o.kind === 'settle' && made.length) {
          // An unknown outcome's slot is held long past the test (the database's clock).
          await native.settleBudget(made[o.which % made.length], o.how, now + 3_600_000);
        } else if (o.kind === 'release' && made.length) {
          await native.releaseSandbox(made[o.which % made.length]);
        } else if (o.kind === 'cost' && made.length) {
          await native.settleBudgetCost(made[o.which % made.length], o.cost * 0.1);
        } else if (o.kind === 'wait') {
          now += o.ms;
          // A reservation applies what time has ended: one for each tenant, given back at once.
          for (const t of ['a', 'b']) {
            const sid = id(++n + runs * 1000);
            await native.reserveBudget(demand(sid, t, 0, now));
            await native.settleBudget(sid, 'nothing', 0);
          }
        }
        assert.deepEqual(await totals(native, now), await summed(db, now), JSON.stringify(o));
      }
      runs++;
      await store.close();
    }),
    { numRuns: 25, endOnFailure: true },
  );
});

test('migration: a v4 database with holds and charges is migrated to the current schema (8), its totals built from the rows (slots at once, window sums at the first reservation)', async () => {
  const db = await freshDb();
  const migrations = binding.pgMigrations();
  assert.equal(migrations.length, 8);
  await pg.psql(`CREATE TABLE sandbox_router_schema (version INTEGER NOT NULL); ${migrations.slice(0, 4).join(';\n')}; INSERT INTO sandbox_router_schema VALUES (4)`, db);
  const now = Date.now();
  const today = Math.floor(now / DAY) * DAY;
  await pg.psql(
    `INSERT INTO sandbox_router_sessions VALUES ('s1', now() + interval '1 hour');
     INSERT INTO sandbox_router_pools VALUES ('a');
     INSERT INTO sandbox_router_holds (pool, session, amounts, expect, settled_seq, expires_at, sandbox_id) VALUES
       ('a', 's1', '[["sandboxes",1.0],["cpu",0.5]]', '[["sandboxes",1.0]]', NULL, now() + interval '1 hour', '${id(1)}'),
       ('a', 's1', '[["sandboxes",1.0],["cpu",0.25]]', '[["sandboxes",2.0]]', 3, now() + interval '1 hour', '${id(2)}');
     INSERT INTO sandbox_router_budget_keys VALUES ('spend', 'acme');
     INSERT INTO sandbox_router_budget_charges (sandbox_id, rule, key, at_ms, cost, settled, live, session, expires_at) VALUES
       ('${id(3)}', 'spend', 'acme', ${now - 1000}, 0.1, TRUE, TRUE, 's1', now()),
       ('${id(4)}', 'spend', 'acme', ${now - 900}, 0.1, TRUE, FALSE, 's1', now()),
       ('${id(5)}', 'spend', 'acme', ${today - 5000}, 0.7, TRUE, FALSE, 's1', now()),
       ('${id(6)}', 'spend', 'acme', ${now - 800}, 0.2, FALSE, TRUE, 's1', now() + interval '1 hour')`,
    db,
  );
  const store = storeOf(db);
  assert.equal(await store.open(), migrations.length);
  assert.deepEqual(JSON.parse(await pg.psql(`SELECT held FROM sandbox_router_pools WHERE pool = 'a'`, db)), { cpu: 0.75, sandboxes: 2 });
  assert.equal(await pg.psql(`SELECT live, inflight, built FROM sandbox_router_budget_keys`, db), '1|1|f');
  assert.equal(await pg.psql(`SELECT string_agg(cost::text, ',' ORDER BY id) FROM sandbox_router_budget_charges`, db), '100000,100000,700000,200000');
  // The first reservation after the migration builds the window sums (today's only).
  const rule = { ruleId: 'spend', label: 'tenant', cost: 1, since: today, windowEnd: today + DAY };
  const native = coordinatorOf(store);
  const v = await native.reserveBudget({ sandboxId: id(7), cost: 0.25, holdMs: 60_000, at: now, keys: [{ rule: 0, value: 'acme', ...rule }] });
  assert.equal(v.reserved, true, JSON.stringify(v));
  const [row] = await native.budgetStatus([rule], {});
  assert.deepEqual([row.used.cost, row.used.launches, row.reserved.cost, row.reserved.launches, row.used.concurrent, row.reserved.concurrent], [0.2, 2, 0.45, 2, 1, 2]);
  assert.equal(await pg.psql(`SELECT built FROM sandbox_router_budget_keys`, db), 't');
  // must-not-fire: a limit the rebuilt sums leave no room under refuses.
  const refused = await native.reserveBudget({ sandboxId: id(8), cost: 0.4, holdMs: 60_000, at: now, keys: [{ rule: 0, value: 'acme', ...rule }] });
  assert.deepEqual([refused.reserved, refused.refusals[0].used, refused.refusals[0].reserved], [false, 0.2, 0.45]);
});

/** A router on `store` (store and coordinator) whose launches wait for `gate` when it is set. */
function fleetRouter(store, gate, observer) {
  const rt = fakeRuntime({
    launch: async () => {
      if (gate.wait) await gate.wait;
      return { id: `r-${Math.random()}` };
    },
  });
  gate.runtime = rt;
  const roomy = async () => ({ status: 'known', resources: [{ resource: 'sandboxes', used: 0, limit: 100, unit: 'sandboxes', headroom: 100, required: 1 }] });
  return new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('a', { runtime: rt, capacity: { getCapacity: roomy } })]),
    mappings: store,
    capacity: { providerOrder: ['a'], coordinator: store },
    budgets: [{ id: 'n', key: { label: 'tenant' }, limit: { launches: 1 }, window: { slidingMs: 3_600_000 } }],
    observer,
    health: false,
  });
}

/** `lapse`: false (nothing lapses), 'lease' (the launching process's lease), 'hold' (its reservation's hold, the lease alive). */
async function lapsedLease(lapse) {
  const db = await freshDb();
  const rec = recorder();
  let open;
  const gate = { wait: new Promise((r) => (open = r)) };
  const a = fleetRouter(storeOf(db, { leaseMs: 60_000 }), gate, rec.observer);
  const first = a.provision({ launch: { labels: { tenant: 'acme' } } });
  for (let i = 0; i < 200 && gate.runtime.calls.length === 0; i++) await sleep(10);
  assert.equal(gate.runtime.calls.length, 1, 'the launch is in flight');
  if (lapse === 'lease') await pg.psql(`UPDATE sandbox_router_sessions SET lease_until = now() - interval '1 second'`, db);
  if (lapse === 'hold') await pg.psql(`UPDATE sandbox_router_budget_charges SET expires_at = now() - interval '1 second' WHERE state = 0`, db);
  const b = fleetRouter(storeOf(db), {}, undefined);
  const second = await b.provision({ launch: { labels: { tenant: 'acme' } } }).then(() => 'ok', (e) => e.code);
  open();
  await first;
  let row;
  // The settlement is written without waiting (the provision resolves first): wait until
  // nothing is in flight and, with the lease lapsed, for the late charge and its event.
  for (let i = 0; i < 100; i++) {
    [row] = await b.budgetStatus();
    if (row && row.reserved.launches === 0 && (!lapse || (row.used.launches >= 2 && rec.events.some((e) => e.type === 'budget.charged.late')))) break;
    await sleep(20);
  }
  return { second, used: row.used.launches, late: rec.events.filter((e) => e.type === 'budget.charged.late') };
}

test('lapsed lease must-fire: a process whose lease lapsed launches, its reservation freed meanwhile: its settlement is charged late (over the limit), reported with budget.charged.late', async () => {
  const { second, used, late } = await lapsedLease('lease');
  assert.equal(second, 'ok', "the other process was admitted on the lapsed lease's freed reservation");
  assert.equal(used, 2, 'both launches are charged: one over the limit of 1, never dropped');
  assert.equal(late.length, 1);
  assert.equal(late[0].providerId, 'a');
});

// The sweep finds an expired reservation through its own range of the v6 index (the lease
// alive); the must-not-fire twin is the one below (nothing expired, nothing lapsed).
test('expired hold must-fire: a reservation whose hold expired (its lease alive) is freed by the next reservation, and its late settlement charged', async () => {
  const { second, used, late } = await lapsedLease('hold');
  assert.equal(second, 'ok');
  assert.equal(used, 2);
  assert.equal(late.length, 1);
});

test('lapsed lease must-not-fire: with its lease alive, the reservation holds (the other is refused) and the launch is charged once, on time', async () => {
  const { second, used, late } = await lapsedLease(false);
  assert.equal(second, 'BUDGET_EXHAUSTED');
  assert.equal(used, 1);
  assert.equal(late.length, 0);
});

/** Transactions per provision + destroy: capacity and one budget rule, the store as coordinator. */
async function transactionsPerCycle() {
  const db = await freshDb();
  /** Commits and rollbacks of the database; a store's backends report theirs when they end. */
  const count = async () => Number(await pg.psql(`SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '${db}'`));
  const cycles = async (n) => {
    const store = storeOf(db, { leaseMs: 600_000 });
    await store.open();
    // The server's own autovacuum runs transactions in the database too: not the router's.
    const tables = (await pg.psql("SELECT tablename FROM pg_tables WHERE tablename LIKE 'sandbox_router_%'", db)).split('\n');
    for (const t of tables) await pg.psql(`ALTER TABLE ${t} SET (autovacuum_enabled = false)`, db);
    const router = new SandboxRouter({
      registry: new InMemoryProviderRegistry([definition('a', { capacity: { getCapacity: async () => ({ status: 'known', resources: [{ resource: 'sandboxes', used: 0, limit: 1000, unit: 'sandboxes', headroom: 1000, required: 1 }] }) } })]),
      mappings: store,
      capacity: { providerOrder: ['a'], coordinator: store },
      budgets: [{ id: 'n', key: { label: 'tenant' }, limit: { launches: 1000 }, window: { every: 'day' } }],
      health: false,
    });
    for (let i = 0; i < n; i++) {
      const s = await router.provision({ launch: { labels: { tenant: 'acme' } } });
      await router.destroy(s.id);
    }
    await store.close();
    await sleep(300);
  };
  // What a store pays once (open, its lease, close, preparing each statement on each
  // connection) cancels out between a short and a long run.
  const c0 = await count();
  await cycles(10);
  const c1 = await count();
  await cycles(40);
  const c2 = await count();
  return (c2 - c1 - (c1 - c0)) / 30;
}

// The target: 3 + 1. The reservation with the read sequence and the launch intent
// (`prepareLaunch`), the admission, the record with both settlements (`settleLaunch`); the
// destroy's one statement (`forget`), with no read first: the router wrote the record itself.
test('transactions: a provision with capacity and one budget rule is 3 transactions and its destroy 1 (pg_stat_database; 10 before)', async (t) => {
  const per = await transactionsPerCycle();
  t.diagnostic(`${per} transactions per provision and destroy`);
  assert.ok(per <= 4, `${per} transactions per provision and destroy (at most 4)`);
  assert.ok(per >= 3, `${per}: every cycle wrote (the count is live)`);
});

/**
 * Two routers over one database (each its own store, the store its own coordinator) and one
 * runtime; `reads` counts each store's record reads (`get`).
 */
async function twoRouters() {
  const db = await freshDb();
  const runtime = fakeRuntime();
  const reads = { a: 0, b: 0 };
  const routerOf = async (name) => {
    const store = storeOf(db);
    const get = store.get.bind(store);
    store.get = (id) => {
      reads[name]++;
      return get(id);
    };
    await store.open();
    return new SandboxRouter({
      registry: new InMemoryProviderRegistry([definition('a', { runtime, capacity: { getCapacity: async () => ({ status: 'known', resources: [{ resource: 'sandboxes', used: 0, limit: 1000, unit: 'sandboxes', headroom: 1000, required: 1 }] }) } })]),
      mappings: store,
      capacity: { providerOrder: ['a'], coordinator: store },
      budgets: [{ id: 'n', key: { label: 'tenant' }, limit: { concurrent: 10 } }],
      health: false,
    });
  };
  return { runtime, reads, a: await routerOf('a'), b: await routerOf('b') };
}

test('destroy without a read must-fire: the router that recorded a sandbox destroys it reading nothing first', async () => {
  const { runtime, reads, a } = await twoRouters();
  const s = await a.provision({ launch: { labels: { tenant: 'acme' } } });
  const [held] = await a.budgetStatus({ rule: 'n' });
  assert.equal(held.used.concurrent, 1, 'a slot held while it lives');
  await a.destroy(s.id);
  assert.equal(reads.a, 0, 'no record read');
  assert.equal(runtime.live.size, 0, 'destroyed at the provider');
  const [row] = await a.budgetStatus({ rule: 'n' });
  assert.equal(row?.used.concurrent ?? 0, 0, 'its slot given back');
  await assert.rejects(a.getSandbox(s.id), (e) => e.code === 'SANDBOX_NOT_FOUND', 'its record is gone');
});

test('destroy without a read must-not-fire: another router reads the record first, and a sandbox destroyed elsewhere is SANDBOX_NOT_FOUND to its maker', async () => {
  const { runtime, reads, a, b } = await twoRouters();
  const s = await a.provision({ launch: { labels: { tenant: 'acme' } } });
  await b.destroy(s.id);
  assert.equal(reads.b, 1, 'the other router read the record');
  assert.equal(runtime.live.size, 0);
  // The maker still has the record's pool and provider id: its destroy asks the provider
  // again (already gone), and the one statement says the record was gone.
  await assert.rejects(a.destroy(s.id), (e) => e.code === 'SANDBOX_NOT_FOUND' && e.sandboxId === s.id);
  assert.equal(reads.a, 0);
  // Its next destroy of that id reads, and answers the same.
  await assert.rejects(a.destroy(s.id), (e) => e.code === 'SANDBOX_NOT_FOUND');
  assert.equal(reads.a, 1);
});
