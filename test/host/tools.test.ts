// The room tool schema (GET .../tools) in its four formats, checked against the MCP SDK's
// own schemas and against JSON Schemas written from the OpenAI and Anthropic API
// references, and the tool call endpoint (POST .../tools/call) running every tool on a
// real gVisor instance. One instance serves the whole file, which is why it is one
// file of over 400 lines: split, each part would pay for an instance of its own.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { ListToolsResultSchema, ToolSchema } from '@modelcontextprotocol/sdk/types.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let profileId: string;
let instanceId: string;

const ROOM = 'agent';
const TIMEOUT_S = 30;
const ROOM_TOOLS = ['run_command', 'run_code', 'command_output', 'kill_command', 'revert_command', 'read_file', 'write_file', 'list_files', 'delete_file'];
/** A 1x1 PNG. */
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a3a4e05a0000000049454e44ae426082',
  'hex',
);

const roomPath = (room = ROOM, profile = profileId) => `/api/profile/${profile}/room/${room}`;
const fixture = (name: string) => JSON.parse(readFileSync(new URL(`../fixtures/${name}`, import.meta.url), 'utf8')) as object;

async function tools(query = '', room = ROOM, headers = org.headers) {
  return t.app.inject({ method: 'GET', url: `${roomPath(room)}/tools${query}`, headers });
}

interface Content {
  type: string;
  text?: string;
  data?: string;
  mime_type?: string;
}
interface CallResult {
  name: string;
  content: Content[];
  is_error: boolean;
  structured_content: any;
}

async function callRaw(payload: unknown, room = ROOM) {
  return t.app.inject({ method: 'POST', url: `${roomPath(room)}/tools/call`, headers: org.headers, payload: payload as object });
}

