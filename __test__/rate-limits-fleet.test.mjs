// Pacing across a fleet (issue 33, part 4): with a PostgresMappingStore as
// `capacity.coordinator`, a pool's token bucket and its Retry-After cooldown are the fleet's.
// Four router processes (fixtures/pacing-worker.mjs), one PostgreSQL (started here), one
// provider account (an HTTP server in this process that records when each create arrived).
//  1. The store's admission: a token taken with the hold, none without room; a cooldown.
//  2. Four processes sharing `launchesPerSecond: 5` never start more than 5 + burst creates in
//     any one-second window (must-fire); each pacing in process only, they do (must-not).
//  3. A 429 seen by one process cools the pool for all (must-fire); in process only, not.
//  4. Turns across the fleet: a steady tenant beside another's burst in every process is served
//     at the next tokens with `fairBy` (must-fire), behind the burst without (must-not).
//  5. Waiting does not poll: a process with waiters asks about once per token.
//  6. A process killed with SIGKILL while its provisions wait and launch leaks nothing: the
//     others are served at the fleet's rate and its in-flight holds lapse with its lease.
import test from 'node:test';
import assert from 'node:assert/strict';
import { fleetHarness, startWorker } from './fleet-workers.mjs';
import { PostgresMappingStore } from '../index.mjs';
import { CANARY } from './fixtures.mjs';

// The provider account: when each create arrived (and from which process), and a switch that
// refuses the next create with 429 + Retry-After.
const account = {
  /** @type {Array<{ at: number, pid: string, status: number }>} */
  creates: [],
  accepted: 0,
  /** seconds of the next create's Retry-After (0: accept it) */
  refuseNext: 0,
};

function handle(req, res) {
  const u = new URL(req.url, 'http://x');
  const json = (status, v, headers = {}) => res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(v));
  if (u.pathname === '/capacity') {
    return json(200, { status: 'known', resources: [{ resource: 'sandboxes', used: account.accepted, limit: 100_000, unit: 'sandboxes', headroom: 100_000 - account.accepted, required: 1 }] });
  }
  if (u.pathname === '/sandboxes') {
    const at = Date.now();
    const pid = u.searchParams.get('pid') ?? '';
    if (account.refuseNext > 0) {
      const seconds = account.refuseNext;
      account.refuseNext = 0;
      account.creates.push({ at, pid, status: 429 });
      return json(429, { message: `rate limit ${CANARY}` }, { 'retry-after': String(seconds) });
    }
    account.accepted++;
    account.creates.push({ at, pid, status: 201 });
    return json(201, { id: `sbx-${account.accepted}` });
  }
  res.writeHead(404).end();
}

