// The step scrubber: picks the step every distribution view shows; "Live" follows the latest.

import { h } from './dom.js';

export class Scrubber {
  constructor(el, { onChange }) {
    this.onChange = onChange;
    this.first = 0;
    this.last = 0;
    this.step = null;
    this.live = true;
    this.range = h('input', { type: 'range', min: 0, max: 0, value: 0, 'aria-label': 'Selected step', disabled: true });
    this.label = h('span', { class: 'step-label' }, 'No steps yet');
    this.liveButton = h(
      'button',
      { type: 'button', class: 'btn live-toggle', 'aria-pressed': 'true', title: 'Follow the latest step' },
      'Live',
    );
    const prev = h(
      'button',
      { type: 'button', class: 'btn', title: 'Previous step ([)', 'aria-label': 'Previous step' },
      '‹',
    );
    const next = h('button', { type: 'button', class: 'btn', title: 'Next step (])', 'aria-label': 'Next step' }, '›');
    el.append(this.label, prev, this.range, next, this.liveButton);
    this.range.addEventListener('input', () => this.select(Number(this.range.value), { live: false }));
    prev.addEventListener('click', () => this.nudge(-1));
    next.addEventListener('click', () => this.nudge(1));
    this.liveButton.addEventListener('click', () => {
      if (this.live) this.select(this.step, { live: false });
      else this.select(this.last, { live: true });
    });
    document.addEventListener('keydown', (event) => {
      const target = /** @type {HTMLElement} */ (event.target);
      if (target.closest('input, textarea, select') && target !== this.range) return;
      if (event.key === '[') this.nudge(-1);
      if (event.key === ']') this.nudge(1);
    });
  }

  nudge(delta) {
    if (this.step == null) return;
    this.select(Math.min(this.last, Math.max(this.first, this.step + delta)), { live: false });
  }

  /** New step bounds; in live mode the selection moves to the latest step. */
  setBounds(first, last) {
    this.first = first;
    this.last = last;
    this.range.min = String(first);
    this.range.max = String(last);
    this.range.disabled = last < first || !last;
    if (this.live && last && this.step !== last) this.select(last, { live: true });
    else this.paint();
  }

  select(step, { live }) {
    if (!this.last) return;
    this.step = step;
    this.live = live;
    this.paint();
    this.onChange(step, live);
  }

  paint() {
    this.range.value = String(this.step ?? this.last);
    this.liveButton.setAttribute('aria-pressed', String(this.live));
    this.label.textContent = this.step == null ? 'No steps yet' : `Step ${this.step} / ${this.last}`;
  }
}
