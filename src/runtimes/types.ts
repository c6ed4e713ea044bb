// The contract between core/ and an instance runtime (gVisor today, microVMs later).
// core/ drives the lifecycle and the store; a runtime only does the machine work and
// reports each provisioning step as it completes. Every runtime must pass the same
// contract test suite.
import type { Logger } from 'pino';
import type { ProvisionStep } from '../core/lifecycle.ts';
import type { ProfileSpec } from '../core/profile-schema.ts';

export interface RuntimeCapabilities {
  /** A private network namespace per instance with its own address. */
  network: boolean;
  /** A hard limit on the instance's writable disk. */
  diskLimit: boolean;
}

export interface ProvisionRequest {
  instanceId: string;
  organizationId: string;
  profileId: string;
  roomId: string;
  spec: ProfileSpec;
  /** Aborted when the instance is deleted or the service stops while it is provisioning. */
  signal: AbortSignal;
  /**
   * Called after each step completes, in lifecycle order (network_allocated ...
   * ready). It rejects when the instance should not go on (the signal was aborted);
   * the runtime then undoes what it did and rejects too.
   */
  onStep(step: ProvisionStep): Promise<void>;
  /** Reports what a long step is doing (e.g. an image build's phases), for callers to see. */
  onProgress(message: string): void;
  log: Logger;
}

export type RuntimeHealth = { healthy: true } | { healthy: false; reason: string };

export interface Runtime {
  readonly name: string;
  readonly capabilities: RuntimeCapabilities;
  /** Prepares the host (e.g. firewall tables) before instances are provisioned or adopted. */
  start(): Promise<void>;
  /**
   * Runs every provisioning step. On failure it undoes the steps already done, so
   * nothing is left behind, and rejects with an error whose message says what failed.
   */
  provision(request: ProvisionRequest): Promise<void>;
  /** Stops and removes everything the instance holds. Idempotent. */
  destroy(instanceId: string): Promise<void>;
  /** Ids of the instances this runtime holds resources for (for reconciliation). */
  list(): Promise<string[]>;
  /** Whether an instance that should be running still is and answers. */
  health(instanceId: string): Promise<RuntimeHealth>;
  /** Takes over a healthy instance found running at start (re-applies per-instance rules). */
  adopt(instanceId: string): Promise<void>;
  /**
   * Removes everything the runtime holds that does not belong to an instance in `keep`,
   * including leftovers it cannot attribute to an instance; returns what it removed.
   */
  sweep(keep: ReadonlySet<string>): Promise<string[]>;
  /** Releases what the runtime itself holds; instances are left as they are. */
  close(): Promise<void>;
}

/** Why no runtime can run instances on this host, for the 503 the API answers with. */
export interface RuntimeUnavailable {
  reason: string;
}

export type RuntimeSelection = { runtime: Runtime } | { unavailable: RuntimeUnavailable };
