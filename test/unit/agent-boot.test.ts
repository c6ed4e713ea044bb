// The boot's readiness handshake against a stand-in agent on 127.0.0.1: the hello asks
// the agent to check readiness (the VM user, its home); an agent that answers for it
// spares the readiness command, one that reports a failure fails the boot, and one too
// old to know the field leaves the command to run, as before.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { after, describe, it } from 'node:test';
import { bootReady, type Exec } from '../../src/runtimes/agent/boot.ts';
import { encodeFrame, FRAME, FrameDecoder } from '../../src/runtimes/agent/frames.ts';
import { AGENT_PROTOCOL } from '../../src/runtimes/agent/protocol.ts';
import { VM_UID } from '../../src/images/builder.ts';
import { PROFILE_DEFAULTS } from '../../src/core/profile-schema.ts';

const KEY = 'the-key';
const servers: Server[] = [];
const spec = { ...PROFILE_DEFAULTS, home: '/home/user' };
const running = { running: () => true, printed: () => '' };

after(() => {
  for (const server of servers) server.close();
});

/** A stand-in agent answering hello with `extra` in its reply; the requests it saw. */
async function standIn(extra: Record<string, unknown>): Promise<{ port: number; requests: Record<string, unknown>[] }> {
  const requests: Record<string, unknown>[] = [];
  const server = createServer((socket) => {
    const decoder = new FrameDecoder();
    socket.on('data', (chunk: Buffer) => {
      for (const frame of decoder.push(chunk)) {
        if (frame.type !== FRAME.request) continue;
        requests.push(JSON.parse(frame.payload.toString('utf8')) as Record<string, unknown>);
        socket.end(encodeFrame(FRAME.reply, { agent: 'roomkit', protocol: AGENT_PROTOCOL.version, pid: 7, uptime_ms: 1, boot_error: '', ...extra }));
      }
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, requests };
}

/** An exec that records what it was asked to run, answering as the readiness command would. */
function recordingExec(): { exec: Exec; ran: string[][] } {
  const ran: string[][] = [];
  const exec: Exec = async (argv) => {
    ran.push(argv);
    return { code: 0, stdout: `${VM_UID}\n`, stderr: '' } as Awaited<ReturnType<Exec>>;
  };
  return { exec, ran };
}

describe("the boot's readiness", () => {
  it("is the agent's to answer in its hello, which names the VM user and its home: no command runs", async () => {
    const agent = await standIn({ ready: { error: '' } });
    const { exec, ran } = recordingExec();
    let booted = 0;
    await bootReady({ host: '127.0.0.1', port: agent.port, key: KEY }, AbortSignal.timeout(10_000), running, exec, spec, async () => void booted++);
    assert.deepEqual(agent.requests.map((r) => [r.op, r.ready_check]), [['hello', { home: '/home/user', uid: VM_UID, gid: VM_UID }]]);
    assert.deepEqual(ran, []);
    assert.equal(booted, 1);
  });

  it("fails the boot with what the agent found wrong, without a command", async () => {
    const agent = await standIn({ ready: { error: 'cannot enter and write its home /home/user: permission denied' } });
    const { exec, ran } = recordingExec();
    await assert.rejects(
      bootReady({ host: '127.0.0.1', port: agent.port, key: KEY }, AbortSignal.timeout(10_000), running, exec, spec),
      /^Error: readiness check failed: the VM user .* in \/home\/user: cannot enter and write its home \/home\/user: permission denied$/,
    );
    assert.deepEqual(ran, []);
  });

  it('runs the readiness command with an agent whose hello does not answer for it', async () => {
    const agent = await standIn({});
    const { exec, ran } = recordingExec();
    let booted = 0;
    await bootReady({ host: '127.0.0.1', port: agent.port, key: KEY }, AbortSignal.timeout(10_000), running, exec, spec, async () => void booted++);
    assert.equal(ran.length, 1);
    assert.match(ran[0]!.join(' '), /test -w \. && exec id -u/);
    assert.equal(booted, 1);
  });
});
