/** Every IPC channel between the page and the main process, in one place. */
export enum Channel {
  GetServerState = 'hearth:get-server-state',
  GetApiKey = 'hearth:get-api-key',
  SetServerRunning = 'hearth:set-server-running',
  SetLanAccess = 'hearth:set-lan-access',
  SetOllamaPort = 'hearth:set-ollama-port',
  SetLending = 'hearth:set-lending',
  GetPreferences = 'hearth:get-preferences',
  SetKeepRunningInTray = 'hearth:set-keep-running-in-tray',
  PickModelFile = 'hearth:pick-model-file',
  CopyText = 'hearth:copy-text',
  /** Main → page: the server's state changed. */
  ServerState = 'hearth:server-state',
}
