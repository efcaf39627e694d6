/** server.trusted_proxies: the client address behind load balancers, and never from anyone else. */
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { ClientAddress } from '../../../src/http/client-address.js';

function req(peer: string, headers: Record<string, string> = {}): IncomingMessage {
  // why: only the two fields ClientAddress reads; a real IncomingMessage needs a socket.
  return { socket: { remoteAddress: peer }, headers } as unknown as IncomingMessage;
}

describe('ClientAddress', () => {
  it('without trusted proxies, forwarded headers are ignored (a client cannot pick its address)', () => {
    const a = new ClientAddress([]);
    expect(a.of(req('203.0.113.9', { 'x-forwarded-for': '198.51.100.1' }))).toBe('203.0.113.9');
    expect(a.of(req('203.0.113.9', { forwarded: 'for=198.51.100.1' }))).toBe('203.0.113.9');
  });

  it('from a peer that is not trusted, forwarded headers are ignored', () => {
    const a = new ClientAddress(['10.0.0.0/8']);
    expect(a.of(req('203.0.113.9', { 'x-forwarded-for': '198.51.100.1' }))).toBe('203.0.113.9');
  });

  it('behind a trusted proxy, the client is the rightmost address that is not a trusted proxy', () => {
    const a = new ClientAddress(['10.0.0.0/8']);
    // The client wrote a fake first entry; the balancer appended what it really saw.
    const spoofed = req('10.0.0.2', { 'x-forwarded-for': '1.2.3.4, 198.51.100.7, 10.0.0.9' });
    expect(a.of(spoofed)).toBe('198.51.100.7');
  });

  it('with forwarded_header: forwarded, reads RFC 7239 Forwarded (quoted IPv6 with port) and never X-Forwarded-For', () => {
    const a = new ClientAddress(['10.0.0.0/8'], 'forwarded');
    const r = req('10.1.1.1', {
      forwarded: 'for=192.0.2.60;proto=https, for="[2001:db8:cafe::17]:4711"',
      'x-forwarded-for': '9.9.9.9',
    });
    expect(a.of(r)).toBe('2001:db8:cafe::17');
    expect(a.of(req('10.1.1.1', { 'x-forwarded-for': '9.9.9.9' }))).toBe('10.1.1.1');
  });

  it('by default reads X-Forwarded-For only: a Forwarded header the client wrote is not believed', () => {
    // Observed before: Forwarded was read whenever present, and balancers that append to
    // X-Forwarded-For (nginx, HAProxy, cloud load balancers) pass the client's own through, so
    // the client named its own address, a fresh per-IP budget on every request.
    const a = new ClientAddress(['10.0.0.0/8']);
    const r = req('10.1.1.1', { forwarded: 'for=198.51.100.77', 'x-forwarded-for': '203.0.113.9' });
    expect(a.of(r)).toBe('203.0.113.9');
  });

  it('a garbage hop ends the walk at the last address a trusted proxy wrote', () => {
    const a = new ClientAddress(['10.0.0.0/8']);
    expect(a.of(req('10.0.0.2', { 'x-forwarded-for': 'evil, 10.0.0.3' }))).toBe('10.0.0.3');
    expect(a.of(req('10.0.0.2', { 'x-forwarded-for': 'not-an-ip' }))).toBe('10.0.0.2');
  });

  it('IPv4-mapped IPv6 peers are matched as IPv4', () => {
    const a = new ClientAddress(['127.0.0.1']);
    expect(a.of(req('::ffff:127.0.0.1', { 'x-forwarded-for': '198.51.100.3' }))).toBe('198.51.100.3');
  });

  it('refuses an entry that is not an address or range, naming it', () => {
    expect(() => new ClientAddress(['10.0.0.0/33'])).toThrow(/"10.0.0.0\/33"/);
    expect(() => new ClientAddress(['lb.internal'])).toThrow(/not an IP address or CIDR/);
  });
});
