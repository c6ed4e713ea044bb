// Turns every failure into the spec's Error body with the status from the error
// registry: validation, body parsing, unknown routes and methods, and bugs. A caller
// never sees a stack trace or an HTML page.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { appErrorOfRuntime } from '../core/runtime-errors.ts';
import { AppError, ERROR_STATUS, type ErrorBody, type ErrorCode } from '../errors.ts';
import { ROOM_ID_PATTERN, UUID_PATTERN } from '../lib/ids.ts';
import { NAME_PATTERN } from '../core/profile-schema.ts';

/** The forms people name most often, in words rather than as a regular expression. */
const PATTERN_WORDS: Record<string, string> = {
  [ROOM_ID_PATTERN]: 'a room name is 1-128 characters of A-Z a-z 0-9 . _ - and not "." or ".."',
  [NAME_PATTERN]: 'a name is 1-64 characters of A-Z a-z 0-9 . _ -, starting with a letter or a digit',
  [UUID_PATTERN]: 'an id is a UUID, e.g. 0b7c3f1e-5a2d-4c8e-9f10-2b3c4d5e6f70',
};

declare module 'fastify' {
  interface FastifyRequest {
    /** The code of the Error body answered, once one was (for metrics). */
    errorCode: string | null;
  }
}

interface ValidationIssue {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
  /** Set on the issues of a `propertyNames` schema: the key that failed it. */
  propertyName?: string;
}

export function sendError(reply: FastifyReply, body: ErrorBody): FastifyReply {
  if (body.error === 'missing_api_key' || body.error === 'invalid_api_key') {
    const detail = body.error === 'invalid_api_key' ? ', error="invalid_token"' : '';
    reply.header('WWW-Authenticate', `Bearer realm="roomkit"${detail}`);
  }
  // Router errors (frameworkErrors) are answered before any hook runs, so the headers
  // the app's onSend hook adds to every response are set here too.
  reply.header('X-Request-Id', reply.request.id);
  reply.header('X-Content-Type-Options', 'nosniff');
  // A refusal that passes with time says when to try again (RFC 9110 Retry-After).
  const retryAfter = body.details?.retry_after_s;
  if (typeof retryAfter === 'number') reply.header('Retry-After', String(retryAfter));
  reply.request.errorCode = body.error;
  return reply
    .code(ERROR_STATUS[body.error])
    .type('application/json; charset=utf-8')
    .send({ ...body, request_id: reply.request.id });
}

/**
 * `wordMessage` gives an AppError's message as the mounted adapter words it (with its
 * hint, errors.ts HINT_CODES); the shell itself knows no adapter's words.
 */
export function installErrorHandling(app: FastifyInstance, allowedMethods: (method: string, url: string) => string[], wordMessage: (err: AppError) => string): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const body = toErrorBody(err, request, wordMessage);
    if (ERROR_STATUS[body.error] >= 500) {
      request.log.error({ err }, 'request failed');
    }
    return sendError(reply, body);
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? request.url;
    const allowed = allowedMethods(request.method, path);
    if (allowed.length > 0) {
      reply.header('Allow', allowed.join(', '));
      return sendError(reply, {
        error: 'method_not_allowed',
        message: `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`,
      });
    }
    return sendError(reply, { error: 'not_found', message: `no route ${request.method} ${path}; see /openapi.json` });
  });
}

function toErrorBody(err: FastifyError, request: FastifyRequest, wordMessage: (err: AppError) => string): ErrorBody {
  if (err instanceof AppError) return err.toBody(wordMessage(err));
  const fromRuntime = appErrorOfRuntime(err);
  if (fromRuntime) return fromRuntime.toBody(wordMessage(fromRuntime));
  if (err.validation) return validationBody(err.validation as ValidationIssue[], err.validationContext ?? 'body');

  const fromFastify = FASTIFY_CODES[err.code];
  if (fromFastify) return { error: fromFastify.error, message: fromFastify.message(err) };
  if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return { error: 'invalid_json', message: `the request body is not valid JSON: ${err.message}` };
  }
  // A 4xx raised by Fastify or a plugin that we do not map one by one.
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
    const code = err.statusCode === 404 ? 'not_found' : 'validation_error';
    return { error: code, message: err.message };
  }
  return {
    error: 'internal_error',
    message: `an internal error occurred; the server log has the details under request id ${request.id}`,
  };
}

const FASTIFY_CODES: Record<string, { error: ErrorCode; message(err: FastifyError): string }> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    error: 'unsupported_media_type',
    message: () => 'send the request body as JSON with the header Content-Type: application/json',
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    error: 'validation_error',
    message: () => 'the Content-Length header does not match the body',
  },
  FST_ERR_CTP_BODY_TOO_LARGE: {
    error: 'body_too_large',
    message: () => 'the request body is larger than this server accepts (ROOMKIT_BODY_LIMIT_BYTES)',
  },
  FST_ERR_CTP_INVALID_JSON_BODY: {
    error: 'invalid_json',
    message: (err) => `the request body is not valid JSON: ${err.message}`,
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    error: 'invalid_json',
    message: () => 'the request has Content-Type: application/json but an empty body',
  },
};

/** One clear sentence for the first problem, every problem in details. */
function validationBody(issues: ValidationIssue[], context: string): ErrorBody {
  // A key refused by `propertyNames` comes as the specific issue (naming the key) plus a
  // generic "property name must be valid" one; the specific one says it all.
  const described = issues.filter((issue) => issue.keyword !== 'propertyNames').map((issue) => describeIssue(issue, context));
  const first = described[0] ?? { field: context, message: `${context} is not valid` };
  return {
    error: 'validation_error',
    message: described.length > 1 ? `${first.message} (and ${described.length - 1} more problem(s), see details)` : first.message,
    details: { errors: described },
  };
}

function describeIssue(issue: ValidationIssue, context: string): { field: string; message: string } {
  const base = (issue.instancePath ?? '').replace(/^\//, '').replaceAll('/', '.');
  const params = issue.params ?? {};
  const where = (field: string) => (context === 'body' ? field || 'body' : field ? `${context} ${field}` : context);
  if (issue.propertyName !== undefined) {
    const field = [base, issue.propertyName].filter(Boolean).join('.');
    return { field, message: `"${issue.propertyName}" is not an allowed name in ${where(base)}: it ${issue.message ?? 'is not valid'}` };
  }
  switch (issue.keyword) {
    case 'additionalProperties': {
      const field = [base, String(params.additionalProperty)].filter(Boolean).join('.');
      return { field, message: `unknown field "${field}"${context === 'body' ? '' : ` in ${context}`}` };
    }
    case 'required': {
      const field = [base, String(params.missingProperty)].filter(Boolean).join('.');
      return { field, message: `${where(field)} is required` };
    }
    case 'pattern': {
      const words = PATTERN_WORDS[String(params.pattern)];
      return { field: base, message: `${where(base)} has a form that is not allowed (${words ?? `must match ${String(params.pattern)}`})` };
    }
    case 'format':
      return { field: base, message: `${where(base)} must be a valid ${String(params.format)}` };
    default:
      return { field: base, message: `${where(base)} ${issue.message ?? 'is not valid'}` };
  }
}
