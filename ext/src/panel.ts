/**
 * The Streams side panel: the runs of the current notebook's kernel, updating live, with
 * pause / resume / stop buttons and a link to the cell that started each run.
 *
 * Plain DOM on a Lumino widget. Each run is a small card (name, status, elapsed; then
 * rows/s, p99 latency, rows done; then the buttons), which fits a narrow side panel.
 * The numbers are the kernel's MetricsSnapshot (the dashboard's too), written by
 * ./format (the rules of kernel/streamcell/fmt.py); an ended run shows its average rate.
 * Cards are updated in place (never rebuilt under the pointer), so a button keeps
 * working while the numbers change around it.
 */

import { Widget } from '@lumino/widgets';

import * as format from './format';
import { ConnectionState, StreamsModel } from './model';
import { ControlAction, IRunInfo } from './protocol';

/** The message shown above the table for a connection state. */
export function stateMessage(state: ConnectionState, label: string): string {
  const where = label ? ` (${label})` : '';
  switch (state) {
    case 'no-kernel':
      return label
        ? `No running kernel${where}.`
        : 'Open a notebook to see its streams.';
    case 'connecting':
      return `Connecting to the kernel${where}…`;
    case 'connected':
      return `Kernel${where}`;
    case 'unavailable':
      return `streamcell is not loaded in this kernel${where}: run %load_ext streamcell.`;
  }
}

/** Which actions a run in a given status offers. */
export function actionsFor(status: IRunInfo['status']): ControlAction[] {
  switch (status) {
    case 'running':
      return ['pause', 'stop'];
    case 'paused':
      return ['resume', 'stop'];
    default:
      return [];
  }
}

const ACTIONS: ControlAction[] = ['pause', 'resume', 'stop'];
const ACTION_LABELS: Record<ControlAction, string> = {
  pause: 'Pause',
  resume: 'Resume',
  stop: 'Stop'
};
// metric key -> label shown after the number
const METRICS: [string, string][] = [
  ['rate', 'rows/s'],
  ['p99', 'p99'],
  ['rows', 'rows']
];
const ENDED = new Set(['finished', 'stopped', 'failed']);

interface IRowParts {
  row: HTMLElement;
  link: HTMLAnchorElement;
  status: HTMLElement;
  elapsed: HTMLElement;
  cells: Record<string, HTMLElement>;
  units: Record<string, HTMLElement>;
  buttons: Record<ControlAction, HTMLButtonElement>;
}

export class StreamsPanel extends Widget {
  constructor(options: StreamsPanel.IOptions) {
    super();
    this._model = options.model;
    this._onGoToCell = options.onGoToCell ?? null;
    this.id = 'streamcell-streams-panel';
    this.addClass('sc-StreamsPanel');
    this.title.caption = 'Streams';

    const header = document.createElement('div');
    header.className = 'sc-StreamsPanel-header';
    const title = document.createElement('h2');
    title.textContent = 'Streams';
    this._refreshButton = document.createElement('button');
    this._refreshButton.className = 'sc-StreamsPanel-refresh jp-Button';
    this._refreshButton.textContent = '↻';
    this._refreshButton.title = 'Refresh';
    this._refreshButton.addEventListener('click', this._onRefresh);
    header.append(title, this._refreshButton);

    this._stateNode = document.createElement('div');
    this._stateNode.className = 'sc-StreamsPanel-state';
    this._errorNode = document.createElement('div');
    this._errorNode.className = 'sc-StreamsPanel-error';
    this._emptyNode = document.createElement('div');
    this._emptyNode.className = 'sc-StreamsPanel-empty';
    this._emptyNode.textContent =
      'No runs yet: run a %%stream NAME cell in this notebook.';

    this._list = document.createElement('div');
    this._list.className = 'sc-StreamsPanel-list';
    this._list.setAttribute('role', 'list');

    this.node.append(
      header,
      this._stateNode,
      this._errorNode,
      this._emptyNode,
      this._list
    );
    this._model.changed.connect(this._render, this);
    this._render();
  }

  get model(): StreamsModel {
    return this._model;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._model.changed.disconnect(this._render, this);
    this._refreshButton.removeEventListener('click', this._onRefresh);
    this._rows.clear();
    super.dispose();
  }

