// Schemas shared by the routes: the Error body, path parameters and the resources the
// API answers with. They drive validation, the handlers' types and /openapi.json.
import Type from 'typebox';
import { ERROR_STATUS } from '../errors.ts';
import { ROOM_ID_PATTERN } from '../lib/ids.ts';
import { NAME_PATTERN } from '../core/profile-schema.ts';

export { ROOM_ID_PATTERN };

export const ErrorBody = Type.Object(
  {
    error: Type.String({ description: 'Stable error code', examples: Object.keys(ERROR_STATUS) }),
    message: Type.String({ description: 'What went wrong and, where possible, how to fix it' }),
    problem: Type.Optional(Type.String({ description: 'With a hint: the message without its advice (what went wrong alone), for a client that words the advice itself' })),
    hint: Type.Optional(
      Type.Object(
        { code: Type.String({ description: 'What the caller can do next, as a stable code (the advice at the end of message, as data)' }) },
        { additionalProperties: Type.Union([Type.String(), Type.Number()]), description: 'The advice as data: its code and the values its wording needs (e.g. profile_id, room_id)' },
      ),
    ),
    details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    request_id: Type.Optional(
      Type.String({ description: 'The request\'s id, as in the X-Request-Id header and the server log: quote it when reporting a problem' }),
    ),
  },
  { $id: 'Error', title: 'Error' },
);

/** A profile id in a path; its name is accepted too (adapters/rest/profile-names.ts). */
const ProfileIdParam = Type.String({ pattern: NAME_PATTERN, description: "Profile id (UUID), or the profile's name" });

export const ProfileParams = Type.Object({ profile_id: ProfileIdParam });

export const RoomParams = Type.Object({
  profile_id: ProfileIdParam,
  room_id: Type.String({
    pattern: ROOM_ID_PATTERN,
    description: 'Caller-chosen room name: 1-128 characters of A-Z a-z 0-9 . _ - (not `.` or `..`)',
  }),
});

export const KeyParams = Type.Object({
  key_id: Type.String({ format: 'uuid', description: 'API key id (UUID), as listed by GET /api/keys' }),
});

/** Error responses for a route, as OpenAPI sees them. */
export function errorResponses(...statuses: number[]) {
  return Object.fromEntries(statuses.map((s) => [s, { $ref: 'Error#' }]));
}
