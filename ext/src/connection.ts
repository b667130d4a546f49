/**
 * Binds a StreamsModel to a notebook's kernel through the "streamcell" comm.
 *
 * The comm is opened when the notebook's kernel is ready, re-opened when the kernel
 * changes or restarts, and retried (`retry`) after a cell ran, which is how the panel
 * connects once the user runs `%load_ext streamcell` (before that, the kernel has no
 * "streamcell" target and closes the comm at once).
 */

import { ISessionContext } from '@jupyterlab/apputils';
import { Kernel } from '@jupyterlab/services';
import { IDisposable } from '@lumino/disposable';

import { StreamsModel } from './model';
import { COMM_TARGET } from './protocol';

export class KernelConnector implements IDisposable {
  constructor(model: StreamsModel) {
    this._model = model;
  }

  get model(): StreamsModel {
    return this._model;
  }

  get sessionContext(): ISessionContext | null {
    return this._session;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** Follow another notebook's session (null: none). */
  setSession(session: ISessionContext | null, label = ''): void {
    if (session === this._session) {
      this._model.setLabel(label);
      return;
    }
    if (this._session) {
      this._session.kernelChanged.disconnect(this._onKernelChanged, this);
      this._session.statusChanged.disconnect(this._onStatusChanged, this);
    }
    this._closeComm();
    this._session = session;
    this._label = label;
    if (!session) {
      this._model.detach('no-kernel');
      return;
    }
    session.kernelChanged.connect(this._onKernelChanged, this);
    session.statusChanged.connect(this._onStatusChanged, this);
    void session.ready.then(() => {
      if (this._session === session) {
        this.open();
      }
    });
    this._model.detach('no-kernel');
    this._model.setLabel(label);
  }

  /** Open the comm again if the model is not connected (e.g. after a cell ran). */
  retry(): void {
    const state = this._model.state;
    if (state === 'unavailable' || state === 'no-kernel') {
      this.open();
    }
  }

  /** Open the comm to the current session's kernel, unless it is open already. */
  open(): void {
    const kernel = this._session?.session?.kernel ?? null;
    if (this._comm && kernel && this._commKernel === kernel) {
      return;
    }
    this._closeComm();
    if (!kernel || kernel.isDisposed || kernel.status === 'dead') {
      this._model.detach('no-kernel');
      return;
    }
    let comm: Kernel.IComm;
    try {
      comm = kernel.createComm(COMM_TARGET);
    } catch (reason) {
      console.warn('streamcell: cannot open the comm', reason);
      this._model.detach('unavailable');
      return;
    }
    this._comm = comm;
    this._commKernel = kernel;
    comm.onMsg = msg => {
      if (this._comm === comm) {
        this._model.handleMessage(msg.content.data);
      }
    };
    comm.onClose = () => {
      if (this._comm === comm) {
        this._comm = null;
        this._commKernel = null;
        this._model.detach('unavailable');
      }
    };
    try {
      comm.open({});
    } catch (reason) {
      console.warn('streamcell: cannot open the comm', reason);
      this._comm = null;
      this._commKernel = null;
      this._model.detach('unavailable');
      return;
    }
    this._model.attach(
      {
        send: message => {
          if (this._comm === comm && !comm.isDisposed) {
            comm.send(message as any);
          }
        }
      },
      this._label
    );
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this.setSession(null);
    this._isDisposed = true;
  }

  private _onKernelChanged(): void {
    this._closeComm();
    this._model.detach('no-kernel');
    const session = this._session;
    void session?.ready.then(() => {
      if (this._session === session) {
        this.open();
      }
    });
  }

  private _onStatusChanged(_: ISessionContext, status: Kernel.Status): void {
    if (
      status === 'restarting' ||
      status === 'autorestarting' ||
      status === 'dead'
    ) {
      this._closeComm();
      this._model.detach(status === 'dead' ? 'no-kernel' : 'unavailable');
    }
  }

  private _closeComm(): void {
    const comm = this._comm;
    this._comm = null;
    this._commKernel = null;
    if (comm && !comm.isDisposed) {
      try {
        void comm.close();
      } catch {
        // the kernel is gone: nothing to close
      }
    }
  }

  private _model: StreamsModel;
  private _session: ISessionContext | null = null;
  private _label = '';
  private _comm: Kernel.IComm | null = null;
  private _commKernel: Kernel.IKernelConnection | null = null;
  private _isDisposed = false;
}
