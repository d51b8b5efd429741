// The run's log lines: loaded once, then appended live; a line seen twice is shown once.

import { fill, h } from './dom.js';
import { clock } from './format.js';
import { stateBox } from './shell.js';

export class LogView {
  constructor(el) {
    this.el = el;
    this.seen = new Set();
    this.count = 0;
    fill(el, stateBox('empty', 'No log lines yet', '', null));
    el.firstChild.classList.add('state-compact');
  }

  add(lines) {
    const atBottom = this.el.scrollHeight - this.el.scrollTop - this.el.clientHeight < 24;
    for (const line of lines) {
      // REST and stream may spell the same instant with or without an offset: compare to the second
      const key = `${String(line.created_at).slice(0, 19)}|${line.level}|${line.message}`;
      if (this.seen.has(key)) continue;
      this.seen.add(key);
      if (!this.count) this.el.replaceChildren();
      this.count += 1;
      const level = String(line.level || 'info').toLowerCase();
      this.el.append(
        h(
          'div',
          { class: `log-line log-${level}` },
          h('span', { class: 'log-time', title: line.created_at }, clock(line.created_at)),
          h('span', { class: 'log-level' }, level),
          h('span', { class: 'log-message' }, line.message),
        ),
      );
    }
    if (atBottom) this.el.scrollTop = this.el.scrollHeight;
  }
}
