/**
 * A retrieval benchmark corpus: long, repetitive documents (harbour records, service logs, a
 * machine manual, council minutes, an SDK reference, a lease, a lab procedure, ship and flight
 * logs, a changelog, a staff handbook, a field notebook), each far past a small chat model's
 * 2,048-token context, with a few facts planted at different depths and a question for each.
 * It measures whether retrieval brings back the part of a document that holds the fact.
 *
 * Everything is generated from small vocabularies with a seeded PRNG, so the corpus is the same
 * on every run. Facts use words the filler never uses (the answer words appear nowhere else in
 * their document); a few decoy sentences share a question's key word without answering it, and
 * about a third of the questions share only one content word with their fact, so that neither
 * plain keyword search nor plain meaning search gets every question for free.
 */
import { minimalDocx, minimalPdf } from '../../test/support/document-files.ts'

export type DocumentFormat = 'txt' | 'md' | 'pdf' | 'docx'

export interface CorpusDocument {
  /** File name as uploaded, with the extension of its format: 'harbour-records-1998.txt', 'press-manual.pdf' */
  name: string
  kind: string
  format: DocumentFormat
  /** The document's text, paragraphs separated by blank lines ("\n\n"). For pdf/docx: the text the file holds. */
  text: string
}

export interface CorpusQuestion {
  /** A CorpusDocument.name */
  document: string
  /** As a person would ask it */
  question: string
  /** One sentence copied exactly from the document's text (a substring of `text`), holding the fact the answer needs. */
  fact: string
  /** Short words or numbers an answer naming the fact contains (case-insensitive); any one of them counts. */
  answer: string[]
}

export function retrievalCorpus(): { documents: CorpusDocument[]; questions: CorpusQuestion[] } {
  const documents: CorpusDocument[] = []
  const questions: CorpusQuestion[] = []
  for (const plan of DOCUMENT_PLANS) {
    const built = buildDocument(plan())
    documents.push(built.document)
    questions.push(...built.questions)
  }
  return { documents, questions }
}

/** The bytes to upload for a document: UTF-8 text for txt/md, a PDF or .docx built from its paragraphs otherwise. */
export function documentBytes(doc: CorpusDocument): Buffer {
  switch (doc.format) {
    case 'txt':
    case 'md':
      return Buffer.from(doc.text, 'utf8')
    case 'pdf':
      return minimalPdf(pdfPages(doc.text.split('\n\n')))
    case 'docx':
      return minimalDocx(doc.text.split('\n\n'))
  }
}

// ---------------------------------------------------------------------------------------------
// Building a document from a plan

type Rng = () => number

/** A sentence placed inside an ordinary paragraph at a relative depth (0 = start, 1 = end). */
interface Planted {
  at: number
  fact: string
  question: string
  answer: string[]
}

/** A sentence that shares a question's key word but does not answer it. */
interface Decoy {
  at: number
  sentence: string
}

interface Paragraph {
  /** A title or heading line above the entries (joined with a single newline). */
  head?: string
  entries: string[]
  /** ' ' for running prose, '\n' for one entry a line (logs, registers, bullet lists). */
  joiner: string
}

interface DocumentPlan {
  name: string
  kind: string
  format: DocumentFormat
  seed: number
  /** Filler words to generate before the planted sentences go in. */
  words: number
  paragraph: (rng: Rng, index: number) => Paragraph
  facts: Planted[]
  decoys: Decoy[]
  /** How a planted sentence is written among the entries (a bullet in a changelog). */
  asEntry?: (sentence: string) => string
}

const MAX_PARAGRAPH_WORDS = 150

function buildDocument(plan: DocumentPlan): { document: CorpusDocument; questions: CorpusQuestion[] } {
  const rng = mulberry32(plan.seed)
  const paragraphs: Paragraph[] = []
  let words = 0
  while (words < plan.words) {
    const paragraph = plan.paragraph(rng, paragraphs.length)
    paragraphs.push(paragraph)
    words += wordCount(renderParagraph(paragraph))
  }
  const asEntry = plan.asEntry ?? ((sentence: string) => sentence)
  const taken = new Set<number>()
  const plants = [...plan.facts.map((f) => ({ at: f.at, sentence: f.fact })), ...plan.decoys]
  for (const { at, sentence } of plants) {
    const index = freeParagraph(paragraphs.length, at, taken)
    plantSentence(rng, paragraphs[index]!, asEntry(sentence))
  }
  const document: CorpusDocument = {
    name: plan.name,
    kind: plan.kind,
    format: plan.format,
    text: paragraphs.map(renderParagraph).join('\n\n'),
  }
  const questions = plan.facts.map((f) => ({ document: plan.name, question: f.question, fact: f.fact, answer: f.answer }))
  return { document, questions }
}

/** The paragraph at this depth, or the next one not yet holding a planted sentence (never the title paragraph). */
function freeParagraph(count: number, at: number, taken: Set<number>): number {
  let index = Math.max(1, Math.round(at * (count - 1)))
  while (taken.has(index)) index = index + 1 < count ? index + 1 : 1
  taken.add(index)
  return index
}

/** Puts the sentence between two of the paragraph's entries, then drops filler entries until it fits. */
function plantSentence(rng: Rng, paragraph: Paragraph, sentence: string): void {
  const position = int(rng, 1, Math.max(1, paragraph.entries.length - 1))
  paragraph.entries.splice(position, 0, sentence)
  while (wordCount(renderParagraph(paragraph)) > MAX_PARAGRAPH_WORDS && paragraph.entries.length > 2) {
    const last = paragraph.entries.length - 1
    paragraph.entries.splice(paragraph.entries[last] === sentence ? last - 1 : last, 1)
  }
}

function renderParagraph(p: Paragraph): string {
  const body = p.entries.join(p.joiner)
  return p.head === undefined ? body : `${p.head}\n${body}`
}

/** Entries from `make` until the paragraph reaches a word count drawn from [min, max]. */
function fillEntries(rng: Rng, make: () => string, first: string[] = [], min = 50, max = 105): string[] {
  const target = int(rng, min, max)
  const entries = [...first]
  let words = wordCount(entries.join(' '))
  while (words < target) {
    const entry = make()
    entries.push(entry)
    words += wordCount(entry)
  }
  return entries
}

function wordCount(text: string): number {
  return text.split(/\s+/).filter(Boolean).length
}

// ---------------------------------------------------------------------------------------------
// Small deterministic helpers

/** mulberry32: a tiny seeded PRNG, so the corpus is identical on every run. */
function mulberry32(seed: number): Rng {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

function pick<T>(rng: Rng, items: readonly T[]): T {
  return items[Math.floor(rng() * items.length)]!
}

/** An integer in [lo, hi]. */
function int(rng: Rng, lo: number, hi: number): number {
  return lo + Math.floor(rng() * (hi - lo + 1))
}

/** A decimal in [lo, hi] with this many digits after the point. */
function decimal(rng: Rng, lo: number, hi: number, digits: number): string {
  return (lo + rng() * (hi - lo)).toFixed(digits)
}

/** The items in a seeded random order. */
function shuffled<T>(rng: Rng, items: readonly T[]): T[] {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1))
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0')

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December']

/** The calendar date `offset` days after 1 January of `year` (UTC, so no time zone shifts it). */
function calendar(year: number, offset: number): { day: number; month: number; year: number } {
  const d = new Date(Date.UTC(year, 0, 1 + offset))
  return { day: d.getUTCDate(), month: d.getUTCMonth(), year: d.getUTCFullYear() }
}

/** '3 January 1998' */
function longDate(year: number, offset: number): string {
  const c = calendar(year, offset)
  return `${c.day} ${MONTHS[c.month]} ${c.year}`
}

/** '3 Jan 1998' */
function shortDate(year: number, offset: number): string {
  const c = calendar(year, offset)
  return `${c.day} ${MONTHS[c.month]!.slice(0, 3)} ${c.year}`
}

/** '1998-01-03' */
function isoDate(year: number, offset: number): string {
  const c = calendar(year, offset)
  return `${c.year}-${pad(c.month + 1)}-${pad(c.day)}`
}

// ---------------------------------------------------------------------------------------------
// PDF layout: the writer puts one line of text per row, 44 rows to a page

const PDF_LINE_WIDTH = 75
const PDF_PAGE_LINES = 44

