// Orphans and restarts (`npm run bench`, section d; alone: `npm run bench -- --only=orphans`).
//
//   (i)  Provision through SqliteMappingStore vs the default in-memory store, with an instant
//        runtime and one pool: sequential time per provision, and 1,000 concurrent provisions
//        (median of 5 batches, a fresh router and a fresh database file per batch). The SQLite
//        router writes an intent before each launch and the mapping after it: two
//        transactions per provision, in WAL mode (`durability: 'normal'`); a `'full'` row
//        (fsync per transaction) shows what power-loss durability costs on this disk.
//   (ii) reconcile over 10,000 stamped sandboxes on a paginated mock (Daytona wire shape: 50
//        cursor pages of 200, served by a child process), 5,000 of them mapped in a SQLite
//        store: a dry run, then a reclaim of the 5,000 orphans through an instant fake
//        adapter; the main event loop's max stall is watched during each.
import { fork } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

const SELF = fileURLToPath(import.meta.url);
const SERVE_FLAG = '--serve-stamped-inventory';
const TOTAL = 10_000;
const PAGE = 200;
const FLEET = 'default';
const sbx = (n) => `sbx_${n.toString(16).padStart(32, '0')}`;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (ms) => (ms < 1 ? `${(ms * 1000).toFixed(2)} µs` : `${ms.toFixed(2)} ms`);

/** A runtime that answers at once (the router's own overhead is what is measured). */
function instantRuntime() {
  let n = 0;
  return {
    id: 'instant',
    launch: async () => ({ id: `remote-${++n}` }),
    destroy: async () => {},
  };
}

const SIGNALS = { estimatedCost: 1, coldStartLatencyMs: 100, readyLatencyMs: 100, completionWithinBudgetRate: 0.99, available: true };

async function provisionBench(native, dir) {
  const { InMemoryProviderRegistry, SandboxRouter, SqliteMappingStore } = native;
  let files = 0;
  const make = (kind) => {
    const registry = new InMemoryProviderRegistry([{ id: 'p', runtime: instantRuntime(), capabilities: {}, signals: SIGNALS }]);
    if (kind === 'memory') return { router: new SandboxRouter({ registry }), close() {} };
    const mappings = new SqliteMappingStore({ path: path.join(dir, `p${files++}.db`), durability: kind === 'sqlite-full' ? 'full' : 'normal' });
    return { router: new SandboxRouter({ registry, mappings }), close: () => mappings.close() };
  };
  const request = () => ({ launch: { labels: { team: 'bench' } } });
  const rows = [];
  const sequential = {};
  for (const [kind, n] of /** @type {Array<[string, number]>} */ ([['memory', 20_000], ['sqlite', 5_000], ['sqlite-full', 200]])) {
    const { router, close } = make(kind);
    for (let i = 0; i < Math.min(500, n); i++) await router.provision(request()); // warm-up
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await router.provision(request());
    sequential[kind] = (performance.now() - t0) / n;
    close();
  }
  const concurrent = {};
  for (const kind of ['memory', 'sqlite']) {
    const times = [];
    for (let b = 0; b < 5; b++) {
      const { router, close } = make(kind);
      await router.provision(request());
      const t0 = performance.now();
      await Promise.all(Array.from({ length: 1000 }, () => router.provision(request())));
      times.push(performance.now() - t0);
      close();
    }
    concurrent[kind] = median(times);
  }
  rows.push({ measure: 'provision, sequential (per provision)', 'in-memory store': fmt(sequential.memory), SqliteMappingStore: fmt(sequential.sqlite), 'sqlite / memory': `${(sequential.sqlite / sequential.memory).toFixed(1)}x` });
  rows.push({ measure: "  with durability: 'full' (fsync per write)", 'in-memory store': '', SqliteMappingStore: fmt(sequential['sqlite-full']), 'sqlite / memory': `${(sequential['sqlite-full'] / sequential.memory).toFixed(0)}x` });
  rows.push({
    measure: '1,000 concurrent provisions (median of 5)',
    'in-memory store': `${fmt(concurrent.memory)} (${Math.round(1000 / (concurrent.memory / 1000)).toLocaleString('en-US')}/s)`,
    SqliteMappingStore: `${fmt(concurrent.sqlite)} (${Math.round(1000 / (concurrent.sqlite / 1000)).toLocaleString('en-US')}/s)`,
    'sqlite / memory': `${(concurrent.sqlite / concurrent.memory).toFixed(1)}x`,
  });
  console.log('\n(i) provision: SqliteMappingStore vs the in-memory store (instant runtime, 1 pool)');
  console.table(rows);
  return { sequential, concurrent };
}

