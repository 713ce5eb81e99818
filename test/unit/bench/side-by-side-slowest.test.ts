import { describe, expect, it } from 'vitest';
import { slowest } from '../../../bench/scenarios/side-by-side.ts';

describe('Function: slowest()', () => {
  it('names the three slowest Nodes, slowest first, each with the stages of its own last write', () => {
    // Prepare
    const nodes = [
      { node: 'n1', ms: 400.4 },
      { node: 'n2', ms: 3_875.6 },
      { node: 'n3', ms: 120 },
      { node: 'n4', ms: 2_000 },
      { node: 'n5', ms: 3_100 },
    ];
    const stages = new Map([
      ['n2', { invoke: 1_952, batch: 894 }],
      ['n5', { invoke: 20, batch: 1 }],
    ]);

    // Act
    const out = slowest(nodes, stages);

    // Assess: n4 logged no write stages (an empty record, not another Node's).
    expect(out).toEqual([
      { node: 'n2', ms: 3_876, stages: { invoke: 1_952, batch: 894 } },
      { node: 'n5', ms: 3_100, stages: { invoke: 20, batch: 1 } },
      { node: 'n4', ms: 2_000, stages: {} },
    ]);
    expect(slowest(nodes.slice(0, 2), undefined).map((n) => n.node)).toEqual(['n2', 'n1']);
  });
});
