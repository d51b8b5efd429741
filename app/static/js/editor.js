// A plain-text spec editor with line numbers and error lines marked beside the text.

import { h } from './dom.js';

const LINE_PX = 18;

export class SpecEditor {
  /**
   * @param {HTMLElement} root
   * @param {{ onInput?: (text: string) => void }} [options]
   */
  constructor(root, { onInput = () => {} } = {}) {
    this.errorLines = new Map();
    this.gutter = h('div', { class: 'editor-gutter', 'aria-hidden': 'true' });
    this.backdrop = h('div', { class: 'editor-backdrop', 'aria-hidden': 'true' });
    this.textarea = h('textarea', {
      id: 'spec-text',
      spellcheck: 'false',
      wrap: 'off',
      autocapitalize: 'off',
      autocomplete: 'off',
      'aria-label': 'Job spec',
    });
    root.append(this.gutter, h('div', { class: 'editor-body' }, this.backdrop, this.textarea));
    this.textarea.addEventListener('input', () => {
      this.paint();
      onInput(this.value);
    });
    this.textarea.addEventListener('scroll', () => this.sync());
    this.textarea.addEventListener('keydown', (event) => this.onKey(event));
  }

  get value() {
    return this.textarea.value;
  }

  set value(text) {
    this.textarea.value = text;
    this.paint();
  }

  /** `lines` maps 1-based line numbers to messages. */
  setErrors(lines) {
    this.errorLines = lines;
    this.paint();
  }

  paint() {
    const lines = this.value.split('\n');
    this.gutter.replaceChildren(
      ...lines.map((_, i) =>
        h(
          'div',
          {
            class: `ln${this.errorLines.has(i + 1) ? ' is-error' : ''}`,
            title: this.errorLines.get(i + 1) || null,
          },
          String(i + 1),
        ),
      ),
    );
    // the message sits after the line's own (transparent) text, like an inline lint
    this.backdrop.replaceChildren(
      ...lines.map((line, i) =>
        h(
          'div',
          {
            class: this.errorLines.has(i + 1) ? 'hl' : null,
          },
          line || ' ',
          this.errorLines.has(i + 1) ? h('span', { class: 'inline-error' }, `   ${this.errorLines.get(i + 1)}`) : null,
        ),
      ),
    );
    this.sync();
  }

  sync() {
    this.gutter.scrollTop = this.textarea.scrollTop;
    this.backdrop.scrollTop = this.textarea.scrollTop;
    this.backdrop.scrollLeft = this.textarea.scrollLeft;
  }

  /** Puts the caret at the start of a 1-based line and scrolls it into view. */
  revealLine(line) {
    const lines = this.value.split('\n');
    const offset = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
    this.textarea.focus();
    this.textarea.setSelectionRange(offset, offset + (lines[line - 1] || '').length);
    this.textarea.scrollTop = Math.max(0, (line - 4) * LINE_PX);
    this.sync();
  }

  onKey(event) {
    if (event.key !== 'Tab' || event.shiftKey) return;
    event.preventDefault();
    const { selectionStart: a, selectionEnd: b, value } = this.textarea;
    this.textarea.value = `${value.slice(0, a)}  ${value.slice(b)}`;
    this.textarea.setSelectionRange(a + 2, a + 2);
    this.paint();
  }
}
