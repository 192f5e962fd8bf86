// npm run demo — the router end to end, offline, no keys.
//
// Three pools backed by the embedded local runtime (real child processes in private temp
// directories) declare different capabilities and signals. The demo explains a routing
// decision, provisions, runs a command and a file round trip, shows a classified fallback
// and a capacity spillover, then destroys everything it made.
import { InMemoryProviderRegistry, SandboxRouter } from '@agent-relay/sandbox-router';
import { createLocalRuntime, LOCAL_CAPABILITIES } from '@agent-relay/sandbox-router/local';

const runtimes = [];
function localRuntime() {
  const rt = createLocalRuntime();
  runtimes.push(rt);
  return rt;
}

// Example signals only (shaped like public benchmark figures), not measurements.
const pools = [
  {
    id: 'local-fast',
    capabilities: { ...LOCAL_CAPABILITIES, regions: ['eu-west'], resources: { cpu: 4, memoryMb: 8192 } },
    signals: { estimatedCost: 0.12, coldStartLatencyMs: 190, readyLatencyMs: 370, completionWithinBudgetRate: 0.97, available: true },
  },
  {
    id: 'local-cheap',
    capabilities: { ...LOCAL_CAPABILITIES, regions: ['us-east'], resources: { cpu: 2, memoryMb: 4096 } },
    signals: { estimatedCost: 0.03, coldStartLatencyMs: 1700, readyLatencyMs: 2300, completionWithinBudgetRate: 0.92, available: true },
  },
  {
    id: 'local-pty',
    capabilities: {
      ...LOCAL_CAPABILITIES,
      supported: [...LOCAL_CAPABILITIES.supported, 'pty'],
      regions: ['eu-west'],
      resources: { cpu: 8, memoryMb: 16384 },
    },
    signals: { estimatedCost: 0.3, coldStartLatencyMs: 490, readyLatencyMs: 820, completionWithinBudgetRate: 0.999, available: true },
  },
];

const pad = (s, n) => String(s).padEnd(n);
const num = (x, d = 2) => (typeof x === 'number' ? x.toFixed(d) : '');

function printExplanation(title, e) {
  console.log(`\n== ${title}`);
  console.log(`   ${e.summary}   (strategy ${e.strategy}, latency objective ${e.latencyObjective})`);
  console.log(`   ${pad('rank', 5)}${pad('pool', 13)}${pad('score', 7)}${pad('cost', 13)}${pad('latency', 15)}${pad('reliability', 14)}why`);
  for (const p of e.eligible) {
    const b = p.breakdown;
    const why = p.rank === 1 ? 'CHOSEN' : `ranked lower (score ${num(p.score)} < ${num(e.eligible[0].score)})`;
    console.log(
      `   ${pad(p.rank, 5)}${pad(p.providerId, 13)}${pad(num(p.score), 7)}${pad(`${b.cost.raw} (${num(b.cost.normalized)})`, 13)}` +
        `${pad(`${b.latency.raw}ms (${num(b.latency.normalized)})`, 15)}${pad(`${b.reliability.raw} (${num(b.reliability.normalized)})`, 14)}${why}${p.tieBreak ? ' [tie broken by id]' : ''}`,
    );
  }
  for (const r of e.rejected) {
    console.log(`   ${pad('-', 5)}${pad(r.providerId, 13)}${pad('', 49)}rejected: ${r.reasons.map((x) => `${x.code} (${x.detail})`).join(', ')}`);
  }
}

const log = (line) => console.log(`   ${line}`);
const eventLine = (e) =>
  [e.type, e.providerId, e.code, e.retryable === undefined ? undefined : `retryable=${e.retryable}`, e.status, e.reason, e.toProviderId && `→ ${e.toProviderId}`]
    .filter(Boolean)
    .join(' ');

