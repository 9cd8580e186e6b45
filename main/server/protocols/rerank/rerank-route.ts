/** POST /v1/rerank (and /v1/reranking, llama.cpp's other name for it): validate → score → order. */
import { Router } from 'express'
import { recordUsage } from '../../services/keys/key-quotas.ts'
import { requireJsonBody } from '../../http/json-body.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import { parseRerankRequest, planRerank, rerankResponse } from './rerank.ts'
import { requestLifetime } from '../../services/pipeline/request-lifetime.ts'
import type { ServerContext } from '../../server-context.ts'

export function rerankRoute(ctx: ServerContext): Router {
  const router = Router()
  router.post(['/rerank', '/reranking'], requireJsonBody, async (req, res) => {
    const request = parseRerankRequest(req.body)
    const model = await requireModel(ctx.folder, request.model)
    const job = planRerank(request, model)
    res.locals.model = model.id
    const lifetime = requestLifetime(res, ctx.settings.requestTimeoutMs)
    try {
      const result = await ctx.scheduler.run(model, job, { signal: lifetime.signal })
      recordUsage(res, { promptTokens: result.promptTokens })
      res.json(rerankResponse(model.id, request, job, result))
    } catch (e) {
      throw lifetime.explain(e)
    } finally {
      lifetime.dispose()
    }
  })
  return router
}
