// A room of a profile and its instance: create it, run commands in it, move files in
// and out, delete it. The room is addressed by (profile, room) as the API does; a
// profile given by name is resolved on first use.
// Over 400 lines: the Room class is the SDK's whole surface for one room (instance,
// commands, files, terminals, ports, snapshots), and a class's methods read best together
// (code contexts are a class of their own, contexts.ts).
import { RoomContexts } from './contexts.ts';
import { type ErrorHint, RoomkitConnectionError, RoomkitError } from './errors.ts';
import { sdkMessage } from './hint-wording.ts';
import type { CommandResult, CommandStatus, FileContent, FileWritten, ForkResult, Instance, Paths, PortUrl, RevertResult, Snapshot } from './generated/api.ts';
import { type IdempotentOptions, newIdempotencyKey, readEvents, type RequestOptions, type Transport } from './http.ts';
import { fromBase64, sleep, toBase64 } from './portable.ts';
import { openTerminal, type Terminal, type TerminalOptions, type WebSocketConstructor } from './terminal.ts';
import type {
  CommandPage,
  CommandStarted,
  DirectoryListing,
  ExecOptions,
  FileDeleted,
  KillSignal,
  OutputStream,
  StdinWritten,
} from './types.ts';

const ROOM = '/api/profile/{profile_id}/room/{room_id}' as const;
const DEFAULT_POLL_MS = 500;

/** What a Room needs from the client that made it. */
export interface RoomContext {
  transport: Transport;
  resolveProfileId(profile: string, options?: RequestOptions): Promise<string>;
  /** The profile's home directory, to make relative paths absolute for the raw endpoint. */
  homeOf(profileId: string, options?: RequestOptions): Promise<string>;
  pollIntervalMs: number;
  /** The WebSocket terminals use when the runtime has no global one (RoomkitOptions.WebSocket). */
  WebSocket?: WebSocketConstructor | undefined;
}

/** What a create may ask beyond the profile: env for its commands, labels, a deadline. */
export type InstanceOptions = Omit<Paths[typeof ROOM]['post']['body'], 'wait'>;
/** An egress policy, as PUT …/network takes it. */
export type NetworkBody = Paths['/api/profile/{profile_id}/room/{room_id}/network']['put']['body'];

export interface CreateOptions extends RequestOptions, IdempotentOptions, InstanceOptions {
  /** Answer once the instance is ready (default true); false answers at once, still provisioning. */
  wait?: boolean;
  /**
   * Called with the instance when creation starts and whenever its state or progress
   * text changes. With it, the SDK creates without waiting and polls, so a long image
   * build can be shown as it goes.
   */
  onProgress?: (instance: Instance) => void;
  /** Between polls when onProgress is given; default the client's pollIntervalMs. */
  pollIntervalMs?: number;
}

export interface ExecStreamOptions extends ExecOptions, RequestOptions {
  /**
   * Output as the command prints it; `offset` is the byte offset of `data` in the whole
   * output, `stream` where it came from (`output` when the instance cannot tell stdout
   * and stderr apart).
   */
  onOutput?: (data: string, info: { offset: number; stream: OutputStream }) => void;
  onStarted?: (started: CommandStarted) => void;
  /** Kill the command if this client goes away before it ends (default: it runs on). */
  killOnDisconnect?: boolean;
}

export interface RawFile {
  /** The file's bytes (or the asked range) as they arrive. */
  body: ReadableStream<Uint8Array>;
  /** 200, or 206 for a range. */
  status: number;
  contentType: string;
  /** Bytes in `body`, when the server said. */
  length: number | undefined;
  etag: string | undefined;
}

export interface ExecBackgroundOptions extends ExecOptions, RequestOptions, IdempotentOptions {
  /**
   * Keep the command's stdin open (after `stdin`, if given) for `sendStdin` and
   * `closeStdin`. Needs roomkit's agent in the instance (RoomkitError
   * `feature_unavailable` without it).
   */
  stdinOpen?: boolean;
}

/** The request body's stdin fields for an input given as text or bytes. */
function stdinFields(stdin: string | Uint8Array | undefined): { stdin?: string; stdin_encoding?: 'utf8' | 'base64' } {
  if (stdin === undefined) return {};
  if (typeof stdin === 'string') return { stdin };
  return { stdin: toBase64(stdin), stdin_encoding: 'base64' };
}

