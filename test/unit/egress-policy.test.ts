// The egress policy's entries, its checks of names and addresses, what the proxy reads of
// a connection's first bytes, the resolver's answers (against an upstream of this test's
// own on loopback) and the aggregation of decisions: everything of network/egress/ that
// needs neither root nor a sandbox.
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import * as dnsPacket from 'dns-packet';
import pino from 'pino';
import { allowlistScript } from '../../src/network/egress/allowlist-rules.ts';
import { DecisionAggregator, type ReportedDecision } from '../../src/network/egress/decisions.ts';
import { EgressResolver } from '../../src/network/egress/dns-resolver.ts';
import { readFirstBytes } from '../../src/network/egress/first-bytes.ts';
import { checkAddress, checkDialAddress, checkName, PolicyEntryError, parsePolicy } from '../../src/network/egress/policy.ts';
import { UpstreamDns } from '../../src/network/egress/upstream-dns.ts';

const policy = parsePolicy({
  egress: 'allowlist',
  allow: ['example.com', '*.pkg.example.org', 'api.example.net:443', '203.0.113.0/24', '198.51.100.7:8080'],
  deny: ['secret.pkg.example.org', '203.0.113.128/25'],
});

describe('egress policy entries', () => {
  it('refuses entries it cannot use, naming the entry and why', () => {
    const refused = (entry: string, words: RegExp, list: 'allow' | 'deny' = 'allow') => {
      assert.throws(
        () => parsePolicy({ egress: 'allowlist', [list]: ['example.com', entry] }),
        (err: unknown) => err instanceof PolicyEntryError && err.field === `network.${list}[1]` && words.test(err.message),
        entry,
      );
    };
    refused('10.1.0.0/16', /private, loopback, link-local, metadata or reserved/);
    refused('169.254.169.254', /never reach/);
    refused('127.0.0.1', /never reach/);
    refused('2001:db8::1', /IPv6 is not routed/);
    refused('[2001:db8::1]:443', /IPv6 is not routed/);
    refused('example.com:22', /ports 80 and 443 only/);
    refused('203.0.113.1/24', /host bits/);
    refused('example.com:99999', /1 to 65535/);
    refused('exa mple.com', /not a domain/);
    refused('localhost', /not a domain/);
    refused('*.*.example.com', /not a domain/);
    refused('-bad.example.com', /not a domain/, 'deny');
  });

  it('takes lists for an allowlist only', () => {
    assert.throws(() => parsePolicy({ egress: 'internet', allow: ['example.com'] }), /applies to egress "allowlist"/);
    assert.throws(() => parsePolicy({ egress: 'none', deny: ['example.com'] }), /applies to egress "allowlist"/);
    assert.throws(() => parsePolicy({ egress: 'allowlist', allow: Array.from({ length: 101 }, (_, i) => `h${i}.example.com`) }), /the most is 100/);
    assert.deepEqual(parsePolicy({ egress: 'internet' }).allow, []);
  });

  it('matches names: exact, subdomains of a wildcard, deny first, ports', () => {
    assert.deepEqual(checkName(policy, 'example.com'), { allowed: true, rule: 'allow example.com' });
    assert.deepEqual(checkName(policy, 'EXAMPLE.com.'), { allowed: true, rule: 'allow example.com' });
    assert.equal(checkName(policy, 'www.example.com').allowed, false);
    assert.deepEqual(checkName(policy, 'a.b.pkg.example.org'), { allowed: true, rule: 'allow *.pkg.example.org' });
    assert.equal(checkName(policy, 'pkg.example.org').allowed, false);
    assert.deepEqual(checkName(policy, 'secret.pkg.example.org'), { allowed: false, rule: 'deny secret.pkg.example.org' });
    assert.equal(checkName(policy, 'api.example.net').allowed, true, 'resolvable for its port');
    assert.equal(checkName(policy, 'api.example.net', 443).allowed, true);
    assert.equal(checkName(policy, 'api.example.net', 80).allowed, false);
    assert.deepEqual(checkName(policy, 'evil.test'), { allowed: false, rule: 'default' });
  });

  it('matches addresses: deny wins, blocked ranges whatever the list says, ports', () => {
    assert.deepEqual(checkAddress(policy, '203.0.113.9', 443), { allowed: true, rule: 'allow 203.0.113.0/24' });
    assert.deepEqual(checkAddress(policy, '203.0.113.200', 443), { allowed: false, rule: 'deny 203.0.113.128/25' });
    assert.equal(checkAddress(policy, '198.51.100.7', 8080).allowed, true);
    assert.equal(checkAddress(policy, '198.51.100.7', 80).allowed, false);
    assert.equal(checkAddress(policy, '10.0.0.1', 443).rule, 'blocked 10.0.0.0/8');
    assert.equal(checkAddress(policy, '192.0.2.1', 443, ['192.0.2.0/24']).rule, 'blocked 192.0.2.0/24');
    // An allowed name's address: anything but a blocked or denied range.
    assert.equal(checkDialAddress(policy, '192.0.2.10', 443).allowed, true);
    assert.equal(checkDialAddress(policy, '169.254.169.254', 80).allowed, false);
    assert.equal(checkDialAddress(policy, '203.0.113.130', 80).allowed, false);
  });
});

