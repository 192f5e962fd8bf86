// Process manifests against the embedded local runtime: real processes, real files, only
// the runtime port (router.runScript). Guards come in pairs: "(must-fire)" = the guard
// triggers, "(must-not-fire)" = the legitimate neighbour goes through.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import net from 'node:net';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';

import {
  SandboxRouter,
  InMemoryProviderRegistry,
  SandboxRouterError,
  SandboxRequestValidationError,
  SandboxNotFoundError,
} from '../index.mjs';
import { createLocalRuntime, LOCAL_CAPABILITIES } from '../local/index.mjs';

const require = createRequire(import.meta.url);
const {
  validateManifest,
  planStartup,
  planTeardown,
  startManifest,
  teardownManifest,
  checkIdle,
  ManifestStartError,
  MANIFEST_START_REASONS,
} = require('../lib/manifest.js');

const CANARY = 'canary-output-5e1d0b7a';
const SIGNALS = { estimatedCost: 1, coldStartLatencyMs: 1, readyLatencyMs: 1, completionWithinBudgetRate: 1, available: true };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let rt;
let router;

before(() => {
  rt = createLocalRuntime();
  router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([{ id: 'local', runtime: rt, capabilities: LOCAL_CAPABILITIES, signals: SIGNALS }]),
  });
});

after(async () => {
  await rt.close();
});

/** A provisioned sandbox, destroyed when the test ends: `{ id, dir }`. */
async function sandbox(t) {
  const { id } = await router.provision({});
  t.after(() => router.destroy(id).catch(() => {}));
  const record = await router.getSandbox(id);
  const handle = await rt.getById(record.providerSandboxId);
  return { id, dir: handle.homeDir };
}

/** Live (non-zombie) host processes whose working directory is `dir` or below it. */
function liveIn(dir) {
  const out = [];
  for (const pid of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
      if (cwd !== dir && !cwd.startsWith(`${dir}/`)) continue;
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z') out.push(Number(pid));
    } catch {
      /* gone, or not ours */
    }
  }
  return out;
}

async function eventually(fn, ms = 3000) {
  const end = Date.now() + ms;
  for (;;) {
    if (fn()) return true;
    if (Date.now() > end) return false;
    await sleep(25);
  }
}

const lines = (dir, file) =>
  fs.existsSync(path.join(dir, file)) ? fs.readFileSync(path.join(dir, file), 'utf8').split('\n').filter(Boolean) : [];

/** A shell loop that appends `name` to `file` on SIGTERM and then exits. */
const polite = (name, file = 'order.log', before = '') =>
  `trap 'echo ${name} >> ${file}; exit 0' TERM; ${before} while :; do sleep 0.05; done`;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// ---------------------------------------------------------------------------------------
// Readiness

test('readiness: probes that pass late (log line, port, command) are not a timeout (must-not-fire)', async (t) => {
  const { id, dir } = await sandbox(t);
  const port = await freePort();
  const server = `require('net').createServer().listen(${port}, '127.0.0.1')`;
  const manifest = {
    processes: [
      {
        name: 'web',
        command: 'echo start-web >> events.log; sleep 0.2; touch web.ready; exec sleep 30',
        dependsOn: ['api'],
        readiness: { command: 'test -f web.ready', timeoutMs: 5000, intervalMs: 50 },
      },
      {
        name: 'api',
        command: `echo start-api >> events.log; sleep 0.3; exec node -e "${server}"`,
        dependsOn: ['db'],
        readiness: { port, timeoutMs: 5000, intervalMs: 50 },
      },
      {
        name: 'db',
        command: 'echo start-db >> events.log; sleep 0.3; echo "db accepting connections"; echo ready-db >> events.log; exec sleep 30',
        readiness: { logLine: 'accepting connections', timeoutMs: 5000, intervalMs: 50 },
      },
    ],
  };
  const started = await startManifest(router, id, manifest);
  assert.equal(started.useful, true);
  assert.deepEqual(
    started.processes.map((p) => p.name),
    ['db', 'api', 'web'],
  );
  for (const p of started.processes) {
    assert.ok(Number.isInteger(p.pid) && Number.isInteger(p.pgid), 'pid and pgid recorded');
    assert.ok(p.readyAfterMs >= 150, `${p.name} passed late (${p.readyAfterMs} ms), not at once`);
    assert.ok(p.readyAfterMs < 5000);
  }
  // A wave starts only once the previous one is ready.
  const events = lines(dir, 'events.log');
  assert.ok(events.indexOf('ready-db') < events.indexOf('start-api'), events.join(','));
  assert.ok(events.indexOf('start-api') < events.indexOf('start-web'), events.join(','));
  // Logs go to per-process files inside the sandbox.
  assert.match(fs.readFileSync(path.join(dir, '.relay/db.log'), 'utf8'), /accepting connections/);

  const report = await teardownManifest(router, id, started);
  assert.equal(report.complete, true);
  assert.deepEqual(
    report.steps.map((s) => s.name),
    ['web', 'api', 'db'],
  );
  assert.ok(await eventually(() => liveIn(dir).length === 0), 'nothing left running');
});

