// The host's side of the agent channel against a stand-in agent on 127.0.0.1: a refused
// connection is tried again while the agent's server restarts and given up after that,
// the connections to an agent whose sandbox ended are ended, a failure frame keeps its
// kind, and an agent that cannot be reached (or an instance without one) fails the
// operation as the contract's RuntimeFeatureUnavailable, saying so: there is no other
// way into an instance.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { after, describe, it } from 'node:test';
import { throughAgent } from '../../src/runtimes/agent/access.ts';
import { agentCall, AgentFailure, AgentUnavailable, endAgentConnections } from '../../src/runtimes/agent/client.ts';
import { encodeFrame, FRAME, FrameDecoder } from '../../src/runtimes/agent/frames.ts';
import { AGENT_PROTOCOL } from '../../src/runtimes/agent/protocol.ts';
import { RuntimeFeatureUnavailable } from '../../src/runtimes/types.ts';

const KEY = 'the-key';
const servers: Server[] = [];

/** A stand-in agent: answers each request with what `answer` makes of it. */
function standIn(port: number, answer: (request: Record<string, unknown>) => Buffer): Promise<Server> {
  const server = createServer((socket) => {
    const decoder = new FrameDecoder();
    socket.on('data', (chunk: Buffer) => {
      for (const frame of decoder.push(chunk)) {
        if (frame.type === FRAME.request) socket.end(answer(JSON.parse(frame.payload.toString('utf8')) as Record<string, unknown>));
      }
    });
  });
  servers.push(server);
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const probe = await standIn(0, () => Buffer.alloc(0));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

const hello = (request: Record<string, unknown>) =>
  request.key === KEY
    ? encodeFrame(FRAME.reply, { agent: 'roomkit', protocol: AGENT_PROTOCOL.version, pid: 7, uptime_ms: 1, boot_error: '' })
    : encodeFrame(FRAME.fail, { kind: 'unauthorized', message: 'wrong key' });

after(() => {
  for (const server of servers) server.close();
});

describe("the agent's client", () => {
  it("tries a refused connection again while the agent's server restarts", async () => {
    const port = await freePort();
    setTimeout(() => void standIn(port, hello), 400);
    const started = performance.now();
    const reply = await agentCall({ host: '127.0.0.1', port, key: KEY }, { op: 'hello' });
    assert.equal(reply.pid, 7);
    // Positive control: the first tries were refused, so the answer waited for the server.
    assert.ok(performance.now() - started >= 350, `answered after ${performance.now() - started} ms`);
  });

  it('gives up on a connection refused for longer than a restart takes, as AgentUnavailable', async () => {
    const port = await freePort();
    const started = performance.now();
    await assert.rejects(agentCall({ host: '127.0.0.1', port, key: KEY }, { op: 'hello' }), (err: Error) => err instanceof AgentUnavailable && /ECONNREFUSED/.test(err.message));
    const took = performance.now() - started;
    assert.ok(took >= 2_500 && took < 10_000, `gave up after ${took} ms`);
  });

  it("ends the open connections to an agent whose sandbox ended, which would otherwise wait forever", async () => {
    // An agent that takes the connection and never answers, as one whose network stack
    // went with its sandbox: nothing closes the connection from its side.
    const silent = createServer(() => {});
    servers.push(silent);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.2', resolve));
    const { port } = silent.address() as { port: number };
    const pending = agentCall({ host: '127.0.0.2', port, key: KEY }, { op: 'hello' });
    // Until it is connected (and the request sent) there is nothing to end.
    const connections = () => new Promise<number>((resolve) => silent.getConnections((_e, n) => resolve(n)));
    for (let waited = 0; (await connections()) === 0 && waited < 2000; waited += 10) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 50));
    const started = performance.now();
    assert.equal(endAgentConnections('127.0.0.2'), 1);
    await assert.rejects(pending, (err: Error) => err instanceof AgentUnavailable && /reset: its sandbox ended/.test(err.message));
    assert.ok(performance.now() - started < 1000);
    assert.equal(endAgentConnections('127.0.0.2'), 0);
  });

  it('answers a failure frame as an AgentFailure of its kind', async () => {
    const server = await standIn(0, hello);
    const { port } = server.address() as { port: number };
    await assert.rejects(agentCall({ host: '127.0.0.1', port, key: 'not-the-key' }, { op: 'hello' }), (err: Error) => err instanceof AgentFailure && err.kind === 'unauthorized');
  });
});

describe('an operation through the agent, the one way in', () => {
  it("fails with RuntimeFeatureUnavailable saying the agent does not answer, and tells who asks; the agent's own failures pass through", async () => {
    const port = await freePort();
    const heard: string[] = [];
    await assert.rejects(
      throughAgent({ host: '127.0.0.1', port, key: KEY }, (endpoint) => agentCall(endpoint, { op: 'hello' }), (err) => heard.push(err.message)),
      (err: Error) => err instanceof RuntimeFeatureUnavailable && /agent does not answer .*try again in a moment/.test(err.message),
    );
    assert.equal(heard.length, 1);
    const server = await standIn(0, hello);
    const open = { host: '127.0.0.1', port: (server.address() as { port: number }).port, key: 'not-the-key' };
    await assert.rejects(throughAgent(open, (endpoint) => agentCall(endpoint, { op: 'hello' })), AgentFailure);
    // Positive control: with the key, the same call goes through.
    assert.equal((await throughAgent({ ...open, key: KEY }, (endpoint) => agentCall(endpoint, { op: 'hello' }))).protocol, AGENT_PROTOCOL.version);
  });

  it('fails at once for an instance without an agent, saying to create it again', async () => {
    let ran = false;
    await assert.rejects(
      throughAgent(undefined, async () => {
        ran = true;
      }),
      (err: Error) => err instanceof RuntimeFeatureUnavailable && /without roomkit's agent.*create it again/.test(err.message),
    );
    assert.equal(ran, false);
  });
});
