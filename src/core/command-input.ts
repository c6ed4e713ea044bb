// What a request asks a command to be: its text, environment and input, checked before
// it starts; its standard input as the API gives it (a one-shot `stdin` decoded and
// bounded at start, and, for a command started with `stdin_open`, the writes that
// follow while it runs, one at a time and in the order they came).
import { AppError } from '../errors.ts';
import { Serial } from '../lib/keyed-serial.ts';

export const STDIN_ENCODINGS = ['utf8', 'base64'] as const;
export type StdinEncoding = (typeof STDIN_ENCODINGS)[number];

/** Longest command accepted, in UTF-8 bytes (it travels as one argument to the instance). */
export const MAX_COMMAND_BYTES = 64 * 1024;
/** Environment variable names a request may not set: they mark the command's processes. */
export const RESERVED_ENV_PREFIX = 'ROOMKIT_';

export interface CommandInput {
  command: string;
  /**
   * A program and its arguments to run directly rather than `command` under `sh -c`
   * (an adapter's, never the REST API's: E2B names a program); `command` is then their
   * text, which the record keeps and the checks below bound.
   */
  argv?: string[];
  timeout_s?: number;
  /** Silence limit, seconds (0: none); default the profile's command_idle_output_timeout_s. */
  idle_output_timeout_s?: number;
  cwd?: string;
  env?: Record<string, string>;
  /** Start it and answer at once; follow it with GET .../commands/{id}. */
  background?: boolean;
  /** Given to the command's stdin at once (then closed): text, or base64 with stdin_encoding. */
  stdin?: string;
  stdin_encoding?: StdinEncoding;
  /** Keep stdin open for writes while it runs (background commands only). */
  stdin_open?: boolean;
  /** Keep the undo point of this command (default: the profile's keep_undo). */
  keep_undo?: boolean;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * The bytes of input given as text (UTF-8) or base64, at most `maxBytes` of them.
 * `field` names it in errors (`stdin`, `data`).
 */
export function decodeInput(text: string, encoding: StdinEncoding | undefined, maxBytes: number, field: string): Buffer {
  let bytes: Buffer;
  if (encoding === 'base64') {
    if (!BASE64.test(text)) throw new AppError('validation_error', `${field} is not valid base64 (the standard alphabet, with padding, no line breaks)`);
    bytes = Buffer.from(text, 'base64');
  } else {
    bytes = Buffer.from(text, 'utf8');
  }
  if (bytes.length > maxBytes) {
    throw new AppError(
      'stdin_too_large',
      `${field} is ${bytes.length} bytes, more than the ${maxBytes} one request may give (ROOMKIT_MAX_STDIN_BYTES)`,
      { bytes: bytes.length, max_bytes: maxBytes },
      { code: 'stdin_in_file' },
    );
  }
  return bytes;
}

/** The open stdin of a running command: writes in order, then its end. */
export class OpenStdin {
  /** Bytes written so far. */
  total = 0;
  closed = false;
  /** The writes under way, one after another. */
  private readonly writes = new Serial();

  /**
   * Writes `data` (when not empty), then closes the input if `close`, through `send`
   * (the runtime's sendInput, which resolves false when the command no longer runs).
   * Resolves with whether the command took it; a write after the close is refused.
   */
  write(data: Buffer, close: boolean, send: (data: Buffer | null) => Promise<boolean>): Promise<boolean> {
    const step = this.writes.run(async () => {
      if (this.closed) return 'closed' as const;
      if (data.length > 0) {
        if (!(await send(data))) return false;
        this.total += data.length;
      }
      if (close) {
        if (!(await send(null))) return false;
        this.closed = true;
      }
      return true;
    });
    return step.then((outcome) => {
      if (outcome === 'closed') throw new AppError('stdin_not_open', 'the command\'s stdin was closed already; it takes no more input');
      return outcome;
    });
  }
}

export function validateCommandInput(input: CommandInput): void {
  if (input.command.trim() === '') throw new AppError('validation_error', 'command is empty; send the shell command to run, e.g. {"command": "ls -la"}');
  if (Buffer.byteLength(input.command) > MAX_COMMAND_BYTES) {
    throw new AppError(
      'validation_error',
      `command is ${Buffer.byteLength(input.command)} bytes, more than the ${MAX_COMMAND_BYTES} accepted`,
      undefined,
      { code: 'command_in_file' },
    );
  }
  if (input.command.includes('\0')) throw new AppError('validation_error', 'command contains a NUL character, which a shell command cannot carry');
  for (const name of Object.keys(input.env ?? {})) {
    if (name.startsWith(RESERVED_ENV_PREFIX)) throw new AppError('validation_error', `env ${name}: names starting with ${RESERVED_ENV_PREFIX} are reserved`);
  }
  if (input.cwd?.includes('\0')) throw new AppError('validation_error', 'cwd contains a NUL character');
  if (input.argv !== undefined && (input.argv.length === 0 || input.argv[0] === '' || input.argv.some((word) => word.includes('\0')))) {
    throw new AppError('validation_error', 'the program to run is empty or contains a NUL character');
  }
}
