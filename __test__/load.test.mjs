// Bounded load: 10,000 concurrent provisions against an instant in-memory runtime.
import test from 'node:test';
import assert from 'node:assert/strict';
import { InMemoryMappingStore, InMemoryProviderRegistry, SandboxRouter } from '../index.mjs';
import { definition } from './fixtures.mjs';

/**
 * 10,000 concurrent provisions over two pools whose every `failEvery`-th launch fails
 * retryably, then a destroy of every success. Checks: unique ids, one mapping per success
 * (`count()` reads the store), an empty store after the destroys, no unhandled rejection.
 */
async function load({ failEvery, mappings, count, observer }) {
  let unhandled = 0;
  const onUnhandled = () => unhandled++;
  process.on('unhandledRejection', onUnhandled);
  try {
    let n = 0;
    const instant = {
      id: 'instant',
      launch: async () => {
        n++;
        // Failing launches prove that failures leave no mapping behind.
        if (n % failEvery === 0) throw new Error('transient');
        return { id: `r${n}` };
      },
      destroy: async () => {},
    };
    const router = new SandboxRouter({
      registry: new InMemoryProviderRegistry([definition('a', { runtime: instant }), definition('b', { runtime: instant })]),
      mappings,
      observer,
      classifyProviderFailure: () => ({ code: 'TRANSIENT_PRE_ALLOCATION', retryable: true }),
    });
    const results = await Promise.allSettled(Array.from({ length: 10_000 }, () => router.provision({})));
    const ok = results.filter((r) => r.status === 'fulfilled').map((r) => r.value);
    assert.equal(ok.length + results.filter((r) => r.status === 'rejected').length, 10_000);
    assert.ok(ok.length > 9_000, `${ok.length} succeeded`);
    assert.equal(new Set(ok.map((s) => s.id)).size, ok.length, 'ids are unique');
    assert.equal(await count(), ok.length, 'one mapping per success');
    await Promise.all(ok.map((s) => router.destroy(s.id)));
    assert.equal(await count(), 0);
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(unhandled, 0);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
}

test('10,000 concurrent provisions: unique ids, mapping count = successes, no unhandled rejection, empty after destroy', async () => {
  const mappings = new InMemoryMappingStore();
  await load({ failEvery: 7, mappings, count: async () => mappings.size });
  assert.equal((await mappings.list()).length, 0);
});

test('10,000 concurrent provisions through a caller store and a throwing observer: same guarantees', async () => {
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
  await load({ failEvery: 11, mappings, observer, count: async () => records.size });
  assert.ok(events > 10_000, 'the observer saw every provision');
});
