// Ports of instances reached from outside: which address and port a proxied request
// goes to, who may ask (an API key of the instance's organization, or a signed preview
// URL), the ports no one may reach (the runtime's own, such as its agent's, and those the
// operator reserves), and the connections open into each instance: at most
// ROOMKIT_MAX_PORT_CONNECTIONS_PER_INSTANCE at once, counted as keeping the instance
// busy (not idle), and ended when the instance stops. It knows nothing of HTTP:
// adapters/rest/port-proxy.ts carries the bytes.
import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import type { PortEndpoint } from '../runtimes/types.ts';
import type { EndReason } from './instance-records.ts';
import type { Instances } from './instances.ts';
import type { Organizations } from './orgs.ts';
import type { PreviewGrant, PreviewTokens } from './preview-tokens.ts';
import { noteFacts, noteOperation } from './operations.ts';
import { type InstanceAddress, roomRef } from './instance-address.ts';

/** Default life of a signed preview URL. */
export const PREVIEW_URL_DEFAULT_EXPIRY_S = 3600;

/** Where one proxied request or WebSocket goes. */
export interface PortTarget {
  instanceId: string;
  organizationId: string;
  host: string;
  port: number;
}

/** A connection counted against its instance's limit until released. */
export interface PortConnection {
  /** Called once, when the instance stops while the connection is open. */
  onInstanceStopping(listener: (why: EndReason) => void): void;
  release(): void;
}

interface Held {
  listeners: ((why: EndReason) => void)[];
}

export class Ports {
  private readonly instances: Instances;
  private readonly organizations: Organizations;
  private readonly tokens: PreviewTokens;
  private readonly config: Config;
  private readonly open = new Map<string, Set<Held>>();

  constructor(deps: { instances: Instances; organizations: Organizations; tokens: PreviewTokens; config: Config }) {
    this.instances = deps.instances;
    this.organizations = deps.organizations;
    this.tokens = deps.tokens;
    this.config = deps.config;
    this.instances.addBusyCheck((instanceId) => (this.open.get(instanceId)?.size ?? 0) > 0);
    this.instances.onStopping((instanceId, why) => {
      for (const held of this.open.get(instanceId) ?? []) for (const listener of held.listeners.splice(0)) listener(why);
    });
  }

  /** Connections open into an instance now. */
  countIn(instanceId: string): number {
    return this.open.get(instanceId)?.size ?? 0;
  }

  /** The port of the room's ready instance, for a caller of its organization. */
  async target(organizationId: string, profileId: string, roomId: string, port: string | number): Promise<PortTarget> {
    return this.targetAt(roomRef(organizationId, profileId, roomId), port);
  }

  /** The port of the addressed ready instance. */
  async targetAt(address: InstanceAddress, port: string | number): Promise<PortTarget> {
    const number = parsePort(port);
    const { row } = await this.instances.requireReadyAt(address);
    return { instanceId: row.id, organizationId: address.organizationId, host: this.endpoint(row.id, number).host, port: number };
  }

  /** The port a verified preview grant names, while its instance is ready and its key active. */
  async targetOfGrant(grant: PreviewGrant): Promise<PortTarget> {
    const found = await this.instances.readyById(grant.instanceId);
    if (!found || found.row.organization_id !== grant.caller.organizationId) {
      throw new AppError('instance_not_found', `the instance ${grant.instanceId} of this preview URL is not running (deleted, expired or stopped)`);
    }
    if (!(await this.organizations.keyIsActive(grant.caller))) {
      throw new AppError('invalid_preview_token', 'the API key that signed this preview URL has been revoked');
    }
    return { instanceId: grant.instanceId, organizationId: grant.caller.organizationId, host: this.endpoint(grant.instanceId, grant.port).host, port: grant.port };
  }

