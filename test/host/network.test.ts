// The network fence of gVisor instances, tested end to end from inside real sandboxes.
// Over 400 lines: one set-up (the outside-world namespaces and the instances) serves every
// check of the fence, which keeps this file's run short.
//
// Every address a check sends traffic to is on this machine: the host's own addresses,
// the instances, and "outside world" hosts this file makes itself as network
// namespaces behind veth pairs:
// - pub:  an address in 203.0.113.0/24 (TEST-NET-3), standing for a public host;
// - priv: an address in 172.31.255.0/24, standing for a host on a private network;
// - meta: 169.254.169.254 (the cloud metadata address). Only traffic from this file's
//   address pool is routed to it (a policy rule), so the host's own route to a real
//   metadata service is left alone, and an instance's packet, were the firewall to let
//   it through, would still reach this namespace and not leave the machine.
// Before any check runs, `ip route get` confirms each of these goes out of our veths.
//
// Every negative check has a positive control: the same listener answers the host (or
// a test namespace), so a check cannot pass because a listener is down. The firewall drops rather
// than rejects, so a blocked connection must time out; a refusal would mean the packet
// got through to somewhere without a listener.
//
// Over 400 lines because the checks share the outside-world namespaces and instances
// this file builds once; split, each part would build them again.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { run, runChecked } from '../../src/host/run.ts';
import { egressInterfaces, tableName } from '../../src/network/firewall.ts';
import { listHostInterfaces, listNetns, networkNames } from '../../src/network/netns.ts';
import type { GvisorRuntime } from '../../src/runtimes/gvisor/gvisor-runtime.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { META_RULE_PREF, metaTable, NETWORK_TEST_PREFIX, networkTestTag } from '../support/network-leftovers.ts';

const POOL = '10.216.0.0/24';
const PID = process.pid;
const TAG = networkTestTag(PID);
const LISTEN_PORT = 8080;
const INSTANCE_PORT = 8000;
const METADATA = '169.254.169.254';
const HOST_PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
/** Policy routing table and rule preference for the metadata namespace, unique to this process. */
const META_TABLE = metaTable(PID);
const META_PREF = META_RULE_PREF;

/** A listener that prints, and answers with, the address of each peer. */
const LISTENER_PY = `
import socket, sys
addr, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6 if ':' in addr else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(16)
print('listening', flush=True)
while True:
    c, peer = s.accept()
    print('peer', peer[0], flush=True)
    try:
        c.sendall(('peer %s\\n' % peer[0]).encode())
    except OSError:
        pass
    c.close()
`;

/** Connects once with a 2 s timeout; prints `connected` (and what the listener said) or the error. */
const CLIENT_PY = `
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
except Exception as e:
    print('error', type(e).__name__, e)
else:
    try:
        said = s.recv(200).decode().strip()
    except Exception:
        said = ''
    print(('connected ' + said).strip())
    s.close()
`;

interface TestHost {
  /** Namespace, and host end of its veth (same name; different name spaces). */
  name: string;
  peer: string;
  /** Address of the host end of the veth. */
  hostAddress: string;
  /** Address the listener binds. */
  address: string;
  listener?: ChildProcess;
  log: string[];
}

let t: TestApp;
let org: TestOrg;
let runtime: GvisorRuntime;
let tag = '';
let internetProfile = '';
let noneProfile = '';
let inet = '';
let none = '';
let pub: TestHost;
let priv: TestHost;
let meta: TestHost;
let metaRule = false;
let hostV4: Server | undefined;
let hostV6: Server | undefined;
let hostV4Port = 0;
let hostV6Port = 0;
let hostMainAddress = '';
let hostGlobalV6 = '';
let pubLinkLocal = '';

const addresses: Record<string, { gateway: string; guest: string; hostIf: string; netns: string }> = {};
const linkLocal: Record<string, { host: string; guest: string }> = {};

// ---- host plumbing --------------------------------------------------------------------

async function ip(args: string[]): Promise<string> {
  return (await runChecked('ip', args, { timeoutMs: 10_000 })).stdout;
}

function testHost(short: string, hostAddress: string, address: string): TestHost {
  return { name: `${NETWORK_TEST_PREFIX}${TAG}-${short}`, peer: `rkp-${TAG}-${short}`, hostAddress, address, log: [] };
}

