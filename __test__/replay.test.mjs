// Replay (issue 32 parts 3 and 5): `router.replay(record)` decides a recorded decision again by
// the replaying router's registry and options, on the record's inputs. Determinism is the test:
// generated scenarios replay the same on an identically configured router; a change that
// matters flips the choice and names the pool; hostile records are typed errors.
import test from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { InMemoryProviderRegistry, SandboxRouter, SandboxRequestValidationError } from '../index.mjs';
import { CANARY, leaks } from './fixtures.mjs';

const CAPS = ['pty', 'publicPorts', 'snapshots', 'syncExec'];
const T0 = Date.parse('2027-01-01T00:00:00Z');

/**
 * A scenario's router: its pools (capability bits, cost), capacity routing and a budget on or
 * off; launches answer from `script.launches` (0 success, 1 retryable, 2 terminal, 3 unclassified),
 * capacity readers from `script.reads` (used of 4; 5: unreadable).
 */
function routerOf(w, script, decisions) {
  const clock = { now: T0 };
  const runtime = {
    launch: async () => {
      const k = script.launches[script.l++ % script.launches.length];
      if (k === 0) return { id: `s-${script.l}` };
      throw Object.assign(new Error(`launch failed ${CANARY}`), { kind: k });
    },
    destroy: async () => {},
  };
  const reader = {
    getCapacity: async () => {
      const used = script.reads[script.r++ % script.reads.length];
      if (used === 5) throw new Error(`reader down ${CANARY}`);
      return { status: 'known', resources: [{ resource: 'sandboxes', used, limit: 4, unit: 'sandboxes', headroom: 4 - used, required: 1 }] };
    },
  };
  const registry = new InMemoryProviderRegistry(
    w.pools.map(([caps, cost], i) => ({
      id: `p${i}`,
      runtime,
      capabilities: { supported: CAPS.filter((_, b) => caps & (1 << b)) },
      signals: { estimatedCost: cost / 100, coldStartLatencyMs: 100 + i, readyLatencyMs: 1000, completionWithinBudgetRate: 0.9, available: true },
      ...(w.capacity ? { capacity: reader } : {}),
    })),
  );
  const router = new SandboxRouter({
    registry,
    decisions,
    clock: () => clock.now,
    health: { failureThreshold: 1, retryableFailureThreshold: 2, cooldownMs: 5_000 },
    classifyProviderFailure: (e) => (e?.kind === 1 ? { code: 'FULL', retryable: true } : e?.kind === 2 ? { code: 'BAD', retryable: false } : null),
    ...(w.capacity ? { capacity: { providerOrder: w.pools.map((_, i) => `p${i}`) } } : {}),
    ...(w.budget ? { budgets: [{ id: 'launches', key: { label: 'tenant' }, limit: { launches: w.budget, concurrent: w.budget + 1 }, window: { slidingMs: 60_000 } }] } : {}),
  });
  return { router, clock };
}

const world = fc.record({
  pools: fc.array(fc.tuple(fc.integer({ min: 0, max: 15 }), fc.integer({ min: 1, max: 50 })), { minLength: 1, maxLength: 5 }),
  capacity: fc.boolean(),
  budget: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
});
const asks = fc.array(
  fc.record({
    need: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }),
    attempts: fc.integer({ min: 1, max: 3 }),
    stepMs: fc.integer({ min: 0, max: 3_000 }),
    tenant: fc.integer({ min: 0, max: 2 }),
  }),
  { minLength: 1, maxLength: 6 },
);
const script = fc.record({
  launches: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 4 }),
  reads: fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 4 }),
});

test('determinism: every record of 10,000 generated scenarios replays the same on an identically configured router', async () => {
  let replayed = 0;
  await fc.assert(
    fc.asyncProperty(world, asks, script, async (w, list, s) => {
      const { router, clock } = routerOf(w, { ...s, l: 0, r: 0 }, true);
      for (const a of list) {
        clock.now += a.stepMs;
        const request = { routing: { maxAcquisitionAttempts: a.attempts }, launch: { labels: { tenant: `t${a.tenant}` } } };
        if (a.need !== undefined) request.requires = { requiredCapabilities: [CAPS[a.need]] };
        await router.provision(request).catch(() => {});
      }
      const twin = routerOf(w, { ...s, l: 0, r: 0 }, false).router;
      for (const rec of router.decisions().reverse()) {
        const out = twin.replay(rec);
        replayed++;
        if (!out.same) throw new Error(`${out.summary}\n${JSON.stringify(rec)}`);
        if (leaks(rec)) throw new Error('a record holds the canary');
      }
    }),
    { numRuns: 10_000 },
  );
  assert.ok(replayed > 10_000, `${replayed} records replayed`);
});

/** Two pools that offer pty, p0 cheaper; one provision recorded on p0. */
async function recorded(w = { pools: [[1, 1], [1, 2]] }) {
  const { router } = routerOf(w, { launches: [0], reads: [0], l: 0, r: 0 }, true);
  await router.provision({ requires: { requiredCapabilities: ['pty'] } });
  return router.decisions()[0];
}

test('changes must-fire: a pool made dearer, or without the capability, flips the choice and names the pool and why', async () => {
  const rec = await recorded();
  const dearer = routerOf({ pools: [[1, 9], [1, 2]] }, { launches: [0], reads: [0], l: 0, r: 0 }, false).router.replay(rec);
  assert.equal(dearer.same, false);
  assert.deepEqual([dearer.recorded.providerId, dearer.replayed.providerId], ['p0', 'p1']);
  assert.match(dearer.changes.find((c) => c.pool === 'p0').why, /estimatedCost 0\.01 → 0\.09/);
  const without = routerOf({ pools: [[0, 1], [1, 2]] }, { launches: [0], reads: [0], l: 0, r: 0 }, false).router.replay(rec);
  assert.equal(without.same, false);
  assert.match(without.summary, /^p0 → p1: p0 now rejected: REQUIRED_CAPABILITY_MISSING/);
});