/** Pages of wrapped lines, whole paragraphs to a page, a blank row between paragraphs. */
function pdfPages(paragraphs: string[]): string[][] {
  const pages: string[][] = []
  let page: string[] = []
  for (const paragraph of paragraphs) {
    const lines = paragraph.split('\n').flatMap((line) => wrapLine(line, PDF_LINE_WIDTH))
    const needed = lines.length + (page.length > 0 ? 1 : 0)
    if (page.length > 0 && page.length + needed > PDF_PAGE_LINES) {
      pages.push(page)
      page = []
    }
    if (page.length > 0) page.push('')
    page.push(...lines)
  }
  if (page.length > 0) pages.push(page)
  return pages
}

function wrapLine(line: string, width: number): string[] {
  const lines: string[] = []
  let current = ''
  for (const word of line.split(' ')) {
    if (current !== '' && current.length + 1 + word.length > width) {
      lines.push(current)
      current = word
    } else {
      current = current === '' ? word : `${current} ${word}`
    }
  }
  if (current !== '') lines.push(current)
  return lines
}

// ---------------------------------------------------------------------------------------------
// The documents. Filler numbers never carry thousands separators, so a fact's "9,000" or
// "2,400" cannot turn up in the filler by chance.

function harbourRecords(): DocumentPlan {
  const VESSELS = [
    'Marra',
    'Brightwater',
    'Solent Star',
    'Ellen Hay',
    'Kittiwake',
    'Northern Reach',
    'Aldis',
    'Corvina',
    'Gannet',
    'Ivy May',
    'Saltash',
    'Tern',
    'Morwenna',
    'Skerry',
  ]
  const TYPES = ['coaster', 'motor vessel', 'bulk carrier', 'general cargo ship', 'reefer']
  const FLAGS = ['Norway', 'Netherlands', 'Denmark', 'Ireland', 'Germany', 'Latvia', 'Estonia']
  const CARGOES = ['timber', 'coal', 'grain', 'fertiliser', 'steel coil', 'china clay', 'scrap metal', 'salt', 'fish meal', 'cement', 'animal feed']
  const PORTS = ['Rotterdam', 'Bremen', 'Cork', 'Riga', 'Aarhus', 'Bergen', 'Antwerp', 'Tallinn']
  const AGENTS = ['Pellow and Sons', 'Marcroft Agencies', 'Trevan Shipping Ltd', 'Carn Brea Agency']
  const PILOTS = ['J. Rowe', 'M. Tonkin', 'D. Hicks', 'S. Pascoe']
  const TUGS = ['Kestle Lass', 'Portreath', 'Gwithian']
  const DUES = ['dues paid', 'dues paid in part', 'dues deferred to month end', 'dues invoiced to agent']
  const WINDS = ['N', 'NE', 'E', 'SE', 'S', 'SW', 'W', 'NW']
  let day = 0
  const entry = (rng: Rng): string => {
    day += pick(rng, [0, 0, 1, 1, 2])
    const when = shortDate(1998, day)
    const vessel = pick(rng, VESSELS)
    switch (pick(rng, ['berth', 'berth', 'sail', 'pilot', 'dues', 'tide'])) {
      case 'berth':
        return `${when}: the ${pick(rng, TYPES)} ${vessel} (${pick(rng, FLAGS)}) berthed at quay ${int(rng, 1, 6)}, cargo: ${pick(rng, CARGOES)}, ${int(rng, 18, 240) * 10} t, ${pick(rng, DUES)}.`
      case 'sail':
        return `${when}: ${vessel} sailed from quay ${int(rng, 1, 6)} for ${pick(rng, PORTS)} with ${pick(rng, CARGOES)}, ${int(rng, 18, 240) * 10} t.`
      case 'pilot':
        return `${when}: pilotage for ${vessel} by pilot ${pick(rng, PILOTS)}, tug ${pick(rng, TUGS)} assisting.`
      case 'dues':
        return `${when}: harbour dues of ${int(rng, 120, 3900)} pounds received from ${pick(rng, AGENTS)} for ${vessel}.`
      default:
        return `${when}: high water ${pad(int(rng, 0, 23))}:${pad(int(rng, 0, 59))}, ${decimal(rng, 3.1, 5.8, 1)} m; wind ${pick(rng, WINDS)} force ${int(rng, 1, 7)}; no movements after dark.`
    }
  }
  return {
    name: 'harbour-records-1998.txt',
    kind: 'records',
    format: 'txt',
    seed: 1998,
    words: 6000,
    paragraph: (rng, index) => ({
      head: index === 0 ? "PORT OF KESTLE - HARBOUR MASTER'S RECORDS, 1998" : undefined,
      entries: fillEntries(rng, () => entry(rng)),
      joiner: '\n',
    }),
    facts: [
      {
        at: 0.04,
        fact: 'The new pier at the north basin was paid for by the Hallworth Shipping Trust.',
        question: 'Which organisation funded the construction of the pier?',
        answer: ['Hallworth'],
      },
      {
        at: 0.22,
        fact: 'The harbour crane at quay 2 collapsed while lifting a container of roof slate, and nobody was hurt.',
        question: 'What was the crane lifting when it collapsed?',
        answer: ['slate'],
      },
      {
        at: 0.45,
        fact: 'Dredging of the approach channel to a depth of 7 metres was carried out by Breesaap Dredging of Vlissingen.',
        question: 'Which contractor deepened the approach channel?',
        answer: ['Breesaap', 'Vlissingen'],
      },
      {
        at: 0.62,
        fact: 'Harbour dues for fishing boats under 12 metres were abolished by a vote of the harbour commissioners in June.',
        question: 'What happened to the charges for small fishing vessels?',
        answer: ['abolished'],
      },
      {
        at: 0.8,
        fact: "The harbour master's launch Tregenna was sold to the Falmouth sea cadets for 2,400 pounds.",
        question: "Who bought the harbour master's launch?",
        answer: ['sea cadets', 'Falmouth'],
      },
      {
        at: 0.96,
        fact: 'Bilge oil pumped out by the coaster Bellis fouled the inner harbour, and her owners were fined 9,000 pounds.',
        question: 'What penalty were the owners given after the oil leak?',
        answer: ['9,000'],
      },
    ],
    decoys: [
      { at: 0.3, sentence: 'The old pier at the south basin was closed to foot traffic for the winter.' },
      { at: 0.7, sentence: "Gulls' nests were cleared from the pier lamps by the harbour staff." },
      { at: 0.55, sentence: "The crane driver's hours were entered in the wages book." },
      { at: 0.38, sentence: 'Two fishing boats sheltered in the inner harbour during the gale.' },
    ],
  }
}

