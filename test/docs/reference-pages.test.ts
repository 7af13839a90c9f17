import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { HeadlessChromium } from '../helpers/chromium.js';

// /docs and /docs/admin as a reader's browser shows them: headless Chromium (Debian's package) records every
// request the page makes. Without a Chromium the test fails saying how to get one; it never skips.
let t: TestApp;
let base: string;
let browser: HeadlessChromium;
beforeAll(async () => {
  t = await buildTestApp();
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  browser = await HeadlessChromium.launch();
});
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

const PAGES = [
  {
    path: '/docs',
    title: 'Pipeline Records API reference',
    rendered: 'Pipeline Records API',
    other: '/docs/admin',
    placeholder: 'prk_... (an API key)' as string | undefined,
  },
  {
    path: '/docs/admin',
    title: 'Pipeline Records admin API reference',
    rendered: 'Create a user',
    other: '/docs',
    placeholder: undefined, // a bearer token's field: the renderer says "Token"
  },
];

describe('the API reference pages in a browser', () => {
  for (const page of PAGES)
    it(`${page.path}: requests nothing from another host, says whose it is, and links to ${page.other}`, async () => {
      const loaded = await browser.load(
        `${base}${page.path}`,
        `document.querySelector('input[placeholder]') && document.body.innerText.includes(${JSON.stringify(page.rendered)})`,
      );
      try {
        expect(loaded.requests.length).toBeGreaterThan(2); // the page, the renderer, the document
        const elsewhere = loaded.requests.filter(
          (url) => !url.startsWith(`${base}/`) && !/^(data|blob|about):/.test(url),
        );
        expect(elsewhere, 'requests to another host').toEqual([]);

        expect(await loaded.evaluate('document.title')).toBe(page.title);
        const text = await loaded.evaluate<string>('document.body.innerText');
        expect(text).not.toContain('Integer numbers.'); // the renderer's filler for an undescribed integer
        expect(text).not.toMatch(/\ban user\b/i);
        const placeholders = await loaded.evaluate<string[]>(
          `[...document.querySelectorAll('input[placeholder]')].map((input) => input.placeholder)`,
        );
        if (page.placeholder) expect(placeholders).toContain(page.placeholder);
        expect(placeholders).not.toContain('QUxMIFlPVVIgQkFTRSBBUkUgQkVMT05HIFRPIFVT');
        const links = await loaded.evaluate<string[]>(
          `[...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href'))`,
        );
        expect(links).toContain(page.other);
      } finally {
        await loaded.close();
      }
    }, 60_000);
});
