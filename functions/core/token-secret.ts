import { z } from 'zod';

/**
 * The token secret: written only by the refresher, read by the batch function. Times are
 * ISO-8601 so an operator can read them in the console.
 */
export const tokenSecretSchema = z.object({
  accessToken: z.string().min(1),
  accessTokenExpiresAt: z.iso.datetime(),
  refreshToken: z.string().min(1).optional(),
  refreshTokenExpiresAt: z.iso.datetime().optional(),
  obtainedWith: z.enum(['client_credentials', 'refresh_token', 'authorization_code']),
  updatedAt: z.iso.datetime(),
});
export type TokenSecret = z.infer<typeof tokenSecretSchema>;
