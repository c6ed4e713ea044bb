// The shapes of templates as the API shows them: a template, its builds, what a build
// made, and the body that starts one. These TypeBox schemas are the one source of their
// fields for the routes (validation, OpenAPI) and for core/.
import Type from 'typebox';
import { TEMPLATE_NAME_PATTERN } from './dockerfile-parser.ts';

/** The most a Dockerfile may weigh, in bytes. */
export const DOCKERFILE_MAX_BYTES = 64 * 1024;
/** The most files a build's `files` may carry, and their decoded bytes together. */
export const TEMPLATE_FILES_MAX_COUNT = 1000;
export const TEMPLATE_FILES_MAX_BYTES = 16 * 1024 * 1024;
/** The JSON body of a build: the files in base64 (4/3 of their size) and the Dockerfile. */
export const TEMPLATE_BODY_MAX_BYTES = 24 * 1024 * 1024;

export const TemplateState = Type.Union([Type.Literal('building'), Type.Literal('ready'), Type.Literal('failed')], {
  description: '`building` while a build runs, then `ready` or `failed` (with `reason`)',
});

export const CreateTemplateBody = Type.Object(
  {
    name: Type.String({
      pattern: TEMPLATE_NAME_PATTERN,
      description: 'The template\'s name in the organization (profiles use it as `template:NAME`): lower-case letters, digits, `.`, `_`, `-`; at most 63',
    }),
    dockerfile: Type.String({ minLength: 1, maxLength: DOCKERFILE_MAX_BYTES, description: 'The Dockerfile\'s text' }),
    files: Type.Optional(
      Type.Record(Type.String({ minLength: 1, maxLength: 1024 }), Type.String({ contentEncoding: 'base64' }), {
        description:
          'The build context: each file\'s path (relative, `/`-separated) and its bytes in base64, for COPY and ADD. ' +
          `At most ${TEMPLATE_FILES_MAX_COUNT} files and ${TEMPLATE_FILES_MAX_BYTES / 1024 / 1024} MiB decoded`,
      }),
    ),
  },
  { additionalProperties: false },
);
export type CreateTemplateBody = Type.Static<typeof CreateTemplateBody>;

export const TemplateBuildStarted = Type.Object(
  {
    template_id: Type.String({ format: 'uuid' }),
    name: Type.String(),
    build_id: Type.String({ format: 'uuid' }),
    state: TemplateState,
  },
  { title: 'TemplateBuildStarted' },
);
export type TemplateBuildStarted = Type.Static<typeof TemplateBuildStarted>;

/** What a finished build made: what instances of the template start from and with. */
export const TemplateImage = Type.Object(
  {
    base_image: Type.String({ description: 'The Debian image its files sit on (`debian:bookworm` or `debian:trixie`)' }),
    env: Type.Record(Type.String(), Type.String(), { description: 'ENV: the environment of commands in its instances' }),
    workdir: Type.Union([Type.String(), Type.Null()], { description: 'WORKDIR: where commands start when they name no directory; null: the user\'s home' }),
    user: Type.Union([Type.String(), Type.Null()], { description: 'USER, as the Dockerfile set it last; null when it set none' }),
    start_command: Type.Union([Type.Array(Type.String()), Type.Null()], {
      description: 'ENTRYPOINT and CMD together, as a program and its arguments (a shell form as `sh -c`); null when neither was set',
    }),
    ready_check: Type.Union([Type.Array(Type.String()), Type.Null()], {
      description: 'HEALTHCHECK CMD, as a program and its arguments: run in a new instance after the start command until it succeeds, before the instance is ready; null when none was set',
    }),
    expose: Type.Array(Type.String(), { description: 'EXPOSE, as written (recorded only)' }),
    labels: Type.Record(Type.String(), Type.String(), { description: 'LABEL' }),
    disk_bytes: Type.Integer({ description: 'Bytes of host disk its last layer holds (the image below is shared)' }),
  },
  { title: 'TemplateImage' },
);
export type TemplateImage = Type.Static<typeof TemplateImage>;

export const TemplateBuild = Type.Object(
  {
    build_id: Type.String({ format: 'uuid' }),
    state: TemplateState,
    reason: Type.Union([Type.String(), Type.Null()], { description: 'Why it failed; null otherwise' }),
    steps: Type.Integer({ description: 'Instructions after FROM' }),
    cached_steps: Type.Integer({ description: 'Steps whose result was found in the cache (not run again)' }),
    created_at: Type.String({ format: 'date-time' }),
    finished_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { title: 'TemplateBuild' },
);
export type TemplateBuild = Type.Static<typeof TemplateBuild>;

export const Template = Type.Object(
  {
    template_id: Type.String({ format: 'uuid' }),
    name: Type.String(),
    state: TemplateState,
    reason: Type.Union([Type.String(), Type.Null()], { description: 'Why the latest build failed; null otherwise' }),
    build_id: Type.String({ format: 'uuid', description: 'The latest build' }),
    build: TemplateBuild,
    image: Type.Union([TemplateImage, Type.Null()], {
      description:
        'What the last build that succeeded made: new instances of `template:NAME` start from it (while a rebuild runs, or after one failed, too); null until a build has succeeded',
    }),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  {
    title: 'Template',
    examples: [
      {
        template_id: '4f0b2c1e-8a7d-4c3b-9e6f-1a2b3c4d5e6f',
        name: 'py-app',
        state: 'ready',
        reason: null,
        build_id: '9d8c7b6a-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
        build: {
          build_id: '9d8c7b6a-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
          state: 'ready',
          reason: null,
          steps: 5,
          cached_steps: 2,
          created_at: '2026-11-26T09:12:03.114Z',
          finished_at: '2026-11-26T09:13:41.508Z',
        },
        image: {
          base_image: 'debian:bookworm',
          env: { APP_HOME: '/srv/app' },
          workdir: '/srv/app',
          user: 'user',
          start_command: null,
          ready_check: null,
          expose: ['8000'],
          labels: {},
          disk_bytes: 48_234_496,
        },
        created_at: '2026-11-26T09:12:03.114Z',
        updated_at: '2026-11-26T09:13:41.508Z',
      },
    ],
  },
);
export type Template = Type.Static<typeof Template>;

export const TemplateList = Type.Object({ templates: Type.Array(Template) });
export type TemplateList = Type.Static<typeof TemplateList>;
