// The organization's templates (/console/templates): the list with each one's state and
// last build, a form that builds one from a Dockerfile typed in, and a template's page
// (/console/templates/{name}) with its latest build's log, followed live while the build
// runs (the logs endpoint's Server-Sent Events), and delete.
import type { Template, TemplateBuildStarted } from '../../sdk/src/generated/api.ts';
import { call, streamGet } from './api.ts';
import { dateTime, errorBox, h, relative, stateBadge } from './dom.ts';
import type { Navigate, Stop } from './main.ts';

const EXAMPLE = 'FROM debian:bookworm\nRUN echo hi > /tmp/x\n';

function templatePath(name: string): string {
  return `/console/templates/${encodeURIComponent(name)}`;
}

function apiPath(name: string, rest = ''): string {
  return `/api/templates/${encodeURIComponent(name)}${rest}`;
}

/** How its last build went, in a few words. */
function buildSummary(t: Template): string {
  const b = t.build;
  const steps = `${b.steps} step${b.steps === 1 ? '' : 's'}${b.cached_steps > 0 ? `, ${b.cached_steps} cached` : ''}`;
  if (b.finished_at === null) return `running since ${relative(b.created_at)} · ${steps}`;
  const seconds = (Date.parse(b.finished_at) - Date.parse(b.created_at)) / 1000;
  return `${b.state} in ${seconds.toFixed(1)} s · ${steps}`;
}

function listPage(main: HTMLElement, go: Navigate): Stop {
  const problem = errorBox();
  const body = h('tbody');
  const name = h('input', { id: 'template-name', name: 'name', required: true, placeholder: 'e.g. py-app', spellcheck: 'false' });
  const dockerfile = h('textarea', { id: 'template-dockerfile', name: 'dockerfile', required: true, rows: '8', spellcheck: 'false' });
  dockerfile.value = EXAMPLE;
  const buildProblem = errorBox();

  async function reload(): Promise<void> {
    problem.clear();
    try {
      const { templates } = await call<{ templates: Template[] }>('GET', '/api/templates');
      body.replaceChildren(
        ...(templates.length === 0
          ? [h('tr', {}, h('td', { class: 'empty', colspan: '5' }, 'No templates yet: build one above.'))]
          : templates.map((t) =>
              h(
                'tr',
                { 'data-template': t.name },
                h('td', {}, h('a', { href: templatePath(t.name), 'data-nav': true }, t.name)),
                h('td', {}, stateBadge(t.state)),
                h('td', {}, buildSummary(t)),
                h('td', { title: dateTime(t.build.created_at) }, relative(t.build.created_at)),
                h('td', {}, h('button', { type: 'button', class: 'danger small', 'aria-label': `Delete template ${t.name}`, onclick: () => void remove(t) }, 'Delete')),
              ),
            )),
      );
    } catch (err) {
      problem.show(err);
    }
  }

  async function remove(t: Template): Promise<void> {
    if (!confirm(`Delete the template ${t.name}? Profiles that name it can no longer start instances; running instances keep their files.`)) return;
    problem.clear();
    try {
      await call('DELETE', apiPath(t.template_id));
      await reload();
    } catch (err) {
      problem.show(err);
    }
  }

  const form = h(
    'form',
    {
      'aria-label': 'Build a template',
      onsubmit: async (event: Event) => {
        event.preventDefault();
        buildProblem.clear();
        try {
          const started = await call<TemplateBuildStarted>('POST', '/api/templates', { name: name.value.trim(), dockerfile: dockerfile.value });
          go(templatePath(started.name));
        } catch (err) {
          buildProblem.show(err);
        }
      },
    },
    h('h2', {}, 'Build a template'),
    h('label', { for: 'template-name' }, 'Name'),
    name,
    h('label', { for: 'template-dockerfile' }, 'Dockerfile'),
    dockerfile,
    h('p', { class: 'help' }, 'Each RUN runs in a sandbox of its own; a name already built is built again. Files for COPY are sent with roomkit build or the API.'),
    buildProblem.el,
    h('button', { type: 'submit' }, 'Build'),
  );

  main.append(
    h('h1', {}, 'Templates'),
    h('p', { class: 'help' }, 'Images built from a Dockerfile; a profile uses one with "image": "template:NAME".'),
    h('section', { class: 'card' }, form),
    problem.el,
    h('div', { class: 'table-wrap' }, h('table', { 'aria-label': 'Templates' }, h('thead', {}, h('tr', {}, ...['Name', 'State', 'Last build', 'Started', ''].map((c) => h('th', { scope: 'col' }, c)))), body)),
  );
  void reload();
  return () => {};
}

