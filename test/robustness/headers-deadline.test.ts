import { connect } from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createTenant } from '../helpers/fixtures.js';
import type { Server } from 'node:http';

/**
 * Issue 59 finding 10: a connection whose headers never complete (`GET /healthz HTTP/1.1\r\nHost: x\r\n`,
 * nothing more) was still open after 20 s in 3 of 8 runs of the hidden suite, each time after minutes of
 * keep-alive traffic from many clients; alone against a fresh process it closed at ~10.7 s. Node enforces
 * headersTimeout only from its connections list, visited every connectionsCheckingInterval; whatever
 * makes that visit miss a connection, the 10 s bound must not rest on it alone. Defaults as in production
 * (headers 10 s, request 30 s, keep-alive 5 s); the traffic comes first, then the silent connection.
 */
const HEADERS_MS = 10_000;
const CLIENTS = 40;
const TRAFFIC_MS = 2_500;

let t: TestApp;
let port: number;
let key: string;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' });
  key = (await createTenant(t.app)).key;
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as { port: number }).port;
});
afterAll(async () => t?.close());

/** Keep-alive requests from many clients (pooled connections, some pipelined); returns the statuses seen. */
async function keepAliveTraffic(forMs: number): Promise<Map<number, number>> {
  const agents = [
    new Agent({ connections: CLIENTS, keepAliveTimeout: 60_000 }),
    new Agent({ connections: CLIENTS / 4, keepAliveTimeout: 60_000, pipelining: 4 }),
  ];
  const statuses = new Map<number, number>();
  const paths = ['/healthz', '/v1/ext/items?limit=5', '/v1/ext/pipelines', '/v1/ext/nope'];
  const until = Date.now() + forMs;
  let sent = 0;
  const client = async (index: number) => {
    while (Date.now() < until) {
      const response = await request(`http://127.0.0.1:${port}${paths[sent++ % paths.length]}`, {
        dispatcher: agents[index % agents.length],
        headers: { 'x-api-key': key },
      });
      await response.body.dump();
      statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, (_, index) => client(index)));
  await Promise.all(agents.map((agent) => agent.close()));
  return statuses;
}

/** Opens a connection, sends `text` and nothing more; resolves with when it closed and what it was answered. */
function silentAfter(text: string, giveUpMs: number): Promise<{ closedAfterMs: number | undefined; answer: string }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
    socket.on('error', () => {});
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ closedAfterMs: undefined, answer });
    }, giveUpMs);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ closedAfterMs: Date.now() - started, answer });
    });
  });
}

/**
 * Stops the server's periodic check of headersTimeout/requestTimeout, as if every visit missed the
 * connection (what the hidden suite saw); the bound must then hold by the connection's own deadline.
 */
function stopNodesPeriodicCheck(server: Server): void {
  const interval = Object.getOwnPropertySymbols(server).find(
    (symbol) => symbol.description === 'http.server.connectionsCheckingInterval',
  );
  expect(interval, 'Node keeps its checking interval on the server').toBeDefined();
  clearInterval((server as unknown as Record<symbol, NodeJS.Timeout>)[interval!]);
}

describe('a request whose headers never complete is closed within the headers timeout', () => {
  it(
    "after keep-alive traffic from many clients, even when Node's periodic check misses it: 408 and closed at 10-12 s",
    {
      timeout: 25_000,
    },
    async () => {
      const statuses = await keepAliveTraffic(TRAFFIC_MS);
      expect([...statuses.keys()].sort()).toEqual([200, 404]); // the traffic itself was served
      expect([...statuses.values()].reduce((sum, count) => sum + count, 0)).toBeGreaterThan(500);

      stopNodesPeriodicCheck(t.app.server);
      // A keep-alive client that is never idle for long keeps its connection: the deadline is re-armed per response.
      const steady = new Agent({ connections: 1, keepAliveTimeout: 60_000 });
      const steadyStatuses: number[] = [];
      const steadyClient = (async () => {
        for (let i = 0; i < 4; i++) {
          const response = await request(`http://127.0.0.1:${port}/healthz`, { dispatcher: steady });
          await response.body.dump();
          steadyStatuses.push(response.statusCode);
          await new Promise((resolve) => setTimeout(resolve, 3_000));
        }
      })();
      const silent = await silentAfter('GET /healthz HTTP/1.1\r\nHost: x\r\n', 14_000);
      await steadyClient;
      await steady.close();

      expect(silent.closedAfterMs, `still open after 14 s; answered: ${silent.answer || 'nothing'}`).toBeDefined();
      expect(silent.closedAfterMs).toBeGreaterThanOrEqual(HEADERS_MS - 100);
      expect(silent.closedAfterMs).toBeLessThanOrEqual(12_000);
      const [head, body = ''] = silent.answer.split('\r\n\r\n');
      expect(head).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
      expect(JSON.parse(body)).toMatchObject({ status: 408, code: 'request_timeout' });
      expect(steadyStatuses).toEqual([200, 200, 200, 200]);
    },
  );
});
