#!/usr/bin/env node
// Consumer check (`npm run test:consumer`): does the packed tarball work for a user?
//
// Why a separate check and not part of `npm test`? It installs the tarball, TypeScript and
// Jest into a fresh project, which takes tens of seconds and needs the npm registry; the
// unit suites must stay fast and offline. What it proves, in a project under os.tmpdir()
// that knows nothing of this repository:
//   1. the host's platform binary, npm/<triple>/sandbox-router.<triple>.node, is the
//      release build (`npm run build:dist`: napi-rs cross toolchain, glibc <= 2.17, stripped);
//   2. `scripts/pack-release.mjs` packs the main package (no .node inside; optionalDependencies
//      at its version, no scripts) and the platform package; both tarballs install next to
//      typescript, @types/node and jest from the registry, the optional peers
//      (`@agent-relay/sandbox`, provider SDKs) are NOT pulled in, and the binary that loads is
//      the platform package's, byte for byte the one checked in step 1;
//   3. the public types compile under `tsc --strict` as ESM (nodenext, "type": "module"),
//      as CommonJS (nodenext in a "type": "commonjs" project, `import x = require()`) and
//      with the legacy `moduleResolution: node10` (which reads `types`, not `exports`);
//      the compiled ESM and CommonJS files then run;
//   4. a node:test file (ESM) and a Jest test (CommonJS) provision a sandbox on the local
//      runtime through the public API, run `echo hello`, read it back and destroy it;
//   5. router errors are `instanceof` the exported classes from import and require, and
//      both module systems export the very same class objects.
// The temporary directory is removed at the end, on failure and on Ctrl-C too (pass
// `--keep` to keep it for debugging). Only the npm registry is contacted (through npm's
// cache, `--prefer-offline`).

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { packRelease } from './pack-release.mjs';
import { inspectBinary, problems as binaryProblems } from './check-binary.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const { platformTriple } = createRequire(import.meta.url)(join(root, 'lib', 'native.js'));
const triple = platformTriple();
const binaryName = `sandbox-router.${triple}.node`;
const platformPackage = `${pkg.name}-${triple}`;
const releaseBinary = join(root, 'npm', triple, binaryName);

// What the fresh project installs from the registry. Jest 30 supports Node ^18.14 || ^20 || ^22 || >=24.
const REGISTRY_PACKAGES = ['typescript@5.9.3', '@types/node@20', 'jest@30'];
const OPTIONAL_PEERS = Object.keys(pkg.peerDependencies ?? {});
const STEP_TIMEOUT_MS = 5 * 60_000;

const work = mkdtempSync(join(tmpdir(), 'sandbox-router-consumer-'));
const project = join(work, 'project'); // "type": "module"; holds node_modules
const cjsProject = join(project, 'cjs'); // "type": "commonjs"; resolves ../node_modules
const childTmp = join(work, 'tmp'); // TMPDIR of every child: local sandboxes land in `work`

const keep = process.argv.includes('--keep');
let cleaned = false;
function cleanup() {
  if (cleaned || keep) return;
  cleaned = true;
  rmSync(work, { recursive: true, force: true, maxRetries: 3 });
}
process.on('exit', cleanup);
for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143], ['SIGHUP', 129]]) {
  process.on(signal, () => {
    cleanup();
    process.exit(code);
  });
}

// The parent `npm run` exports its own context (package, lifecycle, local prefix); a child
// npm or node:test must not inherit it. SANDBOX_ROUTER_NATIVE_PATH would bypass the
// tarball's binary, which is exactly what this check is about.
function childEnv() {
  const env = { ...process.env, TMPDIR: childTmp, NO_COLOR: '1', FORCE_COLOR: '0' };
  for (const key of Object.keys(env)) {
    if (/^npm_(package|lifecycle)_/.test(key) || key === 'npm_config_local_prefix' || key === 'INIT_CWD') delete env[key];
  }
  delete env.SANDBOX_ROUTER_NATIVE_PATH;
  delete env.NODE_TEST_CONTEXT;
  delete env.NODE_OPTIONS;
  return env;
}