function templatePage(main: HTMLElement, name: string, go: Navigate): Stop {
  const problem = errorBox();
  const heading = h('div', { class: 'title' }, h('h1', {}, `Template ${name}`));
  const facts = h('dl', { class: 'facts' });
  const log = h('pre', { class: 'output', 'aria-label': 'Build log', tabindex: '0' });
  const following = h('span', { class: 'updated', role: 'status', 'aria-live': 'polite' });
  const abort = new AbortController();

  function draw(t: Template): void {
    heading.replaceChildren(h('h1', {}, `Template ${t.name}`), stateBadge(t.state));
    const rows: [string, Node | string][] = [
      ['Template id', h('code', {}, t.template_id)],
      ['Latest build', h('code', {}, t.build_id)],
      ['Build', buildSummary(t)],
      ['Started', dateTime(t.build.created_at)],
      ['Finished', t.build.finished_at === null ? '—' : dateTime(t.build.finished_at)],
    ];
    if (t.reason !== null) rows.push(['Why it failed', t.reason]);
    rows.push(['Image', t.image === null ? 'none yet: no build has succeeded' : `on ${t.image.base_image}${t.image.workdir === null ? '' : ` · WORKDIR ${t.image.workdir}`}${t.image.start_command === null ? '' : ` · starts ${t.image.start_command.join(' ')}`}`]);
    rows.push(['Use it', h('code', {}, `"image": "template:${t.name}"`)]);
    facts.replaceChildren(...rows.flatMap(([n, v]) => [h('dt', {}, n), h('dd', {}, v)]));
  }

  async function load(): Promise<void> {
    try {
      const t = await call<Template>('GET', apiPath(name));
      draw(t);
      log.textContent = '';
      following.textContent = t.state === 'building' ? 'following the build…' : '';
      const text = await streamGet(
        apiPath(t.template_id, `/builds/${t.build_id}/logs`),
        (event) => {
          if (event.event === 'log') {
            log.append((event.data as { text: string }).text);
            log.scrollTop = log.scrollHeight;
          } else if (event.event === 'end') {
            draw(event.data as Template);
            following.textContent = 'build ended';
          }
        },
        abort.signal,
      );
      if (text !== null) log.textContent = text;
    } catch (err) {
      if (!abort.signal.aborted) problem.show(err);
    }
  }

  const remove = h(
    'button',
    {
      type: 'button',
      class: 'danger',
      onclick: async () => {
        if (!confirm(`Delete the template ${name}? A build under way is stopped; profiles that name it can no longer start instances.`)) return;
        problem.clear();
        try {
          await call('DELETE', apiPath(name));
          go('/console/templates');
        } catch (err) {
          problem.show(err);
        }
      },
    },
    'Delete template',
  );

  main.append(
    h('p', { class: 'crumbs' }, h('a', { href: '/console/templates', 'data-nav': true }, 'Templates'), ` / ${name}`),
    heading,
    problem.el,
    h('section', { class: 'card', 'aria-label': 'Template' }, facts, h('div', { class: 'actions' }, remove)),
    h('section', { 'aria-label': 'Latest build' }, h('div', { class: 'title' }, h('h2', {}, 'Build log'), following), log),
  );
  void load();
  return () => abort.abort();
}

/** `rest` is what follows /console/templates/: empty for the list, else a template's name. */
export function templatesPage(main: HTMLElement, rest: string, go: Navigate): Stop {
  return rest === '' ? listPage(main, go) : templatePage(main, decodeURIComponent(rest), go);
}
