// The Dockerfile of a template read into build steps (src/core/dockerfile-parser.ts): what
// is supported comes out as steps with their lines and text, everything else is refused
// with the line it is on.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DockerfileError, expandVariables, parseDockerfile } from '../../src/core/dockerfile-parser.ts';

function refusal(source: string): DockerfileError {
  try {
    parseDockerfile(source);
  } catch (err) {
    assert.ok(err instanceof DockerfileError, String(err));
    return err;
  }
  assert.fail('the Dockerfile was accepted');
}

describe('the Dockerfile parser of templates', () => {
  it('reads every supported instruction into a step with its line and text', () => {
    const parsed = parseDockerfile(
      [
        '# a comment',
        'FROM debian:bookworm AS base',
        'ARG VERSION=1.2',
        'ENV APP_HOME=/srv/app GREETING="hello there"',
        'ENV OLD style',
        'RUN apt-get update \\',
        '  && echo done',
        'RUN ["python3", "-c", "print(1 + 1)"]',
        'COPY --chown=user:user app.py lib/ /srv/app/',
        'ADD notes.txt notes.txt',
        'WORKDIR /srv/app',
        'USER user',
        'LABEL team=agents "version"="2"',
        'EXPOSE 8000 9000/udp',
        'ENTRYPOINT ["python3"]',
        'CMD ["-m", "http.server"]',
      ].join('\n'),
    );
    assert.deepEqual(parsed.from, { kind: 'debian', image: 'debian:bookworm' });
    assert.equal(parsed.fromLine, 2);
    const byKind = parsed.steps.map((s) => [s.kind, s.line]);
    assert.deepEqual(byKind, [
      ['arg', 3], ['env', 4], ['env', 5], ['run', 6], ['run', 8], ['copy', 9], ['copy', 10],
      ['workdir', 11], ['user', 12], ['label', 13], ['expose', 14], ['entrypoint', 15], ['cmd', 16],
    ]);
    const [arg, env, oldEnv, shellRun, execRun, copy, add, workdir, user, label, expose, entrypoint, cmd] = parsed.steps;
    assert.deepEqual(arg, { line: 3, text: 'ARG VERSION=1.2', kind: 'arg', name: 'VERSION', value: '1.2' });
    assert.deepEqual(env?.kind === 'env' && env.vars, [['APP_HOME', '/srv/app'], ['GREETING', 'hello there']]);
    assert.deepEqual(oldEnv?.kind === 'env' && oldEnv.vars, [['OLD', 'style']]);
    assert.ok(shellRun?.kind === 'run' && 'shell' in shellRun.command);
    assert.match(shellRun.command.shell, /^apt-get update\s+&& echo done$/);
    assert.deepEqual(execRun?.kind === 'run' && execRun.command, { argv: ['python3', '-c', 'print(1 + 1)'] });
    assert.deepEqual(copy, {
      line: 9, text: 'COPY --chown=user:user app.py lib/ /srv/app/', kind: 'copy', instruction: 'COPY', sources: ['app.py', 'lib/'], dest: '/srv/app/', chown: 'user:user',
    });
    assert.deepEqual(add?.kind === 'copy' && [add.instruction, add.sources, add.dest], ['ADD', ['notes.txt'], 'notes.txt']);
    assert.deepEqual(workdir?.kind === 'workdir' && workdir.path, '/srv/app');
    assert.deepEqual(user?.kind === 'user' && user.user, 'user');
    assert.deepEqual(label?.kind === 'label' && label.labels, [['team', 'agents'], ['version', '2']]);
    assert.deepEqual(expose?.kind === 'expose' && expose.ports, ['8000', '9000/udp']);
    assert.deepEqual(entrypoint?.kind === 'entrypoint' && entrypoint.command, { argv: ['python3'] });
    assert.deepEqual(cmd?.kind === 'cmd' && cmd.command, { argv: ['-m', 'http.server'] });
  });

  it('reads FROM template:NAME as another template, and a bracket that is not JSON as the shell form', () => {
    const parsed = parseDockerfile('FROM template:py-base\nCMD [not json\n');
    assert.deepEqual(parsed.from, { kind: 'template', name: 'py-base' });
    assert.deepEqual(parsed.steps[0]?.kind === 'cmd' && parsed.steps[0].command, { shell: '[not json' });
  });

  it('refuses what it cannot build, naming the line', () => {
    const cases: [string, number, RegExp][] = [
      ['FROM debian:bookworm\nRUN true\nSTOPSIGNAL SIGTERM\n', 3, /STOPSIGNAL is not supported here; supported: FROM, RUN/],
      ['FROM debian:bookworm\nHEALTHCHECK curl -f http://x/\n', 2, /HEALTHCHECK takes CMD and a command, or NONE/],
      ['FROM debian:bookworm\n\nSHELL ["/bin/bash", "-c"]\n', 3, /SHELL is not supported/],
      ['FROM python:3.12\n', 1, /FROM python:3.12 is not supported/],
      ['ARG BASE=debian:bookworm\nFROM $BASE\n', 1, /first instruction must be FROM/],
      ['FROM debian:bookworm\nRUN true\nFROM debian:trixie\n', 3, /multi-stage/],
      ['FROM debian:bookworm\nCOPY --from=build /a /b\n', 2, /COPY --from is not supported/],
      ['FROM debian:bookworm\nRUN --mount=type=cache,target=/x true\n', 2, /RUN --mount is not supported/],
      ['FROM debian:bookworm\nADD https://example.com/a.tgz /a\n', 2, /ADD of a URL/],
      ['FROM debian:bookworm\nCOPY only-one\n', 2, /sources and a destination/],
      ['FROM debian:bookworm\nEXPOSE http\n', 2, /a port is a number/],
      ['FROM template:Bad_Name\n', 1, /not a template name/],
      ['FROM debian:bookworm\nRUN\n', 2, /RUN needs a command/],
    ];
    for (const [source, line, message] of cases) {
      const err = refusal(source);
      assert.equal(err.line, line, source);
      assert.match(err.message, new RegExp(`^line ${line}: `), source);
      assert.match(err.message, message, source);
    }
    assert.match(refusal('# only a comment\n').message, /has no instructions/);
  });

  it('reads HEALTHCHECK CMD in both forms (its timing flags accepted) and HEALTHCHECK NONE', () => {
    const parsed = parseDockerfile('FROM debian:bookworm\nHEALTHCHECK --interval=5s --retries=3 CMD curl -f http://localhost/ || exit 1\nHEALTHCHECK CMD ["curl", "-f", "x"]\nHEALTHCHECK NONE\n');
    assert.deepEqual(
      parsed.steps.map((s) => s.kind === 'healthcheck' && s.command),
      [{ shell: 'curl -f http://localhost/ || exit 1' }, { argv: ['curl', '-f', 'x'] }, null],
    );
  });

  it('expands $NAME and ${NAME} from what is set, leaves \\$ a dollar, and unknown names empty', () => {
    const vars = new Map([['HOME_DIR', '/srv'], ['V', '2']]);
    assert.equal(expandVariables('${HOME_DIR}/app-$V', vars), '/srv/app-2');
    assert.equal(expandVariables('cost: \\$5 $MISSING.', vars), 'cost: $5 .');
  });
});
