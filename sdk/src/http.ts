// The SDK's one way to talk to the server: typed by the generated `Paths`, so a call to
// a route or with a body the server does not define fails the type check; retries
// only requests that are safe to repeat (a POST that carries an Idempotency-Key is, the
// same key on every try); turns every failure into a RoomkitError or a
// RoomkitConnectionError.
import { sdkMessage } from './hint-wording.ts';
import { type ErrorHint, RoomkitConnectionError, RoomkitError } from './errors.ts';
import type { ErrorBody, Paths } from './generated/api.ts';
import { anySignal, plainBytes, randomKey, sleep } from './portable.ts';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

interface OperationShape {
  params: object;
  query: object;
  body: unknown;
  responses: object;
}

export type PathOf = keyof Paths;
export type MethodOf<P extends PathOf> = Extract<keyof Paths[P], Method>;
export type Op<P extends PathOf, M extends MethodOf<P>> = Paths[P][M] extends OperationShape ? Paths[P][M] : never;
type SuccessStatus = 200 | 201 | 202 | 204;
/** The body of a successful answer (any 2xx the route defines). */
export type Success<O extends OperationShape> = O['responses'][Extract<keyof O['responses'], SuccessStatus>];

/** What a call sends: path parameters (left out when the route has none), query, JSON body. */
export type CallInput<O extends OperationShape> = (O['params'] extends Record<string, never> ? { params?: O['params'] } : { params: O['params'] }) & {
  query?: O['query'];
  body?: O['body'];
};

export interface RequestOptions {
  signal?: AbortSignal | undefined;
}

/** A call that changes something and is made safe to retry by an Idempotency-Key. */
export interface IdempotentOptions {
  /**
   * Sent as the Idempotency-Key header on every try of this call, so that the server
   * runs it once however often it is retried (and answers a retry with the first
   * answer). Default: a new random key per call. Give your own to retry a call across
   * processes; a key used for another request is refused (`idempotency_key_reused`).
   */
  idempotencyKey?: string;
}

/** A fresh Idempotency-Key: a random UUID. */
export function newIdempotencyKey(): string {
  return randomKey();
}

interface SendOptions extends RequestOptions {
  /** Repeat on connection errors and 502/503/504. Default: only GET and PUT, and a request with idempotencyKey. */
  idempotent?: boolean;
  /** Sent as the Idempotency-Key header on every try; the request is then retried as an idempotent one. */
  idempotencyKey?: string;
  /** A body that is not JSON (file uploads). */
  rawBody?: Uint8Array;
  headers?: Record<string, string>;
  /** The answer is read as a stream: the client's timeout then ends at the headers. */
  stream?: boolean;
}

export interface TransportOptions {
  baseUrl: string;
  apiKey: string | undefined;
  fetch: typeof fetch;
  maxRetries: number;
  retryDelayMs: number;
  timeoutMs: number | undefined;
}

/** Statuses a proxy or a restarting server answers with; worth another try for a safe request. */
const RETRY_STATUSES = new Set([502, 503, 504]);
/** 503s that say something will not change by retrying. */
const PERMANENT_CODES = new Set(['runtime_unavailable']);
const MAX_DELAY_MS = 8_000;

export class Transport {
  readonly #options: TransportOptions;

  constructor(options: TransportOptions) {
    this.#options = options;
  }

  get baseUrl(): string {
    return this.#options.baseUrl;
  }

  /** Calls a JSON route and returns the parsed body of its success answer. */
  async json<P extends PathOf, M extends MethodOf<P>>(
    method: M,
    path: P,
    input: CallInput<Op<P, M>>,
    options: SendOptions = {},
  ): Promise<Success<Op<P, M>>> {
    const { response, url, done } = await this.send(method, path, input, options);
    try {
      if (response.status === 204) {
        await response.body?.cancel();
        return undefined as Success<Op<P, M>>;
      }
      const text = await response.text();
      try {
        return JSON.parse(text) as Success<Op<P, M>>;
      } catch {
        throw new RoomkitError({
          status: response.status,
          code: 'unexpected_response',
          message: `${method.toUpperCase()} ${url} answered with a body that is not JSON: ${text.slice(0, 200)}`,
          requestId: response.headers.get('x-request-id') ?? undefined,
        });
      }
    } catch (err) {
      throw this.#failure(err, method, url, options.signal);
    } finally {
      done();
    }
  }

