// The operator's pages, for a session signed in with the operator token: the host
// (/console/operator: host admission's memory, disk and CPU figures and the warm pools,
// GET /operator/capacity, polled), the nodes sharing the store (/console/operator/nodes),
// and the organizations (/console/operator/orgs: the list, GET /operator/organizations,
// and the usage and quotas of the one named in ?org=, changed from a form). They call the operator API with the session, as a
// script would with the token.
import type { Usage } from '../../sdk/src/generated/api.ts';
import { call } from './api.ts';
import { clock, dateTime, errorBox, h, relative } from './dom.ts';
import type { Stop } from './main.ts';

const POLL_MS = 5000;

interface Capacity {
  memory: { limit_mb: number; committed_mb: number; in_use_mb: number; reserve_mb: number; host_available_mb: number; room_mb: number; under_pressure: boolean; pressure_pauses: number };
  disk: { limit_mb: number; committed_mb: number; free_mb: number; floor_mb: number };
  cpu: { busy_percent: number | null; freeze_percent: number; frozen_instances: number; pressure_freezes: number };
  admissible_default_instances: number;
  warm_pools: { max_instances: number; pools: { organization_id: string; profile_id: string; profile_name: string | null; size: number; ready: number; starting: number; leaving: number }[] };
}

interface OrganizationOverview {
  organization_id: string;
  name: string;
  created_at: string;
  live_instances: number;
  keys: number;
}

function orgLink(idOrName: string, text: string): HTMLElement {
  return h('a', { href: `/console/operator/orgs?${new URLSearchParams({ org: idOrName })}`, 'data-nav': true }, text);
}

/** The warm pools of this node: a row per profile with a pool. */
function warmPools(c: Capacity): HTMLElement {
  const pools = c.warm_pools.pools;
  return h(
    'section',
    { class: 'card', 'aria-label': 'Warm pools' },
    h('h2', {}, 'Warm pools'),
    h('p', { class: 'help' }, c.warm_pools.max_instances === 0 ? 'Off on this host (ROOMKIT_WARM_POOL_MAX_INSTANCES is 0): profiles keep their size, nothing is pooled.' : `This host keeps up to ${c.warm_pools.max_instances} pooled instances, all pools together.`),
    pools.length === 0
      ? h('p', {}, 'No profile has a warm pool.')
      : h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { 'aria-label': 'Warm pools' },
            h('thead', {}, h('tr', {}, ...['Organization', 'Profile', 'Size', 'Ready', 'Starting', 'Leaving'].map((col) => h('th', { scope: 'col' }, col)))),
            h(
              'tbody',
              {},
              ...pools.map((p) =>
                h(
                  'tr',
                  { 'data-profile-id': p.profile_id },
                  h('td', {}, orgLink(p.organization_id, p.organization_id.slice(0, 8))),
                  h('td', {}, p.profile_name ?? h('span', { class: 'help' }, 'deleted')),
                  h('td', { class: 'num' }, String(p.size)),
                  h('td', { class: 'num' }, String(p.ready)),
                  h('td', { class: 'num' }, String(p.starting)),
                  h('td', { class: 'num' }, String(p.leaving)),
                ),
              ),
            ),
          ),
        ),
  );
}

interface Node {
  node_id: string;
  url: string;
  state: string;
  version: string;
  started_at: string;
  heartbeat_at: string;
  lost_at: string | null;
  capacity: { memory_mb: number; vcpus: number; disk_mb: number };
  load: { instances: number; memory_in_use_mb: number };
}

function figures(caption: string, rows: [string, string, string?][]): HTMLElement {
  return h(
    'section',
    { class: 'card', 'aria-label': caption },
    h('h2', {}, caption),
    h('dl', { class: 'facts' }, ...rows.flatMap(([name, value, help]) => [h('dt', {}, name), h('dd', { 'data-figure': name }, value, help === undefined ? null : h('span', { class: 'help' }, ` ${help}`))])),
  );
}

