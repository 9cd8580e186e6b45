/** POST /v1/rerank (and /v1/reranking, llama.cpp's other name for it): the body checked, scored by the pipeline, ordered. */
import { Router } from 'express'
import { requireJsonBody } from '../../http/json-body.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import { parseRerankRequest, planRerank, rerankResponse } from './rerank.ts'
import type { ServerContext } from '../../server-context.ts'

export function rerankRoute(ctx: ServerContext): Router {
  const router = Router()
  router.post(['/rerank', '/reranking'], requireJsonBody, async (req, res) => {
    const request = parseRerankRequest(req.body)
    const model = await requireModel(ctx.folder, request.model)
    const job = planRerank(request, model)
    await ctx.pipeline.within(res, (signal) =>
      ctx.pipeline.answer(res, model, job, { whole: (result) => rerankResponse(model.id, request, job, result) }, signal),
    )
  })
  return router
}