  /**
   * Sends a request and returns its successful answer with the body unread. Error
   * answers are thrown as RoomkitError. `done` ends the client's timeout; call it once
   * the body is read.
   */
  async send<P extends PathOf, M extends MethodOf<P>>(
    method: M,
    path: P,
    input: CallInput<Op<P, M>>,
    options: SendOptions = {},
  ): Promise<{ response: Response; url: string; done: () => void }> {
    const url = this.url(path, (input.params ?? {}) as Record<string, string>, input.query as Record<string, unknown> | undefined);
    const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
    if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
    if (this.#options.apiKey !== undefined && path.startsWith('/api/')) headers.authorization = `Bearer ${this.#options.apiKey}`;
    let body: string | Uint8Array<ArrayBuffer> | undefined;
    if (options.rawBody !== undefined) {
      body = plainBytes(options.rawBody);
      headers['content-type'] ??= 'application/octet-stream';
    } else if (input.body !== undefined) {
      body = JSON.stringify(input.body);
      headers['content-type'] = 'application/json';
    }
    const idempotent = options.idempotent ?? (method === 'get' || method === 'put' || options.idempotencyKey !== undefined);
    const verb = method.toUpperCase();
    for (let attempt = 0; ; attempt++) {
      const timeout = new AbortController();
      const timer = this.#options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => timeout.abort(new Error('timeout')), this.#options.timeoutMs);
      const combined = options.signal === undefined ? { signal: timeout.signal, dispose: () => {} } : anySignal([options.signal, timeout.signal]);
      // A streamed body stays tied to the caller's signal while it is read.
      const done = () => {
        clearTimeout(timer);
        if (!options.stream) combined.dispose();
      };
      const signal = combined.signal;
      let response: Response;
      try {
        response = await this.#options.fetch(url, { method: verb, headers, body: body ?? null, signal });
      } catch (err) {
        done();
        const failure = this.#failure(err, method, url, options.signal);
        if (idempotent && failure instanceof RoomkitConnectionError && failure.code === 'connection_failed' && attempt < this.#options.maxRetries) {
          await sleep(this.#delay(attempt), options.signal);
          continue;
        }
        throw failure;
      }
      if (response.ok) {
        if (options.stream) done();
        return { response, url, done };
      }
      let error: RoomkitError | RoomkitConnectionError;
      try {
        error = await errorFrom(response, verb, url);
      } catch (err) {
        error = this.#failure(err, method, url, options.signal);
      } finally {
        done();
      }
      // A retry whose first try still runs past the server's longest wait is told to ask again.
      const keyInUse = options.idempotencyKey !== undefined && error.code === 'idempotency_key_in_use';
      if (idempotent && (keyInUse || (RETRY_STATUSES.has(response.status) && !PERMANENT_CODES.has(error.code))) && attempt < this.#options.maxRetries) {
        await sleep(retryAfterMs(response) ?? this.#delay(attempt), options.signal);
        continue;
      }
      throw error;
    }
  }

  /**
   * Sends a request whose answer the SDK does not interpret (a program in an instance
   * answers it): the API key is added for /api/ URLs, nothing is retried, and the
   * answer comes back as it is, whatever its status.
   */
  async passThrough(url: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.#options.apiKey !== undefined && new URL(url).pathname.startsWith('/api/')) headers.set('authorization', `Bearer ${this.#options.apiKey}`);
    try {
      return await this.#options.fetch(url, { ...init, headers });
    } catch (err) {
      throw this.#failure(err, (init.method ?? 'GET').toLowerCase(), url, init.signal ?? undefined);
    }
  }

  /** The absolute URL of a route with its parameters filled in. */
  url(path: string, params: Record<string, string>, query?: Record<string, unknown>): string {
    // Each parameter is one encoded segment: a file path's slashes travel as %2F, so
    // `.` and `..` in it reach the server as they are instead of being resolved by
    // URL parsing on the way.
    const filled = path.replace(/\{([^}]+)\}/g, (_m, name: string) => {
      const value = params[name];
      if (value === undefined) throw new TypeError(`missing path parameter ${name} for ${path}`);
      // A lone `.` or `..` would still be a dot segment, encoded or not; with a slash
      // added it names the same directory and survives.
      return encodeURIComponent(value === '.' || value === '..' ? `${value}/` : value);
    });
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(query ?? {})) if (value !== undefined) search.set(name, String(value));
    const qs = search.toString();
    return `${this.#options.baseUrl}${filled}${qs === '' ? '' : `?${qs}`}`;
  }

  #delay(attempt: number): number {
    const base = Math.min(MAX_DELAY_MS, this.#options.retryDelayMs * 2 ** attempt);
    // Jitter keeps clients that failed together from retrying together.
    return Math.round(base / 2 + Math.random() * (base / 2));
  }

  /** Turns what a fetch or a body read threw into the SDK's errors; the caller's abort passes through. */
  #failure(err: unknown, method: string, url: string, signal: AbortSignal | undefined): RoomkitError | RoomkitConnectionError {
    if (err instanceof RoomkitError || err instanceof RoomkitConnectionError) return err;
    if (signal?.aborted) throw signal.reason;
    const verb = method.toUpperCase();
    const name = (err as { name?: unknown })?.name;
    if (name === 'AbortError' || name === 'TimeoutError') {
      return new RoomkitConnectionError({
        code: 'timeout',
        message: `${verb} ${url}: no answer within ${this.#options.timeoutMs} ms`,
        method: verb,
        url,
        cause: err,
      });
    }
    return new RoomkitConnectionError({
      code: 'connection_failed',
      message: `cannot reach roomkit at ${this.#options.baseUrl} (${verb} ${url}): ${describe(err)}`,
      method: verb,
      url,
      cause: err,
    });
  }
}

