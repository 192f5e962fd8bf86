// `npm run demo` is part of the test suite: it must run offline, exit 0 quickly, show the
// decision it promises, and leave no temporary directory behind.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const localDirs = () => readdirSync(tmpdir()).filter((d) => d.startsWith('sandbox-router-local-'));

test('demo: runs offline, explains, provisions, falls back, spills over and cleans up', () => {
  const before = new Set(localDirs());
  const started = Date.now();
  const run = spawnSync(process.execPath, ['examples/demo.mjs'], { cwd: root, encoding: 'utf8', timeout: 30_000, env: { PATH: process.env.PATH } });
  assert.equal(run.status, 0, run.stderr);
  assert.ok(Date.now() - started < 15_000, 'demo finishes within seconds');
  const out = run.stdout;
  // The decision: local-fast chosen, local-pty ranked lower, local-cheap rejected for latency.
  assert.match(out, /2\/3 providers eligible: 1 ready latency over 2000 ms/);
  assert.match(out, /1 +local-fast .*CHOSEN/);
  assert.match(out, /2 +local-pty .*ranked lower/);
  assert.match(out, /local-cheap .*rejected: LATENCY_BUDGET \(ready latency 2300 ms > 2000 ms\)/);
  assert.match(out, /1\/3 providers eligible: 2 missing capability pty/);
  // Use: a command and a file round trip.
  assert.match(out, /echo hello → "hello\\n" exit 0/);
  assert.match(out, /read back → "round trip ok\\n"/);
  // Classified fallback and capacity spillover.
  assert.match(out, /attempt\.failed local-fast PROVIDER_CAPACITY_PRE_ALLOCATION retryable=true/);
  assert.match(out, /fallback\.advanced → local-pty/);
  assert.match(out, /capacity\.skipped local-fast EXHAUSTED sandboxes/);
  assert.match(out, /first → local-fast, second → local-pty/);
  assert.match(out, /every sandbox directory removed/);
  const after = localDirs().filter((d) => !before.has(d));
  assert.deepEqual(after, [], 'no temporary directory left behind');
});
