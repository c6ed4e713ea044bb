// The operator API under /operator/: the organizations, an organization's quotas and use,
// what this host has committed and its warm pools, and the nodes sharing the store. Registered only when ROOMKIT_OPERATOR_TOKEN is set, and guarded by
// that token (not by API keys, which belong to tenants), compared in constant time, or
// by the web console's operator session (its cookie beside its CSRF token), made with it.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import Type from 'typebox';
import { csrfTokenMatches } from '../../../core/console-sessions.ts';
import { AppError } from '../../../errors.ts';
import { CSRF_HEADER, sessionCookieOf } from '../../../http/session-cookie.ts';
import type { Services } from '../../../services.ts';
import { QuotaOverrides, Usage } from '../../../core/quota-schema.ts';
import { PROFILE_DEFAULTS } from '../../../core/profile-schema.ts';
import { errorResponses } from '../../../http/schemas.ts';
import type { App } from '../../../http/types.ts';
import { usageWithMemory } from './usage.ts';
import { NodeInfo, NodeList } from '../../../cluster/node-schema.ts';
import { listOrganizations } from '../../../core/org-overview.ts';

const OrgParams = Type.Object({
  org: Type.String({ minLength: 1, maxLength: 64, description: "The organization's name or id" }),
});

const Capacity = Type.Object(
  {
    memory: Type.Object({
      limit_mb: Type.Integer({ description: 'ROOMKIT_ADMIT_MEMORY_PERCENT of the host\'s memory (or of ROOMKIT_ADMIT_HOST_MEMORY_MB)' }),
      committed_mb: Type.Integer({ description: 'What running instances may take together by their limits, with their runtime\'s headroom (admission does not count it)' }),
      in_use_mb: Type.Integer({ description: 'What running instances use now, measured; starting ones at least at their runtime\'s estimate. Admission counts this' }),
      reserve_mb: Type.Integer({ description: 'Kept free for running instances to grow (ROOMKIT_ADMIT_RESERVE_MB)' }),
      host_available_mb: Type.Integer({ description: 'The host\'s MemAvailable now' }),
      room_mb: Type.Integer({ description: 'What a new instance may start in: the share less what is in use, bounded by the host\'s available memory, less the reserve (negative under pressure)' }),
      under_pressure: Type.Boolean({ description: 'Whether running instances eat into the reserve: idle ones are then paused' }),
      pressure_pauses: Type.Integer({ description: 'Idle instances paused for memory pressure since the service started' }),
    }),
    disk: Type.Object({
      limit_mb: Type.Integer({ description: 'ROOMKIT_ADMIT_DISK_PERCENT of the data directory\'s free space' }),
      committed_mb: Type.Integer({ description: 'The writable disks of live instances together' }),
      free_mb: Type.Integer({ description: 'What the data directory\'s file system has free now' }),
      floor_mb: Type.Integer({ description: 'What it keeps free whatever ROOMKIT_ADMIT_DISK_PERCENT says: creates are refused below it' }),
    }),
    cpu: Type.Object({
      busy_percent: Type.Union([Type.Number(), Type.Null()], { description: 'Share of the host\'s CPU time that was busy between the last two expiry checks (null before the second)' }),
      freeze_percent: Type.Integer({ description: 'ROOMKIT_FREEZE_CPU_PERCENT: above it, idle and quiet instances are frozen (0: never)' }),
      frozen_instances: Type.Integer({ description: 'Instances frozen now (they thaw on their next request)' }),
      pressure_freezes: Type.Integer({ description: 'Idle instances frozen for CPU pressure since the service started' }),
    }),
    admissible_default_instances: Type.Integer({ description: 'How many more instances of the default profile this host admits now, each counted at its runtime\'s starting estimate' }),
    warm_pools: Type.Object({
      max_instances: Type.Integer({ description: 'ROOMKIT_WARM_POOL_MAX_INSTANCES: what all pools may keep booted on this host together (0: pools are off)' }),
      pools: Type.Array(
        Type.Object({
          organization_id: Type.String(),
          profile_id: Type.String(),
          profile_name: Type.Union([Type.String(), Type.Null()], { description: 'Null once the profile is deleted: its pooled instances are being removed' }),
          size: Type.Integer({ description: 'The profile\'s warm_pool (0 when pools are off or the profile is deleted)' }),
          ready: Type.Integer({ description: 'Pooled instances on this node made from the profile as it is now, booted and waiting for a room' }),
          starting: Type.Integer({ description: 'Such instances still being made' }),
          leaving: Type.Integer({ description: 'Pooled instances on this node made from an older version of the profile, being removed' }),
        }),
        { description: 'Every profile with a pool size above 0, or with instances still in a pool on this node; by organization, then profile name' },
      ),
    }),
  },
  { title: 'HostCapacity' },
);

