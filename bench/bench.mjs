// Native router vs plain JavaScript, in one run (`npm run bench`). The sections, in the
// order they run (letters are the order they were added):
//
//   a. Routing decision over 6 / 100 / 1,000 / 10,000 pools: the registry-backed router
//      (router.route vs plain routePrepared, limit 3; on one reused request object, and on
//      a new request per call as most callers make them) and the per-call path
//      (routeProviders vs plain routePlain). `--only=routing` runs it alone.
//   i. Explanations over 6 / 1,000 / 10,000 pools: router.explain vs the plain
//      explainPrepared, routeProviders vs the plain explainPlain (both build the same full
//      explanation, checked equal before timing), and RSS over 10,000 explanations.
//   b. Provision overhead with an instant in-memory runtime, 6 pools: sequential time per
//      provision (batches of every side interleaved, medians), and 10,000 concurrent
//      provisions (throughput, peak RSS), each side in its own child process.
//   c. Capacity reads (bench/capacity.mjs).
//   d. Orphans and restarts (bench/orphans.mjs): provision through SqliteMappingStore vs
//      the in-memory store, and reconcile over 10,000 stamped sandboxes.
//   e. Live health: provision overhead with tracking on vs off (same run, interleaved),
//      and the chaos scenario (the best of three pools hangs; time to route around it and
//      to return to it once it recovers). `--only=health` runs this section alone.
//   j. Budgets: provision with two budget rules (a calendar-day cost limit in Berlin and a
//      sliding launches-and-concurrent limit, keyed by the `team` label) vs none, same run,
//      interleaved, and the minor page faults each adds. `--only=budgets` runs it alone.
//   f. Running many routers (bench/postgres.mjs): provision with PostgresMappingStore and
//      the capacity coordinator vs the in-memory router, and admissions per second across
//      4 processes (starts the test PostgreSQL). `--only=postgres` runs it alone.
//   h. Warm pools (bench/warm.mjs): 500 ms creates over loopback HTTP, defaults only: a
//      steady 5 req/s with size 10 (hit rate, claim latency, provision → first output warm
//      vs cold), a demand step with { min: 2, max: 30 }, PostgreSQL's inventory; what warm
//      tracking adds to a cold provision. `--only=warm` runs it alone.
//   g. Telemetry (bench/telemetry.mjs): provision with telemetry on (the real OpenTelemetry
//      SDKs, in-memory exporters) vs off, interleaved. `--only=telemetry` runs it alone.
//   k. The soak (bench/soak.mjs): RSS growth of a long-running multi-tenant router per
//      100,000 provisions, new and repeating tenants, a sliding and a daily rule, a day's
//      roll-over on the router clock. `--only=soak` runs it alone.
//   l. The fleet (bench/fleet.mjs): 1, 2 and 4 processes on the tests' PostgreSQL,
//      provisions/s, p50 / p99, transactions per provision + destroy from pg_stat_database,
//      a reference loop of one-statement transactions, a 60 s run on one day's window.
//      `--only=fleet` runs it alone.
//   m. Pacing: provision with every pool declaring a rate limit it never reaches vs none,
//      same run, interleaved (issue 33: on ≤ 3 %). `--only=pacing` runs it alone.
//   o. Decision records: provision with records on (the in-memory ring) vs off, same run,
//      interleaved (issue 32: on ≤ 5 %), and one record's size. `--only=decisions` alone.
//   n. Rate limits against an account (bench/rate-limits.mjs): E2B Hobby's shape, a burst
//      of 30 through the queue; 4 processes on the tests' PostgreSQL sharing one limit; a
//      bursting and a steady tenant across them. `--only=ratelimits` runs it alone.
//
// Every ratio printed is computed from figures measured in this run. Ratio > 1 means
// the native side is faster.

import { Bench } from 'tinybench';
import { spawnSync } from 'node:child_process';
import { randomFillSync, randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import os from 'node:os';
import { readFileSync } from 'node:fs';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createRequire } from 'node:module';
import assert from 'node:assert/strict';
import { prepareRegistry, routePrepared, routePlain, planPrepared, explainPrepared, explainPlain } from './plain-router.mjs';
import { makeDefinitions, REQUEST, newRequest } from './pools.mjs';

const SELF = fileURLToPath(import.meta.url);

// A full GC before each task phase, so one task's garbage is not collected on another's clock.
v8.setFlagsFromString('--expose-gc');
const fullGc = globalThis.gc ?? runInNewContext('gc');
const setup = () => fullGc();
const SIZES = [6, 100, 1_000, 10_000];
/**
 * The performance floors (issue 22; docs/performance.md): decisions (route, explain,
 * routeProviders) at least 0.7x the plain-JS router's speed at 6 pools and 3x at 1,000 and
 * 10,000; provision at most 1.5x the plain floor's time sequentially and at least 0.6x its
 * throughput with 10,000 in flight; health tracking at most 5 % added.
 */
const FLOORS = { decisionSmall: 0.7, decisionLarge: 3, sequential: 1.5, concurrent: 0.6, health: 0.05, budgets: 0.1, pacing: 0.03, decisions: 0.05 };
const decisionFloor = (n) => (n === 6 ? FLOORS.decisionSmall : n >= 1000 ? FLOORS.decisionLarge : null);
const CONCURRENT = 10_000;
const SANDBOX_ID_LABEL = 'agent-relay-sbx-id';

const instantRuntime = () => {
  let n = 0;
  return { launch: async () => ({ id: String(n++) }), destroy: async () => {} };
};

// ---------------------------------------------------------------------------------------
// Formatting.

function table(headers, rows, align) {
  const cells = [headers, ...rows].map((r) => r.map(String));
  const widths = headers.map((_, c) => Math.max(...cells.map((r) => r[c].length)));
  const line = (r) => '| ' + r.map((x, c) => ((align?.[c] ?? 'r') === 'l' ? x.padEnd(widths[c]) : x.padStart(widths[c]))).join(' | ') + ' |';
  const sep = '|' + widths.map((w, c) => ((align?.[c] ?? 'r') === 'l' ? ':' + '-'.repeat(w + 1) : '-'.repeat(w + 1) + ':')).join('|') + '|';
  console.log([line(cells[0]), sep, ...cells.slice(1).map(line)].join('\n'));
}
const fmtInt = (x) => Math.round(x).toLocaleString('en-US');
function fmtTime(ms) {
  if (ms < 1e-3) return `${(ms * 1e6).toFixed(0)} ns`;
  if (ms < 1) return `${(ms * 1e3).toFixed(2)} µs`;
  return `${ms.toFixed(2)} ms`;
}
const fmtRatio = (x) => `${x.toFixed(2)}x`;

/** Per-operation mean (ms) and ops/s of a task whose every sample ran `batch` operations. */
function perOp(task, batch) {
  const r = task.result;
  if (!r || r.state !== 'completed') throw new Error(`task ${task.name} did not complete: ${r?.state} ${r?.error?.stack ?? ''}`);
  const mean = r.latency.mean / batch;
  return { mean, hz: 1000 / mean, rme: r.latency.rme };
}

// ---------------------------------------------------------------------------------------
// a. Routing decision.

