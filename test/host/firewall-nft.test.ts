// The firewall's rule text as nft itself reads it: checked with `nft -c`, never applied.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { run } from '../../src/host/run.ts';
import { rulesetText } from '../../src/network/firewall.ts';

const options = { tag: 'c0de', poolCidr: '10.213.0.0/16', dnsServers: ['10.255.255.53'], hostNetworks: ['192.0.2.0/24'] };

describe('firewall rules', () => {
  it('are accepted by nft (checked, not applied)', async () => {
    const res = await run('nft', ['-c', '-f', '-'], { input: rulesetText(options), timeoutMs: 10_000 });
    assert.equal(res.code, 0, res.stderr);
    const noDns = await run('nft', ['-c', '-f', '-'], { input: rulesetText({ ...options, dnsServers: [] }), timeoutMs: 10_000 });
    assert.equal(noDns.code, 0, noDns.stderr);
  });
});