function hostPage(main: HTMLElement): Stop {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const problem = errorBox();
  const updated = h('span', { class: 'updated', role: 'status', 'aria-live': 'polite' }, 'loading…');
  const body = h('div', { class: 'columns' });
  main.append(h('div', { class: 'title' }, h('h1', {}, 'Host'), updated), h('p', { class: 'help' }, 'What this host has committed, and how far host admission lets it go.'), problem.el, body);

  async function refresh(): Promise<void> {
    try {
      const c = await call<Capacity>('GET', '/operator/capacity');
      if (stopped) return;
      problem.clear();
      body.replaceChildren(
        figures('Memory', [
          ['Admission limit', `${c.memory.limit_mb} MB`],
          ['In use (counted)', `${c.memory.in_use_mb} MB`],
          ['Committed by limits', `${c.memory.committed_mb} MB`, '(not counted)'],
          ['Reserve', `${c.memory.reserve_mb} MB`],
          ['Host available', `${c.memory.host_available_mb} MB`],
          ['Room for a new instance', `${c.memory.room_mb} MB`],
          ['Under pressure', c.memory.under_pressure ? 'yes: idle instances are paused' : 'no'],
          ['Pressure pauses', String(c.memory.pressure_pauses), 'since the server started'],
        ]),
        h(
          'div',
          {},
          figures('Disk', [
            ['Admission limit', `${c.disk.limit_mb} MB`],
            ['Committed', `${c.disk.committed_mb} MB`],
            ['Free', `${c.disk.free_mb} MB`],
            ['Kept free', `${c.disk.floor_mb} MB`],
          ]),
          figures('CPU', [
            ['Busy', c.cpu.busy_percent === null ? '—' : `${c.cpu.busy_percent} %`],
            ['Freezes above', c.cpu.freeze_percent === 0 ? 'never' : `${c.cpu.freeze_percent} %`],
            ['Frozen now', String(c.cpu.frozen_instances)],
          ]),
          figures('Admission', [['Default instances admissible now', String(c.admissible_default_instances)]]),
        ),
        warmPools(c),
      );
      updated.textContent = `updated ${clock(new Date())}`;
    } catch (err) {
      if (stopped) return;
      problem.show(err);
    }
    if (!stopped) timer = setTimeout(() => void refresh(), POLL_MS);
  }
  void refresh();
  return () => {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
  };
}

function nodesPage(main: HTMLElement): Stop {
  const problem = errorBox();
  const body = h('tbody');
  main.append(
    h('div', { class: 'title' }, h('h1', {}, 'Nodes')),
    problem.el,
    h(
      'div',
      { class: 'table-wrap' },
      h('table', { 'aria-label': 'Nodes' }, h('thead', {}, h('tr', {}, ...['Node', 'URL', 'State', 'Heartbeat', 'Instances', 'Memory in use', 'Capacity', 'Version'].map((c) => h('th', { scope: 'col' }, c)))), body),
    ),
  );
  void (async () => {
    try {
      const { nodes, this_node } = await call<{ nodes: Node[]; this_node: string }>('GET', '/operator/nodes');
      body.replaceChildren(
        ...nodes.map((n) =>
          h(
            'tr',
            { 'data-node-id': n.node_id },
            h('td', {}, h('code', {}, n.node_id.slice(0, 8)), n.node_id === this_node ? h('span', { class: 'help' }, ' (this one)') : null),
            h('td', {}, n.url),
            h('td', {}, n.state, n.lost_at === null ? '' : ` ${relative(n.lost_at)}`),
            h('td', { title: dateTime(n.heartbeat_at) }, relative(n.heartbeat_at)),
            h('td', { class: 'num' }, String(n.load.instances)),
            h('td', { class: 'num' }, `${n.load.memory_in_use_mb} MB`),
            h('td', {}, `${n.capacity.memory_mb} MB · ${n.capacity.vcpus} vCPU · ${n.capacity.disk_mb} MB disk`),
            h('td', {}, n.version),
          ),
        ),
      );
    } catch (err) {
      // With SQLite the server is the only node: the API's message says so.
      problem.show(err);
    }
  })();
  return () => {};
}

