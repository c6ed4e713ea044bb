// Snapshots of a room's instance, forks of it into other rooms, and the organization's
// snapshots. A create from a snapshot is POST of a room with `snapshot_id` (rooms.ts).
import Type from 'typebox';
import type { Services } from '../../../services.ts';
import { callerOf } from '../../../http/auth.ts';
import { CreateSnapshotBody, ForkBody, ForkResult, Snapshot, SnapshotPage } from '../../../core/snapshot-schema.ts';
import { errorResponses, RoomParams } from '../../../http/schemas.ts';
import { IdempotencyKeyHeaders } from '../../../http/idempotency.ts';
import type { App } from '../../../http/types.ts';

const ROOM_PATH = '/api/profile/:profile_id/room/:room_id';
const SnapshotParams = Type.Object({ snapshot_id: Type.String({ format: 'uuid' }) });

export function snapshotRoutes(app: App, { snapshots }: Services): void {
  app.post(
    `${ROOM_PATH}/snapshots`,
    {
      config: { auditAction: 'snapshot.create', idempotency: {} },
      schema: {
        operationId: 'createSnapshot',
        summary: 'Take a snapshot of the room\'s instance',
        description:
          'Saves the instance\'s file system, and by default its memory and processes, under a new snapshot id that the ' +
          'organization owns; it outlives the instance. The instance may be ready (it is held still for the moment the copy ' +
          'takes, then goes on running) or paused (it stays paused; its memory is in the snapshot when its pause kept it). Only ' +
          'its writable layer and its memory are stored, so a snapshot costs the disk the instance\'s changes and memory take ' +
          '(`disk_bytes`), not its disk size; `memory_kept` says whether memory was saved too (`memory: false` asks for files ' +
          'only). Start instances from it with `snapshot_id` in a create body: from a snapshot with memory they start with its ' +
          'processes running, at their own address. Counts against the `snapshots` quota.',
        tags: ['snapshots'],
        params: RoomParams,
        headers: IdempotencyKeyHeaders,
        body: Type.Optional(CreateSnapshotBody),
        response: { 201: Snapshot, ...errorResponses(400, 401, 403, 404, 409, 422, 500, 503, 507) },
      },
    },
    async (request, reply) => {
      const { profile_id, room_id } = request.params;
      const snapshot = await snapshots.create(callerOf(request).organizationId, profile_id, room_id, {
        ...(request.body?.name === undefined ? {} : { name: request.body.name }),
        ...(request.body?.memory === undefined ? {} : { memory: request.body.memory }),
      });
      return reply.code(201).send(snapshot);
    },
  );

  app.post(
    `${ROOM_PATH}/fork`,
    {
      config: { auditAction: 'instance.fork', idempotency: {} },
      schema: {
        operationId: 'forkInstance',
        summary: 'Fork the room\'s instance into other rooms',
        description:
          'Starts a copy of the instance in each room of `rooms` (same profile), in one call: a snapshot (with its memory and ' +
          'processes unless `memory` is false), then one new instance from it per room. The source goes on running. Each copy ' +
          'has its own id, address, files and memory from then on; with memory, its processes go on from the moment of the ' +
          'snapshot (established TCP connections are dropped, listeners stay). ' +
          'Answers once every copy is ready or failed (a failed one is in the list with its `failure_reason`). A refusal ' +
          '(a room that has a live instance: `room_occupied`; a quota) starts none. The snapshot is deleted afterwards ' +
          'unless `keep_snapshot` is true.',
        tags: ['snapshots'],
        params: RoomParams,
        headers: IdempotencyKeyHeaders,
        body: ForkBody,
        response: { 201: ForkResult, ...errorResponses(400, 401, 403, 404, 409, 422, 500, 503, 507) },
      },
    },
    async (request, reply) => {
      const { profile_id, room_id } = request.params;
      const result = await snapshots.fork(callerOf(request).organizationId, profile_id, room_id, {
        rooms: request.body.rooms,
        keepSnapshot: request.body.keep_snapshot ?? false,
        ...(request.body.memory === undefined ? {} : { memory: request.body.memory }),
      });
      return reply.code(201).send(result);
    },
  );

  app.get(
    '/api/snapshots',
    {
      schema: {
        operationId: 'listSnapshots',
        summary: 'List snapshots',
        description: 'The organization\'s snapshots, newest first. Pass `next_cursor` back as `cursor` for the next page.',
        tags: ['snapshots'],
        querystring: Type.Object(
          {
            instance_id: Type.Optional(Type.String({ format: 'uuid', description: 'Only snapshots taken of this instance' })),
            limit: Type.Optional(Type.String({ pattern: '^(200|1[0-9]{2}|[1-9][0-9]?)$', description: '1-200, default 50' })),
            cursor: Type.Optional(Type.String({ maxLength: 512 })),
          },
          { additionalProperties: false },
        ),
        response: { 200: SnapshotPage, ...errorResponses(400, 401) },
      },
    },
    async (request) => {
      const { instance_id, limit, cursor } = request.query;
      return snapshots.list(callerOf(request).organizationId, {
        limit: limit === undefined ? 50 : Number(limit),
        ...(instance_id === undefined ? {} : { instanceId: instance_id }),
        ...(cursor === undefined ? {} : { cursor }),
      });
    },
  );

  app.get(
    '/api/snapshots/:snapshot_id',
    {
      schema: {
        operationId: 'getSnapshot',
        summary: 'Get a snapshot',
        tags: ['snapshots'],
        params: SnapshotParams,
        response: { 200: Snapshot, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => snapshots.get(callerOf(request).organizationId, request.params.snapshot_id),
  );

  app.delete(
    '/api/snapshots/:snapshot_id',
    {
      config: { auditAction: 'snapshot.delete' },
      schema: {
        operationId: 'deleteSnapshot',
        summary: 'Delete a snapshot',
        description: 'Deletes the snapshot and frees its disk; instances started from it keep their own files. Answers with the snapshot as it was.',
        tags: ['snapshots'],
        params: SnapshotParams,
        response: { 200: Snapshot, ...errorResponses(400, 401, 404, 503) },
      },
    },
    async (request) => snapshots.delete(callerOf(request).organizationId, request.params.snapshot_id),
  );
}
