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

// Jest runs each test file in its own realm: an error thrown by the native binding there is
// not `instanceof` the test file's Error. Regression: such an error was read as a typed
// error value and became an INTERNAL_ERROR with no message.
test('fromNative must-fire: a thrown native error from another realm keeps its code and class', () => {
  const vm = require('node:vm');
  const { fromNative } = require('../lib/errors.js');
  const foreign = vm.runInNewContext('new Error(JSON.stringify({ code: "ROUTING_NOT_APPLICABLE", message: "routing not applicable: x" }))');
  assert.equal(foreign instanceof Error, false, 'the error really is from another realm');
  const e = fromNative(foreign);
  assert.ok(e instanceof router.RoutingNotApplicableError);
  assert.equal(e.message, 'routing not applicable: x');
});

test('fromNative must-not-fire: a typed error value (not an Error) is read by its fields', () => {
  const { fromNative } = require('../lib/errors.js');
  const e = fromNative({ code: 'NO_ELIGIBLE_PROVIDER', message: '0/1 providers eligible', field: null, summary: '0/1 providers eligible', rejections: [] });
  assert.ok(e instanceof router.NoEligibleProviderError);
  assert.equal(e.field, undefined);
  assert.deepEqual(e.rejections, []);
});