const digest = (value: string) => createHash('sha256').update(value).digest();

export function operatorRoutes(app: App, services: Services): void {
  const token = services.config.operatorToken;
  if (token === undefined) return;
  const expected = digest(token);
  const authenticate = async (request: FastifyRequest) => {
    const header = request.headers.authorization;
    const session = header === undefined || header.trim() === '' ? sessionCookieOf(request) : undefined;
    if (session !== undefined) {
      // As for a key's session (http/auth.ts): another site can make the browser send the cookie, never the token.
      const csrf = request.headers[CSRF_HEADER];
      if (typeof csrf !== 'string' || !csrfTokenMatches(session, csrf)) {
        throw new AppError('invalid_csrf_token', `a request with the console's session cookie must carry the session's CSRF token in the ${CSRF_HEADER} header (GET /console/session answers it)`);
      }
      if (await services.consoleSessions.findOperator(session, token)) return;
      throw new AppError('invalid_operator_token', 'this console session is not the operator\'s, or it is over (signed out, expired, or the operator token changed): sign in with the operator token');
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    if (!match?.[1] || !timingSafeEqual(digest(match[1]), expected)) {
      throw new AppError('invalid_operator_token', 'the operator API needs "Authorization: Bearer <ROOMKIT_OPERATOR_TOKEN>"');
    }
  };
  const { organizations, quotas } = services;

  app.get(
    '/operator/organizations',
    {
      onRequest: authenticate,
      schema: {
        operationId: 'listOrganizations',
        summary: 'The organizations, with their live instances and keys',
        description: 'By name. Pass `next_cursor` back as `cursor` for the next page.',
        tags: ['operator'],
        querystring: Type.Object({
          limit: Type.Optional(Type.String({ pattern: '^(500|[1-4][0-9]{2}|[1-9][0-9]?)$', description: '1-500, default 100' })),
          cursor: Type.Optional(Type.String({ maxLength: 512 })),
        }),
        response: {
          200: Type.Object(
            {
              organizations: Type.Array(
                Type.Object({
                  organization_id: Type.String(),
                  name: Type.String(),
                  created_at: Type.String({ format: 'date-time' }),
                  live_instances: Type.Integer({ description: 'Its instances in rooms that are not stopped nor failed, on every node (warm pool instances are not counted)' }),
                  keys: Type.Integer({ description: 'Its API keys not revoked' }),
                }),
              ),
              next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Null on the last page' }),
            },
            { title: 'OrganizationList' },
          ),
          ...errorResponses(400, 401),
        },
      },
    },
    async (request) => {
      const { limit, cursor } = request.query;
      return listOrganizations(services.db, { limit: limit === undefined ? 100 : Number(limit), cursor });
    },
  );

  app.get(
    '/operator/orgs/:org/usage',
    {
      onRequest: authenticate,
      schema: {
        operationId: 'getOrganizationQuotas',
        summary: "An organization's quotas and use",
        tags: ['operator'],
        params: OrgParams,
        response: { 200: Usage, ...errorResponses(401, 404) },
      },
    },
    async (request) => usageWithMemory(services, (await organizations.find(request.params.org)).organization_id),
  );

  app.put(
    '/operator/orgs/:org/quotas',
    {
      onRequest: authenticate,
      schema: {
        operationId: 'setOrganizationQuotas',
        summary: "Set an organization's quotas",
        description: 'A number sets the quota for this organization, null returns it to the configured default, an absent field stays. Takes effect on the next request.',
        tags: ['operator'],
        params: OrgParams,
        body: QuotaOverrides,
        response: { 200: Usage, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const { organization_id } = await organizations.find(request.params.org);
      await quotas.setOverrides(organization_id, request.body);
      return usageWithMemory(services, organization_id);
    },
  );

  app.get(
    '/operator/nodes',
    {
      onRequest: authenticate,
      schema: {
        operationId: 'listNodes',
        summary: 'The nodes sharing this PostgreSQL store: their address, state, heartbeat, capacity and load',
        description:
          'Every `roomkit serve` with a PostgreSQL store (ROOMKIT_DATABASE_URL) is a node; with SQLite there is one, and this answers 409 feature_unavailable.',
        tags: ['operator'],
        response: { 200: NodeList, ...errorResponses(401, 409) },
      },
    },
    async () => {
      const nodes = services.nodes;
      if (!nodes) {
        throw new AppError('feature_unavailable', 'this server keeps its store in SQLite, so it is the only node; nodes share a PostgreSQL store (ROOMKIT_DATABASE_URL)');
      }
      return { nodes: await nodes.list(), this_node: nodes.nodeId };
    },
  );

  for (const [action, state, summary] of [
    ['drain', 'draining', 'Drain a node: no create is placed on it any more; its instances run on until they end'],
    ['activate', 'active', 'Make a drained node take creates again'],
  ] as const) {
    app.post(
      `/operator/nodes/:node_id/${action}`,
      {
        onRequest: authenticate,
        schema: {
          operationId: `${action}Node`,
          summary,
          description:
            'Any node of the store answers, for any node. A drained node keeps that state when it starts again. Its live instances show in `load.instances` of GET /operator/nodes; `roomkit nodes drain NODE --wait` waits for them to end.',
          tags: ['operator'],
          params: Type.Object({ node_id: Type.String({ minLength: 1, maxLength: 128 }) }),
          response: { 200: NodeInfo, ...errorResponses(401, 404, 409) },
        },
      },
      async (request) => {
        const nodes = services.nodes;
        if (!nodes) throw new AppError('feature_unavailable', 'this server keeps its store in SQLite, so it is the only node; nodes share a PostgreSQL store (ROOMKIT_DATABASE_URL)');
        return nodes.setState(request.params.node_id, state);
      },
    );
  }

  app.get(
    '/operator/capacity',
    {
      onRequest: authenticate,
      schema: {
        operationId: 'getHostCapacity',
        summary: 'What this host has committed, and how far host admission lets it go',
        tags: ['operator'],
        response: { 200: Capacity, ...errorResponses(401, 503) },
      },
    },
    async () => {
      const runtime = services.instances.activeRuntime();
      const { admissible, ...capacity } = await services.admission.capacity(services.db, runtime);
      const cpu = services.instances.cpuPressure;
      return {
        ...capacity,
        memory: { ...capacity.memory, pressure_pauses: services.instances.memoryPressure.pausedCount },
        cpu: {
          busy_percent: cpu.last.busyPercent === null ? null : Math.round(cpu.last.busyPercent * 10) / 10,
          freeze_percent: services.config.freezeCpuPercent,
          frozen_instances: cpu.last.frozen,
          pressure_freezes: cpu.frozenCount,
        },
        admissible_default_instances: admissible(PROFILE_DEFAULTS),
        warm_pools: { max_instances: services.config.warmPoolMaxInstances, pools: await services.instances.warmPool.figures() },
      };
    },
  );
}
