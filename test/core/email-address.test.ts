import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isMauticEmail } from '../../functions/core/email-address.ts';
import { isValidEmail, sanitizeEmail } from '../../mautic-simulator/php.ts';

/*
 * What Mautic 5.1 takes as a contact's email: the address cleaned (FILTER_SANITIZE_EMAIL), then
 * PHP's FILTER_VALIDATE_EMAIL and no `^ & * %`. The cases found by the real Mautic first: the relay used to
 * refuse the first four and accept `a@e-.com`.
 */
describe('isMauticEmail', () => {
  it.each([
    ['a one-letter top-level domain', 'a@example.c'],
    ['a ! in the local part', 'a!b@example.com'],
    ['a quoted local part (the quotes are cleaned away)', '"john"@example.com'],
    ['an IPv4 literal', 'a@[192.168.0.1]'],
    ['a space, cleaned away (Mautic stores ab@example.com)', 'a b@example.com'],
    ['a trailing comma, cleaned away (as in Mautic’s own batch test)', 'ann@example.com,'],
    ['a plain address', 'ann@example.com'],
    ['plus, dots, subdomains', 'a.b+c@sub.example.co.uk'],
    ['an apostrophe', "o'neil@example.com"],
    ['upper case', 'Ann@Example.COM'],
    ['punycode', 'xn--bcher-kva@xn--bcher-kva.ch'],
    ['inner double hyphens', 'a@ex--ample.com'],
    ['a 64-character local part', `${'a'.repeat(64)}@example.com`],
  ])('accepts %s: %s', (_, address) => {
    expect(isMauticEmail(address)).toBe(true);
  });

  it.each([
    ['a label ending in a hyphen', 'a@e-.com'],
    ['a label starting with a hyphen', 'a@-e.com'],
    ['two dots in a row', 'a..b@example.com'],
    ['quotes whose dots meet once the quotes are cleaned away', '"john..doe"@example.com'],
    ['a leading dot', '.a@example.com'],
    ['a trailing dot in the local part', 'a.@example.com'],
    ['a single-label domain', 'a@localhost'],
    ['a top-level domain of digits', 'a@example.123'],
    ['a trailing dot in the domain', 'a@example.com.'],
    ['an underscore in the domain', 'a@exa_mple.com'],
    ['nothing but non-ASCII before the @', 'ü@example.com'],
    ['no @', 'example.com'],
    ['nothing before the @', '@example.com'],
    ['two addresses (the comma cleaned away, two @ left)', 'ann@example.com,bob@example.com'],
    ['a 65-character local part', `${'a'.repeat(65)}@example.com`],
    ['a 64-character label', `a@${'b'.repeat(64)}.com`],
    ['a bracket in the local part', 'a[b@example.com'],
    ['a bad IPv4 literal', 'a@[256.1.1.1]'],
    ['an IPv6 literal (cleaning drops its colons)', 'a@[IPv6:2001:db8::1]'],
    ['Mautic: ^', 'a^b@example.com'],
    ['Mautic: &', 'a&b@example.com'],
    ['Mautic: *', 'a*b@example.com'],
    ['Mautic: %', 'a%b@example.com'],
  ])('refuses %s: %s', (_, address) => {
    expect(isMauticEmail(address)).toBe(false);
  });

  it('refuses an address of more than 254 characters, though each part is within its limit', () => {
    const domain = `${Array.from({ length: 4 }, () => 'd'.repeat(60)).join('.')}.com`;
    expect(isMauticEmail(`a@${domain}`)).toBe(true);
    expect(isMauticEmail(`${'a'.repeat(20)}@${domain}`)).toBe(false);
  });
});

describe('isMauticEmail against the simulator’s copy of PHP’s own cleaning and expression', () => {
  it('agrees on generated addresses, near-misses included', () => {
    const part = fc.string({
      unit: fc.constantFrom(...'ab0.-_+!"\\ @[]:%xn'.split(''), 'IPv6:', '1.2.3.4', '::'),
      maxLength: 14,
    });
    const address = fc.oneof(
      fc.tuple(part, part).map(([local, domain]) => `${local}@${domain}`),
      fc.tuple(part, part).map(([local, domain]) => `${local}@${domain}.com`),
      fc.tuple(part, part).map(([local, literal]) => `${local || 'a'}@[${literal}]`),
    );
    fc.assert(
      fc.property(address, (text) => {
        const cleaned = sanitizeEmail(text);
        const mautic = isValidEmail(cleaned) && !/[\^&*%]/.test(cleaned);
        expect(isMauticEmail(text)).toBe(mautic);
      }),
      { numRuns: 20_000 },
    );
  });
});