function paymentsIncidentLog(): DocumentPlan {
  const SERVICES = [
    'checkout-api',
    'ledger-db',
    'risk-engine',
    'email-relay',
    'search-index',
    'auth-service',
    'settlement-batch',
    'webhook-dispatcher',
    'card-vault',
    'report-builder',
  ]
  const REGIONS = ['eu-west-1', 'us-east-2', 'ap-south-1']
  const PEOPLE = ['Priya', 'Tomasz', 'Alice', 'Kwame', 'Hiro', 'Ingrid']
  let day = 59 // 1 March 2024
  let minute = 0
  const stamp = (rng: Rng): string => {
    minute = Math.min(1439, minute + int(rng, 7, 140))
    return `${isoDate(2024, day)} ${pad(Math.floor(minute / 60))}:${pad(minute % 60)}`
  }
  const line = (rng: Rng): string => {
    const ts = stamp(rng)
    const svc = pick(rng, SERVICES)
    switch (pick(rng, ['health', 'health', 'deploy', 'scale', 'ack', 'backup', 'reload', 'disk'])) {
      case 'health':
        return `${ts} INFO ${svc}: health check passed, p95 latency ${int(rng, 40, 380)} ms, error rate 0.0${int(rng, 1, 9)}%.`
      case 'deploy':
        return `${ts} INFO ${svc}: deployed build ${Math.floor(rng() * 0xfffffff)
          .toString(16)
          .padStart(7, '0')} to ${pick(rng, REGIONS)}, rollout complete.`
      case 'scale':
        return `${ts} WARN ${svc}: worker pool at ${int(rng, 81, 97)}% of capacity, scaled out to ${int(rng, 4, 24)} replicas.`
      case 'ack':
        return `${ts} INFO on-call: ${pick(rng, PEOPLE)} acknowledged alert ${int(rng, 1000, 9999)} on ${svc}, closed as transient.`
      case 'backup':
        return `${ts} INFO ${svc}: nightly backup finished in ${int(rng, 3, 48)} min, ${int(rng, 2, 90)} GB written.`
      case 'reload':
        return `${ts} INFO ${svc}: config reload requested by ${pick(rng, PEOPLE)}, no changes found.`
      default:
        return `${ts} WARN ${svc}: disk usage at ${int(rng, 70, 89)}% on node-${int(rng, 1, 40)}, old logs rotated.`
    }
  }
  return {
    name: 'payments-incident-log.txt',
    kind: 'log',
    format: 'txt',
    seed: 2024,
    words: 6500,
    paragraph: (rng, index) => {
      day += 1
      minute = int(rng, 0, 90)
      return {
        head: index === 0 ? 'PAYDOCK PLATFORM - SERVICE AND INCIDENT LOG, MARCH TO MAY 2024' : undefined,
        entries: fillEntries(rng, () => line(rng)),
        joiner: '\n',
      }
    },
    facts: [
      {
        at: 0.05,
        fact: 'At 14:02 the payment gateway failed because its TLS certificate had expired overnight.',
        question: 'Why did the payment gateway fail?',
        answer: ['certificate', 'expired'],
      },
      {
        at: 0.28,
        fact: 'The refund backlog on 12 March was caused by a currency rounding bug in the settlement batch job.',
        question: 'What caused the backlog of refunds?',
        answer: ['rounding', 'currency'],
      },
      {
        at: 0.48,
        fact: 'Customers in Portugal were charged twice because a retry loop resent every card authorisation.',
        question: 'Why were some customers charged two times?',
        answer: ['retry', 'Portugal'],
      },
      {
        at: 0.66,
        fact: 'The SMS verification provider was replaced by Telvox after three outages in one week.',
        question: 'Which provider handles SMS verification now?',
        answer: ['Telvox'],
      },
      {
        at: 0.84,
        fact: 'Database failover to the standby in Frankfurt took 11 minutes, far longer than the 2-minute target.',
        question: 'How long did the database failover take?',
        answer: ['11 minutes'],
      },
      {
        at: 0.97,
        fact: "The on-call pager stayed silent because the escalation policy still pointed at Delia's old phone number.",
        question: "Why were alerts not reaching the on-call engineer's pager?",
        answer: ['escalation', 'phone number'],
      },
    ],
    decoys: [
      { at: 0.4, sentence: 'The payment gateway dashboard was reviewed; no action needed.' },
      { at: 0.75, sentence: 'Payment gateway latency stayed within target all week.' },
      { at: 0.9, sentence: 'Database vacuum on ledger-db finished without errors.' },
    ],
  }
}

function pressManual(): DocumentPlan {
  const COMPONENTS = [
    'upper platen sensor',
    'lower die clamp',
    'light curtain',
    'main contactor',
    'stroke encoder',
    'foot pedal',
    'pressure transducer',
    'stroke limit switch',
    'valve block',
    'cabinet fan',
    'ram position sensor',
    'guard interlock',
    'oil level switch',
    'two-hand control',
  ]
  const TITLES = [
    'Daily checks',
    'Weekly checks',
    'Setting the stroke',
    'Changing the tooling',
    'Adjusting the ram speed',
    'Clearing a jam',
    'Shutting down',
    'Starting up',
    'Two-hand control',
    'Light curtain test',
    'Oil level',
    'Guard interlock',
  ]
  const ACTIVITIES = ['the first cycle of the shift', 'changing the tooling', 'adjusting the stroke', 'restarting after a stop', 'cleaning the bed']
  const CONDITIONS = ['it moves freely', 'no warning lamp is lit', 'the reading is inside the green band', 'the cable is undamaged', 'the display shows READY']
  const FAULTS = ['does not respond', 'reads out of range', 'gets hot to the touch', 'makes a knocking noise', 'gives an intermittent signal']
  const RESPONSES = ['call the shift supervisor', 'isolate the power before touching it', 'note the error code shown on the display']
  const CODE_FAULTS = ['signal is lost', 'reads out of range', 'is over temperature', 'does not respond', 'reports a short circuit', 'is out of calibration']
  const REMEDIES = [
    'Check the connector and the cable, then press RESET.',
    'Let the press stand for 20 minutes, then press RESET.',
    'Switch the press off and call service if the fault repeats.',
    'Recalibrate it from the service menu.',
    'Replace fuse F3 in the control cabinet.',
  ]
  // E47 and E63 are the planted codes: the generated table never defines them.
  const PLANTED_CODES = new Set([47, 63])
  let code = 0
  let chapter = 1
  let section = 0
  const nextCode = (): string => {
    do code++
    while (PLANTED_CODES.has(code))
    return code <= 99 ? `E${pad(code)}` : `F${pad(code - 99)}`
  }
  const sectionSentence = (rng: Rng): string => {
    const comp = pick(rng, COMPONENTS)
    switch (pick(rng, ['before', 'if', 'record', 'bypass', 'reach', 'tighten'])) {
      case 'before':
        return `Before ${pick(rng, ACTIVITIES)}, the operator checks the ${comp} and confirms that ${pick(rng, CONDITIONS)}.`
      case 'if':
        return `If the ${comp} ${pick(rng, FAULTS)}, stop the press and ${pick(rng, RESPONSES)}.`
      case 'record':
        return 'Record the check in the machine logbook with the date and the initials of the operator.'
      case 'bypass':
        return `Do not bypass the ${comp} under any circumstances.`
      case 'reach':
        return `The ${comp} is reached from the ${pick(rng, ['left', 'right', 'rear'])} side after removing the cover panel.`
      default:
        return `Tighten the ${comp} fixings to ${int(rng, 8, 45)} Nm and check them again after ${int(rng, 4, 40)} hours of work.`
    }
  }
  return {
    name: 'press-manual.pdf',
    kind: 'manual',
    format: 'pdf',
    seed: 400,
    words: 5600,
    paragraph: (rng, index) => {
      const title = index === 0 ? ['HX-400 HYDRAULIC PRESS - OPERATOR AND SERVICE MANUAL.'] : []
      if (index > 0 && rng() < 0.4) {
        const first = [...title, 'Error codes, continued.']
        return {
          entries: fillEntries(rng, () => `Error ${nextCode()}: the ${pick(rng, COMPONENTS)} ${pick(rng, CODE_FAULTS)}. ${pick(rng, REMEDIES)}`, first),
          joiner: ' ',
        }
      }
      section++
      if (section > 6) {
        chapter++
        section = 1
      }
      const first = [...title, `Section ${chapter}.${section} ${pick(rng, TITLES)}.`]
      return { entries: fillEntries(rng, () => sectionSentence(rng), first), joiner: ' ' }
    },
    facts: [
      {
        at: 0.08,
        fact: 'Error E47 means the coolant pump is drawing air through a loose inlet seal.',
        question: 'What does error E47 mean?',
        answer: ['coolant', 'inlet seal'],
      },
      {
        at: 0.3,
        fact: 'The tonnage limit for dies narrower than 200 mm is 60 tonnes, because the bolster plate bends under a narrow load.',
        question: 'What is the tonnage limit for a narrow die?',
        answer: ['60 tonnes'],
      },
      {
        at: 0.5,
        fact: 'The hydraulic oil must be changed every 2,000 operating hours, using ISO VG 46 oil only.',
        question: 'How often should the hydraulic fluid be replaced?',
        answer: ['2,000'],
      },
      {
        at: 0.7,
        fact: 'Error E63 appears when the light curtain is dirty, and wiping its lenses with a dry cloth clears it.',
        question: 'How do I clear error E63?',
        answer: ['lenses', 'dry cloth', 'wiping'],
      },
      {
        at: 0.85,
        fact: 'Only a technician holding a Grade B hydraulics licence may open the accumulator housing.',
        question: 'Who is allowed to open the accumulator?',
        answer: ['Grade B', 'licence'],
      },
      {
        at: 0.96,
        fact: 'The press must be bolted to a concrete floor at least 250 mm thick.',
        question: 'What kind of floor does the machine need?',
        answer: ['concrete', '250 mm'],
      },
    ],
    decoys: [
      { at: 0.52, sentence: 'Errors E46 and E48 light the same amber lamp as error E47.' },
      { at: 0.33, sentence: 'A spare accumulator pressure gauge is kept in the tool drawer.' },
    ],
  }
}

