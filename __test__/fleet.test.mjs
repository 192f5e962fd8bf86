// The fleet test: four router processes (fixtures/fleet-worker.mjs), one PostgreSQL
// (started here), one provider (an HTTP server in this process that counts live sandboxes
// and whose capacity answer lags three launches behind).
//  1. 4 × 50 concurrent provisions against 10 slots never have more than 10 live launches.
//  2. A process killed with SIGKILL while its launches are in flight: its holds block the
//     pool until its lease lapses, then the others proceed.
//  3. A sandbox provisioned by one process is run, looked up and destroyed by others.
import test, { after, before } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startWorker as spawnWorker } from './fleet-workers.mjs';
import { startPostgres } from './postgres-server.mjs';

/** @type {Awaited<ReturnType<typeof startPostgres>>} */
let pg;
/** @type {http.Server} */
let server;
let base = '';
const workers = [];

// The provider: pools with limits, live sandboxes, launches in flight.
const provider = {
  limit: { a: 10, b: 3, c: 10 },
  live: new Map(),
  launched: { a: 0, b: 0, c: 0 },
  maxLive: { a: 0, b: 0, c: 0 },
  /** launches of pool b are held open (never answered) while this is true */
  hangB: false,
  hanging: [],
  next: 0,
};
const liveIn = (pool) => [...provider.live.values()].filter((s) => s.pool === pool).length;

function handle(req, res) {
  const u = new URL(req.url, 'http://x');
  const pool = u.searchParams.get('pool');
  const json = (v) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(v));
  };
  switch (u.pathname) {
    case '/launch': {
      if (pool === 'b' && provider.hangB) {
        provider.hanging.push(res);
        return;
      }
      setTimeout(() => {
        const id = `remote-${++provider.next}`;
        provider.launched[pool]++;
        provider.live.set(id, { pool, ran: [] });
        provider.maxLive[pool] = Math.max(provider.maxLive[pool], liveIn(pool));
        json({ id, state: 'started' });
      }, 5);
      return;
    }
    case '/capacity': {
      // Usage as it was three launches ago.
      const used = Math.max(0, liveIn(pool) - 3);
      const limit = provider.limit[pool];
      setTimeout(() => json({ status: 'known', resources: [{ resource: 'sandboxes', used, limit, unit: 'sandboxes', headroom: limit - used, required: 1 }] }), 1);
      return;
    }
    case '/get': {
      const id = u.searchParams.get('id');
      return json({ handle: provider.live.has(id) ? { id, state: 'started' } : null });
    }
    case '/run': {
      const id = u.searchParams.get('id');
      provider.live.get(id)?.ran.push(u.searchParams.get('command'));
      return json({ output: `ran on ${id}`, exitCode: 0 });
    }
    case '/destroy': {
      provider.live.delete(u.searchParams.get('id'));
      return json({});
    }
    default:
      res.statusCode = 404;
      res.end();
  }
}

/** Starts a worker; resolves once its routers are built. */
function startWorker(url) {
  return spawnWorker('fleet-worker.mjs', [url, base], workers);
}

