/**
 * Only origin-form request targets (server.ts parseTarget): `//host/…` and `/\\host/…` are
 * refused. Observed before: WHATWG URL read `/\\host/x` as `//host/x`, dropped the host and routed
 * `/x` (`/\\x/metrics`, `/\\x/admin/agents`), a path a front proxy matching the raw target never saw.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { PETSTORE } from '../../helpers/proxy.js';
import { rawExchange, statuses } from '../../helpers/raw-http.js';

let p: TestProtocol;
beforeAll(async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'aap-edge-')), 'proxy.yaml');
  writeFileSync(file, `apis:\n  - spec: ${JSON.stringify(PETSTORE)}\nmock_upstream: true\n`);
  p = await startProtocol({ overrides: { config: file } });
});
afterAll(async () => {
  await p?.close();
});

describe('request targets that are not origin-form', () => {
  it('/\\evil.example/healthz is refused like //evil.example/healthz', async () => {
    const slash = await rawExchange(
      p.proxy.url,
      'GET //evil.example/healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n',
    );
    expect(statuses(slash)).toEqual([400]);
    const backslash = await rawExchange(
      p.proxy.url,
      'GET /\\evil.example/healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n',
    );
    expect(statuses(backslash)).toEqual([400]);
  });
});
