/**
 * The client address behind a load balancer that appends to X-Forwarded-For (nginx
 * `proxy_add_x_forwarded_for`, AWS ALB, HAProxy `option forwardfor`), which passes a `Forwarded`
 * header the client sent through untouched. Only server.forwarded_header (default
 * x-forwarded-for) is read. Observed before: `Forwarded` was read whenever present, so the client
 * picked its own address and a fresh per-IP budget on every request ([200, 200, 200, 200]).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { PETSTORE } from '../../helpers/proxy.js';

let p: TestProtocol;
beforeAll(async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'aap-edge-')), 'proxy.yaml');
  writeFileSync(
    file,
    `server:\n  trusted_proxies: ["127.0.0.1/32"]\napis:\n  - spec: ${JSON.stringify(PETSTORE)}\nmock_upstream: true\n`,
  );
  p = await startProtocol({ policy: 'rate_limits:\n  per_ip: 2/1m\n', overrides: { config: file } });
});
afterAll(async () => {
  await p?.close();
});

describe('client address behind an X-Forwarded-For load balancer', () => {
  it('one real client (203.0.113.9, appended by the balancer) cannot pick its budget with its own Forwarded header', async () => {
    const statuses: number[] = [];
    for (let i = 1; i <= 4; i++) {
      // What the balancer forwards: its own XFF with the socket peer it saw, and the client's
      // Forwarded header as the client wrote it.
      const r = await p.request('GET', '/capability/list', {
        headers: { 'x-forwarded-for': '203.0.113.9', forwarded: `for=198.51.100.${i}` },
      });
      statuses.push(r.status);
    }
    // Same real client, per_ip 2/1m: the third and fourth must be 429.
    expect(statuses).toEqual([200, 200, 429, 429]);
  });
});
