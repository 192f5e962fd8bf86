/**
 * @agent-relay/sandbox-router/local — the embedded local runtime.
 *
 * A `SandboxRuntime` (the port every provider adapter implements) backed by real host
 * child processes and one private directory per sandbox, so the router works offline,
 * in tests and in CI, with no provider package installed.
 *
 * ## ⚠️ THIS IS NOT A SECURITY BOUNDARY ⚠️
 *
 * Commands run **as the current user, on the host**, with the host's network. The
 * "sandbox" is only a working directory (mode 0700) and a process group. Code run in it
 * can read and write anything the current user can, open any connection, and escape its
 * process group (e.g. with `setsid`), in which case `stop()`/`destroy()` cannot find it.
 * Path confinement in {@link LocalSandboxRuntime.uploadBundle} protects against caller
 * mistakes, not against hostile code already running in the sandbox.
 * Never route untrusted code to a pool backed by this runtime; declare the pool with
 * {@link LOCAL_CAPABILITIES} (`isolation: 'none'`, `egress: 'open'`) so that requests
 * requiring any isolation are never routed to it.
 */

/** A sandbox handle, as the port defines it. */
export interface RuntimeHandle {
  id: string;
  state?: string;
  createdAt?: string;
  updatedAt?: string;
  lastActivityAt?: string;
  homeDir?: string;
  workdir?: string;
}

/** The handle this runtime returns: every field is always present. */
export interface LocalRuntimeHandle extends RuntimeHandle {
  /** `local-` followed by 16 hex digits (64 random bits). */
  id: string;
  /** `'started'` or `'stopped'`. */
  state: 'started' | 'stopped';
  /** ISO-8601 creation time. */
  createdAt: string;
  /** The sandbox directory (canonical real path); also `$HOME` of its commands. */
  homeDir: string;
  /** Same directory as `homeDir`; the cwd of its commands. */
  workdir: string;
  /** The launch labels (a copy): the router's reconcile checks its stamp on them. */
  labels: Record<string, string>;
}

/** Options of {@link createLocalRuntime}. Unknown keys are rejected (`LOCAL_INVALID_OPTIONS`). */
export interface LocalRuntimeOptions {
  /**
   * Directory that holds one sub-directory per sandbox. Default: a fresh
   * `fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-router-local-'))`, created lazily on
   * the first launch and removed by {@link LocalSandboxRuntime.close}. A directory given
   * here is created if missing (mode 0700) but never removed: close() only removes the
   * sandbox directories inside it. Each sandbox also has a record file beside its directory
   * (`<rootDir>/<id>.json`: id, name, labels, createdAt); with a `rootDir` given here, lookups
   * and destroy also see sandboxes another process launched there (a killed one included).
   */
  rootDir?: string;
  /** Timeout of runScript when the call gives none, in ms. Default 60 000. At most 2^31-1. */
  defaultTimeoutMs?: number;
  /** Shell run as `shell -c command`. Default `/bin/sh`. */
  shell?: string;
  /**
   * Bytes kept per stream (stdout and stderr each) per command. Default 1 MiB. Beyond it
   * the stream is truncated and a `[LOCAL_OUTPUT_TRUNCATED] ...` note is appended to stderr.
   */
  maxOutputBytes?: number;
}

export interface LaunchOptions {
  /** Kept as metadata; the directory is named after the id. */
  name?: string;
  /** Environment of every command of this sandbox (over PATH/HOME, under per-call env). */
  env?: Record<string, string>;
  labels?: Record<string, string>;
  /** Validated (positive number) and otherwise ignored: creating a directory does not boot. */
  createTimeoutSeconds?: number;
}

export interface LookupOptions {
  /** Only sandboxes in one of these states (`'started'`, `'stopped'`); null/absent = any. */
  states?: readonly string[] | null;
  /** findAllByLabels: at most this many results. */
  limit?: number;
  /** Ignored: there is no paging in memory. */
  pageSize?: number;
  /** Ignored: every sandbox of this runtime is owned by it. */
  owned?: boolean;
  /** Sandboxes with these ids are skipped. */
  excludeIds?: readonly string[];
  /** Ignored: lookups are in-memory and synchronous. */
  timeoutMs?: number;
}

export interface CountOptions extends LookupOptions {
  /** The count stops at this value. */
  maxCount?: number;
}

