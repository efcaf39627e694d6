/** The HTTP front: routing errors, body cap, health, request ids, and the mock upstream wiring. */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProxy } from '../../src/app.js';
import { getJson, startTestProxy } from '../helpers/proxy.js';

function rawRequest(
  url: string,
  options: { method: string; path: string; headers?: Record<string, string>; body?: string },
) {
  const { hostname, port } = new URL(url);
  return new Promise<{ status: number; headers: Record<string, unknown>; body: string }>(
    (resolve, reject) => {
      const req = request(
        { hostname, port, method: options.method, path: options.path, headers: options.headers },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        },
      );
      req.on('error', reject);
      req.end(options.body);
    },
  );
}

describe('HTTP server', () => {
  let proxy: RunningProxy;
  beforeAll(async () => {
    proxy = await startTestProxy({ mockUpstream: true });
  });
  afterAll(() => proxy.close());

  it('answers unknown paths with 404 in the {error, message} format (§5.13)', async () => {
    const { status, body } = await getJson(`${proxy.url}/agent/nowhere`);
    expect(status).toBe(404);
    expect(body).toEqual({ error: 'not_found', message: expect.any(String) });
  });

  it('answers a wrong method with 405 and Allow', async () => {
    const res = await fetch(`${proxy.url}/capability/list`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, HEAD');
    expect(await res.json()).toEqual({ error: 'method_not_allowed', message: expect.any(String) });
  });

  it('refuses a declared body over the cap with 413 before reading it', async () => {
    const res = await rawRequest(proxy.url, {
      method: 'POST',
      path: '/capability/list',
      headers: { 'content-length': String(2 * 1024 * 1024), 'content-type': 'application/json' },
    });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toMatchObject({ error: 'payload_too_large' });
    expect(res.headers.connection).toBe('close');
  });

  it('rejects a request target that is not an absolute path', async () => {
    const res = await rawRequest(proxy.url, { method: 'GET', path: '//evil.example/capability/list' });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body).error).toBe('invalid_request');
  });

  it('tags every response with a request id', async () => {
    const a = await fetch(`${proxy.url}/healthz`);
    const b = await fetch(`${proxy.url}/healthz`);
    expect(a.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.headers.get('x-request-id')).not.toBe(b.headers.get('x-request-id'));
  });

  it('reports liveness and readiness', async () => {
    expect((await getJson(`${proxy.url}/healthz`)).body).toEqual({ status: 'ok' });
    expect((await getJson(`${proxy.url}/readyz`)).body).toEqual({ status: 'ready', capabilities: 6 });
  });

  it('--mock-upstream serves each operation its OpenAPI example at the API base URL', async () => {
    const base = proxy.upstreamFor('petstore');
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+\//);
    const res = await getJson(`${base}/pets/1`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: 1, name: 'Rex', species: 'dog', status: 'available' });
    const created = await getJson(`${base}/pets`, { method: 'POST', body: '{}' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: expect.any(String), species: 'dog' });
  });
});

describe('shutdown', () => {
  it('stops answering and reports not ready once closed', async () => {
    const proxy = await startTestProxy();
    expect((await fetch(`${proxy.url}/readyz`)).status).toBe(200);
    await proxy.close();
    await expect(fetch(`${proxy.url}/readyz`)).rejects.toThrow();
    await proxy.close(); // idempotent
  });
});
