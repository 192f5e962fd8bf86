// The README's first program is what a new user copies: run that very block against this
// checkout, so the README cannot drift from the package.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { spawnSync } from 'node:child_process';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

test('the README opens with npm i and a complete program that provisions, runs and destroys', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const first = readme.indexOf('```bash\nnpm i @agent-relay/sandbox-router\n```');
  assert.ok(first > 0 && first < readme.indexOf('## Quick start'), 'npm i comes before the contributor quick start');
  const block = /```js\n([\s\S]*?)```/.exec(readme.slice(first));
  assert.ok(block, 'a js block follows');
  const program = block[1].replace("from '@agent-relay/sandbox-router'", `from ${JSON.stringify(pathToFileURL(join(root, 'index.mjs')).href)}`);
  assert.notEqual(program, block[1], 'the program imports the package');
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-router-readme-'));
  try {
    writeFileSync(join(dir, 'try-router.mjs'), program);
    const run = spawnSync(process.execPath, [join(dir, 'try-router.mjs')], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /^sbx_[0-9a-f]{32} on local → 0 hello from a sandbox\n$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
