// E2B's control API (E2B_API_URL): create, list, get, kill, set timeout, pause and
// connect sandboxes, over core's instances by id. Bodies and answers keep E2B's field
// names, since the SDK reads them; the routes are hidden from roomkit's /openapi.json
// (E2B's API is described by E2B). Failures answer E2B's {code, message} (errors.ts).
import { E2bNetwork, egressOf, NetworkUpdateBody } from './network-options.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import Type from 'typebox';
import { instanceIdNotFound, type InstanceRef } from '../../core/instance-address.ts';
import type { Instance } from '../../core/instance-schema.ts';
import type { InstanceState } from '../../core/lifecycle.ts';
import { AppError } from '../../errors.ts';
import { callerOf } from '../../http/auth.ts';
import type { App } from '../../http/types.ts';
import type { Services } from '../../services.ts';
import type { AccessTokens } from './access-tokens.ts';
import { connectedSandbox, DEFAULT_TIMEOUT_S, newRoomId, profileOfTemplate, sandboxOf, sandboxState, templateSource, type SandboxState } from './sandboxes.ts';

const SandboxParams = Type.Object({ sandboxID: Type.String({ maxLength: 128 }) });
const StringMap = Type.Record(Type.String(), Type.String());

const NewSandbox = Type.Object({
  templateID: Type.Optional(Type.String({ maxLength: 256 })),
  timeout: Type.Optional(Type.Integer({ minimum: 0 })),
  metadata: Type.Optional(StringMap),
  envVars: Type.Optional(StringMap),
  autoPause: Type.Optional(Type.Boolean()),
  autoPauseMemory: Type.Optional(Type.Boolean()),
  autoResume: Type.Optional(Type.Object({ enabled: Type.Optional(Type.Boolean()) })),
  secure: Type.Optional(Type.Boolean()),
  allow_internet_access: Type.Optional(Type.Boolean()),
  network: Type.Optional(E2bNetwork),
});

const ListQuery = Type.Object({
  metadata: Type.Optional(Type.String()),
  state: Type.Optional(Type.String()),
  template: Type.Optional(Type.String()),
  startedAfter: Type.Optional(Type.String()),
  order: Type.Optional(Type.String()),
  limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,4}$' })),
  nextToken: Type.Optional(Type.String()),
});

const TimeoutBody = Type.Object({ timeout: Type.Integer({ minimum: 0 }) });
const PauseBody = Type.Object({ memory: Type.Optional(Type.Boolean()) });
const ConnectBody = Type.Object({ timeout: Type.Optional(Type.Integer({ minimum: 0 })), memory: Type.Optional(Type.Boolean()) });

/** Longest a connect waits for a sandbox being paused to be paused, before resuming it. */
const PAUSE_WAIT_MS = 120_000;
const PAUSE_POLL_MS = 100;
/** Most sandboxes one page of a list holds, as E2B bounds it. */
const MAX_LIST_LIMIT = 100;
const DEFAULT_LIST_LIMIT = 100;

