// Rate limits against a provider account (`npm run bench -- --only=ratelimits`, section n;
// issue 33). The account is a loopback HTTP server with a create-rate limit; above it, it
// answers 429 with `Retry-After`, as E2B and Daytona do. Routers reach it through an
// adapter-shaped runtime (fetch; the SDK-style error carries `status` and `headers`), and a
// classifier that reads `Retry-After`.
//
//   (i)   E2B Hobby's shape (one create a second): a burst of 30 provisions on one router,
//         `rateLimit: { launchesPerSecond: 1 }` and a queue: the account's 429s, how many were
//         served, the total time, the queue wait p50 / p99. Twice: with the adapter's HTTP
//         client cold (the burst's first create is the process's first fetch, which Node sets up
//         for ~50 ms, so it reaches the account late and the second looks early), and warm (one
//         request made before, as a long-running router's client has).
//   (ii)  four router processes on the tests' PostgreSQL (`capacity.coordinator`), one pool
//         declared at `launchesPerSecond: 5`, an account that allows 5 + 1 creates in any one
//         second: 40 provisions at once across the four: the busiest second at the account,
//         its 429s, the time to serve them all.
//   (iii) fairness across the same four processes (`fairBy: { label: 'tenant' }`): tenant
//         `burst` sends 100 provisions at once (25 to each process) while tenant `steady`
//         sends one a second, to each process in turn: the steady tenant's wait p50 / p99.
import { fork } from 'node:child_process';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';

const SELF = fileURLToPath(import.meta.url);
const CHILD = '--pacing-child';

/** The targets (issue 33). */
export const RATE_TARGETS = { hobbyTotalMs: 32_000, steadyP99Ms: 2_000 };

const q = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length - 1) * p))] ?? NaN;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * An account that allows `perSecond` creates in any one second (a sliding window over the
 * creates it accepted); above it, 429 with `Retry-After: 1`. Records each create's arrival.
 */
async function account(perSecond) {
  const creates = [];
  const accepted = [];
  const server = createServer((req, res) => {
    const at = Date.now();
    const json = (/** @type {number} */ status, /** @type {unknown} */ v, headers = {}) => res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(v));
    if (req.url === '/capacity') {
      return json(200, { status: 'known', resources: [{ resource: 'sandboxes', used: 0, limit: 1e6, unit: 'sandboxes', headroom: 1e6, required: 1 }] });
    }
    if (req.method === 'POST' && req.url === '/sandboxes') {
      while (accepted.length > 0 && at - accepted[0] >= 1_000) accepted.shift();
      if (accepted.length >= perSecond) {
        creates.push({ at, status: 429 });
        return json(429, { message: 'rate limit exceeded' }, { 'retry-after': '1' });
      }
      accepted.push(at);
      creates.push({ at, status: 201 });
      return json(201, { sandboxID: `sbx-${creates.length}` });
    }
    res.writeHead(404).end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', () => r(undefined)));
  const base = `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}`;
  return { base, creates, close: () => new Promise((r) => server.close(r)) };
}

/** The e2b-like pool of a router against the account at `base`, declared at `rateLimit`. */
function pool(base, rateLimit) {
  async function call(path, method = 'POST') {
    const r = await fetch(`${base}${path}`, { method });
    const body = await r.json();
    if (r.status === 429) throw Object.assign(new Error(body.message), { status: 429, headers: { 'retry-after': r.headers.get('retry-after') } });
    return body;
  }
  return {
    id: 'e2b',
    capabilities: {},
    rateLimit,
    signals: { estimatedCost: 0.01, coldStartLatencyMs: 500, readyLatencyMs: 900, completionWithinBudgetRate: 0.99, available: true },
    capacity: { getCapacity: () => call('/capacity', 'GET') },
    runtime: { id: 'e2b-like', launch: async () => ({ id: (await call('/sandboxes')).sandboxID }), destroy: async () => {} },
  };
}

const classifyProviderFailure = (error) =>
  error?.status === 429 ? { code: 'PROVIDER_RATE_LIMITED', retryable: true, retryAfterMs: Number(error.headers['retry-after']) * 1000 } : null;

/** The most creates (accepted or not) that arrived within any one second. */
function busiestSecond(creates) {
  const at = creates.map((c) => c.at).sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < at.length; i++) {
    while (at[i] - at[j] >= 1_000) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/** (i) One router, E2B Hobby's shape; `warm`: its client made a request before the burst. */
async function hobby(warm) {
  const { SandboxRouter, InMemoryProviderRegistry } = await import('../index.js');
  const acct = await account(1);
  if (warm) await fetch(`${acct.base}/capacity`).then((r) => r.json());
  const waited = [];
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([pool(acct.base, { launchesPerSecond: 1 })]),
    classifyProviderFailure,
    queue: { maxWaitMs: 60_000 },
    health: false,
    observer: (e) => e.type === 'queue.admitted' && waited.push(e.waitedMs),
  });
  try {
    const t0 = Date.now();
    const results = await Promise.allSettled(Array.from({ length: 30 }, () => router.provision({})));
    const totalMs = Date.now() - t0;
    const served = results.filter((r) => r.status === 'fulfilled').length;
    // A provision that never waited waited 0 ms.
    while (waited.length < served) waited.push(0);
    return { served, refused: acct.creates.filter((c) => c.status === 429).length, totalMs, waitP50: q(waited, 0.5), waitP99: q(waited, 0.99) };
  } finally {
    router.close?.();
    await acct.close();
  }
}

