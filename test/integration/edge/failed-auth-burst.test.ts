/**
 * The failed-authentication budget (`rate_limits.failed_auth_per_ip`, §8.13) holds for forged
 * tokens sent together, not only one after another: pipelined on one socket, at most the budget of
 * them are verified, and the rest are refused 429 before verification. On PostgreSQL, where
 * looking a principal up waits on the network; on SQLite a lookup is mostly done before the next
 * pipelined request is parsed, which hid the defect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { generateTestKey } from '../../helpers/keys.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import type { TestProtocol } from '../../helpers/protocol.js';
import { rawExchange, statuses } from '../../helpers/raw-http.js';

const BUDGET = 60;
const SENT = 300;

let postgres: TestPostgres;
let gateway: Gateway;
let p: TestProtocol;
beforeAll(async () => {
  postgres = await startPostgres();
  gateway = await startGateway({
    db: await postgres.createDatabase(),
    // per_ip off: only the failed-authentication budget may refuse these requests.
    policy: `rate_limits:\n  per_ip: null\n  unknown_host_registration: null\n  failed_auth_per_ip: ${BUDGET}/1m\n`,
  });
  p = gateway.p;
});
afterAll(async () => {
  await gateway?.close();
  await postgres?.stop();
});

/** The token with its signature replaced by junk of the same length. */
function junkSignature(token: string): string {
  const [header, payload, signature] = token.split('.') as [string, string, string];
  return `${header}.${payload}.${'A'.repeat(signature.length)}`;
}

/** `count` POSTs of `{}` to `path`, each with its own token from `token(i)`, the last closing. */
async function pipelined(
  path: string,
  count: number,
  token: (i: number) => Promise<string>,
): Promise<string> {
  const requests: string[] = [];
  for (let i = 0; i < count; i++) {
    const last = i === count - 1 ? 'connection: close\r\n' : '';
    requests.push(
      `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${await token(i)}\r\n` +
        `content-type: application/json\r\ncontent-length: 2\r\n${last}\r\n{}`,
    );
  }
  return requests.join('');
}

/** The budget's worth of 401s, and every other answer a 429 (the test's clock stands still). */
function expectWithinBudget(answers: number[]): void {
  expect(answers).toHaveLength(SENT);
  expect(answers.filter((s) => s === 401)).toHaveLength(BUDGET);
  expect(answers.filter((s) => s !== 401 && s !== 429)).toEqual([]);
}

// Regression: the budget was checked before verifying and charged after, and verifying waits on the
// database (an unknown `sub`; every host JWT). 500 forged tokens pipelined on one socket all passed
// the check on PostgreSQL (500 × 401 with a budget of 60), 140 of them on SQLite.
describe('forged tokens pipelined on one socket', () => {
  it(`${SENT} agent JWTs of unknown agents: at most ${BUDGET} verified (401), the rest 429`, async () => {
    const stranger = await generateTestKey();
    const bytes = await pipelined('/capability/execute', SENT, async (i) =>
      junkSignature(await p.agentToken(stranger, `agt_forged_${i}`, {}, p.executeLocation)),
    );
    expectWithinBudget(statuses(await rawExchange(p.proxy.url, bytes, 10_000)));
  });

  it(`${SENT} host JWTs with a junk signature: at most ${BUDGET} verified (401), the rest 429`, async () => {
    // The agent JWTs above used this address's budget up: it refills on the proxy's clock.
    p.clock.advance(60_000);
    const host = await generateTestKey();
    const bytes = await pipelined('/agent/register', SENT, async () =>
      junkSignature(await p.hostToken(host)),
    );
    expectWithinBudget(statuses(await rawExchange(p.proxy.url, bytes, 10_000)));
  });

  // What is taken is given back when the token verifies: it is a reservation, so that a client's
  // verifications in progress at once stay within the budget (README "Bounds").
  it('verified tokens give back what was taken: twice the budget of them, in batches, all pass', async () => {
    p.clock.advance(60_000);
    const host = await generateTestKey();
    const batch = BUDGET / 2;
    const answers: number[] = [];
    for (let round = 0; round < 4; round++) {
      const requests: string[] = [];
      for (let i = 0; i < batch; i++) {
        const last = i === batch - 1 ? 'connection: close\r\n' : '';
        const token = await p.hostToken(host);
        requests.push(
          `GET /capability/list HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\n${last}\r\n`,
        );
      }
      answers.push(...statuses(await rawExchange(p.proxy.url, requests.join(''), 10_000)));
    }
    expect(answers).toEqual(Array.from({ length: 4 * batch }, () => 200));
  });
});
