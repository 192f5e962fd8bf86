// The bench's pools and request: seeded, realistic pool declarations (six provider
// families, regions, resources, signals) and a request with a couple of requirements.
// Shared by bench.mjs (wall clock) and instructions.mjs (callgrind counts).

export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FAMILIES = [
  { name: 'e2b', isolation: 'microvm', egress: 'open', caps: ['syncExec', 'asyncExec', 'fileTransfer', 'pty', 'publicPorts', 'snapshots', 'lifecycle'] },
  { name: 'daytona', isolation: 'container', egress: 'allowlist', caps: ['syncExec', 'fileTransfer', 'pty', 'ssh', 'docker', 'lifecycle', 'persistentVolumes'] },
  { name: 'modal', isolation: 'gvisor', egress: 'open', caps: ['syncExec', 'asyncExec', 'fileTransfer', 'gpu', 'snapshots'] },
  { name: 'fly', isolation: 'microvm', egress: 'open', caps: ['syncExec', 'fileTransfer', 'pty', 'publicPorts', 'longRunningProcesses', 'stablePid', 'processRestart', 'ssh'] },
  { name: 'k8s', isolation: 'container', egress: 'none', caps: ['syncExec', 'asyncExec', 'fileTransfer', 'pty', 'docker', 'privileged', 'nestedUserNamespaces'] },
  { name: 'local', isolation: 'process', egress: 'open', caps: ['syncExec', 'asyncExec', 'fileTransfer', 'pty', 'longRunningProcesses'] },
];
const REGIONS = ['eu-west', 'eu-central', 'us-east', 'us-west', 'ap-south', 'ap-northeast'];
const EXTRA_CAPS = ['warmLease', 'tailnet', 'unattendedEnrollment', 'x-fpga'];

/**
 * `n` pool definitions (without a runtime) drawn from `seed`.
 * @returns {any[]} plain data, typed loosely: the bench's families are wider than the literal unions
 */
export function makeDefinitions(n, seed) {
  const rnd = mulberry32(seed);
  const pick = (xs) => xs[Math.floor(rnd() * xs.length)];
  const round = (x, d) => Math.round(x * 10 ** d) / 10 ** d;
  const defs = [];
  for (let i = 0; i < n; i++) {
    const fam = FAMILIES[i % FAMILIES.length];
    const caps = fam.caps.filter(() => rnd() > 0.1);
    if (rnd() < 0.3) caps.push(pick(EXTRA_CAPS));
    const regions = [pick(REGIONS)];
    if (rnd() < 0.4) {
      const r2 = pick(REGIONS);
      if (r2 !== regions[0]) regions.push(r2);
    }
    const cold = Math.round(100 + rnd() * 2900);
    defs.push({
      id: `${fam.name}-${regions[0]}-${i}`,
      capabilities: {
        supported: [...new Set(caps)],
        image: { identity: pick(['agent-v4', 'agent-v5']), binaries: ['node', 'git', 'bash', ...(rnd() < 0.5 ? ['python3'] : [])] },
        egress: fam.egress,
        timeout: {
          semantics: rnd() < 0.7 ? ['command-lifetime', 'sandbox-lifetime'] : ['command-lifetime', 'idle'],
          granularityMs: pick([100, 1000]),
          maxSandboxLifetimeMs: pick([3_600_000, 86_400_000, null]),
        },
        stateDurability: pick(['ephemeral', 'session', 'persistent']),
        restrictions: rnd() < 0.5 ? ['read-only-root'] : [],
        regions,
        resources: {
          cpu: pick([2, 4, 8, 16]),
          memoryMb: pick([2048, 4096, 8192, 32768]),
          diskMb: pick([10_240, 51_200, 102_400]),
          gpu: fam.name === 'modal' ? pick([0, 1, 8]) : 0,
        },
        isolation: fam.isolation,
      },
      signals: {
        estimatedCost: round(0.01 + rnd() * 0.5, 4),
        coldStartLatencyMs: cold,
        readyLatencyMs: cold + Math.round(200 + rnd() * 4800),
        completionWithinBudgetRate: round(0.85 + rnd() * 0.149, 3),
        available: rnd() < 0.95,
      },
    });
  }
  return defs;
}

// A request with a couple of requirements: a good share of pools stays eligible. `newRequest()`
// makes it as most callers do, a new object per call; REQUEST is one such object, reused.
/** @returns {import('../index.js').SandboxRequest} */
export const newRequest = () => ({
  requires: { requiredCapabilities: ['pty', 'fileTransfer'], isolation: 'container' },
  resources: { cpu: 2, memoryMb: 4096 },
  region: { preferred: ['eu-west', 'eu-central'] },
  routing: { strategy: 'balanced' },
});
export const REQUEST = newRequest();
