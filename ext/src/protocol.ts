/**
 * The messages of the "streamcell" comm, as documented in kernel/streamcell/comm.py.
 *
 * Everything that arrives from the kernel goes through `parseKernelMessage`, which
 * returns null for anything that is not a well-formed documented message: the rest of
 * the extension only sees typed, validated values.
 */

/** The comm target the kernel registers (streamcell.comm.COMM_TARGET). */
export const COMM_TARGET = 'streamcell';

export type RunStatus =
  'running' | 'paused' | 'finished' | 'stopped' | 'failed';
export type ControlAction = 'pause' | 'resume' | 'stop';

export const RUN_STATUSES: readonly RunStatus[] = [
  'running',
  'paused',
  'finished',
  'stopped',
  'failed'
];

/** One run, as the kernel reports it. Numbers the run cannot report are null. */
export interface IRunInfo {
  name: string;
  status: RunStatus;
  rowsPerS: number | null;
  p99Ms: number | null;
  rowsDone: number | null;
  elapsedS: number | null;
  cellId: string | null;
}

export type RequestId = string | number;

/** Frontend → kernel. */
export type FrontendMessage =
  | { type: 'list'; id?: RequestId }
  | { type: 'control'; action: ControlAction; name: string; id?: RequestId }
  | { type: 'subscribe'; interval_ms: number; id?: RequestId };

/** Kernel → frontend, after validation. */
export type KernelMessage =
  | { type: 'runs'; runs: IRunInfo[]; id?: RequestId }
  | {
      type: 'ack';
      action: ControlAction | 'subscribe';
      name?: string;
      status?: RunStatus;
      intervalMs?: number;
      id?: RequestId;
    }
  | { type: 'error'; message: string; id?: RequestId };

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function finiteOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function requestId(value: unknown): RequestId | undefined {
  return typeof value === 'string' ||
    (typeof value === 'number' && Number.isInteger(value))
    ? value
    : undefined;
}

export function isRunStatus(value: unknown): value is RunStatus {
  return (RUN_STATUSES as readonly unknown[]).includes(value);
}

/** A run object from the kernel, or null when it has no usable name. */
export function parseRun(value: unknown): IRunInfo | null {
  if (!isObject(value) || typeof value.name !== 'string' || !value.name) {
    return null;
  }
  return {
    name: value.name,
    status: isRunStatus(value.status) ? value.status : 'failed',
    rowsPerS: finiteOrNull(value.rows_per_s),
    p99Ms: finiteOrNull(value.p99_ms),
    rowsDone: finiteOrNull(value.rows_done),
    elapsedS: finiteOrNull(value.elapsed_s),
    cellId:
      typeof value.cell_id === 'string' && value.cell_id ? value.cell_id : null
  };
}

/** Validate one comm payload from the kernel; null when it is not a documented message. */
export function parseKernelMessage(data: unknown): KernelMessage | null {
  if (!isObject(data)) {
    return null;
  }
  const id = requestId(data.id);
  const withId = <T extends object>(msg: T): T =>
    id === undefined ? msg : { ...msg, id };
  switch (data.type) {
    case 'runs': {
      if (!Array.isArray(data.runs)) {
        return null;
      }
      const seen = new Set<string>();
      const runs: IRunInfo[] = [];
      for (const item of data.runs) {
        const run = parseRun(item);
        if (run && !seen.has(run.name)) {
          seen.add(run.name);
          runs.push(run);
        }
      }
      return withId({ type: 'runs' as const, runs });
    }
    case 'ack': {
      const action = data.action;
      if (
        action !== 'pause' &&
        action !== 'resume' &&
        action !== 'stop' &&
        action !== 'subscribe'
      ) {
        return null;
      }
      const ack: KernelMessage = { type: 'ack', action };
      if (typeof data.name === 'string') {
        ack.name = data.name;
      }
      if (isRunStatus(data.status)) {
        ack.status = data.status;
      }
      const interval = finiteOrNull(data.interval_ms);
      if (interval !== null) {
        ack.intervalMs = interval;
      }
      return withId(ack);
    }
    case 'error':
      return withId({
        type: 'error' as const,
        message:
          typeof data.message === 'string' ? data.message : 'unknown error'
      });
    default:
      return null;
  }
}
