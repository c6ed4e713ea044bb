// The shape of an API key as the API shows it (never the key itself, but once, when it is
// made). This TypeBox schema is the one source of the fields for the routes and core/.
import Type from 'typebox';
import { KEY_ENVS } from './apikeys.ts';

export const KeyEnv = Type.Enum(KEY_ENVS);

export const ApiKey = Type.Object(
  {
    key_id: Type.String({ format: 'uuid' }),
    name: Type.Union([Type.String(), Type.Null()]),
    prefix: Type.String({ description: 'The first characters of the key, to recognise it' }),
    env: KeyEnv,
    created_at: Type.String({ format: 'date-time' }),
    last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'Last authenticated request, to the minute',
    }),
  },
  { title: 'ApiKey' },
);
export type ApiKey = Type.Static<typeof ApiKey>;

export const CreatedApiKey = Type.Object(
  {
    ...ApiKey.properties,
    api_key: Type.String({ description: 'The key itself. Shown only in this response: store it now.' }),
  },
  { title: 'CreatedApiKey' },
);
