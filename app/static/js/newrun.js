// New run page: presets (the demo first), a YAML/JSON spec editor, and validation errors
// shown beside the lines they are about, checked by the server as you type (what submit
// would answer: POST /api/specs/check), and apart from them what it warns of (what submit
// accepts, e.g. a model with random weights). `?from=<run id>` copies a run's spec, with
// the fields of any `&set=<field>=<JSON value>` changed (specpatch.js).

import { dump, load } from '../vendor/js-yaml.mjs';
import { checkSpec, convertTrlConfig, createRun, getRun, listPresets } from './api.js';
import { mountUpload, withDataset } from './datasetupload.js';
import { $, $$, fill, h, seg } from './dom.js';
import { SpecEditor } from './editor.js';
import { mountRewardCheck } from './rewardcheck.js';
import { describeType, loadSchema } from './schema.js';
import { errorText, initShell, stateBox } from './shell.js';
import { lineOf, locateLine, pathAtLine } from './speclocate.js';
import { describeChanges, specChanges, withChanges } from './specpatch.js';
import { getToken, withToken } from './token.js';

/**
 * A spec to start from: a preset of the API, or a copy of an earlier run.
 * @typedef {{
 *   key?: string, name?: string, title: string, description: string, spec: object, source?: string,
 *   isDemo?: boolean,
 * }} SpecSource
 * @typedef {{ loc: string, message: string, line: number | null }} Problem
 */

/**
 * @type {{
 *   format: 'yaml' | 'json', presets: import('./api.js').PresetList['items'], active: string | null,
 *   problems: Problem[], schema: import('./schema.js').SpecSchema | null, helpLine: number | null,
 * }}
 */
const state = { format: 'yaml', presets: [], active: null, problems: [], schema: null, helpLine: null };
let editor;

function serialize(spec, format) {
  return format === 'json' ? `${JSON.stringify(spec, null, 2)}\n` : dump(spec, { lineWidth: 100 });
}

/** Parses the editor text (JSON is YAML, so one parser gives line numbers for both). */
function parse(text) {
  try {
    const spec = load(text);
    if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
      return {
        problem: {
          loc: '(spec)',
          message: 'The spec must be a mapping of fields (e.g. model: builtin:tiny-arith).',
          line: null,
        },
      };
    }
    return { spec };
  } catch (error) {
    const line = error.mark && Number.isInteger(error.mark.line) ? error.mark.line + 1 : null;
    return {
      problem: {
        loc: state.format === 'json' ? 'JSON syntax' : 'YAML syntax',
        message: error.reason || error.message,
        line,
      },
    };
  }
}

function showProblems(found) {
  const problems = [...found].sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
  state.problems = problems;
  const list = $('#errors');
  $('#no-errors').hidden = problems.length > 0;
  $('#problem-count').textContent = problems.length ? `${problems.length}` : '';
  fill(
    list,
    problems.map((p) =>
      h(
        'li',
        {
          tabindex: p.line ? '0' : null,
          dataset: { loc: p.loc, line: p.line ?? '' },
          onclick: () => p.line && editor.revealLine(p.line),
          onkeydown: (event) => {
            if (event.key === 'Enter' && p.line) editor.revealLine(p.line);
          },
        },
        p.line ? h('span', { class: 'line-ref' }, `line ${p.line}`) : null,
        h('div', { class: 'loc' }, p.loc),
        h('div', { class: 'msg' }, p.message),
      ),
    ),
  );
  editor.setErrors(new Map(problems.filter((p) => p.line).map((p) => [p.line, p.message])));
}

/**
 * Shows what the server's check warns of: accepted by submit, shown apart from the problems.
 * @param {{ loc: string, message: string }[]} warnings
 */
function showWarnings(warnings) {
  $('#warnings-block').hidden = warnings.length === 0;
  fill(
    $('#warnings'),
    warnings.map((w) =>
      h('li', { dataset: { loc: w.loc } }, h('div', { class: 'loc' }, w.loc), h('div', { class: 'msg' }, w.message)),
    ),
  );
}

