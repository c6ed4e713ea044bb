// Schemas shared by the routes: the Error body, path parameters and the resources the
// API answers with. They drive validation, the handlers' types and /openapi.json.
import Type from 'typebox';
import { ERROR_STATUS } from '../errors.ts';
import { KEY_ENVS } from '../core/apikeys.ts';
import { STATES } from '../core/lifecycle.ts';
import { ROOM_ID_PATTERN } from '../core/ids.ts';

export { ROOM_ID_PATTERN };

export const ErrorBody = Type.Object(
  {
    error: Type.String({ description: 'Stable error code', examples: Object.keys(ERROR_STATUS) }),
    message: Type.String({ description: 'What went wrong and, where possible, how to fix it' }),
    details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { $id: 'Error', title: 'Error' },
);

export const ProfileParams = Type.Object({
  profile_id: Type.String({ format: 'uuid', description: 'Profile id (UUID)' }),
});

export const RoomParams = Type.Object({
  profile_id: Type.String({ format: 'uuid', description: 'Profile id (UUID)' }),
  room_id: Type.String({
    pattern: ROOM_ID_PATTERN,
    description: 'Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`)',
  }),
});

export const KeyParams = Type.Object({
  key_id: Type.String({ format: 'uuid', description: 'API key id (UUID), as listed by GET /api/keys' }),
});

export const State = Type.Enum(STATES);
const Env = Type.Enum(KEY_ENVS);

export const Instance = Type.Object(
  {
    instance_id: Type.String({ format: 'uuid' }),
    profile_id: Type.String({ format: 'uuid' }),
    room_id: Type.String(),
    state: State,
    state_history: Type.Array(
      Type.Object({
        state: State,
        at: Type.String({ format: 'date-time' }),
        reason: Type.Optional(Type.String()),
      }),
      { description: 'Every state the instance has been in, oldest first, with when it got there' },
    ),
    failure_reason: Type.Union([Type.String(), Type.Null()], { description: 'Why it failed, when state is `failed`' }),
    progress: Type.Union([Type.String(), Type.Null()], {
      description: 'What provisioning is doing right now when a step takes long, e.g. building the image; null otherwise',
    }),
    runtime: Type.String({ description: 'The runtime the instance runs on, e.g. `gvisor`' }),
    resources: Type.Object({
      memory_mb: Type.Integer(),
      vcpus: Type.Integer(),
      disk_mb: Type.Integer(),
    }),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { title: 'Instance' },
);

export const ApiKey = Type.Object(
  {
    key_id: Type.String({ format: 'uuid' }),
    name: Type.Union([Type.String(), Type.Null()]),
    prefix: Type.String({ description: 'The first characters of the key, to recognise it' }),
    env: Env,
    created_at: Type.String({ format: 'date-time' }),
    last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'Last authenticated request, to the minute',
    }),
  },
  { title: 'ApiKey' },
);

export const CreatedApiKey = Type.Object(
  {
    ...ApiKey.properties,
    api_key: Type.String({ description: 'The key itself. Shown only in this response: store it now.' }),
  },
  { title: 'CreatedApiKey' },
);

export const KeyEnvSchema = Env;

/** Error responses for a route, as OpenAPI sees them. */
export function errorResponses(...statuses: number[]) {
  return Object.fromEntries(statuses.map((s) => [s, { $ref: 'Error#' }]));
}
