// The shape of a revert's answer (POST .../commands/{command_id}/revert): the files the
// revert changed, listed as a command's files_changed are. The one source of its fields
// for the route, core/reverts.ts and the SDK.
import Type from 'typebox';
import { FileChange } from './command-schema.ts';

export const RevertResult = Type.Object(
  {
    command_id: Type.String({ format: 'uuid', description: 'The command whose changes were put back' }),
    instance_id: Type.String({ format: 'uuid' }),
    files_changed: Type.Array(FileChange, { description: 'Regular files the revert created, modified or deleted, sorted by path (as a command\'s files_changed)' }),
    files_changed_total: Type.Integer(),
    files_changed_truncated: Type.Boolean(),
    files_changed_method: Type.Optional(Type.Enum(['fanotify', 'walk'], { description: 'How files_changed was made, as for a command' })),
    forced: Type.Boolean({ description: 'Whether it was forced over later commands that changed the same files' }),
    duration_ms: Type.Integer(),
  },
  { title: 'RevertResult' },
);
export type RevertResult = Type.Static<typeof RevertResult>;
