// The snapshot commands of `roomkit`: `snapshot ROOM` saves a room's instance, `snapshots`
// lists the organization's (`snapshots show ID`, `snapshots rm ID`), `fork ROOM NEW...`
// starts copies of a room's instance in other rooms. `create --from-snapshot ID` (client.ts)
// starts an instance from one. Output follows the other client commands: results on
// stdout (the API's JSON with --json), advice on stderr, failures as one line.
import { type Command, Option } from 'commander';
import { formatBytes } from '../lib/format-size.ts';
import type { Snapshot } from '../../sdk/src/index.ts';
import { clientOf, type ConnectionOptions, printJson, printTable, type RoomOptions, roomCommand, roomOf, run } from './client.ts';

export function registerSnapshotCommands(program: Command): void {
  roomCommand(program, 'snapshot <room>', 'save the files and memory of the room\'s instance as a snapshot (it stays as it is); instances start from it with `create --from-snapshot`')
    .option('--name <name>', 'a name of yours for it (not unique)')
    .option('--no-memory', 'save its files only (by default its memory and processes too, where the host can)')
    .action(run(async (roomId: string, options: RoomOptions & { name?: string; memory: boolean }) => {
      const snapshot = await roomOf(roomId, options).snapshot({ ...(options.name === undefined ? {} : { name: options.name }), ...(options.memory ? {} : { memory: false }) });
      if (options.json) return printJson(snapshot);
      const name = snapshot.name === null ? '' : ` "${snapshot.name}"`;
      const kept = snapshot.memory_kept ? 'files and memory' : 'files only';
      process.stdout.write(`${snapshot.state}: snapshot ${snapshot.snapshot_id}${name} of room ${roomId}, instance ${snapshot.instance_id} (${kept}, ${formatBytes(snapshot.disk_bytes)} on disk)\n`);
      const of = options.profile === undefined ? '' : ` --profile ${options.profile}`;
      process.stderr.write(`start an instance from it with \`roomkit create${of} --from-snapshot ${snapshot.snapshot_id} ROOM\`\n`);
    }));

  roomCommand(program, 'fork <room> <new-rooms...>', 'start a copy of the room\'s instance in each of the new rooms (same profile), and wait until every copy is ready')
    .option('--keep-snapshot', 'keep the snapshot the copies are made from (deleted afterwards by default)')
    .option('--no-memory', 'copy the files only: each copy boots over them (by default each goes on running the instance\'s processes, where the host can)')
    .addHelpText('after', '\nEach copy has its own instance, address, files and memory from then on; the source goes on running. Exit code: 0 when every copy is ready, 1 when one failed.')
    .action(run(async (roomId: string, rooms: string[], options: RoomOptions & { keepSnapshot?: boolean; memory: boolean }) => {
      const result = await roomOf(roomId, options).fork(rooms, { ...(options.keepSnapshot ? { keepSnapshot: true } : {}), ...(options.memory ? {} : { memory: false }) });
      const failed = result.instances.filter((i) => i.state !== 'ready');
      if (failed.length > 0) process.exitCode = 1;
      if (options.json) return printJson(result);
      for (const i of result.instances) {
        process.stdout.write(`${i.state}: room ${i.room_id}, instance ${i.instance_id}${i.failure_reason ? ` (${i.failure_reason})` : ''}\n`);
      }
      const of = options.profile === undefined ? '' : ` --profile ${options.profile}`;
      for (const i of failed) process.stderr.write(`roomkit: room ${i.room_id} did not start; \`roomkit destroy${of} ${i.room_id}\` removes what is left of it\n`);
      if (result.snapshot !== null) {
        const id = result.snapshot.snapshot_id;
        process.stderr.write(`kept snapshot ${id}: \`roomkit create${of} --from-snapshot ${id} ROOM\` starts more, \`roomkit snapshots rm ${id}\` deletes it\n`);
      }
    }));

  const snapshots = program.command('snapshots').description('list, show and delete the organization\'s snapshots (`roomkit snapshots` lists them)');
  clientCommand(snapshots, 'list', 'list the organization\'s snapshots, newest first', { isDefault: true })
    .option('--instance <id>', 'only the snapshots taken of this instance')
    .action(run(async (options: ConnectionOptions & { instance?: string }) => {
      const client = clientOf(options);
      // Every page: the organization's snapshots quota keeps the list short.
      const all: Snapshot[] = [];
      for await (const s of client.snapshots.all({ limit: 200, ...(options.instance === undefined ? {} : { instanceId: options.instance }) })) all.push(s);
      if (options.json) return printJson({ snapshots: all, next_cursor: null });
      if (all.length === 0) return void process.stdout.write('no snapshots\n');
      const names = new Map((await client.profiles.list()).map((p) => [p.profile_id, p.name]));
      const rows = all.map((s) => [
        s.snapshot_id,
        s.name ?? '-',
        s.state,
        s.room_id,
        names.get(s.profile_id) ?? s.profile_id,
        formatBytes(s.disk_bytes, 'listing'),
        s.created_at,
      ]);
      printTable(['SNAPSHOT', 'NAME', 'STATE', 'ROOM', 'PROFILE', 'SIZE', 'CREATED'], rows);
    }));

  clientCommand(snapshots, 'show <id>', 'show one snapshot')
    .action(run(async (id: string, options: ConnectionOptions) => {
      const snapshot = await clientOf(options).snapshots.get(id);
      if (options.json) return printJson(snapshot);
      const rows: [string, string][] = [
        ['snapshot', snapshot.snapshot_id],
        ['name', snapshot.name ?? '-'],
        ['state', snapshot.state],
        ['taken of', `room ${snapshot.room_id} (profile ${snapshot.profile_id}), instance ${snapshot.instance_id}`],
        ['image', snapshot.image],
        ['disk', `${snapshot.disk_mb} MiB for an instance started from it; ${formatBytes(snapshot.disk_bytes)} on the host`],
        ['memory', snapshot.memory_kept ? 'kept (processes come back)' : 'not kept (files only)'],
        ['created', snapshot.created_at],
      ];
      for (const [label, value] of rows) process.stdout.write(`${label.padEnd(10)} ${value}\n`);
    }));

  clientCommand(snapshots, 'rm <id>', 'delete a snapshot and free its disk (instances started from it keep their files)')
    .action(run(async (id: string, options: ConnectionOptions) => {
      const snapshot = await clientOf(options).snapshots.delete(id);
      if (options.json) return printJson(snapshot);
      process.stdout.write(`deleted snapshot ${snapshot.snapshot_id}\n`);
    }));
}

/** A command about the organization rather than a room: the connection options and --json. */
export function clientCommand(parent: Command, nameAndArgs: string, description: string, options: { isDefault?: boolean } = {}): Command {
  return parent
    .command(nameAndArgs, options)
    .description(description)
    .option('--url <url>', 'the roomkit server (env ROOMKIT_URL; default http://127.0.0.1:8080)')
    .option('--api-key <key>', 'API key (env ROOMKIT_API_KEY, which keeps it out of the process list)')
    .addOption(new Option('--json', 'print the API\'s JSON answer instead of text'));
}
