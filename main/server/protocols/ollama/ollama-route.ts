/**
 * Ollama's API (`/api/chat`, `/api/generate`, `/api/embed`, `/api/tags`, `/api/show`, `/api/ps`,
 * `/api/pull`, `/api/create`, …) on Hearth's models, scheduler, engines and prompt cache: inference
 * through the same answer pipeline as `/v1` (ollama-inference-route.ts), model management apart
 * (ollama-models-route.ts), in Ollama's shapes, its NDJSON streams and its errors. Mounted under
 * `/api` on Hearth's port (a key needed, like every route) and on the Ollama port (loopback only,
 * where a program may come without a key: see docs/security.md).
 */
import { Router, type RequestHandler } from 'express'
import type { ServerContext } from '../../server-context.ts'
import { ollamaInferenceRoute } from './ollama-inference-route.ts'
import { ollamaModelsRoute } from './ollama-models-route.ts'

/** The paths of Ollama's API under `/api`, for the error shape and the Ollama port. */
export const OLLAMA_API_PATHS = [
  '/version',
  '/tags',
  '/show',
  '/ps',
  '/chat',
  '/generate',
  '/embed',
  '/embeddings',
  '/pull',
  '/push',
  '/delete',
  '/copy',
  '/create',
  '/blobs/:digest',
  '/me',
  '/signout',
  '/status',
]

/**
 * `auth` checks the key (or lets a keyless program in, on the Ollama port); `body` reads JSON
 * whatever its content type says, as Ollama does.
 */
export function ollamaRoute(ctx: ServerContext, auth: RequestHandler, body: RequestHandler): Router {
  const json = [auth, body]
  return Router().use(ollamaInferenceRoute(ctx, json), ollamaModelsRoute(ctx, auth, json))
}
