/**
 * Each OIDC sign-in started is a pending row until its callback, 10,000 at most, the least
 * recent dropped past that. Within the per-IP budget alone, nine addresses could push a real
 * person's sign-in out while they were at their provider; one client now starts at most
 * OIDC_STARTS_PER_CLIENT in the time a callback may take. A real provider answers discovery.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OIDC_STARTS_PER_CLIENT } from '../../../src/http/rate-limits.js';
import { startTestIdp, type TestIdp } from '../../helpers/oidc-provider.js';
import { get, startPagesProxy } from '../../helpers/page-http.js';
import { TestClock, type TestProtocol } from '../../helpers/protocol.js';

const clock = new TestClock();
let idp: TestIdp;
let p: TestProtocol;
beforeAll(async () => {
  idp = await startTestIdp({
    redirectUris: ['http://localhost/sign-in/oidc/callback'],
    accounts: {},
    now: () => Date.now(),
  });
  p = await startPagesProxy(
    `  oidc:\n    issuer: ${idp.issuer}\n    client_id: ${idp.clientId}\n    client_secret: { value: ${idp.clientSecret} }\n`,
    { clock },
  );
});
afterAll(async () => {
  await p?.close();
  await idp?.close();
});

describe('OIDC sign-ins started per client', () => {
  it(`${OIDC_STARTS_PER_CLIENT.count} within the callback's lifetime, then 429; later one more`, async () => {
    for (let i = 0; i < OIDC_STARTS_PER_CLIENT.count; i++) {
      const started = await get(p, '/sign-in/oidc?return=/device', '');
      expect(started.status, `start ${i}`).toBe(303);
      expect(started.headers.get('location')).toMatch(new RegExp(`^${idp.issuer}/`));
    }
    const refused = await get(p, '/sign-in/oidc?return=/device', '');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).not.toBeNull();
    clock.advance(OIDC_STARTS_PER_CLIENT.windowMs / OIDC_STARTS_PER_CLIENT.count);
    expect((await get(p, '/sign-in/oidc?return=/device', '')).status).toBe(303);
  });
});
