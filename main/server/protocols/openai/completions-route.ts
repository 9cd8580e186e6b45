/** POST /v1/completions: the body checked, then each prompt through the answer pipeline; whole or streamed. */
import { randomBytes } from 'node:crypto'
import { Router } from 'express'
import type { CompleteResult } from '../../../../engines/engine-jobs.ts'
import type { CompletionIdentity } from './chat-response.ts'
import { parseCompletionsRequest, planCompletions } from './completions-request.ts'
import { CompletionStreamWriter, textCompletion } from './completions-response.ts'
import { requireJsonBody } from '../../http/json-body.ts'
import { sseEvents } from '../../http/sse.ts'
import { streamOf } from '../../services/pipeline/answer-pipeline.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import type { ServerContext } from '../../server-context.ts'

export function completionsRoute(ctx: ServerContext): Router {
  const router = Router()
  router.post('/completions', requireJsonBody, async (req, res) => {
    const request = parseCompletionsRequest(req.body)
    const model = await requireModel(ctx.folder, request.model)
    const plan = planCompletions(request, model)
    const who: CompletionIdentity = { id: `cmpl-${randomBytes(12).toString('base64url')}`, created: Math.floor(Date.now() / 1000), model: model.id }
    await ctx.pipeline.within(res, async (signal) => {
      if (plan.stream) {
        const writer = new CompletionStreamWriter(who, plan.includeUsage, plan.echoed?.[0])
        await ctx.pipeline.answer(
          res,
          model,
          plan.jobs[0]!,
          streamOf(() => sseEvents(res, 'done'), writer),
          signal,
        )
        return
      }
      // The prompts of one request run one after another, each with the model's whole context.
      const results: CompleteResult[] = []
      for (const job of plan.jobs) results.push(await ctx.pipeline.run(res, model, job, signal))
      res.json(textCompletion(who, results, plan.echoed))
    })
  })
  return router
}
