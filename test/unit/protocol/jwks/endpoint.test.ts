import { describe, expect, it } from 'vitest';
import { endpointOf } from '../../../../src/protocol/jwks-auth.js';

describe('endpointOf: two spellings of one JWKS endpoint (§4.2 "MUST point to different endpoints")', () => {
  const url = 'https://keys.example/set/host.json';

  it.each([
    ['a fragment', `${url}#agent`],
    ['scheme and host case', 'HTTPS://KEYS.example/set/host.json'],
    ['the default port', 'https://keys.example:443/set/host.json'],
    ['dot segments', 'https://keys.example/x/../set/./host.json'],
    ['escaped dot segments', 'https://keys.example/x/%2e%2E/set/host.json'],
    ['escaped unreserved characters', 'https://keys.example/%73et/host%2Ejson'],
  ])('%s is the same endpoint', (_how, spelling) => {
    expect(endpointOf(spelling)).toBe(endpointOf(url));
  });

  it.each([
    ['another path', 'https://keys.example/set/agent.json'],
    ['another query', `${url}?who=agent`],
    ['another port', 'https://keys.example:8443/set/host.json'],
    ['an escaped slash, which is not a slash', 'https://keys.example/set%2Fhost.json'],
  ])('%s is another endpoint', (_how, spelling) => {
    expect(endpointOf(spelling)).not.toBe(endpointOf(url));
  });

  it('upper-cases the escapes it keeps', () => {
    expect(endpointOf('https://keys.example/a%2fb')).toBe('https://keys.example/a%2Fb');
  });
});