async function routingSection(native) {
  const { SandboxRouter, InMemoryProviderRegistry, routeProviders } = native;
  console.log('\n## a. Routing decision (time per decision; ratio = plain time / native time, > 1 means native faster)\n');
  const rows = [];
  const ratios = [];
  for (const n of SIZES) {
    const defs = makeDefinitions(n, 0x5eed + n);
    const runtime = instantRuntime();
    const registry = new InMemoryProviderRegistry(defs.map((d) => ({ ...d, runtime })));
    const router = new SandboxRouter({ registry });
    const plainRegistry = prepareRegistry(defs);

    // Same answers before timing anything.
    const nativeFull = routeProviders(REQUEST, defs);
    const plainFull = routePlain(REQUEST, defs);
    assert.deepEqual(plainFull.eligible, nativeFull.eligible.map((e) => e.providerId), `routeProviders vs routePlain at ${n} pools`);
    assert.deepEqual(routePrepared(plainRegistry, REQUEST, { limit: 3 }), router.route(REQUEST), `router.route vs routePrepared at ${n} pools`);
    const eligible = plainFull.eligible.length;

    // Calls per sample, so one sample lasts well above the timer's resolution.
    const fast = n <= 6 ? 500 : n <= 100 ? 50 : n <= 1000 ? 5 : 1;
    const slow = n <= 6 ? 100 : n <= 100 ? 5 : 1;
    const bench = new Bench({ time: n >= 10_000 ? 2000 : 1000, warmupTime: 250, iterations: 10, throws: true, setup });
    let sink = 0;
    bench
      .add('native router.route', () => {
        for (let i = 0; i < fast; i++) sink += router.route(REQUEST).length;
      })
      .add('plain routePrepared', () => {
        for (let i = 0; i < fast; i++) sink += routePrepared(plainRegistry, REQUEST, { limit: 3 }).length;
      })
      .add('native routeProviders', () => {
        for (let i = 0; i < slow; i++) sink += routeProviders(REQUEST, defs).eligible.length;
      })
      .add('plain routePlain', () => {
        for (let i = 0; i < slow; i++) sink += routePlain(REQUEST, defs).eligible.length;
      })
      .add('native router.route, a new request per call', () => {
        for (let i = 0; i < fast; i++) sink += router.route(newRequest()).length;
      })
      .add('plain routePrepared, a new request per call', () => {
        for (let i = 0; i < fast; i++) sink += routePrepared(plainRegistry, newRequest(), { limit: 3 }).length;
      });
    await bench.run();
    if (sink === 0) throw new Error('nothing routed');
    const [nr, pr, np, pp, nf, pf] = bench.tasks;
    const r = { nr: perOp(nr, fast), pr: perOp(pr, fast), np: perOp(np, slow), pp: perOp(pp, slow), nf: perOp(nf, fast), pf: perOp(pf, fast) };
    const label = `${fmtInt(n)} (${fmtInt(eligible)} eligible)`;
    rows.push([label, 'registry-backed', 'native router.route', fmtInt(r.nr.hz), fmtTime(r.nr.mean), `±${r.nr.rme.toFixed(1)}%`]);
    rows.push([label, 'registry-backed', 'plain routePrepared (limit 3)', fmtInt(r.pr.hz), fmtTime(r.pr.mean), `±${r.pr.rme.toFixed(1)}%`]);
    rows.push([label, 'per call', 'native routeProviders', fmtInt(r.np.hz), fmtTime(r.np.mean), `±${r.np.rme.toFixed(1)}%`]);
    rows.push([label, 'per call', 'plain routePlain', fmtInt(r.pp.hz), fmtTime(r.pp.mean), `±${r.pp.rme.toFixed(1)}%`]);
    rows.push([label, 'registry-backed', 'native router.route, new request', fmtInt(r.nf.hz), fmtTime(r.nf.mean), `±${r.nf.rme.toFixed(1)}%`]);
    rows.push([label, 'registry-backed', 'plain routePrepared, new request', fmtInt(r.pf.hz), fmtTime(r.pf.mean), `±${r.pf.rme.toFixed(1)}%`]);
    ratios.push({ n, registry: r.pr.mean / r.nr.mean, perCall: r.pp.mean / r.np.mean, fresh: r.pf.mean / r.nf.mean });
  }
  table(['pools', 'path', 'implementation', 'decisions/s', 'mean', 'rme'], rows, ['l', 'l', 'l']);
  console.log(
    '\nrouter.route and routePrepared return the same ids (checked above, before timing). routeProviders returns a full\n' +
      'explanation (scores, breakdowns, every rejection reason); routePlain returns the eligible and rejected ids.\n',
  );
  const rrows = ratios.map(({ n, registry, perCall, fresh }) => {
    const target = decisionFloor(n);
    const verdict = target === null ? '—' : `≥ ${target}x: ${registry >= target ? 'met' : 'NOT met'}`;
    return [fmtInt(n), fmtRatio(registry), verdict, fmtRatio(fresh), fmtRatio(perCall)];
  });
  // The floor is defined on one request object reused (the first column); a new request per call is shown beside it.
  table(['pools', 'registry-backed speedup (plain time / native time)', 'target', 'the same, a new request per call (no target)', 'per-call speedup (plain time / native time)'], rrows);
  return ratios;
}

// ---------------------------------------------------------------------------------------
// d. Explanations.

const EXPLAIN_SIZES = [6, 1_000, 10_000];

/** Median time per operation (ms) of a task whose every sample ran `batch` operations. */
function medianPerOp(task, batch) {
  const r = task.result;
  if (!r || r.state !== 'completed') throw new Error(`task ${task.name} did not complete: ${r?.state} ${r?.error?.stack ?? ''}`);
  return { median: r.latency.p50 / batch, rme: r.latency.rme };
}

async function explainSection(native) {
  const { SandboxRouter, InMemoryProviderRegistry, routeProviders } = native;
  console.log('\n## i. Explanations (median time per full explanation; ratio = plain time / native time, > 1 means native faster)\n');
  const rows = [];
  const ratios = [];
  for (const n of EXPLAIN_SIZES) {
    const defs = makeDefinitions(n, 0x5eed + n);
    const runtime = instantRuntime();
    const router = new SandboxRouter({ registry: new InMemoryProviderRegistry(defs.map((d) => ({ ...d, runtime }))) });
    const plainRegistry = prepareRegistry(defs);
    // The same documented object on both sides, field for field, before timing anything.
    const nativeExplained = await router.explain(REQUEST);
    assert.deepStrictEqual(nativeExplained, explainPrepared(plainRegistry, REQUEST), `explain vs explainPrepared at ${n} pools`);
    assert.deepStrictEqual(routeProviders(REQUEST, defs), explainPlain(REQUEST, defs), `routeProviders vs explainPlain at ${n} pools`);
    const batch = n <= 6 ? 200 : 1;
    const bench = new Bench({ time: n >= 10_000 ? 3000 : 1500, warmupTime: 300, iterations: 10, throws: true, setup });
    let sink = 0;
    // Both sides are awaited: router.explain is async (readiness and resolver may run), a
    // plain router's explain would be too.
    bench
      .add('native router.explain', async () => {
        for (let i = 0; i < batch; i++) sink += (await router.explain(REQUEST)).eligible.length;
      })
      .add('plain explainPrepared', async () => {
        for (let i = 0; i < batch; i++) sink += (await explainPrepared(plainRegistry, REQUEST)).eligible.length;
      })
      .add('native routeProviders', () => {
        for (let i = 0; i < batch; i++) sink += routeProviders(REQUEST, defs).eligible.length;
      })
      .add('plain explainPlain', () => {
        for (let i = 0; i < batch; i++) sink += explainPlain(REQUEST, defs).eligible.length;
      });
    await bench.run();
    if (sink === 0) throw new Error('nothing explained');
    const [ne, pe, nr, pr] = bench.tasks.map((t) => medianPerOp(t, batch));
    const label = `${fmtInt(n)} (${fmtInt(nativeExplained.eligible.length)} eligible)`;
    rows.push([label, 'registry-backed', 'native router.explain', fmtTime(ne.median), `±${ne.rme.toFixed(1)}%`]);
    rows.push([label, 'registry-backed', 'plain explainPrepared', fmtTime(pe.median), `±${pe.rme.toFixed(1)}%`]);
    rows.push([label, 'per call', 'native routeProviders', fmtTime(nr.median), `±${nr.rme.toFixed(1)}%`]);
    rows.push([label, 'per call', 'plain explainPlain', fmtTime(pr.median), `±${pr.rme.toFixed(1)}%`]);
    ratios.push({ n, explain: pe.median / ne.median, routeProviders: pr.median / nr.median, times: { ne, pe, nr, pr } });
  }
  table(['pools', 'path', 'implementation', 'median', 'rme'], rows, ['l', 'l', 'l']);
  console.log(
    '\nBoth sides build the same full explanation (every eligible pool with rank, score, tier, breakdown and tie-break;\n' +
      'every rejected pool with its reasons; the summary), checked deepStrictEqual above. routeProviders reuses the parsed\n' +
      'definitions when the objects are unchanged (one read of each property decides); explainPlain parses every definition.\n',
  );
  const rss = runRssChild();
  // What "settles" means: nothing is retained call after call. RSS alone cannot say: V8
  // grows its young generation to its maximum in steps of 16 MiB as it sees allocation (the
  // heap it has committed, heapTotal, steps with RSS; what it holds, heapUsed, does not), and
  // when that step comes depends on the allocation rate. So the verdict is on what lives
  // outside V8's heap (RSS - heapTotal: native memory, code) and on heapUsed.
  console.log(`Memory over ${fmtInt(rss.calls)} calls at ${fmtInt(rss.pools)} pools (fresh process, full GC before each reading):\n`);
  table(
    ['calls so far', ...rss.kinds.flatMap((k) => [`${k} RSS`, `${k} RSS − heapTotal`, `${k} heapUsed`])],
    rss.checkpoints.map((c, i) => [
      fmtInt(c),
      ...rss.kinds.flatMap((k) => [rss.rss[k][i], rss.native[k][i], rss.used[k][i]].map((x) => `${x.toFixed(1)} MiB`)),
    ]),
  );
  const growth = (xs) => {
    const half = Math.floor(xs.length / 2);
    return { firstHalf: xs[half] - xs[0], secondHalf: xs[xs.length - 1] - xs[half] };
  };
  const settle = Object.fromEntries(
    rss.kinds.map((k) => {
      const native = growth(rss.native[k]);
      const used = growth(rss.used[k]);
      return [k, { native, used, secondHalf: Math.max(native.secondHalf, used.secondHalf) }];
    }),
  );
  const signed = (x) => `${x >= 0 ? '+' : ''}${x.toFixed(1)} MiB`;
  console.log(
    '\n' +
      rss.kinds
        .map(
          (k) =>
            `${k}: outside the heap ${signed(settle[k].native.firstHalf)} over the first half, ${signed(settle[k].native.secondHalf)} over the second; ` +
            `heapUsed ${signed(settle[k].used.firstHalf)} / ${signed(settle[k].used.secondHalf)}`,
        )
        .join('\n'),
  );
  console.log(`one call at 10,000 pools, RSS after a full GC: router.explain ${rss.big.explain}, routeProviders ${rss.big.routeProviders}`);
  return { ratios, rss, settle };
}

