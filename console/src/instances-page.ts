// The instances view: the organization's instances, polled every few seconds with the
// time of the last answer in view, filtered by profile, room, state and labels (the
// filters live in the URL, so a filtered list can be shared), bulk pause, resume and
// delete of the instances ticked, and a form to create an instance in a room.
import type { Instance, Profile } from '../../sdk/src/generated/api.ts';
import { call, roomPath } from './api.ts';
import { clock, errorBox, h, messageOf, relative, stateBadge } from './dom.ts';
import type { Navigate, Stop } from './main.ts';

const POLL_MS = 3000;
/** Requests of a bulk action in flight at once. */
const BULK_PARALLEL = 4;
const PAGE = 100;
const STATES = ['active', 'network_allocated', 'ftap_created', 'image_generated', 'vm_started', 'vm_booted', 'ready', 'pausing', 'paused', 'resuming', 'stopping', 'stopped', 'failed'];

interface Filters {
  profile: string;
  room: string;
  state: string;
  label: string;
}

function filtersOf(search: string): Filters {
  const q = new URLSearchParams(search);
  return { profile: q.get('profile') ?? '', room: q.get('room') ?? '', state: q.get('state') ?? '', label: q.get('label') ?? '' };
}

/** `key=value` pairs as the list's `metadata` parameter takes them; commas or spaces between pairs. */
function metadataOf(label: string): string {
  return label
    .split(/[,\s]+/)
    .filter((pair) => pair !== '')
    .map((pair) => {
      const eq = pair.indexOf('=');
      return eq < 0 ? encodeURIComponent(pair) : `${encodeURIComponent(pair.slice(0, eq))}=${encodeURIComponent(pair.slice(eq + 1))}`;
    })
    .join('&');
}

/** Whether an instance is one a bulk action can reach: the room's live instance. */
const bulkable = (i: Instance) => !['stopping', 'stopped', 'failed'].includes(i.state);

