/** POST /v1/completions: validate → plan → run each prompt on the model's engine → answer or stream. */
import { randomBytes } from 'node:crypto'
import { Router } from 'express'
import type { CompleteResult } from '../../../../engines/engine-jobs.ts'
import type { CompletionIdentity } from './chat-response.ts'
import { parseCompletionsRequest, planCompletions } from './completions-request.ts'
import { CompletionStreamWriter, textCompletion, type CompletionStreamChunk } from './completions-response.ts'
import { recordUsage } from '../../services/keys/key-quotas.ts'
import { requireJsonBody } from '../../http/json-body.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import { requestLifetime } from '../../services/pipeline/request-lifetime.ts'
import type { ServerContext } from '../../server-context.ts'
import { SseStream } from '../../http/sse.ts'

export function completionsRoute(ctx: ServerContext): Router {
  const router = Router()
  router.post('/completions', requireJsonBody, async (req, res) => {
    const request = parseCompletionsRequest(req.body)
    const model = await requireModel(ctx.folder, request.model)
    const plan = planCompletions(request, model)
    res.locals.model = model.id
    const who: CompletionIdentity = { id: `cmpl-${randomBytes(12).toString('base64url')}`, created: Math.floor(Date.now() / 1000), model: model.id }
    const lifetime = requestLifetime(res, ctx.settings.requestTimeoutMs)
    try {
      if (!plan.stream) {
        const results: CompleteResult[] = []
        // The prompts of one request run one after another, each with the model's whole context.
        for (const job of plan.jobs) {
          const result = await ctx.scheduler.run(model, job, { signal: lifetime.signal })
          recordUsage(res, result)
          results.push(result)
        }
        res.json(textCompletion(who, results, plan.echoed))
        return
      }
      const sse = new SseStream(res)
      const writer = new CompletionStreamWriter(who, plan.includeUsage, plan.echoed?.[0])
      const send = (chunks: CompletionStreamChunk[]) => chunks.forEach((c) => sse.send(c))
      send(writer.start())
      const result = await ctx.scheduler.run(model, plan.jobs[0]!, { signal: lifetime.signal, onProgress: (p) => send(writer.progress(p)) })
      recordUsage(res, result)
      send(writer.finish(result))
      sse.done()
    } catch (e) {
      throw lifetime.explain(e)
    } finally {
      lifetime.dispose()
    }
  })
  return router
}
