// Egress allowlists, attacked from inside a real sandbox. Every address is on this
// machine: an "outside" network namespace of this file's own (test/support/egress-outside.ts)
// holds documentation-range addresses (198.51.100.0/24, 2001:db8::/32) with a DNS server
// for the test's zone (allowed.test, evil.test, doh.test), HTTP and HTTPS servers for each
// name (certificates of a CA this file makes, which the instance is given to trust), a
// DNS-over-HTTPS stand-in's address and a UDP listener. The outside prints every query,
// request and datagram it gets, so each check can say what reached it and what did not.
//
// Each refusal has a positive control: the same server answers the host directly, or the
// allowed counterpart gets through from the same instance, so a check cannot pass because
// a listener is down.
//
// Over 400 lines: the checks share one outside, one CA and one instance, which are slow
// to make; split, each part would make them again.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createSocket } from 'node:dgram';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { run, runChecked } from '../../src/host/run.ts';
import type { GvisorRuntime } from '../../src/runtimes/gvisor/gvisor-runtime.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { NETWORK_TEST_PREFIX, networkTestTag } from '../support/network-leftovers.ts';
import { until, untilTrue } from '../support/until.ts';

const POOL = '10.218.0.0/24';
const TAG = networkTestTag(process.pid);
const OUTSIDE = `${NETWORK_TEST_PREFIX}${TAG}-eg`;
const PEER = `rkp-${TAG}-eg`;
const ALLOWED = '198.51.100.10';
const EVIL = '198.51.100.20';
const DOH = '198.51.100.30';
const DNS = '198.51.100.53';
const SERVICE_ADDRESSES = [ALLOWED, EVIL, DOH, DNS];
const OUTSIDE_V6 = '2001:db8:e9::2';
const HOST_V6 = '2001:db8:e9::1';
const TCP_PORT = 7000;
const UDP_PORT = 9999;
const CA_IN_GUEST = '/tmp/egress-ca.pem';

/** The instance's client: one action, one line out (`ok …` or `error <Type> …`). */
const CLIENT_PY = `
import socket, ssl, struct, sys, random
def out(s):
    print(s.replace('\\n', ' ').strip(), flush=True)
def nameserver():
    for line in open('/etc/resolv.conf'):
        if line.startswith('nameserver'):
            return line.split()[1]
def dns(name, qtype, server, proto):
    server = server or nameserver()
    qid = random.randint(0, 65535)
    q = struct.pack('>HHHHHH', qid, 0x0100, 1, 0, 0, 0)
    for label in name.split('.'):
        q += bytes([len(label)]) + label.encode()
    q += b'\\0' + struct.pack('>HH', {'A': 1, 'TXT': 16, 'AAAA': 28}[qtype], 1)
    if proto == 'tcp':
        s = socket.create_connection((server, 53), timeout=3)
        s.sendall(struct.pack('>H', len(q)) + q)
        r = s.recv(4096)[2:]
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(3)
        s.sendto(q, (server, 53))
        r = s.recv(4096)
    flags, an = struct.unpack('>H', r[2:4])[0], struct.unpack('>H', r[6:8])[0]
    out('ok rcode=%d answers=%d' % (flags & 15, an))
def http(addr, port, host, target):
    s = socket.create_connection((addr, int(port)), timeout=5)
    s.sendall(('GET %s HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n' % (target, host)).encode())
    data = b''
    while True:
        chunk = s.recv(4096)
        if not chunk: break
        data += chunk
    text = data.decode(errors='replace')
    out('ok ' + text.split('\\r\\n')[0] + ' | ' + text.split('\\r\\n\\r\\n', 1)[-1])
def https(addr, port, sni, host):
    ctx = ssl.create_default_context(cafile='${CA_IN_GUEST}')
    raw = socket.create_connection((addr, int(port)), timeout=5)
    s = ctx.wrap_socket(raw, server_hostname=sni)
    s.sendall(('GET / HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n' % host).encode())
    data = b''
    while True:
        chunk = s.recv(4096)
        if not chunk: break
        data += chunk
    text = data.decode(errors='replace')
    out('ok ' + text.split('\\r\\n')[0] + ' | ' + text.split('\\r\\n\\r\\n', 1)[-1])
def tcp(addr, port):
    family = socket.AF_INET6 if ':' in addr else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect((addr, int(port)))
    out('ok ' + s.recv(200).decode())
def udp(addr, port, data):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(3):
        s.sendto(data.encode(), (addr, int(port)))
    out('ok sent')
def keepalive(addr, host, wait):
    import time
    s = socket.create_connection((addr, 80), timeout=10)
    req = ('GET / HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' % host).encode()
    s.sendall(req)
    first = s.recv(4096).decode(errors='replace').split('\\r\\n')[0]
    time.sleep(float(wait))
    try:
        s.sendall(req)
        second = s.recv(4096).decode(errors='replace').split('\\r\\n')[0] or 'closed'
    except Exception as e:
        second = type(e).__name__
    out('ok first=%s second=%s' % (first, second))
def resolve(name):
    out('ok ' + socket.gethostbyname(name))
try:
    globals()[sys.argv[1]](*sys.argv[2:])
except Exception as e:
    out('error %s %s' % (type(e).__name__, e))
`;

