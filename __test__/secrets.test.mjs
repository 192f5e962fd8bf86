// Canary secrets: a credential held in a runtime's closure, thrown in messages, causes and
// non-Error rejections must appear nowhere we produce: errors (message, stack, cause, own
// properties), events, mappings, results, JSON.stringify or util.inspect of the router.
import test from 'node:test';
import assert from 'node:assert/strict';
import { InMemoryProviderRegistry, SandboxRouter } from '../index.mjs';
import { CANARY, definition, leaks, signals } from './fixtures.mjs';


// A runtime whose closure holds the key and whose every failure mentions it.
function secretRuntime(mode) {
  const apiKey = CANARY;
  let n = 0;
  const fail = () => {
    switch (mode) {
      case 'message':
        throw new Error(`401 invalid key ${apiKey}`);
      case 'cause':
        throw new Error('launch failed', { cause: new Error(`key=${apiKey}`) });
      case 'string':
        return Promise.reject(`Bearer ${apiKey}`);
      case 'object':
        return Promise.reject({ headers: { authorization: `Bearer ${apiKey}` } });
      case 'property':
        throw Object.assign(new Error('x'), { config: { apiKey } });
      default:
        return { id: `remote-${++n}` };
    }
  };
  return {
    id: 'secret',
    launch: async () => fail(),
    runScript: async () => fail(),
    destroy: async () => {
      if (mode !== 'ok') fail();
    },
  };
}

test('canary: no failure mode leaks the key into errors, events or the router', async () => {
  for (const mode of ['message', 'cause', 'string', 'object', 'property']) {
    const events = [];
    const classified = [];
    const router = new SandboxRouter({
      registry: new InMemoryProviderRegistry([definition('p', { runtime: secretRuntime(mode) }), definition('q', { runtime: secretRuntime(mode) })]),
      observer: (e) => events.push(e),
      // The caller's own classifier sees the caller's own adapter's error (key included);
      // nothing the router produces afterwards may.
      classifyProviderFailure: (error) => {
        classified.push(leaks(error));
        return { code: 'PRE_ALLOCATION', retryable: true };
      },
    });
    const err = await router.provision({ launch: { env: { TOKEN: CANARY } } }).then(
      () => assert.fail('should fail'),
      (e) => e,
    );
    assert.ok(!leaks(err), `error leaks (${mode})`);
    assert.ok(!leaks(events), `events leak (${mode})`);
    assert.ok(!leaks(router), `router leaks (${mode})`);
    assert.deepEqual(classified, [true, true], `the classifier saw the raw error each time (${mode})`);
  }
});

test('canary: success path results, mappings and events carry no key (must-not-fire on real data)', async () => {
  const events = [];
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('p', { runtime: secretRuntime('ok') })]),
    observer: (e) => events.push(e),
  });
  const s = await router.provision({ launch: { env: { API_TOKEN: CANARY }, labels: { team: 'a' } } });
  const mapping = await router.getSandbox(s.id);
  const explanation = await router.explain({});
  for (const v of [s, mapping, events, explanation, router, router.route({})]) assert.ok(!leaks(v));
  // The detector itself works: the launch env did carry the canary to the runtime.
  assert.ok(leaks({ env: { API_TOKEN: CANARY } }));
  await router.destroy(s.id);
});

test('canary: a resolver or readiness port that throws the key leaks nothing', async () => {
  const events = [];
  const router = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('p'), definition('q')]),
    observer: (e) => events.push(e),
    resolveRoutingSignals: (p) => {
      if (p.id === 'p') throw new Error(CANARY);
      return signals();
    },
  });
  const s = await router.provision({});
  assert.equal(s.providerId, 'q');
  assert.ok(!leaks(events) && !leaks(await router.explain({})));
  const failingReadiness = new SandboxRouter({
    registry: new InMemoryProviderRegistry([definition('p')]),
    provisioning: {
      hasAvailableCredentials: () => {
        throw new Error(CANARY);
      },
    },
  });
  const err = await failingReadiness.provision({}).catch((e) => e);
  assert.equal(err.code, 'PROVISIONING_AVAILABILITY_FAILED');
  assert.ok(!leaks(err));
});

test('canary: a runtime op failure by id leaks nothing', async () => {
  const rt = secretRuntime('ok');
  rt.runScript = async () => {
    throw new Error(`exec denied ${CANARY}`, { cause: CANARY });
  };
  const router = new SandboxRouter({ registry: new InMemoryProviderRegistry([definition('p', { runtime: rt })]) });
  const s = await router.provision({});
  const err = await router.runScript(s.id, { command: 'x' }).catch((e) => e);
  assert.equal(err.code, 'PROVIDER_RUNTIME_ERROR');
  assert.ok(!leaks(err));
});

test('the leak detector fires on every place it checks (must-fire) and not on clean values (must-not-fire)', () => {
  const hidden = {};
  Object.defineProperty(hidden, 'k', { value: CANARY, enumerable: false });
  const withGetter = {
    get k() {
      return CANARY;
    },
  };
  const ownProp = Object.assign(new Error('clean'), { detail: { deep: [CANARY] } });
  const viaCause = new Error('clean', { cause: { text: CANARY } });
  for (const v of [CANARY, { a: { b: { c: CANARY } } }, hidden, withGetter, new Error(CANARY), ownProp, viaCause]) {
    assert.equal(leaks(v), true, `missed in ${typeof v}`);
  }
  assert.equal(leaks({ a: 'clean' }, 'other-secret'), false);
  for (const v of [{ a: 'clean' }, new Error('clean', { cause: 'clean' }), null, 42]) assert.equal(leaks(v), false);
});
