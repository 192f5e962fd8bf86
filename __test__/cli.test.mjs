// The command line (issue 32 part 4): `sandbox-router replay` and `explain`, run as an operator
// runs them: a real child process, a records file written by jsonLinesSink, a config module.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { InMemoryProviderRegistry, SandboxRouter, jsonLinesSink } from '../index.mjs';

const BIN = fileURLToPath(new URL('../bin/sandbox-router.mjs', import.meta.url));
const INDEX = fileURLToPath(new URL('../index.mjs', import.meta.url));
const dir = mkdtempSync(path.join(tmpdir(), 'sandbox-router-cli-'));

/** A config module over two pools (pty on both; `cost0` for p0, 0.02 for p1). */
function config(name, cost0, caps0 = ['pty']) {
  const file = path.join(dir, `${name}.mjs`);
  writeFileSync(
    file,
    `import { InMemoryProviderRegistry } from ${JSON.stringify(INDEX)};
const runtime = { launch: async () => ({ id: 'x' }), destroy: async () => {} };
const signals = (estimatedCost) => ({ estimatedCost, coldStartLatencyMs: 100, readyLatencyMs: 500, completionWithinBudgetRate: 0.99, available: true });
export default { registry: new InMemoryProviderRegistry([
  { id: 'p0', runtime, capabilities: { supported: ${JSON.stringify(caps0)} }, signals: signals(${cost0}) },
  { id: 'p1', runtime, capabilities: { supported: ['pty'] }, signals: signals(0.02) },
]) };`,
  );
  return file;
}

const cli = (...args) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });

/** A records file: `n` decisions of the config `config('base', 0.01)` describes. */
async function records(n) {
  const file = path.join(dir, `records-${n}.jsonl`);
  const sink = jsonLinesSink(file);
  const runtime = { launch: async () => ({ id: 'x' }), destroy: async () => {} };
  const signals = (estimatedCost) => ({ estimatedCost, coldStartLatencyMs: 100, readyLatencyMs: 500, completionWithinBudgetRate: 0.99, available: true });
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([
      { id: 'p0', runtime, capabilities: { supported: ['pty'] }, signals: signals(0.01) },
      { id: 'p1', runtime, capabilities: { supported: ['pty'] }, signals: signals(0.02) },
    ]),
    decisions: { sink },
  });
  for (let i = 0; i < n; i++) await router.provision({ requires: { requiredCapabilities: ['pty'] } });
  await sink.close();
  return file;
}

test('cli replay must-not-fire: the same configuration replays every decision the same (exit 0, also with --fail-on-change)', async () => {
  const file = await records(5);
  const r = cli('replay', file, '--config', config('base', 0.01), '--fail-on-change');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^5 decisions: 5 the same, 0 change\n$/);
});

test('cli replay must-fire: a configuration that changes the choice prints the table and exits 3 with --fail-on-change', async () => {
  const file = await records(3);
  const r = cli('replay', file, '--config', config('dearer', 0.5), '--fail-on-change');
  assert.equal(r.status, 3, r.stderr);
  assert.match(r.stdout, /^3 decisions: 0 the same, 3 change\nrequest +was → now +why\n[0-9a-f]{12} +p0 → p1 +p0 definition changed: estimatedCost 0\.01 → 0\.5/);
  const json = cli('replay', file, '--config', config('gone', 0.01, []), '--json');
  assert.equal(json.status, 0, 'a change without --fail-on-change exits 0');
  const out = JSON.parse(json.stdout);
  assert.deepEqual([out.total, out.same, out.changed], [3, 0, 3]);
  assert.match(out.changes[0].why, /p0 now rejected: REQUIRED_CAPABILITY_MISSING/);
});

test('cli replay: an unreadable line is reported with its code and exits 1; usage errors exit 2 with the help', async () => {
  const file = await records(1);
  appendFileSync(file, 'not json\n{"schema":"sandbox-router.decision/9"}\n');
  const r = cli('replay', file, '--config', config('base2', 0.01));
  assert.equal(r.status, 1);
  assert.match(r.stderr, /line 2: INVALID_DECISION_RECORD \(\(root\)\)\nline 3: INVALID_DECISION_RECORD \(schema\)/);
  assert.match(r.stdout, /^3 decisions: 1 the same, 0 change, 2 unreadable/);
  const missing = cli('replay', file);
  assert.equal(missing.status, 2);
  assert.match(missing.stderr, /--config <module> is required\n\nusage: sandbox-router replay/);
  assert.equal(cli('frobnicate').status, 2);
});

test('cli --help on each command, and explain prints the decision', () => {
  for (const args of [['--help'], ['replay', '--help'], ['explain', '--help']]) {
    const r = cli(...args);
    assert.equal(r.status, 0);
    assert.match(r.stdout, /^usage: sandbox-router/);
  }
  const r = cli('explain', '--config', config('explain', 0.01, []), '--request', JSON.stringify({ requires: { requiredCapabilities: ['pty'] } }));
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^1\/2 providers eligible/);
  assert.match(r.stdout, /p1 +eligible, ranked 1/);
  assert.match(r.stdout, /p0 +rejected +REQUIRED_CAPABILITY_MISSING/);
  const bad = cli('explain', '--config', config('explain2', 0.01), '--request', JSON.stringify({ routing: { strategy: 'fastest' } }));
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /INVALID_REQUEST \(routing\.strategy\)/);
});