  private _render(): void {
    const model = this._model;
    this.node.dataset.state = model.state;
    this._stateNode.textContent = stateMessage(model.state, model.label);
    this._errorNode.textContent = model.lastError ?? '';
    this._errorNode.hidden = !model.lastError;
    const connected = model.state === 'connected';
    this._refreshButton.disabled = !connected;
    this._emptyNode.hidden = !connected || model.runs.length > 0;
    this._list.hidden = model.runs.length === 0;

    const seen = new Set<string>();
    model.runs.forEach((run, index) => {
      seen.add(run.name);
      let parts = this._rows.get(run.name);
      if (!parts) {
        parts = this._createRow(run.name);
        this._rows.set(run.name, parts);
      }
      const at = this._list.children[index] ?? null;
      if (at !== parts.row) {
        this._list.insertBefore(parts.row, at);
      }
      this._updateRow(parts, run);
    });
    for (const [name, parts] of this._rows) {
      if (!seen.has(name)) {
        parts.row.remove();
        this._rows.delete(name);
      }
    }
  }

  private _createRow(name: string): IRowParts {
    const row = document.createElement('div');
    row.className = 'sc-run-row';
    row.setAttribute('role', 'listitem');
    row.dataset.run = name;

    const top = document.createElement('div');
    top.className = 'sc-run-top';
    const link = document.createElement('a');
    link.className = 'sc-run-link';
    link.textContent = name;
    link.href = '#';
    link.addEventListener('click', event => {
      event.preventDefault();
      const run = this._model.getRun(name);
      if (run?.cellId && this._onGoToCell) {
        this._onGoToCell(run.cellId, name);
      }
    });
    const status = document.createElement('span');
    status.className = 'sc-run-badge sc-run-status';
    const elapsed = document.createElement('span');
    elapsed.className = 'sc-run-elapsed';
    elapsed.title = 'Elapsed';
    top.append(link, status, elapsed);

    const metrics = document.createElement('div');
    metrics.className = 'sc-run-metrics';
    const cells: Record<string, HTMLElement> = {};
    const units: Record<string, HTMLElement> = {};
    for (const [key, unit] of METRICS) {
      const item = document.createElement('span');
      item.className = `sc-run-metric sc-metric-${key}`;
      const value = document.createElement('span');
      value.className = `sc-run-${key}`;
      const label = document.createElement('span');
      label.className = 'sc-run-unit';
      label.textContent = ` ${unit}`;
      item.append(value, label);
      metrics.appendChild(item);
      cells[key] = value;
      units[key] = label;
    }

    const actions = document.createElement('div');
    actions.className = 'sc-run-actions';
    const buttons = {} as Record<ControlAction, HTMLButtonElement>;
    for (const action of ACTIONS) {
      const button = document.createElement('button');
      button.className = `sc-run-action jp-Button sc-action-${action}`;
      button.dataset.action = action;
      button.textContent = ACTION_LABELS[action];
      button.title = `${ACTION_LABELS[action]} ${name}`;
      button.addEventListener('click', () => {
        this._model.control(action, name).catch(() => {
          // the model keeps the error as lastError, which the panel shows
        });
      });
      actions.appendChild(button);
      buttons[action] = button;
    }
    row.append(top, metrics, actions);
    return { row, link, status, elapsed, cells, units, buttons };
  }

  private _updateRow(parts: IRowParts, run: IRunInfo): void {
    parts.row.dataset.status = run.status;
    parts.status.textContent = run.status;
    parts.status.dataset.status = run.status;
    parts.link.title = run.cellId
      ? `Scroll to the cell that started ${run.name}`
      : `${run.name} was not started from a notebook cell`;
    parts.link.classList.toggle('sc-mod-nocell', !run.cellId);
    const ended = ENDED.has(run.status);
    setText(parts.cells.rate, format.rate(run.rowsPerS, ''));
    setText(parts.units.rate, ended ? ' avg rows/s' : ' rows/s');
    setText(parts.cells.p99, format.ms(run.p99Ms));
    setText(parts.cells.rows, format.count(run.rowsDone));
    parts.cells.rows.dataset.value = String(run.rowsDone ?? '');
    setText(parts.elapsed, format.elapsed(run.elapsedS));
    const offered = actionsFor(run.status);
    const pending = this._model.pending(run.name);
    for (const action of ACTIONS) {
      const button = parts.buttons[action];
      button.hidden = !offered.includes(action);
      button.disabled = pending !== null;
    }
  }

  private _onRefresh = (): void => {
    this._model.refresh();
  };

  private _model: StreamsModel;
  private _onGoToCell: ((cellId: string, name: string) => void) | null;
  private _refreshButton: HTMLButtonElement;
  private _stateNode: HTMLElement;
  private _errorNode: HTMLElement;
  private _emptyNode: HTMLElement;
  private _list: HTMLElement;
  private _rows = new Map<string, IRowParts>();
}

function setText(node: HTMLElement, text: string): void {
  if (node.textContent !== text) {
    node.textContent = text;
  }
}

export namespace StreamsPanel {
  export interface IOptions {
    model: StreamsModel;
    /** Called when the user clicks a run's name: show the cell with this id. */
    onGoToCell?: (cellId: string, name: string) => void;
  }
}
