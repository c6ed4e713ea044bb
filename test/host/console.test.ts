// The web console in a real browser: Debian's Chromium, headless, driven by
// playwright-core, against a real server listening on a port with real gVisor instances.
// One browser and one instance serve the tests in order, as a person would use them:
// sign in, create an instance and watch it get ready, run a command, use the terminal,
// pause and resume, and be signed out when the key is revoked. The screenshots in
// docs/console/ are written here, so they show the console as it is.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOTS = join(PACKAGE_ROOT, 'docs', 'console');
const ROOM = 'console-room';
const OTHER_ROOM = 'other-org-room';
/** A real instance's create, the first time its image is built, takes long. */
const READY_TIMEOUT_MS = 300_000;

let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let base: string;
let browserKey: { key: string; id: string };
let profileId: string;
let userDataDir: string;
let context: BrowserContext;
let page: Page;
/** What the page reported that it should not have: script errors, CSP violations. */
const pageProblems: string[] = [];

before(async () => {
  t = await startTestApp({ gvisorPool: '10.230.0.0/25' });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg();
  other = await t.newOrg();
  profileId = await t.createProfile(org, { name: 'console', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' } });
  const otherProfile = await t.createProfile(other, { name: 'console', memory_mb: 512, disk_mb: 1024, network: { egress: 'none' } });
  const made = await t.app.inject({ method: 'POST', url: `/api/profile/${otherProfile}/room/${OTHER_ROOM}`, headers: other.headers, payload: { wait: false } });
  assert.ok([201, 202].includes(made.statusCode), made.body);
  // The browser signs in with a key of its own, revoked by the last test.
  const key = await t.app.inject({ method: 'POST', url: '/api/keys', headers: org.headers, payload: { name: 'browser' } });
  browserKey = { key: key.json().api_key, id: key.json().key_id };

  assert.ok(existsSync(CHROMIUM), `no ${CHROMIUM}: apt-get install chromium (scripts/setup --for-tests does as root)`);
  userDataDir = mkdtempSync(join(tmpdir(), 'roomkit-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(30_000);
  page.on('pageerror', (err) => pageProblems.push(`script error: ${err.message}`));
  page.on('console', (message) => {
    if (/Content.Security.Policy|Refused to/i.test(message.text())) pageProblems.push(message.text());
  });
  mkdirSync(SCREENSHOTS, { recursive: true });
});

after(async () => {
  try {
    await context?.close();
    rmSync(userDataDir, { recursive: true, force: true });
    for (const [who, room, profile] of [
      [org, ROOM, profileId],
      [other, OTHER_ROOM, undefined],
    ] as const) {
      const listed = await t.app.inject({ method: 'GET', url: '/api/instances?limit=50', headers: who.headers });
      for (const i of (listed.json().instances ?? []) as { profile_id: string; room_id: string; state: string }[]) {
        if (i.room_id === room && (profile === undefined || i.profile_id === profile) && !['stopped', 'failed'].includes(i.state)) {
          await t.app.inject({ method: 'DELETE', url: `/api/profile/${i.profile_id}/room/${i.room_id}`, headers: who.headers });
        }
      }
    }
    await t.closeLeavingNothing();
  } catch (err) {
    console.error(`console test: data directory ${t.dataDir}`);
    throw err;
  }
});

const stateOnPage = () => page.locator('dl.facts .state').first();

describe('the console in a browser', () => {
  it('serves its page with a strict CSP, and refuses a session request without the CSRF token', async () => {
    const res = await fetch(`${base}/console`);
    assert.equal(res.status, 200);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /(^|; )default-src 'self'(;|$)/);
    assert.match(csp, /(^|; )script-src 'self'(;|$)/);
    assert.match(csp, /(^|; )frame-ancestors 'none'(;|$)/);
    assert.match(csp, new RegExp(`connect-src 'self' ws://${new URL(base).host} wss://${new URL(base).host}`));
    const html = await res.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
    assert.doesNotMatch(html, /https?:\/\//, 'nothing from another host');

    const signIn = await fetch(`${base}/console/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ api_key: org.apiKey }) });
    assert.equal(signIn.status, 201);
    const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0] as string;
    const { csrf_token } = (await signIn.json()) as { csrf_token: string };
    const refused = await fetch(`${base}/api/profile/${profileId}/room/csrf-room`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: '{}' });
    assert.equal(refused.status, 403);
    assert.equal(((await refused.json()) as { error: string }).error, 'invalid_csrf_token');
    const listed = await fetch(`${base}/api/instances`, { headers: { cookie, 'x-roomkit-csrf': csrf_token } });
    assert.equal(listed.status, 200, 'the same cookie with its token works');
    const room = await t.app.inject({ method: 'GET', url: `/api/profile/${profileId}/room/csrf-room`, headers: org.headers });
    assert.equal(room.json().error, 'instance_not_found', 'the refused create made nothing');
  });

  it('signs in with a key and shows the list, without another organization’s instance', async () => {
    await page.goto(`${base}/console`);
    await page.waitForURL(/\/console\/sign-in/);
    await page.getByLabel('API key').fill('rk_live_' + '0'.repeat(32));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').getByText(/not valid/).waitFor();
    // By keyboard alone: the key, then Enter.
    await page.getByLabel('API key').fill(browserKey.key);
    await page.getByLabel('API key').press('Enter');
    await page.getByRole('heading', { name: 'Instances' }).waitFor();
    await page.getByRole('status').getByText(/^updated /).waitFor();
    assert.equal(await page.getByRole('table', { name: 'Instances' }).getByText('No instances match.').count(), 1);
    const cookies = await context.cookies(base);
    const session = cookies.find((c) => c.name === 'roomkit_session');
    assert.ok(session?.httpOnly && session.sameSite === 'Strict', JSON.stringify(cookies));
    assert.equal(await page.evaluate('document.cookie'), '', 'no script of the page can read the session');
  });

  it('creates an instance and shows it reach ready, with its timeline', async () => {
    await page.getByText('Create an instance').click();
    await page.getByRole('form', { name: 'Create an instance' }).getByLabel('Profile').selectOption({ label: 'console' });
    await page.getByRole('form', { name: 'Create an instance' }).getByLabel('Room').fill(ROOM);
    await page.getByRole('button', { name: 'Create instance' }).click();
    await page.waitForURL(new RegExp(`/console/profile/${profileId}/room/${ROOM}$`));
    await page.getByRole('heading', { name: `Room ${ROOM}` }).waitFor();
    await page.locator('dl.facts .state[data-state="ready"]').waitFor({ timeout: READY_TIMEOUT_MS });
    const steps = await page.getByRole('list', { name: 'Timeline' }).locator('li').allTextContents();
    assert.ok(steps.length >= 7, steps.join(' | '));
    assert.match(steps[0] as string, /\+0\.00 s\s*active/);
    assert.match(steps.at(-1) as string, /ready/);

    await page.goto(`${base}/console/instances`);
    const row = page.getByRole('table', { name: 'Instances' }).getByRole('row').filter({ hasText: ROOM });
    await row.getByText('ready').waitFor();
    assert.equal(await page.getByText(OTHER_ROOM).count(), 0, 'another organization’s instance is not listed');
    await page.screenshot({ path: join(SCREENSHOTS, 'instances.png') });
  });

  it('filters the list by state and label, and keeps the filter in the address', async () => {
    await page.getByLabel('State').selectOption('paused');
    await page.getByText('No instances match.').waitFor();
    assert.match(page.url(), /state=paused/);
    await page.getByLabel('State').selectOption('ready');
    await page.getByRole('link', { name: ROOM }).waitFor();
    await page.getByLabel('State').selectOption('');
    await page.getByLabel('Labels').fill('team=nobody');
    await page.getByLabel('Labels').press('Enter');
    await page.getByText('No instances match.').waitFor();
    assert.match(page.url(), /label=team%3Dnobody/);
    await page.getByLabel('Labels').fill('');
    await page.getByLabel('Labels').press('Enter');
    await page.getByRole('link', { name: ROOM }).waitFor();
  });

  it('runs a command and shows its output, exit code and changed files', async () => {
    await page.getByRole('link', { name: ROOM }).click();
    await page.locator('dl.facts .state[data-state="ready"]').waitFor();
    // The output shows as it is printed, before the command ends.
    await page.getByRole('textbox', { name: /^Command/ }).fill('echo first-part; sleep 3; echo second-part');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.getByLabel('Output', { exact: true }).getByText('first-part').waitFor();
    assert.equal(await page.getByText('running…').count(), 1, 'still running when its first line shows');
    assert.doesNotMatch((await page.getByLabel('Output', { exact: true }).textContent()) ?? '', /second-part/);
    await page.locator('p.outcome[data-exit-code="0"]').waitFor();
    assert.match((await page.getByLabel('Output', { exact: true }).textContent()) ?? '', /first-part\nsecond-part/);
    await page.getByRole('textbox', { name: /^Command/ }).fill('echo hello-from-console; printf "written by the console" > note.txt; exit 3');
    await page.getByRole('textbox', { name: /^Command/ }).press('Enter');
    await page.locator('p.outcome[data-exit-code="3"]').waitFor();
    assert.match((await page.getByLabel('Output', { exact: true }).textContent()) ?? '', /hello-from-console/);
    const file = page.getByRole('list', { name: 'Files changed' }).getByRole('link', { name: '/home/user/note.txt' });
    await file.waitFor();
    const href = await file.getAttribute('href');
    assert.ok(href);
    const content = await fetch(new URL(href, base));
    assert.equal(await content.text(), 'written by the console');
    await page.screenshot({ path: join(SCREENSHOTS, 'instance.png'), fullPage: true });
  });

  it('opens a terminal, types into it and reads the answer', async () => {
    await page.getByRole('button', { name: 'Open terminal' }).click();
    const terminal = page.getByRole('region', { name: 'Terminal' });
    await terminal.getByRole('status').getByText('open', { exact: true }).waitFor();
    // Typed before the shell's first prompt, the line would be echoed twice.
    await terminal.locator('.xterm-rows', { hasText: ':~$' }).waitFor();
    await terminal.locator('.xterm').click();
    await page.keyboard.type('echo $((6 * 7))-answer\n');
    await page.locator('.xterm-rows', { hasText: '42-answer' }).waitFor({ timeout: 20_000 });
    await page.screenshot({ path: join(SCREENSHOTS, 'terminal.png'), fullPage: true });
    await page.getByRole('button', { name: 'Close terminal' }).click();
  });

  it('pauses and resumes the instance', async () => {
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.locator('dl.facts .state[data-state="paused"]').waitFor({ timeout: 120_000 });
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.locator('dl.facts .state[data-state="ready"]').waitFor({ timeout: 120_000 });
    const steps = await page.getByRole('list', { name: 'Timeline' }).locator('li').allTextContents();
    assert.ok(steps.some((s) => /paused/.test(s)) && steps.some((s) => /resum/.test(s)), steps.join(' | '));
  });

  it('is readable on a narrow window', async () => {
    await page.setViewportSize({ width: 400, height: 800 });
    assert.equal(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth'), true, 'nothing is wider than the window');
    await page.screenshot({ path: join(SCREENSHOTS, 'instance-narrow.png') });
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it('deletes the instance, and from the list shows it as it ended', async () => {
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    await page.waitForURL(/\/console\/instances$/);
    const row = page.getByRole('table', { name: 'Instances' }).getByRole('row').filter({ hasText: ROOM });
    await row.locator('[data-state="stopped"]').waitFor({ timeout: 120_000 });
    await row.getByRole('link', { name: ROOM }).click();
    await page.getByText('This instance of the room has ended (stopped).').waitFor();
    const steps = await page.getByRole('list', { name: 'Timeline' }).locator('li').allTextContents();
    assert.match(steps.at(-1) as string, /stopped/);
    assert.ok(steps.some((s) => /delet/i.test(s)), `the timeline says why it ended: ${steps.join(' | ')}`);
    assert.equal(await page.getByRole('button', { name: 'Run' }).isVisible(), false, 'no work goes to an ended instance');
  });

  it('never shows another organization’s instance, even by its address', async () => {
    const theirs = await t.app.inject({ method: 'GET', url: '/api/instances', headers: other.headers });
    const instance = (theirs.json().instances as { profile_id: string; room_id: string }[])[0];
    assert.ok(instance);
    await page.goto(`${base}/console/profile/${instance.profile_id}/room/${instance.room_id}`);
    await page.getByText(/profile .* not found|no profile/i).first().waitFor();
    assert.equal(await page.locator('dl.facts').count(), 0);
  });

  it('signs out the browser when its key is revoked', async () => {
    await page.goto(`${base}/console/instances`);
    await page.getByRole('link', { name: ROOM }).waitFor();
    const revoked = await t.app.inject({ method: 'DELETE', url: `/api/keys/${browserKey.id}`, headers: org.headers });
    assert.equal(revoked.statusCode, 204, revoked.body);
    await page.waitForURL(/\/console\/sign-in/, { timeout: 15_000 });
    await page.getByText(/Your session ended/).waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'sign-in.png') });
    assert.deepEqual(pageProblems, []);
  });
});