function councilMinutes(): DocumentPlan {
  const COUNCILLORS = ['Ashworth', 'Bhatt', 'Collins', 'Dunmore', 'Evans', 'Fairclough', 'Greaves', 'Hussain']
  const GROUPS = ['footpaths', 'village hall', 'playing field', 'environment', 'finance', 'cemetery']
  const WORKS = ['a rear extension', 'a garden room', 'a replacement garage', 'two dormer windows', 'a change of use to a holiday let', 'a new porch']
  const STREETS = ['Mill Lane', 'Station Road', 'The Green', 'Orchard Close', 'Kings Way', 'Well Street']
  const CORRESPONDENTS = [
    'the county council',
    'the district council',
    'the police liaison officer',
    'the village hall trustees',
    'the footpath society',
    'the church warden',
  ]
  const TOPICS = ['litter picking', 'the flower beds', 'the noticeboard', 'the Christmas lights', 'hedge cutting', 'the war memorial']
  let dayOffset = 11 // 12 January 2023
  let item = 0
  const cllr = (rng: Rng) => `Cllr ${pick(rng, COUNCILLORS)}`
  const minuteItem = (rng: Rng): string => {
    item++
    switch (pick(rng, ['apologies', 'report', 'planning', 'planning', 'payments', 'correspondence', 'member'])) {
      case 'apologies':
        return `Item ${item}. Apologies for absence were received from ${cllr(rng)}.`
      case 'report':
        return `Item ${item}. The committee noted the report of the ${pick(rng, GROUPS)} working group and agreed that no further action was needed.`
      case 'planning':
        return `Item ${item}. Planning application 23/${pad(int(rng, 100, 990), 4)} for ${pick(rng, WORKS)} at ${int(rng, 1, 60)} ${pick(rng, STREETS)}: the council raised no objection.`
      case 'payments':
        return `Item ${item}. Payments totalling ${int(rng, 210, 4890)} pounds were approved, proposed by ${cllr(rng)} and seconded by ${cllr(rng)}.`
      case 'correspondence':
        return `Item ${item}. Correspondence from ${pick(rng, CORRESPONDENTS)} was received and noted.`
      default:
        return `Item ${item}. ${cllr(rng)} reported on ${pick(rng, TOPICS)}; the report was noted.`
    }
  }
  return {
    name: 'council-minutes-2023.docx',
    kind: 'minutes',
    format: 'docx',
    seed: 2023,
    words: 6000,
    paragraph: (rng, index) => {
      const first: string[] = index === 0 ? ['BRACKLEY GREEN PARISH COUNCIL - MINUTES OF MEETINGS, 2023.'] : []
      if (index % 4 === 0) {
        if (index > 0) dayOffset += int(rng, 21, 35)
        item = 0
        const present = shuffled(rng, COUNCILLORS)
          .slice(0, int(rng, 4, 6))
          .join(', ')
        first.push(`Minutes of the meeting held on ${longDate(2023, dayOffset)} in the village hall. Present: Cllrs ${present}.`)
      }
      return { entries: fillEntries(rng, () => minuteItem(rng), first), joiner: ' ' }
    },
    facts: [
      {
        at: 0.06,
        fact: 'The council agreed to buy a defibrillator for the bus shelter on Church Street, at a cost of 1,450 pounds.',
        question: 'Where will the defibrillator be installed?',
        answer: ['bus shelter', 'Church Street'],
      },
      {
        at: 0.35,
        fact: 'Cllr Okafor resigned from the council in May because she is moving to Leeds.',
        question: 'Why did Councillor Okafor step down?',
        answer: ['Leeds', 'moving'],
      },
      {
        at: 0.55,
        fact: 'The speed limit on Hollow Road will be cut to 20 mph after residents collected 312 signatures.',
        question: 'What will the new speed limit on Hollow Road be?',
        answer: ['20 mph'],
      },
      {
        at: 0.75,
        fact: 'The annual grant to the youth club was raised from 800 to 1,200 pounds.',
        question: 'How much will the youth club receive each year now?',
        answer: ['1,200'],
      },
      {
        at: 0.94,
        fact: "The allotments on Parson's Field will be moved to the old rectory garden next spring.",
        question: 'Where are the allotments being relocated to?',
        answer: ['rectory'],
      },
    ],
    decoys: [
      { at: 0.2, sentence: 'A pothole on Hollow Road was reported to the county highways team.' },
      { at: 0.82, sentence: 'Cllr Bhatt asked for the hedge on Hollow Road to be trimmed before the summer.' },
      { at: 0.45, sentence: "The youth club's leader thanked the council for the use of the hall." },
    ],
  }
}

function sdkReference(): DocumentPlan {
  const VERBS = ['get', 'list', 'create', 'delete', 'update', 'watch', 'copy', 'restore', 'describe', 'tag']
  const NOUNS: { name: string; one: string; many: string }[] = [
    { name: 'Bucket', one: 'bucket', many: 'buckets' },
    { name: 'Object', one: 'object', many: 'objects' },
    { name: 'Policy', one: 'policy', many: 'policies' },
    { name: 'Snapshot', one: 'snapshot', many: 'snapshots' },
    { name: 'Token', one: 'token', many: 'tokens' },
    { name: 'Webhook', one: 'webhook', many: 'webhooks' },
    { name: 'Replica', one: 'replica', many: 'replicas' },
    { name: 'LifecycleRule', one: 'lifecycle rule', many: 'lifecycle rules' },
    { name: 'Quota', one: 'quota', many: 'quotas' },
    { name: 'Alias', one: 'alias', many: 'aliases' },
    { name: 'Member', one: 'member', many: 'members' },
    { name: 'Role', one: 'role', many: 'roles' },
  ]
  const ERRORS: [string, string][] = [
    ['NotFoundError', 'the {one} does not exist'],
    ['PermissionError', 'the token lacks the scope this call needs'],
    ['TimeoutError', 'the server does not answer within `timeoutMs`'],
    ['ValidationError', 'an argument is malformed'],
    ['QuotaExceededError', 'the project has used its monthly allowance'],
  ]
  const CONFIG: Record<string, [string, string, string, string][]> = {
    cache: [
      ['maxEntries', 'number', '1000', 'the largest number of entries kept in memory'],
      ['ttlSeconds', 'number', '300', 'how long an entry is kept before it is fetched again'],
      ['enabled', 'boolean', 'true', 'turns the in-memory cache on or off'],
    ],
    http: [
      ['timeoutMs', 'number', '30000', 'how long a request may take before it is abandoned'],
      ['maxSockets', 'number', '16', 'how many connections the client opens to one host'],
      ['keepAlive', 'boolean', 'true', 'reuses connections between requests'],
      ['proxy', 'string', 'none', 'the address of an outbound proxy'],
    ],
    auth: [
      ['tokenFile', 'string', '`~/.tide/token`', 'where the access token is read from'],
      ['refreshMinutes', 'number', '45', 'how often the access token is renewed'],
      ['scope', 'string', '`read write`', 'the scopes requested for new tokens'],
    ],
    log: [
      ['level', 'string', '`warn`', 'the lowest level that is written'],
      ['format', 'string', '`text`', 'either `text` or `json`'],
      ['redact', 'boolean', 'true', 'hides tokens and signed addresses in log lines'],
    ],
    metrics: [
      ['enabled', 'boolean', 'false', 'sends call counts and timings to the metrics endpoint'],
      ['sampleRate', 'number', '0.1', 'the share of calls that are timed'],
      ['endpoint', 'string', 'none', 'where metrics are posted'],
    ],
  }
  const SAMPLES = ['logs', 'invoices-2024', 'backups', 'photos', 'staging', 'audit']
  const describe = (verb: string, n: { one: string; many: string }): string =>
    ({
      get: `Returns the ${n.one} with the given name`,
      list: `Returns the ${n.many} of the project, one page at a time`,
      create: `Creates a ${n.one} and returns its identifier`,
      delete: `Deletes the ${n.one} and everything attached to it`,
      update: `Changes the settings of an existing ${n.one}`,
      watch: `Calls the handler each time the ${n.one} changes`,
      copy: `Copies the ${n.one} to another project`,
      restore: `Brings back a ${n.one} deleted in the last 30 days`,
      describe: `Returns the metadata of the ${n.one} without its contents`,
      tag: `Adds labels to the ${n.one}`,
    })[verb] ?? `Works on the ${n.one}`
  const ARGS: Record<string, string> = {
    list: 'options',
    create: 'name, settings',
    update: 'name, changes',
    watch: 'name, handler',
    copy: 'name, project',
    tag: 'name, labels',
  }
  let functions: { verb: string; noun: (typeof NOUNS)[number] }[] = []
  const functionParagraph = (rng: Rng): Paragraph => {
    if (functions.length === 0)
      functions = shuffled(
        rng,
        VERBS.flatMap((verb) => NOUNS.map((noun) => ({ verb, noun }))),
      )
    const { verb, noun } = functions.pop()!
    const fn = `${verb}${noun.name}`
    const [error, condition] = pick(rng, ERRORS)
    const sentences = [
      `${describe(verb, noun)}.`,
      `Options: \`timeoutMs\` (default ${pick(rng, [5000, 10000, 30000])}), \`region\` (default from \`TIDE_REGION\`), \`signal\` (an AbortSignal that cancels the call).`,
      `Throws \`${error}\` when ${condition.replace('{one}', noun.one)}.`,
      `Example: \`const ${noun.one.split(' ')[0]} = await tide.${fn}('${pick(rng, SAMPLES)}')\`.`,
      `Available since version ${int(rng, 1, 4)}.${int(rng, 0, 9)}.`,
      pick(rng, [
        'The call is idempotent and safe to repeat.',
        'Results are cached for `tide.cache.ttlSeconds` seconds.',
        'The call counts against the project quota.',
        'The call is not cached.',
      ]),
    ]
    return { head: `### \`tide.${fn}(${ARGS[verb] ?? 'name, options'})\``, entries: sentences, joiner: ' ' }
  }
  const configParagraph = (rng: Rng): Paragraph => {
    const group = pick(rng, Object.keys(CONFIG))
    const entries = CONFIG[group]!.map(
      ([key, type, def, what]) => `\`tide.${group}.${key}\` (${type}, default ${def}, since version ${int(rng, 1, 4)}.${int(rng, 0, 9)}): ${what}.`,
    )
    entries.push(
      `Keys in the \`${group}\` group can also be set through environment variables named \`TIDE_${group.toUpperCase()}_*\`, which win over the configuration file.`,
    )
    return { head: `## Configuration keys: ${group}`, entries, joiner: ' ' }
  }
  return {
    name: 'tidewater-sdk-reference.md',
    kind: 'code-docs',
    format: 'md',
    seed: 77,
    words: 5600,
    paragraph: (rng, index) => {
      const paragraph = index > 0 && rng() < 0.22 ? configParagraph(rng) : functionParagraph(rng)
      if (index === 0) paragraph.head = `# Tidewater SDK - API reference\n${paragraph.head}`
      return paragraph
    },
    facts: [
      {
        at: 0.04,
        fact: 'Set `tide.retry.jitter` to false to make retries happen at exact intervals in tests.',
        question: 'How can I make the retry timing predictable when testing?',
        answer: ['jitter'],
      },
      {
        at: 0.25,
        fact: 'The function `tide.rotateKeys()` replaces every access key older than 90 days and returns the list of revoked ones.',
        question: 'What does rotateKeys do?',
        answer: ['90 days', 'revoked'],
      },
      {
        at: 0.5,
        fact: 'Uploads larger than 5 GB must go through `tide.multipartUpload()`, because a single PUT request stops at that size.',
        question: 'What should I call to upload a very big file?',
        answer: ['multipartUpload'],
      },
      {
        at: 0.72,
        fact: 'When `TIDE_OFFLINE=1` is set, the client serves reads from its local cache and queues every write until the network returns.',
        question: 'What happens in offline mode?',
        answer: ['queue', 'local cache'],
      },
      {
        at: 0.88,
        fact: 'Error `TW-409` means a write conflict: another client changed the same object version first.',
        question: 'What does the TW-409 error mean?',
        answer: ['conflict'],
      },
      {
        at: 0.97,
        fact: 'Listing functions return 250 items per page by default and never more than 2500.',
        question: 'How many results can a list call give back at most?',
        answer: ['2500'],
      },
    ],
    decoys: [
      { at: 0.6, sentence: 'For key handling, see also `tide.rotateKeys()` in the security section.' },
      { at: 0.4, sentence: 'Offline use is covered in the guide, not in this reference.' },
    ],
  }
}

