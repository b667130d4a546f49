/**
 * The `%%stream` language, as far as the editor needs it: the stage keywords, the
 * functions and options worth completing, and a small tokenizer for highlighting.
 *
 * The language itself is defined by kernel/streamcell/dsl.py (a stage per line,
 * `[label =] keyword arguments`, Python expressions, `#` comments, indented lines continue
 * the stage). STAGES must equal streamcell.dsl.STAGES: tests/ui/test_lab_ui.py checks it.
 */

export const MAGIC = '%%stream';

export const STAGES = [
  'source',
  'filter',
  'select',
  'with_columns',
  'explode',
  'key_by',
  'key_by_all',
  'transfer',
  'tumbling',
  'sliding',
  'session',
  'agg',
  'running',
  'top_k',
  'dedup',
  'sketch',
  'speculate',
  'apply',
  'union',
  'join',
  'correlate',
  'sink'
] as const;

/** One line of help per stage, shown by the completer. */
export const STAGE_DOCS: Record<(typeof STAGES)[number], string> = {
  source: 'source GENERATOR(...) | FILE | NAME [, rate=ROWS_PER_S]',
  filter: 'filter EXPR: keep the rows where EXPR is true',
  select: 'select COL, NAME=EXPR, ...',
  with_columns: 'with_columns NAME=EXPR, ...: add or replace columns',
  explode: 'explode COL: one row per list element',
  key_by: 'key_by COL, ...: partition the stream by key',
  key_by_all:
    'key_by_all FROM, TO: the entities each event names (then transfer)',
  transfer:
    'transfer AMOUNT, initial=0, overdraft=False: move AMOUNT from FROM to TO',
  tumbling: 'tumbling size="1m", time=COL: tumbling event-time windows',
  sliding: 'sliding size="1m", every="10s", time=COL: sliding windows',
  session: 'session gap="30m", time=COL: session windows',
  agg: 'agg NAME=count(), NAME=sum(COL), ...',
  running: 'running NAME=AGG(...), ...: per-event running aggregates',
  top_k: 'top_k K, by=COL',
  dedup: 'dedup COL, ...: drop repeated keys',
  sketch:
    'sketch theta(COL) as NAME, kll(COL) as NAME, ...: live sketches (theta, hll, kll, frequent)',
  speculate:
    'speculate NAME=FN(COL, ...), horizon="adaptive": a transactional Cython function per row',
  apply:
    'apply NAME=FN(COL, ...): a Cython keyed step over a per-key state struct (after key_by)',
  union: 'union STREAM, ...',
  join: 'join STREAM, on=COL, within="5m"',
  correlate:
    'correlate STREAM, on=COL, time=COL, over="1h", NAME=mean(COL), NAME=std(STREAM.COL)',
  sink: 'sink table | parquet(PATH) | callback(FN)'
};

/** Functions offered in expressions (sources, aggregates, helpers). */
export const FUNCTIONS = [
  'clickstream',
  'store_sales',
  'parquet',
  'csv',
  'ndjson',
  'count',
  'sum',
  'min',
  'max',
  'mean',
  'std',
  'first',
  'last',
  'count_distinct',
  'col',
  'lit',
  'when',
  'cast',
  'is_null',
  'fill_null'
] as const;

/** The `%%stream NAME` header's options (streamcell.magic). */
export const HEADER_OPTIONS = [
  '--engine',
  '--workers',
  '--batch-size',
  '--scheduler',
  '--no-display',
  '--wait'
] as const;

const VALUE_OPTIONS: ReadonlySet<string> = new Set([
  '--engine',
  '--workers',
  '--batch-size',
  '--scheduler'
]);
const STAGE_SET: ReadonlySet<string> = new Set(STAGES);
const PY_KEYWORDS = new Set([
  'and',
  'or',
  'not',
  'in',
  'is',
  'if',
  'else',
  'None',
  'True',
  'False'
]);

