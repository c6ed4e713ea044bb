// Small helpers the console's views are drawn with: elements from plain objects, times
// in words, and the message of whatever went wrong.
import { ApiError } from './api.ts';

type Child = Node | string | null | undefined | false;
type Attrs = Record<string, string | boolean | ((event: Event) => void) | undefined>;

/** An element with attributes (`on…` are listeners; `true` sets a bare attribute) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, value);
  }
  for (const child of children) if (child !== null && child !== undefined && child !== false) el.append(child);
  return el;
}

/** A local time with seconds, as people read a log. */
export function clock(iso: string | Date): string {
  const date = typeof iso === 'string' ? new Date(iso) : iso;
  return date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

export function dateTime(iso: string): string {
  return new Date(iso).toLocaleString([], { dateStyle: 'medium', timeStyle: 'medium' });
}

/** How long ago, or from now, in the largest whole unit. */
export function relative(iso: string, now = Date.now()): string {
  const seconds = Math.round((Date.parse(iso) - now) / 1000);
  const abs = Math.abs(seconds);
  // Within a second or two either way (clocks differ a little): now.
  if (abs < 2) return 'just now';
  const [value, unit] = abs < 60 ? [abs, 's'] : abs < 3600 ? [Math.round(abs / 60), 'min'] : abs < 86400 ? [Math.round(abs / 3600), 'h'] : [Math.round(abs / 86400), 'd'];
  return seconds >= 0 ? `in ${value} ${unit}` : `${value} ${unit} ago`;
}

/** What to show for a failure: the Error body's message when the server sent one. */
export function messageOf(err: unknown): string {
  if (err instanceof ApiError) return err.body.message;
  return err instanceof Error ? err.message : String(err);
}

/** A region that announces errors to screen readers; empty until one is shown. */
export function errorBox(): { el: HTMLElement; show(err: unknown): void; clear(): void } {
  const el = h('p', { class: 'error', role: 'alert', hidden: true });
  return {
    el,
    show(err) {
      el.textContent = messageOf(err);
      el.hidden = false;
    },
    clear() {
      el.textContent = '';
      el.hidden = true;
    },
  };
}

/** A state as a badge whose class groups it (starting, ready, paused, ended, failed). */
export function stateBadge(state: string): HTMLElement {
  const group =
    state === 'ready' ? 'ready' : state === 'failed' ? 'failed' : ['pausing', 'paused', 'resuming'].includes(state) ? 'paused' : ['stopping', 'stopped'].includes(state) ? 'ended' : 'starting';
  return h('span', { class: `state state-${group}`, 'data-state': state }, state);
}
