// The web console's work pages in a real browser: Debian's Chromium, headless, driven by
// playwright-core, against a real server with real gVisor instances (a profile that
// keeps undo points). In order, as a person would use them: the file browser (list,
// view text and an image, download, upload, delete), the command history (output, exit
// code, files_changed opened in the browser, undo, and undo refused), snapshots and
// fork, the organization's pages (profiles, usage, audit trail, keys), the operator's
// pages (signed in with the operator token), and a burst of bad keys at sign-in refused
// with the message shown. test/host/console.test.ts covers
// signing in, the instances list, an instance's state, commands and the terminal. The
// screenshots written into docs/console/ here show these pages as they are. Past 400
// lines because the steps share one browser, one signed-in page and one instance, in order.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type Browser, chromium, type Page } from 'playwright-core';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOTS = join(PACKAGE_ROOT, 'docs', 'console');
const ROOM = 'work-room';
const FROM_SNAPSHOT_ROOM = 'from-snapshot';
const FORK_ROOM = 'forked';
/** A real instance's create, the first time its image is built, takes long. */
const READY_TIMEOUT_MS = 300_000;
/** An 8x8 red PNG. */
const OPERATOR_TOKEN = 'operator-token-of-the-console-browser-test-0123';
const PIXEL_PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEklEQVR4nGP4z8CAFWEXHbQSACj/P8Fu7N9hAAAAAElFTkSuQmCC';

let t: TestApp;
let org: TestOrg;
let base: string;
let profileId: string;
let browser: Browser;
let downloads: string;
let page: Page;
/** What the page reported that it should not have: script errors, CSP violations. */
const pageProblems: string[] = [];

const api = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: unknown, headers = org.headers) =>
  t.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
const room = (rest = '', id = ROOM) => `/api/profile/${profileId}/room/${id}${rest}`;
const fileText = async (path: string) => {
  const res = await api('GET', room(`/file/${path}`));
  return res.statusCode === 200 ? (res.json().content as string) : res.json().error;
};
const region = (name: string) => page.getByRole('region', { name, exact: true });

