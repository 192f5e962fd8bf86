// Warm pools against the real published E2B adapter (docs/warm-pools.md#liveness, issue 35):
// `@agent-relay/sandbox`'s E2BSandboxRuntime (whose getById answers from its own cache of
// the sandboxes it launched) and the real `e2b` SDK, against a loopback copy of E2B's API
// from which members are deleted behind the router's back. The router's liveness check
// must reach the provider: through the pool's native finder (the listing reconcile uses).
//
// Opt-in: neither package is a dependency of this repository. Set
// SANDBOX_ROUTER_E2B_PROOF to a folder where both are installed
// (node_modules/@agent-relay/sandbox, built, and node_modules/e2b; docs/performance.md,
// "Warm pools", says how the figures were made). Without it this file skips.
import test from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createSandboxRouter, createProviderRuntime, SandboxRouter, InMemoryProviderRegistry } from '../index.mjs';

const DIR = process.env.SANDBOX_ROUTER_E2B_PROOF;
const ADAPTER = DIR === undefined ? '' : join(DIR, 'node_modules', '@agent-relay', 'sandbox');
const skip =
  DIR === undefined
    ? 'opt-in: set SANDBOX_ROUTER_E2B_PROOF to a folder with @agent-relay/sandbox (built) and e2b installed'
    : !existsSync(join(ADAPTER, 'package.json'))
      ? `no @agent-relay/sandbox under ${DIR}`
      : false;

const KEY = `e2b_${'0123456789abcdef'.repeat(2)}`; // the SDK checks the format: e2b_ and hex
const TRIALS = 20;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Loads what the factory asks for from the proof folder (the adapter is ESM-only). */
function loader() {
  const require = createRequire(join(DIR, 'package.json'));
  return async (name) => {
    if (name === '@agent-relay/sandbox') {
      const pkg = JSON.parse(readFileSync(join(ADAPTER, 'package.json'), 'utf8'));
      const entry = pkg.exports?.['.']?.import ?? pkg.main;
      return import(pathToFileURL(join(ADAPTER, entry)).href);
    }
    return import(pathToFileURL(require.resolve(name)).href);
  };
}

