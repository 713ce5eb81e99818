/**
 * The `User-Agent` of every request of kube-http.ts, `capi-taint-propagator/<version> (<form>; <component>)`, so that
 * an API server's audit log can select the product's requests (docs/proxies.md). A process names itself once
 * (`identifyAs`); one that runs several components (`npm start`) runs each inside `asComponent`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** The product's name, the first word of its User-Agent. */
export const PRODUCT_NAME = 'capi-taint-propagator';

/** The product's version: package.json's `version` (a unit test keeps the two equal). */
export const PRODUCT_VERSION = '0.1.0';

export type RuntimeForm = 'lambda' | 'local';

let identity: { form: RuntimeForm; component: string } = { form: 'local', component: 'unknown' };
const components = new AsyncLocalStorage<string>();

/** Sets the form and component of this process's requests (call it once in the entry point). */
export function identifyAs(component: string, form: RuntimeForm): void {
  identity = { form, component: clean(component) };
}

/** Runs `fn` with every request it makes (directly or in anything it starts) naming `component`. */
export function asComponent<T>(component: string, fn: () => T): T {
  return components.run(clean(component), fn);
}

/** The User-Agent of a request made now. */
export function userAgent(): string {
  return `${PRODUCT_NAME}/${PRODUCT_VERSION} (${identity.form}; ${components.getStore() ?? identity.component})`;
}

/** Header values must be visible ASCII; a component name is the product's own, this only guards against typos. */
function clean(component: string): string {
  return component.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 64) || 'unknown';
}
