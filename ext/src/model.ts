/**
 * The Streams panel model: the runs of one kernel, as the "streamcell" comm reports them.
 *
 * The model knows nothing of JupyterLab: it talks to the kernel through an
 * `IStreamsTransport` (a comm, in the extension; a fake, in the unit tests), receives
 * the kernel's payloads through `handleMessage`, and says what changed through signals.
 */

import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import {
  ControlAction,
  FrontendMessage,
  IRunInfo,
  KernelMessage,
  RequestId,
  parseKernelMessage
} from './protocol';

/** Where the model sends its requests. */
export interface IStreamsTransport {
  send(message: FrontendMessage): void;
}

/**
 * - `no-kernel`: no notebook, or its kernel is not started;
 * - `connecting`: the comm is open, no answer yet;
 * - `connected`: the kernel answered;
 * - `unavailable`: the kernel has no "streamcell" comm target (streamcell not loaded),
 *   or the comm was closed.
 */
export type ConnectionState =
  'no-kernel' | 'connecting' | 'connected' | 'unavailable';

export const DEFAULT_INTERVAL_MS = 500;
export const DEFAULT_REQUEST_TIMEOUT_MS = 15000;
/** A run this young (seconds) in the first list after connecting counts as starting. */
export const FRESH_RUN_S = 10;

const TERMINAL = new Set(['finished', 'stopped', 'failed']);

