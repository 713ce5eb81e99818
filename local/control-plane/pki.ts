/**
 * Certificates and kubeconfig files for the local control plane, made with the openssl CLI (3.0 or newer; Node's
 * crypto cannot sign X.509). One test CA signs both the apiserver's serving certificate and the client certificates.
 * Client certificates map to Kubernetes identities: CN = user name, each O = one group.
 * ECDSA P-256 keys: about 10 ms per certificate instead of ~100 ms for RSA-2048.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** openssl configuration: the extensions of the CA, the serving and the client certificates. */
const OPENSSL_CNF = `[req]
distinguished_name = dn
[dn]
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
[serving]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
`;

const KEY_ARGS = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-sha256', '-days', '30'];

/** Paths of a certificate and its key. */
export interface CertPair {
  readonly certPath: string;
  readonly keyPath: string;
}

async function openssl(args: string[]): Promise<void> {
  try {
    await run('openssl', args, { env: { ...process.env, OPENSSL_CONF: '/dev/null' } });
  } catch (e) {
    const err = e as NodeJS.ErrnoException & { stderr?: string };
    if (err.code === 'ENOENT') throw new Error('openssl is not installed (needed to make the test certificates)', { cause: e });
    throw new Error(`openssl ${args[0]} failed: ${err.stderr?.trim() ?? err.message}`, { cause: e });
  }
}

/** Escapes one RDN value for `openssl -subj` ("/" "," "+" "=" "\" are special). */
function rdn(value: string): string {
  return value.replace(/[\\/,+=]/g, (c) => `\\${c}`);
}

async function ensureCnf(dir: string): Promise<string> {
  const cnf = join(dir, 'openssl.cnf');
  if (existsSync(cnf)) return cnf;
  // Write then rename: a parallel mint never reads a half-written file.
  const tmp = `${cnf}.${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, OPENSSL_CNF);
  await rename(tmp, cnf);
  return cnf;
}

/** Creates `ca.crt`/`ca.key` and the apiserver's serving pair (SAN 127.0.0.1, localhost) in `pkiDir`. */
export async function createServerPki(pkiDir: string): Promise<{ ca: CertPair; serving: CertPair }> {
  await mkdir(pkiDir, { recursive: true, mode: 0o700 });
  const cnf = await ensureCnf(pkiDir);
  const ca = { certPath: join(pkiDir, 'ca.crt'), keyPath: join(pkiDir, 'ca.key') };
  await openssl(['req', '-x509', '-new', '-config', cnf, '-extensions', 'ca', ...KEY_ARGS, '-subj', '/CN=capi-taint-propagator-test-ca', '-keyout', ca.keyPath, '-out', ca.certPath]);
  const serving = { certPath: join(pkiDir, 'apiserver.crt'), keyPath: join(pkiDir, 'apiserver.key') };
  await signedCert(cnf, ca, serving, 'serving', '/CN=kube-apiserver');
  return { ca, serving };
}

/**
 * Signs another serving pair (SAN 127.0.0.1, localhost) with the CA in `pkiDir`, as `<dir>/tls.crt` and `<dir>/tls.key`
 * (the names controller-runtime's webhook server reads from its cert dir).
 */
export async function createServingCert(o: { readonly dir: string; readonly caCertPath: string; readonly caKeyPath: string; readonly commonName: string }): Promise<CertPair> {
  await mkdir(o.dir, { recursive: true, mode: 0o700 });
  const cnf = await ensureCnf(o.dir);
  const pair = { certPath: join(o.dir, 'tls.crt'), keyPath: join(o.dir, 'tls.key') };
  await signedCert(cnf, { certPath: o.caCertPath, keyPath: o.caKeyPath }, pair, 'serving', `/CN=${rdn(o.commonName)}`);
  return pair;
}

async function signedCert(cnf: string, ca: CertPair, out: CertPair, extensions: 'serving' | 'client', subject: string): Promise<void> {
  const serial = `0x${randomBytes(16).toString('hex')}`; // random serials: no shared ca.srl, so mints may run in parallel
  await openssl(['req', '-x509', '-new', '-config', cnf, '-extensions', extensions, ...KEY_ARGS, '-subj', subject,
    '-CA', ca.certPath, '-CAkey', ca.keyPath, '-set_serial', serial, '-keyout', out.keyPath, '-out', out.certPath]);
}

/**
 * Creates the service-account token signing key `sa.key` and its public half `sa.pub`. The apiserver's
 * `--service-account-key-file` does not accept a PKCS#8 EC private key ("data does not contain any valid RSA or
 * ECDSA public keys"), so it gets the public key.
 */
export async function createServiceAccountKey(pkiDir: string): Promise<{ privateKeyPath: string; publicKeyPath: string }> {
  const privateKeyPath = join(pkiDir, 'sa.key');
  const publicKeyPath = join(pkiDir, 'sa.pub');
  await openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', privateKeyPath]);
  await openssl(['pkey', '-in', privateKeyPath, '-pubout', '-out', publicKeyPath]);
  return { privateKeyPath, publicKeyPath };
}

/** Options of {@link mintClientKubeconfig}. */
export interface MintOptions {
  /** Folder for the key, certificate and kubeconfig (created if missing). */
  readonly dir: string;
  readonly caCertPath: string;
  readonly caKeyPath: string;
  /** `https://127.0.0.1:<port>` of the apiserver. */
  readonly server: string;
  /** User name (certificate CN). */
  readonly name: string;
  /** Group names (one certificate O each); `system:masters` makes a superuser. */
  readonly groups: readonly string[];
}