function warehouseLease(): DocumentPlan {
  const TITLES = [
    'Definitions',
    'Rent',
    'Service charge',
    'Use',
    'Alterations',
    'Repair',
    'Insurance',
    'Assignment',
    'Signs',
    'Access',
    'Yielding up',
    'Statutes',
    'Fire safety',
    'Notices',
    'Rights reserved',
    'Quiet enjoyment',
    'Costs',
    'Forfeiture',
  ]
  const TENANT_DUTIES = [
    'keep the interior of the Premises clean and tidy',
    'not use the Premises for any illegal or immoral purpose',
    'pay the service charge within 14 days of demand',
    'permit the Landlord to enter the Premises on reasonable notice',
    'not make any structural alteration to the Premises',
    'comply with all statutes affecting the Premises',
    'keep the fire alarm and sprinklers in working order',
    'not display any sign on the exterior of the building',
    'remove all rubbish from the loading bay each week',
    'insure its own stock, fixtures and fittings',
  ]
  const LANDLORD_DUTIES = [
    'provide the services set out in the Schedule',
    'keep the common parts lit and clean',
    'give the Tenant copies of the service charge accounts',
    'maintain the estate roads and car park',
    'not interrupt the supply of water and electricity',
  ]
  const QUALIFIERS = [
    'at all times during the Term',
    'at its own cost',
    'to the reasonable satisfaction of the Landlord',
    'within a reasonable time',
    'save as permitted by this lease',
  ]
  const INCLUSIONS = [
    'the loading bay and the forecourt',
    "all landlord's fixtures and fittings",
    'the plant and equipment serving only the Premises',
    'any additions and improvements made during the Term',
  ]
  const THINGS = ['carry out any work of improvement', 'remedy any defect caused by the other party', 'pay any cost not expressly reserved in this lease']
  let clause = 1
  let sub = 0
  const sentence = (rng: Rng): string => {
    switch (pick(rng, ['tenant', 'tenant', 'landlord', 'consent', 'include', 'oblige', 'breach'])) {
      case 'tenant':
        return `The Tenant shall ${pick(rng, TENANT_DUTIES)} ${pick(rng, QUALIFIERS)}.`
      case 'landlord':
        return `The Landlord shall ${pick(rng, LANDLORD_DUTIES)} ${pick(rng, QUALIFIERS)}.`
      case 'consent':
        return 'Any consent of the Landlord under this clause shall not be unreasonably withheld or delayed.'
      case 'include':
        return `In this clause, references to the Premises include ${pick(rng, INCLUSIONS)}.`
      case 'oblige':
        return `Nothing in this clause shall oblige the ${pick(rng, ['Landlord', 'Tenant'])} to ${pick(rng, THINGS)}.`
      default:
        return `Where the Tenant is in breach of this clause, the Landlord may serve notice requiring the breach to be remedied within ${pick(rng, [14, 21, 28, 30])} days.`
    }
  }
  return {
    name: 'warehouse-lease.docx',
    kind: 'contract',
    format: 'docx',
    seed: 7,
    words: 5800,
    paragraph: (rng, index) => {
      sub++
      if (sub > int(rng, 3, 5)) {
        clause++
        sub = 1
      }
      const title = TITLES[(clause - 1) % TITLES.length]!
      const first =
        index === 0
          ? ['LEASE OF UNIT 7, FENWICK TRADING ESTATE, made between Fenwick Estates Limited (the Landlord) and Orrin Tools Limited (the Tenant).']
          : []
      first.push(`Clause ${clause}.${sub} (${title}).`)
      return { entries: fillEntries(rng, () => sentence(rng), first), joiner: ' ' }
    },
    facts: [
      {
        at: 0.05,
        fact: 'The annual rent is 48,500 pounds, payable in equal quarterly instalments in advance.',
        question: 'How much rent does the tenant pay per year?',
        answer: ['48,500'],
      },
      {
        at: 0.3,
        fact: "The Tenant may end this lease on the fifth anniversary of the term by giving the Landlord at least six months' written notice.",
        question: 'When can the tenant break the lease early?',
        answer: ['fifth anniversary', 'six months'],
      },
      {
        at: 0.5,
        fact: "Repairs to the roof are the responsibility of the Landlord's insurer, Castlegate Mutual, and not of the Tenant.",
        question: 'Who is responsible for roof repairs?',
        answer: ['Castlegate', 'insurer'],
      },
      {
        at: 0.74,
        fact: 'No vehicle over 7.5 tonnes may use the rear yard between 10 pm and 6 am.',
        question: 'At what times are heavy vehicles kept out of the rear yard?',
        answer: ['10 pm', '6 am'],
      },
      {
        at: 0.94,
        fact: 'Any dispute under this lease shall be decided by a single arbitrator appointed by the President of the Chartered Institute of Arbitrators.',
        question: 'How will disagreements about the lease be resolved?',
        answer: ['arbitrator'],
      },
    ],
    decoys: [{ at: 0.2, sentence: 'The Tenant shall keep the roof gutters above the loading bay clear of leaves.' }],
  }
}

