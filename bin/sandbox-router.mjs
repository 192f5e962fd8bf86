#!/usr/bin/env node
// The operator's command line (docs/decisions.md#the-command-line):
//   sandbox-router replay <records.jsonl> --config <module> [--json] [--fail-on-change]
//   sandbox-router explain --config <module> --request <json> [--json]
// `--config` names a module whose default export is the router's options (or a function
// returning them, or a router); the command builds the router and asks it. Every decision is
// the router's (`router.replay`, `router.explain`); this file reads files and prints.
import { createReadStream } from 'node:fs';
import { createHash } from 'node:crypto';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import { SandboxRouter, createSandboxRouter } from '../index.mjs';

const HELP = {
  main: `usage: sandbox-router <command> [options]

commands:
  replay <records.jsonl> --config <module>   replay recorded decisions against a configuration
  explain --config <module> --request <json>  explain what the configuration decides for a request

sandbox-router <command> --help shows a command's options.`,
  replay: `usage: sandbox-router replay <records.jsonl> --config <module> [--json] [--fail-on-change]

Replays each decision record of the file (one JSON object a line, as jsonLinesSink writes
them) on the router the module configures, and prints how many decide the same and a table
of those that change: the request's digest, was → now, and why.

  --config <module>   a module whose default export is the router's options (with a
                      registry, or the factory's providers), a function returning them, or a router
  --json              print one JSON object instead of the table
  --fail-on-change    exit 3 when a decision changes (for a configuration change's CI)

exit: 0; 3 with --fail-on-change and a change; 1 when a record cannot be read; 2 on a usage error.`,
  explain: `usage: sandbox-router explain --config <module> --request <json> [--json]

Prints what the router the module configures decides for the request (eligible pools in
order, each rejected pool with its reasons), without launching.

  --config <module>   as for replay
  --request <json>    the request, as JSON text
  --json              print the explanation as JSON

exit: 0; 1 when the request is invalid; 2 on a usage error.`,
};

/** Options of `argv`: positionals and `--flag [value]` (`flags` take no value). */
function parse(argv, flags) {
  const out = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) out._.push(a);
    else if (flags.includes(a.slice(2))) out[a.slice(2)] = true;
    else if (i + 1 < argv.length) out[a.slice(2)] = argv[++i];
    else out[a.slice(2)] = undefined;
  }
  return out;
}

function usage(which, message) {
  if (message) process.stderr.write(`sandbox-router: ${message}\n\n`);
  process.stderr.write(`${HELP[which]}\n`);
  process.exit(2);
}

/** The router the config module makes. */
async function routerOf(module) {
  const m = await import(pathToFileURL(path.resolve(module)).href);
  let v = m.default ?? m;
  if (typeof v === 'function' && !(v.prototype instanceof SandboxRouter)) v = await v();
  if (v instanceof SandboxRouter) return v;
  if (v !== null && typeof v === 'object' && 'providers' in v) return createSandboxRouter(v);
  return new SandboxRouter(v);
}

const digest = (request) => createHash('sha256').update(JSON.stringify(request ?? {})).digest('hex').slice(0, 12);
const side = (s) => s.providerId ?? s.code ?? '-';

function table(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  return rows.map((r) => r.map((c, i) => String(c).padEnd(widths[i])).join('  ').trimEnd()).join('\n');
}

async function replay(argv) {
  const o = parse(argv, ['json', 'fail-on-change', 'help']);
  if (o.help) {
    process.stdout.write(`${HELP.replay}\n`);
    return 0;
  }
  if (o._.length !== 1) usage('replay', 'name one records file');
  if (typeof o.config !== 'string') usage('replay', '--config <module> is required');
  const router = await routerOf(o.config);
  let total = 0;
  let same = 0;
  let invalid = 0;
  const changes = [];
  const lines = createInterface({ input: createReadStream(o._[0]), crlfDelay: Infinity });
  let n = 0;
  for await (const line of lines) {
    n++;
    if (line.trim() === '') continue;
    total++;
    try {
      // The line as it is: the router reads the record's text once.
      const out = router.replay(line);
      if (out.same) {
        same++;
        continue;
      }
      const record = JSON.parse(line);
      const first = out.changes[0];
      changes.push({ line: n, id: record.id, request: digest(record.request), was: side(out.recorded), now: side(out.replayed), why: first ? `${first.pool} ${first.why}` : '', summary: out.summary });
    } catch (error) {
      invalid++;
      process.stderr.write(`line ${n}: ${error?.code ?? 'ERROR'}${error?.field ? ` (${error.field})` : ''}\n`);
    }
  }
  if (o.json) {
    process.stdout.write(`${JSON.stringify({ total, same, changed: changes.length, invalid, changes })}\n`);
  } else {
    process.stdout.write(`${total} decisions: ${same} the same, ${changes.length} change${invalid ? `, ${invalid} unreadable` : ''}\n`);
    if (changes.length > 0) {
      process.stdout.write(`${table([['request', 'was → now', 'why'], ...changes.map((c) => [c.request, `${c.was} → ${c.now}`, c.why])])}\n`);
    }
  }
  if (invalid > 0) return 1;
  return o['fail-on-change'] && changes.length > 0 ? 3 : 0;
}

async function explain(argv) {
  const o = parse(argv, ['json', 'help']);
  if (o.help) {
    process.stdout.write(`${HELP.explain}\n`);
    return 0;
  }
  if (typeof o.config !== 'string') usage('explain', '--config <module> is required');
  if (typeof o.request !== 'string') usage('explain', '--request <json> is required');
  let request;
  try {
    request = JSON.parse(o.request);
  } catch {
    usage('explain', '--request must be JSON');
  }
  const router = await routerOf(o.config);
  try {
    const e = await router.explain(request);
    if (o.json) {
      process.stdout.write(`${JSON.stringify(e)}\n`);
      return 0;
    }
    process.stdout.write(`${e.summary}\n`);
    const rows = [
      ['pool', 'verdict', 'why'],
      ...e.eligible.map((p, i) => [p.providerId, `eligible, ranked ${i + 1}`, '']),
      ...e.rejected.map((r) => [r.providerId, 'rejected', r.reasons.map((x) => `${x.code} ${x.detail}`).join('; ')]),
    ];
    process.stdout.write(`${table(rows)}\n`);
    return 0;
  } catch (error) {
    process.stderr.write(`sandbox-router: ${error?.code ?? 'ERROR'}${error?.field ? ` (${error.field})` : ''}: ${error?.message ?? ''}\n`);
    return 1;
  }
}

const [command, ...rest] = process.argv.slice(2);
if (command === undefined || command === '--help' || command === 'help') {
  process.stdout.write(`${HELP.main}\n`);
  process.exit(command === undefined ? 2 : 0);
}
const run = command === 'replay' ? replay : command === 'explain' ? explain : null;
if (run === null) usage('main', `unknown command: ${command}`);
process.exitCode = await run(rest);