test('readiness: a probe that never passes times out, names the process and tears down what started (must-fire)', async (t) => {
  const { id, dir } = await sandbox(t);
  const manifest = {
    processes: [
      { name: 'base', command: polite('base'), teardown: { graceMs: 2000 } },
      {
        name: 'stuck',
        command: `echo ${CANARY}; echo ${CANARY} >&2; ${polite('stuck')}`,
        dependsOn: ['base'],
        readiness: { logLine: 'never printed', timeoutMs: 400, intervalMs: 50 },
        teardown: { graceMs: 2000 },
      },
    ],
  };
  const t0 = Date.now();
  const error = await startManifest(router, id, manifest).then(
    () => assert.fail('must reject'),
    (e) => e,
  );
  assert.ok(Date.now() - t0 >= 400, 'waited the whole readiness timeout');
  assert.ok(error instanceof ManifestStartError);
  assert.ok(error instanceof SandboxRouterError);
  assert.equal(error.code, 'MANIFEST_START_FAILED');
  assert.equal(error.process, 'stuck');
  assert.equal(error.reason, MANIFEST_START_REASONS.READINESS_TIMEOUT);
  assert.equal(error.sandboxId, id);
  // Sanitized: no command output anywhere in the error.
  assert.ok(!error.message.includes(CANARY));
  assert.ok(!JSON.stringify(error).includes(CANARY));
  assert.ok(!String(error.stack).includes(CANARY));
  // Torn down, dependents first, history-safe.
  assert.equal(error.teardown.complete, true);
  assert.deepEqual(
    error.teardown.steps.map((s) => [s.name, s.outcome]),
    [
      ['stuck', 'exited'],
      ['base', 'exited'],
    ],
  );
  assert.deepEqual(lines(dir, 'order.log'), ['stuck', 'base']);
  assert.ok(await eventually(() => liveIn(dir).length === 0), 'nothing left running');
});

test('early exit: a process that exits before it is ready fails with PROCESS_EXITED (must-fire)', async (t) => {
  const { id, dir } = await sandbox(t);
  const manifest = {
    processes: [
      { name: 'base', command: polite('base'), teardown: { graceMs: 2000 } },
      {
        name: 'crash',
        command: `echo ${CANARY}; sleep 0.1; exit 3`,
        dependsOn: ['base'],
        readiness: { command: 'false', timeoutMs: 5000, intervalMs: 50 },
      },
    ],
  };
  const error = await startManifest(router, id, manifest).then(
    () => assert.fail('must reject'),
    (e) => e,
  );
  assert.ok(error instanceof ManifestStartError);
  assert.equal(error.process, 'crash');
  assert.equal(error.reason, 'PROCESS_EXITED');
  assert.equal(error.exitCode, 3);
  assert.ok(!JSON.stringify(error).includes(CANARY));
  assert.deepEqual(lines(dir, 'order.log'), ['base']);
  assert.ok(await eventually(() => liveIn(dir).length === 0), 'nothing left running');
});

