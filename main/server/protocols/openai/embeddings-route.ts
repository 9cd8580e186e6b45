/** POST /v1/embeddings: the body checked, then the answer pipeline. */
import { Router } from 'express'
import { embeddingsResponse } from './embeddings-response.ts'
import { parseEmbeddingsRequest, planEmbeddings } from './embeddings-request.ts'
import { requireJsonBody } from '../../http/json-body.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import type { ServerContext } from '../../server-context.ts'

export function embeddingsRoute(ctx: ServerContext): Router {
  const router = Router()
  router.post('/embeddings', requireJsonBody, async (req, res) => {
    const request = parseEmbeddingsRequest(req.body)
    const model = await requireModel(ctx.folder, request.model)
    const plan = planEmbeddings(request, model)
    await ctx.pipeline.within(res, (signal) =>
      ctx.pipeline.answer(res, model, plan.job, { whole: (result) => embeddingsResponse(model.id, result, plan.encodingFormat) }, signal),
    )
  })
  return router
}
