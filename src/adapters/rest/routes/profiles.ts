// Profiles: the organization's VM configuration templates.
import Type from 'typebox';
import { profileSchemas } from '../../../core/profile-schema.ts';
import type { Services } from '../../../services.ts';
import { callerOf } from '../../../http/auth.ts';
import { errorResponses, ProfileParams } from '../../../http/schemas.ts';
import type { App } from '../../../http/types.ts';

export function profileRoutes(app: App, { profiles, config }: Services): void {
  const schemas = profileSchemas(config);
  const Profile = Type.Object(schemas.profile.properties, { title: 'Profile' });

  app.post(
    '/api/profiles',
    {
      config: { auditAction: 'profile.create' },
      schema: {
        operationId: 'createProfile',
        summary: 'Create a profile',
        description: 'Every field but `name` is optional and takes the default shown in the Profile schema.',
        tags: ['profiles'],
        body: schemas.create,
        response: { 201: Profile, ...errorResponses(400, 401, 409) },
      },
    },
    async (request, reply) => {
      const profile = await profiles.create(callerOf(request).organizationId, request.body);
      return reply.code(201).send(profile);
    },
  );

  app.get(
    '/api/profiles',
    {
      schema: {
        operationId: 'listProfiles',
        summary: 'List profiles',
        tags: ['profiles'],
        response: { 200: Type.Object({ profiles: Type.Array(Profile) }), ...errorResponses(401) },
      },
    },
    async (request) => ({ profiles: await profiles.list(callerOf(request).organizationId) }),
  );

  app.get(
    '/api/profiles/:profile_id',
    {
      schema: {
        operationId: 'getProfile',
        summary: 'Get a profile',
        tags: ['profiles'],
        params: ProfileParams,
        response: { 200: Profile, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => profiles.get(callerOf(request).organizationId, request.params.profile_id),
  );

  app.patch(
    '/api/profiles/:profile_id',
    {
      config: { auditAction: 'profile.update' },
      schema: {
        operationId: 'updateProfile',
        summary: 'Change a profile',
        description: 'Sets the fields given and keeps the rest. Instances already created keep the resources they were created with.',
        tags: ['profiles'],
        params: ProfileParams,
        body: schemas.patch,
        response: { 200: Profile, ...errorResponses(400, 401, 404, 409) },
      },
    },
    async (request) => profiles.update(callerOf(request).organizationId, request.params.profile_id, request.body),
  );

  app.delete(
    '/api/profiles/:profile_id',
    {
      config: { auditAction: 'profile.delete' },
      schema: {
        operationId: 'deleteProfile',
        summary: 'Delete a profile',
        description: 'Refused with 409 `profile_in_use` while the profile has live instances.',
        tags: ['profiles'],
        params: ProfileParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...errorResponses(400, 401, 404, 409) },
      },
    },
    async (request, reply) => {
      await profiles.delete(callerOf(request).organizationId, request.params.profile_id);
      return reply.code(204).send(null);
    },
  );
}
