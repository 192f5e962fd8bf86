// SqliteMappingStore: the durable mapping seam (one SQLite file, WAL, versioned schema),
// identity across a restart, and its typed failures. The migration from schema v1 and the
// refusal of a newer file are tested in Rust (src/stores/sqlite.rs), where a v1 or v9
// file can be written directly.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  SqliteMappingStore,
  createSandboxRouter,
  MappingPersistenceError,
  SandboxRequestValidationError,
  SandboxRouterConfigurationError,
} from '../index.mjs';
import cjs from '../index.js';

function scratch(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sbx-sqlite-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const sbx = (n) => `sbx_${n.toString(16).padStart(32, '0')}`;
const record = (n, extra = {}) => ({
  id: sbx(n),
  providerId: 'local',
  providerSandboxId: `remote-${n}`,
  labels: { team: 't', 'agent-relay-sbx-id': sbx(n) },
  createdAt: '2026-11-30T00:00:00.000Z',
  detached: false,
  ...extra,
});

test('sqlite: created on first use (directory included), in WAL mode; construction touches nothing', async (t) => {
  const dir = scratch(t);
  const file = path.join(dir, 'nested', 'state', 'mappings.db');
  const store = new SqliteMappingStore(file);
  assert.equal(fs.existsSync(path.dirname(file)), false, 'construction creates nothing');
  assert.equal(store.path, file);
  await store.put(record(1));
  assert.ok(fs.existsSync(file));
  assert.ok(fs.existsSync(`${file}-wal`), 'write-ahead log');
  assert.deepEqual(store.toJSON(), { type: 'SqliteMappingStore', path: file });
  assert.equal(SqliteMappingStore, cjs.SqliteMappingStore, 'one class for ESM and CommonJS');
  store.close();
});

test('sqlite: put / get / delete / list / count round-trip the seam\'s records', async (t) => {
  const store = new SqliteMappingStore({ path: path.join(scratch(t), 'm.db') });
  await store.put(record(2));
  await store.put(record(1, { detached: true }));
  await store.put(record(2, { providerSandboxId: 'remote-2b' }));
  assert.deepEqual(await store.get(sbx(1)), record(1, { detached: true }));
  assert.equal((await store.get(sbx(2))).providerSandboxId, 'remote-2b', 'put replaces');
  assert.equal(await store.get(sbx(3)), null);
  assert.deepEqual((await store.list()).map((r) => r.id), [sbx(1), sbx(2)]);
  assert.equal(await store.count(), 2);
  assert.equal(await store.delete(sbx(2)), true);
  assert.equal(await store.delete(sbx(2)), false);
  assert.equal(await store.count(), 1);
  store.close();
});

test('sqlite must-fire: records that are not mappings are INVALID_INPUT and write nothing', async (t) => {
  const store = new SqliteMappingStore(path.join(scratch(t), 'm.db'));
  for (const bad of [null, record(1, { id: 'nope' }), record(1, { providerId: 7 }), record(1, { labels: { a: 1 } }), record(1, { providerSandboxId: '' })]) {
    await assert.rejects(store.put(bad), (e) => e instanceof SandboxRequestValidationError && e.code === 'INVALID_INPUT');
  }
  assert.deepEqual(await store.list(), []);
  store.close();
});

test('sqlite must-fire: a path that cannot hold a database is MAPPING_STORE_OPEN_FAILED; bad options are INVALID_CONFIGURATION', async (t) => {
  const dir = scratch(t);
  const store = new SqliteMappingStore(dir); // a directory
  await assert.rejects(store.get(sbx(1)), (e) => e instanceof MappingPersistenceError && e.code === 'MAPPING_STORE_OPEN_FAILED' && !e.message.includes(dir));
  for (const bad of [undefined, '', { path: 'x', durability: 'sometimes' }, { path: 'x', extra: 1 }, { path: 'a\0b' }]) {
    assert.throws(() => new SqliteMappingStore(bad), SandboxRouterConfigurationError);
  }
});

test('sqlite must-not-fire: durability full is accepted and stores the same records', async (t) => {
  const store = new SqliteMappingStore({ path: path.join(scratch(t), 'm.db'), durability: 'full' });
  await store.put(record(1));
  assert.deepEqual(await store.get(sbx(1)), record(1));
  store.close();
});

test('sqlite: intents are written, listed, and completed by the mapping put', async (t) => {
  const store = new SqliteMappingStore(path.join(scratch(t), 'm.db'));
  const intent = { id: sbx(1), providerId: 'local', state: 'launching', startedAt: 1, expiresAt: 2, ownerHost: 'h', ownerPid: 42, ownerSession: 's' };
  await store.intent(intent);
  assert.deepEqual(await store.intents(), [intent]);
  assert.equal(await store.get(sbx(1)), null, 'an intent is not a mapping');
  await store.put(record(1));
  assert.deepEqual(await store.intents(), []);
  await assert.rejects(store.intent({ ...intent, id: sbx(2), state: 'done' }), (e) => e.code === 'INVALID_INPUT');
  store.close();
});

test('sqlite: identity survives a restart: a router killed with SIGKILL after provisioning, its sandbox used and destroyed by a new router', async (t) => {
  const dir = scratch(t);
  const dbPath = path.join(dir, 'm.db');
  const rootDir = path.join(dir, 'root');
  const script = `
    import { createSandboxRouter, SqliteMappingStore } from ${JSON.stringify(new URL('../index.mjs', import.meta.url).href)};
    const router = createSandboxRouter({ providers: { local: { rootDir: ${JSON.stringify(rootDir)} } }, mappings: new SqliteMappingStore(${JSON.stringify(dbPath)}) });
    const s = await router.provision({ launch: { labels: { app: 'demo' } } });
    await router.uploadBundle(s.id, { files: [{ source: 'kept', destination: 'note.txt' }] });
    process.stdout.write(s.id);
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let id = '';
  child.stdout.on('data', (d) => {
    id += d;
    if (/^sbx_[0-9a-f]{32}$/.test(id)) child.kill('SIGKILL');
  });
  await new Promise((r) => child.on('exit', r));
  assert.match(id, /^sbx_[0-9a-f]{32}$/);

  const router = createSandboxRouter({ providers: { local: { rootDir } }, mappings: new SqliteMappingStore(dbPath) });
  const m = await router.getSandbox(id);
  assert.equal(m.providerId, 'local');
  assert.equal(m.labels.app, 'demo');
  const r = await router.runScript(id, { command: 'cat note.txt' });
  assert.equal(r.output, 'kept');
  const report = await router.reconcile({ graceMs: 0 });
  assert.deepEqual(report.pools.local.mapped, [id]);
  await router.destroy(id);
  await assert.rejects(router.getSandbox(id), (e) => e.code === 'SANDBOX_NOT_FOUND');
  assert.deepEqual(fs.readdirSync(rootDir), []);
});

test('sqlite group commit must-fire: writes issued together land together (one transaction) and each resolves with its own result', async (t) => {
  const store = new SqliteMappingStore(path.join(scratch(t), 'm.db'));
  await store.put(record(500));
  const writes = [...Array.from({ length: 200 }, (_, i) => store.put(record(i + 1))), store.delete(sbx(500)), store.delete(sbx(999))];
  const results = await Promise.all(writes);
  assert.deepEqual(results.slice(-2), [true, false], 'each delete answers for itself');
  assert.equal(await store.count(), 200);
  store.close();
});

test('sqlite group commit must-not-fire: one invalid record among concurrent writes fails alone', async (t) => {
  const store = new SqliteMappingStore(path.join(scratch(t), 'm.db'));
  const outcomes = await Promise.allSettled([store.put(record(1)), store.put(record(2, { labels: { bad: 7 } })), store.put(record(3))]);
  assert.deepEqual(outcomes.map((o) => o.status), ['fulfilled', 'rejected', 'fulfilled']);
  assert.equal(outcomes[1].reason.code, 'INVALID_INPUT');
  assert.deepEqual((await store.list()).map((r) => r.id), [sbx(1), sbx(3)]);
  store.close();
});
