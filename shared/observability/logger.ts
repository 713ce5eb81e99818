/**
 * The one structured JSON logger (Powertools Logger). Keys are lowerCamel; object kinds are
 * capitalised (`Node`, `Machine`), as in Cluster API's logs. Level from POWERTOOLS_LOG_LEVEL.
 */
import { Logger } from '@aws-lambda-powertools/logger';

export const logger = new Logger({ serviceName: 'capi-taint-propagator' });

/** Log key names shared by both functions. */
export const LogKey = {
  cluster: 'cluster',
  machine: 'Machine',
  node: 'Node',
  resourceVersion: 'resourceVersion',
  cloudEventId: 'cloudEventId',
  outcome: 'outcome',
  reason: 'reason',
  diff: 'diff',
} as const;
