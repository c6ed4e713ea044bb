// Core's errors name no endpoint: they carry a hint code that each adapter words. The
// REST API words them into the messages clients and the CLI read (the endpoint to call
// next); the tool layer into what a model can do with its tools; the SDKs, from the
// Error body's problem and hint, into their own calls; and no message in core's source
// names an /api/ path.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { restMessage } from '../../src/adapters/rest/hint-wording.ts';
import { executeCall, prepareCall } from '../../src/adapters/tools/executor.ts';
import { toolDefinitions, type ToolLimits } from '../../src/adapters/tools/definitions.ts';
import type { ToolBackend } from '../../src/adapters/tools/backend.ts';
import { decodeInput, validateCommandInput } from '../../src/core/command-input.ts';
import { commandNotFound } from '../../src/core/commands.ts';
import { instanceNotFound, roomOccupied } from '../../src/core/instances.ts';
import { stateConflict } from '../../src/core/pauses.ts';
import { quotaExceeded } from '../../src/core/quotas.ts';
import type { InstanceRecord } from '../../src/core/stored-json.ts';
import { AppError, HINT_CODES } from '../../src/errors.ts';
import { sdkMessage } from '../../sdk/src/hint-wording.ts';

const P = '5a87fd4b-0000-4000-8000-000000000001';
const I = '5a87fd4b-0000-4000-8000-00000000000a';
const C = '5a87fd4b-0000-4000-8000-00000000000c';
const row = (state: string) => ({ id: I, profile_id: P, room_id: 'r1', state, snapshot_id: null, failure_reason: null }) as unknown as InstanceRecord;
const thrown = (fn: () => unknown): AppError => {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof AppError);
    return err;
  }
  assert.fail('nothing was thrown');
};

describe('REST wording of core\'s hints', () => {
  it('gives the messages the API has always answered with', () => {
    const cases: [AppError, string][] = [
      [instanceNotFound(P, 'r1'), `no instance in room "r1" of profile ${P}; create one with POST /api/profile/${P}/room/r1`],
      [commandNotFound({ organizationId: 'o', profileId: P, roomId: 'r1' }, C), `no command ${C} in room "r1" of profile ${P}; GET /api/profile/${P}/room/r1/commands lists them`],
      [roomOccupied(row('ready'), 'fork into it'), `room "r1" already has an instance (${I}, started from its profile's image, ready); delete it first (DELETE /api/profile/${P}/room/r1) to fork into it, or use another room`],
      [stateConflict(row('pausing'), 'pause'), `cannot pause the room's instance: it is being paused already; poll GET /api/profile/${P}/room/r1 until it is "paused"`],
      [stateConflict(row('resuming'), 'pause'), `cannot pause the room's instance: it is being resumed; pause it once it is "ready" (poll GET /api/profile/${P}/room/r1)`],
      [stateConflict(row('vm_started'), 'resume'), `cannot resume the room's instance: it is still starting (vm_started); poll GET /api/profile/${P}/room/r1 until it is "ready"`],
      [stateConflict(row('stopped'), 'resume'), 'cannot resume the room\'s instance: it was deleted'],
      [
        quotaExceeded({ quota: 'instances', limit: 2, used: 2, requested: 1 }),
        'this would go over the organization\'s instances quota: 2 in use, 1 more asked for, limit 2; delete an instance you no longer need (DELETE /api/profile/{profile_id}/room/{room_id}), or ask the operator to raise the quota (GET /api/usage shows all quotas)',
      ],
      [
        quotaExceeded({ quota: 'concurrent_commands', limit: 1, used: 1, requested: 1 }),
        'this would go over the organization\'s concurrent_commands quota: 1 in use, 1 more asked for, limit 1; wait for a command to end, or kill one (POST .../commands/{command_id}/kill), or ask the operator to raise the quota (GET /api/usage shows all quotas)',
      ],
      [
        quotaExceeded({ quota: 'memory_mb', limit: 512, used: 512, requested: 256 }),
        'this would go over the organization\'s memory_mb quota: 512 in use, 256 more asked for, limit 512; delete an instance, or use a profile with less memory_mb, or ask the operator to raise the quota (GET /api/usage shows all quotas)',
      ],
      [
        thrown(() => validateCommandInput({ command: 'x'.repeat(1024 * 1024) })),
        `command is ${1024 * 1024} bytes, more than the ${thrown(() => validateCommandInput({ command: 'x'.repeat(1024 * 1024) })).message.match(/the (\d+) accepted/)![1]} accepted; write long scripts to a file with PUT .../file/{path} and run that`,
      ],
      [
        thrown(() => decodeInput('abcd', undefined, 2, 'stdin')),
        'stdin is 4 bytes, more than the 2 one request may give (ROOMKIT_MAX_STDIN_BYTES); write the input to a file with PUT .../file/{path} and redirect it (`cmd < file`), or start the command with "stdin_open": true and send it in parts',
      ],
    ];
    for (const [err, expected] of cases) {
      assert.equal(restMessage(err), expected);
      // Core's own message stops before the REST words.
      assert.ok(!err.message.includes('/api/') && !err.message.includes('.../'), err.message);
    }
  });

  it('words every hint code', () => {
    for (const code of HINT_CODES) {
      const err = new AppError('validation_error', 'core says', undefined, { code, profile_id: P, room_id: 'r1', instance_id: I, path: '/home/user/a', quota: 'instances', snapshot_id: I, until: 'ready', asked: 'x' });
      const worded = restMessage(err);
      assert.ok(worded.startsWith('core says') && worded.length > 'core says'.length, `${code}: ${worded}`);
    }
  });
});

