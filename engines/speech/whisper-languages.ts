/**
 * The languages whisper.cpp knows, by the code it takes as a hint (ISO-639-1, plus `haw` and `yue`
 * where ISO-639-1 has none) and the lower-case name it reports, in whisper.cpp's own order
 * (`g_lang` in whisper.cpp; the order is the token order, so it must not change).
 */
export const WHISPER_LANGUAGES: Readonly<Record<string, string>> = {
  en: 'english',
  zh: 'chinese',
  de: 'german',
  es: 'spanish',
  ru: 'russian',
  ko: 'korean',
  fr: 'french',
  ja: 'japanese',
  pt: 'portuguese',
  tr: 'turkish',
  pl: 'polish',
  ca: 'catalan',
  nl: 'dutch',
  ar: 'arabic',
  sv: 'swedish',
  it: 'italian',
  id: 'indonesian',
  hi: 'hindi',
  fi: 'finnish',
  vi: 'vietnamese',
  he: 'hebrew',
  uk: 'ukrainian',
  el: 'greek',
  ms: 'malay',
  cs: 'czech',
  ro: 'romanian',
  da: 'danish',
  hu: 'hungarian',
  ta: 'tamil',
  no: 'norwegian',
  th: 'thai',
  ur: 'urdu',
  hr: 'croatian',
  bg: 'bulgarian',
  lt: 'lithuanian',
  la: 'latin',
  mi: 'maori',
  ml: 'malayalam',
  cy: 'welsh',
  sk: 'slovak',
  te: 'telugu',
  fa: 'persian',
  lv: 'latvian',
  bn: 'bengali',
  sr: 'serbian',
  az: 'azerbaijani',
  sl: 'slovenian',
  kn: 'kannada',
  et: 'estonian',
  mk: 'macedonian',
  br: 'breton',
  eu: 'basque',
  is: 'icelandic',
  hy: 'armenian',
  ne: 'nepali',
  mn: 'mongolian',
  bs: 'bosnian',
  kk: 'kazakh',
  sq: 'albanian',
  sw: 'swahili',
  gl: 'galician',
  mr: 'marathi',
  pa: 'punjabi',
  si: 'sinhala',
  km: 'khmer',
  sn: 'shona',
  yo: 'yoruba',
  so: 'somali',
  af: 'afrikaans',
  oc: 'occitan',
  ka: 'georgian',
  be: 'belarusian',
  tg: 'tajik',
  sd: 'sindhi',
  gu: 'gujarati',
  am: 'amharic',
  yi: 'yiddish',
  lo: 'lao',
  uz: 'uzbek',
  fo: 'faroese',
  ht: 'haitian creole',
  ps: 'pashto',
  tk: 'turkmen',
  nn: 'nynorsk',
  mt: 'maltese',
  sa: 'sanskrit',
  lb: 'luxembourgish',
  my: 'myanmar',
  bo: 'tibetan',
  tl: 'tagalog',
  mg: 'malagasy',
  as: 'assamese',
  tt: 'tatar',
  haw: 'hawaiian',
  ln: 'lingala',
  ha: 'hausa',
  ba: 'bashkir',
  jw: 'javanese',
  su: 'sundanese',
  yue: 'cantonese',
}

/** whisper.cpp spells Javanese `jw`; ISO-639-1 says `jv`. */
const ALIASES: Readonly<Record<string, string>> = { jv: 'jw' }

/** The code whisper.cpp takes for a client's language hint, or undefined when it knows no such language. */
export function whisperLanguageCode(hint: string): string | undefined {
  const code = hint.trim().toLowerCase()
  const resolved = ALIASES[code] ?? code
  return Object.hasOwn(WHISPER_LANGUAGES, resolved) ? resolved : undefined
}

/** `fr` → `french`; a code whisper did not report by name stays as it is. */
export function whisperLanguageName(code: string): string {
  return Object.hasOwn(WHISPER_LANGUAGES, code) ? WHISPER_LANGUAGES[code]! : code
}

/** `french` (as whisper-server reports a language) → `fr`; undefined for a name it does not know. */
export function whisperCodeOfName(name: string | undefined): string | undefined {
  if (!name) return undefined
  const wanted = name.trim().toLowerCase()
  return Object.keys(WHISPER_LANGUAGES).find((code) => WHISPER_LANGUAGES[code] === wanted) ?? whisperLanguageCode(wanted)
}
