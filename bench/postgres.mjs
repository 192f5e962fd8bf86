// Running many routers (`npm run bench`, section f; alone: `npm run bench -- --only=postgres`).
// Starts the test PostgreSQL (__test__/postgres-server.mjs: a private server on this machine).
//
//   (i)  Provision with PostgresMappingStore as the mapping store AND the capacity coordinator
//        vs the in-memory router (no capacity routing), an instant runtime and one pool whose
//        reader answers at once and counts what was launched: sequential time per provision,
//        and 1,000 concurrent provisions (median of 3, fresh database each). A coordinated
//        provision makes five database calls: the launch intent, the read sequence, the
//        admission transaction (upsert-lock, expire, read holds, insert; commit), the mapping
//        write, the settlement (not awaited).
//   (ii) Admissions per second across 4 processes: four child processes, one database, one
//        pool, each running 500 provisions 50 at a time; wall time from the first start to
//        the last end.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

const SELF = fileURLToPath(import.meta.url);
const CHILD = '--pg-bench-child';
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (ms) => (ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`);
const SIGNALS = { estimatedCost: 1, coldStartLatencyMs: 100, readyLatencyMs: 100, completionWithinBudgetRate: 0.99, available: true };

function pool(launched) {
  return {
    id: 'p',
    capabilities: {},
    signals: SIGNALS,
    runtime: { id: 'instant', launch: async () => ({ id: `remote-${++launched.n}` }), destroy: async () => {} },
    capacity: {
      getCapacity: async () => ({
        status: 'known',
        resources: [{ resource: 'sandboxes', used: launched.n, limit: 1e9, unit: 'sandboxes', headroom: 1e9 - launched.n, required: 1 }],
      }),
    },
  };
}

function routerOf(native, kind, url) {
  const { InMemoryProviderRegistry, SandboxRouter, PostgresMappingStore } = native;
  const launched = { n: 0 };
  if (kind === 'memory') {
    const def = pool(launched);
    delete def.capacity;
    return { router: new SandboxRouter({ registry: new InMemoryProviderRegistry([def]) }), close: async () => {} };
  }
  const store = new PostgresMappingStore({ connection: url, poolSize: 10 });
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([pool(launched)]),
    mappings: store,
    capacity: { providerOrder: ['p'], coordinator: store },
  });
  return { router, close: () => store.close() };
}

const request = () => ({ launch: { labels: { team: 'bench' } } });

async function child(url, n, concurrency) {
  const native = await import('../index.js');
  const { router, close } = routerOf(native, 'pg', url);
  await router.provision(request());
  process.send({ ready: true });
  await new Promise((r) => process.once('message', r));
  const t0 = performance.now();
  let next = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < n) await router.provision(request()).catch(() => failed++);
    }),
  );
  const ms = performance.now() - t0;
  await close();
  process.send({ ms, failed });
}

export async function runPostgresBench(native) {
  const { startPostgres } = await import('../__test__/postgres-server.mjs');
  const pg = await startPostgres();
  let dbs = 0;
  const fresh = async () => {
    const name = `b${++dbs}`;
    await pg.createDatabase(name);
    return pg.url(name);
  };
  try {
    const sequential = {};
    for (const [kind, n] of /** @type {Array<[string, number]>} */ ([['memory', 5_000], ['pg', 1_000]])) {
      const { router, close } = routerOf(native, kind, await fresh());
      for (let i = 0; i < 200; i++) await router.provision(request());
      const t0 = performance.now();
      for (let i = 0; i < n; i++) await router.provision(request());
      sequential[kind] = (performance.now() - t0) / n;
      await close();
    }
    const concurrent = {};
    for (const kind of ['memory', 'pg']) {
      const times = [];
      for (let b = 0; b < 3; b++) {
        const { router, close } = routerOf(native, kind, await fresh());
        await router.provision(request());
        const t0 = performance.now();
        const results = await Promise.allSettled(Array.from({ length: 1000 }, () => router.provision(request())));
        times.push(performance.now() - t0);
        const bad = results.filter((r) => r.status === 'rejected');
        if (bad.length > 0) throw new Error(`${bad.length} of 1,000 ${kind} provisions failed: ${bad[0].reason?.code}`);
        await close();
      }
      concurrent[kind] = median(times);
    }
    const perSec = (ms, n) => Math.round(n / (ms / 1000)).toLocaleString('en-US');
    console.table([
      {
        measure: 'provision, sequential (per provision)',
        'in-memory router': fmt(sequential.memory),
        'PostgreSQL store + coordinator': fmt(sequential.pg),
        'pg / memory': `${(sequential.pg / sequential.memory).toFixed(0)}x`,
      },
      {
        measure: '1,000 concurrent provisions (median of 3)',
        'in-memory router': `${fmt(concurrent.memory)} (${perSec(concurrent.memory, 1000)}/s)`,
        'PostgreSQL store + coordinator': `${fmt(concurrent.pg)} (${perSec(concurrent.pg, 1000)}/s)`,
        'pg / memory': `${(concurrent.pg / concurrent.memory).toFixed(0)}x`,
      },
    ]);
    // (ii) four processes, one pool
    const url = await fresh();
    const N = 500;
    const children = Array.from({ length: 4 }, () => fork(SELF, [CHILD, url, String(N), '50'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }));
    await Promise.all(children.map((c) => new Promise((r) => c.once('message', r))));
    const t0 = performance.now();
    for (const c of children) c.send('go');
    const done = await Promise.all(children.map((c) => new Promise((r) => c.once('message', r))));
    const wall = performance.now() - t0;
    const failed = done.reduce((a, d) => a + d.failed, 0);
    console.table([
      {
        measure: '4 processes × 500 provisions (50 at a time each), one pool',
        wall: fmt(wall),
        'admissions/s (all processes)': perSec(wall, 4 * N - failed),
        failed,
      },
    ]);
    return { sequential, concurrent, admissionsPerSecond: (4 * N - failed) / (wall / 1000) };
  } finally {
    pg.stop();
  }
}

const at = process.argv.indexOf(CHILD);
if (at >= 0) await child(process.argv[at + 1], Number(process.argv[at + 2]), Number(process.argv[at + 3]));
