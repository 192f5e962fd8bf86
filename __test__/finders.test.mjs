// The fallback finder (a pool without a native finder lists through its runtime's
// findAllByLabels): the answer is read once here and judged by the native stamp rule
// (src/readers/stamp.rs). Pairs: what must be found, and what must not.
import test from 'node:test';
import assert from 'node:assert/strict';
import finders from '../lib/finders.js';

const { finderFor, SANDBOX_FLEET_LABEL, SANDBOX_ID_LABEL } = finders;
const ID = `sbx_${'ab'.repeat(16)}`;
const stamp = (fleet, id = ID) => ({ [SANDBOX_FLEET_LABEL]: fleet, [SANDBOX_ID_LABEL]: id });
const finderOf = (answer) => finderFor({ runtime: { findAllByLabels: async () => answer() } });
/** A finder's answer with its listing's columns read back as rows. */
async function rows(pending) {
  const { reason, listing: l } = await pending;
  const items = l.providerSandboxIds.map((providerSandboxId, i) => ({
    providerSandboxId,
    sandboxId: l.sandboxIds[i],
    createdAtMs: Number.isNaN(l.createdAtMs[i]) ? null : l.createdAtMs[i],
    verified: l.verified[i] === 1,
  }));
  return { reason, items };
}

test('must-fire: a handle with the whole stamp is verified; one without labels is kept unverified', async () => {
  const r = await rows(
    finderOf(() => [
      { id: 'a', labels: stamp('blue'), createdAt: '2026-01-01T00:00:00.000Z' },
      { id: 'b', createdAt: 'Thu, 01 Jan 2026 00:00:00 GMT' },
    ]).find('blue', 1000),
  );
  assert.deepEqual(r, {
    reason: null,
    items: [
      { providerSandboxId: 'a', sandboxId: ID, createdAtMs: Date.UTC(2026, 0, 1), verified: true },
      { providerSandboxId: 'b', sandboxId: null, createdAtMs: Date.UTC(2026, 0, 1), verified: false },
    ],
  });
});

test('must-not-fire: another fleet, a malformed id label, or an unparsable date find nothing more', async () => {
  const r = await rows(
    finderOf(() => [
      { id: 'a', labels: stamp('green') },
      { id: 'b', labels: stamp('blue', 'sbx_nope') },
      { id: 'c', labels: { team: 'x' } },
      { id: 'd', createdAt: 'yesterday' },
    ]).find('blue', 1000),
  );
  assert.deepEqual(r, { reason: null, items: [{ providerSandboxId: 'd', sandboxId: null, createdAtMs: null, verified: false }] });
});

test('must-fire: an answer that is not a list of handles is MALFORMED, a throwing getter included', async () => {
  const hostile = { get id() { throw new Error('sk_canary'); } };
  for (const answer of [{}, [null], [{ id: '' }], [{ id: 7 }], [hostile]]) {
    assert.deepEqual(await rows(finderOf(() => answer).find('blue', 1000)), { reason: 'MALFORMED', items: [] });
  }
});

test('must-not-fire: a runtime without findAllByLabels is NOT_SUPPORTED, one that throws is READ_FAILED', async () => {
  assert.deepEqual(await rows(finderFor({ runtime: {} }).find('blue', 1000)), { reason: 'NOT_SUPPORTED', items: [] });
  const throwing = finderFor({ runtime: { findAllByLabels: async () => { throw new Error('sk_canary'); } } });
  assert.deepEqual(await rows(throwing.find('blue', 1000)), { reason: 'READ_FAILED', items: [] });
});

test('must-fire: findAllByLabels is read once and called as read, a getter answering differently later included', async () => {
  let reads = 0;
  const runtime = {
    get findAllByLabels() {
      reads++;
      if (reads > 1) throw new Error('read twice');
      return async function (labels) {
        assert.equal(this, runtime);
        return labels[SANDBOX_FLEET_LABEL] === 'blue' ? [{ id: 'a', labels: stamp('blue') }] : [];
      };
    },
  };
  const r = await rows(finderFor({ runtime }).find('blue', 1000));
  assert.equal(reads, 1);
  assert.deepEqual(r, { reason: null, items: [{ providerSandboxId: 'a', sandboxId: ID, createdAtMs: null, verified: true }] });
  const throwing = { get findAllByLabels() { throw new Error('sk_canary'); } };
  assert.deepEqual(await rows(finderFor({ runtime: throwing }).find('blue', 1000)), { reason: 'NOT_SUPPORTED', items: [] });
});

test('must-not-fire: a plain findAllByLabels method lists as before', async () => {
  const runtime = { findAllByLabels: async () => [{ id: 'a', labels: stamp('blue') }] };
  const r = await rows(finderFor({ runtime }).find('blue', 1000));
  assert.deepEqual(r, { reason: null, items: [{ providerSandboxId: 'a', sandboxId: ID, createdAtMs: null, verified: true }] });
});