export interface RunScriptOptions {
  command: string;
  /** Accepted and ignored: every command runs in a fresh shell (files persist, shell state does not). */
  sessionId?: string;
  /** Kill the command's whole process group after this many ms. Default: `defaultTimeoutMs`. */
  timeoutMs?: number;
  /** Per-call environment, over the launch env. */
  env?: Record<string, string>;
}

export interface LocalRunScriptResult {
  /**
   * `stdout` FOLLOWED BY `stderr` (not interleaved: two pipes carry no relative ordering).
   */
  output: string;
  stdout: string;
  /** The command's stderr, plus any `[LOCAL_TIMEOUT]`, `[LOCAL_KILLED]` or `[LOCAL_OUTPUT_TRUNCATED]` notes. */
  stderr: string;
  /**
   * The shell's exit code; `null` when the command timed out, was killed by stop()/destroy(),
   * or died of a signal.
   */
  exitCode: number | null;
  /** The signal that ended the shell, if any (`'SIGKILL'` after a timeout). */
  signal: string | null;
  /**
   * True when the command hit its timeout. A timeout does NOT reject: runScript resolves
   * with `exitCode: null`, `timedOut: true` and a `[LOCAL_TIMEOUT] ...` line in stderr, so
   * partial output is not lost.
   */
  timedOut: boolean;
  /** True when stdout or stderr exceeded `maxOutputBytes`. */
  truncated: boolean;
}

export interface UploadFile {
  /**
   * A **string is the file CONTENT** (written as UTF-8), never a path to read from.
   * A Buffer/Uint8Array is written as bytes.
   */
  source: string | Buffer | Uint8Array;
  /**
   * Relative: resolved under the sandbox directory. Absolute: allowed only inside the
   * sandbox directory (e.g. under `handle.homeDir`). Anything resolving outside, including
   * via `..` or a symlinked parent directory pointing outside, rejects with
   * `LOCAL_PATH_ESCAPE`. Parent directories are created. A symlink at the final
   * component is replaced by a regular file, never written through.
   */
  destination: string;
}

/** Stable codes of {@link LocalRuntimeError}. */
export type LocalRuntimeErrorCode =
  /** Invalid createLocalRuntime options. */
  | 'LOCAL_INVALID_OPTIONS'
  /** Invalid arguments to a runtime method. */
  | 'LOCAL_INVALID_ARGUMENT'
  /** The handle names no live sandbox of this runtime (or its directory vanished). */
  | 'LOCAL_SANDBOX_NOT_FOUND'
  /** runScript/uploadBundle on a stopped sandbox. */
  | 'LOCAL_SANDBOX_STOPPED'
  /** An upload destination resolves outside the sandbox directory. */
  | 'LOCAL_PATH_ESCAPE'
  /** The shell could not be spawned. */
  | 'LOCAL_SPAWN_FAILED'
  /** A filesystem operation failed. */
  | 'LOCAL_IO_ERROR'
  /** launch() after close(). */
  | 'LOCAL_CLOSED';

/** Every code {@link LocalRuntimeError} can carry. */
export declare const LOCAL_ERROR_CODES: readonly LocalRuntimeErrorCode[];

/** Errors of the local runtime. `code` is stable; the message is for humans. */
export declare class LocalRuntimeError extends Error {
  readonly name: 'LocalRuntimeError';
  readonly code: LocalRuntimeErrorCode;
  readonly sandboxId?: string;
  readonly path?: string;
  readonly field?: string;
}

/**
 * The honest capability declaration for a pool backed by this runtime, in the router's
 * vocabulary. **NOT a security boundary**: `isolation: 'none'` (host processes, current
 * user), `egress: 'open'` (host network), `stateDurability: 'ephemeral'` (in-memory
 * bookkeeping; directories are removed on destroy/close), timeouts bound one command.
 * Deeply frozen.
 */
export declare const LOCAL_CAPABILITIES: {
  readonly supported: readonly ['syncExec', 'fileTransfer', 'longRunningProcesses'];
  readonly isolation: 'none';
  readonly egress: 'open';
  readonly stateDurability: 'ephemeral';
  readonly timeout: { readonly semantics: readonly ['command-lifetime'] };
};

