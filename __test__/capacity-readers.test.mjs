// Builtin capacity readers: real HTTP from the native (Rust/tokio) readers against mock
// servers on 127.0.0.1 that reproduce each provider's documented wire shapes
// (see provider-apis.md): pagination, errors, rate limits, slow answers, bad bodies.
// Every server checks that the key really arrives in the provider's auth header, and no
// measurement, error or inspect output may contain it (canary).
import test from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { inspect } from 'node:util';
import readers from '../lib/capacity-readers.js';
import errors from '../lib/errors.js';
import { leaks } from './fixtures.mjs';

const { createCapacityReader, summarizeDaytonaCapacity, parseDaytonaCapacityLimits, CAPACITY_READER_KINDS } = readers;
const { SandboxRouterConfigurationError, SandboxRequestValidationError } = errors;

const KEY = 'sk_live_CANARY_5b2f8e0d9a71';

// ---------------------------------------------------------------------------------------
// helpers


/** Reads through a fresh reader and asserts nothing it produced contains the key. */
async function read(provider, options, getOpts) {
  const reader = createCapacityReader(provider, { apiKey: KEY, ...options });
  const m = await reader.getCapacity(getOpts);
  assert.equal(leaks(m, KEY), false, 'measurement leaks the key');
  assert.equal(leaks(reader, KEY), false, 'reader leaks the key');
  return m;
}

const AUTH = {
  daytona: (h) => h.authorization === `Bearer ${KEY}`,
  e2b: (h) => h['x-api-key'] === KEY && h.authorization === undefined,
  microsandbox: (h) => h.authorization === `Bearer ${KEY}`,
  agent37: (h) => h.authorization === `Bearer ${KEY}`,
};

const ERROR_BODY = {
  daytona: (status) => ({ path: '/api/sandbox', timestamp: '2026-11-30T00:00:00Z', statusCode: status, error: 'Unauthorized', message: 'Invalid credentials' }),
  e2b: (status) => ({ code: status, message: 'Invalid API key' }),
  microsandbox: () => ({ error: { code: 'invalid_api_key', message: 'Invalid API key', details: null } }),
  agent37: () => ({ error: { code: 'invalid_api_key', message: 'Invalid API key' } }),
};

/**
 * A mock provider. `handler(req, res, url, n)` answers authenticated requests; requests
 * without the right auth header get the provider's 401.
 */
