// Run page: loads the run's history over REST, follows the SSE stream, and redraws in
// batches (at most a few frames a second, however fast steps arrive).

import { dump } from '../vendor/js-yaml.mjs';
import { eventsUrl, getAllHistograms, getMetrics, getRun } from './api.js';
import { FINAL, progressBar } from './badges.js';
import { histogram } from './bins.js';
import { CurvesView } from './curves.js';
import { DoctorCard } from './doctor.js';
import { $, fill, h, seg } from './dom.js';
import { EvalTable } from './evaltable.js';
import { duration, runSeconds } from './format.js';
import { HistogramHeatmapView, StepHistogramView } from './histograms.js';
import { LogView } from './logs.js';
import { renderBanner, renderHeader, renderStats } from './runheader.js';
import * as loaded from './runload.js';
import { showRunReplays } from './runreplays.js';
import { Scrubber } from './scrubber.js';
import { RunSeries } from './series.js';
import { errorText, initShell, stateBox } from './shell.js';
import { StepGroupsView } from './stepgroups.js';
import { openStream } from './stream.js';

const RENDER_EVERY_MS = 250;
const SMOOTHING_KEY = 'grpo.smoothing';

const page = $('#page');
const { runId } = loaded;
const series = new RunSeries();
/**
 * @type {{
 *   run: import('./api.js').RunOut | null, shownStep: number | null, renderQueued: boolean, lastRender: number,
 *   renderCost: number, curvesKey: string, stepTimer: ReturnType<typeof setTimeout> | undefined,
 *   statusTimer: ReturnType<typeof setTimeout> | undefined,
 *   evalTimer: ReturnType<typeof setTimeout> | undefined, window: string,
 * }}
 */
const state = {
  run: null,
  shownStep: null,
  renderQueued: false,
  lastRender: 0,
  renderCost: 0,
  curvesKey: '',
  stepTimer: undefined,
  statusTimer: undefined,
  evalTimer: undefined,
  window: '',
};

/** The run as last read; main() reads it before any view is built. */
function shownRun() {
  if (!state.run) throw new Error('the run is read before the page is drawn');
  return state.run;
}
let curves, scrubber, stepGroups, stepHistogram, heatmaps, logs, evals, doctor;

function smoothing() {
  return Number($('#smoothing').value);
}

/** With no choice stored, long runs start smoothed (TensorBoard's 0.6) and short ones raw. */
function defaultSmoothing() {
  const stored = localStorage.getItem(SMOOTHING_KEY);
  if (stored !== null) return;
  const value = series.trained > 200 ? '0.6' : '0';
  $('#smoothing').value = value;
  $('#smoothing-value').textContent = value;
}

/** Redraws at most every RENDER_EVERY_MS, or 4x the last redraw's cost: the page stays <= ~25% busy. */
function scheduleRender() {
  if (state.renderQueued) return;
  state.renderQueued = true;
  const every = Math.max(RENDER_EVERY_MS, 4 * (state.renderCost + curves.lastPassMs));
  const wait = Math.max(0, every - (performance.now() - state.lastRender));
  setTimeout(() => requestAnimationFrame(render), wait);
}

/** Redraws what changed; resolves when the curves on screen are drawn. */
function render() {
  const started = performance.now();
  state.renderQueued = false;
  const finished = FINAL.has(shownRun().status);
  const key = `${series.version}|${smoothing()}|${shownRun().status}`;
  let drawn = Promise.resolve();
  if (key !== state.curvesKey) {
    state.curvesKey = key;
    drawn = curves.render(smoothing(), { finished });
    renderStats($('#run-stats'), shownRun(), series);
    updateProgress();
    doctor.update();
  }
  scrubber.setBounds(series.first, series.last);
  for (const heatmap of Object.values(heatmaps)) heatmap.update(series.histograms, series.histogramVersion);
  if (!series.trained) {
    const text = finished ? 'This run recorded no steps' : 'Waiting for the first step…';
    $('#groups-empty').textContent = text;
    $('#advantages-empty').textContent = text;
  }
  const size = series.trained;
  drawn.then(() => {
    page.dataset.renderedSteps = String(size);
  });
  state.lastRender = performance.now();
  state.renderCost = state.lastRender - started;
  return drawn;
}

/** Progress and duration move with every step, between status events. */
function updateProgress() {
  const run = { ...shownRun(), step: Math.max(shownRun().step, series.last) };
  $('#run-head .progress')?.replaceWith(progressBar(run));
  const el = $('#run-head .run-duration');
  if (el) el.textContent = duration(runSeconds(run));
}

