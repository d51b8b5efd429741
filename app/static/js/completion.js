// One completion of a group: its reward (total and per function), the advantage GRPO gave
// it as a signed bar, and its text with each token shaded by its KL to the reference.

import { h } from './dom.js';
import { num, signed } from './format.js';
import { trajectoryTurns } from './turns.js';

/** A KL scale for a group: the 95th percentile of its token KLs, so one outlier does not wash out the rest. */
export function klScale(completions) {
  const all = completions
    .flatMap((c) => c.token_kls || [])
    .filter((v) => v > 0)
    .sort((a, b) => a - b);
  if (!all.length) return 0;
  return all[Math.min(all.length - 1, Math.floor(all.length * 0.95))];
}

/**
 * `bare` rows carry only reward and advantage (groups whose texts were not kept); `step`,
 * given for runs whose samples may be stale (async_generation), shows each completion's
 * policy version and its lag.
 */
export function completionRow(c, rank, { maxAdvantage, klMax = 0, functions = [], bare = false, step = null }) {
  return h(
    'article',
    { class: 'completion', dataset: { rank, reward: c.reward, advantage: c.advantage } },
    h('div', { class: 'completion-rank' }, `#${rank}`),
    h(
      'div',
      null,
      h('div', { class: 'completion-reward', title: 'total reward (weighted sum)' }, num(c.reward)),
      h('div', { class: 'faint', style: { fontSize: '11px' } }, 'reward'),
    ),
    h(
      'div',
      null,
      advantageBar(c.advantage, maxAdvantage),
      bare
        ? null
        : h(
            'div',
            { class: 'completion-fns' },
            functions.map((fn) => fnChip(fn, c.rewards?.[fn])),
          ),
      bare
        ? null
        : h(
            'div',
            { class: 'completion-meta' },
            h('span', null, `${c.num_tokens} tokens`),
            c.is_truncated
              ? h('span', { class: 'flag-truncated', title: 'hit max_completion_length' }, 'truncated')
              : null,
            finishChip(c),
            versionChip(c, step),
            h('span', { title: 'sequence mean of the per-token k3 KL' }, `KL ${num(c.kl)}`),
          ),
      // what a reward function noted, e.g. the sandbox limit a program hit
      bare || !c.note ? null : h('div', { class: 'completion-note faint', title: 'reward note' }, c.note),
      bare ? null : extrasTable(c.extras),
    ),
    bare
      ? h('div', { class: 'faint' }, 'text not kept')
      : c.trajectory
        ? h('div', null, trajectoryTurns(c.trajectory), textWithKl(c, klMax))
        : textWithKl(c, klMax),
  );
}

/** Columns reward functions logged for this completion (TRL's log_extra), one chip each. */
function extrasTable(extras) {
  const entries = Object.entries(extras || {});
  if (!entries.length) return null;
  return h(
    'div',
    { class: 'completion-extras', title: 'columns logged by reward functions (log_extra)' },
    entries.map(([column, value]) =>
      h('span', { class: 'extra', dataset: { column } }, h('span', { class: 'faint' }, `${column} `), String(value)),
    ),
  );
}

/** The policy version that sampled it and how many versions behind the step's it was (step s trains at s − 1). */
function versionChip(c, step) {
  if (step == null || c.policy_version == null) return null;
  const lag = step - 1 - c.policy_version;
  const title = `sampled by policy version ${c.policy_version} (the weights after ${c.policy_version} updates); step ${step} trains at ${step - 1}`;
  return h('span', { class: 'policy-version', title }, `v${c.policy_version} · lag ${lag}`);
}

/** What ended the completion: which end-of-sequence token (a model may have several) or stop string. */
function finishChip(c) {
  if (c.finish_reason === 'eos')
    return h('span', { class: 'finish', title: `ended by end-of-sequence id ${c.stop_token_id}` }, `eos ${c.stop}`);
  if (c.finish_reason === 'stop')
    return h('span', { class: 'finish', title: 'ended by a stop string' }, `stop ${c.stop}`);
  return null;
}

