// Small DOM helpers of the phone app's page, and question text as DOM under SPEC §13.2
// (via render.js): nothing from a question is ever parsed as HTML.

import { displaySegments } from './render.js';

export const $ = (id) => document.getElementById(id);

// Builds an element; strings among the children become text nodes.
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'text') e.textContent = v;
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(c);
  return e;
}

/** Question text as DOM: plain text, code points shown by name, marked mixed-script words. */
export function shown(text) {
  const f = document.createDocumentFragment();
  for (const s of displaySegments(text || '')) {
    if (s.kind === 'escaped') {
      f.append(el('span', { class: 'cp', title: `${s.code_point}: an invisible or control character, shown by its code`, text: s.text }));
    } else if (s.kind === 'mixed_script_word') {
      f.append(el('mark', { class: 'mixed', title: `This word mixes scripts: ${s.scripts.join(', ')}`, text: s.text }));
    } else {
      f.append(s.text);
    }
  }
  return f;
}

/** A one-line summary of question text, for notices (escaped too). */
export function short(text, n) {
  const one = displaySegments(String(text || '').replace(/\s+/g, ' ').trim()).map((s) => s.text).join('');
  return one.length > n ? one.slice(0, n - 1) + '…' : one;
}