interface OutsideEvent {
  event: string;
  name?: string;
  type?: string;
  server?: string;
  scheme?: string;
  host?: string;
  url?: string;
  data?: string;
}

let t: TestApp;
let org: TestOrg;
let runtime: GvisorRuntime;
let profileId = '';
let instanceId = '';
let outsideProcess: ChildProcess | undefined;
let linkHost = '';
let linkOutside = '';
let certDir = '';
const events: OutsideEvent[] = [];
const routesAdded: string[] = [];

async function ip(args: string[]): Promise<string> {
  return (await runChecked('ip', args, { timeoutMs: 10_000 })).stdout;
}

/** A /30 in 203.0.113.0/24 no route or address of this host uses. */
async function freeLink(): Promise<number> {
  const taken = (await ip(['-4', 'route', 'show', 'table', 'all'])) + (await ip(['-4', '-o', 'addr']));
  for (let i = 0; i < 64; i++) {
    const k = (process.pid + 7 + i) % 64;
    if (!taken.includes(`203.0.113.${4 * k}/30`) && !taken.includes(`203.0.113.${4 * k + 1}/`)) return k;
  }
  throw new Error('no free test link in 203.0.113.0/24');
}

async function makeCertificates(): Promise<{ ca: string; certs: Record<string, { cert: string; key: string }> }> {
  certDir = mkdtempSync(join(tmpdir(), 'roomkit-egress-ca-'));
  const openssl = (args: string[]) => runChecked('openssl', args, { timeoutMs: 30_000 });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(['req', '-x509', ...ec, '-keyout', join(certDir, 'ca.key'), '-out', join(certDir, 'ca.pem'), '-days', '1', '-subj', '/CN=roomkit egress test CA']);
  const certs: Record<string, { cert: string; key: string }> = {};
  for (const name of ['allowed.test', 'evil.test', 'doh.test']) {
    const base = join(certDir, name);
    await openssl(['req', ...ec, '-keyout', `${base}.key`, '-out', `${base}.csr`, '-subj', `/CN=${name}`]);
    writeFileSync(`${base}.ext`, `subjectAltName=DNS:${name},DNS:*.${name}\n`);
    await openssl(['x509', '-req', '-in', `${base}.csr`, '-CA', join(certDir, 'ca.pem'), '-CAkey', join(certDir, 'ca.key'), '-CAcreateserial', '-out', `${base}.pem`, '-days', '1', '-extfile', `${base}.ext`]);
    certs[name] = { cert: readFileSync(`${base}.pem`, 'utf8'), key: readFileSync(`${base}.key`, 'utf8') };
  }
  return { ca: readFileSync(join(certDir, 'ca.pem'), 'utf8'), certs };
}

