// How the E2B adapter answers a failure, in E2B's own conventions, since the SDK branches
// on them: the control API's body is {code, message} with the HTTP status as `code` (the
// SDK reads a missing sandbox from code 404, a pause of a paused one from 409); the
// in-sandbox calls answer Connect's error codes, and a sandbox that is gone (killed,
// paused, ended) is HTTP 502 there, which the SDK reads as "not running any more".
import { Code, ConnectError } from '@connectrpc/connect';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { appErrorOfRuntime } from '../../core/runtime-errors.ts';
import { AppError, ERROR_STATUS } from '../../errors.ts';

/** A failure with a status roomkit's own registry has no code for (E2B's 502 of a sandbox that is gone). */
export class E2bHttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'E2bHttpError';
    this.status = status;
  }
}

/** The envd answer for a sandbox that is not running: what E2B's proxy says of one. */
export function sandboxGone(sandboxId: string, why: string): E2bHttpError {
  return new E2bHttpError(502, `The sandbox ${sandboxId} is not running: ${why}`);
}

/** The status and message of any failure, as the control API answers them. */
export function e2bStatusOf(err: unknown, request: FastifyRequest): { status: number; message: string; code?: string } {
  if (err instanceof E2bHttpError) return { status: err.status, message: err.message };
  const app = err instanceof AppError ? err : appErrorOfRuntime(err);
  if (app) return { status: app.status, message: app.message, code: app.code };
  const fastify = err as FastifyError;
  if (fastify.validation) return { status: 400, message: fastify.message };
  if (typeof fastify.statusCode === 'number' && fastify.statusCode >= 400 && fastify.statusCode < 500) return { status: fastify.statusCode, message: fastify.message };
  return { status: 500, message: `an internal error occurred; the server log has the details under request id ${request.id}` };
}

/** Sends E2B's error body; Error codes of roomkit's registry are kept for metrics and the audit trail. */
export function sendE2bError(reply: FastifyReply, err: unknown): FastifyReply {
  const { status, message, code } = e2bStatusOf(err, reply.request);
  if (status >= 500) reply.request.log.error({ err }, 'E2B request failed');
  reply.request.errorCode = code ?? (status === 502 ? 'sandbox_not_running' : null);
  reply.header('X-Request-Id', reply.request.id);
  // A refusal that passes with time (a rate limit, a throttled address) says when, as the REST API does.
  const retryAfter = err instanceof AppError ? err.details?.retry_after_s : undefined;
  if (typeof retryAfter === 'number') reply.header('Retry-After', String(retryAfter));
  return reply.code(status).type('application/json; charset=utf-8').send({ code: status, message });
}

/** The Connect error an in-sandbox call fails with. */
export function connectErrorOf(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof E2bHttpError) return new ConnectError(err.message, err.status === 502 ? Code.Unavailable : codeOfStatus(err.status));
  const app = err instanceof AppError ? err : appErrorOfRuntime(err);
  if (app) return new ConnectError(app.message, codeOfStatus(ERROR_STATUS[app.code]));
  return new ConnectError('an internal error occurred; the server log has the details', Code.Internal, undefined, undefined, err);
}

/** What cannot map onto roomkit yet, in the protocol's own words. */
export function unimplemented(what: string): ConnectError {
  return new ConnectError(`${what} is not served by roomkit's E2B adapter (see the compatibility table in docs/e2b.md)`, Code.Unimplemented);
}

function codeOfStatus(status: number): Code {
  if (status === 400 || status === 413 || status === 414) return Code.InvalidArgument;
  if (status === 401) return Code.Unauthenticated;
  if (status === 403) return Code.PermissionDenied;
  if (status === 404) return Code.NotFound;
  if (status === 409) return Code.FailedPrecondition;
  if (status === 429) return Code.ResourceExhausted;
  if (status === 503) return Code.Unavailable;
  if (status === 504) return Code.DeadlineExceeded;
  if (status === 507) return Code.ResourceExhausted;
  return Code.Internal;
}
