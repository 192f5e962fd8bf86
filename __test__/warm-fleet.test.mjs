// Warm pools across a fleet (docs/warm-pools.md#across-a-fleet): several router processes on
// one real PostgreSQL (the tests' own), sharing one warm inventory. Pairs are named
// must-fire / must-not-fire.
import test from 'node:test';
import assert from 'node:assert/strict';
import { fleetHarness, startWorker as spawnWorker } from './fleet-workers.mjs';

// The provider: live sandboxes and the launches made (warm refills apart).
const provider = { live: new Map(), refills: 0, cold: 0, next: 0, slowGet: false };

function handle(req, res) {
  const u = new URL(req.url, 'http://x');
  const json = (v) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(v));
  };
  switch (u.pathname) {
    case '/launch':
      setTimeout(() => {
        const id = `remote-${++provider.next}`;
        if (u.searchParams.get('warm')) provider.refills++;
        else provider.cold++;
        provider.live.set(id, {});
        json({ id, state: 'started' });
      }, 20);
      return;
    case '/get': {
      const id = u.searchParams.get('id');
      setTimeout(() => json({ handle: provider.live.has(id) ? { id, state: 'started' } : null }), provider.slowGet ? 200 : 0);
      return;
    }
    case '/capacity': {
      const used = provider.live.size;
      return json({ status: 'known', resources: [{ resource: 'sandboxes', used, limit: 1000, unit: 'sandboxes', headroom: 1000 - used, required: 1 }] });
    }
    case '/run':
      return json({ output: 'ok', exitCode: 0 });
    case '/destroy':
      provider.live.delete(u.searchParams.get('id'));
      return json({});
    default:
      res.statusCode = 404;
      res.end();
  }
}

const h = fleetHarness(handle);

function startWorker(url, size) {
  return spawnWorker('warm-worker.mjs', [url, h.base, String(size)], h.workers);
}


const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const idleRows = async (db) => Number(await h.pg.psql("SELECT count(*) FROM sandbox_router_warm WHERE state = 'idle'", db));

test('warm fleet: three processes share one inventory of size 4', async (t) => {
  await h.pg.createDatabase('warm1');
  const url = h.pg.url('warm1');
  const fleet = await Promise.all([0, 1, 2].map(() => startWorker(url, 4)));

  await t.test('must-not-fire: three concurrent warmUp() calls launch the fleet-wide size, never 3 × 4', async () => {
    const reports = await Promise.all(fleet.map((w) => w.ask({ cmd: 'warmUp' })));
    for (const r of reports) assert.equal(r.ok, true, JSON.stringify(r));
    assert.equal(provider.refills, 4, 'refills are not duplicated beyond the target');
    assert.equal(await idleRows('warm1'), 4);
    const [status] = (await fleet[0].ask({ cmd: 'status' })).value;
    assert.equal(status.scope, 'fleet');
    assert.equal(status.idle, 4);
  });

  await t.test('must-fire: 3 × 3 concurrent claims take each member once (FOR UPDATE SKIP LOCKED); the rest launch cold with no error', async () => {
    const coldBefore = provider.cold;
    const refillsBefore = provider.refills;
    const answers = (await Promise.all(fleet.map((w) => w.ask({ cmd: 'burst', n: 3 })))).flat();
    assert.ok(answers.every((a) => a.ok), JSON.stringify(answers.filter((a) => !a.ok)));
    const ids = answers.map((a) => a.value.id);
    assert.equal(new Set(ids).size, 9, 'no member handed out twice');
    const records = await Promise.all(ids.map((id) => h.pg.psql(`SELECT provider_sandbox_id FROM sandbox_router_mappings WHERE id = '${id}'`, 'warm1')));
    assert.equal(new Set(records).size, 9, 'nine distinct sandboxes');
    const cold = provider.cold - coldBefore;
    // Claims trigger refills, which may land (and be claimed) while the burst runs.
    const refilled = provider.refills - refillsBefore;
    assert.ok(9 - cold <= 4 + refilled, `at most the 4 idle members plus the refills made meanwhile (${9 - cold} warm, ${cold} cold, ${refilled} refills)`);
    const labels = JSON.parse(await h.pg.psql(`SELECT labels FROM sandbox_router_mappings WHERE id = '${ids[0]}'`, 'warm1'));
    assert.match(labels.caller, /^\d+-0$/, 'the claim wrote the caller labels');
    assert.equal(labels['agent-relay-sbx-warm'], undefined);
  });

  await t.test('must-not-fire: after the claims, refills bring the fleet back to 4 idle, not beyond', async () => {
    await Promise.all(fleet.map((w) => w.ask({ cmd: 'warmUp' })));
    await sleep(200);
    assert.equal(await idleRows('warm1'), 4);
    const launching = Number(await h.pg.psql("SELECT count(*) FROM sandbox_router_warm WHERE state = 'launching'", 'warm1'));
    assert.equal(launching, 0);
  });

  await t.test('must-fire: a process killed mid-claim loses nothing: each member is mapped to a provision or still idle', async () => {
    const victim = await startWorker(url, 4);
    provider.slowGet = true; // its claims sit in the owned re-resolution after their commit
    await victim.ask({ cmd: 'start', n: 6 });
    await sleep(120);
    victim.child.kill('SIGKILL');
    await sleep(100);
    provider.slowGet = false;
    // Every live sandbox is mapped, or an idle member, or named by a launch intent (a cold
    // launch in flight: reconcile's). None is unaccounted for.
    const mapped = new Set((await h.pg.psql('SELECT provider_sandbox_id FROM sandbox_router_mappings', 'warm1')).split('\n').filter(Boolean));
    const idle = (await h.pg.psql("SELECT provider_sandbox_id FROM sandbox_router_warm WHERE state = 'idle'", 'warm1')).split('\n').filter(Boolean);
    for (const p of idle) assert.ok(mapped.has(p), `idle member ${p} has its record`);
    const intents = Number(await h.pg.psql('SELECT count(*) FROM sandbox_router_intents', 'warm1'));
    const unaccounted = [...provider.live.keys()].filter((p) => !mapped.has(p));
    assert.ok(unaccounted.length <= intents, `unaccounted ${unaccounted.length} vs intents ${intents}`);
    const both = await h.pg.psql("SELECT count(*) FROM sandbox_router_warm w JOIN sandbox_router_mappings m ON m.id = w.id WHERE w.state = 'idle' AND m.labels::jsonb ? 'caller'", 'warm1');
    assert.equal(Number(both), 0, 'no member is both idle and claimed');
  });

  await t.test('must-fire: close() destroys this process’s idle members / must-not-fire: close({ keepWarm: true }) leaves them for the fleet', async () => {
    const kept = await fleet[1].ask({ cmd: 'close', options: { keepWarm: true } });
    assert.deepEqual(kept.value, { destroyed: 0, failed: 0, kept: 0 });
    const before = await idleRows('warm1');
    const closed = await fleet[0].ask({ cmd: 'close' });
    assert.equal(closed.ok, true);
    assert.equal(await idleRows('warm1'), before - closed.value.destroyed);
  });
  // An exiting worker answers nothing: each is told, and not awaited.
  for (const w of fleet) w.child.send({ cmd: 'exit', seq: 0 });
});
