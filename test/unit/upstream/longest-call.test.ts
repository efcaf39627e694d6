/**
 * Executor.longestCallMs: the longest deadline one upstream call can have under the configuration,
 * which bounds how long an approved per-call execution may still be running (per-call-decide.ts).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/clock.js';
import type { ApiExecutionSettings } from '../../../src/config/api-execution.js';
import { deriveCatalog } from '../../../src/openapi/derive.js';
import { outcomeUnknownAfterMs } from '../../../src/protocol/per-call-decide.js';
import { UpstreamClient } from '../../../src/upstream/client.js';
import { Executor } from '../../../src/upstream/executor.js';
import { OAuthTokens } from '../../../src/upstream/oauth.js';

const client = new UpstreamClient();
afterAll(() => client.close());

function apiDoc(title: string): unknown {
  return {
    openapi: '3.0.3',
    info: { title, version: '1' },
    paths: {
      '/items': { get: { operationId: `list_${title}`, responses: { '200': { description: 'ok' } } } },
    },
  };
}

function settings(
  timeoutMs: number,
  operations: ApiExecutionSettings['operations'] = {},
): ApiExecutionSettings {
  return {
    timeoutMs,
    retries: 2,
    retryBackoffMs: 100,
    maxResponseBytes: 1024,
    serverVariables: {},
    credentials: {},
    headers: {},
    operations,
  };
}

function executorOf(byApi: Record<string, ApiExecutionSettings>): Executor {
  const catalog = deriveCatalog(
    Object.keys(byApi).map((id) => ({ source: `${id}.yaml`, id, doc: apiDoc(id) })),
  );
  return new Executor({
    catalog,
    settings: new Map(Object.entries(byApi)),
    baseUrlFor: () => 'http://127.0.0.1:9',
    client,
    oauth: new OAuthTokens(systemClock, client.dispatcher),
    requestIdHeader: 'x-request-id',
  });
}

describe('Executor.longestCallMs', () => {
  it('is the longest API timeout, or an operation timeout longer than every API timeout', () => {
    expect(executorOf({ a: settings(30_000), b: settings(5_000) }).longestCallMs()).toBe(30_000);
    expect(
      executorOf({
        a: settings(30_000),
        b: settings(5_000, { list_b: { timeoutMs: 120_000, pin: {} } }),
      }).longestCallMs(),
    ).toBe(120_000);
  });

  it('a per-call outcome is unknown after twice that, plus a minute', () => {
    expect(outcomeUnknownAfterMs(30_000)).toBe(120_000);
  });
});
