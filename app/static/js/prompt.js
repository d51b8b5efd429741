// Prompt history: one prompt's group rewards at every step it was sampled. Did training help it?

import { getPromptHistory, getRun } from './api.js';
import { OUTCOME_LABEL } from './bins.js';
import { AXIS, COLORS, GRID_LINE, mountChart } from './charts.js';
import { $, fill, h, seg } from './dom.js';
import { num, signed } from './format.js';
import { errorText, initShell, stateBox } from './shell.js';
import { groupUrl } from './stepgroups.js';

const page = $('#page');
const runId = page.dataset.runId;
const promptId = page.dataset.promptId;

function drawChart(items) {
  const chart = mountChart($('#chart-prompt'));
  const points = [];
  items.forEach((g, i) => {
    const counts = new Map();
    for (const r of g.rewards) counts.set(r, (counts.get(r) || 0) + 1);
    for (const [reward, count] of counts) points.push({ value: [g.step, reward, count], item: i });
  });
  chart.setOption({
    animation: false,
    grid: { left: 8, right: 16, top: 28, bottom: 8, containLabel: true },
    legend: {
      top: 0,
      left: 4,
      itemWidth: 12,
      itemHeight: 3,
      textStyle: { fontSize: 10, color: '#667085' },
      data: ['group mean', '± std', 'completions'],
    },
    tooltip: { trigger: 'item', confine: true, formatter: (p) => tooltip(items[p.data.item ?? p.dataIndex]) },
    xAxis: {
      type: 'value',
      name: 'step',
      nameLocation: 'end',
      nameTextStyle: AXIS,
      min: (v) => Math.max(0, v.min - 1),
      max: (v) => v.max + 1,
      minInterval: 1,
      axisLabel: AXIS,
      splitLine: { show: false },
    },
    yAxis: { type: 'value', scale: true, axisLabel: AXIS, splitLine: GRID_LINE },
    series: [
      {
        name: 'std band',
        type: 'line',
        data: items.map((g) => [g.step, g.reward_mean - g.reward_std]),
        stack: 'band',
        stackStrategy: 'all',
        lineStyle: { opacity: 0 },
        symbol: 'none',
        silent: true,
        tooltip: { show: false },
      },
      {
        name: '± std',
        type: 'line',
        data: items.map((g) => [g.step, 2 * g.reward_std]),
        stack: 'band',
        stackStrategy: 'all',
        lineStyle: { opacity: 0 },
        color: COLORS[0],
        areaStyle: { color: COLORS[0], opacity: 0.12 },
        symbol: 'none',
        silent: true,
        tooltip: { show: false },
      },
      {
        name: 'group mean',
        type: 'line',
        data: items.map((g, i) => ({ value: [g.step, g.reward_mean], item: i })),
        color: COLORS[0],
        symbolSize: 6,
        lineStyle: { width: 2 },
      },
      {
        name: 'completions',
        type: 'scatter',
        data: points,
        color: '#344054',
        symbolSize: (v) => 4 + 3 * Math.sqrt(v[2]),
        itemStyle: { opacity: 0.45 },
      },
    ],
  });
  chart.on('click', (p) => {
    const g = items[p.data?.item];
    if (g) window.location.assign(groupUrl(runId, g.step, g.index));
  });
}

function tooltip(g) {
  if (!g) return '';
  return (
    `<div class="tt"><div class="tt-head">step ${g.step} · group #${g.index}</div>` +
    `<div class="tt-row"><span>mean</span><b>${num(g.reward_mean)}</b></div>` +
    `<div class="tt-row"><span>std</span><b>${num(g.reward_std)}</b></div>` +
    `<div class="tt-row"><span>rewards</span><b>${g.rewards.map((r) => num(r, 2)).join(' ')}</b></div><div class="tt-foot">click to inspect</div></div>`
  );
}

function renderHead(items, run) {
  const first = items[0],
    last = items[items.length - 1];
  fill(
    $('#prompt-head'),
    h(
      'div',
      null,
      h('h3', null, 'Prompt'),
      h('pre', { class: 'prompt-text' }, first.prompt),
      h('h3', { style: { marginTop: '10px' } }, 'Reference answer'),
      h('pre', { class: 'prompt-text' }, first.answer),
    ),
    h(
      'dl',
      { class: 'kv' },
      h('dt', null, 'run'),
      h('dd', null, h('a', { href: `/runs/${seg(runId)}` }, run.name)),
      h('dt', null, 'sampled at'),
      h('dd', { id: 'occurrence-total' }, `${items.length} step${items.length === 1 ? '' : 's'}`),
      h('dt', null, `mean at step ${first.step}`),
      h('dd', null, num(first.reward_mean)),
      items.length > 1
        ? [
            h('dt', null, `mean at step ${last.step}`),
            h('dd', null, num(last.reward_mean)),
            h('dt', null, 'change'),
            h(
              'dd',
              { class: last.reward_mean >= first.reward_mean ? '' : 'error-text' },
              signed(last.reward_mean - first.reward_mean),
            ),
          ]
        : null,
    ),
  );
}

function renderTable(items) {
  $('#occurrence-count').textContent =
    items.length === 1
      ? 'sampled once so far: the history fills in each time the prompt is drawn again'
      : `${items.length} groups`;
  fill(
    $('#occurrences'),
    h(
      'table',
      { class: 'table' },
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          ['Step', 'Group', 'Outcome', 'Mean', 'Std', 'Rewards'].map((t, i) =>
            h('th', { class: i > 2 && i < 5 ? 'num' : null }, t),
          ),
        ),
      ),
      h(
        'tbody',
        null,
        [...items].reverse().map((g) => {
          const kind = g.outcome;
          return h(
            'tr',
            null,
            h('td', null, h('a', { href: `/runs/${seg(runId)}/steps/${seg(g.step)}` }, g.step)),
            h('td', null, h('a', { href: groupUrl(runId, g.step, g.index) }, `#${g.index}`)),
            h('td', null, h('span', { class: `outcome outcome-${kind}` }, OUTCOME_LABEL[kind])),
            h('td', { class: 'num' }, num(g.reward_mean)),
            h('td', { class: 'num' }, num(g.reward_std)),
            h('td', { class: 'mono' }, g.rewards.map((r) => num(r, 2)).join('  ')),
          );
        }),
      ),
    ),
  );
}

async function main() {
  initShell();
  try {
    const [run, history] = await Promise.all([getRun(runId), getPromptHistory(runId, promptId)]);
    $('#crumb-run').textContent = run.name;
    const items = [...history.items].sort((a, b) => a.step - b.step || a.index - b.index);
    if (!items.length) {
      fill(
        $('#prompt-head'),
        stateBox(
          'empty',
          'This prompt was not sampled in this run',
          `No group of run ${run.name} has prompt id “${promptId}”.`,
        ),
      );
      $('#prompt-empty').hidden = false;
      $('#prompt-empty').textContent = 'No groups';
      return;
    }
    renderHead(items, run);
    drawChart(items);
    renderTable(items);
  } catch (error) {
    fill(
      $('#prompt-head'),
      stateBox('error', error.status === 404 ? 'Run not found' : 'Could not load the prompt history', errorText(error)),
    );
  }
}

main();
