// Code contexts of a room's instance: live interpreters that keep their state between
// runs (core/contexts.ts), and a run's answer as JSON or as Server-Sent Events.
import Type from 'typebox';
import { Context, ContextCreate, ContextInterrupted, ContextList, ContextRunRequest, ContextRunResult } from '../../../core/context-schema.ts';
import { roomRef } from '../../../core/instance-address.ts';
import type { RunEvent } from '../../../core/contexts.ts';
import { AppError } from '../../../errors.ts';
import type { Services } from '../../../services.ts';
import { callerOf } from '../../../http/auth.ts';
import { errorResponses, RoomParams } from '../../../http/schemas.ts';
import type { App } from '../../../http/types.ts';
import { restMessage } from '../hint-wording.ts';
import { openEventStream } from '../sse.ts';

const ContextParams = Type.Object({
  ...RoomParams.properties,
  context_id: Type.String({ format: 'uuid', description: 'Context id, from POST …/contexts or the list' }),
});

const RUN_EVENT_STREAM = {
  schema: {
    type: 'string',
    description:
      'Server-Sent Events as the code runs: `stdout` and `stderr` ({text}), `result` (a DisplayResult), `error` (an ExecutionError, when the code raised), ' +
      'then `end` (the ContextRunResult, everything above included); a failure to run at all is an `error` event with an Error body ({error, message}) instead of `end`.',
  },
  example: [
    'event: stdout',
    'data: {"text":"hello\\n"}',
    '',
    'event: result',
    'data: {"is_main_result":true,"text":"2"}',
    '',
    'event: end',
    'data: {"execution_count":1,"stdout":"hello\\n","stderr":"","results":[{"is_main_result":true,"text":"2"}],"error":null,…}',
    '',
  ].join('\n'),
};