async function startOutside(certs: Record<string, { cert: string; key: string }>): Promise<void> {
  const web = [
    { address: ALLOWED, name: 'allowed.test', ...certs['allowed.test']! },
    { address: EVIL, name: 'evil.test', ...certs['evil.test']! },
    { address: DOH, name: 'doh.test', ...certs['doh.test']! },
    { address: OUTSIDE_V6, name: 'evil.test', ...certs['evil.test']! },
  ];
  const config = {
    zone: { 'allowed.test': ALLOWED, 'evil.test': EVIL, 'doh.test': DOH },
    web,
    udp: { address: EVIL, port: UDP_PORT },
    dns: DNS,
    tcpPort: TCP_PORT,
  };
  const script = join(import.meta.dirname, '..', 'support', 'egress-outside.ts');
  const child = spawn('nsenter', [`--net=/var/run/netns/${OUTSIDE}`, process.execPath, script, JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'pipe'] });
  outsideProcess = child;
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the outside did not start: ${stderr}`)), 15_000);
    let buffer = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      buffer += d;
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      for (const line of lines) {
        const event = JSON.parse(line) as OutsideEvent;
        if (event.event === 'listening') {
          clearTimeout(timer);
          resolve();
        } else events.push(event);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the outside exited with ${code}: ${stderr}`));
    });
  });
}

async function makeOutside(): Promise<void> {
  const k = await freeLink();
  linkHost = `203.0.113.${4 * k + 1}`;
  linkOutside = `203.0.113.${4 * k + 2}`;
  await ip(['netns', 'add', OUTSIDE]);
  await ip(['link', 'add', OUTSIDE, 'type', 'veth', 'peer', 'name', PEER]);
  await ip(['link', 'set', PEER, 'netns', OUTSIDE]);
  await ip(['addr', 'add', `${linkHost}/30`, 'dev', OUTSIDE]);
  await ip(['-6', 'addr', 'add', `${HOST_V6}/64`, 'dev', OUTSIDE, 'nodad']);
  await ip(['link', 'set', OUTSIDE, 'up']);
  const inNs = ['-n', OUTSIDE];
  await ip([...inNs, 'link', 'set', PEER, 'name', 'eth0']);
  await ip([...inNs, 'addr', 'add', `${linkOutside}/30`, 'dev', 'eth0']);
  for (const address of SERVICE_ADDRESSES) await ip([...inNs, 'addr', 'add', `${address}/32`, 'dev', 'eth0']);
  await ip([...inNs, '-6', 'addr', 'add', `${OUTSIDE_V6}/64`, 'dev', 'eth0', 'nodad']);
  await ip([...inNs, 'link', 'set', 'eth0', 'up']);
  await ip([...inNs, 'link', 'set', 'lo', 'up']);
  await ip([...inNs, 'route', 'add', 'default', 'via', linkHost]);
  for (const address of SERVICE_ADDRESSES) {
    await ip(['route', 'add', `${address}/32`, 'via', linkOutside]);
    routesAdded.push(`${address}/32`);
  }
}

function guest(...args: string[]): Promise<string> {
  return runtime
    .exec(instanceId, ['python3', '-c', CLIENT_PY, ...args], { as: 'vm', home: '/home/user', timeoutMs: 30_000 })
    .then((r) => r.stdout.trim() || `error (no output) ${r.stderr.trim()}`);
}

/** Connects from the host (the positive controls): what the server said, or the error. */
function hostTcp(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    let said = '';
    socket.setTimeout(3000, () => {
      socket.destroy();
      resolve(`error timed out ${said}`);
    });
    socket.on('data', (d) => (said += d.toString()));
    socket.on('end', () => resolve(`ok ${said.trim()}`));
    socket.on('error', (err) => resolve(`error ${err.message}`));
  });
}

/** The path of the host's own requests (positive controls), told apart from the guest's in the outside's log. */
const CONTROL_PATH = '/control';

/** An HTTP GET from the host with this Host header: `<status> <body>`, or the error. */
function hostHttp(address: string, host: string): Promise<string> {
  return new Promise((resolve) => {
    const req = httpRequest({ host: address, port: 80, path: CONTROL_PATH, headers: { host }, timeout: 3000 }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => (body += d));
      res.on('end', () => resolve(`${res.statusCode} ${body.trim()}`));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (err) => resolve(`error ${err.message}`));
    req.end();
  });
}

const seen = (predicate: (e: OutsideEvent) => boolean) => events.some(predicate);

