// Egress decisions, as the resolver and the proxy make them, aggregated before they are
// reported: the first decision of a kind (instance, name, address, port, outcome, rule)
// is reported at once, repeats within the window are counted and reported once when it
// closes, and an instance with more distinct decisions in a window than MAX_KINDS_PER_WINDOW
// has the rest folded into one report. A busy or hostile instance so costs the audit
// trail a bounded number of records per window, while every decision is still counted.

/** One decision of the resolver (`dns`) or the proxy (`connect`). */
export interface EgressDecision {
  instanceId: string;
  kind: 'dns' | 'connect';
  /** The name asked for (DNS), or read from the SNI or Host (proxy); absent when there was none. */
  name?: string;
  /** The address dialled, or the one the guest asked for when refused before a dial. */
  address?: string;
  port?: number;
  allowed: boolean;
  /** The entry that decided (`allow example.com`, `deny 203.0.113.0/24`), or why (`default`, `blocked …`, `sni_host_mismatch`, …). */
  rule: string;
}

/** A decision as reported: how many times it was made in its window (1 for the first, reported at once). */
export interface ReportedDecision extends EgressDecision {
  count: number;
}

/** How long repeats of one decision are counted before they are reported together. */
export const DECISION_WINDOW_MS = 60_000;
/** Distinct decisions of one instance reported per window; the rest are folded into one. */
export const MAX_KINDS_PER_WINDOW = 50;

export class DecisionAggregator {
  private window = new Map<string, ReportedDecision>();
  private kindsPerInstance = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  private readonly report: (decision: ReportedDecision) => void;
  private readonly windowMs: number;

  constructor(report: (decision: ReportedDecision) => void, windowMs = DECISION_WINDOW_MS) {
    this.report = report;
    this.windowMs = windowMs;
  }

  add(decision: EgressDecision): void {
    let key = JSON.stringify([decision.instanceId, decision.kind, decision.name, decision.address, decision.port, decision.allowed, decision.rule]);
    const seen = this.window.get(key);
    if (seen) {
      seen.count += 1;
      return;
    }
    const kinds = this.kindsPerInstance.get(decision.instanceId) ?? 0;
    if (kinds >= MAX_KINDS_PER_WINDOW) {
      // Folded: one record per instance and outcome for everything beyond the bound.
      key = JSON.stringify([decision.instanceId, 'overflow', decision.allowed]);
      const folded = this.window.get(key);
      if (folded) folded.count += 1;
      else this.window.set(key, { instanceId: decision.instanceId, kind: decision.kind, allowed: decision.allowed, rule: 'more decisions than a window reports', count: 1 });
      this.schedule();
      return;
    }
    this.kindsPerInstance.set(decision.instanceId, kinds + 1);
    this.report({ ...decision, count: 1 });
    // Repeats start counting from zero: the first was reported already.
    this.window.set(key, { ...decision, count: 0 });
    this.schedule();
  }

  /** Reports what the window counted and starts a new one. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const counted = [...this.window.values()].filter((d) => d.count > 0);
    this.window = new Map();
    this.kindsPerInstance = new Map();
    for (const decision of counted) this.report(decision);
  }

  private schedule(): void {
    this.timer ??= setTimeout(() => this.flush(), this.windowMs).unref();
  }
}
