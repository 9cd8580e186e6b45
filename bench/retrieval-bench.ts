/**
 * Retrieval over long documents (issue 52): the corpus of bench/retrieval/corpus.ts (long documents
 * of several kinds, each question with the one sentence its answer needs) asked through
 * `/v1/responses` with `input_file` and `include: ["file_search_call.results"]`, as a client does,
 * on the trained models `npm run models:fetch` gives: all-MiniLM-L6-v2 retrieves, SmolLM2-135M-Instruct
 * (its context cut to 2,048) answers. For each way of finding parts (embeddings alone, keywords
 * alone, both fused: Hearth's `HEARTH_RETRIEVAL`) it prints the share of questions whose fact was
 * among the parts the model was given, and the share of answers that name it (and, of those, cite
 * the passage that holds it); the same with nomic-embed-text where HEARTH_BENCH_NOMIC_EMBED names
 * its GGUF. And what embedding the documents costs with today's part size against the 200-token
 * parts used before.
 *
 * Target: the fact among the given parts for ≥ 95 % of questions with MiniLM (the hybrid), and the
 * documents embedded no slower than with the old parts.
 */
import { linkSync, copyFileSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { documentParts } from '../main/server/services/documents/document-embeddings.ts'
import type { RetrievalMethod } from '../main/server/services/documents/document-retrieval.ts'
import { realModel } from '../test/support/real-models/real-model.ts'
import { startTestServer, type TestServer } from '../test/support/server-process.ts'
import { fmt, median } from './bench-server.ts'
import { CLIENT_CORES, pinEngines, pinProcess } from './cores.ts'
import { documentBytes, retrievalCorpus, type CorpusQuestion } from './retrieval/corpus.ts'

const EMBEDDER = 'all-minilm-l6-v2'
const CHAT = 'smollm'
const METHODS: RetrievalMethod[] = ['embeddings', 'keywords', 'hybrid']
/** The part size before issue 52 (MiniLM with a 2,048-token chat model), and today's. */
const OLD_PART_TOKENS = 200
const PART_TOKENS = 80
const INPUTS_PER_JOB = 32

/** A models folder with the chat model, its context cut to 2,048, and one embedding model. */
export function modelsWith(chat: string, embedderId: string, embedder: string): string {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-retrieval-bench-models-'))
  linkOrCopy(embedder, join(modelsDir, `${embedderId}.gguf`))
  linkOrCopy(chat, join(modelsDir, `${CHAT}.gguf`))
  writeFileSync(
    join(modelsDir, 'models.json'),
    JSON.stringify({
      models: [
        { id: CHAT, file: `${CHAT}.gguf`, context_length: 2048 },
        { id: embedderId, file: `${embedderId}.gguf` },
      ],
    }),
  )
  return modelsDir
}

/** Each way of finding parts on its own server: the share of facts among the given parts, of answers naming them, and of those citing them. */
export async function measureMethods(modelsDir: string, methods: RetrievalMethod[], answers: boolean): Promise<Record<string, number>> {
  const { documents, questions } = retrievalCorpus()
  const results: Record<string, number> = {}
  for (const method of methods) {
    const server = await startTestServer({ modelsDir, threads: 1, env: { HEARTH_RETRIEVAL: method }, args: ['--request-timeout', '3600'] })
    try {
      pinProcess(server.process.pid!, CLIENT_CORES)
      const ids = new Map<string, string>()
      for (const d of documents) ids.set(d.name, await upload(server, d.name, documentBytes(d)))
      let pinned = false
      const outcomes: Outcome[] = []
      for (const q of questions) {
        outcomes.push(await ask(server, ids.get(q.document)!, q, answers))
        if (!pinned) pinned = pinEngines(server.process.pid!).length > 0
      }
      const found = outcomes.filter((o) => o.found).length / outcomes.length
      const named = outcomes.filter((o) => o.named).length / outcomes.length
      const cited = outcomes.filter((o) => o.cited).length / Math.max(1, outcomes.filter((o) => o.named).length)
      const parts = median(outcomes.map((o) => o.parts))
      console.log(
        `  ${method.padEnd(12)} fact among the given parts ${pct(found)}${answers ? `   answer names the fact ${pct(named)}, of those citing the passage that holds it ${pct(cited)}` : ''}   (${parts} passages given, median)`,
      )
      results[`${method}_found`] = found
      if (answers) Object.assign(results, { [`${method}_named`]: named, [`${method}_cited`]: cited })
    } finally {
      await server.stop()
    }
  }
  return results
}

interface Outcome {
  found: boolean
  named: boolean
  /** The answer names the fact and a file citation of it quotes the passage that holds it. */
  cited: boolean
  parts: number
}

export async function runRetrievalBench({ runs, answers = true }: { runs: number; answers?: boolean }): Promise<Record<string, number>> {
  const embedder = realModel('all-minilm-l6-v2-f16')
  const chat = realModel('smollm2-135m-instruct-q4_1')
  if (!embedder || !chat) throw new Error('the retrieval bench needs the trained models: npm run models:fetch')
  const { documents, questions } = retrievalCorpus()
  console.log(
    `\n# Retrieval: ${questions.length} questions over ${documents.length} long documents (${[...new Set(documents.map((d) => d.format))].join(', ')}), SmolLM2-135M-Instruct (2,048 context) answering, 1 thread`,
  )

  const results: Record<string, number> = {}
  const modelsDir = modelsWith(chat, EMBEDDER, embedder)
  console.log('all-MiniLM-L6-v2 retrieving:')
  Object.assign(results, await measureMethods(modelsDir, METHODS, answers))
  // Nomic's model where the person has it (its id names it, so it gets its search prefixes).
  const nomic = process.env.HEARTH_BENCH_NOMIC_EMBED
  if (nomic) {
    console.log(`nomic-embed-text retrieving (${nomic}):`)
    const measured = await measureMethods(modelsWith(chat, 'nomic-embed-text', nomic), ['embeddings', 'hybrid'], answers)
    for (const [key, value] of Object.entries(measured)) results[`nomic_${key}`] = value
  } else console.log('(set HEARTH_BENCH_NOMIC_EMBED to a nomic-embed-text GGUF to measure it too)')

  Object.assign(results, await measureEmbedding(modelsDir, runs))
  return results
}

/** What embedding the corpus costs with today's parts against the old ones: the same batches DocumentEmbeddings sends, interleaved. */
export async function measureEmbedding(modelsDir: string, runs: number): Promise<Record<string, number>> {
  const { documents } = retrievalCorpus()
  const server = await startTestServer({ modelsDir, threads: 1 })
  try {
    pinProcess(server.process.pid!, CLIENT_CORES)
    await embed(server, ['warm up'])
    pinEngines(server.process.pid!)
    const seconds = async (tokens: number) => {
      const started = performance.now()
      for (const d of documents) {
        const texts = documentParts(d.text, tokens).map((c) => d.text.slice(c.start, c.end))
        for (let i = 0; i < texts.length; i += INPUTS_PER_JOB) await embed(server, texts.slice(i, i + INPUTS_PER_JOB))
      }
      return (performance.now() - started) / 1000
    }
    const old: number[] = []
    const now: number[] = []
    for (let run = 0; run < Math.max(1, Math.ceil(runs / 2)); run++) {
      old.push(await seconds(OLD_PART_TOKENS))
      now.push(await seconds(PART_TOKENS))
    }
    const words = documents.reduce((n, d) => n + d.text.split(/\s+/).length, 0)
    console.log(
      `embedding the ${documents.length} documents (${words.toLocaleString('en')} words): parts of ${PART_TOKENS} tokens ${fmt(median(now))} s, of ${OLD_PART_TOKENS} (before) ${fmt(median(old))} s: ${fmt(median(old) / median(now), 2)}× (target ≥ 0.95)`,
    )
    return { embed_seconds: median(now), embed_seconds_old: median(old) }
  } finally {
    await server.stop()
  }
}

async function upload(server: TestServer, name: string, bytes: Buffer): Promise<string> {
  const form = new FormData()
  form.set('purpose', 'user_data')
  form.set('file', new Blob([new Uint8Array(bytes)]), name)
  const res = await fetch(`${server.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${server.apiKey}` }, body: form })
  if (!res.ok) throw new Error(`uploading ${name}: ${res.status} ${await res.text()}`)
  return ((await res.json()) as { id: string }).id
}