async function main() {
  const registry = new InMemoryProviderRegistry(pools.map((p) => ({ ...p, runtime: localRuntime() })));
  const router = new SandboxRouter({ registry });

  // 1. Explain a decision.
  const request = {
    requires: { requiredCapabilities: ['syncExec', 'fileTransfer'], timeout: { maxReadyLatencyMs: 2000 } },
    resources: { cpu: 2 },
    region: { preferred: ['eu-west'] },
    routing: { strategy: 'balanced' },
  };
  printExplanation('Explain: 2 vCPU, sync exec + file transfer, ready within 2 s, prefer eu-west', await router.explain(request));
  printExplanation('Explain: the same request also requiring a PTY', await router.explain({ ...request, requires: { ...request.requires, requiredCapabilities: ['pty'] } }));

  // 2. Provision, run a command, round-trip a file.
  console.log('\n== Provision and use a sandbox');
  const sandbox = await router.provision({ ...request, launch: { labels: { demo: 'yes' } } });
  log(`provisioned ${sandbox.id} on ${sandbox.providerId} (labels ${JSON.stringify(sandbox.labels)})`);
  const hello = await router.runScript(sandbox.id, { command: 'echo hello' });
  log(`echo hello → ${JSON.stringify(hello.stdout)} exit ${hello.exitCode}`);
  await router.uploadBundle(sandbox.id, { files: [{ source: 'round trip ok\n', destination: 'notes/demo.txt' }] });
  const back = await router.runScript(sandbox.id, { command: 'cat notes/demo.txt' });
  log(`uploaded notes/demo.txt, read back → ${JSON.stringify(back.stdout)}`);
  await router.destroy(sandbox.id);
  log(`destroyed ${sandbox.id}`);

  // 3. Classified fallback: local-fast refuses launches before allocating anything, and
  //    the caller's classifier knows it, so the router may try the next pool.
  console.log('\n== Classified fallback');
  const refusing = localRuntime();
  refusing.launch = async () => {
    throw new Error('quota: launch refused before allocation');
  };
  const fallbackEvents = [];
  const fallbackRouter = new SandboxRouter({
    registry: new InMemoryProviderRegistry([
      { ...pools[0], runtime: refusing },
      { ...pools[2], runtime: localRuntime() },
    ]),
    observer: (e) => fallbackEvents.push(e),
    classifyProviderFailure: (_error, provider) =>
      provider.id === 'local-fast'
        ? { code: 'PROVIDER_CAPACITY_PRE_ALLOCATION', retryable: true }
        : { code: 'PROVIDER_LAUNCH_OUTCOME_UNKNOWN', retryable: false },
  });
  const fell = await fallbackRouter.provision({ routing: { strategy: 'latency' } });
  for (const e of fallbackEvents.filter((x) => x.type.startsWith('attempt') || x.type.startsWith('fallback'))) log(eventLine(e));
  log(`served by ${fell.providerId} after a proven pre-allocation refusal on local-fast`);
  await fallbackRouter.destroy(fell.id);

  // 4. Capacity spillover: local-fast has one slot; the second provision spills over.
  console.log('\n== Capacity spillover (providerOrder: local-fast, local-pty)');
  const slotReader = (runtime, limit) => ({
    async getCapacity() {
      const used = await runtime.countByLabels({});
      return { status: 'known', resources: [{ resource: 'sandboxes', used, limit, unit: 'sandboxes', headroom: limit - used, required: 1 }] };
    },
  });
  const fastRt = localRuntime();
  const ptyRt = localRuntime();
  const capacityEvents = [];
  const capacityRouter = new SandboxRouter({
    registry: new InMemoryProviderRegistry([
      { ...pools[0], runtime: fastRt, capacity: slotReader(fastRt, 1) },
      { ...pools[2], runtime: ptyRt, capacity: slotReader(ptyRt, 4) },
    ]),
    capacity: { providerOrder: ['local-fast', 'local-pty'], timeoutMs: 2000 },
    observer: (e) => capacityEvents.push(e),
  });
  const first = await capacityRouter.provision({});
  const second = await capacityRouter.provision({});
  for (const e of capacityEvents.filter((x) => x.type.startsWith('capacity'))) log(eventLine(e));
  log(`first → ${first.providerId}, second → ${second.providerId}`);
  const measured = await capacityRouter.getCapacity();
  for (const [id, m] of Object.entries(measured)) {
    const r = m.resources[0];
    log(`capacity ${id}: ${r.used}/${r.limit} ${r.unit} used, headroom ${r.headroom}`);
  }
  await capacityRouter.destroy(first.id);
  await capacityRouter.destroy(second.id);

  console.log('\n== Clean up');
  await Promise.all(runtimes.map((rt) => rt.close()));
  log(`closed ${runtimes.length} local runtimes; every sandbox directory removed`);
}

main().catch(async (error) => {
  console.error(`demo failed: ${error.name} [${error.code}] ${error.message}`);
  await Promise.allSettled(runtimes.map((rt) => rt.close()));
  process.exitCode = 1;
});
