/**
 * How streamcell writes numbers for people: the rules of kernel/streamcell/fmt.py, so the
 * Streams panel, the status bar and the notebook's dashboard read alike. Both are checked
 * against one table of cases (tests/format_cases.json).
 *
 * Counts with thousands separators (1,234,567); rates as rows/s (20,000 rows/s, one decimal
 * below 100); latencies in ms (0.42 ms, 9.44 ms, 31.5 ms, 1,140 ms); elapsed time as m:ss
 * (1:05, 1:02:03), with tenths under a minute (0:07.3) and hundredths under a second
 * (0:00.04). An unknown number (null) is written '–'.
 */

export const NONE = '–';

function known(x: number | null | undefined): x is number {
  return typeof x === 'number' && Number.isFinite(x);
}

function separated(whole: number): string {
  return String(whole).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** `x` with `digits` decimals and thousands separators, rounded half up. */
function fixed(x: number, digits: number): string {
  const unit = 10 ** digits;
  const scaled = Math.round(Math.abs(x) * unit);
  const whole = Math.floor(scaled / unit);
  const frac = scaled % unit;
  const sign = x < 0 && scaled ? '-' : '';
  const text = sign + separated(whole);
  return digits ? `${text}.${String(frac).padStart(digits, '0')}` : text;
}

/** 1,234,567 */
export function count(n: number | null | undefined): string {
  return known(n) ? fixed(n, 0) : NONE;
}

/** 20,000 rows/s; 12.5 rows/s below 100. */
export function rate(r: number | null | undefined, unit = ' rows/s'): string {
  return known(r) ? fixed(r, Math.abs(r) < 100 ? 1 : 0) + unit : NONE;
}

/** 0.42 ms, 9.44 ms, 31.5 ms, 1,140 ms. */
export function ms(v: number | null | undefined): string {
  if (!known(v)) {
    return NONE;
  }
  const digits = Math.abs(v) < 10 ? 2 : Math.abs(v) < 100 ? 1 : 0;
  return `${fixed(v, digits)} ms`;
}

function pad2(n: number): string {
  return String(n).padStart(2, '0');
}

/** 0:00.04, 0:07.3, 1:05, 1:02:03. */
export function elapsed(s: number | null | undefined): string {
  if (!known(s)) {
    return NONE;
  }
  s = Math.max(0, s);
  const hundredths = Math.round(s * 100);
  if (hundredths < 100) {
    return `0:00.${pad2(hundredths)}`;
  }
  const tenths = Math.round(s * 10);
  if (tenths < 600) {
    return `0:${pad2(Math.floor(tenths / 10))}.${tenths % 10}`;
  }
  const whole = Math.round(s);
  const h = Math.floor(whole / 3600);
  const m = Math.floor((whole % 3600) / 60);
  const sec = whole % 60;
  return h ? `${h}:${pad2(m)}:${pad2(sec)}` : `${m}:${pad2(sec)}`;
}

/** A fraction as a percentage: 12.5%. */
export function share(x: number | null | undefined): string {
  return known(x) ? `${fixed(x * 100, 1)}%` : NONE;
}
