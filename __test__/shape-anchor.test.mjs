// The shape anchor of lib/options.js (one idle router context, kept for the life of the
// process) keeps the router context's object shape alive between bursts, so a full GC while
// no router lives does not throw away the optimized code of the provision path. It stays
// because a measured run breaks the 10,000-concurrent floor without it (docs/performance.md).
//
// Read through V8's own --trace-deopt: "weak objects" marks code whose embedded shapes died.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CHILD = fileURLToPath(new URL('./fixtures/burst-child.cjs', import.meta.url));

/**
 * Functions of the provision path whose code depends on the router context's shape (they
 * read `ctx` or `run.ctx`). Others may lose their code between bursts for reasons of their
 * own (the requests' shapes: the serializer; code that inlined them): not what the anchor is for.
 */
const OURS = new Set(['took', 'drive', 'launched', 'launchOn', 'viewOf', 'needsExtras', 'healthNow', 'clockNow']);

/** The provision-path functions V8 dropped for "weak objects" after the first burst. */
function droppedAfterWarmup(mode) {
  // --no-concurrent-recompilation: V8 optimizes on the main thread, as soon as a function is
  // hot, so whether the provision path is optimized when the GC runs does not depend on a
  // background thread's timing.
  const flags = ['--expose-gc', '--no-concurrent-recompilation', '--trace-deopt'];
  const r = spawnSync(process.execPath, [...flags, CHILD, mode], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^DONE$/m);
  const afterWarmup = r.stdout.slice(r.stdout.indexOf('BURST 1'));
  const names = [...afterWarmup.matchAll(/<SharedFunctionInfo ([^>]+)>.*reason: weak objects/g)].map((m) => m[1]);
  return names.filter((name) => OURS.has(name));
}

test('shape anchor: must-not-fire — with the anchor, a full GC between bursts keeps the provision path optimized', () => {
  assert.deepEqual(droppedAfterWarmup('keep'), []);
});

test('shape anchor: must-fire — with the anchor dropped, the same bursts lose the provision path code', () => {
  const dropped = droppedAfterWarmup('drop');
  assert.ok(dropped.length >= 2, `expected provision-path functions dropped, got ${JSON.stringify(dropped)}`);
});
