// An instance's view, addressed by its room as the REST API addresses it: its state and
// timeline (when each step happened and why), resources, labels, its deadline and what
// moves or ends it (timeout, idle limit, lifetime), the actions its state allows (pause,
// resume, keep alive for the instance's timeout or a number of seconds, delete), a box
// to run a command, a terminal, the file browser, the command history with undo, and its
// snapshots and fork. Polled while it changes. A link from the list also names the instance, so one
// the room had before its current one is shown as it ended.
import type { Instance, Profile } from '../../sdk/src/generated/api.ts';
import { ApiError, call, roomPath } from './api.ts';
import { commandBox } from './command-box.ts';
import { commandHistory } from './command-history.ts';
import { clock, dateTime, errorBox, h, messageOf, relative, stateBadge } from './dom.ts';
import { fileBrowser } from './file-browser.ts';
import type { Navigate, Stop } from './main.ts';
import { snapshotsPanel } from './snapshots.ts';
import { terminalPanel } from './terminal-panel.ts';

const SETTLED = new Set(['ready', 'paused', 'stopped', 'failed']);
const FAST_POLL_MS = 1500;
const SLOW_POLL_MS = 5000;
/** Pages of the list searched for an ended instance (200 each, newest first). */
const ENDED_SEARCH_PAGES = 5;

/** Why it is in its state, when the timeline says: the newest step with a reason. */
function whyOf(instance: Instance): string | null {
  if (instance.failure_reason !== null) return instance.failure_reason;
  const last = instance.state_history.at(-1);
  if (last === undefined || last.state === 'ready') return null;
  return last.reason ?? last.reason_code ?? null;
}

function timeline(instance: Instance): HTMLElement {
  const start = Date.parse(instance.state_history[0]?.at ?? instance.created_at);
  return h(
    'ol',
    { class: 'timeline', 'aria-label': 'Timeline' },
    ...instance.state_history.map((step) =>
      h(
        'li',
        {},
        h('time', { datetime: step.at, title: dateTime(step.at) }, clock(step.at)),
        h('span', { class: 'since' }, `+${((Date.parse(step.at) - start) / 1000).toFixed(2)} s`),
        stateBadge(step.state),
        step.reason !== undefined || step.reason_code !== undefined ? h('span', { class: 'reason' }, step.reason ?? step.reason_code ?? '') : null,
      ),
    ),
  );
}

function facts(instance: Instance, profile: Profile | undefined): HTMLElement {
  const row = (name: string, value: Node | string) => [h('dt', {}, name), h('dd', {}, value)];
  const why = whyOf(instance);
  const labels = Object.entries(instance.metadata);
  return h(
    'dl',
    { class: 'facts' },
    ...row('State', stateBadge(instance.state)),
    ...(why === null ? [] : row(instance.state === 'failed' ? 'Why it failed' : 'Why', why)),
    ...(instance.progress === null ? [] : row('Progress', instance.progress)),
    ...row('Profile', profile?.name ?? instance.profile_id),
    ...row('Instance id', h('code', {}, instance.instance_id)),
    ...row('Resources', `${instance.resources.memory_mb} MB memory · ${instance.resources.vcpus} vCPU · ${instance.resources.disk_mb} MB disk · ${instance.runtime}`),
    ...row('Labels', labels.length === 0 ? '—' : labels.map(([k, v]) => `${k}=${v}`).join(' ')),
    ...row('Deadline', instance.expires_at === null ? 'none' : `${dateTime(instance.expires_at)} (${relative(instance.expires_at)})`),
    ...row('Timeout', instance.timeout_s === null ? 'none: Keep alive with a number of seconds sets a deadline' : `${instance.timeout_s} s from the create or the last keep-alive`),
    ...(profile === undefined
      ? []
      : [
          ...row('Idle limit', profile.idle_timeout_s === 0 ? 'none' : `${profile.idle_timeout_s} s without a request, then ${profile.idle_action === 'pause' ? 'paused' : 'stopped'}`),
          ...row('Lifetime', profile.max_lifetime_s === 0 ? 'no limit' : `until ${dateTime(new Date(Date.parse(instance.created_at) + profile.max_lifetime_s * 1000).toISOString())} (at most ${profile.max_lifetime_s} s)`),
        ]),
    ...(instance.pause === null
      ? []
      : row('Paused', `${relative(instance.pause.paused_at)}, ${instance.pause.memory_kept ? 'memory kept' : 'files only'}${instance.pause.remove_after === null ? '' : `; removed ${relative(instance.pause.remove_after)}`}`)),
    ...row('Created', dateTime(instance.created_at)),
  );
}

