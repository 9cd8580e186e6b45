/** The Web Storage API in memory, for the renderer's modules that keep things in localStorage; `limit` makes a write of a longer value fail as a full storage does. */
export class MemoryStorage implements Storage {
  items = new Map<string, string>()
  constructor(private readonly limit = Infinity) {}
  get length() {
    return this.items.size
  }
  clear() {
    this.items.clear()
  }
  getItem(key: string) {
    return this.items.get(key) ?? null
  }
  key(i: number) {
    return [...this.items.keys()][i] ?? null
  }
  removeItem(key: string) {
    this.items.delete(key)
  }
  setItem(key: string, value: string) {
    if (value.length > this.limit) throw new Error('QuotaExceededError')
    this.items.set(key, value)
  }
}
