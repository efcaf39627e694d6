import { describe, expect, it } from 'vitest';
import { clientNetwork, clientSite } from '../../../src/util/client-network.js';

describe('clientNetwork: the key a client is budgeted under', () => {
  it.each([
    ['192.0.2.1', '192.0.2.1'],
    ['::ffff:192.0.2.1', '192.0.2.1'],
    ['2001:db8:a:b:1:2:3:4', '2001:db8:a:b::/64'],
    ['2001:DB8:000a:b::ffff', '2001:db8:a:b::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['2001:db8:a:b::', '2001:db8:a:b::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['64:ff9b::192.0.2.1', '64:ff9b:0:0::/64'],
    ['1:2:3:4:5:6:192.0.2.1', '1:2:3:4::/64'],
    ['1::2:3:4:5:6:7', '1:0:2:3::/64'],
    ['unknown', 'unknown'],
  ])('%s → %s', (address, key) => {
    expect(clientNetwork(address)).toBe(key);
  });
});

describe('clientSite: the /48 an IPv6 client belongs to', () => {
  it.each([
    ['2001:db8:7:1::1', '2001:db8:7::/48'],
    ['2001:0db8:0007:ffff:1:2:3:4', '2001:db8:7::/48'],
    ['2001:db8::1', '2001:db8:0::/48'],
    ['fe80::1%eth0', 'fe80:0:0::/48'],
  ])('%s → %s', (address, site) => {
    expect(clientSite(address)).toBe(site);
  });
  it.each(['192.0.2.1', '::ffff:192.0.2.1', 'not an address'])(
    '%s → none (an IPv4 address is the client)',
    (a) => {
      expect(clientSite(a)).toBeUndefined();
    },
  );
});