async function mockProvider(provider, handler) {
  const requests = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    requests.push({ path: url.pathname, query: Object.fromEntries(url.searchParams), headers: req.headers, at: Date.now() });
    if (provider && !AUTH[provider](req.headers)) return json(res, 401, ERROR_BODY[provider](401));
    return handler(req, res, url, requests.length);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  return {
    base,
    requests,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function json(res, status, body, headers = {}) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

async function withServer(provider, handler, fn) {
  const s = await mockProvider(provider, handler);
  try {
    return await fn(s);
  } finally {
    await s.close();
  }
}

function daytonaSandbox(i, { cpu = 1, memory = 2, disk = 10, state = 'started' } = {}) {
  return {
    id: `sb-${i}`, organizationId: 'org-1', name: `box-${i}`, target: 'us', user: 'daytona', state, desiredState: state,
    public: false, cpu, gpu: 0, memory, disk, labels: { team: 'relay' }, createdAt: '2026-11-01T00:00:00Z',
    updatedAt: '2026-11-30T00:00:00Z', lastActivityAt: '2026-11-30T00:00:00Z', sandboxClass: 'container',
    toolboxProxyUrl: 'https://proxy.example/toolbox',
  };
}
const e2bSandbox = (i) => ({
  sandboxID: `i${i}`, templateID: 'base', alias: 'base', clientID: '00000000', startedAt: '2026-11-30T00:00:00Z',
  endAt: '2026-11-30T01:00:00Z', cpuCount: 2, memoryMB: 512, diskSizeMB: 10240, metadata: { k: 'v' }, state: 'running', envdVersion: '0.2.0',
});
const msbSandbox = (i, status = 'running') => ({
  id: `00000000-0000-0000-0000-${String(i).padStart(12, '0')}`, org_id: 'o', name: `x${i}`, status, ephemeral: false,
  created_at: '2026-11-30T00:00:00Z', spec: i % 3 === 0 ? null : { image: 'python:3.12', resources: { vcpus: 1, memory_mib: 512, disk_size_mib: null }, labels: {} },
});
const agent37Instance = (i, status = 'running') => ({ id: `inst_${i}`, status, template: 'hermes', vcpu: 2, metadata: {}, created: 1755000000 });

const DAYTONA_CAPACITY = { limits: { cpu: 100, memory: 200, disk: 1000 }, demand: { cpu: 2, memory: 4, disk: 10 } };

function resource(m, name) {
  assert.equal(m.status, 'known', `expected known, got ${JSON.stringify(m)}`);
  return m.resources.find((r) => r.resource === name);
}

// ---------------------------------------------------------------------------------------
// Daytona: the three documented shapes

test('daytona: cursor pagination across several pages sums all states, GiB → MiB, with org header', async () => {
  const pages = [
    [daytonaSandbox(1, { cpu: 1, memory: 1, disk: 3 }), daytonaSandbox(2, { cpu: 2, memory: 4, disk: 10, state: 'stopped' })],
    [daytonaSandbox(3, { cpu: 4, memory: 8, disk: 20, state: 'archived' })],
    [daytonaSandbox(4, { cpu: 0.5, memory: 0.5, disk: 1, state: 'error' })],
    [],
  ];
  const cursors = [null, 'cur/1+a=b&c', 'cur-2', 'cur-3'];
  await withServer('daytona', (req, res, url) => {
    const i = cursors.indexOf(url.searchParams.get('cursor'));
    if (url.pathname !== '/api/sandbox' || i < 0) return json(res, 400, { message: 'bad cursor' });
    json(res, 200, { items: pages[i], nextCursor: cursors[i + 1] ?? null });
  }, async (s) => {
    const m = await read('daytona', { baseUrl: `${s.base}/api`, organizationId: 'org-1', ...DAYTONA_CAPACITY });
    assert.deepEqual(m, {
      status: 'known',
      resources: [
        { resource: 'cpu', used: 7.5, limit: 100, unit: 'vCPU', headroom: 92.5, required: 2 },
        { resource: 'memory', used: 13.5 * 1024, limit: 200 * 1024, unit: 'MiB', headroom: (200 - 13.5) * 1024, required: 4 * 1024 },
        { resource: 'disk', used: 34 * 1024, limit: 1000 * 1024, unit: 'MiB', headroom: (1000 - 34) * 1024, required: 10 * 1024 },
      ],
    });
    assert.equal(s.requests.length, 4);
    assert.deepEqual(s.requests.map((r) => r.query.cursor ?? null), cursors);
    for (const r of s.requests) {
      assert.equal(r.query.limit, '200');
      assert.equal(r.headers['x-daytona-organization-id'], 'org-1');
    }
  });
});

test('daytona: deprecated paginated shape requests page=N+1 until page >= totalPages', async () => {
  await withServer('daytona', (req, res, url) => {
    const page = Number(url.searchParams.get('page') ?? '1');
    const items = [daytonaSandbox(page, { cpu: page, memory: 1, disk: 1 })];
    json(res, 200, { items, total: 3, page, totalPages: 3 });
  }, async (s) => {
    const m = await read('daytona', { baseUrl: s.base, pageSize: 1, limits: { cpu: 10 }, demand: { cpu: 1 } });
    assert.deepEqual(resource(m, 'cpu'), { resource: 'cpu', used: 6, limit: 10, unit: 'vCPU', headroom: 4, required: 1 });
    assert.deepEqual(s.requests.map((r) => r.query.page ?? null), [null, '2', '3']);
    assert.ok(s.requests.every((r) => r.query.limit === '1'));
  });
});

test('daytona: legacy bare array is a single page', async () => {
  await withServer('daytona', (req, res) => {
    json(res, 200, [daytonaSandbox(1, { memory: 1.5, disk: 2 }), daytonaSandbox(2, { memory: 0.5, disk: 3 })]);
  }, async (s) => {
    const m = await read('daytona', { baseUrl: s.base, limits: { memory: 4, disk: 10 }, demand: { memory: 1, disk: 5 } });
    assert.deepEqual(m.resources.map((r) => [r.resource, r.used, r.limit, r.required]), [
      ['memory', 2048, 4096, 1024],
      ['disk', 5120, 10240, 5120],
    ]);
    assert.equal(s.requests.length, 1);
  });
});

// ---------------------------------------------------------------------------------------
// E2B, Microsandbox, Agent37

test('e2b: follows X-Next-Token (as nextToken=) until absent, counting running sandboxes', async () => {
  const tokens = [null, 'tok+/1=', 'tok2'];
  const sizes = [100, 100, 37];
  await withServer('e2b', (req, res, url) => {
    const i = tokens.indexOf(url.searchParams.get('nextToken'));
    if (url.pathname !== '/v2/sandboxes' || i < 0) return json(res, 400, { code: 400, message: 'Invalid next token' });
    const items = Array.from({ length: sizes[i] }, (_, j) => e2bSandbox(i * 100 + j));
    json(res, 200, items, tokens[i + 1] ? { 'X-Next-Token': tokens[i + 1], 'X-Total-Running': '237' } : { 'X-Total-Running': '237' });
  }, async (s) => {
    const m = await read('e2b', { baseUrl: s.base, limits: { sandboxes: 300 } });
    assert.deepEqual(m, { status: 'known', resources: [{ resource: 'sandboxes', used: 237, limit: 300, unit: 'sandboxes', headroom: 63, required: 1 }] });
    assert.deepEqual(s.requests.map((r) => r.query), [
      { state: 'running', limit: '100' },
      { state: 'running', limit: '100', nextToken: 'tok+/1=' },
      { state: 'running', limit: '100', nextToken: 'tok2' },
    ]);
  });
});

test('microsandbox: follows next_cursor while has_more, counting all states', async () => {
  await withServer('microsandbox', (req, res, url) => {
    const cursor = url.searchParams.get('cursor');
    if (cursor === null) return json(res, 200, { data: [msbSandbox(1), msbSandbox(2, 'stopped'), msbSandbox(3, 'failed')], has_more: true, next_cursor: 'c1' });
    if (cursor === 'c1') return json(res, 200, { data: [msbSandbox(4, 'created'), msbSandbox(5)], has_more: true, next_cursor: 'c2' });
    if (cursor === 'c2') return json(res, 200, { data: [msbSandbox(6, 'stopping')], has_more: false, next_cursor: null });
    json(res, 400, { error: { code: 'bad_cursor', message: 'x', details: null } });
  }, async (s) => {
    const m = await read('microsandbox', { baseUrl: s.base, limits: { sandboxes: 10 }, demand: { sandboxes: 2 } });
    assert.deepEqual(resource(m, 'sandboxes'), { resource: 'sandboxes', used: 6, limit: 10, unit: 'sandboxes', headroom: 4, required: 2 });
    assert.deepEqual(s.requests.map((r) => r.query.cursor ?? null), [null, 'c1', 'c2']);
    assert.ok(s.requests.every((r) => r.path === '/v1/sandboxes' && r.query.limit === '100'));
  });
});

test('agent37: one request, every instance counted (both size-field variants)', async () => {
  await withServer('agent37', (req, res, url) => {
    if (url.pathname !== '/v1/instances') return json(res, 404, { error: 'not_found' });
    json(res, 200, { data: [agent37Instance(1), agent37Instance(2, 'sleeping'), { id: 'inst_3', status: 'stopped', resources: { cpu: 1, memory: 2, disk: 3 } }] });
  }, async (s) => {
    const m = await read('agent37', { baseUrl: s.base, limits: { sandboxes: 10 } });
    assert.deepEqual(resource(m, 'sandboxes'), { resource: 'sandboxes', used: 3, limit: 10, unit: 'sandboxes', headroom: 7, required: 1 });
    assert.equal(s.requests.length, 1);
    assert.deepEqual(s.requests[0].query, {});
  });
});

// ---------------------------------------------------------------------------------------
// status mapping

test('429 with Retry-After → RATE_LIMITED (every HTTP provider)', async () => {
  for (const provider of ['daytona', 'e2b', 'microsandbox', 'agent37']) {
    await withServer(provider, (req, res) => {
      json(res, 429, provider === 'e2b' ? { code: 429, message: 'Rate limit exceeded' } : { error: { code: 'rate_limited', message: 'slow down' } }, { 'Retry-After': '30' });
    }, async (s) => {
      const m = await read(provider, { baseUrl: s.base, limits: DIMS_FOR[provider], demand: DIMS_FOR[provider] });
      assert.deepEqual(m, { status: 'unknown', reason: 'RATE_LIMITED' }, provider);
      assert.equal(s.requests.length, 1);
    });
  }
});

const DIMS_FOR = { daytona: { cpu: 10 }, e2b: { sandboxes: 10 }, microsandbox: { sandboxes: 10 }, agent37: { sandboxes: 10 } };

test('500 → READ_FAILED; 503 and 404 too', async () => {
  for (const status of [500, 503, 404]) {
    await withServer('daytona', (req, res) => json(res, status, { statusCode: status, error: 'x', message: 'boom' }), async (s) => {
      const m = await read('daytona', { baseUrl: s.base, limits: { cpu: 10 }, demand: { cpu: 1 } });
      assert.deepEqual(m, { status: 'unknown', reason: 'READ_FAILED' }, String(status));
    });
  }
});

test('401 (wrong key) and 403 → UNAUTHORIZED', async () => {
  for (const provider of ['daytona', 'e2b', 'microsandbox', 'agent37']) {
    await withServer(provider, () => assert.fail('a wrong key must not pass the auth check'), async (s) => {
      const reader = createCapacityReader(provider, { apiKey: 'wrong-key', baseUrl: s.base, limits: DIMS_FOR[provider], demand: DIMS_FOR[provider] });
      assert.deepEqual(await reader.getCapacity(), { status: 'unknown', reason: 'UNAUTHORIZED' }, provider);
    });
  }
  await withServer('daytona', (req, res) => json(res, 403, { statusCode: 403, message: 'Forbidden' }), async (s) => {
    assert.deepEqual(await read('daytona', { baseUrl: s.base, limits: { cpu: 1 }, demand: { cpu: 1 } }), { status: 'unknown', reason: 'UNAUTHORIZED' });
  });
});

test('transport failure (nothing listening) → READ_FAILED', async () => {
  const s = await mockProvider(null, () => {});
  const base = s.base;
  await s.close();
  assert.deepEqual(await read('e2b', { baseUrl: base, limits: { sandboxes: 1 } }), { status: 'unknown', reason: 'READ_FAILED' });
});

test('redirects are not followed, so the key never reaches another host', async () => {
  await withServer(null, () => assert.fail('the redirect target must never be called'), async (target) => {
    await withServer('e2b', (req, res) => {
      res.writeHead(302, { location: `${target.base}/v2/sandboxes` });
      res.end();
    }, async (s) => {
      assert.deepEqual(await read('e2b', { baseUrl: s.base, limits: { sandboxes: 5 } }), { status: 'unknown', reason: 'READ_FAILED' });
      assert.equal(target.requests.length, 0);
    });
  });
});

// ---------------------------------------------------------------------------------------
// deadline: the HTTP request is really cancelled

function slowServer(delayMs) {
  const state = { closedEarly: false, closedAt: null, startedAt: null, wrote: false };
  const handler = (req, res) => {
    state.startedAt = Date.now();
    const timer = setTimeout(() => {
      state.wrote = true;
      json(res, 200, [daytonaSandbox(1)]);
    }, delayMs);
    res.on('close', () => {
      clearTimeout(timer);
      state.closedAt = Date.now();
      state.closedEarly = !res.writableFinished;
    });
  };
  return { state, handler };
}

async function until(predicate, ms = 2000) {
  const end = Date.now() + ms;
  while (!predicate() && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
  return predicate();
}

test('must-fire: a response slower than the deadline → TIMEOUT, and the server sees the connection closed', async () => {
  const slow = slowServer(3000);
  await withServer('daytona', slow.handler, async (s) => {
    const t0 = Date.now();
    const m = await read('daytona', { baseUrl: s.base, limits: { cpu: 10 }, demand: { cpu: 1 }, timeoutMs: 150 });
    const elapsed = Date.now() - t0;
    assert.deepEqual(m, { status: 'unknown', reason: 'TIMEOUT' });
    assert.ok(elapsed >= 140 && elapsed < 1500, `resolved after ${elapsed} ms`);
    assert.ok(await until(() => slow.state.closedAt !== null), 'server never saw the connection close');
    assert.equal(slow.state.closedEarly, true, 'the response was written before the close');
    assert.equal(slow.state.wrote, false);
    assert.ok(slow.state.closedAt - slow.state.startedAt < 3000, 'closed before the slow response was due');
  });
});

test('must-not-fire: a response within the deadline is a measurement, not TIMEOUT', async () => {
  const slow = slowServer(100);
  await withServer('daytona', slow.handler, async (s) => {
    const m = await read('daytona', { baseUrl: s.base, limits: { cpu: 10 }, demand: { cpu: 1 }, timeoutMs: 3000 });
    assert.equal(resource(m, 'cpu').used, 1);
    assert.equal(slow.state.wrote, true);
  });
});

test('getCapacity({ timeoutMs }) from the router overrides the reader default', async () => {
  const slow = slowServer(3000);
  await withServer('daytona', slow.handler, async (s) => {
    const m = await read('daytona', { baseUrl: s.base, limits: { cpu: 10 }, demand: { cpu: 1 } }, { timeoutMs: 100 });
    assert.deepEqual(m, { status: 'unknown', reason: 'TIMEOUT' });
    assert.ok(await until(() => slow.state.closedAt !== null));
  });
});

// ---------------------------------------------------------------------------------------
// bodies

test('malformed JSON → MALFORMED (every HTTP provider)', async () => {
  for (const provider of ['daytona', 'e2b', 'microsandbox', 'agent37']) {
    for (const body of ['{"items": [', '<html>oops</html>', '']) {
      await withServer(provider, (req, res) => json(res, 200, body), async (s) => {
        const m = await read(provider, { baseUrl: s.base, limits: DIMS_FOR[provider], demand: DIMS_FOR[provider] });
        assert.deepEqual(m, { status: 'unknown', reason: 'MALFORMED' }, `${provider}: ${body}`);
      });
    }
  }
});

test('wrong field types → MALFORMED', async () => {
  const cases = [
    ['daytona', { items: [{ ...daytonaSandbox(1), cpu: '2' }], nextCursor: null }],
    ['daytona', { items: [{ ...daytonaSandbox(1), cpu: null }], nextCursor: null }],
    ['daytona', { items: [{ ...daytonaSandbox(1), cpu: -4 }], nextCursor: null }],
    ['daytona', { items: { 0: daytonaSandbox(1) }, nextCursor: null }],
    ['daytona', { items: [], nextCursor: 42 }],
    ['daytona', { sandboxes: [] }],
    ['e2b', { sandboxes: [e2bSandbox(1)] }],
    ['e2b', [{ ...e2bSandbox(1), sandboxID: 7 }]],
    ['microsandbox', { data: 'none', has_more: false }],
    ['microsandbox', { data: [], has_more: 'yes' }],
    ['microsandbox', { data: [], has_more: true, next_cursor: null }],
    ['agent37', [agent37Instance(1)]],
    ['agent37', { data: [{ status: 'running' }] }],
  ];
  for (const [provider, body] of cases) {
    await withServer(provider, (req, res) => json(res, 200, body), async (s) => {
      const m = await read(provider, { baseUrl: s.base, limits: DIMS_FOR[provider], demand: DIMS_FOR[provider] });
      assert.deepEqual(m, { status: 'unknown', reason: 'MALFORMED' }, `${provider}: ${JSON.stringify(body)}`);
    });
  }
});

// ---------------------------------------------------------------------------------------
// pagination guard

test('must-fire: a paginator that never ends → PAGE_LIMIT_EXCEEDED within bounded time', async () => {
  await withServer('daytona', (req, res, url, n) => json(res, 200, { items: [daytonaSandbox(n)], nextCursor: `c${n}` }), async (s) => {
    const t0 = Date.now();
    const m = await read('daytona', { baseUrl: s.base, limits: { cpu: 1e6 }, demand: { cpu: 1 }, maxPages: 25 });
    assert.deepEqual(m, { status: 'unknown', reason: 'PAGE_LIMIT_EXCEEDED' });
    assert.equal(s.requests.length, 25);
    assert.ok(Date.now() - t0 < 3000);
  });
  // Default bound (1000 pages) also ends, well inside the default deadline.
  await withServer('e2b', (req, res, url, n) => json(res, 200, [e2bSandbox(n)], { 'X-Next-Token': `t${n}` }), async (s) => {
    const t0 = Date.now();
    const m = await read('e2b', { baseUrl: s.base, limits: { sandboxes: 1e6 }, timeoutMs: 20000 });
    assert.deepEqual(m, { status: 'unknown', reason: 'PAGE_LIMIT_EXCEEDED' });
    assert.equal(s.requests.length, 1000);
    assert.ok(Date.now() - t0 < 15000);
  });
});

test('must-fire: a repeated cursor is a loop → PAGE_LIMIT_EXCEEDED at once', async () => {
  await withServer('microsandbox', (req, res) => json(res, 200, { data: [msbSandbox(1)], has_more: true, next_cursor: 'same' }), async (s) => {
    const m = await read('microsandbox', { baseUrl: s.base, limits: { sandboxes: 100 } });
    assert.deepEqual(m, { status: 'unknown', reason: 'PAGE_LIMIT_EXCEEDED' });
    assert.equal(s.requests.length, 2);
  });
});

test('must-not-fire: exactly maxPages pages is a complete read', async () => {
  await withServer('daytona', (req, res, url, n) => json(res, 200, { items: [daytonaSandbox(n)], nextCursor: n < 25 ? `c${n}` : null }), async (s) => {
    const m = await read('daytona', { baseUrl: s.base, limits: { cpu: 100 }, demand: { cpu: 1 }, maxPages: 25 });
    assert.equal(resource(m, 'cpu').used, 25);
    assert.equal(s.requests.length, 25);
  });
});

// ---------------------------------------------------------------------------------------
// configuration guards decided before any HTTP

test('must-fire: missing limits → LIMIT_NOT_CONFIGURED with zero HTTP requests', async () => {
  for (const provider of ['daytona', 'e2b', 'microsandbox', 'agent37']) {
    await withServer(provider, () => assert.fail('no request expected'), async (s) => {
      assert.deepEqual(await read(provider, { baseUrl: s.base }), { status: 'unknown', reason: 'LIMIT_NOT_CONFIGURED' }, provider);
      // Demand alone is not a limit.
      assert.deepEqual(await read(provider, { baseUrl: s.base, demand: DIMS_FOR[provider] }), { status: 'unknown', reason: 'LIMIT_NOT_CONFIGURED' });
      assert.equal(s.requests.length, 0);
    });
  }
});

test('must-not-fire: a configured limit reads the inventory', async () => {
  await withServer('agent37', (req, res) => json(res, 200, { data: [] }), async (s) => {
    assert.equal(resource(await read('agent37', { baseUrl: s.base, limits: { sandboxes: 1 } }), 'sandboxes').used, 0);
    assert.equal(s.requests.length, 1);
  });
});

test('must-fire: daytona limit without its demand → DEMAND_NOT_CONFIGURED with zero HTTP requests', async () => {
  await withServer('daytona', () => assert.fail('no request expected'), async (s) => {
    assert.deepEqual(await read('daytona', { baseUrl: s.base, limits: { cpu: 10 } }), { status: 'unknown', reason: 'DEMAND_NOT_CONFIGURED' });
    assert.deepEqual(await read('daytona', { baseUrl: s.base, limits: { cpu: 10, memory: 20 }, demand: { cpu: 1 } }), {
      status: 'unknown',
      reason: 'DEMAND_NOT_CONFIGURED',
    });
    assert.equal(s.requests.length, 0);
  });
});

test('must-not-fire: daytona limit with its demand reads the inventory', async () => {
  await withServer('daytona', (req, res) => json(res, 200, { items: [], nextCursor: null }), async (s) => {
    const m = await read('daytona', { baseUrl: s.base, limits: { cpu: 10 }, demand: { cpu: 1 } });
    assert.deepEqual(m.resources, [{ resource: 'cpu', used: 0, limit: 10, unit: 'vCPU', headroom: 10, required: 1 }]);
    assert.equal(s.requests.length, 1);
  });
});

test('vercel and freestyle → NOT_SUPPORTED with no HTTP (and no key needed)', async () => {
  await withServer(null, () => assert.fail('no request expected'), async (s) => {
    for (const provider of ['vercel', 'freestyle']) {
      assert.deepEqual(await read(provider, { baseUrl: s.base, limits: { sandboxes: 5 } }), { status: 'unknown', reason: 'NOT_SUPPORTED' });
      assert.deepEqual(await createCapacityReader(provider).getCapacity(), { status: 'unknown', reason: 'NOT_SUPPORTED' });
    }
    assert.equal(s.requests.length, 0);
  });
});

// ---------------------------------------------------------------------------------------
// reader object, option validation, canary

test('the key lives only in the closure: inspect, JSON and own properties never show it', () => {
  for (const provider of CAPACITY_READER_KINDS) {
    const reader = createCapacityReader(provider, { apiKey: KEY, limits: DIMS_FOR[provider] ?? {} });
    const shown = inspect(reader, { depth: Infinity, showHidden: true, getters: true });
    assert.ok(!shown.includes(KEY), shown);
    assert.equal(JSON.stringify(reader), JSON.stringify({ provider }));
    assert.deepEqual(reader.toJSON(), { provider });
    assert.equal(reader.provider, provider);
    for (const k of Reflect.ownKeys(reader)) assert.ok(!inspect(reader[k], { showHidden: true }).includes(KEY));
    assert.ok(Object.isFrozen(reader));
    assert.equal(String(reader.getCapacity).includes(KEY), false);
  }
});

test('option validation: typed INVALID_CONFIGURATION errors naming the field, never the value', () => {
  const cases = [
    [['modal', { apiKey: KEY }], 'provider'],
    [['daytona', null], 'options'],
    [['daytona', {}], 'apiKey'],
    [['e2b', { apiKey: '' }], 'apiKey'],
    [['e2b', { apiKey: `${KEY}\n` }], 'apiKey'],
    [['e2b', { apiKey: KEY, token: KEY }], 'token'],
    [['e2b', { apiKey: KEY, baseUrl: `https://${KEY}:x@api.example` }], 'baseUrl'],
    [['e2b', { apiKey: KEY, baseUrl: `https://api.example/?key=${KEY}` }], 'baseUrl'],
    [['e2b', { apiKey: KEY, baseUrl: `file:///${KEY}` }], 'baseUrl'],
    [['e2b', { apiKey: KEY, baseUrl: KEY }], 'baseUrl'],
    [['e2b', { apiKey: KEY, organizationId: KEY }], 'organizationId'],
    [['e2b', { apiKey: KEY, limits: { cpu: 2 } }], 'limits.cpu'],
    [['daytona', { apiKey: KEY, limits: { sandboxes: 2 } }], 'limits.sandboxes'],
    [['daytona', { apiKey: KEY, limits: { cpu: -1 } }], 'limits.cpu'],
    [['daytona', { apiKey: KEY, limits: { cpu: Number.NaN } }], 'limits.cpu'],
    [['daytona', { apiKey: KEY, limits: { cpu: Infinity } }], 'limits.cpu'],
    [['daytona', { apiKey: KEY, limits: { cpu: '10' } }], 'limits.cpu'],
    [['daytona', { apiKey: KEY, limits: { cpu: null } }], 'limits.cpu'],
    [['daytona', { apiKey: KEY, demand: [] }], 'demand'],
    [['daytona', { apiKey: KEY, maxPages: 0 }], 'maxPages'],
    [['daytona', { apiKey: KEY, maxPages: 1.5 }], 'maxPages'],
    [['daytona', { apiKey: KEY, pageSize: 201 }], 'pageSize'],
    [['e2b', { apiKey: KEY, pageSize: 101 }], 'pageSize'],
    [['agent37', { apiKey: KEY, pageSize: 10 }], 'pageSize'],
    [['daytona', { apiKey: KEY, timeoutMs: 0 }], 'timeoutMs'],
    [['daytona', { apiKey: KEY, timeoutMs: '5000' }], 'timeoutMs'],
    [['vercel', { apiKey: 5 }], 'apiKey'],
  ];
  for (const [args, field] of cases) {
    let caught;
    try {
      createCapacityReader(...args);
    } catch (error) {
      caught = error;
    }
    assert.ok(caught instanceof SandboxRouterConfigurationError, `${field}: ${caught}`);
    assert.equal(caught.code, 'INVALID_CONFIGURATION');
    assert.equal(caught.field, field);
    assert.equal(leaks(caught, KEY), false, `${field} error leaks the key`);
  }
});

test('option messages name the field and what it must be (the one native rule)', () => {
  const cases = [
    [['modal', {}], 'invalid capacity reader option provider: must be one of daytona, e2b, microsandbox, agent37, vercel, freestyle'],
    [['e2b', { apiKey: KEY, baseUrl: 'ftp://x' }], 'invalid capacity reader option baseUrl: must use http or https'],
    [['agent37', { apiKey: KEY, pageSize: 10 }], 'invalid capacity reader option pageSize: does not apply: the agent37 list is not paginated'],
    [['e2b', { apiKey: KEY, limits: { cpu: 1 } }], 'invalid capacity reader option limits.cpu: is not measurable here (allowed: sandboxes)'],
    [['daytona', { apiKey: KEY, get maxPages() { throw new Error(KEY); } }], 'invalid capacity reader option options: could not be read (a property access threw)'],
  ];
  for (const [args, message] of cases) {
    assert.throws(() => createCapacityReader(...args), (e) => e instanceof SandboxRouterConfigurationError && e.message === message && !leaks(e, KEY), message);
  }
});

test('must-fire: the key a reader sends is the one its options were checked with, read once', async () => {
  await withServer('e2b', (req, res) => json(res, 200, []), async (s) => {
    let reads = 0;
    const options = { get apiKey() { reads += 1; return reads === 1 ? KEY : `${KEY}-second-read`; }, baseUrl: s.base, limits: { sandboxes: 1 } };
    const m = await createCapacityReader('e2b', options).getCapacity();
    assert.equal(m.status, 'known');
    assert.equal(reads, 1);
    assert.equal(s.requests[0].headers['x-api-key'], KEY);
  });
});

test('must-not-fire: a valid getCapacity option reads; an unreadable one is refused without a read', async () => {
  await withServer('e2b', (req, res) => json(res, 200, []), async (s) => {
    const reader = createCapacityReader('e2b', { apiKey: KEY, baseUrl: s.base, limits: { sandboxes: 1 } });
    assert.equal((await reader.getCapacity({ timeoutMs: 1000 })).status, 'known');
    const hostile = { get timeoutMs() { throw new Error(KEY); } };
    await assert.rejects(reader.getCapacity(hostile), (e) => e instanceof SandboxRouterConfigurationError && e.field === 'getCapacity' && !leaks(e, KEY));
    assert.equal(s.requests.length, 1);
  });
});

test('getCapacity rejects an invalid timeoutMs with a typed error (no read)', async () => {
  await withServer('e2b', () => assert.fail('no request expected'), async (s) => {
    const reader = createCapacityReader('e2b', { apiKey: KEY, baseUrl: s.base, limits: { sandboxes: 1 } });
    await assert.rejects(reader.getCapacity({ timeoutMs: -1 }), (e) => e instanceof SandboxRouterConfigurationError && e.field === 'getCapacity.timeoutMs');
    assert.equal(s.requests.length, 0);
  });
});

test('concurrent reads share nothing but the client: each gets its own answer', async () => {
  await withServer('agent37', (req, res) => setTimeout(() => json(res, 200, { data: [agent37Instance(1)] }), 50), async (s) => {
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => read('agent37', { baseUrl: s.base, limits: { sandboxes: i + 1 } })));
    results.forEach((m, i) => assert.equal(resource(m, 'sandboxes').limit, i + 1));
  });
});

// ---------------------------------------------------------------------------------------
// Daytona display helpers

const NOW = '2026-11-30T12:00:00.000Z';

test('parseDaytonaCapacityLimits: GiB → MiB, provenance of what was provided', () => {
  assert.deepEqual(parseDaytonaCapacityLimits({ cpu: 10, memory: 10, disk: 30 }), { cpu: 10, memoryMiB: 10240, diskMiB: 30720, provided: ['cpu', 'memory', 'disk'] });
  assert.deepEqual(parseDaytonaCapacityLimits({ disk: 0.5 }), { cpu: null, memoryMiB: null, diskMiB: 512, provided: ['disk'] });
});

test('parseDaytonaCapacityLimits is strict: strings, negatives, zero, unknown keys, empty are refused', () => {
  const cases = [
    [{ cpu: '10' }, 'limits.cpu'],
    [{ cpu: -1 }, 'limits.cpu'],
    [{ memory: 0 }, 'limits.memory'],
    [{ disk: null }, 'limits.disk'],
    [{ cpu: Number.NaN }, 'limits.cpu'],
    [{ cpu: 1, gpus: 1 }, 'limits.gpus'],
    [{ cpu: 1, sandboxes: 1 }, 'limits.sandboxes'],
    [{}, 'limits'],
    [[], 'limits'],
    ['10', 'limits'],
    [undefined, 'limits'],
  ];
  for (const [input, field] of cases) {
    assert.throws(
      () => parseDaytonaCapacityLimits(input),
      (e) => e instanceof SandboxRequestValidationError && e.code === 'INVALID_INPUT' && e.field === field,
      JSON.stringify(input),
    );
  }
  assert.throws(() => parseDaytonaCapacityLimits({ cpus: 4 }), /did you mean cpu/);
  assert.throws(() => parseDaytonaCapacityLimits({ cpu: 10n }), (e) => e.code === 'INVALID_INPUT' && e.field === 'limits');
});

test('summarizeDaytonaCapacity: totals, per-state breakdown, thresholds, provenance, not_covered', () => {
  const items = [
    ...Array.from({ length: 8 }, (_, i) => daytonaSandbox(i, { cpu: 1, memory: 2, disk: 10, state: 'started' })),
    daytonaSandbox(8, { cpu: 1, memory: 1, disk: 5, state: 'stopped' }),
  ];
  const s = summarizeDaytonaCapacity(items, { cpu: 10, memory: 17.5 }, { now: NOW });
  assert.deepEqual(s.organization, { sandboxes: 9, cpu: 9, memoryMiB: 17 * 1024, diskMiB: 85 * 1024, accounted: { cpu: 8, memoryMiB: 16 * 1024, diskMiB: 85 * 1024 } });
  assert.deepEqual(s.byState.stopped, { sandboxes: 1, cpu: 1, memoryMiB: 1024, diskMiB: 5120 });
  assert.equal(s.byState.started.sandboxes, 8);
  assert.equal(s.utilization.cpu.level, 'warning'); // 9/10 = 0.9 ≥ 0.8
  assert.equal(s.utilization.cpu.limitSource, 'configured');
  assert.equal(s.utilization.memory.level, 'critical'); // 17/17.5 ≈ 0.971 ≥ 0.95
  assert.deepEqual(s.utilization.disk, { used: 85 * 1024, limit: null, unit: 'MiB', headroom: null, ratio: null, percent: null, level: null, limitSource: 'not_configured' });
  assert.equal(s.level, 'critical');
  assert.deepEqual(s.thresholds, { warningRatio: 0.8, criticalRatio: 0.95 });
  assert.equal(s.provisioningCheck, 'not_covered');
  assert.equal(s.generatedAt, NOW);
  // Raising the thresholds moves the levels; a list page with `items` is accepted as is.
  const t = summarizeDaytonaCapacity({ items, nextCursor: null }, { cpu: 10, memory: 17.5 }, { now: new Date(NOW), warningRatio: 0.95, criticalRatio: 0.99 });
  assert.equal(t.utilization.cpu.level, 'ok');
  assert.equal(t.utilization.memory.level, 'warning');
  // No limits at all: every dimension not_configured, no level.
  const u = summarizeDaytonaCapacity(items, null, { now: NOW });
  assert.equal(u.level, null);
  assert.ok(['cpu', 'memory', 'disk'].every((d) => u.utilization[d].limitSource === 'not_configured'));
});

test('summarizeDaytonaCapacity: idle details and counted lenient coercion', () => {
  const items = [
    { ...daytonaSandbox(1, { cpu: '2' }), lastActivityAt: '2026-11-30T09:00:00Z' },
    { ...daytonaSandbox(2), lastActivityAt: '2026-11-30T11:59:00Z' },
    { ...daytonaSandbox(3, { state: 'stopped' }), lastActivityAt: '2026-01-01T00:00:00Z' },
    'junk',
  ];
  const s = summarizeDaytonaCapacity(items, undefined, { now: NOW });
  assert.equal(s.idle.sandboxes, 1);
  assert.equal(s.idle.items[0].id, 'sb-1');
  assert.equal(s.idle.items[0].idleMs, 3 * 3600 * 1000);
  assert.equal(s.idle.items[0].cpu, 2);
  assert.deepEqual(s.dataQuality, { coercedValues: 1, skippedItems: 1 });
});

test('Daytona helpers answer plain objects with the keys in the order they always had', () => {
  const limits = parseDaytonaCapacityLimits({ memory: 1 });
  assert.deepEqual(Object.keys(limits), ['cpu', 'diskMiB', 'memoryMiB', 'provided']);
  assert.equal(JSON.stringify(limits), '{"cpu":null,"diskMiB":null,"memoryMiB":1024,"provided":["memory"]}');
  const items = [
    { ...daytonaSandbox(1, { state: 'started' }), name: undefined, lastActivityAt: '2026-11-30T09:00:00Z' },
    daytonaSandbox(2, { state: 'b' }),
    daytonaSandbox(3, { state: '10' }),
    daytonaSandbox(4, { state: 'a' }),
  ];
  const s = summarizeDaytonaCapacity(items, { cpu: 10 }, { now: NOW });
  const keys = ['byState', 'dataQuality', 'generatedAt', 'idle', 'level', 'organization', 'provider', 'provisioningCheck', 'thresholds', 'utilization'];
  assert.deepEqual(Object.keys(s), keys);
  assert.deepEqual(Object.keys(s.byState), ['10', 'a', 'b', 'started']);
  assert.deepEqual(Object.keys(s.organization), ['accounted', 'cpu', 'diskMiB', 'memoryMiB', 'sandboxes']);
  assert.deepEqual(Object.keys(s.utilization), ['cpu', 'disk', 'memory']);
  assert.deepEqual(Object.keys(s.utilization.disk), ['headroom', 'level', 'limit', 'limitSource', 'percent', 'ratio', 'unit', 'used']);
  assert.deepEqual(Object.keys(s.idle), ['cpu', 'diskMiB', 'idleAfterMs', 'items', 'memoryMiB', 'sandboxes', 'truncated', 'unknownActivity']);
  assert.deepEqual(s.idle.items[0], { cpu: 1, diskMiB: 10240, id: 'sb-1', idleMs: 3 * 3600 * 1000, lastActivityAt: '2026-11-30T09:00:00Z', memoryMiB: 2048, name: null, state: 'started' });
  assert.deepEqual(s.utilization.disk, { headroom: null, level: null, limit: null, limitSource: 'not_configured', percent: null, ratio: null, unit: 'MiB', used: 40960 });
  assert.deepEqual(s.thresholds, { criticalRatio: 0.95, warningRatio: 0.8 });
});

test('summarizeDaytonaCapacity reads options.now once, in a guard (must-fire)', () => {
  const plain = summarizeDaytonaCapacity([], null, { now: new Date(NOW) });
  let reads = 0;
  const once = {
    get now() {
      reads++;
      if (reads > 1) throw new Error('read twice');
      return new Date(NOW);
    },
  };
  assert.deepEqual(summarizeDaytonaCapacity([], null, once), plain);
  assert.equal(reads, 1);
  const throwing = { get now() { throw new Error('sk_canary'); } };
  assert.throws(
    () => summarizeDaytonaCapacity([], null, throwing),
    (e) => e instanceof SandboxRequestValidationError && e.code === 'INVALID_INPUT' && e.field === 'options' && !e.message.includes('sk_canary'),
  );
});

test('summarizeDaytonaCapacity takes a plain Date or RFC 3339 now as before (must-not-fire)', () => {
  const ms = summarizeDaytonaCapacity([], null, { now: NOW });
  assert.equal(ms.generatedAt, NOW);
  assert.deepEqual(summarizeDaytonaCapacity([], null, { now: new Date(NOW) }), ms);
});

test('summarizeDaytonaCapacity rejects invalid limits and options with typed errors', () => {
  const cases = [
    [[[], { cpu: -1 }], 'limits.cpu'],
    [[[], { cpu: 1 }, { warningRatio: 0.99 }], 'options.warningRatio'],
    [[[], null, { criticalRatio: '0.9' }], 'options.criticalRatio'],
    [[[], null, { now: 'yesterday' }], 'options.now'],
    [[[], null, { now: new Date(Number.NaN) }], 'options.now'],
    [[[], null, { bogus: 1 }], 'options.bogus'],
    [['x', null], 'items'],
    [[{ items: 3 }, null], 'items.items'],
    [[undefined, null], 'items'],
  ];
  for (const [args, field] of cases) {
    assert.throws(
      () => summarizeDaytonaCapacity(...args),
      (e) => e instanceof SandboxRequestValidationError && e.code === 'INVALID_INPUT' && e.field === field,
      field,
    );
  }
});
