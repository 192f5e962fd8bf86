// Warm pools (`npm run bench`, section h; alone: `npm run bench -- --only=warm`).
//
// Every figure goes through an adapter-shaped runtime over a loopback HTTP fake of a
// provider whose create takes 500 ms (E2B's median create-to-first-command), with the
// warm option's defaults only:
//   (i)   steady demand: 5 requests per second for 60 s with `warm: { size: 10 }`: hit
//         rate, claim latency p50 / p99 (provision() to its result), the time from
//         provision() to the first runScript output warm vs cold, the fewest idle members
//         seen and the largest refill pace;
//   (ii)  a demand step 1 → 10 → 1 per second (30 s each, then 1 per second until idle is
//         back) with `warm: { min: 2, max: 30 }`: hit rate over the 10/s step, the most
//         members (idle + launching) ever seen, and how long after the step the idle members
//         are back to ≤ min + 2 (bound: 2 × maxIdleMs);
//   (iii) (i) for 20 s with PostgresMappingStore as the store and the coordinator (the
//         fleet's inventory; starts the test PostgreSQL; skipped when it cannot);
//   (iv)  what warm tracking adds to a cold provision: an instant runtime, a started warm
//         pool the requests cannot use (`launch.env`), vs the same router without `warm`;
//         sequential, interleaved rounds, medians.
import http from 'node:http';
import { performance } from 'node:perf_hooks';

