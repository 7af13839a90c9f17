import { Agent, buildConnector, request } from 'undici';
import { ForbiddenTargetError, type TargetGuard } from './target-guard.js';

export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** What came back: a status (any, including 3xx, which is never followed) or why nothing did. */
export type SendResult =
  | { kind: 'response'; statusCode: number; retryAfter?: string; durationMs: number }
  | { kind: 'error'; error: string; durationMs: number };

/** Receivers' answers are read only to free the connection for reuse; never more than this. */
const MAX_RESPONSE_BYTES = 64 * 1024;

function describe(error: unknown, timeoutMs: number): string {
  if (error instanceof ForbiddenTargetError) return `refused: ${error.message}`;
  const { name, code, message } = error as { name?: string; code?: string; message?: string };
  if (
    name === 'TimeoutError' ||
    name === 'AbortError' ||
    code === 'UND_ERR_CONNECT_TIMEOUT' ||
    code === 'UND_ERR_HEADERS_TIMEOUT'
  ) {
    return `timeout: no answer within ${timeoutMs} ms`;
  }
  return `connection failed: ${code ?? name ?? 'error'}${message ? ` (${message.slice(0, 200)})` : ''}`;
}

/**
 * POSTs webhooks over one keep-alive undici Agent (connections are reused per origin). Its connector
 * resolves each host through the SSRF guard at connect time and connects to exactly the address it
 * checked, so a name that resolved to a public address at subscribe time and to 127.0.0.1 now is refused.
 */
export class WebhookSender {
  private readonly agent: Agent;

  constructor(
    guard: TargetGuard,
    private readonly timeoutMs: number,
  ) {
    const connect = buildConnector({ timeout: timeoutMs });
    this.agent = new Agent({
      keepAliveTimeout: 30_000,
      connections: 32,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      // `host` (and so TLS SNI and certificate checks) keeps the original name; only the address is pinned.
      connect: (options, callback) => {
        guard.addressToConnect(options.hostname).then(
          (address) => connect({ ...options, hostname: address }, callback),
          (error: Error) => callback(error, null),
        );
      },
    });
  }

  async send(webhook: WebhookRequest): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    try {
      const response = await request(webhook.url, {
        dispatcher: this.agent,
        method: 'POST',
        headers: webhook.headers,
        body: webhook.body,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      await response.body.dump({ limit: MAX_RESPONSE_BYTES }).catch(() => {});
      const retryAfter = response.headers['retry-after'];
      return {
        kind: 'response',
        statusCode: response.statusCode,
        retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
        durationMs: elapsed(),
      };
    } catch (error) {
      return { kind: 'error', error: describe(error, this.timeoutMs), durationMs: elapsed() };
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