before(async () => {
  const { ca, certs } = await makeCertificates();
  await makeOutside();
  await startOutside(certs);
  t = await startTestApp({ gvisorPool: POOL, config: { egressDnsServers: DNS } });
  runtime = t.gvisor();
  org = await t.newOrg();
  profileId = await t.createProfile(org, {
    name: 'egress-allowlist',
    memory_mb: 512,
    disk_mb: 256,
    network: { egress: 'allowlist', allow: ['allowed.test', '*.allowed.test', `${ALLOWED}/32:${TCP_PORT}`], deny: ['deny.allowed.test'] },
  });
  const res = await t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/attacks`, headers: org.headers });
  assert.equal(res.statusCode, 201, res.body);
  instanceId = res.json().instance_id;
  await runtime.writeFile(instanceId, CA_IN_GUEST, Buffer.from(ca), { home: '/home/user' });
});

after(async () => {
  const problems: string[] = [];
  const attempt = async (what: string, fn: () => Promise<unknown>) => {
    try {
      await fn();
    } catch (err) {
      problems.push(`${what}: ${(err as Error).message}`);
    }
  };
  if (t) await attempt('close the app', () => t.closeLeavingNothing());
  if (outsideProcess?.pid !== undefined && outsideProcess.exitCode === null) {
    const exited = new Promise((resolve) => outsideProcess?.once('exit', resolve));
    outsideProcess.kill('SIGTERM');
    await exited;
  }
  for (const route of routesAdded) await attempt(`route ${route}`, () => run('ip', ['route', 'del', route], { timeoutMs: 10_000 }));
  await attempt('outside veth', () => run('ip', ['link', 'del', OUTSIDE], { timeoutMs: 10_000 }));
  await attempt('outside namespace', () => run('ip', ['netns', 'del', OUTSIDE], { timeoutMs: 10_000 }));
  if (certDir) rmSync(certDir, { recursive: true, force: true });
  assert.deepEqual(problems, []);
});

describe('an egress allowlist', () => {
  it('lets the allowed name through by HTTP and by HTTPS, resolved by the outside resolver', async () => {
    assert.equal(await guest('resolve', 'allowed.test'), `ok ${ALLOWED}`);
    assert.ok(seen((e) => e.event === 'dns' && e.name === 'allowed.test'), 'the allowed name was asked of the outside resolver');
    assert.match(await guest('http', 'allowed.test', '80', 'allowed.test', '/'), /^ok HTTP\/1\.1 200 OK \| allowed\.test http host=allowed\.test$/);
    assert.match(await guest('https', 'allowed.test', '443', 'allowed.test', 'allowed.test'), /^ok HTTP\/1\.1 200 OK \| allowed\.test https host=allowed\.test$/);
    assert.match(await guest('https', 'www.allowed.test', '443', 'www.allowed.test', 'www.allowed.test'), /^ok HTTP\/1\.1 200 OK \| allowed\.test https/);
  });

  it('answers NXDOMAIN for names it does not allow, and never asks the outside (long labels, TXT, any server, TCP)', async () => {
    const long = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(40)}.evil.test`;
    assert.equal(await guest('resolve', 'evil.test'), 'error gaierror [Errno -2] Name or service not known');
    assert.equal(await guest('dns', long, 'A', '', 'udp'), 'ok rcode=3 answers=0');
    assert.equal(await guest('dns', 'secret-data.evil.test', 'TXT', '', 'udp'), 'ok rcode=3 answers=0');
    // Straight at the outside resolver's address, over UDP and TCP: redirected to ours all the same.
    assert.equal(await guest('dns', 'direct.evil.test', 'A', DNS, 'udp'), 'ok rcode=3 answers=0');
    assert.equal(await guest('dns', 'tcp.evil.test', 'A', DNS, 'tcp'), 'ok rcode=3 answers=0');
    assert.equal(await guest('dns', 'deny.allowed.test', 'A', '', 'udp'), 'ok rcode=3 answers=0');
    // Positive control: an allowed name, asked the same ways, reaches the outside resolver.
    assert.equal(await guest('dns', 'control.allowed.test', 'A', DNS, 'tcp'), 'ok rcode=0 answers=1');
    assert.ok(seen((e) => e.event === 'dns' && e.name === 'control.allowed.test'));
    assert.deepEqual(events.filter((e) => e.event === 'dns' && /evil\.test|deny\.allowed/.test(e.name ?? '')), []);
  });

  it('refuses an IP literal outside an allowed range', async () => {
    assert.match(await hostHttp(EVIL, EVIL), /^200 evil\.test http host=198\.51\.100\.20$/, 'positive control: the host reaches it');
    assert.match(await guest('http', EVIL, '80', EVIL, '/'), /^ok HTTP\/1\.1 403 Forbidden \| roomkit egress: 198\.51\.100\.20 is not allowed \(ip_literal\)$/);
    assert.match(await guest('https', EVIL, '443', EVIL, EVIL), /^error /);
    assert.ok(!seen((e) => e.event === 'request' && e.server === 'evil.test' && e.url !== CONTROL_PATH), 'no request reached evil.test');
  });

  it('dials the SNI\'s name, not the address the guest chose: an allowed SNI with another Host reaches only the allowed server', async () => {
    const fronted = await guest('https', EVIL, '443', 'allowed.test', 'evil.test');
    assert.match(fronted, /^ok HTTP\/1\.1 200 OK \| allowed\.test https host=evil\.test$/);
    assert.match(await guest('http', EVIL, '80', 'evil.test', '/'), /403 Forbidden .*evil\.test is not allowed \(default\)/);
    assert.match(await guest('http', ALLOWED, '80', 'allowed.test', 'http://evil.test/'), /403 Forbidden .*\(host_mismatch\)/);
    assert.ok(!seen((e) => e.event === 'request' && e.server === 'evil.test' && e.url !== CONTROL_PATH), 'no request reached evil.test');
  });

  it('gives DNS over HTTPS nothing: the resolver\'s address with its own name is refused, with an allowed name it reaches the allowed server', async () => {
    assert.match(await hostTcp(DOH, TCP_PORT), /^ok doh\.test tcp$/, 'positive control: the host reaches the DoH stand-in');
    assert.match(await guest('https', DOH, '443', 'doh.test', 'doh.test'), /^error /);
    assert.match(await guest('https', DOH, '443', 'allowed.test', 'doh.test'), /\| allowed\.test https host=doh\.test$/);
    assert.ok(!seen((e) => e.event === 'request' && e.server === 'doh.test'), 'no request reached the DoH stand-in');
  });

  it('reaches an allowed range directly on its port, and nothing else of it', async () => {
    assert.equal(await guest('tcp', ALLOWED, String(TCP_PORT)), 'ok allowed.test tcp');
    assert.match(await hostTcp(EVIL, TCP_PORT), /^ok evil\.test tcp$/, 'positive control');
    assert.match(await guest('tcp', EVIL, String(TCP_PORT)), /^error (TimeoutError|timeout)/);
  });

  it('drops raw UDP and IPv6', async () => {
    const control = createSocket('udp4');
    control.send('from-host', UDP_PORT, EVIL);
    await untilTrue('the host\'s datagram arrives', () => seen((e) => e.event === 'udp' && e.data === 'from-host'), { timeoutMs: 5000 });
    control.close();
    assert.equal(await guest('udp', EVIL, String(UDP_PORT), 'from-guest'), 'ok sent');
    assert.match(await hostTcp(OUTSIDE_V6, TCP_PORT), /^ok evil\.test tcp$/, 'positive control over IPv6');
    assert.match(await guest('tcp', OUTSIDE_V6, String(TCP_PORT)), /^error /);
    await new Promise((r) => setTimeout(r, 1000));
    assert.ok(!seen((e) => e.event === 'udp' && e.data === 'from-guest'), 'the guest\'s datagram never arrived');
  });

  it('records its decisions in the audit trail, with the rule that decided each', async () => {
    const events = await until('egress records', async () => {
      const res = await t.app.inject({ method: 'GET', url: `/api/audit?instance_id=${instanceId}&limit=200`, headers: org.headers });
      const found = (res.json().events as { action: string; decision: string; egress: { name: string | null; rule: string } | null }[]).filter((e) => e.action.startsWith('egress.'));
      return found.some((e) => e.action === 'egress.connect' && e.decision === 'allowed') ? found : undefined;
    }, { timeoutMs: 5000 });
    assert.ok(events.some((e) => e.action === 'egress.dns' && e.decision === 'allowed' && e.egress?.name === 'allowed.test' && e.egress.rule === 'allow allowed.test'));
    assert.ok(events.some((e) => e.action === 'egress.dns' && e.decision === 'denied_egress' && e.egress?.name === 'evil.test' && e.egress.rule === 'default'));
    assert.ok(events.some((e) => e.action === 'egress.connect' && e.decision === 'denied_egress' && e.egress?.rule === 'ip_literal'));
    assert.ok(events.some((e) => e.action === 'egress.connect' && e.decision === 'denied_egress' && e.egress?.rule === 'host_mismatch'));
  });

  it('keeps its policy across a pause and a resume', async () => {
    const room = `/api/profile/${profileId}/room/attacks`;
    const paused = await t.app.inject({ method: 'POST', url: `${room}/pause`, headers: org.headers, payload: {} });
    assert.equal(paused.statusCode, 200, paused.body);
    const resumed = await t.app.inject({ method: 'POST', url: `${room}/resume`, headers: org.headers });
    assert.equal(resumed.statusCode, 200, resumed.body);
    assert.equal(resumed.json().state, 'ready');
    assert.match(await guest('http', 'allowed.test', '80', 'allowed.test', '/'), /^ok HTTP\/1\.1 200 OK \| allowed\.test http/);
    assert.match(await guest('http', EVIL, '80', 'evil.test', '/'), /403 Forbidden .*evil\.test is not allowed \(default\)/);
    assert.equal(await guest('dns', 'after-resume.evil.test', 'A', DNS, 'udp'), 'ok rcode=3 answers=0');
  });

  it('ends connections through the proxy when the policy changes at run time; new ones meet the new policy', async () => {
    // Positive control: without a change, the kept-alive connection serves a second request.
    assert.equal(await guest('keepalive', ALLOWED, 'allowed.test', '1'), 'ok first=HTTP/1.1 200 OK second=HTTP/1.1 200 OK');
    const kept = guest('keepalive', ALLOWED, 'allowed.test', '4');
    await new Promise((r) => setTimeout(r, 2000));
    const put = await t.app.inject({
      method: 'PUT',
      url: `/api/profile/${profileId}/room/attacks/network`,
      headers: org.headers,
      payload: { egress: 'allowlist', allow: ['evil.test'] },
    });
    assert.equal(put.statusCode, 200, put.body);
    assert.match(await kept, /^ok first=HTTP\/1\.1 200 OK second=(closed|ConnectionResetError|BrokenPipeError)$/);
    assert.match(await guest('http', ALLOWED, '80', 'allowed.test', '/'), /403 Forbidden .*allowed\.test is not allowed \(default\)/);
    assert.match(await guest('http', EVIL, '80', 'evil.test', '/'), /^ok HTTP\/1\.1 200 OK \| evil\.test http host=evil\.test$/);
    assert.equal(await guest('resolve', 'evil.test'), `ok ${EVIL}`);
    // Back to the policy the checks above were made with.
    const back = await t.app.inject({
      method: 'PUT',
      url: `/api/profile/${profileId}/room/attacks/network`,
      headers: org.headers,
      payload: { egress: 'none' },
    });
    assert.equal(back.statusCode, 200, back.body);
    assert.match(await guest('http', ALLOWED, '80', 'allowed.test', '/'), /^error /);
    assert.equal((await runtime.exec(instanceId, ['cat', '/etc/resolv.conf'], { as: 'vm', home: '/home/user', timeoutMs: 10_000 })).stdout, '');
  });

  it('counts its decisions in /metrics', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/metrics', headers: org.headers });
    assert.match(res.body, /roomkit_egress_decisions_total\{kind="dns",decision="denied"\} [1-9]/);
    assert.match(res.body, /roomkit_egress_decisions_total\{kind="connect",decision="allowed"\} [1-9]/);
    assert.match(res.body, /roomkit_egress_decisions_total\{kind="connect",decision="denied"\} [1-9]/);
  });
});
