// What a create may ask of its instance beyond the profile: environment variables for its
// commands, metadata (labels the list filters by) and a deadline (timeout_s, moved by a
// keep-alive). These TypeBox schemas are the one source of those fields for the create
// and keep-alive bodies, the instance's answer and the list's filter.
import { NetworkChange } from './network-schema.ts';
import Type from 'typebox';

/** The most variables one create may set. */
export const MAX_INSTANCE_ENV = 100;
/** The longest value of one variable, characters. */
export const MAX_INSTANCE_ENV_VALUE = 4096;
/** The most bytes (UTF-8) of all the names and values of one create's env together. */
export const MAX_INSTANCE_ENV_BYTES = 64 * 1024;
/** The most labels one instance may carry. */
export const MAX_METADATA = 50;
/** The longest label key, characters. */
export const MAX_METADATA_KEY = 64;
/** The longest label value, characters. */
export const MAX_METADATA_VALUE = 256;
/** The longest deadline a create or keep-alive may ask for (and never above the profile's max_lifetime_s). */
export const MAX_TIMEOUT_S = 30 * 86400;

const ENV_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_]*$';
export const METADATA_KEY_PATTERN = `^[A-Za-z0-9][A-Za-z0-9._/-]{0,${MAX_METADATA_KEY - 1}}$`;

export const InstanceEnv = Type.Record(Type.String(), Type.String({ maxLength: MAX_INSTANCE_ENV_VALUE }), {
  // TypeBox turns a key schema into patternProperties, which leave a key that does not
  // match unchecked, so the names are checked here.
  propertyNames: { pattern: ENV_NAME_PATTERN, maxLength: 128 },
  maxProperties: MAX_INSTANCE_ENV,
  description:
    `Environment variables for every command, background command and terminal of this instance: set over the profile's \`env\`, ` +
    `under a command's own \`env\`. At most ${MAX_INSTANCE_ENV} names (\`[A-Za-z_][A-Za-z0-9_]*\`, not starting with ROOMKIT_), ` +
    `values of up to ${MAX_INSTANCE_ENV_VALUE} characters, ${MAX_INSTANCE_ENV_BYTES} bytes in all. Values are never answered back ` +
    '(they are often secrets): the instance shows `env_names`.',
});

export const InstanceMetadata = Type.Record(Type.String(), Type.String({ maxLength: MAX_METADATA_VALUE }), {
  propertyNames: { pattern: METADATA_KEY_PATTERN },
  maxProperties: MAX_METADATA,
  description:
    `Labels of the instance, e.g. \`{"user": "u-42", "app": "grader"}\`: shown on the instance, and GET /api/instances?metadata=… ` +
    `filters by them. At most ${MAX_METADATA}; keys of 1-${MAX_METADATA_KEY} characters \`[A-Za-z0-9._/-]\` (starting with a letter ` +
    `or digit), values of up to ${MAX_METADATA_VALUE} characters.`,
});

export const InstanceTimeoutS = Type.Integer({
  minimum: 1,
  maximum: MAX_TIMEOUT_S,
  description:
    'Seconds the instance may run from its create (or its last keep-alive): when they have passed it is paused or stopped as ' +
    'the profile\'s `idle_action` says (state history: `timeout`). At most the profile\'s `max_lifetime_s` when that is not 0. ' +
    'POST …/keepalive moves the deadline.',
});

/** The options of a create, as the create body carries them. */
export const CreateOptionsFields = {
  env: Type.Optional(InstanceEnv),
  metadata: Type.Optional(InstanceMetadata),
  timeout_s: Type.Optional(InstanceTimeoutS),
  network: Type.Optional(
    Type.Object(NetworkChange.properties, {
      additionalProperties: false,
      description: 'This instance\'s egress policy, over the profile\'s `network` (fields left out are the profile\'s); PUT …/network changes it while it runs.',
    }),
  ),
};
export const CreateOptions = Type.Object(CreateOptionsFields);
export type CreateOptions = Type.Static<typeof CreateOptions>;

/** The fields the instance answers with about its options. */
export const InstanceOptionsView = {
  env_names: Type.Array(Type.String(), {
    description: 'The names of the variables its create set (`env`), sorted; their values are not shown',
  }),
  metadata: Type.Record(Type.String(), Type.String(), { description: 'Its labels (`metadata` of its create); `{}` when none' }),
  timeout_s: Type.Union([Type.Integer(), Type.Null()], { description: 'The `timeout_s` of its create; null when none was given' }),
  expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description:
      'When its deadline passes (its create\'s `timeout_s`, moved by keep-alives and restarted by a resume); null when it has none. ' +
      'The profile\'s idle and lifetime limits apply besides.',
  }),
};

export const KeepAliveBody = Type.Object(
  {
    timeout_s: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_TIMEOUT_S,
        description:
          'Seconds from now to the new deadline, at most the profile\'s `max_lifetime_s` when that is not 0 (default: the ' +
          'instance\'s `timeout_s`; without either, only the idle limit is reset)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type KeepAliveBody = Type.Static<typeof KeepAliveBody>;

export const METADATA_QUERY_DESCRIPTION =
  'Only instances carrying all these labels: `key=value` pairs joined by `&`, the whole URL-encoded as one parameter, ' +
  'e.g. `metadata=user%3Du-42%26app%3Dgrader` for `user=u-42&app=grader` (the form of E2B\'s list). Keys and values inside are ' +
  'URL-encoded too; exact match, case-sensitive.';
