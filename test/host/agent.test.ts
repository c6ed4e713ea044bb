// The agent inside each instance, the one way into it, attacked from inside: its key
// stays out of the VM user's reach, a wrong key is refused, one instance cannot reach
// another's agent, and an agent killed by guest root comes back while commands keep
// working meanwhile. An agent that stops answering fails each operation saying so; an
// instance whose agent cannot start fails to start, saying why, and leaves nothing.
import { nodeIdOf } from '../../src/host/node-identity.ts';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PROFILE_DEFAULTS } from '../../src/core/profile-schema.ts';
import { DEFAULT_HOST_TASKS_PER_INSTANCE } from '../../src/config.ts';
import { ImageStore } from '../../src/images/builder.ts';
import { createLogger } from '../../src/log.ts';
import { hostDnsServers } from '../../src/network/firewall.ts';
import { AddressPool } from '../../src/network/pool.ts';
import { openStore } from '../../src/store/db.ts';
import { agentCall } from '../../src/runtimes/agent/client.ts';
import { GUEST_AGENT } from '../../src/images/guest-additions.ts';
import { GvisorRuntime } from '../../src/runtimes/gvisor/gvisor-runtime.ts';
import { Runsc } from '../../src/runtimes/gvisor/runsc.ts';
import { type ProvisionStep, RuntimeFeatureUnavailable } from '../../src/runtimes/types.ts';
import { hostObjects, NOTHING } from '../support/host.ts';
import { startTestApp, TEST_IMAGES_DIR, testDataDir, type TestApp, type TestOrg } from '../support/app.ts';

const AGENT_PORT = 905;
/** The agent's server process (anchored, so that a shell whose command line names it does not match). */
const SERVE = `^${GUEST_AGENT} serve`;

let t: TestApp;
let org: TestOrg;
let runtime: GvisorRuntime;
let profileId: string;
let home: string;
const ids: Record<'a' | 'b', string> = { a: '', b: '' };