function orgsPage(main: HTMLElement): Stop {
  const problem = errorBox();
  const listProblem = errorBox();
  const listed = h('tbody');
  const more = h('button', { type: 'button', class: 'secondary', hidden: true }, 'More organizations');
  let cursor: string | null = null;
  const org = h('input', { id: 'operator-org', name: 'org', required: true, value: new URLSearchParams(location.search).get('org') ?? '', placeholder: 'a name or an id' });
  const shown = h('div', {});

  function draw(usage: Usage): void {
    const inputs = new Map<string, HTMLInputElement>();
    const formProblem = errorBox();
    const rows = Object.entries(usage.quotas).map(([name, quota]) => {
      const input = h('input', { type: 'number', min: '0', value: quota.source === 'organization' ? String(quota.limit) : '', placeholder: `default ${quota.limit}`, 'aria-label': `Quota ${name}` });
      inputs.set(name, input);
      return h('tr', { 'data-quota': name }, h('th', { scope: 'row' }, name), h('td', { class: 'num' }, String(quota.used)), h('td', { class: 'num' }, String(quota.limit)), h('td', {}, quota.source === 'organization' ? 'operator' : 'default'), h('td', {}, input));
    });
    const form = h(
      'form',
      {
        'aria-label': 'Quotas',
        onsubmit: async (event: Event) => {
          event.preventDefault();
          formProblem.clear();
          // A number sets a quota; an emptied one returns it to the default; one untouched is left out.
          const body: Record<string, number | null> = {};
          for (const [name, input] of inputs) {
            const before = usage.quotas[name as keyof Usage['quotas']];
            const now = input.value.trim() === '' ? null : Number(input.value);
            const was = before.source === 'organization' ? before.limit : null;
            if (now !== was) body[name] = now;
          }
          try {
            draw(await call<Usage>('PUT', `/operator/orgs/${encodeURIComponent(org.value.trim())}/quotas`, body));
          } catch (err) {
            formProblem.show(err);
          }
        },
      },
      h('div', { class: 'table-wrap' }, h('table', { 'aria-label': 'Organization quotas' }, h('thead', {}, h('tr', {}, ...['Quota', 'Used', 'Limit', 'Set by', 'Set for this organization'].map((c) => h('th', { scope: 'col' }, c)))), h('tbody', {}, ...rows))),
      h('p', { class: 'help' }, 'A number sets the quota for this organization; an empty field returns it to the default.'),
      formProblem.el,
      h('button', { type: 'submit' }, 'Save quotas'),
    );
    shown.replaceChildren(
      h('h3', {}, `Organization ${usage.organization_id}`),
      usage.memory_in_use_mb === undefined ? '' : h('p', {}, `Its running instances use ${usage.memory_in_use_mb} MB of host memory now.`),
      form,
    );
  }

  async function look(): Promise<void> {
    problem.clear();
    const name = org.value.trim();
    if (name === '') return;
    history.replaceState(null, '', `/console/operator/orgs?${new URLSearchParams({ org: name })}`);
    try {
      draw(await call<Usage>('GET', `/operator/orgs/${encodeURIComponent(name)}/usage`));
    } catch (err) {
      shown.replaceChildren();
      problem.show(err);
    }
  }

  async function list(): Promise<void> {
    listProblem.clear();
    try {
      const page = await call<{ organizations: OrganizationOverview[]; next_cursor: string | null }>('GET', `/operator/organizations?${new URLSearchParams({ limit: '100', ...(cursor === null ? {} : { cursor }) })}`);
      listed.append(
        ...page.organizations.map((o) =>
          h(
            'tr',
            { 'data-organization-id': o.organization_id },
            h('td', {}, orgLink(o.organization_id, o.name)),
            h('td', {}, h('code', {}, o.organization_id.slice(0, 8))),
            h('td', { title: dateTime(o.created_at) }, relative(o.created_at)),
            h('td', { class: 'num' }, String(o.live_instances)),
            h('td', { class: 'num' }, String(o.keys)),
          ),
        ),
      );
      cursor = page.next_cursor;
      more.hidden = cursor === null;
    } catch (err) {
      listProblem.show(err);
    }
  }
  more.addEventListener('click', () => void list());

  main.append(
    h('h1', {}, 'Organizations'),
    listProblem.el,
    h(
      'div',
      { class: 'table-wrap' },
      h('table', { 'aria-label': 'Organizations' }, h('thead', {}, h('tr', {}, ...['Name', 'Id', 'Created', 'Live instances', 'Keys'].map((c) => h('th', { scope: 'col' }, c)))), listed),
    ),
    more,
    h('h2', {}, 'Usage and quotas'),
    h('p', { class: 'help' }, 'An organization’s usage against its quotas, and the quotas set for it; name it as roomkit keys create --org does, or by its id.'),
    h(
      'form',
      { class: 'filters', role: 'search', 'aria-label': 'Find an organization', onsubmit: (event: Event) => (event.preventDefault(), void look()) },
      h('label', { for: 'operator-org' }, 'Organization'),
      org,
      h('button', { type: 'submit', class: 'secondary' }, 'Show'),
    ),
    problem.el,
    shown,
  );
  void list();
  void look();
  return () => {};
}

/** Routes the operator's paths: /console/operator, /console/operator/nodes, /console/operator/orgs. */
export function operatorPage(main: HTMLElement, path: string): Stop | undefined {
  if (path === '/console/operator' || path === '/console' || path === '/console/') return hostPage(main);
  if (path === '/console/operator/nodes') return nodesPage(main);
  if (path === '/console/operator/orgs') return orgsPage(main);
  return undefined;
}
