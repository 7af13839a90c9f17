import type { FastifyInstance } from 'fastify';

/**
 * A deprecation of fields of a route's answer (docs/versioning.md): announced on every answer that
 * carries them with `Deprecation` (RFC 9745, the date it was deprecated) and `Sunset` (RFC 8594, the
 * date from which they may be gone), documented as deprecated in the OpenAPI document, and kept until
 * the sunset, at least six months.
 */
export interface FieldDeprecation {
  fields: string[];
  since: Date;
  sunset: Date;
}

/** The deliveries log's names from before the envelope's: `event_type` is `type`, and the two older copies. */
export const DELIVERY_FIELDS_DEPRECATION: FieldDeprecation = {
  fields: ['event_type', 'status_code', 'next_retry_at'],
  since: new Date('2026-12-07T00:00:00Z'),
  sunset: new Date('2027-06-30T00:00:00Z'),
};

export function deprecationHeaders(deprecation: FieldDeprecation): Record<string, string> {
  return {
    // RFC 9745: a Structured Fields date, `@` and Unix seconds.
    deprecation: `@${Math.floor(deprecation.since.getTime() / 1000)}`,
    // RFC 8594: an HTTP-date.
    sunset: deprecation.sunset.toUTCString(),
  };
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Fields of this route's answer that are deprecated: their answers carry Deprecation and Sunset. */
    deprecation?: FieldDeprecation;
  }
}

/** Sets the headers on the successful answers of every route that declares a deprecation. */
export function registerDeprecationHeaders(app: FastifyInstance): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    const deprecation = request.routeOptions.config?.deprecation;
    if (deprecation && reply.statusCode < 300) reply.headers(deprecationHeaders(deprecation));
    done(null, payload);
  });
}
