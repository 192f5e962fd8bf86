// CommonJS consumers: the same classes, instanceof and codes as from ESM.
const test = require('node:test');
const assert = require('node:assert/strict');
const router = require('../index.js');

test('CommonJS: errors thrown by the router are instances of the exported classes', async () => {
  const registry = new router.InMemoryProviderRegistry([
    {
      id: 'a',
      runtime: { id: 'x', launch: async () => ({ id: 'r' }), destroy: async () => {} },
      capabilities: {},
      signals: { estimatedCost: 1, coldStartLatencyMs: 1, readyLatencyMs: 1, completionWithinBudgetRate: 1, available: true },
    },
  ]);
  const r = new router.SandboxRouter({ registry });
  await assert.rejects(r.provision({ requires: { requiredCapabilities: ['pty'] } }), (e) => {
    return e instanceof router.NoEligibleProviderError && e instanceof router.SandboxRouterError && e instanceof Error && e.code === 'NO_ELIGIBLE_PROVIDER';
  });
  assert.throws(() => r.route({ placement: { authority: 'fleet' } }), router.RoutingNotApplicableError);
});

test('CommonJS: ESM import of the package yields the same class objects', async () => {
  const esm = await import('../index.mjs');
  assert.equal(esm.SandboxRouter, router.SandboxRouter);
  assert.equal(esm.ProviderProvisioningError, router.ProviderProvisioningError);
  assert.equal(esm.default, router);
});

test('regression (Jest consumer): a native error from another realm still becomes its typed class', () => {
  const { runInNewContext } = require('node:vm');
  const { fromNative } = require('../lib/errors.js');
  // Jest runs each test file in its own vm context; the addon's errors come from the main realm.
  const foreign = runInNewContext('new Error(JSON.stringify({ code: "ROUTING_NOT_APPLICABLE", message: "fleet placement" }))');
  assert.equal(foreign instanceof Error, false, 'really from another realm');
  const e = fromNative(foreign);
  assert.ok(e instanceof router.RoutingNotApplicableError);
  assert.equal(e.code, 'ROUTING_NOT_APPLICABLE');
  // A typed NativeError value (a plain object) is still read as one.
  assert.ok(fromNative({ code: 'NO_ELIGIBLE_PROVIDER', message: 'm', summary: 's', rejections: [] }) instanceof router.NoEligibleProviderError);
});
