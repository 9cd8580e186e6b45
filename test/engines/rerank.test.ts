/**
 * POST /v1/rerank on a tiny random reranker of ours (an encoder with rank pooling and a
 * classification head, recognised from its header): results ordered by relevance with their
 * index, top_n, return_documents; its scores are the engine's own, so the same pair always scores
 * the same; rerankers are refused elsewhere and other models here, with 400 model_not_compatible.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { postJson, startTestServer, type TestServer } from '../support/server-process.ts'
import { writeTinyBert, writeTinyLlama } from '../support/tiny-models.ts'
import { llamaBuild } from '../support/upstream-servers.ts'
import { cannotRun, describeIf } from '../support/skips.ts'

if (!llamaBuild) cannotRun('llama.cpp is not built on this machine (npm run build:engines); the rerank suite cannot run')

const documents = ['the river runs to the sea', 'a tree grows by the house', 'the sea is deep and blue', 'music in the city at night']

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('/v1/rerank', () => {
  let server: TestServer

  beforeAll(async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-rerank-'))
    writeTinyBert(join(modelsDir, 'reranker.gguf'), { reranker: true })
    writeTinyBert(join(modelsDir, 'bert.gguf'))
    writeTinyLlama(join(modelsDir, 'chat.gguf'), { contextLength: 256 })
    server = await startTestServer({ modelsDir })
  })

  afterAll(async () => {
    await server?.stop()
  })

  const rerank = (body: Record<string, unknown>) => postJson(server, '/v1/rerank', { model: 'reranker', query: 'where is the sea', documents, ...body })

  it('is listed with the rerank capability, and nothing else', async () => {
    const res = await fetch(`${server.url}/v1/models/reranker`, { headers: { authorization: `Bearer ${server.apiKey}` } })
    expect((await res.json()).capabilities).toEqual(['rerank'])
  })

  it('orders every document by relevance, each with its index', async () => {
    const res = await rerank({})
    expect(res.status, res.text).toBe(200)
    const results = res.json.results as Array<{ index: number; relevance_score: number }>
    expect(results.map((r) => r.index).sort()).toEqual([0, 1, 2, 3])
    for (let i = 1; i < results.length; i++) expect(results[i - 1]!.relevance_score).toBeGreaterThanOrEqual(results[i]!.relevance_score)
    expect(res.json.usage.prompt_tokens).toBeGreaterThan(10)
    expect(res.json).toMatchObject({ object: 'list', model: 'reranker' })
  })

  it('scores a pair the same wherever it stands, and takes {text} documents too', async () => {
    const all = (await rerank({})).json.results as Array<{ index: number; relevance_score: number }>
    const alone = await rerank({ documents: [{ text: documents[2] }] })
    expect(alone.json.results[0].relevance_score).toBeCloseTo(all.find((r) => r.index === 2)!.relevance_score, 4)
  })

  it('top_n keeps the best; return_documents gives their text', async () => {
    const all = (await rerank({})).json.results as Array<{ index: number }>
    const top = await rerank({ top_n: 2, return_documents: true })
    expect(top.json.results).toHaveLength(2)
    expect(top.json.results.map((r: { index: number }) => r.index)).toEqual(all.slice(0, 2).map((r) => r.index))
    for (const r of top.json.results) expect(r.document).toEqual({ text: documents[r.index] })
  })

  it.each([
    ['no query', { query: undefined }, 'query', 'missing_required_parameter'],
    ['an empty query', { query: '' }, 'query', 'invalid_value'],
    ['no documents', { documents: [] }, 'documents', 'invalid_value'],
    ['an empty document', { documents: ['a', ''] }, 'documents[1]', 'invalid_value'],
    ['a document that is a number', { documents: ['a', 5] }, 'documents[1]', 'invalid_value'],
    ['top_n of 0', { top_n: 0 }, 'top_n', 'invalid_value'],
    ['a chat model', { model: 'chat' }, 'model', 'model_not_compatible'],
    ['an embedding model', { model: 'bert' }, 'model', 'model_not_compatible'],
    ['a document longer than the context', { documents: ['the sea '.repeat(400)] }, 'documents[0]', 'context_length_exceeded'],
  ])('%s is a 400 naming the field', async (_name, body, param, code) => {
    const res = await rerank(body)
    expect(res.status, res.text).toBe(400)
    expect(res.json.error).toMatchObject({ param, code, type: 'invalid_request_error' })
  })

  it('refuses the reranker on the chat and embeddings routes', async () => {
    const chat = await postJson(server, '/v1/chat/completions', { model: 'reranker', messages: [{ role: 'user', content: 'hi' }] })
    expect(chat.json.error).toMatchObject({ code: 'model_not_compatible', param: 'model' })
    const embeddings = await postJson(server, '/v1/embeddings', { model: 'reranker', input: 'hi' })
    expect(embeddings.json.error).toMatchObject({ code: 'model_not_compatible', param: 'model' })
  })
})
