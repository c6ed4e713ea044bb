// The shape of an instance as the API shows it: its state, the history of its lifecycle
// with the time of each step, and its resources. This TypeBox schema is the one source of
// the fields for the routes (validation, OpenAPI) and for core/ (the types derived here).
import Type from 'typebox';
import { STATES } from './lifecycle.ts';
import { InstanceOptionsView } from './instance-options-schema.ts';

export const State = Type.Enum(STATES);

/**
 * Why an instance stopped or failed, for code to branch on (the `reason` beside it says
 * it in words). A fixed set: new codes may be added, so treat an unknown one as
 * "other".
 */
export const INSTANCE_REASON_CODES = [
  'deleted',
  'idle',
  'lifetime',
  'out_of_memory',
  'sandbox_exited',
  'host_lost',
  'provision_failed',
  'service_stopped',
  'teardown_failed',
  'pool_retired',
  'claimed',
  'paused',
  'resumed',
  'auto_resumed',
  'resume_failed',
  'memory_lost',
  'memory_restored',
  'pause_failed',
  'retention',
  'timeout',
  'memory_pressure',
  'node_lost',
] as const;
export type InstanceReasonCode = (typeof INSTANCE_REASON_CODES)[number];

export const InstanceReasonCode = Type.Enum(INSTANCE_REASON_CODES, {
  description:
    'Why the instance got to this state. On `pausing` and `paused` entries: `paused` (a pause request; `key_id` names the key), `idle` ' +
    '(its idle limit, with the profile\'s `idle_action: pause`), `timeout` (its deadline, likewise), `memory_pressure` (idle while the host needed its memory ' +
    'for another instance, or to keep its reserve free; it resumes on its next request), `service_stopped` (settled as paused when the service started again after ' +
    'it stopped during a pause or resume). On `resuming` and `ready` entries after a pause: `resumed` (a resume request), `auto_resumed` ' +
    '(a command, file or terminal request woke it), `memory_lost` (resumed, but the memory its pause kept could not be restored: it was ' +
    'booted over its files, its processes from before the pause are gone; the reason says why); on a `paused` entry after `resuming`: `resume_failed`. ' +
    'On the `vm_started` entry of an instance started from a snapshot with memory: `memory_restored` (its machine was restored from that memory: ' +
    'the snapshot\'s processes go on), or `memory_lost` (that memory could not be restored: it was booted over the snapshot\'s files; the reason says why). ' +
    'On `stopping`, `stopped` and ' +
    '`failed`: `retention` (paused longer than the profile\'s `paused_retention_s`), `pause_failed` (a pause could not finish), ' +
    '`deleted` (a DELETE; `key_id` names the key), `idle` (its idle limit), ' +
    '`lifetime` (its lifetime limit), `out_of_memory` (its machine was killed for memory by the host), `sandbox_exited` ' +
    '(its machine ended by itself), `host_lost` (found gone or not answering when the service started), `provision_failed` ' +
    '(it could not be started), `service_stopped` (the service shut down, or stopped while it was starting), ' +
    '`timeout` (its deadline passed: the `timeout_s` of its create, moved by keep-alives; paused or stopped as the profile\'s ' +
    '`idle_action` says), `teardown_failed` (what it held could not all be removed), `pool_retired` (a warm pool instance no room had taken, ' +
    'removed because its profile changed or was deleted, the pool shrank, or a create needed what it held); on a second `ready` entry, `claimed` (a room took the ' +
    'instance from its profile\'s warm pool: the entries before it are when it was made). On `lost`: `node_lost` (the node whose host ran it stopped ' +
    'heartbeating and another node declared it lost; the reason names the node)',
});

export const InstancePause = Type.Object(
  {
    paused_at: Type.String({ format: 'date-time' }),
    memory_kept: Type.Boolean({
      description:
        'Whether its memory and processes were saved and come back at resume (running processes, their memory, listening ' +
        'sockets; established TCP connections are dropped); false: its processes ended and only its files (the writable layer) ' +
        'were kept (a pause asked with `memory: false`, or a runtime that cannot save memory: see the API reference)',
    }),
    remove_after: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'When it is removed if not resumed before (the profile\'s `paused_retention_s`); null: never',
    }),
  },
  { description: 'What a pause kept' },
);
export type InstancePause = Type.Static<typeof InstancePause>;

export const PauseBody = Type.Object(
  {
    memory: Type.Optional(
      Type.Boolean({
        default: true,
        description:
          'Keep the instance\'s memory and processes (true, where the runtime can: `pause.memory_kept` in the answer says whether ' +
          'it did), or only its files (false: its processes end, and a resume boots it over its files)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type PauseBody = Type.Static<typeof PauseBody>;

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
        reason: Type.Optional(Type.String({ description: 'Why it got to this state, in words' })),
        reason_code: Type.Optional(InstanceReasonCode),
        key_id: Type.Optional(Type.String({ description: 'The API key whose request caused this step (a delete)' })),
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
    pause: Type.Union([InstancePause, Type.Null()], {
      description: 'While the instance is paused (or resuming): when, what the pause kept, and when it is removed; null otherwise',
    }),
    claimed_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description:
        'When the room took this instance from its profile\'s warm pool (booted before the room asked); null when it was ' +
        'made for the room',
    }),
    snapshot_id: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], {
      description: 'The snapshot the instance started from (`snapshot_id` in the create body, or a fork); null when it started from its profile\'s image',
    }),
    ...InstanceOptionsView,
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  {
    title: 'Instance',
    // A real answer (POST of a room, the cached image already built).
    examples: [
      {
        instance_id: 'f3c13fec-9952-415d-a499-41fcc0919947',
        profile_id: '83525a5b-df45-413c-93d9-702bc5133445',
        room_id: 'session-1',
        state: 'ready',
        state_history: [
          { state: 'active', at: '2026-11-24T05:48:53.911Z' },
          { state: 'network_allocated', at: '2026-11-24T05:48:53.933Z' },
          { state: 'ftap_created', at: '2026-11-24T05:48:54.008Z' },
          { state: 'image_generated', at: '2026-11-24T05:48:54.011Z' },
          { state: 'vm_started', at: '2026-11-24T05:48:54.211Z' },
          { state: 'vm_booted', at: '2026-11-24T05:48:54.288Z' },
          { state: 'ready', at: '2026-11-24T05:48:54.552Z' },
        ],
        failure_reason: null,
        progress: null,
        runtime: 'gvisor',
        resources: { memory_mb: 512, vcpus: 1, disk_mb: 1024 },
        pause: null,
        claimed_at: null,
        snapshot_id: null,
        env_names: ['OPENAI_API_KEY'],
        metadata: { user: 'u-42', app: 'grader' },
        timeout_s: 600,
        expires_at: '2026-11-24T05:58:53.911Z',
        created_at: '2026-11-24T05:48:53.911Z',
        updated_at: '2026-11-24T05:48:54.552Z',
      },
    ],
  },
);
export type Instance = Type.Static<typeof Instance>;
export type StateChange = Instance['state_history'][number];
export type InstanceResources = Instance['resources'];

export const InstancePage = Type.Object({
  instances: Type.Array(Instance),
  next_cursor: Type.Union([Type.String(), Type.Null()]),
});
export type InstancePage = Type.Static<typeof InstancePage>;
