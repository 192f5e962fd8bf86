// Crash test: a router process provisioning on the local runtime (real child processes)
// with SqliteMappingStore is killed with SIGKILL at random points: during launches, between
// a launch and its mapping write (the child's store delays each write at random), during
// SQLite writes. Afterwards: the store opens cleanly, every provision the child reported
// complete is mapped, and reconcile finds every stamped sandbox without a mapping, as an
// orphan (WRITER_GONE: its launching intent names a dead process), reclaims them all, and
// leaves no intent behind.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSandboxRouter, SqliteMappingStore, SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL } from '../index.mjs';

const CHILD = fileURLToPath(new URL('./fixtures/crash-child.mjs', import.meta.url));
const KILLS = 12;

/** Runs the child until `afterMs` past READY, then SIGKILLs it; resolves with the ids it reported mapped. */
function runAndKill(dbPath, rootDir, afterMs, putDelayMs) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, dbPath, rootDir, String(putDelayMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    let timer = null;
    child.stdout.on('data', (d) => {
      out += d;
      if (timer === null && out.includes('READY\n')) timer = setTimeout(() => child.kill('SIGKILL'), afterMs);
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (signal !== 'SIGKILL') return reject(new Error(`child exited on its own (${code}, ${signal})`));
      resolve([...out.matchAll(/^MAPPED (sbx_[0-9a-f]{32})$/gm)].map((m) => m[1]));
    });
  });
}

/** The stamped sandboxes on disk: the local runtime's record files. */
function stampedOnDisk(rootDir) {
  const out = new Map();
  for (const name of fs.readdirSync(rootDir)) {
    const m = /^(local-[0-9a-f]{16})\.json$/.exec(name);
    if (!m) continue;
    const rec = JSON.parse(fs.readFileSync(path.join(rootDir, name), 'utf8'));
    if (rec.labels[SANDBOX_FLEET_LABEL] === 'default') out.set(rec.labels[SANDBOX_ID_LABEL], m[1]);
  }
  return out;
}

test('crash must-fire: SIGKILL at random points loses no completed mapping, and reconcile finds and reclaims every unmapped stamped sandbox', { timeout: 120_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sbx-crash-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const dbPath = path.join(dir, 'state', 'mappings.db');
  const rootDir = path.join(dir, 'sandboxes');
  const completed = [];
  for (let k = 0; k < KILLS; k++) {
    // Kill times from "before the first launch settles" to "many provisions in".
    const afterMs = Math.floor(Math.random() * (k % 3 === 0 ? 15 : 250));
    completed.push(...(await runAndKill(dbPath, rootDir, afterMs, k % 2 === 0 ? 20 : 2)));
  }
  assert.ok(completed.length > 0, 'the children completed some provisions before being killed');

  // The store opens cleanly and holds every completed provision.
  const store = new SqliteMappingStore(dbPath);
  assert.equal(await store.open(), 4, 'schema version');
  const mapped = new Map((await store.list()).map((r) => [r.id, r]));
  for (const id of completed) assert.ok(mapped.has(id), `completed provision ${id} is mapped`);

  // Every stamped sandbox on disk is mapped or an orphan; none is left pending.
  const onDisk = stampedOnDisk(rootDir);
  const router = createSandboxRouter({ providers: { local: { rootDir } }, mappings: store });
  const dry = await router.reconcile();
  const pool = dry.pools.local;
  assert.equal(pool.status, 'listed');
  assert.deepEqual(pool.pending, [], 'no stamped sandbox is left unexplained');
  const orphans = new Set(pool.orphan.map((o) => o.sandboxId));
  for (const [id] of onDisk) assert.ok(orphans.has(id) !== mapped.has(id), `${id} is exactly one of mapped / orphan`);
  for (const o of pool.orphan) assert.equal(o.reason, 'WRITER_GONE');
  assert.equal(pool.orphan.length, [...onDisk.keys()].filter((id) => !mapped.has(id)).length);
  t.diagnostic(`${KILLS} kills: ${completed.length} completed provisions, ${onDisk.size} stamped sandboxes, ${pool.orphan.length} orphans, ${dry.staleIntents.length} intents without a sandbox`);

  // Reclaim: every orphan destroyed, every stale intent removed; the mapped ones untouched.
  const done = await router.reconcile({ reclaim: true });
  assert.ok(done.outcomes.filter((o) => o.class === 'orphan').every((o) => o.outcome === 'DESTROYED'));
  const after = stampedOnDisk(rootDir);
  assert.deepEqual([...after.keys()].sort(), [...mapped.keys()].sort());
  assert.deepEqual(await store.intents(), []);
  const again = await router.reconcile();
  assert.deepEqual(again.totals, { orphan: 0, staleMapping: 0, mapped: mapped.size, pending: 0, unknownPools: 0 });
  for (const id of mapped.keys()) await router.destroy(id);
  store.close();
});
