// The two ways a call fails: the server answered with an error (RoomkitError, carrying
// the API's stable code), or no usable answer came at all (RoomkitConnectionError).
import type { KnownErrorCode } from './generated/api.ts';

/** A code the server defines, or a newer one this SDK does not know yet. */
export type ErrorCode = KnownErrorCode | (string & {});

export interface RoomkitErrorInit {
  status: number;
  code: ErrorCode;
  message: string;
  details?: Record<string, unknown> | undefined;
  requestId?: string | undefined;
  problem?: string | undefined;
  hint?: ErrorHint | undefined;
}

/** What to do next, as the server gives it: a stable code and the values it names (e.g. profile_id, room_id). */
export interface ErrorHint {
  code: string;
  [param: string]: string | number | undefined;
}

/**
 * The server answered with an error body: branch on `code`, show `message` to people.
 * `message` gives what to do next as an SDK call where the server says what (`hint`).
 */
export class RoomkitError extends Error {
  /** The HTTP status; 500 for an `error` event that ends a streamed command. */
  readonly status: number;
  /** The stable error code (the body's `error`), e.g. `instance_not_found`. */
  readonly code: ErrorCode;
  /** Structured context some codes carry, e.g. `state` for `instance_not_ready`. */
  readonly details: Record<string, unknown> | undefined;
  /** The request's X-Request-Id; the server's log has the same id. */
  readonly requestId: string | undefined;
  /** With a hint: what went wrong, without what to do about it. */
  readonly problem: string | undefined;
  /** What to do next as data (the server's hint code and its values), when the server says. */
  readonly hint: ErrorHint | undefined;

  constructor(init: RoomkitErrorInit) {
    super(init.message);
    this.name = 'RoomkitError';
    this.status = init.status;
    this.code = init.code;
    this.details = init.details;
    this.requestId = init.requestId;
    this.problem = init.problem;
    this.hint = init.hint;
  }
}

export type ConnectionErrorCode =
  /** The server could not be reached, or the connection broke before an answer. */
  | 'connection_failed'
  /** No answer within the client's `timeoutMs`. */
  | 'timeout'
  /** A streamed command's connection ended before its result; the command may still run. */
  | 'stream_interrupted';

/** No usable answer from the server: it is down, unreachable, too slow, or the stream broke. */
export class RoomkitConnectionError extends Error {
  readonly code: ConnectionErrorCode;
  readonly method: string;
  readonly url: string;
  /** For `stream_interrupted`: the command's id, to follow it with `room.command(id)`. */
  readonly commandId: string | undefined;

  constructor(init: { code: ConnectionErrorCode; message: string; method: string; url: string; cause?: unknown; commandId?: string | undefined }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'RoomkitConnectionError';
    this.code = init.code;
    this.method = init.method;
    this.url = init.url;
    this.commandId = init.commandId;
  }
}
