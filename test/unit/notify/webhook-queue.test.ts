/**
 * README "Bounds": approval webhooks keep at most `max_queue` notices waiting in memory, the
 * oldest dropped, retries included. Before the fix a failed attempt was put back without the
 * check: with max_queue 2, bursts of MAX_IN_FLIGHT failing notices left 5 waiting.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/log.js';
import { MAX_IN_FLIGHT, WebhookNotifier, type Timers } from '../../../src/notify/webhook.js';
import type { ApprovalNotice } from '../../../src/protocol/notices.js';

class ManualTimers implements Timers {
  jobs: (() => void)[] = [];
  set(fn: () => void): () => void {
    this.jobs.push(fn);
    return () => {
      this.jobs = this.jobs.filter((j) => j !== fn);
    };
  }
}

let server: Server | undefined;
let notifier: WebhookNotifier | undefined;
afterEach(async () => {
  await notifier?.close();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
});

function notice(i: number): ApprovalNotice {
  return {
    type: 'approval.requested',
    event: 'ciba',
    approval: {
      id: `apr_${i}`,
      kind: 'capability_request',
      method: 'ciba',
      url: 'http://127.0.0.1/approvals',
      created_at: new Date().toISOString(),
      expires_at: new Date().toISOString(),
    },
    user_id: 'alice',
    agent: { id: 'agt_1', name: 'a', mode: 'delegated' },
    host: { id: 'hst_1', name: null },
    capabilities: [],
  };
}

describe('webhook queue bound', () => {
  it('never holds more than max_queue notices waiting', async () => {
    server = createServer((_req, res) => {
      res.writeHead(503).end();
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const maxQueue = 2;
    notifier = new WebhookNotifier(
      {
        url,
        secret: 'webhook-secret-0123456789abcdef',
        events: new Set(['ciba']),
        timeoutMs: 5000,
        maxAttempts: 6,
        retryBackoffMs: 1000,
        maxBackoffMs: 300_000,
        maxQueue,
      },
      {
        clock: { now: () => Date.now() },
        logger: createLogger('error', () => {}),
        timers: new ManualTimers(),
      },
    );
    let most = 0;
    // Bursts: a notice accepted while the queue is full replaces the oldest, but the attempts in
    // flight come back (failed, to be retried) without any check.
    for (let burst = 0; burst < 3; burst++) {
      for (let i = 0; i < MAX_IN_FLIGHT; i++) notifier.approvalRequested(notice(burst * 10 + i));
      await notifier.whenIdle();
      most = Math.max(most, notifier.stats().waiting);
    }
    expect(most).toBe(maxQueue);
    const stats = notifier.stats();
    expect(stats.accepted).toBe(3 * MAX_IN_FLIGHT);
    // Every notice is accounted for: waiting, or dropped for room (none was delivered).
    expect(stats.waiting + stats.dropped).toBe(stats.accepted);
  });
});
