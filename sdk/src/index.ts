// roomkit's TypeScript SDK: `new Roomkit()`, then `rk.room(profile, room)` to create an
// instance, run commands in it and move files in and out. Everything public is
// exported from here.
export { DEFAULT_BASE_URL, Instances, Keys, Profiles, Roomkit, Snapshots, type InstanceFilter, type RoomkitOptions, type SnapshotFilter } from './client.ts';
export { CodeContext, RoomContexts, type RunOptions } from './contexts.ts';
export { RoomkitConnectionError, RoomkitError, type ConnectionErrorCode, type ErrorCode, type ErrorHint, type RoomkitErrorInit } from './errors.ts';
export { API_VERSION } from './generated/api.ts';
export { CommandHandle, contentBytes, Room, RoomPorts, type CreateOptions, type ExecBackgroundOptions, type ExecStreamOptions, type InstanceOptions, type RawFile, type WaitOptions } from './room.ts';
export { newIdempotencyKey, type IdempotentOptions, type RequestOptions } from './http.ts';
export { Templates, type TemplateBuildInput } from './templates.ts';
export { Terminal, TerminalClosedError, type TerminalClosedReason, type TerminalOptions, type WebSocketConstructor } from './terminal.ts';
export type * from './types.ts';