/**
 * A `SandboxRuntime` backed by host child processes. **NOT a security boundary**:
 * commands run as the current user on the host.
 *
 * - Each command runs as `shell -c command` in its own session/process group, with
 *   cwd = the sandbox dir and env `{ PATH, HOME: dir, ...launchEnv, ...callEnv }`
 *   (the rest of the host environment is NOT inherited).
 * - runScript resolves when stdout and stderr are closed (like `child_process.exec`): a
 *   background process must redirect its output (`cmd >/dev/null 2>&1 &`) or the command
 *   counts as running until it ends or times out.
 * - Background processes keep running after runScript returns; their process groups are
 *   remembered per sandbox and SIGKILLed by stop(), destroy() and close().
 * - Bookkeeping is in memory: a new runtime knows nothing of an earlier one's sandboxes.
 */
export declare class LocalSandboxRuntime {
  constructor(options?: LocalRuntimeOptions);
  /** Adapter kind: always `'local'`. */
  readonly id: 'local';
  /** No warm lease; stop/start are real (stop kills the sandbox's processes). */
  readonly declaredCapabilities: { readonly warmLease: false; readonly lifecycle: true };
  /** The root directory, or null before the first launch and after close() removed it. */
  readonly rootDir: string | null;
  /** True once close() was called. */
  readonly closed: boolean;

  /** Creates a private directory (mode 0700) under rootDir. Rejects `LOCAL_CLOSED` after close(). */
  launch(options?: LaunchOptions): Promise<LocalRuntimeHandle>;
  /** Same as launch: a local sandbox is ready immediately. */
  launchDetached(options?: LaunchOptions): Promise<LocalRuntimeHandle>;

  /** The live sandbox with this id, or null. */
  getById(id: string, options?: { states?: readonly string[] | null; owned?: boolean }): Promise<LocalRuntimeHandle | null>;
  /**
   * First live sandbox carrying EVERY given label (AND; `{}` matches all), or null.
   * Order is launch order.
   */
  findByLabels(labels: Record<string, string>, options?: LookupOptions): Promise<LocalRuntimeHandle | null>;
  /** All live sandboxes carrying every given label, honouring `limit`, `excludeIds`, `states`. */
  findAllByLabels(labels: Record<string, string>, options?: LookupOptions): Promise<LocalRuntimeHandle[]>;
  /** Number of live sandboxes carrying every given label, capped at `maxCount`. */
  countByLabels(labels: Record<string, string>, options?: CountOptions): Promise<number>;

  /**
   * Uploads files into the sandbox directory (see {@link UploadFile} for the confinement
   * rules). All destinations are validated before anything is written; an I/O error in the
   * middle may leave earlier files written. Each file is written atomically (temp + rename).
   */
  uploadBundle(handle: RuntimeHandle, bundle: { files: ReadonlyArray<UploadFile> }): Promise<void>;
  /**
   * Runs `command` with the shell. Never rejects for a failing, timed-out or killed command
   * (see {@link LocalRunScriptResult}); rejects only for bad arguments, an unknown/stopped
   * sandbox (`LOCAL_SANDBOX_NOT_FOUND`/`LOCAL_SANDBOX_STOPPED`) or a spawn failure.
   */
  runScript(handle: RuntimeHandle, options: RunScriptOptions): Promise<LocalRunScriptResult>;

  /** SIGKILLs the sandbox's processes and marks it `'stopped'` (its files stay). */
  stop(handle: RuntimeHandle): Promise<void>;
  /** Marks the sandbox `'started'` again. */
  start(handle: RuntimeHandle): Promise<LocalRuntimeHandle>;
  /**
   * SIGKILLs the sandbox's process groups, removes its directory and forgets it.
   * Tolerates an unknown or already destroyed sandbox (resolves, never throws for that).
   */
  destroy(handle: RuntimeHandle): Promise<void>;
  /** Destroys every sandbox; the runtime stays usable. */
  destroyAll(): Promise<void>;
  /**
   * Destroys every sandbox, removes rootDir if this runtime created it (the default temp
   * root) and removes the best-effort process 'exit' cleanup hook. Idempotent.
   */
  close(): Promise<void>;
}

/**
 * Creates a local runtime. **NOT a security boundary**: commands run as the current user
 * on the host. Throws `LOCAL_INVALID_OPTIONS` for bad options.
 */
export declare function createLocalRuntime(options?: LocalRuntimeOptions): LocalSandboxRuntime;
