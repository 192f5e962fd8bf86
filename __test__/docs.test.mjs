// Every code block in README.md and docs/*.md is checked, so the documentation cannot drift
// from the package:
// - a ```js / ```mjs block is a complete program: it runs against this checkout (its imports
//   of '@agent-relay/sandbox-router' and '@agent-relay/sandbox-router/local' are pointed at
//   index.mjs and local/index.mjs; any other package resolves from the devDependencies) and
//   must exit 0; a block that prints says what, with an
//   `<!-- output: REGEX -->` line right above it (REGEX, multiline, must match its stdout);
// - a ```ts block is type-checked with tsc (strict, nodenext) against index.d.mts;
// - a block that cannot run says why, with `<!-- not run: REASON -->` right above it.
// `<!-- needs: postgres -->` above a js block starts the tests' private PostgreSQL and hands
// the program a fresh database in DATABASE_URL.
//
// It also checks what the README promises to be complete: the API tour names every export,
// the error table every code the types declare, the event table every event type; and that
// every relative link and #anchor in these files leads somewhere.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, mkdtempSync, writeFileSync, rmSync, mkdirSync, existsSync } from 'node:fs';
import { join, dirname, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { spawnSync, spawn } from 'node:child_process';
import * as pkg from '../index.mjs';
import * as local from '../local/index.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const FILES = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
const read = (file) => readFileSync(join(root, file), 'utf8');

const JS = new Set(['js', 'mjs', 'javascript']);
const TS = new Set(['ts', 'mts', 'typescript']);
/** Languages that look like code we could check but that this test does not handle. */
const UNHANDLED = new Set(['cjs', 'jsx', 'tsx', 'cts', 'node']);
/** The most blocks that may say they are not run: keep them few. */
const MAX_NOT_RUN = 4;

/** Fenced blocks of one markdown text, with the marker comments right above each. */
function parseBlocks(text, file) {
  const lines = text.split('\n');
  const out = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)(.*)$/.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence, lang, rest] = open;
    let j = i + 1;
    while (j < lines.length && !(lines[j].trim().startsWith(fence) && lines[j].trim().replace(/[`~]/g, '') === '')) j++;
    assert.ok(j < lines.length, `${file}:${i + 1}: unclosed code block`);
    const code = lines
      .slice(i + 1, j)
      .map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l))
      .join('\n');
    const markers = {};
    for (let k = i - 1; k >= 0; k--) {
      const m = /^\s*<!--\s*([\w ]+?)\s*:\s*(.*?)\s*-->\s*$/.exec(lines[k]);
      if (!m) break;
      markers[m[1]] = m[2];
    }
    out.push({ file, line: i + 1, lang: lang.toLowerCase(), info: rest.trim(), code: `${code}\n`, markers });
    i = j;
  }
  return out;
}

const where = (b) => `${b.file}:${b.line}`;

/** What is wrong with a set of blocks, as messages (empty: nothing). */
function problems(all) {
  const found = [];
  for (const b of all) {
    const code = JS.has(b.lang) || TS.has(b.lang);
    if (UNHANDLED.has(b.lang)) found.push(`${where(b)}: a \`\`\`${b.lang} block is neither run nor type-checked by this test: use js or ts`);
    if (code && b.info !== '') found.push(`${where(b)}: nothing may follow the language of a js/ts block (\`${b.info}\`)`);
    for (const key of Object.keys(b.markers)) {
      if (!['not run', 'output', 'needs'].includes(key)) found.push(`${where(b)}: unknown marker <!-- ${key}: … -->`);
    }
    if ('not run' in b.markers) {
      if (b.markers['not run'].length < 10) found.push(`${where(b)}: <!-- not run: … --> needs a reason`);
      if ('output' in b.markers || 'needs' in b.markers) found.push(`${where(b)}: a block that is not run cannot expect output`);
    }
    if (('output' in b.markers || 'needs' in b.markers) && !JS.has(b.lang)) found.push(`${where(b)}: only js blocks run, so only they take output/needs`);
    if ('needs' in b.markers && b.markers.needs !== 'postgres') found.push(`${where(b)}: the only harness is postgres`);
    if (JS.has(b.lang) && !('not run' in b.markers) && /console\.(log|info|table|dir)\(/.test(b.code) && !('output' in b.markers)) {
      found.push(`${where(b)}: the block prints: say what with <!-- output: REGEX --> right above it`);
    }
  }
  const notRun = all.filter((b) => 'not run' in b.markers);
  if (notRun.length > MAX_NOT_RUN) found.push(`at most ${MAX_NOT_RUN} blocks may be left unrun: ${notRun.map(where).join(', ')}`);
  return found;
}

const ALL = FILES.flatMap((file) => parseBlocks(read(file), file));
const runJs = ALL.filter((b) => JS.has(b.lang) && !('not run' in b.markers));
const checkTs = ALL.filter((b) => TS.has(b.lang) && !('not run' in b.markers));

const PKG_IMPORT = /(['"])@agent-relay\/sandbox-router(\/[\w./-]+)?\1/g;
function pointImports(code, target) {
  let imports = 0;
  const rewritten = code.replace(PKG_IMPORT, (_, q, sub) => {
    imports++;
    assert.ok(sub === undefined || sub === '/local', `only the package and its /local entry can be imported, not ${sub}`);
    return JSON.stringify(target(sub === '/local' ? 'local/index.mjs' : 'index.mjs'));
  });
  return { rewritten, imports };
}

test('every js/ts block is run, type-checked, or says why not; markers are well-formed', () => {
  assert.ok(runJs.length > 0 && checkTs.length > 0);
  assert.deepEqual(problems(ALL), []);
});

test('the block checker must-fire / must-not-fire (fixture pages)', () => {
  const page = (text) => problems(parseBlocks(text, 'fixture.md'));
  // must not fire: a runnable block that prints and says what; a marked block; shell and output blocks
  assert.deepEqual(page('<!-- output: ^hi$ -->\n```js\nconsole.log("hi");\n```\n'), []);
  assert.deepEqual(page('<!-- not run: a fragment that shows a type -->\n```ts\n{ a?: string }\n```\n'), []);
  assert.deepEqual(page('```bash\nnpm test\n```\n\n```text\nsbx_… on local\n```\n'), []);
  // must fire: prints without saying what; a marker without a reason; a language we do not check;
  // an info string that would hide a block from a stricter parser; an unknown marker
  assert.equal(page('```js\nconsole.log("hi");\n```\n').length, 1);
  assert.equal(page('<!-- not run: no -->\n```js\nx\n```\n').length, 1);
  assert.equal(page('```tsx\nconst a = <b/>;\n```\n').length, 1);
  assert.equal(page('```js title="x.mjs"\nimport "a";\n```\n').length, 1);
  assert.equal(page('<!-- skip: later -->\n```js\nimport "a";\n```\n').length, 1);
  // an indented block in a list item is found like any other
  const [nested] = parseBlocks('- item:\n\n  ```ts\n  const a = 1;\n  ```\n', 'fixture.md');
  assert.equal(nested.lang, 'ts');
  assert.equal(nested.code, 'const a = 1;\n');
  // too many unrun blocks
  const many = Array.from({ length: MAX_NOT_RUN + 1 }, () => '<!-- not run: an example of a fragment -->\n```js\nx\n```\n').join('\n');
  assert.equal(page(many).length, 1);
});

let pg = null;
async function databaseUrl(name) {
  if (!pg) pg = await (await import('./postgres-server.mjs')).startPostgres();
  await pg.createDatabase(name);
  return pg.url(name);
}
test.after(() => pg?.stop());

/** Runs one program; resolves to { status, signal, stdout, stderr }. */
function runProgram(file, cwd, env) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [file], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, stdout, stderr });
    });
  });
}

