// The web console's entry: finds out whether this browser is signed in, draws the shell
// (header, navigation, sign-out) and routes each /console path to its view. A view draws
// into the main region and returns what stops it (its polling, its terminal).
//
// Paths: /console and /console/instances (the list, its filters in the query),
// /console/profile/{profile_id}/room/{room_id} (an instance, addressed as the REST API
// addresses it), the organization's pages (/console/profiles[/new|/{id}[/edit]],
// /templates[/{name}], /snapshots,
// /usage, /audit, /keys), /console/sign-in; signed in as the operator, the operator's
// pages instead (/console/operator, /console/operator/nodes, /console/operator/orgs).
import './console.css';
import { currentSession, onSignedOut, type Session, signOut } from './api.ts';
import { auditPage } from './audit-page.ts';
import { errorBox, h } from './dom.ts';
import { instancePage } from './instance-page.ts';
import { instancesPage } from './instances-page.ts';
import { keysPage } from './keys-page.ts';
import { operatorPage } from './operator-pages.ts';
import { profilesPage } from './profiles-page.ts';
import { signInPage } from './sign-in.ts';
import { snapshotsPage } from './snapshots.ts';
import { templatesPage } from './templates-page.ts';
import { usagePage } from './usage-page.ts';

export type Stop = () => void;
export type Navigate = (path: string) => void;

const root = document.getElementById('app') as HTMLElement;
let session: Session | null = null;
let stopView: Stop = () => {};
/** The path and query drawn: a jump to a section of the page (#…) changes neither. */
let drawn = '';

function navigate(path: string, replace = false): void {
  if (replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  render();
}

/** Links within the console change the view without loading the page again. */
document.addEventListener('click', (event) => {
  const link = (event.target as Element | null)?.closest?.('a[data-nav]');
  if (!(link instanceof HTMLAnchorElement) || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
  event.preventDefault();
  navigate(link.pathname + link.search);
});
window.addEventListener('popstate', () => {
  if (location.pathname + location.search !== drawn) render();
});

onSignedOut(() => {
  session = null;
  const back = location.pathname + location.search;
  history.replaceState(null, '', `/console/sign-in?next=${encodeURIComponent(back)}`);
  render('Your session ended (signed out, expired, or its API key was revoked): sign in again.');
});

const ORGANIZATION_NAV = [
  ['/console/instances', 'Instances'],
  ['/console/profiles', 'Profiles'],
  ['/console/templates', 'Templates'],
  ['/console/snapshots', 'Snapshots'],
  ['/console/usage', 'Usage'],
  ['/console/audit', 'Audit'],
  ['/console/keys', 'Keys'],
] as const;
const OPERATOR_NAV = [
  ['/console/operator', 'Host'],
  ['/console/operator/nodes', 'Nodes'],
  ['/console/operator/orgs', 'Organizations'],
] as const;

function shell(current: Session): HTMLElement {
  const problem = errorBox();
  const out = h(
    'button',
    {
      type: 'button',
      class: 'secondary',
      onclick: async () => {
        try {
          await signOut();
          session = null;
          navigate('/console/sign-in', true);
        } catch (err) {
          problem.show(err);
        }
      },
    },
    'Sign out',
  );
  return h(
    'header',
    { class: 'top' },
    h('a', { href: '/console', 'data-nav': true, class: 'brand' }, 'roomkit'),
    h(
      'nav',
      { 'aria-label': 'Console' },
      ...(current.kind === 'operator' ? OPERATOR_NAV : ORGANIZATION_NAV).map(([href, label]) =>
        h('a', { href, 'data-nav': true, 'aria-current': location.pathname === href || (href !== '/console/operator' && location.pathname.startsWith(href)) ? 'page' : undefined }, label),
      ),
    ),
    current.kind === 'operator'
      ? h('span', { class: 'who' }, 'operator')
      : h('span', { class: 'who', title: `key ${current.key_id}` }, `organization ${current.organization_id.slice(0, 8)} · ${current.env} key`),
    out,
    problem.el,
  );
}

function route(path: string, main: HTMLElement, go: Navigate): Stop {
  // The operator's session reaches the operator API only: its pages are the only ones drawn.
  if (session?.kind === 'operator') {
    const stop = operatorPage(main, path);
    if (stop !== undefined) return stop;
    main.append(h('h1', {}, 'Not found'), h('p', {}, 'Signed in as the operator, the console shows the host, the nodes and organizations\' quotas. ', h('a', { href: '/console/operator', 'data-nav': true }, 'See the host')));
    return () => {};
  }
  const room = /^\/console\/profile\/([^/]+)\/room\/([^/]+)\/?$/.exec(path);
  if (room) return instancePage(main, decodeURIComponent(room[1] as string), decodeURIComponent(room[2] as string), go);
  if (path === '/console' || path === '/console/' || path === '/console/instances') return instancesPage(main, go);
  const profiles = /^\/console\/profiles(?:\/([^/]+(?:\/edit)?))?\/?$/.exec(path);
  if (profiles) return profilesPage(main, profiles[1] ?? '', go);
  const templates = /^\/console\/templates(?:\/([^/]+))?\/?$/.exec(path);
  if (templates) return templatesPage(main, templates[1] ?? '', go);
  if (path === '/console/snapshots') return snapshotsPage(main, go);
  if (path === '/console/usage') return usagePage(main);
  if (path === '/console/audit') return auditPage(main);
  if (path === '/console/keys' && session?.kind === 'key') return keysPage(main, session);
  main.append(h('h1', {}, 'Not found'), h('p', {}, 'This console page does not exist. ', h('a', { href: '/console', 'data-nav': true }, 'See the instances')));
  return () => {};
}

function render(notice?: string): void {
  drawn = location.pathname + location.search;
  stopView();
  stopView = () => {};
  root.replaceChildren();
  if (session === null) {
    if (location.pathname !== '/console/sign-in') {
      history.replaceState(null, '', `/console/sign-in?next=${encodeURIComponent(location.pathname + location.search)}`);
    }
    const next = new URLSearchParams(location.search).get('next');
    const main = h('main', { class: 'narrow' });
    root.append(main);
    signInPage(main, notice, (signed) => {
      session = signed;
      navigate(next !== null && next.startsWith('/console') && !next.startsWith('/console/sign-in') ? next : '/console', true);
    });
    return;
  }
  if (location.pathname === '/console/sign-in') history.replaceState(null, '', '/console');
  const main = h('main', { id: 'main' });
  root.append(shell(session), main);
  stopView = route(location.pathname, main, (path) => navigate(path));
}

async function start(): Promise<void> {
  try {
    session = await currentSession();
  } catch {
    session = null;
  }
  render();
}

void start();
