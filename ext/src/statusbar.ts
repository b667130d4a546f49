/**
 * The status bar item: total rows/s across the running streams of the current notebook's
 * kernel. Clicking it opens the Streams panel.
 */

import { Widget } from '@lumino/widgets';

import * as format from './format';
import { StreamsModel } from './model';

/** The item's text for a model (exported for the tests). */
export function statusText(model: StreamsModel): string {
  const running = model.runs.filter(r => r.status === 'running').length;
  if (running === 0) {
    const active = model.activeCount;
    return active ? `Streams: ${active} paused` : 'Streams: idle';
  }
  return `Streams: ${running} running · ${format.rate(model.totalRowsPerS)}`;
}

export class StreamsStatus extends Widget {
  constructor(model: StreamsModel, onClick: () => void) {
    super({ node: document.createElement('div') });
    this._model = model;
    this._onClick = onClick;
    this.addClass('sc-StreamsStatus');
    this.addClass('jp-StatusBar-TextItem');
    this.node.title = 'Open the Streams panel';
    this.node.addEventListener('click', this._onClick);
    model.changed.connect(this._render, this);
    this._render();
  }

  /** Whether the item is worth showing (the kernel runs streamcell and has runs). */
  get isActive(): boolean {
    return this._model.state === 'connected' && this._model.runs.length > 0;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.node.removeEventListener('click', this._onClick);
    this._model.changed.disconnect(this._render, this);
    super.dispose();
  }

  private _render(): void {
    const text = statusText(this._model);
    if (this.node.textContent !== text) {
      this.node.textContent = text;
    }
  }

  private _model: StreamsModel;
  private _onClick: () => void;
}