test('early exit: restart on-failure brings a process that failed once up (must-not-fire)', async (t) => {
  const { id, dir } = await sandbox(t);
  const manifest = {
    processes: [
      {
        name: 'flaky',
        command: 'if [ -f tried ]; then echo up; exec sleep 30; else touch tried; exit 1; fi',
        restart: 'on-failure',
        maxRestarts: 2,
        readiness: { logLine: 'up', timeoutMs: 5000, intervalMs: 50 },
        teardown: { graceMs: 1000 },
      },
    ],
  };
  const started = await startManifest(router, id, manifest);
  assert.equal(started.useful, true);
  assert.equal(started.processes[0].restarts, 1);
  const report = await teardownManifest(router, id, started);
  assert.equal(report.complete, true);
  assert.ok(await eventually(() => liveIn(dir).length === 0), 'nothing left running');
});

// ---------------------------------------------------------------------------------------
// Validation

test('cycle: a dependency cycle is refused before anything runs, naming the cycle (must-fire)', async (t) => {
  const { id, dir } = await sandbox(t);
  const manifest = {
    processes: [
      { name: 'a', command: 'touch ran-a; sleep 30', dependsOn: ['b'] },
      { name: 'b', command: 'touch ran-b; sleep 30', dependsOn: ['a'] },
    ],
  };
  const error = await startManifest(router, id, manifest).then(
    () => assert.fail('must reject'),
    (e) => e,
  );
  assert.ok(error instanceof SandboxRequestValidationError);
  assert.equal(error.code, 'INVALID_INPUT');
  assert.equal(error.field, 'processes[0].dependsOn[0]');
  assert.match(error.message, /cycle a → b → a/);
  assert.ok(!fs.existsSync(path.join(dir, '.relay')), 'nothing ran');
  assert.ok(!fs.existsSync(path.join(dir, 'ran-a')));
  for (const fn of [validateManifest, planStartup, planTeardown]) {
    assert.throws(() => fn(manifest), (e) => e instanceof SandboxRequestValidationError && /cycle a → b → a/.test(e.message));
  }
});

test('cycle: a diamond is not a cycle; plans are waves by name (must-not-fire)', () => {
  const manifest = {
    processes: [
      { name: 'top', command: 'x', dependsOn: ['right', 'left'] },
      { name: 'right', command: 'x', dependsOn: ['base'] },
      { name: 'left', command: 'x', dependsOn: ['base'] },
      { name: 'base', command: 'x', teardown: { flushCommand: 'sync', signal: 'SIGINT', graceMs: 5 } },
    ],
  };
  const normalized = validateManifest(manifest);
  assert.deepEqual(normalized.processes[1].teardown, { signal: 'SIGTERM', graceMs: 10000 });
  assert.deepEqual(validateManifest(normalized), normalized, 'normalizing is idempotent');
  const up = planStartup(manifest);
  assert.deepEqual(
    up.waves.map((w) => w.processes.map((p) => p.name)),
    [['base'], ['left', 'right'], ['top']],
  );
  const down = planTeardown({ processes: [...manifest.processes].reverse() });
  assert.deepEqual(down.order, ['top', 'left', 'right', 'base']);
  assert.deepEqual(
    down.waves[2].steps[0].phases.map((p) => p.action),
    ['flush', 'signal', 'wait', 'kill'],
  );
});