/** The body of a write to a command's stdin. */
function stdinWrite(data: string | Uint8Array | undefined, close: boolean): { data?: string; encoding?: 'utf8' | 'base64'; close?: boolean } {
  const closing = close ? { close: true } : {};
  if (data === undefined) return closing;
  if (typeof data === 'string') return { data, ...closing };
  return { data: toBase64(data), encoding: 'base64', ...closing };
}

export class Room {
  readonly profile: string;
  readonly roomId: string;
  /** Programs listening on ports of the room's instance, reached from outside. */
  readonly ports: RoomPorts;
  /** Code contexts of the room's instance: interpreters that keep their state between runs. */
  readonly contexts: RoomContexts;
  readonly #ctx: RoomContext;

  constructor(ctx: RoomContext, profile: string, roomId: string) {
    this.#ctx = ctx;
    this.profile = profile;
    this.roomId = roomId;
    this.ports = new RoomPorts(ctx, (options) => this.#params(options));
    this.contexts = new RoomContexts(ctx.transport, (options) => this.#params(options));
  }

  /** The profile's id, resolving a name through GET /api/profiles once. */
  profileId(options: RequestOptions = {}): Promise<string> {
    return this.#ctx.resolveProfileId(this.profile, options);
  }

  async #params(options: RequestOptions): Promise<{ profile_id: string; room_id: string }> {
    return { profile_id: await this.profileId(options), room_id: this.roomId };
  }

  /**
   * Opens an interactive terminal in the room's ready instance (its user's login shell,
   * or `command`) over a WebSocket: write() input, onData() output, resize(), close();
   * `exited` is the program's exit code.
   */
  async terminal(options: TerminalOptions = {}): Promise<Terminal> {
    return openTerminal(this.#ctx.transport, await this.#params(options), options, this.#ctx.WebSocket);
  }

  /**
   * Creates the room's instance, or returns the live one it already has. Safe to retry
   * (the server keeps one live instance per room), so connection errors and 502-504
   * are retried. A start failure throws RoomkitError `instance_start_failed`. `env`,
   * `metadata` and `timeout_s` are the instance's (env values are never answered back);
   * a live instance made with other ones answers RoomkitError `instance_options_conflict`.
   * `snapshot_id` starts it from a snapshot of the organization (`room.snapshot()`) instead
   * of the profile's image; a room whose live instance started otherwise answers
   * RoomkitError `room_occupied`.
   */
  async create(options: CreateOptions = {}): Promise<Instance> {
    const params = await this.#params(options);
    const { onProgress } = options;
    const wait = options.wait ?? true;
    const asked = {
      ...(options.env === undefined ? {} : { env: options.env }),
      ...(options.metadata === undefined ? {} : { metadata: options.metadata }),
      ...(options.timeout_s === undefined ? {} : { timeout_s: options.timeout_s }),
      ...(options.snapshot_id === undefined ? {} : { snapshot_id: options.snapshot_id }),
    };
    const idempotencyKey = options.idempotencyKey ?? newIdempotencyKey();
    const send = (waitForReady: boolean) =>
      this.#ctx.transport.json('post', ROOM, { params, body: { wait: waitForReady, ...asked } }, { idempotencyKey, signal: options.signal });
    if (onProgress === undefined) return send(wait);

    let instance = await send(false);
    onProgress(instance);
    const interval = options.pollIntervalMs ?? this.#ctx.pollIntervalMs;
    while (wait && instance.state !== 'ready') {
      if (instance.state === 'failed' || instance.state === 'lost' || instance.state === 'stopping' || instance.state === 'stopped') throw startFailure(instance);
      await sleep(interval, options.signal);
      const next = await this.#ctx.transport.json('get', ROOM, { params }, { signal: options.signal });
      const changed = next.instance_id !== instance.instance_id || next.state !== instance.state || next.progress !== instance.progress;
      instance = next;
      if (changed) onProgress(instance);
    }
    return instance;
  }

  /** The room's instance: the live one, or the last one if it failed. */
  async get(options: RequestOptions = {}): Promise<Instance> {
    return this.#ctx.transport.json('get', ROOM, { params: await this.#params(options) }, options);
  }

  /** Stops and removes the instance; answers with its final state. Not retried: a repeat would answer instance_not_found. */
  async delete(options: RequestOptions = {}): Promise<Instance> {
    return this.#ctx.transport.json('delete', ROOM, { params: await this.#params(options) }, options);
  }

  /**
   * Pauses the instance: its machine stops, its files stay and, unless `memory: false`,
   * its memory and running processes too (`pause.memory_kept` says whether they were:
   * established TCP connections are dropped either way); any later request, or
   * resume(), brings it back. Pausing a paused instance answers it as it is, so this is
   * safe to retry.
   */
  async pause(options: { memory?: boolean } & RequestOptions = {}): Promise<Instance> {
    const body = options.memory === undefined ? {} : { memory: options.memory };
    return this.#ctx.transport.json('post', `${ROOM}/pause`, { params: await this.#params(options), body }, { signal: options.signal, idempotent: true });
  }

  /**
   * Moves the instance's deadline to now + `timeout_s` (default: its create's) and counts
   * as activity for its idle limit; the instance answers with the deadline in `expires_at`.
   * Safe to retry.
   */
  async keepAlive(options: { timeout_s?: number } & RequestOptions = {}): Promise<Instance> {
    const body = options.timeout_s === undefined ? {} : { timeout_s: options.timeout_s };
    return this.#ctx.transport.json('post', `${ROOM}/keepalive`, { params: await this.#params(options), body }, { signal: options.signal, idempotent: true });
  }

  /**
   * Replaces the instance's egress policy while it runs (a paused one gets it at its
   * resume): `egress` `internet`, `none` or `allowlist` with `allow` and `deny` entries.
   * Connections through the egress proxy are ended. Answers the policy now in force; a
   * PUT, so safe to retry.
   */
  async setNetwork(network: NetworkBody, options: RequestOptions = {}): Promise<NetworkBody & { allow: string[]; deny: string[] }> {
    return this.#ctx.transport.json('put', `${ROOM}/network`, { params: await this.#params(options), body: network }, { signal: options.signal });
  }

  /**
   * Saves the instance's files, and its memory and processes unless `memory: false`
   * (ready or paused; it stays as it was), as a snapshot the organization owns, and
   * answers once it is `ready` (`memory_kept` says whether memory was saved). It
   * outlives the instance: start instances from it in any room with
   * `create({ snapshot_id })`, running its processes when it kept them;
   * `client.snapshots` lists and deletes them. Retried with the same Idempotency-Key
   * (`idempotencyKey`, or one of its own), so a retry never takes a second snapshot.
   */
  async snapshot(options: { name?: string; memory?: boolean } & RequestOptions & IdempotentOptions = {}): Promise<Snapshot> {
    const body = { ...(options.name === undefined ? {} : { name: options.name }), ...(options.memory === undefined ? {} : { memory: options.memory }) };
    return this.#ctx.transport.json(
      'post',
      `${ROOM}/snapshots`,
      { params: await this.#params(options), body },
      { signal: options.signal, idempotencyKey: options.idempotencyKey ?? newIdempotencyKey() },
    );
  }

  /**
   * Starts a copy of the instance in each of `rooms` (same profile, none with a live
   * instance), in one call, and answers once every copy is ready or failed: one
   * instance per room in that order, a failed one with its `failure_reason`. Each copy
   * goes on running the instance's processes from its memory, at its own address,
   * unless `memory: false` (files only); the source goes on running. A refusal
   * (RoomkitError `room_occupied`, a quota) starts none. The snapshot the copies come from
   * is deleted afterwards unless `keepSnapshot` (then it is the answer's `snapshot`).
   * Retried with the same Idempotency-Key (`idempotencyKey`, or one of its own): a
   * retry answers the first fork's result.
   */
  async fork(rooms: string[], options: { keepSnapshot?: boolean; memory?: boolean } & RequestOptions & IdempotentOptions = {}): Promise<ForkResult> {
    const body = {
      rooms,
      ...(options.keepSnapshot === undefined ? {} : { keep_snapshot: options.keepSnapshot }),
      ...(options.memory === undefined ? {} : { memory: options.memory }),
    };
    return this.#ctx.transport.json(
      'post',
      `${ROOM}/fork`,
      { params: await this.#params(options), body },
      { signal: options.signal, idempotencyKey: options.idempotencyKey ?? newIdempotencyKey() },
    );
  }

  /** Resumes a paused instance and answers once it is ready; a ready one is answered as it is (safe to retry). */
  async resume(options: RequestOptions = {}): Promise<Instance> {
    return this.#ctx.transport.json('post', `${ROOM}/resume`, { params: await this.#params(options) }, { ...options, idempotent: true });
  }

  /**
   * Runs a shell command and answers when it ends. A failing command is a result with a
   * non-zero exit_code, not an exception. Retried (on a lost connection, 502, 503, 504)
   * with the same Idempotency-Key on every try (`idempotencyKey`, or one of its own),
   * so the server runs it once however often it is retried.
   */
  async exec(command: string, options: ExecOptions & RequestOptions & IdempotentOptions = {}): Promise<CommandResult> {
    const { signal, stdin, idempotencyKey, ...body } = options;
    // Without `background` the server answers 200 with the result.
    return (await this.#ctx.transport.json(
      'post',
      `${ROOM}/command`,
      { params: await this.#params(options), body: { command, ...body, ...stdinFields(stdin) } },
      { signal, idempotencyKey: idempotencyKey ?? newIdempotencyKey() },
    )) as CommandResult;
  }

  /**
   * Runs a shell command, passing its output to onOutput as it is printed, and answers
   * with the same CommandResult as exec. If the connection breaks before the result,
   * throws RoomkitConnectionError `stream_interrupted` with the command's id: the
   * command runs on (unless killOnDisconnect) and `room.command(id)` follows it.
   */
  async execStream(command: string, options: ExecStreamOptions = {}): Promise<CommandResult> {
    const { signal, onOutput, onStarted, killOnDisconnect, stdin, ...rest } = options;
    const body = { command, ...rest, ...stdinFields(stdin), stream: true, ...(killOnDisconnect === undefined ? {} : { kill_on_disconnect: killOnDisconnect }) };
    const { response, url } = await this.#ctx.transport.send(
      'post',
      `${ROOM}/command`,
      { params: await this.#params(options), body },
      { signal, idempotent: false, stream: true, headers: { accept: 'text/event-stream' } },
    );
    if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      await response.body?.cancel();
      throw new RoomkitError({
        status: response.status,
        code: 'unexpected_response',
        message: `POST ${url} answered ${response.headers.get('content-type') ?? 'no content type'} instead of an event stream; the server may be older than this SDK`,
        requestId: response.headers.get('x-request-id') ?? undefined,
      });
    }
    const requestId = response.headers.get('x-request-id') ?? undefined;
    let commandId: string | undefined;
    const interrupted = (cause?: unknown) =>
      new RoomkitConnectionError({
        code: 'stream_interrupted',
        message: `the stream of the command ended before its result${commandId ? `; the command (${commandId}) may still be running` : ''}`,
        method: 'POST',
        url,
        cause,
        commandId,
      });
    try {
      for await (const { event, data } of readEvents(response.body as ReadableStream<Uint8Array>)) {
        if (event === 'started') {
          const started = JSON.parse(data) as CommandStarted;
          commandId = started.command_id;
          onStarted?.(started);
        } else if (event === 'output') {
          const piece = JSON.parse(data) as { data: string; offset: number; stream?: OutputStream };
          onOutput?.(piece.data, { offset: piece.offset, stream: piece.stream ?? 'output' });
        } else if (event === 'result') {
          return JSON.parse(data) as CommandResult;
        } else if (event === 'error') {
          const error = JSON.parse(data) as { error: string; message: string; problem?: string; hint?: ErrorHint; details?: Record<string, unknown>; request_id?: string };
          throw new RoomkitError({ status: 500, code: error.error, message: sdkMessage(error), details: error.details, requestId: error.request_id ?? requestId, problem: error.problem, hint: error.hint });
        }
      }
    } catch (err) {
      if (err instanceof RoomkitError) throw err;
      if (signal?.aborted) throw signal.reason;
      throw interrupted(err);
    }
    throw interrupted();
  }

  /**
   * Starts a command in the background and answers at once with a handle to follow it.
   * No time limit applies unless timeout_s is given. Retried with the same
   * Idempotency-Key, as `exec` is: it starts once.
   */
  async execBackground(command: string, options: ExecBackgroundOptions = {}): Promise<CommandHandle> {
    const { signal, stdin, stdinOpen, idempotencyKey, ...rest } = options;
    const status = (await this.#ctx.transport.json(
      'post',
      `${ROOM}/command`,
      { params: await this.#params(options), body: { command, ...rest, ...stdinFields(stdin), ...(stdinOpen ? { stdin_open: true } : {}), background: true } },
      { signal, idempotencyKey: idempotencyKey ?? newIdempotencyKey() },
    )) as CommandStatus;
    return this.#handle(status.command_id, status);
  }

  /**
   * Writes input to a running command started with `stdinOpen`: text (sent as UTF-8) or
   * bytes. Answers once the instance has taken it. Not retried: a repeat would write it twice.
   */
  async sendStdin(commandId: string, data: string | Uint8Array, options: { close?: boolean } & RequestOptions = {}): Promise<StdinWritten> {
    return this.#ctx.transport.json(
      'post',
      `${ROOM}/commands/{command_id}/stdin`,
      { params: { ...(await this.#params(options)), command_id: commandId }, body: stdinWrite(data, options.close === true) },
      { signal: options.signal, idempotent: false },
    );
  }

  /** Closes a running command's stdin: it reads end of input once it has read the rest. */
  async closeStdin(commandId: string, options: RequestOptions = {}): Promise<StdinWritten> {
    return this.#ctx.transport.json(
      'post',
      `${ROOM}/commands/{command_id}/stdin`,
      { params: { ...(await this.#params(options)), command_id: commandId }, body: stdinWrite(undefined, true) },
      { signal: options.signal, idempotent: false },
    );
  }

  /** A handle on a command of this room by its id (from a result, a status or the history). */
  command(commandId: string): CommandHandle {
    return this.#handle(commandId, undefined);
  }

  #handle(commandId: string, initial: CommandStatus | undefined): CommandHandle {
    const transport = this.#ctx.transport;
    const params = async (options: RequestOptions) => ({ ...(await this.#params(options)), command_id: commandId });
    return new CommandHandle(this, commandId, initial, {
      status: async (offset, options) =>
        transport.json('get', `${ROOM}/commands/{command_id}`, { params: await params(options), query: { offset: String(offset) } }, options),
      kill: async (signalName, options) =>
        transport.json('post', `${ROOM}/commands/{command_id}/kill`, { params: await params(options), body: { signal: signalName } }, { ...options, idempotent: false }),
      revert: async (force, options) =>
        transport.json('post', `${ROOM}/commands/{command_id}/revert`, { params: await params(options), body: force ? { force: true } : {} }, { ...options, idempotent: false }),
    });
  }

  /** The room's command history, newest first; pass `next_cursor` back as `cursor`. */
  async commands(options: { limit?: number; cursor?: string } & RequestOptions = {}): Promise<CommandPage> {
    const query = { ...(options.limit === undefined ? {} : { limit: String(options.limit) }), ...(options.cursor === undefined ? {} : { cursor: options.cursor }) };
    return this.#ctx.transport.json('get', `${ROOM}/commands`, { params: await this.#params(options), query }, options);
  }

  /**
   * Reads a file as JSON: text as it is, binary as base64 (`encoding` says which; see
   * `contentBytes`). Relative paths are relative to the home directory.
   */
  async readFile(path: string, options: RequestOptions = {}): Promise<FileContent> {
    return this.#ctx.transport.json('get', `${ROOM}/file/{path}`, { params: { ...(await this.#params(options)), path } }, options);
  }

  /** A file's bytes, through the JSON endpoint (at most the server's JSON read limit; readRaw has none). */
  async readBytes(path: string, options: RequestOptions = {}): Promise<Uint8Array> {
    return contentBytes(await this.readFile(path, options));
  }

  /**
   * Opens a file through the unauthenticated raw endpoint (`/vm/{instance_id}/file/...`),
   * which streams any size and serves ranges. Relative paths are taken from the
   * profile's home directory.
   */
  async openRaw(path: string, options: { range?: { start: number; end?: number } } & RequestOptions = {}): Promise<RawFile> {
    const instance = await this.get(options);
    const absolute = path.startsWith('/') ? path : `${(await this.#ctx.homeOf(instance.profile_id, options)).replace(/\/$/, '')}/${path}`;
    const headers: Record<string, string> = { accept: '*/*' };
    if (options.range) headers.range = `bytes=${options.range.start}-${options.range.end ?? ''}`;
    const { response } = await this.#ctx.transport.send(
      'get',
      '/vm/{instance_id}/file/{path}',
      { params: { instance_id: instance.instance_id, path: absolute.replace(/^\/+/, '') } },
      { ...options, headers, stream: true },
    );
    const length = response.headers.get('content-length');
    return {
      body: response.body ?? new ReadableStream({ start: (c) => c.close() }),
      status: response.status,
      contentType: response.headers.get('content-type') ?? 'application/octet-stream',
      length: length === null ? undefined : Number(length),
      etag: response.headers.get('etag') ?? undefined,
    };
  }

  /** A file's bytes through the raw endpoint: any size, no base64. */
  async readRaw(path: string, options: { range?: { start: number; end?: number } } & RequestOptions = {}): Promise<Uint8Array> {
    const file = await this.openRaw(path, options);
    return new Uint8Array(await new Response(file.body).arrayBuffer());
  }

  /** Creates or replaces a file (and its parent directories). Strings are written as UTF-8. */
  async writeFile(path: string, data: string | Uint8Array, options: RequestOptions = {}): Promise<FileWritten> {
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    return this.#ctx.transport.json(
      'put',
      `${ROOM}/file/{path}`,
      { params: { ...(await this.#params(options)), path } },
      { ...options, rawBody: bytes },
    );
  }

  /** Lists a directory (default: the home directory). */
  async list(dir?: string, options: RequestOptions = {}): Promise<DirectoryListing> {
    return this.#ctx.transport.json('get', `${ROOM}/files`, { params: await this.#params(options), query: dir === undefined ? {} : { path: dir } }, options);
  }

  /** Deletes a file or link; directories are removed with a command. */
  async deleteFile(path: string, options: RequestOptions = {}): Promise<FileDeleted> {
    return this.#ctx.transport.json('delete', `${ROOM}/file/{path}`, { params: { ...(await this.#params(options)), path } }, options);
  }
}

/**
 * Ports of a room's instance: a server started in it (`python3 -m http.server 8000` in
 * the background) is reached with `fetch(8000, '/')`, or handed to a browser as
 * `(await url(8000)).url`.
 */
export class RoomPorts {
  readonly #ctx: RoomContext;
  readonly #params: (options: RequestOptions) => Promise<{ profile_id: string; room_id: string }>;

  constructor(ctx: RoomContext, params: (options: RequestOptions) => Promise<{ profile_id: string; room_id: string }>) {
    this.#ctx = ctx;
    this.#params = params;
  }

  /**
   * A signed URL that reaches the port without an API key until it expires (default
   * 1 hour; `expiresInS` up to the server's maximum): `url` to open in a browser (a
   * host name of its own when the server has a preview domain), `path_url` on the
   * server's own host. Anyone holding it reaches the port.
   */
  async url(port: number, options: { expiresInS?: number } & RequestOptions = {}): Promise<PortUrl> {
    const params = { ...(await this.#params(options)), port: String(port) };
    return this.#ctx.transport.json(
      'post',
      `${ROOM}/ports/{port}/url`,
      { params, body: options.expiresInS === undefined ? {} : { expires_in_s: options.expiresInS } },
      options,
    );
  }

  /** The host name of the port's preview URL (`{port}-{instance_id}.{domain}`), or undefined when the server has no preview domain. */
  async getHost(port: number, options: { expiresInS?: number } & RequestOptions = {}): Promise<string | undefined> {
    const signed = await this.url(port, options);
    return signed.host_url === undefined ? undefined : new URL(signed.host_url).host;
  }

  /**
   * Sends a request to the port with the API key and returns the program's answer as
   * it is (any status; the body a stream). The service's own refusals come as its
   * Error bodies: 502 `port_not_listening`, 504 `port_timeout`, 404 `instance_not_found`.
   * `path` is the program's path, from its leading slash, with any query.
   */
  async fetch(port: number, path = '/', init: RequestInit = {}): Promise<Response> {
    const { profile_id, room_id } = await this.#params({ signal: init.signal ?? undefined });
    const base = this.#ctx.transport.url(`${ROOM}/ports/{port}`, { profile_id, room_id, port: String(port) });
    return this.#ctx.transport.passThrough(`${base}${path.startsWith('/') ? path : `/${path}`}`, init);
  }
}

interface CommandCalls {
  status(offset: number, options: RequestOptions): Promise<CommandStatus>;
  kill(signal: KillSignal, options: RequestOptions): Promise<CommandStatus>;
  revert(force: boolean, options: RequestOptions): Promise<RevertResult>;
}

/** How wait() follows a command: its new output as it comes, how often it polls, from which byte. */
export type WaitOptions = { onOutput?: (data: string, info: { offset: number }) => void; pollIntervalMs?: number; offset?: number } & RequestOptions;

/** A command started in the background (or any command of the room, by id). */
export class CommandHandle {
  readonly room: Room;
  readonly commandId: string;
  /** The status this handle last saw, if any. */
  last: CommandStatus | undefined;
  readonly #calls: CommandCalls;

  constructor(room: Room, commandId: string, initial: CommandStatus | undefined, calls: CommandCalls) {
    this.room = room;
    this.commandId = commandId;
    this.last = initial;
    this.#calls = calls;
  }

  /** The command's state and its output from `offset` (bytes; default 0). */
  async status(options: { offset?: number } & RequestOptions = {}): Promise<CommandStatus> {
    this.last = await this.#calls.status(options.offset ?? 0, options);
    return this.last;
  }

  /**
   * Polls until the command ends, passing new output to onOutput, and answers with its
   * CommandResult: the same shape `exec()` answers with. Throws RoomkitError
   * `command_output_expired` when the server no longer keeps the command's outcome (15
   * minutes after its end, or a restart); `waitStatus()` answers the final status then.
   */
  async wait(options: WaitOptions = {}): Promise<CommandResult> {
    const status = await this.waitStatus(options);
    if (status.result !== null) return status.result;
    throw new RoomkitError({
      status: 410,
      code: 'command_output_expired',
      message: `command ${status.command_id} ended (${status.state}) but the server no longer keeps its result; its record is in room.commands()`,
      details: { command_id: status.command_id, state: status.state, exit_code: status.exit_code },
    });
  }

  /**
   * Polls until the command ends, passing new output to onOutput, and answers with the
   * final status (its `result` is the CommandResult while kept). Output the server no
   * longer keeps is skipped (`offset` jumps).
   */
  async waitStatus(options: WaitOptions = {}): Promise<CommandStatus> {
    let offset = options.offset ?? 0;
    for (;;) {
      const status = await this.status({ offset, signal: options.signal });
      if (status.output !== '') options.onOutput?.(status.output, { offset: status.output_offset });
      offset = status.next_offset;
      if (status.state !== 'running') return status;
      await sleep(options.pollIntervalMs ?? DEFAULT_POLL_MS, options.signal);
    }
  }

  /** Writes input to the command's stdin (it was started with `stdinOpen`); `close` ends it after. */
  sendStdin(data: string | Uint8Array, options: { close?: boolean } & RequestOptions = {}): Promise<StdinWritten> {
    return this.room.sendStdin(this.commandId, data, options);
  }

  /** Closes the command's stdin. */
  closeStdin(options: RequestOptions = {}): Promise<StdinWritten> {
    return this.room.closeStdin(this.commandId, options);
  }

  /** Sends a signal to every process of the command: KILL (the default) answers once it ended. */
  async kill(signal: KillSignal = 'KILL', options: RequestOptions = {}): Promise<CommandStatus> {
    this.last = await this.#calls.kill(signal, options);
    return this.last;
  }

  /**
   * Puts back every file the command created, modified or deleted as it was before it
   * (a command run with keep_undo); the files the revert changed. `force` reverts even
   * when later commands changed some of the same files (409 revert_conflict otherwise).
   */
  revert(options: { force?: boolean } & RequestOptions = {}): Promise<RevertResult> {
    return this.#calls.revert(options.force === true, options);
  }
}

/** The bytes of a FileContent, whichever encoding the server chose. */
export function contentBytes(file: Pick<FileContent, 'content' | 'encoding'>): Uint8Array {
  return file.encoding === 'base64' ? fromBase64(file.content) : new TextEncoder().encode(file.content);
}

function startFailure(instance: Instance): RoomkitError {
  const reason = instance.failure_reason ?? (instance.state === 'failed' ? 'no reason given' : instance.state === 'lost' ? 'its node was lost' : `it was deleted while starting (${instance.state})`);
  return new RoomkitError({
    status: 500,
    code: 'instance_start_failed',
    message: `instance ${instance.instance_id} failed to start: ${reason}`,
    details: { instance_id: instance.instance_id, state_history: instance.state_history },
  });
}
