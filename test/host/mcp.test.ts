// roomkit as an MCP server, driven by the MCP SDK's own client: at /mcp over Streamable
// HTTP on a listening server, and as `roomkit mcp` on stdio (the real command, talking to
// that server over HTTP). One real gVisor instance, made and deleted through MCP tools,
// serves the whole file.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type CallToolResult, ToolSchema } from '@modelcontextprotocol/sdk/types.js';
import pkg from '../../package.json' with { type: 'json' };
import { toolDefinitions } from '../../src/adapters/tools/definitions.ts';
import { toMcpTool } from '../../src/adapters/tools/formats.ts';
import { toolLimits } from '../../src/adapters/tools/local-backend.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { BIN, collect, run } from '../support/cli.ts';
import { untilTrue } from '../support/until.ts';

let t: TestApp;
let a: TestOrg;
let b: TestOrg;
let base: string;
let client: Client;
let instanceId: string;

const ROOM = 'mcp';
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a3a4e05a0000000049454e44ae426082',
  'hex',
);

async function connectHttp(apiKey: string): Promise<Client> {
  const c = new Client({ name: 'roomkit-test', version: '1.0.0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${apiKey}` } } }));
  return c;
}

async function callWith(c: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await c.callTool({ name, arguments: args })) as CallToolResult;
}
const call = (name: string, args: Record<string, unknown>) => callWith(client, name, args);

const textOf = (result: CallToolResult) =>
  result.content
    .filter((c) => c.type === 'text')
    .map((c) => (c as { text: string }).text)
    .join('\n');

/** Starts `roomkit mcp` as a desktop client would, and connects the SDK's client to it. */
async function connectStdio(env: Record<string, string>) {
  const inherited = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined && !e[0].startsWith('ROOMKIT_')));
  const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, 'mcp'], env: { ...inherited, ...env }, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const c = new Client({ name: 'roomkit-test-stdio', version: '1.0.0' });
  await c.connect(transport);
  return { client: c, transport, stderr: () => stderr };
}

/** Polls `check` every 50 ms for up to 10 s. */
const until = (check: () => boolean, what: string) => untilTrue(what, check, { timeoutMs: 10_000, everyMs: 50 });

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