/** The first bytes a TLS client sends for `servername`, caught by a listener that answers nothing. */
async function clientHello(servername: string): Promise<Buffer> {
  return await new Promise<Buffer>((resolve) => {
    const server = createServer((socket) => {
      socket.once('data', (data: Buffer) => {
        resolve(data);
        socket.destroy();
        server.close();
      });
    });
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      const client = tlsConnect({ host: '127.0.0.1', port, servername });
      client.on('error', () => {});
    });
  });
}

describe('the first bytes of a connection', () => {
  it('reads the SNI of a ClientHello, whole or not yet whole', async () => {
    const hello = await clientHello('api.example.net');
    assert.deepEqual(readFirstBytes(hello), { state: 'tls', sni: 'api.example.net' });
    assert.deepEqual(readFirstBytes(hello.subarray(0, 40)), { state: 'more' });
  });

  it('reads the Host of an HTTP request head, and refuses what is neither', () => {
    const head = Buffer.from('GET /x HTTP/1.1\r\nUser-Agent: t\r\nHost: Example.com:80\r\n\r\n');
    assert.deepEqual(readFirstBytes(head), { state: 'http', host: 'example.com:80', target: '/x' });
    assert.deepEqual(readFirstBytes(head.subarray(0, 20)), { state: 'more' });
    const twice = Buffer.from('GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n');
    assert.equal((readFirstBytes(twice) as { host?: string }).host, undefined);
    assert.equal(readFirstBytes(Buffer.from('\x00\x01binary')).state, 'unknown');
    assert.equal(readFirstBytes(Buffer.from([0x16, 3, 1, 0, 5, 2, 0, 0, 1, 0])).state, 'unknown');
  });
});

describe('the egress resolver', () => {
  it('answers allowed names from the upstream and NXDOMAIN for others, which never reach it', async () => {
    const asked: string[] = [];
    const upstream = createSocket('udp4');
    upstream.on('message', (message, remote) => {
      const query = dnsPacket.decode(message);
      const q = query.questions?.[0];
      asked.push(`${q?.type} ${q?.name}`);
      const reply = dnsPacket.encode({
        type: 'response',
        id: query.id ?? 0,
        flags: dnsPacket.RECURSION_AVAILABLE,
        questions: query.questions ?? [],
        answers: [{ type: 'A', name: q?.name ?? '', ttl: 3600, data: '203.0.113.10' }],
      });
      upstream.send(reply, remote.port, remote.address);
    });
    await new Promise<void>((resolve) => upstream.bind(0, '127.0.0.1', resolve));
    const decisions: string[] = [];
    const resolver = new EgressResolver({
      upstream: new UpstreamDns([`127.0.0.1:${upstream.address().port}`]),
      clientOf: (address) => (address === '10.9.0.2' ? { instanceId: 'i-1', policy } : undefined),
      onDecision: (d) => decisions.push(`${d.name} ${d.allowed ? 'allowed' : 'denied'} ${d.rule}`),
      log: pino({ level: 'silent' }),
    });
    const ask = async (name: string, type: 'A' | 'AAAA' | 'TXT', from = '10.9.0.2') => {
      const reply = await resolver.answer(dnsPacket.encode({ type: 'query', id: 7, flags: dnsPacket.RECURSION_DESIRED, questions: [{ type, name }] }), from);
      return reply && (dnsPacket.decode(reply) as dnsPacket.DecodedPacket & { rcode: string });
    };
    try {
      const allowed = await ask('example.com', 'A');
      assert.equal(allowed?.rcode, 'NOERROR');
      assert.deepEqual(allowed?.answers?.map((a) => [(a as { data: string }).data, (a as { ttl: number }).ttl]), [['203.0.113.10', 300]]);
      const long = `${'x'.repeat(63)}.${'y'.repeat(63)}.exfil.evil.test`;
      assert.equal((await ask(long, 'A'))?.rcode, 'NXDOMAIN');
      assert.equal((await ask('data.evil.test', 'TXT'))?.rcode, 'NXDOMAIN');
      const txt = await ask('example.com', 'TXT');
      assert.equal(txt?.rcode, 'NOERROR');
      assert.equal(txt?.answers?.length, 0);
      assert.equal(await ask('example.com', 'A', '10.9.0.6'), undefined, 'a stranger gets no answer');
      assert.deepEqual(asked, ['A example.com'], 'only the allowed A question went upstream');
      assert.deepEqual(decisions.slice(0, 2), ['example.com allowed allow example.com', `${long} denied default`]);
    } finally {
      upstream.close();
      await resolver.close();
    }
  });
});

