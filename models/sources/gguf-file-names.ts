/**
 * What a .gguf file in a download folder is, by its name, as llama.cpp's own downloader decides
 * (common/download.cpp, gguf_filename_is_model): projectors say `mmproj`; importance matrices and
 * the draft heads of speculative decoding (`mtp-`, `eagle3-`, `dflash-`, `dspark-`) are not
 * models; the later parts of a split model load through its first.
 */
const NOT_A_MODEL = ['imatrix', 'mtp-', 'eagle3-', 'dflash-', 'dspark-']
const LATER_SPLIT_PART = /-0*([2-9]|[1-9]\d+)-of-\d+\.gguf$/i
const FIRST_SPLIT_PART = /-0*1-of-\d+$/i

export type GgufFileRole = 'model' | 'projector' | 'other'

export function ggufFileRole(fileName: string): GgufFileRole {
  const name = fileName.toLowerCase()
  if (!name.endsWith('.gguf')) return 'other'
  if (name.includes('mmproj')) return 'projector'
  if (NOT_A_MODEL.some((word) => name.includes(word)) || LATER_SPLIT_PART.test(name)) return 'other'
  return 'model'
}

/** `Qwen3-8B-Q4_K_M.gguf` → `Qwen3-8B-Q4_K_M`; a split model's first part loses `-00001-of-00003` too. */
export function modelFileStem(fileName: string): string {
  return fileName.replace(/\.gguf$/i, '').replace(FIRST_SPLIT_PART, '')
}
