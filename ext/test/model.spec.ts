import { StreamsModel } from '../src/model';
import { FrontendMessage, parseKernelMessage } from '../src/protocol';

class FakeTransport {
  sent: FrontendMessage[] = [];
  send(message: FrontendMessage): void {
    this.sent.push(message);
  }
  last(): FrontendMessage {
    return this.sent[this.sent.length - 1];
  }
}

function run(
  name: string,
  status: string,
  rows = 0,
  rate: number | null = 100
) {
  return {
    name,
    status,
    rows_per_s: rate,
    p99_ms: 1.5,
    rows_done: rows,
    elapsed_s: 60,
    cell_id: `cell-${name}`
  };
}

function connected(options: StreamsModel.IOptions = {}) {
  const model = new StreamsModel(options);
  const transport = new FakeTransport();
  model.attach(transport, 'demo.ipynb');
  return { model, transport };
}

describe('parseKernelMessage', () => {
  it('accepts a runs message and converts the fields', () => {
    const msg = parseKernelMessage({
      type: 'runs',
      runs: [run('a', 'running', 5, 12.5)],
      id: 'L'
    });
    expect(msg).toEqual({
      type: 'runs',
      id: 'L',
      runs: [
        {
          name: 'a',
          status: 'running',
          rowsPerS: 12.5,
          p99Ms: 1.5,
          rowsDone: 5,
          elapsedS: 60,
          cellId: 'cell-a'
        }
      ]
    });
  });

  it('drops runs without a name, duplicates, and bad numbers', () => {
    const msg = parseKernelMessage({
      type: 'runs',
      runs: [
        { status: 'running' },
        'x',
        null,
        { ...run('a', 'running'), rows_per_s: 'fast', p99_ms: null },
        run('a', 'stopped'),
        { ...run('b', 'exploded'), cell_id: 3 }
      ]
    });
    expect(msg?.type).toBe('runs');
    const runs = msg?.type === 'runs' ? msg.runs : [];
    expect(runs.map(r => r.name)).toEqual(['a', 'b']);
    expect(runs[0].rowsPerS).toBeNull();
    expect(runs[0].p99Ms).toBeNull();
    expect(runs[0].status).toBe('running');
    expect(runs[1].status).toBe('failed');
    expect(runs[1].cellId).toBeNull();
  });

  it.each([
    null,
    undefined,
    42,
    'runs',
    [],
    {},
    { type: 'runs' },
    { type: 'runs', runs: {} },
    { type: 'ack', action: 'delete' },
    { type: 'ack' },
    { type: 'exec', code: 'x' }
  ])('rejects %p', data => {
    expect(parseKernelMessage(data)).toBeNull();
  });

  it('keeps only string or integer ids', () => {
    expect(parseKernelMessage({ type: 'error', message: 'm', id: 3 })).toEqual({
      type: 'error',
      message: 'm',
      id: 3
    });
    expect(
      parseKernelMessage({ type: 'error', message: 'm', id: { a: 1 } })
    ).toEqual({ type: 'error', message: 'm' });
    expect(parseKernelMessage({ type: 'error', id: 1.5 })).toEqual({
      type: 'error',
      message: 'unknown error'
    });
  });
});

