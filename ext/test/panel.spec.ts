import type { FrontendMessage } from '../src/protocol';
import type * as ModelModule from '../src/model';
import type * as PanelModule from '../src/panel';
import type * as StatusModule from '../src/statusbar';
import type * as WidgetsModule from '@lumino/widgets';

// jsdom has no DragEvent, which @lumino/dragdrop (loaded by @lumino/widgets) needs when
// it loads: define it first, then load the modules that use it.
(globalThis as any).DragEvent ??= class DragEvent extends MouseEvent {};
/* eslint-disable @typescript-eslint/no-require-imports */
const { Widget } = require('@lumino/widgets') as typeof WidgetsModule;
const { StreamsModel } = require('../src/model') as typeof ModelModule;
const { StreamsPanel, actionsFor, stateMessage } =
  require('../src/panel') as typeof PanelModule;
const { StreamsStatus, statusText } =
  require('../src/statusbar') as typeof StatusModule;
/* eslint-enable @typescript-eslint/no-require-imports */

function run(name: string, status: string, rows: number, rate = 2000) {
  return {
    name,
    status,
    rows_per_s: rate,
    p99_ms: 0.031,
    rows_done: rows,
    elapsed_s: 65.2,
    cell_id: name === 'nocell' ? null : `cell-${name}`
  };
}

function setup() {
  const model = new StreamsModel();
  const sent: FrontendMessage[] = [];
  model.attach({ send: m => sent.push(m) }, 'demo.ipynb');
  const goTo = jest.fn();
  const panel = new StreamsPanel({ model, onGoToCell: goTo });
  Widget.attach(panel, document.body);
  const q = (sel: string) => panel.node.querySelector(sel) as HTMLElement;
  const qa = (sel: string) =>
    Array.from(panel.node.querySelectorAll(sel)) as HTMLElement[];
  return { model, sent, goTo, panel, q, qa };
}

afterEach(() => {
  document.body.innerHTML = '';
});

describe('panel helpers', () => {
  it('offers actions by status', () => {
    expect(actionsFor('running')).toEqual(['pause', 'stop']);
    expect(actionsFor('paused')).toEqual(['resume', 'stop']);
    expect(actionsFor('finished')).toEqual([]);
    expect(actionsFor('failed')).toEqual([]);
  });

  it('explains each connection state', () => {
    expect(stateMessage('unavailable', 'a.ipynb')).toContain(
      '%load_ext streamcell'
    );
    expect(stateMessage('no-kernel', '')).toContain('Open a notebook');
    expect(stateMessage('connected', 'a.ipynb')).toContain('a.ipynb');
  });
});

