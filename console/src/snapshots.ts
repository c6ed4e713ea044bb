// Snapshots: the panel of an instance's page (its snapshots, take one, fork the instance
// into other rooms) and the organization's page (/console/snapshots: every snapshot,
// deleted there). From either, an instance is started from a snapshot in a room of any
// profile (POST of a room with `snapshot_id`), and the console goes to it.
import type { ForkResult, Instance, Profile, Snapshot } from '../../sdk/src/generated/api.ts';
import { call, consoleRoomPath, roomPath } from './api.ts';
import { dateTime, errorBox, h, relative, stateBadge } from './dom.ts';
import type { Navigate, Stop } from './main.ts';

const PAGE = 50;

function sizeText(bytes: number): string {
  return bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(0)} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** Room ids as a person types them: commas or spaces between. */
const roomsOf = (text: string) => text.split(/[,\s]+/).filter((room) => room !== '');

/**
 * The table of snapshots, each with a form to start an instance from it (and, where
 * `deletable`, a delete button); `reload` lists them again.
 */
function snapshotTable(
  query: () => URLSearchParams,
  profiles: () => Profile[],
  defaultProfile: () => string | undefined,
  go: Navigate,
  deletable: boolean,
): { el: HTMLElement; reload(): Promise<void> } {
  const problem = errorBox();
  const body = h('tbody');
  const more = h('p', { class: 'help', hidden: true }, `Showing the newest ${PAGE}.`);

  function startForm(snapshot: Snapshot): HTMLElement {
    const formProblem = errorBox();
    const profile = h(
      'select',
      { 'aria-label': 'Profile of the new instance' },
      ...profiles().map((p) => h('option', { value: p.profile_id, selected: p.profile_id === (defaultProfile() ?? snapshot.profile_id) }, p.name)),
    );
    const room = h('input', { required: true, placeholder: 'room', 'aria-label': 'Room of the new instance', pattern: '[A-Za-z0-9._\\-]{1,128}' });
    return h(
      'form',
      {
        class: 'inline',
        'aria-label': `Start an instance from ${snapshot.name ?? snapshot.snapshot_id}`,
        onsubmit: async (event: Event) => {
          event.preventDefault();
          formProblem.clear();
          try {
            const made = await call<Instance>('POST', roomPath(profile.value, room.value.trim()), { snapshot_id: snapshot.snapshot_id, wait: false });
            go(consoleRoomPath(made.profile_id, made.room_id));
          } catch (err) {
            formProblem.show(err);
          }
        },
      },
      profile,
      room,
      h('button', { type: 'submit', class: 'secondary small' }, 'Start instance'),
      formProblem.el,
    );
  }

  async function remove(snapshot: Snapshot): Promise<void> {
    if (!confirm(`Delete the snapshot ${snapshot.name ?? snapshot.snapshot_id}? Instances started from it keep their files.`)) return;
    problem.clear();
    try {
      await call('DELETE', `/api/snapshots/${snapshot.snapshot_id}`);
      await reload();
    } catch (err) {
      problem.show(err);
    }
  }

  async function reload(): Promise<void> {
    problem.clear();
    try {
      const page = await call<{ snapshots: Snapshot[]; next_cursor: string | null }>('GET', `/api/snapshots?${query()}`);
      body.replaceChildren(
        ...page.snapshots.map((s) =>
          h(
            'tr',
            { 'data-snapshot-id': s.snapshot_id },
            h('td', {}, s.name ?? h('span', { class: 'help' }, s.snapshot_id.slice(0, 8))),
            h('td', {}, stateBadge(s.state)),
            h('td', { title: dateTime(s.created_at) }, relative(s.created_at)),
            h('td', {}, h('a', { href: consoleRoomPath(s.profile_id, s.room_id), 'data-nav': true }, s.room_id)),
            h('td', {}, s.memory_kept ? 'files and memory' : 'files'),
            h('td', { class: 'num' }, sizeText(s.disk_bytes)),
            h('td', {}, startForm(s)),
            deletable ? h('td', {}, h('button', { type: 'button', class: 'danger small', 'aria-label': `Delete snapshot ${s.name ?? s.snapshot_id}`, onclick: () => void remove(s) }, 'Delete')) : null,
          ),
        ),
      );
      if (page.snapshots.length === 0) body.append(h('tr', {}, h('td', { colspan: deletable ? '8' : '7', class: 'empty' }, 'No snapshots.')));
      more.hidden = page.next_cursor === null;
    } catch (err) {
      problem.show(err);
    }
  }

  const heads = ['Name', 'State', 'Taken', 'Of room', 'Keeps', 'Disk', 'Start an instance from it', ...(deletable ? [''] : [])];
  const el = h(
    'div',
    {},
    problem.el,
    h('div', { class: 'table-wrap' }, h('table', { 'aria-label': 'Snapshots' }, h('thead', {}, h('tr', {}, ...heads.map((c) => h('th', { scope: 'col' }, c)))), body)),
    more,
  );
  return { el, reload };
}

