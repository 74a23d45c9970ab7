import type { DoctorCheck } from './doctor-types.ts';

/** How long Mautic has to answer the reachability check. */
const MAUTIC_TIMEOUT_MS = 10_000;

/**
 * Whether Mautic's API answers from this machine as Mautic does to a call without a token: 401
 * (or 403) with a JSON body. A redirect, a 404, a 5xx or a page of something else in front of
 * Mautic fails, with what to fix. It says nothing of AWS's network, but a name that does not
 * resolve, a refused connection or a bad certificate here usually fails there too. Needs no AWS.
 */
export async function mautic(baseUrl: string, fetcher: typeof fetch): Promise<DoctorCheck> {
  const url = `${baseUrl.replace(/\/+$/, '')}/api/contacts?limit=1`;
  const host = new URL(baseUrl).host;
  let response: Response;
  try {
    response = await fetcher(url, {
      redirect: 'manual',
      signal: AbortSignal.timeout(MAUTIC_TIMEOUT_MS),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const why =
      (error as Error).name === 'TimeoutError'
        ? `no answer within ${MAUTIC_TIMEOUT_MS / 1000} s`
        : (cause?.code ?? cause?.message ?? (error as Error).message);
    return {
      check: 'mautic',
      ok: false,
      detail: `${host} cannot be reached from here (${why}): check mauticBaseUrl in cdk.json, the name, the firewall and the certificate.`,
    };
  }
  const body = await response.text().catch(() => '');
  const problem = mauticProblem(host, response, body);
  if (problem !== undefined) return { check: 'mautic', ok: false, detail: problem };
  return {
    check: 'mautic',
    ok: true,
    detail: `${host} answers as Mautic's API does (HTTP ${response.status} to an API call without a token).`,
  };
}

/** What is wrong with Mautic's answer to a call without a token; undefined when nothing is. */
function mauticProblem(host: string, response: Response, body: string): string | undefined {
  const { status } = response;
  const json = isJson(body);
  if (status === 403 && json && body.includes('api_disabled'))
    return `${host} answers, but its API is disabled: enable it in Mautic's Configuration, API Settings.`;
  if ((status === 401 || status === 403) && json) return undefined;
  if (status >= 300 && status < 400)
    return `${host} redirects the API call (HTTP ${status} to ${response.headers.get('location') ?? 'no location'}): set mauticBaseUrl to the https URL Mautic answers at itself, without a redirect.`;
  if (status === 404)
    return `${host} has no Mautic API at /api/ (HTTP 404): set mauticBaseUrl to Mautic's root URL (where /api/contacts answers), and check that the API is enabled.`;
  if (status >= 500)
    return `${host} answers HTTP ${status}: Mautic, or a proxy in front of it, is failing; read its logs.`;
  if (status === 401 || status === 403)
    return `${host} answers HTTP ${status} without Mautic's JSON: something in front of Mautic (a proxy, basic authentication, a firewall) refuses the call; let /api/ through to Mautic.`;
  return `${host} answers HTTP ${status} to an API call without a token, which Mautic's API never does: check that mauticBaseUrl is Mautic's.`;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