before(async () => {
  pg = await startPostgres();
  await pg.createDatabase('fleet');
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

test('fleet: four processes, one database, one truth', async (t) => {
  const url = pg.url('fleet');
  const fleet = await Promise.all([0, 1, 2, 3].map(() => startWorker(url)));

  await t.test('4 × 50 concurrent provisions against 10 slots and a lagging reader never exceed 10 live launches', async () => {
    const answers = (await Promise.all(fleet.map((w) => w.ask({ cmd: 'burst', pool: 'a', n: 50 })))).flat();
    const ok = answers.filter((a) => a.ok);
    t.diagnostic(`pool a: ${provider.launched.a} launched, at most ${provider.maxLive.a} live, ${answers.length - ok.length} refused`);
    assert.equal(answers.length, 200);
    assert.ok(provider.maxLive.a <= 10, `max live ${provider.maxLive.a}`);
    assert.ok(provider.launched.a <= 10, `launched ${provider.launched.a}`);
    assert.ok(provider.launched.a >= 7, `capacity is used, not starved: launched ${provider.launched.a}`);
    assert.equal(ok.length, provider.launched.a);
    for (const a of answers.filter((x) => !x.ok)) assert.equal(a.code, 'PROVIDER_CAPACITY_EXHAUSTED', JSON.stringify(a));
    // Every success is one record in the one database.
    assert.equal(await pg.psql('SELECT count(*) FROM sandbox_router_mappings', 'fleet'), String(ok.length));
  });

  await t.test('a process killed with SIGKILL mid-flight: its holds block the pool until its lease lapses, then the others proceed', async () => {
    provider.hangB = true;
    const victim = fleet[3];
    await victim.ask({ cmd: 'start', pool: 'b', n: 3 });
    for (let i = 0; i < 100 && provider.hanging.length < 3; i++) await sleep(20);
    assert.equal(provider.hanging.length, 3, 'the victim has 3 launches in flight');
    provider.hangB = false;
    // must-fire: the victim's holds (3 of 3 slots) refuse the others while it lives
    const refused = await fleet[0].ask({ cmd: 'provision', pool: 'b' });
    assert.equal(refused.ok, false);
    assert.equal(refused.code, 'PROVIDER_CAPACITY_EXHAUSTED');
    victim.child.kill('SIGKILL');
    await new Promise((r) => victim.child.once('exit', r));
    const killedAt = Date.now();
    // After the lease (1 s) lapses the holds expire, and the others proceed.
    let admitted = null;
    while (Date.now() - killedAt < 10_000) {
      const a = await fleet[1].ask({ cmd: 'provision', pool: 'b' });
      if (a.ok) {
        admitted = a;
        break;
      }
      assert.equal(a.code, 'PROVIDER_CAPACITY_EXHAUSTED');
      await sleep(200);
    }
    assert.ok(admitted, 'admitted after the lease lapsed');
    const waited = Date.now() - killedAt;
    assert.ok(waited < 5_000, `freed within the lease and a renewal period (${waited} ms)`);
    assert.ok(provider.launched.b >= 1);
  });

  await t.test('a sandbox provisioned by one process is run, looked up and destroyed by the others', async () => {
    const made = await fleet[0].ask({ cmd: 'provision', pool: 'b' });
    assert.ok(made.ok, JSON.stringify(made));
    const id = made.value.id;
    const ran = await fleet[1].ask({ cmd: 'run', pool: 'b', id, command: 'echo hi' });
    assert.ok(ran.ok, JSON.stringify(ran));
    assert.match(ran.value.output, /^ran on remote-/);
    const seen = await fleet[2].ask({ cmd: 'get', pool: 'b', id });
    assert.ok(seen.ok && seen.value !== null, JSON.stringify(seen));
    const gone = await fleet[1].ask({ cmd: 'destroy', pool: 'b', id });
    assert.ok(gone.ok, JSON.stringify(gone));
    assert.equal(await pg.psql(`SELECT count(*) FROM sandbox_router_mappings WHERE id = '${id}'`, 'fleet'), '0');
    const after = await fleet[0].ask({ cmd: 'get', pool: 'b', id });
    assert.ok(after.ok === false || after.value === null, JSON.stringify(after));
  });

  await t.test('must-fire: the same fleet with in-process holds only (no coordinator) launches past the limit', async () => {
    const live = fleet.slice(0, 3);
    const answers = (await Promise.all(live.map((w) => w.ask({ cmd: 'burst', pool: 'c', n: 50 })))).flat();
    t.diagnostic(`pool c without a coordinator: ${provider.launched.c} launched against 10 slots`);
    assert.ok(provider.launched.c > 10, `launched ${provider.launched.c}`);
    assert.equal(answers.filter((a) => a.ok).length, provider.launched.c);
  });

  for (const w of fleet.slice(0, 3)) w.child.send({ cmd: 'exit', seq: 0 });
});
