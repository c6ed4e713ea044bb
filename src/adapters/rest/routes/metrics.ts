// GET /metrics: the service's Prometheus metrics (see src/metrics.ts for what is
// measured). Open like /healthz unless ROOMKIT_METRICS_TOKEN is set, then only with that
// bearer token; `off` leaves the route out.
import { createHash, timingSafeEqual } from 'node:crypto';
import { AppError } from '../../../errors.ts';
import type { Services } from '../../../services.ts';
import type { DocumentedResponse } from '../../../http/openapi.ts';
import type { App } from '../../../http/types.ts';

const digest = (text: string) => createHash('sha256').update(text).digest();

const UNAUTHORIZED: DocumentedResponse = {
  description: 'The metrics token is missing or wrong',
  content: { 'application/json': { schema: { $ref: 'Error#' } } },
};

export function metricsRoutes(app: App, { config, metrics }: Services): void {
  const token = config.metricsToken;
  if (token === 'off') return;
  const expected = token === undefined ? undefined : digest(`Bearer ${token}`);
  const documentedResponses: Record<number, DocumentedResponse> = {
    200: {
      description: 'The figures, in the Prometheus text exposition format',
      content: {
        'text/plain': {
          schema: { type: 'string' },
          example: '# HELP roomkit_instances Live instances, by state\n# TYPE roomkit_instances gauge\nroomkit_instances{state="ready"} 3\n',
        },
      },
    },
  };
  if (expected !== undefined) documentedResponses[401] = UNAUTHORIZED;
  app.get(
    '/metrics',
    {
      config: { documentedResponses },
      schema: {
        operationId: 'getMetrics',
        summary: 'Metrics in the Prometheus text format',
        description:
          'Requests by route and status, latencies, instances by state, creates and their phases, commands, memory committed, ' +
          'memory-guard kills, rate-limit and quota refusals, and the process\'s own figures. No API key; when the server sets ' +
          'ROOMKIT_METRICS_TOKEN, send it as "Authorization: Bearer <token>".',
        tags: ['meta'],
        produces: ['text/plain'],
      },
    },
    async (request, reply) => {
      if (expected !== undefined) {
        const given = digest(request.headers.authorization ?? '');
        if (!timingSafeEqual(given, expected)) {
          throw new AppError('invalid_api_key', 'GET /metrics needs the metrics token of this server: "Authorization: Bearer <ROOMKIT_METRICS_TOKEN>"');
        }
      }
      const { contentType, body } = await metrics.scrape();
      reply.header('Cache-Control', 'no-store');
      return reply.type(contentType).send(body);
    },
  );
}
