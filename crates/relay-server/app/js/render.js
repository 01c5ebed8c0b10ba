// Nothing invisible, nothing reordered (SPEC §13.2): the phone's copy of the model's one
// rendering of question text. The desktop page gets its segments from the broker; the phone
// opens sealed questions itself, so it cuts them here, by the same rules, into the same
// segment shapes: plain text, code points shown by name (`⟨U+202E⟩`) and words that mix
// scripts (UTS #39). The Unicode tables are the browser's own (regex property escapes).

// C0 and C1 controls and DEL (General_Category Cc), Bidi_Control, Default_Ignorable_Code_Point.
const ESCAPED = /[\p{Cc}\p{Bidi_Control}\p{Default_Ignorable_Code_Point}]/u;
const WORD_BREAK = /[\p{White_Space}!-/:-@[-`{-~]/u;
const NON_ASCII = /[^\0-\x7f]/;

// Every script but Common and Inherited (long names, as Script_Extensions values).
const SCRIPTS = [
  'Adlam', 'Ahom', 'Anatolian_Hieroglyphs', 'Arabic', 'Armenian', 'Avestan', 'Balinese', 'Bamum',
  'Bassa_Vah', 'Batak', 'Bengali', 'Bhaiksuki', 'Bopomofo', 'Brahmi', 'Braille', 'Buginese',
  'Buhid', 'Canadian_Aboriginal', 'Carian', 'Caucasian_Albanian', 'Chakma', 'Cham', 'Cherokee',
  'Chorasmian', 'Coptic', 'Cuneiform', 'Cypriot', 'Cypro_Minoan', 'Cyrillic', 'Deseret',
  'Devanagari', 'Dives_Akuru', 'Dogra', 'Duployan', 'Egyptian_Hieroglyphs', 'Elbasan', 'Elymaic',
  'Ethiopic', 'Garay', 'Georgian', 'Glagolitic', 'Gothic', 'Grantha', 'Greek', 'Gujarati',
  'Gunjala_Gondi', 'Gurmukhi', 'Gurung_Khema', 'Han', 'Hangul', 'Hanifi_Rohingya', 'Hanunoo',
  'Hatran', 'Hebrew', 'Hiragana', 'Imperial_Aramaic', 'Inscriptional_Pahlavi',
  'Inscriptional_Parthian', 'Javanese', 'Kaithi', 'Kannada', 'Katakana', 'Kawi', 'Kayah_Li',
  'Kharoshthi', 'Khitan_Small_Script', 'Khmer', 'Khojki', 'Khudawadi', 'Kirat_Rai', 'Lao',
  'Latin', 'Lepcha', 'Limbu', 'Linear_A', 'Linear_B', 'Lisu', 'Lycian', 'Lydian', 'Mahajani',
  'Makasar', 'Malayalam', 'Mandaic', 'Manichaean', 'Marchen', 'Masaram_Gondi', 'Medefaidrin',
  'Meetei_Mayek', 'Mende_Kikakui', 'Meroitic_Cursive', 'Meroitic_Hieroglyphs', 'Miao', 'Modi',
  'Mongolian', 'Mro', 'Multani', 'Myanmar', 'Nabataean', 'Nag_Mundari', 'Nandinagari',
  'New_Tai_Lue', 'Newa', 'Nko', 'Nushu', 'Nyiakeng_Puachue_Hmong', 'Ogham', 'Ol_Chiki', 'Ol_Onal',
  'Old_Hungarian', 'Old_Italic', 'Old_North_Arabian', 'Old_Permic', 'Old_Persian', 'Old_Sogdian',
  'Old_South_Arabian', 'Old_Turkic', 'Old_Uyghur', 'Oriya', 'Osage', 'Osmanya', 'Pahawh_Hmong',
  'Palmyrene', 'Pau_Cin_Hau', 'Phags_Pa', 'Phoenician', 'Psalter_Pahlavi', 'Rejang', 'Runic',
  'Samaritan', 'Saurashtra', 'Sharada', 'Shavian', 'Siddham', 'SignWriting', 'Sinhala', 'Sogdian',
  'Sora_Sompeng', 'Soyombo', 'Sundanese', 'Sunuwar', 'Syloti_Nagri', 'Syriac', 'Tagalog',
  'Tagbanwa', 'Tai_Le', 'Tai_Tham', 'Tai_Viet', 'Takri', 'Tamil', 'Tangsa', 'Tangut', 'Telugu',
  'Thaana', 'Thai', 'Tibetan', 'Tifinagh', 'Tirhuta', 'Todhri', 'Toto', 'Tulu_Tigalari',
  'Ugaritic', 'Vai', 'Vithkuqi', 'Wancho', 'Warang_Citi', 'Yezidi', 'Yi', 'Zanabazar_Square',
];

// A browser with older Unicode tables lacks the newest names; those are left out.
function compile(prop) {
  const out = [];
  for (const name of SCRIPTS) {
    try {
      out.push([name, new RegExp(`^\\p{${prop}=${name}}$`, 'u')]);
    } catch (_) {
      /* unknown to this browser */
    }
  }
  return out;
}
let tables = null;
const table = () =>
  (tables ||= {
    scx: compile('Script_Extensions'),
    sc: compile('Script'),
    any: /^[\p{scx=Common}\p{scx=Inherited}]$/u,
  });

// UTS #39 §5.1 augmented script sets: Han, kana and Hangul also count as the writing
// systems that combine them, so 日本語のテキスト is one script (Japanese).
const AUGMENT = {
  Han: ['Han_with_Bopomofo', 'Japanese', 'Korean'],
  Hiragana: ['Japanese'],
  Katakana: ['Japanese'],
  Hangul: ['Korean'],
  Bopomofo: ['Han_with_Bopomofo'],
};

const setCache = new Map();
/** The augmented Script_Extensions of one character; `null` means every script. */
function scriptSet(ch) {
  if (setCache.has(ch)) return setCache.get(ch);
  const t = table();
  let set = null;
  if (!t.any.test(ch)) {
    set = new Set();
    for (const [name, re] of t.scx) {
      if (!re.test(ch)) continue;
      set.add(name);
      for (const extra of AUGMENT[name] || []) set.add(extra);
    }
  }
  setCache.set(ch, set);
  return set;
}

/** Whether every character of `word` can be written in one (augmented) script. */
export function isSingleScript(word) {
  let common = null;
  for (const ch of word) {
    const s = scriptSet(ch);
    if (s === null) continue;
    common = common === null ? new Set(s) : new Set([...common].filter((x) => s.has(x)));
    if (common.size === 0) return false;
  }
  return true;
}

/** The scripts a word's letters belong to (not Common or Inherited), sorted by name. */
export function scriptsOf(word) {
  const names = new Set();
  for (const ch of word) {
    const hit = table().sc.find(([, re]) => re.test(ch));
    if (hit) names.add(hit[0].replace(/_/g, ' '));
  }
  return [...names].sort();
}

/** `⟨U+XXXX⟩`: uppercase hex, at least four digits. */
export function escapeCodePoint(ch) {
  return `⟨U+${codePoint(ch)}⟩`;
}
const codePoint = (ch) => ch.codePointAt(0).toString(16).toUpperCase().padStart(4, '0');

export const isEscaped = (ch) => ch !== '\t' && ch !== '\n' && ESCAPED.test(ch);

/** `s` with every escaped code point written as `⟨U+XXXX⟩`. */
export function renderVisible(s) {
  let out = '';
  for (const ch of String(s)) out += isEscaped(ch) ? escapeCodePoint(ch) : ch;
  return out;
}

/**
 * `s` cut into `{kind:'text', text}`, `{kind:'escaped', code_point, text}` and
 * `{kind:'mixed_script_word', text, scripts}`, in order; the texts concatenate to
 * `renderVisible(s)`. The same shapes as the model's `display_segments`.
 */
export function displaySegments(s) {
  const out = [];
  let run = '';
  for (const ch of String(s)) {
    if (isEscaped(ch)) {
      pushRun(out, run);
      run = '';
      out.push({ kind: 'escaped', code_point: `U+${codePoint(ch)}`, text: escapeCodePoint(ch) });
    } else {
      run += ch;
    }
  }
  pushRun(out, run);
  return out;
}

function plain(out, text) {
  if (!text) return;
  const last = out[out.length - 1];
  if (last && last.kind === 'text') last.text += text;
  else out.push({ kind: 'text', text });
}

// Words are runs of characters that are neither white space nor ASCII punctuation, so
// `https://pаypal.com` yields `https`, `pаypal`, `com`.
function pushRun(out, run) {
  if (!run) return;
  if (!NON_ASCII.test(run)) return plain(out, run);
  let word = '';
  let pending = '';
  const flush = () => {
    if (!word) return;
    if (isSingleScript(word)) {
      pending += word;
    } else {
      plain(out, pending);
      pending = '';
      out.push({ kind: 'mixed_script_word', text: word, scripts: scriptsOf(word) });
    }
    word = '';
  };
  for (const ch of run) {
    if (WORD_BREAK.test(ch)) {
      flush();
      pending += ch;
    } else {
      word += ch;
    }
  }
  flush();
  plain(out, pending);
}
