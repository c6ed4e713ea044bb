// The shapes of signed preview URLs as the API takes and gives them (POST
// …/ports/{port}/url): the one source of their fields, types and OpenAPI.
import Type from 'typebox';
import { PREVIEW_URL_DEFAULT_EXPIRY_S } from './ports.ts';

export const PortUrlRequest = Type.Object(
  {
    expires_in_s: Type.Optional(
      Type.Integer({
        minimum: 1,
        description: `How long the URL works, in seconds: default ${PREVIEW_URL_DEFAULT_EXPIRY_S} (1 hour), at most the server's ROOMKIT_PREVIEW_URL_MAX_EXPIRY_S (default 86400, 24 hours)`,
      }),
    ),
  },
  { additionalProperties: false, title: 'PortUrlRequest' },
);
export type PortUrlRequest = Type.Static<typeof PortUrlRequest>;

export const PortUrl = Type.Object(
  {
    url: Type.String({
      description: 'The URL to open: host_url when the server has a preview domain (ROOMKIT_PREVIEW_DOMAIN), else path_url',
    }),
    path_url: Type.String({
      description: 'The port under this server\'s own address, /p/{token}/…: works on any host; for browsers, its pages run sandboxed (an origin of their own)',
    }),
    host_url: Type.Optional(
      Type.String({
        description:
          'The port at a host name of its own, {port}-{instance_id}.{ROOMKIT_PREVIEW_DOMAIN}, with the token once in the query (a cookie of that host carries it after): ' +
          'for web apps in browsers. Absent when the server has no preview domain',
      }),
    ),
    instance_id: Type.String({ format: 'uuid', description: 'The instance the URL reaches; it stops working when the instance ends' }),
    port: Type.Integer({ minimum: 1, maximum: 65535 }),
    expires_at: Type.String({ format: 'date-time', description: 'When the URL stops working' }),
  },
  { title: 'PortUrl' },
);
export type PortUrl = Type.Static<typeof PortUrl>;
