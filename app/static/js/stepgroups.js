// The selected step's groups: one reward box per group, sorted by mean; a click opens it.

import { getGroups } from './api.js';
import { fiveNumbers, OUTCOME_COLOR, OUTCOME_LABEL } from './bins.js';
import { AXIS, GRID_LINE, mountChart } from './charts.js';
import { seg } from './dom.js';
import { num } from './format.js';

/** @typedef {import('./api.js').GroupSummary} GroupSummary */

export class StepGroupsView {
  /**
   * @param {HTMLElement} el
   * @param {{ runId: string, onGroups?: (step: number, groups: GroupSummary[]) => void }} options
   */
  constructor(el, { runId, onGroups = () => {} }) {
    this.runId = runId;
    this.onGroups = onGroups;
    this.chart = mountChart(el);
    this.groups = [];
    this.step = null;
    this.request = 0;
    this.chart.on('click', (p) => {
      const group = this.groupAt(p);
      if (group) window.location.assign(groupUrl(this.runId, this.step, group.index));
    });
  }

  /** The group under a box (by position) or a point (by its x, the box's position). */
  groupAt(p) {
    return p.seriesType === 'scatter' ? this.groups[p.value[0]] : this.groups[p.dataIndex];
  }

  /** Loads and draws `step`; a slower answer for an older step is dropped. */
  async show(step) {
    const ticket = ++this.request;
    const page = await getGroups(this.runId, step);
    if (ticket !== this.request) return null;
    this.step = step;
    this.groups = [...page.items].sort((a, b) => a.reward_mean - b.reward_mean || a.index - b.index);
    this.draw();
    this.onGroups(step, this.groups);
    return this.groups;
  }

  draw() {
    const groups = this.groups;
    const boxes = groups.map((g) => {
      const kind = g.outcome;
      return {
        value: fiveNumbers(g.rewards),
        itemStyle: { color: `${OUTCOME_COLOR[kind]}22`, borderColor: OUTCOME_COLOR[kind] },
        group: g,
        kind,
      };
    });
    this.chart.setOption(
      {
        animation: false,
        grid: { left: 8, right: 12, top: 12, bottom: 4, containLabel: true },
        tooltip: { trigger: 'item', confine: true, formatter: (p) => tooltip(this.groupAt(p)) },
        xAxis: {
          type: 'category',
          data: groups.map((g) => `#${g.index}`),
          axisLabel: { ...AXIS, interval: 'auto', hideOverlap: true },
          axisTick: { show: false },
          axisLine: { lineStyle: { color: '#e4e7ec' } },
        },
        yAxis: {
          type: 'value',
          scale: true,
          splitNumber: 4,
          axisLabel: AXIS,
          splitLine: GRID_LINE,
        },
        series: [
          { id: 'boxes', type: 'boxplot', data: boxes, boxWidth: [4, 22], cursor: 'pointer' },
          {
            id: 'points',
            type: 'scatter',
            data: points(groups),
            symbolSize: (v) => 4 + 2.2 * Math.sqrt(v[2]),
            itemStyle: { color: '#344054', opacity: 0.55 },
            cursor: 'pointer',
            z: 3,
          },
        ],
      },
      { replaceMerge: ['series'] },
    );
  }
}

/** One point per distinct reward in each group, sized by how many completions share it. */
function points(groups) {
  const out = [];
  groups.forEach((g, x) => {
    const counts = new Map();
    for (const r of g.rewards) counts.set(r, (counts.get(r) || 0) + 1);
    for (const [value, count] of counts) out.push([x, value, count]);
  });
  return out;
}

function tooltip(g) {
  if (!g) return '';
  const kind = g.outcome;
  const prompt = g.prompt.length > 80 ? `${g.prompt.slice(0, 80)}…` : g.prompt;
  return (
    `<div class="tt"><div class="tt-head">group #${g.index} · ${OUTCOME_LABEL[kind]}</div>` +
    `<div class="tt-text">${escapeHtml(prompt)}</div>` +
    `<div class="tt-row"><span>mean</span><b>${num(g.reward_mean)}</b></div>` +
    `<div class="tt-row"><span>std</span><b>${num(g.reward_std)}</b></div>` +
    `<div class="tt-row"><span>rewards</span><b>${g.rewards.map((r) => num(r, 2)).join(' ')}</b></div>` +
    '<div class="tt-foot">click to inspect</div></div>'
  );
}

function escapeHtml(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
}

export function groupUrl(runId, step, index) {
  return `/runs/${seg(runId)}/steps/${seg(step)}/groups/${seg(index)}`;
}
