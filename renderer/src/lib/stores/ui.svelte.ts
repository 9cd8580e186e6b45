/** Which page shows (kept in the URL's hash, so reloads and the back button work) and the theme. */

export const PAGES = ['chat', 'speech', 'models', 'tools', 'server'] as const
export type Page = (typeof PAGES)[number]
export type Theme = 'system' | 'light' | 'dark'

const THEME_KEY = 'hearth.theme'

/** Pages that were renamed, so old links and bookmarks still land. */
const FORMER_NAMES: Record<string, Page> = { translate: 'speech' }

function pageFromHash(): Page {
  const name = location.hash.replace(/^#\/?/, '')
  if ((PAGES as readonly string[]).includes(name)) return name as Page
  return FORMER_NAMES[name] ?? 'chat'
}

class UiStore {
  page = $state<Page>(pageFromHash())
  theme = $state<Theme>((localStorage.getItem(THEME_KEY) as Theme | null) ?? 'system')

  constructor() {
    window.addEventListener('hashchange', () => (this.page = pageFromHash()))
    $effect.root(() => {
      $effect(() => {
        localStorage.setItem(THEME_KEY, this.theme)
        if (this.theme === 'system') delete document.documentElement.dataset.theme
        else document.documentElement.dataset.theme = this.theme
      })
    })
  }

  go(page: Page): void {
    location.hash = `#/${page}`
  }
}

export const ui = new UiStore()