  /**
   * A signed URL's token for the room's ready instance's port, valid for `expiresInS`
   * (PREVIEW_URL_DEFAULT_EXPIRY_S when not given; at most ROOMKIT_PREVIEW_URL_MAX_EXPIRY_S).
   */
  async sign(
    caller: PreviewGrant['caller'],
    profileId: string,
    roomId: string,
    port: string | number,
    expiresInS: number | undefined,
    now = Date.now(),
  ): Promise<{ token: string; target: PortTarget; expiresAt: number }> {
    noteOperation('port.url', { profileId, roomId });
    const max = this.config.previewUrlMaxExpiryS;
    const seconds = expiresInS ?? Math.min(PREVIEW_URL_DEFAULT_EXPIRY_S, max);
    if (!Number.isInteger(seconds) || seconds < 1 || seconds > max) {
      throw new AppError('validation_error', `expires_in_s must be a whole number of seconds from 1 to ${max} (ROOMKIT_PREVIEW_URL_MAX_EXPIRY_S), got ${seconds}`);
    }
    const target = await this.target(caller.organizationId, profileId, roomId, port);
    noteFacts({ instanceId: target.instanceId });
    const expiresAt = now + seconds * 1000;
    return { token: this.tokens.sign({ instanceId: target.instanceId, port: target.port, caller, expiresAt }), target, expiresAt };
  }

  /** What a preview token grants (invalid_preview_token, preview_url_expired). */
  verify(token: string): PreviewGrant {
    return this.tokens.verify(token);
  }

  /** The instance a preview token names, expired or not; undefined when it does not open (the request is refused where it arrived). */
  instanceOfToken(token: string): string | undefined {
    try {
      return this.tokens.verify(token, 0).instanceId;
    } catch {
      return undefined;
    }
  }

  /** Counts a connection into the instance; too_many_port_connections past the limit. */
  connect(instanceId: string): PortConnection {
    const max = this.config.maxPortConnectionsPerInstance;
    let set = this.open.get(instanceId);
    if ((set?.size ?? 0) >= max) {
      throw new AppError(
        'too_many_port_connections',
        `the instance already has ${max} proxied requests and WebSockets open, the most it takes at once (ROOMKIT_MAX_PORT_CONNECTIONS_PER_INSTANCE); retry when some have ended`,
        { limit: max, retry_after_s: 1 },
      );
    }
    if (!set) this.open.set(instanceId, (set = new Set()));
    const held: Held = { listeners: [] };
    set.add(held);
    let released = false;
    return {
      onInstanceStopping: (listener) => void held.listeners.push(listener),
      release: () => {
        if (released) return;
        released = true;
        const current = this.open.get(instanceId);
        current?.delete(held);
        if (current?.size === 0) this.open.delete(instanceId);
        // Traffic through a port is use of the instance: its idle time starts when the connection ends.
        void this.instances.touch(instanceId).catch(() => {});
      },
    };
  }

  private endpoint(instanceId: string, port: number): PortEndpoint {
    const runtime = this.instances.activeRuntime();
    const endpoint = runtime.portEndpoint?.(instanceId);
    if (!endpoint) {
      throw new AppError('feature_unavailable', `instances of the ${runtime.name} runtime cannot be reached on their ports from outside`);
    }
    if (endpoint.reservedPorts.includes(port)) {
      throw new AppError('invalid_port', `port ${port} is roomkit's own inside the instance and cannot be reached from outside; use another port for your program`, {
        port,
      });
    }
    if (this.config.reservedPorts.includes(port)) {
      throw new AppError('invalid_port', `port ${port} is reserved on this server (ROOMKIT_RESERVED_PORTS) and cannot be reached from outside; use another port`, { port });
    }
    return endpoint;
  }
}

/** A port number from a path or a token: 1-65535 (invalid_port otherwise). */
export function parsePort(value: string | number): number {
  const n = typeof value === 'number' ? value : /^[0-9]{1,5}$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isInteger(n) || n < 1 || n > 65535) {
    throw new AppError('invalid_port', `a port is a whole number from 1 to 65535, got ${JSON.stringify(String(value))}`, { port: String(value) });
  }
  return n;
}