const env = { ...process.env };
for (const key of ['SANDBOX_ROUTER_DEBUG', 'DEBUG', 'DATABASE_URL', 'DAYTONA_API_KEY', 'E2B_API_KEY']) delete env[key];

let dbCount = 0;
for (const b of runJs) {
  test(`runs the js block at ${where(b)}`, async () => {
    const { rewritten, imports } = pointImports(b.code, (f) => pathToFileURL(join(root, f)).href);
    assert.ok(imports > 0, `${where(b)}: a documented program imports the package`);
    // Inside the checkout (.tmp/, ignored), so a program's other imports (the OpenTelemetry
    // SDKs of docs/telemetry.md) resolve from its devDependencies, as from a user's own.
    mkdirSync(join(root, '.tmp'), { recursive: true });
    const dir = mkdtempSync(join(root, '.tmp', 'docs-run-'));
    try {
      writeFileSync(join(dir, 'program.mjs'), rewritten);
      const runEnv = { ...env };
      if (b.markers.needs === 'postgres') runEnv.DATABASE_URL = await databaseUrl(`docs_${process.pid}_${++dbCount}`);
      const run = await runProgram(join(dir, 'program.mjs'), dir, runEnv);
      assert.equal(run.status, 0, `${where(b)} exited ${run.status ?? run.signal}:\n${run.stderr}\n${run.stdout}`);
      assert.equal(run.stderr, '', `${where(b)} wrote to stderr`);
      if ('output' in b.markers) {
        assert.match(run.stdout, new RegExp(b.markers.output, 'm'), `${where(b)}: its output is not what the page says`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('every ts block type-checks against the package types (tsc --strict)', () => {
  assert.ok(checkTs.length > 0);
  mkdirSync(join(root, '.tmp'), { recursive: true });
  const dir = mkdtempSync(join(root, '.tmp', 'doc-blocks-'));
  try {
    const names = new Map();
    for (const b of checkTs) {
      const name = `${b.file.replace(/[^\w]+/g, '_')}_${b.line}.mts`;
      const { rewritten } = pointImports(b.code, (f) => relative(dir, join(root, f)).split('\\').join('/'));
      writeFileSync(join(dir, name), /^\s*(import|export)\s/m.test(rewritten) ? rewritten : `${rewritten}export {};\n`);
      names.set(name, b);
    }
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', types: ['node'], skipLibCheck: true },
        files: [...names.keys()],
      }),
    );
    const tsc = spawnSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], { encoding: 'utf8', timeout: 120_000 });
    // Point every diagnostic at the markdown line it comes from.
    const report = tsc.stdout.replace(/^(?:\S*\/)?([\w.]+\.mts)\((\d+),(\d+)\)/gm, (all, name, line) => {
      const b = names.get(name);
      return b ? `${b.file}:${b.line + Number(line)}` : all;
    });
    assert.equal(tsc.status, 0, `tsc:\n${report}${tsc.stderr}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------------------------------
// What the README promises to be complete
// ---------------------------------------------------------------------------------------

const readme = read('README.md');
/** The text of one `## ` section of the README. */
function section(title) {
  const start = readme.indexOf(`\n## ${title}\n`);
  assert.ok(start >= 0, `README has a "## ${title}" section`);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
}
const ticked = (text) => new Set([...text.matchAll(/`([^`]+)`/g)].flatMap((m) => m[1].split(/[^\w$.-]+/)));

test('the README stays a front door: at most 32,000 bytes', () => {
  const bytes = Buffer.byteLength(readme);
  assert.ok(bytes <= 32_000, `README.md is ${bytes} bytes`);
});

test('the API tour names every export of both entries and every router method', () => {
  const tour = ticked(section('API tour'));
  const methods = (cls) => Object.getOwnPropertyNames(cls.prototype).filter((k) => k !== 'constructor' && k !== 'toJSON');
  const names = [
    ...Object.keys(pkg).filter((k) => k !== 'default'),
    ...Object.keys(local).filter((k) => k !== 'default'),
    ...[pkg.SandboxRouter, pkg.InMemoryProviderRegistry, pkg.InMemoryMappingStore, pkg.SqliteMappingStore, pkg.PostgresMappingStore].flatMap(methods),
  ];
  const missing = names.filter((n) => !tour.has(n) && !tour.has(`${n}()`));
  assert.deepEqual(missing, [], 'named in the API tour');
});

/** Every code a class of index.d.ts declares (`readonly code: 'A' | 'B'`). */
function declaredCodes() {
  const dts = read('index.d.ts');
  const codes = new Set();
  for (const m of dts.matchAll(/readonly code:\s*((?:\s*\|?\s*'[A-Z0-9_]+')+)/g)) {
    for (const c of m[1].matchAll(/'([A-Z0-9_]+)'/g)) codes.add(c[1]);
  }
  // ProviderProvisioningError's code is a string (it carries the classifier's); its own are in its doc.
  for (const c of ['PROVIDER_LAUNCH_OUTCOME_UNKNOWN', 'PROVIDER_MALFORMED_HANDLE', 'PROVIDER_ACQUISITION_EXHAUSTED', 'MANIFEST_START_FAILED']) codes.add(c);
  return codes;
}

test('the error table lists every code the package declares, with its class and whether to retry', () => {
  const errors = section('Errors');
  const rows = errors.split('\n').filter((l) => l.startsWith('| `'));
  const inTable = new Set(rows.flatMap((r) => [...r.split('|')[1].matchAll(/`([A-Z0-9_]+)`/g)].map((m) => m[1])));
  const missing = [...declaredCodes(), ...local.LOCAL_ERROR_CODES].filter((c) => !inTable.has(c));
  assert.deepEqual(missing, [], 'codes missing from the README error table');
  for (const row of rows) assert.equal(row.split('|').length, 6, `four columns (code, class, meaning, retry?): ${row.slice(0, 60)}`);
  const classes = Object.keys(pkg).filter((k) => /Error$/.test(k) && typeof pkg[k] === 'function');
  for (const cls of classes) assert.ok(errors.includes(`\`${cls}\``), `${cls} is in the error table`);
  assert.match(errors, /nothing will change/);
  assert.match(errors, /retry later/);
});

test('the event table lists every event type with its fields', () => {
  const dts = read('index.d.ts');
  const types = [...dts.matchAll(/^\s*(?:readonly )?type: '([a-z.-]+)';/gm)].map((m) => m[1]);
  assert.ok(types.length >= 19, `found the event types in index.d.ts (${types.length})`);
  const events = section('Events');
  const missing = types.filter((t) => !events.includes(`\`${t}\``));
  assert.deepEqual(missing, [], 'event types missing from the README event table');
});

// ---------------------------------------------------------------------------------------
// Links
// ---------------------------------------------------------------------------------------

/** GitHub's anchor for a heading. */
const slug = (heading) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/<[^>]+>/g, '')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

function anchors(file) {
  const text = read(file).replace(/^(`{3,}|~{3,})[\s\S]*?^\1/gm, '');
  const seen = new Map();
  const out = new Set();
  for (const m of text.matchAll(/^#{1,6}\s+(.*)$/gm)) {
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

test('every relative link and #anchor in README.md and docs/ resolves', () => {
  const broken = [];
  for (const file of FILES) {
    const text = read(file).replace(/^(`{3,}|~{3,})[\s\S]*?^\1/gm, '');
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1];
      if (/^[a-z]+:/i.test(target)) continue;
      const [path, hash] = target.split('#');
      const resolved = path === '' ? file : relative(root, join(root, dirname(file), path));
      if (!existsSync(join(root, resolved))) {
        broken.push(`${file}: ${target} (no ${resolved})`);
        continue;
      }
      if (hash !== undefined && resolved.endsWith('.md') && !anchors(resolved).has(hash)) broken.push(`${file}: ${target} (no #${hash} in ${resolved})`);
    }
  }
  assert.deepEqual(broken, []);
});
