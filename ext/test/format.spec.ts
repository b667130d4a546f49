import * as fs from 'fs';
import * as path from 'path';

import * as format from '../src/format';

// the same table of cases as kernel/streamcell/fmt.py (tests/test_format.py)
const CASES = JSON.parse(
  fs.readFileSync(
    path.resolve(__dirname, '..', '..', 'tests', 'format_cases.json'),
    'utf8'
  )
) as Record<string, [number | null, string][]>;

type Formatter = (x: number | null) => string;
const FORMATTERS: Record<string, Formatter> = {
  count: format.count,
  rate: x => format.rate(x),
  ms: format.ms,
  elapsed: format.elapsed,
  share: format.share
};

describe('one number format, shared with the kernel', () => {
  const kinds = Object.keys(CASES).filter(k => !k.startsWith('_'));

  it('has a formatter for every kind of case', () => {
    expect(kinds.sort()).toEqual(Object.keys(FORMATTERS).sort());
  });

  for (const kind of kinds) {
    it.each(CASES[kind])(`${kind}(%p) = %p`, (value, text) => {
      expect(FORMATTERS[kind](value)).toBe(text);
    });
  }
});
