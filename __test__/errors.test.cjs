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
// not `instanceof` the test file's Error. The native error protocol reads fields, never
// `instanceof` or a message: a thrown native error from another realm keeps its class.
test('fromNative must-fire: a thrown native error from another realm keeps its code, class and fields', () => {
  const vm = require('node:vm');
  const { fromNative } = require('../lib/errors.js');
  const foreign = vm.runInNewContext(
    'Object.assign(new Error("routing not applicable: x"), { errorClass: "RoutingNotApplicableError", code: "ROUTING_NOT_APPLICABLE", field: "placement" })',
  );
  assert.equal(foreign instanceof Error, false, 'the error really is from another realm');
  const e = fromNative(foreign);
  assert.ok(e instanceof router.RoutingNotApplicableError);
  assert.equal(e.message, 'routing not applicable: x');
  assert.equal(e.field, 'placement');
  assert.equal(Object.hasOwn(e, 'errorClass'), false, 'the class name is not copied onto the error');
});

test('fromNative must-not-fire: a value that is not a native error (no errorClass) is an internal error, without its text', () => {
  const { fromNative } = require('../lib/errors.js');
  for (const value of [new Error(JSON.stringify({ code: 'NO_ELIGIBLE_PROVIDER', message: 'sk_canary' })), { code: 'X', message: 'sk_canary' }, null, 'sk_canary']) {
    const e = fromNative(value);
    assert.ok(e instanceof router.SandboxRouterInternalError);
    assert.equal(e.code, 'INTERNAL_ERROR');
    assert.ok(!JSON.stringify(e).includes('sk_canary'));
  }
});

test('a native error of each transport reads the same: thrown by a call, and returned as a value', () => {
  const { binding } = require('../lib/binding.js');
  const { fromNative } = require('../lib/errors.js');
  let thrown;
  try {
    binding.checkSandboxId('sbx_nope');
  } catch (error) {
    thrown = error;
  }
  assert.equal(thrown.errorClass, 'SandboxRequestValidationError');
  const e = fromNative(thrown);
  assert.ok(e instanceof router.SandboxRequestValidationError);
  assert.equal(e.code, 'INVALID_SANDBOX_ID');
  const value = fromNative({ errorClass: 'SandboxRequestValidationError', code: 'INVALID_SANDBOX_ID', message: thrown.message });
  assert.deepEqual({ ...value, message: value.message }, { ...e, message: e.message });
});
