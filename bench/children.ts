import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/**
 * The compiled tree (`dist/bench`, from tsconfig.bench.json) this module runs from: `npm run bench`
 * compiles first, so every process runs plain JavaScript as in production (`npm start`), without
 * tsx's loader thread and its memory in the RSS figures.
 */
const COMPILED_ROOT = new URL('..', import.meta.url).pathname;

/** The compiled file of a source path such as `src/server.ts`. */
export function compiled(script: string): string {
  return join(COMPILED_ROOT, script.replace(/\.ts$/, '.js'));
}

/**
 * Every process the benchmark starts is registered here, so that a failure, a timeout or Ctrl-C
 * anywhere still ends all of them (SIGTERM, then SIGKILL), and nothing outlives `npm run bench`.
 */
export class Children {
  /** Running children; backends (the stand-in) are stopped last, after the services that use them. */
  private readonly running = new Map<ChildProcess, { name: string; backend: boolean; group: boolean }>();
  private readonly deferred: Array<() => Promise<unknown>> = [];

  /** Registers another resource to release in cleanup() (last registered, first released). */
  defer(release: () => Promise<unknown>): void {
    this.deferred.push(release);
  }

  /** Releases everything: deferred resources, then any child still running. Safe to call twice. */
  async cleanup(): Promise<void> {
    await Promise.all([...this.running].filter(([, info]) => !info.backend).map(([child]) => this.stop(child, 5_000)));
    while (this.deferred.length > 0) {
      const release = this.deferred.pop()!;
      await release().catch((error: unknown) => process.stderr.write(`cleanup: ${String(error)}\n`));
    }
    await this.stopAll();
  }

  /** `node [nodeArgs] <script>` with `script` a source path (`src/server.ts`) run from its compiled file; stderr is passed through. */
  spawnNode(
    name: string,
    script: string,
    env: Record<string, string>,
    options: { nodeArgs?: string[]; args?: string[]; stdout?: 'pipe' | 'ignore' | number; backend?: boolean } = {},
  ): ChildProcess {
    return this.spawn(
      name,
      process.execPath,
      [...(options.nodeArgs ?? []), compiled(script), ...(options.args ?? [])],
      {
        env: { ...process.env, ...env },
        stdio: ['ignore', options.stdout ?? 'ignore', 'inherit'],
      },
      options.backend,
    );
  }

  spawn(name: string, command: string, args: string[], options: SpawnOptions, backend = false): ChildProcess {
    const child = spawn(command, args, options);
    // A detached child leads its own process group: signals go to the group, so its own children end too.
    this.running.set(child, { name, backend, group: options.detached === true });
    child.once('exit', () => this.running.delete(child));
    return child;
  }

  private signal(child: ChildProcess, signal: NodeJS.Signals): void {
    try {
      if (this.running.get(child)?.group && child.pid) process.kill(-child.pid, signal);
      else child.kill(signal);
    } catch {
      // already gone
    }
  }

  /** Graceful stop (so --cpu-prof profiles get written), SIGKILL after `graceMs`. */
  async stop(child: ChildProcess | undefined, graceMs = 10_000): Promise<void> {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    this.signal(child, 'SIGTERM');
    const timer = setTimeout(() => this.signal(child, 'SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }

  async stopAll(graceMs = 5_000): Promise<void> {
    await Promise.all([...this.running.keys()].map((child) => this.stop(child, graceMs)));
  }

  /** Last resort from a synchronous `exit` handler. */
  killAllNow(): void {
    for (const child of this.running.keys()) this.signal(child, 'SIGKILL');
  }
}

/** Resolves with the first stdout line that starts with `prefix` (the rest of it), or fails when the child exits. */
export async function waitForLine(child: ChildProcess, prefix: string, timeoutMs: number): Promise<string> {
  const lines = createInterface({ input: child.stdout! });
  const timer = setTimeout(() => lines.close(), timeoutMs);
  try {
    for await (const line of lines) {
      if (line.startsWith(prefix)) return line.slice(prefix.length).trim();
    }
  } finally {
    clearTimeout(timer);
    // Keep draining: a child blocked on a full stdout pipe would stall the benchmark.
    child.stdout?.on('data', () => {});
  }
  throw new Error(`child ${child.pid} did not print "${prefix}" within ${timeoutMs} ms (exit ${child.exitCode})`);
}

/** Polls `url` until it answers 200, failing fast if the child dies first. */
export async function waitForHttp(url: string, child: ChildProcess, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${url}: the process exited (${child.exitCode ?? child.signalCode}) before answering`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}
