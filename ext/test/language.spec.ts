import { EditorState } from '@codemirror/state';
import { EditorView } from '@codemirror/view';

import { streamCompletions } from '../src/completer';
import {
  EDITOR_CLASS,
  streamDecorations,
  streamHighlighting
} from '../src/highlight';
import {
  completionSpot,
  isStreamCell,
  STAGES,
  tokenize,
  TokenKind
} from '../src/language';

const CELL = [
  '%%stream clicks --workers 2 --engine reference',
  '# views per user',
  'source clickstream(rows=5_000_000, users=100, seed=1), rate=2e4',
  'filter event == "view" and price >= 0.5',
  'views = key_by user_id',
  'agg pages=count(), spent=sum(price)  # trailing',
  '    , last=last(item_id)',
  'frobnicate x',
  'sink table'
].join('\n');

function kinds(text: string): [string, TokenKind][] {
  return tokenize(text).map(t => [text.slice(t.from, t.to), t.kind]);
}

describe('isStreamCell', () => {
  it.each([
    ['%%stream x', true],
    ['%%stream', true],
    ['%%stream\nsource a', true],
    ['%%streams x', false],
    [' %%stream x', false],
    ['%stream list', false],
    ['x = 1', false],
    ['', false]
  ])('%p -> %p', (text, expected) => {
    expect(isStreamCell(text)).toBe(expected);
  });
});

describe('tokenize', () => {
  it('finds nothing outside %%stream cells', () => {
    expect(tokenize('filter = 1\nsource = "x"')).toEqual([]);
  });

  it('marks the header: magic, run name, options, numbers', () => {
    const header = kinds(CELL).slice(0, 6);
    expect(header).toEqual(
      [
        ['%%stream', 'magic'],
        ['clicks', 'runname'],
        ['--workers', 'option'],
        ['2', 'number'],
        ['--engine', 'option']
      ].concat([['# views per user', 'comment']]) as [string, TokenKind][]
    );
  });

  it('marks stages, labels, strings, numbers, functions, params and keywords', () => {
    const got = kinds(CELL);
    const has = (text: string, kind: TokenKind) =>
      expect(got).toContainEqual([text, kind]);
    has('source', 'stage');
    has('filter', 'stage');
    has('key_by', 'stage');
    has('agg', 'stage');
    has('sink', 'stage');
    has('views', 'label');
    has('frobnicate', 'unknown-stage');
    has('clickstream', 'function');
    has('count', 'function');
    has('rows', 'param');
    has('rate', 'param');
    has('5_000_000', 'number');
    has('2e4', 'number');
    has('0.5', 'number');
    has('"view"', 'string');
    has('and', 'keyword');
    has('==', 'operator');
    has('>=', 'operator');
    has('# trailing', 'comment');
    has('last', 'param');
    // the engine's value is not the run name; columns get no token
    expect(got.filter(([, k]) => k === 'runname')).toEqual([
      ['clicks', 'runname']
    ]);
    expect(got.map(([t]) => t)).not.toContain('user_id');
    expect(got.map(([t]) => t)).not.toContain('reference');
  });

  it('does not treat a continuation line as a stage', () => {
    const got = kinds('%%stream x\nselect a,\n    filter');
    expect(got).not.toContainEqual(['filter', 'stage']);
  });

  it('handles strings with escapes, prefixes and no closing quote', () => {
    expect(kinds('%%stream x\nfilter s == r"a\\"b" or t == \'open')).toEqual([
      ['%%stream', 'magic'],
      ['x', 'runname'],
      ['filter', 'stage'],
      ['==', 'operator'],
      ['r"a\\"b"', 'string'],
      ['or', 'keyword'],
      ['==', 'operator'],
      ["'open", 'string']
    ]);
  });

  it('produces sorted, non-overlapping tokens (as CodeMirror needs)', () => {
    const tokens = tokenize(CELL);
    for (let i = 1; i < tokens.length; i++) {
      expect(tokens[i].from).toBeGreaterThanOrEqual(tokens[i - 1].to);
    }
    for (const t of tokens) {
      expect(t.to).toBeGreaterThan(t.from);
    }
  });

  it('builds CodeMirror decorations with cm-sc classes', () => {
    const set = streamDecorations(CELL);
    const classes: string[] = [];
    set.between(0, CELL.length, (from, to, deco) => {
      classes.push(deco.spec.class as string);
    });
    expect(classes).toContain('cm-sc-stage');
    expect(classes).toContain('cm-sc-magic');
    expect(streamDecorations('x = 1').size).toBe(0);
    // decorations fit a real document
    const state = EditorState.create({ doc: CELL });
    expect(state.doc.length).toBe(CELL.length);
  });
});