/** A child process: one router on the fleet's PostgreSQL, answering bursts over IPC. */
async function child(url, base) {
  const { SandboxRouter, InMemoryProviderRegistry, PostgresMappingStore } = await import('../index.js');
  const store = new PostgresMappingStore({ connection: url, leaseMs: 2_000 });
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([pool(base, { launchesPerSecond: 5 })]),
    capacity: { providerOrder: ['e2b'], coordinator: store },
    classifyProviderFailure,
    queue: { maxWaitMs: 120_000, maxDepth: 10_000, fairBy: { label: 'tenant' } },
    health: false,
  });
  await store.open();
  process.on('message', async (/** @type {any} */ m) => {
    if (m.cmd === 'exit') {
      await store.close();
      process.exit(0);
    }
    const request = { launch: { labels: { tenant: m.tenant } } };
    const one = async () => {
      const t0 = Date.now();
      try {
        await router.provision(request);
        return { ok: true, ms: Date.now() - t0 };
      } catch (e) {
        return { ok: false, code: e?.code, ms: Date.now() - t0 };
      }
    };
    const answer = await Promise.all(Array.from({ length: m.n }, one));
    process.send({ seq: m.seq, answer });
  });
  process.send({ ready: true });
}

function startChild(url, base) {
  const c = fork(SELF, [CHILD, url, base], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let seq = 0;
  const waiting = new Map();
  const ask = (msg) =>
    new Promise((resolve) => {
      const s = ++seq;
      waiting.set(s, resolve);
      c.send({ ...msg, seq: s });
    });
  return new Promise((resolve, reject) => {
    c.on('message', (/** @type {any} */ m) => (m.ready ? resolve({ c, ask }) : waiting.get(m.seq)?.(m.answer)));
    c.on('error', reject);
  });
}

/** (ii) and (iii): four processes on one PostgreSQL. */
async function fleet() {
  const { startPostgres } = await import('../__test__/postgres-server.mjs');
  const pg = await startPostgres();
  const acct = await account(6);
  const children = [];
  try {
    await pg.createDatabase('pacing_bench');
    for (let i = 0; i < 4; i++) children.push(await startChild(pg.url('pacing_bench'), acct.base));
    const t0 = Date.now();
    const burst = (await Promise.all(children.map((c) => c.ask({ n: 10, tenant: 'acme' })))).flat();
    const shared = {
      served: burst.filter((a) => a.ok).length,
      totalMs: Date.now() - t0,
      busiest: busiestSecond(acct.creates),
      refused: acct.creates.filter((c) => c.status === 429).length,
    };
    await sleep(1_500);
    acct.creates.length = 0;
    // (iii) The burst: 25 at once to each process; the steady tenant: one a second, in turn.
    const t1 = Date.now();
    const bursting = Promise.all(children.map((c) => c.ask({ n: 25, tenant: 'burst' })));
    const steady = [];
    for (let i = 0; i < 20; i++) {
      steady.push(children[i % 4].ask({ n: 1, tenant: 'steady' }));
      await sleep(1_000);
    }
    const steadyAnswers = (await Promise.all(steady)).flat();
    const burstAnswers = (await bursting).flat();
    const waits = steadyAnswers.map((a) => a.ms);
    const fairness = {
      steadyServed: steadyAnswers.filter((a) => a.ok).length,
      burstServed: burstAnswers.filter((a) => a.ok).length,
      steadyP50: q(waits, 0.5),
      steadyP99: q(waits, 0.99),
      burstMs: Math.max(...burstAnswers.map((a) => a.ms)),
      busiest: busiestSecond(acct.creates),
      refused: acct.creates.filter((c) => c.status === 429).length,
      totalMs: Date.now() - t1,
    };
    return { shared, fairness };
  } finally {
    for (const c of children) c.c.kill('SIGKILL');
    await acct.close();
    pg.stop();
  }
}

/** Runs (i) to (iii) and prints their tables; answers the figures for the summary. */
export async function runRateLimitBench() {
  console.log('\n(i) E2B Hobby\'s shape (1 create/s, 429 + Retry-After above): 30 provisions at once, `rateLimit: { launchesPerSecond: 1 }`, a queue');
  const hobbies = [];
  for (const warm of [false, true]) {
    const h = await hobby(warm);
    hobbies.push(h);
    console.log(`${warm ? 'warm client' : 'cold client'}: served ${h.served} of 30, ${h.refused} 429s, ${(h.totalMs / 1000).toFixed(1)} s in all (target ≤ 32 s), queue wait p50 ${(h.waitP50 / 1000).toFixed(1)} s, p99 ${(h.waitP99 / 1000).toFixed(1)} s`);
  }
  const [cold, h] = hobbies;
  const f = await fleet();
  console.log('\n(ii) 4 processes, one PostgreSQL, `launchesPerSecond: 5` (burst 1), an account allowing 5 + 1 creates a second: 40 provisions at once');
  console.log(`served ${f.shared.served} of 40 in ${(f.shared.totalMs / 1000).toFixed(1)} s; busiest second at the account: ${f.shared.busiest} creates (bar ≤ 6); ${f.shared.refused} 429s`);
  console.log('\n(iii) fairness across the 4 processes: tenant `burst` 100 at once, tenant `steady` 1 a second for 20 s');
  console.log(`steady: ${f.fairness.steadyServed} of 20 served, wait p50 ${f.fairness.steadyP50} ms, p99 ${f.fairness.steadyP99} ms (bar < 2,000 ms); burst: ${f.fairness.burstServed} of 100 served, the last after ${(f.fairness.burstMs / 1000).toFixed(1)} s; busiest second ${f.fairness.busiest}, ${f.fairness.refused} 429s`);
  return { cold, hobby: h, fleet: f };
}

if (process.argv[2] === CHILD) await child(process.argv[3], process.argv[4]);