async function ask(server: TestServer, fileId: string, q: CorpusQuestion, answers: boolean): Promise<Outcome> {
  const res = await fetch(`${server.url}/v1/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: CHAT,
      instructions: 'Answer in one short sentence.',
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_file', file_id: fileId },
            { type: 'input_text', text: q.question },
          ],
        },
      ],
      include: ['file_search_call.results'],
      temperature: 0,
      max_output_tokens: answers ? 48 : 1,
    }),
  })
  if (!res.ok) throw new Error(`asking "${q.question}": ${res.status} ${await res.text()}`)
  type Text = { type: string; text: string; annotations?: Array<{ type: string; quote?: string }> }
  const response = (await res.json()) as { output: Array<{ type: string; results?: Array<{ text: string }>; content?: Text[] }> }
  const given = response.output.find((o) => o.type === 'file_search_call')?.results ?? []
  const texts = response.output.flatMap((o) => (o.type === 'message' ? (o.content ?? []) : []))
  const answer = texts
    .map((c) => c.text)
    .join(' ')
    .toLowerCase()
  const holdsFact = (text: string | undefined) => text !== undefined && collapse(text).includes(collapse(q.fact))
  const named = q.answer.some((word) => answer.includes(word.toLowerCase()))
  return {
    found: given.some((part) => holdsFact(part.text)),
    named,
    cited: named && texts.some((c) => (c.annotations ?? []).some((a) => a.type === 'file_citation' && holdsFact(a.quote))),
    parts: given.length,
  }
}

async function embed(server: TestServer, input: string[]): Promise<void> {
  const res = await fetch(`${server.url}/v1/embeddings`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: EMBEDDER, input }),
  })
  if (!res.ok) throw new Error(`embedding: ${res.status} ${await res.text()}`)
  await res.arrayBuffer()
}

const collapse = (text: string) => text.replace(/\s+/g, ' ').trim()
const pct = (share: number) => `${(share * 100).toFixed(0)} %`.padStart(5)

function linkOrCopy(from: string, to: string): void {
  try {
    linkSync(from, to)
  } catch {
    copyFileSync(from, to)
  }
}
