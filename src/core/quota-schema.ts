// The shapes of an organization's quotas and its use of them, as the API and the CLI
// show them: GET /api/usage, the operator API and `roomkit orgs`. These TypeBox schemas
// are the one source of their fields and types.
import Type from 'typebox';

/** Every quota an organization has, in the order they are shown. */
export const QUOTA_NAMES = ['instances', 'memory_mb', 'vcpus', 'disk_mb', 'concurrent_commands', 'commands_per_minute', 'snapshots'] as const;
export type QuotaName = (typeof QUOTA_NAMES)[number];

/** The limit of every quota. */
export type QuotaLimits = Record<QuotaName, number>;

const DESCRIPTIONS: Record<QuotaName, string> = {
  instances: 'Live instances (every state but stopped and failed)',
  memory_mb: 'memory_mb of the live instances, together',
  vcpus: 'vcpus of the live instances, together',
  disk_mb: "Disk the organization holds: the writable layers (disk_mb) of its live instances",
  concurrent_commands: 'Commands running at once, in all of its instances',
  commands_per_minute: 'Commands started in the last 60 seconds, in all of its instances',
  snapshots: 'Snapshots it keeps (made by POST …/snapshots; a fork\'s own snapshot counts while the fork runs)',
};

export const QuotaUse = Type.Object(
  {
    limit: Type.Integer({ minimum: 0 }),
    used: Type.Integer({ minimum: 0 }),
    source: Type.Union([Type.Literal('default'), Type.Literal('organization')], {
      description: '`default`: the service\'s configured default; `organization`: set by the operator for this organization',
    }),
  },
  { title: 'QuotaUse' },
);
export type QuotaUse = Type.Static<typeof QuotaUse>;

export const Usage = Type.Object(
  {
    organization_id: Type.String({ format: 'uuid' }),
    quotas: Type.Object(
      Object.fromEntries(QUOTA_NAMES.map((name) => [name, Type.Object(QuotaUse.properties, { description: DESCRIPTIONS[name] })])) as {
        [K in QuotaName]: typeof QuotaUse;
      },
    ),
    memory_in_use_mb: Type.Optional(
      Type.Integer({
        minimum: 0,
        description:
          'Host memory the running instances use now, measured (one starting at its runtime\'s estimate); not a quota: host admission counts it, and idle ' +
          'instances may be paused when the host needs memory. Absent where no runtime runs (`roomkit orgs usage` on the data directory)',
      }),
    ),
  },
  { title: 'Usage' },
);
export type Usage = Type.Static<typeof Usage>;

/** Quotas to set for one organization: a number sets it, null returns it to the default, absent leaves it. */
export const QuotaOverrides = Type.Object(
  Object.fromEntries(
    QUOTA_NAMES.map((name) => [name, Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: 1_000_000_000 }), Type.Null()], { description: DESCRIPTIONS[name] }))]),
  ) as { [K in QuotaName]: Type.TOptional<Type.TUnion<[Type.TInteger, Type.TNull]>> },
  { additionalProperties: false, title: 'QuotaOverrides' },
);
export type QuotaOverrides = Type.Static<typeof QuotaOverrides>;
