/**
 * streamcell in a real JupyterLab, in a real Chromium (see playwright.config.ts).
 *
 * 1. Type a %%stream cell: the CodeMirror marks (cm-sc-*) are there, with the
 *    extension's style, and a plain Python cell gets none; the Streams panel says
 *    streamcell is not loaded yet.
 * 2. (needs streamcell.run and the magic) `%load_ext streamcell`, run a %%stream cell:
 *    the run appears in the Streams panel with a rising row count; the name links to
 *    the cell; the stop button stops it.
 * 3. (same) open examples/dashboard.ipynb, run its %%stream cell: the live dashboard under
 *    the cell shows rising numbers and drawn charts; its stop button stops the run.
 * Screenshots go to $STREAMCELL_UI_SCREENSHOTS.
 */

import * as fs from 'fs';
import * as path from 'path';

import { expect, Page, test } from '@playwright/test';

const TOKEN = process.env.STREAMCELL_UI_TOKEN ?? '';
const NOTEBOOKS = process.env.STREAMCELL_UI_NOTEBOOKS ?? '';
const SHOTS =
  process.env.STREAMCELL_UI_SCREENSHOTS ?? 'test-artifacts/ui/screenshots';
const CAN_RUN = process.env.STREAMCELL_UI_RUN === '1';
const EXAMPLES = path.resolve(__dirname, '..', '..', 'examples');

/** The cell typed in test 1 (one line per stage; see kernel/streamcell/dsl.py). */
const STREAM_CELL = [
  '%%stream clicks --workers 2',
  '# views per user',
  'source clickstream(rows=50_000_000, users=1_000, seed=1), rate=20_000',
  'filter event == "view"',
  'key_by user_id',
  'agg views=count(), spent=sum(price)',
  'sink table'
];

/** A notebook file with these code cells (Python 3 kernel). */
function writeNotebook(name: string, cells: string[]): string {
  const nb = {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: {
        name: 'python3',
        display_name: 'Python 3',
        language: 'python'
      },
      language_info: { name: 'python' }
    },
    cells: cells.map((source, i) => ({
      cell_type: 'code',
      id: `cell-${i}`,
      metadata: {},
      execution_count: null,
      outputs: [],
      source
    }))
  };
  fs.writeFileSync(path.join(NOTEBOOKS, name), JSON.stringify(nb, null, 1));
  return name;
}

async function shot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}

/** Open a notebook (in a workspace of its own) and wait until its kernel is idle. */
async function openNotebook(page: Page, name: string): Promise<void> {
  const workspace = name.replace(/\.ipynb$/, '');
  await page.goto(`/lab/workspaces/${workspace}/tree/${name}?token=${TOKEN}`);
  await page.waitForSelector('#jupyterlab-splash', { state: 'detached' });
  await expect(
    page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell').first()
  ).toBeVisible();
  await expect
    .poll(
      () =>
        page.evaluate(path => {
          const app = (window as any).jupyterapp;
          for (const widget of app.shell.widgets('main')) {
            const session = widget?.sessionContext;
            if (widget?.context?.path === path && session?.isReady) {
              return session.session?.kernel?.status ?? 'none';
            }
          }
          return 'not open';
        }, name),
      { timeout: 120_000 }
    )
    .toBe('idle');
}

/** Make the Streams panel visible (without toggling it closed if it already is). */
async function showStreamsPanel(page: Page): Promise<void> {
  const panel = page.locator('#streamcell-streams-panel');
  if (!(await panel.isVisible())) {
    await page
      .locator('.jp-SideBar .lm-TabBar-tab[data-id="streamcell-streams-panel"]')
      .click();
  }
  await expect(panel).toBeVisible();
}

