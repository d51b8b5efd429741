// The run page's Export menu. Each entry is a link (copyable, and all it takes on an open
// server), but a click downloads through fetch with the stored API token, so exports work
// where reads require one (model downloads always do when tokens are set); the file keeps
// the name the server gives it. Model downloads need a token whenever tokens are set, even
// where reads do not: a refused one says so on its menu entry, and keeps saying so when the
// header redraws the menu (as the run's state arrives) until a download of it succeeds.

import { checkpointUrl, exportUrl, fetchFile } from './api.js';
import { h } from './dom.js';
import { errorText, toast } from './shell.js';
import { withToken } from './token.js';

/** @type {Map<string, string>} the note of each export URL whose last download was refused */
const refusals = new Map();

const EXPORTS = [
  ['Metrics · CSV', 'what=metrics&format=csv'],
  ['Metrics · JSONL', 'what=metrics&format=jsonl'],
  ['Groups · JSONL', 'what=groups&format=jsonl'],
];

export function exportMenu(run) {
  return h(
    'details',
    { class: 'menu' },
    h('summary', { class: 'btn btn-ghost' }, 'Export'),
    h(
      'div',
      { class: 'menu-list' },
      EXPORTS.map(([label, query]) => exportLink(exportUrl(run.id, query), label, 'reads')),
      exportLink(checkpointUrl(run.id, 'latest'), 'Model · latest checkpoint (.tar.gz)', 'model downloads'),
    ),
  );
}

function exportLink(url, label, purpose) {
  return h(
    'a',
    {
      href: url,
      download: '',
      onclick: (event) => {
        event.preventDefault();
        download(url, event.currentTarget, purpose);
      },
    },
    h('span', { class: 'export-label' }, label),
    h('span', { class: 'export-note', hidden: !refusals.has(url) }, refusals.get(url) ?? ''),
  );
}

async function download(url, link, purpose) {
  link.setAttribute('aria-busy', 'true');
  const note = link.querySelector('.export-note');
  try {
    const { blob, filename } = await withToken(() => fetchFile(url), { purpose });
    refusals.delete(url);
    note.hidden = true;
    save(blob, filename);
    link.closest('details')?.removeAttribute('open');
  } catch (error) {
    const refused = error.status === 401 || error.status === 403;
    if (refused) {
      const text = error.status === 401 ? ' · API token needed' : ' · token refused';
      refusals.set(url, text);
      // the menu on the page now: the header may have redrawn it since the click
      const selector = `a[href="${CSS.escape(url)}"] .export-note`;
      for (const shown of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll(selector))) {
        shown.textContent = text;
        shown.hidden = false;
      }
      note.textContent = text;
      note.hidden = false;
    }
    const hint = refused ? ' Set one with the API token button.' : '';
    toast(`Export failed: ${errorText(error)}${hint}`, 'error');
  } finally {
    link.removeAttribute('aria-busy');
  }
}

function save(blob, filename) {
  const href = URL.createObjectURL(blob);
  const a = h('a', { href, download: filename, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(href), 10_000);
}
