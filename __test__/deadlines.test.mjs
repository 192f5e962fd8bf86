// The shared launch-deadline queue (lib/deadlines.js): one timer for every launch.
// Must-fire / must-not-fire pairs for expiry, plus ordering, reuse and idleness.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { spawnSync } from 'node:child_process';

const require = createRequire(import.meta.url);
const { Deadlines } = require('../lib/deadlines.js');

const entry = (name) => ({ name, at: 0, settled: true, prev: null, next: null });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function queue() {
  const expired = [];
  return { d: new Deadlines((e) => expired.push(e.name)), expired };
}

test('deadline must fire: an entry left unsettled past its time expires once', async () => {
  const { d, expired } = queue();
  const a = d.add(10, entry('a'));
  await sleep(40);
  assert.deepEqual(expired, ['a']);
  assert.equal(a.settled, true);
  assert.equal(d.settle(a), false, 'settling after expiry reports the expiry');
  assert.equal(d.size, 0);
});

test('deadline must not fire: an entry settled in time never expires', async () => {
  const { d, expired } = queue();
  const a = d.add(10, entry('a'));
  assert.equal(d.settle(a), true);
  assert.equal(d.settle(a), false, 'a second settle is refused');
  await sleep(40);
  assert.deepEqual(expired, []);
  assert.equal(d.size, 0);
});

test('entries with different timeouts expire in deadline order, whatever the order they were added in', async () => {
  const { d, expired } = queue();
  d.add(60, entry('late'));
  d.add(10, entry('early'));
  d.add(35, entry('middle'));
  const kept = d.add(20, entry('settled'));
  d.settle(kept);
  assert.equal(d.size, 3);
  await sleep(120);
  assert.deepEqual(expired, ['early', 'middle', 'late']);
  assert.equal(d.size, 0);
});

test('settling from the middle, the head and the tail keeps the others live', async () => {
  const { d, expired } = queue();
  const es = ['a', 'b', 'c', 'd', 'e'].map((n) => d.add(15, entry(n)));
  d.settle(es[2]);
  d.settle(es[0]);
  d.settle(es[4]);
  assert.equal(d.size, 2);
  await sleep(50);
  assert.deepEqual(expired, ['b', 'd']);
});

test('an entry settled in time can be added again (one entry per provision, reused per launch)', async () => {
  const { d, expired } = queue();
  const a = entry('a');
  d.add(10, a);
  d.settle(a);
  d.add(10, a);
  assert.equal(d.size, 1);
  await sleep(40);
  assert.deepEqual(expired, ['a']);
});

test('an idle queue keeps no timer: a process with only settled deadlines exits at once', () => {
  const script = `
    const { Deadlines } = require(${JSON.stringify(require.resolve('../lib/deadlines.js'))});
    const d = new Deadlines(() => {});
    const es = Array.from({ length: 1000 }, (_, i) => d.add(60000 + i, { at: 0, settled: true, prev: null, next: null }));
    for (const e of es) d.settle(e);
  `;
  const started = Date.now();
  const r = spawnSync(process.execPath, ['-e', script], { timeout: 20000 });
  assert.equal(r.status, 0);
  assert.ok(Date.now() - started < 10000, 'the process did not wait for a 60 s timer');
});

test('a live deadline does keep its timer (the must-fire side of the idle check)', () => {
  const script = `
    const { Deadlines } = require(${JSON.stringify(require.resolve('../lib/deadlines.js'))});
    const d = new Deadlines((e) => process.stdout.write('expired ' + e.name));
    d.add(200, { name: 'x', at: 0, settled: true, prev: null, next: null });
  `;
  const r = spawnSync(process.execPath, ['-e', script], { timeout: 20000, encoding: 'utf8' });
  assert.equal(r.status, 0);
  assert.equal(r.stdout, 'expired x');
});

test('a throwing expiry handler does not stop the other expired entries (and does not escape the timer)', async () => {
  const seen = [];
  const d = new Deadlines((e) => {
    seen.push(e.name);
    if (e.name === 'a') throw new Error('handler failed');
  });
  d.add(10, entry('a'));
  d.add(10, entry('b'));
  await sleep(40);
  assert.deepEqual(seen, ['a', 'b']);
});

test('a handler that does not throw sees every expired entry too (the must-not-fire side)', async () => {
  const seen = [];
  const d = new Deadlines((e) => seen.push(e.name));
  d.add(10, entry('a'));
  d.add(10, entry('b'));
  await sleep(40);
  assert.deepEqual(seen, ['a', 'b']);
});
