/**
 * TLS towards the target (issue 49): a private CA (`--ca-cert`), a client certificate
 * (`--client-cert`/`--client-key`, a key passphrase from an environment variable), no
 * verification (`--insecure`) and the name to check (`--tls-servername`). The files are read
 * once, in the main thread, into TlsMaterial (plain strings, so it travels to worker threads);
 * each thread builds one SecureContext from it, because a context per connection would parse
 * Node's ~140 root certificates on every connect. The https pool, model discovery, the metrics
 * scraper and the tokenizer's requests all take their options from here.
 *
 * A TLS failure is its own error kind (`tls`): tlsFailure names the reason and the flag that
 * fixes it. File contents never appear in a message (a key is a secret; src/jsonText.ts's rule).
 */
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { isIP } from 'node:net';
import { dirname, isAbsolute, resolve } from 'node:path';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import type { buildConnector } from 'undici';

/** The TLS options of a plan, as given: paths and names, what the manifest keeps. */
export interface TlsSettings {
  /** PEM file of CA certificates trusted besides the default roots. */
  caCert?: string;
  /** PEM client certificate (mTLS), with `clientKey`. */
  clientCert?: string;
  /** PEM private key of `clientCert`. */
  clientKey?: string;
  /** Name of the environment variable that holds `clientKey`'s passphrase (never the value). */
  clientKeyPassphraseEnv?: string;
  /** Do not verify the server's certificate (the summary and manifest say so). */
  insecure?: boolean;
  /** The name sent as SNI and checked against the certificate, in place of the URL's host. */
  servername?: string;
}

/**
 * What connections use: the files' contents, read once. Holds the key and its passphrase: it is
 * never written anywhere (the manifest keeps TlsSettings).
 */
export interface TlsMaterial {
  ca?: string;
  cert?: string;
  key?: string;
  passphrase?: string;
  insecure?: boolean;
  servername?: string;
}

/** A PEM file's first line; a file without one is not PEM (DER, a path typo, a key for a cert). */
const PEM_BEGIN = /-----BEGIN ([A-Z0-9 ]+)-----/;

/** How problems name each option: a command's flags, or a plan file's fields. */
export type TlsNames = Readonly<Record<keyof TlsSettings, string>>;

/** The flags, as `problems` name them. */
export const TLS_FLAGS = {
  caCert: '--ca-cert',
  clientCert: '--client-cert',
  clientKey: '--client-key',
  clientKeyPassphraseEnv: '--client-key-passphrase-env',
  insecure: '--insecure',
  servername: '--tls-servername',
} as const satisfies TlsNames;

/** A plan file's fields, as `problems` name them (`ca-cert: ca.pem` is how a plan writes it). */
export const TLS_PLAN_FIELDS = {
  caCert: 'ca-cert:',
  clientCert: 'client-cert:',
  clientKey: 'client-key:',
  clientKeyPassphraseEnv: 'client-key-passphrase-env:',
  insecure: 'insecure:',
  servername: 'tls-servername:',
} as const satisfies TlsNames;

/** A PEM file's text, or a problem that names the flag and the file, never what it holds. */
function readPem(
  flag: string,
  path: string,
  kinds: RegExp,
  what: string,
  problems: string[],
): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'latin1');
  } catch (err) {
    const code = (err as { code?: string }).code;
    problems.push(
      `${flag} ${path}: ${code === 'ENOENT' ? 'no such file' : `cannot read it (${code ?? (err as Error).message})`}; pass the path of a PEM file (for example ${flag} ${what === 'certificate' ? 'ca.pem' : 'client.key'})`,
    );
    return undefined;
  }
  const begin = PEM_BEGIN.exec(text);
  if (!begin || !kinds.test(begin[1])) {
    problems.push(
      `${flag} ${path}: not a PEM ${what} (no "-----BEGIN ${what === 'certificate' ? 'CERTIFICATE' : 'PRIVATE KEY'}-----" line); convert a DER file with openssl x509 -inform der -in FILE -out FILE.pem`,
    );
    return undefined;
  }
  return text;
}

/**
 * Reads the files of `settings` (each once) and checks what can be checked without the key's
 * passphrase: files that exist and hold PEM of the right kind, a certificate with its key, a
 * server name that is a name. Every problem is pushed, naming its option as `names` spells it
 * and the fix; undefined when there is one. `k8s job` ships what it returns to the pods.
 */