before(async () => {
  t = await startTestApp({ gvisorPool: '10.230.0.128/25', config: { operatorToken: OPERATOR_TOKEN } });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg();
  profileId = await t.createProfile(org, { name: 'work', memory_mb: 256, disk_mb: 512, keep_undo: true, network: { egress: 'none' } });
  const made = await api('POST', room(), { wait: true });
  assert.equal(made.statusCode, 201, made.body);
  const wrote = await api('POST', room('/command'), { command: `mkdir -p docs && printf 'seen in the browser' > docs/note.txt && echo ${PIXEL_PNG} | base64 -d > docs/pixel.png` });
  assert.equal(wrote.json().result?.exit_code, 0, wrote.body);

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  downloads = mkdtempSync(join(tmpdir(), 'roomkit-console-downloads-'));
  page = await browser.newPage({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
  page.setDefaultTimeout(30_000);
  page.on('pageerror', (err) => pageProblems.push(`script error: ${err.message}`));
  page.on('console', (message) => {
    if (/Content.Security.Policy|Refused to/i.test(message.text())) pageProblems.push(message.text());
  });
  mkdirSync(SCREENSHOTS, { recursive: true });

  await page.goto(`${base}/console`);
  await page.getByLabel('API key').fill(org.apiKey);
  await page.getByLabel('API key').press('Enter');
  await page.getByRole('heading', { name: 'Instances' }).waitFor();
});

after(async () => {
  try {
    await browser?.close();
    rmSync(downloads, { recursive: true, force: true });
    const listed = await api('GET', '/api/instances?limit=50');
    for (const i of (listed.json().instances ?? []) as { profile_id: string; room_id: string; state: string }[]) {
      if (!['stopped', 'failed'].includes(i.state)) await api('DELETE', `/api/profile/${i.profile_id}/room/${i.room_id}`);
    }
    const snapshots = await api('GET', '/api/snapshots');
    for (const s of (snapshots.json().snapshots ?? []) as { snapshot_id: string }[]) await api('DELETE', `/api/snapshots/${s.snapshot_id}`);
    await t.closeLeavingNothing();
  } catch (err) {
    console.error(`console-work test: data directory ${t.dataDir}`);
    throw err;
  }
});

describe('working in an instance from the console', () => {
  it('browses files: lists a directory, views text and an image, downloads, uploads and deletes', async () => {
    await page.goto(`${base}/console/profile/${profileId}/room/${ROOM}`);
    await page.locator('dl.facts .state[data-state="ready"]').waitFor();
    const files = region('Files');
    await files.getByRole('button', { name: 'docs/', exact: true }).click();
    await files.getByRole('button', { name: 'note.txt', exact: true }).click();
    await files.getByLabel('Content').getByText('seen in the browser').waitFor();

    await files.getByRole('button', { name: 'pixel.png', exact: true }).click();
    const image = files.locator('.viewer img');
    await image.waitFor();
    assert.match((await image.getAttribute('src')) ?? '', /^data:image\/png;base64,/);
    // Drawn: the browser decoded it to its 8 pixels' width.
    await page.waitForFunction("document.querySelector('.viewer img')?.naturalWidth === 8");

    const [download] = await Promise.all([page.waitForEvent('download'), files.getByRole('button', { name: 'Download note.txt' }).click()]);
    assert.equal(download.suggestedFilename(), 'note.txt');
    const saved = join(downloads, 'note.txt');
    await download.saveAs(saved);
    assert.equal(readFileSync(saved, 'utf8'), 'seen in the browser');

    await files.locator('#files-upload').setInputFiles({ name: 'uploaded.txt', mimeType: 'text/plain', buffer: Buffer.from('from the browser') });
    await files.getByRole('button', { name: 'uploaded.txt', exact: true }).waitFor();
    assert.equal(await fileText('docs/uploaded.txt'), 'from the browser');
    await files.getByRole('button', { name: 'pixel.png', exact: true }).click();
    await image.waitFor();
    await files.screenshot({ path: join(SCREENSHOTS, 'files.png') });

    page.once('dialog', (dialog) => void dialog.accept());
    await files.getByRole('button', { name: 'Delete uploaded.txt' }).click();
    await files.getByRole('button', { name: 'uploaded.txt', exact: true }).waitFor({ state: 'detached' });
    assert.equal(await fileText('docs/uploaded.txt'), 'file_not_found');
  });

  it('shows the command history with output, exit code and files, opens a file from it, and undoes a command', async () => {
    await page.getByRole('textbox', { name: /^Command/ }).fill("printf 'version two' > docs/note.txt; echo changed-it; exit 4");
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.locator('p.outcome[data-exit-code="4"]').waitFor();

    const history = region('Command history');
    const newest = history.locator('details.command-record').first();
    await newest.getByText(/exit code 4 · exited · \d+ ms · 1 file changed/).waitFor();
    await newest.locator('summary').click();
    await newest.getByLabel('Command output').getByText('changed-it').waitFor();
    await newest.getByRole('list', { name: 'Files changed' }).getByRole('button', { name: '/home/user/docs/note.txt' }).click();
    await region('Files').getByLabel('Content').getByText('version two').waitFor();
    await history.screenshot({ path: join(SCREENSHOTS, 'history.png') });

    await newest.getByRole('button', { name: 'Undo this command' }).click();
    await newest.getByText('Undone: 1 file put back').waitFor();
    assert.equal(await fileText('docs/note.txt'), 'seen in the browser');

    // A command that kept no undo point: the server's refusal is what the page shows.
    const plain = await api('POST', room('/command'), { command: 'echo no-undo > docs/other.txt', keep_undo: false });
    assert.equal(plain.statusCode, 200, plain.body);
    await history.getByRole('button', { name: 'Refresh history' }).click();
    const unkept = history.locator(`details[data-command-id="${plain.json().command_id}"]`);
    await unkept.locator('summary').click();
    await unkept.getByRole('button', { name: 'Undo this command' }).click();
    await unkept.getByRole('alert').getByText(/kept no undo point/).waitFor();
    assert.equal(await fileText('docs/other.txt'), 'no-undo\n', 'the refused undo changed nothing');
  });

  it('takes a snapshot, starts an instance from it, and forks the instance', async () => {
    const snapshots = region('Snapshots');
    await snapshots.getByLabel('Name').fill('console-snap');
    await snapshots.getByLabel('with memory and processes').uncheck();
    await snapshots.getByRole('button', { name: 'Take snapshot' }).click();
    const row = snapshots.getByRole('table', { name: 'Snapshots' }).getByRole('row').filter({ hasText: 'console-snap' });
    await row.getByText('files', { exact: true }).waitFor({ timeout: 60_000 });
    const taken = (await api('GET', '/api/snapshots')).json().snapshots as { snapshot_id: string; name: string; memory_kept: boolean }[];
    assert.deepEqual(
      taken.map((s) => [s.name, s.memory_kept]),
      [['console-snap', false]],
    );

    await snapshots.getByLabel('Fork into rooms').fill(FORK_ROOM);
    await snapshots.getByRole('button', { name: 'Fork', exact: true }).click();
    const forked = snapshots.getByRole('list', { name: 'Forked instances' });
    await forked.getByRole('link', { name: FORK_ROOM }).waitFor({ timeout: 180_000 });
    assert.equal(await forked.locator('[data-state="ready"]').count(), 1, await forked.innerText());
    assert.equal(await fileText(`docs/note.txt`), 'seen in the browser');
    const copy = await api('GET', room('/file/docs/note.txt', FORK_ROOM));
    assert.equal(copy.json().content, 'seen in the browser', 'the fork has the source’s files');
    await snapshots.screenshot({ path: join(SCREENSHOTS, 'snapshots.png') });

    await row.getByLabel('Room of the new instance').fill(FROM_SNAPSHOT_ROOM);
    await row.getByRole('button', { name: 'Start instance' }).click();
    await page.waitForURL(new RegExp(`/console/profile/${profileId}/room/${FROM_SNAPSHOT_ROOM}$`));
    await page.locator('dl.facts .state[data-state="ready"]').waitFor({ timeout: 180_000 });
    const started = await api('GET', room('', FROM_SNAPSHOT_ROOM));
    assert.equal(started.json().snapshot_id, taken[0]?.snapshot_id);
    assert.equal(await api('GET', room('/file/docs/other.txt', FROM_SNAPSHOT_ROOM)).then((r) => r.json().content), 'no-undo\n');

    // The organization's snapshots, where one is deleted.
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Snapshots' }).click();
    const listed = page.getByRole('table', { name: 'Snapshots' }).getByRole('row').filter({ hasText: 'console-snap' });
    page.once('dialog', (dialog) => void dialog.accept());
    await listed.getByRole('button', { name: 'Delete snapshot console-snap' }).click();
    await page.getByText('No snapshots.').waitFor();
    assert.equal((await api('GET', `/api/snapshots/${taken[0]?.snapshot_id}`)).json().error, 'snapshot_not_found');
  });
});

describe('the organization’s pages', () => {
  it('lists profiles, creates one from the schema’s form with its validation messages, and deletes it', async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Profiles' }).click();
    const table = page.getByRole('table', { name: 'Profiles' });
    await table.getByRole('link', { name: 'work', exact: true }).waitFor();
    assert.equal(await table.getByRole('link', { name: 'default', exact: true }).count(), 1);
    await page.getByRole('link', { name: 'New profile' }).click();
    const form = page.getByRole('form', { name: 'New profile' });
    // Every field of the create body, with its default.
    assert.equal(await form.getByLabel('memory_mb').inputValue(), '1024');
    assert.equal(await form.getByLabel('idle_action').inputValue(), 'pause');
    await form.getByLabel('name', { exact: true }).fill('made-in-console');
    await form.getByLabel('memory_mb').fill('64');
    await form.getByLabel('network.egress').selectOption('none');
    await form.getByRole('button', { name: 'Create profile' }).click();
    await form.locator('[data-field="memory_mb"] .field-error').getByText('memory_mb must be >= 128').waitFor();
    await page.getByRole('alert').filter({ hasText: 'memory_mb must be >= 128' }).first().waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'profile-new.png') });

    await form.getByLabel('memory_mb').fill('256');
    await form.getByRole('button', { name: 'Create profile' }).click();
    await page.getByRole('heading', { name: 'made-in-console' }).waitFor();
    const id = /\/console\/profiles\/([0-9a-f-]{36})$/.exec(page.url())?.[1];
    assert.ok(id, page.url());
    const made = (await api('GET', `/api/profiles/${id}`)).json();
    assert.equal(made.memory_mb, 256);
    assert.equal(made.network.egress, 'none');
    assert.equal(made.idle_action, 'pause', 'a field left at its default is the default');

    // Edited with the same form, holding the profile's values; only what changed is sent.
    await page.getByRole('link', { name: 'Edit' }).click();
    const edit = page.getByRole('form', { name: 'Edit profile' });
    assert.equal(await edit.getByLabel('memory_mb').inputValue(), '256');
    assert.equal(await edit.getByLabel('network.egress').inputValue(), 'none');
    await edit.getByLabel('vcpus').fill('99');
    await edit.getByRole('button', { name: 'Save changes' }).click();
    await edit.locator('[data-field="vcpus"] .field-error').getByText(/vcpus must be <= \d+/).waitFor();
    await edit.getByLabel('vcpus').fill('1');
    await edit.getByLabel('memory_mb').fill('384');
    await edit.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('heading', { name: 'made-in-console' }).waitFor();
    const edited = (await api('GET', `/api/profiles/${id}`)).json();
    assert.deepEqual([edited.memory_mb, edited.network.egress], [384, 'none']);

    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Delete profile' }).click();
    await page.waitForURL(/\/console\/profiles$/);
    assert.equal((await api('GET', `/api/profiles/${id}`)).json().error, 'profile_not_found');
  });

  it('shows usage against the quotas as the API does', async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Usage' }).click();
    const usage = (await api('GET', '/api/usage')).json();
    const instances = page.locator('tr[data-quota="instances"]');
    await instances.waitFor();
    const cells = await instances.locator('td').allTextContents();
    assert.deepEqual(cells.slice(0, 2), [String(usage.quotas.instances.used), String(usage.quotas.instances.limit)]);
    assert.equal(usage.quotas.instances.used, 3, 'the instance, the fork and the one from the snapshot');
    await page.screenshot({ path: join(SCREENSHOTS, 'usage.png') });
  });

  it('pauses and deletes several instances at once from the list', async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Instances' }).click();
    const table = page.getByRole('table', { name: 'Instances' });
    for (const name of [FORK_ROOM, FROM_SNAPSHOT_ROOM]) await page.getByLabel(`Select ${name}`, { exact: true }).check();
    await page.getByRole('button', { name: 'Pause selected' }).click();
    await page.getByText('2 of 2 paused.').waitFor({ timeout: 120_000 });
    for (const name of [FORK_ROOM, FROM_SNAPSHOT_ROOM]) await table.getByRole('row').filter({ hasText: name }).locator('[data-state="paused"]').waitFor();
    assert.equal(await table.getByRole('row').filter({ hasText: ROOM }).locator('[data-state="ready"]').count(), 1, 'the one not ticked is left alone');
    await page.screenshot({ path: join(SCREENSHOTS, 'instances-bulk.png') });

    for (const name of [FORK_ROOM, FROM_SNAPSHOT_ROOM]) await page.getByLabel(`Select ${name}`, { exact: true }).check();
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Delete selected' }).click();
    await page.getByText('2 of 2 deleted.').waitFor({ timeout: 120_000 });
    for (const name of [FORK_ROOM, FROM_SNAPSHOT_ROOM]) assert.equal((await api('GET', room('', name))).json().error, 'instance_not_found');
    assert.equal((await api('GET', room())).json().state, 'ready');
  });

  it('shows the audit trail filtered and paged, the sign-in in it', async () => {
    await page.goto(`${base}/console/audit?limit=2`);
    const table = page.getByRole('table', { name: 'Audit events' });
    await table.locator('tbody tr[data-event-id]').first().waitFor();
    const first = await table.locator('tbody tr').first().getAttribute('data-event-id');
    await page.getByRole('button', { name: 'Older' }).click();
    await page.getByRole('status').getByText('page 2').waitFor();
    assert.notEqual(await table.locator('tbody tr').first().getAttribute('data-event-id'), first);
    await page.getByRole('button', { name: 'Newer' }).click();
    await page.getByRole('status').getByText('page 1').waitFor();
    assert.equal(await table.locator('tbody tr').first().getAttribute('data-event-id'), first);

    await page.getByLabel('Action').selectOption('command.revert');
    await table.locator('tbody tr[data-action="command.revert"]').nth(1).waitFor();
    assert.match(page.url(), /action=command.revert/);
    const decisions = await table.locator('tbody tr').allTextContents();
    assert.ok(decisions.some((r) => /allowed/.test(r)) && decisions.some((r) => /no_undo_point/.test(r)), decisions.join(' | '));
    await page.getByLabel('Action').selectOption('console.sign_in');
    await table.locator('tbody tr[data-action="console.sign_in"]').first().waitFor();
    await page.goto(`${base}/console/audit`);
    await table.locator('tbody tr[data-event-id]').first().waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'audit.png') });
  });

  it('creates a key showing it once, and revokes it', async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Keys' }).click();
    await page.getByRole('form', { name: 'Create a key' }).getByLabel('Name').fill('made-in-console');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = await page.getByLabel('The new key').inputValue();
    assert.match(secret, /^rk_(live|test)_[0-9a-f]{32}$/);
    const row = page.getByRole('table', { name: 'API keys' }).getByRole('row').filter({ hasText: 'made-in-console' });
    await row.waitFor();
    assert.equal((await api('GET', '/api/keys', undefined, { authorization: `Bearer ${secret}` })).statusCode, 200, 'the key works');
    await page.getByRole('button', { name: 'Done' }).click();
    assert.equal(await page.getByText(secret).count(), 0, 'shown once: gone once dismissed');
    assert.equal(await page.locator(`input[value="${secret}"]`).count(), 0);
    await page.screenshot({ path: join(SCREENSHOTS, 'keys.png') });

    page.once('dialog', (dialog) => void dialog.accept());
    await row.getByRole('button', { name: 'Revoke made-in-console' }).click();
    await row.waitFor({ state: 'detached' });
    assert.equal((await api('GET', '/api/keys', undefined, { authorization: `Bearer ${secret}` })).statusCode, 401, 'the key is revoked');
    assert.deepEqual(pageProblems, []);
  });
});

