// Instructions per call, counted with callgrind: figures that, unlike time, do not move
// with the machine's load.
//
//   node bench/instructions.mjs              (npm run bench:instructions; needs valgrind, ~3 minutes)
//   node bench/instructions.mjs --decisions  (route, explain, routeProviders at 6 and 1,000 pools; ~10 minutes)
//
// Provision: each side is section b's 10,000-concurrent child (`bench.mjs --child
// native|floor ROUNDS`: the same pools, requests and plain floor), run under
// `valgrind --tool=callgrind` with `node --single-threaded --predictable` (deterministic to
// a few thousand instructions per run), once with 3 batches and once with 5; the difference
// divided by the 20,000 provisions of the 2 extra batches is the warm, steady-state cost of
// one provision (start-up, module loading and JIT warm-up cancel out).
//
// Decisions: the same difference between two loop lengths, over bench/pools.mjs's pools and
// request, native (`router.route`, `router.explain`, `routeProviders`) against the plain-JS
// router (`routePrepared`, `explainPrepared`, `explainPlain`), as sections a and i time them.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const SELF = fileURLToPath(import.meta.url);
const BENCH = fileURLToPath(new URL('./bench.mjs', import.meta.url));
const PER_BATCH = 10_000;

/** Instructions callgrind counts for `node ...args`. */
function instructions(args) {
  const r = spawnSync('valgrind', ['--tool=callgrind', '--callgrind-out-file=/dev/null', process.execPath, '--expose-gc', '--single-threaded', '--predictable', ...args], {
    encoding: 'utf8',
  });
  const m = /Collected : (\d+)/.exec(r.stderr ?? '');
  if (r.status !== 0 || !m) throw new Error(`valgrind ${args.join(' ')} failed (${r.status ?? r.error?.message}): ${(r.stderr ?? '').slice(-400)}`);
  return Number(m[1]);
}

/** The decision child: `k` calls of `what` over `n` pools, on `side`. */
async function decisionChild(side, what, n, k) {
  const { makeDefinitions, REQUEST } = await import('./pools.mjs');
  const plain = await import('./plain-router.mjs');
  const { SandboxRouter, InMemoryProviderRegistry, routeProviders } = createRequire(import.meta.url)('../index.js');
  const defs = makeDefinitions(n, 0x5eed + n);
  const runtime = { launch: async () => ({ id: 'x' }), destroy: async () => {} };
  let call;
  if (what === 'routeProviders') call = side === 'native' ? () => routeProviders(REQUEST, defs).eligible.length : () => plain.explainPlain(REQUEST, defs).eligible.length;
  else if (side === 'native') {
    const router = new SandboxRouter({ registry: new InMemoryProviderRegistry(defs.map((d) => ({ ...d, runtime }))) });
    call = what === 'explain' ? async () => (await router.explain(REQUEST)).eligible.length : () => router.route(REQUEST).length;
  } else {
    const registry = plain.prepareRegistry(defs);
    call = what === 'explain' ? async () => (await plain.explainPrepared(registry, REQUEST)).eligible.length : () => plain.routePrepared(registry, REQUEST, { limit: 3 }).length;
  }
  let sink = 0;
  for (let i = 0; i < k; i++) sink += await call();
  if (sink < 0) console.log(sink);
}

function provisions() {
  const per = {};
  for (const kind of ['native', 'floor']) per[kind] = (instructions([BENCH, '--child', kind, '5']) - instructions([BENCH, '--child', kind, '3'])) / (2 * PER_BATCH);
  console.log('instructions per provision, 10,000 in flight, warm (callgrind):');
  console.log(`  native router.provision(fresh request): ${(per.native / 1000).toFixed(1)}k`);
  console.log(`  plain floor (with routing):             ${(per.floor / 1000).toFixed(1)}k`);
  console.log(`  floor / native (throughput ratio by count): ${(per.floor / per.native).toFixed(2)}x`);
}

function decisions() {
  const fmt = (x) => (x >= 1e6 ? `${(x / 1e6).toFixed(2)}M` : `${(x / 1e3).toFixed(1)}k`);
  console.log('instructions per call, warm (callgrind): native | plain JS | plain / native');
  for (const what of ['route', 'explain', 'routeProviders']) {
    for (const n of [6, 1000]) {
      // Loop lengths long enough that the difference is the steady state (JIT warm at the shorter).
      const [k1, k2] = n === 6 ? [2000, 6000] : what === 'route' ? [200, 600] : [10, 30];
      const per = {};
      for (const side of ['native', 'plain']) per[side] = (instructions([SELF, '--decision-child', side, what, String(n), String(k2)]) - instructions([SELF, '--decision-child', side, what, String(n), String(k1)])) / (k2 - k1);
      console.log(`  ${what}, ${n} pools: ${fmt(per.native)} | ${fmt(per.plain)} | ${(per.plain / per.native).toFixed(2)}x`);
    }
  }
}

const at = process.argv.indexOf('--decision-child');
if (at >= 0) {
  const [side, what, n, k] = process.argv.slice(at + 1);
  await decisionChild(side, what, Number(n), Number(k));
} else if (process.argv.includes('--decisions')) decisions();
else provisions();