export function readTlsFiles(
  settings: TlsSettings,
  problems: string[],
  names: TlsNames = TLS_FLAGS,
): Omit<TlsMaterial, 'passphrase'> | undefined {
  const before = problems.length;
  const material: TlsMaterial = {};
  if (settings.caCert !== undefined) {
    material.ca = readPem(names.caCert, settings.caCert, /CERTIFICATE/, 'certificate', problems);
  }
  if ((settings.clientCert === undefined) !== (settings.clientKey === undefined)) {
    problems.push(
      settings.clientCert !== undefined
        ? `${names.clientCert} needs its private key: add ${names.clientKey} FILE (PEM), as with curl --cert FILE --key FILE`
        : `${names.clientKey} needs its certificate: add ${names.clientCert} FILE (PEM), as with curl --cert FILE --key FILE`,
    );
  }
  if (settings.clientCert !== undefined) {
    material.cert = readPem(
      names.clientCert,
      settings.clientCert,
      /CERTIFICATE/,
      'certificate',
      problems,
    );
  }
  if (settings.clientKey !== undefined) {
    material.key = readPem(names.clientKey, settings.clientKey, /PRIVATE KEY/, 'key', problems);
  }
  if (settings.clientKeyPassphraseEnv !== undefined && settings.clientKey === undefined) {
    problems.push(`${names.clientKeyPassphraseEnv} applies only with ${names.clientKey} FILE`);
  }
  if (settings.servername !== undefined) {
    if (isIP(settings.servername) !== 0 || !/^[A-Za-z0-9.*-]+$/.test(settings.servername)) {
      problems.push(
        `${names.servername} must be a DNS name, as the certificate lists it (for example ${names.servername} api.internal), not ${isIP(settings.servername) !== 0 ? 'an address: the URL gives that' : 'this text'}`,
      );
    } else material.servername = settings.servername;
  }
  if (settings.insecure) material.insecure = true;
  return problems.length > before ? undefined : material;
}

/**
 * Reads the files of `settings` into TlsMaterial, checking that Node can build a context from
 * them (a PEM that does not parse, a wrong passphrase, a key that is not the certificate's).
 * Every problem is pushed, naming its flag and the fix; undefined when there is one.
 */
export function loadTls(
  settings: TlsSettings,
  env: NodeJS.ProcessEnv,
  problems: string[],
): TlsMaterial | undefined {
  const before = problems.length;
  const material: TlsMaterial = { ...readTlsFiles(settings, problems) };
  const passEnv = settings.clientKeyPassphraseEnv;
  // Without --client-key, readTlsFiles has said that the passphrase applies to nothing.
  if (passEnv !== undefined && settings.clientKey !== undefined) {
    const value = Object.hasOwn(env, passEnv) ? env[passEnv] : undefined;
    if (value === undefined) {
      problems.push(
        `--client-key-passphrase-env names ${passEnv}, which is not set in the environment (for example export ${passEnv}=...)`,
      );
    } else material.passphrase = value;
  }
  if (problems.length > before) return undefined;
  const problem = tlsContextProblem(settings, material);
  if (problem !== undefined) {
    problems.push(problem);
    return undefined;
  }
  return material;
}

/**
 * Why Node cannot build a context from `material` (PEM that does not parse, a wrong or missing
 * passphrase, a key that is not the certificate's), naming the flag to look at; else undefined.
 */
export function tlsContextProblem(
  settings: TlsSettings,
  material: TlsMaterial,
): string | undefined {
  try {
    secureContextOf(material);
    return undefined;
  } catch (err) {
    return contextProblem(settings, err);
  }
}

/** The TLS options as a command's parsed flags name them. */
export interface TlsOptions {
  caCert?: string;
  clientCert?: string;
  clientKey?: string;
  clientKeyPassphraseEnv?: string;
  insecure?: boolean;
  tlsServername?: string;
}

/**
 * The TLS options of a command (run, sweep, probe, capacity), their files read and checked now
 * (a missing file, a key without its certificate, a wrong passphrase: exit 2 before anything is
 * sent). They apply to https:// URLs only (`urls`: the command's, the first its --url): given
 * with none, they are refused rather than silently unused. Undefined when none was given.
 */
export function readTlsOptions(
  o: TlsOptions,
  urls: readonly unknown[],
  env: NodeJS.ProcessEnv,
  problems: string[],
): (TlsSettings & { material: TlsMaterial }) | undefined {
  const settings: TlsSettings = {
    ...(o.caCert !== undefined ? { caCert: o.caCert } : {}),
    ...(o.clientCert !== undefined ? { clientCert: o.clientCert } : {}),
    ...(o.clientKey !== undefined ? { clientKey: o.clientKey } : {}),
    ...(o.clientKeyPassphraseEnv !== undefined
      ? { clientKeyPassphraseEnv: o.clientKeyPassphraseEnv }
      : {}),
    ...(o.insecure ? { insecure: true } : {}),
    ...(o.tlsServername !== undefined ? { servername: o.tlsServername } : {}),
  };
  const given = Object.keys(settings) as (keyof TlsSettings)[];
  if (given.length === 0) return undefined;
  if (!urls.some((u) => typeof u === 'string' && /^\s*https:/i.test(u))) {
    const flags = given.map((k) => TLS_FLAGS[k]).join(', ');
    const url = urls[0];
    problems.push(
      typeof url !== 'string'
        ? `${flags}: TLS options apply to an https:// server; pass its --url (the built-in simulator speaks plain http)`
        : `${flags}: TLS options apply to an https:// server, and --url is not one; use https://${url.replace(/^\s*http:\/\//i, '')} or drop them`,
    );
    return undefined;
  }
  const material = loadTls(settings, env, problems);
  return material ? { ...settings, material } : undefined;
}

