import { z } from 'zod';
import { authOf } from '../contracts/auth-context.js';
import { DELIVERY_FIELDS_DEPRECATION } from '../http/deprecation.js';
import { wellFormedFields } from '../http/error-handler.js';
import { noContent } from '../http/responses.js';
import { idPageQuery, pageByCreation, setNextPageHeaders } from '../shared/pagination.js';
import {
  createdHookSchema,
  createHookBody,
  deliveriesQuery,
  deliveryAttemptSchema,
  hookPingSchema,
  hookSchema,
  recoverBody,
  recoverySchema,
  redeliverySchema,
  rotatedSecretSchema,
  toHookResponse,
  updateHookBody,
} from './schemas.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const tags = ['hooks'];
const hookParams = z.object({ hook_id: z.string() });
const deliveryParams = hookParams.extend({ event_id: z.string() });

export const hooksRoutes: FastifyPluginAsyncZod = async (app) => {
  const hooks = app.services.hooks;

  app.post(
    '/hooks',
    {
      config: {
        scope: 'hooks:manage',
        referenceProblems: async (request) =>
          hooks.referenceProblems(
            authOf(request).companyId,
            wellFormedFields(createHookBody, request.body, ['target_url', 'filter', 'event', 'events']),
          ),
      },
      schema: {
        tags,
        summary: 'Subscribe a REST hook to one or more event types, optionally filtered to one pipeline',
        description:
          'Returns the signing secret once. Deliveries are Standard Webhooks signed POSTs of the event envelope (see webhooks). The same target_url and event types again answer 409 hook_exists with that hook_id (re-enabled if it was disabled), never its secret. At most HOOK_MAX_PER_COMPANY (25) hooks per company. Besides hooks:manage, task.* types need tasks:read, item.* types items:read and * both (403 insufficient_scope naming the missing one). The hook records the key that created it: revoking that key, or its expiry, disables the hook (disabled_reason key_revoked), and nothing re-enables it.',
        body: createHookBody,
        response: { 201: createdHookSchema },
      },
    },
    async (request, reply) => reply.code(201).send(await hooks.subscribe(authOf(request), request.body)),
  );

  app.get(
    '/hooks',
    {
      config: { scope: 'hooks:manage' },
      schema: {
        tags,
        summary: 'List REST hooks (without secrets)',
        querystring: idPageQuery,
        response: { 200: z.array(hookSchema) },
      },
    },
    async (request, reply) => {
      const companyId = authOf(request).companyId;
      const page = await pageByCreation(
        await app.services.cursors(),
        `hooks:${companyId}`,
        request.query,
        (afterId, limit) => app.services.hooks.list(authOf(request), afterId, limit),
      );
      setNextPageHeaders(request, reply, page.nextCursor);
      return page.rows.map((hook) => toHookResponse(hook));
    },
  );

  app.patch(
    '/hooks/:hook_id',
    {
      config: { scope: 'hooks:manage' },
      schema: {
        tags,
        summary: 'Change a REST hook: its target, event types, filter, or whether it is enabled',
        description:
          'The secret, the deliveries log and the key that created the hook stay. target_url is judged as at subscribe (private, loopback and metadata addresses are refused); new event types need their read scopes (task.*: tasks:read, item.*: items:read, *: both; 403 insufficient_scope). enabled false disables the hook (disabled_reason manual); enabled true re-enables a hook disabled manually or for failing and clears its failure state, so the 5-day rule starts again (a hook disabled because its key was revoked stays disabled: 400). Another hook with the same target and types answers 409 hook_exists.',
        params: hookParams,
        body: updateHookBody,
        response: { 200: hookSchema },
      },
    },
    async (request) => toHookResponse(await hooks.update(authOf(request), request.params.hook_id, request.body)),
  );

  app.delete(
    '/hooks/:hook_id',
    {
      config: { scope: 'hooks:manage' },
      schema: {
        tags,
        summary: 'Unsubscribe a REST hook',
        params: hookParams,
        response: { 204: noContent },
      },
    },
    async (request, reply) => {
      await hooks.unsubscribe(authOf(request), request.params.hook_id);
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/hooks/:hook_id/rotate-secret',
    {
      config: { scope: 'hooks:manage' },
      schema: {
        tags,
        summary: 'Rotate the signing secret: the new one is shown once; both sign for 24 h',
        description:
          'Until previous_secret_expires_at every delivery carries two signatures in webhook-signature (space-separated, one per secret), so receivers verify with either; then only the new secret signs. Rotating again within those 24 h stops the oldest secret at once (at most two are valid).',
        params: hookParams,
        response: { 200: rotatedSecretSchema },
      },
    },
    async (request) => hooks.rotateSecret(authOf(request), request.params.hook_id),
  );

  app.post(
    '/hooks/:hook_id/test',
    {
      config: { scope: 'hooks:manage' },
      schema: {
        tags,
        summary: 'Send a hook.ping event to the hook through the normal signed delivery',
        description:
          'The ping (`data: { hook_id }`) is signed, retried and listed in the deliveries like any event; a disabled hook is re-enabled.',
        params: hookParams,
        response: { 202: hookPingSchema },
      },
    },
    async (request, reply) => reply.code(202).send(await hooks.ping(authOf(request), request.params.hook_id)),
  );

  app.get(
    '/hooks/:hook_id/deliveries',
    {
      config: { scope: 'hooks:manage', deprecation: DELIVERY_FIELDS_DEPRECATION },
      schema: {
        tags,
        summary: 'Latest delivery attempts of a hook, newest first (at most 100); by status and period',
        description:
          'Each event sent to the hook is one delivery with its attempts. status narrows the list to deliveries whose latest attempt succeeded, that failed with no attempt to follow (`failed`: what POST .../recover sends again), or that wait for an attempt (`pending`); since and until (ISO 8601) to deliveries whose latest attempt was in [since, until). since after until is 400 naming since.',
        params: hookParams,
        querystring: deliveriesQuery,
        response: { 200: z.array(deliveryAttemptSchema) },
      },
    },
    async (request) => hooks.recentAttempts(authOf(request), request.params.hook_id, request.query),
  );

  app.post(
    '/hooks/:hook_id/recover',
    {
      config: { scope: 'hooks:manage' },
      schema: {
        tags,
        summary: 'Send again every event of a period that the hook did not receive',
        description:
          "Every event of the company that the hook takes (its types and filter), that occurred in [since, until) within retention (EVENTS_RETENTION_DAYS), and whose delivery to this hook has not succeeded (failed, or never attempted) is sent again, in sequence order, as a new attempt through the normal delivery (same webhook-id, the hook's in-flight limit, the retry schedule, listed in the deliveries). Answers 202 with how many; a delivery that succeeds meanwhile is not sent again. One recovery per hook at a time: 409 recovery_in_progress. A disabled hook is re-enabled (not one whose key was revoked: 400). since before retention, or not before until: 400 naming since.",
        params: hookParams,
        body: recoverBody,
        response: { 202: recoverySchema },
      },
    },
    async (request, reply) =>
      reply.code(202).send(await hooks.recover(authOf(request), request.params.hook_id, request.body)),
  );

  app.post(
    '/hooks/:hook_id/deliveries/:event_id/redeliver',
    {
      config: { scope: 'hooks:manage' },
      schema: {
        tags,
        summary: 'Send a delivered or failed event to the hook again (same webhook-id); re-enables a disabled hook',
        params: deliveryParams,
        response: { 202: redeliverySchema },
      },
    },
    async (request, reply) =>
      reply.code(202).send(await hooks.redeliver(authOf(request), request.params.hook_id, request.params.event_id)),
  );
};
