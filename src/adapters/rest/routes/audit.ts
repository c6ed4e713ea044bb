// The organization's audit trail: what its keys changed, when, from where, and what the
// service decided (see http/audit.ts for what is recorded).
import { AuditPage, AuditQuery } from '../../../core/audit-schema.ts';
import type { Services } from '../../../services.ts';
import { callerOf } from '../../../http/auth.ts';
import { errorResponses } from '../../../http/schemas.ts';
import type { App } from '../../../http/types.ts';

export function auditRoutes(app: App, { audit }: Services): void {
  app.get(
    '/api/audit',
    {
      schema: {
        operationId: 'listAuditRecords',
        summary: 'The audit trail',
        description:
          'Every state-changing request of the organization (POST, PUT, PATCH and DELETE under /api/, and each tool call over /mcp that ' +
          'changes something), newest first: who (the key id), what (action, route, ids, command text, exit code and files_changed ' +
          'counts, file path), when, from where, and the decision (allowed, denied_quota, rate_limited, error) with the status and error code. ' +
          'Never the key itself, file contents or command output. `since` is inclusive, `until` exclusive. ' +
          'Pass `next_cursor` back as `cursor` (with the same filters) for the next page.',
        tags: ['audit'],
        querystring: AuditQuery,
        response: { 200: AuditPage, ...errorResponses(400, 401, 503) },
      },
    },
    async (request) => {
      const { limit, cursor, since, until, key_id, instance_id, profile_id, room_id, action, decision } = request.query;
      return audit.list(
        callerOf(request).organizationId,
        {
          ...(since === undefined ? {} : { since }),
          ...(until === undefined ? {} : { until }),
          ...(key_id === undefined ? {} : { keyId: key_id }),
          ...(instance_id === undefined ? {} : { instanceId: instance_id }),
          ...(profile_id === undefined ? {} : { profileId: profile_id }),
          ...(room_id === undefined ? {} : { roomId: room_id }),
          ...(action === undefined ? {} : { action }),
          ...(decision === undefined ? {} : { decision }),
        },
        { limit: limit === undefined ? 50 : Number(limit), ...(cursor === undefined ? {} : { cursor }) },
      );
    },
  );
}
