// E2B's code interpreter protocol (what `@e2b/code-interpreter` sends to a sandbox's
// port 49999) over roomkit's code contexts (core/contexts.ts): `POST /execute` answers at
// once and then writes one JSON object per line as the code runs (stdout, stderr,
// result, error, then the execution count and the end), and `/contexts` creates, lists,
// deletes and restarts contexts. An E2B context is a core context, the same one REST's
// …/contexts lists; the only thing this adapter keeps is which context is a sandbox's
// default one per language, made at its first run without a context, as E2B's server
// keeps one per language. The SDK sends these requests to E2B_SANDBOX_URL naming the
// sandbox in E2b-Sandbox-Id (with E2b-Sandbox-Port: 49999, which tells them apart from
// envd's and needs no reading here: the paths do not overlap), or to the sandbox's host
// name for port 49999 (envd-host.ts).
import Type from 'typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RunEvent } from '../../core/contexts.ts';
import { type Context, type ContextLanguage, MAX_CODE_BYTES } from '../../core/context-schema.ts';
import type { InstanceRef } from '../../core/instance-address.ts';
import { AppError } from '../../errors.ts';
import { callerOf } from '../../http/auth.ts';
import type { App } from '../../http/types.ts';
import type { Services } from '../../services.ts';
import { sandboxIdOf } from './auth.ts';
import { sandboxGone } from './errors.ts';

/** The language of a run that names neither a context nor a language, as in E2B. */
const DEFAULT_LANGUAGE = 'python';
/** E2B's short names for languages, and the names core knows them by. */
const LANGUAGE_ALIASES: Record<string, string> = { js: 'javascript', py: 'python', python3: 'python', sh: 'bash' };

const Env = Type.Record(Type.String(), Type.String({ maxLength: 32768 }), { propertyNames: { pattern: '^[A-Za-z_][A-Za-z0-9_]*$', maxLength: 128 }, maxProperties: 100 });
const ExecuteBody = Type.Object({
  code: Type.String({ maxLength: MAX_CODE_BYTES }),
  // The Python SDK sends null for what it was not given; the JavaScript SDK leaves it out.
  context_id: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  language: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  env_vars: Type.Optional(Type.Union([Env, Type.Null()])),
});
const CreateBody = Type.Object({
  language: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  cwd: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});
const ContextParams = Type.Object({ context_id: Type.String() });

/** A context as E2B's server describes it. */
function e2bContext(context: Context) {
  return { id: context.context_id, language: context.language, cwd: context.cwd };
}

function languageOf(language: string | null | undefined): string {
  const name = (language ?? DEFAULT_LANGUAGE).trim().toLowerCase();
  return LANGUAGE_ALIASES[name] ?? name;
}

/** One line of the execute stream, as E2B's server writes it. */
function lineOf(event: RunEvent): Record<string, unknown> {
  // The SDKs read a timestamp in microseconds (the JavaScript SDK makes its own, the Python SDK takes this one).
  switch (event.type) {
    case 'result':
      return { type: 'result', ...event.result };
    case 'error':
      return { type: 'error', ...event.error };
    default:
      return { type: event.type, text: event.text, timestamp: Date.now() * 1000 };
  }
}