test('answers: the normalized manifest and both plans keep their documented shape and key order (regression: typed answers)', () => {
  const manifest = {
    processes: [
      { name: 'db', command: 'postgres', readiness: { port: 5432, timeoutMs: 30000, intervalMs: 200 }, teardown: { flushCommand: 'ck', signal: 'SIGINT', graceMs: 10 } },
      { name: 'api', command: 'node', dependsOn: ['db'], readiness: { logLine: 'listening', timeoutMs: 2000, intervalMs: 100 }, restart: 'on-failure', maxRestarts: 2 },
      { name: 'web', command: 'w', dependsOn: ['api', 'db'], readiness: { command: 'true', timeoutMs: 200, intervalMs: 10 }, restart: 'on-failure' },
      { name: 'z', command: 'z', restart: 'never', teardown: { graceMs: 0 } },
    ],
    idle: { quietMs: 1000, evidence: ['no-process-output', 'no-file-change'] },
  };
  // The exact text the JSON answers had before they crossed typed (keys sorted at every level).
  assert.equal(JSON.stringify(validateManifest(manifest)), '{"idle":{"evidence":["no-process-output","no-file-change"],"quietMs":1000},"processes":[{"command":"postgres","dependsOn":[],"name":"db","readiness":{"intervalMs":200,"port":5432,"timeoutMs":30000},"restart":"never","teardown":{"flushCommand":"ck","graceMs":10,"signal":"SIGINT"}},{"command":"node","dependsOn":["db"],"maxRestarts":2,"name":"api","readiness":{"intervalMs":100,"logLine":"listening","timeoutMs":2000},"restart":"on-failure","teardown":{"graceMs":10000,"signal":"SIGTERM"}},{"command":"w","dependsOn":["api","db"],"maxRestarts":3,"name":"web","readiness":{"command":"true","intervalMs":10,"timeoutMs":200},"restart":"on-failure","teardown":{"graceMs":10000,"signal":"SIGTERM"}},{"command":"z","dependsOn":[],"name":"z","restart":"never","teardown":{"graceMs":0,"signal":"SIGTERM"}}]}');
  assert.equal(JSON.stringify(planStartup(manifest)), '{"order":["db","z","api","web"],"waves":[{"processes":[{"command":"postgres","dependsOn":[],"name":"db","readiness":{"intervalMs":200,"port":5432,"timeoutMs":30000},"restart":"never","teardown":{"flushCommand":"ck","graceMs":10,"signal":"SIGINT"}},{"command":"z","dependsOn":[],"name":"z","restart":"never","teardown":{"graceMs":0,"signal":"SIGTERM"}}],"wave":0},{"processes":[{"command":"node","dependsOn":["db"],"maxRestarts":2,"name":"api","readiness":{"intervalMs":100,"logLine":"listening","timeoutMs":2000},"restart":"on-failure","teardown":{"graceMs":10000,"signal":"SIGTERM"}}],"wave":1},{"processes":[{"command":"w","dependsOn":["api","db"],"maxRestarts":3,"name":"web","readiness":{"command":"true","intervalMs":10,"timeoutMs":200},"restart":"on-failure","teardown":{"graceMs":10000,"signal":"SIGTERM"}}],"wave":2}]}');
  assert.equal(JSON.stringify(planTeardown(manifest)), '{"order":["web","api","db","z"],"waves":[{"steps":[{"name":"web","phases":[{"action":"signal","signal":"SIGTERM"},{"action":"wait","ms":10000},{"action":"kill","signal":"SIGKILL"}]}],"wave":0},{"steps":[{"name":"api","phases":[{"action":"signal","signal":"SIGTERM"},{"action":"wait","ms":10000},{"action":"kill","signal":"SIGKILL"}]}],"wave":1},{"steps":[{"name":"db","phases":[{"action":"flush","command":"ck"},{"action":"signal","signal":"SIGINT"},{"action":"wait","ms":10},{"action":"kill","signal":"SIGKILL"}]},{"name":"z","phases":[{"action":"signal","signal":"SIGTERM"},{"action":"wait","ms":0},{"action":"kill","signal":"SIGKILL"}]}],"wave":2}]}');
});

