import { describe, expect, it } from 'vitest';
import { isMauticEmail } from '../../functions/core/email-address.ts';

/*
 * What Mautic 5.1's EmailAddress constraint answers: PHP's FILTER_VALIDATE_EMAIL (its expression
 * in ext/filter/logical_filters.c, read rule by rule) and no `^ & * %`. The cases of issue 25
 * first: the relay used to refuse the first group and accept the last.
 */
describe('isMauticEmail', () => {
  it.each([
    ['a one-letter top-level domain', 'a@example.c'],
    ['a ! in the local part', 'a!b@example.com'],
    ['a quoted local part', '"john..doe"@example.com'],
    ['a quoted local part with an escaped space', '"john\\ doe"@example.com'],
    ['a quoted local part with an escaped quote', '"a\\"b"@example.com'],
    ['an IPv4 literal', 'a@[192.168.0.1]'],
    ['an IPv6 literal', 'a@[IPv6:2001:db8::1]'],
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
    ['a leading dot', '.a@example.com'],
    ['a trailing dot in the local part', 'a.@example.com'],
    ['a single-label domain', 'a@localhost'],
    ['a top-level domain of digits', 'a@example.123'],
    ['a trailing dot in the domain', 'a@example.com.'],
    ['an unquoted space', 'a b@example.com'],
    ['an underscore in the domain', 'a@exa_mple.com'],
    ['non-ASCII', 'ünï@example.com'],
    ['no @', 'example.com'],
    ['nothing before the @', '@example.com'],
    ['two addresses', 'ann@example.com,bob@example.com'],
    ['a 65-character local part', `${'a'.repeat(65)}@example.com`],
    ['a 64-character label', `a@${'b'.repeat(64)}.com`],
    ['an unclosed quote', '"ann@example.com'],
    ['an unescaped space in a quoted local part (PHP allows none)', '"john doe"@example.com'],
    ['a bad IPv4 literal', 'a@[256.1.1.1]'],
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