describe('StreamsPanel', () => {
  it('shows the state before the kernel answers', () => {
    const { panel, q } = setup();
    expect(panel.node.dataset.state).toBe('connecting');
    expect(q('.sc-StreamsPanel-state').textContent).toContain('Connecting');
    expect(q('.sc-StreamsPanel-list').hidden).toBe(true);
  });

  it('shows an empty message when the kernel has no runs', () => {
    const { model, q } = setup();
    model.handleMessage({ type: 'runs', runs: [] });
    expect(q('.sc-StreamsPanel-empty').hidden).toBe(false);
    expect(q('.sc-StreamsPanel-list').hidden).toBe(true);
  });

  it('renders one row per run with formatted numbers', () => {
    const { model, q, qa } = setup();
    model.handleMessage({
      type: 'runs',
      runs: [
        run('clicks', 'running', 1234567, 12345),
        run('old', 'finished', 10)
      ]
    });
    const rows = qa('.sc-run-row');
    expect(rows.map(r => r.dataset.run)).toEqual(['clicks', 'old']);
    const clicks = q('.sc-run-row[data-run="clicks"]');
    expect(clicks.dataset.status).toBe('running');
    // one number format (./format, the kernel's fmt.py rules)
    expect(clicks.querySelector('.sc-run-rate')?.textContent).toBe('12,345');
    expect(
      clicks.querySelector('.sc-metric-rate .sc-run-unit')?.textContent
    ).toBe(' rows/s');
    expect(clicks.querySelector('.sc-run-rows')?.textContent).toBe('1,234,567');
    expect(clicks.querySelector('.sc-run-p99')?.textContent).toBe('0.03 ms');
    expect(clicks.querySelector('.sc-run-elapsed')?.textContent).toBe('1:05');
    // an ended run's rate is its average over the run
    const old = q('.sc-run-row[data-run="old"]');
    expect(old.querySelector('.sc-run-rate')?.textContent).toBe('2,000');
    expect(old.querySelector('.sc-metric-rate .sc-run-unit')?.textContent).toBe(
      ' avg rows/s'
    );
    const visible = (row: HTMLElement) =>
      Array.from(row.querySelectorAll<HTMLButtonElement>('.sc-run-action'))
        .filter(b => !b.hidden)
        .map(b => b.dataset.action);
    expect(visible(clicks)).toEqual(['pause', 'stop']);
    expect(visible(q('.sc-run-row[data-run="old"]'))).toEqual([]);
  });

  it('updates rows in place and follows the kernel order', () => {
    const { model, q, qa } = setup();
    model.handleMessage({
      type: 'runs',
      runs: [run('a', 'running', 1), run('b', 'running', 1)]
    });
    const rowA = q('.sc-run-row[data-run="a"]');
    const stopA = rowA.querySelector('[data-action="stop"]');
    model.handleMessage({
      type: 'runs',
      runs: [run('b', 'running', 2), run('a', 'running', 500)]
    });
    expect(q('.sc-run-row[data-run="a"]')).toBe(rowA);
    expect(rowA.querySelector('[data-action="stop"]')).toBe(stopA);
    expect(rowA.querySelector('.sc-run-rows')?.textContent).toBe('500');
    expect(qa('.sc-run-row').map(r => r.dataset.run)).toEqual(['b', 'a']);
    model.handleMessage({ type: 'runs', runs: [run('b', 'running', 3)] });
    expect(qa('.sc-run-row').map(r => r.dataset.run)).toEqual(['b']);
  });

  it('sends control requests from the buttons and disables them while pending', () => {
    const { model, sent, q } = setup();
    model.handleMessage({ type: 'runs', runs: [run('a', 'running', 1)] });
    const stop = q(
      '.sc-run-row[data-run="a"] [data-action="stop"]'
    ) as HTMLButtonElement;
    stop.click();
    const request = sent[sent.length - 1] as {
      type: string;
      action: string;
      id: string;
    };
    expect(request).toMatchObject({
      type: 'control',
      action: 'stop',
      name: 'a'
    });
    expect(stop.disabled).toBe(true);
    model.handleMessage({
      type: 'ack',
      action: 'stop',
      name: 'a',
      status: 'stopped',
      id: request.id
    });
    const row = q('.sc-run-row[data-run="a"]');
    expect(row.dataset.status).toBe('stopped');
    expect(row.querySelector('.sc-run-status')?.textContent).toBe('stopped');
    expect(stop.hidden).toBe(true);
  });

  it('shows the kernel error', async () => {
    const { model, sent, q } = setup();
    model.handleMessage({ type: 'runs', runs: [run('a', 'running', 1)] });
    const done = model.control('resume', 'a');
    const id = (sent[sent.length - 1] as { id: string }).id;
    model.handleMessage({
      type: 'error',
      message: "cannot resume run 'a'",
      id
    });
    await expect(done).rejects.toThrow();
    expect(q('.sc-StreamsPanel-error').hidden).toBe(false);
    expect(q('.sc-StreamsPanel-error').textContent).toContain('cannot resume');
  });

  it('links a run to its cell', () => {
    const { model, goTo, q } = setup();
    model.handleMessage({
      type: 'runs',
      runs: [run('a', 'running', 1), run('nocell', 'running', 1)]
    });
    (q('.sc-run-row[data-run="a"] .sc-run-link') as HTMLAnchorElement).click();
    expect(goTo).toHaveBeenCalledWith('cell-a', 'a');
    (
      q('.sc-run-row[data-run="nocell"] .sc-run-link') as HTMLAnchorElement
    ).click();
    expect(goTo).toHaveBeenCalledTimes(1);
  });

  it('refresh asks the kernel for the list', () => {
    const { model, sent, q } = setup();
    model.handleMessage({ type: 'runs', runs: [] });
    (q('.sc-StreamsPanel-refresh') as HTMLButtonElement).click();
    expect(sent[sent.length - 1]).toEqual({ type: 'list' });
  });

  it('disconnects from the model when disposed', () => {
    const { model, panel } = setup();
    panel.dispose();
    expect(() =>
      model.handleMessage({ type: 'runs', runs: [run('a', 'running', 1)] })
    ).not.toThrow();
  });
});

describe('StreamsStatus', () => {
  it('shows the total rate of the running runs and opens the panel on click', () => {
    const model = new StreamsModel();
    model.attach({ send: () => undefined });
    const onClick = jest.fn();
    const item = new StreamsStatus(model, onClick);
    expect(item.isActive).toBe(false);
    model.handleMessage({
      type: 'runs',
      runs: [
        run('a', 'running', 1, 10000),
        run('b', 'running', 1, 2500),
        run('c', 'paused', 1)
      ]
    });
    expect(item.isActive).toBe(true);
    expect(item.node.textContent).toBe('Streams: 2 running · 12,500 rows/s');
    item.node.click();
    expect(onClick).toHaveBeenCalled();
    model.handleMessage({ type: 'runs', runs: [run('c', 'paused', 1)] });
    expect(statusText(model)).toBe('Streams: 1 paused');
    model.handleMessage({ type: 'runs', runs: [run('c', 'stopped', 1)] });
    expect(statusText(model)).toBe('Streams: idle');
    item.dispose();
  });
});
