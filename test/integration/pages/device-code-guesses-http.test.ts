/**
 * Device codes are short enough to guess (RFC 8628 §5.1): a signed-in person who tries codes on
 * /device has 10 wrong ones, then one more per 90 s, whatever address they send from; a right
 * code costs nothing. Found by a review: the per-address budget alone let one session guess on
 * from each new network.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEVICE_CODE_MISSES_PER_USER } from '../../../src/http/rate-limits.js';
import {
  ALICE,
  BOB,
  csrfOf,
  pendingRegistration,
  post,
  signIn,
  startPagesProxy,
} from '../../helpers/page-http.js';
import { TestClock, type TestProtocol } from '../../helpers/protocol.js';

const clock = new TestClock();
let p: TestProtocol;
beforeAll(async () => {
  p = await startPagesProxy('', { clock });
});
afterAll(() => p.close());

describe('wrong device codes per person', () => {
  it(`${DEVICE_CODE_MISSES_PER_USER.count} wrong codes, then 429 even for a right one; another person is not affected; later one more`, async () => {
    const alice = await signIn(p, ALICE);
    const csrf = await csrfOf(p, alice.cookie);
    const real = await pendingRegistration(p);
    // Right codes cost nothing.
    for (let i = 0; i < 3; i++) {
      expect((await post(p, '/device', { csrf, code: real.code }, alice.cookie)).status).toBe(200);
    }
    for (let i = 0; i < DEVICE_CODE_MISSES_PER_USER.count; i++) {
      expect((await post(p, '/device', { csrf, code: 'BCDF-GHJK' }, alice.cookie)).status).toBe(404);
    }
    const refused = await post(p, '/device', { csrf, code: real.code }, alice.cookie);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).not.toBeNull();

    const bob = await signIn(p, BOB);
    const bobCsrf = await csrfOf(p, bob.cookie);
    expect((await post(p, '/device', { csrf: bobCsrf, code: real.code }, bob.cookie)).status).toBe(200);

    clock.advance(DEVICE_CODE_MISSES_PER_USER.windowMs / DEVICE_CODE_MISSES_PER_USER.count);
    expect((await post(p, '/device', { csrf, code: real.code }, alice.cookie)).status).toBe(200);
  });
});
