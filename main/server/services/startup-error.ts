/**
 * A reason the server cannot start that the person can fix (a file it will not overwrite, a data
 * folder it cannot write): said in one sentence that names the file and what to do, not as a stack.
 */
export class StartupError extends Error {
  override name = 'StartupError'
}
