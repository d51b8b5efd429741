// Advantage, reward and group-spread distributions: the selected step's histogram, and
// heatmaps of every step's histogram over training (columns bucketed so 10,000 steps stay light).

import { binLabels } from './bins.js';
import { AXIS, GRID_LINE, isOnScreen, mountChart } from './charts.js';

const AXIS_NAME = { color: '#667085', fontSize: 11 };
const MAX_COLUMNS = 160;
const REDRAW_MS = 1000;

// `shares`: each column normalised to shares of its completions; `groups`: colour is the
// number of groups (per step, when a column sums several steps)
export const KINDS = {
  advantage: {
    key: 'advantage',
    axis: 'advantage',
    scale: 'shares',
    labelEvery: 4,
    color: ['#ffffff', '#c7d2fe', '#4f46e5', '#1e1b4b'],
  },
  reward: {
    key: 'reward',
    axis: 'reward',
    scale: 'shares',
    labelEvery: 5,
    color: ['#ffffff', '#d1fadf', '#12b76a', '#054f31'],
  },
  spread: {
    key: 'spread',
    axis: 'reward std in group',
    scale: 'groups',
    labelEvery: 5,
    cropTop: true,
    color: ['#ffffff', '#fde7c4', '#f79009', '#7a2e0e'],
  },
};

/** Bars of one step's advantage counts; negative bins red, positive green. */
export class StepHistogramView {
  /**
   * @param {HTMLElement} el
   * @param {number[]} edges the advantage histogram's bin edges, from the API
   */
  constructor(el, edges) {
    this.chart = mountChart(el);
    this.edges = edges;
  }

  draw(counts) {
    const edges = this.edges;
    const labels = binLabels(edges);
    this.chart.setOption(
      {
        animation: false,
        grid: { left: 8, right: 12, top: 12, bottom: 4, containLabel: true },
        tooltip: { trigger: 'axis', confine: true, axisPointer: { type: 'shadow' } },
        xAxis: {
          type: 'category',
          data: labels,
          axisLabel: { ...AXIS, formatter: (l) => l.split('…')[0], interval: 3 },
          axisTick: { alignWithLabel: false },
          axisLine: { lineStyle: { color: '#e4e7ec' } },
        },
        yAxis: {
          type: 'value',
          minInterval: 1,
          splitNumber: 3,
          axisLabel: AXIS,
          splitLine: GRID_LINE,
        },
        series: [
          {
            id: 'advantage',
            name: 'completions',
            type: 'bar',
            barCategoryGap: '8%',
            data: (counts || []).map((c, i) => ({ value: c, itemStyle: { color: binColor(edges[i]) } })),
          },
        ],
      },
      { replaceMerge: ['series'] },
    );
  }
}

// the [0, 0.25) bin holds the exact zeros of all-equal groups: neutral, not a win
function binColor(lower) {
  if (lower === 0) return '#98a2b3';
  return lower < 0 ? '#f04438' : '#12b76a';
}

/** A heatmap of per-step histograms; each column is normalised to shares of its samples. */
export class HistogramHeatmapView {
  /**
   * @param {HTMLElement} el
   * @param {keyof typeof KINDS} kind
   * @param {number[]} edges the histogram's bin edges, from the API
   * @param {{ onPickStep?: (step: number) => void, emptyEl?: HTMLElement | null }} [options]
   */
  constructor(el, kind, edges, { onPickStep = () => {}, emptyEl = null } = {}) {
    this.kind = KINDS[kind];
    this.edges = edges;
    this.chart = mountChart(el);
    this.emptyEl = emptyEl;
    this.columns = [];
    this.drawn = -1;
    /** @type {{ version: number, histograms: any } | null} */
    this.wanted = null;
    this.lastDraw = 0;
    /** @type {ReturnType<typeof setTimeout> | null} */
    this.timer = null;
    this.isVisible = false;
    this.chart.on('click', (p) => {
      const column = this.columns[p.value[0]];
      if (column) onPickStep(column.last);
    });
    // drawn only on screen, and at most once a second: a replay of 10,000 steps stays smooth
    new IntersectionObserver((entries) => {
      this.isVisible = isOnScreen(entries);
      if (this.isVisible) this.flush();
    }).observe(el);
  }

  /** Asks for a redraw of `histograms` at `version`; it happens when due and on screen. */
  update(histograms, version) {
    this.wanted = { histograms, version };
    this.flush();
  }

