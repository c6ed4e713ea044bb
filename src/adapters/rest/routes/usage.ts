// GET /api/usage: the caller's organization's use of each of its quotas.
import type { Services } from '../../../services.ts';
import { callerOf } from '../../../http/auth.ts';
import { Usage } from '../../../core/quota-schema.ts';
import { errorResponses } from '../../../http/schemas.ts';
import type { App } from '../../../http/types.ts';

export function usageRoutes(app: App, { quotas }: Services): void {
  app.get(
    '/api/usage',
    {
      schema: {
        operationId: 'getUsage',
        summary: "The organization's use of its quotas",
        description:
          'Each quota with its limit and current use: live instances, their memory_mb, vcpus and disk_mb together, commands running ' +
          'at once and commands started in the last minute. A create or command over a quota answers 403 quota_exceeded ' +
          '(429 commands_rate_exceeded for commands per minute); the operator sets the limits.',
        tags: ['usage'],
        response: { 200: Usage, ...errorResponses(401) },
      },
    },
    async (request) => quotas.usage(callerOf(request).organizationId),
  );
}
