import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/redis-server.js';
import { testConfig, uniqueName } from '../helpers/app.js';
import { stopGracefully } from '../helpers/processes.js';

const root = join(import.meta.dirname, '../..');

interface Step {
  heading: string;
  commands: string;
  /** The text block after the commands: what they print, `…` standing for any run of characters. */
  expected: string | undefined;
}

/** The README's quick start as a newcomer reads it: its shell blocks in order, each with the output shown after it. */
function quickStartSteps(readme: string): Step[] {
  const section = /^## Quick start\n([\s\S]*?)^## /m.exec(readme)?.[1];
  if (!section) throw new Error('README.md has no "## Quick start" section');
  const steps: Step[] = [];
  let heading = '';
  for (const match of section.matchAll(/^### (.+)$|^```(\w*)\n([\s\S]*?)^```$/gm)) {
    if (match[1]) heading = match[1];
    else if (match[2] === 'sh') steps.push({ heading, commands: match[3]!, expected: undefined });
    else if (match[2] === 'text' && steps.length > 0 && steps.at(-1)!.expected === undefined)
      steps.at(-1)!.expected = match[3]!;
  }
  return steps;
}

/** One expected line against one printed line: literal, except `…`, which matches anything. */
function matches(expected: string, actual: string): boolean {
  const pattern = expected
    .split('…')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${pattern}$`).test(actual);
}

const stateDir = mkdtempSync(join(tmpdir(), 'newcomer-'));
let dev: ChildProcess | undefined;
let port: number;
beforeAll(async () => {
  for (const tool of ['curl', 'jq', 'bash'])
    if (spawnSync(tool, ['--version'], { stdio: 'ignore' }).status !== 0)
      throw new Error(`The quick start needs ${tool} on PATH (README: Prerequisites)`);
  // `npm run dev` as the README starts it, on the test's MongoDB and Redis, with its state beside the steps.
  const config = testConfig();
  port = await freePort();
  dev = spawn(process.execPath, ['--import', 'tsx', 'src/dev.ts'], {
    cwd: root,
    env: {
      ...process.env,
      HOST: '',
      ADMIN_TOKEN: '',
      PORT: String(port),
      MONGO_URL: config.MONGO_URL!,
      MONGO_DB: uniqueName('newcomer'),
      REDIS_URL: config.REDIS_URL,
      QUEUE_PREFIX: uniqueName('q'),
      DEV_STATE_DIR: join(stateDir, '.dev'),
      LOG_LEVEL: 'warn',
      NODE_ENV: 'development',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  dev.stdout!.on('data', (chunk) => (output += chunk));
  dev.stderr!.on('data', (chunk) => (output += chunk));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm run dev did not start:\n${output}`)), 90_000);
    dev!.stdout!.on('data', () => {
      if (/try\s+:/.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    });
    dev!.once('exit', (code) => reject(new Error(`npm run dev exited ${code}:\n${output}`)));
  });
}, 120_000);
afterAll(async () => {
  if (dev) await stopGracefully(dev);
  rmSync(stateDir, { recursive: true, force: true });
});

describe('a newcomer following the README quick start', () => {
  it('finds the quick start in the form this test reads: shell steps, each with its expected output', () => {
    const steps = quickStartSteps(readFileSync(join(root, 'README.md'), 'utf8'));
    expect(steps.length).toBeGreaterThanOrEqual(5);
    expect(steps.filter((step) => step.expected === undefined).map((step) => step.commands)).toEqual([]);
    const commands = steps.map((step) => step.commands).join('\n');
    // The hook's secret is kept, and the hook subscribes with a list of types.
    expect(commands).toMatch(/SECRET=\$\(echo "\$HOOK" \| jq -r \.secret\)/);
    expect(commands).toContain('"events":[');
    expect(commands).not.toContain('"event":');
  });

  it('gets, at every step, the output the README shows', async () => {
    const steps = quickStartSteps(readFileSync(join(root, 'README.md'), 'utf8'));
    const receiverPort = await freePort();
    // The one substitution: this run's ports instead of the README's 3000 and 8787 (both may be taken here).
    const script = steps
      .map((step, index) => `echo '@@step ${index}@@'\n${step.commands}`)
      .join('\n')
      .replaceAll('127.0.0.1:3000', `127.0.0.1:${port}`)
      .replaceAll('8787', String(receiverPort));
    const run = spawn('bash', ['-e', '-o', 'pipefail', '-c', script], {
      cwd: stateDir,
      detached: true, // its own process group: the receiver it starts goes with it
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    run.stdout.on('data', (chunk) => (stdout += chunk));
    run.stderr.on('data', (chunk) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => process.kill(-run.pid!, 'SIGKILL'), 60_000);
      run.once('exit', (exitCode) => (clearTimeout(timer), resolve(exitCode)));
    });
    try {
      process.kill(-run.pid!, 'SIGKILL');
    } catch {
      // the group is gone already
    }

    const printed = stdout.split(/^@@step (\d+)@@\n/m);
    for (const [index, step] of steps.entries()) {
      const at = printed.indexOf(String(index));
      const context = `step ${index} (${step.heading}):\n${step.commands}\nstderr:\n${stderr}`;
      expect(at, `never reached ${context}`).toBeGreaterThan(-1);
      const actual = (printed[at + 1] ?? '').replace(/\n$/, '').split('\n');
      const expected = step.expected!.replace(/\n$/, '').split('\n');
      const same = actual.length === expected.length && expected.every((line, i) => matches(line, actual[i]!));
      expect(same ? expected : actual, context).toEqual(expected);
    }
    expect(code, stderr).toBe(0);
  }, 90_000);
});