export function instancePage(main: HTMLElement, profileId: string, roomId: string, go: Navigate): Stop {
  /** The instance the link named (?instance=), which may be one the room had before. */
  let wanted = new URLSearchParams(location.search).get('instance');
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let profile: Profile | undefined;
  let instance: Instance | undefined;
  const problem = errorBox();
  const updated = h('span', { class: 'updated', role: 'status', 'aria-live': 'polite' }, 'loading…');
  const summary = h('section', { 'aria-label': 'Instance' });
  const steps = h('section', { 'aria-label': 'Timeline' });
  const path = (rest = '') => roomPath(profileId, roomId, rest);

  const act = (label: string, run: () => Promise<unknown>) =>
    h(
      'button',
      {
        type: 'button',
        class: label === 'Delete' ? 'danger' : 'secondary',
        onclick: async (event: Event) => {
          const button = event.currentTarget as HTMLButtonElement;
          button.disabled = true;
          problem.clear();
          try {
            await run();
            await refresh();
          } catch (err) {
            problem.show(err);
          } finally {
            button.disabled = false;
          }
        },
      },
      label,
    );
  const pause = act('Pause', () => call('POST', path('/pause')));
  const resume = act('Resume', () => call('POST', path('/resume')));
  // Empty: the instance's own timeout_s; a number moves the deadline that far from now (the instance's timeout_s stays).
  const keepFor = h('input', { type: 'number', min: '1', max: '2592000', class: 'short', 'aria-label': 'Keep alive for (seconds)', placeholder: 'seconds' });
  const keepAlive = act('Keep alive', () => call('POST', path('/keepalive'), keepFor.value.trim() === '' ? undefined : { timeout_s: Number(keepFor.value) }));
  const remove = act('Delete', async () => {
    if (!confirm(`Delete the instance of room ${roomId}? Its files go with it.`)) return;
    await call('DELETE', path());
    go('/console/instances');
  });
  const keeping = h('span', { class: 'keep-alive' }, keepAlive, keepFor);
  const actions = h('div', { class: 'actions', role: 'group', 'aria-label': 'Actions' }, pause, resume, keeping, remove);

  const terminal = terminalPanel(profileId, roomId);
  const files = fileBrowser(profileId, roomId);
  const history = commandHistory(profileId, roomId, () => instance?.instance_id, (file) => files.open(file));
  const snapshots = snapshotsPanel(profileId, roomId, () => instance?.instance_id, go);
  const afterCommand = () => {
    history.reload();
    files.reload();
  };
  const jump = (id: string, label: string) => h('a', { href: `#${id}` }, label);
  // Work goes to the room's current instance, so it is hidden while an ended one is shown.
  const work = h(
    'div',
    {},
    h('nav', { class: 'jump', 'aria-label': 'Sections' }, jump('run', 'Run'), jump('terminal', 'Terminal'), jump('files', 'Files'), jump('history', 'History'), jump('snapshots', 'Snapshots')),
    h('h2', { id: 'run' }, 'Run a command'),
    commandBox(profileId, roomId, afterCommand),
    h('h2', { id: 'terminal' }, 'Terminal'),
    terminal.el,
    h('h2', { id: 'files' }, 'Files'),
    files.el,
    h('h2', { id: 'history' }, 'Command history'),
    history.el,
    h('h2', { id: 'snapshots' }, 'Snapshots and fork'),
    snapshots.el,
  );
  /** The panels that read the instance load once it is known to be ready (or paused). */
  let panelsLoaded = false;
  const notice = h('p', { class: 'notice', role: 'status', hidden: true });
  main.append(
    h('p', { class: 'crumbs' }, h('a', { href: '/console/instances', 'data-nav': true }, 'Instances'), ' / ', roomId),
    h('div', { class: 'title' }, h('h1', {}, `Room ${roomId}`), updated),
    notice,
    actions,
    problem.el,
    h('div', { class: 'columns' }, h('div', {}, h('h2', {}, 'Details'), summary), h('div', {}, h('h2', {}, 'Timeline'), steps)),
    work,
  );

  /**
   * An instance the room had before its current one, found in the organization's list
   * (the API addresses an instance by its room, which answers the current one only).
   */
  async function findEnded(id: string): Promise<Instance | undefined> {
    let cursor: string | null = null;
    for (let pages = 0; pages < ENDED_SEARCH_PAGES; pages++) {
      const q = new URLSearchParams({ profile_id: profileId, limit: '200' });
      if (cursor !== null) q.set('cursor', cursor);
      const page: { instances: Instance[]; next_cursor: string | null } = await call('GET', `/api/instances?${q}`);
      const found = page.instances.find((i) => i.instance_id === id);
      if (found !== undefined || page.next_cursor === null) return found;
      cursor = page.next_cursor;
    }
    return undefined;
  }

  function showEnded(ended: Instance, current: Instance | undefined): void {
    draw(ended);
    actions.hidden = true;
    work.hidden = true;
    terminal.close();
    notice.hidden = false;
    notice.replaceChildren(
      `This instance of the room has ended (${ended.state}).`,
      current === undefined ? '' : ' ',
      current === undefined ? '' : h('a', { href: `/console/profile/${profileId}/room/${encodeURIComponent(roomId)}`, 'data-nav': true }, `Open the room's current instance (${current.state})`),
    );
    updated.textContent = `updated ${clock(new Date())}`;
  }

  function draw(current: Instance): void {
    summary.replaceChildren(facts(current, profile));
    steps.replaceChildren(timeline(current));
    const live = !['stopping', 'stopped', 'failed'].includes(current.state);
    pause.hidden = current.state !== 'ready';
    resume.hidden = current.state !== 'paused';
    // Without a timeout, a keep-alive still restarts the idle time, and with seconds sets a deadline.
    keeping.hidden = !live;
    remove.hidden = current.state === 'stopping' || current.state === 'stopped';
  }

  async function refresh(): Promise<void> {
    if (timer !== undefined) clearTimeout(timer);
    try {
      let current: Instance | undefined;
      let gone: unknown;
      try {
        current = await call<Instance>('GET', path());
      } catch (err) {
        if (!(err instanceof ApiError && err.status === 404)) throw err;
        gone = err;
      }
      if (wanted !== null && current?.instance_id !== wanted) {
        const ended = await findEnded(wanted);
        // An instance that ended changes no more: nothing to poll for.
        if (stopped || ended !== undefined) return ended === undefined ? undefined : showEnded(ended, current);
        // Not among the newest: the room's current instance is what there is to show.
        wanted = null;
      }
      if (stopped) return;
      if (current === undefined) throw gone;
      instance = current;
      draw(instance);
      if (!panelsLoaded && (instance.state === 'ready' || instance.state === 'paused')) {
        panelsLoaded = true;
        history.reload();
        snapshots.reload();
        // Listing files resumes a paused instance: a person asks for that with List.
        if (instance.state === 'ready') files.reload();
      }
      updated.textContent = `updated ${clock(new Date())}`;
    } catch (err) {
      if (stopped) return;
      if (err instanceof ApiError && err.status === 404) {
        summary.replaceChildren(h('p', {}, messageOf(err)), h('p', {}, h('a', { href: '/console/instances', 'data-nav': true }, 'Back to the instances')));
        steps.replaceChildren();
        actions.hidden = true;
        updated.textContent = `updated ${clock(new Date())}`;
      } else {
        problem.show(err);
      }
    }
    if (!stopped) timer = setTimeout(() => void refresh(), instance && SETTLED.has(instance.state) ? SLOW_POLL_MS : FAST_POLL_MS);
  }

  void (async () => {
    try {
      profile = await call<Profile>('GET', `/api/profiles/${encodeURIComponent(profileId)}`);
    } catch {
      // The instance's own answer says what is wrong; the profile's name is only a nicety.
    }
    if (!stopped) await refresh();
  })();

  return () => {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
    terminal.close();
  };
}