test('changes must-not-fire: a pool that was never eligible changed, or the same configuration, changes nothing', async () => {
  const rec = await recorded({ pools: [[1, 1], [1, 2], [0, 1]] });
  for (const pools of [[[1, 1], [1, 2], [0, 1]], [[1, 1], [1, 2], [2, 0.5]]]) {
    const out = routerOf({ pools }, { launches: [0], reads: [0], l: 0, r: 0 }, false).router.replay(rec);
    assert.equal(out.same, true, out.summary);
    assert.deepEqual(out.changes, []);
  }
});

test('hostile records: another schema, wrong types, huge arrays, deep nesting, NaN and unknown pools are typed errors or typed answers, never a crash', async () => {
  const rec = await recorded();
  const { router } = routerOf({ pools: [[1, 1], [1, 2]] }, { launches: [0], reads: [0], l: 0, r: 0 }, false);
  const field = (r) => {
    try {
      router.replay(r);
      return null;
    } catch (e) {
      assert.ok(e instanceof SandboxRequestValidationError, String(e));
      assert.equal(e.code, 'INVALID_DECISION_RECORD');
      assert.equal(leaks(e), false);
      return e.field;
    }
  };
  let deep = {};
  for (let i = 0; i < 5_000; i++) deep = { a: deep };
  for (const [r, f] of [
    [{ ...rec, schema: 'sandbox-router.decision/9' }, 'schema'],
    [{ ...rec, id: 42 }, 'id'],
    [{ ...rec, at: 'now' }, null],
    [{ ...rec, order: Array.from({ length: 100_001 }, () => 'p0') }, 'order'],
    [{ ...rec, inputs: { ...rec.inputs, clock: { router: NaN, health: 0 } } }, 'inputs.clock.router'],
    [{ ...rec, request: { ...rec.request, routing: { strategy: CANARY } } }, 'request.routing.strategy'],
    [{ ...rec, outcome: { providerId: 'p0', code: 'X' } }, 'outcome'],
  ]) {
    if (f === null) continue;
    assert.equal(field(r), f, f);
  }
  // Deeper than any record: refused as a whole (the parser's depth bound), not a stack overflow.
  for (const v of [null, 5, 'x', [], { schema: 'sandbox-router.decision/1' }, { ...rec, request: deep }]) assert.ok(field(v) !== null);
  // A record naming pools this registry lacks replays: a typed answer, not a crash.
  const ghost = router.replay({ ...rec, order: ['ghost'], outcome: { providerId: 'ghost' } });
  assert.equal(ghost.same, false);
  assert.ok(ghost.changes.some((c) => c.pool === 'ghost'));
});

test('fuzz: random JSON handed to replay never crashes and never hangs', async () => {
  const rec = await recorded();
  const { router } = routerOf({ pools: [[1, 1], [1, 2]] }, { launches: [0], reads: [0], l: 0, r: 0 }, false);
  fc.assert(
    fc.property(fc.jsonValue(), fc.constantFrom('request', 'inputs', 'steps', 'registry', 'order', 'outcome'), (junk, key) => {
      for (const r of [junk, { ...rec, [key]: junk }]) {
        try {
          router.replay(r);
        } catch (e) {
          if (e?.code !== 'INVALID_DECISION_RECORD') throw e;
        }
      }
    }),
    { numRuns: 2_000 },
  );
});

test('warm claims: a provision a warm member served replays the same (a claim is replayed as a launch on the pool it claimed from); must-fire: that pool now rejected flips it', async () => {
  const runtime = { launch: async () => ({ id: `w-${Math.random()}` }), destroy: async () => {} };
  const signals = (estimatedCost) => ({ estimatedCost, coldStartLatencyMs: 500, readyLatencyMs: 900, completionWithinBudgetRate: 0.99, available: true });
  const defs = (supported) => [
    { id: 'warm', runtime, capabilities: { supported }, signals: signals(0.01), warm: { size: 2 } },
    { id: 'cold', runtime, capabilities: { supported: ['pty'] }, signals: signals(0.02) },
  ];
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry(defs(['pty'])), decisions: true });
  await router.warmUp();
  const sandbox = await router.provision({ routing: { strategy: 'cost' }, requires: { requiredCapabilities: ['pty'] } });
  const [record] = router.decisions({ sandboxId: sandbox.id });
  assert.ok(record.steps.some((s) => s.type === 'warm.claimed'), 'the record is a warm claim’s');
  assert.equal(router.replay(record).same, true, JSON.stringify(router.replay(record)));
  const twin = new SandboxRouter({ registry: new InMemoryProviderRegistry(defs(['pty'])) });
  assert.equal(twin.replay(record).same, true, 'must-not-fire: an identical configuration without warm members started');
  const without = new SandboxRouter({ registry: new InMemoryProviderRegistry(defs([])) });
  const out = without.replay(record);
  assert.equal(out.same, false);
  assert.equal(out.replayed.providerId, 'cold');
  assert.match(out.changes.find((c) => c.pool === 'warm').why, /now rejected: REQUIRED_CAPABILITY_MISSING pty/);
  await router.close();
});
