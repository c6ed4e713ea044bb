// Three roomkit nodes on one PostgreSQL store, each a `roomkit serve` process in a
// network namespace of its own with its own address on a bridge (so a forwarded request
// crosses a real network path), with real gVisor instances: creates spread over the
// nodes; a command, a streamed command, a file and a terminal's handshake sent to a node
// that does not run the instance are answered by the one that does; one room created at
// once through every node gets one instance; a node killed with SIGKILL is declared lost
// and its instances `lost` (410 instance_lost), its rooms are created again elsewhere,
// the other nodes' instances answer throughout, and the killed node, started again,
// removes what it held. The store listens on the bridge only for this test
// (bench/scratch-postgres.ts). Everything is removed at the end; names follow
// test/support/network-leftovers.ts, so a killed run's are reaped by the next.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as connectTcp } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { startScratchPostgres, type ScratchPostgres } from '../../bench/scratch-postgres.ts';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { run } from '../../src/host/run.ts';
import { hostTag, listNetns } from '../../src/network/netns.ts';
import { TEST_IMAGES_DIR } from '../support/app.ts';
import { networkTestTag } from '../support/network-leftovers.ts';
import { until, untilTrue } from '../support/until.ts';

const TAG = `rkt-${networkTestTag(process.pid)}`;
const BRIDGE = `${TAG}-br`;
const SUBNET = '10.243.0';
const SECRET = 'three-nodes-secret-0123456789abcdef0123';
const OPERATOR = 'three-nodes-operator-0123456789abcdef01';
const NAMES = ['a', 'b', 'c'] as const;
type Name = (typeof NAMES)[number];

interface Node {
  name: Name;
  dataDir: string;
  base: string;
  id: string;
  child: ChildProcess;
  log: string;
}

async function sh(args: string[]): Promise<void> {
  const result = await run(args[0]!, args.slice(1), { timeoutMs: 30_000 });
  if (result.code !== 0) throw new Error(`${args.join(' ')}: ${result.stderr}`);
}