function centrifugeProcedure(): DocumentPlan {
  const TITLES = [
    'Daily inspection',
    'Loading the rotor',
    'Balancing the load',
    'Setting the run',
    'Unloading',
    'Cleaning the chamber',
    'Weekly maintenance',
    'Logbook entries',
    'Temperature check',
    'Lid latch test',
  ]
  const COMPONENTS = [
    'rotor',
    'buckets',
    'adapters',
    'lid gasket',
    'chamber',
    'drive shaft',
    'imbalance sensor',
    'temperature probe',
    'lid latch',
    'tube holders',
  ]
  const ACTIONS = ['Inspect', 'Wipe', 'Check', 'Verify', 'Clean']
  const WHEN = ['before the first run of the day', 'after each run', 'at the end of the shift', 'once a week', 'every month']
  const DEFECTS = ['corrosion', 'hairline cracks', 'discolouration', 'a worn gasket', 'dried residue']
  const ROTORS = ['R-12A fixed-angle', 'S-4 swing-out', 'M-96 microplate']
  let step = 0
  /** 'shows' for the lid latch, 'show' for the buckets. */
  const agree = (comp: string, verb: string) => (comp.endsWith('s') ? verb : `${verb}s`)
  const sentence = (rng: Rng): string => {
    const comp = pick(rng, COMPONENTS)
    switch (pick(rng, ['action', 'action', 'defect', 'gloves', 'adapters', 'temperature', 'balance', 'ready'])) {
      case 'action':
        return `${pick(rng, ACTIONS)} the ${comp} ${pick(rng, WHEN)} and record the result in the logbook.`
      case 'defect':
        return `If the ${comp} ${agree(comp, 'show')} ${pick(rng, DEFECTS)}, take the centrifuge out of use and tell the laboratory manager.`
      case 'gloves':
        return `Wear gloves and a laboratory coat when handling the ${comp}.`
      case 'adapters':
        return `Use only adapters approved for the ${pick(rng, ROTORS)} rotor.`
      case 'temperature':
        return `Set the temperature to ${int(rng, 4, 22)} degrees and let the chamber reach it before loading.`
      case 'balance':
        return `Load opposite positions with tubes of equal weight, to within ${decimal(rng, 0.1, 0.5, 1)} grams.`
      default:
        return `The run starts only when the ${comp} ${agree(comp, 'report')} ready.`
    }
  }
  return {
    name: 'centrifuge-procedure.pdf',
    kind: 'procedure',
    format: 'pdf',
    seed: 12,
    words: 5200,
    paragraph: (rng, index) => {
      step++
      const first = index === 0 ? ['SOP-CF-12: OPERATION AND DECONTAMINATION OF THE ROTANA 5R REFRIGERATED CENTRIFUGE.'] : []
      first.push(`Step ${step}. ${pick(rng, TITLES)}.`)
      return { entries: fillEntries(rng, () => sentence(rng), first), joiner: ' ' }
    },
    facts: [
      {
        at: 0.06,
        fact: 'Blood tubes must be spun at 1,800 g for 10 minutes at 4 degrees to separate the plasma.',
        question: 'At what g-force should blood tubes be centrifuged?',
        answer: ['1,800'],
      },
      {
        at: 0.3,
        fact: 'If a tube breaks inside the rotor, leave the lid closed for 30 minutes so that aerosols can settle.',
        question: 'What should I do if a tube breaks during a run?',
        answer: ['30 minutes', 'aerosols', 'lid closed'],
      },
      {
        at: 0.5,
        fact: 'Spills of infectious material are cleaned up with 1 percent sodium hypochlorite left on for 20 minutes.',
        question: 'Which disinfectant is used for infectious spills?',
        answer: ['hypochlorite'],
      },
      {
        at: 0.72,
        fact: 'A rotor must be retired after 10,000 runs or ten years, whichever comes first.',
        question: 'When does a rotor have to be taken out of service?',
        answer: ['10,000', 'ten years'],
      },
      {
        at: 0.93,
        fact: 'Only staff who have passed the biosafety level 2 course may run samples from the isolation ward.',
        question: 'Who may process specimens from the isolation ward?',
        answer: ['biosafety', 'level 2'],
      },
    ],
    decoys: [{ at: 0.4, sentence: 'Blood tubes are labelled with the patient number before they are loaded.' }],
  }
}

function shipLog(): DocumentPlan {
  const WATCHES: [string, number][] = [
    ['Middle', 0],
    ['Morning', 4],
    ['Forenoon', 8],
    ['Afternoon', 12],
    ['Dog', 16],
    ['First', 20],
  ]
  const OFFICERS = ['Master Haldane', 'Chief Officer Lindqvist', '2nd Officer Reid', '3rd Officer Mbeki']
  const CREW = ['Okoro', 'Dunne', 'Sato', 'Marsh', 'Ferris']
  const COURSES = [8, 12, 15, 20, 24, 330, 335, 340, 344, 350]
  const WINDS = ['N', 'NE', 'E', 'SE', 'S', 'SW', 'W', 'NW']
  let watch = -1
  // Position in minutes of arc: the ship steams north about 11 miles an hour, drifting east and
  // west, and starts the run north again from off Aberdeen when it passes 62 N.
  const START_LATITUDE = 57 * 60 + 10
  let latitude = START_LATITUDE
  let longitude = 2 * 60
  const hourly = (rng: Rng, hour: number): string => {
    latitude += int(rng, 9, 13)
    if (latitude > 62 * 60) latitude = START_LATITUDE
    longitude = Math.min(6 * 60, Math.max(0, longitude + int(rng, -6, 6)))
    const position = `${Math.floor(latitude / 60)} ${pad(latitude % 60)}N ${pad(Math.floor(longitude / 60), 3)} ${pad(longitude % 60)}W`
    return `${pad(hour)}00 Position ${position}, course ${pad(pick(rng, COURSES), 3)}, speed ${decimal(rng, 9.5, 13.5, 1)} kn, wind ${pick(rng, WINDS)} ${int(rng, 2, 7)}, sea ${pick(rng, ['slight', 'moderate', 'rough'])}, visibility ${pick(rng, ['good', 'moderate', 'very good'])}, barometer ${int(rng, 995, 1025)} ${pick(rng, ['steady', 'rising', 'falling'])}.`
  }
  return {
    name: 'mv-corran-deck-log.txt',
    kind: 'ship-log',
    format: 'txt',
    seed: 14,
    words: 6200,
    paragraph: (rng, index) => {
      watch++
      const [watchName, start] = WATCHES[watch % WATCHES.length]!
      const officer = OFFICERS[watch % OFFICERS.length]!
      const entries = [`${longDate(2019, 120 + Math.floor(watch / WATCHES.length))}, ${watchName} watch, ${officer}.`]
      for (let h = 0; h < 4; h++) entries.push(hourly(rng, start + h))
      entries.push(
        pick(rng, [
          'Rounds made, all correct.',
          'Steering gear tested, correct.',
          `Lookout posted: AB ${pick(rng, CREW)}.`,
          'Navigation lights checked, correct.',
        ]),
      )
      entries.push(`Watch handed over to ${OFFICERS[(watch + 1) % OFFICERS.length]}.`)
      return { head: index === 0 ? 'DECK LOG, MV CORRAN, VOYAGE 14: ABERDEEN - LERWICK - TORSHAVN' : undefined, entries, joiner: '\n' }
    },
    facts: [
      {
        at: 0.05,
        fact: 'At 0630 AB Ferris slipped on the wet ladder to the bridge wing and cut his hand, which the Chief Officer dressed.',
        question: 'How did Ferris get hurt?',
        answer: ['ladder', 'slipped'],
      },
      {
        at: 0.3,
        fact: 'The starboard generator was shut down after its exhaust temperature reached 520 degrees.',
        question: 'Why was the starboard generator stopped?',
        answer: ['exhaust', '520'],
      },
      {
        at: 0.5,
        fact: "A stowaway found hiding in the bosun's store was handed over to the police at Lerwick.",
        question: 'What happened to the stowaway?',
        answer: ['police'],
      },
      {
        at: 0.72,
        fact: 'Fog closed the harbour at Torshavn, so the Master anchored in Nolsoyarfjordur for nine hours.',
        question: 'Why did the ship wait at anchor instead of entering port?',
        answer: ['fog'],
      },
      {
        at: 0.93,
        fact: 'The livestock cargo of 212 sheep was landed at Torshavn with two animals dead on arrival.',
        question: 'How many sheep did the ship carry?',
        answer: ['212'],
      },
    ],
    decoys: [{ at: 0.4, sentence: 'The port generator was run up for one hour as a test, correct.' }],
  }
}