function run(cmd, args, cwd) {
  const r = spawnSync(cmd, args, { cwd, env: childEnv(), encoding: 'utf8', timeout: STEP_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 });
  const output = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim();
  if (r.error) throw new Error(`${cmd} ${args.join(' ')}: ${r.error.message}\n${output}`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status ?? r.signal}\n${output}`);
  return { stdout: r.stdout ?? '', stderr: r.stderr ?? '', output };
}

const results = [];
const passed = (name) => results.some((r) => r.name === name && r.ok);
async function step(name, fn, { critical = false, after } = {}) {
  if (after !== undefined && !passed(after)) {
    results.push({ name, ok: false, ms: 0, detail: `skipped: "${after}" failed` });
    console.log(`SKIP ${name} (needs "${after}")`);
    return;
  }
  const t0 = performance.now();
  try {
    const detail = (await fn()) ?? '';
    results.push({ name, ok: true, ms: performance.now() - t0, detail });
    console.log(`ok   ${name}${detail ? ` (${detail})` : ''}`);
  } catch (error) {
    results.push({ name, ok: false, ms: performance.now() - t0, detail: String(error?.message ?? error) });
    console.log(`FAIL ${name}\n${indent(String(error?.message ?? error))}`);
    if (critical) throw new Error(`stopping: "${name}" is required by every later step`);
  }
}

const indent = (text, max = 60) => {
  const lines = text.split('\n');
  const shown = lines.length > max ? [...lines.slice(0, max), `... (${lines.length - max} more lines)`] : lines;
  return shown.map((l) => `     | ${l}`).join('\n');
};

function write(path, text) {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text.replace(/^\n/, ''));
}

// ---------------------------------------------------------------------------------------
// The fresh project's files
// ---------------------------------------------------------------------------------------

const TSCONFIG_BASE = { strict: true, target: 'es2022', types: ['node'], skipLibCheck: false, noEmitOnError: true };

// Written in TypeScript against the ESM entry (`index.d.mts`) and the /local subpath.
const USAGE_ESM_TS = `
import defaultExport, {
  InMemoryProviderRegistry,
  SandboxRouter,
  asProviderId,
  createSandboxRouter,
  SANDBOX_ID_LABEL,
  SandboxRouterError,
  ProviderProvisioningError,
  NoEligibleProviderError,
  RoutingNotApplicableError,
  type ProviderDefinition,
  type ProviderId,
  type SandboxRequest,
  type SandboxRuntime,
  type ProvisionedSandbox,
  type RoutingEvent,
  type RoutingExplanation,
  type RunScriptResult,
} from '@agent-relay/sandbox-router';
import { createLocalRuntime, LOCAL_CAPABILITIES, type LocalSandboxRuntime } from '@agent-relay/sandbox-router/local';

const runtime: LocalSandboxRuntime = createLocalRuntime();
const port: SandboxRuntime = runtime; // the local runtime fits the SandboxRuntime port unchanged
const id: ProviderId = asProviderId('local-esm');
const definition: ProviderDefinition = {
  id,
  runtime: port,
  capabilities: LOCAL_CAPABILITIES,
  signals: { estimatedCost: 0, coldStartLatencyMs: 5, readyLatencyMs: 5, completionWithinBudgetRate: 1, available: true },
};
const events: RoutingEvent[] = [];
const registry = new InMemoryProviderRegistry([definition]);
const router = new SandboxRouter({ registry, observer: (event: RoutingEvent) => void events.push(event) });
const request: SandboxRequest = {
  requires: { requiredCapabilities: ['syncExec'], isolation: 'none' },
  routing: { strategy: 'latency', acquisitionFallback: 'forbidden' },
  launch: { labels: { app: 'consumer-esm' } },
};

try {
  const order: ProviderId[] = router.route(request);
  const explanation: RoutingExplanation = await router.explain(request);
  let sandbox: ProvisionedSandbox;
  try {
    sandbox = await router.provision(request);
  } catch (error) {
    if (error instanceof ProviderProvisioningError) throw new Error(\`provisioning failed: \${error.attempts.map((a) => a.code).join(', ')}\`);
    if (error instanceof NoEligibleProviderError) throw new Error(\`no eligible provider: \${error.summary}\`);
    throw error;
  }
  const stamped: string | undefined = sandbox.labels[SANDBOX_ID_LABEL];
  const result: RunScriptResult = await router.runScript(sandbox.id, { command: 'echo hello' });
  await router.destroy(sandbox.id);
  if (result.output.trim() !== 'hello' || stamped !== sandbox.id || order[0] !== id || explanation.eligible.length !== 1) {
    throw new Error(\`unexpected: \${JSON.stringify({ output: result.output, stamped, order, summary: explanation.summary })}\`);
  }

  const configured = createSandboxRouter({ providers: { local: {} } });
  try {
    configured.route({ placement: { authority: 'fleet' } });
    throw new Error('fleet placement was routed');
  } catch (error) {
    if (!(error instanceof RoutingNotApplicableError)) throw error;
    const base: SandboxRouterError = error;
    const code: string = base.code;
    if (code !== 'ROUTING_NOT_APPLICABLE') throw new Error(code);
  }
  if (defaultExport.SandboxRouter !== SandboxRouter) throw new Error('default export differs from named exports');
  console.log(\`esm: \${result.output.trim()} (\${events.length} events)\`);
} finally {
  await runtime.close();
}
`;

// The same surface through CommonJS: \`import x = require()\` compiles to require().
const USAGE_CJS_TS = `
import router = require('@agent-relay/sandbox-router');
import local = require('@agent-relay/sandbox-router/local');

const definition: router.ProviderDefinition = {
  id: router.asProviderId('local-cjs'),
  runtime: local.createLocalRuntime(),
  capabilities: local.LOCAL_CAPABILITIES,
  signals: { estimatedCost: 1, coldStartLatencyMs: 10, readyLatencyMs: 10, completionWithinBudgetRate: 0.9, available: true },
};
const request: router.SandboxRequest = { resources: { cpu: 0 }, launch: { labels: { app: 'consumer-cjs' } } };

async function main(): Promise<void> {
  const registry = new router.InMemoryProviderRegistry([definition]);
  const sandboxes = new router.SandboxRouter({ registry, observer: { emit: (event: router.RoutingEvent) => void event.type } });
  const sandbox: router.ProvisionedSandbox = await sandboxes.provision(request);
  try {
    const result: router.RunScriptResult = await sandboxes.runScript(sandbox.id, { command: 'echo hello' });
    if (result.output.trim() !== 'hello') throw new Error(\`unexpected output \${JSON.stringify(result.output)}\`);
  } finally {
    await sandboxes.destroy(sandbox.id);
  }

  const configured = createConfigured();
  try {
    await configured.provision({ requires: { isolation: 'microvm' } });
    throw new Error('a microvm request was provisioned on the local runtime');
  } catch (error: unknown) {
    if (error instanceof router.ProviderProvisioningError) throw new Error(\`wrong class: \${error.code}\`);
    if (!(error instanceof router.NoEligibleProviderError)) throw error;
    const reasons: string[] = error.rejections.flatMap((r: router.RejectedProvider) => r.reasons.map((x) => x.code));
    if (!reasons.includes('ISOLATION_INSUFFICIENT')) throw new Error(reasons.join(', '));
  }
  console.log('cjs: hello');
}

function createConfigured(): router.SandboxRouter {
  return router.createSandboxRouter({ providers: { local: {} } });
}

main().then(
  () => (definition.runtime as local.LocalSandboxRuntime).close(),
  (error: unknown) => {
    console.error(error);
    process.exitCode = 1;
    return (definition.runtime as local.LocalSandboxRuntime).close();
  },
);
`;

// node:test, ESM: the public API as a user calls it, plus class identity across module systems.
const NODE_TEST_MJS = `
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as esm from '@agent-relay/sandbox-router';
import esmDefault from '@agent-relay/sandbox-router';
import * as esmLocal from '@agent-relay/sandbox-router/local';

const require = createRequire(import.meta.url);
const cjs = require('@agent-relay/sandbox-router');
const cjsLocal = require('@agent-relay/sandbox-router/local');

test('createSandboxRouter({ providers: { local: {} } }) provisions, runs echo hello, destroys', async () => {
  const router = esm.createSandboxRouter({ providers: { local: {} } });
  const sandbox = await router.provision({ launch: { labels: { app: 'node-test' } } });
  assert.match(sandbox.id, /^sbx_[0-9a-f]{32}$/);
  assert.equal(sandbox.providerId, 'local');
  assert.equal(sandbox.labels[esm.SANDBOX_ID_LABEL], sandbox.id);
  assert.equal(sandbox.labels.app, 'node-test');
  try {
    const result = await router.runScript(sandbox.id, { command: 'echo hello' });
    assert.equal(result.exitCode, 0);
    assert.equal(result.output.trim(), 'hello');
  } finally {
    await router.destroy(sandbox.id);
  }
  await assert.rejects(router.getSandbox(sandbox.id), esm.SandboxNotFoundError);
});

test('the /local runtime behind a registry provisions, runs echo hello, destroys', async () => {
  const runtime = esmLocal.createLocalRuntime();
  try {
    const registry = new esm.InMemoryProviderRegistry([
      {
        id: esm.asProviderId('laptop'),
        runtime,
        capabilities: esmLocal.LOCAL_CAPABILITIES,
        signals: { estimatedCost: 0, coldStartLatencyMs: 1, readyLatencyMs: 1, completionWithinBudgetRate: 1, available: true },
      },
    ]);
    const events = [];
    const router = new esm.SandboxRouter({ registry, observer: (event) => events.push(event.type) });
    const sandbox = await router.provision();
    const result = await router.runScript(sandbox.id, { command: 'echo hello' });
    assert.equal(result.output, 'hello\\n');
    await router.destroy(sandbox.id);
    assert.equal(await runtime.countByLabels({}), 0);
    assert.ok(events.includes('attempt.succeeded'), events.join(', '));
    assert.ok(events.includes('sandbox.destroyed'), events.join(', '));
  } finally {
    await runtime.close();
  }
});

test('import and require export the very same objects (main entry and /local)', () => {
  assert.equal(esmDefault, cjs);
  for (const key of Object.keys(cjs)) assert.equal(esm[key], cjs[key], key);
  for (const key of Object.keys(esm)) if (key !== 'default') assert.equal(cjs[key], esm[key], key);
  for (const key of Object.keys(cjsLocal)) assert.equal(esmLocal[key], cjsLocal[key], 'local ' + key);
  assert.equal(typeof esm.RoutingNotApplicableError, 'function');
});

test('router errors are instanceof the exported classes from import and from require', async () => {
  const runtime = esmLocal.createLocalRuntime();
  try {
    const registry = new cjs.InMemoryProviderRegistry([
      {
        id: cjs.asProviderId('laptop'),
        runtime,
        capabilities: cjsLocal.LOCAL_CAPABILITIES,
        signals: { estimatedCost: 0, coldStartLatencyMs: 1, readyLatencyMs: 1, completionWithinBudgetRate: 1, available: true },
      },
    ]);
    const router = new esm.SandboxRouter({ registry });
    const fleet = (err) =>
      err instanceof esm.RoutingNotApplicableError &&
      err instanceof cjs.RoutingNotApplicableError &&
      err instanceof esm.SandboxRouterError &&
      err instanceof cjs.SandboxRouterError &&
      err instanceof Error &&
      err.code === 'ROUTING_NOT_APPLICABLE';
    assert.throws(() => router.route({ placement: { authority: 'fleet' } }), fleet);
    await assert.rejects(router.provision({ placement: { authority: 'fleet' } }), fleet);
    const none = (err) =>
      err instanceof esm.NoEligibleProviderError &&
      err instanceof cjs.NoEligibleProviderError &&
      err instanceof cjs.SandboxRouterError &&
      !(err instanceof esm.ProviderCapacityExhaustedError) &&
      err.code === 'NO_ELIGIBLE_PROVIDER' &&
      err.rejections.some((r) => r.reasons.some((x) => x.code === 'ISOLATION_INSUFFICIENT'));
    assert.throws(() => router.route({ requires: { isolation: 'microvm' } }), none);
    await assert.rejects(router.provision({ requires: { isolation: 'microvm' } }), none);
    await assert.rejects(
      router.provision({ requires: { isolaton: 'vm' } }),
      (err) => err instanceof esm.SandboxRequestValidationError && err instanceof cjs.SandboxRequestValidationError,
    );
    await assert.rejects(router.runScript('sbx_' + '0'.repeat(32), { command: 'true' }), cjs.SandboxNotFoundError);
    assert.throws(() => esm.asProviderId('Not Valid'), (err) => err instanceof cjs.ProviderRegistryError);
    assert.throws(() => esmLocal.createLocalRuntime({ bogus: 1 }), cjsLocal.LocalRuntimeError);
  } finally {
    await runtime.close();
  }
});
`;

// Jest, CommonJS, plain JS (no transform).
const JEST_TEST_CJS = `
const {
  createSandboxRouter,
  SandboxRouter,
  InMemoryProviderRegistry,
  asProviderId,
  SANDBOX_ID_LABEL,
  SandboxRouterError,
  RoutingNotApplicableError,
  NoEligibleProviderError,
} = require('@agent-relay/sandbox-router');
const { createLocalRuntime, LOCAL_CAPABILITIES } = require('@agent-relay/sandbox-router/local');

test('createSandboxRouter({ providers: { local: {} } }) provisions, runs echo hello, destroys', async () => {
  const router = createSandboxRouter({ providers: { local: {} } });
  const sandbox = await router.provision({ launch: { labels: { app: 'jest' } } });
  expect(sandbox.id).toMatch(/^sbx_[0-9a-f]{32}$/);
  expect(sandbox.labels[SANDBOX_ID_LABEL]).toBe(sandbox.id);
  try {
    const result = await router.runScript(sandbox.id, { command: 'echo hello' });
    expect(result.exitCode).toBe(0);
    expect(result.output.trim()).toBe('hello');
  } finally {
    await router.destroy(sandbox.id);
  }
});

test('the /local runtime behind a registry provisions, runs echo hello, destroys', async () => {
  const runtime = createLocalRuntime();
  try {
    const router = new SandboxRouter({
      registry: new InMemoryProviderRegistry([
        {
          id: asProviderId('laptop'),
          runtime,
          capabilities: LOCAL_CAPABILITIES,
          signals: { estimatedCost: 0, coldStartLatencyMs: 1, readyLatencyMs: 1, completionWithinBudgetRate: 1, available: true },
        },
      ]),
    });
    const sandbox = await router.provision();
    const result = await router.runScript(sandbox.id, { command: 'echo hello' });
    expect(result.output).toBe('hello\\n');
    await router.destroy(sandbox.id);
  } finally {
    await runtime.close();
  }
});

test('router errors are instanceof the exported classes under Jest', async () => {
  const router = createSandboxRouter({ providers: { local: {} } });
  expect(() => router.route({ placement: { authority: 'fleet' } })).toThrow(RoutingNotApplicableError);
  await expect(router.provision({ placement: { authority: 'fleet' } })).rejects.toBeInstanceOf(RoutingNotApplicableError);
  await expect(router.provision({ requires: { isolation: 'microvm' } })).rejects.toBeInstanceOf(NoEligibleProviderError);
  await expect(router.provision({ requires: { isolation: 'microvm' } })).rejects.toBeInstanceOf(SandboxRouterError);
  await expect(router.provision({ requires: { isolation: 'microvm' } })).rejects.toMatchObject({ code: 'NO_ELIGIBLE_PROVIDER' });
});
`;

// Plain node, CommonJS: the same identity check from the require side (dynamic import()).
const IDENTITY_CJS = `
const assert = require('node:assert/strict');
const cjs = require('@agent-relay/sandbox-router');
(async () => {
  const esm = await import('@agent-relay/sandbox-router');
  const router = cjs.createSandboxRouter({ providers: { local: {} } });
  let caught;
  try {
    router.route({ placement: { authority: 'fleet' } });
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof cjs.RoutingNotApplicableError, 'require: instanceof');
  assert.ok(caught instanceof esm.RoutingNotApplicableError, 'import: instanceof');
  assert.equal(esm.RoutingNotApplicableError, cjs.RoutingNotApplicableError);
  assert.equal(esm.default, cjs);
  console.log('cjs identity: ok');
})().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
`;

function writeProject() {
  write(
    join(project, 'package.json'),
    JSON.stringify({ name: 'sandbox-router-consumer', version: '0.0.0', private: true, type: 'module' }, null, 2),
  );
  write(join(project, 'src', 'usage.ts'), USAGE_ESM_TS);
  write(
    join(project, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { ...TSCONFIG_BASE, module: 'nodenext', moduleResolution: 'nodenext', outDir: 'dist' }, files: ['src/usage.ts'] }, null, 2),
  );
  write(join(project, 'test', 'router.test.mjs'), NODE_TEST_MJS);

  write(
    join(cjsProject, 'package.json'),
    JSON.stringify(
      {
        name: 'sandbox-router-consumer-cjs',
        version: '0.0.0',
        private: true,
        type: 'commonjs',
        jest: { testEnvironment: 'node', testMatch: ['<rootDir>/test/**/*.test.cjs'], transform: {} },
      },
      null,
      2,
    ),
  );
  write(join(cjsProject, 'src', 'usage.ts'), USAGE_CJS_TS);
  write(
    join(cjsProject, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { ...TSCONFIG_BASE, module: 'nodenext', moduleResolution: 'nodenext', outDir: 'dist' }, files: ['src/usage.ts'] }, null, 2),
  );
  // Legacy resolution: ignores `exports`, reads `types` and local/index.d.ts by path.
  write(
    join(cjsProject, 'tsconfig.node10.json'),
    JSON.stringify({ compilerOptions: { ...TSCONFIG_BASE, module: 'commonjs', moduleResolution: 'node10', noEmit: true }, files: ['src/usage.ts'] }, null, 2),
  );
  write(join(cjsProject, 'test', 'router.test.cjs'), JEST_TEST_CJS);
  write(join(cjsProject, 'identity.cjs'), IDENTITY_CJS);
}

// ---------------------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------------------

async function main() {
  mkdirSync(childTmp, { recursive: true });
  mkdirSync(join(work, 'pack'), { recursive: true });
  console.log(`consumer check of ${pkg.name}@${pkg.version} (${triple}, node ${process.version}) in ${work}`);
  let tarball;
  let platformTarball;
  let packedFiles = [];

  await step(
    `the release binary npm/${triple}/${binaryName}: glibc <= 2.17, stripped`,
    () => {
      if (!existsSync(releaseBinary)) throw new Error(`${releaseBinary} is missing: run npm run build:dist first`);
      if (!triple.endsWith('-gnu')) return 'not a glibc target: no floor to check';
      const result = binaryProblems(inspectBinary(readFileSync(releaseBinary)));
      if (result.problems.length > 0) throw new Error(result.problems.join('\n'));
      return `GLIBC_${result.highest}, stripped`;
    },
    { critical: true },
  );

  // The platform package for the host and the staged main package, as the release workflow
  // packs them (the other six platform packages are not built here).
  await step(
    'pack: main package (staged, no binary) + platform package',
    () => {
      const summary = packRelease({ out: join(work, 'pack'), platforms: [triple] });
      tarball = summary.main.tarball;
      platformTarball = summary.platforms[0].tarball;
      packedFiles = summary.main.files;
      const binaries = packedFiles.filter((f) => f.endsWith('.node'));
      if (binaries.length > 0) throw new Error(`the main tarball ships ${binaries.join(', ')}`);
      const manifest = JSON.parse(run('tar', ['-xzOf', tarball, 'package/package.json'], work).stdout);
      if (manifest.optionalDependencies?.[platformPackage] !== pkg.version) {
        throw new Error(`the packed package.json lacks ${platformPackage}@${pkg.version} in optionalDependencies`);
      }
      if (manifest.scripts !== undefined) throw new Error(`the packed package.json has scripts: ${Object.keys(manifest.scripts).join(', ')}`);
      const mib = (n) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
      return `main ${packedFiles.length} files ${mib(summary.main.size)}, ${triple} ${mib(summary.platforms[0].size)}`;
    },
    { critical: true },
  );

  await step(
    `npm install <tarball> ${REGISTRY_PACKAGES.join(' ')}`,
    () => {
      writeProject();
      run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', tarball, platformTarball, ...REGISTRY_PACKAGES], project);
      const installed = join(project, 'node_modules', '@agent-relay', 'sandbox-router');
      const version = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')).version;
      if (version !== pkg.version) throw new Error(`installed ${version}, expected ${pkg.version}`);
      const tsVersion = JSON.parse(readFileSync(join(project, 'node_modules', 'typescript', 'package.json'), 'utf8')).version;
      const jestVersion = JSON.parse(readFileSync(join(project, 'node_modules', 'jest', 'package.json'), 'utf8')).version;
      return `typescript ${tsVersion}, jest ${jestVersion}`;
    },
    { critical: true },
  );

  await step(`the binary that loads is ${platformPackage}'s, the one checked above (no local .node in the main package)`, () => {
    const installed = join(project, 'node_modules', '@agent-relay', 'sandbox-router');
    const stray = readdirSync(installed).filter((f) => f.endsWith('.node'));
    if (stray.length > 0) throw new Error(`the installed main package holds ${stray.join(', ')}`);
    const script = `console.log(JSON.stringify(require(${JSON.stringify(join(installed, 'lib', 'native.js'))}).locate()))`;
    const found = JSON.parse(run(process.execPath, ['-e', script], project).stdout);
    const expected = join(project, 'node_modules', ...platformPackage.split('/'), binaryName);
    if (found.source !== platformPackage || found.path !== expected) throw new Error(`the loader picked ${JSON.stringify(found)}, expected ${expected}`);
    if (!readFileSync(expected).equals(readFileSync(releaseBinary))) throw new Error(`${expected} differs from ${releaseBinary}`);
    return `${platformPackage}/${binaryName}`;
  });

  await step('optional peers (@agent-relay/sandbox, provider SDKs) are not installed', () => {
    const present = OPTIONAL_PEERS.filter((name) => existsSync(join(project, 'node_modules', ...name.split('/'))));
    if (present.length > 0) throw new Error(`installed although optional: ${present.join(', ')}`);
    const installed = join(project, 'node_modules', '@agent-relay', 'sandbox-router');
    const top = readdirSync(installed).sort();
    for (const unexpected of ['src', 'target', '__test__', 'Cargo.toml', 'bench', 'examples']) {
      if (top.includes(unexpected)) throw new Error(`the installed package contains ${unexpected}`);
    }
    return `${OPTIONAL_PEERS.length} optional peers absent`;
  });

  const tsc = join(project, 'node_modules', 'typescript', 'bin', 'tsc');
  const TSC_ESM = 'tsc --strict: ESM project (module/moduleResolution nodenext, "type": "module")';
  const TSC_CJS = 'tsc --strict: CommonJS project (nodenext, "type": "commonjs", import x = require())';
  await step(TSC_ESM, () => {
    run(process.execPath, [tsc, '-p', 'tsconfig.json', '--strict'], project);
    return 'compiled';
  });
  await step('every runtime export is declared in the types, and every declared value exists (main entry and /local)', () => {
    const consumerRequire = createRequire(join(project, 'package.json'));
    const file = join(project, 'src', 'exports.ts');
    const lines = ['// Generated by consumer-check.mjs: runtime export names vs. declared values.'];
    for (const [n, specifier] of ['@agent-relay/sandbox-router', '@agent-relay/sandbox-router/local'].entries()) {
      const names = Object.keys(consumerRequire(specifier)).sort();
      const union = names.map((k) => JSON.stringify(k)).join(' | ') || 'never';
      lines.push(
        `import * as api${n} from '${specifier}';`,
        `type Runtime${n} = ${union};`,
        `/** Exported at runtime but not declared in the types of ${specifier}. */`,
        `export const undeclaredIn${n}: [Exclude<Runtime${n}, keyof typeof api${n}>] extends [never] ? true : Exclude<Runtime${n}, keyof typeof api${n}> = true;`,
        `/** Declared as a value in the types of ${specifier} but not exported at runtime. */`,
        `export const missingAtRuntimeIn${n}: [Exclude<keyof typeof api${n}, Runtime${n} | 'default'>] extends [never] ? true : Exclude<keyof typeof api${n}, Runtime${n} | 'default'> = true;`,
      );
    }
    write(file, `${lines.join('\n')}\n`);
    run(process.execPath, [tsc, '--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--types', 'node', '--skipLibCheck', 'src/exports.ts'], project);
    return 'types match runtime exports';
  });
  await step(TSC_CJS, () => {
    run(process.execPath, [tsc, '-p', 'tsconfig.json', '--strict'], cjsProject);
    const emitted = readFileSync(join(cjsProject, 'dist', 'usage.js'), 'utf8');
    if (!/require\("@agent-relay\/sandbox-router"\)/.test(emitted)) throw new Error('the CommonJS output does not require() the package');
    return 'compiled to require()';
  });
  await step('tsc --strict --noEmit: CommonJS, legacy moduleResolution node10 (types field)', () => {
    run(process.execPath, [tsc, '-p', 'tsconfig.node10.json', '--strict', '--noEmit'], cjsProject);
    return 'type-checked';
  });
  await step('run the compiled ESM usage', () => run(process.execPath, ['dist/usage.js'], project).stdout.trim(), { after: TSC_ESM });
  await step('run the compiled CommonJS usage', () => run(process.execPath, ['dist/usage.js'], cjsProject).stdout.trim(), { after: TSC_CJS });

  await step('node --test (ESM): provision on local, echo hello, destroy; errors and class identity', () => {
    const { stdout } = run(process.execPath, ['--test', '--test-reporter=spec', 'test/router.test.mjs'], project);
    const pass = /pass (\d+)/.exec(stdout)?.[1];
    return `${pass ?? '?'} tests passed`;
  });
  await step('jest (CommonJS): provision on local, echo hello, destroy; errors', () => {
    const jest = join(project, 'node_modules', 'jest', 'bin', 'jest.js');
    const { output } = run(process.execPath, [jest, '--ci', '--colors=false'], cjsProject);
    const line = /Tests:\s+(.*)/.exec(output)?.[1];
    return line ?? 'passed';
  });
  await step('npx sandbox-router explain (the bin entry, installed): a config module, a request', () => {
    writeFileSync(join(project, 'router-config.mjs'), 'export default { providers: { local: {} } };\n');
    const bin = join(project, 'node_modules', '.bin', 'sandbox-router');
    const { stdout } = run(bin, ['explain', '--config', 'router-config.mjs', '--request', '{}'], project);
    if (!/local\s+eligible, ranked 1/.test(stdout)) throw new Error(`no ranked local pool in:\n${stdout}`);
    return stdout.trim().split('\n')[0];
  });
  await step('CommonJS and import() share error classes (plain node, require side)', () =>
    run(process.execPath, ['identity.cjs'], cjsProject).stdout.trim(),
  );
}

const t0 = performance.now();
let fatal = null;
try {
  await main();
} catch (error) {
  fatal = error;
} finally {
  cleanup();
}
const failed = results.filter((r) => !r.ok);
console.log(
  `\nconsumer check summary (${((performance.now() - t0) / 1000).toFixed(1)} s, ${keep ? `project kept in ${work}` : 'temporary project removed'}):`,
);
for (const r of results) {
  const mark = r.ok ? 'ok  ' : r.detail.startsWith('skipped') ? 'SKIP' : 'FAIL';
  console.log(`  ${mark} ${r.name} [${(r.ms / 1000).toFixed(1)} s]`);
}
if (fatal) console.log(`  ${fatal.message}`);
console.log(failed.length === 0 && !fatal ? `PASS: ${results.length} steps` : `FAILED: ${failed.length} of ${results.length} steps`);
// The closing line CI reads: passed / failed steps (a fatal error counts as one failure).
const skipped = results.filter((r) => !r.ok && r.detail.startsWith('skipped')).length;
console.log(`consumer: ${results.length - failed.length} passed, ${failed.length - skipped + (fatal ? 1 : 0)} failed, ${skipped} skipped`);
process.exitCode = failed.length === 0 && !fatal ? 0 : 1;
