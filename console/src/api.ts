// The console's client of the REST API: every request goes with the session cookie (the
// browser adds it) and the session's CSRF token, which this module keeps in memory only.
// A refusal becomes an ApiError carrying the Error body, whose message the pages show.
import type { ErrorBody } from '../../sdk/src/generated/api.ts';

/** Who is signed in: a key of an organization, or the operator (no organization, no key). */
export type Session =
  | { kind: 'key'; organization_id: string; key_id: string; env: string; csrf_token: string; expires_at: string }
  | { kind: 'operator'; organization_id: null; key_id: null; env: null; csrf_token: string; expires_at: string };

export class ApiError extends Error {
  readonly status: number;
  readonly body: ErrorBody;

  constructor(status: number, body: ErrorBody) {
    super(body.message);
    this.status = status;
    this.body = body;
  }
}

let csrfToken: string | null = null;
let signedOut: () => void = () => {};

/** What to do when the server says the session is over (signed out elsewhere, expired, key revoked). */
export function onSignedOut(handler: () => void): void {
  signedOut = handler;
}

async function errorOf(response: Response): Promise<ApiError> {
  let body: ErrorBody;
  try {
    body = (await response.json()) as ErrorBody;
  } catch {
    body = { error: 'internal_error', message: `the server answered ${response.status} ${response.statusText}` };
  }
  return new ApiError(response.status, body);
}

async function send(method: string, path: string, body?: unknown, accept = 'application/json', signal?: AbortSignal): Promise<Response> {
  const headers: Record<string, string> = { Accept: accept };
  if (csrfToken !== null) headers['X-Roomkit-CSRF'] = csrfToken;
  // Bytes (an upload) go as they are; anything else as JSON.
  const raw = body instanceof Blob;
  if (body !== undefined) headers['Content-Type'] = raw ? 'application/octet-stream' : 'application/json';
  const response = await fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    ...(signal === undefined ? {} : { signal }),
    ...(body === undefined ? {} : { body: raw ? body : JSON.stringify(body) }),
  });
  if (response.ok) return response;
  const error = await errorOf(response);
  if (response.status === 401 && (path.startsWith('/api/') || path.startsWith('/operator/'))) {
    csrfToken = null;
    signedOut();
  }
  throw error;
}

/** One JSON call of the REST API; an answer without a body (204) is undefined. */
export async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await send(method, path, body);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}

/** A file's bytes, read with the session (the raw endpoint's public URL needs no session, but a profile may not serve it). */
export async function download(path: string): Promise<Blob> {
  const response = await send('GET', `${path}${path.includes('?') ? '&' : '?'}raw=1`, undefined, 'application/octet-stream');
  return response.blob();
}

/** Writes a file's bytes (PUT …/file/{path}); answers the FileWritten. */
export async function upload<T>(path: string, bytes: Blob): Promise<T> {
  const response = await send('PUT', path, bytes);
  return (await response.json()) as T;
}

/** The session this browser holds, or null when it is signed out. */
export async function currentSession(): Promise<Session | null> {
  try {
    const session = await call<Session>('GET', '/console/session');
    csrfToken = session.csrf_token;
    return session;
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return null;
    throw err;
  }
}

/** Signs in with an API key, or with the operator token (`operator` true). */
export async function signIn(secret: string, operator = false): Promise<Session> {
  const session = await call<Session>('POST', '/console/session', operator ? { operator_token: secret } : { api_key: secret });
  csrfToken = session.csrf_token;
  return session;
}

export async function signOut(): Promise<void> {
  await call<void>('DELETE', '/console/session');
  csrfToken = null;
}

export interface StreamEvent {
  event: string;
  data: unknown;
}

/**
 * A POST answered with Server-Sent Events, read from the fetch body (EventSource cannot
 * POST nor send the CSRF header); each event is handed on as it arrives.
 */
export async function stream(path: string, body: unknown, onEvent: (event: StreamEvent) => void): Promise<void> {
  await readEvents(await send('POST', path, body, 'text/event-stream'), onEvent);
}

/**
 * A GET asking for Server-Sent Events; the answer is handed back when the server sent
 * something else (a build's log once the build has ended is plain text).
 */
export async function streamGet(path: string, onEvent: (event: StreamEvent) => void, signal?: AbortSignal): Promise<string | null> {
  const response = await send('GET', path, undefined, 'text/event-stream', signal);
  if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) return response.text();
  await readEvents(response, onEvent);
  return null;
}

async function readEvents(response: Response, onEvent: (event: StreamEvent) => void): Promise<void> {
  const reader = response.body?.pipeThrough(new TextDecoderStream()).getReader();
  if (!reader) return;
  let buffered = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffered += value;
    let end: number;
    while ((end = buffered.indexOf('\n\n')) >= 0) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (data.length > 0) onEvent({ event, data: JSON.parse(data.join('\n')) });
    }
  }
}

/** The path of a room's resource under the REST API. */
export function roomPath(profileId: string, roomId: string, rest = ''): string {
  return `/api/profile/${encodeURIComponent(profileId)}/room/${encodeURIComponent(roomId)}${rest}`;
}

/** The API path of a file of a room's instance: an absolute path keeps its leading slash (`…/file//home/…`). */
export function filePath(profileId: string, roomId: string, path: string): string {
  return roomPath(profileId, roomId, `/file/${path.split('/').map(encodeURIComponent).join('/')}`);
}

/** The console's own path of a room's instance. */
export function consoleRoomPath(profileId: string, roomId: string): string {
  return `/console/profile/${encodeURIComponent(profileId)}/room/${encodeURIComponent(roomId)}`;
}
