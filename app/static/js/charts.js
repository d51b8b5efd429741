// ECharts plumbing shared by every chart: mounting, the house style, smoothing and
// line charts over a step axis built from a RunSeries-like set of columns.

import { num, pct } from './format.js';
import { pick } from './sampling.js';

export const echarts = window.echarts;
export const COLORS = [
  '#4f46e5',
  '#12b76a',
  '#f79009',
  '#2e90fa',
  '#ee46bc',
  '#7a5af8',
  '#f04438',
  '#15b79e',
  '#667085',
  '#875bf7',
];
export const AXIS = { color: '#98a2b3', fontSize: 10 };
export const GRID_LINE = { lineStyle: { color: '#f2f4f7' } };
/** The legend above every line chart: one scrolling row of short swatches. */
export const LEGEND = {
  top: 0,
  left: 4,
  type: 'scroll',
  itemWidth: 12,
  itemHeight: 3,
  textStyle: { fontSize: 10, color: '#667085' },
};
/** The x axis of training steps, from the first point to the last. */
export const STEP_AXIS = { type: 'value', min: 'dataMin', max: 'dataMax', minInterval: 1, splitLine: { show: false } };

/**
 * Whether an IntersectionObserver callback leaves its one target on screen. One callback can
 * carry several entries for the target, oldest first: a card shown before its observer's
 * first callback got [hidden, on screen] in one call, and reading only the first entry left
 * it marked off screen, never redrawn.
 * @param {IntersectionObserverEntry[]} entries
 */
export function isOnScreen(entries) {
  return entries[entries.length - 1].isIntersecting;
}

/**
 * Creates a chart that follows its container's size.
 * @param {HTMLElement} el
 * @param {{ group?: string }} [options]
 */
export function mountChart(el, { group } = {}) {
  const chart = echarts.init(el, null, { renderer: 'canvas' });
  new ResizeObserver(() => chart.resize()).observe(el);
  if (group) chart.group = group;
  return chart;
}

/** TensorBoard's debiased exponential moving average; missing values stay missing. */
export function ema(values, weight) {
  if (!weight) return values;
  const out = new Array(values.length);
  let last = 0,
    debias = 0;
  for (let i = 0; i < values.length; i += 1) {
    const v = values[i];
    if (v == null || !Number.isFinite(v)) {
      out[i] = null;
      continue;
    }
    last = last * weight + (1 - weight) * v;
    debias = debias * weight + (1 - weight);
    out[i] = last / debias;
  }
  return out;
}

export function formatValue(value, unit) {
  if (unit === '%') return pct(value);
  if (unit === 's') return value == null ? '—' : `${num(value)} s`;
  return num(value);
}

function tooltipFormatter(units) {
  return (params) => {
    const list = Array.isArray(params) ? params : [params];
    if (!list.length) return '';
    const step = list[0].axisValue ?? list[0].value?.[0];
    const rows = list
      .filter((p) => !String(p.seriesId).includes(':'))
      .map((p) => {
        const value = Array.isArray(p.value) ? p.value[p.encode.y[0]] : p.value;
        return `<div class="tt-row">${p.marker}<span>${escapeHtml(p.seriesName)}</span><b>${formatValue(value, units[p.seriesId])}</b></div>`;
      });
    return `<div class="tt"><div class="tt-head">step ${Math.round(step)}</div>${rows.join('')}</div>`;
  };
}

function escapeHtml(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
}

function axisFormatter(unit, hideAbove = Infinity) {
  return (value) =>
    value > hideAbove ? '' : unit === '%' ? `${Number((value * 100).toPrecision(3))}%` : num(value, 4);
}

/**
 * One line chart over steps. `lines` are {key, name, color, axis, unit, dashed, area, stack,
 * smooth, band: [lowerKey, widthKey]} and read columns from `source` (a {name: array} map
 * with a `step` column). `weight` is the smoothing weight for lines with smooth !== false.
 * `keep` (indices, or null for all) thins the drawn steps after smoothing.
 * @param {{
 *   source: Record<string, any[]>, lines: any[], weight?: number, axes?: any[], markArea?: any,
 *   keep?: number[] | null,
 * }} options
 */
