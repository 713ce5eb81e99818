import { describe, expect, it } from 'vitest';
import { StreamLog } from '#shared/adapters/kubernetes/watch/stream-log.ts';
import { manualClock } from '#test/support/manual-clock.ts';

function recorder(): { lines: Array<{ level: string; message: string; attrs: Record<string, unknown> }>; logger: ConstructorParameters<typeof StreamLog>[1] } {
  const lines: Array<{ level: string; message: string; attrs: Record<string, unknown> }> = [];
  const keep = (level: string) => (message: string, attrs: Record<string, unknown> = {}) => void lines.push({ level, message, attrs });
  return { lines, logger: { info: keep('info'), warn: keep('warn'), error: keep('error'), debug: keep('debug') } as never };
}

describe('Class: StreamLog', () => {
  it('writes at most one line per kind per interval, and says how many it suppressed', () => {
    // Prepare
    const clock = manualClock();
    const { lines, logger } = recorder();
    const log = new StreamLog('nodes/fleet/wc1', logger, { intervalMs: 30_000, now: clock.now });

    // Act: 1 000 garbage lines in 10 s, a retry meanwhile, then one more garbage line 30 s after the first.
    for (let i = 0; i < 1_000; i++) {
      log.error('Skipping malformed watch event', { reason: 'not JSON', n: i });
      clock.advance(10);
    }
    log.warn('Retrying watch after error', { reason: 'x' });
    clock.advance(20_000);
    log.error('Skipping malformed watch event', { reason: 'not JSON', n: 1_000 });

    // Assess
    expect(lines).toEqual([
      { level: 'error', message: 'Skipping malformed watch event', attrs: { stream: 'nodes/fleet/wc1', reason: 'not JSON', n: 0 } },
      { level: 'warn', message: 'Retrying watch after error', attrs: { stream: 'nodes/fleet/wc1', reason: 'x' } },
      { level: 'error', message: 'Skipping malformed watch event', attrs: { stream: 'nodes/fleet/wc1', reason: 'not JSON', n: 1_000, suppressed: 999 } },
    ]);
  });

  it('limits each stream on its own', () => {
    // Prepare
    const { lines, logger } = recorder();
    const a = new StreamLog('nodes/fleet/a', logger);
    const b = new StreamLog('nodes/fleet/b', logger);

    // Act
    a.info('Relisting');
    a.info('Relisting');
    b.info('Relisting');

    // Assess
    expect(lines.map((l) => l.attrs['stream'])).toEqual(['nodes/fleet/a', 'nodes/fleet/b']);
  });
});
