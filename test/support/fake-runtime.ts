// A test double of the instance runtime for HTTP- and core-layer tests: it walks the
// lifecycle steps without making a machine. Never the runtime of `roomkit serve`.
import { PROVISION_STATES, type ProvisionStep } from '../../src/core/lifecycle.ts';
import type { ProvisionRequest, Runtime, RuntimeHealth } from '../../src/runtimes/types.ts';

export interface FakeRuntimeOptions {
  /** Fail when this step is reached, with this message. */
  failAt?: { step: ProvisionStep; message: string };
  /** Pause before each step, ms. */
  stepDelayMs?: number;
  /** When set, provisioning waits at this step until release() is called. */
  holdAt?: ProvisionStep;
}

export class FakeRuntime implements Runtime {
  readonly name = 'fake';
  readonly capabilities = { network: false, diskLimit: false };
  /** Instances provisioned and not destroyed. */
  readonly live = new Set<string>();
  readonly destroyed: string[] = [];
  options: FakeRuntimeOptions;
  private releaseHold: (() => void) | undefined;
  private held: Promise<void> | undefined;

  constructor(options: FakeRuntimeOptions = {}) {
    this.options = options;
  }

  /** Lets provisioning held at `holdAt` go on. */
  release(): void {
    this.releaseHold?.();
    this.held = undefined;
  }

  async provision(request: ProvisionRequest): Promise<void> {
    this.live.add(request.instanceId);
    try {
      for (const step of PROVISION_STATES.slice(1) as ProvisionStep[]) {
        if (this.options.stepDelayMs) await sleep(this.options.stepDelayMs, request.signal);
        if (this.options.holdAt === step) {
          this.held ??= new Promise<void>((resolve) => (this.releaseHold = resolve));
          await Promise.race([this.held, aborted(request.signal)]);
        }
        if (this.options.failAt?.step === step) throw new Error(this.options.failAt.message);
        await request.onStep(step);
      }
    } catch (err) {
      await this.destroy(request.instanceId);
      throw err;
    }
  }

  async destroy(instanceId: string): Promise<void> {
    if (this.live.delete(instanceId)) this.destroyed.push(instanceId);
  }

  async list(): Promise<string[]> {
    return [...this.live];
  }

  async start(): Promise<void> {}

  async health(instanceId: string): Promise<RuntimeHealth> {
    return this.live.has(instanceId) ? { healthy: true } : { healthy: false, reason: 'not running' };
  }

  async adopt(): Promise<void> {}

  async sweep(keep: ReadonlySet<string>): Promise<string[]> {
    const removed = [...this.live].filter((id) => !keep.has(id));
    for (const id of removed) await this.destroy(id);
    return removed;
  }

  async close(): Promise<void> {}
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}
