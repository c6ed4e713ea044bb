// E2B's snapshots and fork over core's: a snapshot of a sandbox is a roomkit snapshot of
// its instance (files; a paused instance's memory as core keeps it), named by its id,
// and usable as a template (a create whose templateID is a snapshot's id starts from it,
// in the snapshot's profile); deleting a snapshot is E2B's DELETE of a template. A fork
// is core's fork into `count` new rooms named as E2B's creates name theirs.
import Type from 'typebox';
import type { InstanceRef } from '../../core/instance-address.ts';
import { AppError } from '../../errors.ts';
import { callerOf } from '../../http/auth.ts';
import type { App } from '../../http/types.ts';
import type { Services } from '../../services.ts';
import type { AccessTokens } from './access-tokens.ts';
import { connectedSandbox, DEFAULT_TIMEOUT_S, newRoomId } from './sandboxes.ts';

const SandboxParams = Type.Object({ sandboxID: Type.String({ maxLength: 128 }) });
const TemplateParams = Type.Object({ templateID: Type.String({ maxLength: 128 }) });
const SnapshotBody = Type.Object({ name: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })) });
const SnapshotQuery = Type.Object({
  sandboxID: Type.Optional(Type.String({ maxLength: 128 })),
  name: Type.Optional(Type.String()),
  limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,4}$' })),
  nextToken: Type.Optional(Type.String()),
});
const ForkBody = Type.Object({ timeout: Type.Optional(Type.Integer({ minimum: 0 })), count: Type.Optional(Type.Integer({ minimum: 1, maximum: 16 })) });

const MAX_LIST_LIMIT = 100;

function snapshotOf(snapshot: { snapshot_id: string; name: string | null }) {
  return { snapshotID: snapshot.snapshot_id, names: snapshot.name === null ? [] : [snapshot.name] };
}

export function snapshotRoutes(app: App, services: Services, tokens: AccessTokens): void {
  const ref = (organizationId: string, sandboxId: string): InstanceRef => ({ organizationId, instanceId: sandboxId });

  app.post(
    '/sandboxes/:sandboxID/snapshots',
    { schema: { hide: true, params: SandboxParams, body: SnapshotBody }, config: { auditAction: 'snapshot.create' } },
    async (request, reply) => {
      const caller = callerOf(request);
      const snapshot = await services.snapshots.createAt(ref(caller.organizationId, request.params.sandboxID), {
        ...(request.body.name === undefined ? {} : { name: request.body.name }),
      });
      return reply.code(201).send(snapshotOf(snapshot));
    },
  );

  app.get('/snapshots', { schema: { hide: true, querystring: SnapshotQuery } }, async (request, reply) => {
    const caller = callerOf(request);
    const query = request.query;
    const limit = Math.min(query.limit === undefined ? MAX_LIST_LIMIT : Number(query.limit), MAX_LIST_LIMIT);
    if (limit < 1) throw new AppError('validation_error', 'limit must be at least 1');
    const page = await services.snapshots.list(caller.organizationId, {
      limit,
      ...(query.nextToken === undefined ? {} : { cursor: query.nextToken }),
      ...(query.sandboxID === undefined ? {} : { instanceId: query.sandboxID }),
    });
    if (page.next_cursor !== null) reply.header('x-next-token', page.next_cursor);
    return page.snapshots.filter((s) => query.name === undefined || s.name === query.name).map(snapshotOf);
  });

  app.delete('/templates/:templateID', { schema: { hide: true, params: TemplateParams }, config: { auditAction: 'snapshot.delete' } }, async (request, reply) => {
    const caller = callerOf(request);
    await services.snapshots.delete(caller.organizationId, request.params.templateID);
    return reply.code(204).send();
  });

  app.post(
    '/sandboxes/:sandboxID/fork',
    { schema: { hide: true, params: SandboxParams, body: ForkBody }, config: { auditAction: 'instance.fork' } },
    async (request) => {
      const caller = callerOf(request);
      const source = await services.instances.getAt(ref(caller.organizationId, request.params.sandboxID));
      const rooms = Array.from({ length: request.body.count ?? 1 }, () => newRoomId());
      const forked = await services.snapshots.fork(caller.organizationId, source.profile_id, source.room_id, { rooms, keepSnapshot: false, timeoutAction: 'stop' });
      const results = [];
      for (const copy of forked.instances) {
        if (copy.state !== 'ready') {
          results.push({ error: { code: 500, message: copy.failure_reason ?? `the copy is ${copy.state}` } });
          continue;
        }
        const address = ref(caller.organizationId, copy.instance_id);
        const timed = await services.instances.keepAliveAt(address, { timeout_s: request.body.timeout ?? DEFAULT_TIMEOUT_S });
        results.push({ sandbox: connectedSandbox(timed, tokens.sign({ instanceId: copy.instance_id, caller }), { domain: services.config.previewDomain }) });
      }
      return results;
    },
  );
}