/** Child: serves TOTAL stamped sandboxes (Daytona cursor shape) plus foreign ones, 200 per page. */
function serveInventory() {
  const items = [];
  for (let i = 0; i < TOTAL; i++) {
    items.push({
      id: `d-${i}`, organizationId: 'org', name: `box-${i}`, target: 'us', state: 'started', cpu: 1, memory: 2, disk: 10,
      labels: { team: 'bench', 'agent-relay-sbx-id': sbx(i + 1), 'agent-relay-sbx-fleet': FLEET },
      createdAt: '2026-01-01T00:00:00Z', updatedAt: '2026-01-01T00:00:00Z', sandboxClass: 'container',
    });
  }
  const pages = [];
  for (let p = 0; p < TOTAL / PAGE; p++) pages.push(JSON.stringify({ items: items.slice(p * PAGE, (p + 1) * PAGE), nextCursor: p + 1 < TOTAL / PAGE ? `c${p + 1}` : null }));
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const c = url.searchParams.get('cursor');
    const body = pages[c === null ? 0 : Number(c.slice(1))];
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  server.listen(0, '127.0.0.1', () => process.send({ base: `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (server.address()).port}` }));
}

async function withLoopMonitor(fn) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  await new Promise((r) => setTimeout(r, 20));
  h.reset();
  const t0 = performance.now();
  const value = await fn();
  const ms = performance.now() - t0;
  h.disable();
  return { value, ms, maxStall: h.max / 1e6 };
}

async function reconcileBench(native, dir) {
  const { createSandboxRouter, SqliteMappingStore } = native;
  const child = fork(SELF, [SERVE_FLAG], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] });
  const { base } = await new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`inventory server exited (${code})`)));
  });
  const rows = [];
  try {
    const mappings = new SqliteMappingStore(path.join(dir, 'reconcile.db'));
    for (let i = 0; i < TOTAL / 2; i++) {
      await mappings.put({ id: sbx(i + 1), providerId: 'daytona', providerSandboxId: `d-${i}`, labels: { 'agent-relay-sbx-id': sbx(i + 1), 'agent-relay-sbx-fleet': FLEET }, createdAt: '2026-01-01T00:00:00.000Z', detached: false });
    }
    class Adapter {
      async getById(id) {
        return { id };
      }
      async destroy() {}
    }
    const moduleLoader = async (name) => (name === '@agent-relay/sandbox' ? { DaytonaRuntime: Adapter } : { Daytona: class {} });
    const router = createSandboxRouter({ providers: { daytona: { apiKey: 'bench-key', apiUrl: base } }, mappings, moduleLoader });
    const runs = [];
    for (let r = 0; r < 5; r++) runs.push(await withLoopMonitor(() => router.reconcile()));
    const last = runs[runs.length - 1].value.pools.daytona;
    if (last.counts.orphan !== TOTAL / 2 || last.counts.mapped !== TOTAL / 2) throw new Error(`unexpected counts ${JSON.stringify(last.counts)}`);
    rows.push({ run: `dry run: ${TOTAL.toLocaleString('en-US')} stamped (50 pages), ${(TOTAL / 2).toLocaleString('en-US')} mapped`, 'time (median of 5)': fmt(median(runs.map((x) => x.ms))), 'max event-loop stall (median)': fmt(median(runs.map((x) => x.maxStall))) });
    const reclaim = await withLoopMonitor(() => router.reconcile({ reclaim: true, concurrency: 16 }));
    const destroyed = reclaim.value.outcomes.filter((o) => o.outcome === 'DESTROYED').length;
    if (destroyed !== TOTAL / 2) throw new Error(`destroyed ${destroyed}`);
    rows.push({ run: `reclaim: ${destroyed.toLocaleString('en-US')} orphans destroyed (instant adapter, concurrency 16)`, 'time (median of 5)': `${fmt(reclaim.ms)} (one run)`, 'max event-loop stall (median)': fmt(reclaim.maxStall) });
    mappings.close();
  } finally {
    child.kill();
  }
  console.log(`\n(ii) reconcile over ${TOTAL.toLocaleString('en-US')} stamped sandboxes on a paginated mock (Daytona shape, served by a child process)`);
  console.table(rows);
  return rows;
}

export async function runOrphansBench(native) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sbx-bench-orphans-'));
  try {
    const provision = await provisionBench(native, dir);
    const reconcile = await reconcileBench(native, dir);
    return { provision, reconcile };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv.includes(SERVE_FLAG)) serveInventory();