function summarize(spec) {
  const pick = (key) => {
    if (spec[key] !== undefined && spec[key] !== null) return { value: spec[key], isDefault: false };
    return { value: state.schema?.defaultOf(key), isDefault: true };
  };
  const show = ({ value, isDefault }, format = (v) => String(v)) => {
    if (value === undefined) return h('span', { class: 'faint' }, 'default');
    return h('span', { class: isDefault ? 'faint' : null, title: isDefault ? 'default' : null }, format(value));
  };
  const b = pick('prompts_per_step'),
    g = pick('num_generations');
  const rows = [
    ['model', show(pick('model'))],
    ['data', show(pick('data'), (d) => d.source)],
    [
      'rewards',
      show(pick('rewards'), (r) =>
        r.map((x) => (x.weight !== undefined && x.weight !== 1 ? `${x.name}×${x.weight}` : x.name)).join(' + '),
      ),
    ],
    ['steps', show(pick('max_steps'))],
    ['prompts × G', h('span', null, show(b), ' × ', show(g), b.value && g.value ? ` = ${b.value * g.value}/step` : '')],
    ['max_completion_length', show(pick('max_completion_length'))],
    ['loss_type', show(pick('loss_type'))],
    ['beta', show(pick('beta'))],
    ['epsilon', show(pick('epsilon'))],
    ['learning_rate', show(pick('learning_rate'))],
  ];
  fill(
    $('#summary'),
    rows.flatMap(([k, v]) => [h('dt', null, k), h('dd', null, v)]),
  );
}

/** Shows the schema's documentation of the field under the caret. */
function showFieldHelp() {
  const text = editor.value;
  const line = lineOf(text, editor.textarea.selectionStart);
  if (line === state.helpLine || !state.schema) return;
  state.helpLine = line;
  const path = pathAtLine(text, line);
  const { spec } = parse(text);
  const prop = path ? state.schema.field(path.split('.'), spec) : null;
  $('#field-path').textContent = path || '';
  if (!prop) {
    fill(
      $('#field-help'),
      h('p', { class: 'muted' }, 'Put the caret on a field to see what it does, its bounds and its default.'),
    );
    return;
  }
  fill(
    $('#field-help'),
    prop.description ? h('p', null, prop.description) : null,
    h(
      'dl',
      { class: 'summary-list' },
      prop.type || prop.anyOf || prop.enum
        ? [h('dt', null, 'type'), h('dd', { title: describeType(prop) }, describeType(prop))]
        : null,
      prop.default !== undefined ? [h('dt', null, 'default'), h('dd', null, JSON.stringify(prop.default))] : null,
    ),
  );
}

