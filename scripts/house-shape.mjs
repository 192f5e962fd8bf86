// The measured shape of the house (issue 31): `node scripts/house-shape.mjs` prints each
// count, and __test__/house-shape.test.mjs holds them to their bars.
//
// - codes: distinct error/outcome code literals ('UPPER_CASE', 4+ characters) in lib/*.js
//   outside lib/errors.js (the core builds every error; JS names Node's own codes, the
//   native-path variable and the error thrown before the binary loads);
// - emits: `emit…(…, 'type.name')` sites in lib/ (every event comes from the core);
// - threadLocals: `thread_local!` in src/binding/;
// - cycles: import circles among lib/*.js (`require('./x.js')`) and among Rust modules
//   (`crate::a::b` paths outside comments and `#[cfg(test)]` code; a module and its own
//   submodules are one place);
// - libLines: lines of lib/*.js.
import { readFileSync, readdirSync } from 'node:fs';
import { basename, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..');

function filesUnder(dir, ext) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...filesUnder(p, ext));
    else if (e.name.endsWith(ext)) out.push(p);
  }
  return out;
}

/** Every circle in `graph` (node → Set of nodes), each as the path that closes it. */
function circles(graph) {
  const seen = new Set();
  const on = new Set();
  const stack = [];
  const found = [];
  const visit = (n) => {
    seen.add(n);
    on.add(n);
    stack.push(n);
    for (const m of graph.get(n) ?? []) {
      if (on.has(m)) found.push([...stack.slice(stack.indexOf(m)), m]);
      else if (!seen.has(m)) visit(m);
    }
    stack.pop();
    on.delete(n);
  };
  for (const n of graph.keys()) if (!seen.has(n)) visit(n);
  return found;
}

function rustModule(root, file) {
  const p = relative(join(root, 'src'), file).split(sep).join('/').replace(/\.rs$/, '');
  return p.replace(/\/mod$/, '').replaceAll('/', '::');
}

/** The shape's counts, with the circles found. */
export function houseShape(root = ROOT) {
  const lib = readdirSync(join(root, 'lib')).filter((f) => f.endsWith('.js'));
  const text = new Map(lib.map((f) => [f, readFileSync(join(root, 'lib', f), 'utf8')]));
  const codes = new Set();
  let emits = 0;
  let libLines = 0;
  const js = new Map();
  for (const [f, s] of text) {
    libLines += s.split('\n').length - (s.endsWith('\n') ? 1 : 0);
    if (f !== 'errors.js') for (const m of s.matchAll(/'([A-Z][A-Z0-9_]{3,})'/g)) codes.add(m[1]);
    emits += [...s.matchAll(/emit[A-Za-z]*\([^)]*'[a-z]+\.[a-z.-]+'/g)].length;
    js.set(f, new Set([...s.matchAll(/require\('\.\/([a-z-]+\.js)'\)/g)].map((m) => m[1])));
  }
  const rsFiles = filesUnder(join(root, 'src'), '.rs');
  const mods = new Set(rsFiles.map((f) => rustModule(root, f)));
  const rust = new Map();
  let threadLocals = 0;
  for (const file of rsFiles) {
    const m = rustModule(root, file);
    const source = readFileSync(file, 'utf8');
    if (m.startsWith('binding')) threadLocals += [...source.matchAll(/thread_local!/g)].length;
    const code = [];
    for (const line of source.split('\n')) {
      if (line.trim().startsWith('#[cfg(test)]')) break;
      if (!line.trim().startsWith('//')) code.push(line);
    }
    const deps = new Set();
    for (const u of code.join('\n').matchAll(/crate::([a-z_:]+)/g)) {
      const parts = u[1].split('::');
      for (let k = parts.length; k > 0; k--) {
        const c = parts.slice(0, k).join('::');
        if (mods.has(c)) {
          if (c !== m && !c.startsWith(`${m}::`) && !m.startsWith(`${c}::`)) deps.add(c);
          break;
        }
      }
    }
    rust.set(m, deps);
  }
  const cycles = [...circles(js), ...circles(rust)];
  return { codes: [...codes].sort(), emits, threadLocals, cycles, libLines, libFiles: lib.length };
}

if (basename(fileURLToPath(import.meta.url)) === basename(process.argv[1] ?? '')) {
  const s = houseShape();
  console.log(`code literals in lib/*.js outside errors.js: ${s.codes.length} (${s.codes.join(', ')})`);
  console.log(`emit(…, 'type.name') sites in lib/: ${s.emits}`);
  console.log(`thread_local! in src/binding/: ${s.threadLocals}`);
  console.log(`import circles (JS requires, Rust modules): ${s.cycles.length}${s.cycles.map((c) => `\n  ${c.join(' -> ')}`).join('')}`);
  console.log(`lines in lib/*.js: ${s.libLines} (${s.libFiles} files)`);
}