/** A namespace behind a veth: host end `hostAddress/30`, namespace `linkAddress/30`, default route back. */
async function createTestHost(host: TestHost, linkAddress: string, extraAddress?: string): Promise<void> {
  await ip(['netns', 'add', host.name]);
  await ip(['link', 'add', host.name, 'type', 'veth', 'peer', 'name', host.peer]);
  await ip(['link', 'set', host.peer, 'netns', host.name]);
  await ip(['addr', 'add', `${host.hostAddress}/30`, 'dev', host.name]);
  await ip(['link', 'set', host.name, 'up']);
  const inNs = ['-n', host.name];
  await ip([...inNs, 'link', 'set', host.peer, 'name', 'eth0']);
  await ip([...inNs, 'addr', 'add', `${linkAddress}/30`, 'dev', 'eth0']);
  if (extraAddress) await ip([...inNs, 'addr', 'add', `${extraAddress}/32`, 'dev', 'eth0']);
  await ip([...inNs, 'link', 'set', 'eth0', 'up']);
  await ip([...inNs, 'link', 'set', 'lo', 'up']);
  await ip([...inNs, 'route', 'add', 'default', 'via', host.hostAddress]);
}

async function startListener(host: TestHost): Promise<void> {
  const child = spawn('nsenter', [`--net=/var/run/netns/${host.name}`, HOST_PYTHON, '-u', '-c', LISTENER_PY, host.address, String(LISTEN_PORT)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  host.listener = child;
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`listener in ${host.name} did not start: ${stderr}`)), 10_000);
    let buffer = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      buffer += d;
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      for (const line of lines) {
        host.log.push(line);
        if (line === 'listening') {
          clearTimeout(timer);
          resolve();
        }
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`listener in ${host.name} exited with ${code}: ${stderr}`));
    });
  });
}

/** The interface `ip route get` picks for `args` (e.g. an address, `from`, `iif`). */
async function routeDevice(args: string[]): Promise<string> {
  const out = await ip(['route', 'get', ...args]);
  return /\bdev (\S+)/.exec(out)?.[1] ?? `(none: ${out.trim()})`;
}

/** A /30 slot free in all three test ranges, starting from one picked by the pid. */
async function freeSlot(): Promise<number> {
  const routes = (await ip(['-4', 'route', 'show', 'table', 'all'])) + (await ip(['-4', '-o', 'addr']));
  for (let i = 0; i < 64; i++) {
    const k = (PID + i) % 64;
    const taken = [`203.0.113.${4 * k}/30`, `172.31.255.${4 * k}/30`, `172.31.254.${4 * k}/30`].some((net) => routes.includes(net));
    if (!taken) return k;
  }
  throw new Error('no free test address slot');
}

async function linkLocalOf(args: string[]): Promise<string> {
  const deadline = Date.now() + 15_000;
  let out = '';
  while (Date.now() < deadline) {
    out = await ip(args);
    const match = /inet6 (fe80::[0-9a-f:]+)\/64/.exec(out);
    if (match && !/tentative/.test(out)) return match[1] ?? '';
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`no usable link-local address: ${out}`);
}

/**
 * The instance's IPv6 link-local address, as the guest sees it: gVisor's network stack
 * holds its addresses itself (the host's view of the namespace's eth0 has none left).
 */
async function guestLinkLocal(instanceId: string): Promise<string> {
  const deadline = Date.now() + 15_000;
  let out = '';
  while (Date.now() < deadline) {
    out = (await sh(instanceId, 'ip -6 -o addr show dev eth0')).stdout;
    const match = /inet6 (fe80::[0-9a-f:]+)\/64/.exec(out);
    if (match) return match[1] ?? '';
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`no link-local address inside the instance: ${out}`);
}

/** Connects from the host (as the host sees it: the positive controls). */
function hostConnect(host: string, port: number, localAddress?: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, ...(localAddress ? { localAddress } : {}) });
    let said = '';
    let connected = false;
    socket.setTimeout(2000, () => {
      socket.destroy();
      resolve(connected ? `connected ${said}`.trim() : 'error timed out');
    });
    socket.on('connect', () => {
      connected = true;
      // Listeners that say nothing (the host's own) close at once; python ones answer.
      setTimeout(() => {
        socket.destroy();
        resolve(`connected ${said}`.trim());
      }, 300);
    });
    socket.on('data', (d) => (said += d.toString()));
    socket.on('error', (err) => resolve(connected ? `connected ${said}`.trim() : `error ${err.message}`));
  });
}

// ---- instances ------------------------------------------------------------------------

const roomUrl = (profile: string, name: string) => `/api/profile/${profile}/room/${name}`;

