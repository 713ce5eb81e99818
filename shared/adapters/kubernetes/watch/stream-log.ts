/**
 * A stream's logging, at most one line per kind (its message) per interval, so a hostile or broken server's failures
 * cost a few lines a minute (docs/watch-layer.md, "Logs"). What a server sent reaches a line only as the caller's
 * escaped excerpt (api-errors.ts `safeExcerpt`).
 */
import type { logger as defaultLogger } from '#shared/observability/logger.ts';

export type Logger = Pick<typeof defaultLogger, 'info' | 'warn' | 'error' | 'debug'>;

export class StreamLog {
  private readonly stream: string;
  private readonly log: Logger;
  private readonly intervalMs: number;
  private readonly now: () => Date;
  /** By message: when it was last written, and how many were suppressed since. */
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(stream: string, log: Logger, options: { readonly intervalMs?: number; readonly now?: () => Date } = {}) {
    this.stream = stream;
    this.log = log;
    this.intervalMs = options.intervalMs ?? 30_000;
    this.now = options.now ?? (() => new Date());
  }

  readonly info = (message: string, attrs: Record<string, unknown> = {}): void => this.write('info', message, attrs);
  readonly warn = (message: string, attrs: Record<string, unknown> = {}): void => this.write('warn', message, attrs);
  readonly error = (message: string, attrs: Record<string, unknown> = {}): void => this.write('error', message, attrs);

  private write(level: 'info' | 'warn' | 'error', message: string, attrs: Record<string, unknown>): void {
    const now = this.now().getTime();
    const seen = this.last.get(message);
    if (seen && now - seen.at < this.intervalMs) {
      seen.suppressed++;
      return;
    }
    this.last.set(message, { at: now, suppressed: 0 });
    this.log[level](message, { stream: this.stream, ...attrs, ...(seen && seen.suppressed > 0 ? { suppressed: seen.suppressed } : {}) });
  }
}
