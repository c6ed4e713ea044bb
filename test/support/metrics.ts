// Reads a /metrics answer with a Prometheus text-format parser (prom2javascript, which
// keeps each labelled histogram apart), and looks up one sample by family and labels.
// That parser reads no NaN, which Prometheus takes (in any case): prom-client writes
// `Nan` for its event-loop-lag gauges until their first sample, so those lines, and no
// others, are set aside before parsing.
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { getMetricsFromStream, type PromData, type PromHistogramData } from 'prom2javascript';
import type { App } from '../../src/http/types.ts';

export interface Scrape {
  text: string;
  /** The value of a counter or gauge sample (0 when the family has no such sample). */
  value(name: string, labels?: Record<string, string>): number;
  /** A histogram sample's count and sum (zeros when there is none). */
  histogram(name: string, labels?: Record<string, string>): { count: number; sum: number; buckets: Record<string, number> };
}

export async function scrape(app: App, headers: Record<string, string> = {}): Promise<Scrape> {
  const res = await app.inject({ method: 'GET', url: '/metrics', headers });
  assert.equal(res.statusCode, 200, res.body);
  assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  const lines = res.body.split('\n');
  const notANumber = lines.filter((line) => / nan$/i.test(line));
  for (const line of notANumber) assert.match(line, /^nodejs_eventloop_lag_\w+ Nan$/, 'only the event-loop lag may be NaN');
  const families = await getMetricsFromStream(Readable.from([lines.filter((line) => !/ nan$/i.test(line)).join('\n')]));
  const sample = <T extends { labels: Record<string, string> }>(name: string, type: string, labels: Record<string, string>): T | undefined => {
    const family = families[name];
    assert.ok(family, `no metric ${name}`);
    assert.equal(family.type, type, name);
    return (family.data as unknown as T[]).find((m) => Object.entries(labels).every(([k, v]) => m.labels[k] === v));
  };
  return {
    text: res.body,
    value: (name, labels = {}) => {
      const family = families[name];
      return sample<PromData>(name, family?.type === 'gauge' ? 'gauge' : 'counter', labels)?.value ?? 0;
    },
    histogram: (name, labels = {}) => {
      const s = sample<PromHistogramData>(name, 'histogram', labels);
      return { count: s?.count ?? 0, sum: s?.sum ?? 0, buckets: s?.buckets ?? {} };
    },
  };
}
