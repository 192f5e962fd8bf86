// Bounded load: 10,000 concurrent provisions against an instant in-memory runtime.
import test from 'node:test';
import assert from 'node:assert/strict';
import { InMemoryMappingStore, InMemoryProviderRegistry, SandboxRouter } from '../index.mjs';
import { definition } from './fixtures.mjs';

test('10,000 concurrent provisions: unique ids, mapping count = successes, no unhandled rejection, empty after destroy', async () => {
  let unhandled = 0;
  const onUnhandled = () => unhandled++;
  process.on('unhandledRejection', onUnhandled);
  try {
    let n = 0;
    const instant = {
      id: 'instant',
      launch: async () => {
        n++;
        // Every 7th launch fails, proving failures do not leave mappings behind.
        if (n % 7 === 0) throw new Error('transient');
        return { id: `r${n}` };
      },
      destroy: async () => {},
    };
    const mappings = new InMemoryMappingStore();
    const router = new SandboxRouter({
      registry: new InMemoryProviderRegistry([definition('a', { runtime: instant }), definition('b', { runtime: instant })]),
      mappings,
      classifyProviderFailure: () => ({ code: 'TRANSIENT_PRE_ALLOCATION', retryable: true }),
    });
    const results = await Promise.allSettled(Array.from({ length: 10_000 }, () => router.provision({})));
    const ok = results.filter((r) => r.status === 'fulfilled').map((r) => r.value);
    const failed = results.filter((r) => r.status === 'rejected');
    assert.equal(ok.length + failed.length, 10_000);
    assert.ok(ok.length > 9_000, `${ok.length} succeeded`);
    assert.equal(new Set(ok.map((s) => s.id)).size, ok.length, 'ids are unique');
    assert.equal(mappings.size, ok.length, 'one mapping per success');
    await Promise.all(ok.map((s) => router.destroy(s.id)));
    assert.equal(mappings.size, 0);
    assert.equal((await mappings.list()).length, 0);
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(unhandled, 0);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});

test('10,000 concurrent provisions through a caller store and a throwing observer: same guarantees', async () => {
  let unhandled = 0;
  const onUnhandled = () => unhandled++;
  process.on('unhandledRejection', onUnhandled);
  try {
    let n = 0;
    const instant = {
      id: 'instant',
      launch: async () => {
        n++;
        if (n % 11 === 0) throw new Error('transient');
        return { id: `r${n}` };
      },
      destroy: async () => {},
    };
    const records = new Map();
    const mappings = {
      put: async (r) => void records.set(r.id, r),
      get: async (id) => records.get(id) ?? null,
      delete: async (id) => records.delete(id),
    };
    let events = 0;
    const observer = () => {
      events++;
      if (events % 2 === 0) throw new Error('observer down');
      return Promise.reject(new Error('observer rejects'));
    };
    const router = new SandboxRouter({
      registry: new InMemoryProviderRegistry([definition('a', { runtime: instant }), definition('b', { runtime: instant })]),
      mappings,
      observer,
      classifyProviderFailure: () => ({ code: 'TRANSIENT_PRE_ALLOCATION', retryable: true }),
    });
    const results = await Promise.allSettled(Array.from({ length: 10_000 }, () => router.provision({})));
    const ok = results.filter((r) => r.status === 'fulfilled').map((r) => r.value);
    assert.ok(ok.length > 9_000, `${ok.length} succeeded`);
    assert.equal(new Set(ok.map((s) => s.id)).size, ok.length, 'ids are unique');
    assert.equal(records.size, ok.length, 'one mapping per success');
    assert.ok(events > 10_000, 'the observer saw every provision');
    await Promise.all(ok.map((s) => router.destroy(s.id)));
    assert.equal(records.size, 0);
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(unhandled, 0);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});