/** An instance's snapshots, a form to take one, and a form to fork the instance. */
export function snapshotsPanel(profileId: string, roomId: string, instanceId: () => string | undefined, go: Navigate): { el: HTMLElement; reload(): void } {
  let profiles: Profile[] = [];
  const table = snapshotTable(
    () => {
      const q = new URLSearchParams({ limit: String(PAGE) });
      const id = instanceId();
      if (id !== undefined) q.set('instance_id', id);
      return q;
    },
    () => profiles,
    () => profileId,
    go,
    true,
  );

  const takeProblem = errorBox();
  const name = h('input', { id: 'snapshot-name', maxlength: '128', placeholder: 'e.g. after-setup' });
  const memory = h('input', { id: 'snapshot-memory', type: 'checkbox', checked: true });
  const take = h(
    'form',
    {
      class: 'filters',
      'aria-label': 'Take a snapshot',
      onsubmit: async (event: Event) => {
        event.preventDefault();
        takeProblem.clear();
        const button = take.querySelector('button') as HTMLButtonElement;
        button.disabled = true;
        try {
          await call<Snapshot>('POST', roomPath(profileId, roomId, '/snapshots'), { ...(name.value.trim() === '' ? {} : { name: name.value.trim() }), memory: memory.checked });
          name.value = '';
          await table.reload();
        } catch (err) {
          takeProblem.show(err);
        } finally {
          button.disabled = false;
        }
      },
    },
    h('label', { for: 'snapshot-name' }, 'Name'),
    name,
    h('label', { for: 'snapshot-memory', class: 'check' }, memory, ' with memory and processes'),
    h('button', { type: 'submit' }, 'Take snapshot'),
  );

  const forkProblem = errorBox();
  const forkRooms = h('input', { id: 'fork-rooms', required: true, placeholder: 'try-a, try-b' });
  const forked = h('ul', { class: 'files', 'aria-label': 'Forked instances' });
  const fork = h(
    'form',
    {
      class: 'filters',
      'aria-label': 'Fork the instance',
      onsubmit: async (event: Event) => {
        event.preventDefault();
        forkProblem.clear();
        const button = fork.querySelector('button') as HTMLButtonElement;
        button.disabled = true;
        button.textContent = 'Forking…';
        try {
          const result = await call<ForkResult>('POST', roomPath(profileId, roomId, '/fork'), { rooms: roomsOf(forkRooms.value) });
          forkRooms.value = '';
          forked.replaceChildren(
            ...result.instances.map((i) =>
              h('li', {}, stateBadge(i.state), h('a', { href: consoleRoomPath(i.profile_id, i.room_id), 'data-nav': true }, i.room_id), i.failure_reason === null ? null : h('span', { class: 'help' }, i.failure_reason)),
            ),
          );
        } catch (err) {
          forkProblem.show(err);
        } finally {
          button.disabled = false;
          button.textContent = 'Fork';
        }
      },
    },
    h('label', { for: 'fork-rooms' }, 'Fork into rooms'),
    forkRooms,
    h('button', { type: 'submit' }, 'Fork'),
  );

  const el = h(
    'section',
    { class: 'card', 'aria-label': 'Snapshots' },
    take,
    takeProblem.el,
    table.el,
    h('h3', {}, 'Fork'),
    h('p', { class: 'help' }, 'A copy of this instance, its processes running, in each room named (same profile); this instance goes on running.'),
    fork,
    forkProblem.el,
    forked,
  );
  // The start forms offer the profiles: listed once, before the table is drawn.
  const listed = call<{ profiles: Profile[] }>('GET', '/api/profiles').then(
    (answer) => void (profiles = answer.profiles),
    () => undefined,
  );
  return { el, reload: () => void listed.then(() => table.reload()) };
}

/** The organization's snapshots: /console/snapshots. */
export function snapshotsPage(main: HTMLElement, go: Navigate): Stop {
  let profiles: Profile[] = [];
  const table = snapshotTable(() => new URLSearchParams({ limit: String(PAGE) }), () => profiles, () => undefined, go, true);
  main.append(
    h('div', { class: 'title' }, h('h1', {}, 'Snapshots'), h('button', { type: 'button', class: 'secondary', onclick: () => void table.reload() }, 'Refresh')),
    h('p', { class: 'help' }, 'Every snapshot of the organization, newest first. Take one, or fork an instance, from its page.'),
    table.el,
  );
  void (async () => {
    try {
      profiles = (await call<{ profiles: Profile[] }>('GET', '/api/profiles')).profiles;
    } catch {
      // The table shows the error of its own request, if the API is failing.
    }
    await table.reload();
  })();
  return () => {};
}
