// A tool trajectory as its turns: what the model wrote (trained on), the calls it made with
// their arguments, and each tool's result as it entered the model's context (shaded: those
// tokens are masked out of the loss, the KL and the entropy), with per-turn token counts.

import { h } from './dom.js';

/**
 * @typedef {{ name: string, arguments: { [key: string]: unknown }, error: string | null }} Call
 * @typedef {{ name: string, content: string, is_error: boolean }} Result
 * @typedef {{ text: string, num_model_tokens: number, num_context_tokens: number, calls: Call[], results: Result[] }} Turn
 * @typedef {{ reset?: string, num_reset_tokens?: number, is_at_iteration_limit?: boolean, turns?: Turn[] }} Trajectory
 */

/** @param {Trajectory} trajectory */
export function trajectoryTurns(trajectory) {
  const turns = trajectory.turns || [];
  const model = turns.reduce((n, t) => n + t.num_model_tokens, 0);
  const context = turns.reduce((n, t) => n + t.num_context_tokens, trajectory.num_reset_tokens || 0);
  return h(
    'div',
    { class: 'turns' },
    h(
      'div',
      { class: 'turns-summary faint' },
      `${turns.length} turns · ${model} model tokens · ${context} tool tokens masked`,
      trajectory.is_at_iteration_limit ? h('span', { class: 'flag-truncated' }, 'iteration limit') : null,
    ),
    trajectory.reset
      ? h('pre', { class: 'tool-result', title: 'environment reset: context, never trained on' }, trajectory.reset)
      : null,
    turns.map((turn, i) => turnBlock(turn, i)),
  );
}

/** @param {Turn} turn @param {number} i */
function turnBlock(turn, i) {
  return h(
    'section',
    { class: 'turn', dataset: { turn: i } },
    h(
      'div',
      { class: 'turn-head' },
      h('b', null, `assistant · turn ${i + 1}`),
      h('span', { class: 'faint', title: 'tokens the model sampled in this turn' }, `${turn.num_model_tokens} tokens`),
      turn.num_context_tokens
        ? h(
            'span',
            { class: 'faint', title: 'tool tokens put in the context: masked out of the loss' },
            `+ ${turn.num_context_tokens} masked`,
          )
        : null,
    ),
    h('pre', { class: 'completion-text turn-text' }, turn.text || '(empty turn)'),
    turn.calls.map((call, j) => callBlock(call, turn.results[j])),
  );
}

/** @param {Call} call @param {Result | undefined} result */
function callBlock(call, result) {
  const isError = Boolean(call.error || result?.is_error);
  return h(
    'div',
    { class: `tool-call${isError ? ' is-error' : ''}` },
    h(
      'code',
      { class: 'tool-call-head' },
      `${call.name || '(malformed call)'} ${JSON.stringify(call.arguments || {})}`,
    ),
    result
      ? h('pre', { class: 'tool-result', title: 'tool result: context, never trained on' }, result.content)
      : h('div', { class: 'faint' }, 'not run: max_tool_calling_iterations reached'),
  );
}
