/**
 * Builds the window's UI into renderer/dist, which the server serves at `/` and the desktop app
 * loads through its app:// protocol. `npm run build:ui`; `npm run dev:ui` proxies the API to a
 * server already running on 8181.
 */
import { svelte } from '@sveltejs/vite-plugin-svelte'
import { defineConfig } from 'vite'

const api = process.env.HEARTH_URL ?? 'http://127.0.0.1:8181'

export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  plugins: [svelte()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // Inline nothing: the page's CSP allows scripts and styles from the server only.
    assetsInlineLimit: 0,
    reportCompressedSize: true,
  },
  server: {
    proxy: { '/v1': api, '/api': api, '/health': api },
  },
})