describe('the operator’s pages', () => {
  it('signs in with the operator token and shows the host, the nodes and an organization’s quotas, changed there', async () => {
    // A browser context of its own: its cookie is the operator's, the page above keeps the key's.
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const operator = await context.newPage();
    operator.setDefaultTimeout(30_000);
    try {
      await operator.goto(`${base}/console`);
      await operator.getByLabel('Sign in as the operator').check();
      await operator.getByLabel('Operator token', { exact: true }).fill(OPERATOR_TOKEN);
      await operator.getByLabel('Operator token', { exact: true }).press('Enter');
      await operator.getByRole('heading', { name: 'Host' }).waitFor();
      const capacity = (await t.app.inject({ method: 'GET', url: '/operator/capacity', headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } })).json();
      await operator.getByRole('region', { name: 'Memory' }).locator('[data-figure="Admission limit"]').getByText(`${capacity.memory.limit_mb} MB`).waitFor();
      await operator.screenshot({ path: join(SCREENSHOTS, 'operator-host.png') });

      await operator.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Nodes' }).click();
      await operator.getByRole('alert').getByText(/SQLite, so it is the only node/).waitFor();

      await operator.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Organizations' }).click();
      await operator.getByLabel('Organization', { exact: true }).fill(org.organizationId);
      await operator.getByRole('button', { name: 'Show' }).click();
      const instances = operator.locator('tr[data-quota="instances"]');
      const usage = (await api('GET', '/api/usage')).json();
      assert.deepEqual((await instances.locator('td').allTextContents()).slice(0, 3), [String(usage.quotas.instances.used), String(usage.quotas.instances.limit), 'default']);
      await operator.getByLabel('Quota instances').fill('4');
      await operator.getByRole('button', { name: 'Save quotas' }).click();
      await instances.getByText('operator', { exact: true }).waitFor();
      assert.deepEqual((await api('GET', '/api/usage')).json().quotas.instances, { ...usage.quotas.instances, limit: 4, source: 'organization' });
      await operator.screenshot({ path: join(SCREENSHOTS, 'operator-orgs.png') });
      await operator.getByLabel('Quota instances').fill('');
      await operator.getByRole('button', { name: 'Save quotas' }).click();
      await instances.getByText('default', { exact: true }).waitFor();
      assert.equal((await api('GET', '/api/usage')).json().quotas.instances.source, 'default');

      // The operator's session reaches no organization.
      const cookie = `roomkit_session=${(await context.cookies(base)).find((c) => c.name === 'roomkit_session')?.value}`;
      assert.match(cookie, /=rko_/);
      const csrf = (await fetch(`${base}/console/session`, { headers: { cookie } }).then((r) => r.json())) as { csrf_token: string };
      const refused = await fetch(`${base}/api/instances`, { headers: { cookie, 'x-roomkit-csrf': csrf.csrf_token } });
      assert.equal(refused.status, 401);
    } finally {
      await context.close();
    }
  });
});

