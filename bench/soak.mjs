// The soak (`npm run bench -- --only=soak`, section k; issue 34): what a long-running,
// multi-tenant router keeps, measured as an operator would run it. A router over 6 pools of
// an instant in-memory runtime, health on, budgets keyed by the `tenant` label, every
// sandbox destroyed right after it is provisioned; the router's `clock` moves 10 ms per
// provision (100 provisions per second of router time, a busy router: at a 0.5 s median
// launch that is 50 launches in flight at all times), so windows fill, slide and roll over
// as they would in production, in seconds. Each phase runs in its own child process
// (`node --expose-gc`), and reads the process's RSS after forced GCs:
//
//   sliding-new   a sliding 60 s launches rule, a new tenant per provision: the growth per
//                 100,000 provisions after the first window (and the settle horizon) passed
//                 (measured over 300,000, as are daily-repeat and off)
//   daily-new     a calendar-day cost rule (UTC), a new tenant per provision: the growth over
//                 100,000 provisions of one day (every tenant active today is remembered)
//   daily-repeat  the same rule, 100 tenants taking turns: the growth per 100,000
//   day-two       after daily-new, the router clock past midnight and another 100,000 new
//                 tenants: the growth over the end of day one (day one's memory reused)
//   off           the same load without budgets (the control)
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SELF = fileURLToPath(import.meta.url);
const CHILD = '--soak-child';
const STEP_MS = 10;
const N = 100_000;
const MiB = 1024 * 1024;
const START = Date.parse('2026-06-01T01:00:00Z');

/** The targets (issue 34): MiB of RSS growth. */
export const SOAK_TARGETS = { slidingNew: 2, dailyNew: 16, dailyRepeat: 2, dayTwo: 10 };

/** @type {Record<'sliding' | 'daily', import('../index.js').BudgetRule[]>} */
const RULES = {
  sliding: [{ id: 'burst', key: { label: 'tenant' }, limit: { launches: 1e12 }, window: { slidingMs: 60_000 } }],
  daily: [{ id: 'daily-spend', key: { label: 'tenant' }, limit: { cost: 1e9 }, window: { every: 'day', timeZone: 'UTC' } }],
};

function pools(native) {
  const { InMemoryProviderRegistry } = native;
  let n = 0;
  const runtime = { id: 'instant', launch: async () => ({ id: `r-${++n}` }), destroy: async () => {} };
  const signals = (i) => ({ estimatedCost: 0.01 * (i + 1), coldStartLatencyMs: 100 + i, readyLatencyMs: 200 + i, completionWithinBudgetRate: 0.99, available: true });
  return new InMemoryProviderRegistry(Array.from({ length: 6 }, (_, i) => ({ id: `p${i}`, runtime, capabilities: {}, signals: signals(i) })));
}

/**
 * The process's retained memory after forced GCs: its RSS without the JS heap's committed
 * pages that hold nothing (`heapTotal - heapUsed`). Why not RSS alone? V8 keeps the pages of
 * a young generation it grew: without budgets, this load's RSS stepped up by 16 MiB at about
 * 250,000 provisions and stayed there while `heapUsed` stayed at 5 MiB (the router's native
 * memory, `rss - heapTotal`, did not move). The raw RSS is reported beside it.
 */
async function rss() {
  for (let i = 0; i < 3; i++) {
    globalThis.gc();
    await new Promise((r) => setTimeout(r, 20));
  }
  const m = process.memoryUsage();
  return { retained: m.rss - (m.heapTotal - m.heapUsed), raw: m.rss };
}

const minus = (a, b) => ({ retained: a.retained - b.retained, raw: a.raw - b.raw });
const per100k = (g) => ({ retained: g.retained / 3, raw: g.raw / 3 });

