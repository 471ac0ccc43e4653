/**
 * The README's screenshot: renders a run's HTML report and takes the top of it in Debian's
 * chromium (see tools/browser/chromium.ts) into a small PNG.
 *
 *   node --import tsx tools/report-screenshot.ts                 # the run fixture -> docs/report.png
 *   node --import tsx tools/report-screenshot.ts --fresh         # a fresh `run --simulate` instead
 *   node --import tsx tools/report-screenshot.ts --dir RESULTS --out shot.png --width 1200 --height 900
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { renderHtmlReport } from '../src/report/html.js';
import { loadReportInput } from '../src/results/load.js';
import { launchChromium } from './browser/chromium.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const { values } = parseArgs({
  options: {
    dir: { type: 'string', default: join(ROOT, 'test/fixtures/report/run') },
    fresh: { type: 'boolean', default: false },
    out: { type: 'string', default: join(ROOT, 'docs/report.png') },
    width: { type: 'string', default: '1200' },
    height: { type: 'string', default: '900' },
  },
});

const work = mkdtempSync(join(tmpdir(), 'infergauge-report-screenshot-'));
try {
  let dir = resolve(values.dir);
  if (values.fresh) {
    dir = join(work, 'run');
    const r = spawnSync(
      process.execPath,
      [
        '--import',
        import.meta.resolve('tsx'),
        join(ROOT, 'src/cli/main.ts'),
        'run',
        '--simulate',
        '--requests',
        '200',
        '--concurrency',
        '16',
        '--input-tokens',
        'normal:256:96:32:768',
        '--output-tokens',
        'uniform:16:112',
        '--out',
        dir,
      ],
      { encoding: 'utf8' },
    );
    if (r.status !== 0) throw new Error(`infergauge run --simulate failed:\n${r.stderr}`);
  }
  const input = await loadReportInput(dir);
  // The footer names the directory: keep the machine's paths out of a committed picture.
  const html = renderHtmlReport({ ...input, dir: 'infergauge-results/run' });
  const file = join(work, 'report.html');
  writeFileSync(file, html);
  const started = await launchChromium();
  if (!started.browser) throw new Error(`no Chromium: ${started.reason}`);
  const width = Number(values.width);
  const height = Number(values.height);
  try {
    const page = await started.browser.newPage({ viewport: { width, height } });
    await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
    await page.screenshot({ path: values.out, clip: { x: 0, y: 0, width, height } });
  } finally {
    await started.browser.close();
  }
  const bytes = statSync(values.out).size;
  process.stdout.write(
    `${values.out}: ${width}x${height}, ${(bytes / 1024).toFixed(0)} KiB (HTML ${(Buffer.byteLength(html) / 1024).toFixed(0)} KiB)\n`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}