const h = fleetHarness(handle, ['pacing']);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The most creates (accepted or not) that arrived within any one second, from `from` on. */
function busiestSecond(from) {
  const at = account.creates.filter((c) => c.at >= from).map((c) => c.at).sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < at.length; i++) {
    while (at[i] - at[j] >= 1_000) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

test('fleet pacing: the admission takes a token of the pool row\'s bucket, with the hold', async (t) => {
  await h.pg.createDatabase('pacing_store');
  const store = new PostgresMappingStore({ connection: h.pg.url('pacing_store'), timeoutMs: 5_000, leaseMs: 5_000 });
  const { coordinatorOf } = await import('../lib/postgres.js');
  const native = coordinatorOf(store);
  const room = [{ resource: 'sandboxes', used: 0, limit: 100, need: 1 }];
  const admit = (pool, dims = room, rateLimit = { launchesPerSecond: 5, burst: 2 }, lane = '', on = native) =>
    on.beginRead().then((seq) => on.admit(seq, { providerId: pool, dims, holdMs: 60_000, sandboxId: '', rateLimit: rateLimit ?? undefined, lane: rateLimit ? lane : undefined, waits: rateLimit ? true : undefined }));
  try {
    await t.test('must-fire: past the burst the bucket refuses RATE_LIMITED with the time to the next token; must-not: within it', async () => {
      assert.ok((await admit('a')).token > 0);
      assert.ok((await admit('a')).token > 0);
      const refused = await admit('a');
      assert.equal(refused.token ?? null, null);
      assert.equal(refused.paced, 'RATE_LIMITED');
      assert.ok(refused.retryInMs > 0 && refused.retryInMs <= 200, `next token in ${refused.retryInMs} ms`);
      await sleep(refused.retryInMs + 5);
      assert.ok((await admit('a')).token > 0, 'a token came back at the time it named');
      // Another pool's bucket is its own.
      assert.ok((await admit('b')).token > 0);
    });
    await t.test('must-fire: a refusal for room takes no token; must-not: a pool without a limit is never paced', async () => {
      const full = [{ resource: 'sandboxes', used: 100, limit: 100, need: 1 }];
      for (let i = 0; i < 3; i++) assert.equal((await admit('c', full)).resource, 'sandboxes');
      const first = await admit('c');
      assert.ok(first.token > 0, `the full pool kept its burst: ${JSON.stringify(first)}`);
      assert.ok((await admit('c')).token > 0);
      for (let i = 0; i < 5; i++) assert.ok((await admit('d', room, null)).token > 0);
    });
    await t.test('must-fire: a cooldown refuses every admission COOLING_DOWN until it ends; must-not: after it', async () => {
      assert.equal(await native.cool('e', 300), true);
      assert.equal(await native.cool('e', 100), true, 'a shorter one keeps the longer');
      for (const limit of [null, { launchesPerSecond: 5, burst: 2 }]) {
        const v = await admit('e', room, limit);
        assert.equal(v.paced, 'COOLING_DOWN');
        assert.ok(v.retryInMs > 100 && v.retryInMs <= 300, `${v.retryInMs}`);
      }
      await sleep(310);
      assert.ok((await admit('e')).token > 0);
    });
    await t.test('must-fire: a lane that waits is served before a lane served since; must-not: with nobody else waiting the same lane goes on', async () => {
      const other = new PostgresMappingStore({ connection: h.pg.url('pacing_store'), timeoutMs: 5_000, leaseMs: 5_000 });
      const second = coordinatorOf(other);
      const one = { launchesPerSecond: 10, burst: 1 };
      try {
        // must-not: the burst lane alone takes each token as it comes.
        assert.ok((await admit('f', room, one, 'burst')).token > 0);
        const early = await admit('f', room, one, 'burst');
        assert.equal(early.paced, 'RATE_LIMITED');
        await sleep(early.retryInMs + 5);
        assert.ok((await admit('f', room, one, 'burst')).token > 0, 'nobody else waits: its turn');
        // The steady lane (another process) asks while the bucket is empty: its claim is kept.
        const steady = await admit('f', room, one, 'steady', second);
        assert.equal(steady.paced, 'RATE_LIMITED');
        await sleep(steady.retryInMs + 5);
        // must-fire: at the token the burst lane, served since, is refused for the steady lane's turn.
        const turn = await admit('f', room, one, 'burst');
        assert.equal(turn.paced, 'QUEUED', JSON.stringify(turn));
        assert.ok(turn.retryInMs > 0 && turn.retryInMs <= 200, `${turn.retryInMs}`);
        assert.ok((await admit('f', room, one, 'steady', second)).token > 0, 'the steady lane takes its turn');
        assert.equal(await h.pg.psql(`SELECT count(*) FROM sandbox_router_turns WHERE pool = 'f' AND lane = 'steady'`, 'pacing_store'), '0', 'a served claim is dropped');
        // Turns alternate: the burst lane's claim (refused above) now comes before the steady lane.
        await sleep(110);
        assert.equal((await admit('f', room, one, 'steady', second)).paced, 'QUEUED');
        assert.ok((await admit('f', room, one, 'burst')).token > 0);
        // The steady lane claims again (no token yet), then its process closes (its session ends).
        assert.equal((await admit('f', room, one, 'steady', second)).paced, 'RATE_LIMITED');
        await other.close();
        await sleep(110);
        // must-not: a claim of a process whose session ended counts for nothing.
        assert.ok((await admit('f', room, one, 'burst')).token > 0, 'the closed process\'s claim is ignored');
      } finally {
        await other.close();
      }
    });
    await t.test('must-fire: a waiting provision refused claims its lane\'s turn and a refill goes after it; must-not: one that does not wait claims nothing', async () => {
      const one = { launchesPerSecond: 10, burst: 1 };
      const turns = () => h.pg.psql(`SELECT count(*) FROM sandbox_router_turns WHERE pool = 'g'`, 'pacing_store');
      const ask = (lane, waits) =>
        native.beginRead().then((seq) => native.admit(seq, { providerId: 'g', dims: room, holdMs: 60_000, sandboxId: '', rateLimit: one, lane, waits }));
      assert.ok((await ask('x', false)).token > 0);
      assert.equal((await ask('x', false)).paced, 'RATE_LIMITED');
      assert.equal(await turns(), '0', 'no queue, no claim');
      assert.equal((await ask('x', true)).paced, 'RATE_LIMITED');
      assert.equal(await turns(), '1', 'a waiting provision claims its turn');
      await sleep(110);
      // A refill (no lane) at the token: the waiting lane goes first; then it may.
      const refill = await ask(undefined, false);
      assert.equal(refill.paced, 'QUEUED', JSON.stringify(refill));
      assert.ok((await ask('x', true)).token > 0);
      await sleep(110);
      assert.ok((await ask(undefined, false)).token > 0, 'nobody waits: the refill takes the token');
    });
  } finally {
    await store.close();
  }
});

test('fleet pacing: four processes, one PostgreSQL, one account', async (t) => {
  const fleet = await Promise.all([0, 1, 2, 3].map(() => startWorker('pacing-worker.mjs', [h.pg.url('pacing'), h.base], h.workers)));

  await t.test('must-fire: 4 processes sharing launchesPerSecond 5 never start more than 5 + burst creates in any second, and all are served', async () => {
    const from = Date.now();
    const answers = (await Promise.all(fleet.map((w) => w.ask({ cmd: 'burst', router: 'fleet', n: 6 })))).flat();
    const took = Date.now() - from;
    assert.deepEqual(answers.filter((a) => !a.ok), [], 'every provision served (the queue waits)');
    const most = busiestSecond(from);
    t.diagnostic(`24 provisions in ${took} ms; at most ${most} creates in one second`);
    assert.ok(most <= 6, `${most} creates within one second`);
    // Paced, not starved: 24 creates at 5 a second take about 4.6 s after the first.
    assert.ok(took < 8_000, `${took} ms`);
  });

  await t.test('must-not-fire: the same 4 processes pacing in process only start up to 4 x (5 + burst) in a second', async () => {
    await sleep(1_100);
    const from = Date.now();
    const answers = (await Promise.all(fleet.map((w) => w.ask({ cmd: 'burst', router: 'local', n: 6 })))).flat();
    assert.equal(answers.filter((a) => a.ok).length, 24);
    const most = busiestSecond(from);
    t.diagnostic(`in process only: ${most} creates in one second`);
    assert.ok(most > 6, `${most} creates within one second`);
  });

  await t.test('must-fire: a 429 seen by one process cools the pool for every process; must-not: in process only', async () => {
    for (const router of ['fleet', 'local']) {
      await sleep(1_100);
      account.refuseNext = 2;
      const first = fleet[0].ask({ cmd: 'burst', router, n: 1 });
      while (!account.creates.some((c) => c.status === 429)) await sleep(5);
      const refusedAt = account.creates.find((c) => c.status === 429)?.at ?? 0;
      // The cooldown is written without waiting: give it a moment before the others ask.
      await sleep(100);
      const others = fleet.slice(1).map((w) => w.ask({ cmd: 'burst', router, n: 1 }));
      const answers = (await Promise.all([first, ...others])).flat();
      assert.deepEqual(answers.filter((a) => !a.ok), [], `${router}: every provision served after the cooldown`);
      const within = account.creates.filter((c) => c.at > refusedAt && c.at < refusedAt + 1_950);
      account.creates.splice(0, account.creates.length, ...account.creates.filter((c) => c.status !== 429));
      if (router === 'fleet') assert.deepEqual(within, [], 'no process created within the Retry-After of the 429');
      else assert.ok(within.length >= 3, `in process only, the other processes created at once (${within.length})`);
    }
  });

  await t.test('fairness must-fire: with fairBy a steady tenant beside a burst in every process is served at the next tokens; must-not: without it, behind the burst', async () => {
    for (const router of ['fair', 'fleet']) {
      await sleep(1_100);
      const burst = Promise.all(fleet.map((w) => w.ask({ cmd: 'burst', router, n: 5, tenant: 'burst' })));
      await sleep(300);
      const steady = [];
      for (let i = 0; i < 3; i++) {
        steady.push(fleet[i].ask({ cmd: 'burst', router, n: 1, tenant: 'steady' }));
        await sleep(700);
      }
      const waits = (await Promise.all(steady)).flat();
      const burstAnswers = (await burst).flat();
      assert.deepEqual([...waits, ...burstAnswers].filter((a) => !a.ok), []);
      const longest = Math.max(...waits.map((a) => a.ms));
      t.diagnostic(`${router}: the steady tenant's longest wait ${longest} ms`);
      if (router === 'fair') assert.ok(longest < 1_000, `${longest} ms`);
      else assert.ok(longest > 2_000, `without fairBy the steady tenant waits behind the burst (${longest} ms)`);
    }
  });

  await t.test('waiting does not poll: 12 provisions waiting for a 4/s pool cost a few transactions each, not a loop', async () => {
    const { SandboxRouter, InMemoryProviderRegistry } = await import('../index.mjs');
    await h.pg.createDatabase('pacing_poll');
    /** Commits and rollbacks of the database; a store's backends report theirs when they end. */
    const count = async () => Number(await h.pg.psql(`SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = 'pacing_poll'`));
    const room = { status: /** @type {const} */ ('known'), resources: [{ resource: 'sandboxes', used: 0, limit: 1_000, unit: 'sandboxes', headroom: 1_000, required: 1 }] };
    let n = 0;
    const run = async (k) => {
      const store = new PostgresMappingStore({ connection: h.pg.url('pacing_poll'), timeoutMs: 5_000, leaseMs: 600_000 });
      const router = new SandboxRouter({
        registry: new InMemoryProviderRegistry([{
          id: 'slow', capabilities: {}, rateLimit: { launchesPerSecond: 4 },
          signals: { estimatedCost: 0.1, coldStartLatencyMs: 200, readyLatencyMs: 1000, completionWithinBudgetRate: 0.99, available: true },
          capacity: { getCapacity: async () => room },
          runtime: { launch: async () => ({ id: `s-${++n}` }), destroy: async () => {} },
        }]),
        capacity: { providerOrder: ['slow'], coordinator: store },
        queue: { maxWaitMs: 30_000 },
        health: false,
      });
      const served = await Promise.all(Array.from({ length: k }, () => router.provision({})));
      assert.equal(served.length, k);
      await store.close();
      await sleep(1_300);
    };
    // What a store pays once (open, close, prepares) cancels out between a short and a long run.
    const c0 = await count();
    await run(1);
    const c1 = await count();
    await run(13);
    const c2 = await count();
    const perWaiter = (c2 - c1 - (c1 - c0)) / 12;
    t.diagnostic(`${perWaiter.toFixed(1)} transactions per waiting provision (its read sequence and admission, and its asks while it waited)`);
    assert.ok(perWaiter <= 8, `${perWaiter} transactions per waiting provision`);
  });

  await t.test('a process killed with SIGKILL while its provisions wait leaks nothing: the others are served at the fleet rate', async () => {
    await sleep(1_100);
    const victim = fleet[3];
    const pid = String(victim.child.pid);
    const before = account.creates.length;
    await victim.ask({ cmd: 'start', router: 'fleet', n: 20 });
    while (account.creates.slice(before).filter((c) => c.pid === pid).length < 2) await sleep(10);
    const status = await victim.ask({ cmd: 'status', router: 'fleet' });
    assert.ok(status.depth >= 10, `the victim has provisions waiting (${status.depth})`);
    victim.child.kill('SIGKILL');
    await new Promise((r) => victim.child.once('exit', r));
    const from = Date.now();
    const answers = (await Promise.all(fleet.slice(0, 3).map((w) => w.ask({ cmd: 'burst', router: 'fleet', n: 5 })))).flat();
    const took = Date.now() - from;
    assert.deepEqual(answers.filter((a) => !a.ok), []);
    t.diagnostic(`15 provisions after the kill in ${took} ms`);
    assert.ok(took < 6_000, `the fleet's tokens keep coming (${took} ms)`);
    assert.ok(busiestSecond(from) <= 6);
    // Its in-flight holds lapse with its lease (1 s); the next admission sweeps them: none is left.
    await sleep(1_500);
    assert.ok((await fleet[0].ask({ cmd: 'burst', router: 'fleet', n: 1 }))[0].ok);
    let inflight = '';
    for (let i = 0; i < 50; i++) {
      inflight = await h.pg.psql('SELECT count(*) FROM sandbox_router_holds WHERE settled_seq IS NULL', 'pacing');
      if (inflight === '0') break;
      await sleep(100);
    }
    assert.equal(inflight, '0');
  });
});