async function createProfile(name: string, egress: 'internet' | 'none'): Promise<string> {
  return await t.createProfile(org, { name, memory_mb: 512, disk_mb: 256, network: { egress } });
}

async function createInstance(profile: string, name: string): Promise<string> {
  const res = await t.app.inject({ method: 'POST', url: roomUrl(profile, name), headers: org.headers });
  assert.equal(res.statusCode, 201, res.body);
  assert.equal(res.json().state, 'ready');
  return res.json().instance_id;
}

function sh(instanceId: string, script: string) {
  return runtime.exec(instanceId, ['sh', '-c', script], { as: 'vm', home: '/home/user', timeoutMs: 30_000 });
}

/** Connects from inside the instance as its VM user: `connected ...` or `error <Type> <message>`. */
async function connectFrom(instanceId: string, host: string, port: number): Promise<string> {
  const res = await runtime.exec(instanceId, ['python3', '-c', CLIENT_PY, host, String(port)], {
    as: 'vm',
    home: '/home/user',
    timeoutMs: 30_000,
  });
  assert.equal(res.code, 0, res.stderr);
  return res.stdout.trim();
}

/** Connects from one of the test namespaces (not through any roomkit rule). */
async function nsConnect(netns: string, host: string, port: number): Promise<string> {
  const res = await runChecked('nsenter', [`--net=/var/run/netns/${netns}`, HOST_PYTHON, '-c', CLIENT_PY, host, String(port)], { timeoutMs: 30_000 });
  return res.stdout.trim();
}

/** Blocked means dropped: the connection attempt times out (no refusal, no answer). */
function assertDropped(result: string, what: string): void {
  assert.match(result, /^error (TimeoutError|timeout) timed out$/, `${what}: expected a silent drop, got: ${result}`);
}

async function leaseOf(instanceId: string) {
  const row = await t.services.db.selectFrom('network_leases').select('slot').where('instance_id', '=', instanceId).executeTakeFirstOrThrow();
  const names = networkNames(tag, instanceId);
  return { gateway: `10.216.0.${row.slot * 4 + 1}`, guest: `10.216.0.${row.slot * 4 + 2}`, hostIf: names.hostIf, netns: names.netns };
}

// ---- set-up and tear-down -------------------------------------------------------------