function setRun(run) {
  const statusChanged = !state.run || state.run.status !== run.status;
  state.run = run;
  document.title = `${run.name} · GRPO Service`;
  $('#crumb-name').textContent = run.name;
  renderHeader($('#run-head'), run, { onAction: (name) => onAction(name) });
  renderBanner($('#run-banner'), run);
  renderStats($('#run-stats'), run, series);
  updateProgress();
  if (statusChanged) page.dataset.status = run.status;
}

async function onAction(name) {
  if (name === 'delete') {
    window.location.assign('/');
    return;
  }
  setRun(await getRun(runId));
  if (name === 'resume') follow();
}

function onEvent(event) {
  if (event.event === 'step') {
    series.add(event.data);
    scheduleRender();
  } else if (event.event === 'status') {
    refreshRun();
  } else if (event.event === 'eval') {
    // its scalars join its step's (step 0, before training, has no other)
    series.add({ step: event.data.step, metrics: event.data.metrics });
    scheduleRender();
    refreshEvals();
  } else if (event.event === 'diagnosis') {
    doctor.onEvent(event.data);
  } else if (event.event === 'log') {
    logs.add([event.data]);
    $('#log-count').textContent = `${logs.count} lines`;
  } else if (event.event === 'end') {
    // the stream is done: one last read closes any gap the stream could not cover
    refreshAfterEnd();
  }
}

/**
 * A status event may be an old one replayed from the start of the log, so the page reads
 * the run itself rather than trusting the event's copy (status events are few).
 */
function refreshRun() {
  clearTimeout(state.statusTimer);
  state.statusTimer = setTimeout(async () => {
    try {
      setRun(await getRun(runId));
      scheduleRender();
    } catch {
      // the next status event or the end of the stream tries again
    }
  }, 100);
}

/** Evaluations come as events (step 0 included); the table re-reads them, a burst once. */
function refreshEvals() {
  clearTimeout(state.evalTimer);
  state.evalTimer = setTimeout(() => evals.refresh().catch(() => {}), 200);
}

async function refreshAfterEnd() {
  try {
    const [run, rows] = await Promise.all([
      getRun(runId),
      getMetrics(runId, { afterStep: series.size ? series.last : undefined }),
    ]);
    series.load(rows, rows.thinned);
    setRun(run);
    scheduleRender();
  } catch {
    // the page keeps what it has; a reload retries
  }
}

function onStreamState(streamState) {
  const el = $('#stream-state');
  const labels = {
    connecting: 'connecting…',
    open: 'live',
    reconnecting: 'reconnecting…',
    ended: 'finished',
    error: 'stream unavailable',
  };
  el.dataset.state = streamState;
  el.textContent = labels[streamState] || streamState;
}

/** @type {{ close(): void } | null} */
let stream = null;
/** @param {string | null} [lastEventId] */
function follow(lastEventId = null) {
  stream?.close();
  stream = openStream(eventsUrl(runId), { onEvent, onState: onStreamState, lastEventId });
}

function onStepChange(step, live) {
  const url = live ? `/runs/${seg(runId)}` : `/runs/${seg(runId)}/steps/${seg(step)}`;
  if (window.location.pathname !== url) window.history.replaceState(null, '', url);
  if (step === state.shownStep) return;
  clearTimeout(state.stepTimer);
  state.stepTimer = setTimeout(() => showStep(step), live ? 0 : 120);
}

async function showStep(step) {
  state.shownStep = step;
  const known = series.histograms.get(step)?.advantage;
  if (known) drawAdvantages(known);
  try {
    const groups = await stepGroups.show(step);
    if (!groups) return;
    $('#groups-empty').hidden = groups.length > 0;
    $('#groups-empty').textContent = 'No groups stored for this step';
    $('#groups-summary').textContent = summary(groups);
    if (!known && groups.length)
      drawAdvantages(
        histogram(
          groups.flatMap((g) => g.advantages),
          stepHistogram.edges,
        ),
      );
    if (!known && !groups.length) showAdvantagesEmpty(`No completions stored for step ${step}`);
  } catch (error) {
    $('#groups-empty').hidden = false;
    $('#groups-empty').textContent = error.status === 404 ? `No groups stored for step ${step}` : errorText(error);
    if (!known) showAdvantagesEmpty($('#groups-empty').textContent);
  }
}

/**
 * The steps of a zoom window that the thinned history left out, read at the resolution a
 * chart shows (the latest window only: a window zoomed past is not read).
 * @param {[number, number]} window
 */
async function loadWindow([first, last]) {
  const key = `${first}-${last}`;
  if (state.window === key) return;
  state.window = key;
  try {
    const rows = await getMetrics(runId, { afterStep: first > 0 ? first - 1 : undefined, beforeStep: last + 1 });
    if (state.window === key && series.fill(rows)) scheduleRender();
  } catch {
    state.window = ''; // the next zoom tries again
  }
}