export function controlRoutes(app: App, services: Services, tokens: AccessTokens): void {
  const ref = (organizationId: string, sandboxId: string): InstanceRef => ({ organizationId, instanceId: sandboxId });
  const domain = services.config.previewDomain;
  const profileName = async (organizationId: string, profileId: string) => (await services.profiles.find(organizationId, profileId))?.name;

  /** A sandbox E2B would still know: a live instance of the organization, else 404. */
  const liveSandbox = async (address: InstanceRef): Promise<{ instance: Instance; state: SandboxState }> => {
    const instance = await services.instances.getAt(address);
    const state = sandboxState(instance);
    if (!state) throw instanceIdNotFound(address.instanceId);
    return { instance, state };
  };

  /** A sandbox being paused, once it is (or once it is something else); 409 if that takes too long. */
  const pausedSandbox = async (address: InstanceRef): Promise<{ instance: Instance; state: SandboxState }> => {
    const deadline = Date.now() + PAUSE_WAIT_MS;
    for (;;) {
      const found = await liveSandbox(address);
      if (found.instance.state !== 'pausing') return found;
      if (Date.now() > deadline) throw new AppError('instance_state_conflict', `sandbox ${address.instanceId} is still being paused; connect again in a moment`);
      await sleep(PAUSE_POLL_MS);
    }
  };

  const create = async (caller: ReturnType<typeof callerOf>, body: Type.Static<typeof NewSandbox>) => {
    // At its timeout a sandbox is killed, as E2B's are, or paused with its memory (autoPause),
    // whatever its profile does with idle instances.
    if (body.autoPause === true && body.autoPauseMemory === false) {
      throw new AppError('validation_error', 'onTimeout: {action: "pause", keepMemory: false} is not served: a sandbox paused at its timeout keeps its memory where the host can');
    }
    if (body.autoResume?.enabled === true) {
      throw new AppError('validation_error', 'autoResume (a paused sandbox resumed by traffic) is not served: resume it with Sandbox.connect()');
    }
    const { profile, snapshot } = await templateSource(services, caller.organizationId, body.templateID);
    // allowInternetAccess and network's allowOut and denyOut become the sandbox's own egress policy.
    const network = egressOf(body.network, body.allow_internet_access);
    const { instance } = await services.instances.create(caller.organizationId, profile.profile_id, newRoomId(), {
      ...(network ? { network } : {}),
      wait: true,
      ...(snapshot ? { snapshot } : {}),
      timeout_s: body.timeout ?? DEFAULT_TIMEOUT_S,
      timeoutAction: body.autoPause === true ? 'pause' : 'stop',
      ...(body.metadata === undefined ? {} : { metadata: body.metadata }),
      ...(body.envVars === undefined ? {} : { env: body.envVars }),
    });
    return connectedSandbox(instance, tokens.sign({ instanceId: instance.instance_id, caller }), { profileName: profile.name, domain });
  };

  for (const url of ['/v2/sandboxes', '/sandboxes']) {
    app.post(url, { schema: { hide: true, body: NewSandbox }, config: { auditAction: 'instance.create' } }, async (request, reply) => {
      return reply.code(201).send(await create(callerOf(request), request.body));
    });

    app.get(url, { schema: { hide: true, querystring: ListQuery } }, async (request, reply) => {
      const caller = callerOf(request);
      const query = request.query;
      const limit = Math.min(query.limit === undefined ? DEFAULT_LIST_LIMIT : Number(query.limit), MAX_LIST_LIMIT);
      if (limit < 1) throw new AppError('validation_error', 'limit must be at least 1');
      if (query.order !== undefined && query.order !== 'asc' && query.order !== 'desc') throw new AppError('validation_error', `order must be asc or desc, not ${query.order}`);
      const states = new Set((query.state ?? '').split(',').filter((s) => s !== '') as SandboxState[]);
      for (const state of states) if (state !== 'running' && state !== 'paused') throw new AppError('validation_error', `state must be running or paused, not ${state}`);
      const onlyState: InstanceState | undefined = states.size === 1 ? (states.has('paused') ? 'paused' : 'ready') : undefined;
      const profile = query.template === undefined ? undefined : await profileOfTemplate(services.profiles, caller.organizationId, query.template);
      const startedAfter = query.startedAfter === undefined ? undefined : Date.parse(query.startedAfter);
      if (startedAfter !== undefined && Number.isNaN(startedAfter)) throw new AppError('validation_error', 'startedAfter must be a date and time (RFC 3339)');
      const page = await services.instances.list(caller.organizationId, {
        limit,
        ...(query.order === 'asc' ? { oldestFirst: true } : {}),
        ...(query.nextToken === undefined ? {} : { cursor: query.nextToken }),
        ...(onlyState === undefined ? {} : { state: onlyState }),
        ...(profile === undefined ? {} : { profileId: profile.profile_id }),
        ...(query.metadata === undefined ? {} : { metadata: metadataFilter(query.metadata) }),
      });
      const names = new Map<string, string | undefined>();
      const sandboxes = [];
      for (const instance of page.instances) {
        const state = sandboxState(instance);
        if (!state || (states.size > 0 && !states.has(state))) continue;
        if (startedAfter !== undefined && Date.parse(instance.created_at) <= startedAfter) continue;
        if (!names.has(instance.profile_id)) names.set(instance.profile_id, await profileName(caller.organizationId, instance.profile_id));
        sandboxes.push(sandboxOf(instance, state, { profileName: names.get(instance.profile_id), domain }));
      }
      if (page.next_cursor !== null) reply.header('x-next-token', page.next_cursor);
      return sandboxes;
    });
  }

  app.get('/sandboxes/:sandboxID', { schema: { hide: true, params: SandboxParams } }, async (request) => {
    const caller = callerOf(request);
    const address = ref(caller.organizationId, request.params.sandboxID);
    const { instance, state } = await liveSandbox(address);
    const onTimeout = (await services.instances.requireLiveAt(address)).timeout_action === 'pause' ? 'pause' : 'kill';
    return sandboxOf(instance, state, { profileName: await profileName(caller.organizationId, instance.profile_id), domain, onTimeout });
  });

  app.delete('/sandboxes/:sandboxID', { schema: { hide: true, params: SandboxParams }, config: { auditAction: 'instance.delete' } }, async (request, reply) => {
    const caller = callerOf(request);
    const address = ref(caller.organizationId, request.params.sandboxID);
    await liveSandbox(address);
    await services.instances.deleteAt(address, { keyId: caller.keyId });
    return reply.code(204).send();
  });

  app.post(
    '/sandboxes/:sandboxID/timeout',
    { schema: { hide: true, params: SandboxParams, body: TimeoutBody }, config: { auditAction: 'instance.keepalive' } },
    async (request, reply) => {
      const caller = callerOf(request);
      const address = ref(caller.organizationId, request.params.sandboxID);
      await liveSandbox(address);
      await services.instances.keepAliveAt(address, { timeout_s: request.body.timeout });
      return reply.code(204).send();
    },
  );

  // E2B's update replaces the whole policy: what it leaves out is cleared (all traffic allowed).
  app.put(
    '/sandboxes/:sandboxID/network',
    { schema: { hide: true, params: SandboxParams, body: NetworkUpdateBody }, config: { auditAction: 'instance.network' } },
    async (request, reply) => {
      const caller = callerOf(request);
      const address = ref(caller.organizationId, request.params.sandboxID);
      await liveSandbox(address);
      const network = egressOf(request.body, request.body.allow_internet_access) ?? { egress: 'internet' };
      await services.instances.setNetworkAt(address, { egress: network.egress ?? 'internet', allow: network.allow ?? [], deny: network.deny ?? [] });
      return reply.code(204).send();
    },
  );

  app.post(
    '/sandboxes/:sandboxID/pause',
    { schema: { hide: true, params: SandboxParams, body: PauseBody }, config: { auditAction: 'instance.pause' } },
    async (request, reply) => {
      const caller = callerOf(request);
      const address = ref(caller.organizationId, request.params.sandboxID);
      // E2B answers a pause of a paused sandbox 409, which the SDK reads as "it was paused already".
      if ((await liveSandbox(address)).state === 'paused') {
        throw new AppError('instance_state_conflict', `sandbox ${address.instanceId} is paused already`);
      }
      await services.instances.pauseAt(address, { keyId: caller.keyId, memory: request.body.memory ?? true });
      return reply.code(204).send();
    },
  );

  // Connect resumes a paused sandbox and answers how to reach it; its timeout extends the
  // deadline, never shortens it.
  for (const url of ['/v2/sandboxes/:sandboxID/connect', '/sandboxes/:sandboxID/resume']) {
    app.post(url, { schema: { hide: true, params: SandboxParams, body: ConnectBody }, config: { auditAction: 'instance.resume' } }, async (request, reply) => {
      const caller = callerOf(request);
      const address = ref(caller.organizationId, request.params.sandboxID);
      let { instance, state } = await liveSandbox(address);
      // A sandbox still being paused (at its timeout, say) is resumed once it is paused, as E2B does.
      if (instance.state === 'pausing') ({ instance, state } = await pausedSandbox(address));
      const resumed = state === 'paused';
      if (resumed) instance = await services.instances.resumeAt(address, { keyId: caller.keyId });
      const timeout = request.body.timeout;
      if (timeout !== undefined && instance.expires_at !== null && Date.parse(instance.expires_at) < Date.now() + timeout * 1000) {
        instance = await services.instances.keepAliveAt(address, { timeout_s: timeout });
      }
      const body = connectedSandbox(instance, tokens.sign({ instanceId: instance.instance_id, caller }), { profileName: await profileName(caller.organizationId, instance.profile_id), domain });
      return reply.code(resumed ? 201 : 200).send(body);
    });
  }
}

/** The SDK's metadata filter: `key=value` pairs, URL-encoded once more inside the query. */
function metadataFilter(encoded: string): [string, string][] {
  try {
    return [...new URLSearchParams(encoded)].map(([key, value]) => [decodeURIComponent(key), decodeURIComponent(value)]);
  } catch {
    throw new AppError('validation_error', 'metadata must be URL-encoded key=value pairs');
  }
}
