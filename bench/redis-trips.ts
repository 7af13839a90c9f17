import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { Redis } from 'ioredis';

/** Local ports of `pid`'s TCP connections to `remotePort` (Linux /proc), i.e. its Redis connections. */
function connectionPortsOf(pid: number, remotePort: number): Set<number> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match?.[1]) inodes.add(match[1]);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    let text = '';
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const [, localAddress = '', remoteAddress = '', , , , , , , inode = ''] = line.trim().split(/\s+/);
      if (!inodes.has(inode)) continue;
      const local = Number.parseInt(localAddress.split(':')[1] ?? '', 16);
      const remote = Number.parseInt(remoteAddress.split(':')[1] ?? '', 16);
      if (remote === remotePort) ports.add(local);
    }
  }
  return ports;
}

/**
 * A connection in MONITOR mode, as ioredis's `monitor()` makes it, but with an error listener from the
 * start. ioredis switches to monitoring a microtask after MONITOR's OK: lines of other clients that arrive
 * in the same read are taken as replies to no command, and each emits a "Command queue state error"
 * (`monitor()` handles only the first; the second crashed a full run with the web's publishing under way).
 * Those lines come before anything is counted; `failure()` is the first error once monitoring began.
 */
async function startMonitor(redisUrl: string): Promise<{ monitor: Redis; failure: () => Error | undefined }> {
  const monitor = new Redis(redisUrl, { monitor: true });
  let monitoring = false;
  let failure: Error | undefined;
  monitor.on('error', (error: Error) => {
    if (monitoring) failure ??= error;
  });
  await new Promise<void>((resolve, reject) => {
    monitor.once('monitoring', () => {
      monitoring = true;
      resolve();
    });
    monitor.once('end', () => reject(new Error('the MONITOR connection closed before monitoring')));
  });
  return { monitor, failure: () => failure };
}

export interface TripCount {
  /** Network round trips: a MULTI…EXEC block (one pipelined write) counts once. */
  tripsPerRequest: number;
  /** Commands sent by the client (commands run inside Lua scripts are not counted). */
  commandsPerRequest: number;
  commands: Map<string, number>;
}

/**
 * Counts what one process sends to Redis while `drive` runs `requests` requests one after another,
 * with MONITOR, keeping only that process's own connections.
 */
export async function countRedisTrips(
  redisUrl: string,
  pid: number,
  requests: number,
  drive: () => Promise<void>,
): Promise<TripCount> {
  const redisPort = Number(new URL(redisUrl).port);
  const ports = connectionPortsOf(pid, redisPort);
  if (ports.size === 0) throw new Error(`process ${pid} has no connection to Redis on port ${redisPort}`);
  const { monitor, failure } = await startMonitor(redisUrl);
  let trips = 0;
  let total = 0;
  const commands = new Map<string, number>();
  const inMulti = new Set<string>();
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    const port = Number(source.split(':').pop());
    if (source === 'lua' || !ports.has(port)) return;
    const command = String(args[0]).toLowerCase();
    if (command === 'multi') {
      inMulti.add(source);
      trips++;
      return;
    }
    if (command === 'exec') {
      inMulti.delete(source);
      return;
    }
    if (!inMulti.has(source)) trips++;
    total++;
    commands.set(command, (commands.get(command) ?? 0) + 1);
  });
  try {
    await new Promise((resolve) => setTimeout(resolve, 200));
    await drive();
    // Publishing an event happens right after the response: give it a moment to land.
    await new Promise((resolve) => setTimeout(resolve, 500));
  } finally {
    monitor.disconnect();
  }
  const lost = failure();
  if (lost) throw new Error(`MONITOR lost lines while counting: ${lost.message}`);
  const perRequest = new Map([...commands].map(([name, count]) => [name, count / requests]));
  return { tripsPerRequest: trips / requests, commandsPerRequest: total / requests, commands: perRequest };
}