async function child(phase) {
  const native = await import('../index.js');
  const { SandboxRouter } = native;
  const clock = { now: START };
  const budgets = phase === 'off' ? undefined : phase === 'sliding-new' ? RULES.sliding : RULES.daily;
  const router = new SandboxRouter({ registry: pools(native), clock: () => clock.now, budgets });
  let i = 0;
  const run = async (n, tenant) => {
    for (let k = 0; k < n; k++, i++) {
      clock.now += STEP_MS;
      const s = await router.provision({ launch: { labels: { tenant: tenant(i) } } });
      await router.destroy(s.id);
    }
  };
  const fresh = (i) => `tenant-${i}`;
  const out = {};
  if (phase === 'sliding-new' || phase === 'off') {
    await run(N, fresh); // the first window, the settle horizon, and the JIT's warm-up
    // Per 100,000, over 300,000: what the run-to-run noise of a process's memory (±2 MiB
    // here) does to one 100,000 is divided by three.
    const before = await rss();
    await run(3 * N, fresh);
    out.growth = per100k(minus(await rss(), before));
  } else if (phase === 'daily-repeat') {
    // Past the settle horizon (30,000 provisions at 10 ms each) before measuring.
    await run(50_000, (i) => `tenant-${i % 100}`);
    const before = await rss();
    await run(3 * N, (i) => `tenant-${i % 100}`);
    out.growth = per100k(minus(await rss(), before));
  } else if (phase === 'daily-new') {
    await run(50_000, (i) => `warm-${i % 100}`);
    const before = await rss();
    await run(N, fresh);
    const dayOne = await rss();
    out.growth = minus(dayOne, before);
    out.keys = await router.budgetCount();
    // Day two: the router clock past midnight, the same load.
    clock.now = START + 86_400_000;
    await run(N, (i) => `day2-${i}`);
    out.dayTwo = minus(await rss(), dayOne);
    out.keysDayTwo = await router.budgetCount();
  }
  process.stdout.write(JSON.stringify(out));
}

function runChild(phase) {
  const r = spawnSync(process.execPath, ['--expose-gc', SELF, CHILD, phase], { encoding: 'utf8', maxBuffer: 1 << 20, timeout: 900_000 });
  if (r.status !== 0) throw new Error(`soak ${phase} failed (${r.status ?? r.signal}): ${r.stderr}`);
  return JSON.parse(r.stdout);
}

export async function runSoakBench() {
  const t0 = Date.now();
  const slidingNew = runChild('sliding-new');
  const daily = runChild('daily-new');
  const repeat = runChild('daily-repeat');
  const off = runChild('off');
  const mib = (b) => `${(b / MiB).toFixed(1)} MiB`;
  const per = (g) => `${Math.round(g.retained / N)} B`;
  const ok = (g, t) => (g.retained / MiB <= t ? 'met' : 'NOT met');
  const row = (measure, g, t, unit = '') => ({ measure, 'retained growth': mib(g.retained), 'per provision': `${per(g)}${unit}`, 'raw RSS growth': mib(g.raw), target: t === undefined ? '—' : `≤ ${t} MiB`, verdict: t === undefined ? '' : ok(g, t) });
  console.table([
    row('a new tenant each, sliding 60 s rule (per 100k, after the first window)', slidingNew.growth, SOAK_TARGETS.slidingNew),
    row('a new tenant each, daily cost rule (every tenant active today remembered)', daily.growth, SOAK_TARGETS.dailyNew, ' per tenant-day'),
    row('100 repeating tenants, daily rule (per 100k)', repeat.growth, SOAK_TARGETS.dailyRepeat),
    row('a second day of the daily load after the roll-over, over the end of day one', daily.dayTwo, SOAK_TARGETS.dayTwo),
    row('control: the sliding load without budgets (per 100k)', off.growth, undefined),
  ]);
  console.log(`budgetCount() at the end of day one: ${daily.keys} keys; at the end of day two: ${daily.keysDayTwo} (day one's are gone). Router clock: ${STEP_MS} ms per provision. (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  return { slidingNew: slidingNew.growth.retained, dailyNew: daily.growth.retained, dailyRepeat: repeat.growth.retained, dayTwo: daily.dayTwo.retained, off: off.growth.retained };
}

const at = process.argv.indexOf(CHILD);
if (at >= 0) await child(process.argv[at + 1]);
