// The agent inside each instance, attacked from inside: its key stays out of the VM
// user's reach, a wrong key is refused, one instance cannot reach another's agent, and
// an agent killed by guest root comes back while commands keep working meanwhile.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { agentCall } from '../../src/runtimes/agent/client.ts';
import { GUEST_AGENT } from '../../src/images/guest-additions.ts';
import { CAPABILITIES } from '../../src/runtimes/gvisor/bundle.ts';
import type { GvisorRuntime } from '../../src/runtimes/gvisor/gvisor-runtime.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

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
  t = await startTestApp({ gvisorPool: '10.243.0.0/24', config: { guestAgent: 'on' } });
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
    // Through runsc exec (explicit capabilities), so the kill does not cut its own answer.
    const killAgent = () =>
      runtime.exec(ids.b, ['sh', '-c', `pid=$(pgrep -f '${SERVE}' | head -1); echo "$pid"; kill -9 "$pid"`], {
        as: 'root',
        caps: CAPABILITIES,
        timeoutMs: 30_000,
      });
    const killed = await killAgent();
    assert.equal(killed.code, 0, killed.stderr);
    const oldPid = Number(killed.stdout.trim());
    assert.ok(oldPid > 1, killed.stdout);
    // At once: answered, through the agent if it is back already, else through runsc exec.
    const meanwhile = await sh('b', 'echo still-here');
    assert.equal(meanwhile.output, 'still-here\n');
    // The init starts a new server within its back-off (100 ms at first).
    const endpoint = { host: agentOf(ids.b).guestAddress, port: AGENT_PORT, key: agentOf(ids.b).agentKey };
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        await agentCall(endpoint, { op: 'hello' });
        break;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const newPid = Number((await runtime.exec(ids.b, ['pgrep', '-f', SERVE], { as: 'root', caps: CAPABILITIES, timeoutMs: 30_000 })).stdout.trim());
    assert.ok(newPid > 1 && newPid !== oldPid, `agent serve pid ${oldPid} -> ${newPid}`);
    // A command goes through the new agent again: only the agent keeps stdout and stderr apart.
    const outcome = await runtime.runCommand(ids.b, { commandId: 'after-restart', command: 'echo out; echo err >&2', home, env: {}, timeoutMs: 30_000, maxOutputBytes: 1 << 20, trackChanges: false });
    assert.equal(outcome.streams?.stdout.text, 'out\n');
    assert.equal(outcome.streams?.stderr.text, 'err\n');
  });
});
