// The web console's organization and operator pages that need real sandboxes, in a real
// browser (Debian's Chromium, headless, driven by playwright-core): a template built from
// a Dockerfile typed into the page, its log followed while it builds until `ready`, a
// name the server refuses with its message shown, and delete; then, signed in with the
// operator token, the warm pools on the host page and the list of organizations, each
// linked to its usage and quotas; and an instance's page: its labels, its deadline and
// what ends it, and a keep-alive for a number of seconds. The screenshots written into docs/console/ here show
// these pages as they are.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type Browser, chromium, type Page } from 'playwright-core';
import { PACKAGE_ROOT } from '../../src/config.ts';
import { startTestApp, type TestApp, type TestOrg } from '../support/app.ts';
import { untilTrue } from '../support/until.ts';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOTS = join(PACKAGE_ROOT, 'docs', 'console');
const OPERATOR_TOKEN = 'operator-token-of-the-console-org-test-0123456';
const TEMPLATE = 'hello-tpl';
/** A build's sandbox, and a pooled instance, the first time their image is built, take long. */
const READY_TIMEOUT_MS = 300_000;

let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let base: string;
let browser: Browser;
let page: Page;
let pooledProfile: string;
let smallProfile: string;
/** What the pages reported that they should not have: script errors, CSP violations. */
const pageProblems: string[] = [];

const api = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown, headers = org.headers) =>
  t.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
const asOperator = { authorization: `Bearer ${OPERATOR_TOKEN}` };

function watch(p: Page): void {
  p.setDefaultTimeout(30_000);
  p.on('pageerror', (err) => pageProblems.push(`script error: ${err.message}`));
  p.on('console', (message) => {
    if (/Content.Security.Policy|Refused to/i.test(message.text())) pageProblems.push(message.text());
  });
}

before(async () => {
  t = await startTestApp({ gvisorPool: '10.212.0.128/25', config: { operatorToken: OPERATOR_TOKEN, warmPoolMaxInstances: 2 } });
  assert.ok('runtime' in t.services.runtime, 'the gVisor runtime is not available');
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  org = await t.newOrg('acme-console');
  other = await t.newOrg('other-console');
  smallProfile = await t.createProfile(org, { name: 'small', memory_mb: 256, disk_mb: 512, network: { egress: 'none' }, idle_timeout_s: 900, idle_action: 'pause', max_lifetime_s: 7200 });
  const made = await api('POST', `/api/profile/${smallProfile}/room/one`, { wait: true, metadata: { team: 'console' } });
  assert.equal(made.statusCode, 201, made.body);

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  watch(page);
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.goto(`${base}/console`);
  await page.getByLabel('API key').fill(org.apiKey);
  await page.getByLabel('API key').press('Enter');
  await page.getByRole('heading', { name: 'Instances' }).waitFor();
});

after(async () => {
  try {
    await browser?.close();
    for (const who of [org, other]) {
      if (!who) continue;
      const listed = await api('GET', '/api/instances?limit=50', undefined, who.headers);
      for (const i of (listed.json().instances ?? []) as { profile_id: string; room_id: string; state: string }[]) {
        if (!['stopped', 'failed'].includes(i.state)) await api('DELETE', `/api/profile/${i.profile_id}/room/${i.room_id}`, undefined, who.headers);
      }
    }
    // The pool empties as its profile goes.
    if (pooledProfile !== undefined) await api('DELETE', `/api/profiles/${pooledProfile}`);
    await t.closeLeavingNothing();
  } catch (err) {
    console.error(`console-org test: data directory ${t.dataDir}`);
    throw err;
  }
});

describe('templates in the console', () => {
  it('builds a template from a Dockerfile typed in, follows its log until ready, and deletes it', async () => {
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Templates' }).click();
    await page.getByRole('heading', { name: 'Templates', exact: true }).waitFor();
    const form = page.getByRole('form', { name: 'Build a template' });
    await form.getByLabel('Name').fill(TEMPLATE);
    await form.getByLabel('Dockerfile').fill('FROM debian:bookworm\nRUN echo hi > /tmp/x\n');
    await form.getByRole('button', { name: 'Build' }).click();
    await page.waitForURL(new RegExp(`/console/templates/${TEMPLATE}$`));

    await page.locator('.title .state[data-state="ready"]').waitFor({ timeout: READY_TIMEOUT_MS });
    const log = page.getByLabel('Build log');
    await log.getByText('step 1/1: RUN echo hi > /tmp/x').waitFor();
    await log.getByText(/built in [\d.]+ s: 1 step/).waitFor();
    // The page was following the build's stream when it ended, not reading a finished log.
    await page.getByRole('status').getByText('build ended').waitFor();
    const built = (await api('GET', `/api/templates/${TEMPLATE}`)).json();
    assert.equal(built.state, 'ready');
    await page.getByRole('region', { name: 'Template', exact: true }).getByText(built.template_id).waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'template.png') });

    // Another organization sees none of it.
    assert.deepEqual((await api('GET', '/api/templates', undefined, other.headers)).json().templates, []);

    await page.getByRole('link', { name: 'Templates', exact: true }).first().click();
    const row = page.getByRole('table', { name: 'Templates' }).locator(`tr[data-template="${TEMPLATE}"]`);
    await row.locator('.state[data-state="ready"]').waitFor();
    await row.getByText(/ready in [\d.]+ s · 1 step$/).waitFor();

    // A name the server refuses: its message is what the page shows.
    await form.getByLabel('Name').fill('Not A Name');
    await form.getByRole('button', { name: 'Build' }).click();
    await form.getByRole('alert').getByText(/name/).waitFor();
    assert.equal((await api('GET', '/api/templates')).json().templates.length, 1);

    page.once('dialog', (dialog) => void dialog.accept());
    await row.getByRole('button', { name: `Delete template ${TEMPLATE}` }).click();
    await row.waitFor({ state: 'detached' });
    assert.equal((await api('GET', `/api/templates/${TEMPLATE}`)).json().error, 'template_not_found');
  });
});

