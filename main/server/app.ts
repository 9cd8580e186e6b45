/**
 * The HTTP application, built without listening so tests and the desktop app can mount it as they
 * need. Routers per area; auth before bodies are read; one JSON 404 and one error handler last.
 */
import { join } from 'node:path'
import express, { type Express, type RequestHandler } from 'express'
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
import type { ServerBasics, ServerContext, ServerParts } from './server-context.ts'
import { webUi } from './http/web-ui.ts'
import { OLLAMA_API_PATHS, ollamaRoute } from './protocols/ollama/ollama-route.ts'
import { useOllamaErrors } from './protocols/ollama/ollama-errors.ts'
import { AnswerPipeline } from './services/pipeline/answer-pipeline.ts'
import { ResponseStore } from './protocols/responses/response-store.ts'
import { OllamaBlobs } from './protocols/ollama/ollama-blobs.ts'
import { AudioScratch } from './protocols/openai/audio-scratch.ts'

/** The objects that keep state between requests, built once per server and shared by both of its ports. */
export function serverParts(basics: ServerBasics): ServerParts {
  const { settings, scheduler, folder, keys } = basics
  const library = new DocumentLibrary(join(settings.dataDir, 'documents'), scheduler, basics.log)
  return {
    requests: new RequestHistory(),
    metrics: new ServerMetrics(scheduler),
    gate: quotaGate(keys),
    library,
    pipeline: new AnswerPipeline({ scheduler, folder, library, requestTimeoutMs: settings.requestTimeoutMs, retrieval: settings.retrieval }),
    responses: new ResponseStore(join(settings.dataDir, 'responses')),
    ollamaBlobs: new OllamaBlobs(join(settings.dataDir, 'ollama-blobs')),
    audioScratch: new AudioScratch(join(settings.dataDir, 'tmp')),
  }
}

export function createApp(ctx: ServerContext): Express {
  const app = guardedApp(ctx, allowedHostNames(ctx.settings.host, ctx.settings.allowedHosts), ctx.settings.corsOrigins ?? [])
  app.use(healthRoute(ctx))
  // Claude Code warms its connection with `HEAD /api/hello` before its first request, without a key.
  app.head('/api/hello', (_req, res) => void res.status(200).end())
  // One instance: the per-key requests-per-minute windows live in it.
  const auth = requireApiKey(ctx.keys, { gate: ctx.gate })
  app.get('/metrics', ...(ctx.settings.metricsPublic ? [] : [auth]), ctx.metrics.handler())
  servePublicApis(app, ctx, auth)
  app.use(
    '/api',
    auth,
    jsonBodyParser(ctx.settings.bodyLimitBytes),
    managementRoute(ctx),
    downloadsRoute(ctx),
    keysRoute(ctx),
    lendRoute(ctx),
    mcpRoute(ctx),
    serverRoute(ctx, ctx.requests),
  )
  // API paths no router took never reach the page's files (`/api/%2e%2e` is a directory there).
  app.use(['/v1', '/api'], unknownRoute)
  app.use(webUi())

  app.use(unknownRoute)
  app.use(errorHandler)
  return app
}

/** An app with the request log, the metrics, and the Host and origin guards every port has. */
function guardedApp(ctx: ServerContext, hosts: ReturnType<typeof allowedHostNames>, origins: readonly string[]): Express {
  const app = express()
  app.disable('x-powered-by')
  app.set('etag', false)
  app.use(requestLog(ctx.log, ctx.requests))
  app.use(ctx.metrics.middleware())
  app.use(requireKnownHost(hosts))
  app.use(allowOrigins([...origins]))
  return app
}

/**
 * The APIs programs call, the same routes on both ports: OpenAI's and Anthropic's under `/v1`,
 * Ollama's under `/api`, each answering its errors in its own shape.
 */
function servePublicApis(app: Express, ctx: ServerContext, auth: RequestHandler): void {
  app.use(
    OLLAMA_API_PATHS.map((path) => `/api${path}`),
    useOllamaErrors,
  )
  app.use('/v1/messages', useAnthropicErrors)
  app.use(
    '/v1',
    auth,
    jsonBodyParser(ctx.settings.bodyLimitBytes),
    modelsRoute(ctx),
    chatRoute(ctx),
    completionsRoute(ctx),
    responsesRoute(ctx),
    messagesRoute(ctx),
    embeddingsRoute(ctx),
    rerankRoute(ctx),
    speechRoute(ctx),
    filesRoute(ctx),
  )
  // Ollama reads JSON whatever the content type says.
  app.use('/api', ollamaRoute(ctx, auth, jsonBodyParser(ctx.settings.bodyLimitBytes, { anyContentType: true })))
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
 * The Ollama port (`--ollama-port`, 11434 by default in the app): what Ollama serves there, for the
 * programs set up for Ollama: its `/api`, and the OpenAI- and Anthropic-compatible `/v1` routes that
 * Ollama's docs point Claude Code, Codex and the OpenAI clients at, through the same routes as
 * Hearth's own port. It listens on loopback only, so nothing on the network reaches it, and lets
 * programs in without a key, as Ollama does; a key Hearth knows is that key (quotas included).
 * No key management, request log, metrics or web UI here.
 */
export function createOllamaApp(ctx: ServerContext): Express {
  const origins = [...OLLAMA_DEFAULT_ORIGINS, ...(ctx.settings.ollamaOrigins ?? []), ...(ctx.settings.corsOrigins ?? [])]
  const app = guardedApp(ctx, allowedHostNames('127.0.0.1', ctx.settings.allowedHosts), origins)
  // Clients probe the root before anything else, as Ollama answers it.
  const running = (_req: unknown, res: express.Response) => void res.type('text/plain').send('Ollama is running')
  app.get('/', running)
  app.head('/', running)
  app.head('/api/hello', (_req, res) => void res.status(200).end())
  servePublicApis(app, ctx, requireApiKey(ctx.keys, { keyless: true, gate: ctx.gate }))
  app.use('/v1', unknownRoute)
  app.use(useOllamaErrors, unknownRoute)
  app.use(errorHandler)
  return app
}