test.describe('streamcell in JupyterLab', () => {
  test('highlights a %%stream cell', async ({ page }) => {
    writeNotebook('highlight.ipynb', ['']);
    await openNotebook(page, 'highlight.ipynb');
    expect(
      await page.evaluate(() =>
        [
          'streamcell:plugin',
          'streamcell:highlight',
          'streamcell:completer'
        ].map(id => (window as any).jupyterapp.isPluginActivated(id))
      )
    ).toEqual([true, true, true]);

    const first = page
      .locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell')
      .nth(0);
    await first.locator('.cm-content').click();
    for (const [i, line] of STREAM_CELL.entries()) {
      if (i > 0) {
        await page.keyboard.press('Enter');
      }
      await page.keyboard.type(line);
    }
    const editor = first.locator('.cm-editor');
    await expect(editor).toHaveClass(/sc-stream-editor/);
    await expect(first.locator('.cm-sc-magic')).toHaveText('%%stream');
    await expect(first.locator('.cm-sc-runname')).toHaveText('clicks');
    await expect(first.locator('.cm-sc-option')).toHaveText('--workers');
    await expect(first.locator('.cm-sc-stage')).toHaveText([
      'source',
      'filter',
      'key_by',
      'agg',
      'sink'
    ]);
    await expect(first.locator('.cm-sc-comment')).toHaveText(
      '# views per user'
    );
    await expect(first.locator('.cm-sc-string')).toHaveText('"view"');
    await expect(first.locator('.cm-sc-function')).toHaveText([
      'clickstream',
      'count',
      'sum'
    ]);
    await expect(first.locator('.cm-sc-number')).toHaveText([
      '2',
      '50_000_000',
      '1_000',
      '1',
      '20_000'
    ]);
    await expect(first.locator('.cm-sc-param').first()).toHaveText('rows');
    // the extension's stylesheet is applied: stages are bold
    expect(
      await first
        .locator('.cm-sc-stage')
        .first()
        .evaluate(el => getComputedStyle(el).fontWeight)
    ).toBe('700');

    // a plain Python cell below gets no streamcell marks
    await page.keyboard.press('Escape');
    await page.keyboard.press('b');
    const second = page
      .locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell')
      .nth(1);
    await second.locator('.cm-content').click();
    await page.keyboard.type('filter = "view"  # plain Python');
    await expect(second.locator('.cm-line')).toHaveText(
      'filter = "view"  # plain Python'
    );
    await expect(second.locator('.cm-editor')).not.toHaveClass(
      /sc-stream-editor/
    );
    expect(await second.locator('[class*="cm-sc-"]').count()).toBe(0);

    // completion of stage names from the streamcell provider
    await first.locator('.cm-line').last().click();
    await page.keyboard.press('End');
    await page.keyboard.press('Enter');
    await page.keyboard.type('ded');
    await page.keyboard.press('Tab');
    const completer = page.locator('.jp-Completer');
    await page.waitForTimeout(1000);
    if (await completer.isVisible()) {
      await completer
        .locator('.jp-Completer-item', { hasText: 'dedup' })
        .click();
    }
    await expect(first.locator('.cm-sc-stage').last()).toHaveText('dedup');
    await shot(page, '01-highlighting');

    // before %load_ext streamcell the panel says so
    await showStreamsPanel(page);
    await expect(page.locator('#streamcell-streams-panel')).toHaveAttribute(
      'data-state',
      'unavailable'
    );
    await expect(page.locator('.sc-StreamsPanel-state')).toContainText(
      '%load_ext streamcell'
    );
    await shot(page, '02-panel-not-loaded');
  });

  test('runs a stream, watches it in the Streams panel and stops it', async ({
    page
  }) => {
    test.skip(
      !CAN_RUN,
      'streamcell.run / streamcell.magic are not importable by the server Python'
    );
    writeNotebook('run.ipynb', [
      '%load_ext streamcell',
      STREAM_CELL.join('\n')
    ]);
    await openNotebook(page, 'run.ipynb');

    const cells = page.locator(
      '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell'
    );
    // a %%stream cell loaded from the file is highlighted too
    await expect(cells.nth(1).locator('.cm-editor')).toHaveClass(
      /sc-stream-editor/
    );
    await expect(cells.nth(1).locator('.cm-sc-stage')).toHaveCount(5);
    await expect(cells.nth(0).locator('.cm-editor')).not.toHaveClass(
      /sc-stream-editor/
    );
    await cells.nth(0).locator('.jp-InputPrompt').click();
    await page.keyboard.press('Shift+Enter'); // %load_ext streamcell
    await expect(cells.nth(0).locator('.jp-InputPrompt')).toContainText('[1]');
    await page.keyboard.press('Shift+Enter'); // the %%stream cell; returns at once
    await expect(cells.nth(1).locator('.jp-InputPrompt')).toContainText('[2]');

    // the panel opens by itself when the run starts (openPanelAutomatically)
    const panel = page.locator('#streamcell-streams-panel');
    await expect(panel).toBeVisible();
    await expect(panel).toHaveAttribute('data-state', 'connected');
    const row = panel.locator('.sc-run-row[data-run="clicks"]');
    await expect(row).toHaveAttribute('data-status', 'running');

    const rowsDone = async () =>
      Number(
        (await row.locator('.sc-run-rows').getAttribute('data-value')) || 0
      );
    await expect.poll(rowsDone).toBeGreaterThan(0);
    const before = await rowsDone();
    await expect.poll(rowsDone, { timeout: 30_000 }).toBeGreaterThan(before);
    await expect(row.locator('.sc-run-rate')).not.toHaveText('–');
    await shot(page, '03-panel-running');

    // the status bar item shows the total rate
    await expect(page.locator('.sc-StreamsStatus')).toContainText('1 running');

    // the run's name scrolls to (and selects) the cell that started it
    await cells.nth(0).locator('.jp-InputPrompt').click();
    await row.locator('.sc-run-link').click();
    await expect(cells.nth(1)).toHaveClass(/jp-mod-active/);

    await row.locator('.sc-run-action[data-action="stop"]').click();
    await expect(row).toHaveAttribute('data-status', 'stopped');
    await page.waitForTimeout(1500); // the last push after the stop
    const stopped = await rowsDone();
    await page.waitForTimeout(2000);
    expect(await rowsDone()).toBe(stopped);
    await expect(
      row.locator('.sc-run-action[data-action="stop"]')
    ).toBeHidden();
    await shot(page, '04-panel-stopped');
  });

  test('runs the dashboard notebook: live numbers, charts, stop button', async ({
    page
  }) => {
    test.skip(
      !CAN_RUN,
      'streamcell.run / streamcell.magic are not importable by the server Python'
    );
    fs.copyFileSync(
      path.join(EXAMPLES, 'dashboard.ipynb'),
      path.join(NOTEBOOKS, 'dashboard.ipynb')
    );
    await openNotebook(page, 'dashboard.ipynb');
    const code = page.locator(
      '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell'
    );
    await code.nth(0).locator('.jp-InputPrompt').click();
    await page.keyboard.press('Control+Enter'); // %load_ext streamcell
    await expect(code.nth(0).locator('.jp-InputPrompt')).toContainText('[1]');
    await expect(code.nth(1)).toContainText('%%stream clicks');
    await code.nth(1).locator('.jp-InputPrompt').click();
    await page.keyboard.press('Control+Enter'); // the %%stream cell; returns at once
    await expect(code.nth(1).locator('.jp-InputPrompt')).toContainText('[2]');

    const dash = code.nth(1).locator('.streamcell-dashboard');
    await expect(dash).toBeVisible();
    await expect(dash.locator('.sc-status')).toHaveText('running');
    const rowsIn = async () =>
      Number(
        ((await dash.locator('.sc-rows-in').textContent()) || '0').replace(
          /,/g,
          ''
        )
      );
    await expect.poll(rowsIn).toBeGreaterThan(0);
    const before = await rowsIn();
    await expect.poll(rowsIn, { timeout: 30_000 }).toBeGreaterThan(before);
    // the operator table and both charts (Vega, offline bundle) are drawn
    await expect(dash.locator('.sc-ops tbody tr').first()).toBeVisible();
    await expect(
      dash.locator('.vega-embed canvas, .vega-embed svg.marks')
    ).toHaveCount(2);
    const elapsed1 = await dash.locator('.sc-elapsed').textContent();
    await expect
      .poll(() => dash.locator('.sc-elapsed').textContent())
      .not.toBe(elapsed1);
    // the table is re-rendered by every update: retry if it is replaced while scrolling
    await expect(async () => {
      await dash.locator('.sc-ops').scrollIntoViewIfNeeded({ timeout: 1000 });
    }).toPass({ timeout: 10_000 });
    await shot(page, '05-dashboard-running');

    await dash.locator('button.sc-stop').click();
    await expect(dash.locator('.sc-status')).toHaveText('stopped');
    // an ended run has no controls (not a disabled red Stop button)
    await expect(dash.locator('button.sc-stop')).toBeHidden();
    const stopped = await rowsIn();
    await page.waitForTimeout(1500);
    expect(await rowsIn()).toBe(stopped);
    await shot(page, '06-dashboard-stopped');
  });
});