export function interpreterRoutes(app: App, services: Services): void {
  const { contexts, instances } = services;
  /** A sandbox's default context per language, by instance id: core contexts, found again by id. */
  const defaults = new Map<string, Map<string, string>>();
  /** Sandboxes whose contexts were listed: the first listing shows the default Python context, made for it. */
  const listed = new Set<string>();

  // The SDK names a JSON body on requests that have none (a delete, a restart): an empty one is no body.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(new AppError('validation_error', 'the body is not JSON'), undefined);
    }
  });

  /** The sandbox a call is for, once it is known to be running (else 502, as E2B's proxy answers). */
  const runningSandbox = async (request: FastifyRequest): Promise<InstanceRef> => {
    const address = { organizationId: callerOf(request).organizationId, instanceId: sandboxIdOf(request) };
    if (!(await instances.isReady(address.instanceId))) throw sandboxGone(address.instanceId, 'it is paused, stopped or gone');
    return address;
  };

  /** The context a run without one goes to: the sandbox's default for the language, made the first time. */
  const defaultContext = async (address: InstanceRef, language: string): Promise<string> => {
    let byLanguage = defaults.get(address.instanceId);
    const known = byLanguage?.get(language);
    // A default deleted (through REST, or by the instance stopping) is made again.
    if (known !== undefined && (await contexts.listAt(address)).some((c) => c.context_id === known)) return known;
    const made = await contexts.createAt(address, { language });
    if (!byLanguage) defaults.set(address.instanceId, (byLanguage = new Map()));
    byLanguage.set(language, made.context_id);
    return made.context_id;
  };
  instances.onStopping((instanceId, _why, pause) => {
    if (!pause?.keepsMemory) {
      defaults.delete(instanceId);
      listed.delete(instanceId);
    }
  });

  app.post('/execute', { schema: { hide: true, body: ExecuteBody }, config: { auditAction: 'context.run' } }, async (request, reply) => {
    const body = request.body as Type.Static<typeof ExecuteBody>;
    const address = await runningSandbox(request);
    if (body.context_id && body.language) throw new AppError('validation_error', 'a run names a context or a language, not both');
    const contextId = body.context_id || (await defaultContext(address, languageOf(body.language)));
    // A context that is not there is an HTTP error (404), not a stream.
    await contexts.getAt(address, contextId);
    await streamRun(reply, async (write, signal) => {
      const result = await contexts.runAt(address, contextId, { code: body.code, ...(body.env_vars ? { env: body.env_vars } : {}) }, { onEvent: (e) => write(lineOf(e)), signal });
      // A sandbox killed during the run ends the stream without its end, as E2B's does: the SDK then finds it gone.
      if (!(await instances.isReady(address.instanceId))) return false;
      write({ type: 'number_of_executions', execution_count: result.execution_count });
      write({ type: 'end_of_execution' });
      return true;
    });
  });

  app.post('/contexts', { schema: { hide: true, body: Type.Optional(CreateBody) }, config: { auditAction: 'context.create' } }, async (request) => {
    const body = (request.body ?? {}) as Type.Static<typeof CreateBody>;
    const address = await runningSandbox(request);
    const made = await contexts.createAt(address, { language: languageOf(body.language) as ContextLanguage, ...(body.cwd ? { cwd: body.cwd } : {}) });
    return e2bContext(made);
  });

  app.get('/contexts', { schema: { hide: true } }, async (request) => {
    const address = await runningSandbox(request);
    // E2B's server starts with its default Python context, which a first listing shows; ours is
    // made then (or at the first run without a context), and one deleted later stays deleted here.
    if (!listed.has(address.instanceId)) {
      listed.add(address.instanceId);
      try {
        await defaultContext(address, DEFAULT_LANGUAGE);
      } catch (err) {
        // An instance that cannot run one (no python3, a runtime without contexts) lists what it has.
        if (!(err instanceof AppError)) throw err;
        request.log.info({ err }, 'no default Python context for the first listing');
      }
    }
    return (await contexts.listAt(address)).map(e2bContext);
  });

  app.delete('/contexts/:context_id', { schema: { hide: true, params: ContextParams }, config: { auditAction: 'context.delete' } }, async (request, reply) => {
    const address = await runningSandbox(request);
    await contexts.deleteAt(address, (request.params as { context_id: string }).context_id);
    return reply.code(204).send();
  });

  app.post('/contexts/:context_id/restart', { schema: { hide: true, params: ContextParams }, config: { auditAction: 'context.restart' } }, async (request, reply) => {
    const address = await runningSandbox(request);
    await contexts.restartAt(address, (request.params as { context_id: string }).context_id);
    return reply.code(204).send();
  });
}

/**
 * Answers 200 at once and hands `run` a writer of JSON lines and a signal that aborts when
 * the client goes away (which interrupts the code, as the SDK's own timeout does by
 * closing its request). `run` answering false, or failing, closes the connection without
 * an end, which the SDK reads as the sandbox being gone.
 */
async function streamRun(reply: FastifyReply, run: (write: (line: unknown) => void, signal: AbortSignal) => Promise<boolean>): Promise<void> {
  const gone = new AbortController();
  const raw = reply.raw;
  raw.on('close', () => {
    if (!raw.writableFinished) gone.abort();
  });
  reply.hijack();
  raw.writeHead(200, {
    ...Object.fromEntries(Object.entries(reply.getHeaders()).filter(([, value]) => value !== undefined)),
    'content-type': 'application/x-ndjson',
    'cache-control': 'no-store',
    'x-accel-buffering': 'no',
    'x-request-id': reply.request.id,
  });
  raw.flushHeaders();
  const write = (line: unknown): void => {
    if (!gone.signal.aborted) raw.write(`${JSON.stringify(line)}\n`);
  };
  let ended = false;
  try {
    ended = await run(write, gone.signal);
  } catch (err) {
    reply.request.log.warn({ err }, 'an E2B code run failed after its answer began');
  }
  if (ended) raw.end();
  else raw.destroy();
}