const LAUNCH_MS = 500;
const SIGNALS = { estimatedCost: 1, coldStartLatencyMs: 500, readyLatencyMs: 500, completionWithinBudgetRate: 0.99, available: true };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length - 1) * p))] ?? NaN;
};
const fmt = (ms) => (Number.isNaN(ms) ? '—' : ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`);

/** The loopback provider: create (500 ms), get, run, delete. */
async function provider() {
  const live = new Set();
  let next = 0;
  const server = http.createServer((req, res) => {
    const json = (status, v) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(v === undefined ? '' : JSON.stringify(v));
    };
    const [, , id, action] = req.url.split('/');
    req.resume();
    req.on('end', () => {
      if (req.method === 'POST' && id === undefined) {
        setTimeout(() => {
          const sid = `s-${++next}`;
          live.add(sid);
          json(201, { id: sid });
        }, LAUNCH_MS);
      } else if (req.method === 'GET') json(live.has(id) ? 200 : 404, live.has(id) ? { id } : { error: 'not found' });
      else if (req.method === 'POST' && action === 'run') json(live.has(id) ? 200 : 404, { output: 'ok\n', exitCode: 0 });
      else if (req.method === 'DELETE') {
        live.delete(id);
        json(204);
      } else json(404, {});
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', () => r(null)));
  const base = `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}`;
  return { base, live, close: () => new Promise((r) => (server.closeAllConnections?.(), server.close(r))) };
}

/** A runtime of the port over that provider, as an adapter would be (fetch, JSON). */
function httpRuntime(base) {
  const call = async (method, path, body) => {
    const r = await fetch(base + path, { method, ...(body ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}) });
    const text = await r.text();
    if (r.status === 404) return null;
    if (!r.ok) throw new Error(`provider answered ${r.status}`);
    return text === '' ? null : JSON.parse(text);
  };
  return {
    id: 'http',
    launch: async (o) => ({ id: (await call('POST', '/sandboxes', { labels: o.labels })).id }),
    getById: async (id) => {
      const h = await call('GET', `/sandboxes/${id}`);
      return h === null ? null : { id: h.id };
    },
    runScript: async (h, o) => {
      const r = await call('POST', `/sandboxes/${h.id}/run`, { command: o.command });
      if (r === null) throw new Error('gone');
      return r;
    },
    destroy: async (h) => void (await call('DELETE', `/sandboxes/${h.id}`)),
  };
}

function pool(base, warm, extra = {}) {
  return { id: 'e2b-like', capabilities: {}, signals: SIGNALS, warm, runtime: httpRuntime(base), ...extra };
}

/** One request as a user makes it: provision, run the first command, destroy. */
async function request(router, claimed, out) {
  const t0 = performance.now();
  const s = await router.provision({});
  const t1 = performance.now();
  await router.runScript(s.id, { command: 'echo ok' });
  const t2 = performance.now();
  (claimed.has(s.id) ? out.warm : out.cold).push({ claim: t1 - t0, first: t2 - t0 });
  await router.destroy(s.id);
}

/** Samples warmStatus() every 100 ms until stopped: every sample's idle, launching, pace, target. */
function sampler(router) {
  const samples = [];
  let on = true;
  const done = (async () => {
    while (on) {
      const [s] = await router.warmStatus();
      samples.push({ t: performance.now(), idle: s.idle, launching: s.launching, pace: s.pace, target: s.target });
      await sleep(100);
    }
  })();
  return {
    samples,
    stop: async () => {
      on = false;
      await done;
    },
  };
}

/** Requests at `rate` per second for `seconds`; their latencies split warm / cold. */
async function steady(router, claimed, rate, seconds, out) {
  const pending = [];
  const n = Math.round(rate * seconds);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    pending.push(request(router, claimed, out));
    const due = t0 + ((i + 1) * 1000) / rate;
    await sleep(Math.max(0, due - performance.now()));
  }
  await Promise.all(pending);
}

function summary(out) {
  const total = out.warm.length + out.cold.length;
  const c = (xs, k, p) => pct(xs.map((x) => x[k]), p);
  return {
    n: total,
    hitRate: out.warm.length / total,
    claimP50: c(out.warm, 'claim', 0.5),
    claimP99: c(out.warm, 'claim', 0.99),
    coldP50: c(out.cold, 'claim', 0.5),
    firstWarmP50: c(out.warm, 'first', 0.5),
    firstWarmP99: c(out.warm, 'first', 0.99),
    firstColdP50: c(out.cold, 'first', 0.5),
    firstColdP99: c(out.cold, 'first', 0.99),
  };
}

async function steadyScenario(native, seconds, store) {
  const { InMemoryProviderRegistry, SandboxRouter } = native;
  const p = await provider();
  const claimed = new Set();
  const capacity = { getCapacity: async () => ({ status: 'known', resources: [{ resource: 'sandboxes', used: 0, limit: 1e9, unit: 'sandboxes', headroom: 1e9, required: 1 }] }) };
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([pool(p.base, { size: 10 }, store ? { capacity } : {})]),
    observer: (e) => e.type === 'warm.claimed' && claimed.add(e.sandboxId),
    ...(store ? { mappings: store, capacity: { providerOrder: ['e2b-like'], coordinator: store } } : {}),
  });
  const t = performance.now();
  await router.warmUp();
  const fill = performance.now() - t;
  const s = sampler(router);
  const out = { warm: [], cold: [] };
  await steady(router, claimed, 5, seconds, out);
  await s.stop();
  await router.close();
  await p.close();
  return { ...summary(out), fill, minIdle: Math.min(...s.samples.map((x) => x.idle)), maxPace: Math.max(...s.samples.map((x) => x.pace)) };
}

async function stepScenario(native) {
  const { InMemoryProviderRegistry, SandboxRouter } = native;
  const p = await provider();
  const claimed = new Set();
  const targets = [];
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([pool(p.base, { min: 2, max: 30 })]),
    observer: (e) => {
      if (e.type === 'warm.claimed') claimed.add(e.sandboxId);
      if (e.type === 'warm.target.changed') targets.push(e.target);
    },
  });
  await router.warmUp();
  const s = sampler(router);
  const low = { warm: [], cold: [] };
  await steady(router, claimed, 1, 30, low);
  const high = { warm: [], cold: [] };
  const stepAt = performance.now();
  await steady(router, claimed, 10, 30, high);
  const stepEnd = performance.now();
  // 1 per second until idle members are back to ≤ min + 2 (at most 2 × maxIdleMs).
  const bound = 2 * 600_000;
  const after = { warm: [], cold: [] };
  let back = null;
  const tail = [];
  while (back === null && performance.now() - stepEnd < bound) {
    tail.push(request(router, claimed, after));
    await sleep(1000);
    const [st] = await router.warmStatus();
    if (st.idle <= 4) back = performance.now() - stepEnd;
  }
  await Promise.all(tail);
  await s.stop();
  await router.close();
  await p.close();
  const during = s.samples.filter((x) => x.t >= stepAt && x.t <= stepEnd);
  return {
    low: summary(low),
    high: summary(high),
    after: summary(after),
    maxMembers: Math.max(...s.samples.map((x) => x.idle + x.launching)),
    maxTarget: Math.max(...targets, 0),
    peakPace: Math.max(...during.map((x) => x.pace)),
    backMs: back,
  };
}

/** (iv): a cold provision with warm tracking vs without, instant runtime. */
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

const pc = (x) => `${(x * 100).toFixed(1)} %`;

function steadyRow(label, r) {
  return `| ${label} | ${pc(r.hitRate)} (${r.n}) | ${fmt(r.claimP50)} / ${fmt(r.claimP99)} | ${fmt(r.coldP50)} | ${fmt(r.firstWarmP50)} / ${fmt(r.firstWarmP99)} | ${fmt(r.firstColdP50)} / ${fmt(r.firstColdP99)} | ${r.minIdle} | ${r.maxPace} | ${fmt(r.fill)} |`;
}

export async function runWarmBench(native) {
  console.log(`\n(i) steady demand, 5 requests/s for 60 s, creates of ${LAUNCH_MS} ms over loopback HTTP, warm: { size: 10 } and nothing else\n`);
  const head = '| store | hit rate (requests) | claim p50 / p99 | cold provision p50 | provision → first output, warm p50 / p99 | same, cold p50 / p99 | fewest idle | largest pace | warmUp() |';
  console.log(`${head}\n|${' --- |'.repeat(9)}`);
  const memory = await steadyScenario(native, 60, null);
  console.log(steadyRow('default (in memory)', memory));
  console.log('\n(ii) a demand step 1 → 10 → 1 requests/s (30 s each, then 1/s until idle ≤ min + 2), warm: { min: 2, max: 30 }\n');
  const step = await stepScenario(native);
  console.log('| phase | hit rate (requests) | claim p50 / p99 | provision → first output, warm p50 / cold p50 |\n| --- | --- | --- | --- |');
  for (const [label, r] of /** @type {Array<[string, typeof step.low]>} */ ([['1/s', step.low], ['10/s (the step)', step.high], ['1/s after', step.after]])) {
    console.log(`| ${label} | ${pc(r.hitRate)} (${r.n}) | ${fmt(r.claimP50)} / ${fmt(r.claimP99)} | ${fmt(r.firstWarmP50)} / ${fmt(r.firstColdP50)} |`);
  }
  console.log(
    `\nmost members (idle + launching) seen: ${step.maxMembers} (max 30); highest target: ${step.maxTarget}; largest pace during the step: ${step.peakPace}; idle back to ≤ min + 2: ${step.backMs === null ? 'not within 2 × maxIdleMs' : `${(step.backMs / 1000).toFixed(0)} s after the step`} (bound 2 × maxIdleMs = 1,200 s)`,
  );
  let postgres = null;
  try {
    const { startPostgres } = await import('../__test__/postgres-server.mjs');
    const pg = await startPostgres();
    try {
      await pg.createDatabase('warm_bench');
      const store = new native.PostgresMappingStore({ connection: pg.url('warm_bench') });
      postgres = await steadyScenario(native, 20, store);
      await store.close();
      console.log(`\n(iii) (i) for 20 s with PostgresMappingStore as store and coordinator (the fleet's inventory)\n\n${head}\n|${' --- |'.repeat(9)}`);
      console.log(steadyRow('PostgresMappingStore', postgres));
    } finally {
      pg.stop();
    }
  } catch (error) {
    console.log(`\n(iii) PostgreSQL part skipped: ${error?.code ?? error?.message ?? error}`);
  }
  console.log('\n(iv) warm tracking on a cold provision (instant runtime, a started warm pool the request cannot use)\n');
  const t = await trackingOverhead(native);
  console.log(`| without warm | with warm (claim step, miss) | added |\n| --- | --- | --- |\n| ${fmt(t.off)} | ${fmt(t.on)} | ${pc(t.overhead)} |`);
  return { memory, step, postgres, tracking: t };
}
