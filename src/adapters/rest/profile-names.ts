// A profile's name works wherever a path takes a profile id, as it does in the SDKs, the
// CLI and MCP: `/api/profile/default/room/r1` is `/api/profile/<its UUID>/room/r1`. The
// name is looked up in the caller's organization before validation, and the handler, the
// audit trail and the logs see the UUID (responses always carry the UUID). A value in
// UUID form is taken as an id; a name that names no profile is answered like an unknown
// id, `404 profile_not_found`.
import type { FastifyInstance } from 'fastify';
import type { Profiles } from '../../core/profiles.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function resolveProfileNames(app: FastifyInstance, profiles: Profiles): void {
  app.addHook('preValidation', async (request) => {
    const params = request.params as Record<string, string> | undefined;
    const given = params?.profile_id;
    if (given === undefined || UUID.test(given) || !request.caller) return;
    const id = await profiles.idOfName(request.caller.organizationId, given);
    if (id !== undefined) params!.profile_id = id;
  });
}
