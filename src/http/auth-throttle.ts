// Failed authentication throttled per client address: an address that presents more
// than ROOMKIT_AUTH_FAILURE_BURST rejected keys within ROOMKIT_AUTH_FAILURE_WINDOW_S is
// refused with 429 auth_throttled (and Retry-After) until that window ends, whatever
// key it sends then, a valid one included: the refusal comes before the key is looked
// up, so a guesser gets no answer about any key (nor costs a store read per guess), and
// one holding a valid key of its own organization cannot keep guessing between its own
// requests. Other addresses are not affected. Counted in this process's memory: each
// node of a cluster counts what reaches it.
import { normalizeIP } from '@fastify/rate-limit';
import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import { AppError } from '../errors.ts';
import type { Metrics } from '../metrics.ts';

/** Addresses tracked at once; the oldest windows are dropped first beyond this. */
const ADDRESSES_TRACKED = 100_000;

/** The error codes that mean "a credential was presented and rejected". */
const REJECTED_CREDENTIAL: ReadonlySet<string> = new Set(['invalid_api_key']);

interface Window {
  /** When this address's first counted failure came (ms). */
  startedAt: number;
  failures: number;
}

export interface AuthThrottleSettings {
  /** Rejected credentials an address may present per window; 0 turns throttling off. */
  burst: number;
  windowS: number;
}

export class AuthThrottle {
  private readonly windows = new Map<string, Window>();
  private readonly settings: AuthThrottleSettings;
  private readonly metrics: Metrics;
  private readonly now: () => number;

  constructor(settings: AuthThrottleSettings, metrics: Metrics, now: () => number = Date.now) {
    this.settings = settings;
    this.metrics = metrics;
    this.now = now;
  }

  /**
   * Wraps an authentication hook: a throttled address is refused before it runs, and a
   * credential it rejects is counted against the request's address (and in /metrics,
   * throttling on or off).
   */
  guard(authenticate: onRequestHookHandler): onRequestHookHandler {
    const throttle = this;
    // The authentication hooks are async: they settle their promise and never call done.
    return async function (request, reply) {
      throttle.check(request);
      try {
        await authenticate.call(this, request, reply, () => {});
      } catch (err) {
        if (err instanceof AppError && REJECTED_CREDENTIAL.has(err.code)) throttle.failed(request);
        throw err;
      }
    };
  }

  /** Throws auth_throttled while the request's address is over its burst. */
  check(request: FastifyRequest): void {
    if (this.settings.burst === 0) return;
    const address = normalizeIP(request.ip);
    const window = this.current(address);
    if (!window || window.failures < this.settings.burst) return;
    const retryAfterS = Math.max(1, Math.ceil((window.startedAt + this.settings.windowS * 1000 - this.now()) / 1000));
    this.metrics.authThrottled();
    throw new AppError(
      'auth_throttled',
      `your address sent ${window.failures} requests with a rejected API key within ${this.settings.windowS} s (ROOMKIT_AUTH_FAILURE_BURST); ` +
        `every request from it is refused for ${retryAfterS} s more: check the key you send`,
      { retry_after_s: retryAfterS, failures: window.failures, window_s: this.settings.windowS },
    );
  }

  /** Counts a rejected credential against the request's address. */
  failed(request: FastifyRequest): void {
    this.metrics.authFailed();
    if (this.settings.burst === 0) return;
    const address = normalizeIP(request.ip);
    const window = this.current(address);
    if (window) {
      window.failures += 1;
      return;
    }
    if (this.windows.size >= ADDRESSES_TRACKED) {
      const oldest = this.windows.keys().next();
      if (!oldest.done) this.windows.delete(oldest.value);
    }
    this.windows.set(address, { startedAt: this.now(), failures: 1 });
  }

  /** The address's window while it lasts; an ended one is forgotten. */
  private current(address: string): Window | undefined {
    const window = this.windows.get(address);
    if (window && this.now() - window.startedAt >= this.settings.windowS * 1000) {
      this.windows.delete(address);
      return undefined;
    }
    return window;
  }
}
