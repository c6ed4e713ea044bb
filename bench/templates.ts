// Templates through the HTTP API, beside floors measured in the same run:
// - a build of a 5-step Dockerfile (ENV, WORKDIR, COPY of a 10 MB file, two RUNs),
//   beside the same steps done by hand in an instance of a plain profile (a cold
//   create, the file written, the commands run);
// - a rebuild of it unchanged (every step cached), beside a GET of the template (the
//   API's round trip);
// - a create from the template, beside a cold create from debian:bookworm.
// The builds reach no network (this host's sandboxes have no internet), so the issue's
// `apt-get install python3-numpy` step is a RUN of local work instead.
//
//   npm run bench:templates      (as root; ROOMKIT_BENCH_RUNS=5 by default)
import { randomBytes } from 'node:crypto';
import { startBenchService } from './setup.ts';
import { summary, timed } from './stats.ts';

const RUNS = Number(process.env.ROOMKIT_BENCH_RUNS ?? 5);

const bench = await startBenchService('10.211.0.0/25');
const { base, headers, services, organizationId } = bench;

async function call(method: string, url: string, body: unknown, expectStatus: number): Promise<Record<string, any>> {
  const res = await fetch(url, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const answer = (await res.json()) as Record<string, any>;
  if (res.status !== expectStatus) throw new Error(`${method} ${url} answered ${res.status}: ${JSON.stringify(answer)}`);
  return answer;
}

/** The template once its build has ended (ready, or an Error). */
async function settled(name: string): Promise<Record<string, any>> {
  for (;;) {
    const template = await call('GET', `${base}/api/templates/${name}`, undefined, 200);
    if (template.state === 'ready') return template;
    if (template.state === 'failed') throw new Error(`template ${name} failed: ${template.reason}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const STEPS = [
  'ENV APP_HOME=/srv/app',
  'WORKDIR /srv/app',
  'COPY data.bin ./',
  'RUN sha256sum data.bin > data.sha256',
  'RUN python3 -c "import json; json.dump({\\"ok\\": True}, open(\\"built.json\\", \\"w\\"))"',
];
const DOCKERFILE = `FROM debian:bookworm\n${STEPS.join('\n')}\n`;

try {
  await services.quotas.setOverrides(organizationId, { instances: 100, memory_mb: 1_000_000, vcpus: 1000, disk_mb: 1_000_000 });
  const data = randomBytes(10 * 1024 * 1024);
  const files = { 'data.bin': data.toString('base64') };
  const plain = await call('POST', `${base}/api/profiles`, { name: 'plain', memory_mb: 512, disk_mb: 4096, network: { egress: 'none' }, idle_timeout_s: 0 }, 201);
  console.log(`roomkit templates benchmark: ${RUNS} runs each, cached Debian image, a 5-step Dockerfile with a COPY of 10 MB\n`);
  // One create first, which builds or finds the Debian image both sides use.
  await call('POST', `${base}/api/profile/${plain.profile_id}/room/warm-up`, {}, 201);
  await call('DELETE', `${base}/api/profile/${plain.profile_id}/room/warm-up`, undefined, 200);

  // Each run a new template (a first line of its own), so that no step is cached.
  const builds = await timed(RUNS, async (i) => {
    await call('POST', `${base}/api/templates`, { name: `cold-${i}`, dockerfile: DOCKERFILE.replace('ENV APP_HOME=/srv/app', `ENV APP_HOME=/srv/app RUN_NO=${i}`), files }, 202);
    await settled(`cold-${i}`);
  });
  const byHand = await timed(RUNS, async (i) => {
    const room = `${base}/api/profile/${plain.profile_id}/room/by-hand-${i}`;
    await call('POST', room, {}, 201);
    await call('POST', `${room}/command`, { command: 'sudo mkdir -p /srv/app && sudo chown user /srv/app' }, 200);
    const res = await fetch(`${room}/file/srv/app/data.bin`, { method: 'PUT', headers: { authorization: headers.authorization ?? '', 'content-type': 'application/octet-stream' }, body: data });
    if (!res.ok) throw new Error(`the file write answered ${res.status}`);
    await call('POST', `${room}/command`, { command: 'cd /srv/app && sha256sum data.bin > data.sha256', cwd: '/srv/app' }, 200);
    await call('POST', `${room}/command`, { command: 'python3 -c "import json; json.dump({\\"ok\\": True}, open(\\"/srv/app/built.json\\", \\"w\\"))"' }, 200);
    await call('DELETE', room, undefined, 200);
  });
  console.log('a build of the 5 steps, none cached');
  console.log(`  POST /api/templates until ready         ${summary(builds)}`);
  console.log(`  floor: the steps by hand in an instance ${summary(byHand)}\n`);

  await call('POST', `${base}/api/templates`, { name: 'app', dockerfile: DOCKERFILE, files }, 202);
  await settled('app');
  const rebuilds = await timed(RUNS, async () => {
    await call('POST', `${base}/api/templates`, { name: 'app', dockerfile: DOCKERFILE, files }, 202);
    const template = await settled('app');
    if (template.build.cached_steps !== template.build.steps) throw new Error(`a rebuild ran steps: ${JSON.stringify(template.build)}`);
  });
  const gets = await timed(RUNS, async () => void (await call('GET', `${base}/api/templates/app`, undefined, 200)));
  console.log('a rebuild of the same Dockerfile and files (target: 1 s)');
  console.log(`  POST /api/templates until ready         ${summary(rebuilds)}`);
  console.log(`  floor: GET /api/templates/app           ${summary(gets)}\n`);

  const fromTemplate = await call('POST', `${base}/api/profiles`, { name: 'of-app', image: 'template:app', memory_mb: 512, network: { egress: 'none' }, idle_timeout_s: 0 }, 201);
  const createOf = (profileId: string, prefix: string) =>
    timed(RUNS, async (i) => {
      const room = `${base}/api/profile/${profileId}/room/${prefix}-${i}`;
      const created = await call('POST', room, {}, 201);
      if (created.state !== 'ready') throw new Error(`a create ended ${created.state}`);
      await call('DELETE', room, undefined, 200);
    });
  const templateCreates = await createOf(fromTemplate.profile_id, 'tpl');
  const plainCreates = await createOf(plain.profile_id, 'plain');
  console.log('a cold create until ready');
  console.log(`  from the template                       ${summary(templateCreates)}`);
  console.log(`  floor: from debian:bookworm             ${summary(plainCreates)}`);
} finally {
  await bench.close();
}