export type TokenKind =
  | 'magic'
  | 'runname'
  | 'option'
  | 'stage'
  | 'unknown-stage'
  | 'label'
  | 'string'
  | 'number'
  | 'comment'
  | 'function'
  | 'param'
  | 'keyword'
  | 'operator';

export interface IToken {
  from: number;
  to: number;
  kind: TokenKind;
}

/** Does this cell text start with the `%%stream` magic? */
export function isStreamCell(text: string): boolean {
  return (
    text.startsWith(MAGIC) &&
    (text.length === MAGIC.length || /\s/.test(text[MAGIC.length]))
  );
}

const NUMBER_RE =
  /^(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?j?)/;
const STRING_START_RE = /^(?:[rRbBuUfF]{1,2})?(['"])/;
const IDENT_RE = /^[A-Za-z_]\w*/;
const OPERATOR_RE = /^(?:\*\*|\/\/|==|!=|<=|>=|[-+*/%<>&|~])/;
const HEAD_RE = /^(?:([A-Za-z_]\w*)(\s*=(?!=)\s*))?([A-Za-z_]\w*)/;

/**
 * Tokens of a `%%stream` cell, in document order, not overlapping; [] for any other
 * text. Offsets are into `text`. Plain identifiers (columns) and punctuation get no token.
 */
export function tokenize(text: string): IToken[] {
  if (!isStreamCell(text)) {
    return [];
  }
  const tokens: IToken[] = [];
  let offset = 0;
  text.split('\n').forEach((line, index) => {
    if (index === 0) {
      headerTokens(line, offset, tokens);
    } else {
      stageTokens(line, offset, tokens);
    }
    offset += line.length + 1;
  });
  return tokens;
}

function headerTokens(line: string, base: number, out: IToken[]): void {
  out.push({ from: base, to: base + MAGIC.length, kind: 'magic' });
  let named = false;
  let expectValue = false;
  const re = /\S+/g;
  re.lastIndex = MAGIC.length;
  let m: RegExpExecArray | null;
  while ((m = re.exec(line))) {
    const word = m[0];
    const from = base + m.index;
    if (word.startsWith('#')) {
      out.push({ from, to: base + line.length, kind: 'comment' });
      return;
    }
    const valueOf = expectValue;
    expectValue = false;
    if (word.startsWith('-')) {
      const eq = word.indexOf('=');
      out.push({
        from,
        to: from + (eq > 0 ? eq : word.length),
        kind: 'option'
      });
      expectValue = eq < 0 && VALUE_OPTIONS.has(word);
    } else if (NUMBER_RE.exec(word)?.[0] === word) {
      out.push({ from, to: from + word.length, kind: 'number' });
    } else if (!named && !valueOf) {
      named = true;
      out.push({ from, to: from + word.length, kind: 'runname' });
    }
  }
}

function stageTokens(line: string, base: number, out: IToken[]): void {
  const trimmed = line.replace(/^\s+/, '');
  const indent = line.length - trimmed.length;
  if (!trimmed) {
    return;
  }
  if (trimmed.startsWith('#')) {
    out.push({ from: base + indent, to: base + line.length, kind: 'comment' });
    return;
  }
  let pos = indent;
  if (indent === 0) {
    // a new stage: `[label =] keyword args`
    const head = HEAD_RE.exec(line);
    if (head) {
      if (head[1]) {
        out.push({ from: base, to: base + head[1].length, kind: 'label' });
      }
      const kwFrom = (head[1]?.length ?? 0) + (head[2]?.length ?? 0);
      const keyword = head[3];
      out.push({
        from: base + kwFrom,
        to: base + kwFrom + keyword.length,
        kind: STAGE_SET.has(keyword) ? 'stage' : 'unknown-stage'
      });
      pos = kwFrom + keyword.length;
    }
  }
  expressionTokens(line, pos, base, out);
}

function expressionTokens(
  line: string,
  start: number,
  base: number,
  out: IToken[]
): void {
  let pos = start;
  while (pos < line.length) {
    const rest = line.slice(pos);
    const ch = rest[0];
    if (ch === ' ' || ch === '\t') {
      pos++;
      continue;
    }
    if (ch === '#') {
      out.push({ from: base + pos, to: base + line.length, kind: 'comment' });
      return;
    }
    const str = STRING_START_RE.exec(rest);
    if (str) {
      const end = stringEnd(line, pos + str[0].length, str[1]);
      out.push({ from: base + pos, to: base + end, kind: 'string' });
      pos = end;
      continue;
    }
    if (/[0-9.]/.test(ch)) {
      const num = NUMBER_RE.exec(rest);
      if (num && num[0] !== '.') {
        out.push({
          from: base + pos,
          to: base + pos + num[0].length,
          kind: 'number'
        });
        pos += num[0].length;
        continue;
      }
    }
    const ident = IDENT_RE.exec(rest);
    if (ident) {
      const word = ident[0];
      const after = line.slice(pos + word.length);
      let kind: TokenKind | null = null;
      if (/^\s*\(/.test(after)) {
        kind = 'function';
      } else if (/^\s*=(?!=)/.test(after)) {
        kind = 'param';
      } else if (PY_KEYWORDS.has(word)) {
        kind = 'keyword';
      }
      if (kind) {
        out.push({ from: base + pos, to: base + pos + word.length, kind });
      }
      pos += word.length;
      continue;
    }
    const op = OPERATOR_RE.exec(rest);
    if (op) {
      out.push({
        from: base + pos,
        to: base + pos + op[0].length,
        kind: 'operator'
      });
      pos += op[0].length;
      continue;
    }
    pos++;
  }
}

/** The end (exclusive) of a string whose body starts at `pos`; end of line if unclosed. */
function stringEnd(line: string, pos: number, quote: string): number {
  const triple = line.startsWith(quote.repeat(2), pos);
  const close = triple ? quote.repeat(3) : quote;
  let i = triple ? pos + 2 : pos;
  while (i < line.length) {
    if (line[i] === '\\') {
      i += 2;
      continue;
    }
    if (line.startsWith(close, i)) {
      return i + close.length;
    }
    i++;
  }
  return line.length;
}

/** What to complete at `offset` in a `%%stream` cell, or null when nothing applies. */
export interface ICompletionSpot {
  kind: 'stage' | 'option' | 'function';
  start: number;
  prefix: string;
}

export function completionSpot(
  text: string,
  offset: number
): ICompletionSpot | null {
  if (!isStreamCell(text)) {
    return null;
  }
  const lineStart = text.lastIndexOf('\n', offset - 1) + 1;
  const before = text.slice(lineStart, offset);
  if (lineStart === 0) {
    const opt = /(?:^|\s)(-[-\w]*)$/.exec(before);
    return opt && before.length > MAGIC.length
      ? { kind: 'option', start: offset - opt[1].length, prefix: opt[1] }
      : null;
  }
  if (/#/.test(before)) {
    return null;
  }
  const head = /^(?:[A-Za-z_]\w*\s*=(?!=)\s*)?([A-Za-z_]\w*)?$/.exec(before);
  if (head) {
    const prefix = head[1] ?? '';
    return { kind: 'stage', start: offset - prefix.length, prefix };
  }
  const word = /(?:^|[^\w.'"])([A-Za-z_]\w*)$/.exec(before);
  if (word && !insideString(before)) {
    return {
      kind: 'function',
      start: offset - word[1].length,
      prefix: word[1]
    };
  }
  return null;
}

function insideString(before: string): boolean {
  let quote: string | null = null;
  for (let i = 0; i < before.length; i++) {
    const c = before[i];
    if (quote) {
      if (c === '\\') {
        i++;
      } else if (c === quote) {
        quote = null;
      }
    } else if (c === '"' || c === "'") {
      quote = c;
    }
  }
  return quote !== null;
}