/** RSS (MiB, after a full GC) at checkpoints over 10,000 explanations at 1,000 pools, in a fresh child. */
function runRssChild() {
  const r = spawnSync(process.execPath, [SELF, '--rss-child'], { encoding: 'utf8', timeout: 600_000 });
  if (r.status !== 0) throw new Error(`rss child failed (${r.status ?? r.signal}): ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

async function rssChild() {
  const { SandboxRouter, InMemoryProviderRegistry, routeProviders } = await import('../index.js');
  const MIB = 1024 * 1024;
  const reading = () => {
    fullGc();
    fullGc();
    const u = process.memoryUsage();
    return { rss: u.rss / MIB, native: (u.rss - u.heapTotal) / MIB, used: u.heapUsed / MIB };
  };
  const mib = () => reading().rss;
  const pools = 1_000;
  const calls = 10_000;
  const step = 1_000;
  const defs = makeDefinitions(pools, 0x5eed + pools);
  const runtime = instantRuntime();
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry(defs.map((d) => ({ ...d, runtime }))) });
  const kinds = ['router.explain', 'routeProviders'];
  const run = { 'router.explain': () => router.explain(REQUEST), routeProviders: () => routeProviders(REQUEST, defs) };
  const checkpoints = [];
  for (let c = 0; c <= calls; c += step) checkpoints.push(c);
  const rss = {};
  const native = {};
  const used = {};
  for (const k of kinds) {
    const first = reading();
    rss[k] = [first.rss];
    native[k] = [first.native];
    used[k] = [first.used];
    for (let done = 0; done < calls; done += step) {
      for (let i = 0; i < step; i++) await run[k]();
      const r = reading();
      rss[k].push(r.rss);
      native[k].push(r.native);
      used[k].push(r.used);
    }
  }
  const bigDefs = makeDefinitions(10_000, 0x5eed + 10_000);
  const bigRouter = new SandboxRouter({ registry: new InMemoryProviderRegistry(bigDefs.map((d) => ({ ...d, runtime }))) });
  const grow = async (f) => {
    const before = mib();
    await f();
    return `${(mib() - before) >= 0 ? '+' : ''}${(mib() - before).toFixed(1)} MiB`;
  };
  const big = { explain: await grow(() => bigRouter.explain(REQUEST)), routeProviders: await grow(() => routeProviders(REQUEST, bigDefs)) };
  process.stdout.write(JSON.stringify({ pools, calls, kinds, checkpoints, rss, native, used, big }) + '\n');
}

// ---------------------------------------------------------------------------------------
// b. Provision overhead.

/** The fair cheapest CSPRNG hex id: one randomFillSync per 256 ids (the native core batches the same way). */
function idSource() {
  const buf = Buffer.allocUnsafe(4096);
  let pos = buf.length;
  return () => {
    if (pos + 16 > buf.length) {
      randomFillSync(buf);
      pos = 0;
    }
    const id = 'sbx_' + buf.toString('hex', pos, pos + 16);
    pos += 16;
    return id;
  };
}

/**
 * The plain-JS floor of a provision: (optionally) the routing decision, an id, a readiness
 * check, the launch, a mapping record in a Map. A fresh floor = a fresh mapping store.
 */
function makeFloor(defs, plainRegistry, { route }) {
  const byId = new Map(defs.map((d) => [d.id, d]));
  const first = defs[0];
  const nextId = idSource();
  const mappings = new Map();
  const ready = (_providerId) => true;
  async function provision(request) {
    const def = route ? byId.get(planPrepared(plainRegistry, request).order[0]) : first;
    const id = nextId();
    if (!ready(def.id)) throw new Error(`credentials unavailable for ${def.id}`);
    const labels = { ...request?.launch?.labels, [SANDBOX_ID_LABEL]: id };
    const handle = await def.runtime.launch({ labels });
    if (handle === null || typeof handle !== 'object' || typeof handle.id !== 'string') throw new Error('malformed handle');
    mappings.set(id, { id, providerId: def.id, providerSandboxId: handle.id, labels, createdAt: new Date().toISOString(), detached: false });
    return { id, providerId: def.id, labels: { ...labels } };
  }
  return { provision, mappings };
}

/**
 * A request as callers make them: a fresh object per call, with per-call launch labels (so
 * no cache keyed by identity or by content can answer it).
 */
let requestSeq = 0;
function freshRequest() {
  requestSeq++;
  return { launch: { labels: { requestId: `req-${requestSeq}`, team: 'bench' } } };
}
/** One request object reused for every call (what 0.7.0's bench measured; kept beside the fresh figure). */
const REUSED = { launch: { labels: { team: 'bench' } } };

/** Rounds of sequential batches in `interleavedBatches` (after as many again to warm up). */
const SEQUENTIAL_ROUNDS = 3_000;

/**
 * Sequential provisions timed in interleaved batches: `rounds` rounds (after `rounds` more
 * to warm up), each running a batch of `batch` provisions one after another through every
 * side, rotating which goes first; each side's median time per provision, µs. A slower
 * stretch of the machine lands on neighbouring batches of every side alike; timing each
 * side's batches one after the other (a tinybench run) puts it on one side alone.
 * @param {Record<string, (n: number) => Promise<void>>} sides
 */
async function interleavedBatches(sides, rounds, batch) {
  const names = Object.keys(sides);
  const times = Object.fromEntries(names.map((k) => [k, new Float64Array(rounds)]));
  for (let r = -rounds; r < rounds; r++) {
    for (let j = 0; j < names.length; j++) {
      const name = names[(r + rounds + j) % names.length];
      const t0 = process.hrtime.bigint();
      await sides[name](batch);
      if (r >= 0) times[name][r] = Number(process.hrtime.bigint() - t0) / 1e3 / batch;
    }
  }
  return Object.fromEntries(names.map((k) => [k, median(times[k])]));
}

async function provisionSection(native) {
  const { SandboxRouter, InMemoryProviderRegistry } = native;
  console.log('\n## b. Provision overhead (instant in-memory runtime, 6 pools, default mapping store, no observer)\n');
  const defs = makeDefinitions(6, 0x5eed + 6).map((d) => ({ ...d, runtime: instantRuntime() }));
  const registry = new InMemoryProviderRegistry(defs);
  const plainRegistry = prepareRegistry(defs);

  // Same first choice on both sides.
  const probe = await new SandboxRouter({ registry }).provision(freshRequest());
  assert.equal(probe.providerId, planPrepared(plainRegistry, {}).order[0]);

  // (i) sequential, in interleaved batches (`interleavedBatches`). A fresh router / floor
  // every 10,000 provisions keeps memory bounded.
  const BATCH = 20;
  const RENEW = 10_000;
  /**
   * A side: runs `n` provisions one after another through `make()`'s router, renewed every RENEW.
   * @param {() => { provision: (request: object) => Promise<unknown> }} make
   * @param {() => object} [request]
   */
  const side = (make, request = freshRequest) => {
    let target = make();
    let done = 0;
    return async (n) => {
      if (done >= RENEW) {
        target = make();
        done = 0;
      }
      for (let i = 0; i < n; i++) await target.provision(request());
      done += n;
    };
  };
  const seq = await interleavedBatches(
    {
      native: side(() => new SandboxRouter({ registry })),
      floor: side(() => makeFloor(defs, plainRegistry, { route: true })),
      bare: side(() => makeFloor(defs, plainRegistry, { route: false })),
      reused: side(() => new SandboxRouter({ registry }), () => REUSED),
    },
    SEQUENTIAL_ROUNDS,
    BATCH,
  );
  const row = (name, us) => [name, fmtInt(1e6 / us), fmtTime(us / 1e3), fmtRatio(seq.native / us)];
  table(
    ['sequential (fresh request per call, per-call labels)', 'provisions/s', `per provision (median of ${fmtInt(SEQUENTIAL_ROUNDS)} batches)`, 'native/this (time)'],
    [
      row('native router.provision(fresh request)', seq.native),
      row('plain floor (route + id + readiness + launch + mapping)', seq.floor),
      row('plain floor without routing', seq.bare),
      row('(native, one reused request object: not the bar)', seq.reused),
    ],
    ['l'],
  );
  const n = { mean: seq.native };
  const f = { mean: seq.floor };
  const b = { mean: seq.bare };

  // Ids: what the floor pays for its id, and what the naive way would cost.
  const nextId = idSource();
  const idTime = (fn) => {
    for (let i = 0; i < 20_000; i++) fn();
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < 200_000; i++) fn();
    return Number(process.hrtime.bigint() - t0) / 200_000 / 1e6;
  };
  const batched = idTime(nextId);
  const naive = idTime(() => 'sbx_' + randomBytes(16).toString('hex'));
  console.log(`\nfloor id: batched randomFillSync ${fmtTime(batched)} per id (randomBytes(16).toString('hex') would cost ${fmtTime(naive)})`);

  // (ii) 10,000 concurrent provisions, each side in its own child process.
  console.log(`\n${fmtInt(CONCURRENT)} concurrent provisions (Promise.all, a fresh request per call), one child process per side (five rounds alternating), fresh router/store per batch, gc between batches, three warm-up batches left out:\n`);
  const kinds = ['native', 'floor', 'bare'];
  const results = Object.fromEntries(kinds.map((k) => [k, []]));
  // Alternate the children so drift on the machine affects both sides alike.
  for (let round = 0; round < 5; round++) {
    for (const kind of kinds) results[kind].push(runChild(kind));
  }
  const summary = Object.fromEntries(
    kinds.map((k) => {
      const all = results[k].flatMap((r) => r.throughputs).sort((a, b) => a - b);
      return [
        k,
        {
          median: all[Math.floor(all.length / 2)],
          best: all[all.length - 1],
          maxRss: Math.max(...results[k].map((r) => r.maxRssKb)) / 1024,
          baseRss: Math.max(...results[k].map((r) => r.baseRssMb)),
        },
      ];
    }),
  );
  const names = { native: 'native router.provision(fresh request)', floor: 'plain floor (with routing)', bare: 'plain floor without routing' };
  table(
    ['concurrent', 'provisions/s (median)', 'best', 'peak RSS', 'RSS before batches', 'native/this (throughput)'],
    kinds.map((k) => [
      names[k],
      fmtInt(summary[k].median),
      fmtInt(summary[k].best),
      `${summary[k].maxRss.toFixed(1)} MiB`,
      `${summary[k].baseRss.toFixed(1)} MiB`,
      fmtRatio(summary.native.median / summary[k].median),
    ]),
    ['l'],
  );
  return {
    sequentialRatio: n.mean / f.mean,
    sequentialRatioBare: n.mean / b.mean,
    throughputRatio: summary.native.median / summary.floor.median,
    throughputRatioBare: summary.native.median / summary.bare.median,
  };
}

function runChild(kind) {
  const r = spawnSync(process.execPath, [SELF, '--child', kind], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`child ${kind} failed (${r.status ?? r.signal}): ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

/**
 * Peak RSS of this process in KiB. /proc/self/status VmHWM is the high-water mark of this
 * process image; getrusage's maxRSS is not usable here, because Linux carries it over
 * fork and exec, so a child would report at least the parent's RSS at spawn time.
 */
function peakRssKb() {
  try {
    const m = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (m) return Number(m[1]);
  } catch {
    // not Linux: fall back to getrusage
  }
  return process.resourceUsage().maxRSS;
}

/**
 * One side of the 10,000-concurrent measurement. With `rounds`, it only runs that many
 * batches (a full GC before each) and prints nothing: bench/instructions.mjs counts their
 * instructions under callgrind.
 */
async function child(kind, rounds) {
  const defs = makeDefinitions(6, 0x5eed + 6).map((d) => ({ ...d, runtime: instantRuntime() }));
  let fresh;
  if (kind === 'native') {
    const { SandboxRouter, InMemoryProviderRegistry } = await import('../index.js');
    const registry = new InMemoryProviderRegistry(defs);
    fresh = () => {
      const router = new SandboxRouter({ registry });
      return (request) => router.provision(request);
    };
  } else {
    const plainRegistry = prepareRegistry(defs);
    fresh = () => makeFloor(defs, plainRegistry, { route: kind === 'floor' }).provision;
  }
  const batch = async () => {
    const provision = fresh();
    const t0 = process.hrtime.bigint();
    const out = await Promise.all(Array.from({ length: CONCURRENT }, () => provision(freshRequest())));
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    if (out.length !== CONCURRENT) throw new Error('lost provisions');
    return CONCURRENT / s;
  };
  if (rounds !== undefined) {
    for (let i = 0; i < rounds; i++) {
      fullGc();
      await new Promise((resolve) => setImmediate(resolve));
      await batch();
    }
    return;
  }
  fullGc();
  const baseRssMb = process.memoryUsage().rss / 1024 / 1024;
  // Warm-up: the first batches of a process run while V8 still compiles and tiers up
  // either side's code; the native side takes about two batches longer to settle than the
  // floor (docs/performance.md). Three are left out.
  for (let i = 0; i < 3; i++) {
    fullGc();
    await new Promise((resolve) => setImmediate(resolve));
    await batch();
  }
  const throughputs = [];
  for (let i = 0; i < 4; i++) {
    fullGc();
    // Back to the event loop once, as a process between bursts of work is: Node runs the
    // finalizers of native objects the GC found dead there (a dropped router's native
    // state among them), not in the microtasks a batch runs on. Both sides do it.
    await new Promise((resolve) => setImmediate(resolve));
    throughputs.push(await batch());
  }
  const maxRssKb = peakRssKb();
  process.stdout.write(JSON.stringify({ kind, throughputs, maxRssKb, baseRssMb }) + '\n');
}

// ---------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------
// e. Live health (issue 17): tracking overhead, and the chaos scenario's time to recover.

/** The median of `xs`. @param {ArrayLike<number>} xs */
const median = (xs) => Float64Array.from(xs).sort()[Math.floor(xs.length / 2)];

/**
 * Interleaved medians: `n` rounds, each provisioning once (a fresh request) through each of
 * three routers `make(kind)` makes for 'on', 'off' and 'control', rotating which goes first,
 * each provision timed alone; fresh routers every 10,000 rounds keep the default stores'
 * memory bounded. Contention bursts on this shared machine hit neighbouring provisions
 * alike, and the median ignores GC pauses. Returns each router's median time (ms).
 * @param {(kind: 'on' | 'off' | 'control') => any} make
 */
async function interleavedMedians(make, n = 60_000) {
  /** @type {Array<'on' | 'off' | 'control'>} */
  const KINDS = ['on', 'off', 'control'];
  const routers = Object.fromEntries(KINDS.map((k) => [k, make(k)]));
  const times = Object.fromEntries(KINDS.map((k) => [k, new Float64Array(n)]));
  for (let i = 0; i < 3_000; i++) await routers[KINDS[i % 3]].provision(freshRequest());
  for (let i = 0; i < n; i++) {
    if (i % 10_000 === 0) for (const kind of KINDS) routers[kind] = make(kind);
    for (let j = 0; j < 3; j++) {
      const kind = KINDS[(i + j) % 3];
      const t0 = process.hrtime.bigint();
      await routers[kind].provision(freshRequest());
      times[kind][i] = Number(process.hrtime.bigint() - t0) / 1e6;
    }
  }
  return { on: median(times.on), off: median(times.off), control: median(times.control) };
}

/**
 * Prints `interleavedMedians`' figures: `names` of the on, off and control routers and of
 * the two differences. Returns on / off - 1.
 */
function onOffTable({ on, off, control }, [onName, offName, controlName, difference, noise]) {
  const overhead = on / off - 1;
  table(
    ['provision, 6 pools, fresh request per call', 'per provision (median)', 'provisions/s'],
    [
      [onName, fmtTime(on), fmtInt(1000 / on)],
      [offName, fmtTime(off), fmtInt(1000 / off)],
      [controlName, fmtTime(control), fmtInt(1000 / control)],
      [difference, `${(overhead * 100).toFixed(1)} %`, ''],
      [noise, `${((control / off - 1) * 100).toFixed(1)} %`, ''],
    ],
    ['l'],
  );
  return overhead;
}

async function healthSection(native) {
  const { SandboxRouter, InMemoryProviderRegistry } = native;
  console.log('\n## e. Live health: provision overhead with tracking on vs off, and the chaos scenario\n');
  const defs = makeDefinitions(6, 0x5eed + 6).map((d) => ({ ...d, runtime: instantRuntime() }));
  const registry = new InMemoryProviderRegistry(defs);
  // (i) Overhead: the same provisions (fresh request per call, per-call labels) through a
  // router with tracking on (the default, Date.now clock) and one with `health: false`,
  // interleaved one provision at a time (rotating which goes first), each timed alone; the
  // median per router. A second tracking-off router is the control: its difference from the
  // first is the noise floor. Contention bursts on this shared machine hit neighbouring
  // provisions alike, and the median ignores GC pauses, so the figure is stable run to run
  // (batch timings were not: ±15 % here).
  const medians = await interleavedMedians((kind) => new SandboxRouter(kind === 'on' ? { registry } : { registry, health: false }));
  const { off } = medians;
  const overhead = onOffTable(medians, [
    'tracking on (default)',
    'tracking off (health: false)',
    'control: a second tracking-off router',
    'difference (on / off - 1)',
    'noise floor (control / off - 1)',
  ]);

  // (i b) The same, native calls alone: what tracking adds to the success path's two native
  // calls (begin with the health key, the success report; with the default clock the
  // native side reads the wall clock itself), in a tight synchronous loop (no promise, no GC of provisions),
  // interleaved in chunks. This isolates the cost that the end-to-end figure above blurs.
  const require = createRequire(import.meta.url);
  const { binding } = require('../lib/binding.js');
  const { compile } = require('../lib/compile.js');
  const { viewOf } = require('../lib/registry.js');
  const { contextOf, healthNow } = require('../lib/options.js');
  const compiled = compile(freshRequest());
  const step = new Uint32Array(5);
  const tracked = contextOf({ registry });
  const untracked = contextOf({ registry, health: false });
  viewOf(tracked);
  viewOf(untracked);
  const nativeRound = (ctx) => {
    const CHUNK = 20_000;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < CHUNK; i++) {
      // begin returns the sandbox id and puts the job's key in step[2]
      binding.beginAcquisition(ctx.native, compiled.compiled.native, false, compiled.labelsJson, undefined, undefined, step, healthNow(ctx.health));
      // (the default store, no observer: the success call writes the record and ends the job)
      binding.acquisitionSucceeded(ctx.native, step[2], 'remote', step, healthNow(ctx.health));
    }
    return Number(process.hrtime.bigint() - t0) / CHUNK / 1e6;
  };
  const nativeTimes = { on: [], off: [] };
  for (let r = 0; r < 60; r++) {
    const order = r % 2 === 0 ? ['on', 'off'] : ['off', 'on'];
    for (const kind of order) nativeTimes[kind].push(nativeRound(kind === 'on' ? tracked : untracked));
  }
  const nativeOn = median(nativeTimes.on.slice(10));
  const nativeOff = median(nativeTimes.off.slice(10));
  table(
    ['the success path\'s native calls alone', 'per provision (median)', 'share of a tracking-off provision'],
    [
      ['tracking on', fmtTime(nativeOn), ''],
      ['tracking off', fmtTime(nativeOff), ''],
      ['added by tracking', fmtTime(nativeOn - nativeOff), `${(((nativeOn - nativeOff) / off) * 100).toFixed(1)} %`],
    ],
    ['l'],
  );

  // (ii) Chaos: three pools, the best starts hanging; real clock and timers.
  const TIMEOUT = 20;
  const COOLDOWN = 200;
  const THRESHOLD = 3;
  let mode = 'ok';
  let n = 0;
  const best = {
    launch: () => (mode === 'hang' ? new Promise(() => {}) : Promise.resolve({ id: `a-${n++}` })),
    destroy: async () => {},
  };
  const sig = (cost) => ({ estimatedCost: cost, coldStartLatencyMs: 100, readyLatencyMs: 100, completionWithinBudgetRate: 0.99, available: true });
  const chaos = new SandboxRouter({
    registry: new InMemoryProviderRegistry([
      { id: 'best', runtime: best, capabilities: {}, signals: sig(1) },
      { id: 'second', runtime: instantRuntime(), capabilities: {}, signals: sig(2) },
      { id: 'third', runtime: instantRuntime(), capabilities: {}, signals: sig(3) },
    ]),
    health: { failureThreshold: THRESHOLD, cooldownMs: COOLDOWN },
  });
  const request = () => ({ routing: { strategy: 'cost', acquisitionTimeoutMs: TIMEOUT }, launch: { labels: { run: `c-${requestSeq++}` } } });
  let longest = 0;
  const once = async () => {
    const t0 = performance.now();
    let served;
    try {
      served = (await chaos.provision(request())).providerId;
    } catch (e) {
      served = e.code;
    }
    longest = Math.max(longest, performance.now() - t0);
    return served;
  };
  fullGc();
  // Let the event loop drain first: right after the overhead rounds, the first timer of
  // this process fires ~200 ms late (measured: the collected routers' native finalizers run
  // there), which would be charged to the first timeout below.
  for (let i = 0; i < 3; i++) await new Promise((r) => setTimeout(r, 20));
  for (let i = 0; i < 20; i++) assert.equal(await once(), 'best');
  mode = 'hang';
  const hangAt = performance.now();
  let failed = 0;
  let served;
  while ((served = await once()) !== 'second') failed++;
  const routedAround = performance.now() - hangAt;
  // Keep serving while it hangs: probes fail and the cooldown doubles.
  const probeEnd = performance.now() + 3 * COOLDOWN;
  let probes = 0;
  while (performance.now() < probeEnd) {
    if ((await once()) === 'ACQUISITION_TIMEOUT') probes++;
    await new Promise((r) => setTimeout(r, 2));
  }
  const atRecovery = chaos.health().find((p) => p.providerId === 'best');
  const remaining = atRecovery.retryAt === null ? 0 : Math.max(0, Date.parse(atRecovery.retryAt) - Date.now());
  mode = 'ok';
  const recoveredAt = performance.now();
  while ((served = await once()) !== 'best') await new Promise((r) => setTimeout(r, 2));
  const backAfter = performance.now() - recoveredAt;
  const cooldownThen = chaos.health().find((p) => p.providerId === 'best');
  table(
    ['chaos (3 pools; the best hangs; timeout 20 ms, threshold 3, cooldown 200 ms)', 'value'],
    [
      ['provisions that timed out before the router routed around it', String(failed)],
      ['time from the first hang to the first provision served elsewhere', fmtTime(routedAround)],
      ['failed probes while it kept hanging (one per cooldown)', String(probes)],
      [`cooldown left when it recovered (state ${atRecovery.state}, cooldown ${atRecovery.cooldownMs} ms)`, fmtTime(remaining)],
      ['time from its recovery to the router returning to it', fmtTime(backAfter)],
      ['longest single provision in the run', fmtTime(longest)],
      ['its state after the return', `${cooldownThen.state}, ${cooldownThen.samples} samples`],
    ],
    ['l'],
  );
  return { overhead, added: (nativeOn - nativeOff) / off, failed, routedAround, backAfter, longest };
}

// g. Telemetry (issue 26): what telemetry on adds to a provision (bench/telemetry.mjs).
async function telemetrySection(native) {
  console.log('\n## g. Telemetry: provision with telemetry on (real SDKs, in-memory exporters) vs off\n');
  const definitions = makeDefinitions(6, 0x5eed + 6).map((d) => ({ ...d, runtime: instantRuntime() }));
  return (await import('./telemetry.mjs')).runTelemetryBench(native, { definitions, request: freshRequest, table });
}

// h. Budgets (issue 25): what two rules add to a provision, in process.

/** Two rules every bench request matches (`team: 'bench'`), with limits it never reaches. */
const BENCH_BUDGETS = [
  { id: 'daily-spend', key: { label: 'team' }, limit: { cost: 1e9 }, window: { every: 'day', timeZone: 'Europe/Berlin' } },
  { id: 'burst', key: { label: 'team' }, limit: { launches: 1e12, concurrent: 1e12 }, window: { slidingMs: 60_000 } },
];

async function budgetsSection(native) {
  const { SandboxRouter, InMemoryProviderRegistry } = native;
  console.log('\n## j. Budgets: provision with two budget rules vs none\n');
  const defs = makeDefinitions(6, 0x5eed + 6).map((d) => ({ ...d, runtime: instantRuntime() }));
  const registry = new InMemoryProviderRegistry(defs);
  // As section e: interleaved one provision at a time (rotating which goes first), each
  // timed alone, the median per router; a second router without budgets is the control
  // (its difference from the first is the noise floor). Health is off in all three, so
  // the figure is budgets' alone.
  const make = (kind) => new SandboxRouter(kind === 'on' ? { registry, health: false, budgets: BENCH_BUDGETS } : { registry, health: false });
  const overhead = onOffTable(await interleavedMedians(make), [
    'two budget rules',
    'no budgets',
    'control: a second router without budgets',
    'difference (budgets / none - 1)',
    'noise floor (control / none - 1)',
  ]);
  // Where the difference goes (docs/performance.md): every successful provision leaves a
  // charge, so the ledger's memory grows with the provisions; the process's minor page
  // faults over 50,000 provisions per router (a fresh router every 10,000, as above), each
  // kind alone, three rounds alternating, the median.
  const faults = { on: [], off: [] };
  for (let round = 0; round < 3; round++) {
    for (const kind of /** @type {const} */ (['on', 'off'])) {
      fullGc();
      let router = make(kind);
      const before = process.resourceUsage().minorPageFault;
      for (let i = 0; i < 50_000; i++) {
        if (i % 10_000 === 0) router = make(kind);
        await router.provision(freshRequest());
      }
      faults[kind].push((process.resourceUsage().minorPageFault - before) / 50);
    }
  }
  const [fOn, fOff] = [median(faults.on), median(faults.off)];
  console.log('');
  table(
    ['memory: minor page faults per 1,000 provisions (median of 3 rounds of 50,000)', 'value'],
    [
      ['two budget rules', fmtInt(fOn)],
      ['no budgets', fmtInt(fOff)],
      ['added by the budgets', fmtInt(fOn - fOff)],
    ],
    ['l'],
  );
  return { overhead };
}

async function pacingSection(native) {
  const { SandboxRouter, InMemoryProviderRegistry } = native;
  console.log('\n## m. Pacing: provision with a rate limit on every pool (never reached) vs none\n');
  const defs = makeDefinitions(6, 0x5eed + 6).map((d) => ({ ...d, runtime: instantRuntime() }));
  const plain = new InMemoryProviderRegistry(defs);
  // A limit no run reaches: every launch takes a token (the bucket refills faster than the
  // loop can drain it), so this is what pacing costs when it never says no.
  const paced = new InMemoryProviderRegistry(defs.map((d) => ({ ...d, rateLimit: { launchesPerSecond: 1e6, burst: 1e6 } })));
  // As section e: interleaved one provision at a time, each timed alone, medians; a second
  // router without limits is the control (the noise floor). Health off in all three.
  const medians = await interleavedMedians((kind) => new SandboxRouter({ registry: kind === 'on' ? paced : plain, health: false }));
  const overhead = onOffTable(medians, [
    'every pool declares rateLimit (never reached)',
    'no rate limit',
    'control: a second router without limits',
    'difference (on / off - 1)',
    'noise floor (control / off - 1)',
  ]);
  return { overhead, noise: medians.control / medians.off - 1 };
}

async function decisionsSection(native) {
  const { SandboxRouter, InMemoryProviderRegistry } = native;
  console.log('\n## o. Decision records: provision with records on (the in-memory ring) vs off\n');
  const defs = makeDefinitions(6, 0x5eed + 6).map((d) => ({ ...d, runtime: instantRuntime() }));
  const registry = new InMemoryProviderRegistry(defs);
  // As section e: interleaved, each provision timed alone, medians; health on (the default),
  // so each record carries the pools' health; a second router without records is the control.
  const medians = await interleavedMedians((kind) => new SandboxRouter({ registry, decisions: kind === 'on' }));
  const overhead = onOffTable(medians, [
    'decisions: true (ring of 1,000)',
    'no records',
    'control: a second router without records',
    'difference (on / off - 1)',
    'noise floor (control / off - 1)',
  ]);
  // The size of one record at 6 pools, as JSON.
  const r = new SandboxRouter({ registry, decisions: { keep: 20_000 } });
  await r.provision(freshRequest());
  const bytes = Buffer.byteLength(JSON.stringify(r.decisions()[0]));
  console.log(`\none record at 6 pools: ${fmtInt(bytes)} bytes of JSON`);
  // Replay: 20,000 records at 6 pools on one core, as a replay meets them: the lines of a
  // jsonLinesSink file (their text), and the objects `decisions()` answers.
  for (let i = 1; i < 20_000; i++) await r.provision(freshRequest());
  const records = r.decisions().map((x) => JSON.parse(JSON.stringify(x)));
  const texts = records.map((x) => JSON.stringify(x));
  const twin = new SandboxRouter({ registry });
  const rate = (list) => {
    const t0 = process.hrtime.bigint();
    let same = 0;
    for (const rec of list) if (twin.replay(rec).same) same++;
    return [list.length / (Number(process.hrtime.bigint() - t0) / 1e9), same];
  };
  const [replayPerSecond, same] = rate(texts);
  const [objectsPerSecond, sameObjects] = rate(records);
  console.log(`replay: ${fmtInt(replayPerSecond)} records per second at 6 pools from their JSON lines (${same} of ${fmtInt(texts.length)} the same); ${fmtInt(objectsPerSecond)} from objects (${sameObjects} the same)`);
  // The command line over 100,000 records in a file (five copies of the 20,000).
  const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const path = await import('node:path');
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-replay-'));
  const lines = records.map((x) => JSON.stringify(x)).join('\n');
  writeFileSync(path.join(dir, 'records.jsonl'), `${Array.from({ length: 5 }, () => lines).join('\n')}\n`);
  const defsFile = path.join(dir, 'config.mjs');
  writeFileSync(
    defsFile,
    `import { InMemoryProviderRegistry } from ${JSON.stringify(fileURLToPath(new URL('../index.mjs', import.meta.url)))};
import { makeDefinitions } from ${JSON.stringify(fileURLToPath(new URL('./pools.mjs', import.meta.url)))};
const runtime = { launch: async () => ({ id: 'x' }), destroy: async () => {} };
export default { registry: new InMemoryProviderRegistry(makeDefinitions(6, ${0x5eed + 6}).map((d) => ({ ...d, runtime }))) };`,
  );
  const c0 = Date.now();
  const cli = spawnSync(process.execPath, [fileURLToPath(new URL('../bin/sandbox-router.mjs', import.meta.url)), 'replay', path.join(dir, 'records.jsonl'), '--config', defsFile], { encoding: 'utf8' });
  const cliMs = Date.now() - c0;
  rmSync(dir, { recursive: true, force: true });
  console.log(`command line: ${cli.stdout.trim().split('\n')[0]} in ${(cliMs / 1000).toFixed(1)} s (exit ${cli.status})`);
  return { overhead, noise: medians.control / medians.off - 1, bytes, replayPerSecond, cliMs, cliOk: cli.status === 0 };
}

async function main() {
  const native = await import('../index.js');
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
  console.log(`# @agent-relay/sandbox-router: native vs plain JS`);
  console.log(`node ${process.version}, ${os.cpus().length} cores (${cpu}), ${os.platform()}-${os.arch()}`);
  const t0 = Date.now();
  // `npm run bench -- --only=provision` (or `--only=explain`, `--only=routing`) runs one section, for
  // iterating on it; the summary and docs/performance.md's figures come from a full run.
  const only = process.argv.find((a) => a.startsWith('--only='))?.slice('--only='.length);
  if (only === 'provision' || only === 'explain' || only === 'routing') {
    await (only === 'provision' ? provisionSection(native) : only === 'explain' ? explainSection(native) : routingSection(native));
    return;
  }
  if (only === 'health') {
    await healthSection(native);
    return;
  }
  if (only === 'budgets') {
    await budgetsSection(native);
    return;
  }
  if (only === 'orphans') {
    console.log('\n## d. Orphans and restarts');
    await (await import('./orphans.mjs')).runOrphansBench(native);
    return;
  }
  if (only === 'warm') {
    console.log('\n## h. Warm pools');
    await (await import('./warm.mjs')).runWarmBench(native);
    return;
  }
  if (only === 'postgres') {
    console.log('\n## f. Running many routers (PostgreSQL)');
    await (await import('./postgres.mjs')).runPostgresBench(native);
    return;
  }
  if (only === 'telemetry') {
    await telemetrySection(native);
    return;
  }
  if (only === 'soak') {
    console.log('\n## k. The soak: memory of a long-running multi-tenant router');
    await (await import('./soak.mjs')).runSoakBench();
    return;
  }
  if (only === 'pacing') {
    await pacingSection(native);
    return;
  }
  if (only === 'fleet') {
    console.log('\n## l. The fleet: routers sharing PostgreSQL');
    await (await import('./fleet.mjs')).runFleetBench();
    return;
  }
  if (only === 'decisions') {
    await decisionsSection(native);
    return;
  }
  if (only === 'ratelimits') {
    console.log('\n## n. Rate limits against a provider account');
    await (await import('./rate-limits.mjs')).runRateLimitBench();
    return;
  }
  const routing = await routingSection(native);
  const explained = await explainSection(native);
  const provision = await provisionSection(native);
  console.log('\n## c. Capacity reads (native readers on tokio, off the JS thread)');
  const { runCapacityBench } = await import('./capacity.mjs');
  const capacity = await runCapacityBench();
  const routerRow = capacity.concurrency.find((r) => String(r.readers).startsWith('router.getCapacity'));
  const stallRow = /** @type {Record<string, string>} */ (capacity.stalls.find((r) => r.reader.startsWith('native, in this process')));
  console.log('\n## d. Orphans and restarts');
  await (await import('./orphans.mjs')).runOrphansBench(native);
  const health = await healthSection(native);
  const budgets = await budgetsSection(native);
  console.log('\n## f. Running many routers (PostgreSQL)');
  await (await import('./postgres.mjs')).runPostgresBench(native);
  console.log('\n## h. Warm pools');
  const warm = await (await import('./warm.mjs')).runWarmBench(native);
  const telemetry = await telemetrySection(native);
  console.log('\n## k. The soak: memory of a long-running multi-tenant router');
  const soakBench = await import('./soak.mjs');
  const soak = await soakBench.runSoakBench();
  console.log('\n## l. The fleet: routers sharing PostgreSQL');
  const fleetBench = await import('./fleet.mjs');
  const fleet = await fleetBench.runFleetBench();
  const pacing = await pacingSection(native);
  const records = await decisionsSection(native);
  console.log('\n## n. Rate limits against a provider account');
  const rateBench = await import('./rate-limits.mjs');
  const rates = await rateBench.runRateLimitBench();
  console.log('\n## Summary (all ratios from this run; > 1 means native faster / higher)\n');
  const at = (n) => routing.find((r) => r.n === n);
  const ok = (b) => (b ? 'met' : 'NOT met');
  table(
    ['measure', 'value', 'target', 'verdict'],
    [
      ...[6, 1000, 10000].map((n) => [
        `route, ${fmtInt(n)} pools: plain time / native time`,
        fmtRatio(at(n).registry),
        `≥ ${decisionFloor(n)}x`,
        ok(at(n).registry >= decisionFloor(n)),
      ]),
      ...explained.ratios.flatMap(({ n, explain, routeProviders }) => {
        const target = decisionFloor(n);
        return [
          [`explain, ${fmtInt(n)} pools: plain time / native time`, fmtRatio(explain), `≥ ${target}x`, ok(explain >= target)],
          [`routeProviders, ${fmtInt(n)} pools: plain time / native time`, fmtRatio(routeProviders), `≥ ${target}x`, ok(routeProviders >= target)],
        ];
      }),
      ...explained.rss.kinds.map((k) => [
        `${k}, 10,000 calls at 1,000 pools: growth outside the heap / of heapUsed, second half (larger)`,
        `${explained.settle[k].secondHalf.toFixed(1)} MiB`,
        'settles (≤ 2 MiB)',
        ok(explained.settle[k].secondHalf <= 2),
      ]),
      ['provision, sequential: native time / floor time', fmtRatio(provision.sequentialRatio), `≤ ${FLOORS.sequential}x`, ok(provision.sequentialRatio <= FLOORS.sequential)],
      ['  (vs floor without routing)', fmtRatio(provision.sequentialRatioBare), '', ''],
      ['provision, 10k concurrent: native / floor throughput', fmtRatio(provision.throughputRatio), `≥ ${FLOORS.concurrent}x`, ok(provision.throughputRatio >= FLOORS.concurrent)],
      ['  (vs floor without routing)', fmtRatio(provision.throughputRatioBare), '', ''],
      ['provision, health tracking on vs off: time difference (end to end)', `${(health.overhead * 100).toFixed(1)} %`, `≤ ${FLOORS.health * 100} %`, ok(health.overhead <= FLOORS.health)],
      // A diagnostic (issue 17's bar is the end-to-end difference above): the added time
      // shown against a provision that has since become twice as fast.
      ['  (native calls alone: added time / provision time)', `${(health.added * 100).toFixed(1)} %`, '— (diagnostic)', ''],
      ['provision, two budget rules vs none: time difference (end to end)', `${(budgets.overhead * 100).toFixed(1)} %`, `≤ ${FLOORS.budgets * 100} %`, ok(budgets.overhead <= FLOORS.budgets)],
      ['provision, a rate limit on every pool (never reached) vs none: time difference', `${(pacing.overhead * 100).toFixed(1)} %`, `≤ ${FLOORS.pacing * 100} %`, ok(pacing.overhead <= FLOORS.pacing)],
      ['  (noise floor: a second router without limits)', `${(pacing.noise * 100).toFixed(1)} %`, '', ''],
      ['provision, decision records on (ring) vs off: time difference', `${(records.overhead * 100).toFixed(1)} %`, `≤ ${FLOORS.decisions * 100} %`, ok(records.overhead <= FLOORS.decisions)],
      ['  (noise floor: a second router without records)', `${(records.noise * 100).toFixed(1)} %`, '', ''],
      ['  one record at 6 pools, JSON', `${fmtInt(records.bytes)} bytes`, '≤ 4,096 bytes', ok(records.bytes <= 4096)],
      ['  replay, records per second at 6 pools (one core, JSON lines)', fmtInt(records.replayPerSecond), '≥ 20,000', ok(records.replayPerSecond >= 20_000)],
      ['  the command line, 100,000 records', `${(records.cliMs / 1000).toFixed(1)} s`, '≤ 10 s', ok(records.cliOk && records.cliMs <= 10_000)],
      ['provision, telemetry on (metrics and traces, real SDK) vs off: added time', `${fmtTime(telemetry.full - telemetry.off)} (${((telemetry.full / telemetry.off - 1) * 100).toFixed(0)} %)`, '— (reported)', ''],
      ['  (noise floor: a second telemetry-off router)', `${(((telemetry.control / telemetry.off) - 1) * 100).toFixed(1)} %`, '', ''],
      ['getCapacity, 6 readers × 200 ms: total / slowest', `${routerRow['total / slowest alone']}x`, '≤ 1.2x', routerRow.ok === 'yes' ? 'met' : 'NOT met'],
      ['10,000-sandbox Daytona read: max event-loop stall (median)', stallRow['max stall (median)'], '≤ 5 ms', stallRow.ok === 'yes' ? 'met' : 'NOT met'],
      ...warmRows(warm, ok),
      ...soakRows(soak, soakBench.SOAK_TARGETS, ok),
      ...fleetRows(fleet, fleetBench.FLEET_TARGETS, ok),
      ...rateRows(rates, rateBench.RATE_TARGETS, ok),
    ],
    ['l', 'r', 'r', 'l'],
  );
  console.log(`\n(total ${((Date.now() - t0) / 1000).toFixed(0)} s)`);
}

/** The soak's summary rows (issue 34's memory figures). */
function soakRows(soak, t, ok) {
  const mib = (b) => b / (1024 * 1024);
  return [
    ['soak: RSS growth per 100k provisions, new tenant each, sliding 60 s rule', `${mib(soak.slidingNew).toFixed(1)} MiB`, `≤ ${t.slidingNew} MiB`, ok(mib(soak.slidingNew) <= t.slidingNew)],
    ['  same, daily cost rule', `${mib(soak.dailyNew).toFixed(1)} MiB`, `≤ ${t.dailyNew} MiB`, ok(mib(soak.dailyNew) <= t.dailyNew)],
    ['  100 repeating tenants, daily rule', `${mib(soak.dailyRepeat).toFixed(1)} MiB`, `≤ ${t.dailyRepeat} MiB`, ok(mib(soak.dailyRepeat) <= t.dailyRepeat)],
    ['  a second day after the roll-over, over day one', `${mib(soak.dayTwo).toFixed(1)} MiB`, `≤ ${t.dayTwo} MiB`, ok(mib(soak.dayTwo) <= t.dayTwo)],
  ];
}

/** The fleet's summary rows (issue 34's PostgreSQL figures). */
function fleetRows(fleet, t, ok) {
  return [
    ['fleet: daily window, last 10 s of 60 s vs first 10 s', `${(fleet.steady * 100).toFixed(0)} %`, '≥ 90 %', ok(fleet.steady >= t.steady)],
    ['  transactions per provision + destroy', fleet.transactions.toFixed(2), `≤ ${t.transactions}`, ok(fleet.transactions <= t.transactions)],
    ['  provisions/s at 1 process vs one-statement transactions/s', `${(fleet.reference * 100).toFixed(0)} %`, '≥ 25 %', ok(fleet.reference >= t.reference)],
    ['  provision p99 at 4 processes vs at 1', fmtRatio(fleet.p99), `≤ ${t.p99}x`, ok(fleet.p99 <= t.p99)],
  ];
}

/** The rate limits' summary rows (issue 33's figures). */
function rateRows(r, t, ok) {
  const h = r.hobby;
  const f = r.fleet;
  return [
    ['rate limit 1/s + queue, 30 at once against a 1/s account (warm client): 429s', String(h.refused), '0', ok(h.refused === 0)],
    ['  served, in all', `${h.served} of 30, ${(h.totalMs / 1000).toFixed(1)} s`, `30, ≤ ${t.hobbyTotalMs / 1000} s`, ok(h.served === 30 && h.totalMs <= t.hobbyTotalMs)],
    ['  queue wait p50 / p99', `${(h.waitP50 / 1000).toFixed(1)} / ${(h.waitP99 / 1000).toFixed(1)} s`, '— (reported)', ''],
    ['  cold client (the first create is the process\'s first fetch): 429s', String(r.cold.refused), '— (reported)', ''],
    ['4 processes sharing 5/s: most creates in one second at the account', String(f.shared.busiest), '≤ 6', ok(f.shared.busiest <= 6)],
    ['  a steady tenant beside a burst of 100: wait p99', `${f.fairness.steadyP99} ms`, `< ${t.steadyP99Ms} ms`, ok(f.fairness.steadyP99 < t.steadyP99Ms)],
  ];
}

/** The warm pools' summary rows (issue 35's figures). */
function warmRows(warm, ok) {
  const m = warm.memory;
  const st = warm.step;
  const pc = (x) => `${(x * 100).toFixed(1)} %`;
  return [
    ['warm, size 10, 5 req/s for 60 s (500 ms creates): hit rate', pc(m.hitRate), '≥ 95 %', ok(m.hitRate >= 0.95)],
    ['  claim p99', `${m.claimP99.toFixed(2)} ms`, '≤ 20 ms', ok(m.claimP99 <= 20)],
    ['  provision → first runScript output, warm / cold p50', `${m.firstWarmP50.toFixed(1)} / ${Number.isNaN(m.firstColdP50) ? '—' : m.firstColdP50.toFixed(0)} ms`, '— (reported)', ''],
    ['warm, { min: 2, max: 30 }, 1 → 10 → 1 req/s: hit rate over the step', pc(st.high.hitRate), '≥ 90 %', ok(st.high.hitRate >= 0.9)],
    ['  most members (idle + launching)', String(st.maxMembers), '≤ 30', ok(st.maxMembers <= 30)],
    ['  idle back to ≤ min + 2 after the step', st.backMs === null ? 'not within bound' : `${(st.backMs / 1000).toFixed(0)} s`, '≤ 1,200 s (2 × maxIdleMs)', ok(st.backMs !== null)],
    ['warm tracking on a cold provision: time added', pc(warm.tracking.overhead), '≤ 5 %', ok(warm.tracking.overhead <= 0.05)],
  ];
}

const at = process.argv.indexOf('--child');
if (at >= 0) {
  await child(process.argv[at + 1], process.argv[at + 2] === undefined ? undefined : Number(process.argv[at + 2]));
} else if (process.argv.includes('--rss-child')) {
  await rssChild();
} else {
  await main();
}
