import { request as httpRequest } from 'node:http';
import { trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { traceRequests } from './requests.js';
import type { AddressInfo } from 'node:net';

const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }));

const app = Fastify();
let url = '';
beforeAll(async () => {
  traceRequests(app);
  app.get('/slow', async () => {
    await new Promise((resolve) => setTimeout(resolve, 300));
    return { ok: true };
  });
  app.get('/healthz', async () => ({ ok: true }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});
afterAll(() => app.close());

describe('the request span', () => {
  it('is named after the route and ends with the response status', async () => {
    exporter.reset();
    expect((await fetch(`${url}/slow`)).status).toBe(200);
    await expect.poll(() => exporter.getFinishedSpans().map((span) => span.name)).toEqual(['GET /slow']);
    expect(exporter.getFinishedSpans()[0]!.attributes['http.response.status_code']).toBe(200);
  });

  it('also ends when the client goes away before the response (no onResponse then)', async () => {
    exporter.reset();
    const client = httpRequest(`${url}/slow`);
    client.on('error', () => {});
    client.end();
    await new Promise((resolve) => setTimeout(resolve, 100));
    client.destroy();
    await expect.poll(() => exporter.getFinishedSpans().map((span) => span.name)).toEqual(['GET /slow']);
    expect(exporter.getFinishedSpans()[0]!.attributes['http.response.status_code']).toBeUndefined();
  });

  it('is not made for probes', async () => {
    exporter.reset();
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(exporter.getFinishedSpans()).toEqual([]);
  });
});