export function instancesPage(main: HTMLElement, go: Navigate): Stop {
  let filters = filtersOf(location.search);
  let profiles: Profile[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const problem = errorBox();
  const updated = h('span', { class: 'updated', role: 'status', 'aria-live': 'polite' }, 'loading…');
  const body = h('tbody');
  const more = h('p', { class: 'help', hidden: true });
  const profileName = (id: string) => profiles.find((p) => p.profile_id === id)?.name ?? id.slice(0, 8);
  /** The instances ticked, by id; kept across the list's refreshes. */
  const selected = new Map<string, Instance>();
  let shownNow: Instance[] = [];
  const bulkOutcome = h('p', { class: 'outcome', role: 'status' });
  const bulkProblem = errorBox();
  const all = h('input', { type: 'checkbox', 'aria-label': 'Select every instance shown' });
  all.addEventListener('change', () => {
    for (const i of shownNow) {
      if (all.checked && bulkable(i)) selected.set(i.instance_id, i);
      else selected.delete(i.instance_id);
    }
    draw(shownNow);
  });
  const bulk = (label: string, verb: string, run: (i: Instance) => Promise<unknown>, danger = false) =>
    h(
      'button',
      {
        type: 'button',
        class: danger ? 'danger' : 'secondary',
        onclick: async (event: Event) => {
          const chosen = [...selected.values()];
          if (chosen.length === 0) return bulkProblem.show(new Error('Tick the instances to act on first.'));
          if (danger && !confirm(`${label} ${chosen.length} instance${chosen.length === 1 ? '' : 's'}? Their files go with them.`)) return;
          const button = event.currentTarget as HTMLButtonElement;
          button.disabled = true;
          bulkProblem.clear();
          bulkOutcome.textContent = `${verb}…`;
          const refused: string[] = [];
          let done = 0;
          const queue = [...chosen];
          await Promise.all(
            Array.from({ length: Math.min(BULK_PARALLEL, queue.length) }, async () => {
              for (let i = queue.shift(); i !== undefined; i = queue.shift()) {
                try {
                  await run(i);
                  done++;
                  selected.delete(i.instance_id);
                } catch (err) {
                  refused.push(`${i.room_id}: ${messageOf(err)}`);
                }
              }
            }),
          );
          bulkOutcome.textContent = `${done} of ${chosen.length} ${verb.toLowerCase()}.`;
          if (refused.length > 0) bulkProblem.show(new Error(refused.join('\n')));
          button.disabled = false;
          await refresh();
        },
      },
      label,
    );
  const bulkBar = h(
    'div',
    { class: 'actions', role: 'group', 'aria-label': 'Selected instances' },
    bulk('Pause selected', 'Paused', (i) => call('POST', roomPath(i.profile_id, i.room_id, '/pause'))),
    bulk('Resume selected', 'Resumed', (i) => call('POST', roomPath(i.profile_id, i.room_id, '/resume'))),
    bulk('Delete selected', 'Deleted', (i) => call('DELETE', roomPath(i.profile_id, i.room_id)), true),
    bulkOutcome,
  );

  const profileSelect = h('select', { id: 'filter-profile', name: 'profile' }, h('option', { value: '' }, 'All profiles'));
  const room = h('input', { id: 'filter-room', name: 'room', type: 'search', value: filters.room, placeholder: 'part of a room name' });
  const state = h('select', { id: 'filter-state', name: 'state' }, h('option', { value: '' }, 'Any state'), ...STATES.map((s) => h('option', { value: s, selected: s === filters.state }, s)));
  const label = h('input', { id: 'filter-label', name: 'label', type: 'search', value: filters.label, placeholder: 'key=value' });
  const applyFilters = () => {
    filters = { profile: profileSelect.value, room: room.value.trim(), state: state.value, label: label.value.trim() };
    const q = new URLSearchParams(Object.entries(filters).filter(([, v]) => v !== ''));
    history.replaceState(null, '', `/console/instances${q.size > 0 ? `?${q}` : ''}`);
    void refresh();
  };
  const filterForm = h(
    'form',
    { class: 'filters', role: 'search', 'aria-label': 'Filter instances', onsubmit: (e: Event) => (e.preventDefault(), applyFilters()), onchange: () => applyFilters() },
    h('label', { for: 'filter-profile' }, 'Profile'),
    profileSelect,
    h('label', { for: 'filter-room' }, 'Room'),
    room,
    h('label', { for: 'filter-state' }, 'State'),
    state,
    h('label', { for: 'filter-label' }, 'Labels'),
    label,
    h('button', { type: 'submit', class: 'secondary' }, 'Filter'),
  );

  const newProfile = h('select', { id: 'new-profile', name: 'profile', required: true });
  const newRoom = h('input', { id: 'new-room', name: 'room', required: true, pattern: '[A-Za-z0-9._\\-]{1,128}', placeholder: 'e.g. session-1' });
  const createProblem = errorBox();
  const createForm = h(
    'form',
    {
      class: 'create',
      'aria-label': 'Create an instance',
      onsubmit: async (e: Event) => {
        e.preventDefault();
        createProblem.clear();
        try {
          const made = await call<Instance>('POST', roomPath(newProfile.value, newRoom.value.trim()), { wait: false });
          go(`/console/profile/${made.profile_id}/room/${encodeURIComponent(made.room_id)}`);
        } catch (err) {
          createProblem.show(err);
        }
      },
    },
    h('label', { for: 'new-profile' }, 'Profile'),
    newProfile,
    h('label', { for: 'new-room' }, 'Room'),
    newRoom,
    h('button', { type: 'submit' }, 'Create instance'),
    createProblem.el,
  );

  main.append(
    h('div', { class: 'title' }, h('h1', {}, 'Instances'), updated, h('button', { type: 'button', class: 'secondary', onclick: () => void refresh() }, 'Refresh')),
    filterForm,
    problem.el,
    bulkBar,
    bulkProblem.el,
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        { class: 'instances', 'aria-label': 'Instances' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, all), ...['Room', 'Profile', 'State', 'Created', 'Deadline', 'Labels'].map((c) => h('th', { scope: 'col' }, c)))),
        body,
      ),
    ),
    more,
    h('details', { class: 'card' }, h('summary', {}, 'Create an instance'), createForm),
  );

  function draw(instances: Instance[]): void {
    const shown = instances.filter((i) => filters.room === '' || i.room_id.toLowerCase().includes(filters.room.toLowerCase()));
    shownNow = shown;
    // One that ended since it was ticked has nothing left to act on.
    for (const [id, i] of selected) {
      const now = shown.find((candidate) => candidate.instance_id === id);
      if (now === undefined || !bulkable(now)) selected.delete(id);
      else selected.set(id, now);
    }
    all.checked = shown.some(bulkable) && shown.filter(bulkable).every((i) => selected.has(i.instance_id));
    body.replaceChildren(
      ...shown.map((i) =>
        h(
          'tr',
          { 'data-instance-id': i.instance_id },
          h('td', {}, tick(i)),
          h('td', {}, h('a', { href: `/console/profile/${i.profile_id}/room/${encodeURIComponent(i.room_id)}?instance=${i.instance_id}`, 'data-nav': true }, i.room_id)),
          h('td', {}, profileName(i.profile_id)),
          h('td', {}, stateBadge(i.state)),
          h('td', { title: i.created_at }, relative(i.created_at)),
          h('td', {}, i.expires_at === null ? '—' : relative(i.expires_at)),
          h('td', {}, Object.entries(i.metadata).map(([k, v]) => `${k}=${v}`).join(' ') || '—'),
        ),
      ),
    );
    if (shown.length === 0) body.append(h('tr', {}, h('td', { colspan: '7', class: 'empty' }, 'No instances match.')));
  }

  function tick(i: Instance): HTMLElement | null {
    if (!bulkable(i)) return null;
    const box = h('input', { type: 'checkbox', checked: selected.has(i.instance_id), 'aria-label': `Select ${i.room_id}` });
    box.addEventListener('change', () => {
      if (box.checked) selected.set(i.instance_id, i);
      else selected.delete(i.instance_id);
      all.checked = shownNow.filter(bulkable).every((candidate) => selected.has(candidate.instance_id));
    });
    return box;
  }

  async function refresh(): Promise<void> {
    if (timer !== undefined) clearTimeout(timer);
    try {
      const q = new URLSearchParams({ limit: String(PAGE) });
      if (filters.profile !== '') q.set('profile_id', filters.profile);
      if (filters.state !== '') q.set('state', filters.state);
      if (filters.label !== '') q.set('metadata', metadataOf(filters.label));
      const page = await call<{ instances: Instance[]; next_cursor: string | null }>('GET', `/api/instances?${q}`);
      if (stopped) return;
      problem.clear();
      draw(page.instances);
      more.hidden = page.next_cursor === null;
      more.textContent = `Showing the newest ${PAGE}: narrow the filters to see others.`;
      updated.textContent = `updated ${clock(new Date())}`;
    } catch (err) {
      if (stopped) return;
      problem.show(err);
      updated.textContent = `not updated since the error (${clock(new Date())})`;
    }
    if (!stopped) timer = setTimeout(() => void refresh(), POLL_MS);
  }

  void (async () => {
    try {
      profiles = (await call<{ profiles: Profile[] }>('GET', '/api/profiles')).profiles;
      for (const p of profiles) {
        profileSelect.append(h('option', { value: p.profile_id, selected: p.profile_id === filters.profile }, p.name));
        newProfile.append(h('option', { value: p.profile_id }, p.name));
      }
    } catch (err) {
      problem.show(err);
    }
    if (!stopped) await refresh();
  })();

  return () => {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
  };
}