test('validation: unknown keys and bad bounds name the field (must-fire) / a minimal manifest passes (must-not-fire)', () => {
  const bad = [
    [{ processes: [{ name: 'a', command: 'x', restrat: 'never' }] }, 'processes[0].restrat'],
    [{ processes: [{ name: 'a', command: 'x', dependsOn: ['zz'] }] }, 'processes[0].dependsOn[0]'],
    [{ processes: [{ name: 'a', command: 'x', readiness: { port: 1, timeoutMs: 10 } }] }, 'processes[0].readiness.intervalMs'],
    [{ processes: [{ name: 'a', command: 'x' }], idle: { quietMs: 10, evidence: ['no-file-change'] } }, 'idle.quietMs'],
    [{ processes: [{ name: 'a', command: 'x' }], idle: { quietMs: 1000, evidence: ['no-cpu'] } }, 'idle.evidence[0]'],
    [{ processes: [{ name: 'A', command: 'x' }] }, 'processes[0].name'],
  ];
  for (const [m, field] of bad) {
    assert.throws(() => validateManifest(m), (e) => e instanceof SandboxRequestValidationError && e.field === field, field);
  }
  // A value JSON cannot carry is refused at its own field; a manifest that cannot be read at all is `manifest`.
  assert.throws(() => validateManifest({ processes: [{ name: 'a', command: 'x', n: 1n }] }), (e) => e.code === 'INVALID_INPUT' && e.field === 'processes[0].n');
  const cyclic = { processes: [{ name: 'a', command: 'x' }] };
  cyclic.processes[0].self = cyclic;
  assert.throws(() => validateManifest(cyclic), (e) => e.code === 'INVALID_INPUT' && e.field === 'manifest');
  assert.deepEqual(validateManifest({ processes: [{ name: 'a', command: 'x' }] }).processes[0].restart, 'never');
});

test('options and started: bad bounds, unknown keys and unsafe ids are refused before anything runs (must-fire)', async () => {
  const manifest = { processes: [{ name: 'a', command: 'sleep 30' }], idle: { quietMs: 1000, evidence: ['no-file-change'] } };
  const id = 'sbx_' + '0'.repeat(32);
  const refused = (field) => (e) => e instanceof SandboxRequestValidationError && e.code === 'INVALID_INPUT' && e.field === field;
  await assert.rejects(startManifest(router, id, manifest, { flushTimeoutMs: 0 }), refused('options.flushTimeoutMs'));
  await assert.rejects(startManifest(router, id, manifest, { flushTimeoutMs: 1.5 }), refused('options.flushTimeoutMs'));
  await assert.rejects(startManifest(router, id, manifest, { bogus: undefined }), refused('options.bogus'));
  await assert.rejects(startManifest(router, id, manifest, 'fast'), refused('options'));
  await assert.rejects(checkIdle(router, id, manifest, null, { timeoutMs: 3_600_001 }), refused('options.timeoutMs'));
  await assert.rejects(checkIdle(router, id, { processes: manifest.processes }), refused('idle'));
  await assert.rejects(checkIdle(router, id, manifest, { v: 1 }), refused('state'));
  // pid 1 and group 0 would signal every process or the caller's own group.
  for (const p of [{ name: 'a', pid: 1, pgid: 50 }, { name: 'a', pid: 50, pgid: 0 }, { name: 'a', pid: 50 }]) {
    await assert.rejects(teardownManifest(router, id, { manifest, processes: [p] }), refused('started.processes[0]'));
  }
  await assert.rejects(teardownManifest(router, id, { processes: [] }), refused('started'));
});

test('options and started: defaults, bounds and a teardown of nothing started go through (must-not-fire)', async () => {
  const manifest = { processes: [{ name: 'a', command: 'sleep 30' }] };
  const id = 'sbx_' + '0'.repeat(32);
  for (const options of [undefined, null, {}, { flushTimeoutMs: null }, { flushTimeoutMs: 1 }, { flushTimeoutMs: 3_600_000 }]) {
    assert.deepEqual(await teardownManifest(router, id, { manifest, processes: [] }, options), { complete: true, steps: [] });
  }
});

