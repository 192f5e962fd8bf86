// The shape anchors of lib/provision.js keep the per-provision object shapes alive between
// bursts, so a full GC while nothing is in flight does not throw away the optimized code
// of the provision path. Without them every burst recompiled it: ~13k instructions of
// TurboFan work per provision in a 10,000-provision burst (bench/instructions.mjs).
//
// Read through V8's own --trace-deopt: "weak objects" marks code whose embedded shapes died.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CHILD = fileURLToPath(new URL('./fixtures/burst-child.cjs', import.meta.url));

/**
 * Functions whose code depends only on our own objects' shapes (not on a caller's label
 * keys), so nothing but a dropped anchor can make them lose their code between bursts.
 */
const OURS = new Set(['InFlight', 'takeSettlers', 'add', 'settle', '#unlink', 'end', 'acquire', 'took', 'launch', 'delivered', 'succeeded', 'CallRequest', 'compile']);

/** The provision-path functions V8 dropped for "weak objects" after the first burst. */
function droppedAfterWarmup(mode) {
  // --no-concurrent-recompilation: V8 optimizes on the main thread, as soon as a function
  // is hot, so whether the provision path is optimized when the GC runs does not depend on
  // a background thread's timing (with it on, a loaded machine sometimes had not installed
  // the code yet, and the must-fire case saw nothing to drop).
  const flags = ['--expose-gc', '--no-concurrent-recompilation', '--trace-deopt'];
  const r = spawnSync(process.execPath, [...flags, CHILD, mode], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^DONE$/m);
  const afterWarmup = r.stdout.slice(r.stdout.indexOf('BURST 1'));
  const names = [...afterWarmup.matchAll(/<SharedFunctionInfo ([^>]+)>.*reason: weak objects/g)].map((m) => m[1]);
  return names.filter((name) => OURS.has(name));
}

test('shape anchors: must-not-fire — with the anchors, a full GC between bursts keeps the provision path optimized', () => {
  assert.deepEqual(droppedAfterWarmup('keep'), []);
});

test('shape anchors: must-fire — with the anchors dropped, the same bursts lose the provision path code', () => {
  const dropped = droppedAfterWarmup('drop');
  assert.ok(dropped.length >= 3, `expected several provision-path functions dropped, got ${JSON.stringify(dropped)}`);
});