/** TLS settings without the material read from their files (what a manifest may hold). */
export function tlsSettingsOf(tls: TlsSettings & { material?: TlsMaterial }): TlsSettings {
  const { material: _material, ...settings } = tls;
  return settings;
}

/** Why Node could not build a context from readable PEM files, with the flag to look at. */
function contextProblem(settings: TlsSettings, err: unknown): string {
  const message = (err as Error).message ?? '';
  const code = (err as { code?: string }).code ?? '';
  if (
    /bad decrypt|bad password|ERR_OSSL_BAD_DECRYPT|interrupted or cancelled/i.test(
      `${code} ${message}`,
    )
  ) {
    return settings.clientKeyPassphraseEnv
      ? `--client-key ${settings.clientKey}: the passphrase in ${settings.clientKeyPassphraseEnv} does not open it`
      : `--client-key ${settings.clientKey}: the key is encrypted; put its passphrase in an environment variable and name it with --client-key-passphrase-env NAME`;
  }
  if (/key values mismatch/i.test(message)) {
    return `--client-key ${settings.clientKey} is not the private key of --client-cert ${settings.clientCert}: pass the pair that belongs together`;
  }
  const files = [settings.caCert, settings.clientCert, settings.clientKey].filter(
    (f) => f !== undefined,
  );
  // OpenSSL's reasons name no file content (`no start line`, `bad base64 decode`).
  return `${files.join(', ')}: not usable PEM (${code || message}); check each with openssl x509 -noout -in FILE (a certificate) or openssl pkey -noout -in FILE (a key)`;
}

/**
 * Paths of a plan file's TLS options, relative to the plan's directory (a plan names its files
 * as they lie beside it, wherever it is run from).
 */
export function resolveTlsPaths(options: Record<string, unknown>, planPath: string): void {
  for (const key of ['caCert', 'clientCert', 'clientKey'] as const) {
    const value = options[key];
    if (typeof value === 'string' && value !== '' && !isAbsolute(value)) {
      options[key] = resolve(dirname(planPath), value);
    }
  }
}

/** The trusted roots with `ca` added: Node's own, and NODE_EXTRA_CA_CERTS's, which `ca` would drop. */
function trustedRoots(ca: string): string[] {
  const roots = [...rootCertificates];
  const extra = process.env.NODE_EXTRA_CA_CERTS;
  if (extra) {
    try {
      roots.push(readFileSync(extra, 'latin1'));
    } catch {
      // Node itself warns once about an unreadable NODE_EXTRA_CA_CERTS at start-up.
    }
  }
  roots.push(ca);
  return roots;
}

/** One context per material and thread (structured clones in a worker are new objects). */
const contexts = new WeakMap<TlsMaterial, SecureContext>();

function secureContextOf(material: TlsMaterial): SecureContext {
  let context = contexts.get(material);
  if (!context) {
    context = createSecureContext({
      ...(material.ca !== undefined ? { ca: trustedRoots(material.ca) } : {}),
      ...(material.cert !== undefined ? { cert: material.cert } : {}),
      ...(material.key !== undefined ? { key: material.key } : {}),
      ...(material.passphrase !== undefined ? { passphrase: material.passphrase } : {}),
    });
    contexts.set(material, context);
  }
  return context;
}

/** Options for tls.connect (and undici's `connect`, https.request): none without material. */
export function tlsConnectOptions(material: TlsMaterial | undefined): {
  secureContext?: SecureContext;
  rejectUnauthorized?: boolean;
  servername?: string;
} {
  if (!material) return {};
  return {
    secureContext: secureContextOf(material),
    ...(material.insecure ? { rejectUnauthorized: false } : {}),
    ...(material.servername !== undefined ? { servername: material.servername } : {}),
  };
}

/** Why a TLS connection failed. */
export type TlsReason = 'unknown_ca' | 'expired' | 'name_mismatch' | 'client_cert' | 'handshake';

const UNKNOWN_CA_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
  'CERT_CHAIN_TOO_LONG',
  'INVALID_CA',
]);
const EXPIRED_CODES = new Set(['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID']);
const NAME_CODES = new Set(['ERR_TLS_CERT_ALTNAME_INVALID', 'HOSTNAME_MISMATCH']);

