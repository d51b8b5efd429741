// Compare: the same metrics of two or more runs overlaid on one step axis.

import { getMetrics, listRuns } from './api.js';
import { ACTIVE, statusPill } from './badges.js';
import { AXIS, COLORS, echarts, ema, GRID_LINE, LEGEND, mountChart, STEP_AXIS } from './charts.js';
import { $, fill, h } from './dom.js';
import { num } from './format.js';
import { errorText, initShell, stateBox } from './shell.js';

const DEFAULT_METRICS = ['reward', 'kl', 'loss', 'entropy', 'completions/mean_length', 'grad_norm'];
const POLL_MS = 5000;
/**
 * @type {{
 *   runs: import('./api.js').RunOut[], picked: string[], metrics: string[], data: Map<string, any>,
 *   charts: Map<string, any>, filter: string,
 * }}
 */
const state = { runs: [], picked: [], metrics: [...DEFAULT_METRICS], data: new Map(), charts: new Map(), filter: '' };

function readQuery() {
  const params = new URLSearchParams(window.location.search);
  state.picked = (params.get('runs') || '').split(',').filter(Boolean);
  const metrics = (params.get('metrics') || '').split(',').filter(Boolean);
  if (metrics.length) state.metrics = metrics;
}

function writeQuery() {
  const params = new URLSearchParams();
  if (state.picked.length) params.set('runs', state.picked.join(','));
  if (state.metrics.join(',') !== DEFAULT_METRICS.join(',')) params.set('metrics', state.metrics.join(','));
  window.history.replaceState(null, '', `/compare${params.toString() ? `?${params}` : ''}`.replace(/%2C/g, ','));
}

function colorOf(id) {
  return COLORS[state.picked.indexOf(id) % COLORS.length];
}

const DASH = 6;
/**
 * The line of the i-th of n runs. Runs with the same beginning (a clone that changes a late
 * knob, the same seed) draw the same points, and a later line would hide the earlier ones:
 * the first run is solid, each later one dashed with its dashes offset from the others', so
 * where up to four runs overlap every colour shows in turn (beyond four, dashes repeat).
 * @param {number} i
 * @param {number} n
 */
function lineStyleOf(i, n) {
  const others = Math.min(n, 4) - 1;
  if (i === 0 || others === 0) return { width: 1.6, type: 'solid' };
  const slot = (i - 1) % others;
  return { width: 1.6, type: [DASH, DASH * others], dashOffset: -DASH * slot };
}

function renderPicker() {
  const runs = state.runs.filter((r) => !state.filter || r.name.toLowerCase().includes(state.filter));
  $('#picked-count').textContent = `${state.picked.length} selected`;
  if (!runs.length) {
    fill($('#run-picker'), stateBox('empty', 'No runs', state.filter ? 'No run matches.' : 'Submit a run first.'));
    return;
  }
  fill(
    $('#run-picker'),
    runs.map((run) => {
      const on = state.picked.includes(run.id);
      return h(
        'label',
        { class: 'run-pick', dataset: { runId: run.id } },
        h('input', { type: 'checkbox', checked: on, onchange: (event) => toggle(run.id, event.target.checked) }),
        h('span', { class: 'swatch', style: { background: on ? colorOf(run.id) : 'transparent' } }),
        h(
          'span',
          null,
          h('div', { class: 'name' }, run.name),
          h('div', { class: 'sub' }, statusPill(run.status), ` ${run.step}/${run.total_steps}`),
        ),
      );
    }),
  );
}

async function toggle(id, on) {
  state.picked = on ? [...state.picked, id] : state.picked.filter((x) => x !== id);
  writeQuery();
  renderPicker();
  if (on) await loadRun(id);
  drawAll();
}

async function loadRun(id) {
  const known = state.data.get(id);
  // thinned to what a chart shows when long (GET /metrics max_points): stored steps only
  const rows = await getMetrics(id, { afterStep: known ? known.steps[known.steps.length - 1] : undefined });
  const data = known || { steps: [], values: new Map() };
  for (const row of rows) {
    data.steps.push(row.step);
    for (const [name, value] of Object.entries(row.metrics)) {
      if (!data.values.has(name)) data.values.set(name, new Array(data.steps.length - 1).fill(null));
      data.values.get(name).push(value);
    }
    for (const column of data.values.values()) if (column.length < data.steps.length) column.push(null);
  }
  state.data.set(id, data);
  fillMetricChoices();
}

function fillMetricChoices() {
  const names = new Set();
  for (const data of state.data.values()) for (const name of data.values.keys()) names.add(name);
  const select = $('#metric-add');
  const current = [...select.options].slice(1).map((o) => o.value);
  const wanted = [...names].filter((n) => !state.metrics.includes(n)).sort();
  if (current.join() === wanted.join()) return;
  fill(
    select,
    h('option', { value: '' }, 'metric…'),
    wanted.map((n) => h('option', { value: n }, n)),
  );
}