function setSpec(spec, source) {
  editor.value = serialize(spec, state.format);
  $('#spec-source').textContent = source;
  showProblems([]);
  showWarnings([]);
  summarize(spec);
  state.helpLine = null;
  checkOnServer(spec, editor.value);
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
let checkTimer;
function onEdit() {
  clearTimeout(checkTimer);
  checkTimer = setTimeout(() => {
    const { spec, problem } = parse(editor.value);
    if (problem) {
      checks.latest += 1; // a check still in flight is of an older text
      showProblems([problem]);
    } else {
      if (state.problems.some((p) => p.loc.endsWith('syntax') || p.loc === '(spec)')) showProblems([]);
      summarize(spec);
      checkOnServer(spec, editor.value);
    }
  }, 250);
}

/** @type {{ latest: number, refusedToken: string | null }} */
const checks = { latest: 0, refusedToken: null };
/**
 * Shows what submit would refuse the spec for (the server's rules, every one), unless the
 * text changed since. A check the server will not answer (away, or no token yet) shows
 * nothing: submit checks again, and asks for the token; a token refused is not sent again
 * with every key press.
 * @param {object} spec
 * @param {string} text the editor's text it was parsed from, for the problems' lines
 */
async function checkOnServer(spec, text) {
  checks.latest += 1;
  const mine = checks.latest;
  if (checks.refusedToken !== null && checks.refusedToken === getToken()) return;
  try {
    const { problems, warnings } = await checkSpec(spec);
    if (mine !== checks.latest) return;
    showProblems(problems.map((p) => ({ loc: p.loc, message: p.message, line: locateLine(text, p.loc) })));
    showWarnings(warnings ?? []);
  } catch (error) {
    if (error.status === 401 || error.status === 403) checks.refusedToken = getToken();
  }
}

function setFormat(format) {
  if (format === state.format) return;
  const { spec, problem } = parse(editor.value);
  if (problem) {
    showProblems([problem]);
    return;
  }
  state.format = format;
  for (const b of $$('.seg button')) b.setAttribute('aria-pressed', String(b.dataset.format === format));
  editor.value = serialize(spec, format);
  showProblems([]);
  checkOnServer(spec, editor.value); // the same problems, on the lines of the new format
}

async function submit() {
  const button = $('#submit-button');
  const { spec, problem } = parse(editor.value);
  if (problem) {
    showProblems([problem]);
    return;
  }
  button.disabled = true;
  $('#submit-status').textContent = 'Submitting…';
  try {
    const run = await withToken(() => createRun(spec));
    $('#submit-status').textContent = 'Submitted; opening the run…';
    window.location.assign(`/runs/${seg(run.id)}`);
  } catch (error) {
    $('#submit-status').textContent = '';
    const text = editor.value;
    const problems = error.fields?.length
      ? error.fields.map((f) => ({ loc: f.loc, message: f.message, line: locateLine(text, f.loc) }))
      : [{ loc: error.code || 'error', message: errorText(error), line: null }];
    showProblems(problems);
  } finally {
    button.disabled = false;
  }
}

/** Convert the pasted TRL config on the server; the spec replaces the editor's, and what
 * could not be mapped is listed under the box. */
async function convertPasted() {
  const list = $('#trl-unmapped');
  try {
    const chosen = /** @type {HTMLSelectElement} */ ($('#trl-class')).value;
    const configClass = chosen === 'GRPOConfig' || chosen === 'AsyncGRPOConfig' ? chosen : null;
    const converted = await convertTrlConfig(/** @type {HTMLTextAreaElement} */ ($('#trl-config')).value, configClass);
    state.active = null;
    setSpec(converted.spec, 'converted from a TRL config');
    const unmapped = Object.entries(converted.unmapped);
    fill(
      list,
      unmapped.length
        ? unmapped.map(([field, why]) => h('li', null, h('code', null, field), ` ${why}`))
        : [h('li', { class: 'muted' }, 'Every field was mapped.')],
    );
  } catch (error) {
    fill(list, [h('li', null, errorText(error))]);
  }
}

/** @param {SpecSource | null} extra */
function renderPresets(extra) {
  /** @type {SpecSource[]} */
  const items = [
    ...(extra ? [extra] : []),
    ...state.presets.map((p, i) => ({ ...p, key: `preset:${p.name}`, isDemo: i === 0 })),
  ];
  if (!items.length) {
    fill($('#presets'), stateBox('empty', 'No presets', 'Write a spec by hand.'));
    return;
  }
  fill(
    $('#presets'),
    items.map((p) =>
      h(
        'button',
        {
          type: 'button',
          class: 'preset',
          'aria-pressed': String(state.active === p.key),
          dataset: { preset: p.name || p.key },
          onclick: () => {
            state.active = p.key ?? null;
            setSpec(p.spec, p.source || `preset ${p.name}`);
            renderPresets(extra);
          },
        },
        h('div', { class: 'preset-title' }, p.title, p.isDemo ? h('span', { class: 'badge' }, 'demo') : null),
        p.description ? h('div', { class: 'preset-desc' }, p.description) : null,
      ),
    ),
  );
}

async function main() {
  initShell();
  editor = new SpecEditor($('#editor'), { onInput: onEdit });
  for (const type of ['keyup', 'click', 'focus']) editor.textarea.addEventListener(type, showFieldHelp);
  for (const b of $$('.seg button')) b.addEventListener('click', () => setFormat(b.dataset.format));
  $('#submit-button').addEventListener('click', submit);
  $('#trl-convert').addEventListener('click', convertPasted);
  document.addEventListener('keydown', (event) => {
    if ((event.ctrlKey || event.metaKey) && event.key === 'Enter') submit();
  });
  const params = new URLSearchParams(window.location.search);
  /** @type {SpecSource | null} */
  let extra = null;
  try {
    // where reads need a token and none is stored, ask for it here, before the schema's read
    state.presets = (await withToken(listPresets, { purpose: 'reads' })).items;
  } catch (error) {
    fill($('#presets'), stateBox('error', 'Could not load presets', errorText(error)));
  }
  state.schema = await loadSchema();
  if (params.get('from')) {
    try {
      const run = await getRun(params.get('from') ?? '');
      const changes = specChanges(params);
      const spec = withChanges({ ...run.spec, name: `${run.name} (copy)` }, changes);
      const changed = changes.length ? ` with ${describeChanges(changes)}` : '';
      extra = {
        key: `run:${run.id}`,
        title: `Copy of ${run.name}${changed}`,
        description: `The spec of run ${run.id}${changed}, to edit and submit as a new run.`,
        spec,
        source: `from run ${run.id}${changed}`,
      };
    } catch (error) {
      showProblems([
        { loc: 'from', message: `Could not load run ${params.get('from')}: ${errorText(error)}`, line: null },
      ]);
    }
  }
  /** @type {SpecSource | undefined} */
  const wanted = extra || state.presets.find((p) => p.name === params.get('preset')) || state.presets[0];
  if (wanted) {
    state.active = wanted.key || `preset:${wanted.name}`;
    setSpec(wanted.spec, wanted.source || `preset ${wanted.name}`);
  } else {
    setSpec({ model: 'builtin:tiny-arith', max_steps: 30 }, 'blank');
  }
  renderPresets(extra);
  const useData = (data, name) => setSpec(withDataset(parse(editor.value).spec || {}, data), `dataset ${name}`);
  mountUpload($('#upload'), useData);
  mountRewardCheck($('#reward-check'), () => parse(editor.value).spec || null);
}

main();
