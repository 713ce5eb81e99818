/**
 * Typed getters over an environment map, each throwing ConfigError naming the variable. Only shared/config reads the
 * environment; everything else receives a frozen config object.
 */
import { ConfigError } from '#shared/errors.ts';

export type Env = Readonly<Record<string, string | undefined>>;

/** Returns the variable, or throws when it is missing or empty (`when`: what makes it required, for the message). */
export function requiredString(env: Env, name: string, when?: string): string {
  const v = optionalString(env, name);
  if (v === undefined) throw new ConfigError(name, when === undefined ? 'is required' : `is required ${when}`);
  return v;
}

/** Returns the variable, or the default when it is missing or empty. */
export function optionalString(env: Env, name: string, fallback: string): string;
export function optionalString(env: Env, name: string): string | undefined;
export function optionalString(env: Env, name: string, fallback?: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? fallback : v.trim();
}

/** Parses a boolean (`true`/`false`/`1`/`0`), or returns the default when missing. */
export function booleanVar(env: Env, name: string, fallback: boolean): boolean {
  const v = optionalString(env, name);
  if (v === undefined) return fallback;
  if (/^(true|1|yes)$/i.test(v)) return true;
  if (/^(false|0|no)$/i.test(v)) return false;
  throw new ConfigError(name, `must be true or false, got ${JSON.stringify(v)}`);
}

/** Parses an integer within [min, max], or returns the default when missing. */
export function integerVar(env: Env, name: string, fallback: number, min: number, max: number): number {
  const v = optionalString(env, name);
  if (v === undefined) return fallback;
  if (!/^-?\d+$/.test(v)) throw new ConfigError(name, `must be an integer, got ${JSON.stringify(v)}`);
  const n = Number(v);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

/** Returns one of the allowed values, or the default when missing. */
export function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const v = optionalString(env, name);
  if (v === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(v)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got ${JSON.stringify(v)}`);
  }
  return v as T;
}

/** The process environment; the one place outside tests that touches `process.env`. */
export function processEnv(): Env {
  return process.env;
}