interface IPending {
  action: ControlAction;
  name: string;
  resolve: (status: string | undefined) => void;
  reject: (error: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

export class StreamsModel implements IDisposable {
  constructor(options: StreamsModel.IOptions = {}) {
    this._intervalMs = options.intervalMs ?? DEFAULT_INTERVAL_MS;
    this._requestTimeoutMs =
      options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  }

  /** The runs, in the kernel's order (start order). */
  get runs(): readonly IRunInfo[] {
    return this._runs;
  }

  get state(): ConnectionState {
    return this._state;
  }

  /** What the model is connected to (a notebook's name), for display. */
  get label(): string {
    return this._label;
  }

  /** The last error the kernel reported, until the next successful action. */
  get lastError(): string | null {
    return this._lastError;
  }

  get intervalMs(): number {
    return this._intervalMs;
  }

  /** Sum of rows/s over the running runs. */
  get totalRowsPerS(): number {
    return this._runs.reduce(
      (sum, r) => sum + (r.status === 'running' ? (r.rowsPerS ?? 0) : 0),
      0
    );
  }

  /** How many runs are running or paused. */
  get activeCount(): number {
    return this._runs.filter(r => !TERMINAL.has(r.status)).length;
  }

  /** Emitted on any change of runs, state, label, error or pending actions. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /**
   * Emitted when a run starts while the model is connected (a new name, or a name whose
   * previous run had ended). Of the runs already there when it connects, only those
   * younger than FRESH_RUN_S count as starting (the cell that loaded streamcell and the
   * %%stream cell may run before the comm is open, as in "Run All").
   */
  get runStarted(): ISignal<this, IRunInfo> {
    return this._runStarted;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** The action in flight for run `name`, if any. */
  pending(name: string): ControlAction | null {
    for (const p of this._pending.values()) {
      if (p.name === name) {
        return p.action;
      }
    }
    return null;
  }

  getRun(name: string): IRunInfo | undefined {
    return this._runs.find(r => r.name === name);
  }

  /** Start talking to a kernel: subscribe at the current interval and ask for the runs. */
  attach(transport: IStreamsTransport, label = ''): void {
    this._reset();
    this._transport = transport;
    this._label = label;
    this._state = 'connecting';
    this._send({ type: 'subscribe', interval_ms: this._intervalMs });
    this._send({ type: 'list' });
    this._changed.emit();
  }

  /** Stop talking to the kernel; the runs are forgotten. */
  detach(state: Exclude<ConnectionState, 'connecting' | 'connected'>): void {
    this._reset();
    this._state = state;
    this._changed.emit();
  }

  setLabel(label: string): void {
    if (label !== this._label) {
      this._label = label;
      this._changed.emit();
    }
  }

  /** Change the refresh rate (also sent to the kernel when connected). */
  setInterval(ms: number): void {
    this._intervalMs = ms;
    if (this._transport) {
      this._send({ type: 'subscribe', interval_ms: ms });
    }
  }

  refresh(): void {
    if (this._transport) {
      this._send({ type: 'list' });
    }
  }

  /**
   * Ask the kernel to pause, resume or stop run `name`. Resolves with the run's status
   * after the action; rejects with the kernel's message, or on timeout.
   */
  control(action: ControlAction, name: string): Promise<string | undefined> {
    if (!this._transport) {
      return Promise.reject(new Error('not connected to a streamcell kernel'));
    }
    const id = `${action}-${++this._nextId}`;
    const promise = new Promise<string | undefined>((resolve, reject) => {
      const timer = setTimeout(() => {
        this._settle(id, `${action} ${name}: no answer from the kernel`);
      }, this._requestTimeoutMs);
      this._pending.set(id, { action, name, resolve, reject, timer });
    });
    this._send({ type: 'control', action, name, id });
    this._changed.emit();
    return promise;
  }

  /**
   * Handle one payload from the kernel. Returns false (and changes nothing) for anything
   * that is not a documented message.
   */
  handleMessage(data: unknown): boolean {
    if (this._isDisposed || !this._transport) {
      return false;
    }
    const msg = parseKernelMessage(data);
    if (!msg) {
      return false;
    }
    switch (msg.type) {
      case 'runs':
        this._setRuns(msg.runs);
        break;
      case 'ack':
        this._onAck(msg);
        break;
      case 'error':
        this._lastError = msg.message;
        if (msg.id !== undefined) {
          this._settle(msg.id, msg.message);
        }
        break;
    }
    this._changed.emit();
    return true;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._reset();
    this._isDisposed = true;
    Signal.clearData(this);
  }

  private _setRuns(runs: IRunInfo[]): void {
    const wasConnected = this._state === 'connected';
    const before = new Map(this._runs.map(r => [r.name, r]));
    this._runs = runs;
    this._state = 'connected';
    if (!wasConnected) {
      for (const run of runs) {
        const fresh = run.elapsedS !== null && run.elapsedS < FRESH_RUN_S;
        if (fresh && !TERMINAL.has(run.status)) {
          this._runStarted.emit(run);
        }
      }
      return;
    }
    for (const run of runs) {
      const old = before.get(run.name);
      const started = !old || TERMINAL.has(old.status);
      if (started && !TERMINAL.has(run.status)) {
        this._runStarted.emit(run);
      }
    }
  }

  private _onAck(msg: Extract<KernelMessage, { type: 'ack' }>): void {
    if (msg.action === 'subscribe') {
      return;
    }
    this._lastError = null;
    const name = msg.name;
    const status = msg.status;
    if (name && status) {
      this._runs = this._runs.map(r =>
        r.name === name ? { ...r, status } : r
      );
    }
    if (msg.id !== undefined) {
      this._settle(msg.id, null, status);
    }
  }

  private _settle(
    id: RequestId,
    error: string | null,
    status?: string | undefined
  ): void {
    const pending = this._pending.get(String(id));
    if (!pending) {
      return;
    }
    this._pending.delete(String(id));
    clearTimeout(pending.timer);
    if (error === null) {
      pending.resolve(status);
    } else {
      pending.reject(new Error(error));
      this._changed.emit();
    }
  }

  private _send(message: FrontendMessage): void {
    try {
      this._transport?.send(message);
    } catch (reason) {
      console.warn('streamcell: cannot send to the kernel', reason);
    }
  }

  private _reset(): void {
    for (const [id] of this._pending) {
      this._settle(id, 'disconnected from the kernel');
    }
    this._transport = null;
    this._runs = [];
    this._lastError = null;
    this._state = 'no-kernel';
  }

  private _transport: IStreamsTransport | null = null;
  private _runs: IRunInfo[] = [];
  private _state: ConnectionState = 'no-kernel';
  private _label = '';
  private _lastError: string | null = null;
  private _intervalMs: number;
  private _requestTimeoutMs: number;
  private _nextId = 0;
  private _pending = new Map<string, IPending>();
  private _isDisposed = false;
  private _changed = new Signal<this, void>(this);
  private _runStarted = new Signal<this, IRunInfo>(this);
}

export namespace StreamsModel {
  export interface IOptions {
    /** Refresh rate asked of the kernel, in ms. */
    intervalMs?: number;
    /** How long a control request may wait for its answer, in ms. */
    requestTimeoutMs?: number;
  }
}
