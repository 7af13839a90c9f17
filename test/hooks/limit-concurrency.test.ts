import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createTenant, expectProblem, ext } from '../helpers/fixtures.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' });
});
afterAll(async () => t?.close());

const CAP = 25; // HOOK_MAX_PER_COMPANY's default

describe('the per-company hook cap under concurrent subscribes', () => {
  it('40 parallel subscribes from a company with no hooks keep exactly 25 and refuse only the 15 beyond', async () => {
    const tenant = await createTenant(t.app);
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, n) =>
        ext(t.app, tenant.key, 'POST', '/hooks', { target_url: `https://hooks.example.com/r${n}`, event: '*' }),
      ),
    );
    const created = answers.filter((answer) => answer.statusCode === 201);
    const refused = answers.filter((answer) => answer.statusCode !== 201);
    expect(created).toHaveLength(CAP);
    for (const answer of refused) expectProblem(answer, 400, 'hook_limit_reached');
    expect(await t.db.collection('hooks').countDocuments({ company_id: tenant.companyId })).toBe(CAP);
    const listed = (await ext(t.app, tenant.key, 'GET', '/hooks?limit=100')).json();
    expect(listed.map((hook: { hook_id: string }) => hook.hook_id).sort()).toEqual(
      created.map((answer) => answer.json().hook_id).sort(),
    );
  });

  it('a slot freed by an unsubscribe is taken by the next subscribe, and only by one of several racing', async () => {
    const tenant = await createTenant(t.app);
    const subscribe = (n: number) =>
      ext(t.app, tenant.key, 'POST', '/hooks', { target_url: `https://hooks.example.com/s${n}`, event: '*' });
    const first = await Promise.all(Array.from({ length: CAP }, (_, n) => subscribe(n)));
    expect(first.every((answer) => answer.statusCode === 201)).toBe(true);
    const removed = first.slice(0, 2).map((answer) => answer.json().hook_id as string);
    await Promise.all(
      removed.map(async (hookId) =>
        expect((await ext(t.app, tenant.key, 'DELETE', `/hooks/${hookId}`)).statusCode).toBe(204),
      ),
    );
    const again = await Promise.all(Array.from({ length: 10 }, (_, n) => subscribe(100 + n)));
    expect(again.filter((answer) => answer.statusCode === 201)).toHaveLength(2);
    expect(await t.db.collection('hooks').countDocuments({ company_id: tenant.companyId })).toBe(CAP);
  });
});