before(async () => {
  t = await startTestApp({ gvisorPool: '10.225.0.0/24' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  a = await t.newOrg();
  b = await t.newOrg();
  base = await t.app.listen({ host: '127.0.0.1', port: 0 });
  client = await connectHttp(a.apiKey);
  // The file's one instance, made through the tool under test.
  const created = await call('create_instance', { room: ROOM });
  assert.equal(created.isError, false, textOf(created));
  const instance = await t.app.inject({ method: 'GET', url: `/api/profile/${a.defaultProfileId}/room/${ROOM}`, headers: a.headers });
  assert.equal(instance.json().state, 'ready');
  instanceId = instance.json().instance_id;
});

after(async () => {
  await client?.close();
  await t.closeLeavingNothing();
});

describe('/mcp over Streamable HTTP', () => {
  it('initializes as roomkit with tools and instructions for the model', () => {
    assert.deepEqual(client.getServerVersion(), { name: 'roomkit', version: pkg.version });
    assert.ok(client.getServerCapabilities()?.tools);
    assert.match(client.getInstructions() ?? '', /create_instance/);
  });

  it('lists the tool layer\'s definitions: the instance tools, then the room tools with room and profile arguments', async () => {
    const { tools } = await client.listTools();
    const expected = toolDefinitions({ kind: 'organization' }, toolLimits(t.services.config)).map(toMcpTool);
    // (Through unknown: deepEqual would narrow the SDK's Tool type to ours.)
    assert.deepEqual(tools as unknown, expected);
    assert.deepEqual(
      tools.map((tool) => tool.name),
      ['create_instance', 'get_instance', 'delete_instance', 'run_command', 'run_code', 'command_output', 'kill_command', 'revert_command', 'read_file', 'write_file', 'list_files', 'delete_file'],
    );
    for (const tool of tools) {
      assert.deepEqual(ToolSchema.parse(tool), tool, `${tool.name}: every key is MCP's`);
      assert.deepEqual(tool.inputSchema.required?.slice(0, 1), ['room'], tool.name);
      assert.ok(tool.inputSchema.properties?.profile, tool.name);
    }
    // The room tools take what GET .../tools gives them, plus the room.
    const room = await t.app.inject({ method: 'GET', url: `/api/profile/${a.defaultProfileId}/room/${ROOM}/tools?format=mcp`, headers: a.headers });
    for (const roomTool of room.json().tools as { name: string; inputSchema: { properties: object }; annotations: object }[]) {
      const tool = tools.find((x) => x.name === roomTool.name);
      assert.ok(tool, roomTool.name);
      assert.deepEqual(Object.keys(tool.inputSchema.properties ?? {}), ['room', 'profile', ...Object.keys(roomTool.inputSchema.properties)]);
      assert.deepEqual(tool.annotations, roomTool.annotations);
    }
  });

  it('create_instance is safe to call again: the room keeps its machine', async () => {
    const again = await call('create_instance', { room: ROOM, profile: 'default' });
    assert.equal(again.isError, false);
    assert.match(textOf(again), new RegExp(`^Room "${ROOM}" already had a machine\\.\\nMachine ${instanceId} \\(profile "default"\\) is ready\\.`));
    assert.match(textOf(again), /Home and working directory: \/home\/user\./);
  });

  it('get_instance shows the machine, with the profile by name or by id', async () => {
    for (const profile of [undefined, 'default', a.defaultProfileId]) {
      const shown = await call('get_instance', { room: ROOM, ...(profile ? { profile } : {}) });
      assert.equal(shown.isError, false, textOf(shown));
      assert.match(textOf(shown), new RegExp(`^Machine ${instanceId} \\(profile "default"\\) is ready\\.\\nImage: debian:bookworm\\. User: user`));
      assert.match(textOf(shown), /Commands time out after 120 s\. Network: internet access\./);
    }
  });

  it('run_command answers output, exit code and changed files whose URLs serve them without a key', async () => {
    const result = await call('run_command', { room: ROOM, command: 'echo hello | tee greeting.txt' });
    assert.equal(result.isError, false);
    const text = textOf(result);
    assert.match(text, /^Exit code: 0\nOutput:\nhello\nFiles changed \(1\):\ncreated \/home\/user\/greeting\.txt \(6 bytes, text\/plain\) /);
    const url = / (http:\S+)$/.exec(text)?.[1];
    assert.equal(url, `${base}/vm/${instanceId}/file/home/user/greeting.txt`);
    const fetched = await fetch(url!);
    assert.equal(fetched.status, 200);
    assert.equal(await fetched.text(), 'hello\n');

    // The same result as fields, as the REST tools/call gives it in `structured`.
    const structured = result.structuredContent as { result: { exit_code: number; files_changed: { path: string }[] }; instance_id: string };
    assert.equal(structured.instance_id, instanceId);
    assert.equal(structured.result.exit_code, 0);
    assert.deepEqual(structured.result.files_changed.map((f) => f.path), ['/home/user/greeting.txt']);

    const failed = await call('run_command', { room: ROOM, command: 'ls /nonexistent' });
    assert.equal(failed.isError, true);
    assert.match(textOf(failed), /^Exit code: 2 \(failed\)\nOutput:\nls: cannot access '\/nonexistent': No such file or directory/);
    assert.equal((failed.structuredContent as { result: { exit_code: number } }).result.exit_code, 2);
  });

  it('write_file, read_file (text and image), list_files and delete_file', async () => {
    const written = await call('write_file', { room: ROOM, path: 'work/data.csv', content: 'a,b\n1,2\n' });
    assert.match(textOf(written), /^Created \/home\/user\/work\/data\.csv \(8 bytes\)\. URL: http:/);
    assert.deepEqual((await call('read_file', { room: ROOM, path: 'work/data.csv' })).content, [{ type: 'text', text: 'a,b\n1,2\n' }]);

    await call('write_file', { room: ROOM, path: 'work/dot.png', content: PNG.toString('base64'), encoding: 'base64' });
    const image = await call('read_file', { room: ROOM, path: '/home/user/work/dot.png' });
    assert.equal(image.isError, false);
    const block = image.content[1] as { type: string; data: string; mimeType: string };
    assert.equal(block.type, 'image');
    assert.equal(block.mimeType, 'image/png');
    assert.deepEqual(Buffer.from(block.data, 'base64'), PNG);

    const listing = await call('list_files', { room: ROOM, path: 'work' });
    assert.match(textOf(listing), /^\/home\/user\/work \(2 entries\):\nfile +8 0?644 \S+ data\.csv\nfile +\d+ 0?644 \S+ dot\.png$/);
    const rest = await t.app.inject({
      method: 'POST',
      url: `/api/profile/${a.defaultProfileId}/room/${ROOM}/tools/call`,
      headers: a.headers,
      payload: { name: 'list_files', arguments: { path: 'work' } },
    });
    assert.deepEqual(listing.structuredContent, rest.json().structured_content, 'the same fields as the REST tools/call');

    assert.equal(textOf(await call('delete_file', { room: ROOM, path: 'work/dot.png' })), 'Deleted /home/user/work/dot.png.');
    const gone = await call('read_file', { room: ROOM, path: 'work/dot.png' });
    assert.equal(gone.isError, true);
    assert.match(textOf(gone), /^Error file_not_found: /);
  });

  it('tells the model what went wrong and what to do: no machine, no profile, arguments that do not fit', async () => {
    const empty = await call('run_command', { room: 'no-machine-here', command: 'true' });
    assert.equal(empty.isError, true);
    assert.match(textOf(empty), /^Error instance_not_found: .*\nRoom "no-machine-here" has no machine: create it with create_instance\.$/);

    const profile = await call('list_files', { room: ROOM, profile: 'gpu' });
    assert.equal(profile.isError, true);
    assert.match(textOf(profile), /^Error profile_not_found: no profile named "gpu".*\nLeave profile out to use "default"/);

    const bad = await call('run_command', { room: '../etc', command: 42 });
    assert.equal(bad.isError, true);
    assert.match(textOf(bad), /^Error invalid_arguments: run_command: .*\(and 1 more problem/);
    assert.equal((bad.structuredContent as { error: string }).error, 'invalid_arguments');
    assert.equal((empty.structuredContent as { error: string }).error, 'instance_not_found');
  });

  it('tells a client that asked for progress that a long command is still running', async () => {
    const heard: { progress: number; message?: string | undefined }[] = [];
    const result = (await client.callTool({ name: 'run_command', arguments: { room: ROOM, command: 'sleep 6; echo done' } }, undefined, {
      onprogress: (p) => heard.push(p),
    })) as CallToolResult;
    assert.match(textOf(result), /Output:\ndone\n/);
    assert.ok(heard.length >= 1, 'no progress notification in 6 s');
    assert.match(heard[0]!.message ?? '', /^run_command has run for \d+ s$/);
    assert.ok(heard[0]!.progress >= 4);
  });

  it('answers an unknown tool with a protocol error', async () => {
    await assert.rejects(call('launch_rocket', { room: ROOM }), (err: Error & { code?: number }) => {
      assert.equal(err.code, -32602);
      assert.match(err.message, /no tool "launch_rocket"/);
      return true;
    });
  });
});

describe('/mcp authentication and organization scoping', () => {
  const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
  const post = (headers: Record<string, string>) =>
    fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      body: JSON.stringify(initialize),
    });

  it('answers 401 with the Error body and WWW-Authenticate without a key or with a wrong one', async () => {
    const missing = await post({});
    assert.equal(missing.status, 401);
    assert.equal(missing.headers.get('www-authenticate'), 'Bearer realm="roomkit"');
    assert.equal(((await missing.json()) as { error: string }).error, 'missing_api_key');
    const wrong = await post({ authorization: 'Bearer rk_live_0123456789abcdef0123456789abcdef' });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.headers.get('www-authenticate'), 'Bearer realm="roomkit", error="invalid_token"');
    const body = (await wrong.json()) as { error: string; message: string };
    assert.equal(body.error, 'invalid_api_key');
    assert.equal(typeof body.message, 'string');
    await assert.rejects(connectHttp('rk_test_0123456789abcdef0123456789abcdef'));
  });

  it('answers an authenticated initialize, and 405 to GET (no session stream in stateless mode)', async () => {
    const ok = await post({ authorization: `Bearer ${a.apiKey}` });
    assert.equal(ok.status, 200);
    assert.match(await ok.text(), /"serverInfo":\{"name":"roomkit"/);
    assert.match(ok.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
    assert.equal(ok.headers.get('x-content-type-options'), 'nosniff');
    const get = await fetch(`${base}/mcp`, { headers: { authorization: `Bearer ${a.apiKey}`, accept: 'text/event-stream' } });
    assert.equal(get.status, 405);
    assert.equal(get.headers.get('allow'), 'POST');
    assert.equal(((await get.json()) as { error: string }).error, 'method_not_allowed');
  });

  it('hides another organization\'s profiles and rooms: the same answer as for ones that do not exist', async () => {
    const other = await connectHttp(b.apiKey);
    try {
      const anonymise = (text: string) => text.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, 'ID');
      for (const [tool, args] of [
        ['run_command', { command: 'id' }],
        ['read_file', { path: 'greeting.txt' }],
        ['get_instance', {}],
        ['delete_instance', {}],
        ['create_instance', {}],
      ] as const) {
        const foreign = await callWith(other, tool, { room: ROOM, profile: a.defaultProfileId, ...args });
        const missing = await callWith(other, tool, { room: ROOM, profile: randomUUID(), ...args });
        assert.equal(foreign.isError, true, tool);
        assert.match(textOf(foreign), /^Error profile_not_found: /, tool);
        assert.equal(anonymise(textOf(foreign)), anonymise(textOf(missing)), tool);
      }
      // B's own default profile has no room "mcp": A's machine is not reachable by name either.
      const own = await callWith(other, 'read_file', { room: ROOM, path: 'greeting.txt' });
      assert.match(textOf(own), /^Error instance_not_found: /);
    } finally {
      await other.close();
    }
    const still = await call('get_instance', { room: ROOM });
    assert.match(textOf(still), /is ready\./);
  });
});

describe('roomkit mcp (stdio)', () => {
  it('refuses to start without an API key, saying how to get one', async () => {
    const result = await run(['mcp'], { script: BIN, env: { ROOMKIT_API_KEY: '', ROOMKIT_URL: base } });
    assert.equal(result.code, 2);
    assert.equal(result.stdout, '', 'stdout is the protocol channel');
    assert.match(result.stderr, /roomkit mcp needs an API key: set ROOMKIT_API_KEY/);
  });

  it('answers requests already sent when the client closes its stdin at once, then exits', async () => {
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ROOMKIT_')));
    const child = spawn(process.execPath, [BIN, 'mcp'], { env: { ...inherited, ROOMKIT_URL: base, ROOMKIT_API_KEY: a.apiKey }, stdio: ['pipe', 'pipe', 'pipe'] });
    const messages = [
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'pipe', version: '1' } } },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_command', arguments: { room: ROOM, command: 'sleep 1; echo piped' } } },
    ];
    child.stdin.end(messages.map((m) => `${JSON.stringify(m)}\n`).join(''));
    const result = await collect(child);
    assert.equal(result.code, 0, result.stderr);
    const answers = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as { id: number; result: { content?: { text: string }[] } });
    assert.deepEqual(answers.map((r) => r.id), [1, 2]);
    assert.match(answers[1]!.result.content![0]!.text, /^Exit code: 0\nOutput:\npiped\n/);
  });

  it('serves the same tools over the HTTP API and exits when the client closes it', async () => {
    const stdio = await connectStdio({ ROOMKIT_URL: base, ROOMKIT_API_KEY: a.apiKey });
    const pid = stdio.transport.pid;
    assert.ok(pid);
    try {
      await until(() => stdio.stderr().includes('connected to'), 'the connection check');
      assert.match(stdio.stderr(), new RegExp(`roomkit mcp: connected to ${base}; profiles: default`));
      assert.deepEqual(stdio.client.getServerVersion(), { name: 'roomkit', version: pkg.version });
      assert.deepEqual((await stdio.client.listTools()).tools, (await client.listTools()).tools);

      const c = (name: string, args: Record<string, unknown>) => callWith(stdio.client, name, args);
      const shown = await c('get_instance', { room: ROOM });
      assert.match(textOf(shown), new RegExp(`^Machine ${instanceId} \\(profile "default"\\) is ready\\.`));
      const again = await c('create_instance', { room: ROOM });
      assert.match(textOf(again), new RegExp(`^Room "${ROOM}" has a machine\\.\\nMachine ${instanceId} `));

      const ran = await c('run_command', { room: ROOM, command: 'echo stdio > from-stdio.txt && cat from-stdio.txt' });
      assert.equal(ran.isError, false);
      assert.match(textOf(ran), new RegExp(`^Exit code: 0\\nOutput:\\nstdio\\nFiles changed \\(1\\):\\ncreated /home/user/from-stdio\\.txt \\(6 bytes, text/plain\\) ${base}/vm/${instanceId}/file/home/user/from-stdio\\.txt$`));
      const failed = await c('run_command', { room: ROOM, command: 'exit 5' });
      assert.equal(failed.isError, true);
      assert.match(textOf(failed), /^Exit code: 5 \(failed\)/);

      await c('write_file', { room: ROOM, path: 'stdio/dot.png', content: PNG.toString('base64'), encoding: 'base64' });
      const image = await c('read_file', { room: ROOM, path: 'stdio/dot.png' });
      assert.deepEqual(Buffer.from((image.content[1] as { data: string }).data, 'base64'), PNG);
      assert.deepEqual((await c('read_file', { room: ROOM, path: 'from-stdio.txt' })).content, [{ type: 'text', text: 'stdio\n' }]);
      assert.match(textOf(await c('list_files', { room: ROOM, path: 'stdio' })), /^\/home\/user\/stdio \(1 entries\):\nfile +\d+ 0?644 \S+ dot\.png$/);
      assert.equal(textOf(await c('delete_file', { room: ROOM, path: 'stdio/dot.png' })), 'Deleted /home/user/stdio/dot.png.');

      // The API's errors come through the SDK with their codes, and the same hints.
      const missing = await c('read_file', { room: ROOM, path: 'stdio/dot.png' });
      assert.equal(missing.isError, true);
      assert.match(textOf(missing), /^Error file_not_found: /);
      const empty = await c('list_files', { room: 'no-machine-here' });
      assert.match(textOf(empty), /^Error instance_not_found: .*\nRoom "no-machine-here" has no machine: create it with create_instance\.$/);
      // Advice in the tools' terms only: the REST API's ("create one with POST /api/…") is left out.
      assert.doesNotMatch(textOf(empty), /POST |\/api\//);
      const profile = await c('get_instance', { room: ROOM, profile: 'gpu' });
      assert.match(textOf(profile), /^Error profile_not_found: no profile named "gpu"/);
    } finally {
      await stdio.client.close();
    }
    await until(() => !alive(pid), 'roomkit mcp to exit');
  });

  it('tells the model when the key is refused or the server cannot be reached', async () => {
    const badKey = await connectStdio({ ROOMKIT_URL: base, ROOMKIT_API_KEY: 'rk_live_0123456789abcdef0123456789abcdef' });
    try {
      await until(() => badKey.stderr().includes('cannot use'), 'the connection check');
      const refused = await callWith(badKey.client, 'get_instance', { room: ROOM });
      assert.equal(refused.isError, true);
      assert.match(textOf(refused), /^Error invalid_api_key: /);
    } finally {
      await badKey.client.close();
    }
    // Port 9 (discard) on loopback: nothing listens there.
    const nowhere = await connectStdio({ ROOMKIT_URL: 'http://127.0.0.1:9', ROOMKIT_API_KEY: a.apiKey });
    try {
      const down = await callWith(nowhere.client, 'list_files', { room: ROOM });
      assert.equal(down.isError, true);
      assert.match(textOf(down), /^Error connection_failed: roomkit at http:\/\/127\.0\.0\.1:9 did not answer/);
    } finally {
      await nowhere.client.close();
    }
  });
});

describe('delete_instance', () => {
  it('deletes the room\'s machine with everything on it; the room then has none', async () => {
    const deleted = await call('delete_instance', { room: ROOM });
    assert.equal(deleted.isError, false, textOf(deleted));
    assert.equal(textOf(deleted), `Machine ${instanceId} of room "${ROOM}" is deleted, with everything on it.`);
    const gone = await call('get_instance', { room: ROOM });
    assert.equal(gone.isError, true);
    assert.match(textOf(gone), /^Error instance_not_found: /);
    const twice = await call('delete_instance', { room: ROOM });
    assert.match(textOf(twice), /^Error instance_not_found: /);
  });
});
