/**
 * The HTTP application, built without listening so tests and the desktop app can mount it as they
 * need. Routers per area; auth before bodies are read; one JSON 404 and one error handler last.
 */
import { join } from 'node:path'
import express, { type Express } from 'express'
import { quotaGate, requireApiKey } from './http/auth.ts'
import { allowOrigins } from './http/cors.ts'
import { allowedHostNames, requireKnownHost } from './http/host-check.ts'
import { errorHandler, unknownRoute, useAnthropicErrors } from './http/http-errors.ts'
import { jsonBodyParser } from './http/json-body.ts'
import { ServerMetrics } from './http/metrics.ts'
import { RequestHistory } from './http/request-history.ts'
import { requestLog } from './http/request-log.ts'
import { chatRoute } from './protocols/openai/chat-route.ts'
import { rerankRoute } from './protocols/rerank/rerank-route.ts'
import { responsesRoute } from './protocols/responses/responses-route.ts'
import { completionsRoute } from './protocols/openai/completions-route.ts'
import { messagesRoute } from './protocols/anthropic/messages-route.ts'
import { embeddingsRoute } from './protocols/openai/embeddings-route.ts'
import { filesRoute } from './protocols/openai/files-route.ts'
import { downloadsRoute } from './protocols/hearth/downloads-route.ts'
import { healthRoute } from './protocols/hearth/health-route.ts'
import { keysRoute } from './protocols/hearth/keys-route.ts'
import { lendRoute } from './protocols/hearth/lend-route.ts'
import { managementRoute } from './protocols/hearth/management-route.ts'
import { mcpRoute } from './protocols/hearth/mcp-route.ts'
import { modelsRoute } from './protocols/openai/models-route.ts'
import { serverRoute } from './protocols/hearth/server-route.ts'
import { speechRoute } from './protocols/openai/speech-route.ts'
import { DocumentLibrary } from './services/documents/document-library.ts'
import type { ServerContext } from './server-context.ts'
import { webUi } from './http/web-ui.ts'
import { OLLAMA_API_PATHS, ollamaRoute } from './protocols/ollama/ollama-route.ts'
import { useOllamaErrors } from './protocols/ollama/ollama-errors.ts'
import type { QuotaGate } from './services/keys/key-quotas.ts'

/** What Hearth's port and the Ollama port share: one request log, one set of metrics, one quota gate. */
export interface SharedParts {
  requests: RequestHistory
  metrics: ServerMetrics
  gate: QuotaGate | undefined
}

export function sharedParts(ctx: ServerContext): SharedParts {
  return { requests: new RequestHistory(), metrics: new ServerMetrics(ctx.scheduler), gate: quotaGate(ctx.keys) }
}

export function createApp(ctx: ServerContext, shared: SharedParts = sharedParts(ctx)): Express {
  const app = express()
  app.disable('x-powered-by')
  app.set('etag', false)
  const { requests, metrics } = shared
  app.use(requestLog(ctx.log, requests))
  app.use(metrics.middleware())
  app.use(requireKnownHost(allowedHostNames(ctx.settings.host, ctx.settings.allowedHosts)))
  app.use(allowOrigins(ctx.settings.corsOrigins ?? []))
  app.use(healthRoute(ctx))
  // Claude Code warms its connection with `HEAD /api/hello` before its first request, without a key.
  app.head('/api/hello', (_req, res) => void res.status(200).end())
  // Ollama's routes answer every error (a missing key too) in Ollama's shape.
  app.use(OLLAMA_API_PATHS.map((path) => `/api${path}`), useOllamaErrors)

  // One instance: the per-key requests-per-minute windows live in it.
  const auth = requireApiKey(ctx.keys, { gate: shared.gate })
  app.get('/metrics', ...(ctx.settings.metricsPublic ? [] : [auth]), metrics.handler())
  const authenticated = [auth, jsonBodyParser(ctx.settings.bodyLimitBytes)]
  // One library for /v1/files and the chats that read its files.
  const documents = new DocumentLibrary(join(ctx.settings.dataDir, 'documents'), ctx.scheduler)
  // Anthropic's route answers every error (a missing key too) in Anthropic's shape.
  app.use('/v1/messages', useAnthropicErrors)
  app.use('/v1', ...authenticated, modelsRoute(ctx), chatRoute(ctx, documents), completionsRoute(ctx), responsesRoute(ctx, documents), messagesRoute(ctx), embeddingsRoute(ctx), rerankRoute(ctx), speechRoute(ctx), filesRoute(ctx, documents))
  app.use('/api', ollamaRoute(ctx, auth, jsonBodyParser(ctx.settings.bodyLimitBytes, { anyContentType: true })))
  app.use('/api', ...authenticated, managementRoute(ctx), downloadsRoute(ctx), keysRoute(ctx), lendRoute(ctx), mcpRoute(ctx), serverRoute(ctx, requests))
  // API paths no router took never reach the page's files (`/api/%2e%2e` is a directory there).
  app.use(['/v1', '/api'], unknownRoute)
  app.use(webUi())

  app.use(unknownRoute)
  app.use(errorHandler)
  return app
}

/**
 * The page origins Ollama lets call it by default (its OLLAMA_ORIGINS): pages served from this
 * computer, desktop apps' own schemes and editors' webviews. Browser extensions (chrome-extension://)
 * are not among them, as in Ollama: `cors_origins` adds them.
 */
const OLLAMA_DEFAULT_ORIGINS = [
  'http://localhost',
  'https://localhost',
  'http://localhost:*',
  'https://localhost:*',
  'http://127.0.0.1',
  'https://127.0.0.1',
  'http://127.0.0.1:*',
  'https://127.0.0.1:*',
  'app://*',
  'tauri://*',
  'vscode-webview://*',
  'vscode-file://*',
]

/**
 * The Ollama port (`--ollama-port`): Ollama's API and nothing else, for the programs that assume
 * Ollama at `localhost:11434` and send no key. It listens on loopback only, so nothing on the
 * network reaches it; a program that sends a key is that key (quotas included), and a wrong key is
 * refused. The same models, scheduler, log, metrics and quotas as Hearth's own port.
 */
export function createOllamaApp(ctx: ServerContext, shared: SharedParts): Express {
  const app = express()
  app.disable('x-powered-by')
  app.set('etag', false)
  app.use(requestLog(ctx.log, shared.requests))
  app.use(shared.metrics.middleware())
  app.use(requireKnownHost(allowedHostNames('127.0.0.1', ctx.settings.allowedHosts)))
  app.use(allowOrigins([...OLLAMA_DEFAULT_ORIGINS, ...(ctx.settings.corsOrigins ?? [])]))
  app.use(useOllamaErrors)
  // Clients probe the root before anything else, as Ollama answers it.
  const running = (_req: unknown, res: express.Response) => void res.type('text/plain').send('Ollama is running')
  app.get('/', running)
  app.head('/', running)
  const auth = requireApiKey(ctx.keys, { keyless: true, gate: shared.gate })
  app.use('/api', ollamaRoute(ctx, auth, jsonBodyParser(ctx.settings.bodyLimitBytes, { anyContentType: true })))
  app.use(unknownRoute)
  app.use(errorHandler)
  return app
}