  flush() {
    if (!this.wanted || this.wanted.version === this.drawn || !this.isVisible || this.timer) return;
    const wait = Math.max(0, REDRAW_MS - (performance.now() - this.lastDraw));
    this.timer = setTimeout(() => {
      this.timer = null;
      const wanted = this.wanted;
      if (!wanted || !this.isVisible || wanted.version === this.drawn) return;
      this.drawn = wanted.version;
      this.lastDraw = performance.now();
      const hasData = this.draw(wanted.histograms);
      if (this.emptyEl) this.emptyEl.hidden = hasData;
    }, wait);
  }

  /** Returns false when there is nothing to draw. */
  draw(histograms) {
    const steps = [...histograms.keys()].filter((s) => histograms.get(s)[this.kind.key]).sort((a, b) => a - b);
    this.columns = bucket(steps, histograms, this.kind.key);
    // spreads of 0/1 rewards stop at 0.5: show the bins in use (and one above), not 0..1.5
    const all = this.edges.length - 1;
    const rows = this.kind.cropTop ? Math.min(all, topBinInUse(this.columns) + 2) : all;
    const labelEvery = Math.max(1, Math.min(this.kind.labelEvery, Math.ceil(rows / 6)));
    const labels = binLabels(this.edges).slice(0, rows);
    const data = this.cells().filter((d) => d[1] < rows);
    const max = this.kind.scale === 'groups' ? Math.max(1, ...data.map((d) => d[2])) : 0.5;
    this.chart.setOption(
      {
        animation: false,
        grid: { left: 18, right: 12, top: 8, bottom: 16, containLabel: true },
        tooltip: { confine: true, formatter: (p) => this.tooltip(p, labels) },
        xAxis: {
          type: 'category',
          name: 'step',
          nameLocation: 'middle',
          nameGap: 20,
          nameTextStyle: AXIS_NAME,
          data: this.columns.map((c) => (c.first === c.last ? `${c.first}` : `${c.first}–${c.last}`)),
          axisLabel: { ...AXIS, hideOverlap: true, formatter: (l) => l.split('–')[0] },
          axisTick: { show: false },
          splitArea: { show: false },
        },
        yAxis: {
          type: 'category',
          name: this.kind.axis,
          nameLocation: 'middle',
          nameGap: 34,
          nameTextStyle: AXIS_NAME,
          data: labels,
          axisLabel: { ...AXIS, interval: labelEvery - 1, formatter: (l) => l.split('…')[0] },
          axisTick: { show: false },
        },
        visualMap: { show: false, min: 0, max, inRange: { color: this.kind.color } },
        series: [
          {
            id: 'heat',
            type: 'heatmap',
            data,
            progressive: 0,
            emphasis: { itemStyle: { borderColor: '#101828', borderWidth: 1 } },
          },
        ],
      },
      { replaceMerge: ['series'] },
    );
    return this.columns.length > 0;
  }

  /** [column, bin, value]: a share of the column's completions, or groups per step. */
  cells() {
    const data = [];
    this.columns.forEach((column, x) => {
      const total = this.kind.scale === 'groups' ? column.steps : column.counts.reduce((a, b) => a + b, 0) || 1;
      column.counts.forEach((c, y) => {
        if (c) data.push([x, y, c / total]);
      });
    });
    return data;
  }

  tooltip(p, labels) {
    const column = this.columns[p.value[0]];
    const span = column.first === column.last ? `step ${column.first}` : `steps ${column.first}–${column.last}`;
    const value =
      this.kind.scale === 'groups'
        ? `${Number(p.value[2].toFixed(2))} ${column.steps > 1 ? 'groups per step' : 'groups'}`
        : `${(p.value[2] * 100).toFixed(1)}%`;
    return `<div class="tt"><div class="tt-head">${span}</div><div class="tt-row"><span>${labels[p.value[1]]}</span><b>${value}</b></div><div class="tt-foot">click to select</div></div>`;
  }
}

function topBinInUse(columns) {
  let top = 0;
  for (const column of columns)
    column.counts.forEach((c, i) => {
      if (c && i > top) top = i;
    });
  return top;
}

/** Sums consecutive steps' counts into at most MAX_COLUMNS columns. */
function bucket(steps, histograms, key) {
  const per = Math.max(1, Math.ceil(steps.length / MAX_COLUMNS));
  const columns = [];
  for (let i = 0; i < steps.length; i += per) {
    const slice = steps.slice(i, i + per);
    const counts = histograms.get(slice[0])[key].slice();
    for (const step of slice.slice(1))
      histograms.get(step)[key].forEach((c, j) => {
        counts[j] += c;
      });
    columns.push({ first: slice[0], last: slice[slice.length - 1], steps: slice.length, counts });
  }
  return columns;
}
