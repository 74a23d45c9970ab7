import { describe, expect, it } from 'vitest';
import { session } from './simulator-client.ts';

/*
 * Mautic 5.1's EmailAddress constraint is PHP's FILTER_VALIDATE_EMAIL and no `^ & * %`. The
 * simulator cleans the address first (FILTER_SANITIZE_EMAIL), as Mautic's own batch test shows
 * (LeadApiControllerFunctionalTest::testBatchNewEndpointDoesNotCreateDuplicates: an
 * "unsanitized" `…@email.com,` updates the contact, 200); where exactly Mautic cleans it is not
 * settled by reading its source (mautic-simulator/README.md, "Where it differs").
 */
describe('a contact’s email, as Mautic 5.1 checks it', () => {
  it('takes what PHP’s check accepts once the address is cleaned, and refuses the rest', async () => {
    const s = await session();
    // Cleaned, `a b@` is `ab@` and `"john"@` is `john@`; `"john..doe"@` is `john..doe@`.
    const accepted = [
      '"john"@example.com',
      'a@example.c',
      'a!b@example.com',
      'a@[192.168.0.1]',
      'a b@example.com',
    ];
    const refused = ['"john..doe"@example.com', 'a@e-.com', 'a%b@example.com', 'a@localhost'];

    const answer = await s.post(
      '/api/contacts/batch/new',
      [...accepted, ...refused].map((email) => ({ email })),
    );

    expect(answer.json()).toMatchObject({
      statusCodes: [...accepted.map(() => 201), ...refused.map(() => 400)],
    });
  });
});
