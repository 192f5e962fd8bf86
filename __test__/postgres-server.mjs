// A real PostgreSQL for the tests: initdb + pg_ctl from the machine's PostgreSQL binaries
// (Debian's `postgresql` package: /usr/lib/postgresql/<version>/bin; `.ci/run` installs it),
// a private data directory and unix socket directory under a temp folder, a private TCP port
// on 127.0.0.1, password authentication (scram-sha-256) over TCP, trust over the socket for
// the test's own admin queries (psql). PostgreSQL refuses to run as root: as root the
// cluster is created and run as the `postgres` system user (created if missing), which owns
// the temp folder. Stopped by `stop()` and, whatever happens, when the test process exits.
//
// There is no skip: without the binaries, `startPostgres()` throws and the test fails.

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

/**
 * Starts a private PostgreSQL. Resolves to `{ url(db?), port, password, socketDir, psql(sql, db?), createDatabase(name), stop() }`.
 */
export async function startPostgres() {
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
  const options = [
    `-p ${port}`, `-k ${dir}`, "-c listen_addresses='127.0.0.1'", '-c fsync=off', '-c synchronous_commit=off',
    '-c full_page_writes=off', '-c max_connections=200', '-c shared_buffers=32MB',
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
    stop,
  };
}
