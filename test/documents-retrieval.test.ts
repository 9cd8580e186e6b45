/**
 * A document longer than the chat model's context, on a real trained embedding model
 * (all-MiniLM-L6-v2, main/cli/real-models): the question is answered from the part that holds the
 * answer, retrieved first and cited as [1], across two documents; then a trained chat model
 * (SmolLM2-135M-Instruct, its context cut to 2,048) answers the question from that part, sent as
 * the chat page sends it.
 */
import { copyFileSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { documentsPrompt } from '../renderer/src/lib/services/document-context.ts'
import { realModel } from './support/real-models.ts'
import { postJson, startTestServer, type TestServer } from './support/server-process.ts'
import { writeTinyLlama } from './support/tiny-models.ts'

const modelPath = realModel('all-minilm-l6-v2-f16')
const EMBEDDER = 'all-minilm-l6-v2'
// A trained chat model to answer from the retrieved part; its context is cut to 2,048 so the manual does not fit whole.
const chatModelPath = realModel('smollm2-135m-instruct-q4_1')

const TOPICS = [
  'The old railway bridge crosses the river on nine stone arches. Engineers inspect the mortar every spring, and trains slow to walking pace while they work.',
  'Sourdough bread rises slowly because wild yeast is weaker than baker’s yeast. A starter fed twice a day with flour and water keeps for years.',
  'Jupiter has more than ninety known moons. The four largest were seen by Galileo in 1610 through a telescope that magnified only twenty times.',
  'In chess, castling moves the king two squares towards a rook, which then jumps over it. Neither piece may have moved before, and the king may not pass through check.',
  'Tomatoes need at least six hours of sun a day. Water them at the roots in the morning, so the leaves dry before evening and blight has less chance.',
  'The tax return is due at the end of January. Late filing costs a fixed penalty, and interest is charged on any tax paid after the deadline.',
  'A marathon is 42.195 kilometres long. The distance was fixed at the 1908 London Olympics so that the race could start at Windsor Castle.',
  'Honeybees tell each other where flowers are with a waggle dance. The angle of the dance gives the direction relative to the sun, its length the distance.',
]
const FACT = 'The lantern festival in the village of Brindlemoor is held every year on the third Saturday of October, and all its lanterns are painted cobalt blue.'

/** 48 paragraphs on other things, with the fact as paragraph 31: far more than half of a 2,048-token context. */
function manual(): string {
  const paragraphs = Array.from({ length: 48 }, (_, i) => `${TOPICS[i % TOPICS.length]} (Section ${i + 1}.)`)
  paragraphs[30] = FACT
  return paragraphs.join('\n\n')
}

describe.skipIf(!modelPath)('documents over the context, retrieved with all-MiniLM-L6-v2', () => {
  let server: TestServer
  let dataDir: string

  beforeAll(async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-documents-real-'))
    dataDir = mkdtempSync(join(tmpdir(), 'hearth-documents-data-'))
    copyFileSync(modelPath!, join(modelsDir, `${EMBEDDER}.gguf`))
    writeTinyLlama(join(modelsDir, 'chat.gguf'), { contextLength: 2048 })
    if (chatModelPath) {
      copyFileSync(chatModelPath, join(modelsDir, 'smollm.gguf'))
      writeFileSync(join(modelsDir, 'models.json'), JSON.stringify({ models: [{ id: 'smollm', file: 'smollm.gguf', context_length: 2048 }] }))
    }
    server = await startTestServer({ modelsDir, dataDir })
  })

  afterAll(async () => {
    await server?.stop()
  })

  async function upload(name: string, text: string): Promise<{ id: string; characters: number }> {
    const form = new FormData()
    form.append('file', new Blob([text]), name)
    const res = await fetch(`${server.url}/api/documents`, { method: 'POST', headers: { authorization: `Bearer ${server.apiKey}` }, body: form })
    expect(res.status).toBe(201)
    return (await res.json()) as { id: string; characters: number }
  }

  it('a document over the context is answered from its retrieved part, with a citation', async () => {
    const long = await upload('manual.txt', manual())
    const other = await upload('recipes.md', '# Recipes\n\nPancakes need flour, eggs and milk. Rest the batter for half an hour before frying.')
    const ask = () =>
      postJson(server, '/api/documents/context', { model: 'chat', documents: [other.id, long.id], query: 'When is the Brindlemoor lantern festival held?', messages_tokens: 50 })
    const started = performance.now()
    const res = await ask()
    const firstMs = performance.now() - started
    expect(res.status, JSON.stringify(res.json)).toBe(200)
    expect(res.json.mode).toBe('retrieved')
    expect(res.json.embedding_model).toBe(EMBEDDER)
    const [best, ...rest] = res.json.parts
    console.log(`best part (score ${best.score}) of ${res.json.parts.length}: ${JSON.stringify(best.text.slice(0, 120))}…; next score ${rest[0]?.score}; ${Math.round(firstMs)} ms`)
    expect(best).toMatchObject({ citation: 1, document: long.id, name: 'manual.txt' })
    expect(best.text).toContain(FACT)
    expect(manual().slice(best.start, best.end)).toBe(best.text)
    for (const part of rest) expect(part.score).toBeLessThan(best.score)
    expect(res.json.parts.map((p: { citation: number }) => p.citation)).toEqual(res.json.parts.map((_: unknown, i: number) => i + 1))

    // The chunks' embeddings are kept beside the document: asked again, only the question is embedded.
    expect(readdirSync(join(dataDir, 'documents', long.id)).filter((f) => f.startsWith('embeddings-'))).toHaveLength(1)
    const again = await ask()
    expect(again.json).toEqual(res.json)
  })

  it.skipIf(!chatModelPath)('a trained chat model answers from the retrieved part, as the chat sends it', async () => {
    const long = await upload('manual.txt', manual())
    const question = 'On which day is the Brindlemoor lantern festival held?'
    const context = await postJson(server, '/api/documents/context', { model: 'smollm', documents: [long.id], query: question, messages_tokens: 50 })
    expect(context.json.mode).toBe('retrieved')
    const answer = await postJson(server, '/v1/chat/completions', {
      model: 'smollm',
      // Without a system message its template writes its own, after which this 135M model rambles (test/real-chat.test.ts).
      messages: [
        { role: 'system', content: 'Answer in one short sentence.' },
        { role: 'user', content: documentsPrompt(context.json.parts, question) },
      ],
      temperature: 0,
      max_tokens: 40,
    })
    expect(answer.status, answer.text).toBe(200)
    const text: string = answer.json.choices[0].message.content
    console.log(`SmolLM2-135M answered: ${JSON.stringify(text)}`)
    expect(text.toLowerCase()).toMatch(/third saturday|october/)
  })

  it('a short document goes whole, without an embedding model', async () => {
    const short = await upload('note.txt', FACT)
    const res = await postJson(server, '/api/documents/context', { model: 'chat', documents: [short.id], query: 'When is the festival?' })
    expect(res.json).toEqual({ mode: 'whole', embedding_model: null, parts: [{ citation: 1, document: short.id, name: 'note.txt', text: FACT, start: 0, end: FACT.length }] })
  })
})