export function contextRoutes(app: App, { contexts }: Services): void {
  const base = '/api/profile/:profile_id/room/:room_id/contexts';
  const address = (request: { params: { profile_id: string; room_id: string } }, organizationId: string) =>
    roomRef(organizationId, request.params.profile_id, request.params.room_id);

  app.post(
    base,
    {
      config: { auditAction: 'context.create' },
      schema: {
        operationId: 'createContext',
        summary: 'Make a code context',
        description:
          'Starts an interpreter in the room\'s instance, as the profile\'s user, that keeps its variables from one run to the next (a notebook\'s kernel). ' +
          'It lives as long as the instance runs (a pause that keeps memory keeps it) and the service is not restarted.',
        tags: ['contexts'],
        params: RoomParams,
        body: ContextCreate,
        response: { 201: Context, ...errorResponses(400, 401, 404, 409, 429, 500, 503) },
      },
    },
    async (request, reply) => reply.code(201).send(await contexts.createAt(address(request, callerOf(request).organizationId), request.body)),
  );

  app.get(
    base,
    {
      schema: {
        operationId: 'listContexts',
        summary: 'List code contexts',
        tags: ['contexts'],
        params: RoomParams,
        response: { 200: ContextList, ...errorResponses(401, 404) },
      },
    },
    async (request) => ({ contexts: await contexts.listAt(address(request, callerOf(request).organizationId)) }),
  );

  app.get(
    `${base}/:context_id`,
    {
      schema: {
        operationId: 'getContext',
        summary: 'Get a code context',
        tags: ['contexts'],
        params: ContextParams,
        response: { 200: Context, ...errorResponses(401, 404) },
      },
    },
    async (request) => contexts.getAt(address(request, callerOf(request).organizationId), request.params.context_id),
  );

  app.delete(
    `${base}/:context_id`,
    {
      config: { auditAction: 'context.delete' },
      schema: {
        operationId: 'deleteContext',
        summary: 'Delete a code context',
        description: 'Ends its interpreter (a run under way ends with it); afterwards the context answers 404 context_not_found.',
        tags: ['contexts'],
        params: ContextParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(401, 404) },
      },
    },
    async (request, reply) => {
      await contexts.deleteAt(address(request, callerOf(request).organizationId), request.params.context_id);
      return reply.code(204).send(null);
    },
  );

  app.post(
    `${base}/:context_id/restart`,
    {
      config: { auditAction: 'context.restart' },
      schema: {
        operationId: 'restartContext',
        summary: 'Restart a code context',
        description: 'Ends its interpreter and starts a new one in the same working directory and environment: every variable is gone.',
        tags: ['contexts'],
        params: ContextParams,
        response: { 200: Context, ...errorResponses(401, 404, 409, 500) },
      },
    },
    async (request) => contexts.restartAt(address(request, callerOf(request).organizationId), request.params.context_id),
  );

  app.post(
    `${base}/:context_id/interrupt`,
    {
      config: { auditAction: 'context.interrupt' },
      schema: {
        operationId: 'interruptContext',
        summary: 'Interrupt a code context\'s run',
        description:
          'Sends the run under way an interrupt (Python: KeyboardInterrupt); the run answers with that error and the context keeps its state. ' +
          'Code that does not stop within 3 s costs its interpreter: it is ended and started again (the run says `restarted`).',
        tags: ['contexts'],
        params: ContextParams,
        body: Type.Optional(Type.Object({}, { additionalProperties: false })),
        response: { 200: ContextInterrupted, ...errorResponses(401, 404) },
      },
    },
    async (request) => contexts.interruptAt(address(request, callerOf(request).organizationId), request.params.context_id),
  );

  app.post(
    `${base}/:context_id/run`,
    {
      config: {
        auditAction: 'context.run',
        documentedResponses: {
          200: {
            description: 'The run ended: its ContextRunResult; or, streamed, its events as it runs',
            content: { 'application/json': { schema: ContextRunResult }, 'text/event-stream': RUN_EVENT_STREAM },
          },
        },
      },
      schema: {
        operationId: 'runCode',
        summary: 'Run code in a code context',
        description:
          'Runs the code like a notebook cell in the context\'s interpreter, whose variables, imports and functions stay for the next run. ' +
          'Answers once it ended with what it printed, what it showed (`results`: the last expression\'s value, display() calls, matplotlib figures as PNG with chart data) ' +
          'and the exception it raised (`error`; the context stays usable). Images are also written under ~/.roomkit/outputs and listed in `files_changed`. ' +
          'Runs of one context go one at a time, in the order asked. The time limit, POST …/interrupt and a client that goes away interrupt the code. ' +
          'With `"stream": true` or `Accept: text/event-stream` the answer is Server-Sent Events.',
        tags: ['contexts'],
        params: ContextParams,
        body: ContextRunRequest,
        response: { 200: ContextRunResult, ...errorResponses(400, 401, 404, 409, 500, 503) },
      },
    },
    async (request, reply) => {
      const { stream, ...input } = request.body;
      const target = address(request, callerOf(request).organizationId);
      const wantsStream = stream === true || (stream === undefined && (request.headers.accept ?? '').includes('text/event-stream'));
      // A client that goes away interrupts its code, streamed or not.
      const gone = new AbortController();
      reply.raw.on('close', () => {
        if (!reply.raw.writableFinished) gone.abort();
      });
      if (!wantsStream) return contexts.runAt(target, request.params.context_id, input, { signal: gone.signal });
      // A context that is not there is an HTTP error, not a stream.
      await contexts.getAt(target, request.params.context_id);
      const raw = openEventStream(request, reply);
      // A run's events are few and small beside a command's output: each is written as it comes.
      const write = (event: string, data: unknown): void => {
        if (!gone.signal.aborted) raw.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      };
      const onEvent = (event: RunEvent): void => {
        if (event.type === 'result') write('result', event.result);
        else if (event.type === 'error') write('error', event.error);
        else write(event.type, { text: event.text });
      };
      try {
        const result = await contexts.runAt(target, request.params.context_id, input, { onEvent, signal: gone.signal });
        write('end', result);
      } catch (err) {
        const error = err instanceof AppError ? err : new AppError('internal_error', 'the run failed');
        if (!(err instanceof AppError)) request.log.error({ err }, 'a streamed run failed');
        write('error', { ...error.toBody(restMessage(error)), request_id: request.id });
      }
      raw.end();
    },
  );
}
