// Names for the shapes the SDK's methods take and return, all derived from the
// generated API types so that they follow the server's schemas.
import type { Instance, Paths } from './generated/api.ts';

export type {
  ApiKey,
  CommandRecord,
  CommandResult,
  CommandStatus,
  Context,
  ContextCreate,
  ContextInterrupted,
  ContextRunResult,
  CreatedApiKey,
  DisplayResult,
  ErrorBody,
  ExecutionError,
  FileChange,
  FileContent,
  FileWritten,
  ForkResult,
  Instance,
  KnownErrorCode,
  Paths,
  PortUrl,
  Profile,
  RevertResult,
  Snapshot,
  Template,
  TemplateBuildStarted,
  Usage,
} from './generated/api.ts';

type RoomPath = '/api/profile/{profile_id}/room/{room_id}';
type CommandBody = Paths[`${RoomPath}/command`]['post']['body'];

export type InstanceState = Instance['state'];
export type ProfileCreate = Paths['/api/profiles']['post']['body'];
export type ProfileUpdate = Paths['/api/profiles/{profile_id}']['patch']['body'];
export type KeyCreate = Paths['/api/keys']['post']['body'];
export type Health = Paths['/healthz']['get']['responses'][200];
export type InstancePage = Paths['/api/instances']['get']['responses'][200];
export type SnapshotPage = Paths['/api/snapshots']['get']['responses'][200];
export type TemplateList = Paths['/api/templates']['get']['responses'][200];
export type CommandPage = Paths[`${RoomPath}/commands`]['get']['responses'][200];
export type DirectoryListing = Paths[`${RoomPath}/files`]['get']['responses'][200];
export type DirectoryEntry = DirectoryListing['entries'][number];
export type FileDeleted = Paths[`${RoomPath}/file/{path}`]['delete']['responses'][200];
export type KillSignal = NonNullable<Paths[`${RoomPath}/commands/{command_id}/kill`]['post']['body']['signal']>;
export type StdinWritten = Paths[`${RoomPath}/commands/{command_id}/stdin`]['post']['responses'][200];
/** How a command runs: time limit, working directory, extra environment, its input. */
export type ExecOptions = Omit<CommandBody, 'command' | 'stream' | 'kill_on_disconnect' | 'background' | 'stdin' | 'stdin_encoding' | 'stdin_open'> & {
  /** Given to the command's stdin, which is then closed: text (sent as UTF-8) or bytes (sent as base64). */
  stdin?: string | Uint8Array;
};
/** Where a piece of streamed output came from: `output` when the instance cannot tell stdout and stderr apart. */
export type OutputStream = 'stdout' | 'stderr' | 'output';
/** Data sent to `started` listeners of a streamed command. */
export interface CommandStarted {
  command_id: string;
  instance_id: string;
  started_at: string;
}
