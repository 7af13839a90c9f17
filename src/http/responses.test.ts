import { describe, expect, it } from 'vitest';
import { errorStatusesOf } from './responses.js';

const body = { body: {} };

describe('errorStatusesOf: the error responses a route documents, from what it is', () => {
  it('an external read: the checks every key runs through, 404 only with an id', () => {
    expect(errorStatusesOf('GET', '/v1/ext/items', {})).toEqual([400, 401, 402, 403, 429, 503]);
    expect(errorStatusesOf('GET', '/v1/ext/tasks/:task_id', {})).toEqual([400, 401, 402, 403, 429, 503, 404]);
  });

  it('an external POST adds idempotency (409, 422) and, with a body, 413 and 415', () => {
    expect(errorStatusesOf('POST', '/v1/ext/tasks', body).sort()).toEqual(
      [400, 401, 402, 403, 409, 413, 415, 422, 429, 503].sort(),
    );
    expect(errorStatusesOf('POST', '/v1/ext/hooks/:hook_id/test', {})).not.toContain(415);
  });

  it('If-Match routes add 412; item writes 409; an upsert PUT never answers 404', () => {
    expect(errorStatusesOf('DELETE', '/v1/ext/tasks/:task_id', {})).toContain(412);
    expect(errorStatusesOf('PATCH', '/v1/ext/tasks/:task_id', body)).not.toContain(412);
    expect(errorStatusesOf('PATCH', '/v1/ext/items/:item_id', body)).toEqual(expect.arrayContaining([409, 412]));
    const upsert = errorStatusesOf('PUT', '/v1/ext/items/by-external-id/:external_id', body);
    expect(upsert).toEqual(expect.arrayContaining([409, 412, 413, 415]));
    expect(upsert).not.toContain(404);
  });

  it('an admin route: the token and its failed-auth throttle, input when it takes any, 404 for what its path names, 503', () => {
    expect(errorStatusesOf('POST', '/v1/admin/companies', body)).toEqual([401, 429, 400, 503]);
    expect(errorStatusesOf('GET', '/v1/admin/companies/:company_id/users', {})).toEqual([401, 429, 404, 503]);
    expect(errorStatusesOf('GET', '/v1/admin/companies/:company_id/automation-runs', { querystring: {} })).toEqual([
      401, 429, 400, 404, 503,
    ]);
  });
});
