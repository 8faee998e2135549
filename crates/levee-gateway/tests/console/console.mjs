// The console in Debian's Chromium, headless, over a running gateway
// (started by tests/console.rs with two fake providers: `gpt-busy` is
// throttled for 12 s on its first call, `gpt-capped` always finds its spend
// cap reached). Exits non-zero with every failed step named.
//
// Env: LEVEE_URL, LEVEE_CLIENT_KEY, LEVEE_ADMIN_KEY, CHROMIUM, MODULES (the
// node_modules setup.sh made), SCREENSHOT (where to save the page).
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(join(process.env.MODULES, 'resolve-from-here.js'));
const { chromium } = require('playwright-core');

const url = process.env.LEVEE_URL;
const WAIT = 20_000; // a generous bound for the page to catch up, never a timing assertion
const t0 = Date.now();
const log = (...a) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...a);
const failures = [];
const watchdog = setTimeout(() => { console.error('FAIL: the whole test took over 120 s'); process.exit(2); }, 120_000);
watchdog.unref();

const step = async (name, fn) => {
  try { await fn(); log('ok  ', name); } catch (e) { failures.push(`${name}: ${e.message.split('\n')[0]}`); log('FAIL', name, e.message.split('\n')[0]); }
};

const chat = (model) => fetch(`${url}/v1/chat/completions`, {
  method: 'POST',
  headers: { Authorization: `Bearer ${process.env.LEVEE_CLIENT_KEY}`, 'Content-Type': 'application/json' },
  body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
});

const row = (page, mechanism, state) => page.locator(`#scopes tr[data-mechanism="${mechanism}"][data-state="${state}"]`);
const seconds = (text) => {
  const m = /([\d.]+) (s|min)/.exec(text || '');
  return m ? Number(m[1]) * (m[2] === 'min' ? 60 : 1) : NaN;
};

const profile = mkdtempSync(join(tmpdir(), 'levee-console-'));
let context;
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM,
    headless: true,
    chromiumSandbox: false, // --no-sandbox: CI runs as root
    viewport: { width: 1280, height: 900 },
    args: ['--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--no-first-run', '--disable-quic', '--disable-gpu', '--disable-dev-shm-usage'],
    timeout: 60_000,
  });
  const page = context.pages()[0] ?? await context.newPage();
  page.setDefaultTimeout(WAIT);
  const consoleErrors = [];
  const requests = [];
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  context.on('request', (r) => requests.push(r.url()));
  page.on('dialog', (d) => d.accept());

  await step('the page loads and reads the state', async () => {
    const res = await page.goto(`${url}/levee/console`, { waitUntil: 'domcontentloaded' });
    if (!res.ok()) throw new Error(`HTTP ${res.status()}`);
    await page.locator('#updated', { hasText: 'Updated' }).waitFor();
    await page.locator('#status', { hasText: 'Live' }).waitFor();
  });

  await step('without the key, no admin control and the admin routes answer 401', async () => {
    const buttons = await page.locator('#scopes button, #routes button').count();
    if (buttons !== 0) throw new Error(`${buttons} buttons without a key`);
    const list = await fetch(`${url}/levee/admin/targets`);
    const act = await fetch(`${url}/levee/admin/targets/capped-account/unpark`, { method: 'POST' });
    if (list.status !== 401 || act.status !== 401) throw new Error(`admin answered ${list.status}, ${act.status}`);
  });

  await step('a 429 shows its target gated, and a spend cap parked', async () => {
    const [busy, capped] = await Promise.all([chat('gpt-busy'), chat('gpt-capped')]);
    log(`  the gateway answered ${busy.status} and ${capped.status}`);
    await row(page, 'gate', 'gated').first().waitFor();
    await row(page, 'park', 'parked').first().waitFor();
    await page.locator('#timeline li[data-to="gated"]').first().waitFor();
    await page.locator('#timeline li[data-to="parked"]').first().waitFor();
  });

  await step('the gate\'s countdown falls', async () => {
    const cell = row(page, 'gate', 'gated').first().locator('.reopens');
    const first = seconds(await cell.textContent());
    if (!(first > 0)) throw new Error(`no countdown: ${await cell.textContent()}`);
    await page.waitForFunction(([sel, before]) => {
      const m = /([\d.]+) s/.exec(document.querySelector(sel)?.textContent || '');
      return m && Number(m[1]) < before;
    }, ['#scopes tr[data-mechanism="gate"][data-state="gated"] .reopens', first]);
    await page.screenshot({ path: process.env.SCREENSHOT, fullPage: true });
  });

  await step('the gate clears when its wait ends', async () => {
    // The provider asked for 12 s.
    await row(page, 'gate', 'gated').first().waitFor({ state: 'detached', timeout: 40_000 });
    await row(page, 'gate', 'clear').first().waitFor();
    const why = await row(page, 'gate', 'clear').first().textContent();
    if (!/gated [\d.]+ s in the last hour/.test(why)) throw new Error(`no time gated shown: ${why}`);
  });

  await step('with the admin key, unpark returns the capped account', async () => {
    await page.locator('#admin-key').fill(process.env.LEVEE_ADMIN_KEY);
    await page.locator('#use-key').click();
    await page.locator('#key-status', { hasText: 'Admin controls on' }).waitFor();
    const unpark = row(page, 'park', 'parked').first().getByRole('button', { name: /^Unpark / });
    await unpark.waitFor();
    // By keyboard: the buttons are buttons.
    await unpark.press('Enter');
    await row(page, 'park', 'active').first().waitFor();
    // The unpark's own event names its origin once it has arrived.
    await row(page, 'park', 'active').first().locator('.changed-by', { hasText: /^manual/ }).waitFor();
    if (await page.locator('#admin-key').inputValue() !== '') throw new Error('the key stayed in the field');
    if ((await page.content()).includes(process.env.LEVEE_ADMIN_KEY)) throw new Error('the key is in the page');
  });

  await step('axe-core finds no serious or critical violation', async () => {
    // evaluate() runs under the page's Content-Security-Policy too; a script
    // tag would be refused.
    await page.evaluate(readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8'));
    const result = await page.evaluate(() => window.axe.run(document));
    for (const v of result.violations) log(`  axe ${v.impact}: ${v.id} (${v.nodes.length})`);
    const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    if (bad.length) throw new Error(bad.map((v) => `${v.impact} ${v.id}: ${v.help}`).join('; '));
  });

  const foreign = requests.filter((u) => !u.startsWith('data:') && new URL(u).hostname !== '127.0.0.1');
  if (requests.some((u) => u.includes(process.env.LEVEE_ADMIN_KEY))) failures.push('the admin key went into a URL');
  if (foreign.length) failures.push(`requests left loopback: ${[...new Set(foreign)].join(', ')}`);
  if (consoleErrors.length) failures.push(`console errors: ${consoleErrors.join(' | ')}`);
  log(`${requests.length} requests, all to ${new URL(url).host}`);
} catch (e) {
  failures.push(`harness: ${e.message}`);
} finally {
  await context?.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
}

if (failures.length) {
  console.error(`FAILED (${failures.length}):\n - ${failures.join('\n - ')}`);
  process.exit(1);
}
log('PASS');
