/**
 * A database that cannot be reached becomes `503 temporarily_unavailable` with a Retry-After,
 * wherever it surfaces (issue 13): toProtocolError is the one mapping (src/errors.ts), and the
 * response tells nothing of the connection. A real server renders it: JSON, and an HTML page for
 * page routes.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { ProtocolError, toProtocolError } from '../../../src/errors.js';
import { ClientAddress } from '../../../src/http/client-address.js';
import { step } from '../../../src/http/pipeline.js';
import { Router } from '../../../src/http/router.js';
import { createHttpServer } from '../../../src/http/server.js';
import { createLogger } from '../../../src/log.js';
import { StoreUnavailableError } from '../../../src/storage/errors.js';

const CAUSE = 'database unavailable: connect ECONNREFUSED 10.1.2.3:5432 (user app, password s3cret)';

describe('StoreUnavailableError as a response', () => {
  it('maps to 503 temporarily_unavailable with Retry-After and a fixed message', () => {
    const e = toProtocolError(new StoreUnavailableError(CAUSE));
    expect(e).toBeInstanceOf(ProtocolError);
    expect(e.status).toBe(503);
    expect(e.toBody()).toEqual({
      error: 'temporarily_unavailable',
      message: 'The database is unavailable; retry shortly.',
    });
    expect(e.headers).toEqual({ 'retry-after': '5' });
    // Any other error stays a 500 that reveals nothing.
    expect(toProtocolError(new Error(CAUSE)).toBody()).toMatchObject({ error: 'internal_error' });
  });

  let server: Server | undefined;
  afterEach(async () => {
    const open = server;
    server = undefined;
    if (open) await new Promise<void>((resolve) => open.close(() => resolve()));
  });

  it('is rendered by the server as JSON, or as an HTML page on page routes, and logged with its cause', async () => {
    const router = new Router();
    const fail = step('read', () => Promise.reject(new StoreUnavailableError(CAUSE)));
    router.add('GET', '/api', [fail]);
    router.add('GET', '/page', [
      step('page', (x) => {
        x.page = true;
      }),
      fail,
    ]);
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger(
      'info',
      (line) => void lines.push(JSON.parse(line) as Record<string, unknown>),
    );
    server = createHttpServer({
      router,
      logger,
      maxBodyBytes: 1024,
      clientAddress: new ClientAddress([]),
      connections: {
        requestTimeoutMs: 5_000,
        headersTimeoutMs: 5_000,
        keepAliveTimeoutMs: 1_000,
        maxHeaderBytes: 16_384,
        maxConnections: 10,
        maxConnectionsPerIp: 10,
        shutdownGraceMs: 1_000,
      },
      requestIdHeader: 'x-request-id',
      issuer: () => 'http://proxy.test',
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', () => resolve()));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const api = await fetch(`${base}/api`);
    expect(api.status).toBe(503);
    expect(api.headers.get('retry-after')).toBe('5');
    expect(api.headers.get('content-type')).toMatch(/^application\/json/);
    const body = await api.text();
    expect(JSON.parse(body)).toMatchObject({ error: 'temporarily_unavailable' });

    const page = await fetch(`${base}/page`);
    expect(page.status).toBe(503);
    expect(page.headers.get('retry-after')).toBe('5');
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    expect(html).toContain('The database is unavailable; retry shortly.');

    for (const text of [body, html]) {
      for (const detail of ['10.1.2.3', '5432', 's3cret', 'ECONNREFUSED']) expect(text).not.toContain(detail);
    }
    // The operator gets the cause, as a warning (an outage, not a bug).
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 'warn', msg: 'database unavailable', error: CAUSE, step: 'read' }),
    );
    expect(lines.filter((l) => l.level === 'error')).toEqual([]);
  });
});