export function lineChartOption({ source, lines, weight = 0, axes = [{}], markArea = null, keep = null }) {
  const columns = { step: source.step };
  const series = [];
  const units = {};
  lines.forEach((line, i) => {
    const color = line.color || COLORS[i % COLORS.length];
    const raw = source[line.key];
    if (!raw) return;
    const smooth = weight > 0 && line.smooth !== false;
    columns[line.key] = smooth ? ema(raw, weight) : raw;
    units[line.key] = line.unit;
    if (smooth && !line.area) {
      columns[`${line.key}:raw`] = raw;
      series.push(lineSeries({ ...line, id: `${line.key}:raw`, key: `${line.key}:raw`, color, faint: true }));
    }
    series.push(lineSeries({ ...line, id: line.key, color }));
  });
  if (markArea && series.length) series[series.length - 1].markArea = markArea;
  return {
    animation: false,
    color: COLORS,
    dataset: { source: Object.fromEntries(Object.entries(columns).map(([k, c]) => [k, pick(c, keep)])) },
    grid: { left: 8, right: 10, top: 24, bottom: 4, containLabel: true },
    legend: {
      ...LEGEND,
      icon: 'rect',
      data: lines.filter((l) => !l.invisible && !l.band && source[l.key]).map((l) => l.name),
    },
    tooltip: {
      trigger: 'axis',
      confine: true,
      formatter: tooltipFormatter(units),
      axisPointer: { type: 'line', lineStyle: { color: '#d0d5dd' } },
    },
    xAxis: {
      ...STEP_AXIS,
      axisLabel: { ...AXIS, hideOverlap: true },
      axisLine: { lineStyle: { color: '#e4e7ec' } },
    },
    yAxis: axes.map((axis, i) => ({
      type: 'value',
      scale: axis.scale !== false,
      min: axis.min,
      max: axis.max,
      interval: axis.interval,
      splitNumber: 3,
      position: i ? 'right' : 'left',
      axisLabel: { ...AXIS, formatter: axisFormatter(axis.unit, axis.hideAbove) },
      splitLine: i ? { show: false } : GRID_LINE,
    })),
    dataZoom: [{ type: 'inside', xAxisIndex: 0, filterMode: 'none', zoomOnMouseWheel: 'shift', moveOnMouseMove: true }],
    series,
  };
}

function lineSeries(line) {
  const base = {
    id: line.id,
    name: line.name,
    type: 'line',
    yAxisIndex: line.axis || 0,
    encode: { x: 'step', y: line.key },
    // a sparse line (evaluations every k steps) joins its points and shows them
    showSymbol: Boolean(line.sparse),
    symbolSize: 4,
    sampling: 'lttb',
    connectNulls: Boolean(line.sparse),
    step: line.stepped ? 'end' : false,
    lineStyle: {
      width: line.faint ? 1 : 1.6,
      color: line.color,
      opacity: line.faint ? 0.22 : 1,
      type: line.dashed ? 'dashed' : 'solid',
    },
    itemStyle: { color: line.color },
    emphasis: { disabled: true },
    z: line.faint ? 1 : 2,
  };
  if (line.faint) return { ...base, silent: true, tooltip: { show: false }, legendHoverLink: false };
  if (line.stack) Object.assign(base, { stack: line.stack, stackStrategy: 'all' });
  if (line.area) base.areaStyle = { color: line.color, opacity: 0.5 };
  if (line.band) base.areaStyle = { color: line.color, opacity: 0.12 };
  if (line.band || line.invisible) {
    Object.assign(base, { lineStyle: { opacity: 0 }, silent: true, z: line.z ?? 0 });
  }
  return base;
}
