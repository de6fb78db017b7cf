// Just enough LogQL on the client to edit a selector and find line-filter needles. The
// server parses the query for real; nothing here decides whether a query is valid.

const STRING = String.raw`"(?:[^"\\]|\\.)*"|\x60[^\x60]*\x60`;
const MATCHER = new RegExp(String.raw`([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*(${STRING})`, 'g');

// index just past the `}` closing the `{` at `open`, skipping quoted strings; -1 if unclosed
function closing(text, open) {
  for (let i = open + 1; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
    } else if (c === '`') {
      i = text.indexOf('`', i + 1);
      if (i < 0) return -1;
    } else if (c === '}') return i + 1;
  }
  return -1;
}

// A log query starts with its selector; a metric query with a function, a number or `(`
export const isLogQuery = (q) => /^\s*\{/.test(q.replace(/^\s*#[^\n]*\n/gm, ''));

// the first `{...}` of the query: [start, end) or null
function selectorSpan(q) {
  const open = q.indexOf('{');
  if (open < 0) return null;
  const end = closing(q, open);
  return end < 0 ? null : [open, end];
}

export function selectorOf(q) {
  const span = selectorSpan(q);
  return span ? q.slice(span[0], span[1]) : '';
}

const quote = (v) => JSON.stringify(v);

// The query with `name="value"` in its selector: an equality matcher for the same name is
// replaced, any other kept; a query without a selector becomes `{name="value"}` and the rest.
export function withMatcher(q, name, value) {
  const span = selectorSpan(q);
  const matcher = `${name}=${quote(value)}`;
  if (!span) return q.trim() ? `{${matcher}} ${q.trim()}` : `{${matcher}}`;
  const inner = q.slice(span[0] + 1, span[1] - 1);
  const parts = [];
  let replaced = false;
  for (const m of inner.matchAll(MATCHER)) {
    if (m[1] === name && m[2] === '=') {
      if (!replaced) parts.push(matcher);
      replaced = true;
    } else parts.push(`${m[1]}${m[2]}${m[3]}`);
  }
  if (!replaced) parts.push(matcher);
  return q.slice(0, span[0]) + `{${parts.join(', ')}}` + q.slice(span[1]);
}

// A stage appended to the log pipeline (before any metric wrapper is not attempted: this is
// for log queries, which is where the page offers it)
export function withStage(q, stage) {
  return `${q.trim()} ${stage}`;
}

function unquote(lit) {
  if (lit.startsWith('`')) return lit.slice(1, -1);
  try { return JSON.parse(lit); } catch { return lit.slice(1, -1); }
}

// RegExps for the needles of the positive line filters (`|= "x"`, `|~ "re"`), to highlight;
// a pattern JavaScript cannot compile is left out (RE2 and JS differ at the edges)
export function needles(q) {
  const out = [];
  const re = new RegExp(String.raw`\|(=|~)\s*(${STRING})((?:\s*or\s*(?:${STRING}))*)`, 'g');
  for (const m of q.matchAll(re)) {
    const lits = [m[2], ...(m[3].match(new RegExp(STRING, 'g')) || [])].map(unquote);
    for (const lit of lits) {
      if (!lit) continue;
      try {
        if (m[1] === '=') out.push(new RegExp(lit.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'g'));
        else {
          const ci = lit.startsWith('(?i)');
          out.push(new RegExp(ci ? lit.slice(4) : lit, ci ? 'gi' : 'g'));
        }
      } catch { /* not a JavaScript regex: shown unhighlighted */ }
    }
  }
  return out;
}

// `key=value key2="quoted value"` pairs of a line, as logfmt reads them (for the details)
export function logfmtPairs(line) {
  const out = [];
  const re = /([A-Za-z_][\w.\-]*)=("(?:[^"\\]|\\.)*"|[^\s"]*)/g;
  for (const m of line.matchAll(re)) out.push([m[1], m[2].startsWith('"') ? unquote(m[2]) : m[2]]);
  return out;
}
