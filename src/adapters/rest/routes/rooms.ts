// A room's instance: create it, look at it, pause and resume it, delete it; and the organization's list of
// instances.
import Type from 'typebox';
import type { Services } from '../../../services.ts';
import { callerOf } from '../../../http/auth.ts';
import { Instance, InstancePage, PauseBody, State } from '../../../core/instance-schema.ts';
import { CreateOptionsFields, KeepAliveBody, METADATA_QUERY_DESCRIPTION } from '../../../core/instance-options-schema.ts';
import { parseMetadataQuery } from '../../../core/instance-options.ts';
import { errorResponses, RoomParams } from '../../../http/schemas.ts';
import { IdempotencyKeyHeaders } from '../../../http/idempotency.ts';
import type { App } from '../../../http/types.ts';

const ROOM_PATH = '/api/profile/:profile_id/room/:room_id';

export function roomRoutes(app: App, { instances, snapshots }: Services): void {
  app.post(
    ROOM_PATH,
    {
      config: { auditAction: 'instance.create', idempotency: {} },
      schema: {
        operationId: 'createInstance',
        summary: 'Create the room\'s instance',
        description:
          'Starts an instance from the profile in this room. By default answers when it is `ready` (201), or with ' +
          '`instance_start_failed` if it failed. With `"wait": false` answers 202 at once; poll GET for its state. ' +
          'If the room already has a live instance, answers 200 with it: a retry never makes a second machine. A create does ' +
          'not change a live instance: the options it gives (`env`, `metadata`, `timeout_s`; a field left out is not compared) ' +
          'must be the ones the instance was made with, else 409 `instance_options_conflict` naming the fields that differ. ' +
          'Options are the record\'s, not the machine\'s: a create with them still takes an instance from the profile\'s warm pool, ' +
          'except one with a `network` of its own (the instance\'s egress policy over the profile\'s), which makes its machine. ' +
          'With `snapshot_id`, the instance starts from that snapshot\'s files (its image and disk size are the snapshot\'s; memory, ' +
          'CPUs, network and time limits are this profile\'s); a room whose live instance did not start from it answers ' +
          '409 `room_occupied`.',
        tags: ['instances'],
        params: RoomParams,
        headers: IdempotencyKeyHeaders,
        body: Type.Object(
          {
            wait: Type.Optional(Type.Boolean({ default: true, description: 'Wait until the instance is ready (default true)' })),
            snapshot_id: Type.Optional(
              Type.String({ format: 'uuid', description: 'Start from this snapshot of the organization (POST …/snapshots) instead of the profile\'s image' }),
            ),
            ...CreateOptionsFields,
          },
          {
            additionalProperties: false,
            examples: [{ env: { OPENAI_API_KEY: 'sk-example' }, metadata: { user: 'u-42', app: 'grader' }, timeout_s: 600 }],
          },
        ),
        response: {
          200: Instance,
          201: Instance,
          202: Instance,
          ...errorResponses(400, 401, 403, 404, 409, 422, 500, 503),
        },
      },
    },
    async (request, reply) => {
      const { profile_id, room_id } = request.params;
      const { wait: waitAsked, snapshot_id: snapshotId, ...options } = request.body;
      const wait = waitAsked ?? true;
      const organizationId = callerOf(request).organizationId;
      const snapshot = snapshotId === undefined ? undefined : await snapshots.source(organizationId, snapshotId);
      const { instance, created } = await instances.create(organizationId, profile_id, room_id, { wait, ...options, ...(snapshot ? { snapshot } : {}) });
      const status = !created ? 200 : wait ? 201 : 202;
      return reply.code(status).send(instance);
    },
  );

  app.get(
    ROOM_PATH,
    {
      schema: {
        operationId: 'getInstance',
        summary: 'Get the room\'s instance',
        description: 'The live instance of the room, or the last one if it failed and was not deleted.',
        tags: ['instances'],
        params: RoomParams,
        response: { 200: Instance, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const { profile_id, room_id } = request.params;
      return instances.get(callerOf(request).organizationId, profile_id, room_id);
    },
  );

  app.delete(
    ROOM_PATH,
    {
      config: { auditAction: 'instance.delete' },
      schema: {
        operationId: 'deleteInstance',
        summary: 'Delete the room\'s instance',
        description: 'Stops the instance and removes everything it holds, then answers with its final state. Afterwards GET answers 404.',
        tags: ['instances'],
        params: RoomParams,
        response: { 200: Instance, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const { profile_id, room_id } = request.params;
      const caller = callerOf(request);
      return instances.delete(caller.organizationId, profile_id, room_id, { keyId: caller.keyId });
    },
  );

  app.post(
    `${ROOM_PATH}/pause`,
    {
      config: { auditAction: 'instance.pause' },
      schema: {
        operationId: 'pauseInstance',
        summary: 'Pause the room\'s instance',
        description:
          'Stops the instance\'s machine and keeps its files (its writable layer) and, unless the body says `"memory": false`, its ' +
          'memory and processes (saved to the host\'s disk: running processes keep their pids and memory, listening sockets stay; ' +
          'established TCP connections are dropped; a command running through roomkit goes on and its record gets all its output ' +
          'and exit code after the resume; an open terminal is closed with reason `instance_paused` and can be attached again by its ' +
          '`terminal_id`). A paused instance holds no memory or CPU, only disk (its layer and its saved ' +
          'memory). Answers once it is `paused`, with `pause.memory_kept` saying whether its memory was kept (false when asked, or ' +
          'on a runtime that cannot). Pausing a paused instance answers it as it is. Any command, file or terminal request resumes ' +
          'it; so does POST …/resume. It is removed after the profile\'s `paused_retention_s`.',
        tags: ['instances'],
        params: RoomParams,
        body: { ...PauseBody, examples: [{ memory: false }] },
        response: { 200: Instance, ...errorResponses(400, 401, 404, 409, 500, 503) },
      },
    },
    async (request) => {
      const { profile_id, room_id } = request.params;
      const caller = callerOf(request);
      const memory = request.body?.memory;
      return instances.pause(caller.organizationId, profile_id, room_id, { keyId: caller.keyId, ...(memory === undefined ? {} : { memory }) });
    },
  );

  app.post(
    `${ROOM_PATH}/resume`,
    {
      config: { auditAction: 'instance.resume' },
      schema: {
        operationId: 'resumeInstance',
        summary: 'Resume the room\'s paused instance',
        description:
          'Starts the paused instance\'s machine again over its files and answers once it is `ready`; a ready instance is answered ' +
          'as it is, and one being resumed is waited for. Quotas and host admission are checked as for a create (it takes memory ' +
          'again). A pause that kept memory is restored with its processes; if that memory cannot be restored, the instance is ' +
          'booted over its files instead and its last history entry (`ready`, `reason_code: "memory_lost"`) says why. If it cannot ' +
          'start at all, it stays paused and the answer is `instance_resume_failed`.',
        tags: ['instances'],
        params: RoomParams,
        response: { 200: Instance, ...errorResponses(400, 401, 403, 404, 409, 500, 503) },
      },
    },
    async (request) => {
      const { profile_id, room_id } = request.params;
      const caller = callerOf(request);
      return instances.resume(caller.organizationId, profile_id, room_id, { keyId: caller.keyId });
    },
  );

  app.post(
    `${ROOM_PATH}/keepalive`,
    {
      config: { auditAction: 'instance.keepalive' },
      schema: {
        operationId: 'keepAliveInstance',
        summary: 'Keep the room\'s instance alive',
        description:
          'Moves the instance\'s deadline to now + `timeout_s` (default: the `timeout_s` of its create; without either it keeps ' +
          'having none) and counts as activity for its idle limit. Answers the instance, its new deadline in `expires_at`. ' +
          'A paused instance stays paused (a resume restarts its deadline). The profile\'s `max_lifetime_s` still applies: ' +
          'a `timeout_s` above it is refused.',
        tags: ['instances'],
        params: RoomParams,
        body: { ...KeepAliveBody, examples: [{ timeout_s: 600 }] },
        response: { 200: Instance, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const { profile_id, room_id } = request.params;
      const timeoutS = request.body?.timeout_s;
      return instances.keepAlive(callerOf(request).organizationId, profile_id, room_id, timeoutS === undefined ? {} : { timeout_s: timeoutS });
    },
  );

  app.get(
    '/api/instances',
    {
      schema: {
        operationId: 'listInstances',
        summary: 'List instances',
        description:
          'The organization\'s instances, newest first, including stopped and failed ones. Pass `next_cursor` back as `cursor` for ' +
          'the next page. `metadata` keeps those carrying all the labels it names.',
        tags: ['instances'],
        querystring: Type.Object(
          {
            profile_id: Type.Optional(Type.String({ format: 'uuid' })),
            state: Type.Optional(State),
            metadata: Type.Optional(Type.String({ maxLength: 16384, description: METADATA_QUERY_DESCRIPTION, examples: ['user%3Du-42%26app%3Dgrader'] })),
            limit: Type.Optional(Type.String({ pattern: '^(200|1[0-9]{2}|[1-9][0-9]?)$', description: '1-200, default 50' })),
            cursor: Type.Optional(Type.String({ maxLength: 512 })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: InstancePage,
          ...errorResponses(400, 401),
        },
      },
    },
    async (request) => {
      const { profile_id, state, metadata, limit, cursor } = request.query;
      return instances.list(callerOf(request).organizationId, {
        ...(metadata === undefined ? {} : { metadata: parseMetadataQuery(metadata) }),
        limit: limit === undefined ? 50 : Number(limit),
        ...(profile_id === undefined ? {} : { profileId: profile_id }),
        ...(state === undefined ? {} : { state }),
        ...(cursor === undefined ? {} : { cursor }),
      });
    },
  );
}
