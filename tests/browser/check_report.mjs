// Loads an fsprof HTML report in Debian's Chromium (headless, no network)
// and checks what a reader would see: no console errors, no request leaving
// the file, the expected number of charts, each drawn, and the log-axis
// switch working. Writes a screenshot for CI artifacts, and prints what the
// over-time and attribution charts show (JSON on stdout).
//
// usage: node check_report.mjs --html FILE --expect-charts N --screenshot OUT.png
// playwright-core is taken from $FSPROF_NODE_MODULES when set (the test
// suite installs it under the cargo target directory, not next to this
// file), else resolved as usual.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const modules = process.env.FSPROF_NODE_MODULES;
const require = createRequire(modules ? join(modules, '..', 'package.json') : import.meta.url);
const { chromium } = require('playwright-core');

function arg(name) {
  const k = process.argv.indexOf(name);
  if (k < 0 || k + 1 >= process.argv.length) {
    console.error(`missing ${name}`);
    process.exit(2);
  }
  return process.argv[k + 1];
}

const html = arg('--html');
const expected = Number(arg('--expect-charts'));
const shot = arg('--screenshot');
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(executablePath)) {
  console.error(`no Chromium at ${executablePath}: apt-get install chromium`);
  process.exit(3);
}

const profileDir = mkdtempSync(join(tmpdir(), 'fsprof-chromium-'));
const failures = [];
// A fresh user-data-dir (playwright passes it as --user-data-dir).
const browser = await chromium.launchPersistentContext(profileDir, {
  executablePath,
  headless: true,
  viewport: { width: 1400, height: 1600 },
  args: [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
  ],
});
try {
  const page = await browser.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') failures.push(`console error: ${m.text()}`);
  });
  page.on('pageerror', (e) => failures.push(`page error: ${e.message}`));
  page.on('request', (r) => {
    if (!r.url().startsWith('file:')) failures.push(`network request: ${r.url()}`);
  });
  await page.goto(pathToFileURL(html).href, { waitUntil: 'load' });

  const charts = await page.locator('figure.chart').count();
  if (charts !== expected) failures.push(`expected ${expected} charts, found ${charts}`);

  // Every chart shows exactly one drawn SVG with bars or cells in it.
  const drawn = await page.$$eval('figure.chart', (figs) =>
    figs.map((f) => {
      const visible = [...f.querySelectorAll('svg')].filter((s) => {
        const r = s.getBoundingClientRect();
        return r.width > 100 && r.height > 100 && getComputedStyle(s.parentElement).display !== 'none';
      });
      return { visible: visible.length, marks: visible.length ? visible[0].querySelectorAll('rect title').length : 0 };
    }));
  drawn.forEach((d, k) => {
    if (d.visible !== 1) failures.push(`chart ${k}: ${d.visible} visible drawings`);
    if (d.marks === 0) failures.push(`chart ${k}: no bars or cells`);
  });

  // The log-axis switch swaps every histogram to its log variant.
  const before = await page.locator('.ylog svg').first().isVisible().catch(() => false);
  await page.check('#logy');
  const after = await page.locator('.ylog svg').first().isVisible().catch(() => false);
  const linAfter = await page.locator('.ylin svg').first().isVisible().catch(() => true);
  if (before || !after || linAfter) failures.push(`log-axis switch: log visible ${before} -> ${after}, linear still visible ${linAfter}`);
  await page.uncheck('#logy');

  // What a reader sees of the charts whose axes carry a unit: the totals
  // over time and the attribution bars (title, axis title, tick labels,
  // and each bar's tooltip with its drawn width), for the caller to check
  // against the profile.
  const figures = await page.$$eval('figure.chart[data-kind="interval-total"], figure.chart[data-kind="attribution"]', (figs) =>
    figs.map((f) => {
      const svg = f.querySelector('svg');
      const texts = [...svg.querySelectorAll('text')];
      return {
        kind: f.dataset.kind,
        title: texts.length ? texts[0].textContent : '',
        ytitle: [...svg.querySelectorAll('text.ytitle')].map((t) => t.textContent).join(' '),
        yticks: [...svg.querySelectorAll('text.ytick')].map((t) => t.textContent),
        bars: [...svg.querySelectorAll('rect')].filter((r) => r.querySelector('title')).map((r) => ({
          tip: r.querySelector('title').textContent,
          width: r.getBoundingClientRect().width,
        })),
      };
    }));

  await page.screenshot({ path: shot });
  console.log(JSON.stringify({ html, charts, screenshot: shot, failures, figures }));
} finally {
  await browser.close();
  rmSync(profileDir, { recursive: true, force: true });
}
if (failures.length) {
  for (const f of failures) console.error(`FAIL: ${f}`);
  process.exit(1);
}