function drawAll() {
  const box = $('#compare-charts');
  if (state.picked.length < 1) {
    for (const chart of state.charts.values()) chart.dispose();
    state.charts.clear();
    fill(
      box,
      h(
        'div',
        { class: 'panel', style: { gridColumn: '1 / -1' } },
        stateBox(
          'empty',
          'Pick runs to compare',
          'Tick two or more runs on the left; their curves overlay here, one colour per run.',
        ),
      ),
    );
    return;
  }
  if (!box.querySelector('.chart-card')) box.replaceChildren();
  for (const metric of state.metrics) drawMetric(box, metric);
  for (const [metric, chart] of state.charts) {
    if (!state.metrics.includes(metric)) {
      chart.dispose();
      state.charts.delete(metric);
      box.querySelector(`[data-metric="${CSS.escape(metric)}"]`)?.remove();
    }
  }
  echarts.connect('compare');
}

function drawMetric(box, metric) {
  let chart = state.charts.get(metric);
  if (!chart) {
    const el = h('div', { class: 'chart', id: `compare-${metric.replace(/[^a-z0-9]+/gi, '-')}` });
    box.append(
      h(
        'div',
        { class: 'chart-card', dataset: { metric } },
        h(
          'div',
          { class: 'chart-head' },
          h('h3', null, metric),
          h(
            'span',
            { class: 'value' },
            h(
              'button',
              {
                type: 'button',
                class: 'btn btn-ghost',
                style: { height: '20px', padding: '0 6px' },
                title: 'Remove chart',
                onclick: () => {
                  state.metrics = state.metrics.filter((m) => m !== metric);
                  writeQuery();
                  drawAll();
                  fillMetricChoices();
                },
              },
              '×',
            ),
          ),
        ),
        el,
      ),
    );
    chart = mountChart(el, { group: 'compare' });
    state.charts.set(metric, chart);
  }
  const weight = Number($('#smoothing').value);
  const shown = state.picked.filter((id) => state.data.has(id));
  const series = shown.map((id, order) => {
    const data = state.data.get(id);
    // held-out evaluations come every k steps: their points, joined, never smoothed
    const isSparse = metric.startsWith('eval/');
    const values = isSparse ? data.values.get(metric) || [] : ema(data.values.get(metric) || [], weight);
    const run = state.runs.find((r) => r.id === id);
    const points = data.steps.map((s, i) => [s, values[i] ?? null]);
    return {
      id,
      name: run ? run.name : id,
      type: 'line',
      showSymbol: isSparse,
      sampling: 'lttb',
      color: colorOf(id),
      lineStyle: lineStyleOf(order, shown.length),
      emphasis: { focus: 'series' },
      data: isSparse ? points.filter(([, v]) => v != null) : points,
    };
  });
  chart.setOption(
    {
      animation: false,
      grid: { left: 8, right: 12, top: 26, bottom: 4, containLabel: true },
      legend: LEGEND,
      tooltip: { trigger: 'axis', confine: true, valueFormatter: (v) => num(v) },
      xAxis: { ...STEP_AXIS, axisLabel: AXIS },
      yAxis: {
        type: 'value',
        scale: true,
        splitNumber: 3,
        axisLabel: { ...AXIS, formatter: (v) => num(v, 4) },
        splitLine: GRID_LINE,
      },
      dataZoom: [{ type: 'inside', filterMode: 'none', zoomOnMouseWheel: 'shift' }],
      series,
    },
    { replaceMerge: ['series'] },
  );
}

async function poll() {
  const active = state.picked.filter((id) => ACTIVE.has(state.runs.find((r) => r.id === id)?.status ?? ''));
  if (!active.length || document.visibilityState !== 'visible') return;
  state.runs = (await listRuns({ limit: 200 })).items;
  await Promise.all(active.map(loadRun));
  renderPicker();
  drawAll();
}

async function main() {
  initShell();
  readQuery();
  try {
    state.runs = (await listRuns({ limit: 200 })).items;
  } catch (error) {
    fill($('#run-picker'), stateBox('error', 'Could not load runs', errorText(error)));
    return;
  }
  state.picked = state.picked.filter((id) => state.runs.some((r) => r.id === id));
  renderPicker();
  await Promise.all(state.picked.map((id) => loadRun(id).catch(() => {})));
  drawAll();
  $('#compare-search').addEventListener('input', (event) => {
    state.filter = event.target.value.trim().toLowerCase();
    renderPicker();
  });
  $('#smoothing').addEventListener('input', (event) => {
    $('#smoothing-value').textContent = event.target.value;
    drawAll();
  });
  $('#metric-add').addEventListener('change', (event) => {
    if (!event.target.value) return;
    state.metrics.push(event.target.value);
    writeQuery();
    drawAll();
    fillMetricChoices();
  });
  setInterval(() => poll().catch(() => {}), POLL_MS);
}

main();