test('sandbox id: an unknown or malformed id rejects typed before anything runs (must-fire)', async () => {
  const manifest = { processes: [{ name: 'a', command: 'sleep 30' }] };
  await assert.rejects(startManifest(router, 'sbx_' + '0'.repeat(32), manifest), (e) => e instanceof SandboxNotFoundError && e.code === 'SANDBOX_NOT_FOUND');
  await assert.rejects(startManifest(router, 'not-an-id', manifest), (e) => e instanceof SandboxRequestValidationError);
  await assert.rejects(startManifest({}, 'sbx_x', manifest), (e) => e instanceof SandboxRequestValidationError && e.field === 'router');
});

// ---------------------------------------------------------------------------------------
// Teardown

test('teardown order: dependents stop before what they depend on, as the processes saw it (must-fire)', async (t) => {
  const { id, dir } = await sandbox(t);
  const g = { graceMs: 2000 };
  const manifest = {
    processes: [
      { name: 'a', command: polite('a'), teardown: g },
      { name: 'b', command: polite('b'), dependsOn: ['a'], teardown: g },
      { name: 'c', command: polite('c'), dependsOn: ['b'], teardown: g },
      { name: 'd', command: polite('d'), dependsOn: ['a'], teardown: g },
    ],
  };
  const started = await startManifest(router, id, manifest);
  assert.deepEqual(planTeardown(manifest).order, ['c', 'b', 'd', 'a']);
  const report = await teardownManifest(router, id, started);
  assert.equal(report.complete, true);
  const order = lines(dir, 'order.log');
  assert.equal(order.length, 4, order.join(','));
  assert.equal(order[0], 'c', 'c depends on b: it stops first');
  assert.deepEqual(order.slice(1, 3).sort(), ['b', 'd'], 'b and d stop in one wave');
  assert.equal(order[3], 'a', 'everything depends on a: it stops last');
  assert.ok(await eventually(() => liveIn(dir).length === 0), 'nothing left running');
});

test('teardown kill: a process that ignores its signal is killed after graceMs (must-fire) / a polite one exits (must-not-fire)', async (t) => {
  const { id, dir } = await sandbox(t);
  const manifest = {
    processes: [
      { name: 'polite', command: polite('polite'), teardown: { graceMs: 300 } },
      { name: 'stubborn', command: `trap '' TERM; while :; do sleep 0.05; done`, teardown: { graceMs: 300 } },
    ],
  };
  const started = await startManifest(router, id, manifest);
  const t0 = Date.now();
  const report = await teardownManifest(router, id, started);
  assert.ok(Date.now() - t0 >= 300, 'the grace period ran before the kill');
  assert.deepEqual(
    report.steps.map((s) => [s.name, s.outcome]),
    [
      ['polite', 'exited'],
      ['stubborn', 'killed'],
    ],
  );
  assert.deepEqual(lines(dir, 'order.log'), ['polite']);
  assert.ok(await eventually(() => liveIn(dir).length === 0), 'nothing left running');
});

test('flush: the flush command completes before the signal (must-fire)', async (t) => {
  const { id, dir } = await sandbox(t);
  const manifest = {
    processes: [
      {
        name: 'db',
        command: `trap 'echo "terminated:$(cat marker)" >> events.log; exit 0' TERM; while :; do sleep 0.05; done`,
        teardown: {
          flushCommand: 'for i in 1 2 3 4 5; do printf x >> marker; sleep 0.06; done; echo flushed >> events.log',
          graceMs: 2000,
        },
      },
    ],
  };
  const started = await startManifest(router, id, manifest);
  const report = await teardownManifest(router, id, started);
  assert.deepEqual(report.steps, [{ name: 'db', flush: 'ok', outcome: 'exited' }]);
  assert.equal(fs.readFileSync(path.join(dir, 'marker'), 'utf8'), 'xxxxx');
  // The process's own termination record saw the complete marker, after the flush.
  assert.deepEqual(lines(dir, 'events.log'), ['flushed', 'terminated:xxxxx']);
});

