// GET /api/usage: the caller's organization's use of each of its quotas, and the host
// memory its running instances use (its own alone: the host's figures are the operator's,
// GET /operator/capacity).
import type { Services } from '../../../services.ts';
import { callerOf } from '../../../http/auth.ts';
import { Usage } from '../../../core/quota-schema.ts';
import { errorResponses } from '../../../http/schemas.ts';
import type { App } from '../../../http/types.ts';
import type { Usage as UsageBody } from '../../../core/quota-schema.ts';

/** An organization's quotas and use, with what its running instances use of the host's memory. */
export async function usageWithMemory({ quotas, instances }: Pick<Services, 'quotas' | 'instances'>, organizationId: string): Promise<UsageBody> {
  const usage = await quotas.usage(organizationId);
  const inUse = await instances.memoryInUseMb(organizationId);
  return inUse === undefined ? usage : { ...usage, memory_in_use_mb: inUse };
}

export function usageRoutes(app: App, services: Services): void {
  app.get(
    '/api/usage',
    {
      schema: {
        operationId: 'getUsage',
        summary: "The organization's use of its quotas",
        description:
          'Each quota with its limit and current use: live instances, their memory_mb, vcpus and disk_mb together, commands running ' +
          'at once and commands started in the last minute. A create or command over a quota answers 403 quota_exceeded ' +
          '(429 commands_rate_exceeded for commands per minute); the operator sets the limits. `memory_in_use_mb` is what its running ' +
          'instances use of the host\'s memory now, measured: not a quota, but what host admission counts (an idle instance may be paused ' +
          'when the host needs memory, reason `memory_pressure`, and resumes on its next request).',
        tags: ['usage'],
        response: { 200: Usage, ...errorResponses(401) },
      },
    },
    async (request) => usageWithMemory(services, callerOf(request).organizationId),
  );
}
