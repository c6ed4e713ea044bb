// The Idempotency-Key header on the routes that take it (their config's `idempotency`):
// a request with a key claims it (core/idempotency.ts) after authentication and
// validation; a retry is answered with the kept answer (and `Idempotent-Replayed: true`)
// without its handler running; a first request's answer is kept when it is a success
// (2xx), and its key freed otherwise, since a refused or failed request did nothing that
// a retry could repeat.
import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import Type from 'typebox';
import type { IdempotencyKeys, KeyClaim } from '../core/idempotency.ts';
import { AppError } from '../errors.ts';
import { callerOf } from './auth.ts';
import type { App } from './types.ts';

/** The request header, and the header a replayed answer carries. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
export const REPLAYED_HEADER = 'Idempotent-Replayed';
/** Longest key accepted, in characters: room for a UUID or a client's own scheme. */
export const MAX_KEY_LENGTH = 255;
const KEY_PATTERN = /^[\x20-\x7e]+$/;

/** The header as a route documents it (/openapi.json); the hook checks it either way. */
export const IdempotencyKeyHeaders = Type.Object({
  [IDEMPOTENCY_KEY_HEADER]: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: MAX_KEY_LENGTH + 2,
      description:
        'Makes the request safe to retry: a retry with the same key and the same request answers the first one\'s result ' +
        '(waiting for it while it runs, with `Idempotent-Replayed: true`) and does nothing again; the same key with another ' +
        'request answers 422 `idempotency_key_reused`. 1-255 printable ASCII characters (a UUID), per organization; kept ' +
        'ROOMKIT_IDEMPOTENCY_KEY_TTL_S (24 h) from its first use. Only successful (2xx) answers are kept.',
    }),
  ),
});

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route takes an Idempotency-Key. `refuse` names why a request of the route
     * cannot be made idempotent (a streamed answer), or gives undefined; `keyOf` gives
     * the key a request carries in its body (a tool call's id) when it sends no header.
     */
    idempotency?: { refuse?: (request: FastifyRequest) => string | undefined; keyOf?: (request: FastifyRequest) => string | undefined };
  }
  interface FastifyRequest {
    /** The claim of a first request with a key, settled when it is answered. */
    idempotencyClaim: Extract<KeyClaim, { kind: 'first' }> | null;
  }
}

export function installIdempotency(app: App, keys: IdempotencyKeys): void {
  app.decorateRequest('idempotencyClaim', null);

  app.addHook('preHandler', async (request, reply) => {
    const route = request.routeOptions.config.idempotency;
    if (!route) return;
    const header = request.headers[IDEMPOTENCY_KEY_HEADER] ?? route.keyOf?.(request);
    if (header === undefined) return;
    const key = keyOf(header);
    const refusal = route.refuse?.(request);
    if (refusal !== undefined) throw new AppError('validation_error', refusal);
    const claim = await keys.claim(callerOf(request).organizationId, key, fingerprintOf(request));
    if (claim.kind === 'first') {
      request.idempotencyClaim = claim;
      return;
    }
    // The audit trail records the retry with what its answer names (an instance, a command).
    if (request.audit) request.audit.payload = parsed(claim.answer.body);
    reply.header(REPLAYED_HEADER, 'true');
    return reply.code(claim.answer.status).type('application/json; charset=utf-8').send(claim.answer.body);
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const claim = request.idempotencyClaim;
    if (!claim) return payload;
    request.idempotencyClaim = null;
    const kept = reply.statusCode >= 200 && reply.statusCode < 300 && typeof payload === 'string';
    // Kept before it is sent: a retry that comes after the answer finds it.
    await claim.settle(kept ? { status: reply.statusCode, body: payload } : null);
    return payload;
  });

  // An answer that never reached onSend (its connection went first) frees the key.
  app.addHook('onResponse', async (request) => {
    const claim = request.idempotencyClaim;
    if (!claim) return;
    request.idempotencyClaim = null;
    await claim.settle(null);
  });
}

/** The key as sent: a token, or a Structured Field string (the draft's form, in quotes). */
function keyOf(header: string | string[]): string {
  const raw = (Array.isArray(header) ? header.join(',') : header).trim();
  const key = raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"') ? raw.slice(1, -1) : raw;
  if (key === '' || key.length > MAX_KEY_LENGTH || !KEY_PATTERN.test(key)) {
    throw new AppError(
      'validation_error',
      `the Idempotency-Key header must be 1 to ${MAX_KEY_LENGTH} printable ASCII characters (a UUID is a good key), sent once`,
    );
  }
  return key;
}

/** What makes two requests "the same": method, path (with its query) and body, the body's keys in any order. */
function fingerprintOf(request: FastifyRequest): string {
  return createHash('sha256')
    .update(`${request.method} ${request.url}\n${canonicalJson(request.body ?? {})}`)
    .digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function parsed(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}
