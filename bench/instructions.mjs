// Instructions per provision with 10,000 in flight, for the router and the plain floor:
// a figure that, unlike time, does not move with the machine's load.
//
//   node bench/instructions.mjs      (npm run bench:instructions; needs valgrind, ~3 minutes)
//
// Each side is section b's 10,000-concurrent child (`bench.mjs --child native|floor ROUNDS`:
// the same pools, requests and plain floor), run under `valgrind --tool=callgrind` with
// `node --single-threaded --predictable` (deterministic to a few thousand instructions per
// run), once with 3 batches and once with 5; the difference divided by the 20,000
// provisions of the 2 extra batches is the warm, steady-state cost of one provision
// (start-up, module loading and JIT warm-up cancel out).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BENCH = fileURLToPath(new URL('./bench.mjs', import.meta.url));
const PER_BATCH = 10_000;

function instructions(kind, rounds) {
  const r = spawnSync(
    'valgrind',
    ['--tool=callgrind', '--callgrind-out-file=/dev/null', process.execPath, '--expose-gc', '--single-threaded', '--predictable', BENCH, '--child', kind, String(rounds)],
    { encoding: 'utf8' },
  );
  const m = /Collected : (\d+)/.exec(r.stderr ?? '');
  if (r.status !== 0 || !m) throw new Error(`valgrind ${kind} ${rounds} failed (${r.status ?? r.error?.message}): ${(r.stderr ?? '').slice(-400)}`);
  return Number(m[1]);
}

const per = {};
for (const kind of ['native', 'floor']) per[kind] = (instructions(kind, 5) - instructions(kind, 3)) / (2 * PER_BATCH);
console.log('instructions per provision, 10,000 in flight, warm (callgrind):');
console.log(`  native router.provision(fresh request): ${(per.native / 1000).toFixed(1)}k`);
console.log(`  plain floor (with routing):             ${(per.floor / 1000).toFixed(1)}k`);
console.log(`  floor / native (throughput ratio by count): ${(per.floor / per.native).toFixed(2)}x`);
