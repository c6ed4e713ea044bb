// The shapes of snapshots and forks as the API shows them. These TypeBox schemas are the
// one source of their fields for the routes (validation, OpenAPI) and for core/.
import Type from 'typebox';
import { ROOM_ID_PATTERN } from '../lib/ids.ts';
import { Instance } from './instance-schema.ts';

/** Rooms one fork may make instances in. */
export const FORK_MAX_ROOMS = 20;

export const Snapshot = Type.Object(
  {
    snapshot_id: Type.String({ format: 'uuid' }),
    name: Type.Union([Type.String(), Type.Null()], { description: 'The name given when it was taken; null when none was' }),
    state: Type.Union([Type.Literal('creating'), Type.Literal('ready')], {
      description: '`creating` while its files are copied (a POST answers once it is `ready`), then `ready`',
    }),
    instance_id: Type.String({ format: 'uuid', description: 'The instance it was taken of' }),
    profile_id: Type.String({ format: 'uuid', description: 'The profile of that instance' }),
    room_id: Type.String({ description: 'The room of that instance' }),
    image: Type.String({ description: 'The image its files sit on; an instance started from it runs on the same image' }),
    disk_mb: Type.Integer({ description: 'Size of its writable layer; an instance started from it has this disk size' }),
    disk_bytes: Type.Integer({
      description: 'Bytes of host disk it holds: the blocks its writable layer uses (the image is shared, not copied)',
    }),
    memory_kept: Type.Boolean({
      description:
        'Whether its memory and processes were saved too: an instance started from it goes on running them (at its own address; ' +
        'established TCP connections are not kept). False: its files only (asked with `memory: false`, a paused instance whose ' +
        'pause kept files only, or a runtime that cannot save memory)',
    }),
    created_at: Type.String({ format: 'date-time' }),
  },
  {
    title: 'Snapshot',
    examples: [
      {
        snapshot_id: '0b6f4f0e-3c57-4f5e-9d43-3f1c2a9e8b11',
        name: 'after-setup',
        state: 'ready',
        instance_id: 'f3c13fec-9952-415d-a499-41fcc0919947',
        profile_id: '83525a5b-df45-413c-93d9-702bc5133445',
        room_id: 'session-1',
        image: 'debian:bookworm',
        disk_mb: 2048,
        disk_bytes: 2158592,
        memory_kept: false,
        created_at: '2026-11-24T09:12:03.114Z',
      },
    ],
  },
);
export type Snapshot = Type.Static<typeof Snapshot>;

export const SnapshotPage = Type.Object({
  snapshots: Type.Array(Snapshot),
  next_cursor: Type.Union([Type.String(), Type.Null()]),
});
export type SnapshotPage = Type.Static<typeof SnapshotPage>;

export const CreateSnapshotBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'A name of yours for it (not unique)' })),
    memory: Type.Optional(
      Type.Boolean({
        default: true,
        description:
          'Save the instance\'s memory and processes too (where the runtime can; a paused instance\'s only when its pause kept them): ' +
          'instances started from it go on running them. false: its files only',
      }),
    ),
  },
  { additionalProperties: false },
);
export type CreateSnapshotBody = Type.Static<typeof CreateSnapshotBody>;

export const ForkBody = Type.Object(
  {
    rooms: Type.Array(Type.String({ pattern: ROOM_ID_PATTERN }), {
      minItems: 1,
      maxItems: FORK_MAX_ROOMS,
      uniqueItems: true,
      description: `Rooms of the same profile to start the copies in, 1-${FORK_MAX_ROOMS}; none may have a live instance`,
    }),
    memory: Type.Optional(
      Type.Boolean({
        default: true,
        description:
          'Copy the instance\'s memory and processes into each copy (where the runtime can): they go on running there, the source ' +
          'goes on running too. false: files only, each copy boots over them',
      }),
    ),
    keep_snapshot: Type.Optional(
      Type.Boolean({ default: false, description: 'Keep the snapshot the fork was made from (answered as `snapshot`); by default it is deleted once every copy has started' }),
    ),
  },
  { additionalProperties: false },
);
export type ForkBody = Type.Static<typeof ForkBody>;

export const ForkResult = Type.Object(
  {
    instances: Type.Array(Instance, {
      description: 'One per room, in the order asked: `ready`, or `failed` with its `failure_reason` when that copy could not start',
    }),
    snapshot: Type.Union([Snapshot, Type.Null()], { description: 'The snapshot the copies were made from, with `keep_snapshot`; null otherwise' }),
  },
  { title: 'ForkResult' },
);
export type ForkResult = Type.Static<typeof ForkResult>;