function productChangelog(): DocumentPlan {
  const AREAS = [
    'the invoice list',
    'expense import',
    'the bank feed',
    'the VAT return',
    'the receipt scanner',
    'user settings',
    'the dashboard',
    'PDF export',
    'CSV import',
    'the reports page',
    'recurring invoices',
    'the contacts list',
  ]
  const BAD = ['freezes', 'shows a blank screen', 'duplicates rows', 'loses the selected filter', 'shows the wrong totals']
  const CONDITIONS = [
    'an account has more than 500 contacts',
    'the session times out',
    'the browser language is not English',
    'a file starts with a byte order mark',
    'two tabs are open',
  ]
  const THINGS = ['contacts', 'invoices', 'bank rules', 'attachments']
  const SETTINGS = ['sort order', 'column widths', 'selected filter', 'page size']
  const FILTERS = ['date range', 'contact', 'status', 'amount']
  let major = 6
  let minor = 8
  let patch = 5
  let daysBack = 0
  const nextVersion = (rng: Rng): string => {
    if (patch > 0) patch--
    else if (minor > 0) {
      minor--
      patch = int(rng, 2, 5)
    } else {
      major--
      minor = 9
      patch = int(rng, 2, 5)
    }
    return `${major}.${minor}.${patch}`
  }
  const bullet = (rng: Rng): string => {
    const area = pick(rng, AREAS)
    switch (pick(rng, ['fixed', 'fixed', 'crash', 'faster', 'errors', 'remembers', 'format', 'filter'])) {
      case 'fixed':
        return `- Fixed: ${area} no longer ${pick(rng, BAD)} when ${pick(rng, CONDITIONS)}.`
      case 'crash':
        return `- Fixed: a crash in ${area} when ${pick(rng, CONDITIONS)}.`
      case 'faster':
        return `- Improved: ${area} loads faster for accounts with many ${pick(rng, THINGS)}.`
      case 'errors':
        return `- Improved: clearer error messages in ${area}.`
      case 'remembers':
        return `- Changed: ${area} now remembers its ${pick(rng, SETTINGS)} between sessions.`
      case 'format':
        return `- Changed: ${area} uses the account's date format.`
      default:
        return `- Added: ${area} can now be filtered by ${pick(rng, FILTERS)}.`
    }
  }
  return {
    name: 'ledgerly-changelog.md',
    kind: 'changelog',
    format: 'md',
    seed: 5,
    words: 5400,
    paragraph: (rng, index) => {
      const version = nextVersion(rng)
      daysBack += int(rng, 6, 20)
      const heading = `## ${version} - ${isoDate(2024, 330 - daysBack)}`
      return { head: index === 0 ? `# Ledgerly changelog\n${heading}` : heading, entries: fillEntries(rng, () => bullet(rng)), joiner: '\n' }
    },
    asEntry: (sentence) => `- ${sentence}`,
    facts: [
      {
        at: 0.05,
        fact: 'Dark mode was removed from the mobile app because it made receipt photos unreadable.',
        question: 'Why is there no dark theme on mobile any more?',
        answer: ['receipt photos', 'unreadable'],
      },
      {
        at: 0.3,
        fact: 'Support for Windows 7 and macOS 10.13 was dropped in this release.',
        question: 'Which operating systems are no longer supported?',
        answer: ['Windows 7', 'macOS'],
      },
      {
        at: 0.5,
        fact: 'Exports to Xero now include the tracking categories that were lost in earlier versions.',
        question: 'What was added to the Xero export?',
        answer: ['tracking categories'],
      },
      {
        at: 0.72,
        fact: 'The bank feed for Monzo accounts was paused for two weeks while Monzo changed its API.',
        question: 'Why did the Monzo bank feed stop working?',
        answer: ['API', 'paused'],
      },
      {
        at: 0.95,
        fact: 'Two-factor login by SMS was replaced with authenticator apps after a SIM-swap attack on a customer.',
        question: 'Why was text-message two-factor login dropped?',
        answer: ['SIM-swap', 'authenticator'],
      },
    ],
    decoys: [
      { at: 0.4, sentence: 'Xero invoices now show the contact email address.' },
      { at: 0.6, sentence: 'The mobile app starts a third faster on older phones.' },
    ],
  }
}

function glidingFlightLog(): DocumentPlan {
  const PILOTS = ['J. Parry', 'S. Nwosu', 'A. Keane', 'R. Dalton', 'M. Fischer', 'L. Ortiz', 'T. Byrne']
  const GLIDERS = ['K-21 G-CKRT', 'K-13 G-DDVB', 'ASK-23 G-CHHX', 'Discus G-CFWK', 'Astir G-DEXT']
  const TWO_SEATERS = new Set(['K-21 G-CKRT', 'K-13 G-DDVB'])
  const WINDS = ['N', 'NE', 'E', 'SE', 'S', 'SW', 'W', 'NW']
  const TOPICS = ['circuit planning', 'launch failure drills', 'lookout and FLARM', 'choosing a landing field', 'radio calls']
  let day = 91 // 2 April 2022
  let flight = 0
  const entry = (rng: Rng): string => {
    const runway = pick(rng, ['09', '27', '33'])
    if (rng() < 0.15) {
      return rng() < 0.5 ? `Daily inspection of ${pick(rng, GLIDERS)} signed by ${pick(rng, PILOTS)}.` : `Briefing at 0900 covered ${pick(rng, TOPICS)}.`
    }
    flight++
    const winch = rng() < 0.7
    const launch = winch
      ? `winch launch on runway ${runway}, release ${int(rng, 9, 15) * 100} ft`
      : `aerotow behind G-BPZA, release ${pick(rng, [2000, 2500, 3000])} ft`
    const glider = pick(rng, GLIDERS)
    const p2 = TWO_SEATERS.has(glider) ? pick(rng, ['solo', 'P2 trial lesson', `P2 ${pick(rng, PILOTS)}`]) : 'solo'
    const landing = pick(rng, ['normal', 'on the main strip', 'near the hangar', `on runway ${runway}`])
    return `Flight ${flight}: ${glider}, P1 ${pick(rng, PILOTS)}, ${p2}, ${launch}, ${int(rng, 5, 95)} min, landed ${landing}.`
  }
  return {
    name: 'gliding-club-flight-log.txt',
    kind: 'flight-log',
    format: 'txt',
    seed: 22,
    words: 6000,
    paragraph: (rng, index) => {
      day += int(rng, 1, 6)
      flight = 0
      const first = `Flying day ${longDate(2022, day)}: wind ${pick(rng, WINDS)} ${int(rng, 3, 22)} kt, cloud base ${int(rng, 20, 60) * 100} ft, duty instructor ${pick(rng, PILOTS)}.`
      return {
        head: index === 0 ? 'WENVOE GLIDING CLUB - DAILY FLYING LOG, 2022 SEASON' : undefined,
        entries: fillEntries(rng, () => entry(rng), [first]),
        joiner: '\n',
      }
    },
    facts: [
      {
        at: 0.05,
        fact: "The winch cable broke at 300 feet on Ortiz's launch, and she landed straight ahead in the field beyond the runway.",
        question: 'What happened when the winch cable snapped?',
        answer: ['straight ahead', '300 feet'],
      },
      {
        at: 0.3,
        fact: "The club's longest flight of the season was 512 km by Fischer in the Discus, out to Shrewsbury and back.",
        question: 'What was the longest flight this season?',
        answer: ['512', 'Shrewsbury'],
      },
      {
        at: 0.5,
        fact: 'The Ka-8 G-DCUB was grounded after a crack was found in the left aileron hinge.',
        question: 'Why was the Ka-8 taken out of service?',
        answer: ['aileron', 'crack'],
      },
      {
        at: 0.72,
        fact: 'A red kite struck the canopy of G-CHHX on approach, scratching the perspex but causing no injury.',
        question: 'What hit the canopy?',
        answer: ['kite'],
      },
      {
        at: 0.93,
        fact: 'Trial lesson prices rose from 95 to 120 pounds to cover the higher cost of winch diesel.',
        question: 'Why did trial lessons become more expensive?',
        answer: ['diesel'],
      },
    ],
    decoys: [
      { at: 0.4, sentence: 'The winch cable was spliced and test-pulled before flying.' },
      { at: 0.8, sentence: 'Canopy covers were fitted before the gliders were put away.' },
    ],
  }
}

