import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'undici';

/** Where Debian's `chromium` package puts the browser, unless CHROMIUM_PATH names another. */
export function chromiumPath(): string {
  const candidates = [process.env.CHROMIUM_PATH, 'chromium', 'chromium-browser', 'google-chrome'].filter(
    (candidate): candidate is string => Boolean(candidate),
  );
  const found = candidates.find((candidate) => spawnSync(candidate, ['--version'], { stdio: 'ignore' }).status === 0);
  if (!found)
    throw new Error(
      "No Chromium to load /docs with: install Debian's package (apt-get install -y chromium) or set CHROMIUM_PATH. " +
        'This test does not skip: it is how the suite knows the reference page fetches nothing from other hosts.',
    );
  return found;
}

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * A headless Chromium driven over the DevTools protocol (no browser-automation package): one page at a
 * time, recording every request the page makes.
 */
export class HeadlessChromium {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: Json) => void; reject: (error: Error) => void }>();
  private readonly listeners: Array<(method: string, params: Json, sessionId?: string) => void> = [];

  private constructor(
    private readonly child: ChildProcess,
    private readonly socket: WebSocket,
    private readonly profile: string,
  ) {
    socket.addEventListener('message', (message) => {
      const data = JSON.parse(String(message.data)) as Json;
      if (data.id !== undefined) {
        const waiting = this.pending.get(data.id);
        this.pending.delete(data.id);
        if (data.error) waiting?.reject(new Error(`${data.error.message} (${data.error.code})`));
        else waiting?.resolve(data.result ?? {});
      } else for (const listener of this.listeners) listener(data.method, data.params ?? {}, data.sessionId);
    });
  }

  static async launch(): Promise<HeadlessChromium> {
    const profile = mkdtempSync(join(tmpdir(), 'chromium-'));
    const child = spawn(
      chromiumPath(),
      [
        '--headless=new',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-dev-shm-usage',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-default-apps',
        '--disable-sync',
        '--remote-debugging-port=0',
        `--user-data-dir=${profile}`,
        'about:blank',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`Chromium did not start within 30 s:\n${stderr}`)), 30_000);
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        const match = /DevTools listening on (ws:\/\/\S+)/.exec(stderr);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      });
      child.once('exit', (code) => reject(new Error(`Chromium exited (${code}) before listening:\n${stderr}`)));
    });
    const socket = new WebSocket(url);
    await new Promise((resolve, reject) => {
      socket.addEventListener('open', resolve, { once: true });
      socket.addEventListener('error', reject, { once: true });
    });
    return new HeadlessChromium(child, socket, profile);
  }

  private send(method: string, params: Json = {}, sessionId?: string): Promise<Json> {
    const id = this.nextId++;
    this.socket.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }

  /**
   * Loads `url` in a fresh page and waits until `ready` (evaluated in the page) is true and the network has
   * been quiet for `quietMs`; returns every URL the page requested and a function to evaluate more.
   */
  async load(
    url: string,
    ready: string,
    { timeoutMs = 30_000, quietMs = 1_000 } = {},
  ): Promise<{ requests: string[]; evaluate: <T>(expression: string) => Promise<T>; close: () => Promise<void> }> {
    const { targetId } = await this.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await this.send('Target.attachToTarget', { targetId, flatten: true });
    const requests: string[] = [];
    let lastRequestAt = Date.now();
    this.listeners.push((method, params, from) => {
      if (from !== sessionId) return;
      if (method === 'Network.requestWillBeSent') {
        requests.push(params.request.url);
        lastRequestAt = Date.now();
      }
    });
    await this.send('Network.enable', {}, sessionId);
    await this.send('Page.enable', {}, sessionId);
    await this.send('Page.navigate', { url }, sessionId);
    const evaluate = async <T>(expression: string): Promise<T> => {
      const { result, exceptionDetails } = await this.send(
        'Runtime.evaluate',
        { expression, returnByValue: true, awaitPromise: true },
        sessionId,
      );
      if (exceptionDetails) throw new Error(`in the page: ${JSON.stringify(exceptionDetails.exception?.description)}`);
      return result.value as T;
    };
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const isReady = await evaluate<boolean>(`Boolean(${ready})`).catch(() => false);
      if (isReady && Date.now() - lastRequestAt >= quietMs) break;
      if (Date.now() > deadline)
        throw new Error(`${url} was not ready within ${timeoutMs} ms (${ready}); requests: ${requests.join(', ')}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return { requests, evaluate, close: async () => void (await this.send('Target.closeTarget', { targetId })) };
  }

  async close(): Promise<void> {
    await this.send('Browser.close').catch(() => {});
    this.socket.close();
    await new Promise((resolve) => {
      if (this.child.exitCode !== null) return resolve(undefined);
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
      this.child.once('exit', () => (clearTimeout(timer), resolve(undefined)));
    });
    rmSync(this.profile, { recursive: true, force: true });
  }
}
