// Cancel, resume, clone and delete: the buttons a run offers in its current status.

import { cancelRun, cloneRun, deleteRun, resumeRun } from './api.js';
import { h, seg } from './dom.js';
import { errorText, toast } from './shell.js';
import { withToken } from './token.js';

const ACTIONS = [
  { name: 'cancel', label: 'Cancel', when: ['queued', 'running'], call: cancelRun, done: 'Run cancelled' },
  {
    name: 'resume',
    label: 'Resume',
    when: ['failed', 'cancelled'],
    call: resumeRun,
    /** @param {import('./openapi').ResumedRun} resumed */
    done: (resumed) =>
      resumed.resumes_from_step
        ? `Run queued: resumes from step ${resumed.resumes_from_step} (its last checkpoint)`
        : 'Run queued: restarts from step 0, no checkpoint was saved',
  },
  { name: 'clone', label: 'Clone', when: null, call: cloneRun, done: 'Cloned' },
  { name: 'edit', label: 'Edit as new', when: null, call: null },
  { name: 'delete', label: 'Delete', when: ['succeeded', 'failed', 'cancelled'], call: deleteRun, done: 'Run deleted' },
];

/**
 * Buttons for `run`; `onDone(name, result)` is told after each action succeeds.
 * @param {import('./api.js').RunOut} run
 * @param {{ onDone?: (name: string, result: any) => void, small?: boolean, skip?: string[] }} [options]
 */
export function runActions(run, { onDone = () => {}, small = false, skip = [] } = {}) {
  const available = ACTIONS.filter(
    (a) =>
      !skip.includes(a.name) &&
      (!a.when || a.when.includes(run.status)) &&
      !(a.name === 'cancel' && run.is_cancel_requested),
  );
  return h(
    'div',
    { class: `actions${small ? ' actions-small' : ''}` },
    available.map((action) =>
      action.name === 'edit'
        ? h(
            'a',
            { class: 'btn btn-ghost', href: `/runs/new?from=${seg(run.id)}`, dataset: { action: 'edit' } },
            action.label,
          )
        : h(
            'button',
            {
              type: 'button',
              class: `btn ${action.name === 'delete' ? 'btn-danger-ghost' : 'btn-ghost'}`,
              dataset: { action: action.name },
              onclick: (event) => perform(action, run, event.currentTarget, onDone),
            },
            action.label,
          ),
    ),
  );
}

async function perform(action, run, button, onDone) {
  if (action.name === 'delete' && !window.confirm(`Delete run “${run.name}” and all its metrics?`)) return;
  if (action.name === 'cancel' && !window.confirm(`Cancel run “${run.name}”? It can be resumed later.`)) return;
  button.disabled = true;
  try {
    const result = await withToken(() => action.call(run.id));
    toast(typeof action.done === 'function' ? action.done(result) : action.done, 'ok');
    if (action.name === 'clone' && result) window.location.assign(`/runs/${seg(result.id)}`);
    else onDone(action.name, result);
  } catch (error) {
    toast(`${action.label} failed: ${errorText(error)}`, 'error', 6000);
  } finally {
    button.disabled = false;
  }
}