function staffHandbook(): DocumentPlan {
  const TOPICS = [
    'Working hours',
    'Rest breaks',
    'Absence reporting',
    'Overtime',
    'Uniform',
    'Training records',
    'Expenses',
    'Car parking',
    'Visitors',
    'Personal data',
    'Use of phones',
    'Smoking',
    'Lockers',
    'Grievances',
    'Appraisals',
    'Fire drills',
    'Jury service',
    'Flexible working',
    'Parental leave',
    'Pensions',
  ]
  const ACTIONS = [
    'tell their line manager',
    'check the rota on the noticeboard',
    'sign the attendance sheet',
    'read the relevant safe system of work',
    'complete the online form',
  ]
  const WHEN = ['before the start of each shift', 'as soon as possible', 'at least two weeks in advance', 'by the end of the working day']
  const MANAGER_ACTIONS = [
    'review the request',
    'confirm the arrangement in writing',
    'record the outcome on the HR system',
    'discuss the matter with the employee',
  ]
  const TIMEFRAMES = ['within five working days', 'at the next one-to-one', 'before the end of the month']
  const TEAMS = ['the HR team', 'your line manager', 'the site manager', 'the health and safety officer']
  const GROUPS = ['permanent', 'temporary', 'agency', 'office', 'warehouse']
  const CONSEQUENCES = ['an informal warning', 'the formal disciplinary procedure', 'the withdrawal of the benefit']
  let section = 1
  let sub = 0
  const sentence = (rng: Rng): string => {
    switch (pick(rng, ['employees', 'employees', 'managers', 'questions', 'applies', 'breaches', 'review'])) {
      case 'employees':
        return `Employees should ${pick(rng, ACTIONS)} ${pick(rng, WHEN)}.`
      case 'managers':
        return `Managers will ${pick(rng, MANAGER_ACTIONS)} ${pick(rng, TIMEFRAMES)}.`
      case 'questions':
        return `Questions about this section go to ${pick(rng, TEAMS)}.`
      case 'applies':
        return `This section applies to all ${pick(rng, GROUPS)} staff.`
      case 'breaches':
        return `Breaches of this section may lead to ${pick(rng, CONSEQUENCES)}.`
      default:
        return `The company reviews this section every ${pick(rng, [6, 12, 24])} months.`
    }
  }
  return {
    name: 'staff-handbook.txt',
    kind: 'handbook',
    format: 'txt',
    seed: 31,
    words: 5200,
    paragraph: (rng, index) => {
      sub++
      if (sub > 3) {
        section++
        sub = 1
      }
      const first = `Section ${section}.${sub} ${TOPICS[(section - 1) % TOPICS.length]}.`
      return { head: index === 0 ? 'NORTHMOOR FOODS - STAFF HANDBOOK' : undefined, entries: fillEntries(rng, () => sentence(rng), [first]), joiner: ' ' }
    },
    facts: [
      {
        at: 0.05,
        fact: 'Staff who cycle to work are given three extra days of holiday a year.',
        question: 'What do staff get if they cycle in?',
        answer: ['three extra days', 'holiday'],
      },
      {
        at: 0.3,
        fact: 'Night-shift workers are paid a premium of 18 percent on their basic hourly rate.',
        question: 'What is the night-shift premium?',
        answer: ['18 percent'],
      },
      {
        at: 0.5,
        fact: 'Lost security passes must be reported to Gatehouse Control within one hour.',
        question: 'Who should I tell if I lose my pass?',
        answer: ['Gatehouse'],
      },
      {
        at: 0.72,
        fact: 'Food handlers may not wear nail varnish, false nails or watches on the production floor.',
        question: 'What jewellery or cosmetics are food handlers forbidden to wear?',
        answer: ['nail', 'watches'],
      },
      {
        at: 0.93,
        fact: 'The staff canteen is run by Brightbowl Catering and opens at 6 am for the early shift.',
        question: 'Who runs the staff canteen?',
        answer: ['Brightbowl'],
      },
    ],
    decoys: [{ at: 0.6, sentence: 'Night-shift rotas are published on the first Monday of each month.' }],
  }
}

function orchardNotebook(): DocumentPlan {
  const VARIETIES = ['Cox', 'Gala', 'Bramley', 'Discovery', 'Egremont Russet']
  const ROOTSTOCKS = ['M9', 'M26', 'MM106', 'G41']
  const WEATHER = ['dry and bright', 'overcast', 'light rain', 'windy', 'frost early, then sunny']
  let day = 110 // 21 April 2021
  let row = 0
  let tree = 0
  const entry = (rng: Rng): string => {
    if (rng() < 0.12) {
      return rng() < 0.5 ? `Weather ${pick(rng, WEATHER)}, ${int(rng, 4, 26)} degrees.` : `Soil moisture ${int(rng, 12, 38)} percent at 30 cm depth.`
    }
    tree = tree % 12 === 0 ? 1 : tree + 1
    if (row === 3 && tree === 9) tree++ // tree 9 in row 3 is the one planted as lost
    const variety = VARIETIES[row % VARIETIES.length]!
    const rootstock = ROOTSTOCKS[tree % ROOTSTOCKS.length]!
    return `Tree ${tree} (${variety} on ${rootstock}): height ${decimal(rng, 1.6, 3.2, 2)} m, girth ${decimal(rng, 5, 14, 1)} cm, ${int(rng, 40, 260)} blossom clusters, scab ${int(rng, 0, 3)}, mildew ${int(rng, 0, 3)}.`
  }
  return {
    name: 'orchard-trial-notebook.txt',
    kind: 'lab-notebook',
    format: 'txt',
    seed: 41,
    words: 6400,
    paragraph: (rng, index) => {
      row = (row % 20) + 1
      tree = 0
      if (row === 1) day += int(rng, 10, 16)
      const first = `${longDate(2021, day)}, Block C, row ${row}.`
      return {
        head: index === 0 ? 'APPLE ROOTSTOCK TRIAL, BLOCK C - FIELD NOTEBOOK 2021' : undefined,
        entries: fillEntries(rng, () => entry(rng), [first]),
        joiner: ' ',
      }
    },
    facts: [
      {
        at: 0.05,
        fact: 'Tree 9 in row 3 was lost when a hare stripped the bark all the way round its trunk.',
        question: 'What killed tree 9 in row 3?',
        answer: ['hare', 'bark'],
      },
      {
        at: 0.3,
        fact: 'Trees on the G41 rootstock flowered nine days earlier than those on M9.',
        question: 'How much sooner did the G41 trees blossom?',
        answer: ['nine days'],
      },
      {
        at: 0.5,
        fact: 'The irrigation pump failed in the May heatwave, and rows 10 to 14 went without water for six days.',
        question: 'Which rows went dry when the irrigation broke down?',
        answer: ['10 to 14', 'six days'],
      },
      {
        at: 0.72,
        fact: 'Fireblight was confirmed in two Bramley trees, which were burned on site the same week.',
        question: 'What was done with the trees that had fireblight?',
        answer: ['burned'],
      },
      {
        at: 0.93,
        fact: "Across all rootstocks, last season's heaviest crop came from Spartan on M26, at 41 tonnes per hectare.",
        question: 'Which variety gave the biggest crop?',
        answer: ['Spartan', '41 tonnes'],
      },
    ],
    decoys: [{ at: 0.62, sentence: 'The irrigation lines in rows 1 to 5 were flushed through.' }],
  }
}

const DOCUMENT_PLANS: (() => DocumentPlan)[] = [
  harbourRecords,
  paymentsIncidentLog,
  pressManual,
  councilMinutes,
  sdkReference,
  warehouseLease,
  centrifugeProcedure,
  shipLog,
  productChangelog,
  glidingFlightLog,
  staffHandbook,
  orchardNotebook,
]