describe('signing in', () => {
  it('records the sign-in in the audit trail, under the key', async () => {
    const res = await api('GET', '/api/audit?action=console.sign_in');
    const events = res.json().events as { key_id: string; route: string }[];
    assert.ok(events.length >= 1, res.body);
    assert.equal(events[0]?.route, '/console/session');
  });

  it('shows the 429 of a burst of bad keys as a message, a valid key refused with them', async () => {
    // A server of its own: its throttle refuses this address for a minute, which the
    // server above must not.
    const throttled = await startTestApp({ config: { authFailureBurst: 3, authFailureWindowS: 60 } });
    const own = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    try {
      await throttled.app.listen({ host: '127.0.0.1', port: 0 });
      const there = await throttled.newOrg();
      await own.goto(`http://127.0.0.1:${(throttled.app.server.address() as AddressInfo).port}/console`);
      await own.waitForURL(/\/console\/sign-in/);
      for (let i = 0; i < 3; i++) {
        await own.getByLabel('API key').fill(`rk_live_${String(i).repeat(32)}`);
        await own.getByLabel('API key').press('Enter');
        await own.getByRole('alert').getByText(/not valid/).waitFor();
        await own.getByRole('alert').evaluate((el) => (el.textContent = ''));
      }
      await own.getByLabel('API key').fill(there.apiKey);
      await own.getByLabel('API key').press('Enter');
      await own.getByRole('alert').getByText(/rejected API key within 60 s .*refused for \d+ s more/).waitFor();
      await own.screenshot({ path: join(SCREENSHOTS, 'sign-in-throttled.png') });
      assert.equal(new URL(own.url()).pathname, '/console/sign-in');
    } finally {
      await own.close();
      await throttled.close();
    }
  });
});
