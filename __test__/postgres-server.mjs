// A real PostgreSQL for the tests: initdb + pg_ctl from the machine's PostgreSQL binaries
// (Debian's `postgresql` package: /usr/lib/postgresql/<version>/bin; `.ci/run` installs it),
// a private data directory and unix socket directory under a temp folder, a private TCP port
// on 127.0.0.1, password authentication (scram-sha-256) over TCP, trust over the socket for
// the test's own admin queries (psql). PostgreSQL refuses to run as root: as root the
// cluster is created and run as the `postgres` system user (created if missing), which owns
// the temp folder. Stopped by `stop()` and, whatever happens, when the test process exits.
//
// With `{ tls: true }` the server runs with `ssl=on` and a certificate made at start with the
// openssl CLI: a throwaway CA, a server certificate it signs for `localhost` and 127.0.0.1
// (subjectAltName), and a second CA that signed nothing (the "wrong CA" of the tests). The
// key is mode 0600 and owned by the server's user, as PostgreSQL requires.
//
// There is no skip: without the binaries (or openssl, for `tls`), `startPostgres()` throws
// and the test fails.

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

function binDir() {
  if (process.env.SANDBOX_ROUTER_PG_BIN) return process.env.SANDBOX_ROUTER_PG_BIN;
  const root = '/usr/lib/postgresql';
  const versions = fs.existsSync(root) ? fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, 'bin', 'initdb'))) : [];
  versions.sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) {
    throw new Error('PostgreSQL binaries not found (install Debian\'s postgresql package, or set SANDBOX_ROUTER_PG_BIN): the PostgreSQL tests cannot run');
  }
  return path.join(root, versions[0], 'bin');
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 60_000, ...opts });
  if (r.status !== 0) throw new Error(`${path.basename(cmd)} failed (${r.status ?? r.signal}): ${r.stderr || r.stdout}`);
  return r.stdout;
}

function asPostgres(cmd, args) {
  if (process.getuid?.() !== 0) return run(cmd, args);
  return run('runuser', ['-u', 'postgres', '--', cmd, ...args]);
}

function postgresUser() {
  let r = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  if (r.status !== 0) {
    run('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
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
function makeCertificates(dir) {
  const openssl = '/usr/bin/openssl';
  if (!fs.existsSync(openssl)) throw new Error('openssl not found at /usr/bin/openssl: the TLS tests cannot run');
  const f = (name) => path.join(dir, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  const ca = (name, cn) =>
    run(openssl, [
      'req', '-x509', ...ec, '-keyout', f(`${name}.key`), '-out', f(`${name}.pem`), '-days', '2', '-subj', `/CN=${cn}`,
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    ]);
  ca('ca', 'sandbox-router test CA');
  ca('other-ca', 'sandbox-router unrelated CA');
  run(openssl, ['req', ...ec, '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=localhost']);
  fs.writeFileSync(
    f('server.ext'),
    'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n',
  );
  run(openssl, [
    'x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial',
    '-out', f('server.pem'), '-days', '2', '-extfile', f('server.ext'),
  ]);
  fs.chmodSync(f('server.key'), 0o600);
  for (const k of ['ca.key', 'other-ca.key']) fs.rmSync(f(k));
  return { cert: f('server.pem'), key: f('server.key'), ca: fs.readFileSync(f('ca.pem'), 'utf8'), otherCa: fs.readFileSync(f('other-ca.pem'), 'utf8') };
}

/**
 * Starts a private PostgreSQL (with `tls`: `ssl=on`, see the file's comment). Resolves to
 * `{ url(db?), port, password, socketDir, psql(sql, db?), createDatabase(name), stop(), ca?, otherCa? }`
 * (`ca`: PEM of the CA that signed the server's certificate; `otherCa`: PEM of one that did not).
 */
export async function startPostgres({ tls = false } = {}) {
  const bin = binDir();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sbx-pg-'));
  const data = path.join(dir, 'data');
  const password = `pw-${randomBytes(12).toString('hex')}`;
  fs.writeFileSync(path.join(dir, 'pw'), `${password}\n`, { mode: 0o600 });
  if (process.getuid?.() === 0) {
    const { uid, gid } = postgresUser();
    fs.chownSync(dir, uid, gid);
    fs.chownSync(path.join(dir, 'pw'), uid, gid);
  }
  asPostgres(path.join(bin, 'initdb'), [
    '-D', data, '-U', 'postgres', `--pwfile=${path.join(dir, 'pw')}`,
    '--auth-local=trust', '--auth-host=scram-sha-256', '-E', 'UTF8', '--no-sync', '--no-instructions',
  ]);
  const port = await freePort();
  const certs = tls ? makeCertificates(dir) : null;
  if (certs && process.getuid?.() === 0) {
    const { uid, gid } = postgresUser();
    for (const file of [certs.cert, certs.key]) fs.chownSync(file, uid, gid);
  }
  const options = [
    `-p ${port}`, `-k ${dir}`, "-c listen_addresses='127.0.0.1'", '-c fsync=off', '-c synchronous_commit=off',
    '-c full_page_writes=off', '-c max_connections=200', '-c shared_buffers=32MB',
    ...(certs ? ['-c ssl=on', `-c ssl_cert_file=${certs.cert}`, `-c ssl_key_file=${certs.key}`] : []),
  ].join(' ');
  const ctl = path.join(bin, 'pg_ctl');
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    try {
      asPostgres(ctl, ['-D', data, '-m', 'immediate', '-w', 'stop']);
    } catch {
      // Already down.
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', stop);
  asPostgres(ctl, ['-D', data, '-o', options, '-l', path.join(dir, 'log'), '-w', '-t', '60', 'start']);
  const psqlBin = path.join(bin, 'psql');
  const psql = (sql, db = 'postgres') =>
    run(psqlBin, ['-h', dir, '-p', String(port), '-U', 'postgres', '-d', db, '-v', 'ON_ERROR_STOP=1', '-Atc', sql]).trim();
  return {
    port,
    password,
    socketDir: dir,
    psqlBin,
    url: (db = 'postgres') => `postgres://postgres:${password}@127.0.0.1:${port}/${db}`,
    psql,
    createDatabase: (name) => psql(`CREATE DATABASE ${name}`),
    ca: certs?.ca,
    otherCa: certs?.otherCa,
    stop,
  };
}
