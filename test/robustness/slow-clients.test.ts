import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/shared/config.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createTenant } from '../helpers/fixtures.js';

/**
 * Issue 16 finding 3 (slowloris), with raw sockets. Small timeouts from the configuration keep it fast:
 * a whole request within 1.2 s, headers within 0.6 s, idle keep-alive 0.4 s.
 */
const REQUEST_MS = 1_200;
const HEADERS_MS = 600;
const KEEP_ALIVE_MS = 400;
/** Far above any limit here: a connection still open then was never going to be closed. */
const GIVE_UP_MS = 10_000;

let t: TestApp;
let port: number;
let key: string;

beforeAll(async () => {
  t = await buildTestApp({
    REQUEST_TIMEOUT_MS: String(REQUEST_MS),
    HEADERS_TIMEOUT_MS: String(HEADERS_MS),
    KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_MS),
  });
  key = (await createTenant(t.app)).key;
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as { port: number }).port;
});
afterAll(async () => t?.close());

interface Closed {
  afterMs: number;
  answer: string;
}

/** A raw connection; resolves when the server closes it, throws when it is still open after GIVE_UP_MS. */
function rawConnection(behave: (socket: Socket, isOpen: () => boolean) => void): Promise<Closed> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const started = Date.now();
    let answer = '';
    let open = true;
    const timer = setTimeout(() => {
      open = false;
      socket.destroy();
      reject(
        new Error(`the server kept the connection open for ${GIVE_UP_MS} ms; it answered: ${answer || 'nothing'}`),
      );
    }, GIVE_UP_MS);
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
    socket.on('close', () => {
      if (!open) return;
      open = false;
      clearTimeout(timer);
      resolve({ afterMs: Date.now() - started, answer });
    });
    socket.on('error', () => {});
    socket.on('connect', () => behave(socket, () => open));
  });
}

function trickle(socket: Socket, text: string, everyMs: number, isOpen: () => boolean): void {
  let at = 0;
  const next = () => {
    if (!isOpen() || at >= text.length) return;
    socket.write(text.charAt(at++));
    setTimeout(next, everyMs);
  };
  next();
}

/** An authenticated create, so the server is waiting for the body (a missing key would be answered at once). */
const postHead = (length: number) =>
  `POST /v1/ext/items HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

function expectTimeoutProblem(answer: string): void {
  const [head, body = ''] = answer.split('\r\n\r\n');
  expect(head).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
  expect(head).toMatch(/\r\nContent-Type: application\/problem\+json\r\n/i);
  expect(JSON.parse(body)).toMatchObject({ status: 408, code: 'request_timeout', request_id: expect.any(String) });
}

describe('slow and silent clients are cut off (DECISIONS.md section 12.4)', () => {
  it('the defaults are 30 s for a whole request, 10 s for headers, 5 s for an idle keep-alive connection', async () => {
    const defaults = loadConfig({ NODE_ENV: 'test' });
    expect([defaults.REQUEST_TIMEOUT_MS, defaults.HEADERS_TIMEOUT_MS, defaults.KEEP_ALIVE_TIMEOUT_MS]).toEqual([
      30_000, 10_000, 5_000,
    ]);
    expect(t.app.server.requestTimeout).toBe(REQUEST_MS);
    expect(t.app.server.headersTimeout).toBe(HEADERS_MS);
    expect(t.app.server.keepAliveTimeout).toBe(KEEP_ALIVE_MS);
    expect(() => loadConfig({ REQUEST_TIMEOUT_MS: '1000', HEADERS_TIMEOUT_MS: '2000' })).toThrow(
      'Invalid configuration: HEADERS_TIMEOUT_MS: must not exceed REQUEST_TIMEOUT_MS',
    );
  });

  it('part of a body, then silence: 408 problem+json and closed once the request time is up', async () => {
    const closed = await rawConnection((socket) => socket.write(`${postHead(100)}{"name":`));
    expect(closed.afterMs).toBeGreaterThanOrEqual(REQUEST_MS - 50);
    expectTimeoutProblem(closed.answer);
  });

  it('a body trickled a byte at a time is closed once the request time is up, however busy it keeps the line', async () => {
    const closed = await rawConnection((socket, isOpen) => {
      socket.write(postHead(200));
      trickle(socket, `{"name":"${'x'.repeat(188)}"}`, 100, isOpen); // would take 20 s
    });
    expect(closed.afterMs).toBeGreaterThanOrEqual(REQUEST_MS - 50);
    expectTimeoutProblem(closed.answer);
  });

  it('headers trickled a byte at a time are closed once the headers time is up', async () => {
    const closed = await rawConnection((socket, isOpen) =>
      trickle(socket, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ${'y'.repeat(200)}\r\n\r\n`, 50, isOpen),
    );
    expect(closed.afterMs).toBeGreaterThanOrEqual(HEADERS_MS - 50);
    expectTimeoutProblem(closed.answer);
  });

  it('an idle keep-alive connection is closed after its request was answered', async () => {
    const closed = await rawConnection((socket) => socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
    expect(closed.answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(closed.answer).toMatch(/keep-alive/i);
    expect(closed.afterMs).toBeGreaterThanOrEqual(KEEP_ALIVE_MS - 50);
  });

  it('a request that arrives in time is served as usual on the same kind of connection', async () => {
    const closed = await rawConnection((socket) =>
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'),
    );
    expect(closed.answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(closed.answer).toContain('{"status":"ok"}');
  });
});

describe('malformed HTTP is answered as problem+json', () => {
  it('a request line that is not HTTP gets 400 bad_request and the connection closes', async () => {
    const closed = await rawConnection((socket) => socket.write('HELLO THERE\r\n\r\n'));
    const [head, body = ''] = closed.answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(head).toMatch(/\r\nContent-Type: application\/problem\+json\r\n/i);
    expect(JSON.parse(body)).toMatchObject({
      status: 400,
      code: 'bad_request',
      type: expect.stringContaining('bad_request'),
    });
  });

  it('headers over the size limit get 431', async () => {
    const closed = await rawConnection((socket) =>
      socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'z'.repeat(20_000)}\r\n\r\n`),
    );
    const [head, body = ''] = closed.answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 431 /);
    expect(JSON.parse(body)).toMatchObject({ status: 431, code: 'headers_too_large' });
  });
});
