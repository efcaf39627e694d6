import { describe, expect, it } from 'vitest';
import { createAddressGuard } from '../../../../src/protocol/jwks/address-guard.js';
import { unmapIpv4 } from '../../../../src/util/internal-addresses.js';

describe('JWKS address guard (§8.12 IP filtering)', () => {
  const guard = createAddressGuard([]);

  it.each([
    ['127.0.0.1', 'IPv4 loopback'],
    ['127.255.0.9', 'IPv4 loopback range'],
    ['10.1.2.3', 'RFC 1918'],
    ['172.16.0.1', 'RFC 1918'],
    ['172.31.255.255', 'RFC 1918'],
    ['192.168.1.1', 'RFC 1918'],
    ['169.254.169.254', 'cloud metadata (link-local)'],
    ['169.254.1.1', 'IPv4 link-local'],
    ['100.64.0.1', 'CGNAT'],
    ['0.0.0.0', 'unspecified'],
    ['::1', 'IPv6 loopback'],
    ['::', 'IPv6 unspecified'],
    ['fe80::1', 'IPv6 link-local'],
    ['fc00::1', 'unique-local'],
    ['fd00:ec2::254', 'AWS IPv6 metadata'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
    ['::ffff:7f00:1', 'IPv4-mapped loopback, hex'],
    ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
    ['0:0:0:0:0:ffff:10.0.0.1', 'IPv4-mapped, long form'],
    ['64:ff9b::7f00:1', 'NAT64 of loopback'],
  ])('refuses %s (%s)', (address) => {
    expect(guard.refusal(address)).toMatch(/§8\.12/);
  });

  it.each(['8.8.8.8', '93.184.216.34', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8'])(
    'accepts the public address %s',
    (address) => {
      expect(guard.refusal(address)).toBeUndefined();
    },
  );

  it('refuses what is not an IP address', () => {
    expect(guard.refusal('localhost')).toMatch(/not an IP address/);
  });

  it('lets through exactly what the allow-list names', () => {
    const allowing = createAddressGuard(['127.0.0.1', '10.0.0.0/8', 'fd00::/8']);
    expect(allowing.refusal('127.0.0.1')).toBeUndefined();
    expect(allowing.refusal('::ffff:127.0.0.1')).toBeUndefined();
    expect(allowing.refusal('10.200.0.1')).toBeUndefined();
    expect(allowing.refusal('fd00:ec2::254')).toBeUndefined();
    expect(allowing.refusal('127.0.0.2')).toMatch(/§8\.12/);
    expect(allowing.refusal('169.254.169.254')).toMatch(/§8\.12/);
  });

  it('rejects a bad allow-list entry when built', () => {
    expect(() => createAddressGuard(['not-an-ip'])).toThrow(RangeError);
  });

  it('unmaps IPv4-mapped IPv6 only', () => {
    expect(unmapIpv4('::ffff:c0a8:0101')).toBe('192.168.1.1');
    expect(unmapIpv4('2001:db8::1')).toBe('2001:db8::1');
  });
});