test('flush: a process that already exited is not flushed (must-not-fire)', async (t) => {
  const { id, dir } = await sandbox(t);
  const manifest = {
    processes: [{ name: 'db', command: 'exec sleep 30', teardown: { flushCommand: 'touch flushed', graceMs: 500 } }],
  };
  const started = await startManifest(router, id, manifest);
  await router.runScript(id, { command: `kill -s KILL -- -${started.processes[0].pgid}` });
  assert.ok(await eventually(() => liveIn(dir).length === 0));
  const report = await teardownManifest(router, id, started);
  assert.deepEqual(report.steps, [{ name: 'db', flush: 'skipped', outcome: 'already-exited' }]);
  assert.ok(!fs.existsSync(path.join(dir, 'flushed')));
});

// ---------------------------------------------------------------------------------------
// Evidence-gated idle (quietMs has a floor of 1000 ms)

/** Calls checkIdle every `everyMs` for `forMs`; returns every result. */
async function observe(id, manifest, forMs, everyMs = 250, state) {
  const out = [];
  const end = Date.now() + forMs;
  do {
    const r = await checkIdle(router, id, manifest, state);
    state = r.state;
    out.push(r);
    await sleep(everyMs);
  } while (Date.now() < end);
  return out;
}

const status = (r, source) => r.evidence.find((e) => e.source === source).status;

test('idle no-process-output: a process that keeps writing output is never idle (must-fire)', async (t) => {
  const { id } = await sandbox(t);
  const manifest = {
    processes: [{ name: 'chatty', command: 'while :; do echo tick; sleep 0.1; done', teardown: { graceMs: 500 } }],
    idle: { quietMs: 1000, evidence: ['no-process-output'] },
  };
  await startManifest(router, id, manifest);
  const seen = await observe(id, manifest, 1600);
  assert.ok(seen.length >= 4);
  assert.ok(seen.every((r) => r.idle === false));
  assert.equal(status(seen[0], 'no-process-output'), 'unknown', 'no baseline yet');
  assert.ok(seen.slice(1).every((r) => status(r, 'no-process-output') === 'active'));
});

test('idle no-file-change: a file that keeps changing is never idle (must-fire)', async (t) => {
  const { id } = await sandbox(t);
  const manifest = {
    processes: [{ name: 'writer', command: 'while :; do date +%N > heartbeat.txt; sleep 0.1; done', teardown: { graceMs: 500 } }],
    idle: { quietMs: 1000, evidence: ['no-file-change', 'no-process-output'] },
  };
  await startManifest(router, id, manifest);
  const seen = await observe(id, manifest, 1600);
  assert.ok(seen.every((r) => r.idle === false));
  assert.ok(seen.slice(1).every((r) => status(r, 'no-file-change') === 'active'));
  assert.ok(seen.slice(2).some((r) => status(r, 'no-process-output') === 'quiet'), 'output alone would have been quiet');
});

