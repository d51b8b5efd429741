// The new-run page's upload box: choose or drop a JSONL file, see its fields and first
// records before anything is sent, pick the prompt and answer fields, then upload it
// (POST /api/datasets, newlines kept) and use it as the spec's data source.

import { uploadDataset } from './api.js';
import { fill, h } from './dom.js';
import { errorText } from './shell.js';

const PREVIEW_RECORDS = 3;
const SCANNED_LINES = 200;

/**
 * The fields and first records of a JSONL text, from its first lines; or why it is not JSONL.
 * @param {string} text
 * @returns {{ error: string } | { fields: string[], records: object[], count: number }}
 */
export function previewJsonl(text) {
  const lines = text.split('\n').filter((line) => line.trim());
  /** @type {object[]} */
  const records = [];
  const fields = new Set();
  for (const [i, line] of lines.slice(0, SCANNED_LINES).entries()) {
    let record;
    try {
      record = JSON.parse(line);
    } catch (error) {
      const joined = /}\s*{/.test(line) ? '; one record a line: were the newlines stripped?' : '';
      return { error: `line ${i + 1}: not JSON (${error instanceof Error ? error.message : error})${joined}` };
    }
    if (record === null || typeof record !== 'object' || Array.isArray(record)) {
      return { error: `line ${i + 1}: not a JSON object` };
    }
    for (const key of Object.keys(record)) fields.add(key);
    if (records.length < PREVIEW_RECORDS) records.push(record);
  }
  if (!lines.length) return { error: 'the file is empty' };
  return { fields: [...fields], records, count: lines.length };
}

/**
 * The spec with `data` as its source; an eval without a source of its own gets a held-out
 * share, since an uploaded file has one split.
 * @param {Record<string, any>} spec
 * @param {Record<string, string>} data
 */
export function withDataset(spec, data) {
  /** @type {Record<string, any>} */
  const next = { ...spec, data };
  const ev = spec.eval;
  if (ev && !ev.source && !ev.holdout_fraction) next.eval = { ...ev, holdout_fraction: 0.1 };
  return next;
}

/** @param {string[]} fields @param {string} wanted @param {number} fallback @param {string} id */
function fieldSelect(fields, wanted, fallback, id) {
  const chosen = fields.includes(wanted) ? wanted : fields[Math.min(fallback, fields.length - 1)];
  return h(
    'select',
    { id },
    fields.map((f) => h('option', { value: f, selected: f === chosen }, f)),
  );
}

/**
 * @param {HTMLElement} box
 * @param {(data: Record<string, string>, name: string) => void} use
 */
export function mountUpload(box, use) {
  const status = h('div', { id: 'upload-status', class: 'muted', role: 'status' });
  const preview = h('div', { id: 'upload-preview' });
  const input = h('input', { id: 'upload-file', type: 'file', accept: '.jsonl,.ndjson,.json,.parquet' });
  input.addEventListener('change', () => input.files?.[0] && show(input.files[0]));
  box.addEventListener('dragover', (event) => event.preventDefault());
  box.addEventListener('drop', (event) => {
    event.preventDefault();
    const file = event.dataTransfer?.files[0];
    if (file) show(file);
  });
  fill(
    box,
    h('p', { class: 'muted' }, 'A JSONL file, one JSON record a line (or drop it here).'),
    input,
    preview,
    status,
  );

  /** @param {File} file */
  async function show(file) {
    status.textContent = '';
    if (file.name.endsWith('.parquet')) {
      fill(
        preview,
        h(
          'p',
          { class: 'error' },
          'This box previews JSONL only: upload a parquet file with `grpo datasets upload FILE` (or POST /api/datasets), then use dataset:<id>.',
        ),
      );
      return;
    }
    const found = previewJsonl(await file.text());
    if ('error' in found) {
      fill(preview, h('p', { class: 'error' }, `${file.name}: ${found.error}`));
      return;
    }
    const upload = h('button', { class: 'btn', type: 'button', id: 'upload-use' }, 'Upload and use');
    fill(
      preview,
      h('p', {}, `${file.name}: ${found.count} records, fields ${found.fields.join(', ')}`),
      h('label', {}, 'prompt ', fieldSelect(found.fields, 'prompt', 0, 'upload-prompt-field')),
      h('label', {}, ' answer ', fieldSelect(found.fields, 'answer', 1, 'upload-answer-field')),
      h('pre', { class: 'upload-records' }, found.records.map((r) => JSON.stringify(r)).join('\n')),
      upload,
    );
    upload.addEventListener('click', () => send(file));
  }

  /** @param {File} file */
  async function send(file) {
    const pick = (/** @type {string} */ id) => /** @type {HTMLSelectElement} */ (box.querySelector(`#${id}`)).value;
    const fields = { prompt_field: pick('upload-prompt-field'), answer_field: pick('upload-answer-field') };
    const name = file.name.replace(/\.[^.]+$/, '');
    status.textContent = 'Uploading…';
    try {
      const dataset = await uploadDataset(file, { name, ...fields });
      status.textContent = `${dataset.source}: ${dataset.num_records} records`;
      use({ source: dataset.source, ...fields }, dataset.name);
    } catch (error) {
      status.textContent = errorText(error);
    }
  }
}
