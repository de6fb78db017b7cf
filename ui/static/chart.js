// Two inline-SVG charts, no library: the stacked volume histogram of a log query and the
// line chart of a metric query. Both zoom the time range when dragged across.
import { esc, fmtShort, fmtTime, labelsText } from './util.js';

const NS = 'http://www.w3.org/2000/svg';
const W = 1000; // viewBox width; the SVG scales to its box
const PAD = { l: 48, r: 8, t: 8, b: 20 };

export const LEVEL_ORDER = ['critical', 'fatal', 'error', 'warn', 'info', 'debug', 'trace', 'unknown'];
const PALETTE = ['#3274d9', '#e0752d', '#56a64b', '#a352cc', '#e02f44', '#37872d', '#8f3bb8',
  '#f2cc0c', '#1f78c1', '#b877d9', '#ff780a', '#6d1f62'];

function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((x) => x >= v);
}

function fmtNum(v) {
  if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(1) + 'M';
  if (Math.abs(v) >= 1e4) return (v / 1e3).toFixed(0) + 'k';
  return String(Math.round(v * 100) / 100);
}

// the frame both charts share: axes, grid, time ticks; returns helpers to place things
function frame(height, start, end, ymax) {
  const x = (ms) => PAD.l + ((ms - start) / (end - start)) * (W - PAD.l - PAD.r);
  const y = (v) => height - PAD.b - (v / ymax) * (height - PAD.t - PAD.b);
  let out = '';
  for (const f of [0, 0.5, 1]) {
    const v = ymax * f;
    out += `<line class="grid" x1="${PAD.l}" x2="${W - PAD.r}" y1="${y(v)}" y2="${y(v)}"/>` +
      `<text class="axis" x="${PAD.l - 4}" y="${y(v) + 4}" text-anchor="end">${fmtNum(v)}</text>`;
  }
  for (let i = 0; i <= 5; i++) {
    const ms = start + ((end - start) * i) / 5;
    out += `<text class="axis" x="${x(ms)}" y="${height - 4}" text-anchor="${i === 0 ? 'start' : i === 5 ? 'end' : 'middle'}">${esc(fmtShort(ms, end - start))}</text>`;
  }
  return { x, y, out };
}

function svgOf(height, body, label) {
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${height}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  svg.innerHTML = body;
  return svg;
}

// Dragging across `svg` calls onZoom(fromMs, toMs); a click (under 4 px) does nothing.
function zoomable(svg, height, start, end, onZoom) {
  const band = document.createElementNS(NS, 'rect');
  band.setAttribute('class', 'zoomband');
  band.setAttribute('y', 0);
  band.setAttribute('height', height);
  band.setAttribute('width', 0);
  svg.append(band);
  const toX = (ev) => {
    const r = svg.getBoundingClientRect();
    return ((ev.clientX - r.left) / r.width) * W;
  };
  const toMs = (px) => start + ((Math.min(Math.max(px, PAD.l), W - PAD.r) - PAD.l) / (W - PAD.l - PAD.r)) * (end - start);
  let from = null;
  svg.addEventListener('pointerdown', (ev) => {
    from = toX(ev);
    svg.setPointerCapture(ev.pointerId);
  });
  svg.addEventListener('pointermove', (ev) => {
    if (from === null) return;
    const to = toX(ev);
    band.setAttribute('x', Math.min(from, to));
    band.setAttribute('width', Math.abs(to - from));
  });
  svg.addEventListener('pointerup', (ev) => {
    if (from === null) return;
    const to = toX(ev);
    band.setAttribute('width', 0);
    const [a, b] = [from, to].sort((p, q) => p - q);
    from = null;
    const r = svg.getBoundingClientRect();
    if (((b - a) / W) * r.width >= 4) onZoom(Math.round(toMs(a)), Math.round(toMs(b)));
  });
}

// the CSS class colouring a level (style.css has light and dark colours for each)
export const levelClass = (level) => `lvl-${LEVEL_ORDER.includes(level) ? level : 'unknown'}`;

// Stacked bars: series is a Loki matrix of `sum by (detected_level) (count_over_time(...))`
export function histogram(series, start, end, stepMs, onZoom) {
  const height = 110;
  const buckets = new Map(); // bucket start ms -> {level: count}
  const levels = new Set();
  for (const s of series) {
    const level = s.metric.detected_level || 'unknown';
    levels.add(level);
    for (const [sec, v] of s.values) {
      const t = Number(sec) * 1000;
      const b = buckets.get(t) || {};
      b[level] = (b[level] || 0) + Number(v);
      buckets.set(t, b);
    }
  }
  const order = [...levels].sort((a, b) => {
    const ia = LEVEL_ORDER.indexOf(a), ib = LEVEL_ORDER.indexOf(b);
    return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
  });
  let max = 0;
  for (const b of buckets.values()) max = Math.max(max, Object.values(b).reduce((p, q) => p + q, 0));
  const f = frame(height, start, end, niceMax(max));
  const bw = Math.max(1, f.x(start + stepMs) - f.x(start) - 1);
  let bars = '';
  for (const [t, b] of buckets) {
    // a count_over_time point at t counts the step before it
    let base = 0;
    const x0 = f.x(t - stepMs);
    for (const level of order) {
      const v = b[level];
      if (!v) continue;
      const y1 = f.y(base + v), y0 = f.y(base);
      bars += `<rect class="bar ${levelClass(level)}" data-level="${esc(level)}" x="${x0}" y="${y1}" width="${bw}" height="${Math.max(0.5, y0 - y1)}"><title>${esc(level)}: ${v} at ${esc(fmtTime(t))}</title></rect>`;
      base += v;
    }
  }
  const svg = svgOf(height, f.out + bars, 'log volume by level');
  zoomable(svg, height, start, end, onZoom);
  const legend = order.map((l) => `<span class="key"><i class="swatch ${levelClass(l)}"></i>${esc(l)}</span>`).join('');
  return { svg, legend };
}

// A line per series of a Loki matrix, with a legend of their labels
export function timeseries(series, start, end, onZoom) {
  const height = 260;
  let max = 0, min = 0;
  for (const s of series) for (const [, v] of s.values) {
    const n = Number(v);
    if (Number.isFinite(n)) { max = Math.max(max, n); min = Math.min(min, n); }
  }
  const top = niceMax(max - min);
  const f = frame(height, start, end, top);
  let lines = '';
  series.forEach((s, i) => {
    const pts = s.values.filter(([, v]) => Number.isFinite(Number(v)))
      .map(([sec, v]) => `${f.x(Number(sec) * 1000).toFixed(1)},${f.y(Number(v) - min).toFixed(1)}`);
    const color = PALETTE[i % PALETTE.length];
    lines += `<polyline class="series" fill="none" stroke="${color}" points="${pts.join(' ')}"><title>${esc(labelsText(s.metric))}</title></polyline>`;
    if (pts.length === 1) {
      const [cx, cy] = pts[0].split(',');
      lines += `<circle cx="${cx}" cy="${cy}" r="3" fill="${color}"/>`;
    }
  });
  const svg = svgOf(height, f.out + lines, 'metric query result');
  zoomable(svg, height, start, end, onZoom);
  const legend = series.map((s, i) => `<span class="key"><svg class="swatch" viewBox="0 0 10 10"><rect width="10" height="10" fill="${PALETTE[i % PALETTE.length]}"/></svg>${esc(labelsText(s.metric))}</span>`).join('');
  return { svg, legend };
}