/**
 * Signs a client certificate for `name`/`groups` with the test CA into `<dir>/<stem>.crt` and `<dir>/<stem>.key`
 * (`stem` defaults to the sanitized name plus a random suffix, so minting the same name twice is fine).
 */
export async function createClientCert(o: Omit<MintOptions, 'server'> & { readonly stem?: string }): Promise<CertPair> {
  await mkdir(o.dir, { recursive: true, mode: 0o700 });
  const cnf = await ensureCnf(o.dir);
  const stem = join(o.dir, o.stem ?? `${o.name.replace(/[^A-Za-z0-9_.-]/g, '_')}-${randomBytes(4).toString('hex')}`);
  const pair = { certPath: `${stem}.crt`, keyPath: `${stem}.key` };
  const subject = `/CN=${rdn(o.name)}${o.groups.map((g) => `/O=${rdn(g)}`).join('')}`;
  await signedCert(cnf, { certPath: o.caCertPath, keyPath: o.caKeyPath }, pair, 'client', subject);
  return pair;
}

/**
 * Signs a client certificate for `name`/`groups` with the test CA and writes a kubeconfig that uses it.
 * Returns the kubeconfig path (`<dir>/<name>-<random>.kubeconfig`).
 */
export async function mintClientKubeconfig(o: MintOptions): Promise<string> {
  const pair = await createClientCert(o);
  const kubeconfigPath = pair.certPath.replace(/\.crt$/, '.kubeconfig');
  await writeFile(kubeconfigPath, await kubeconfigYaml({ server: o.server, caCertPath: o.caCertPath, user: o.name, client: pair }), { mode: 0o600 });
  return kubeconfigPath;
}

/** A kubeconfig (YAML is a superset of JSON, so this writes JSON) with the certificates embedded as data. */
export async function kubeconfigYaml(o: { server: string; caCertPath: string; user: string; client: CertPair }): Promise<string> {
  const b64 = async (p: string): Promise<string> => (await readFile(p)).toString('base64');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'local', cluster: { server: o.server, 'certificate-authority-data': await b64(o.caCertPath) } }],
    users: [{ name: o.user, user: { 'client-certificate-data': await b64(o.client.certPath), 'client-key-data': await b64(o.client.keyPath) } }],
    contexts: [{ name: o.user, context: { cluster: 'local', user: o.user } }],
    'current-context': o.user,
    preferences: {},
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}
