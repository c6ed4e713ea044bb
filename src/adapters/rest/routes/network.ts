// A room's instance's egress policy, changed while it runs: PUT …/network.
import type { Services } from '../../../services.ts';
import { callerOf } from '../../../http/auth.ts';
import { roomRef } from '../../../core/instance-address.ts';
import { Network, NetworkBody } from '../../../core/network-schema.ts';
import { errorResponses, RoomParams } from '../../../http/schemas.ts';
import type { App } from '../../../http/types.ts';

export function networkRoutes(app: App, { instances }: Services): void {
  app.put(
    '/api/profile/:profile_id/room/:room_id/network',
    {
      config: { auditAction: 'instance.network' },
      schema: {
        operationId: 'setInstanceNetwork',
        summary: 'Change the egress policy of the room\'s instance',
        description:
          'Replaces the instance\'s `network` (the profile\'s object; `egress` required, lists left out empty) and answers the policy ' +
          'now in force. A ready instance gets it at once: connections through the egress proxy are ended, connections to ' +
          'allowed ranges go on only while the new policy still allows their range and port, and its resolv.conf names the ' +
          'resolver of the new mode. A paused instance gets it at its resume. The profile is not changed.',
        tags: ['instances'],
        params: RoomParams,
        body: { ...NetworkBody, examples: [{ egress: 'allowlist', allow: ['pypi.org', '*.pythonhosted.org', 'github.com'] }] },
        response: { 200: Network, ...errorResponses(400, 401, 404, 409) },
      },
    },
    async (request) => {
      const { profile_id, room_id } = request.params;
      const body = request.body;
      return instances.setNetworkAt(roomRef(callerOf(request).organizationId, profile_id, room_id), {
        egress: body.egress,
        allow: body.allow ?? [],
        deny: body.deny ?? [],
      });
    },
  );
}
