// The dashboard's live result grid (an anywidget front end, no dependencies).
//
// The kernel sends a window of the run's output table as an Arrow IPC stream (the `arrow`
// trait, a binary buffer) with columns of three types only: 64-bit integers, doubles and
// UTF-8 strings (streamcell.widgets.grid casts everything else to strings). This module
// reads that stream, draws an HTML table, and sorts (click a header: ascending, descending,
// unsorted) and filters (a text box: rows with a cell containing the text) in the browser.
// The sort and the filter stay in force while new windows arrive.

const CONTINUATION = 0xffffffff;
const HEADER_SCHEMA = 1;
const HEADER_RECORD_BATCH = 3;
const TYPE_INT = 2;
const TYPE_FLOAT = 3;
const TYPE_UTF8 = 5;

// ---------------------------------------------------------------- flatbuffers
class Table {
  constructor(view, pos) {
    this.view = view;
    this.pos = pos;
    this.vtable = pos - view.getInt32(pos, true);
    this.vlen = view.getUint16(this.vtable, true);
  }
  offset(field) {
    const at = 4 + 2 * field;
    return at < this.vlen ? this.view.getUint16(this.vtable + at, true) : 0;
  }
  uint8(field, fallback = 0) {
    const o = this.offset(field);
    return o ? this.view.getUint8(this.pos + o) : fallback;
  }
  int32(field, fallback = 0) {
    const o = this.offset(field);
    return o ? this.view.getInt32(this.pos + o, true) : fallback;
  }
  int16(field, fallback = 0) {
    const o = this.offset(field);
    return o ? this.view.getInt16(this.pos + o, true) : fallback;
  }
  int64(field) {
    const o = this.offset(field);
    return o ? Number(this.view.getBigInt64(this.pos + o, true)) : 0;
  }
  target(field) {
    const o = this.offset(field);
    if (!o) {
      return 0;
    }
    const at = this.pos + o;
    return at + this.view.getUint32(at, true);
  }
  table(field) {
    const t = this.target(field);
    return t ? new Table(this.view, t) : null;
  }
  string(field) {
    const t = this.target(field);
    if (!t) {
      return '';
    }
    const n = this.view.getUint32(t, true);
    const bytes = new Uint8Array(this.view.buffer, this.view.byteOffset + t + 4, n);
    return new TextDecoder().decode(bytes);
  }
  vector(field) {
    const t = this.target(field);
    return t ? { start: t + 4, length: this.view.getUint32(t, true) } : { start: 0, length: 0 };
  }
  tables(field) {
    const v = this.vector(field);
    const out = [];
    for (let i = 0; i < v.length; i++) {
      const at = v.start + 4 * i;
      out.push(new Table(this.view, at + this.view.getUint32(at, true)));
    }
    return out;
  }
}

// ---------------------------------------------------------------- Arrow IPC
function readSchema(message) {
  return message.tables(1).map(field => {
    const kind = field.uint8(2);
    const type = field.table(3);
    let name = 'utf8';
    if (kind === TYPE_INT && type && type.int32(0) === 64) {
      name = 'int64';
    } else if (kind === TYPE_FLOAT && type && type.int16(0) === 2) {
      name = 'float64';
    } else if (kind !== TYPE_UTF8) {
      throw new Error(`streamcell grid: unsupported Arrow type ${kind}`);
    }
    return { name: field.string(0), type: name };
  });
}

function valid(bitmap, i) {
  return !bitmap || (bitmap[i >> 3] >> (i & 7)) & 1;
}

function readColumn(col, node, buffers, body) {
  const bytes = k => {
    const b = buffers[k];
    return b.length ? new Uint8Array(body.buffer, body.byteOffset + b.offset, b.length) : null;
  };
  const n = node.length;
  const bitmap = node.nullCount ? bytes(0) : null;
  const out = new Array(n);
  const data = bytes(col.type === 'utf8' ? 2 : 1);
  if (col.type === 'utf8') {
    const off = bytes(1);
    const offsets = new Int32Array(off.buffer, off.byteOffset, n + 1);
    const decoder = new TextDecoder();
    for (let i = 0; i < n; i++) {
      out[i] = valid(bitmap, i)
        ? decoder.decode(data ? data.subarray(offsets[i], offsets[i + 1]) : new Uint8Array())
        : null;
    }
    return out;
  }
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  for (let i = 0; i < n; i++) {
    if (!valid(bitmap, i)) {
      out[i] = null;
    } else if (col.type === 'int64') {
      out[i] = Number(view.getBigInt64(8 * i, true));
    } else {
      out[i] = view.getFloat64(8 * i, true);
    }
  }
  return out;
}