describe('completion', () => {
  it('completes stage names at the start of a line', () => {
    const text = '%%stream x\nso';
    const reply = streamCompletions(text, text.length);
    expect(reply.items.map(i => i.label)).toEqual(['source']);
    expect(reply.start).toBe(text.length - 2);
    expect(reply.end).toBe(text.length);
    const all = streamCompletions('%%stream x\n', 11);
    expect(all.items.map(i => i.label)).toEqual([...STAGES]);
    const s = streamCompletions('%%stream x\ns', 12).items.map(i => i.label);
    expect(s).toEqual([
      'source',
      'select',
      'sliding',
      'session',
      'sketch',
      'speculate',
      'sink'
    ]);
  });

  it('completes after a label', () => {
    const text = '%%stream x\nviews = ke';
    expect(
      streamCompletions(text, text.length).items.map(i => i.label)
    ).toEqual(['key_by', 'key_by_all']);
  });

  it('completes header options and expression functions', () => {
    const header = '%%stream x --wo';
    expect(
      streamCompletions(header, header.length).items.map(i => i.label)
    ).toEqual(['--workers']);
    const expr = '%%stream x\nagg n=cou';
    expect(
      streamCompletions(expr, expr.length).items.map(i => i.label)
    ).toEqual(['count', 'count_distinct']);
  });

  it('offers nothing in other cells, in strings, in comments or after a dot', () => {
    expect(completionSpot('x = so', 6)).toBeNull();
    const inString = '%%stream x\nfilter e == "vi';
    expect(streamCompletions(inString, inString.length).items).toEqual([]);
    const inComment = '%%stream x\n# so';
    expect(streamCompletions(inComment, inComment.length).items).toEqual([]);
    const attr = '%%stream x\nfilter name.str.lo';
    expect(streamCompletions(attr, attr.length).items).toEqual([]);
    expect(streamCompletions('%%stream x', 10).items).toEqual([]);
  });
});

describe('streamHighlighting in an editor', () => {
  it('marks a %%stream cell and follows edits', () => {
    const view = new EditorView({
      state: EditorState.create({
        doc: CELL,
        extensions: [streamHighlighting()]
      }),
      parent: document.body
    });
    try {
      expect(view.dom.classList.contains(EDITOR_CLASS)).toBe(true);
      const stages = Array.from(
        view.contentDOM.querySelectorAll('.cm-sc-stage')
      ).map(e => e.textContent);
      expect(stages).toEqual(['source', 'filter', 'key_by', 'agg', 'sink']);
      // editing the magic away turns it into a plain cell
      view.dispatch({ changes: { from: 0, to: 2, insert: '' } });
      expect(view.dom.classList.contains(EDITOR_CLASS)).toBe(false);
      expect(view.contentDOM.querySelectorAll('[class*="cm-sc-"]').length).toBe(
        0
      );
      view.dispatch({ changes: { from: 0, insert: '%%' } });
      expect(view.dom.classList.contains(EDITOR_CLASS)).toBe(true);
    } finally {
      view.destroy();
    }
  });
});
