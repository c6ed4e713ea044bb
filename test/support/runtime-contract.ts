// The contract every instance runtime must pass. A runtime is added by making this
// suite pass against it; core/ relies on nothing else. Over 400 lines: one suite, so that
// a runtime's author reads every rule a runtime must keep in one place.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Logger } from 'pino';
import { GuestFileError, RuntimeFeatureUnavailable, type CommandRequest, type TerminalSession, type MachineSpec, PROVISION_STEPS, type ProvisionRequest, type ProvisionStep, type Runtime } from '../../src/runtimes/types.ts';

export interface ContractSubject {
  runtime: Runtime;
  spec: MachineSpec;
  log: Logger;
  /**
   * Whether its instances keep stdout and stderr apart, keep stdin open for input and
   * open terminals; without, those must be refused with RuntimeFeatureUnavailable.
   */
  interactive: boolean;
  /**
   * A test double: its instances are no machines, so nothing runs a shell, and files
   * have no owners or permissions. The parts of the contract about what a command does
   * or about the guest's own files are left out for it; lifecycle, files written
   * through the runtime, pause and snapshots, and the refusals of what it cannot do stay.
   */
  testDouble?: boolean;
  /** Removes what the subject made (data directories and the like). */
  close(): Promise<void>;
}

export function runtimeContract(name: string, make: () => Promise<ContractSubject>): void {
  describe(`runtime contract: ${name}`, () => {
    let subject: ContractSubject;
    const made: string[] = [];
    before(async () => {
      subject = await make();
    });
    after(async () => {
      for (const id of made) await (await subject.runtime.destroy(id)).released;
      await subject.close();
    });

    /** Leaves a test out for a test double (see ContractSubject.testDouble); true when it did. */
    function needsGuest(t: { skip(message?: string): void }): boolean {
      if (!subject.testDouble) return false;
      t.skip('needs a real guest: a test double runs no shell');
      return true;
    }

    function request(overrides: Partial<ProvisionRequest> = {}): ProvisionRequest & { steps: ProvisionStep[] } {
      const steps: ProvisionStep[] = [];
      const instanceId = randomUUID();
      made.push(instanceId);
      return {
        instanceId,
        organizationId: randomUUID(),
        profileId: randomUUID(),
        roomId: 'contract',
        spec: subject.spec,
        signal: new AbortController().signal,
        log: subject.log,
        onStep: async (step) => {
          steps.push(step);
        },
        onProgress: () => {},
        steps,
        ...overrides,
      };
    }

    it('states a host cost of at least what the instance asks for, growing with it (host admission adds these up)', () => {
      const small = subject.runtime.hostCost({ memory_mb: 512, vcpus: 1, disk_mb: 1024 });
      const large = subject.runtime.hostCost({ memory_mb: 4096, vcpus: 2, disk_mb: 8192 });
      assert.ok(small.memoryMb >= 512 && small.diskMb >= 1024, JSON.stringify(small));
      assert.ok(large.memoryMb >= 4096 && large.diskMb >= 8192, JSON.stringify(large));
      assert.ok(large.memoryMb > small.memoryMb && large.diskMb > small.diskMb);
    });

    it('reports every provisioning step once, in lifecycle order, and the instance is then healthy', async () => {
      const req = request();
      await subject.runtime.provision(req);
      assert.deepEqual(req.steps, PROVISION_STEPS);
      assert.deepEqual(await subject.runtime.health(req.instanceId), { healthy: true });
      assert.ok((await subject.runtime.list()).includes(req.instanceId));
    });

    it('measures what a running instance uses of the host\'s memory, within its host cost, and nothing of one it does not run (host admission adds these up)', async () => {
      const resources = { memory_mb: subject.spec.memory_mb, vcpus: subject.spec.vcpus, disk_mb: subject.spec.disk_mb };
      const starting = subject.runtime.startingMemoryMb(resources);
      assert.ok(starting > 0 && starting <= subject.runtime.hostCost(resources).memoryMb, `starting estimate ${starting} MB`);
      assert.equal(subject.runtime.memoryInUseMb(randomUUID()), undefined);
      const req = request();
      await subject.runtime.provision(req);
      const used = subject.runtime.memoryInUseMb(req.instanceId);
      assert.ok(used !== undefined && used > 0 && used <= subject.runtime.hostCost(resources).memoryMb, `measured ${used} MB`);
      await (await subject.runtime.destroy(req.instanceId)).released;
      assert.equal(subject.runtime.memoryInUseMb(req.instanceId), undefined, 'nothing measured once it is released');
    });

    it('destroys an instance: stopped when destroy resolves, gone completely once released; destroying again is harmless', async () => {
      const req = request();
      await subject.runtime.provision(req);
      const teardown = await subject.runtime.destroy(req.instanceId);
      assert.equal((await subject.runtime.health(req.instanceId)).healthy, false);
      await teardown.released;
      assert.ok(!(await subject.runtime.list()).includes(req.instanceId));
      await (await subject.runtime.destroy(req.instanceId)).released;
      await (await subject.runtime.destroy(randomUUID())).released;
    });

    it('undoes its steps and rejects when a step is refused', async () => {
      const steps: ProvisionStep[] = [];
      const req = request({
        onStep: async (step) => {
          steps.push(step);
          if (step === 'image_generated') throw new Error('refused by core');
        },
      });
      await assert.rejects(subject.runtime.provision(req), /refused by core/);
      assert.deepEqual(steps, ['network_allocated', 'ftap_created', 'image_generated']);
      assert.ok(!(await subject.runtime.list()).includes(req.instanceId));
    });

    it('stops, undoes and rejects when its signal is aborted', async () => {
      const abort = new AbortController();
      const req = request({
        signal: abort.signal,
        onStep: async (step) => {
          if (step === 'ftap_created') abort.abort(new Error('deleted while starting'));
          abort.signal.throwIfAborted();
        },
      });
      await assert.rejects(subject.runtime.provision(req), /deleted while starting/);
      assert.ok(!(await subject.runtime.list()).includes(req.instanceId));
    });

    it('sweeps what belongs to no kept instance, and keeps the rest healthy', async () => {
      const keep = request();
      const drop = request();
      await subject.runtime.provision(keep);
      await subject.runtime.provision(drop);
      const removed = await subject.runtime.sweep(new Set([keep.instanceId]));
      assert.ok(removed.some((r) => r.includes(drop.instanceId)), JSON.stringify(removed));
      const listed = await subject.runtime.list();
      assert.ok(listed.includes(keep.instanceId));
      assert.ok(!listed.includes(drop.instanceId));
      assert.deepEqual(await subject.runtime.health(keep.instanceId), { healthy: true });
    });

    it('freezes an idle instance and thaws it for the next operation, or declares that it cannot', async () => {
      const { runtime } = subject;
      if (!runtime.capabilities.freeze) {
        assert.equal(runtime.freeze, undefined, 'a runtime that cannot freeze has no freeze()');
        return;
      }
      assert.ok(runtime.freeze && runtime.isFrozen && runtime.cpuUsedMs, 'capabilities.freeze needs freeze(), isFrozen() and cpuUsedMs()');
      const req = request();
      await runtime.provision(req);
      const home = subject.spec.home;
      await runtime.writeFile(req.instanceId, 'warm.txt', Buffer.from('warm'), { home });
      assert.equal(runtime.freeze(req.instanceId), false, 'an instance an operation reached a moment ago is not frozen');
      let frozen = false;
      for (let i = 0; i < 40 && !frozen; i++) {
        await new Promise((r) => setTimeout(r, 250));
        frozen = runtime.freeze(req.instanceId);
      }
      assert.equal(frozen, true, 'an idle instance freezes');
      assert.equal(runtime.isFrozen(req.instanceId), true);
      const used = runtime.cpuUsedMs(req.instanceId);
      assert.ok(used !== undefined && used > 0, `its CPU time: ${used}`);
      const read = await runtime.runCommand(req.instanceId, { commandId: randomUUID(), command: 'cat warm.txt', home, env: {}, timeoutMs: 30_000, maxOutputBytes: 4096, trackChanges: false });
      assert.equal(read.output, 'warm', 'an operation on a frozen instance thaws it first');
      assert.equal(runtime.isFrozen(req.instanceId), false);
      await runtime.destroy(req.instanceId);
    });

    it('pauses and resumes an instance with its files, or declares that it cannot', async () => {
      const { runtime } = subject;
      if (!runtime.capabilities.pause) {
        assert.equal(runtime.pause, undefined, 'a runtime that cannot pause has no pause()');
        assert.equal(runtime.resume, undefined, 'a runtime that cannot pause has no resume()');
        return;
      }
      assert.ok(runtime.pause && runtime.resume, 'capabilities.pause needs pause() and resume()');
      const req = request();
      await runtime.provision(req);
      const home = subject.spec.home;
      await runtime.writeFile(req.instanceId, 'kept.txt', Buffer.from('kept'), { home });
      const outcome = await runtime.pause(req.instanceId);
      // Memory is kept by default exactly when the runtime says it can keep it.
      assert.equal(outcome.memoryKept, runtime.capabilities.pauseMemory, 'a pause keeps memory by default where the runtime can (capabilities.pauseMemory)');
      // Paused: no machine answers, but the runtime still holds it, and a sweep that keeps it keeps it.
      assert.equal((await runtime.health(req.instanceId)).healthy, false);
      assert.ok((await runtime.list()).includes(req.instanceId));
      await runtime.sweep(new Set([req.instanceId]));
      // Pausing again (as a restart after a crash does) is harmless.
      assert.equal((await runtime.pause(req.instanceId)).memoryKept, outcome.memoryKept);
      const resumed = await runtime.resume({ instanceId: req.instanceId, spec: subject.spec, log: subject.log });
      assert.deepEqual(resumed, { memoryRestored: outcome.memoryKept }, 'a resume restores the memory its pause kept');
      assert.deepEqual(await runtime.health(req.instanceId), { healthy: true });
      const { body } = await runtime.openFile(req.instanceId, 'kept.txt', { home, maxBytes: 1024 });
      const chunks: Buffer[] = [];
      for await (const chunk of body) chunks.push(Buffer.from(chunk as Buffer));
      assert.equal(Buffer.concat(chunks).toString(), 'kept');
      if (!subject.testDouble) {
        const ran = await runtime.runCommand(req.instanceId, {
          commandId: randomUUID(), command: 'id -u', home, env: {}, timeoutMs: 30_000, maxOutputBytes: 1024, trackChanges: false,
        });
        assert.equal(ran.output, '1000\n');
      }
      // A paused instance is destroyed completely too.
      await runtime.pause(req.instanceId);
      await (await runtime.destroy(req.instanceId)).released;
      assert.ok(!(await runtime.list()).includes(req.instanceId));
    });

    it('pauses with memory: a process keeps its pid and what it holds in memory, or declares that it cannot', async (t) => {
      const { runtime } = subject;
      if (!runtime.capabilities.pause || !runtime.pause || !runtime.resume) return;
      const req = request();
      await runtime.provision(req);
      // Files only when asked, whatever the runtime can.
      assert.equal((await runtime.pause(req.instanceId, { memory: false })).memoryKept, false);
      assert.deepEqual(await runtime.resume({ instanceId: req.instanceId, spec: subject.spec, log: subject.log }), { memoryRestored: false });
      if (!runtime.capabilities.pauseMemory) {
        assert.equal((await runtime.pause(req.instanceId, { memory: true })).memoryKept, false, 'a runtime without pauseMemory keeps files only');
        return;
      }
      if (needsGuest(t)) return;
      const home = subject.spec.home;
      const run = (command: string) =>
        runtime.runCommand(req.instanceId, { commandId: randomUUID(), command, home, env: {}, timeoutMs: 30_000, maxOutputBytes: 4096, trackChanges: false });
      // A shell that holds a value in memory only, started in the background through the agent.
      await run('nohup sh -c \'v=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \\n"); echo $$ > /tmp/held.pid; while :; do echo "$v" > /tmp/held.now; sleep 0.2; done\' >/dev/null 2>&1 &');
      let before = '';
      for (let i = 0; i < 50 && before.split(' ').length < 2; i++) before = (await run('cat /tmp/held.pid /tmp/held.now 2>/dev/null | tr "\\n" " "')).output.trim();
      assert.equal(before.split(' ').length, 2, `the background shell started: ${before}`);
      assert.equal((await runtime.pause(req.instanceId, { memory: true })).memoryKept, true);
      assert.deepEqual(await runtime.resume({ instanceId: req.instanceId, spec: subject.spec, log: subject.log }), { memoryRestored: true });
      await run('rm -f /tmp/held.now; sleep 0.5');
      const after = (await run('cat /tmp/held.pid /tmp/held.now | tr "\\n" " "; kill -0 $(cat /tmp/held.pid) && echo alive')).output.trim();
      assert.equal(after, `${before} alive`, 'the same process, with the same value in its memory');
      await (await runtime.destroy(req.instanceId)).released;
    });

    it('saves an instance\'s files as a snapshot and starts another instance from it, or declares that it cannot', async () => {
      const { runtime } = subject;
      if (!runtime.capabilities.snapshot) {
        assert.equal(runtime.snapshot, undefined, 'a runtime that cannot take snapshots has no snapshot()');
        assert.equal(runtime.deleteSnapshot, undefined, 'a runtime that cannot take snapshots has no deleteSnapshot()');
        return;
      }
      assert.ok(runtime.snapshot && runtime.deleteSnapshot && runtime.listSnapshots, 'capabilities.snapshot needs snapshot(), deleteSnapshot() and listSnapshots()');
      const home = subject.spec.home;
      const source = request();
      await runtime.provision(source);
      await runtime.writeFile(source.instanceId, 'saved.txt', Buffer.from('saved'), { home });
      const snapshotId = randomUUID();
      const outcome = await runtime.snapshot(source.instanceId, snapshotId);
      assert.equal(typeof outcome.memoryKept, 'boolean');
      assert.ok(outcome.diskBytes > 0, 'a snapshot says what disk it holds');
      assert.ok((await runtime.listSnapshots()).includes(snapshotId));
      // The source goes on; what it writes afterwards is not in the snapshot.
      await runtime.writeFile(source.instanceId, 'later.txt', Buffer.from('later'), { home });
      const copy = request({ fromSnapshot: snapshotId });
      await runtime.provision(copy);
      assert.deepEqual(copy.steps, [...PROVISION_STEPS]);
      const info = await runtime.statFile(copy.instanceId, 'saved.txt', { home });
      assert.equal(info.size, 5);
      await assert.rejects(runtime.statFile(copy.instanceId, 'later.txt', { home }), GuestFileError);
      // A paused instance can be saved too, and stays paused.
      if (runtime.pause) {
        await runtime.pause(source.instanceId);
        const pausedSnapshot = randomUUID();
        await runtime.snapshot(source.instanceId, pausedSnapshot);
        assert.equal((await runtime.health(source.instanceId)).healthy, false);
        await runtime.deleteSnapshot(pausedSnapshot);
      }
      await runtime.deleteSnapshot(snapshotId);
      await runtime.deleteSnapshot(snapshotId);
      assert.ok(!(await runtime.listSnapshots()).includes(snapshotId));
      // An instance started from it keeps its own files.
      assert.equal((await runtime.statFile(copy.instanceId, 'saved.txt', { home })).size, 5);
      // A snapshot that is not there: the provision fails and leaves nothing.
      const missing = request({ fromSnapshot: randomUUID() });
      await assert.rejects(runtime.provision(missing));
      assert.ok(!(await runtime.list()).includes(missing.instanceId));
    });

    it('restores a snapshot\'s memory in another instance, at its own address, while the source goes on, or declares that it cannot', async (t) => {
      const { runtime } = subject;
      if (!runtime.capabilities.snapshot || !runtime.snapshot || !runtime.deleteSnapshot) return;
      const source = request();
      await runtime.provision(source);
      if (!runtime.capabilities.snapshotMemory) {
        const files = randomUUID();
        assert.equal((await runtime.snapshot(source.instanceId, files, { memory: true })).memoryKept, false, 'a runtime without snapshotMemory keeps files only');
        await runtime.deleteSnapshot(files);
        return;
      }
      if (needsGuest(t)) return;
      const home = subject.spec.home;
      const run = async (instanceId: string, command: string) =>
        (await runtime.runCommand(instanceId, { commandId: randomUUID(), command, home, env: {}, timeoutMs: 30_000, maxOutputBytes: 4096, trackChanges: false })).output.trim();
      await run(source.instanceId, 'nohup sh -c \'v=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \\n"); echo $$ > /tmp/held.pid; while :; do echo "$v" > /tmp/held.now; sleep 0.2; done\' >/dev/null 2>&1 &');
      let held = '';
      for (let i = 0; i < 50 && held.split(' ').length < 2; i++) held = await run(source.instanceId, 'cat /tmp/held.pid /tmp/held.now 2>/dev/null | tr "\\n" " "');
      const snapshotId = randomUUID();
      assert.equal((await runtime.snapshot(source.instanceId, snapshotId)).memoryKept, true, 'a snapshot keeps memory by default where the runtime can');
      const notes: string[] = [];
      const copy = request({ fromSnapshot: snapshotId, onStep: async (step, note) => void notes.push(`${step}${note ? `:${note.code}` : ''}`) });
      await runtime.provision(copy);
      assert.deepEqual(notes, ['network_allocated', 'ftap_created', 'image_generated', 'vm_started:memory_restored', 'vm_booted', 'ready']);
      const check = 'rm -f /tmp/held.now; sleep 0.5; cat /tmp/held.pid /tmp/held.now | tr "\\n" " "; kill -0 $(cat /tmp/held.pid) && echo alive';
      assert.equal(await run(copy.instanceId, check), `${held} alive`, 'the copy runs the same process, with the same value in its memory');
      assert.equal(await run(source.instanceId, check), `${held} alive`, 'the source goes on');
      if (runtime.portEndpoint) assert.notEqual(runtime.portEndpoint(copy.instanceId)?.host, runtime.portEndpoint(source.instanceId)?.host, 'each at its own address');
      // Files only when asked: the copy boots, without the process.
      const files = randomUUID();
      assert.equal((await runtime.snapshot(source.instanceId, files, { memory: false })).memoryKept, false);
      const booted = request({ fromSnapshot: files });
      await runtime.provision(booted);
      assert.equal(await run(booted.instanceId, 'kill -0 $(cat /tmp/held.pid) 2>/dev/null && echo alive || echo gone'), 'gone');
      await runtime.deleteSnapshot(snapshotId);
      await runtime.deleteSnapshot(files);
    });

    describe('commands and files in one instance', () => {
      let id = '';
      const home = () => subject.spec.home;
      const command = (text: string, more: Partial<CommandRequest> = {}): CommandRequest => ({
        commandId: randomUUID(),
        command: text,
        home: home(),
        env: {},
        timeoutMs: 30_000,
        maxOutputBytes: 1024 * 1024,
        trackChanges: false,
        ...more,
      });
      before(async () => {
        const req = request();
        await subject.runtime.provision(req);
        id = req.instanceId;
      });

      it('runs a command as the unprivileged user in its home, with its environment, and answers its output and exit code', async (t) => {
        if (needsGuest(t)) return;
        const outcome = await subject.runtime.runCommand(id, command('echo "$(id -u) $PWD $GREETING"; echo oops >&2; exit 3', { env: { GREETING: 'hi' } }));
        assert.equal(outcome.exitCode, 3);
        assert.equal(outcome.timedOut, false);
        assert.match(outcome.output, new RegExp(`^1000 ${home()} hi\n`));
        assert.match(outcome.output, /oops\n/);
        assert.equal(outcome.outputBytes, Buffer.byteLength(outcome.output));
      });

      it('runs in the working directory asked for, and fails when it does not exist', async (t) => {
        if (needsGuest(t)) return;
        assert.equal((await subject.runtime.runCommand(id, command('pwd', { cwd: '/tmp' }))).output, '/tmp\n');
        assert.notEqual((await subject.runtime.runCommand(id, command('pwd', { cwd: '/no/such/dir' }))).exitCode, 0);
      });

      it('runs a program given as such without a shell parsing its words, in the working directory asked for', async (t) => {
        if (needsGuest(t)) return;
        const direct = await subject.runtime.runCommand(id, command('(the record\'s text)', { argv: ['/bin/sh', '-c', 'printf "%s|" "$1"; cat /proc/$PPID/comm', 'sh', '$HOME; a b'] }));
        assert.equal(direct.exitCode, 0, direct.output);
        assert.equal(direct.output, '$HOME; a b|agent\n', 'its words reach it as they are, and the agent itself started it');
        const inDir = await subject.runtime.runCommand(id, command('(the record\'s text)', { argv: ['printf', '%s %s', '$HOME'], cwd: '/tmp' }));
        assert.equal(inDir.output, '$HOME ');
        assert.equal((await subject.runtime.runCommand(id, command('(pwd)', { argv: ['pwd'], cwd: '/tmp' }))).output, '/tmp\n');
      });

      it('passes every byte of a large output on, in order', async (t) => {
        if (needsGuest(t)) return;
        const chunks: Buffer[] = [];
        const outcome = await subject.runtime.runCommand(id, command('seq 1 200000', { onOutput: (c) => chunks.push(c) }));
        const expected = Array.from({ length: 200000 }, (_, i) => `${i + 1}\n`).join('');
        assert.equal(outcome.outputBytes, Buffer.byteLength(expected));
        assert.equal(Buffer.concat(chunks).toString(), expected);
      });

      it('ends a command at its time limit with every process it started, with exit code 124', async (t) => {
        if (needsGuest(t)) return;
        const started = Date.now();
        const outcome = await subject.runtime.runCommand(id, command('sleep 61 & sleep 61; echo never', { timeoutMs: 1_000 }));
        assert.equal(outcome.timedOut, true);
        assert.equal(outcome.exitCode, 124);
        assert.ok(Date.now() - started < 15_000, `took ${Date.now() - started} ms`);
        const left = await subject.runtime.runCommand(id, command("pgrep -c -f '^sleep 61$' || true"));
        assert.equal(left.output.trim(), '0');
      });

      it("kills a running command's whole process tree on request", async (t) => {
        if (needsGuest(t)) return;
        const req = command('sleep 60 & sleep 60 & wait');
        const running = subject.runtime.runCommand(id, req);
        let signalled = 0;
        for (let i = 0; i < 100 && signalled < 3; i++) {
          await new Promise((r) => setTimeout(r, 100));
          signalled = await subject.runtime.killCommand(id, req.commandId);
        }
        assert.ok(signalled >= 3, `signalled ${signalled}`);
        const outcome = await running;
        assert.equal(outcome.exitCode, 137);
      });

      it('writes, describes, reads (whole and a range), lists and deletes a file as the unprivileged user', async () => {
        const written = await subject.runtime.writeFile(id, 'notes/a.txt', Buffer.from('hello, world'), { home: home() });
        assert.equal(written.created, true);
        assert.equal(written.info.path, `${home()}/notes/a.txt`);
        assert.equal(written.info.size, 12);
        assert.equal((await subject.runtime.writeFile(id, 'notes/a.txt', Buffer.from('hello, world'), { home: home() })).created, false);
        if (!subject.testDouble) {
          const owner = await subject.runtime.runCommand(id, command('stat -c %u notes/a.txt'));
          assert.equal(owner.output.trim(), '1000');
        }
        const stat = await subject.runtime.statFile(id, `${home()}/notes/a.txt`, { home: home() });
        assert.equal(stat.size, 12);
        const read = async (range?: { start: number; end: number }) => {
          const { body } = await subject.runtime.openFile(id, 'notes/a.txt', { home: home(), maxBytes: 1024, ...(range ? { range } : {}) });
          const parts: Buffer[] = [];
          for await (const part of body) parts.push(Buffer.from(part as Buffer));
          return Buffer.concat(parts).toString();
        };
        assert.equal(await read(), 'hello, world');
        assert.equal(await read({ start: 7, end: 11 }), 'world');
        const listing = await subject.runtime.listDirectory(id, 'notes', { home: home(), limit: 10 });
        assert.deepEqual(
          listing.entries.map((e) => [e.name, e.type, e.size]),
          [['a.txt', 'file', 12]],
        );
        await subject.runtime.deleteFile(id, 'notes/a.txt', { home: home() });
        await assert.rejects(subject.runtime.statFile(id, 'notes/a.txt', { home: home() }), (err: GuestFileError) => err.kind === 'not_found');
      });

      it('gives a command its input at once; keeps stdout and stderr apart where it can, and says so when it starts', async (t) => {
        if (needsGuest(t)) return;
        const started: { streamsApart: boolean }[] = [];
        const chunks: string[] = [];
        const outcome = await subject.runtime.runCommand(
          id,
          command('tr a-z A-Z; echo done >&2', {
            stdin: Buffer.from('shout\n'),
            onStarted: (info) => started.push(info),
            onOutput: () => chunks.push(`output after ${started.length} start(s)`),
          }),
        );
        assert.deepEqual(started, [{ streamsApart: subject.interactive }]);
        assert.ok(chunks.length > 0 && chunks.every((c) => c === 'output after 1 start(s)'), chunks.join(', '));
        assert.equal(outcome.output, 'SHOUT\ndone\n');
        if (subject.interactive) {
          assert.deepEqual(outcome.streams, {
            stdout: { text: 'SHOUT\n', bytes: 6, truncated: false },
            stderr: { text: 'done\n', bytes: 5, truncated: false },
          });
        } else {
          assert.equal(outcome.streams, undefined);
        }
        const empty = await subject.runtime.runCommand(id, command('wc -c'));
        assert.equal(empty.output.trim(), '0');
      });

      it('feeds a running command more input until its stdin is closed, or refuses where it cannot', async () => {
        const req = command('while read line; do echo "got $line"; done; echo eof', { stdinOpen: true });
        if (!subject.interactive) {
          await assert.rejects(subject.runtime.runCommand(id, req), RuntimeFeatureUnavailable);
          return;
        }
        const seen: string[] = [];
        const running = subject.runtime.runCommand(id, { ...req, onOutput: (c) => seen.push(c.toString()) });
        let sent = false;
        for (let i = 0; i < 100 && !sent; i++) {
          sent = await subject.runtime.sendInput(id, req.commandId, Buffer.from('one\n'));
          if (!sent) await new Promise((r) => setTimeout(r, 50));
        }
        assert.ok(sent);
        for (let i = 0; i < 100 && !seen.join('').includes('got one'); i++) await new Promise((r) => setTimeout(r, 50));
        assert.equal(seen.join(''), 'got one\n');
        assert.equal(await subject.runtime.sendInput(id, req.commandId, Buffer.from('two\n')), true);
        assert.equal(await subject.runtime.sendInput(id, req.commandId, null), true);
        const outcome = await running;
        assert.equal(outcome.output, 'got one\ngot two\neof\n');
        assert.equal(await subject.runtime.sendInput(id, req.commandId, Buffer.from('late\n')), false);
      });

      it('opens a terminal of the size asked for, resizes it, types into it, and ends it', async () => {
        const open = subject.runtime.openTerminal(id, { terminalId: randomUUID(), user: 'user', home: home(), env: {}, cols: 100, rows: 30 });
        if (!subject.interactive) {
          await assert.rejects(open, RuntimeFeatureUnavailable);
          return;
        }
        const terminal: TerminalSession = await open;
        let screen = '';
        terminal.onOutput((c) => (screen += c.toString()));
        const waitFor = async (pattern: RegExp) => {
          for (let i = 0; i < 200 && !pattern.test(screen); i++) await new Promise((r) => setTimeout(r, 50));
          assert.match(screen, pattern);
        };
        terminal.write(Buffer.from('stty size; tty\n'));
        await waitFor(/30 100\r?\n\/dev\/pts\/\d+/);
        terminal.resize(120, 40);
        terminal.write(Buffer.from('stty size\n'));
        await waitFor(/40 120/);
        terminal.write(Buffer.from('cat\n'));
        await new Promise((r) => setTimeout(r, 300));
        terminal.write(Buffer.from('typed-into-cat\n'));
        // Echoed by the terminal, then printed by cat.
        await waitFor(/typed-into-cat\r?\n(.|\n)*typed-into-cat/);
        const within = <T>(p: Promise<T>) => Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the terminal did not end')), 15_000))]);
        terminal.close();
        await within(terminal.exited);
        // A command on a terminal ends with its own exit code.
        const short = await subject.runtime.openTerminal(id, { terminalId: randomUUID(), user: 'user', home: home(), env: {}, cols: 80, rows: 24, command: 'test -t 0 && exit 7' });
        assert.deepEqual(await within(short.exited), { exitCode: 7 });
      });

      it('makes a directory with its parents, renames into a new one, and removes a whole tree, as the unprivileged user (or root, asked)', async () => {
        const access = { home: home() };
        assert.deepEqual(await subject.runtime.makeDirectory(id, 'tree/a/b', access), { path: `${home()}/tree/a/b`, created: true });
        assert.equal((await subject.runtime.makeDirectory(id, 'tree/a', access)).created, false);
        await subject.runtime.writeFile(id, 'tree/a/b/f.txt', Buffer.from('x'), access);
        await assert.rejects(subject.runtime.makeDirectory(id, 'tree/a/b/f.txt', access), (err: GuestFileError) => err.kind === 'not_a_directory');
        assert.deepEqual(await subject.runtime.renamePath(id, 'tree/a', 'tree/moved/here', access), { path: `${home()}/tree/a`, target: `${home()}/tree/moved/here` });
        assert.equal((await subject.runtime.statFile(id, 'tree/moved/here/b/f.txt', access)).size, 1);
        await assert.rejects(subject.runtime.statFile(id, 'tree/a/b/f.txt', access), (err: GuestFileError) => err.kind === 'not_found');
        await assert.rejects(subject.runtime.renamePath(id, 'tree/none', 'tree/other', access), (err: GuestFileError) => err.kind === 'not_found');
        await subject.runtime.removeTree(id, 'tree', access);
        await assert.rejects(subject.runtime.statFile(id, 'tree/moved/here/b/f.txt', access), (err: GuestFileError) => err.kind === 'not_found');
        await assert.rejects(subject.runtime.removeTree(id, 'tree', access), (err: GuestFileError) => err.kind === 'not_found');
        if (!subject.testDouble) {
          await subject.runtime.writeFile(id, '/tmp/owned-by-root/f.txt', Buffer.from('x'), { home: home(), asRoot: true });
          await subject.runtime.makeDirectory(id, '/tmp/owned-by-user', access);
          const owners = await subject.runtime.runCommand(id, command('stat -c %u /tmp/owned-by-root /tmp/owned-by-root/f.txt /tmp/owned-by-user'));
          assert.deepEqual(owners.output.trim().split('\n'), ['0', '0', '1000']);
          assert.equal(await subject.runtime.removeTree(id, '/tmp/owned-by-root', access).then(() => 'ok', (err: GuestFileError) => err.kind), 'permission_denied');
          await subject.runtime.removeTree(id, '/tmp/owned-by-root', { home: home(), asRoot: true });
        }
      });

      it("answers each file error with its kind, with the unprivileged user's rights", async (t) => {
        if (needsGuest(t)) return;
        const kind = (p: Promise<unknown>) => p.then(() => 'ok', (err: GuestFileError) => err.kind);
        assert.equal(await kind(subject.runtime.statFile(id, '/etc/shadow', { home: home() })), 'permission_denied');
        assert.equal(await kind(subject.runtime.statFile(id, '/etc', { home: home() })), 'is_a_directory');
        assert.equal(await kind(subject.runtime.statFile(id, '/no/such/file', { home: home() })), 'not_found');
        assert.equal(await kind(subject.runtime.writeFile(id, '/etc/roomkit-test', Buffer.from('x'), { home: home() })), 'permission_denied');
        assert.equal(await kind(subject.runtime.listDirectory(id, '/etc/hostname', { home: home(), limit: 10 })), 'not_a_directory');
        assert.equal(await kind(subject.runtime.deleteFile(id, '/etc/hostname', { home: home() })), 'permission_denied');
        assert.equal(await kind(subject.runtime.statFile(id, '/dev/null', { home: home() })), 'invalid_path');
      });
    });
  });
}
