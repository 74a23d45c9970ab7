import { afterEach, describe, expect, it } from 'vitest';
import { deadLettersIn, drained, post, startRelay, stopRunning } from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

// The batch function as npm start composes it, against a Mautic 7: it hears the version from
// its API answers, and links companies in bulk and sends a lost company create again by it.
describe('npm start against Mautic 7', () => {
  it('links contacts to companies in bulk, and sends a company create whose answer was lost again', async () => {
    const { sim, url, dir } = await startRelay({ mauticVersion: '7' });
    const acme = sim.seed('companies', { companyname: 'Acme' });
    const globex = sim.seed('companies', { companyname: 'Globex' });
    const emails = ['ann', 'bob', 'cy', 'di'].map((name) => `${name}@example.com`);
    const events = [
      ...emails.map((email) => ({ entity: 'contacts', action: 'create', data: { email } })),
      ...emails.map((email, index) => ({
        entity: 'contacts',
        action: 'linkCompany',
        match: { email },
        companyId: index % 2 === 0 ? acme.id : globex.id,
      })),
    ];

    expect((await post(url, JSON.stringify(events))).status).toBe(202);
    await until(
      async () =>
        (await drained(dir)) &&
        sim
          .records('contacts')
          .every((contact) => (sim.memberships(contact.id)?.companies ?? []).length > 0),
      60_000,
      () => JSON.stringify(sim.requests.map((r) => r.path)),
    );
    sim.failAfterApply({ path: '/api/companies/batch/new' }, 'garble');
    const company = { entity: 'companies', action: 'create', data: { companyname: 'Initech' } };
    expect((await post(url, JSON.stringify([company]))).status).toBe(202);
    await until(
      async () =>
        (await drained(dir)) &&
        sim.requests.filter((r) => r.path === '/api/companies/batch/new').length === 2,
      60_000,
      () => JSON.stringify(sim.requests.map((r) => `${r.path} ${r.status}`)),
    );

    const paths = sim.requests.map((r) => r.path);
    expect(
      paths.filter((path) => path === '/api/companies/batch/addcontacts').length,
    ).toBeGreaterThan(0);
    expect(paths.filter((path) => /^\/api\/companies\/\d+\/contact\//.test(path))).toEqual([]);
    expect(
      sim
        .records('contacts')
        .map((contact) => sim.memberships(contact.id)?.companies.map((c) => c.id)),
    ).toEqual([[acme.id], [globex.id], [acme.id], [globex.id]]);
    // Mautic 7 upserts the repeat: one Initech, delivered, nothing dead-lettered.
    expect(sim.records('companies').filter((c) => c.companyname === 'Initech')).toHaveLength(1);
    expect((await deadLettersIn(dir)).reasons.size).toBe(0);
  }, 150_000);
});
