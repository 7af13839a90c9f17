// `npx tsx scripts/hardening/slow-clients.ts [observe-seconds]`: how long one web process (default
// configuration) keeps connections of slow or silent clients open (issue 16, finding 3). Each client
// is a raw socket; the run ends when every connection was closed by the server or the observation
// time (default 75 s) ran out. Prints one row per client.

import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { ADMIN_TOKEN, startMeasuredApp, type MeasuredApp } from './stack.js';

interface Outcome {
  client: string;
  'closed by server after s': string;
  'first answer line': string;
}

/** Opens a socket, runs `behave` on it, and resolves when the server closes it or `observeMs` passes. */
function observe(
  port: number,
  client: string,
  observeMs: number,
  behave: (socket: Socket, closed: () => boolean) => void,
): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const started = performance.now();
    let answer = '';
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({
        client,
        'closed by server after s': closed
          ? ((performance.now() - started) / 1000).toFixed(1)
          : `still open at ${observeMs / 1000}`,
        'first answer line': answer.split('\r\n')[0] || '(none)',
      });
    };
    const timer = setTimeout(() => finish(false), observeMs);
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
    socket.on('close', () => finish(true));
    socket.on('error', () => finish(true));
    socket.on('connect', () => behave(socket, () => done));
  });
}

/** Writes one byte of `text` every `everyMs` while the socket is open. */
function trickle(socket: Socket, text: string, everyMs: number, closed: () => boolean): void {
  let at = 0;
  const next = () => {
    if (closed() || at >= text.length) return;
    socket.write(text.charAt(at++));
    setTimeout(next, everyMs);
  };
  next();
}

/** A company, a user and an API key through the admin API: requests below pass authentication and wait for their body. */
async function seedKey(app: MeasuredApp['app']): Promise<string> {
  const call = async (url: string, payload: object) => {
    const response = await app.inject({
      method: 'POST',
      url: `/v1/admin${url}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload,
    });
    return response.json();
  };
  const company = await call('/companies', { name: 'Slow' });
  const user = await call(`/companies/${company.company_id}/users`, { name: 'A', email: 'a@example.com' });
  return (await call(`/companies/${company.company_id}/api-keys`, { name: 'k', created_by: user.user_id })).key;
}

const observeMs = Number(process.argv[2] ?? 75) * 1000;
const stack = await startMeasuredApp();
const port = Number(new URL(stack.url).port);
const key = await seedKey(stack.app);
const post = (length: number) =>
  `POST /v1/ext/items HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

const outcomes = await Promise.all([
  observe(port, 'part of a body, then silence', observeMs, (socket) => socket.write(`${post(100)}{"name":`)),
  observe(port, 'body trickled, a byte every 2 s', observeMs, (socket, closed) => {
    socket.write(post(1_000));
    trickle(socket, '{"name":"' + 'x'.repeat(980) + '"}', 2_000, closed);
  }),
  observe(port, 'headers trickled, a byte every 1 s', observeMs, (socket, closed) =>
    trickle(socket, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ${'y'.repeat(500)}\r\n\r\n`, 1_000, closed),
  ),
  observe(port, 'connected, nothing sent', observeMs, () => {}),
  observe(port, 'one request answered, then idle (keep-alive)', observeMs, (socket) =>
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'),
  ),
]);
console.table(outcomes);
await stack.close();