describe('the operator’s organizations and warm pools', () => {
  it('shows the warm pools on the host page and lists the organizations, each linked to its quotas', async () => {
    pooledProfile = await t.createProfile(org, { name: 'pooled', memory_mb: 256, disk_mb: 512, network: { egress: 'none' }, warm_pool: 1 });
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const operator = await context.newPage();
    watch(operator);
    try {
      await operator.goto(`${base}/console`);
      await operator.getByLabel('Sign in as the operator').check();
      await operator.getByLabel('Operator token', { exact: true }).fill(OPERATOR_TOKEN);
      await operator.getByLabel('Operator token', { exact: true }).press('Enter');
      await operator.getByRole('heading', { name: 'Host' }).waitFor();

      await untilTrue(
        'the warm pool to fill',
        async () => {
          const res = await t.app.inject({ method: 'GET', url: '/operator/capacity', headers: asOperator });
          return res.json().warm_pools.pools.some((p: { profile_id: string; ready: number }) => p.profile_id === pooledProfile && p.ready === 1);
        },
        { timeoutMs: READY_TIMEOUT_MS, everyMs: 500 },
      );
      const pool = operator.getByRole('table', { name: 'Warm pools' }).locator(`tr[data-profile-id="${pooledProfile}"]`);
      // The page polls: the pool's row shows it ready within a poll or two.
      await pool.locator('td').nth(3).getByText('1', { exact: true }).waitFor({ timeout: 15_000 });
      assert.deepEqual((await pool.locator('td').allTextContents()).slice(1), ['pooled', '1', '1', '0', '0']);
      await operator.getByRole('region', { name: 'Warm pools' }).screenshot({ path: join(SCREENSHOTS, 'operator-warm-pools.png') });

      await operator.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Organizations' }).click();
      const orgs = operator.getByRole('table', { name: 'Organizations' });
      const acme = orgs.locator(`tr[data-organization-id="${org.organizationId}"]`);
      await acme.waitFor();
      // Its instance in a room counts; the pooled one does not.
      assert.deepEqual((await acme.locator('td').allTextContents()).filter((_, i) => i !== 2), ['acme-console', org.organizationId.slice(0, 8), '1', '1']);
      assert.deepEqual((await orgs.locator(`tr[data-organization-id="${other.organizationId}"] td`).allTextContents()).filter((_, i) => i !== 2), ['other-console', other.organizationId.slice(0, 8), '0', '1']);
      await operator.screenshot({ path: join(SCREENSHOTS, 'operator-organizations.png') });

      await acme.getByRole('link', { name: 'acme-console' }).click();
      await operator.getByRole('heading', { name: `Organization ${org.organizationId}` }).waitFor();
      const usage = (await api('GET', '/api/usage')).json();
      const instances = operator.locator('tr[data-quota="instances"]');
      assert.deepEqual((await instances.locator('td').allTextContents()).slice(0, 2), [String(usage.quotas.instances.used), String(usage.quotas.instances.limit)]);
    } finally {
      await context.close();
    }
    assert.deepEqual(pageProblems, []);
  });
});

describe('an instance’s page', () => {
  it('shows its labels, its deadline and what ends it, and keeps it alive for a number of seconds', async () => {
    await page.goto(`${base}/console/profile/${smallProfile}/room/one`);
    const details = page.getByRole('region', { name: 'Instance' });
    await details.locator('.state[data-state="ready"]').waitFor();
    const fact = (name: string) => details.locator('dt', { hasText: new RegExp(`^${name}$`) }).locator('xpath=following-sibling::dd[1]');
    assert.equal(await fact('Labels').textContent(), 'team=console');
    assert.equal(await fact('Deadline').textContent(), 'none');
    assert.match((await fact('Timeout').textContent()) ?? '', /^none/);
    assert.equal(await fact('Idle limit').textContent(), '900 s without a request, then paused');
    assert.match((await fact('Lifetime').textContent()) ?? '', /\(at most 7200 s\)$/);
    assert.match((await fact('Resources').textContent()) ?? '', /^256 MB memory · 1 vCPU · 512 MB disk/);

    await page.getByLabel('Keep alive for (seconds)').fill('600');
    await page.getByRole('button', { name: 'Keep alive' }).click();
    await fact('Deadline').getByText(/\(in 10 min\)$/).waitFor();
    const kept = (await api('GET', `/api/profile/${smallProfile}/room/one`)).json();
    // The deadline moves; the instance's own timeout_s stays as its create left it.
    assert.equal(kept.timeout_s, null);
    const left = Date.parse(kept.expires_at) - Date.now();
    assert.ok(left > 500_000 && left <= 600_000, `deadline in ${left} ms`);
    assert.deepEqual(pageProblems, []);
  });
});
