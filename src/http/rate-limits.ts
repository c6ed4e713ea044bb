// Request rate limits, counted by @fastify/rate-limit (in memory, or in the store when
// nodes share one): per API key and per organization
// on every authenticated route, per client address and per instance on the
// unauthenticated raw-file route, per client address on signed preview URLs. Each response names the policies that applied and
// what is left of them in the IETF RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers-11: lists of items with q/w and r/t
// parameters); a request over a limit gets 429 rate_limited with Retry-After.
import rateLimit, { normalizeIP, type RateLimitOptions, type RateLimitPluginOptions } from '@fastify/rate-limit';
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import type { Metrics } from '../metrics.ts';
import type { RateLimitCounters } from '../store/rate-limit-counters.ts';
import type { App } from './types.ts';

/** Counters kept per limit; the least recently used go first beyond this. */
const COUNTERS_PER_LIMIT = 10_000;

/**
 * Where the counters live: this process's memory, or, for nodes sharing a PostgreSQL
 * store, the store (store/rate-limit-counters.ts), so that the nodes count together.
 */
function counterStore(shared: RateLimitCounters | undefined): Pick<RateLimitPluginOptions, 'store'> {
  return shared === undefined ? {} : { store: shared.pluginStore() as unknown as RateLimitPluginOptions['store'] };
}

interface Policy {
  /** Its name in RateLimit-Policy, RateLimit and the 429's details.limit. */
  name: string;
  /** What the limit counts, for the 429's message. */
  who: string;
  setting: string;
  max: number;
  check: ReturnType<App['createRateLimit']>;
}

/** The outcome of one policy for one request. */
interface Counted {
  policy: Policy;
  remaining: number;
  resetS: number;
  exceeded: boolean;
}

export interface RateLimits {
  /** Per key, then per organization; runs after authentication. */
  api: onRequestHookHandler;
  /** Per client address, then per instance, for GET /vm/{instance_id}/file/*. */
  rawFiles: onRequestHookHandler;
  /** Per client address, for requests through signed preview URLs (no API key). */
  preview: onRequestHookHandler;
}

const CHECKED = Symbol('roomkit.rateLimitChecked');

/** `shared`: counters in the store, which the nodes of a shared store count together; else each process counts in memory. */
export async function installRateLimits(app: App, config: Config, metrics: Metrics, shared?: RateLimitCounters): Promise<RateLimits> {
  await app.register(rateLimit, { global: false, ...counterStore(shared) });
  const windowS = config.rateLimitWindowS;
  const policy = (name: string, who: string, setting: string, max: number, key: (request: FastifyRequest) => string): Policy[] => {
    if (max === 0) return [];
    const options: RateLimitOptions = {
      max,
      timeWindow: windowS * 1000,
      // The limit's name first: counters in the store are one table for every limit.
      keyGenerator: (request) => `${name}:${key(request)}`,
      cache: COUNTERS_PER_LIMIT,
    };
    return [{ name, who, setting, max, check: app.createRateLimit(options) }];
  };
  const caller = (request: FastifyRequest) => {
    if (!request.caller) throw new Error(`route ${request.routeOptions.url} was rate-limited before authentication`);
    return request.caller;
  };
  const api = [
    ...policy('api_key', 'this API key', 'ROOMKIT_RATE_LIMIT_KEY_REQUESTS', config.rateLimitKeyRequests, (r) => caller(r).keyId),
    ...policy('organization', 'the organization\'s keys together', 'ROOMKIT_RATE_LIMIT_ORG_REQUESTS', config.rateLimitOrgRequests, (r) => caller(r).organizationId),
  ];
  const raw = [
    ...policy('client_address', 'your address', 'ROOMKIT_RATE_LIMIT_RAW_CLIENT_REQUESTS', config.rateLimitRawClientRequests, (r) => normalizeIP(r.ip)),
    ...policy('instance', 'all clients of this instance together', 'ROOMKIT_RATE_LIMIT_RAW_INSTANCE_REQUESTS', config.rateLimitRawInstanceRequests, (r) =>
      String((r.params as Record<string, unknown>).instance_id ?? ''),
    ),
  ];

  const preview = policy(
    'preview_client',
    'your address',
    'ROOMKIT_RATE_LIMIT_PREVIEW_CLIENT_REQUESTS',
    config.rateLimitPreviewClientRequests,
    (r) => normalizeIP(r.ip),
  );

  const hook = (policies: Policy[]): onRequestHookHandler => async (request, reply) => {
    const marked = request as FastifyRequest & { [CHECKED]?: boolean };
    if (policies.length === 0 || marked[CHECKED]) return;
    marked[CHECKED] = true;
    const counted: Counted[] = [];
    // In order: a request refused by one policy is not counted by the ones after it.
    for (const p of policies) {
      const result = await p.check(request);
      if (result.isAllowed) continue;
      const c = { policy: p, remaining: result.remaining, resetS: result.ttlInSeconds, exceeded: result.isExceeded };
      counted.push(c);
      if (c.exceeded) break;
    }
    setHeaders(reply, policies, counted, windowS);
    const over = counted.find((c) => c.exceeded);
    if (!over) return;
    metrics.rateLimitRejected(over.policy.name);
    const { name, who, setting, max } = over.policy;
    throw new AppError(
      'rate_limited',
      `${who} made more than ${max} requests in ${windowS} s (the "${name}" limit, ${setting}); try again in ${over.resetS} s`,
      { limit: name, limit_requests: max, window_s: windowS, retry_after_s: over.resetS },
    );
  };
  return { api: hook(api), rawFiles: hook(raw), preview: hook(preview) };
}

/**
 * RateLimit-Policy lists every policy that applies to the route; RateLimit the
 * service limit of those this request was counted by (a refused request ends the count).
 */
function setHeaders(reply: FastifyReply, policies: Policy[], counted: Counted[], windowS: number): void {
  reply.header('RateLimit-Policy', policies.map((p) => `"${p.name}";q=${p.max};w=${windowS}`).join(', '));
  if (counted.length > 0) reply.header('RateLimit', counted.map((c) => `"${c.policy.name}";r=${c.remaining};t=${c.resetS}`).join(', '));
}
