/** POST /v1/completions: validate → plan → run each prompt on the model's engine → answer or stream. */
import { randomBytes } from 'node:crypto'
import { Router } from 'express'
import type { CompleteResult } from '../../../native-models/engine/engine-protocol.ts'
import type { CompletionIdentity } from '../openai/chat-response.ts'
import { parseCompletionsRequest, planCompletions } from '../openai/completions-request.ts'
import { completionChunk, completionsUsage, legacyLogprobs, textCompletion } from '../openai/completions-response.ts'
import { recordUsage } from '../key-quotas.ts'
import { requireJsonBody } from '../json-body.ts'
import { requireModel } from '../model-lookup.ts'
import { requestLifetime } from '../request-lifetime.ts'
import type { ServerContext } from '../server-context.ts'
import { SseStream } from '../sse.ts'

export function completionsRoute(ctx: ServerContext): Router {
  const router = Router()
  router.post('/completions', requireJsonBody, async (req, res) => {
    const request = parseCompletionsRequest(req.body)
    const model = await requireModel(ctx.folder, request.model)
    const plan = planCompletions(request, model)
    res.locals.model = model.id
    const who: CompletionIdentity = { id: `cmpl-${randomBytes(12).toString('base64url')}`, created: Math.floor(Date.now() / 1000), model: model.id }
    const echo = request.echo === true
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
        res.json(textCompletion(who, plan.prompts, results, echo))
        return
      }
      const sse = new SseStream(res)
      let offset = echo ? plan.prompts[0]!.length : 0
      if (echo) sse.send(completionChunk(who, plan.prompts[0]!, null, plan.includeUsage))
      const result = await ctx.scheduler.run(model, plan.jobs[0]!, {
        signal: lifetime.signal,
        onProgress: (p) => {
          if (p.type !== 'text') return
          const logprobs = p.logprobs ? legacyLogprobs(p.logprobs, offset) : null
          offset += p.text.length
          sse.send(completionChunk(who, p.text, null, plan.includeUsage, logprobs))
        },
      })
      recordUsage(res, result)
      sse.send(completionChunk(who, '', result.finishReason, plan.includeUsage))
      if (plan.includeUsage) sse.send({ id: who.id, object: 'text_completion', created: who.created, model: who.model, choices: [], usage: completionsUsage([result]) })
      sse.done()
    } catch (e) {
      throw lifetime.explain(e)
    } finally {
      lifetime.dispose()
    }
  })
  return router
}
