// Instructions per provision with 10,000 in flight, for the router and the plain floor:
// a figure that, unlike time, does not move with the machine's load.
//
//   node bench/instructions.mjs            both sides (needs valgrind; ~4 minutes)
//   node bench/instructions.mjs --child native|floor ROUNDS   one side, ROUNDS batches (no valgrind)
//
// Each side runs under `valgrind --tool=callgrind` with `node --single-threaded --predictable`
// (deterministic to a few thousand instructions per run), once with 3 batches and once with
// 5; the difference divided by the 20,000 provisions of the 2 extra batches is the warm,
// steady-state cost of one provision (start-up, module loading and JIT warm-up cancel out).
// The floor is the same plain-JS provision the bench's section b measures.
import { spawnSync } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { prepareRegistry, planPrepared } from './plain-router.mjs';

const SELF = fileURLToPath(import.meta.url);
const N = 10_000;

function instantRuntime() {
  let n = 0;
  return { launch: async () => ({ id: `remote-${++n}` }), destroy: async () => {} };
}
const signals = (i) => ({ estimatedCost: 0.1 + i / 10, coldStartLatencyMs: 100 + i, readyLatencyMs: 300 + i, completionWithinBudgetRate: 0.99, available: true });
let seq = 0;
/** A request as callers make them: fresh, with per-call labels. */
const fresh = () => ({ launch: { labels: { requestId: `req-${++seq}`, team: 'bench' } } });

async function child(kind, rounds) {
  const defs = Array.from({ length: 6 }, (_, i) => ({ id: `pool-${i}`, runtime: instantRuntime(), capabilities: {}, signals: signals(i) }));
  let make;
  if (kind === 'native') {
    const { SandboxRouter, InMemoryProviderRegistry } = await import('../index.js');
    const registry = new InMemoryProviderRegistry(defs);
    make = () => {
      const router = new SandboxRouter({ registry });
      return (request) => router.provision(request);
    };
  } else {
    const plain = prepareRegistry(defs);
    const byId = new Map(defs.map((d) => [d.id, d]));
    make = () => {
      const buf = Buffer.allocUnsafe(4096);
      let pos = buf.length;
      const nextId = () => {
        if (pos + 16 > buf.length) {
          randomFillSync(buf);
          pos = 0;
        }
        const id = 'sbx_' + buf.toString('hex', pos, pos + 16);
        pos += 16;
        return id;
      };
      const mappings = new Map();
      return async (request) => {
        const def = byId.get(planPrepared(plain, request).order[0]);
        const id = nextId();
        const labels = { ...request?.launch?.labels, 'agent-relay-sbx-id': id };
        const handle = await def.runtime.launch({ labels });
        if (handle === null || typeof handle !== 'object' || typeof handle.id !== 'string') throw new Error('malformed handle');
        mappings.set(id, { id, providerId: def.id, providerSandboxId: handle.id, labels, createdAt: new Date().toISOString(), detached: false });
        return { id, providerId: def.id, labels: { ...labels } };
      };
    };
  }
  for (let r = 0; r < rounds; r++) {
    const provision = make();
    globalThis.gc?.();
    const out = await Promise.all(Array.from({ length: N }, () => provision(fresh())));
    if (out.length !== N) throw new Error('lost provisions');
  }
}

function instructions(kind, rounds) {
  const r = spawnSync(
    'valgrind',
    ['--tool=callgrind', '--callgrind-out-file=/dev/null', process.execPath, '--expose-gc', '--single-threaded', '--predictable', SELF, '--child', kind, String(rounds)],
    { encoding: 'utf8' },
  );
  const m = /Collected : (\d+)/.exec(r.stderr ?? '');
  if (r.status !== 0 || !m) throw new Error(`valgrind ${kind} ${rounds} failed (${r.status ?? r.error?.message}): ${(r.stderr ?? '').slice(-400)}`);
  return Number(m[1]);
}

if (process.argv[2] === '--child') {
  await child(process.argv[3], Number(process.argv[4]));
} else {
  const per = {};
  for (const kind of ['native', 'floor']) per[kind] = (instructions(kind, 5) - instructions(kind, 3)) / (2 * N);
  console.log(`instructions per provision, 10,000 in flight, warm (callgrind):`);
  console.log(`  native router.provision(fresh request): ${(per.native / 1000).toFixed(1)}k`);
  console.log(`  plain floor (with routing):             ${(per.floor / 1000).toFixed(1)}k`);
  console.log(`  floor / native (throughput ratio by count): ${(per.floor / per.native).toFixed(2)}x`);
}
