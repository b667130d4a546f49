/**
 * Playwright configuration of the UI tests: Debian's Chromium (no browser download)
 * against a real JupyterLab server that this configuration starts.
 *
 * Run from the repository root: `jlpm test:ui` (or through pytest:
 * tests/ui/test_lab_ui.py). Environment (all optional):
 *   STREAMCELL_PYTHON        the Python that runs JupyterLab (default .venv/bin/python)
 *   STREAMCELL_CHROMIUM      the browser (default /usr/bin/chromium)
 *   STREAMCELL_UI_PORT       the server's port (default 8899)
 *   STREAMCELL_UI_ARTIFACTS  screenshots, report, server dirs (default test-artifacts/ui)
 *   STREAMCELL_UI_RUN        1: run the stream test, 0: skip it (default: 1 if the Python
 *                            has streamcell.run)
 */

import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

import { defineConfig } from '@playwright/test';

const ROOT = path.resolve(__dirname, '..', '..');
const PYTHON =
  process.env.STREAMCELL_PYTHON ?? path.join(ROOT, '.venv', 'bin', 'python');
const CHROMIUM = process.env.STREAMCELL_CHROMIUM ?? '/usr/bin/chromium';
const PORT = Number(process.env.STREAMCELL_UI_PORT ?? 8899);
const TOKEN = process.env.STREAMCELL_UI_TOKEN ?? 'streamcell-ui-test-token';
const ARTIFACTS = path.resolve(
  process.env.STREAMCELL_UI_ARTIFACTS ?? path.join(ROOT, 'test-artifacts', 'ui')
);
const SERVER = path.join(ARTIFACTS, 'server');
const NOTEBOOKS = path.join(SERVER, 'notebooks');

function hasRunRegistry(): boolean {
  try {
    execFileSync(PYTHON, ['-c', 'import streamcell.run, streamcell.magic'], {
      stdio: 'ignore',
      timeout: 60000
    });
    return true;
  } catch {
    return false;
  }
}

// The same values in every Playwright process (the config is loaded by each worker).
process.env.STREAMCELL_UI_TOKEN = TOKEN;
process.env.STREAMCELL_UI_NOTEBOOKS = NOTEBOOKS;
process.env.STREAMCELL_UI_SCREENSHOTS = path.join(ARTIFACTS, 'screenshots');
if (process.env.STREAMCELL_UI_RUN === undefined) {
  process.env.STREAMCELL_UI_RUN = hasRunRegistry() ? '1' : '0';
}

// A server of its own: fresh settings, workspaces and config, and the labextension
// exactly as built in this checkout (kernel/streamcell/labextension).
const labextensions = path.join(SERVER, 'labextensions');
for (const dir of ['config', 'runtime', 'settings', 'workspaces', 'ipython']) {
  fs.mkdirSync(path.join(SERVER, dir), { recursive: true });
}
fs.mkdirSync(NOTEBOOKS, { recursive: true });
// no "official Jupyter news?" toast over the screenshots
fs.mkdirSync(path.join(SERVER, 'config', 'labconfig'), { recursive: true });
fs.writeFileSync(
  path.join(SERVER, 'config', 'labconfig', 'page_config.json'),
  JSON.stringify({
    disabledExtensions: { '@jupyterlab/apputils-extension:announcements': true }
  })
);
fs.mkdirSync(labextensions, { recursive: true });
const link = path.join(labextensions, 'streamcell');
if (!fs.existsSync(link)) {
  fs.symlinkSync(path.join(ROOT, 'kernel', 'streamcell', 'labextension'), link);
}

const serverArgs = [
  '-m',
  'jupyter',
  'lab',
  '--allow-root',
  '--no-browser',
  `--port=${PORT}`,
  '--ServerApp.port_retries=0',
  '--ServerApp.ip=127.0.0.1',
  `--ServerApp.token=${TOKEN}`,
  `--ServerApp.root_dir=${NOTEBOOKS}`,
  `--LabApp.extra_labextensions_path=${labextensions}`,
  `--LabApp.user_settings_dir=${path.join(SERVER, 'settings')}`,
  `--LabApp.workspaces_dir=${path.join(SERVER, 'workspaces')}`,
  '--LabApp.news_url=None',
  '--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate',
  '--LabApp.expose_app_in_browser=True'
];

export default defineConfig({
  testDir: __dirname,
  testMatch: '*.ui.ts',
  outputDir: path.join(ARTIFACTS, 'results'),
  timeout: 300_000,
  expect: { timeout: 60_000 },
  workers: 1,
  retries: 0,
  reporter: [
    ['list'],
    ['json', { outputFile: path.join(ARTIFACTS, 'report.json') }]
  ],
  use: {
    baseURL: `http://127.0.0.1:${PORT}`,
    headless: true,
    viewport: { width: 1440, height: 900 },
    video: 'off',
    trace: 'off',
    screenshot: 'only-on-failure',
    actionTimeout: 60_000,
    navigationTimeout: 120_000,
    launchOptions: {
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--no-first-run',
        '--disable-sync',
        '--disable-quic'
      ]
    }
  },
  webServer: {
    command: [PYTHON, ...serverArgs].map(a => JSON.stringify(a)).join(' '),
    url: `http://127.0.0.1:${PORT}/api/status?token=${TOKEN}`,
    timeout: 240_000,
    reuseExistingServer: false,
    stdout: 'pipe',
    stderr: 'pipe',
    env: {
      PATH: `${path.dirname(PYTHON)}:${process.env.PATH ?? ''}`,
      JUPYTER_CONFIG_DIR: path.join(SERVER, 'config'),
      JUPYTER_RUNTIME_DIR: path.join(SERVER, 'runtime'),
      IPYTHONDIR: path.join(SERVER, 'ipython'),
      JUPYTER_PLATFORM_DIRS: '1'
    }
  }
});