/** An Arrow IPC stream (one schema, record batches) as {columns, rows}. */
export function readArrowStream(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  let columns = null;
  const rows = [];
  while (pos + 8 <= view.byteLength) {
    let size = view.getInt32(pos, true);
    pos += 4;
    if (size === -1 || size >>> 0 === CONTINUATION) {
      size = view.getInt32(pos, true);
      pos += 4;
    }
    if (size === 0) {
      break; // end of stream
    }
    const meta = new DataView(view.buffer, view.byteOffset + pos, size);
    const message = new Table(meta, meta.getUint32(0, true));
    pos += size;
    const bodyLength = message.int64(3);
    const body = new Uint8Array(view.buffer, view.byteOffset + pos, bodyLength);
    pos += bodyLength;
    const kind = message.uint8(1);
    const header = message.table(2);
    if (kind === HEADER_SCHEMA) {
      columns = readSchema(header);
    } else if (kind === HEADER_RECORD_BATCH && columns) {
      const length = header.int64(0);
      const nodes = header.vector(1);
      const bufs = header.vector(2);
      const node = i => ({
        length: Number(meta.getBigInt64(nodes.start + 16 * i, true)),
        nullCount: Number(meta.getBigInt64(nodes.start + 16 * i + 8, true))
      });
      const buffer = i => ({
        offset: Number(meta.getBigInt64(bufs.start + 16 * i, true)),
        length: Number(meta.getBigInt64(bufs.start + 16 * i + 8, true))
      });
      let b = 0;
      const data = columns.map((col, i) => {
        const count = col.type === 'utf8' ? 3 : 2;
        const own = [];
        for (let k = 0; k < count; k++) {
          own.push(buffer(b++));
        }
        return readColumn(col, node(i), own, body);
      });
      for (let r = 0; r < length; r++) {
        rows.push(data.map(c => c[r]));
      }
    }
  }
  return { columns: columns || [], rows };
}

// ---------------------------------------------------------------- the grid
function text(value, type) {
  if (value === null || value === undefined) {
    return '';
  }
  if (type === 'int64') {
    return String(value).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }
  if (type === 'float64') {
    return Number.isInteger(value) ? String(value) : value.toPrecision(6).replace(/\.?0+$/, '');
  }
  return value;
}

function compare(a, b) {
  if (a === b) {
    return 0;
  }
  if (a === null) {
    return 1; // nulls last
  }
  if (b === null) {
    return -1;
  }
  return a < b ? -1 : 1;
}

function bytesOf(value) {
  if (!value) {
    return new Uint8Array();
  }
  if (value instanceof DataView) {
    return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  }
  if (value instanceof ArrayBuffer) {
    return new Uint8Array(value);
  }
  return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
}

function render({ model, el }) {
  const root = document.createElement('div');
  root.className = 'sc-grid';
  const bar = document.createElement('div');
  bar.className = 'sc-grid-bar';
  const filter = document.createElement('input');
  filter.className = 'sc-grid-filter';
  filter.type = 'search';
  filter.placeholder = 'filter rows…';
  const info = document.createElement('span');
  info.className = 'sc-grid-info';
  bar.append(filter, info);
  const scroller = document.createElement('div');
  scroller.className = 'sc-grid-scroll';
  const table = document.createElement('table');
  table.className = 'sc-grid-table';
  scroller.append(table);
  root.append(bar, scroller);
  el.append(root);

  const state = { columns: [], rows: [], sort: null, desc: false, needle: '' };

  function draw() {
    const { columns } = state;
    let rows = state.rows;
    if (state.needle) {
      const needle = state.needle.toLowerCase();
      rows = rows.filter(r =>
        r.some((v, i) => text(v, columns[i].type).toLowerCase().includes(needle))
      );
    }
    if (state.sort !== null) {
      const k = state.sort;
      const sign = state.desc ? -1 : 1;
      rows = rows
        .map((r, i) => [r, i])
        .sort((a, b) => sign * compare(a[0][k], b[0][k]) || a[1] - b[1])
        .map(p => p[0]);
    }
    const head = document.createElement('thead');
    const tr = document.createElement('tr');
    columns.forEach((col, i) => {
      const th = document.createElement('th');
      th.dataset.column = col.name;
      th.className = col.type === 'utf8' ? '' : 'sc-num';
      const mark = state.sort === i ? (state.desc ? ' ▼' : ' ▲') : '';
      th.textContent = col.name + mark;
      th.title = `sort by ${col.name}`;
      if (state.sort === i) {
        th.dataset.sort = state.desc ? 'desc' : 'asc';
      }
      tr.append(th);
    });
    head.append(tr);
    const body = document.createElement('tbody');
    for (const r of rows) {
      const row = document.createElement('tr');
      r.forEach((v, i) => {
        const td = document.createElement('td');
        td.className = columns[i].type === 'utf8' ? '' : 'sc-num';
        td.textContent = text(v, columns[i].type);
        row.append(td);
      });
      body.append(row);
    }
    table.replaceChildren(head, body);
    const total = model.get('total');
    const shown = state.rows.length;
    const of = total > shown ? ` (the last ${shown.toLocaleString('en-US')} of ${total.toLocaleString('en-US')})` : '';
    info.textContent = `${rows.length.toLocaleString('en-US')} rows${of}`;
    root.dataset.version = String(model.get('version'));
    root.dataset.rows = String(rows.length);
  }

  function load() {
    try {
      const data = readArrowStream(bytesOf(model.get('arrow')));
      if (state.sort !== null && data.columns.length !== state.columns.length) {
        state.sort = null;
      }
      state.columns = data.columns;
      state.rows = data.rows;
    } catch (error) {
      info.textContent = String(error);
      return;
    }
    draw();
  }

  function onHeaderClick(event) {
    const th = event.target.closest('th');
    if (!th) {
      return;
    }
    const i = state.columns.findIndex(c => c.name === th.dataset.column);
    if (state.sort !== i) {
      state.sort = i;
      state.desc = false;
    } else if (!state.desc) {
      state.desc = true;
    } else {
      state.sort = null;
    }
    draw();
  }

  function onFilter() {
    state.needle = filter.value;
    draw();
  }

  table.addEventListener('click', onHeaderClick);
  filter.addEventListener('input', onFilter);
  model.on('change:arrow', load);
  load();
  return () => {
    table.removeEventListener('click', onHeaderClick);
    filter.removeEventListener('input', onFilter);
    model.off('change:arrow', load);
  };
}

export default { render };
