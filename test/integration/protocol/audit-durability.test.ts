/**
 * Audit durability (issue 10 class 14, §11): activity records of executions are group-committed
 * with a documented bound, `audit.commit_window`. The built CLI runs as a child process on a
 * SQLite file; a bounded load of executions runs against it on 127.0.0.1, and the test notes when
 * each answer arrived. Then:
 *  - SIGKILL: every execution answered more than one commit window before the kill has its
 *    activity row (only the last window may be lost);
 *  - SIGTERM: every answered execution has its activity row (shutdown commits them all).
 * Each execution's agent JWT carries its own `jti`, which the activity row records, so rows and
 * answers are matched one by one.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuiltCli, killChildren, ROOT } from '../../helpers/cli-process.js';
import { serveCli, type ServedCli } from '../../helpers/cli-serve.js';
import { agentJwt, generateTestKey, hostJwt, type TestKey } from '../../helpers/keys.js';

const PETSTORE = join(ROOT, 'examples/openapi/petstore.yaml');
/** Executions running at once, and the bound on how many the load may send in all. */
const WORKERS = 8;
const MAX_SENT = 6_000;
/** The signal is sent once this many executions have been answered. */
const SIGNAL_AFTER = 600;
/**
 * How late the proxy's commit timer may run on a busy machine (README: the last commit window
 * "plus however late a busy process runs its timer"): the whole suite shares two cores, and one
 * run found a record answered just over 20 ms before the kill and not yet committed. A proxy that
 * commits later than that (or only at shutdown) still fails.
 */
const TIMER_SLACK_MS = 30;

/** The shipped default of audit.commit_window, from the generated schema of the config. */
function defaultCommitWindowMs(): number {
  const schema = JSON.parse(readFileSync(join(ROOT, 'config/proxy.schema.json'), 'utf8')) as {
    properties: { audit: { properties: { commit_window: { default: string } } } };
  };
  const text = schema.properties.audit.properties.commit_window.default;
  const match = /^(\d+)(ms|s)$/.exec(text);
  if (!match) throw new Error(`unexpected commit_window default ${text}`);
  return Number(match[1]) * (match[2] === 's' ? 1000 : 1);
}

const children = new Set<ChildProcess>();
let tmp = '';
let host: TestKey;
let policyFile = '';

beforeAll(async () => {
  expect(ensureBuiltCli(), 'dist/cli.js is missing: run npm run build').toBe(true);
  tmp = mkdtempSync(join(tmpdir(), 'aap-audit-'));
  host = await generateTestKey();
  policyFile = join(tmp, 'policy.yaml');
  // A pre-registered host linked to alice: its agents get list_pets without an approval. Rate
  // limits are off: the load is the point, not what is tested.
  writeFileSync(
    policyFile,
    [
      'capabilities:',
      '  defaults: [list_pets]',
      'hosts:',
      '  - name: load',
      `    public_key: {kty: OKP, crv: Ed25519, x: ${host.publicJwk.x}}`,
      '    user_id: alice',
      'rate_limits:',
      '  per_ip: null',
      '  per_host: null',
      '  per_agent: null',
      '  per_user: null',
      '  unknown_host_registration: null',
      '',
    ].join('\n'),
  );
});
afterEach(() => killChildren(children));
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

async function boot(db: string): Promise<ServedCli> {
  return serveCli(['--spec', PETSTORE, '--mock-upstream', '--db', db, '--policy', policyFile], {
    cwd: tmp,
    children,
  });
}

/** An active agent granted list_pets (a default of the linked host). */
async function activeAgent(proxy: ServedCli): Promise<{ agent: TestKey; agentId: string }> {
  const agent = await generateTestKey();
  const token = await hostJwt(host, proxy.url, { agent_public_key: agent.publicJwk });
  const res = await fetch(`${proxy.url}/agent/register`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'load', capabilities: ['list_pets'] }),
  });
  const body = (await res.json()) as { status: string; agent_id: string };
  expect(body.status).toBe('active');
  return { agent, agentId: body.agent_id };
}

interface Answer {
  readonly jti: string;
  /** performance.now() in this process when the 200 arrived. */
  readonly at: number;
}