describe('tool wording of core\'s hints', () => {
  it('names a tool, not an endpoint', async () => {
    const limits: ToolLimits = { maxOutputBytes: 1000, maxFileReadBytes: 1000, maxUploadBytes: 1000, filesChangedLimit: 10, maxListEntries: 10 };
    const scope = { kind: 'organization' as const };
    const definitions = toolDefinitions(scope, limits);
    const failing = (err: AppError) => ({ runCommand: async () => Promise.reject(err) }) as unknown as ToolBackend;
    const call = async (err: AppError) => {
      const result = await executeCall(failing(err), scope, limits, prepareCall(definitions, 'run_command', { room: 'r1', command: 'x' }), { reportAsResult: () => true });
      return result.content[0]!.type === 'text' ? result.content[0]!.text : '';
    };
    const tooLong = await call(thrown(() => validateCommandInput({ command: 'x'.repeat(1024 * 1024) })));
    assert.match(tooLong, /^Error validation_error: command is \d+ bytes, more than the \d+ accepted\nWrite long scripts to a file with write_file and run that\.$/);
    const missing = await call(instanceNotFound(P, 'r1'));
    assert.equal(missing, `Error instance_not_found: no instance in room "r1" of profile ${P}\nRoom "r1" has no machine: create it with create_instance.`);
  });
});

describe('core\'s source', () => {
  it('names no endpoint of the REST API in what it says', () => {
    const dir = join(import.meta.dirname, '../../src/core');
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('-schema.ts'))) {
      const code = readFileSync(join(dir, file), 'utf8')
        .split('\n')
        .filter((line) => !/^\s*(\/\/|\*|\/\*\*)/.test(line));
      for (const line of code) assert.ok(!/\/api\/|\/vm\/\$|\b(GET|POST|PUT|PATCH|DELETE) (\/|\.\.\.|…)/.test(line), `${file}: ${line.trim()}`);
    }
  });
});

describe('the advice as data, for clients with words of their own', () => {
  it('the Error body carries the problem and the hint beside the REST message', () => {
    const body = instanceNotFound(P, 'r1').toBody(restMessage(instanceNotFound(P, 'r1')));
    assert.equal(body.message, `no instance in room "r1" of profile ${P}; create one with POST /api/profile/${P}/room/r1`);
    assert.equal(body.problem, `no instance in room "r1" of profile ${P}`);
    assert.deepEqual(body.hint, { code: 'create_instance', profile_id: P, room_id: 'r1' });
  });

  it('the SDKs say it as their own calls, never as a REST call, for every hint', () => {
    const body = (code: string) => ({ message: `the problem; POST /api/somewhere`, problem: 'the problem', hint: { code, profile_id: P, room_id: 'r1', until: 'paused', asked: 'x', snapshot_id: 's', port: 8000, path: '/a', quota: 'instances' } });
    for (const code of HINT_CODES) {
      const said = sdkMessage(body(code));
      assert.ok(said.startsWith('the problem'), `${code}: ${said}`);
      assert.ok(!/\/api\/|POST|GET /.test(said), `${code}: ${said}`);
      assert.notEqual(said, 'the problem', `${code} has no words in the SDK`);
    }
    // The Python SDK has words for each hint too (its own tests check what they say).
    const python = readFileSync(join(import.meta.dirname, '../../python/roomkit/_hint_wording.py'), 'utf8');
    for (const code of HINT_CODES) assert.ok(python.includes(`"${code}": lambda`), `the Python SDK has no words for ${code}`);
    // A hint the SDK does not know keeps the server's message.
    assert.equal(sdkMessage({ message: 'm; POST /x', problem: 'm', hint: { code: 'newer_hint' } }), 'm; POST /x');
    assert.equal(sdkMessage({ message: 'plain' }), 'plain');
  });
});
