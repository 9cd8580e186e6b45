/**
 * `GET /api/lend`: what this machine lends (`--lend`) and to whom, and the llama.cpp it lends with;
 * a borrower reads it before it loads, to refuse a lender of another version by name. Only a key
 * that may borrow sees it (the tunnel itself is services/lending/lend-tunnel.ts). When its rpc-server
 * died, it says how and who was borrowing, which a borrower reads to say why its lender dropped off.
 */
import { Router } from 'express'
import { requestKey } from '../../services/keys/request-key.ts'
import { ApiError } from '../../services/api-error.ts'
import { mayBorrow } from '../../services/lending/lend-tunnel.ts'
import type { ServerContext } from '../../server-context.ts'
import type { LendStatus } from '../../wire-types.ts'

export function lendRoute(ctx: ServerContext): Router {
  const router = Router()
  router.get('/lend', (_req, res) => {
    if (ctx.keys && !mayBorrow(requestKey(res))) {
      throw new ApiError(
        403,
        'invalid_request_error',
        'insufficient_permissions',
        'This key may not borrow memory: make one with "lend": true (POST /api/keys) on the lending machine',
      )
    }
    const lending = ctx.lending
    if (!lending) throw new ApiError(409, 'invalid_request_error', 'not_lending', 'This Hearth does not lend memory (start it with --lend)')
    const status: LendStatus = {
      object: 'lend',
      llama_cpp_commit: lending.commit,
      rpc_protocol: lending.lender.protocol,
      running: lending.lender.alive,
      state: lending.lender.state,
      crashes: lending.lender.crashes,
      restarts: lending.lender.restarts,
      last_exit: lending.lender.lastExit
        ? { at: Math.floor(lending.lender.lastExit.at / 1000), reason: lending.lender.lastExit.reason, borrowers: lending.lender.lastExit.borrowers }
        : null,
      problem: lending.lender.problem ?? null,
      memory_cap_mib: lending.lender.memoryMiB ?? null,
      devices: lending.lender.devices.map((d) => ({ name: d.name, description: d.description, total_mib: d.totalMiB, free_mib: d.freeMiB })),
      borrowers: [...lending.borrowers].map((b) => ({ address: b.address, key: b.key, since: Math.floor(b.since / 1000) })),
    }
    res.json(status)
  })
  return router
}