describe('three nodes on one store, each in its own network namespace', () => {
  let postgres: ScratchPostgres;
  const nodes = new Map<Name, Node>();
  const dataDirs = new Map<Name, string>();
  let headers: Record<string, string> = {};
  let profileId = '';

  const address = (name: Name) => `${SUBNET}.${11 + NAMES.indexOf(name)}`;

  async function startNode(name: Name): Promise<Node> {
    const dataDir = dataDirs.get(name) ?? mkdtempSync(join(tmpdir(), `roomkit-node-${name}-`));
    dataDirs.set(name, dataDir);
    const base = `http://${address(name)}:8080`;
    // nsenter joins the namespace's network only: the host's mounts (cgroups, /sys) stay as they are.
    const child = spawn('nsenter', [`--net=/run/netns/${TAG}-n${name}`, '--', process.execPath, join(PACKAGE_ROOT, 'src/cli/main.ts'), 'serve'], {
      env: {
        ...process.env,
        ROOMKIT_DATA_DIR: dataDir,
        ROOMKIT_HOST: address(name),
        ROOMKIT_PORT: '8080',
        ROOMKIT_NODE_URL: base,
        ROOMKIT_DATABASE_URL: postgres.url,
        ROOMKIT_NODE_SECRET: SECRET,
        ROOMKIT_OPERATOR_TOKEN: OPERATOR,
        ROOMKIT_NODE_HEARTBEAT_MS: '500',
        ROOMKIT_NODE_LOST_AFTER_MS: '3000',
        ROOMKIT_RUNTIME: 'gvisor',
        ROOMKIT_NETWORK_POOL: `10.244.${NAMES.indexOf(name)}.0/24`,
        ROOMKIT_NETWORK_SLOTS: '0',
        ROOMKIT_IMAGES_DIR: TEST_IMAGES_DIR,
        ROOMKIT_ON_SHUTDOWN: 'stop',
        ROOMKIT_LOG_LEVEL: 'warn',
        ROOMKIT_QUOTA_INSTANCES: '100',
        ROOMKIT_QUOTA_VCPUS: '100',
        ROOMKIT_QUOTA_MEMORY_MB: '65536',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const node: Node = { name, dataDir, base, id: '', child, log: '' };
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (node.log += chunk));
    await until(`node ${name} listening`, async () => (node.log.includes('roomkit listening on') ? true : undefined), { timeoutMs: 120_000 });
    const answer = await fetch(`${base}/healthz`);
    node.id = answer.headers.get('x-roomkit-node') ?? '';
    nodes.set(name, node);
    return node;
  }

  async function stopNode(node: Node, signal: NodeJS.Signals): Promise<void> {
    if (node.child.exitCode === null && node.child.signalCode === null) {
      const exited = once(node.child, 'exit');
      node.child.kill(signal);
      await exited;
    }
  }

  const api = async (name: Name, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${nodes.get(name)!.base}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await res.text();
    return { status: res.status, json: text === '' ? undefined : JSON.parse(text), node: res.headers.get('x-roomkit-node') ?? '' };
  };
  const room = (r: string) => `/api/profile/${profileId}/room/${r}`;
  const nameOf = (id: string) => [...nodes.values()].find((n) => n.id === id)?.name;

  before(async () => {
    await sh(['ip', 'link', 'add', BRIDGE, 'type', 'bridge']);
    await sh(['ip', 'addr', 'add', `${SUBNET}.1/24`, 'dev', BRIDGE]);
    await sh(['ip', 'link', 'set', BRIDGE, 'up']);
    for (const name of NAMES) {
      const netns = `${TAG}-n${name}`;
      await sh(['ip', 'netns', 'add', netns]);
      await sh(['ip', 'link', 'add', `${TAG}-v${name}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns]);
      await sh(['ip', 'link', 'set', `${TAG}-v${name}`, 'master', BRIDGE, 'up']);
      await sh(['ip', '-n', netns, 'addr', 'add', `${address(name)}/24`, 'dev', 'eth0']);
      await sh(['ip', '-n', netns, 'link', 'set', 'eth0', 'up']);
      await sh(['ip', '-n', netns, 'link', 'set', 'lo', 'up']);
      await sh(['ip', '-n', netns, 'route', 'add', 'default', 'via', `${SUBNET}.1`]);
    }
    postgres = await startScratchPostgres({ host: `${SUBNET}.1`, clients: `${SUBNET}.0/24` });
    for (const name of NAMES) {
      const node = await startNode(name);
      if (name === 'a') {
        const key = (await run('cat', [join(node.dataDir, 'initial-api-key')], { timeoutMs: 5_000 })).stdout.trim();
        headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      }
    }
    const profile = await api('a', 'POST', '/api/profiles', { name: 'three-nodes', memory_mb: 256, network: { egress: 'none' } });
    assert.equal(profile.status, 201, JSON.stringify(profile.json));
    profileId = profile.json.profile_id;
  });

  after(async () => {
    for (const node of nodes.values()) await stopNode(node, 'SIGTERM').catch(() => {});
    await postgres?.stop().catch(() => {});
    for (const dir of dataDirs.values()) rmSync(dir, { recursive: true, force: true });
    for (const name of NAMES) await run('ip', ['netns', 'delete', `${TAG}-n${name}`], { timeoutMs: 10_000 });
    await run('ip', ['link', 'delete', BRIDGE], { timeoutMs: 10_000 });
  });

  it('lists three active nodes from any of them', async () => {
    for (const name of NAMES) {
      const res = await fetch(`${nodes.get(name)!.base}/operator/nodes`, { headers: { authorization: `Bearer ${OPERATOR}` } });
      const listed = (await res.json()) as { nodes: { node_id: string; state: string; url: string }[] };
      assert.deepEqual(listed.nodes.filter((n) => n.state === 'active').map((n) => n.url).sort(), NAMES.map((n) => `http://${address(n)}:8080`));
    }
  });

  const placed = new Map<string, Name>();

  it('spreads creates over the nodes, and one room created through every node at once gets one instance', async () => {
    const made = await Promise.all(Array.from({ length: 9 }, (_, i) => api(NAMES[i % 3]!, 'POST', room(`r${i}`), {})));
    for (const [i, m] of made.entries()) {
      assert.equal(m.status, 201, JSON.stringify(m.json));
      placed.set(`r${i}`, nameOf(m.node)!);
    }
    const used = new Set(placed.values());
    assert.ok(used.size >= 2, `9 creates all went to node ${[...used][0]}`);
    const raced = await Promise.all(NAMES.flatMap((n) => [api(n, 'POST', room('raced'), {}), api(n, 'POST', room('raced'), {})]));
    const ids = new Set(raced.map((r) => r.json?.instance_id));
    assert.equal(ids.size, 1, JSON.stringify(raced.map((r) => [r.status, r.json?.error])));
    const listed = await api('b', 'GET', `/api/instances?profile_id=${profileId}&state=ready&limit=100`);
    const rooms = listed.json.instances.map((i: { room_id: string }) => i.room_id).filter((r: string) => r === 'raced');
    assert.equal(rooms.length, 1);
  });

  it('answers a command, a stream, a file and a terminal handshake sent to a node that does not run the instance', async () => {
    const [r, owner] = [...placed.entries()][0]!;
    const other = NAMES.find((n) => n !== owner)!;
    const command = await api(other, 'POST', `${room(r)}/command`, { command: 'echo crossed > note.txt; hostname' });
    assert.equal(command.status, 200, JSON.stringify(command.json));
    assert.equal(nameOf(command.node), owner);
    assert.deepEqual(command.json.result.files_changed.map((f: { path: string }) => f.path), ['/home/user/note.txt']);
    const stream = await fetch(`${nodes.get(other)!.base}${room(r)}/command`, { method: 'POST', headers: { ...headers, accept: 'text/event-stream' }, body: JSON.stringify({ command: 'echo streamed' }) });
    assert.match(await stream.text(), /event: result\ndata: .*"output":"streamed\\n"/);
    const file = await api(other, 'GET', `${room(r)}/file/note.txt`);
    assert.equal(file.status, 200, JSON.stringify(file.json));
    assert.equal(nameOf(file.node), owner);
    const { hostname, port } = new URL(nodes.get(other)!.base);
    const socket = connectTcp(Number(port), hostname);
    await once(socket, 'connect');
    socket.write(`GET ${room(r)}/terminal HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: ${headers.authorization}\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`);
    let raw = '';
    socket.setEncoding('utf8').on('data', (d: string) => (raw += d));
    await untilTrue('the handshake answered', async () => raw.includes('\r\n\r\n'));
    socket.destroy();
    assert.match(raw, /^HTTP\/1\.1 101 /);
    assert.equal(nameOf(/x-roomkit-node: (\S+)/i.exec(raw)?.[1] ?? ''), owner);
  });

  it('declares a killed node lost: its instances answer 410, its rooms are made again elsewhere, the others answer throughout; started again, it removes what it held', async () => {
    const victim = [...new Set(placed.values())].find((n) => n !== 'a') ?? 'b';
    const victimNode = nodes.get(victim)!;
    const survivor = NAMES.find((n) => n !== victim && n !== 'a') ?? 'a';
    const victimRooms = [...placed.entries()].filter(([, n]) => n === victim).map(([r]) => r);
    const otherRooms = [...placed.entries()].filter(([, n]) => n !== victim).map(([r]) => r);
    assert.ok(victimRooms.length > 0, 'positive control: the node to kill runs an instance');
    assert.ok(listNetns(hostTag(victimNode.dataDir)).length > 0);

    await stopNode(victimNode, 'SIGKILL');
    const killedAt = Date.now();
    // Meanwhile the other nodes' instances answer, through any live node.
    const errors: string[] = [];
    let answered = 0;
    const traffic = (async () => {
      while (Date.now() - killedAt < 6_000) {
        for (const r of otherRooms) {
          const res = await api(r.length % 2 === 0 ? 'a' : survivor, 'POST', `${room(r)}/command`, { command: 'true' });
          if (res.status >= 500) errors.push(`${r}: ${res.status} ${res.json?.error}`);
          else answered++;
        }
      }
    })();
    await until('the killed node\'s instance recorded lost', async () => ((await api('a', 'GET', room(victimRooms[0]!))).json.state === 'lost' ? true : undefined), { timeoutMs: 30_000 });
    const lostAfterMs = Date.now() - killedAt;
    await traffic;
    assert.deepEqual(errors, [], 'no 5xx for the instances of live nodes');
    assert.ok(answered > 0);
    assert.ok(lostAfterMs < 15_000, `lost after ${lostAfterMs} ms`);
    const gone = await api(survivor, 'POST', `${room(victimRooms[0]!)}/command`, { command: 'true' });
    assert.equal(gone.status, 410);
    assert.equal(gone.json.error, 'instance_lost');
    const again = await api('a', 'POST', room(victimRooms[0]!), {});
    assert.equal(again.status, 201, JSON.stringify(again.json));
    assert.notEqual(nameOf(again.node), victim);

    // Started again on its data directory, the node removes its lost instances' machines and networks.
    await startNode(victim);
    await untilTrue('the restarted node removed what its lost instances held', async () => listNetns(hostTag(victimNode.dataDir)).length === 0, { timeoutMs: 60_000 });
    const lostRow = await api('a', 'GET', room(victimRooms[0]!));
    assert.notEqual(lostRow.json.state, 'lost', 'the room has its new instance');
  });
});
