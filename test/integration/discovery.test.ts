/** §5.1 discovery over HTTP. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningProxy } from '../../src/app.js';
import { getJson, startTestProxy } from '../helpers/proxy.js';

describe('GET /.well-known/agent-configuration (§5.1)', () => {
  let proxy: RunningProxy;
  beforeAll(async () => {
    proxy = await startTestProxy();
  });
  afterAll(() => proxy.close());

  it('carries every required field, and URLs derive from the issuer', async () => {
    const { status, body, headers } = await getJson(`${proxy.url}/.well-known/agent-configuration`);
    expect(status).toBe(200);
    expect(headers.get('content-type')).toMatch(/^application\/json/);
    expect(body).toMatchObject({
      version: '1.0-draft',
      provider_name: 'petstore',
      description: expect.any(String),
      issuer: proxy.url,
      default_location: `${proxy.url}/capability/execute`,
      algorithms: ['Ed25519'],
      modes: ['delegated'],
      approval_methods: ['device_authorization'],
    });
    expect(body.version).toMatch(/^\d+\.\d+(-draft)?$/); // §5.1.1 format
  });

  it('lists an endpoint path for the whole protocol, each relative to the issuer', async () => {
    const { body } = await getJson(`${proxy.url}/.well-known/agent-configuration`);
    expect(Object.keys(body.endpoints).sort()).toEqual(
      [
        'capabilities',
        'describe_capability',
        'execute',
        'introspect',
        'reactivate',
        'register',
        'request_capability',
        'revoke',
        'revoke_host',
        'rotate_host_key',
        'rotate_key',
        'status',
      ].sort(),
    );
    for (const path of Object.values(body.endpoints)) expect(path).toMatch(/^\/[a-z/-]+$/);
    expect(body.endpoints.capabilities).toBe('/capability/list');
  });

  it('is cacheable for an hour (§5.1 Caching)', async () => {
    const { headers } = await getJson(`${proxy.url}/.well-known/agent-configuration`);
    expect(headers.get('cache-control')).toMatch(/max-age=3600/);
  });

  it('answers HEAD with the headers and no body', async () => {
    const res = await fetch(`${proxy.url}/.well-known/agent-configuration`, { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
  });
});

describe('--issuer', () => {
  let proxy: RunningProxy;
  beforeAll(async () => {
    proxy = await startTestProxy({ issuer: 'https://agents.example.com/petstore/' });
  });
  afterAll(() => proxy.close());

  it('sets the advertised issuer and default_location (trailing slash removed)', async () => {
    const { body } = await getJson(`${proxy.url}/.well-known/agent-configuration`);
    expect(body.issuer).toBe('https://agents.example.com/petstore');
    expect(body.default_location).toBe('https://agents.example.com/petstore/capability/execute');
  });
});
