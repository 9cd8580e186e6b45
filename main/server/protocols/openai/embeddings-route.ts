/** POST /v1/embeddings: validate → plan → run on the model's engine → answer. */
import { Router } from 'express'
import { embeddingsResponse } from './embeddings-response.ts'
import { parseEmbeddingsRequest, planEmbeddings } from './embeddings-request.ts'
import { requireJsonBody } from '../../http/json-body.ts'
import { recordUsage } from '../../services/keys/key-quotas.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import { requestLifetime } from '../../services/pipeline/request-lifetime.ts'
import type { ServerContext } from '../../server-context.ts'

export function embeddingsRoute(ctx: ServerContext): Router {
  const router = Router()
  router.post('/embeddings', requireJsonBody, async (req, res) => {
    const request = parseEmbeddingsRequest(req.body)
    const model = await requireModel(ctx.folder, request.model)
    const plan = planEmbeddings(request, model)
    res.locals.model = model.id
    const lifetime = requestLifetime(res, ctx.settings.requestTimeoutMs)
    try {
      const result = await ctx.scheduler.run(model, plan.job, { signal: lifetime.signal })
      recordUsage(res, { promptTokens: result.promptTokens })
      res.json(embeddingsResponse(model.id, result, plan.encodingFormat))
    } catch (e) {
      throw lifetime.explain(e)
    } finally {
      lifetime.dispose()
    }
  })
  return router
}
