// Code contexts of a room's instance: live interpreters (Python, JavaScript) that keep
// their variables from one run to the next, as a notebook's kernel does.
// `room.contexts.create()` makes one; `context.run(code)` runs a cell in it and answers
// what it printed, showed (charts as PNG, tables as HTML) and raised.
import { RoomkitConnectionError, RoomkitError, type ErrorHint } from './errors.ts';
import type { Context, ContextCreate, ContextInterrupted, ContextRunResult, DisplayResult, ExecutionError } from './generated/api.ts';
import { readEvents, type RequestOptions, type Transport } from './http.ts';
import { sdkMessage } from './hint-wording.ts';

const CONTEXTS = '/api/profile/{profile_id}/room/{room_id}/contexts' as const;
const CONTEXT = `${CONTEXTS}/{context_id}` as const;

type RoomParams = (options: RequestOptions) => Promise<{ profile_id: string; room_id: string }>;

export interface RunOptions extends RequestOptions {
  /** Environment variables for this run only. */
  env?: Record<string, string>;
  /** Time limit, seconds (default and maximum: the profile's command_timeout_s); at the limit the code is interrupted. */
  timeoutS?: number;
  /** Text the code prints, as it prints it. With any callback the run is streamed. */
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  /** A result as it is shown: the last expression's value, a display() call, a figure. */
  onResult?: (result: DisplayResult) => void;
  /** The exception the code ended with. */
  onError?: (error: ExecutionError) => void;
}

/** The code contexts of one room's instance. */
export class RoomContexts {
  readonly #transport: Transport;
  readonly #params: RoomParams;

  constructor(transport: Transport, params: RoomParams) {
    this.#transport = transport;
    this.#params = params;
  }

  /** Starts an interpreter (`language`: `python`, the default, `javascript` or `bash`) in the room's ready instance. */
  async create(options: ContextCreate & RequestOptions = {}): Promise<CodeContext> {
    const { signal, ...body } = options;
    const made = await this.#transport.json('post', CONTEXTS, { params: await this.#params(options), body }, { signal });
    return new CodeContext(this.#transport, this.#params, made as Context);
  }

  /** The instance's contexts, oldest first. */
  async list(options: RequestOptions = {}): Promise<CodeContext[]> {
    const { contexts } = await this.#transport.json('get', CONTEXTS, { params: await this.#params(options) }, options);
    return contexts.map((c) => new CodeContext(this.#transport, this.#params, c));
  }

  /** A context by id (RoomkitError `context_not_found` when the instance has none by that id). */
  async get(contextId: string, options: RequestOptions = {}): Promise<CodeContext> {
    const found = await this.#transport.json('get', CONTEXT, { params: { ...(await this.#params(options)), context_id: contextId } }, options);
    return new CodeContext(this.#transport, this.#params, found);
  }
}

/** One code context: run code in it, interrupt a run, restart it, delete it. */
export class CodeContext {
  readonly contextId: string;
  readonly language: string;
  readonly cwd: string;
  readonly createdAt: string;
  readonly #transport: Transport;
  readonly #roomParams: RoomParams;

  constructor(transport: Transport, roomParams: RoomParams, context: Context) {
    this.#transport = transport;
    this.#roomParams = roomParams;
    this.contextId = context.context_id;
    this.language = context.language;
    this.cwd = context.cwd;
    this.createdAt = context.created_at;
  }

  async #params(options: RequestOptions): Promise<{ profile_id: string; room_id: string; context_id: string }> {
    return { ...(await this.#roomParams(options)), context_id: this.contextId };
  }

  /**
   * Runs code like a notebook cell and answers once it ended: stdout, stderr, `results`
   * (the last expression's value, display() calls, figures as PNG with chart data),
   * `error` (the context stays usable) and the image files it wrote. Never retried (a
   * cell is not safe to run twice). With a callback the run is streamed and each piece
   * reaches it as it comes; aborting `signal` interrupts the code.
   */
  async run(code: string, options: RunOptions = {}): Promise<ContextRunResult> {
    const { signal, env, timeoutS, onStdout, onStderr, onResult, onError } = options;
    const body = { code, ...(env === undefined ? {} : { env }), ...(timeoutS === undefined ? {} : { timeout_s: timeoutS }) };
    const params = await this.#params(options);
    if (!onStdout && !onStderr && !onResult && !onError) {
      return this.#transport.json('post', `${CONTEXT}/run`, { params, body }, { signal, idempotent: false });
    }
    const { response, url } = await this.#transport.send(
      'post',
      `${CONTEXT}/run`,
      { params, body: { ...body, stream: true } },
      { signal, idempotent: false, stream: true, headers: { accept: 'text/event-stream' } },
    );
    const requestId = response.headers.get('x-request-id') ?? undefined;
    const interrupted = (cause?: unknown) =>
      new RoomkitConnectionError({ code: 'stream_interrupted', message: `the stream of the run ended before its result; the context (${this.contextId}) may still be running it`, method: 'POST', url, cause });
    try {
      for await (const { event, data } of readEvents(response.body as ReadableStream<Uint8Array>)) {
        const parsed = JSON.parse(data) as Record<string, unknown>;
        if (event === 'stdout') onStdout?.(parsed.text as string);
        else if (event === 'stderr') onStderr?.(parsed.text as string);
        else if (event === 'result') onResult?.(parsed as unknown as DisplayResult);
        else if (event === 'end') return parsed as unknown as ContextRunResult;
        else if (event === 'error' && typeof parsed.error === 'string') {
          // An Error body: the run could not happen at all.
          const error = parsed as { error: string; message: string; problem?: string; hint?: ErrorHint; details?: Record<string, unknown>; request_id?: string };
          throw new RoomkitError({ status: 500, code: error.error, message: sdkMessage(error), details: error.details, requestId: error.request_id ?? requestId, problem: error.problem, hint: error.hint });
        } else if (event === 'error') onError?.(parsed as unknown as ExecutionError);
      }
    } catch (err) {
      if (err instanceof RoomkitError) throw err;
      if (signal?.aborted) throw signal.reason;
      throw interrupted(err);
    }
    throw interrupted();
  }

  /** Interrupts the run under way (Python: KeyboardInterrupt); `interrupted` is false when none was running. */
  async interrupt(options: RequestOptions = {}): Promise<ContextInterrupted> {
    return this.#transport.json('post', `${CONTEXT}/interrupt`, { params: await this.#params(options), body: {} }, options);
  }

  /** Ends the interpreter and starts a new one: every variable is gone. */
  async restart(options: RequestOptions = {}): Promise<CodeContext> {
    const context = await this.#transport.json('post', `${CONTEXT}/restart`, { params: await this.#params(options) }, options);
    return new CodeContext(this.#transport, this.#roomParams, context);
  }

  /** Ends the interpreter; the context then answers RoomkitError `context_not_found`. */
  async delete(options: RequestOptions = {}): Promise<void> {
    await this.#transport.json('delete', CONTEXT, { params: await this.#params(options) }, options);
  }
}
