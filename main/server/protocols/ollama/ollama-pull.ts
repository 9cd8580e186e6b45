/**
 * What `/api/pull` can fetch: a GGUF on Hugging Face named as Ollama names one
 * (`hf.co/<owner>/<repo>[:<quantization>]`), or Hearth's own references (`hf://…`, an https URL).
 * Ollama's registry (`llama3.2:3b`) is Ollama's: Hearth says so rather than pretend.
 */
import type { PullRequest } from '../../../../models/downloads/download-manager.ts'
import { OllamaError } from './ollama-errors.ts'

const HUB_NAME = /^(?:https?:\/\/)?(?:hf\.co|huggingface\.co)\/([A-Za-z0-9][\w.-]*)\/([A-Za-z0-9][\w.-]*)(?::([\w.-]+))?$/i
/** Ollama's choice where an hf.co name has no tag. */
const DEFAULT_QUANTIZATION = 'Q4_K_M'
const SPLIT_PART = /-0*(\d+)-of-0*(\d+)\.gguf$/i

/** The download a pull name stands for; the hub is asked which files its repository has. */
export async function pullRequestFor(name: string, hubEndpoint: string, fetchJson: (url: string) => Promise<unknown> = defaultFetchJson): Promise<PullRequest> {
  const hub = HUB_NAME.exec(name)
  // Hearth's own references download as `POST /api/models/pull` would, under the file's name.
  if (!hub && /^(hf|https?):\/\//i.test(name)) return { source: name }
  if (!hub) {
    throw new OllamaError(
      400,
      `Hearth does not pull '${name}' from Ollama's registry: pull it with Ollama (Hearth serves the models in Ollama's store as they are), or name a GGUF on Hugging Face: hf.co/<owner>/<repo>:<quantization>`,
    )
  }
  const [, owner, repo, tag] = hub
  const wanted = (tag && tag.toLowerCase() !== 'latest' ? tag : DEFAULT_QUANTIZATION).toLowerCase()
  const listing = (await fetchJson(`${hubEndpoint}/api/models/${owner}/${repo}`).catch((e: Error) => {
    throw new OllamaError(404, `pull model manifest: hf.co/${owner}/${repo} could not be read from the hub: ${e.message}`)
  })) as { siblings?: Array<{ rfilename?: unknown }> }
  const files = (listing.siblings ?? []).map((s) => s.rfilename).filter((f): f is string => typeof f === 'string' && /\.gguf$/i.test(f))
  const projectors = files.filter((f) => /(^|\/)mmproj/i.test(f))
  const models = files.filter((f) => !projectors.includes(f) && !(SPLIT_PART.test(f) && Number(SPLIT_PART.exec(f)![1]) > 1))
  const chosen = models.find((f) => f.toLowerCase().includes(wanted)) ?? (tag ? undefined : models[0])
  if (!chosen) {
    const available = models.map((f) => f.split('/').pop()).join(', ') || 'none'
    throw new OllamaError(
      404,
      `pull model manifest: hf.co/${owner}/${repo} has no GGUF file for '${tag ?? DEFAULT_QUANTIZATION}' (its GGUF files: ${available})`,
    )
  }
  if (SPLIT_PART.test(chosen))
    throw new OllamaError(
      400,
      `hf.co/${owner}/${repo}:${tag ?? ''} is split into several files, which Hearth does not pull yet; download the parts into the models folder`,
    )
  const projector = projectors.find((f) => /f16/i.test(f)) ?? projectors[0]
  const id = `hf.co/${owner}/${repo}:${tag ?? 'latest'}`
  return { source: `hf://${owner}/${repo}/${chosen}`, ...(projector ? { mmproj: `hf://${owner}/${repo}/${projector}` } : {}), id }
}

async function defaultFetchJson(url: string): Promise<unknown> {
  const response = await fetch(url, { headers: process.env.HF_TOKEN ? { authorization: `Bearer ${process.env.HF_TOKEN}` } : {} })
  if (!response.ok) throw new Error(`${response.status} ${response.statusText}`)
  return response.json()
}