describe('egress decisions for the audit trail', () => {
  it('reports the first of a kind at once, repeats counted once a window, and folds a flood', () => {
    const reported: ReportedDecision[] = [];
    const aggregator = new DecisionAggregator((d) => reported.push(d), 60_000);
    const base = { instanceId: 'i-1', kind: 'dns' as const, allowed: false, rule: 'default' };
    for (let i = 0; i < 5; i++) aggregator.add({ ...base, name: 'a.test' });
    assert.equal(reported.length, 1);
    for (let i = 0; i < 500; i++) aggregator.add({ ...base, name: `n${i}.test` });
    assert.equal(reported.length, 50, 'at most 50 kinds per instance and window are reported at once');
    aggregator.flush();
    const repeats = reported.find((d) => d.name === 'a.test' && d.count === 4);
    assert.ok(repeats, 'the four repeats are reported with their count');
    const folded = reported.find((d) => d.rule === 'more decisions than a window reports');
    assert.equal(folded?.count, 451);
  });
});

describe('an allowlisted instance\'s nftables rules', () => {
  it('judges only its own address\'s packets, redirects all DNS first, leaves allowed ranges to the forward chain, sends 80 and 443 to the proxy, and drops the rest', () => {
    const ports = { dnsUdp: 41001, dnsTcp: 41002, http: 41003, tls: 41004 };
    const script = allowlistScript('t1', 'rkt1abc', '10.9.0.2', policy, ports);
    const nat = script.split('\n').filter((l) => l.startsWith('add rule inet roomkit_t1 an_rkt1abc ')).map((l) => l.slice('add rule inet roomkit_t1 an_rkt1abc '.length));
    assert.deepEqual(nat, [
      'ip saddr != 10.9.0.2 return',
      'udp dport 53 redirect to :41001',
      'tcp dport 53 redirect to :41002',
      'ip daddr 203.0.113.0/24 tcp dport 1-65535 return',
      'ip daddr 198.51.100.7/32 tcp dport 8080 return',
      'tcp dport 80 redirect to :41003',
      'tcp dport 443 redirect to :41004',
    ]);
    const forward = script.split('\n').filter((l) => l.startsWith('add rule inet roomkit_t1 af_rkt1abc ')).map((l) => l.slice('add rule inet roomkit_t1 af_rkt1abc '.length));
    assert.deepEqual(forward, [
      'ip saddr != 10.9.0.2 drop',
      'ip daddr 203.0.113.128/25 drop',
      'ip daddr 203.0.113.0/24 tcp dport 1-65535 accept',
      'ip daddr 198.51.100.7/32 tcp dport 8080 accept',
      'drop',
    ]);
    assert.match(script, /add element inet roomkit_t1 allowlist_nat \{ rkt1abc : jump an_rkt1abc \}/);
    // Replacing a policy flushes the chains in the same transaction.
    assert.ok(script.indexOf('flush chain inet roomkit_t1 an_rkt1abc') < script.indexOf('udp dport 53'));
  });
});
