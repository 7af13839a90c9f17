import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { freePort } from './redis-server.js';

interface ClusterNode {
  port: number;
  dir: string;
  child?: ChildProcess;
}

/**
 * A throw-away Redis Cluster on loopback built from `redis-server --cluster-enabled yes` and
 * `redis-cli --cluster create`: 3 masters, optionally one replica each (needed to survive a master's
 * death). Nothing is persisted; every node's files live in one temporary directory.
 */
export class LocalRedisCluster {
  private constructor(
    private readonly nodes: ClusterNode[],
    private readonly root: string,
  ) {}

  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,...`, the REDIS_URL form the product accepts for a cluster. */
  get url(): string {
    return `redis+cluster://${this.nodes.map((node) => `127.0.0.1:${node.port}`).join(',')}`;
  }

  get ports(): number[] {
    return this.nodes.map((node) => node.port);
  }

  static async start(options: { replicas?: 0 | 1; nodeTimeoutMs?: number } = {}): Promise<LocalRedisCluster> {
    const replicas = options.replicas ?? 0;
    const root = mkdtempSync(join(tmpdir(), 'redis-cluster-'));
    const nodes: ClusterNode[] = [];
    for (let index = 0; index < 3 * (1 + replicas); index++) {
      nodes.push({ port: await freePort(), dir: root });
    }
    const cluster = new LocalRedisCluster(nodes, root);
    for (const node of nodes) cluster.spawnNode(node, options.nodeTimeoutMs ?? 1_000);
    await Promise.all(nodes.map((node) => waitUntilAnswering(node.port)));
    const create = spawnSync(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...nodes.map((node) => `127.0.0.1:${node.port}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (create.status !== 0) {
      await cluster.stop();
      throw new Error(`redis-cli --cluster create failed: ${create.stderr || create.stdout}`);
    }
    await cluster.waitUntilHealthy();
    return cluster;
  }

  /** SIGKILL one node, as a crashed host looks to clients and to the other nodes. */
  async killNode(port: number): Promise<void> {
    const node = this.nodes.find((candidate) => candidate.port === port);
    const child = node?.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    node.child = undefined;
  }

  /** The port of the master serving `key`'s hash slot now. */
  async masterPortFor(key: string): Promise<number> {
    const alive = this.nodes.find((node) => node.child && node.child.exitCode === null);
    const probe = new Cluster([{ host: '127.0.0.1', port: alive!.port }], { lazyConnect: true });
    try {
      await probe.connect();
      const slot = Number(await probe.call('CLUSTER', 'KEYSLOT', key));
      const master = probe.slots[slot]?.[0];
      if (!master) throw new Error(`no master serves slot ${slot}`);
      return Number(master.split(':')[1]);
    } finally {
      probe.disconnect();
    }
  }

  /**
   * Every live node says the cluster is ok and maps every slot to a live master. Right after a kill the
   * nodes still say ok (they have not noticed yet), so the slot map is what shows the failover is over.
   */
  async waitUntilHealthy(timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const live = this.nodes.filter((node) => node.child && node.child.exitCode === null).map((node) => node.port);
      const views = await Promise.all(live.map((port) => clusterView(port)));
      const healthy = views.every(
        (view) =>
          view.state === 'ok' && view.masterPorts.length > 0 && view.masterPorts.every((port) => live.includes(port)),
      );
      if (live.length > 0 && healthy) return;
      await sleep(100);
    }
    throw new Error('the Redis cluster did not become healthy');
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((node) => this.killNode(node.port)));
    rmSync(this.root, { recursive: true, force: true });
  }

  private spawnNode(node: ClusterNode, nodeTimeoutMs: number): void {
    node.child = spawn(
      'redis-server',
      [
        '--port',
        String(node.port),
        '--bind',
        '127.0.0.1',
        '--protected-mode',
        'no',
        '--save',
        '',
        '--appendonly',
        'no',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(node.dir, `nodes-${node.port}.conf`),
        '--cluster-node-timeout',
        String(nodeTimeoutMs),
        '--dir',
        node.dir,
      ],
      { stdio: 'ignore' },
    );
  }
}

/** One node's cluster state and the ports of the masters its slot map names. */
async function clusterView(port: number): Promise<{ state: string; masterPorts: number[] }> {
  const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => {});
  try {
    await probe.connect();
    const info = String(await probe.call('CLUSTER', 'INFO'));
    // CLUSTER SLOTS rows: [start, end, [masterHost, masterPort, id], ...replicas].
    const slots = (await probe.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
    // A replica that has not synced yet could not take over from its master.
    const replication = String(await probe.call('INFO', 'replication'));
    const unsynced = /role:slave/.test(replication) && !/master_link_status:up/.test(replication);
    return {
      state: unsynced ? 'replica-syncing' : (/cluster_state:(\w+)/.exec(info)?.[1] ?? 'unknown'),
      masterPorts: slots.map((row) => Number(row[2][1])),
    };
  } catch {
    return { state: 'down', masterPorts: [] };
  } finally {
    probe.disconnect();
  }
}

async function waitUntilAnswering(port: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const probe = new Redis(port, '127.0.0.1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    probe.on('error', () => {});
    try {
      await probe.connect();
      if ((await probe.ping()) === 'PONG') return;
    } catch {
      // not listening yet
    } finally {
      probe.disconnect();
    }
    await sleep(50);
  }
  throw new Error(`redis-server on port ${port} did not start`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
