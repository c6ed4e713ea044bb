// The firewall's rule text: what goes into it (that nft accepts it is a host test).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hostDnsServers, hostNetworks, rulesetText } from '../../src/network/firewall.ts';

const options = { tag: 'c0de', poolCidr: '10.213.0.0/16', dnsServers: ['10.255.255.53'], hostNetworks: ['192.0.2.0/24'] };

describe('firewall rules', () => {
  it('drop spoofed sources, the host\'s own networks and the blocked ranges, and masquerade only the pool', () => {
    const text = rulesetText(options);
    assert.match(text, /table inet roomkit_c0de/);
    assert.match(text, /iifname "rkc0de\*" ip saddr != 10\.213\.0\.0\/16 drop/);
    assert.match(text, /ip daddr \{[^}]*169\.254\.0\.0\/16[^}]*192\.0\.2\.0\/24 \} drop/);
    assert.match(text, /iifname "rkc0de\*" meta nfproto ipv6 drop/);
    assert.match(text, /ip saddr 10\.213\.0\.0\/16 oifname != "rkc0de\*" masquerade/);
    // DNS to the host's resolvers is allowed for instances with egress, before the drops.
    const forward = text.slice(text.indexOf('chain forward'));
    assert.ok(forward.indexOf('th dport 53 accept') < forward.indexOf('} drop'));
  });

  it('find the host\'s own networks, leaving out loopback, host routes and the pool', () => {
    const out = [
      '1: lo    inet 127.0.0.1/8 scope host lo',
      '2: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0',
      '3: rkab12cd34ef5    inet 10.213.0.1/30 scope global rkab12cd34ef5',
      '4: wg0    inet 172.20.3.7/20 scope global wg0',
      '5: dummy0    inet 198.51.100.9/32 scope global dummy0',
    ].join('\n');
    assert.deepEqual(hostNetworks(out, '10.213.0.0/16'), ['192.0.2.0/24', '172.20.0.0/20']);
  });

  it('take the host\'s resolvers, leaving out loopback ones', () => {
    assert.deepEqual(hostDnsServers('nameserver 127.0.0.53\nnameserver 10.255.255.53\n# nameserver 1.1.1.1\nnameserver ::1\n'), ['10.255.255.53']);
  });
});
