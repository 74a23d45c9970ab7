import * as z from './zod.ts';

/**
 * The token secret: written only by the refresher (and the `authorize` command), read by the
 * batch function. Times are ISO-8601 so an operator can read them in the console.
 */
export const tokenSecretSchema = z.object({
  accessToken: z.string().check(z.minLength(1)),
  accessTokenExpiresAt: z.iso.datetime(),
  refreshToken: z.optional(z.string().check(z.minLength(1))),
  refreshTokenExpiresAt: z.optional(z.iso.datetime()),
  obtainedWith: z.enum(['client_credentials', 'refresh_token', 'authorization_code']),
  updatedAt: z.iso.datetime(),
  /** Mautic's version as an API answer last named it (`Mautic-Version`), for `status`. */
  mauticVersion: z.optional(z.string().check(z.maxLength(64))),
});
export type TokenSecret = z.infer<typeof tokenSecretSchema>;

/**
 * The client secret: the Mautic OAuth2 credential, written by the operator with the
 * `credentials` command and read only by the refresher. `client_credentials` needs a credential
 * created by a Mautic admin; `authorization_code` one works for any user, through `authorize`.
 */
export const clientSecretSchema = z.object({
  baseUrl: z.url({ protocol: /^https?$/ }),
  clientId: z
    .string()
    .check(z.regex(/^\d+_\S+$/, 'must be Mautic\'s public client id, "<number>_<random>"')),
  clientSecret: z.string().check(z.minLength(1)),
  grantType: z.enum(['client_credentials', 'authorization_code']),
});
export type ClientSecret = z.infer<typeof clientSecretSchema>;
