// A question as a card: who asks, the question and what runs (shown under SPEC §13.2), the
// answer controls for its kind, and the click guard. What a tap sends is the caller's
// `send(rec, answer, what)`.

import { el, shown, short } from './dom.js';
import { newResponseId } from './phone.js';

const KIND_LABEL = {
  permission: 'Permission',
  single_choice: 'Choice',
  multi_choice: 'Choose several',
  text: 'Question',
};
const ALLOW_IDS = new Set(['allow', 'allow-once', 'yes', 'approve']);
const DENY_IDS = new Set(['deny', 'no', 'reject']);
const GUARD_MS = 1000;

// ---- click guard ------------------------------------------------------------------------------
// A tap must land on a question the person read. Like a browser's permission prompt, a card
// ignores taps for GUARD_MS after it appears or moves (a card above it came or went, a
// banner opened, a confirm step opened inside it).

const tops = new WeakMap();
const guards = new WeakMap();

function docTop(e) {
  let top = 0;
  for (let n = e; n; n = n.offsetParent) top += n.offsetTop;
  return top;
}

export function arm(li) {
  const old = guards.get(li);
  if (old) clearTimeout(old.timer);
  li.setAttribute('data-guard', '');
  const timer = setTimeout(() => li.removeAttribute('data-guard'), GUARD_MS);
  guards.set(li, { until: performance.now() + GUARD_MS, timer });
}

/** Arms the guard of every card in `recs` that is new or whose place on the page changed. */
export function guardMoved(recs) {
  for (const rec of recs) {
    if (!rec.li.isConnected) continue;
    const top = docTop(rec.li);
    if (tops.get(rec.li) !== top) {
      tops.set(rec.li, top);
      arm(rec.li);
    }
  }
}

const guarded = (li, e) => {
  const g = guards.get(li);
  return e.detail > 0 && g !== undefined && performance.now() < g.until;
};

function choiceClass(c, q) {
  if (q.kind === 'permission' && ALLOW_IDS.has(c.id)) return 'btn choice allow';
  if (q.kind === 'permission' && DENY_IDS.has(c.id)) return 'btn choice deny';
  return 'btn choice';
}

const isAlways = (c) => c.id === 'allow-always' || /\balways\b/i.test(c.label || '');

export function setBusy(rec, busy) {
  rec.li.setAttribute('aria-busy', busy ? 'true' : 'false');
  for (const b of rec.li.querySelectorAll('.answer button, .answer textarea, .answer input')) b.disabled = busy;
}

/** A card record `{q, li, msg, left, responseId, …}` for question `q`. */
export function buildCard(q, send) {
  const li = el('li', { class: 'card fresh', 'data-event': q.event_id, 'data-id': q.id, 'data-kind': q.kind, 'data-state': 'open' });
  const rec = { q, li, responseId: newResponseId(), sent: null, verdict: null, done: false };
  rec.send = (answer, what) => send(rec, answer, what);
  rec.left = el('span', { class: 'left' });
  li.append(
    el(
      'div',
      { class: 'meta' },
      el('span', { class: 'kind', text: KIND_LABEL[q.kind] || q.kind }),
      el('span', { class: 'agent', text: short(q.agent, 40) }),
      q.project ? el('span', { class: 'project', text: short(q.project, 60) }) : null,
      rec.left,
    ),
  );
  li.append(el(q.kind === 'permission' && !q.body ? 'pre' : 'p', { class: 'prompt', id: `p-${q.id}` }, shown(q.prompt)));
  if (q.body) li.append(el('pre', { class: 'body', tabindex: '0', 'aria-label': 'What runs' }, shown(q.body)));
  rec.msg = el('p', { class: 'card-msg', role: 'status' });
  const answer = el('div', { class: 'answer' });
  if (q.kind === 'text') answer.append(textForm(rec, q.text_max_length || 500, 'Your answer'));
  else if (q.kind === 'multi_choice') answer.append(multiForm(rec));
  else answer.append(choiceButtons(rec));
  li.append(answer, rec.msg);
  li.addEventListener(
    'click',
    (e) => {
      if (!e.target.closest('button, input, textarea, label') || !guarded(li, e)) return;
      e.preventDefault();
      e.stopPropagation();
      rec.msg.textContent = 'This question just appeared or moved. Read it, then tap again.';
    },
    true,
  );
  return rec;
}

function choiceButtons(rec) {
  const { q } = rec;
  const box = el('div', { class: 'choices', role: 'group', 'aria-label': 'Answers' });
  for (const c of q.choices || []) {
    const b = el(
      'button',
      { type: 'button', class: choiceClass(c, q), 'data-choice': c.id },
      el('span', { class: 'label' }, shown(c.label)),
      c.detail ? el('span', { class: 'detail' }, shown(c.detail)) : null,
    );
    b.addEventListener('click', () => (isAlways(c) ? confirmAlways(rec, c, box, b) : choose(rec, b, { choice_id: c.id }, c.label)));
    box.append(b);
  }
  const wrap = el('div', {}, box);
  if (q.allow_other) wrap.append(textForm(rec, q.other_max_length || 500, 'Or answer in your own words'));
  return wrap;
}