/** A loopback copy of E2B's control-plane API: create, connect, kill, list (with metadata filters). */
async function fakeE2b(createMs) {
  const boxes = new Map();
  const creates = [];
  let n = 0;
  const body = (req) =>
    new Promise((resolve) => {
      let text = '';
      req.on('data', (c) => (text += c));
      req.on('end', () => resolve(text));
    });
  const sandbox = (id) => ({ sandboxID: id, templateID: boxes.get(id).template, clientID: 'c', envdVersion: '0.2.4', envdAccessToken: 'token', domain: null });
  const server = http.createServer(async (req, res) => {
    const text = await body(req);
    const send = (status, v) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(v === undefined ? '' : JSON.stringify(v));
    };
    if (req.headers['x-api-key'] !== KEY) return send(401, { code: 401, message: 'unauthorized' });
    const u = new URL(req.url, 'http://x');
    // SDK releases differ only in the path's version prefix: /sandboxes, /v2/sandboxes.
    const parts = u.pathname.split('/').filter(Boolean);
    if (parts[0] === 'v2') parts.shift();
    if (req.method === 'POST' && parts.length === 1 && parts[0] === 'sandboxes') {
      const b = JSON.parse(text);
      creates.push(b);
      await sleep(createMs);
      const id = `i${(++n).toString(36)}sbx`;
      boxes.set(id, { template: b.templateID, metadata: b.metadata ?? {}, startedAt: new Date().toISOString(), timeout: b.timeout });
      return send(201, sandbox(id));
    }
    if (req.method === 'POST' && parts[0] === 'sandboxes' && parts[2] === 'connect') {
      return boxes.has(parts[1]) ? send(200, sandbox(parts[1])) : send(404, { code: 404, message: `sandbox ${parts[1]} not found` });
    }
    if (req.method === 'DELETE' && parts[0] === 'sandboxes') return boxes.delete(parts[1]) ? send(204) : send(404, { code: 404, message: 'not found' });
    if (req.method === 'GET' && parts.length === 1 && parts[0] === 'sandboxes') {
      const want = new URLSearchParams(u.searchParams.get('metadata') ?? '');
      const items = [...boxes]
        .filter(([, b]) => [...want].every(([k, v]) => b.metadata[k] === v))
        .map(([id, b]) => ({ ...sandbox(id), startedAt: b.startedAt, endAt: new Date(Date.parse(b.startedAt) + (b.timeout ?? 0) * 1000).toISOString(), state: 'running', cpuCount: 2, memoryMB: 512, diskSizeMB: 1024, metadata: b.metadata }));
      return send(200, items);
    }
    return send(404, { code: 404, message: 'no route' });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${server.address().port}`;
  return { base, boxes, creates, close: () => new Promise((r) => (server.closeAllConnections?.(), server.close(r))) };
}

/**
 * `TRIALS` times: one idle member of `pool` deleted at the provider, a wait of up to three
 * check intervals for the router to drop it, then every idle member claimed: how many of the
 * deleted members were handed out, and how long each drop took.
 */
async function trials(router, api, pool) {
  let handedOut = 0;
  const dropMs = [];
  for (let trial = 0; trial < TRIALS; trial++) {
    const [deleted] = [...api.boxes].find(([, b]) => b.metadata['agent-relay-sbx-warm'] === pool) ?? [];
    assert.ok(deleted, `trial ${trial}: an idle member at the provider`);
    const lostBefore = (await router.warmStatus())[0].lost;
    api.boxes.delete(deleted); // killed behind the router's back
    const t0 = Date.now();
    while ((await router.warmStatus())[0].lost === lostBefore && Date.now() - t0 < 900) await sleep(20);
    if ((await router.warmStatus())[0].lost > lostBefore) dropMs.push(Date.now() - t0);
    const got = [];
    for (let i = 0; i < 3; i++) got.push(await router.provision({}).catch((e) => e));
    for (const s of got) {
      if (s instanceof Error) continue;
      if ((await router.getSandbox(s.id)).providerSandboxId === deleted) handedOut++;
      await router.destroy(s.id).catch(() => {});
    }
    await router.warmUp();
  }
  return { handedOut, dropMs };
}

const SIGNALS = { estimatedCost: 1, coldStartLatencyMs: 50, readyLatencyMs: 50, completionWithinBudgetRate: 0.99, available: true };

test('E2B: a member deleted at the provider is dropped by the listing and never claimed (must-fire) / checked by the adapter’s cached getById, it is handed out (must-not-fire)', { skip }, async () => {
  const api = await fakeE2b(50);
  process.env.E2B_API_URL = api.base; // the SDK's API endpoint
  const moduleLoader = loader();
  const router = createSandboxRouter({
    providers: { e2b: { apiKey: KEY, template: 'base', warm: { size: 3, checkIntervalMs: 300 }, capacity: { baseUrl: api.base, limits: { sandboxes: 100 } } } },
    moduleLoader,
  });
  // The same adapter in a registry of its own: no native finder, so getById checks it.
  const { E2BSandboxRuntime } = await moduleLoader('@agent-relay/sandbox');
  const raw = new SandboxRouter({
    registry: new InMemoryProviderRegistry([
      { id: 'raw', runtime: new E2BSandboxRuntime({ apiKey: KEY, template: 'base' }), capabilities: { timeout: { maxSandboxLifetimeMs: 120_000 } }, signals: SIGNALS, warm: { size: 3, checkIntervalMs: 300 } },
    ]),
  });
  try {
    assert.equal((await router.warmUp()).ready, true);
    // Lifetimes: the adapter created each member with its own 120 s timeout, the lifetime
    // the factory pool declares (so members expire first, at 90 s idle).
    assert.deepEqual([...new Set(api.creates.map((c) => c.timeout))], [120]);
    assert.deepEqual(router.route({ requires: { timeout: { requiredSandboxLifetimeMs: 100_000 } } }), ['e2b']);
    assert.throws(() => router.route({ requires: { timeout: { requiredSandboxLifetimeMs: 121_000 } } }), (e) => e.code === 'NO_ELIGIBLE_PROVIDER');

    // The adapter's getById answers from its cache: a check through it keeps a dead member.
    const probe = createProviderRuntime('e2b', { apiKey: KEY, template: 'base' }, { moduleLoader });
    const h = await probe.launch({ labels: { probe: '1' } });
    api.boxes.delete(h.id);
    assert.notEqual(await probe.getById(h.id, { owned: true }), null, 'getById answered for a deleted sandbox');

    const listed = await trials(router, api, 'e2b');
    const status = (await router.warmStatus())[0];
    await router.close();
    assert.equal((await raw.warmUp()).ready, true);
    const cached = await trials(raw, api, 'raw');
    await raw.close();
    console.log(
      `E2B proof: ${TRIALS} members deleted at the provider. Native finder: ${listed.handedOut} handed out, ${listed.dropMs.length} dropped after ${Math.min(...listed.dropMs)}-${Math.max(...listed.dropMs)} ms (checkIntervalMs 300; claims ${status.claims}, lost ${status.lost}). getById through the adapter: ${cached.handedOut} handed out, ${cached.dropMs.length} dropped.`,
    );
    assert.equal(listed.handedOut, 0, 'must-fire: a deleted member is never claimed');
    assert.equal(listed.dropMs.length, TRIALS, 'each dropped within three check intervals');
    assert.ok(cached.handedOut > 0, 'must-not-fire: the cached getById keeps dead members');
  } finally {
    await router.close();
    await raw.close();
    await api.close();
  }
});
