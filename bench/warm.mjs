// Warm pools (`npm run bench`, section h; alone: `npm run bench -- --only=warm`).
//
//   (i)   Time to sandbox, warm vs cold: a runtime whose launch takes 500 ms (E2B's median
//         create-to-first-command), requests arriving at a steady rate with the pool sized
//         for them (size = rate × launch time × 1.5, refill concurrency the same): claim
//         latency p50 / p99, the cold launches' of the same run, and the hit rate; then a
//         burst of 3× the pool size at once (the misses launch cold, none fails). With the
//         default store, then with PostgresMappingStore as the store and the coordinator
//         (the fleet's inventory; starts the test PostgreSQL).
//   (ii)  What warm tracking adds to a cold provision: an instant runtime, a pool with a
//         started warm pool and requests that cannot take a member (`launch.env`), vs the
//         same router without `warm`; sequential, interleaved rounds, medians.
import { performance } from 'node:perf_hooks';

const LAUNCH_MS = 500;
const RATE_PER_S = 40;
const REQUESTS = 120;
const SIGNALS = { estimatedCost: 1, coldStartLatencyMs: 500, readyLatencyMs: 500, completionWithinBudgetRate: 0.99, available: true };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length - 1) * p))] ?? NaN;
};
const fmt = (ms) => (ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`);

function slowPool(size, launched, extra = {}) {
  return {
    id: 'e2b-like',
    capabilities: {},
    signals: SIGNALS,
    warm: { size, refill: { concurrency: size } },
    runtime: {
      id: 'slow',
      launch: async () => {
        await sleep(LAUNCH_MS);
        return { id: `remote-${++launched.n}` };
      },
      getById: async (id) => ({ id }),
      destroy: async () => {},
    },
    ...extra,
  };
}

/** Steady arrivals, then a burst; latencies split by how each was served. */
async function timeToSandbox(router, size) {
  const warm = [];
  const cold = [];
  await router.warmUp();
  // Each request's kind comes from the warm.claimed event of its own id.
  const pending = [];
  for (let i = 0; i < REQUESTS; i++) {
    const t = performance.now();
    pending.push(
      router.provision({}).then((s) => {
        (CLAIMED.has(s.id) ? warm : cold).push(performance.now() - t);
      }),
    );
    await sleep(1000 / RATE_PER_S);
  }
  await Promise.all(pending);
  const steady = { warm, cold, hitRate: warm.length / REQUESTS }; // cold: the burst's misses join it
  // A burst of 3× the pool size, once it is full again.
  await router.warmUp();
  const t0 = performance.now();
  const burst = await Promise.allSettled(
    Array.from({ length: 3 * size }, () =>
      router.provision({}).then((s) => {
        if (!CLAIMED.has(s.id)) cold.push(performance.now() - t0); // the cold launches of this run
        return s;
      }),
    ),
  );
  const failed = burst.filter((r) => r.status === 'rejected').length;
  const claims = burst.filter((r) => r.status === 'fulfilled' && CLAIMED.has(r.value.id)).length;
  return { steady, burst: { n: 3 * size, failed, claims, cold: 3 * size - claims - failed } };
}

const CLAIMED = new Set();
const observer = (e) => {
  if (e.type === 'warm.claimed') CLAIMED.add(e.sandboxId);
};

function row(label, r) {
  const s = r.steady;
  return [
    label,
    fmt(pct(s.warm, 0.5)),
    fmt(pct(s.warm, 0.99)),
    s.cold.length ? fmt(pct(s.cold, 0.5)) : '—',
    s.cold.length ? `${(pct(s.cold, 0.5) / pct(s.warm, 0.5)).toFixed(0)}x` : '—',
    `${(s.hitRate * 100).toFixed(1)} %`,
    `${r.burst.n}: ${r.burst.claims} warm, ${r.burst.cold} cold, ${r.burst.failed} failed`,
  ];
}

/** (ii): a cold provision with warm tracking vs without, instant runtime. */
export async function trackingOverhead(native) {
  const { InMemoryProviderRegistry, SandboxRouter } = native;
  const instant = () => {
    let n = 0;
    return { id: 'instant', launch: async () => ({ id: String(n++) }), destroy: async () => {} };
  };
  const make = (warm) => new SandboxRouter({ registry: new InMemoryProviderRegistry([{ id: 'p', capabilities: {}, signals: SIGNALS, runtime: instant(), ...(warm ? { warm: { size: 0 } } : {}) }]) });
  const off = make(false);
  const on = make(true);
  await on.warmUp(); // started: every provision takes the claim step (size 0: always a miss)
  const request = { launch: { env: { CI: '1' } } };
  const round = async (r, n) => {
    const t = performance.now();
    for (let i = 0; i < n; i++) {
      const s = await r.provision(request);
      await r.destroy(s.id);
    }
    return (performance.now() - t) / n;
  };
  for (const r of [off, on]) await round(r, 3_000); // warm-up
  const offs = [];
  const ons = [];
  // Interleaved, the order alternating per round: neither side always runs after the other's garbage.
  for (let i = 0; i < 10; i++) {
    if (i % 2 === 0) {
      offs.push(await round(off, 3_000));
      ons.push(await round(on, 3_000));
    } else {
      ons.push(await round(on, 3_000));
      offs.push(await round(off, 3_000));
    }
  }
  const a = pct(offs, 0.5);
  const b = pct(ons, 0.5);
  await on.close();
  return { off: a, on: b, overhead: b / a - 1 };
}

export async function runWarmBench(native) {
  const { InMemoryProviderRegistry, SandboxRouter, PostgresMappingStore } = native;
  const size = Math.ceil((RATE_PER_S * LAUNCH_MS * 1.5) / 1000);
  console.log(`\n(i) time to sandbox, launch ${LAUNCH_MS} ms, ${REQUESTS} requests at ${RATE_PER_S}/s, pool size ${size} (refill concurrency ${size}); then a burst of 3× the size\n`);
  const rows = [];
  const results = {};
  {
    const launched = { n: 0 };
    const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([slowPool(size, launched)]), observer });
    results.memory = await timeToSandbox(router, size);
    await router.close();
    rows.push(row('default store (in memory)', results.memory));
  }
  try {
    const { startPostgres } = await import('../__test__/postgres-server.mjs');
    const pg = await startPostgres();
    try {
      await pg.createDatabase('warm_bench');
      const store = new PostgresMappingStore({ connection: pg.url('warm_bench') });
      const launched = { n: 0 };
      const capacity = {
        getCapacity: async () => ({ status: 'known', resources: [{ resource: 'sandboxes', used: 0, limit: 1e9, unit: 'sandboxes', headroom: 1e9, required: 1 }] }),
      };
      const router = new SandboxRouter({
        registry: new InMemoryProviderRegistry([slowPool(size, launched, { capacity })]),
        mappings: store,
        capacity: { providerOrder: ['e2b-like'], coordinator: store },
        observer,
      });
      results.postgres = await timeToSandbox(router, size);
      await router.close();
      await store.close();
      rows.push(row('PostgresMappingStore (fleet inventory)', results.postgres));
    } finally {
      pg.stop();
    }
  } catch (error) {
    console.log(`(PostgreSQL part skipped: ${error?.code ?? error?.message ?? error})`);
  }
  const headers = ['store', 'claim p50', 'claim p99', 'cold p50', 'cold / warm p50', 'hit rate', 'burst'];
  console.log(`| ${headers.join(' | ')} |\n| ${headers.map(() => '---').join(' | ')} |`);
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  console.log('\n(ii) warm tracking on a cold provision (instant runtime, a started warm pool the request cannot use)\n');
  const t = await trackingOverhead(native);
  console.log(`| without warm | with warm (claim step, miss) | added |\n| --- | --- | --- |\n| ${fmt(t.off)} | ${fmt(t.on)} | ${(t.overhead * 100).toFixed(1)} % |`);
  return { ...results, tracking: t };
}