function showAdvantagesEmpty(text) {
  stepHistogram.draw([]);
  $('#advantages-empty').textContent = text;
  $('#advantages-empty').hidden = false;
}

function drawAdvantages(counts) {
  stepHistogram.draw(counts);
  $('#advantages-empty').hidden = true;
}

function summary(groups) {
  const mixed = groups.filter((g) => Math.max(...g.rewards) - Math.min(...g.rewards) > 1e-9).length;
  return `${groups.length} groups · ${mixed} with signal`;
}

/** The heatmaps' history, read after the curves are drawn (it is below the fold). */
async function loadHistograms() {
  try {
    series.loadHistograms(await getAllHistograms(runId));
    scheduleRender();
  } catch {
    // the heatmaps keep what the stream brings; a reload retries
  }
}

function initSmoothing() {
  const input = $('#smoothing');
  input.value = localStorage.getItem(SMOOTHING_KEY) || '0';
  $('#smoothing-value').textContent = input.value;
  input.addEventListener('input', () => {
    $('#smoothing-value').textContent = input.value;
    localStorage.setItem(SMOOTHING_KEY, input.value);
    scheduleRender();
  });
  $('#reset-zoom').addEventListener('click', () => curves.resetZoom());
}

/** @param {import('./api.js').BinEdges} edges each histogram's bins, as the API gives them */
function buildViews(edges) {
  curves = new CurvesView($('#curves'), series, { onWindow: loadWindow });
  stepGroups = new StepGroupsView($('#chart-groups'), { runId });
  stepHistogram = new StepHistogramView($('#chart-advantages'), edges.advantage_histogram);
  const pick = (step) => scrubber.select(step, { live: false });
  heatmaps = {
    spread: new HistogramHeatmapView($('#chart-spread-heatmap'), 'spread', edges.group_reward_std_histogram, {
      onPickStep: pick,
      emptyEl: $('#spread-heatmap-empty'),
    }),
    reward: new HistogramHeatmapView($('#chart-reward-heatmap'), 'reward', edges.reward_histogram, {
      onPickStep: pick,
      emptyEl: $('#reward-heatmap-empty'),
    }),
    advantage: new HistogramHeatmapView($('#chart-advantage-heatmap'), 'advantage', edges.advantage_histogram, {
      onPickStep: pick,
      emptyEl: $('#advantage-heatmap-empty'),
    }),
  };
  scrubber = new Scrubber($('#scrubber'), { onChange: onStepChange });
  logs = new LogView($('#logs'));
  evals = new EvalTable(runId);
  doctor = new DoctorCard($('#doctor'), { runId, series });
}

function showSpec(run) {
  $('#spec-view').textContent = dump(run.spec, { lineWidth: 100 });
  $('#spec-edit').href = `/runs/new?from=${seg(run.id)}`;
}

async function main() {
  initShell();
  // the history was requested by runload.js from the page head; the stream opens once it
  // is drawn, so a long run's replay does not compete with its first paint
  let run, edges;
  try {
    [run, edges] = await Promise.all([loaded.run, loaded.binEdges]);
  } catch (error) {
    const title = error.status === 404 ? 'Run not found' : 'Could not load the run';
    fill(
      $('#run-root'),
      h(
        'section',
        { class: 'panel' },
        stateBox(
          'error',
          title,
          error.status === 404 ? `No run has the id “${runId}”. It may have been deleted.` : errorText(error),
          h('a', { class: 'btn btn-ghost', href: '/' }, 'All runs'),
        ),
      ),
    );
    return;
  }
  buildViews(edges);
  initSmoothing();
  setRun(run);
  showSpec(run);
  if (page.dataset.step) scrubber.live = false;
  const rows = await loaded.history;
  performance.mark('grpo:history-fetched');
  series.load(rows, rows.thinned);
  performance.mark('grpo:history-merged');
  defaultSmoothing();
  await render();
  performance.mark('grpo:history-drawn');
  if (page.dataset.step) scrubber.select(Number(page.dataset.step), { live: false });
  doctor.load();
  follow(rows.lastEventId);
  // The run was read beside the history, not with it: a status change that landed between
  // the two reads (a worker saying why it leaves the run queued) is in neither that read
  // nor the stream, which starts where the history ends. A read from now covers it.
  refreshRun();
  loadHistograms();
  refreshEvals();
  showRunReplays(runId);
  logs.add(await loaded.logLines);
  $('#log-count').textContent = logs.count ? `${logs.count} lines` : '';
  setInterval(() => {
    if (shownRun().status === 'running') updateProgress();
  }, 1000);
}

main();
