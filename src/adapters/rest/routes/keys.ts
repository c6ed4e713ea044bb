// API key management for the caller's organization.
import Type from 'typebox';
import type { Services } from '../../../services.ts';
import { callerOf } from '../../../http/auth.ts';
import { ApiKey, CreatedApiKey, KeyEnv } from '../../../core/key-schema.ts';
import { errorResponses, KeyParams } from '../../../http/schemas.ts';
import type { App } from '../../../http/types.ts';

export function keyRoutes(app: App, { organizations }: Services): void {
  app.post(
    '/api/keys',
    {
      config: { auditAction: 'key.create' },
      schema: {
        operationId: 'createKey',
        summary: 'Create an API key',
        description: 'Creates a key for the caller\'s organization. The key is in this response only; store it now. `env` defaults to the environment of the calling key.',
        tags: ['keys'],
        body: Type.Object(
          {
            env: Type.Optional(KeyEnv),
            name: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'A label for the key' })),
          },
          { additionalProperties: false },
        ),
        response: { 201: CreatedApiKey, ...errorResponses(400, 401) },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      const { info, secret } = await organizations.createKey(caller.organizationId, {
        env: request.body.env ?? caller.env,
        name: request.body.name,
      });
      return reply.code(201).send({ ...info, api_key: secret });
    },
  );

  app.get(
    '/api/keys',
    {
      schema: {
        operationId: 'listKeys',
        summary: 'List API keys',
        description: 'The organization\'s keys that are not revoked. Keys themselves are never shown again, only their prefix.',
        tags: ['keys'],
        response: { 200: Type.Object({ keys: Type.Array(ApiKey) }), ...errorResponses(401) },
      },
    },
    async (request) => ({ keys: await organizations.listKeys(callerOf(request).organizationId) }),
  );

  app.delete(
    '/api/keys/:key_id',
    {
      config: { auditAction: 'key.revoke' },
      schema: {
        operationId: 'revokeKey',
        summary: 'Revoke an API key',
        description: 'Takes effect on the next request, including for the key making this call.',
        tags: ['keys'],
        params: KeyParams,
        response: { 204: Type.Null({ description: 'Revoked' }), ...errorResponses(400, 401, 404) },
      },
    },
    async (request, reply) => {
      await organizations.revokeKey(callerOf(request).organizationId, request.params.key_id);
      return reply.code(204).send(null);
    },
  );
}