before(async () => {
  t = await startTestApp({ gvisorPool: '10.243.0.0/25' });
  runtime = t.gvisor();
  org = await t.newOrg();
  // Egress to the internet allowed: instances must still not reach each other.
  profileId = await t.createProfile(org, { name: 'agent', memory_mb: 512, disk_mb: 256, network: { egress: 'internet' } });
  home = (await t.app.inject({ method: 'GET', url: `/api/profiles/${profileId}`, headers: org.headers })).json().home;
  for (const name of ['a', 'b'] as const) {
    const res = await t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/${name}`, headers: org.headers });
    assert.equal(res.statusCode, 201, res.body);
    ids[name] = res.json().instance_id;
  }
});

after(async () => {
  await t.close();
});

/** The instance's record on the host: its address and its agent's key. */
function agentOf(id: string): { guestAddress: string; agentKey: string } {
  const meta = JSON.parse(readFileSync(join(t.dataDir, 'instances', id, 'instance.json'), 'utf8')) as { guestAddress?: string; agentKey?: string };
  assert.ok(meta.guestAddress && meta.agentKey, 'the instance was made without an agent');
  return { guestAddress: meta.guestAddress, agentKey: meta.agentKey };
}

/** A command as the VM user through the API. */
async function sh(id: 'a' | 'b', command: string): Promise<{ output: string; exit_code: number }> {
  const res = await t.app.inject({ method: 'POST', url: `/api/profile/${profileId}/room/${id}/command`, headers: org.headers, payload: { command } });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().result;
}

/** Python inside the instance: connect to ADDRESS:905, optionally send a hello with KEY, print what came back. */
const PROBE = `
import json, socket, struct, sys
try:
    s = socket.create_connection((sys.argv[1], ${AGENT_PORT}), timeout=3)
except Exception as e:
    print("unreachable", type(e).__name__); sys.exit(0)
if len(sys.argv) < 3:
    print("connected"); sys.exit(0)
body = json.dumps({"op": "hello", "key": sys.argv[2]}).encode()
s.sendall(b"Q" + struct.pack(">I", len(body)) + body)
head = s.recv(5)
kind, size = head[:1].decode(), struct.unpack(">I", head[1:5])[0]
payload = b""
while len(payload) < size:
    payload += s.recv(size - len(payload))
print(kind, payload.decode())
`;
const probe = (args: string) => `python3 -c '${PROBE.replaceAll("'", "'\\''")}' ${args}`;

describe('the agent inside an instance', () => {
  it('keeps its key from the VM user: not in any environment, command line or file it can read, while root can read it', async () => {
    const { agentKey } = agentOf(ids.a);
    // A canary in another process's environment (spelled apart in the script, so that
    // only /proc can show it whole) proves the look reads other processes' /proc files.
    const everything =
      'c=seen; c=$c-in-proc; env CANARY=$c sleep 5 & sleep 0.5; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat "$f" 2>/dev/null; echo; done; env; kill $!';
    const asUser = await sh('a', everything);
    assert.match(asUser.output, /CANARY=seen-in-proc/);
    assert.ok(!asUser.output.includes(agentKey), 'the VM user read the agent key');
    assert.doesNotMatch(asUser.output, /ROOMKIT_AGENT_KEY/);
    const file = await sh('a', 'cat /run/roomkit-agent/key; ls /run/roomkit-agent');
    assert.notEqual(file.exit_code, 0);
    assert.ok(!file.output.includes(agentKey), 'the VM user read the key file');
    assert.match(file.output, /Permission denied/);
    // Positive control: guest root finds it where the agent reads it.
    const asRoot = await runtime.exec(ids.a, ['cat', '/run/roomkit-agent/key'], { as: 'root', timeoutMs: 30_000 });
    assert.equal(asRoot.stdout, `${agentKey}\n`);
  });

  it('has dropped CAP_SYS_ADMIN, which its init holds for the boot alone, from every process: the init, the server, root commands, sudo', async () => {
    const SYS_ADMIN = 1n << 21n;
    const masks = (status: string) => [...status.matchAll(/^Cap(Eff|Prm|Bnd):\s+([0-9a-f]+)$/gm)].map((m) => BigInt(`0x${m[2]}`));
    const look = 'for p in 1 $(pgrep -f "^/usr/local/lib/roomkit/agent serve") $(pgrep -f "^python3 /usr/local/lib/roomkit/rootd") self; do grep -E "^Cap(Eff|Prm|Bnd)" /proc/$p/status; done';
    const asRoot = await runtime.exec(ids.a, ['sh', '-c', look], { as: 'root', timeoutMs: 30_000 });
    const viaSudo = await sh('a', `sudo sh -c '${look}'`);
    for (const [who, text] of [['root through the agent', asRoot.stdout], ['sudo', viaSudo.output]] as const) {
      const found = masks(text);
      // Positive control: four processes, three sets each, all read; CAP_KILL (bit 5) is held.
      assert.equal(found.length, 12, `${who}: ${text}`);
      assert.ok(found.every((m) => (m & (1n << 5n)) !== 0n), `${who}: ${text}`);
      assert.ok(found.every((m) => (m & SYS_ADMIN) === 0n), `${who} sees CAP_SYS_ADMIN held: ${text}`);
    }
    // And what it was for: the root service runs in its pids group, which no one can reach.
    const mount = await sh('a', 'sudo mount -t cgroup -o pids x /mnt 2>&1; echo "exit=$?"; sudo cat /proc/$(pgrep -f "^python3 /usr/local/lib/roomkit/rootd")/cgroup 2>&1 | grep pids');
    assert.match(mount.output, /exit=(?!0)/, mount.output);
    assert.match(mount.output, /pids:\/sudo/, mount.output);
  });

  it('refuses a connection with a wrong key, from inside the instance', async () => {
    const { guestAddress } = agentOf(ids.a);
    const wrong = await sh('a', probe(`${guestAddress} not-the-key`));
    assert.equal(wrong.exit_code, 0, wrong.output);
    assert.match(wrong.output, /^F .*"unauthorized"/);
    // Positive control: the host, with the key, is answered.
    const hello = await agentCall({ host: guestAddress, port: AGENT_PORT, key: agentOf(ids.a).agentKey }, { op: 'hello' });
    assert.ok(hello, 'the agent did not answer the host');
  });

  it("cannot be reached from another instance, whose own agent it can reach", async () => {
    const { guestAddress: addressOfB } = agentOf(ids.b);
    const { guestAddress: addressOfA } = agentOf(ids.a);
    const across = await sh('a', probe(addressOfB));
    assert.match(across.output, /^unreachable /, across.output);
    // Positive control: the same probe reaches the instance's own agent.
    const own = await sh('a', probe(addressOfA));
    assert.equal(own.output, 'connected\n');
    // And B's agent is up: the host reaches it.
    await agentCall({ host: addressOfB, port: AGENT_PORT, key: agentOf(ids.b).agentKey }, { op: 'hello' });
  });

  it('is started again when guest root kills it, and commands work meanwhile and after', async () => {
    // The kill comes from the background once this exec has answered, so that it does not cut its own answer.
    const killed = await runtime.exec(ids.b, ['sh', '-c', `pid=$(pgrep -f '${SERVE}' | head -1); echo "$pid"; (sleep 0.3; kill -9 "$pid") >/dev/null 2>&1 &`], {
      as: 'root',
      timeoutMs: 30_000,
    });
    assert.equal(killed.code, 0, killed.stderr);
    const oldPid = Number(killed.stdout.trim());
    assert.ok(oldPid > 1, killed.stdout);
    const endpoint = { host: agentOf(ids.b).guestAddress, port: AGENT_PORT, key: agentOf(ids.b).agentKey };
    // The server that answers is the old one until the kill lands.
    for (let deadline = Date.now() + 5_000; (await agentCall(endpoint, { op: 'hello' }).catch(() => ({ pid: 0 }))).pid === oldPid; ) {
      assert.ok(Date.now() < deadline, 'the agent was not killed');
      await new Promise((r) => setTimeout(r, 20));
    }
    // At once: the client tries a refused connection again while the init starts a new server (100 ms at first).
    const meanwhile = await sh('b', 'echo still-here');
    assert.equal(meanwhile.output, 'still-here\n');
    const hello = await agentCall(endpoint, { op: 'hello' });
    const newPid = Number(hello.pid);
    assert.ok(newPid > 1 && newPid !== oldPid, `agent serve pid ${oldPid} -> ${newPid}`);
    // A command goes through the new agent again: only the agent keeps stdout and stderr apart.
    const outcome = await runtime.runCommand(ids.b, { commandId: 'after-restart', command: 'echo out; echo err >&2', home, env: {}, timeoutMs: 30_000, maxOutputBytes: 1 << 20, trackChanges: false });
    assert.equal(outcome.streams?.stdout.text, 'out\n');
    assert.equal(outcome.streams?.stderr.text, 'err\n');
  });
});

describe('an agent that does not answer', () => {
  it('fails commands, files and terminals with feature_unavailable saying so (nothing else reaches the guest), until it answers again', async () => {
    const { guestAddress, agentKey } = agentOf(ids.a);
    const stopped = await runtime.exec(ids.a, ['sh', '-c', `pid=$(pgrep -f '${SERVE}' | head -1); echo "$pid"; (sleep 0.3; kill -STOP "$pid") >/dev/null 2>&1 &`], { as: 'root', timeoutMs: 30_000 });
    const pid = Number(stopped.stdout.trim());
    assert.ok(pid > 1, stopped.stdout + stopped.stderr);
    await new Promise((r) => setTimeout(r, 1_000));
    try {
      const room = `/api/profile/${profileId}/room/a`;
      const [command, file, terminal] = await Promise.all([
        t.app.inject({ method: 'POST', url: `${room}/command`, headers: org.headers, payload: { command: 'echo never' } }),
        t.app.inject({ method: 'GET', url: `${room}/file/etc/hostname`, headers: org.headers }),
        runtime.openTerminal(ids.a, { terminalId: randomUUID(), user: 'user', home, env: {}, cols: 80, rows: 24 }).then(
          (session) => {
            session.close();
            return undefined;
          },
          (err: unknown) => err,
        ),
      ]);
      for (const res of [command, file]) {
        assert.equal(res.statusCode, 409, res.body);
        assert.equal(res.json().error, 'feature_unavailable');
        assert.match(res.json().message, /agent does not answer .*try again in a moment/);
      }
      assert.ok(terminal instanceof RuntimeFeatureUnavailable, String(terminal));
      assert.match(terminal.message, /agent does not answer/);
      assert.equal((await runtime.health(ids.a)).healthy, false);
    } finally {
      // Woken from outside: the agent is the only way in, and it is stopped.
      const meta = JSON.parse(readFileSync(join(t.dataDir, 'instances', ids.a, 'instance.json'), 'utf8')) as { netns: string };
      const runsc = new Runsc({ root: join(t.dataDir, 'runsc') });
      const woken = await runsc.call(meta.netns, ['exec', '--user=0:0', ids.a, 'kill', '-CONT', String(pid)], { timeoutMs: 30_000 });
      assert.equal(woken.code, 0, woken.stderr);
    }
    // Positive control: the same agent answers again, and so do commands.
    assert.equal((await agentCall({ host: guestAddress, port: AGENT_PORT, key: agentKey }, { op: 'hello' })).pid, pid);
    assert.equal((await sh('a', 'echo back')).output, 'back\n');
  });
});

describe('an instance whose agent cannot start', () => {
  const pool = '10.243.0.128/25';
  let dataDir: string;
  let brokenRoot: string;
  let db: Awaited<ReturnType<typeof openStore>>;
  let broken: GvisorRuntime;
  let leases: AddressPool;

  before(async () => {
    dataDir = testDataDir('roomkit-agent-', pool);
    db = await openStore({ dataDir });
    const log = createLogger('silent');
    const images = new ImageStore({ dir: TEST_IMAGES_DIR, log });
    const image = await images.ensure({ image: PROFILE_DEFAULTS.image, packages: PROFILE_DEFAULTS.packages, user: PROFILE_DEFAULTS.user, home: '/home/user' });
    // A copy of the cached image (hard links: nothing of the original is written) whose agent fails at once.
    brokenRoot = join(dataDir, 'broken-image', 'rootfs');
    mkdirSync(join(dataDir, 'broken-image'));
    execFileSync('cp', ['-al', images.rootfsOf(image.key), brokenRoot]);
    unlinkSync(join(brokenRoot, GUEST_AGENT));
    writeFileSync(join(brokenRoot, GUEST_AGENT), '#!/bin/sh\necho "agent: broken on purpose" >&2\nexit 3\n', { mode: 0o755 });
    const brokenImages = Object.create(images) as ImageStore;
    brokenImages.ensure = async () => ({ ...image, key: 'broken-agent', rootfs: brokenRoot });
    broken = new GvisorRuntime({
      dataDir,
      pool: (leases = new AddressPool(db, pool, nodeIdOf(dataDir))),
      images: brokenImages,
      log,
      dnsServers: hostDnsServers(readFileSync('/etc/resolv.conf', 'utf8')),
      maxHostTasks: DEFAULT_HOST_TASKS_PER_INSTANCE,
    });
    await broken.start();
  });

  after(async () => {
    await broken?.close();
    await db?.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('fails to start, saying what the agent printed and what to do, and leaves nothing behind', async () => {
    const instanceId = randomUUID();
    const steps: ProvisionStep[] = [];
    const started = Date.now();
    await assert.rejects(
      broken.provision({
        instanceId,
        organizationId: 'org',
        profileId: 'profile',
        roomId: 'room',
        spec: { ...PROFILE_DEFAULTS, memory_mb: 256, disk_mb: 256, network: { egress: 'none' }, home: '/home/user' },
        signal: new AbortController().signal,
        onStep: async (step) => void steps.push(step),
        onProgress: () => {},
        log: createLogger('silent'),
      }),
      (err: Error) => {
        assert.match(err.message, /roomkit's agent did not start in the instance/);
        assert.match(err.message, /agent: broken on purpose/);
        assert.match(err.message, /roomkit images prune/);
        return true;
      },
    );
    // It got as far as starting the sandbox, and no further.
    assert.deepEqual(steps, ['network_allocated', 'ftap_created', 'image_generated', 'vm_started']);
    // The sandbox's end is noticed: no waiting out the boot's whole deadline.
    assert.ok(Date.now() - started < 15_000, `took ${Date.now() - started} ms`);
    assert.deepEqual(await hostObjects(dataDir, [instanceId]), NOTHING);
    assert.deepEqual(await broken.list(), []);
    assert.deepEqual(await leases.leasedInstances(), []);
  });
});