/** Calls a tool that must answer 200; returns the result. */
async function call(name: string, args: Record<string, unknown> | string = {}): Promise<CallResult> {
  const res = await callRaw({ name, arguments: args });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

const text = (result: CallResult) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

before(async () => {
  t = await startTestApp({ gvisorPool: '10.224.0.0/24' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  org = await t.newOrg();
  other = await t.newOrg();
  profileId = await t.createProfile(org, { name: 'tools', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' }, command_timeout_s: TIMEOUT_S });
  const created = await t.app.inject({ method: 'POST', url: roomPath(), headers: org.headers });
  assert.equal(created.statusCode, 201, created.body);
  instanceId = created.json().instance_id;
});

after(async () => {
  await t.closeLeavingNothing();
});

describe('GET .../tools', () => {
  it('answers roomkit\'s own format by default: each tool with a JSON Schema, annotations and the endpoint it maps to', async () => {
    const res = await tools();
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.format, 'roomkit');
    assert.equal(body.profile_id, profileId);
    assert.equal(body.room_id, ROOM);
    assert.deepEqual(body.call, { method: 'POST', path: `${roomPath()}/tools/call` });
    assert.deepEqual(body.tools.map((tool: { name: string }) => tool.name), ROOM_TOOLS);
    const routes = new Set(t.app.routeTable.map((r) => `${r.method} ${r.url}`));
    for (const tool of body.tools) {
      assert.deepEqual(Object.keys(tool).sort(), ['annotations', 'description', 'endpoint', 'input_schema', 'name', 'title']);
      assert.equal(tool.input_schema.type, 'object');
      assert.equal(tool.input_schema.additionalProperties, false);
      for (const key of tool.input_schema.required ?? []) assert.ok(tool.input_schema.properties[key], `${tool.name}: required ${key} is a property`);
      assert.equal(typeof tool.annotations.readOnlyHint, 'boolean');
      assert.deepEqual(body.endpoints[tool.name], tool.endpoint);
      // The endpoint is a route this server has, for this very room.
      const { method, path, query = [], body: fields = [] } = tool.endpoint;
      assert.ok(path.startsWith(roomPath()), path);
      const pattern = path.replace(roomPath(), '/api/profile/:profile_id/room/:room_id').replace('{path}', '*').replace('{command_id}', ':command_id').replace('{context_id}', ':context_id');
      assert.ok(routes.has(`${method} ${pattern}`), `${tool.name}: ${method} ${pattern} is not a route`);
      for (const arg of [...query, ...fields]) assert.ok(tool.input_schema.properties[arg], `${tool.name}: ${arg} is an argument`);
    }
    const readOnly = Object.fromEntries(body.tools.map((tool: any) => [tool.name, tool.annotations.readOnlyHint]));
    assert.deepEqual(readOnly, {
      run_command: false,
      run_code: false,
      command_output: true,
      kill_command: false,
      revert_command: false,
      read_file: true,
      write_file: false,
      list_files: true,
      delete_file: false,
    });
  });

  it('describes this room\'s machine and the server\'s limits in words a model can act on', async () => {
    const byName = Object.fromEntries((await tools()).json().tools.map((tool: any) => [tool.name, tool]));
    const run = byName.run_command;
    const { config } = t.services;
    assert.match(run.description, /user `user`/);
    assert.match(run.description, /in \/home\/user/);
    assert.match(run.description, new RegExp(`Time limit: ${TIMEOUT_S} s`));
    assert.match(run.description, /exit code is 124/);
    assert.match(run.description, /no network access/);
    assert.equal(config.maxOutputBytes, 1024 * 1024);
    assert.match(run.description, /Beyond 1 MiB the middle is cut: the first and the last 512 KiB are kept/);
    assert.match(run.description, new RegExp(`at most ${config.filesChangedLimit}\\)`));
    assert.match(run.description, /URL where its content can be fetched without authentication/);
    assert.equal(run.input_schema.properties.timeout_s.maximum, TIMEOUT_S);
    assert.equal(run.annotations.openWorldHint, false, 'no egress: the command cannot reach the outside');
    assert.match(byName.read_file.description, /Files larger than 50 MiB cannot be read here/);
    assert.match(byName.write_file.description, /At most 50 MiB/);
    assert.match(byName.list_files.input_schema.properties.path.description, /default: \/home\/user\)/);
  });

  it('follows the room: the live instance keeps the profile it was made from, an empty room gets the profile as it is now', async () => {
    const patch = (command_timeout_s: number) =>
      t.app.inject({ method: 'PATCH', url: `/api/profiles/${profileId}`, headers: org.headers, payload: { command_timeout_s } });
    assert.equal((await patch(45)).statusCode, 200);
    try {
      const live = (await tools()).json().tools[0];
      assert.equal(live.input_schema.properties.timeout_s.maximum, TIMEOUT_S);
      const empty = await tools('', 'empty-room');
      assert.equal(empty.statusCode, 200, 'a room needs no instance to have tools');
      assert.equal(empty.json().tools[0].input_schema.properties.timeout_s.maximum, 45);
      assert.match(empty.json().tools[0].description, /Time limit: 45 s/);
    } finally {
      assert.equal((await patch(TIMEOUT_S)).statusCode, 200);
    }
  });

  it('has every input schema compile as JSON Schema (draft 2020-12) in Ajv\'s strict mode', async () => {
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    for (const tool of (await tools()).json().tools) {
      assert.doesNotThrow(() => ajv.compile(tool.input_schema), tool.name);
    }
  });

  it('answers ?format=openai with Chat Completions function tools that fit OpenAI\'s published shape', async () => {
    const body = (await tools('?format=openai')).json();
    assert.equal(body.format, 'openai');
    const validate = new Ajv2020({ allErrors: true, allowUnionTypes: true }).compile(fixture('openai-chat-function-tool.schema.json'));
    for (const tool of body.tools) assert.ok(validate(tool), `${JSON.stringify(validate.errors)} in ${JSON.stringify(tool).slice(0, 200)}`);
    assert.deepEqual(body.tools.map((tool: any) => tool.function.name), ROOM_TOOLS);
    assert.deepEqual(Object.keys(body.endpoints), ROOM_TOOLS);
    // The fixture refuses what OpenAI does not define: it is not a rubber stamp.
    assert.equal(validate({ type: 'function', function: { name: 'read.file', parameters: { type: 'object' } } }), false);
    assert.equal(validate({ type: 'function', function: { name: 'x', parameters: { type: 'object' }, endpoint: {} } }), false);
    assert.equal(validate({ type: 'function', function: { name: 'x', parameters: { type: 'string' } } }), false);
  });

  it('answers ?format=anthropic with Messages API tools that fit Anthropic\'s published shape', async () => {
    const body = (await tools('?format=anthropic')).json();
    assert.equal(body.format, 'anthropic');
    const validate = new Ajv2020({ allErrors: true, allowUnionTypes: true }).compile(fixture('anthropic-messages-tool.schema.json'));
    for (const tool of body.tools) assert.ok(validate(tool), `${JSON.stringify(validate.errors)} in ${JSON.stringify(tool).slice(0, 200)}`);
    assert.deepEqual(body.tools.map((tool: any) => tool.name), ROOM_TOOLS);
    assert.equal(validate({ name: 'x', input_schema: { type: 'object' }, parameters: {} }), false);
    assert.equal(validate({ name: 'a b', input_schema: { type: 'object' } }), false);
    assert.equal(validate({ name: 'x' }), false);
  });

  it('answers ?format=mcp with MCP Tool objects that the MCP SDK parses without dropping a key', async () => {
    const body = (await tools('?format=mcp')).json();
    assert.equal(body.format, 'mcp');
    const list = ListToolsResultSchema.parse(body);
    assert.deepEqual(list.tools.map((tool) => tool.name), ROOM_TOOLS);
    for (const tool of body.tools) {
      // ToolSchema strips keys it does not know; an unchanged parse means every key is MCP's.
      assert.deepEqual(ToolSchema.parse(tool), tool);
      assert.equal(tool.annotations.title, tool.title);
    }
    assert.equal(ToolSchema.safeParse({ name: 'x', inputSchema: { type: 'string' } }).success, false);
  });

  it('gives the same tools, descriptions and schemas in every format', async () => {
    const [own, openai, anthropic, mcp] = await Promise.all(['', '?format=openai', '?format=anthropic', '?format=mcp'].map(async (q) => (await tools(q)).json().tools));
    own.forEach((tool: any, i: number) => {
      assert.deepEqual(openai[i].function, { name: tool.name, description: tool.description, parameters: tool.input_schema });
      assert.deepEqual(anthropic[i], { name: tool.name, description: tool.description, input_schema: tool.input_schema });
      assert.deepEqual(mcp[i].inputSchema, tool.input_schema);
      assert.equal(mcp[i].description, tool.description);
    });
  });

  it('refuses an unknown format and answers 404 for a profile it cannot see', async () => {
    const bad = await tools('?format=gemini');
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().error, 'validation_error');
    const unknown = await t.app.inject({ method: 'GET', url: `${roomPath(ROOM, randomUUID())}/tools`, headers: org.headers });
    assert.equal(unknown.statusCode, 404);
    assert.equal(unknown.json().error, 'profile_not_found');
    const foreign = await tools('', ROOM, other.headers);
    assert.equal(foreign.statusCode, 404);
    assert.equal(foreign.json().error, 'profile_not_found');
    assert.equal((await tools('', ROOM, {})).statusCode, 401);
  });
});

describe('POST .../tools/call', () => {
  it('run_command: output, exit code and the files changed with whole public URLs that serve them', async () => {
    const result = await call('run_command', { command: 'mkdir -p notes && echo hello > notes/a.txt && cat notes/a.txt' });
    assert.equal(result.name, 'run_command');
    assert.equal(result.is_error, false);
    assert.equal(result.content.length, 1);
    const body = text(result);
    assert.match(body, /^Exit code: 0\nOutput:\nhello\nFiles changed \(1\):\ncreated \/home\/user\/notes\/a\.txt \(6 bytes, text\/plain\) (\S+)$/);
    const url = new URL(/ (http\S+)$/.exec(body)![1]!);
    assert.equal(url.pathname, `/vm/${instanceId}/file/home/user/notes/a.txt`);
    const fetched = await t.app.inject({ method: 'GET', url: url.pathname });
    assert.equal(fetched.statusCode, 200);
    assert.equal(fetched.body, 'hello\n');
    // The endpoint's own CommandResult comes along for code that wants the fields.
    assert.equal(result.structured_content.instance_id, instanceId);
    assert.equal(result.structured_content.result.exit_code, 0);
    assert.equal(result.structured_content.result.files_changed[0].public_url, url.pathname);
  });

  it('run_command: a failing command is a result with is_error, not an HTTP error; cwd and timeout_s apply', async () => {
    const failed = await call('run_command', { command: 'echo oops >&2; exit 3' });
    assert.equal(failed.is_error, true);
    assert.match(text(failed), /^Exit code: 3 \(failed\)\nOutput:\noops\n\(All of it was written to stderr\.\)\nFiles changed: none$/);
    const mixed = await call('run_command', { command: 'echo out; echo err >&2' });
    assert.match(text(mixed), /\n\(Of this, 4 bytes were written to stderr, 4 to stdout\.\)\n/);
    const inDir = await call('run_command', { command: 'pwd', cwd: 'notes' });
    assert.match(text(inDir), /Output:\n\/home\/user\/notes\n/);
    const slow = await call('run_command', { command: 'echo start; sleep 20', timeout_s: 1 });
    assert.equal(slow.is_error, true);
    assert.match(text(slow), /^Exit code: 124 \(the command reached its time limit and was killed\)\nOutput:\nstart\n/);
    assert.equal(slow.structured_content.result.timed_out, true);
  });

  it('run_command with background, command_output from an offset, and kill_command', async () => {
    const started = await call('run_command', { command: 'for i in 1 2 3; do echo "step $i"; sleep 0.4; done; echo done > bg-done.txt', background: true });
    assert.equal(started.is_error, false);
    const commandId = started.structured_content.command_id;
    assert.match(text(started), new RegExp(`^Started in the background: command_id ${commandId}\.`));
    assert.equal(started.structured_content.state, 'running');
    // Read on from each answer's next_offset until the command has ended: every piece once.
    let offset = 0;
    let output = '';
    for (let i = 0; ; i++) {
      const read = await call('command_output', { command_id: commandId, offset });
      assert.equal(read.is_error, false);
      output += read.structured_content.output;
      offset = read.structured_content.next_offset;
      if (read.structured_content.state !== 'running') {
        assert.match(text(read), /has ended: exited, exit code 0/);
        assert.match(text(read), /Files changed \(1\):\ncreated \/home\/user\/bg-done\.txt http:\/\//);
        break;
      }
      assert.match(text(read), new RegExp(`Read on with offset ${offset}\.`));
      assert.ok(i < 50, 'the background command did not end');
      await new Promise((r) => setTimeout(r, 300));
    }
    assert.equal(output, 'step 1\nstep 2\nstep 3\n');

    const long = await call('run_command', { command: 'sleep 600', background: true });
    const killed = await call('kill_command', { command_id: long.structured_content.command_id });
    assert.equal(killed.is_error, false);
    assert.match(text(killed), /is killed \(exit code 137\)/);
    const again = await call('kill_command', { command_id: long.structured_content.command_id });
    assert.equal(again.is_error, true);
    assert.match(text(again), /^Error command_not_running/);
    const unknown = await call('command_output', { command_id: '00000000-0000-4000-8000-000000000000' });
    assert.equal(unknown.is_error, true);
    assert.match(text(unknown), /^Error command_not_found/);
  });

  it('write_file then read_file: the exact text back; a second write replaces', async () => {
    const content = 'line one\nünïcödé ✓\n\ttabbed\n';
    const written = await call('write_file', { path: 'docs/readme.md', content });
    assert.equal(written.is_error, false);
    assert.match(text(written), new RegExp(`^Created /home/user/docs/readme\\.md \\(${Buffer.byteLength(content)} bytes\\)\\. URL: http://\\S+/vm/${instanceId}/file/home/user/docs/readme\\.md$`));
    assert.equal(written.structured_content.status, 'created');
    const read = await call('read_file', { path: '/home/user/docs/readme.md' });
    assert.equal(read.is_error, false);
    assert.deepEqual(read.content, [{ type: 'text', text: content }]);
    assert.equal(read.structured_content.content, undefined, 'the content is not sent twice');
    assert.equal(read.structured_content.size, Buffer.byteLength(content));
    const replaced = await call('write_file', { path: 'docs/readme.md', content: 'new\n' });
    assert.match(text(replaced), /^Replaced \/home\/user\/docs\/readme\.md \(4 bytes\)/);
    assert.deepEqual((await call('read_file', { path: 'docs/readme.md' })).content, [{ type: 'text', text: 'new\n' }]);
  });

  it('write_file with base64, then read_file of the image: an image content block with the same bytes', async () => {
    const written = await call('write_file', { path: 'plot.png', content: PNG.toString('base64'), encoding: 'base64' });
    assert.equal(written.structured_content.size, PNG.length);
    const read = await call('read_file', { path: 'plot.png' });
    assert.equal(read.is_error, false);
    assert.equal(read.content.length, 2);
    assert.match(read.content[0]!.text!, new RegExp(`^Image /home/user/plot\\.png \\(image/png, ${PNG.length} bytes\\)\\. URL: http://\\S+/vm/`));
    const image = read.content[1]!;
    assert.equal(image.type, 'image');
    assert.equal(image.mime_type, 'image/png');
    assert.deepEqual(Buffer.from(image.data!, 'base64'), PNG);
  });

  it('read_file of other binary data describes it instead of returning it', async () => {
    await call('run_command', { command: 'head -c 256 /bin/true > blob.bin' });
    const read = await call('read_file', { path: 'blob.bin' });
    assert.equal(read.is_error, false);
    assert.equal(read.content.length, 1);
    assert.match(text(read), /^\/home\/user\/blob\.bin is binary \(\S+, 256 bytes\) and is not shown\. URL: http:\/\/\S+\nInspect it with run_command/);
  });

  it('read_file picks lines with offset and limit', async () => {
    await call('write_file', { path: 'lines.txt', content: 'l1\nl2\nl3\nl4\nl5\n' });
    const middle = await call('read_file', { path: 'lines.txt', offset: 2, limit: 2 });
    assert.deepEqual(middle.content, [
      { type: 'text', text: 'l2\nl3\n' },
      { type: 'text', text: '[Lines 2-3 of 5.]' },
    ]);
    const tail = await call('read_file', { path: 'lines.txt', offset: 5 });
    assert.deepEqual(tail.content, [{ type: 'text', text: 'l5\n' }, { type: 'text', text: '[Lines 5-5 of 5.]' }]);
    const past = await call('read_file', { path: 'lines.txt', offset: 9 });
    assert.equal(past.is_error, true);
    assert.match(text(past), /has 5 line\(s\); offset 9 is past its end/);
  });

  it('read_file cuts text beyond the output limit at a line and says how to read on', async () => {
    // 1..250000, one per line: about 1.6 MB, more than the 1 MiB a read returns.
    const made = await call('run_command', { command: 'seq 1 250000 > big.txt && wc -c < big.txt' });
    const total = Number(/Output:\n(\d+)\n/.exec(text(made))?.[1]);
    assert.ok(total > t.services.config.maxOutputBytes, `big.txt is ${total} bytes`);
    const first = await call('read_file', { path: 'big.txt' });
    const [chunk, note] = first.content;
    assert.ok(Buffer.byteLength(chunk!.text!) <= t.services.config.maxOutputBytes);
    assert.ok(chunk!.text!.startsWith('1\n2\n3\n'));
    assert.ok(chunk!.text!.endsWith('\n'), 'cut at a line end');
    const shown = chunk!.text!.split('\n').length - 1;
    assert.equal(note!.text, `[Lines 1-${shown} of 250000: one read returns at most 1 MiB. Read on with offset=${shown + 1}.]`);
    const next = await call('read_file', { path: 'big.txt', offset: shown + 1, limit: 3 });
    assert.equal(next.content[0]!.text, `${shown + 1}\n${shown + 2}\n${shown + 3}\n`);
  });

  it('list_files lists a directory (default: the home directory), directories marked with /', async () => {
    const home = await call('list_files');
    assert.equal(home.is_error, false);
    assert.match(text(home), /^\/home\/user \(\d+ entries\):\n/);
    assert.match(text(home), /^directory +\d+ 0?755 \S+ docs\/$/m);
    assert.match(text(home), new RegExp(`^file +${PNG.length} 0?644 \\S+ plot\\.png$`, 'm'));
    assert.equal(home.structured_content.path, '/home/user');
    const docs = await call('list_files', { path: 'docs' });
    assert.match(text(docs), /^\/home\/user\/docs \(1 entries\):\nfile +4 0?644 \S+ readme\.md$/);
  });

  it('delete_file deletes; what the arguments get wrong (a missing file, a directory) is a result with is_error', async () => {
    const deleted = await call('delete_file', { path: 'notes/a.txt' });
    assert.equal(deleted.is_error, false);
    assert.equal(text(deleted), 'Deleted /home/user/notes/a.txt.');
    const again = await call('read_file', { path: 'notes/a.txt' });
    assert.equal(again.is_error, true);
    assert.match(text(again), /^Error file_not_found: /);
    assert.equal(again.structured_content.error, 'file_not_found');
    const dir = await call('delete_file', { path: 'docs' });
    assert.equal(dir.is_error, true);
    assert.match(text(dir), /^Error is_a_directory: /);
  });

  it('takes arguments as OpenAI sends them (JSON text) and treats null as an argument left out', async () => {
    const fromText = await call('run_command', JSON.stringify({ command: 'echo from-json', cwd: null }));
    assert.match(text(fromText), /Output:\nfrom-json\n/);
    const nulls = await call('list_files', { path: null });
    assert.equal(nulls.structured_content.path, '/home/user');
  });

  it('answers 400 unknown_tool and 400 invalid_arguments naming each problem', async () => {
    const unknown = await callRaw({ name: 'create_instance', arguments: {} });
    assert.equal(unknown.statusCode, 400);
    assert.equal(unknown.json().error, 'unknown_tool');
    assert.match(unknown.json().message, /run_command, run_code, command_output, kill_command, revert_command, read_file, write_file, list_files, delete_file/);

    const bad = await callRaw({ name: 'run_command', arguments: { command: 7, timeout_s: TIMEOUT_S + 1, shell: 'bash' } });
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().error, 'invalid_arguments');
    const fields = bad.json().details.errors.map((e: { field: string }) => e.field).sort();
    assert.deepEqual(fields, ['arguments.command', 'arguments.shell', 'arguments.timeout_s']);

    const missing = await callRaw({ name: 'read_file', arguments: {} });
    assert.equal(missing.statusCode, 400);
    assert.equal(missing.json().message, 'read_file: path is required');
    const notJson = await callRaw({ name: 'read_file', arguments: '{path:' });
    assert.equal(notJson.json().error, 'invalid_arguments');
    const notObject = await callRaw({ name: 'read_file', arguments: '[1]' });
    assert.equal(notObject.json().error, 'invalid_arguments');
    const body = await callRaw({ tool: 'read_file' });
    assert.equal(body.json().error, 'validation_error');
  });

  it('answers the usual HTTP errors for the room itself: no instance, no profile', async () => {
    const empty = await callRaw({ name: 'list_files' }, 'empty-room');
    assert.equal(empty.statusCode, 404);
    assert.equal(empty.json().error, 'instance_not_found');
    const foreign = await t.app.inject({ method: 'POST', url: `${roomPath()}/tools/call`, headers: other.headers, payload: { name: 'list_files' } });
    assert.equal(foreign.statusCode, 404);
    assert.equal(foreign.json().error, 'profile_not_found');
  });
});
