// The run page's header: name, status, progress, actions, the knobs that matter and the
// latest numbers, plus the error banner of a failed run.

import { runActions } from './actions.js';
import { progressBar, statusPill } from './badges.js';
import { outcomeShares } from './bins.js';
import { fill, h } from './dom.js';
import { exportMenu } from './exports.js';
import { dateTime, duration, num, pct, runSeconds, signed } from './format.js';

export function renderHeader(el, run, { onAction }) {
  const spec = run.spec || {};
  // the header is redrawn on every status read: an open export menu stays open
  const isMenuOpen = Boolean(el.querySelector('details.menu')?.open);
  fill(
    el,
    h(
      'div',
      { class: 'run-title' },
      h('h1', { id: 'run-name' }, run.name),
      statusPill(run.status, { cancelling: run.is_cancel_requested }),
      waitingFor(run),
      h('code', { title: 'run id' }, run.id),
    ),
    h('div', { class: 'head-actions' }, exportMenu(run), runActions(run, { onDone: onAction })),
    h(
      'div',
      { class: 'run-meta' },
      progressBar(run),
      h('span', null, 'created ', h('b', null, dateTime(run.created_at))),
      run.submitted_by ? h('span', null, 'by ', h('b', { class: 'run-owner' }, run.submitted_by)) : null,
      run.started_at ? h('span', null, 'ran ', h('b', { class: 'run-duration' }, duration(runSeconds(run)))) : null,
      run.worker ? h('span', null, 'worker ', h('b', null, run.worker)) : null,
      run.device ? h('span', null, 'on ', h('b', { class: 'run-device' }, run.device)) : null,
    ),
    h(
      'div',
      { class: 'spec-chips' },
      specChips(spec).map(([k, v]) => h('span', { class: 'spec-chip' }, h('b', null, `${k} `), v)),
    ),
    h('div', { class: 'run-stats', id: 'run-stats' }),
  );
  if (isMenuOpen) el.querySelector('details.menu').open = true;
}

/** What a queued run waits for (its gang's nodes, or why a worker left it queued), beside
 * its status; nothing once it is claimed or ends (the API then says null).
 * @param {import('./openapi').RunOut} run */
export function waitingFor(run) {
  if (!run.waiting_for) return null;
  return h(
    'span',
    { class: 'run-waiting', id: 'run-waiting', title: 'what this queued run waits for' },
    run.waiting_for,
  );
}

function specChips(spec) {
  const chips = [
    ['model', spec.model],
    ['data', spec.data?.source],
    [
      'rewards',
      (spec.rewards || [])
        .map((r) => [r.label || r.name, r.weight])
        .map(([name, weight]) => (weight !== undefined && weight !== 1 ? `${name}×${weight}` : name))
        .join(' + '),
    ],
    ['B×G', spec.prompts_per_step && spec.num_generations ? `${spec.prompts_per_step}×${spec.num_generations}` : null],
    ['β', spec.beta],
    ['ε', spec.epsilon_high != null ? `${spec.epsilon}/${spec.epsilon_high}` : spec.epsilon],
    ['loss_type', spec.loss_type],
    ['scale_rewards', spec.scale_rewards],
    ['μ', spec.num_iterations],
    ['lr', spec.learning_rate],
    ['max_completion_length', spec.max_completion_length],
    ['temperature', spec.temperature],
  ];
  return chips.filter(([, v]) => v !== undefined && v !== null && v !== '');
}

/** The strip of latest numbers under the header. */
export function renderStats(el, run, series) {
  if (!el) return;
  const first = (name) => {
    const column = series.column(name);
    return column ? column.find((v) => v != null) : null;
  };
  const reward = series.latest('reward');
  const start = first('reward');
  const shares = outcomeShares(series);
  const noSignal = shares ? shares.no_signal[shares.no_signal.length - 1] : null;
  const stats = [
    ['Step', `${series.last}`, `of ${run.total_steps}`],
    [
      'Reward',
      num(reward),
      reward != null && start != null
        ? `${signed(reward - start)} since step ${series.first}`
        : 'mean over completions',
    ],
    ['KL', num(series.latest('kl')), series.has('beta') ? `β ${num(series.latest('beta'))}` : 'to the reference'],
    ['No-signal groups', pct(noSignal, 0), 'all fail or all pass'],
    [
      'Completion length',
      num(series.latest('completions/mean_length')),
      `truncated ${pct(series.latest('completions/clipped_ratio'), 0)}`,
    ],
    [
      'Step time',
      duration(series.latest('time/step')),
      series.has('tokens_per_second') ? `${num(series.latest('tokens_per_second'))} tok/s` : '',
    ],
  ];
  fill(
    el,
    stats.map(([label, value, sub]) =>
      h(
        'div',
        { class: 'stat' },
        h('div', { class: 'stat-label' }, label),
        h('div', { class: 'stat-value' }, value),
        h('div', { class: 'stat-sub' }, sub),
      ),
    ),
  );
}

export function renderBanner(el, run) {
  if (run.error) {
    // redrawn on every status read: a traceback the reader folded stays folded
    const isCauseOpen = el.querySelector('details.cause')?.open ?? true;
    fill(
      el,
      h(
        'div',
        { class: 'banner banner-error', role: 'alert' },
        h(
          'div',
          { class: 'banner-body' },
          h('b', null, run.status === 'failed' ? 'The run failed' : 'Error'),
          h('pre', { class: 'banner-error-text' }, run.error),
          run.cause ? causeView(run.cause, isCauseOpen) : null,
        ),
      ),
    );
  } else if (run.status === 'queued') {
    fill(
      el,
      h(
        'div',
        { class: 'banner banner-info' },
        'Queued: waiting for a worker to pick the run up. Curves appear with the first step.',
      ),
    );
  } else {
    fill(el);
  }
}

/**
 * A failure's cause: the exception it started from and the last frames of its traceback,
 * innermost last (the user's reward function, say), as GET /api/runs/{id} gives them.
 * @param {import('./openapi').FailureCause} cause
 * @param {boolean} isOpen
 */
function causeView(cause, isOpen) {
  const shown = cause.frames.length;
  const frames = cause.omitted_frames
    ? `last ${shown} of ${shown + cause.omitted_frames} frames`
    : `${shown} frame${shown === 1 ? '' : 's'}`;
  return h(
    'details',
    { class: 'cause', open: isOpen },
    h(
      'summary',
      null,
      h('code', { class: 'cause-exception' }, cause.message ? `${cause.type}: ${cause.message}` : cause.type),
      h('span', { class: 'cause-count' }, ` · traceback, ${frames}`),
    ),
    h(
      'ol',
      { class: 'cause-frames' },
      cause.frames.map((frame) =>
        h(
          'li',
          { class: 'cause-frame' },
          h('code', { class: 'cause-where' }, `${frame.file}:${frame.line}`),
          ' in ',
          h('code', { class: 'cause-function' }, frame.function),
          frame.code ? h('pre', { class: 'cause-code' }, frame.code) : null,
        ),
      ),
    ),
  );
}