const LAST_RESORT = '--insecure skips the check (the results then say so)';

/**
 * A TLS failure's reason and a message that names the fix; undefined for an error that is not
 * TLS's. `host` is the name the certificate was checked against.
 */
export function tlsFailure(
  err: Error,
  host?: string,
): { reason: TlsReason; message: string } | undefined {
  const code = (err as { code?: string }).code ?? '';
  // OpenSSL's text is `<hex>:error:<hex>:SSL routines:<function>:<reason>:<source file>...`.
  const openssl = /SSL routines:[^:]*:([^:]+)/.exec(err.message);
  const said = `${code}: ${openssl ? openssl[1] : err.message}`;
  if (UNKNOWN_CA_CODES.has(code)) {
    return {
      reason: 'unknown_ca',
      message: `TLS: the server's certificate is not signed by a CA this client trusts (${said}); pass the CA with --ca-cert FILE (or set NODE_EXTRA_CA_CERTS=FILE); ${LAST_RESORT}`,
    };
  }
  if (EXPIRED_CODES.has(code)) {
    const when = code === 'CERT_NOT_YET_VALID' ? 'is not valid yet' : 'has expired';
    return {
      reason: 'expired',
      message: `TLS: the server's certificate ${when} (${said}); renew it on the server (or check this machine's clock); ${LAST_RESORT}`,
    };
  }
  if (NAME_CODES.has(code)) {
    return {
      reason: 'name_mismatch',
      message: `TLS: the server's certificate is not for ${host ?? 'this host'} (${said}); use a URL with a name it lists, or pass --tls-servername NAME; ${LAST_RESORT}`,
    };
  }
  if (
    /CERTIFICATE_REQUIRED|ALERT_HANDSHAKE_FAILURE|ALERT_BAD_CERTIFICATE|ALERT_UNKNOWN_CA|ALERT_ACCESS_DENIED|PEER_DID_NOT_RETURN_A_CERTIFICATE/.test(
      code,
    )
  ) {
    return {
      reason: 'client_cert',
      message: `TLS: the server refused the handshake, asking for a client certificate it trusts (${said}); pass --client-cert FILE --client-key FILE`,
    };
  }
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ERR_SSL_PACKET_LENGTH_TOO_LONG') {
    return {
      reason: 'handshake',
      message: `TLS: the server does not speak TLS on this port (${said}); is the URL http:// rather than https://?`,
    };
  }
  if (code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_') || /^ERR_OSSL_/.test(code)) {
    return {
      reason: 'handshake',
      message: `TLS: the handshake failed (${said}); check the server's TLS versions and ciphers, and --client-cert if it asks for one`,
    };
  }
  return undefined;
}

/**
 * TLS failures that arrived on an established connection, by its local address and port. Under
 * TLS 1.3 a server that wants a client certificate says so only after the handshake, in an
 * alert; undici then reports the close that follows ("other side closed") and drops the alert,
 * so its connector records it here (watchTlsAlerts) and transportError looks it up (tlsAlertOf).
 * Bounded: an alert is kept until read, the oldest dropped past ALERTS_KEPT.
 */
const alerts = new Map<string, Error>();
const ALERTS_KEPT = 64;

const socketKey = (address: string | undefined, port: number | undefined) =>
  `${address ?? ''}:${port ?? ''}`;

/** Records a TLS alert that ends `socket` (only https sockets are watched). */
export function watchTlsAlerts(socket: Socket): void {
  const key = socketKey(socket.localAddress, socket.localPort);
  socket.on('error', (err) => {
    if (!tlsFailure(err)) return;
    alerts.set(key, err);
    if (alerts.size > ALERTS_KEPT) alerts.delete(alerts.keys().next().value as string);
  });
}

/** The TLS alert behind undici's socket error `err`, if one was recorded (and forgets it). */
export function tlsAlertOf(err: Error): Error | undefined {
  const info = (err as { socket?: { localAddress?: string; localPort?: number } }).socket;
  if (!info || alerts.size === 0) return undefined;
  const key = socketKey(info.localAddress, info.localPort);
  const alert = alerts.get(key);
  alerts.delete(key);
  return alert;
}

/**
 * undici's connector for an https pool (`build`: undici's buildConnector, passed in so that
 * this module loads no HTTP library), with the run's TLS options and its alerts watched.
 */
export function tlsConnector(
  build: typeof buildConnector,
  material: TlsMaterial | undefined,
): buildConnector.connector {
  const connect = build(tlsConnectOptions(material) as buildConnector.BuildOptions);
  return (options, callback) =>
    connect(options, (...args) => {
      if (args[1]) watchTlsAlerts(args[1]);
      callback(...args);
    });
}