// The tapped button stays marked on the card, so its outcome reads "this is what you chose".
function choose(rec, button, answer, what) {
  if (rec.mine) return;
  button.setAttribute('data-chosen', '');
  rec.send(answer, what).then(() => {
    if (!rec.mine) button.removeAttribute('data-chosen');
  });
}

// "Always allow" changes what the agent may do from now on: it takes a second, deliberate tap.
function confirmAlways(rec, c, box, button) {
  box.hidden = true;
  const yes = el('button', { type: 'button', class: 'btn allow', 'data-action': 'confirm-always' }, 'Yes, ', shown(c.label));
  const no = el('button', { type: 'button', class: 'btn', 'data-action': 'cancel-always', text: 'Cancel' });
  const panel = el(
    'div',
    { class: 'confirm', role: 'group', 'aria-label': 'Confirm' },
    el('p', { text: `“${short(c.label, 60)}” lets your agent do this again without asking you. Are you sure?` }),
    el('div', { class: 'row' }, no, yes),
  );
  const close = () => {
    panel.remove();
    box.hidden = false;
    arm(rec.li);
  };
  no.addEventListener('click', close);
  yes.addEventListener('click', () => {
    panel.remove();
    box.hidden = false;
    choose(rec, button, { choice_id: c.id }, c.label);
  });
  box.after(panel);
  arm(rec.li);
}

function textForm(rec, max, label) {
  const id = `t-${rec.q.id}`;
  const ta = el('textarea', { id, name: 'text', rows: 3, 'aria-describedby': `${id}-c` });
  const counter = el('span', { class: 'counter', id: `${id}-c` });
  const count = () => {
    const n = Array.from(ta.value).length;
    counter.textContent = `${n} / ${max}`;
    counter.toggleAttribute('data-over', n > max);
  };
  count();
  ta.addEventListener('input', count);
  const form = el(
    'form',
    { class: 'text-answer', novalidate: true },
    el('label', { for: id, text: `${label} (up to ${max} characters)` }),
    ta,
    el('div', { class: 'row' }, counter, el('button', { type: 'submit', class: 'btn primary', 'data-action': 'send', text: 'Send' })),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const text = ta.value;
    const n = Array.from(text).length;
    if (!text.trim()) {
      rec.msg.textContent = 'Type an answer first.';
      return;
    }
    if (n > max) {
      rec.msg.textContent = `The answer is ${n} characters; the limit is ${max}.`;
      return;
    }
    rec.send({ text }, `“${short(text, 40)}”`);
  });
  return form;
}

function multiForm(rec) {
  const { q } = rec;
  const min = q.min_selections || 1;
  const max = q.max_selections || (q.choices || []).length;
  const form = el('form', { class: 'multi', novalidate: true });
  const boxes = [];
  for (const c of q.choices || []) {
    const id = `m-${q.id}-${boxes.length}`;
    const cb = el('input', { type: 'checkbox', id, value: c.id, 'data-choice': c.id });
    boxes.push(cb);
    form.append(
      el('label', { class: 'check', for: id }, cb, el('span', { class: 'label' }, shown(c.label)), c.detail ? el('span', { class: 'detail' }, shown(c.detail)) : null),
    );
  }
  const other = q.allow_other ? el('textarea', { name: 'other', rows: 2, 'aria-label': 'Other (your own words)', placeholder: 'Other (your own words)' }) : null;
  if (other) form.append(other);
  const hint = el('span', { class: 'counter', text: min === max ? `Choose ${min}` : `Choose ${min}–${max}` });
  const go = el('button', { type: 'submit', class: 'btn primary', 'data-action': 'send', text: 'Send' });
  form.append(el('div', { class: 'row' }, hint, go));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const ids = boxes.filter((b) => b.checked).map((b) => b.value);
    const text = other && other.value.trim() ? other.value : null;
    const n = ids.length + (text ? 1 : 0);
    if (n < min || n > max) {
      rec.msg.textContent = `Choose ${min === max ? min : `${min} to ${max}`}; you chose ${n}.`;
      return;
    }
    const labels = (q.choices || []).filter((c) => ids.includes(c.id)).map((c) => short(c.label, 20));
    if (text) labels.push(`“${short(text, 20)}”`);
    rec.send(text ? { choice_ids: ids, text } : { choice_ids: ids }, labels.join(', '));
  });
  return form;
}