/** The RoomkitError an error answer stands for; an answer without the API's error body gets `unexpected_response`. */
export async function errorFrom(response: Response, method: string, url: string): Promise<RoomkitError> {
  const requestId = response.headers.get('x-request-id') ?? undefined;
  const text = await response.text();
  let body: Partial<ErrorBody> | undefined;
  try {
    body = JSON.parse(text) as Partial<ErrorBody>;
  } catch {
    body = undefined;
  }
  if (body && typeof body.error === 'string' && typeof body.message === 'string') {
    // The body names the request too (request_id); older servers only send the header.
    const id = typeof body.request_id === 'string' ? body.request_id : requestId;
    const hint = body.hint as ErrorHint | undefined;
    const message = sdkMessage({ message: body.message, problem: body.problem, hint });
    return new RoomkitError({ status: response.status, code: body.error, message, details: body.details, requestId: id, problem: body.problem, hint });
  }
  const excerpt = text.trim().slice(0, 200);
  return new RoomkitError({
    status: response.status,
    code: 'unexpected_response',
    message: `${method} ${url} answered HTTP ${response.status}${excerpt === '' ? '' : `: ${excerpt}`}`,
    requestId,
  });
}

function retryAfterMs(response: Response): number | undefined {
  const value = response.headers.get('retry-after');
  if (value === null || !/^\d+$/.test(value.trim())) return undefined;
  return Math.min(MAX_DELAY_MS, Number(value) * 1000);
}

/** The most telling message of a fetch failure: undici hides the system error in `cause`. */
function describe(err: unknown): string {
  const cause = (err as { cause?: unknown })?.cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return typeof code === 'string' && !cause.message.includes(code) ? `${code}: ${cause.message}` : cause.message;
  }
  return err instanceof Error ? err.message : String(err);
}

export interface ServerSentEvent {
  event: string;
  data: string;
}

/** The events of a text/event-stream body, as the HTML standard parses them. */
export async function* readEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let data: string[] = [];
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) !== -1) {
        // A lone \r at the end may be the first half of \r\n: wait for more.
        if (buffer[newline] === '\r' && newline === buffer.length - 1 && !done) break;
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
        if (line === '') {
          if (data.length > 0) yield { event: event || 'message', data: data.join('\n') };
          event = '';
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
      }
      if (done) return;
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}
