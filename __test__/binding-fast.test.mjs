// The two entry points registered without napi-rs's per-call glue (src/binding_fast.rs):
// beginAcquisition and acquisitionSucceeded. They call the #[napi] functions whose
// signatures generate binding.d.ts; these tests hold the arguments' conversion to what
// those signatures promise.
import test from 'node:test';
import assert from 'node:assert/strict';
import { InMemoryProviderRegistry, InMemoryMappingStore } from '../index.mjs';

const { binding } = await import('../lib/binding.js');
const { nativeView } = await import('../lib/registry.js');
const { compile } = await import('../lib/compile.js');
const { STORE_KEY } = await import('../lib/mappings.js');

const signals = { estimatedCost: 1, coldStartLatencyMs: 100, readyLatencyMs: 1000, completionWithinBudgetRate: 0.9, available: true };
const runtime = { launch: async () => ({ id: 'r' }), destroy: async () => {} };

function fixture() {
  const registry = new InMemoryProviderRegistry([{ id: 'a', runtime, capabilities: {}, signals }]);
  const view = nativeView(registry);
  const call = compile({ launch: { labels: { team: 'x' } } });
  return { view, call, step: new Uint32Array(3) };
}

test('fast entry points must-not-fire: well-typed arguments begin, succeed and write the record', async () => {
  const { view, call, step } = fixture();
  const id = binding.beginAcquisition(view.key, call.compiled.key, false, false, call.labelsJson, step, undefined, undefined);
  assert.match(id, /^sbx_[0-9a-f]{32}$/);
  assert.equal(binding.acquisitionInFlight(id), true);
  const key = step[2];
  const store = new InMemoryMappingStore();
  const ended = binding.acquisitionSucceeded(key, store[STORE_KEY](), 'provider-1', false, binding.fleetKey('default'), undefined);
  assert.equal(ended, true);
  assert.equal(binding.acquisitionInFlight(id), false);
  const record = await store.get(id);
  assert.equal(record.providerSandboxId, 'provider-1');
  assert.equal(record.providerId, 'a');
  assert.equal(record.labels.team, 'x');
});

test('fast entry points must-not-fire: registryOrder writes the attempt order and returns its length', () => {
  const registry = new InMemoryProviderRegistry([
    { id: 'dear', runtime, capabilities: {}, signals: { ...signals, estimatedCost: 3 } },
    { id: 'cheap', runtime, capabilities: {}, signals: { ...signals, estimatedCost: 1 } },
  ]);
  const view = nativeView(registry);
  const call = compile({ routing: { strategy: 'cost' } });
  const out = new Uint32Array(4);
  assert.equal(binding.registryOrder(view.key, call.compiled.key, false, out, undefined, undefined), 2);
  assert.deepEqual([view.definitions[out[0]].id, view.definitions[out[1]].id], ['cheap', 'dear']);
});

test('fast entry points must-not-fire: strings longer than the one-call buffer, and non-ASCII, arrive whole', async () => {
  // 1,024 bytes are read in one call; longer strings take napi-rs's two-call path.
  for (const [value, psid] of [
    ['x'.repeat(1022), 'p'.repeat(1022)],
    ['x'.repeat(1023), 'p'.repeat(1023)],
    ['x'.repeat(5000), 'p'.repeat(5000)],
    ['é☃𝄞 "quoted" \\ \n', 'prov-é☃𝄞'],
    ['é'.repeat(600), '☃'.repeat(400)],
  ]) {
    const registry = new InMemoryProviderRegistry([{ id: 'a', runtime, capabilities: {}, signals }]);
    const view = nativeView(registry);
    const call = compile({ launch: { labels: { team: value } } });
    const step = new Uint32Array(3);
    const id = binding.beginAcquisition(view.key, call.compiled.key, false, false, call.labelsJson, step, undefined, undefined);
    const store = new InMemoryMappingStore();
    binding.acquisitionSucceeded(step[2], store[STORE_KEY](), psid, false, binding.fleetKey('default'), undefined);
    const record = await store.get(id);
    assert.equal(record.labels.team, value);
    assert.equal(record.providerSandboxId, psid);
  }
});

test('fast entry points must-fire: a wrong argument type is refused as a #[napi] function refuses it', () => {
  const { view, call, step } = fixture();
  // The same conversion failure a #[napi] function gives (acquisitionStep is one).
  const expected = (() => {
    try {
      binding.acquisitionStep('x', step);
    } catch (e) {
      return e.code;
    }
  })();
  assert.equal(expected, 'NumberExpected');
  assert.throws(() => binding.beginAcquisition('x', call.compiled.key, false, false, null, step), { code: expected });
  assert.throws(() => binding.beginAcquisition(view.key, call.compiled.key, false, false, 42, step), { code: 'StringExpected' });
  assert.throws(() => binding.beginAcquisition(view.key, call.compiled.key, false, false, null, [0, 0, 0]), /TypedArray|Get TypedArray info failed/);
  assert.throws(() => binding.acquisitionSucceeded(0, null, 7, false, 0), { code: 'StringExpected' });
  assert.throws(() => binding.registryOrder(view.key, 'x', false, step), { code: expected });
  assert.throws(() => binding.registryOrder(view.key, call.compiled.key, false, [0, 0, 0]), /TypedArray|Get TypedArray info failed/);
  // An unknown machine is the typed INTERNAL_ERROR, as from every acquisition* call.
  assert.throws(() => binding.acquisitionSucceeded(0xffffff, null, 'p', false, 0), /INTERNAL_ERROR/);
});