describe('StreamsModel', () => {
  it('starts with no kernel and ignores messages', () => {
    const model = new StreamsModel();
    expect(model.state).toBe('no-kernel');
    expect(
      model.handleMessage({ type: 'runs', runs: [run('a', 'running')] })
    ).toBe(false);
    expect(model.runs).toEqual([]);
  });

  it('subscribes and lists when attached', () => {
    const { model, transport } = connected({ intervalMs: 250 });
    expect(model.state).toBe('connecting');
    expect(model.label).toBe('demo.ipynb');
    expect(transport.sent).toEqual([
      { type: 'subscribe', interval_ms: 250 },
      { type: 'list' }
    ]);
  });

  it('is connected after the first runs message and keeps the order', () => {
    const { model } = connected();
    const changed = jest.fn();
    model.changed.connect(changed);
    expect(
      model.handleMessage({
        type: 'runs',
        runs: [run('b', 'running', 10, 1000), run('a', 'paused', 5, 50)]
      })
    ).toBe(true);
    expect(model.state).toBe('connected');
    expect(model.runs.map(r => r.name)).toEqual(['b', 'a']);
    expect(model.totalRowsPerS).toBe(1000);
    expect(model.activeCount).toBe(2);
    expect(changed).toHaveBeenCalledTimes(1);
  });

  it('ignores undocumented messages without emitting', () => {
    const { model } = connected();
    const changed = jest.fn();
    model.changed.connect(changed);
    expect(model.handleMessage({ type: 'eval', code: '1' })).toBe(false);
    expect(model.handleMessage('junk')).toBe(false);
    expect(changed).not.toHaveBeenCalled();
    expect(model.state).toBe('connecting');
  });

  it('sums rows/s over running runs only', () => {
    const { model } = connected();
    model.handleMessage({
      type: 'runs',
      runs: [
        run('a', 'running', 1, 1500),
        run('b', 'running', 1, null),
        run('c', 'paused', 1, 99),
        run('d', 'finished', 1, 77)
      ]
    });
    expect(model.totalRowsPerS).toBe(1500);
    expect(model.activeCount).toBe(3);
  });

  it('reports runs that start after it connected, not the ones already there', () => {
    const { model } = connected();
    const started = jest.fn();
    model.runStarted.connect((_, r) => started(r.name));
    model.handleMessage({ type: 'runs', runs: [run('old', 'running')] });
    expect(started).not.toHaveBeenCalled();
    model.handleMessage({
      type: 'runs',
      runs: [run('old', 'running'), run('new', 'running')]
    });
    expect(started.mock.calls).toEqual([['new']]);
    model.handleMessage({
      type: 'runs',
      runs: [run('old', 'finished'), run('new', 'running')]
    });
    // re-running a cell replaces the finished run of the same name
    model.handleMessage({
      type: 'runs',
      runs: [run('old', 'running'), run('new', 'running')]
    });
    expect(started.mock.calls).toEqual([['new'], ['old']]);
  });

  it('counts a young run in the first list as starting', () => {
    const { model } = connected();
    const started = jest.fn();
    model.runStarted.connect((_, r) => started(r.name));
    model.handleMessage({
      type: 'runs',
      runs: [
        run('old', 'running'),
        { ...run('young', 'running'), elapsed_s: 0.4 },
        { ...run('done', 'finished'), elapsed_s: 0.4 }
      ]
    });
    expect(started.mock.calls).toEqual([['young']]);
  });

  it('sends a control request, marks it pending, and applies the ack', async () => {
    const { model, transport } = connected();
    model.handleMessage({ type: 'runs', runs: [run('a', 'running')] });
    const done = model.control('stop', 'a');
    const request = transport.last();
    expect(request).toMatchObject({
      type: 'control',
      action: 'stop',
      name: 'a'
    });
    expect(model.pending('a')).toBe('stop');
    const id = (request as { id: string }).id;
    model.handleMessage({
      type: 'ack',
      action: 'stop',
      name: 'a',
      status: 'stopped',
      id
    });
    await expect(done).resolves.toBe('stopped');
    expect(model.pending('a')).toBeNull();
    expect(model.getRun('a')?.status).toBe('stopped');
    expect(model.lastError).toBeNull();
  });

  it('rejects a control request with the kernel error and keeps it', async () => {
    const { model, transport } = connected();
    model.handleMessage({ type: 'runs', runs: [run('a', 'finished')] });
    const done = model.control('pause', 'a');
    const id = (transport.last() as { id: string }).id;
    model.handleMessage({
      type: 'error',
      message: "cannot pause run 'a': it is finished",
      id
    });
    await expect(done).rejects.toThrow('it is finished');
    expect(model.lastError).toContain('it is finished');
    expect(model.pending('a')).toBeNull();
  });

  it('an ack with an unknown id does not settle other requests', async () => {
    const { model } = connected();
    const done = model.control('pause', 'a');
    model.handleMessage({ type: 'ack', action: 'pause', name: 'a', id: 'zzz' });
    expect(model.pending('a')).toBe('pause');
    model.detach('unavailable');
    await expect(done).rejects.toThrow('disconnected');
  });

  it('times out a control request the kernel never answers', async () => {
    jest.useFakeTimers();
    try {
      const { model } = connected({ requestTimeoutMs: 1000 });
      const done = model.control('stop', 'a');
      jest.advanceTimersByTime(1001);
      await expect(done).rejects.toThrow('no answer');
      expect(model.pending('a')).toBeNull();
    } finally {
      jest.useRealTimers();
    }
  });

  it('refuses control when not connected', async () => {
    const model = new StreamsModel();
    await expect(model.control('stop', 'a')).rejects.toThrow('not connected');
  });

  it('forgets runs on detach and says why', () => {
    const { model } = connected();
    model.handleMessage({ type: 'runs', runs: [run('a', 'running')] });
    model.detach('unavailable');
    expect(model.state).toBe('unavailable');
    expect(model.runs).toEqual([]);
    expect(
      model.handleMessage({ type: 'runs', runs: [run('a', 'running')] })
    ).toBe(false);
  });

  it('sends the new interval and refresh requests when connected', () => {
    const { model, transport } = connected();
    model.setInterval(1000);
    model.refresh();
    expect(transport.sent.slice(-2)).toEqual([
      { type: 'subscribe', interval_ms: 1000 },
      { type: 'list' }
    ]);
    expect(model.intervalMs).toBe(1000);
  });

  it('survives a transport that throws', () => {
    const model = new StreamsModel();
    const warn = jest
      .spyOn(console, 'warn')
      .mockImplementation(() => undefined);
    model.attach({
      send: () => {
        throw new Error('kernel gone');
      }
    });
    expect(model.state).toBe('connecting');
    expect(warn).toHaveBeenCalled();
    warn.mockRestore();
  });

  it('stops emitting once disposed', () => {
    const { model } = connected();
    const changed = jest.fn();
    model.changed.connect(changed);
    model.dispose();
    expect(model.isDisposed).toBe(true);
    expect(model.handleMessage({ type: 'runs', runs: [] })).toBe(false);
    expect(changed).not.toHaveBeenCalled();
  });
});
