// The router's events are defined once (src/core/events.rs): index.d.ts's event section is
// generated from that definition (scripts/event-types.mjs), and JavaScript forwards each
// event the core wrote, unchanged, whatever its type.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { section, replaced } from '../scripts/event-types.mjs';
import bindingModule from '../lib/binding.js';
import { SandboxRouter, InMemoryProviderRegistry } from '../index.mjs';
import { definition, fakeRuntime } from './fixtures.mjs';

const { binding } = bindingModule;
const DTS = fileURLToPath(new URL('../index.d.ts', import.meta.url));

test('event types must-fire: index.d.ts holds exactly the event section src/core/events.rs defines', () => {
  const source = readFileSync(DTS, 'utf8');
  assert.equal(replaced(source, section(binding.eventSchema())), source, 'run node scripts/event-types.mjs');
});

test('event types must-not-fire: the check sees a change to the definition (a field more, a type fewer)', () => {
  const source = readFileSync(DTS, 'utf8');
  const schema = binding.eventSchema();
  schema[0].fields.push({ name: 'extra', ts: 'number', optional: false, doc: '' });
  assert.notEqual(replaced(source, section(schema)), source);
  assert.notEqual(replaced(source, section(binding.eventSchema().slice(1))), source);
});

test('every event the observer receives is one the definition names, with only its fields', async () => {
  const schema = new Map(binding.eventSchema().map((t) => [t.name, t]));
  const seen = [];
  const failing = fakeRuntime({
    launch: async () => {
      throw new Error('quota');
    },
  });
  const registry = new InMemoryProviderRegistry([definition('a', { runtime: failing }), definition('b')]);
  const router = new SandboxRouter({
    registry,
    observer: (e) => seen.push(e),
    classifyProviderFailure: () => ({ code: 'QUOTA', retryable: true }),
  });
  const s = await router.provision({});
  await router.destroy(s.id);
  await router.provision({ providerId: 'nope' }).catch(() => {});
  assert.ok(seen.length >= 8, `events seen: ${seen.map((e) => e.type).join(', ')}`);
  for (const e of seen) {
    const t = schema.get(e.type);
    assert.ok(t, `${e.type} is defined`);
    const allowed = new Set(['type', 'at', ...(t.sandbox ? ['sandboxId'] : []), ...t.fields.map((f) => f.name)]);
    for (const key of Object.keys(e)) assert.ok(allowed.has(key), `${e.type}.${key} is one of its fields`);
    for (const f of t.fields.filter((f) => !f.optional)) assert.ok(f.name in e, `${e.type} has ${f.name}`);
  }
  assert.deepEqual(
    ['provision.validated', 'provision.ranked', 'attempt.failed', 'fallback.advanced', 'attempt.succeeded', 'provider.rejected', 'provision.exhausted'].filter(
      (type) => !seen.some((e) => e.type === type),
    ),
    [],
  );
});
