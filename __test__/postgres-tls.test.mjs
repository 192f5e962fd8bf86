// PostgresMappingStore over TLS, against two real PostgreSQL servers started by this file:
// one with `ssl=on` and a certificate signed by a throwaway CA made at start (for localhost
// and 127.0.0.1), one with TLS off. Every refusal has its must-not-fire twin, and whether a
// connection is encrypted is read on the server's side (pg_stat_ssl, by application_name),
// never inferred from success.
import test, { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { PostgresMappingStore, MappingPersistenceError, SandboxRouterConfigurationError } from '../index.mjs';
import { startPostgres } from './postgres-server.mjs';
import { leaks } from './fixtures.mjs';

/** @type {Awaited<ReturnType<typeof startPostgres>>} */
let tlsPg;
/** @type {Awaited<ReturnType<typeof startPostgres>>} */
let plainPg;
const stores = [];
let apps = 0;

before(async () => {
  [tlsPg, plainPg] = await Promise.all([startPostgres({ tls: true }), startPostgres()]);
});
after(async () => {
  for (const s of stores) await s.close().catch(() => {});
  tlsPg?.stop();
  plainPg?.stop();
});

/**
 * A store on `server` with a fresh application_name (to find its connections in
 * pg_stat_ssl). `query`: extra URL parameters (`sslmode=...`); `ssl`: the `ssl` option.
 */
function store(server, { query = '', ssl, host = '127.0.0.1' } = {}) {
  const app = `tls${++apps}`;
  const url = `postgres://postgres:${server.password}@${host}:${server.port}/postgres?application_name=${app}${query ? `&${query}` : ''}`;
  const s = new PostgresMappingStore({ connection: ssl === undefined ? { url } : { url, ssl }, timeoutMs: 3_000 });
  stores.push(s);
  return { s, app };
}

/** The `ssl` column of pg_stat_ssl for the connections of `app`, read on the server (an admin connection of the test's own). */
function encrypted(server, app) {
  return server.psql(`SELECT string_agg(s.ssl::text, ',') FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = '${app}'`);
}

const record = (n) => ({
  id: `sbx_${String(n).padStart(32, '0')}`,
  providerId: 'a',
  providerSandboxId: `remote-${n}`,
  labels: { tls: 'yes' },
  createdAt: '2026-01-01T00:00:00.000Z',
  detached: false,
});

const tlsRefusal = (code) => (e) => e instanceof MappingPersistenceError && e.code === code && e.tls === true;

test('pg tls must-fire: verify-full with the right CA connects, round-trips a mapping, and the server sees TLS', async () => {
  const { s, app } = store(tlsPg, { ssl: { ca: tlsPg.ca } });
  assert.equal(await s.open(), 8);
  await s.put(record(1));
  assert.deepEqual(await s.get(record(1).id), record(1));
  assert.equal(await encrypted(tlsPg, app), 'true');
});

test('pg tls must-not-fire: verify-full with the wrong CA, or with Mozilla\'s roots only, is refused (typed, tls: true)', async () => {
  const wrong = store(tlsPg, { ssl: { ca: tlsPg.otherCa } }).s;
  await assert.rejects(wrong.open(), tlsRefusal('MAPPING_STORE_OPEN_FAILED'));
  await assert.rejects(wrong.put(record(2)), tlsRefusal('MAPPING_PERSISTENCE_FAILED'));
  await assert.rejects(wrong.get(record(2).id), tlsRefusal('MAPPING_READ_FAILED'));
  const rootsOnly = store(tlsPg, { ssl: true }).s;
  await assert.rejects(rootsOnly.open(), tlsRefusal('MAPPING_STORE_OPEN_FAILED'));
  const urlRootsOnly = store(tlsPg, { query: 'sslmode=verify-full' }).s;
  await assert.rejects(urlRootsOnly.count(), tlsRefusal('MAPPING_READ_FAILED'));
});

test('pg tls: the URL\'s sslmode=verify-full with ssl: { ca } connects encrypted; sslmode=require is verified the same way', async () => {
  const full = store(tlsPg, { query: 'sslmode=verify-full', ssl: { ca: tlsPg.ca } });
  assert.equal(await full.s.count(), 1);
  assert.equal(await encrypted(tlsPg, full.app), 'true');
  // require = verify-full here (node-postgres's meaning): the right CA connects ...
  const req = store(tlsPg, { query: 'sslmode=require', ssl: { ca: tlsPg.ca } });
  assert.equal(await req.s.count(), 1);
  assert.equal(await encrypted(tlsPg, req.app), 'true');
  // ... and the wrong one is refused (libpq's require would have connected)
  await assert.rejects(store(tlsPg, { query: 'sslmode=require', ssl: { ca: tlsPg.otherCa } }).s.count(), tlsRefusal('MAPPING_READ_FAILED'));
});

test('pg tls: the object form with ssl: { ca } verifies the IP address in the certificate', async () => {
  const s = new PostgresMappingStore({
    connection: { host: '127.0.0.1', port: tlsPg.port, user: 'postgres', password: tlsPg.password, database: 'postgres', ssl: { ca: tlsPg.ca, mode: 'verify-full' } },
    timeoutMs: 3_000,
  });
  stores.push(s);
  assert.equal(await s.count(), 1);
  // (the store's default application_name; no other store of this file has used it yet)
  assert.equal(await encrypted(tlsPg, 'agent-relay-sandbox-router'), 'true');
});

test('pg tls host name: verify-full refuses a certificate not made for the host, verify-ca (chain only) accepts it', async () => {
  // hostaddr connects to 127.0.0.1 while TLS checks the name in `host`, which the certificate does not name.
  const wrongName = { query: 'hostaddr=127.0.0.1', host: 'not-in-the-certificate.test' };
  const full = store(tlsPg, { ...wrongName, ssl: { ca: tlsPg.ca, mode: 'verify-full' } });
  await assert.rejects(full.s.open(), tlsRefusal('MAPPING_STORE_OPEN_FAILED'));
  const chainOnly = store(tlsPg, { ...wrongName, ssl: { ca: tlsPg.ca, mode: 'verify-ca' } });
  assert.equal(await chainOnly.s.open(), 8);
  assert.equal(await encrypted(tlsPg, chainOnly.app), 'true');
  // verify-ca still checks the chain
  await assert.rejects(store(tlsPg, { ...wrongName, ssl: { ca: tlsPg.otherCa, mode: 'verify-ca' } }).s.open(), tlsRefusal('MAPPING_STORE_OPEN_FAILED'));
});

test('pg tls prefer: encrypted and verified against a TLS server (the wrong CA is refused, not downgraded)', async () => {
  const ok = store(tlsPg, { query: 'sslmode=prefer', ssl: { ca: tlsPg.ca } });
  assert.equal(await ok.s.count(), 1);
  assert.equal(await encrypted(tlsPg, ok.app), 'true');
  await assert.rejects(store(tlsPg, { query: 'sslmode=prefer', ssl: { ca: tlsPg.otherCa } }).s.count(), tlsRefusal('MAPPING_READ_FAILED'));
});

test('pg tls, TLS-off server: require / verify-full / verify-ca are refused (tls: true), prefer connects in plain text', async () => {
  for (const mode of ['require', 'verify-full', 'verify-ca']) {
    const { s } = store(plainPg, { ssl: { mode, ca: tlsPg.ca } });
    await assert.rejects(s.open(), tlsRefusal('MAPPING_STORE_OPEN_FAILED'), mode);
  }
  await assert.rejects(store(plainPg, { query: 'sslmode=require' }).s.open(), tlsRefusal('MAPPING_STORE_OPEN_FAILED'));
  const prefer = store(plainPg, { query: 'sslmode=prefer' });
  assert.equal(await prefer.s.open(), 8);
  assert.equal(await encrypted(plainPg, prefer.app), 'false');
});

test('pg tls: no sslmode and no ssl (and sslmode=disable, ssl: false) connect in plain text even to a TLS server', async () => {
  for (const opts of [{}, { query: 'sslmode=disable' }, { ssl: false }]) {
    const { s, app } = store(tlsPg, opts);
    assert.equal(await s.count(), 1, JSON.stringify(opts));
    assert.equal(await encrypted(tlsPg, app), 'false', JSON.stringify(opts));
  }
});

test('pg tls options are validated with typed errors (field), valid forms construct', () => {
  const bad = (connection, field) =>
    assert.throws(() => new PostgresMappingStore({ connection }), (e) => e instanceof SandboxRouterConfigurationError && e.code === 'INVALID_CONFIGURATION' && e.field === field, field);
  const url = `postgres://postgres:pw@127.0.0.1:${tlsPg.port}/postgres`;
  bad(`${url}?sslmode=allow`, 'connection.sslmode');
  bad(`${url}?sslmode=verify_full`, 'connection.sslmode');
  bad(`${url}?sslmode=prefer&sslmode=require`, 'connection.sslmode');
  bad(`host=127.0.0.1 user=postgres sslmode=bogus`, 'connection.sslmode');
  bad(`${url}?sslrootcert=/etc/ssl/ca.pem`, 'connection.url');
  bad({ url, ssl: 'require' }, 'connection.ssl');
  bad({ url, ssl: { mode: 'allow' } }, 'connection.ssl.mode');
  bad({ url, ssl: { rejectUnauthorized: false } }, 'connection.ssl.rejectUnauthorized');
  bad({ url, ssl: { ca: '' } }, 'connection.ssl.ca');
  bad({ url, ssl: { ca: 'not a certificate' } }, 'connection.ssl.ca');
  bad({ url, ssl: { ca: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' } }, 'connection.ssl.ca');
  bad({ url, ssl: { ca: tlsPg.ca, mode: 'disable' } }, 'connection.ssl.ca');
  bad({ url: `${url}?sslmode=disable`, ssl: { ca: tlsPg.ca } }, 'connection.ssl.ca');
  bad({ url: `${url}?sslmode=verify-ca`, ssl: { mode: 'verify-full' } }, 'connection.ssl.mode');
  bad({ host: tlsPg.socketDir, user: 'postgres', ssl: true }, 'connection.ssl');
  // must-not-fire: the valid forms construct
  for (const connection of [
    `${url}?sslmode=require`,
    `${url}?sslmode=verify-ca`,
    `${url}?sslmode=verify-full&application_name=x`,
    `host=127.0.0.1 user=postgres sslmode=verify-full`,
    { url, ssl: true },
    { url, ssl: false },
    { url: `${url}?sslmode=verify-ca`, ssl: { ca: tlsPg.ca } },
    { url: `${url}?sslmode=verify-ca`, ssl: { ca: tlsPg.ca, mode: 'verify-ca' } },
    { url, ssl: { ca: tlsPg.ca + tlsPg.otherCa } },
    { host: tlsPg.socketDir, user: 'postgres', ssl: { mode: 'prefer' } },
    { host: '127.0.0.1', user: 'postgres', ssl: { mode: 'disable' } },
  ]) {
    new PostgresMappingStore({ connection });
  }
});

test('pg tls canary: the CA text and the password never appear in errors, inspect or JSON', async () => {
  const password = `canary-${tlsPg.password.slice(3, 15)}`;
  // A CA body line from the middle of the PEM (the base64 of the certificate).
  const caLine = tlsPg.ca.split('\n')[3];
  assert.ok(caLine.length > 40);
  const url = `postgres://postgres:${password}@127.0.0.1:${tlsPg.port}/postgres`;
  const stores = [
    new PostgresMappingStore({ connection: { url, ssl: { ca: tlsPg.ca } }, timeoutMs: 3_000 }), // wrong password, TLS up
    new PostgresMappingStore({ connection: { url: `${url}?sslmode=verify-full`, ssl: { ca: tlsPg.otherCa } }, timeoutMs: 3_000 }), // TLS refused
    new PostgresMappingStore({ connection: { host: '127.0.0.1', port: plainPg.port, user: 'postgres', password, ssl: { ca: tlsPg.ca } }, timeoutMs: 3_000 }),
  ];
  const otherLine = tlsPg.otherCa.split('\n')[3];
  let failures = 0;
  for (const s of stores) {
    for (const secret of [password, caLine, otherLine]) assert.equal(leaks(s, secret), false, 'store object');
    const errs = await Promise.all([s.open(), s.put(record(9)), s.get(record(9).id)].map((p) => p.then(() => null, (e) => e)));
    for (const e of errs) {
      assert.ok(e instanceof MappingPersistenceError, String(e));
      failures++;
      for (const secret of [password, caLine, otherLine]) assert.equal(leaks(e, secret), false, `error ${e.code}`);
    }
  }
  assert.equal(failures, 9);
  // A CA that is not one: the message does not quote it.
  const notCa = `-----BEGIN CERTIFICATE-----\n${caLine}\n-----END CERTIFICATE-----\n`;
  let thrown;
  try {
    new PostgresMappingStore({ connection: { url, ssl: { ca: notCa } } });
  } catch (e) {
    thrown = e;
  }
  assert.ok(thrown instanceof SandboxRouterConfigurationError);
  assert.equal(leaks(thrown, caLine), false);
  assert.equal(leaks(thrown, password), false);
  // must-fire: the same CA with the right password connects (the canary test is not vacuous)
  const good = new PostgresMappingStore({ connection: { url: url.replace(password, tlsPg.password), ssl: { ca: tlsPg.ca } }, timeoutMs: 3_000 });
  stores.push(good);
  assert.equal(await good.open(), 8);
  assert.equal(leaks(good, caLine), false);
  for (const s of stores) await s.close().catch(() => {});
});