before(async () => {
  t = await startTestApp({ gvisorPool: POOL });
  runtime = t.gvisor();
  tag = runtime.tag;
  org = await t.newOrg();
  internetProfile = await createProfile('net-internet', 'internet');
  noneProfile = await createProfile('net-none', 'none');

  // The outside world.
  const k = await freeSlot();
  pub = testHost('pub', `203.0.113.${4 * k + 1}`, `203.0.113.${4 * k + 2}`);
  priv = testHost('priv', `172.31.255.${4 * k + 1}`, `172.31.255.${4 * k + 2}`);
  meta = testHost('meta', `172.31.254.${4 * k + 1}`, METADATA);
  await createTestHost(pub, pub.address);
  await createTestHost(priv, priv.address);
  await createTestHost(meta, `172.31.254.${4 * k + 2}`, METADATA);
  await ip(['route', 'add', `${METADATA}/32`, 'via', `172.31.254.${4 * k + 2}`, 'dev', meta.name, 'table', String(META_TABLE)]);
  await ip(['rule', 'add', 'pref', String(META_PREF), 'from', POOL, 'to', `${METADATA}/32`, 'lookup', String(META_TABLE)]);
  metaRule = true;
  for (const host of [pub, priv, meta]) await startListener(host);
  pubLinkLocal = await linkLocalOf(['-6', '-o', 'addr', 'show', 'dev', pub.name, 'scope', 'link']);

  // Listeners on the host itself: every IPv4 address, and every IPv6 one.
  hostV4 = createServer((s) => s.end());
  await new Promise<void>((resolve) => hostV4?.listen(0, '0.0.0.0', resolve));
  hostV4Port = (hostV4.address() as { port: number }).port;
  hostV6 = createServer((s) => s.end());
  await new Promise<void>((resolve) => hostV6?.listen({ port: 0, host: '::', ipv6Only: true }, resolve));
  hostV6Port = (hostV6.address() as { port: number }).port;
  // The main interface: the one the default route goes out of.
  const mainIf = /\bdev (\S+)/.exec(await ip(['-4', 'route', 'show', 'default']))?.[1] ?? 'eth0';
  const v4 = await ip(['-4', '-o', 'addr', 'show', 'dev', mainIf, 'scope', 'global']);
  hostMainAddress = /\binet (\d+\.\d+\.\d+\.\d+)\//.exec(v4)?.[1] ?? '';
  assert.ok(hostMainAddress, `no main IPv4 address in: ${v4}`);
  const mainIf6 = /\bdev (\S+)/.exec(await ip(['-6', 'route', 'show', 'default']))?.[1];
  const v6 = mainIf6 ? await ip(['-6', '-o', 'addr', 'show', 'dev', mainIf6, 'scope', 'global']) : '';
  hostGlobalV6 = /inet6 ([0-9a-f:]+)\/\d+/.exec(v6)?.[1] ?? '';

  inet = await createInstance(internetProfile, 'net-internet');
  none = await createInstance(noneProfile, 'net-none');
  for (const id of [inet, none]) {
    addresses[id] = await leaseOf(id);
    // A listener in each instance, on IPv4 and IPv6.
    const started = await sh(id, `nohup python3 -m http.server --bind :: ${INSTANCE_PORT} >/dev/null 2>&1 & sleep 1; echo ok`);
    assert.equal(started.stdout, 'ok\n', started.stderr);
    const a = addresses[id];
    assert.ok(a);
    linkLocal[id] = {
      host: await linkLocalOf(['-6', '-o', 'addr', 'show', 'dev', a.hostIf, 'scope', 'link']),
      guest: await guestLinkLocal(id),
    };
  }

  // Nothing below may leave the machine: each test address goes out of our own veths,
  // for the host and for traffic forwarded from the instances.
  for (const a of [addresses[inet], addresses[none]]) {
    assert.ok(a);
    for (const [target, dev] of [
      [pub.address, pub.name],
      [priv.address, priv.name],
      [METADATA, meta.name],
    ] as const) {
      assert.equal(await routeDevice([target, 'from', a.guest, 'iif', a.hostIf]), dev, `route from ${a.guest} to ${target}`);
    }
    assert.equal(await routeDevice([METADATA, 'from', a.gateway]), meta.name);
  }
  assert.equal(await routeDevice([pub.address]), pub.name);
  assert.equal(await routeDevice([priv.address]), priv.name);
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
  if (t) {
    for (const [profile, name] of [
      [internetProfile, 'net-internet'],
      [noneProfile, 'net-none'],
    ] as const) {
      if (!profile) continue;
      await attempt(`delete ${name}`, async () => {
        const res = await t.app.inject({ method: 'DELETE', url: roomUrl(profile, name), headers: org.headers });
        if (res.statusCode !== 200 && res.statusCode !== 404) throw new Error(`${res.statusCode} ${res.body}`);
      });
    }
    await attempt('close the app', () => t.close());
  }
  for (const server of [hostV4, hostV6]) {
    if (server?.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  for (const host of [pub, priv, meta]) {
    const child = host?.listener;
    if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      process.kill(child.pid, 'SIGKILL');
      await exited;
    }
  }
  if (metaRule) {
    await attempt('delete the metadata rule', () =>
      runChecked('ip', ['rule', 'del', 'pref', String(META_PREF), 'from', POOL, 'to', `${METADATA}/32`, 'lookup', String(META_TABLE)], { timeoutMs: 10_000 }),
    );
  }
  await run('ip', ['route', 'flush', 'table', String(META_TABLE)], { timeoutMs: 10_000 });
  for (const short of ['pub', 'priv', 'meta']) {
    const name = `${NETWORK_TEST_PREFIX}${TAG}-${short}`;
    await run('ip', ['link', 'del', name], { timeoutMs: 10_000 });
    if (existsSync(`/var/run/netns/${name}`)) await attempt(`delete netns ${name}`, () => runChecked('ip', ['netns', 'del', name], { timeoutMs: 10_000 }));
  }

  // Nothing of ours is left: namespaces, veths, rules, routes, and the instances' own.
  assert.deepEqual(problems, []);
  const netns = existsSync('/var/run/netns') ? readdirSync('/var/run/netns') : [];
  assert.deepEqual(netns.filter((n) => n.startsWith(`${NETWORK_TEST_PREFIX}${TAG}-`)), []);
  const links = await ip(['-o', 'link', 'show']);
  const ours = [...links.matchAll(/^\d+:\s+([^:@\s]+)/gm)].map((m) => m[1] ?? '').filter((n) => n.startsWith(`${NETWORK_TEST_PREFIX}${TAG}-`) || n.startsWith(`rkp-${TAG}-`));
  assert.deepEqual(ours, []);
  assert.doesNotMatch(await ip(['rule', 'show']), new RegExp(`lookup ${META_TABLE}\\b`));
  assert.equal((await ip(['route', 'show', 'table', String(META_TABLE)])).trim(), '');
  if (tag) {
    assert.deepEqual(listNetns(tag), []);
    assert.deepEqual(await listHostInterfaces(tag), []);
    const tables = await run('nft', ['list', 'tables'], { timeoutMs: 10_000 });
    assert.doesNotMatch(tables.stdout, new RegExp(`\\b${tableName(tag)}\\b`));
  }
});

// ---- the checks -----------------------------------------------------------------------

describe('positive controls: every listener the checks target answers', () => {
  it('the test hosts answer the host', async () => {
    assert.equal(await hostConnect(pub.address, LISTEN_PORT), `connected peer ${pub.hostAddress}`);
    assert.equal(await hostConnect(priv.address, LISTEN_PORT), `connected peer ${priv.hostAddress}`);
  });

  it('the metadata stand-in answers traffic from the pool (the host bound to a gateway address)', async () => {
    // (roomkit's masquerade rule also matches the host's own traffic from a pool
    // address, so the peer it reports is the host's end of the metadata veth.)
    const gateway = addresses[inet]?.gateway ?? '';
    const res = await hostConnect(METADATA, LISTEN_PORT, gateway);
    assert.ok([`connected peer ${gateway}`, `connected peer ${meta.hostAddress}`].includes(res), res);
  });

  it('the host listener answers on the main address and the instances\' gateways', async () => {
    assert.equal(await hostConnect(hostMainAddress, hostV4Port), 'connected');
    for (const id of [inet, none]) assert.equal(await hostConnect(addresses[id]?.gateway ?? '', hostV4Port), 'connected');
  });

  it('the host listener answers another namespace over a veth, on IPv4 and on IPv6 link-local', async () => {
    // The same path an instance would take (a veth into the host, neighbour discovery
    // included), from the public test host, whose veth no roomkit rule matches.
    assert.equal(await nsConnect(pub.name, hostMainAddress, hostV4Port), 'connected');
    assert.equal(await nsConnect(pub.name, `${pubLinkLocal}%eth0`, hostV6Port), 'connected');
  });

  it('the host listener answers on IPv6, on the veths\' link-local addresses and the global one', async () => {
    for (const id of [inet, none]) {
      const a = addresses[id];
      assert.equal(await hostConnect(`${linkLocal[id]?.host}%${a?.hostIf}`, hostV6Port), 'connected');
    }
    if (hostGlobalV6) assert.equal(await hostConnect(hostGlobalV6, hostV6Port), 'connected');
  });

  it('each instance\'s listener answers the host over IPv4, and the instance itself', async () => {
    // Not the host over IPv6: the firewall's input chain drops the instance's neighbour
    // advertisements (conntrack does not track them), so no IPv6 packet flows either way.
    for (const id of [inet, none]) {
      const a = addresses[id];
      assert.match(await hostConnect(a?.guest ?? '', INSTANCE_PORT), /^connected/);
      assert.match(await connectFrom(id, '127.0.0.1', INSTANCE_PORT), /^connected/);
      // The scoped link-local syntax works in the sandbox (used by the IPv6 check).
      assert.match(await connectFrom(id, `${linkLocal[id]?.guest}%eth0`, INSTANCE_PORT), /^connected/);
    }
  });
});

describe('an instance with internet egress', () => {
  it('reaches a public host, masqueraded behind the host\'s address', async () => {
    const before = pub.log.length;
    const res = await connectFrom(inet, pub.address, LISTEN_PORT);
    assert.equal(res, `connected peer ${pub.hostAddress}`);
    // The listener's own log: it saw the host, never the instance's pool address.
    const seen = pub.log.slice(before);
    assert.deepEqual(seen, [`peer ${pub.hostAddress}`]);
    assert.ok(!pub.log.some((l) => l.includes(addresses[inet]?.guest ?? '?')));
  });

  it('does not reach a private-network host', async () => {
    assertDropped(await connectFrom(inet, priv.address, LISTEN_PORT), 'private host');
  });

  it('does not reach the metadata address 169.254.169.254', async () => {
    const before = meta.log.length;
    assertDropped(await connectFrom(inet, METADATA, LISTEN_PORT), 'metadata');
    assertDropped(await connectFrom(inet, METADATA, 80), 'metadata port 80');
    assert.deepEqual(meta.log.slice(before), []);
  });

  it('has the host\'s nameservers in resolv.conf', async () => {
    const expected = [...readFileSync('/etc/resolv.conf', 'utf8').matchAll(/^\s*nameserver\s+(\d+\.\d+\.\d+\.\d+)\s*$/gm)]
      .map((m) => m[1] ?? '')
      .filter((ns) => !ns.startsWith('127.'));
    assert.ok(expected.length > 0, 'the host has no non-loopback IPv4 nameserver to compare with');
    const res = await sh(inet, 'cat /etc/resolv.conf');
    const got = [...res.stdout.matchAll(/^\s*nameserver\s+(\S+)\s*$/gm)].map((m) => m[1]);
    assert.deepEqual(got, expected);
  });

  it('is in the egress set; the other is not', async () => {
    const set = await egressInterfaces(tag);
    assert.ok(set.includes(addresses[inet]?.hostIf ?? '?'));
    assert.ok(!set.includes(addresses[none]?.hostIf ?? '?'));
  });
});

describe('an instance without egress', () => {
  it('does not reach the public host', async () => {
    const before = pub.log.length;
    assertDropped(await connectFrom(none, pub.address, LISTEN_PORT), 'public host');
    assert.deepEqual(pub.log.slice(before), []);
  });

  it('does not reach the private host or the metadata address', async () => {
    assertDropped(await connectFrom(none, priv.address, LISTEN_PORT), 'private host');
    assertDropped(await connectFrom(none, METADATA, LISTEN_PORT), 'metadata');
  });

  it('has no nameserver in resolv.conf', async () => {
    const res = await sh(none, 'cat /etc/resolv.conf');
    assert.equal(res.code, 0, res.stderr);
    assert.doesNotMatch(res.stdout, /nameserver/);
  });
});

describe('an instance of either kind', () => {
  for (const kind of ['internet', 'none'] as const) {
    const self = () => (kind === 'internet' ? inet : none);
    const other = () => (kind === 'internet' ? none : inet);

    it(`(${kind}) runs on gVisor's own network stack, which took its address off the namespace's eth0`, async () => {
      const id = self();
      // The sandbox's host process, as `runsc create` named it: runsc passes it its global flags.
      const pid = readFileSync(join(t.dataDir, 'instances', id, 'sandbox.pid'), 'utf8').trim();
      const flags = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      assert.equal(flags[0], 'runsc-sandbox', flags.join(' '));
      assert.ok(flags.includes('--network=sandbox'), flags.join(' '));
      // The host's view of the namespace: eth0 is up without the guest's address (the
      // sandbox answers on it), the host end keeps the gateway.
      const eth0 = await ip(['-n', addresses[id]?.netns ?? '', '-4', 'addr', 'show', 'dev', 'eth0']);
      assert.doesNotMatch(eth0, new RegExp(`inet ${addresses[id]?.guest.replaceAll('.', '\\.')}/`), eth0);
      assert.match(await sh(id, 'cat /proc/net/dev').then((r) => r.stdout), /eth0:/);
      assert.match(await hostConnect(addresses[id]?.guest ?? '', 905), /^connected/);
    });

    it(`(${kind}) does not reach the host on its main address, its own gateway or the other's gateway`, async () => {
      assertDropped(await connectFrom(self(), hostMainAddress, hostV4Port), 'host main address');
      assertDropped(await connectFrom(self(), addresses[self()]?.gateway ?? '', hostV4Port), 'own gateway');
      assertDropped(await connectFrom(self(), addresses[other()]?.gateway ?? '', hostV4Port), 'other gateway');
    });

    it(`(${kind}) does not reach the other instance`, async () => {
      assertDropped(await connectFrom(self(), addresses[other()]?.guest ?? '', INSTANCE_PORT), 'other instance');
    });

    it(`(${kind}) does not reach the host over IPv6 link-local, and has no IPv6 route out`, async () => {
      const id = self();
      assertDropped(await connectFrom(id, `${linkLocal[id]?.host}%eth0`, hostV6Port), 'host link-local');
      // The guest's own routes: gVisor's network stack keeps them (the host's view of the
      // namespace has none of them).
      const routes = await sh(id, 'ip -6 route show');
      assert.equal(routes.code, 0, routes.stderr);
      assert.doesNotMatch(routes.stdout, /^default/m, routes.stdout);
      if (hostGlobalV6) {
        assert.match(
          await connectFrom(id, hostGlobalV6, hostV6Port),
          /^error OSError \[Errno (101|113)\] (Network is unreachable|No route to host)$/,
        );
      }
    });
  }
});