/**
 * Runs WORKERS concurrent loops of executions until the proxy stops answering (or MAX_SENT), and
 * sends `signal` once SIGNAL_AFTER have been answered. Returns the answers and when the signal
 * was sent (performance.now(), taken just before sending it).
 */
async function loadThenSignal(
  proxy: ServedCli,
  signal: NodeJS.Signals,
): Promise<{ answers: Answer[]; signalledAt: number; sent: number }> {
  const { agent, agentId } = await activeAgent(proxy);
  const aud = `${proxy.url}/capability/execute`;
  const answers: Answer[] = [];
  let sent = 0;
  let signalledAt = Number.NaN;
  const worker = async (w: number): Promise<void> => {
    for (let i = 0; sent < MAX_SENT; i++) {
      sent++;
      const jti = `load-${w}-${i}`;
      const token = await agentJwt(agent, agentId, aud, { jti });
      let status: number;
      try {
        const res = await fetch(aud, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ capability: 'list_pets', arguments: {} }),
        });
        await res.arrayBuffer();
        status = res.status;
      } catch {
        return; // the proxy is gone (or going): this worker is done
      }
      // After the signal the drain turns new requests away with 503 (README "Shutdown"): done.
      if (status === 503 && !Number.isNaN(signalledAt)) return;
      if (status !== 200) throw new Error(`execution ${jti} answered ${status}`);
      answers.push({ jti, at: performance.now() });
      if (answers.length === SIGNAL_AFTER) {
        signalledAt = performance.now();
        proxy.child.kill(signal);
      }
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
  if (Number.isNaN(signalledAt)) {
    // MAX_SENT reached without enough answers: say so rather than pass vacuously.
    throw new Error(`only ${answers.length} of ${sent} executions answered`);
  }
  return { answers, signalledAt, sent };
}

/** The jtis of the execution activity rows in the (dead) proxy's database. */
function recordedJtis(db: string): Set<string> {
  const conn = new Database(db, { fileMustExist: true, readonly: true });
  try {
    const rows = conn.prepare(`SELECT jti FROM activity WHERE type = 'execute'`).all() as { jti: string }[];
    return new Set(rows.map((r) => r.jti));
  } finally {
    conn.close();
  }
}

describe('audit durability: activity is group-committed within audit.commit_window', () => {
  it('the shipped commit window is tens of milliseconds', () => {
    const window = defaultCommitWindowMs();
    expect(window).toBeGreaterThan(0);
    expect(window).toBeLessThan(100);
  });

  it('SIGKILL under load loses no execution answered more than one commit window before the kill', async () => {
    const window = defaultCommitWindowMs();
    const db = join(mkdtempSync(join(tmp, 'kill-')), 'proxy.db');
    const proxy = await boot(db);
    const { answers, signalledAt, sent } = await loadThenSignal(proxy, 'SIGKILL');
    expect((await proxy.exited).signal).toBe('SIGKILL');

    const recorded = recordedJtis(db);
    const due = answers.filter((a) => a.at <= signalledAt - window - TIMER_SLACK_MS);
    const missing = due.filter((a) => !recorded.has(a.jti)).map((a) => a.jti);
    expect(
      missing,
      `answered more than ${window} + ${TIMER_SLACK_MS} ms before the kill, yet not recorded`,
    ).toEqual([]);
    // Not vacuous: most answers were due, and nothing was recorded that was never sent.
    expect(due.length).toBeGreaterThan(SIGNAL_AFTER / 2);
    expect(recorded.size).toBeLessThanOrEqual(sent);
  }, 90_000);

  it('SIGTERM under load records every answered execution before the process exits', async () => {
    const db = join(mkdtempSync(join(tmp, 'term-')), 'proxy.db');
    const proxy = await boot(db);
    const { answers } = await loadThenSignal(proxy, 'SIGTERM');
    expect(await proxy.exited).toEqual({ code: 0, signal: null });

    const recorded = recordedJtis(db);
    const missing = answers.filter((a) => !recorded.has(a.jti)).map((a) => a.jti);
    expect(missing, 'answered, yet not recorded after a graceful shutdown').toEqual([]);
    expect(answers.length).toBeGreaterThanOrEqual(SIGNAL_AFTER);
  }, 90_000);
});
