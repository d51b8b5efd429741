// The run page's curves: the panels of curvepanels.js as cards on one zoomable step axis.

import { echarts, isOnScreen, lineChartOption, mountChart } from './charts.js';
import { headValue, PANELS } from './curvepanels.js';
import { h } from './dom.js';
import { keepIndices, MAX_POINTS } from './sampling.js';

const GROUP = 'curves';

/**
 * The grid of curve cards; `render(weight)` redraws every chart from the series. `onWindow`
 * is told the zoom window ([first, last] step) of a series that a thinned answer left steps
 * out of: it reads them and redraws.
 */
export class CurvesView {
  /**
   * @param {HTMLElement} container
   * @param {import('./series.js').RunSeries} series
   * @param {{ onWindow?: (window: [number, number]) => void }} [options]
   */
  constructor(container, series, { onWindow } = {}) {
    this.series = series;
    this.onWindow = onWindow;
    /** @type {[number, number] | null} zoom window, in steps */
    this.window = null;
    this.last = { weight: 0, finished: false };
    /** @type {Promise<void> | null} */
    this.pass = null;
    this.lastPassMs = 0;
    this.cards = PANELS.map((panel) => {
      const chartEl = h('div', { class: 'chart', id: `chart-${panel.id}`, dataset: { chart: panel.id } });
      const valueEl = h('span', { class: 'value' });
      const emptyEl = h('div', { class: 'chart-empty' }, 'Waiting for the first step…');
      const cardEl = h(
        'div',
        { class: 'chart-card', id: `card-${panel.id}` },
        h(
          'div',
          { class: 'chart-head' },
          h('h3', null, panel.title),
          h('span', { class: 'hint' }, panel.hint),
          valueEl,
        ),
        chartEl,
        emptyEl,
      );
      // a panel of an optional feature (dynamic sampling) shows only in runs that report it
      cardEl.hidden = Boolean(panel.isOptional);
      container.append(cardEl);
      // visible until the observer says otherwise: the first pass draws every chart
      const card = {
        panel,
        chart: mountChart(chartEl, { group: GROUP }),
        valueEl,
        emptyEl,
        cardEl,
        isDirty: false,
        isVisible: true,
      };
      new IntersectionObserver(
        (entries) => {
          card.isVisible = isOnScreen(entries);
          if (card.isVisible && card.isDirty) this.drain();
        },
        { rootMargin: '200px' },
      ).observe(chartEl);
      return card;
    });
    echarts.connect(GROUP);
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer;
    this.cards[0].chart.on('datazoom', () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.followZoom(), 150);
    });
  }

  /**
   * A long run is drawn thinned; zooming in redraws the window at full resolution, once the
   * steps the server's thinned answer left out of it are read (onWindow).
   */
  followZoom() {
    const zoom = this.cards[0].chart.getOption().dataZoom?.[0];
    const s = this.series;
    if (!zoom || (s.size <= MAX_POINTS && !s.hidden)) return;
    const full = (zoom.start ?? 0) <= 0 && (zoom.end ?? 100) >= 100;
    this.window = full ? null : [Math.floor(zoom.startValue), Math.ceil(zoom.endValue)];
    if (this.window && s.hidden) this.onWindow?.(this.window);
    this.render(this.last.weight, { finished: this.last.finished });
  }

  /**
   * Redraws the charts from the series, one chart per task so that input and frames get in
   * between (nine charts at once blocked a loaded page for ~150 ms); charts off screen wait
   * until they scroll into view. Resolves when the charts on screen are drawn.
   */
  render(weight, { finished = false } = {}) {
    this.last = { weight, finished };
    for (const card of this.cards) card.isDirty = true;
    return this.drain();
  }

  drain() {
    this.pass ||= this.drawDirty().finally(() => {
      this.pass = null;
    });
    return this.pass;
  }

  async drawDirty() {
    let busy = 0;
    for (;;) {
      // a hidden optional card is drawn too: drawing is what finds out it has data
      const card = this.cards.find((c) => c.isDirty && (c.isVisible || c.cardEl.hidden));
      if (!card) break;
      const started = performance.now();
      card.isDirty = false;
      this.draw(card);
      busy += performance.now() - started;
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    this.lastPassMs = busy;
  }

  draw(card) {
    const { weight, finished } = this.last;
    const s = this.series;
    const built = card.panel.build(s, weight);
    const source = {
      step: s.steps,
      ...Object.fromEntries(built.lines.map((l) => [l.key, s.column(l.key)]).filter(([, c]) => c)),
      ...(built.extra || {}),
    };
    const primary = source[built.lines.find((l) => !l.invisible && !l.band && source[l.key])?.key];
    const sparse = built.lines.filter((l) => l.sparse && source[l.key]).map((l) => source[l.key]);
    const keep = keepIndices(s.steps, primary, this.window, MAX_POINTS, sparse);
    const option = lineChartOption({
      source,
      lines: built.lines,
      weight,
      axes: built.axes,
      markArea: built.markArea,
      keep,
    });
    const hasData = option.series.length > 0 && s.size > 0;
    if (card.panel.isOptional && card.cardEl.hidden === hasData) {
      card.cardEl.hidden = !hasData;
      if (hasData) card.chart.resize();
    }
    card.emptyEl.hidden = hasData;
    card.emptyEl.textContent = s.size
      ? 'Not reported by this run'
      : finished
        ? 'No steps recorded'
        : 'Waiting for the first step…';
    if (hasData) card.chart.setOption(option, { replaceMerge: ['series', 'dataset', 'yAxis'] });
    else card.chart.clear();
    card.valueEl.textContent = headValue(card.panel, s);
  }

  resetZoom() {
    this.cards[0].chart.dispatchAction({ type: 'dataZoom', start: 0, end: 100 });
  }
}