test('idle: a quiet sandbox is idle once every source agreed for quietMs (must-not-fire); unreadable evidence is never idle (must-fire)', async (t) => {
  const { id, dir } = await sandbox(t);
  const manifest = {
    processes: [{ name: 'svc', command: 'exec sleep 30', teardown: { graceMs: 500 } }],
    idle: { quietMs: 1000, evidence: ['no-running-command', 'no-open-session', 'no-file-change', 'no-process-output'] },
  };
  await startManifest(router, id, manifest);
  const t0 = Date.now();
  let r = await checkIdle(router, id, manifest);
  assert.equal(r.idle, false, 'the first observation never proves idle');
  const firstAt = Date.now();
  while (!r.idle && Date.now() - t0 < 6000) {
    await sleep(200);
    r = await checkIdle(router, id, manifest, r.state);
  }
  assert.equal(r.idle, true, JSON.stringify(r.evidence));
  assert.ok(Date.now() - firstAt >= 1000, 'not before quietMs');
  assert.ok(r.quietForMs >= 1000);
  assert.ok(r.evidence.every((e) => e.status === 'quiet' && e.quietForMs >= 1000));
  const idleState = r.state;
  // The state is opaque and JSON-serializable: a copy that went through JSON keeps observing.
  assert.deepEqual(Object.keys(idleState), ['v', 'token', 'key', 'sources', 'outputSizes']);
  const copied = await checkIdle(router, id, manifest, JSON.parse(JSON.stringify(idleState)));
  assert.equal(copied.idle, true, JSON.stringify(copied.evidence));
  assert.equal(copied.state.token, idleState.token, 'the same observer');

  // Unreadable output: the probe answers garbage, fails, or the router throws.
  const garbage = { runScript: async () => ({ stdout: 'no evidence here', stderr: '', exitCode: 0, timedOut: false }) };
  const failing = { runScript: async () => ({ stdout: '', stderr: '', exitCode: 1, timedOut: false }) };
  const throwing = {
    runScript: async () => {
      throw new Error('runtime down');
    },
  };
  for (const fake of [garbage, failing, throwing]) {
    const u = await checkIdle(fake, id, manifest, idleState);
    assert.equal(u.idle, false);
    assert.ok(u.evidence.every((e) => e.status === 'unknown' && e.quietForMs === 0), JSON.stringify(u.evidence));
    // The streak is broken: the next good observation starts over.
    const again = await checkIdle(router, id, manifest, u.state);
    assert.equal(again.idle, false);
  }

  // Missing evidence: a log that vanished is not "no output".
  fs.rmSync(path.join(dir, '.relay/svc.log'));
  const missing = await checkIdle(router, id, manifest, idleState);
  assert.equal(missing.idle, false);
  assert.equal(status(missing, 'no-process-output'), 'unknown');
  assert.equal(missing.evidence.find((e) => e.source === 'no-process-output').reason, 'MISSING');
  assert.equal(status(missing, 'no-running-command'), 'quiet', 'the other sources still read fine');
});

test('idle no-running-command: a command running in the sandbox blocks idle (must-fire) / the manifest\'s own processes do not (must-not-fire)', async (t) => {
  const { id } = await sandbox(t);
  const manifest = {
    processes: [{ name: 'svc', command: 'exec sleep 30', teardown: { graceMs: 500 } }],
    idle: { quietMs: 1000, evidence: ['no-running-command'] },
  };
  await startManifest(router, id, manifest);
  const quiet = await checkIdle(router, id, manifest);
  assert.equal(status(quiet, 'no-running-command'), 'quiet', 'manifest processes are not commands');
  const running = router.runScript(id, { command: 'sleep 0.8' });
  await sleep(150);
  const busy = await checkIdle(router, id, manifest, quiet.state);
  assert.equal(status(busy, 'no-running-command'), 'active');
  assert.equal(busy.idle, false);
  assert.equal(busy.quietForMs, 0);
  await running;
  const after = await checkIdle(router, id, manifest, busy.state);
  assert.equal(status(after, 'no-running-command'), 'quiet');
});

const hasScript = (() => {
  try {
    execFileSync('script', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

test('idle no-open-session: a process holding a terminal blocks idle (must-fire)', { skip: !hasScript && 'util-linux script not installed' }, async (t) => {
  const { id, dir } = await sandbox(t);
  const manifest = {
    processes: [{ name: 'svc', command: 'exec sleep 30', teardown: { graceMs: 500 } }],
    idle: { quietMs: 1000, evidence: ['no-open-session'] },
  };
  await startManifest(router, id, manifest);
  const quiet = await checkIdle(router, id, manifest);
  assert.equal(status(quiet, 'no-open-session'), 'quiet');
  // `script` gives its child a pseudo-terminal, as an interactive session would have.
  await router.runScript(id, { command: "script -qfc 'sleep 0.8' /dev/null >/dev/null 2>&1 </dev/null &" });
  await sleep(200);
  const open = await checkIdle(router, id, manifest, quiet.state);
  assert.equal(status(open, 'no-open-session'), 'active');
  assert.equal(open.idle, false);
  // The session's child left our process group (script calls setsid): let it end by itself.
  await router.destroy(id);
  assert.ok(await eventually(() => liveIn(dir).length === 0, 3000), 'nothing left running');
});
