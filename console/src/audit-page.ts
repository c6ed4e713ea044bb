// The organization's audit trail (/console/audit): GET /api/audit with its filters
// (action, decision, room, key, since, until), kept in the address so a filtered view
// can be shared, and paged by the cursor the API answers: Older follows next_cursor,
// Newer goes back along the cursors already followed. The actions and decisions offered
// are those /openapi.json lists for the filter, so the page knows every one the service has.
import type { AuditEvent } from '../../sdk/src/generated/api.ts';
import { call } from './api.ts';
import { dateTime, errorBox, h } from './dom.ts';
import type { Stop } from './main.ts';

const FILTERS = ['action', 'decision', 'room_id', 'key_id', 'since', 'until'] as const;
type Filter = (typeof FILTERS)[number];

/** The values each of the API's filters takes, from its own description; none when it has no list. */
async function choices(): Promise<(name: Filter) => string[]> {
  try {
    const response = await fetch('/openapi.json', { credentials: 'same-origin' });
    const doc = (await response.json()) as { paths: Record<string, { get?: { parameters?: { name: string; schema?: { enum?: string[] } }[] } }> };
    const parameters = doc.paths['/api/audit']?.get?.parameters ?? [];
    return (name) => parameters.find((p) => p.name === name)?.schema?.enum ?? [];
  } catch {
    return () => [];
  }
}

/** A datetime-local value (the browser's local time) as the API's ISO date-time; empty stays empty. */
const isoOf = (local: string) => (local === '' ? '' : new Date(local).toISOString());

function what(event: AuditEvent): string {
  const parts = [
    event.command === null ? null : `$ ${event.command}`,
    event.file_path,
    event.exit_code === null ? null : `exit ${event.exit_code}`,
    event.files_changed === null ? null : `${event.files_changed.total} files changed`,
    event.signal,
    event.target_key_id === null ? null : `key ${event.target_key_id.slice(0, 8)}`,
    event.tool === null ? null : `tool ${event.tool}`,
  ];
  return parts.filter((part) => part !== null).join(' · ');
}

export function auditPage(main: HTMLElement): Stop {
  const query = new URLSearchParams(location.search);
  const limit = /^(200|1[0-9]{2}|[1-9][0-9]?)$/.test(query.get('limit') ?? '') ? (query.get('limit') as string) : '50';
  /** The cursors of the pages before the one shown (the first page has none). */
  const back: (string | null)[] = [];
  let cursor: string | null = null;
  let next: string | null = null;
  const problem = errorBox();
  const body = h('tbody');
  const where = h('span', { class: 'updated', role: 'status' });

  const action = h('select', { id: 'audit-action', name: 'action' }, h('option', { value: '' }, 'Any action'));
  const decision = h('select', { id: 'audit-decision', name: 'decision' }, h('option', { value: '' }, 'Any decision'));
  const room = h('input', { id: 'audit-room', name: 'room_id', type: 'search', value: query.get('room_id') ?? '', placeholder: 'a room id' });
  const key = h('input', { id: 'audit-key', name: 'key_id', type: 'search', value: query.get('key_id') ?? '', placeholder: 'a key id', size: '12' });
  const since = h('input', { id: 'audit-since', name: 'since', type: 'datetime-local', step: '1' });
  const until = h('input', { id: 'audit-until', name: 'until', type: 'datetime-local', step: '1' });
  const older = h('button', { type: 'button', class: 'secondary', disabled: true, onclick: () => void (back.push(cursor), show(next)) }, 'Older');
  const newer = h('button', { type: 'button', class: 'secondary', disabled: true, onclick: () => void show(back.pop() ?? null) }, 'Newer');

  const filters = (): URLSearchParams => {
    const q = new URLSearchParams();
    const values: Record<Filter, string> = { action: action.value, decision: decision.value, room_id: room.value.trim(), key_id: key.value.trim(), since: isoOf(since.value), until: isoOf(until.value) };
    for (const name of FILTERS) if (values[name] !== '') q.set(name, values[name]);
    return q;
  };

  async function show(at: string | null): Promise<void> {
    problem.clear();
    try {
      const q = filters();
      q.set('limit', limit);
      if (at !== null) q.set('cursor', at);
      const page = await call<{ events: AuditEvent[]; next_cursor: string | null }>('GET', `/api/audit?${q}`);
      cursor = at;
      next = page.next_cursor;
      body.replaceChildren(
        ...page.events.map((e) =>
          h(
            'tr',
            { 'data-event-id': e.event_id, 'data-action': e.action },
            h('td', { title: e.at }, dateTime(e.at)),
            h('td', {}, h('code', {}, e.action)),
            h('td', {}, h('span', { class: `decision decision-${e.decision}` }, e.decision), e.error === null ? '' : ` ${e.error}`),
            h('td', { class: 'num' }, String(e.status)),
            h('td', {}, e.room_id ?? '—'),
            h('td', { class: 'wrap' }, what(e)),
            h('td', { title: e.key_id }, h('code', {}, e.key_id.slice(0, 8))),
            h('td', {}, e.client_address),
          ),
        ),
      );
      if (page.events.length === 0) body.append(h('tr', {}, h('td', { colspan: '8', class: 'empty' }, 'No events match.')));
      older.disabled = next === null;
      newer.disabled = back.length === 0;
      where.textContent = `page ${back.length + 1}`;
    } catch (err) {
      problem.show(err);
    }
  }

  const apply = () => {
    const q = filters();
    if (limit !== '50') q.set('limit', limit);
    history.replaceState(null, '', `/console/audit${q.size > 0 ? `?${q}` : ''}`);
    back.length = 0;
    void show(null);
  };

  main.append(
    h('div', { class: 'title' }, h('h1', {}, 'Audit trail'), where),
    h('p', { class: 'help' }, 'Every state-changing request of the organization, newest first: who (the key), what, and what the service decided.'),
    h(
      'form',
      { class: 'filters', role: 'search', 'aria-label': 'Filter events', onsubmit: (e: Event) => (e.preventDefault(), apply()), onchange: () => apply() },
      h('label', { for: 'audit-action' }, 'Action'),
      action,
      h('label', { for: 'audit-decision' }, 'Decision'),
      decision,
      h('label', { for: 'audit-room' }, 'Room'),
      room,
      h('label', { for: 'audit-key' }, 'Key'),
      key,
      h('label', { for: 'audit-since' }, 'Since'),
      since,
      h('label', { for: 'audit-until' }, 'Until'),
      until,
      h('button', { type: 'submit', class: 'secondary' }, 'Filter'),
    ),
    problem.el,
    h(
      'div',
      { class: 'table-wrap' },
      h('table', { 'aria-label': 'Audit events' }, h('thead', {}, h('tr', {}, ...['When', 'Action', 'Decision', 'Status', 'Room', 'What', 'Key', 'From'].map((c) => h('th', { scope: 'col' }, c)))), body),
    ),
    h('div', { class: 'actions' }, newer, older),
  );

  void (async () => {
    const choicesOf = await choices();
    for (const value of choicesOf('action')) action.append(h('option', { value, selected: value === query.get('action') }, value));
    for (const value of choicesOf('decision')) decision.append(h('option', { value, selected: value === query.get('decision') }, value));
    for (const [input, name] of [
      [since, 'since'],
      [until, 'until'],
    ] as const) {
      const iso = query.get(name);
      // datetime-local takes local time without a zone.
      if (iso !== null && !Number.isNaN(Date.parse(iso))) input.value = new Date(Date.parse(iso) - new Date().getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
    }
    await show(null);
  })();
  return () => {};
}