export function advantageBar(advantage, maxAdvantage) {
  const share = maxAdvantage > 0 ? Math.min(1, Math.abs(advantage) / maxAdvantage) : 0;
  const bar = h('div', { class: 'adv-bar', style: { width: `${share * 100}%` } });
  return h(
    'div',
    { class: 'adv-wrap', title: `advantage ${advantage}` },
    h(
      'div',
      { class: 'adv' },
      h('div', { class: 'adv-neg' }, advantage < 0 ? bar : null),
      h('div', { class: 'adv-pos' }, advantage > 0 ? bar : null),
    ),
    h(
      'div',
      { class: 'adv-label' },
      h('span', null, 'advantage'),
      h('b', { class: advantage < 0 ? 'error-text' : '' }, signed(advantage)),
    ),
  );
}

function fnChip(name, value) {
  const cls = value == null ? '' : value > 0 ? ' is-hit' : value < 0 ? ' is-neg' : '';
  // null: the function does not apply to this completion and adds nothing to its total
  const title = value == null ? `${name} does not apply to this completion` : `${name} reward (unweighted)`;
  return h('span', { class: `fn${cls}`, title }, `${name} ${value == null ? '–' : num(value, 2)}`);
}

/**
 * The text with each token shaded by its KL: the API's `tokens` (each token's piece of text,
 * exact for any tokenizer) when present; else characters when they line up with the tokens
 * (a character tokenizer); else the text with a KL strip under it.
 */
function textWithKl(c, klMax) {
  const kls = c.token_kls;
  const empty = c.text.length ? null : h('span', { class: 'faint' }, '(empty completion)');
  if (!kls?.length || !klMax) return h('pre', { class: 'completion-text' }, empty || c.text);
  const [source, pieces] = tokenPieces(c);
  if (pieces) {
    return h(
      'pre',
      { class: 'completion-text', dataset: { tokens: source } },
      pieces.map((piece, i) => tokenSpan(piece, kls[i], klMax, c.model_mask?.[i] === 0, c.sampler_logps?.[i])),
      empty,
    );
  }
  return h(
    'div',
    null,
    h('pre', { class: 'completion-text' }, empty || c.text),
    h(
      'div',
      { class: 'kl-strip', title: 'per-token KL, in order' },
      kls.map((v) => h('span', { title: `KL ${num(v)}`, style: { background: klColor(v, klMax) } })),
    ),
  );
}

/** [source, pieces]: the API's tokens, else characters if they line up, else [null, null]. */
function tokenPieces(c) {
  if (c.tokens && c.tokens.length === c.token_kls.length) return ['api', c.tokens];
  const chars = [...c.text];
  // a character tokenizer gives one token per character (plus an end token the text omits)
  if (chars.length === c.token_kls.length) return ['chars', chars];
  if (chars.length === c.token_kls.length - 1) return ['chars', [...chars, '']];
  return [null, null];
}

// a token that adds no text (an end token, part of a split character) still shows its KL;
// a tool-result token (masked out of the loss) is shaded as such instead; the sampler's
// log-prob of the token joins its title where the engine reported one
function tokenSpan(piece, kl, klMax, isMasked = false, samplerLogp = null) {
  if (isMasked) return h('span', { class: 'tok tok-masked', title: 'tool result: masked out of the loss' }, piece);
  const sampled = samplerLogp == null ? '' : ` · sampler log-prob ${num(samplerLogp)}`;
  const title = (piece ? `KL ${num(kl)}` : `KL ${num(kl)} · token with no text of its own`) + sampled;
  return h('span', { class: piece ? 'tok' : 'tok tok-empty', title, style: { background: klColor(kl, klMax) } }, piece);
}

export function klColor(value, max) {
  const t = Math.max(0, Math.min(1, value / max));
  if (t < 0.02) return 'transparent';
  return t < 0.5 ? `rgba(247, 144, 9, ${(0.7 * t).toFixed(3)})` : `rgba(240, 68, 56, ${(0.2 + 0.55 * t).toFixed(3)})`;
}
