// The organization's usage against its quotas (/console/usage): what GET /api/usage
// answers, each quota as a meter with its limit and whether the operator set it, and the
// host memory its running instances use now. Polled while shown.
import type { Usage } from '../../sdk/src/generated/api.ts';
import { call } from './api.ts';
import { clock, errorBox, h } from './dom.ts';
import type { Stop } from './main.ts';

const POLL_MS = 5000;

const LABELS: Record<keyof Usage['quotas'], [string, string]> = {
  instances: ['Instances', 'live instances (every state but stopped and failed)'],
  memory_mb: ['Memory', 'MB of memory_mb of the live instances'],
  vcpus: ['vCPUs', 'vCPUs of the live instances'],
  disk_mb: ['Disk', 'MB of writable layers of the live instances'],
  concurrent_commands: ['Commands at once', 'commands running now'],
  commands_per_minute: ['Commands a minute', 'commands started in the last 60 s'],
  snapshots: ['Snapshots', 'snapshots kept'],
};

export function usagePage(main: HTMLElement): Stop {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const problem = errorBox();
  const updated = h('span', { class: 'updated', role: 'status', 'aria-live': 'polite' }, 'loading…');
  const body = h('tbody');
  const memory = h('p', {});
  main.append(
    h('div', { class: 'title' }, h('h1', {}, 'Usage and quotas'), updated),
    problem.el,
    h(
      'div',
      { class: 'table-wrap' },
      h('table', { 'aria-label': 'Quotas' }, h('thead', {}, h('tr', {}, ...['Quota', 'Used', 'Limit', '', 'Set by'].map((c) => h('th', { scope: 'col' }, c)))), body),
    ),
    memory,
    h('p', { class: 'help' }, 'A request that would go past a limit is refused with quota_exceeded. Limits are the service’s defaults unless the operator set one for the organization.'),
  );

  async function refresh(): Promise<void> {
    try {
      const usage = await call<Usage>('GET', '/api/usage');
      if (stopped) return;
      problem.clear();
      body.replaceChildren(
        ...(Object.entries(usage.quotas) as [keyof Usage['quotas'], Usage['quotas'][keyof Usage['quotas']]][]).map(([name, quota]) => {
          const [label, help] = LABELS[name] ?? [name, ''];
          const full = quota.limit > 0 && quota.used >= quota.limit;
          return h(
            'tr',
            { 'data-quota': name, class: full ? 'full' : undefined },
            h('th', { scope: 'row' }, label, h('span', { class: 'help' }, ` ${help}`)),
            h('td', { class: 'num' }, String(quota.used)),
            h('td', { class: 'num' }, String(quota.limit)),
            h('td', {}, h('meter', { min: '0', max: String(Math.max(quota.limit, 1)), value: String(quota.used), high: String(quota.limit * 0.8), 'aria-label': `${label}: ${quota.used} of ${quota.limit}` })),
            h('td', {}, quota.source === 'organization' ? 'operator' : 'default'),
          );
        }),
      );
      memory.textContent = usage.memory_in_use_mb === undefined ? '' : `Host memory its running instances use now: ${usage.memory_in_use_mb} MB (measured; not a quota).`;
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
