// Templates: images built from Dockerfiles under a name of the organization (profiles use
// one as `image: "template:NAME"`), their state, their builds' logs (text, or Server-Sent
// Events while a build runs), and their deletion.
import Type from 'typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../../../services.ts';
import { callerOf } from '../../../http/auth.ts';
import { CreateTemplateBody, Template, TEMPLATE_BODY_MAX_BYTES, TemplateBuildStarted, TemplateList } from '../../../core/template-schema.ts';
import type { Templates } from '../../../core/templates.ts';
import { errorResponses } from '../../../http/schemas.ts';
import type { App } from '../../../http/types.ts';
import { openEventStream } from '../sse.ts';

const TemplateParams = Type.Object({
  name_or_id: Type.String({ minLength: 1, maxLength: 128, description: 'The template\'s name or its template_id' }),
});
const BuildParams = Type.Object({
  name_or_id: Type.String({ minLength: 1, maxLength: 128, description: 'The template\'s name or its template_id' }),
  build_id: Type.String({ format: 'uuid' }),
});
/** A comment line this often keeps proxies from timing out a quiet step. */
const KEEPALIVE_MS = 15_000;

export function templateRoutes(app: App, { templates }: Services): void {
  app.post(
    '/api/templates',
    {
      bodyLimit: TEMPLATE_BODY_MAX_BYTES,
      config: { auditAction: 'template.build' },
      schema: {
        operationId: 'buildTemplate',
        summary: 'Build a template from a Dockerfile',
        description:
          'Records a build of `dockerfile` under `name` (a new template, or a rebuild of the organization\'s template of that ' +
          'name) and answers at once with `202`; follow it with GET /api/templates/{name} and its logs. `files` are the build ' +
          'context that COPY and ADD read. Every RUN runs in a sandbox, never on the server\'s host; each step\'s result is ' +
          'cached, so a rebuild runs only the steps that changed and what comes after them. A Dockerfile with an instruction ' +
          'this server does not build gives a build that is `failed` at once, its reason naming the line. One build of a ' +
          'template at a time (`409 template_busy`).',
        tags: ['templates'],
        body: CreateTemplateBody,
        response: { 202: TemplateBuildStarted, ...errorResponses(400, 401, 409, 413) },
      },
    },
    async (request, reply) => reply.code(202).send(await templates.create(callerOf(request).organizationId, request.body)),
  );

  app.get(
    '/api/templates',
    {
      schema: {
        operationId: 'listTemplates',
        summary: 'List templates',
        description: 'The organization\'s templates, by name.',
        tags: ['templates'],
        response: { 200: TemplateList, ...errorResponses(401) },
      },
    },
    async (request) => templates.list(callerOf(request).organizationId),
  );

  app.get(
    '/api/templates/:name_or_id',
    {
      schema: {
        operationId: 'getTemplate',
        summary: 'Get a template',
        description: 'Its state (its latest build\'s: `building`, `ready` or `failed` with the reason) and the image of its last build that succeeded.',
        tags: ['templates'],
        params: TemplateParams,
        response: { 200: Template, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => templates.get(callerOf(request).organizationId, request.params.name_or_id),
  );

  app.get(
    '/api/templates/:name_or_id/builds/:build_id/logs',
    {
      schema: {
        operationId: 'getTemplateBuildLogs',
        summary: 'Read a build\'s log',
        description:
          'The build\'s log as plain text: each step as it started, the output of its commands, `cached` for a step found in ' +
          'the cache, and a last line saying how the build ended. With `Accept: text/event-stream` while the build runs, a ' +
          'stream of Server-Sent Events instead: `log` events (`{"text"}`: the log so far, then each piece as it is written) ' +
          'and a last `end` event with the template as it ended.',
        tags: ['templates'],
        params: BuildParams,
        response: {
          200: {
            description: 'The log',
            content: {
              'text/plain': { schema: Type.String() },
              'text/event-stream': { schema: Type.String({ description: '`log` events, then one `end` event' }) },
            },
          },
          ...errorResponses(400, 401, 404),
        },
      },
    },
    async (request, reply) => {
      const organizationId = callerOf(request).organizationId;
      const { name_or_id, build_id } = request.params;
      const { text, running } = await templates.logs(organizationId, name_or_id, build_id);
      if (running && (request.headers.accept ?? '').includes('text/event-stream')) {
        return streamLog(request, reply, templates, { organizationId, nameOrId: name_or_id, buildId: build_id, text });
      }
      return reply.type('text/plain; charset=utf-8').header('cache-control', 'no-store').send(text);
    },
  );

  app.delete(
    '/api/templates/:name_or_id',
    {
      config: { auditAction: 'template.delete' },
      schema: {
        operationId: 'deleteTemplate',
        summary: 'Delete a template',
        description:
          'Deletes the template (a build under way is stopped) and answers with it as it was. Its name is free again; profiles ' +
          'that name it can no longer start instances, and running instances keep their files.',
        tags: ['templates'],
        params: TemplateParams,
        response: { 200: Template, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => templates.delete(callerOf(request).organizationId, request.params.name_or_id),
  );
}

/** The log so far, then each piece as the build writes it, then the template as it ended. */
function streamLog(
  request: FastifyRequest,
  reply: FastifyReply,
  templates: Templates,
  options: { organizationId: string; nameOrId: string; buildId: string; text: string },
): void {
  const raw = openEventStream(request, reply);
  let gone = false;
  const write = (event: string, data: unknown) => {
    if (!gone) raw.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  const following = templates.follow(options.buildId, (chunk) => write('log', { text: chunk }));
  const sofar = following ? following.text : options.text;
  if (sofar) write('log', { text: sofar });
  const keepalive = setInterval(() => {
    if (!gone) raw.write(': keepalive\n\n');
  }, KEEPALIVE_MS);
  const end = async () => {
    clearInterval(keepalive);
    following?.stop();
    try {
      write('end', await templates.get(options.organizationId, options.nameOrId));
    } catch {
      // Deleted meanwhile: the stream just ends.
    }
    if (!gone) raw.end();
  };
  raw.on('close', () => {
    gone = true;
    clearInterval(keepalive);
    following?.stop();
  });
  void (following ? following.ended.then(end) : end());
}
